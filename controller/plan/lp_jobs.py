"""The placement LP of several jobs sharing the programmable switches (docs/design.md §3.10).

Jobs j = 1..J, each with PS d_j, its ToR s_j = s_{d_j}, workers W_j (disjoint hosts) and a
weight w_j > 0.  D = {s_j} are the PSs' ToRs: they always aggregate, outside the budget, as
s_d does for one job (docs/design.md §3.1).  S (|S| ≤ M, S ∩ D = ∅) is the deployment set all jobs
share.  Job j may aggregate on

    S_j = S, then D \\ {s_j} in name order (if ``tor_sharing``), keeping only switches that
          some worker of j reaches and that reach s_j (the exact pruning of docs/design.md §3.3),

in that order (the interval layout of its plan).  Per job, the variables of docs/design.md §3.3:
γ_j, a^j_s (s ∈ S_j), x^j_{w,s} (w ∈ W_j, s ∈ S_j), u^j_w = γ_j − Σ_s x^j_{w,s}; and one more
variable t.  With load_j(e) the single-job load of docs/design.md §3.3 for job j on S_j::

    maximize    t                                   ("maxmin")   or   Σ_j γ_j   ("sum")
    subject to  t ≤ γ_j / w_j                        ∀ j          ("maxmin" only)
                x^j_{w,s} ≤ a^j_s                    ∀ j, w ∈ W_j, s ∈ S_j
                Σ_{s ∈ S_j} a^j_s ≤ γ_j              ∀ j
                Σ_s x^j_{w,s} ≤ γ_j                  ∀ j, w ∈ W_j
                Σ_j load_j(e) ≤ B_e                  ∀ directed e           (links shared)
                In(s) ≤ C_s                          ∀ s ∈ S ∪ D with C_s   (capacity shared)

    In(s) = Σ_{j : s ∈ S_j} Σ_{w ∈ W_j} x^j_{w,s}  +  Σ_{j : s_j = s} (Σ_w u^j_w + Σ_{s'} a^j_{s'})

i.e. every switch's aggregation input rate, summed over the jobs that aggregate there (as
an ordinary switch or as their s_j), is bounded by its one C_s.  With one job this is exactly
the LP of docs/design.md §3.3.

Max-min fairness (lexicographic)
    Maximizing t alone fixes min_j γ_j / w_j but leaves the other γ_j anywhere above w_j·t,
    so the solution would depend on the solver.  :func:`solve_jobs_lp` computes the
    lexicographic max-min (water-filling): maximize t over the free jobs; a free job j is
    *blocked* when max γ_j subject to every free job at ≥ w_k·t* and every fixed job at
    ≥ its level is ≤ w_j·t* (a job whose γ_j already exceeds w_j·t* in the stage solution is
    not blocked and needs no LP); blocked jobs are fixed at level t*; repeat until every job
    is fixed.  At least one job is blocked per stage (otherwise raising them all would
    raise t), so there are at most J stages.  The first stage's t* is the objective
    max min_j γ_j / w_j itself; the later stages only share out what is left over.  A final LP
    with every γ_j ≥ w_j·level_j maximizes Σ_j γ_j to read one consistent solution.
    Levels are fixed with a relative slack of ``FIX_SLACK`` so that solver round-off never
    makes a fixed level infeasible.  Stages change only variable bounds and the objective:
    the row t ≤ γ_j / w_j is written γ_j − w_j·t + w_j·r_j ≥ 0 with a relief r_j ≥ 0 bounded
    by 0 while j is free and unbounded once j is fixed (its level then a bound on γ_j).

Sum
    ``objective="sum"`` maximizes Σ_j γ_j, then (ties) the lexicographic max-min among the
    sum-optimal solutions (row Σ_j γ_j ≥ opt·(1 − FIX_SLACK)): without it the split of the
    total would again be up to the solver.  It may starve a job (γ_j = 0).

Twin merging stays exact: swapping two twins of one job is an automorphism that fixes every
other job's nodes, so it maps the joint LP onto itself (the argument of docs/design.md §3.3).

Greedy (:func:`greedy_jobs`): the one loop of docs/design.md §3.4
(:func:`controller.plan.greedy.greedy_loop`) over the candidates of all jobs (minus D),
scoring LP(S ∪ {s}) by ``(t, next level, …)`` for max-min and by ``(Σ γ_j, levels…)`` for sum,
compared lexicographically with relative tolerance ``SCORE_TOL`` (ties by name: scanning in
name order, a later candidate must be strictly better; stop when no candidate improves).  The
single-job symmetry speed-up is not used (orbits are per job).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import networkx as nx
import pulp

from controller.plan.greedy import greedy, greedy_loop
from controller.plan.jobs import JobEntry
from controller.plan.lp import (
    FastLP,
    Job,
    JobVars,
    Link,
    LoadRows,
    LPResult,
    PlanError,
    add_job_load,
    add_job_rows,
    add_job_vars,
    add_load_rows,
    candidates,
    job_solution,
    make_job,
    solve_problem,
    switch_input_terms,
    tor_input_terms,
    worker_groups,
)
from controller.plan.types import JobPlan, Plan
from topo.models import natural_key, switch_ids, to_dict
from topo.paths import hop_distance, reachable

__all__ = [
    "OBJECTIVES",
    "JobSet",
    "JointResult",
    "JointGreedyResult",
    "make_jobset",
    "per_job_sets",
    "joint_candidates",
    "solve_jobs_lp",
    "greedy_jobs",
    "jain",
    "plan_jobs",
    "jobs_summary_lines",
    "alone_gammas",
]

OBJECTIVES = ("maxmin", "sum")
FIX_SLACK = 1e-9
SCORE_TOL = 1e-6  # > FIX_SLACK: two solves of one S may differ by the fixing slack


@dataclass(frozen=True)
class JobSet:
    """Validated jobs on one graph: names, :class:`controller.plan.lp.Job` s, weights w_j, the
    shared capacities C_s, and whether a job may aggregate on another job's PS ToR."""

    graph: nx.Graph
    names: tuple[str, ...]
    jobs: tuple[Job, ...]
    weights: tuple[float, ...]
    capacity: Mapping[str, float] = field(default_factory=dict)
    tor_sharing: bool = True

    @property
    def tors(self) -> list[str]:
        """D: the PSs' ToRs, name order, each once."""
        return sorted({j.ps_tor for j in self.jobs}, key=natural_key)


def make_jobset(
    graph: nx.Graph,
    specs: Sequence[JobEntry],
    *,
    capacity: float | Mapping[str, float] | None = None,
    result_load: bool = False,
    tor_sharing: bool = True,
) -> JobSet:
    """Validate resolved jobs (:func:`controller.plan.jobs.resolve_jobs`) on ``graph``; each job's
    errors are :func:`controller.plan.lp.make_job` 's, prefixed with the job's name."""
    if not specs:
        raise PlanError("no jobs")
    jobs: list[Job] = []
    owner: dict[str, str] = {}
    for spec in specs:
        if isinstance(spec.workers, int):
            raise PlanError(f"job {spec.name!r}: workers given as a count; resolve the jobs "
                            "on the topology first")
        if not spec.weight > 0 or not math.isfinite(spec.weight):
            raise PlanError(f"job {spec.name!r}: weight must be > 0, got {spec.weight!r}")
        for h in (spec.ps, *spec.workers):
            if h in owner:
                raise PlanError(f"job {spec.name!r}: host {h!r} is already in job "
                                f"{owner[h]!r}")
            owner[h] = spec.name
        try:
            jobs.append(make_job(graph, spec.ps, spec.workers, capacity=capacity,
                                 result_load=result_load))
        except PlanError as exc:
            raise PlanError(f"job {spec.name!r}: {exc}") from None
    names = tuple(s.name for s in specs)
    if len(set(names)) != len(names):
        raise PlanError("two jobs have the same name")
    # every Job carries the same validated C_s; the joint model applies it once, shared
    return JobSet(graph, names, tuple(jobs), tuple(float(s.weight) for s in specs),
                  dict(jobs[0].capacity), tor_sharing)


def joint_candidates(js: JobSet) -> list[str]:
    """Switches worth a budget slot: a candidate of some job (:func:`controller.plan.lp.candidates`)
    that is not in D (D aggregates anyway), name order."""
    tors = set(js.tors)
    pool = {s for job in js.jobs for s in candidates(job)} - tors
    return sorted(pool, key=natural_key)


def per_job_sets(js: JobSet, deployed: Sequence[str],
                 allow: Mapping[str, Collection[str]] | None = None) -> list[list[str]]:
    """S_j for every job (module doc).  ``allow`` (switch → job names) restricts which jobs
    may aggregate on a switch (absent switches: all jobs); it models a split of the switches
    between jobs, to compare with sharing."""
    g = js.graph
    S = list(deployed)
    tors = set(js.tors)
    if len(set(S)) != len(S):
        raise PlanError("deployment set lists a switch twice")
    for s in S:
        if s not in g or g.nodes[s].get("kind") != "switch":
            raise PlanError(f"deployed node {s!r} is not a switch")
        if s in tors:
            raise PlanError(f"{s!r} is a PS's ToR; it always aggregates and is not in S")
    extra = js.tors if js.tor_sharing else []
    out: list[list[str]] = []
    for name, job in zip(js.names, js.jobs, strict=True):
        mine = []
        for s in [*S, *extra]:
            if s == job.ps_tor or s in mine:
                continue
            if allow is not None and s in allow and name not in allow[s]:
                continue
            # pruning of docs/design.md §3.3: such an s can carry no x or a of this job
            if hop_distance(g, s, job.ps_tor) is None:
                continue
            if not any(reachable(g, w, s) for w in job.workers):
                continue
            mine.append(s)
        out.append(mine)
    return out


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when all equal, 1/n when one takes all.
    All zeros count as equal (1.0)."""
    xs = [float(v) for v in values]
    sq = sum(v * v for v in xs)
    if not xs or sq <= 0:
        return 1.0
    return sum(xs) ** 2 / (len(xs) * sq)


@dataclass
class JointResult:
    """Solution of the joint LP for S: one :class:`controller.plan.lp.LPResult` per job (its
    ``deployed`` is S_j, its ``loads`` that job's own loads)."""

    deployed: tuple[str, ...]
    objective: str
    names: tuple[str, ...]
    weights: tuple[float, ...]
    results: tuple[LPResult, ...]
    solver: str
    seconds: float
    lp_solves: int
    graph: nx.Graph = field(repr=False)

    @property
    def gammas(self) -> dict[str, float]:
        return {n: r.gamma for n, r in zip(self.names, self.results, strict=True)}

    @property
    def levels(self) -> dict[str, float]:
        """γ_j / w_j."""
        return {n: r.gamma / w for n, r, w in zip(self.names, self.results, self.weights,
                                                   strict=True)}

    @property
    def fairness(self) -> float:
        """Jain's index of γ_j / w_j."""
        return jain(list(self.levels.values()))

    @property
    def score(self) -> tuple[float, ...]:
        """What the greedy maximizes (module doc)."""
        levels = tuple(sorted(self.levels.values()))
        if self.objective == "sum":
            return (sum(self.gammas.values()), *levels)
        return levels

    @cached_property
    def loads(self) -> dict[Link, float]:
        """Σ_j load_j(e) per directed link."""
        out: dict[Link, float] = {}
        for r in self.results:
            for e, v in r.loads.items():
                out[e] = out.get(e, 0.0) + v
        return out


def solve_jobs_lp(
    js: JobSet,
    deployed: Sequence[str],
    *,
    objective: str = "maxmin",
    allow: Mapping[str, Collection[str]] | None = None,
    solver: str | pulp.LpSolver = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
) -> JointResult:
    """Solve the joint LP of the module doc for the shared deployment set ``deployed`` = S.

    Parameters
    ----------
    js : the jobs (:func:`make_jobset`).
    deployed : S in choice order (no PS ToR; those aggregate anyway).
    objective : ``"maxmin"`` (lexicographic max-min of γ_j / w_j) or ``"sum"`` (Σ_j γ_j, then
        max-min among the sum-optimal solutions).
    allow : switch → names of the jobs allowed to aggregate there (default: all).
    solver, time_limit, merge : as for :func:`controller.plan.lp.solve_lp` (time limit per LP).

    Returns
    -------
    :class:`JointResult`.

    Notes
    -----
    Solves 1 + (number of stages) + (blocking tests) + 1 LPs, at most about J²/2 + 2J + 2.
    """
    if objective not in OBJECTIVES:
        raise PlanError(f"unknown objective {objective!r} (use {' or '.join(OBJECTIVES)})")
    t0 = time.perf_counter()
    g = js.graph
    sets = per_job_sets(js, deployed, allow)
    prob = pulp.LpProblem("ina_placement_jobs", pulp.LpMaximize)
    jv: list[JobVars] = []
    for k, (job, Sj) in enumerate(zip(js.jobs, sets, strict=True)):
        jv.append(add_job_vars(prob, job, Sj, worker_groups(job, merge), prefix=f"j{k}_"))
    t = prob.add_variable("t", lowBound=0)
    load: LoadRows = {}
    for v in jv:
        add_job_load(load, v)
    add_load_rows(prob, g, load)
    for k, v in enumerate(jv):
        add_job_rows(prob, v, prefix=f"j{k}_")
    # shared capacity: In(s) ≤ C_s over every job aggregating on s
    for s in [*deployed, *js.tors]:
        if s not in js.capacity:
            continue
        terms: list[tuple[pulp.LpVariable, float]] = []
        for v in jv:
            if s in v.S:
                terms += switch_input_terms(v, s)
            if v.job.ps_tor == s:
                terms += tor_input_terms(v)
        if terms:
            prob += pulp.LpAffineExpression(terms) <= js.capacity[s], f"cap_{s}"

    S = list(deployed)
    solves = 0
    name = ""

    def run(obj: pulp.LpAffineExpression | pulp.LpVariable) -> None:
        nonlocal solves, name
        prob.setObjective(obj)
        solves += 1
        name = solve_problem(prob, solver, time_limit, S)

    def gval(k: int) -> float:
        return max(0.0, float(jv[k].gamma.value() or 0.0))

    n = len(jv)
    w = js.weights
    # Stages change only bounds and the objective, never rows (PuLP 4 drops row removal):
    # fair_k is γ_k − w_k·t + w_k·r_k ≥ 0 with the relief r_k held at 0 while job k is free
    # and unbounded once it is fixed (then γ_k's lower bound holds its level instead).
    relief = [prob.add_variable(f"relief_{k}", lowBound=0, upBound=0) for k in range(n)]
    for k, v in enumerate(jv):
        prob += v.gamma - w[k] * t + w[k] * relief[k] >= 0, f"fair_{k}"
    if objective == "sum":
        total = pulp.lpSum(v.gamma for v in jv)
        run(total)
        best = sum(gval(k) for k in range(n))
        prob += total >= best * (1 - FIX_SLACK), "sum_floor"
    level: dict[int, float] = {}
    while len(level) < n:
        free = [k for k in range(n) if k not in level]
        t.lowBound = 0
        run(t)
        t_star = max(0.0, float(t.value() or 0.0))
        stage = {k: gval(k) for k in free}
        t.lowBound = t_star * (1 - FIX_SLACK)  # free jobs keep ≥ w_k·t* while one is pushed
        blocked = []
        for k in free:
            bound = w[k] * t_star * (1 + SCORE_TOL) + 1e-12
            if stage[k] > bound:
                continue  # already above its share in the stage solution: not blocked
            run(jv[k].gamma)
            if gval(k) <= bound:
                blocked.append(k)
        if not blocked:  # cannot happen in exact arithmetic; guard against round-off loops
            blocked = free
        for k in blocked:
            level[k] = t_star
            jv[k].gamma.lowBound = w[k] * t_star * (1 - FIX_SLACK)
            relief[k].upBound = None
    t.lowBound = 0
    run(pulp.lpSum(v.gamma for v in jv))  # one consistent solution at the fixed levels
    seconds = time.perf_counter() - t0
    results = tuple(job_solution(v, name, seconds) for v in jv)
    return JointResult(tuple(S), objective, js.names, js.weights, results, name, seconds,
                       solves, g)


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


def greedy_jobs(
    js: JobSet,
    budget: int,
    *,
    objective: str = "maxmin",
    solver: str = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
    progress: Callable[[int, str, tuple[float, ...]], None] | None = None,
) -> JointGreedyResult:
    """Greedy placement of docs/design.md §3.4 for several jobs, each S scored by the joint LP.

    Parameters
    ----------
    js : the jobs.
    budget : M, the most switches besides the PSs' ToRs.
    objective : ``"maxmin"`` or ``"sum"`` (:func:`solve_jobs_lp`).

    Returns
    -------
    :class:`JointGreedyResult`: S in choice order, the last joint LP, the history
    (switch, score after) and the number of LPs solved.
    """
    t0 = time.perf_counter()
    solves = 0

    def solve(S: Sequence[str]) -> JointResult:
        nonlocal solves
        res = solve_jobs_lp(js, S, objective=objective, solver=solver,
                            time_limit=time_limit, merge=merge)
        solves += res.lp_solves
        return res

    def step(k: int, name: str, res: JointResult) -> None:
        if progress is not None:
            progress(k, name, res.score)

    S, best, history = greedy_loop(
        solve, joint_candidates(js), budget, pick=_first_best,
        improves=lambda new, old: _better(new.score, old.score), progress=step)
    return JointGreedyResult(tuple(S), best, [(s, r.score) for s, r in history], solves,
                             time.perf_counter() - t0)


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
) -> Plan:
    """The whole plan of several jobs (``plan --jobs`` writes it; ``run --jobs``
    deploys it): topology, switch ids, :func:`plan_jobs` 's part, and the greedy's time.
    ``alone``: also plan each job alone (``gamma_alone``, the reference of the fairness)."""
    js = make_jobset(graph, specs, capacity=capacity, result_load=result_load)
    t0 = time.perf_counter()
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
