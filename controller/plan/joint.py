"""Placing several jobs on shared programmable switches (docs/design.md §3.10): the joint
greedy, baseline sets, and the plan document.

Greedy (:func:`greedy_jobs`): the one loop of docs/design.md §3.4
(:func:`controller.plan.greedy.greedy_loop`) over the candidates of all jobs (minus D),
scoring LP(S ∪ {s}) (:class:`controller.plan.lp_jobs.FastJointLP`) by ``(t, next level, …)``
for max-min and by ``(Σ γ_j, levels…)`` for sum, compared lexicographically with relative
tolerance ``SCORE_TOL`` (ties by name: scanning in name order, a later candidate must be
strictly better; stop when no candidate improves).  The single-job symmetry speed-up is not
used (orbits are per job).  Its cost is one joint LP (a handful of solves) per candidate and
step: a budget sweep takes the first choices of one run (:func:`prefix`).

Baselines (:func:`joint_set`): the single-job ``top_degree``, ``random`` and ``tor_only``
rules over the switches outside D, scored by the same joint LP.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from controller.plan.greedy import greedy, greedy_loop
from controller.plan.jobs import JobEntry
from controller.plan.lp import Job, Link, LPResult, PlanError
from controller.plan.lp_fast import FastLP
from controller.plan.lp_jobs import (
    SCORE_TOL,
    FastJointLP,
    JobSet,
    JointResult,
    joint_candidates,
    make_jobset,
    solve_jobs_lp,
)
from controller.plan.placement import check_budget
from controller.plan.types import JobPlan, Plan
from topo.models import natural_key, switch_ids, switches, to_dict

__all__ = [
    "JOINT_PLANNERS",
    "JointGreedyResult",
    "greedy_jobs",
    "alone_gammas",
    "plan_jobs",
    "joint_set",
    "prefix",
    "joint_plan",
    "job_plan",
    "jobs_summary_lines",
]

JOINT_PLANNERS = ("greedy", "top_degree", "random", "tor_only")  # names of PLANNERS


def _better(a: Sequence[float], b: Sequence[float]) -> bool:
    """a > b lexicographically, entries within SCORE_TOL (relative) counting as equal."""
    for x, y in zip(a, b, strict=True):
        tol = SCORE_TOL * max(abs(x), abs(y), 1e-12)
        if x > y + tol:
            return True
        if x < y - tol:
            return False
    return False


def _first_best(scored: Mapping[str, JointResult]) -> str:
    """The winner of a greedy step: scanning the candidates in name order, a later one must
    be strictly :func:`_better` to take the lead, so ties go to the first name."""
    top: JointResult | None = None
    name = ""
    for s, res in scored.items():
        if top is None or _better(res.score, top.score):
            top, name = res, s
    return name


@dataclass
class JointGreedyResult:
    deployed: tuple[str, ...]
    result: JointResult
    history: list[tuple[str, tuple[float, ...]]] = field(default_factory=list)
    lp_solves: int = 0
    seconds: float = 0.0
    budget: int = 0  # the budget it ran for (fewer choices: it stopped, nothing improved)

    def covers(self, budget: int) -> bool:
        """Whether this run holds the greedy's plan for ``budget``: a budget it ran for, or
        any budget once it stopped early (from the same S it would stop again)."""
        return budget <= self.budget or len(self.deployed) < self.budget


def greedy_jobs(
    js: JobSet,
    budget: int,
    *,
    objective: str = "maxmin",
    solver: str = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
    progress: Callable[[int, str, tuple[float, ...]], None] | None = None,
    fast: bool = True,
    start: Sequence[str] = (),
) -> JointGreedyResult:
    """Greedy placement of docs/design.md §3.4 for several jobs, each S scored by the joint LP.

    Parameters
    ----------
    js : the jobs.
    budget : M, the most switches besides the PSs' ToRs.
    objective : ``"maxmin"`` or ``"sum"`` (:func:`solve_jobs_lp`).
    fast : score with :class:`FastJointLP` (default), else with :func:`solve_jobs_lp` (PuLP),
        the reference the fast path is tested against.
    start : the choices of a run of this greedy with a smaller budget, to continue from
        (:func:`controller.plan.greedy.greedy_loop`).

    Returns
    -------
    :class:`JointGreedyResult`: S in choice order, the last joint LP, the history
    (switch, score after) and the number of LPs solved.
    """
    t0 = time.perf_counter()
    solves = 0
    lp = FastJointLP(js, solver=solver, time_limit=time_limit, merge=merge)

    def solve(S: Sequence[str]) -> JointResult:
        nonlocal solves
        if fast:
            res = lp(S, objective=objective)
        else:
            res = solve_jobs_lp(js, S, objective=objective, solver=solver,
                                time_limit=time_limit, merge=merge)
        solves += res.lp_solves
        return res

    def step(k: int, name: str, res: JointResult) -> None:
        if progress is not None:
            progress(k, name, res.score)

    S, best, history = greedy_loop(
        solve, joint_candidates(js), budget, pick=_first_best,
        improves=lambda new, old: _better(new.score, old.score), progress=step, start=start)
    return JointGreedyResult(tuple(S), best, [(s, r.score) for s, r in history], solves,
                             time.perf_counter() - t0, budget)


def alone_gammas(js: JobSet, budget: int, *, solver: str = "auto",
                 time_limit: float | None = 60.0) -> dict[str, float]:
    """γ of every job planned alone (single-job greedy of docs/design.md §3.4, same budget and C_s,
    no other job on the network): the reference "each job alone" of a multi-job plan."""
    out = {}
    for name, job in zip(js.names, js.jobs, strict=True):
        fast = FastLP(job, solver=solver, time_limit=time_limit)
        out[name] = greedy(job, budget, solver=solver, time_limit=time_limit, lp=fast).gamma
    return out


def _deployment(job: Job, res: LPResult) -> dict[str, Any]:
    """Intervals and fractions of one job, as :func:`controller.plan.document.build_plan` lays them
    out (docs/design.md §3.5), so that :func:`controller.plan.document.chunk_schedule` reads them unchanged;
    a job with γ = 0 gets no intervals."""
    gamma = res.gamma
    intervals: dict[str, dict[str, float]] = {}
    fractions: dict[str, dict[str, float]] = {w: {} for w in job.workers}
    if gamma > 0:
        offset = 0.0
        for s in res.deployed:
            length = min(max(res.a[s] / gamma, 0.0), max(0.0, 1.0 - offset))
            intervals[s] = {"offset": offset, "length": length}
            offset += length
        fractions = {w: {s: min(res.x.get((w, s), 0.0) / gamma, intervals[s]["length"])
                         for s in res.deployed} for w in job.workers}
    return {
        "deployed": list(res.deployed) if gamma > 0 else [],
        "intervals": intervals,
        "fractions": fractions,
        "rates": {
            "x": {w: {s: res.x.get((w, s), 0.0) for s in res.deployed} for w in job.workers},
            "a": dict(res.a),
            "u": dict(res.u),
        },
    }


def plan_jobs(
    js: JobSet,
    planned: JointGreedyResult | JointResult,
    *,
    budget: int | None = None,
    specs: Sequence[JobEntry] | None = None,
    alone: Mapping[str, float] | None = None,
) -> Plan:
    """The multi-job part of a plan (docs/design.md §3.10), as a :class:`Plan` whose
    ``topology`` is empty.

    Returns
    -------
    Plan with ``objective``, ``budget``, ``deployed`` (S, choice order), ``programmable``
    (S then D), ``jobs`` (name → ``gamma``, ``weight``, ``gamma_per_weight``, ``ps``,
    ``ps_tor``, ``ps_tor_id``, ``workers``, ``worker_ids``, ``deployed`` (S_j, interval
    order), ``intervals``, ``fractions``, ``rates``, ``ps_link_load`` and, from ``specs``,
    ``model``, ``model_size``, ``rounds``; from ``alone`` (:func:`alone_gammas`),
    ``gamma_alone``), ``fairness`` (Jain's index of γ_j / w_j),
    ``min_gamma_per_weight``, ``sum_gamma``, ``loads`` (Σ_j load_j, with ``bw``), ``greedy``
    (choices and score after each) and ``solver``.
    """
    res = planned.result if isinstance(planned, JointGreedyResult) else planned
    history = planned.history if isinstance(planned, JointGreedyResult) else []
    ids = switch_ids(js.graph)
    by_name = {s.name: s for s in specs or []}
    jobs: dict[str, JobPlan] = {}
    for name, job, w, r in zip(js.names, js.jobs, js.weights, res.results, strict=True):
        entry = JobPlan(
            gamma=r.gamma, weight=w, gamma_per_weight=r.gamma / w, ps=job.ps,
            ps_tor=job.ps_tor, ps_tor_id=ids[job.ps_tor], workers=list(job.workers),
            worker_ids={x: i for i, x in enumerate(job.workers)}, **_deployment(job, r),
            ps_link_load=r.loads.get((job.ps_tor, job.ps), 0.0))
        spec = by_name.get(name)
        if spec is not None:
            entry.model, entry.model_size, entry.rounds = spec.model, spec.model_size, spec.rounds
        if alone is not None:
            entry.gamma_alone = alone.get(name)
        jobs[name] = entry
    bw: dict[Link, float] = {}
    for u, v, b in js.graph.edges(data="bw", default=1.0):
        bw[u, v] = bw[v, u] = float(b)
    loads = [{"from": u, "to": v, "load": x, "bw": bw[u, v]}
             for (u, v), x in sorted(res.loads.items(),
                                     key=lambda kv: (natural_key(kv[0][0]),
                                                     natural_key(kv[0][1])))
             if x > 1e-12]
    levels = list(res.levels.values())
    # the topology is joint_plan's to fill in (a part is also merged into a re-plan)
    return Plan(
        topology={}, switch_ids=ids, jobs=jobs, objective=res.objective, budget=budget,
        deployed=list(res.deployed), programmable=[*res.deployed, *js.tors],
        tor_sharing=js.tor_sharing, capacity=dict(js.capacity) or None,
        fairness=res.fairness, min_gamma_per_weight=min(levels),
        sum_gamma=sum(res.gammas.values()), loads=loads,
        greedy=[{"switch": s, "score": list(sc)} for s, sc in history], solver=res.solver)


def joint_set(js: JobSet, planner: str, budget: int, seed: int = 0) -> list[str]:
    """S of a baseline planner for several jobs, the single-job rules of
    :mod:`controller.plan.planners` over the switches outside D: ``top_degree`` (the M of
    largest degree, ties by name), ``random`` (M drawn with ``random.Random(seed)``, name
    order), ``tor_only`` (∅).  Switches no job can use are dropped, as for one job."""
    check_budget(budget)
    tors = set(js.tors)
    pool = [s for s in switches(js.graph) if s not in tors]
    if planner == "top_degree":
        chosen = sorted(pool, key=lambda s: (-js.graph.degree[s], natural_key(s)))[:budget]
    elif planner == "random":
        chosen = sorted(random.Random(seed).sample(pool, min(budget, len(pool))),
                        key=natural_key)
    elif planner == "tor_only":
        chosen = []
    else:
        raise PlanError(f"--planner {planner}: several jobs are placed by one of "
                        f"{', '.join(JOINT_PLANNERS)}")
    usable = set(joint_candidates(js))
    return [s for s in chosen if s in usable]


def prefix(planned: JointGreedyResult, budget: int, lp: FastJointLP,
           objective: str = "maxmin") -> JointGreedyResult:
    """The joint greedy's plan for a budget the run ``planned`` covers: its first ``budget``
    choices (the greedy is the same loop up to there; all of them if it stopped earlier)
    and their LP."""
    if not planned.covers(budget):
        raise PlanError(f"a greedy run for budget {planned.budget} has no plan for {budget}")
    S = list(planned.deployed[:budget])
    return JointGreedyResult(tuple(S), lp(S, objective=objective), planned.history[:budget],
                             planned.lp_solves, planned.seconds, budget)


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
) -> Plan:
    """The whole plan of several jobs (``plan --jobs`` writes it; ``run --jobs``
    deploys it): topology, switch ids, :func:`plan_jobs` 's part, and the placement's time.
    ``planner``: ``greedy`` (:func:`greedy_jobs`) or a baseline of :func:`joint_set`.
    ``planned``: a joint greedy run of at least ``budget`` to take the first choices of
    (:func:`prefix`) instead of running it again.
    ``alone``: also plan each job alone (``gamma_alone``, the reference of the fairness)."""
    js = make_jobset(graph, specs, capacity=capacity, result_load=result_load)
    t0 = time.perf_counter()
    lp = FastJointLP(js, solver=solver, time_limit=time_limit)
    if planner != "greedy":
        S = joint_set(js, planner, budget, seed)
        res: JointGreedyResult | JointResult = lp(S, objective=objective)
    elif planned is not None and planned.covers(budget):
        res = prefix(planned, budget, lp, objective)
    else:
        res = greedy_jobs(js, budget, objective=objective, solver=solver, time_limit=time_limit)
    t_greedy = time.perf_counter() - t0
    solo = alone_gammas(js, budget, solver=solver, time_limit=time_limit) if alone else None
    part = plan_jobs(js, res, budget=budget, specs=specs, alone=solo)
    part.topology = {"spec": spec, "name": graph.graph.get("name"), "graph": to_dict(graph)}
    part.result_load = result_load
    part.timings = {"greedy": t_greedy}
    return part


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
