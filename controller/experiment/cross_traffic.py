"""Other traffic beside the training jobs: ``--cross-traffic tcp[:SRC-DST][,...]`` (issue 39,
"Fairness with other traffic"; docs/running.md, docs/simulate.md).

A TCP bulk flow runs from SRC to DST during every launch of the jobs (not their ``alone``
runs); in the simulated network it is the NewReno model of
:mod:`controller.experiment.simulate.tcp` over the simulated links, on Mininet a bulk socket
pair in the hosts' namespaces (:mod:`controller.experiment.cross_mininet`).  Without a pair
(``tcp``) the flow goes from the first host in name order that belongs to no job to the PS of
the first job: it then shares that PS's access link, in the direction of the gradients, with
the job's traffic.  A job pinned to another mode (the jobs file's ``mode``, e.g. PS-only)
runs beside the INA jobs in the same launch.

What is reported (:func:`fairness`, pure): each one's throughput -- a job's gradient goodput
(``goodput_Mbps``: gradient bytes synchronized per second, mean round), a TCP flow's bytes
delivered in order per second over the jobs' rounds -- and each one's throughput *alone* on
the same network (a job: its ``alone/<job>`` run; a flow: the flow by itself for as long).
Jain's index is taken over x_i = throughput_i / throughput_i alone, the fraction of what it
gets alone that each keeps when they share (Jain's T_i / O_i with O_i its throughput alone):
1 when every one keeps the same fraction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from controller.errors import ExperimentError
from controller.plan.lp_jobs import jain
from topo.models import natural_key

__all__ = ["add_cross_traffic_option", "TcpPair", "FlowFigures", "Participant", "Fairness",
           "parse_cross_traffic", "resolve_pairs", "fairness", "cross_pairs", "pairs_of", "CROSS_KEY", "PAIRS_KEY",
           "MAX_FLOWS", "goodput_Mbps", "cross_summary", "fairness_lines", "FAIRNESS_HEADER",
           "JAIN_NOTE", "fairness_rows", "print_fairness"]

CROSS_KEY = "cross_traffic"  # a launch record's key: the flows' FlowFigures (as dicts)
PAIRS_KEY = "cross_traffic_pairs"  # Settings.extra: the resolved [src, dst] of every flow
MAX_FLOWS = 16


@dataclass(frozen=True)
class TcpPair:
    """One TCP bulk flow: ``src`` sends to ``dst`` (None: the default pair, module doc)."""

    src: str | None = None
    dst: str | None = None

    @property
    def name(self) -> str:
        return f"tcp:{self.src}-{self.dst}"


@dataclass
class FlowFigures:
    """What one TCP flow did in one launch (and alone on the same network)."""

    src: str
    dst: str
    window_s: float  # the jobs' rounds: from their start to the last worker's last round
    bytes: int  # payload delivered in order in the window
    segments_sent: int = 0
    resent: int = 0
    timeouts: int = 0
    fast_retransmits: int = 0
    alone_bytes: int | None = None  # alone, over as long a window
    alone_window_s: float | None = None

    @property
    def name(self) -> str:
        return f"tcp:{self.src}-{self.dst}"

    @property
    def Mbps(self) -> float:  # noqa: N802 -- the unit's spelling
        return self.bytes * 8 / 1e6 / self.window_s if self.window_s > 0 else 0.0

    @property
    def alone_Mbps(self) -> float | None:  # noqa: N802
        if self.alone_bytes is None or not self.alone_window_s:
            return None
        return self.alone_bytes * 8 / 1e6 / self.alone_window_s


@dataclass
class Participant:
    """One row of the fairness table: a job (in the mode it ran) or a TCP flow."""

    name: str
    kind: str  # a sync mode (ina, ps_only, ...) or "tcp"
    throughput_Mbps: float | None  # noqa: N815
    alone_Mbps: float | None  # noqa: N815
    kept: float | None  # throughput / alone: Jain's x_i


@dataclass
class Fairness:
    """``results.json``'s ``cross_traffic`` for one launch (its label: the sync mode)."""

    launch: str
    participants: list[Participant]
    jain: float | None  # over ``kept`` of every participant that has one
    normalised: str = ("x_i = throughput_i / throughput_i alone on the same network (jobs: "
                       "gradient goodput; TCP: in-order payload over the jobs' rounds)")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_cross_traffic_option(g: Any) -> None:
    """``--cross-traffic`` (``run`` and ``simulate``)."""
    g.add_argument(
        "--cross-traffic", metavar="tcp[:SRC-DST],...", default=None,
        help="INA: TCP bulk flows beside the jobs in every launch but their alone runs; "
             "'tcp' alone: from the first host in no job to the first job's PS (its access "
             "link); reported with each one's throughput and Jain's index (issue 39)")


def parse_cross_traffic(text: str) -> list[TcpPair]:
    """``tcp[:SRC-DST][,tcp[:SRC-DST]...]`` as pairs (one ExperimentError per mistake)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        kind, sep, pair = part.partition(":")
        if kind != "tcp":
            raise ExperimentError(f"--cross-traffic: expected tcp or tcp:SRC-DST, got "
                                  f"{part[:40]!r}")
        if not sep:
            out.append(TcpPair())
            continue
        src, dash, dst = pair.partition("-")
        if not dash or not src or not dst:
            raise ExperimentError(f"--cross-traffic: expected tcp:SRC-DST (two hosts), got "
                                  f"{part[:40]!r}")
        if src == dst:
            raise ExperimentError(f"--cross-traffic: {part[:40]!r} sends to itself")
        out.append(TcpPair(src, dst))
    if len(out) > MAX_FLOWS:
        raise ExperimentError(f"--cross-traffic: at most {MAX_FLOWS} flows, got {len(out)}")
    return out


def resolve_pairs(pairs: Sequence[TcpPair], hosts: Sequence[str],
                  jobs: Sequence[tuple[str, Sequence[str]]]) -> list[TcpPair]:
    """The pairs with the default filled in and every host checked: ``hosts`` of the
    topology, ``jobs`` as (PS, workers) in order.  The default pair: the first host in name
    order in no job, to the first job's PS."""
    known = set(hosts)
    used = {h for ps, ws in jobs for h in (ps, *ws)}
    out = []
    for p in pairs:
        if p.src is None:
            idle = sorted((h for h in known if h not in used), key=natural_key)
            if not idle:
                raise ExperimentError("--cross-traffic tcp: every host belongs to a job; "
                                      "name the pair (tcp:SRC-DST)")
            p = TcpPair(idle[0], jobs[0][0])
        for h in (p.src, p.dst):
            if h not in known:
                raise ExperimentError(f"--cross-traffic {p.name}: {h!r} is not a host of the "
                                      "topology")
        out.append(p)
    return out


def cross_pairs(text: str, graph: Any, tenants: Sequence[Any]) -> list[list[str]]:
    """``--cross-traffic`` resolved against the topology and the run's jobs (``tenants``:
    each with ``ps`` and ``workers``), as ``[src, dst]`` lists (``Settings.extra``)."""
    from topo.models import hosts

    pairs = resolve_pairs(parse_cross_traffic(text), hosts(graph),
                          [(t.ps, t.workers) for t in tenants])
    return [[p.src, p.dst] for p in pairs]


def pairs_of(extra: dict[str, Any]) -> list[TcpPair]:
    """The resolved flows of a run (:func:`cross_pairs`, kept in ``Settings.extra``)."""
    return [TcpPair(a, b) for a, b in extra.get(PAIRS_KEY, [])]


def fairness(launch: str, jobs: dict[str, dict[str, Any]], flows: Sequence[FlowFigures]
             ) -> Fairness:
    """The fairness of one launch (pure): ``jobs`` maps a job's name to its ``kind`` (the
    mode it ran), ``goodput_Mbps`` in the launch and ``alone_Mbps`` (None: not run alone);
    ``flows`` the TCP flows of the launch."""
    parts = []
    for name, j in jobs.items():
        t, a = j.get("goodput_Mbps"), j.get("alone_Mbps")
        parts.append(Participant(name, j["kind"], t, a, t / a if t is not None and a else None))
    for f in flows:
        a = f.alone_Mbps
        parts.append(Participant(f.name, "tcp", f.Mbps, a, f.Mbps / a if a else None))
    kept = [p.kept for p in parts if p.kept is not None]
    return Fairness(launch, parts, jain(kept) if len(kept) == len(parts) and kept else None)


def goodput_Mbps(rec: dict[str, Any] | None) -> float | None:  # noqa: N802
    """A job's gradient goodput in one launch record: gradient bytes one round synchronizes
    over the mean round, Mbit/s (``compare``'s goodput, :func:`summarize_mode`)."""
    from controller.experiment.records import grad_bytes_of, round_mean

    if not rec or not rec.get("rounds"):
        return None
    g, t = grad_bytes_of(rec), round_mean(rec["rounds"], "time_s")
    return g * 8 / 1e6 / t if g and t else None


def cross_summary(launches: Sequence[str], jobs: Sequence[tuple[str, str, dict | None,
                                                                dict | None]]
                  ) -> list[dict[str, Any]]:
    """``results.json``'s ``cross_traffic`` (pure): one :class:`Fairness` per launch (a
    sync mode of ``--modes``) that ran flows.  ``jobs``: per job ``(name, the mode it keeps
    or "", its launch records by launch mode, its alone run's record or None)``."""
    out = []
    for m in launches:
        rows: dict[str, dict[str, Any]] = {}
        flows: list[FlowFigures] = []
        for name, pinned, records, alone in jobs:
            rec = (records or {}).get(m)
            if rec is None:
                continue
            if not flows and rec.get(CROSS_KEY):
                flows = [_figures(f) for f in rec[CROSS_KEY]]
            rows[name] = {"kind": pinned or m, "goodput_Mbps": goodput_Mbps(rec),
                          "alone_Mbps": goodput_Mbps(alone)}
        if flows:
            out.append(fairness(m, rows, flows).as_dict())
    return out


def _figures(d: dict[str, Any]) -> FlowFigures:
    keys = FlowFigures.__dataclass_fields__
    return FlowFigures(**{k: v for k, v in d.items() if k in keys})


def fairness_lines(results: dict[str, Any]) -> list[str]:
    """The fairness of each launch with cross traffic, a few lines for the console."""
    out = []
    for f in results.get("cross_traffic") or []:
        def mb(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"
        parts = "; ".join(f"{p['name']} ({p['kind']}) {mb(p['throughput_Mbps'])} Mbit/s, "
                          f"alone {mb(p['alone_Mbps'])}" for p in f["participants"])
        jain_text = "-" if f["jain"] is None else f"{f['jain']:.3f}"
        out.append(f"{f['launch']} beside other traffic: {parts}; Jain's index {jain_text} "
                   "(of each one's throughput / its throughput alone)")
    return out


FAIRNESS_HEADER = ["launch", "who", "kind", "Mbit/s", "alone Mbit/s", "kept", "Jain's index"]
JAIN_NOTE = ("Jain's index of kept = throughput / throughput alone on the same network (a job: "
             "gradient goodput over its mean round; a TCP flow: in-order payload over the "
             "jobs' rounds)")


def fairness_rows(results: dict[str, Any]) -> list[list[Any]]:
    """One row per launch and participant of ``results["cross_traffic"]``
    (:data:`FAIRNESS_HEADER`; the launch's Jain's index on its first row)."""
    rows = []
    for f in results.get("cross_traffic") or []:
        for i, p in enumerate(f["participants"]):
            rows.append([f["launch"] if i == 0 else "", p["name"], p["kind"],
                         p["throughput_Mbps"], p["alone_Mbps"], p["kept"],
                         f["jain"] if i == 0 else None])
    return rows


def print_fairness(results: dict[str, Any], console: Any) -> None:
    """The rows of :func:`fairness_rows` as a table on ``console`` (nothing without flows)."""
    from rich.table import Table

    rows = fairness_rows(results)
    if not rows:
        return
    table = Table(title="beside other traffic (--cross-traffic)")
    for col in FAIRNESS_HEADER:
        table.add_column(col, justify="left" if col in ("launch", "who", "kind") else "right")
    for r in rows:
        table.add_row(*(c if isinstance(c, str) else "" if c is None else f"{c:.3f}"
                        for c in r))
    console.print(table)
    console.print(JAIN_NOTE)
