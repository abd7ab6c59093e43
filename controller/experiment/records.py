"""The record type every method's results share, and statistics over repeats.

Every ``run --method`` keeps per-round records with the same keys where they apply --
``time_s``, ``ps_rx_bytes``, ``busiest_link_bytes``, ``retransmissions``, ``accuracy``,
``exact`` -- under ``modes`` of its ``results.json`` (docs/design.md §8).  :class:`ModeSummary`
is one mode of one run reduced to the figures ``compare`` prints and ``--repeats`` averages:
both read mode records through :func:`summarize_mode`; ``compare`` reads each method's
document through the method's own row class, a :class:`ModeSummary` with the method's fields
(:mod:`controller.experiment.rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = ["ModeSummary", "summarize_mode", "seed_stats", "seed_summary", "format_stats",
           "repeat_stats", "STAT_FIELDS", "spread", "pace", "pace_text", "CORES_BIND", "mode_kind",
           "pace_by_kind", "pace_lines"]


@dataclass(frozen=True)
class ModeSummary:
    """One mode (or async policy, or cluster rule) of one run."""

    run: str
    method: str
    mode: str
    rounds: int
    s_per_round: float | None
    goodput_Bps: float | None
    ps_bytes_per_round: float | None
    busiest_bytes_per_round: float | None
    retransmissions: int | None
    accuracy: float | None
    exact: bool | None
    gamma_predicted: float | None = None
    gamma_measured: float | None = None


# the figures averaged over repeats (numbers; ``exact`` is counted instead)
STAT_FIELDS = ("s_per_round", "goodput_Bps", "ps_bytes_per_round", "busiest_bytes_per_round",
               "retransmissions", "accuracy")


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def round_mean(rounds: list[dict], key: str) -> float | None:
    """Mean of ``key`` over the rounds that have it (``None`` if none has)."""
    return _mean([float(r[key]) for r in rounds if r.get(key) is not None])


def grad_bytes_of(mode: dict) -> float | None:
    """Bytes of gradient one round synchronizes, where the run records it."""
    if "grad_bytes" in mode:
        return float(mode["grad_bytes"])
    if "grad_values" in mode:  # NDN: int32 values
        return 4.0 * float(mode["grad_values"])
    return None


def summarize_mode(run: str, method: str, name: str, mode: dict[str, Any],
                   gamma: dict[str, Any] | None = None) -> ModeSummary:
    """A mode record with per-round records (``mode["rounds"]``) as one summary row."""
    rounds = mode.get("rounds") or []
    t = round_mean(rounds, "time_s")
    g = grad_bytes_of(mode)
    retx = [r["retransmissions"] for r in rounds if "retransmissions" in r]
    exact = [bool(r["exact"]) for r in rounds if "exact" in r]
    gamma = gamma or {}
    return ModeSummary(
        run=run, method=method, mode=name, rounds=len(rounds), s_per_round=t,
        goodput_Bps=g / t if g and t else None,
        ps_bytes_per_round=round_mean(rounds, "ps_rx_bytes"),
        busiest_bytes_per_round=round_mean(rounds, "busiest_link_bytes"),
        retransmissions=int(sum(retx)) if retx else None,
        accuracy=rounds[-1].get("accuracy") if rounds else None,
        exact=all(exact) if exact else None,
        gamma_predicted=gamma.get("predicted"), gamma_measured=gamma.get("measured"))


def seed_stats(values: list[float | None]) -> dict[str, Any]:
    """Mean and (population) standard deviation over seeds of the values that exist; ``n`` of
    ``of`` tells how many runs had one (e.g. reached the target accuracy)."""
    vals = [float(v) for v in values if v is not None]
    return {"mean": sum(vals) / len(vals) if vals else None,
            "std": float(np.std(vals)) if len(vals) > 1 else (0.0 if vals else None),
            "n": len(vals), "of": len(values)}


def seed_summary(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """:func:`seed_stats` of every figure in ``keys`` over runs of different seeds."""
    return {k: seed_stats([r[k] for r in runs]) for k in keys}


def format_stats(stat: dict, digits: int = 3, sci: bool = False) -> str:
    """``mean±std`` of :func:`seed_stats` (``(n/of)`` when some runs had no value)."""
    if stat["mean"] is None:
        return "—"

    def f(v: float) -> str:
        return f"{v:.1e}" if sci else f"{v:.{digits}f}"
    text = f(stat["mean"])
    if stat["of"] > 1:
        text += f"±{f(stat['std'])}"
    if stat["n"] < stat["of"]:
        text += f" ({stat['n']}/{stat['of']})"
    return text


def repeat_stats(summaries: list[ModeSummary]) -> dict[str, Any]:
    """Mean ± std over the repeats of one mode, per :data:`STAT_FIELDS` figure, plus how many
    repeats were exact in every round."""
    known = {f.name for f in fields(ModeSummary)}
    out: dict[str, Any] = {k: seed_stats([getattr(s, k) for s in summaries])
                           for k in STAT_FIELDS if k in known}
    exact = [s.exact for s in summaries if s.exact is not None]
    out["exact"] = {"n": sum(exact), "of": len(exact)}
    out["repeats"] = len(summaries)
    return out


def spread(values: list[float]) -> dict[str, float | None]:
    """``min``, ``median`` and ``max`` of ``values`` (None for none): how a figure of many
    workers is shown, in place of one entry per worker."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"min": None, "median": None, "max": None}
    return {"min": min(vals), "median": float(np.median(vals)), "max": max(vals)}


CORES_BIND = 0.85
"""A mode whose processes kept at least this share of the cores busy during its rounds was
paced by the cores, not by the links (:func:`pace`)."""


def pace(mode: dict[str, Any]) -> dict[str, Any]:
    """What set a mode's pace, from its own record (pure): the cores its processes kept busy
    during the rounds (``cores``, written by the runner), and the whole machine's (other
    users' processes included, where measured), the median start skew of a round
    (how much later than the first the last worker started it), the median round time and
    the retransmissions per round; ``binding`` is ``"cores"`` when the busy cores reached
    :data:`CORES_BIND` of the machine's, ``"shared cores"`` when only the whole machine's did
    (other processes took the rest: the run may have waited for cores), ``"links"`` when
    neither did, None unknown."""
    rounds = mode.get("rounds") or []
    cores = mode.get("cores") or {}
    busy, cpus = cores.get("rounds_busy_cores"), cores.get("cpus")
    machine = cores.get("rounds_machine_busy_cores")
    skews = [r["start_skew_s"] for r in rounds if r.get("start_skew_s") is not None]
    times = [r["time_s"] for r in rounds if r.get("time_s") is not None]
    retx = [r.get("retransmissions", 0) for r in rounds]
    wall = cores.get("rounds_wall_s")  # one launch's (a merge of several jobs has none)
    # CPU seconds a round: the busy cores over the rounds' wall time, shared by its rounds
    cpu_round = busy * wall / len(rounds) if busy is not None and wall and rounds else None
    if busy is None or not cpus:
        binding = None
    elif busy >= CORES_BIND * cpus:
        binding = "cores"
    elif machine is not None and machine >= CORES_BIND * cpus:
        binding = "shared cores"  # others' processes took what ours left: either may bind
    else:
        binding = "links"
    return {
        "busy_cores": busy, "machine_busy_cores": machine, "cpus": cpus,
        "binding": binding, "cpu_s_per_round": cpu_round,
        "start_skew_s": float(np.median(skews)) if skews else None,
        "s_per_round": float(np.median(times)) if times else None,
        "retransmissions_per_round": sum(retx) / len(retx) if retx else None,
    }


def pace_text(name: str, p: dict[str, Any]) -> str:
    """One line saying what paced mode ``name`` (:func:`pace`)."""
    def f(v: float | None, spec: str) -> str:
        return "—" if v is None else format(v, spec)
    cores = (f"{f(p['busy_cores'], '.2f')} of {p['cpus']} cores busy during the rounds"
             if p.get("busy_cores") is not None else "busy cores not measured")
    if p.get("machine_busy_cores") is not None:
        cores += f" ({f(p['machine_busy_cores'], '.2f')} with the machine's other processes)"
    why = {"cores": "cores bind", "links": "links bind", None: "binding unknown",
           "shared cores": "the machine's cores were all busy (other processes too): links "
                           "or cores bind"}[p["binding"]]
    cpu = (f"{p['cpu_s_per_round']:.2f} CPU-s a round, "
           if p.get("cpu_s_per_round") is not None else "")
    return (f"{name}: {cores}, start skew {f(p['start_skew_s'], '.3f')} s of "
            f"{f(p['s_per_round'], '.3f')} s/round (medians), {cpu}"
            f"{f(p['retransmissions_per_round'], ',.1f')} retransmissions/round: {why}")


ALONE_PREFIX = "alone/"


def mode_kind(label: str) -> str:
    """The sync mode a ``modes`` label stands for: ``ina`` for ``ina`` and for a job's
    ``jA/ina`` (several jobs, docs/design.md §3.10), ``alone`` for ``alone/jA``."""
    if label.startswith(ALONE_PREFIX):
        return "alone"
    return label.split("/", 1)[1] if "/" in label else label


def pace_by_kind(modes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`pace` per sync mode, over every job that ran it: the rounds of all its jobs
    together, and the median of their launches' busy cores (the jobs of one launch share
    them): what a run of 4 jobs x 16 workers shows in a few lines."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for label, rec in modes.items():
        if isinstance(rec, dict):
            groups.setdefault(mode_kind(label), []).append(rec)
    out = {}
    for kind, recs in groups.items():
        def median(key: str, recs: list[dict[str, Any]] = recs) -> float | None:
            vals = [r["cores"][key] for r in recs
                    if (r.get("cores") or {}).get(key) is not None]
            return float(np.median(vals)) if vals else None
        cpus = next((r["cores"].get("cpus") for r in recs if r.get("cores")), None)
        merged = {"rounds": [x for r in recs for x in (r.get("rounds") or [])],
                  "cores": {"rounds_busy_cores": median("rounds_busy_cores"),
                            "rounds_machine_busy_cores": median("rounds_machine_busy_cores"),
                            "cpus": cpus}}
        if len(recs) == 1:  # one job: its launch's wall time gives the CPU a round
            merged["cores"]["rounds_wall_s"] = (recs[0].get("cores") or {}).get("rounds_wall_s")
        out[kind] = pace(merged)
    return out


def pace_lines(results: dict[str, Any]) -> list[str]:
    """What paced each sync mode of a results document (cores or links;
    :func:`pace_by_kind`), one line per mode whatever the number of jobs and workers; none
    for runs without the figures."""
    modes = {k: v for k, v in (results.get("modes") or {}).items() if isinstance(v, dict)}
    return [pace_text(kind, p) for kind, p in pace_by_kind(modes).items()
            if p["busy_cores"] is not None or p["start_skew_s"] is not None]
