"""The plan file (docs/design.md §3.5) and the chunk schedule workers derive from it.

The plan is a :class:`controller.plan.types.Plan` (one or several
:class:`~controller.plan.types.JobPlan`); its JSON form, version 2, is tabled in
docs/design.md §3.5.  :func:`write_plan` writes it and :func:`load_plan` reads it (a version-1
file of either shape too).  Per job: ``intervals`` s → ``{"offset": o_s, "length": a_s/γ}``
(consecutive from 0 in ``deployed`` order) and ``fractions`` w → s → x_{w,s}/γ.

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

from controller.files import InputFileError, non_finite, read_input_text, write_json_atomic
from controller.plan.lp import Job, LPResult, PlanError
from controller.plan.types import PLAN_VERSION, SOLO, JobPart, JobPlan, Plan
from topo.models import hosts

MAX_PLAN_BYTES = 256 * 2**20
"""Largest plan file read (a plan embeds its topology; fat-tree k=40 is a few MB)."""

__all__ = ["PLAN_VERSION", "Plan", "JobPlan", "build_plan", "chunk_schedule", "write_plan",
           "load_plan", "resolve_workers"]


def resolve_workers(graph: Any, ps: str, spec: str) -> list[str]:
    """``NAME,NAME,...``, a COUNT: the first COUNT hosts other than the PS in name order, or
    ``all``: every host but the PS."""
    spec = spec.strip()
    if spec == "all":
        return [h for h in hosts(graph) if h != ps]
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
    switch_ids: Mapping[str, int] | None = None,
    job_extra: Mapping[str, Any] | None = None,
    **rest: Any,
) -> Plan:
    """The one-job :class:`Plan` of a job and the LP result of its deployment
    (:meth:`Plan.build`); ``switch_ids`` (default: 1..n in name order), ``job_extra`` (more
    fields of the :class:`JobPlan`) and ``rest`` (more fields of the plan: ``planner``,
    ``result_load``, ``failed``, ``retired_ids``, ...) as there."""
    gamma = result.gamma
    if not gamma > 0:
        raise PlanError(f"plan has γ = {gamma}; nothing can be synchronized")
    base = {name: b.get("gamma") for name, b in (baselines or {}).items()}
    return Plan.build(
        job.graph, [JobPart(SOLO, job, result, dict(job_extra or {}))], result.loads,
        spec=spec, switch_ids=switch_ids, budget=budget, capacity=capacity,
        deployed=list(result.deployed), baselines=base,
        baseline_details={k: dict(v) for k, v in (baselines or {}).items()},
        solver=result.solver, timings=dict(timings or {}),
        greedy=[{"switch": s, "gamma": g} for s, g in (greedy_history or [])], **rest)


def chunk_schedule(plan: Plan | JobPlan, n_chunks: int, *,
                   switch_ids: Mapping[str, int] | None = None,
                   ) -> dict[str, list[tuple[int, int, int]]]:
    """Per worker, for every chunk c: ``(c, agg_id, fan_in)`` (docs/design.md §3.5; module doc).

    ``plan``: a one-job :class:`Plan` (its switch ids), or a :class:`JobPlan` with the
    plan's ``switch_ids``."""
    if not isinstance(n_chunks, int) or n_chunks < 1:
        raise PlanError(f"number of chunks must be an integer >= 1, got {n_chunks!r}")
    if isinstance(plan, Plan):
        job, ids = plan.job, switch_ids or plan.switch_ids
    elif switch_ids is None:
        raise PlanError("chunk_schedule of a JobPlan needs the plan's switch_ids")
    else:
        job, ids = plan, switch_ids
    workers = list(job.workers)
    tor_id = ids[job.ps_tor]
    fractions = job.fractions
    layout = [(s, job.intervals[s]["offset"], job.intervals[s]["length"])
              for s in job.deployed]
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


def write_plan(plan: Plan, path: str | Path) -> None:
    """Write the version-2 JSON form atomically (a crash never leaves half a plan); a plan
    holding a number standard JSON cannot (NaN, infinity) is refused, nothing written."""
    data = plan.to_json()
    found = non_finite(data)
    if found is not None:
        raise PlanError(f"{path}: the plan's {found} is not a finite number; nothing written")
    write_json_atomic(Path(path), data)


def load_plan(path: str | Path) -> Plan:
    """Read a plan file (version 2, or 1 of either shape, converted); any problem → one
    :class:`PlanError` line naming the file."""
    path = Path(path)
    try:  # a regular file of bounded size (a FIFO or a device: one line, no hang)
        data = json.loads(read_input_text(path, MAX_PLAN_BYTES, "plan file"))
    except InputFileError as exc:
        raise PlanError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path}:{exc.lineno}:{exc.colno}: bad JSON ({exc.msg})") from None
    except RecursionError:
        raise PlanError(f"{path}: JSON nested too deeply to be a plan") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise PlanError(f"{path}: bad JSON ({str(exc).split('; use')[0]})") from None
    try:
        return Plan.from_json(data)
    except PlanError as exc:
        raise PlanError(f"{path}: {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type
        raise PlanError(f"{path}: malformed plan ({exc})") from None
