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

Solved two ways: :func:`solve_jobs_lp` (PuLP, the reference) and :class:`FastJointLP` (the
same LP as a matrix for highspy, what the joint greedy of :mod:`controller.plan.joint` uses;
tested equal).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx
import pulp

from controller.plan.jobs import JobEntry
from controller.plan.lp import (
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
from controller.plan.lp_fast import SOLVER_NAME, FastLP, MatrixLP, get_basis, run_highs, set_basis
from topo.models import natural_key
from topo.paths import hop_distance, reachable

__all__ = [
    "OBJECTIVES",
    "JobSet",
    "JointResult",
    "make_jobset",
    "per_job_sets",
    "joint_candidates",
    "solve_jobs_lp",
    "FastJointLP",
    "jain",
    "FIX_SLACK",
    "SCORE_TOL",
    "better_score",
]

OBJECTIVES = ("maxmin", "sum")
FIX_SLACK = 1e-9
SCORE_TOL = 1e-6  # > FIX_SLACK: two solves of one S may differ by the fixing slack


def better_score(a: Sequence[float], b: Sequence[float]) -> bool:
    """a > b lexicographically, entries within SCORE_TOL (relative) counting as equal."""
    for x, y in zip(a, b, strict=True):
        tol = SCORE_TOL * max(abs(x), abs(y), 1e-12)
        if x > y + tol:
            return True
        if x < y - tol:
            return False
    return False


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
    basis: object = field(default=None, repr=False, compare=False)  # FastJointLP.warm_start
    duals: object = field(default=None, repr=False, compare=False)  # FastJointLP.dual_hook

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


class FastJointLP:
    """:func:`solve_jobs_lp` on a matrix solved by highspy: the same LP and the same stages,
    for the joint greedy's thousands of solves.  Each job's block is
    :meth:`controller.plan.lp_fast.FastLP.block` (its per-path vectors cached across S); the
    stages change only the objective and column bounds of one ``Highs`` instance, which
    re-solves from the last basis.  ``solver="cbc"`` (or no highspy) calls
    :func:`solve_jobs_lp` itself.  ``symmetric`` (default): each job's worker groups that
    automorphisms fixing every job, S and the RESULT trees make interchangeable share one
    column, and equal load rows are kept once (:mod:`controller.plan.lp_orbits`: every
    stage's optimum unchanged; at fat-tree k = 32, 8 jobs × 128 workers a joint LP in about
    a second instead of a stage over 60 s).

    Usable as ``FastJointLP(js)(S, objective=...)``.
    """

    def __init__(self, js: JobSet, *, solver: str = "auto", time_limit: float | None = 60.0,
                 merge: bool = True, symmetric: bool = True) -> None:
        g = js.graph
        links = sorted({(u, v) for u, v in g.edges} | {(v, u) for u, v in g.edges})
        self.js = js
        self.solver = solver
        self.time_limit = time_limit
        self.merge = merge
        self.fast = [FastLP(job, merge=merge, links=links) for job in js.jobs]
        # one column per orbit of interchangeable groups (controller.plan.lp_orbits: the
        # automorphisms fix every job's PS, ToR, workers and tree, S and the capacities)
        self.symmetric = symmetric
        self._sym = None
        # warm starts (set by the joint greedy): keep the first stage's basis in each result
        # and start the first stage of the next solve from ``warm``'s (lp_fast.set_basis)
        self.warm_start = False
        self.warm: JointResult | None = None
        # the lazy joint greedy sets this to controller.plan.lazy_joint.joint_duals: called
        # on the solved first stage, its value kept in the result's ``duals``
        self.dual_hook: Callable[..., object] | None = None

    def _orbits(self, S: list[str], sets: list[list[str]]) -> list:
        """Per job, (orbit label per group, number of orbits) of its groups for the joint
        LP of S (:mod:`controller.plan.lp_orbits`: H fixes every job's d_k, s_k, W_k and
        T_k(S_k), S pointwise and the capacities, so it maps the joint LP onto itself and
        every stage's optimum is the merged stage's), or None where nothing merges."""
        if not self.symmetric:
            return [None] * len(sets)
        if self._sym is None:
            from controller.plan.lp_orbits import joint_group_orbits

            self._sym = joint_group_orbits(self.js.jobs, [f.groups for f in self.fast],
                                           self.fast[0].links, self.js.capacity)
        sym = self._sym
        if sym.n_gens == 0:
            return [None] * len(sets)
        labels, _ = sym.group_labels(sym.usable_for(S, sets))
        out: list = []
        for k in range(len(sets)):
            a, b = int(sym.offsets[k]), int(sym.offsets[k + 1])
            # no orbit crosses jobs (σ maps W_k onto W_k), and labels are numbered by first
            # group: job k's are a contiguous range
            part = labels[a:b] - labels[a] if b > a else labels[a:b]
            n_k = int(part.max()) + 1 if b > a else 0
            out.append((part, n_k) if n_k < b - a else None)
        return out

    def __call__(self, deployed: Sequence[str], *, objective: str = "maxmin",
                 allow: Mapping[str, Collection[str]] | None = None) -> JointResult:
        """The joint LP for S = ``deployed`` (:func:`solve_jobs_lp`'s arguments)."""
        js = self.js
        if self.solver == "cbc" or not self.fast[0].have_highs:
            return solve_jobs_lp(js, deployed, objective=objective, allow=allow,
                                 solver=self.solver, time_limit=self.time_limit,
                                 merge=self.merge)
        if self.solver not in ("auto", "highs"):
            raise PlanError(f"unknown solver {self.solver!r} (use highs or cbc)")
        if objective not in OBJECTIVES:
            raise PlanError(f"unknown objective {objective!r} (use {' or '.join(OBJECTIVES)})")
        import numpy as np

        t0 = time.perf_counter()
        S = list(deployed)
        sets = per_job_sets(js, S, allow)
        # orbits merged unless the lazy bound reads per-group multipliers (dual_hook); then
        # equal load rows are kept once.  A split of the switches (``allow``) merges too:
        # its keys are switches of S and PS ToRs, which H fixes pointwise, and H is checked
        # on each job's own S_j (its RESULT tree), so it still maps the LP onto itself
        merged = self._orbits(S, sets) if self.dual_hook is None else [None] * len(sets)
        mat = MatrixLP(self.fast[0].bw, dedupe=any(o is not None for o in merged))
        cols = [f.block(mat, list(Sj), k, orbits=o)
                for k, (f, Sj, o) in enumerate(zip(self.fast, sets, merged, strict=True))]
        n = len(cols)
        w = np.array(js.weights)
        t = mat.cols(1, names=[("t",)])
        relief = mat.cols(n, 0.0, 0.0, [("relief", k) for k in range(n)])
        tor_rows: dict[str, int] = {}
        for s in [*S, *js.tors]:  # shared capacity: In(s) ≤ C_s over every job on s
            if s not in js.capacity:
                continue
            parts = []
            for f, c in zip(self.fast, cols, strict=True):
                if s in c.S:
                    parts.append(f.switch_input(c, s))
                if f.job.ps_tor == s:
                    parts.append(f.tor_input(c))
            cc = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
            if len(cc):
                r = mat.rows(1, -np.inf, js.capacity[s], [("C", s)])
                tor_rows[s] = int(r[0])
                mat.put(np.full(len(cc), r[0]), cc, np.concatenate([p[1] for p in parts]))
        gam = np.array([c.gamma for c in cols], dtype=np.int64)
        # γ_k − w_k·t + w_k·r_k ≥ 0 (solve_jobs_lp's fair_k)
        fair = mat.rows(n, 0.0, np.inf, [("fair", k) for k in range(n)])
        mat.put(np.concatenate([fair, fair, fair]),
                np.concatenate([gam, np.full(n, t), np.arange(n) + relief]),
                np.concatenate([np.ones(n), -w, w]))
        h = mat.highs(np.zeros(mat.n_col), self.time_limit)
        # primal simplex: the stages only move bounds and costs, and re-solve from the last
        # basis in a few iterations (the dual simplex took 10x longer at fat-tree k = 16)
        h.setOptionValue("simplex_strategy", 4)
        all_cols = np.arange(mat.n_col, dtype=np.int32)
        solves = 0
        col = np.zeros(mat.n_col)
        basis = None
        duals = None
        if self.warm_start and self.warm is not None:
            set_basis(h, mat, self.warm.basis)

        def run(obj_cols) -> None:
            nonlocal solves, col
            cost = np.zeros(mat.n_col)
            cost[obj_cols] = 1.0
            h.changeColsCost(mat.n_col, all_cols, cost)
            solves += 1
            col = run_highs(h, S)

        def first(obj_cols) -> None:  # the first solve; its basis starts the next S's
            nonlocal basis, duals
            run(obj_cols)
            if self.warm_start:
                basis = get_basis(h, mat)
            if self.dual_hook is not None:
                cost = np.zeros(mat.n_col)
                cost[obj_cols] = 1.0
                duals = self.dual_hook(self, h, mat, cols, cost, tor_rows, t, S)

        if objective == "sum":
            first(gam)
            best = float(col[gam].sum())
            h.addRow(best * (1 - FIX_SLACK), np.inf, n, gam.astype(np.int32), np.ones(n))
        level: dict[int, float] = {}
        while len(level) < n:
            free = [k for k in range(n) if k not in level]
            h.changeColBounds(t, 0.0, np.inf)
            if not level and objective == "maxmin":
                first([t])
            else:
                run([t])
            t_star = float(col[t])
            stage = {k: float(col[gam[k]]) for k in free}
            h.changeColBounds(t, t_star * (1 - FIX_SLACK), np.inf)
            blocked = []
            for k in free:
                bound = w[k] * t_star * (1 + SCORE_TOL) + 1e-12
                if stage[k] > bound:
                    continue
                run([gam[k]])
                if col[gam[k]] <= bound:
                    blocked.append(k)
            if not blocked:  # round-off guard, as in solve_jobs_lp
                blocked = free
            for k in blocked:
                level[k] = t_star
                h.changeColBounds(int(gam[k]), w[k] * t_star * (1 - FIX_SLACK), np.inf)
                h.changeColBounds(relief + k, 0.0, np.inf)
        h.changeColBounds(t, 0.0, np.inf)
        run(gam)
        seconds = time.perf_counter() - t0
        results = tuple(f.read(col, c, SOLVER_NAME, seconds)
                        for f, c in zip(self.fast, cols, strict=True))
        return JointResult(tuple(S), objective, js.names, js.weights, results, SOLVER_NAME,
                           seconds, solves, js.graph, basis, duals)
