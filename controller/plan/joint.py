"""Placing several jobs on shared programmable switches (docs/design.md §3.10): the plan
document of several jobs.

The placement itself is the planner table's (:data:`controller.plan.planners.PLANNERS`): every
planner takes a job set, so ``--jobs`` is placed by the same ``greedy`` (the joint greedy,
:func:`controller.plan.greedy.greedy_jobs`), ``exact``, ``top_degree``, ``random`` or
``tor_only`` as one job; a planner that places one job only (``rounding``) is refused in one
line by its own declaration.  This module scores nothing of its own: :func:`joint_plan` runs
the table's planner on the job set and :func:`plan_jobs` lays the joint LP's solution out as a
:class:`controller.plan.types.Plan` (:meth:`~controller.plan.types.Plan.build`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import networkx as nx

from controller.plan.baselines import honesty_warning
from controller.plan.greedy import JointGreedyResult, greedy, greedy_jobs, prefix
from controller.plan.jobs import JobEntry
from controller.plan.lp import PlanError
from controller.plan.lp_fast import FastLP
from controller.plan.lp_jobs import FastJointLP, JobSet, JointResult, make_jobset
from controller.plan.placement import Placement, as_jobs, limits_for
from controller.plan.planners import get_planner
from controller.plan.types import JobPart, Plan

__all__ = [
    "JointGreedyResult",
    "greedy_jobs",
    "alone_gammas",
    "plan_jobs",
    "prefix",
    "joint_plan",
    "job_plan",
    "used_only",
    "jobs_summary_lines",
]


def alone_gammas(js: JobSet, budget: int, *, solver: str = "auto",
                 time_limit: float | None = 60.0) -> dict[str, float]:
    """γ of every job planned alone (single-job greedy of docs/design.md §3.4, same budget and C_s,
    no other job on the network): the reference "each job alone" of a multi-job plan."""
    out = {}
    for name, job in zip(js.names, js.jobs, strict=True):
        fast = FastLP(job, solver=solver, time_limit=time_limit)
        out[name] = greedy(job, budget, solver=solver, time_limit=time_limit, lp=fast).gamma
    return out


BOUND_MAX_CANDIDATES = 256  # joint_plan's bound check: past this many candidates, skipped
USED = 1e-6  # an interval shorter than this (a share of the job's chunks) is not used


def used_only(js: JobSet, res: JointResult, lp: Callable[..., JointResult],
              objective: str = "maxmin") -> JointResult:
    """``res`` re-solved with every job allowed only on the switches where it aggregates
    (an interval of ``res`` longer than :data:`USED`), or ``res`` itself when nothing is
    to remove or the re-solve scores lower.

    Why: a job's S_j holds every switch of S (and, with ToR sharing, the other jobs' PS
    ToRs), and its RESULT tree must reach every switch of S_j to release slots there
    (:func:`controller.plan.mcast_tree.result_tree`), whether or not the job aggregates
    on it.  On a joint plan at k=16, 4 jobs x 64 workers, budget 0, those branches carried
    1,307 RESULTs of the other jobs into one job's PS ToR, on the link its own GRADs took
    (docs/results.md, "Defaults at scale").

    The answer is never worse: ``res``'s rates are feasible in the new LP (they are zero
    on the switches removed, and the load rows only lose RESULT-tree terms), so each
    stage of the max-min (or the sum) reaches at least what ``res`` did; the comparison
    below and the ``PlanError`` guard only protect against a solver stopped at its time
    limit.  The plan's γ and loads
    are then the LP's for exactly the trees the data plane installs."""
    allow: dict[str, set[str]] = {}
    trimmed = False
    for name, job, r in zip(js.names, js.jobs, res.results, strict=True):
        gamma = r.gamma
        for s in r.deployed:
            if s == job.ps_tor:
                continue
            allow.setdefault(s, set())
            if gamma > 0 and r.a.get(s, 0.0) / gamma > USED:
                allow[s].add(name)
            else:
                trimmed = True
    if not trimmed:
        return res
    try:
        new = lp(list(res.deployed), objective=objective, allow=allow)
    except PlanError:  # the solver stopped (time limit): keep the plan that was solved
        return res
    if objective == "sum":
        worse = sum(new.gammas.values()) < sum(res.gammas.values()) - 1e-9
    else:  # max-min: the levels, smallest first, compared lexicographically
        worse = sorted(new.levels.values()) < [x - 1e-9 for x in sorted(res.levels.values())]
    return res if worse else new


def plan_jobs(
    js: JobSet,
    planned: JointGreedyResult | JointResult | Placement,
    *,
    budget: int | None = None,
    specs: Sequence[JobEntry] | None = None,
    alone: Mapping[str, float | None] | None = None,
    spec: str | None = None,
    **rest: Any,
) -> Plan:
    """The plan of several jobs (docs/design.md §3.10) from the joint LP of their deployment
    (:meth:`controller.plan.types.Plan.build`).

    Returns
    -------
    Plan with ``objective``, ``budget``, ``deployed`` (S, choice order), ``programmable``
    (S then D), ``jobs`` (name → ``gamma``, ``weight``, ``gamma_per_weight``, ``ps``,
    ``ps_tor``, ``ps_tor_id``, ``workers``, ``worker_ids``, ``deployed`` (S_j, interval
    order), ``intervals``, ``fractions``, ``rates``, ``ps_link_load`` and, from ``specs``,
    ``model``, ``model_size``, ``rounds``; from ``alone`` (:func:`alone_gammas`),
    ``gamma_alone``), ``fairness`` (Jain's index of γ_j / w_j),
    ``min_gamma_per_weight``, ``sum_gamma``, ``loads`` (Σ_j load_j, with ``bw``), ``greedy``
    (choices and score after each), ``solver``, and ``rest`` (more fields: ``planner``,
    ``result_load``, ``timings``, a re-plan's ``switch_ids``, ``failed``, ...).
    """
    if isinstance(planned, Placement):
        res, history = planned.lp, list(planned.history)
    elif isinstance(planned, JointGreedyResult):
        res, history = planned.result, list(planned.history)
    else:
        res, history = planned, []
    by_name = {s.name: s for s in specs or []}
    parts = []
    for name, job, w, r in zip(js.names, js.jobs, js.weights, res.results, strict=True):
        extra: dict[str, Any] = {"weight": w, "gamma_per_weight": r.gamma / w}
        entry = by_name.get(name)
        if entry is not None:
            extra.update(model=entry.model, model_size=entry.model_size, rounds=entry.rounds)
        if alone is not None:
            extra["gamma_alone"] = alone.get(name)
        parts.append(JobPart(name, job, r, extra))
    return Plan.build(
        js.graph, parts, res.loads, spec=spec, objective=res.objective, budget=budget,
        deployed=list(res.deployed), programmable=[*res.deployed, *js.tors],
        tor_sharing=js.tor_sharing, capacity=dict(js.capacity) or None,
        fairness=res.fairness, min_gamma_per_weight=min(res.levels.values()),
        sum_gamma=sum(res.gammas.values()),
        greedy=[{"switch": s, "score": list(sc)} for s, sc in history], solver=res.solver,
        **rest)


def joint_plan(
    graph: nx.Graph,
    specs: Sequence[JobEntry],
    budget: int,
    *,
    objective: str = "maxmin",
    capacity: float | Mapping[str, float] | None = None,
    result_load: bool = False,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    alone: bool = True,
    spec: str | None = None,
    planner: str = "greedy",
    seed: int = 0,
    planned: JointGreedyResult | None = None,
    max_combinations: int = 2000,
) -> Plan:
    """The whole plan of several jobs (``plan --jobs`` writes it; ``run --jobs``
    deploys it): ``planner`` of the table (:func:`controller.plan.planners.get_planner`,
    refused in one line if it places one job only) on the job set, then :func:`plan_jobs`.
    ``planned``: a joint greedy run of at least ``budget`` to take the first choices of
    (:func:`prefix`) instead of running the greedy again.
    ``alone``: also plan each job alone (``gamma_alone``, the reference of the fairness)."""
    chosen = get_planner(planner, several=True)
    js = make_jobset(graph, specs, capacity=capacity, result_load=result_load)
    t0 = time.perf_counter()
    jobs = as_jobs(js, lp=FastJointLP(js, solver=solver, time_limit=time_limit),
                   solver=solver, time_limit=time_limit, objective=objective)
    placed: JointGreedyResult | Placement
    if planner == "greedy" and planned is not None and planned.covers(budget):
        placed = prefix(planned, budget, jobs.lp, objective)
    else:
        placed = chosen(jobs, budget, seed=seed, solver=solver, time_limit=time_limit,
                        **limits_for(chosen, max_combinations=max_combinations))
    t_place = time.perf_counter() - t0
    solo = alone_gammas(js, budget, solver=solver, time_limit=time_limit) if alone else None
    res = placed.result if isinstance(placed, JointGreedyResult) else placed.lp
    used = used_only(js, res, jobs.lp, objective)
    if used is not res:  # the same S; each job's rates and RESULT tree on what it uses
        placed = replace(placed, result=used) if isinstance(placed, JointGreedyResult) \
            else replace(placed, lp=used)
        res = used
    cands = jobs.candidates()
    bound = None
    # one more joint LP, only when the greedy stopped short, and only where it is small:
    # with every candidate programmable no symmetry is left to merge (fat-tree k=32, 1,272
    # candidates: 470 s and 21.7 GiB before HiGHS gave up, 2026-11-29)
    if len(res.deployed) < min(budget, len(cands)) and len(cands) <= BOUND_MAX_CANDIDATES:
        try:
            bound = jobs.value(jobs.solve(cands))
        except PlanError:  # every candidate programmable: no symmetry left to merge, and
            bound = None  # at k=32 past the LP's time limit; the check is only a warning
    warning = honesty_warning(planner, jobs.value(res), budget=budget, deployed=res.deployed,
                              candidates=cands, baselines={}, bound=bound)
    return plan_jobs(js, placed, budget=budget, specs=specs, alone=solo, spec=spec,
                     result_load=result_load, timings={"greedy": t_place}, planner=planner,
                     warning=warning)


def job_plan(plan: Plan, name: str) -> Plan:
    """One job of a :func:`joint_plan` plan, as a one-job plan with the joint plan's switch
    ids and retired ids (what :func:`controller.plan.document.chunk_schedule` and
    :func:`controller.dataplane.deploy.switch_rules` read)."""
    return plan.only(name)


def jobs_summary_lines(part: Plan) -> list[str]:
    """Human lines for ``plan --jobs``: one per job (γ, weight, the switches of S_j it
    actually uses, i.e. with a nonempty interval) and the fairness of the plan."""
    out = [f"objective {part.objective}, deployed "
           f"{{{', '.join(part.deployed)}}} (+ PS ToRs {{"
           f"{', '.join(s for s in part.programmable if s not in part.deployed)}}})"]
    width = max(len(n) for n in part.jobs)
    for name, j in part.jobs.items():
        used = [s for s in j.deployed if j.intervals[s]["length"] > 1e-9]
        alone = j.gamma_alone
        solo = f" (alone {alone:.4f})" if alone is not None else ""
        out.append(f"  {name:<{width}}  γ {j.gamma:.4f}{solo}  weight {j.weight:g}  "
                   f"γ/w {j.gamma_per_weight:.4f}  PS {j.ps}  "
                   f"aggregates on {{{', '.join(used)}}}")
    out.append(f"fairness (Jain's index of γ/w) {part.fairness:.4f}, "
               f"min γ/w {part.min_gamma_per_weight:.4f}, Σγ {part.sum_gamma:.4f}")
    return out
