"""The plan file (docs/design.md §3.5) and the chunk schedule workers derive from it.

Plan (JSON object; everything workers and switches need, self-contained):

* ``topology``: ``{"spec": str | null, "graph": <topology file format>}`` (so a plan can be
  re-read without the original spec: :func:`topo.models.load_json` accepts a plan file);
* ``switch_ids``: name → id (1..n in name order; 0 is the PS); ``ps``, ``ps_tor``,
  ``ps_tor_id``, ``workers`` (name order), ``worker_ids`` (w → index in ``workers``: its bit
  in the bitmap), ``routing`` (``"ecmp-per-hop-even"``: :mod:`topo.paths`), ``budget``,
  ``capacity``;
* ``gamma``: γ of the plan; ``deployed``: S in interval order;
* ``intervals``: s → ``{"offset": o_s, "length": a_s/γ}`` (consecutive from 0 in ``deployed``
  order); ``fractions``: w → s → x_{w,s}/γ; ``rates``: the raw LP values x, a, u;
* ``loads``: directed link loads ``[{"from", "to", "load", "bw"}]``; ``ps_link_load``;
* ``baselines``: name → γ (None when skipped) and ``baseline_details``;
* ``solver``, ``timings`` (seconds), ``greedy`` (choices and γ after each).

Chunk schedule (pure): chunk c of n has position p = (c + 0.5)/n.  If p ∈ I_s and
p − o_s < x_{w,s}/γ, worker w sends chunk c to s with ``agg_id = id(s)`` and
``fan_in = |{w' : p − o_s < x_{w',s}/γ}|``; otherwise it sends it to s_d with
``agg_id = id(s_d)`` and ``fan_in = |W|`` (s_d completes on the full worker mask).
Since x_{w,s} ≤ a_s, ``p − o_s < x_{w,s}/γ`` already implies p ∈ I_s for p ≥ o_s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.files import write_json_atomic
from controller.plan.lp import Job, LPResult, PlanError
from topo.models import hosts, natural_key, switch_ids, to_dict

__all__ = ["build_plan", "chunk_schedule", "write_plan", "load_plan", "resolve_workers"]

PLAN_VERSION = 1


def resolve_workers(graph: Any, ps: str, spec: str) -> list[str]:
    """``NAME,NAME,...`` or a COUNT: the first COUNT hosts other than the PS in name order."""
    spec = spec.strip()
    if spec.isdigit():
        # str.isdigit() also accepts "²" and other digits int() refuses, and int() refuses
        # numbers of more than 4,300 digits: check before converting
        if not spec.isascii() or len(spec) > 9:
            raise PlanError(f"--workers {spec[:20]!r}{'…' if len(spec) > 20 else ''}: "
                            "a count is a whole number of at most 9 digits")
        count = int(spec)
        pool = [h for h in hosts(graph) if h != ps]
        if count < 1:
            raise PlanError("--workers count must be >= 1")
        if count > len(pool):
            raise PlanError(f"--workers {count}: the topology has only {len(pool)} hosts "
                            "besides the PS")
        return pool[:count]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise PlanError("--workers is empty")
    return names


def build_plan(
    job: Job,
    result: LPResult,
    *,
    budget: int,
    baselines: Mapping[str, Mapping[str, Any]] | None = None,
    spec: str | None = None,
    timings: Mapping[str, float] | None = None,
    greedy_history: list[tuple[str, float]] | None = None,
    capacity: float | None = None,
) -> dict[str, Any]:
    """Assemble the plan dict from a job and the LP result of its deployment."""
    gamma = result.gamma
    if not gamma > 0:
        raise PlanError(f"plan has γ = {gamma}; nothing can be synchronized")
    ids = switch_ids(job.graph)
    intervals: dict[str, dict[str, float]] = {}
    offset = 0.0
    for s in result.deployed:
        length = min(max(result.a[s] / gamma, 0.0), max(0.0, 1.0 - offset))
        intervals[s] = {"offset": offset, "length": length}
        offset += length
    fractions = {
        w: {s: min(result.x.get((w, s), 0.0) / gamma, intervals[s]["length"])
            for s in result.deployed}
        for w in job.workers
    }
    bw = {}
    for u, v, b in job.graph.edges(data="bw", default=1.0):
        bw[u, v] = bw[v, u] = float(b)
    loads = [
        {"from": u, "to": v, "load": load, "bw": bw[u, v]}
        for (u, v), load in sorted(
            result.loads.items(), key=lambda kv: (natural_key(kv[0][0]), natural_key(kv[0][1]))
        )
        if load > 1e-12
    ]
    base = {name: b.get("gamma") for name, b in (baselines or {}).items()}
    return {
        "version": PLAN_VERSION,
        "topology": {"spec": spec, "name": job.graph.graph.get("name"),
                     "graph": to_dict(job.graph)},
        "switch_ids": ids,
        "ps": job.ps,
        "ps_tor": job.ps_tor,
        "ps_tor_id": ids[job.ps_tor],
        "workers": list(job.workers),
        "worker_ids": {w: i for i, w in enumerate(job.workers)},
        "routing": "ecmp-per-hop-even",
        "budget": budget,
        "capacity": capacity,
        "gamma": gamma,
        "deployed": list(result.deployed),
        "intervals": intervals,
        "fractions": fractions,
        "rates": {
            "x": {w: {s: result.x.get((w, s), 0.0) for s in result.deployed}
                  for w in job.workers},
            "a": dict(result.a),
            "u": dict(result.u),
        },
        "loads": loads,
        "ps_link_load": result.loads.get((job.ps_tor, job.ps), 0.0),
        "baselines": base,
        "baseline_details": {k: dict(v) for k, v in (baselines or {}).items()},
        "solver": result.solver,
        "timings": dict(timings or {}),
        "greedy": [{"switch": s, "gamma": g} for s, g in (greedy_history or [])],
    }


def chunk_schedule(plan: Mapping[str, Any], n_chunks: int) -> dict[str, list[tuple[int, int, int]]]:
    """Per worker, for every chunk c: ``(c, agg_id, fan_in)`` (docs/design.md §3.5; module doc)."""
    if not isinstance(n_chunks, int) or n_chunks < 1:
        raise PlanError(f"number of chunks must be an integer >= 1, got {n_chunks!r}")
    workers = list(plan["workers"])
    ids = plan["switch_ids"]
    tor_id = ids[plan["ps_tor"]]
    fractions = plan["fractions"]
    layout = [(s, plan["intervals"][s]["offset"], plan["intervals"][s]["length"])
              for s in plan["deployed"]]
    out: dict[str, list[tuple[int, int, int]]] = {w: [] for w in workers}
    for c in range(n_chunks):
        p = (c + 0.5) / n_chunks
        owner = next(((s, o) for s, o, ln in layout if o <= p < o + ln), None)
        senders: list[str] = []
        if owner is not None:
            s, o = owner
            senders = [w for w in workers if p - o < fractions[w].get(s, 0.0)]
        chosen = set(senders)
        for w in workers:
            if w in chosen:
                out[w].append((c, ids[owner[0]], len(senders)))
            else:
                out[w].append((c, tor_id, len(workers)))
    return out


def write_plan(plan: Mapping[str, Any], path: str | Path) -> None:
    """Write atomically (a crash never leaves half a plan)."""
    write_json_atomic(Path(path), plan)


_REQUIRED = ("switch_ids", "ps", "ps_tor", "workers", "gamma", "deployed", "intervals",
             "fractions")


def load_plan(path: str | Path) -> dict[str, Any]:
    """Read a plan file; any problem → :class:`PlanError` naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path}:{exc.lineno}:{exc.colno}: bad JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: a plan must be a JSON object")
    for key in _REQUIRED:
        if key not in data:
            raise PlanError(f"{path}: plan lacks {key!r}")
    for s in data["deployed"]:
        if s not in data["intervals"] or s not in data["switch_ids"]:
            raise PlanError(f"{path}: deployed switch {s!r} has no interval or id")
    for w in data["workers"]:
        if w not in data["fractions"]:
            raise PlanError(f"{path}: worker {w!r} has no fractions")
    return data
