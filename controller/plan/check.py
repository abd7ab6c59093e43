"""A plan read back is checked for meaning (issue 43 item 4): what the rule installer and the
workers' schedules rely on, against the topology.

:func:`check_plan` raises one :class:`PlanError` naming the field (``load_plan`` adds the
file) for the first of:

* ``switch_ids``: names that are switches of the graph, integer ids (not booleans), unique,
  in 1..65535 (``agg_id`` is 16 bits) and, with a graph, at most its switches plus the
  retired ids; ``retired_ids``: unique integers in the same range, none still in use;
  ``failed``: switches no longer in ``switch_ids``;
* per job: the PS a host of the graph and not another job's; ``ps_tor`` a switch linked to
  the PS, ``ps_tor_id`` its id; ``workers`` unique hosts of the graph, not the PS, in no
  other job; ``worker_ids`` every worker numbered 0..n-1 once; ``gamma`` finite and >= 0,
  ``weight`` finite and > 0;
* per job: ``deployed`` unique switches with ids, not the PS's ToR; ``intervals`` exactly
  the deployed switches (none without one, none left over), each offset and length finite,
  length >= 0, consecutive from 0 in ``deployed`` order and ending at most at 1 (the rest of
  [0, 1) goes to the PS's ToR, so together they partition [0, 1)); ``fractions`` every
  worker, each share a finite number in [0, 1] and at most its switch's interval, a worker's
  shares summing to at most 1 (the rest goes to the PS's ToR, so with it they sum to 1);
* the plan's ``deployed`` unique switches with ids; one job's is its job's set, several
  jobs' contain every job's set but the PSs' ToRs; ``gamma``-like totals finite.

The graph is the plan's own ``topology`` (when it has one) or the network the caller
deploys on.  Pure, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

from controller.plan.lp import PlanError

__all__ = ["check_plan", "MAX_SWITCH_ID", "EPS"]

MAX_SWITCH_ID = 2**16 - 1  # agg_id is 16 bits; 0 is the PS
EPS = 1e-6  # round-off a plan written by this controller stays within


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _names(v: Any, what: str) -> list[str]:
    """A list of unique strings, else one PlanError naming ``what``."""
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise PlanError(f"{what} must be a list of names")
    seen: set[str] = set()
    for x in v:
        if x in seen:
            raise PlanError(f"{what} lists {x!r} twice")
        seen.add(x)
    return v


def _kind(graph: nx.Graph | None, name: str) -> str | None:
    if graph is None:
        return None
    return graph.nodes[name].get("kind") if name in graph else "absent"


def _check_ids(plan: Any, graph: nx.Graph | None) -> dict[str, int]:
    ids = plan.switch_ids
    if not isinstance(ids, dict):
        raise PlanError("switch_ids must be an object of switch → id")
    retired = plan.retired_ids
    if not isinstance(retired, list) or not all(_int(i) for i in retired):
        raise PlanError(f"retired_ids must be a list of integers, got {str(retired)[:40]}")
    top = MAX_SWITCH_ID
    if graph is not None:
        top = min(top, sum(1 for _, k in graph.nodes(data="kind") if k == "switch")
                  + len(retired))
    seen: dict[int, str] = {}
    for name, i in ids.items():
        if _kind(graph, name) not in (None, "switch"):
            raise PlanError(f"switch_ids: {name!r} is not a switch of the topology")
        if not _int(i) or not 1 <= i <= top:
            raise PlanError(f"switch_ids[{name!r}] must be an integer in 1..{top}, got {i!r}")
        if i in seen:
            raise PlanError(f"switch_ids: {seen[i]!r} and {name!r} have the same id {i}")
        seen[i] = name
    if len(set(retired)) != len(retired):
        raise PlanError("retired_ids lists an id twice")
    for i in retired:
        if not 1 <= i <= MAX_SWITCH_ID or i in seen:
            raise PlanError(f"retired_ids: {i} is out of range or still the id of "
                            f"{seen.get(i, 'no switch')!r}")
    for s in _names(plan.failed, "failed"):
        if s in ids:
            raise PlanError(f"failed switch {s!r} still has an id in switch_ids")
    return ids


def _check_job(name: str, job: Any, ids: dict[str, int], graph: nx.Graph | None,
               owner: dict[str, str]) -> None:
    where = f"jobs[{name!r}]"
    if not isinstance(job.ps, str) or _kind(graph, job.ps) not in (None, "host"):
        raise PlanError(f"{where}.ps {str(job.ps)[:40]!r} is not a host of the topology")
    if not isinstance(job.ps_tor, str) or job.ps_tor not in ids:
        raise PlanError(f"{where}.ps_tor {str(job.ps_tor)[:40]!r} has no switch id")
    if graph is not None and not graph.has_edge(job.ps, job.ps_tor):
        raise PlanError(f"{where}.ps_tor {job.ps_tor!r} is not the switch of the PS {job.ps!r}")
    if job.ps_tor_id != ids[job.ps_tor]:
        raise PlanError(f"{where}.ps_tor_id {job.ps_tor_id!r} is not switch_ids"
                        f"[{job.ps_tor!r}] = {ids[job.ps_tor]}")
    workers = _names(job.workers, f"{where}.workers")
    for h in (job.ps, *workers):
        if h in owner:
            raise PlanError(f"{where}: host {h!r} is also in job {owner[h]!r}")
        owner[h] = name
        if _kind(graph, h) not in (None, "host"):
            raise PlanError(f"{where}.workers: {h!r} is not a host of the topology")
    wid = job.worker_ids
    if (not isinstance(wid, dict) or set(wid) != set(workers)
            or sorted(v if _int(v) else -1 for v in wid.values()) != list(range(len(workers)))):
        raise PlanError(f"{where}.worker_ids must number every worker 0..{len(workers) - 1} "
                        "once")
    if not _num(job.gamma) or job.gamma < 0:
        raise PlanError(f"{where}.gamma must be a finite number >= 0, got {job.gamma!r}")
    if not _num(job.weight) or job.weight <= 0:
        raise PlanError(f"{where}.weight must be a finite number > 0, got {job.weight!r}")
    deployed = _names(job.deployed, f"{where}.deployed")
    for s in deployed:
        if s not in ids or s == job.ps_tor:
            raise PlanError(f"{where}.deployed: {s!r} has no switch id or is the PS's ToR")
    _check_intervals(where, job, deployed, workers)


def _check_intervals(where: str, job: Any, deployed: list[str], workers: list[str]) -> None:
    iv = job.intervals
    if not isinstance(iv, dict) or set(iv) != set(deployed):
        extra = sorted(set(iv) - set(deployed)) if isinstance(iv, dict) else []
        raise PlanError(f"{where}.intervals must name exactly the deployed switches"
                        + (f" ({extra[0]!r} is not deployed)" if extra else ""))
    end = 0.0
    for s in deployed:
        box = iv[s]
        off = box.get("offset") if isinstance(box, dict) else None
        ln = box.get("length") if isinstance(box, dict) else None
        if not (_num(off) and _num(ln)) or ln < 0:
            raise PlanError(f"{where}.intervals[{s!r}] needs a finite offset and a length "
                            f">= 0, got {str(box)[:60]}")
        if abs(off - end) > EPS:
            raise PlanError(f"{where}.intervals[{s!r}] starts at {off:g}, not at {end:g}: "
                            "the intervals must follow each other from 0 (no gap, no overlap)")
        end = off + ln
    if end > 1 + EPS:
        raise PlanError(f"{where}.intervals end at {end:g}, past 1")
    fr = job.fractions
    if not isinstance(fr, dict) or set(fr) != set(workers):
        raise PlanError(f"{where}.fractions must have one entry per worker")
    for w in workers:
        share = fr[w]
        if not isinstance(share, dict):
            raise PlanError(f"{where}.fractions[{w!r}] must be an object of switch → share")
        for s, x in share.items():
            if s not in iv:
                raise PlanError(f"{where}.fractions[{w!r}] names {s!r}, which is not deployed")
            if not _num(x) or not -EPS <= x <= iv[s]["length"] + EPS:
                raise PlanError(f"{where}.fractions[{w!r}][{s!r}] must be in [0, "
                                f"{iv[s]['length']:g}] (its interval), got {x!r}")
        if sum(share.values()) > 1 + EPS:
            raise PlanError(f"{where}.fractions[{w!r}] sum to {sum(share.values()):g} > 1")


def check_plan(plan: Any, graph: nx.Graph | None = None) -> None:
    """The checks of the module doc on a :class:`controller.plan.types.Plan` (typed ``Any``:
    this module sits below ``types``); ``graph``: the network the plan is for (None: the
    checks that need none)."""
    ids = _check_ids(plan, graph)
    owner: dict[str, str] = {}
    tors = set()
    for name, job in plan.jobs.items():
        _check_job(name, job, ids, graph, owner)
        tors.add(job.ps_tor)
    top = _names(plan.deployed, "deployed")
    for s in top:
        if s not in ids:
            raise PlanError(f"deployed: {s!r} has no switch id")
    if plan.budget is not None and (not _int(plan.budget) or plan.budget < 0):
        raise PlanError(f"budget must be an integer >= 0, got {plan.budget!r}")
    for field in ("fairness", "min_gamma_per_weight", "sum_gamma"):
        v = getattr(plan, field)
        if v is not None and (not _num(v) or v < 0):
            raise PlanError(f"{field} must be a finite number >= 0, got {v!r}")
    if not plan.several:
        job = next(iter(plan.jobs.values()))
        if set(top) != set(job.deployed):
            raise PlanError(f"deployed {top} is not the job's deployed {job.deployed}")
        return
    for name, job in plan.jobs.items():
        stray = [s for s in job.deployed if s not in set(top) | tors]
        if stray:
            raise PlanError(f"jobs[{name!r}].deployed: {stray[0]!r} is not in the plan's "
                            "deployed set nor a PS's ToR")
