"""LP relaxation with randomized rounding (the ``rounding`` planner), after GRID.

GRID (IEEE/ACM ToN 2023) places in-network aggregation by solving the placement problem with
fractional placement variables and rounding them at random.  Here the problem is the interval
LP of docs/design.md §3.3 over every candidate C (:func:`controller.plan.lp.candidates`) with a
placement variable y_s ∈ [0, 1] per candidate and the budget Σ_s y_s ≤ M.

The relaxation
    With B_e and C_s the link and switch capacities, P the ECMP fractions, T_∅ the RESULT tree
    of S = ∅ (docs/design.md §3.3), K_s = Σ_v B_{v,s} the capacity of s's links (each
    direction), In(s) = Σ_w x_{w,s} and Γ₀ = min(B_{s_d,d}, min_w Σ_v B_{w,v}) (:func:`access_bound`)::

        maximize    γ
        subject to  LP(C)'s rows of docs/design.md §3.3 (x ≤ a, Σ_s a_s ≤ γ, u_w ≥ 0, C_s,
                    C_{s_d}), with load(e) ≤ B_e where γ·T(e) is replaced by γ·T_∅(e) + r_e
                    a_s ≤ min(Γ₀, K_s)·y_s               ∀ s ∈ C   (s aggregates only if open)
                    In(s) ≤ min(K_s, C_s)·y_s            ∀ s ∈ C   (C_s only if given)
                    Σ_s y_s ≤ M,   0 ≤ y_s ≤ 1
                    r_e ≥ γ − Γ₀·(1 − y_s),  r_e ≥ 0     ∀ s ∈ C, e ∈ branch(s)   (RESULT load only)

    branch(s) is what deploying s adds to the RESULT tree: the links from s up to the first
    node of the tree of S = ∅ (:func:`result_branches`).  The tree's parents do not depend on
    the targets (:func:`controller.plan.mcast_tree.result_tree`), so tree(S) = tree(∅) ∪
    ⋃_{s ∈ S} branch(s) and γ·T_S(e) = γ·T_∅(e) + γ·[e ∈ ⋃_{s ∈ S} branch(s)]; the last term is
    the product γ·y_s, relaxed by its McCormick envelope (γ ≤ Γ₀).

Why it bounds every integral deployment
    Take S ⊆ C, |S| ≤ M, and an optimal (γ, x, a) of LP(S); put x = a = 0 off S, y = 1_S and
    r_e = γ·[e ∈ ⋃_{s ∈ S} branch(s)].  LP(C)'s rows hold (a switch with x = a = 0 changes
    nothing) and load(e) is LP(S)'s.  Off S, a_s = In(s) = 0 and r_e ≥ γ − Γ₀ ≤ 0 hold.  On S,
    a_s ≤ γ ≤ Γ₀ (γ ≤ Γ₀ in every LP(S): s_d→d carries γ, and a worker's own links carry
    Σ_s x_{w,s} + u_w = γ); a_s leaves s over its links and In(s) arrives over them (the ECMP
    fractions of a flow out of, or into, s sum to 1 over s's links), so both are ≤ K_s by the
    load rows, and In(s) ≤ C_s by the capacity row; r_e = γ.  Σ y = |S| ≤ M.  So the point is
    feasible: **γ_relax ≥ γ(S) for every S with |S| ≤ M**, with or without the RESULT term
    (with it γ is not monotone in S and the all-programmable LP is no bound).  Pruned switches
    carry no traffic (§3.3), so subsets of C are all deployments that matter.  With M = 0,
    y = 0 and it is LP(∅) exactly.

How tight
    The per-switch rows make the budget bind: without them (a_s ≤ γ·y_s alone, exact as
    α_s ≤ y_s for the interval lengths α_s = a_s/γ), y_s = α_s would spend at most Σ_s α_s ≤ 1
    of any budget and the bound would be the all-programmable γ; with them a switch's share
    of the aggregation traffic costs budget in proportion to its link capacity.  On fat-tree
    k=4 with 15 workers and M = 2 the bound is 0.6735 for an optimum of 0.5682 (all
    programmable: 1), on k=8 with M = 3 it is 0.2242 against the greedy's 0.2144.

Which fractional solution
    When several y reach γ*, a second LP keeps γ ≥ γ*·(1 − 1e-9) and minimizes Σ_s y_s, the
    least opening that reaches the bound.

Rounding
    ``roundings`` times (default 32), draw min(M, |supp y|) switches without replacement,
    each draw picking s with probability y_s / Σ_{remaining} y (``random.Random(seed)``;
    support: y_s > 1e-9), solve LP(S) for the drawn set with the planner's ``lp`` (name order,
    each distinct set once), and keep the best γ (the first drawn among ties within 1e-9
    relative).  Every rounded set is integral and within budget, so the result is a feasible
    plan, never above γ_relax.  The rounding is only as good as y: where the fractional
    optimum spreads over switches that are weak alone (k=8: six edge switches at y ≈ 1/2),
    the drawn sets are weak too.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pulp

from controller.plan.lp import (
    Job,
    LoadRows,
    LPResult,
    PlanError,
    _group_coeffs,
    add_job_rows,
    add_job_vars,
    candidates,
    result_tree_coeffs,
    solve_problem,
    switch_input_terms,
    tor_input_terms,
    worker_groups,
)
from controller.plan.mcast_tree import result_tree
from controller.plan.placement import Jobs, Placement, as_jobs, check_budget, describe
from topo.models import natural_key
from topo.paths import _fractions

__all__ = ["Relaxation", "relaxation", "result_branches", "rounding", "ROUNDINGS",
           "MAX_CLASS_VARIABLES"]

ROUNDINGS = 32  # fat-tree k=4, M = 2, 3 (10 seeds): mean within 2 % of the best of 64
SUPPORT_EPS = 1e-9  # y below this is solver noise, not a switch the relaxation uses
STAGE_SLACK = 1e-9  # the second stage keeps γ ≥ γ*·(1 − this): round-off room, as lp_jobs.FIX_SLACK
REL_TOL = 1e-9
MAX_VARIABLES = 200_000  # worker-switch pairs of the largest relaxation tried (baselines too)
# class-switch variables (twin classes × candidates, the relaxation's real size): fat-tree
# k = 8, every host a worker (16 × 79 = 1,264) solves in 0.6 s CPU; k = 12, 128 workers
# (22 × 179 = 3,938) in 4.5 s CPU (42 s wall on 2 cores shared by a dozen processes); k = 12,
# every host a worker (72 × 179 = 12,888) did not solve in its 120 s limit (17.5 s CPU) (issue
# 41): refused above this, in one line
MAX_CLASS_VARIABLES = 6_000

Link = tuple[str, str]


@dataclass
class Relaxation:
    """The LP relaxation's solution (module doc).

    Attributes
    ----------
    gamma : γ*, an upper bound on γ(S) for every deployment S with |S| ≤ ``budget``.
    y : candidate → y_s of the second stage (Σ_s y_s minimal at γ*).
    length : candidate → a_s/γ*, its interval length in that solution.
    budget : M.
    lp_solves : LPs solved (2; 1 when there is no candidate).
    seconds : wall time.
    """

    gamma: float
    y: dict[str, float]
    length: dict[str, float]
    budget: int
    lp_solves: int
    seconds: float


def access_bound(job: Job) -> float:
    """Γ₀ = min(B_{s_d,d}, min_w Σ_v B_{w,v}): γ ≤ Γ₀ in every LP(S), since s_d→d carries γ
    and each worker's own links carry Σ_s x_{w,s} + u_w = γ (hosts never forward)."""
    g = job.graph
    out = float(g.edges[job.ps_tor, job.ps].get("bw", 1.0))
    for w in job.workers:
        out = min(out, sum(float(d.get("bw", 1.0)) for _, _, d in g.edges(w, data=True)))
    return out


def result_branches(job: Job, cands: Sequence[str]) -> dict[str, list[Link]]:
    """branch(s) for every candidate s (module doc): the downward RESULT-tree links that
    deploying s adds to the tree of S = ∅, from the tree's parent of s up to the first node
    already on that tree (empty when s is on it)."""
    g, root = job.graph, job.ps_tor
    full = result_tree(g, root, job.workers, cands)  # parents do not depend on the targets
    parent = {child: p for p, kids in full.items() for child in kids}
    base = result_tree(g, root, job.workers, ())
    on_base = set(base) | {c for kids in base.values() for c in kids}
    out: dict[str, list[Link]] = {}
    for s in cands:
        links: list[Link] = []
        node = s
        while node not in on_base:
            links.append((parent[node], node))
            node = parent[node]
        out[s] = links
    return out


def relaxation(
    job: Job,
    budget: int,
    *,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
) -> Relaxation:
    """Solve the LP relaxation of the module doc (two LPs, PuLP).

    Parameters
    ----------
    job : the job.
    budget : M ≥ 0.
    solver, time_limit, merge : as for :func:`controller.plan.lp.solve_lp` (time per LP; twin
        workers merged exactly as there, the relaxation has the same symmetry).

    Returns
    -------
    :class:`Relaxation`.
    """
    check_budget(budget)
    t0 = time.perf_counter()
    g, sd = job.graph, job.ps_tor
    cands = candidates(job)
    gamma_max = access_bound(job)
    prob = pulp.LpProblem("ina_placement_relaxation", pulp.LpMaximize)
    v = add_job_vars(prob, job, cands, worker_groups(job, merge))
    y = {s: prob.add_variable(f"place_{i}", lowBound=0, upBound=1)
         for i, s in enumerate(cands)}
    load: LoadRows = {}

    def add(coeffs: Iterable[tuple[Link, float]], var: pulp.LpVariable) -> None:
        for e, c in coeffs:
            row = load.setdefault(e, {})
            row[var] = row.get(var, 0.0) + c

    # load(e) with explicit u_g = γ − Σ_s x_{g,s} columns (FastLP's substitution): the paths
    # to s_d are stored once per class instead of once per (class, s), 4× faster at k = 8
    for gi, grp in enumerate(v.groups):
        u = prob.add_variable(f"u_{gi}", lowBound=0)
        add(_group_coeffs(g, grp, sd), u)
        mine = [var for (gj, _s), var in v.y.items() if gj == gi]
        prob += u + pulp.lpSum(mine) - v.gamma == 0, f"raw_{gi}"
        for s in cands:
            if (gi, s) in v.y:
                add(_group_coeffs(g, grp, s), v.y[gi, s])
    for s in cands:
        add(_fractions(g, s, sd), v.a[s])
    add(_fractions(g, sd, job.ps), v.gamma)
    if job.result_load:  # γ·T_∅ plus the relaxed branches, not γ·T_C
        add(result_tree_coeffs(job, ()), v.gamma)
        r: dict[Link, pulp.LpVariable] = {}
        for i, (s, links) in enumerate(result_branches(job, cands).items()):
            for e in links:
                if e not in r:
                    r[e] = prob.add_variable(f"branch_{len(r)}", lowBound=0)
                    load.setdefault(e, {})[r[e]] = 1.0
                prob += r[e] - v.gamma - gamma_max * y[s] >= -gamma_max, \
                    f"branch_{i}_{e[0]}_{e[1]}"
    for e, row in load.items():
        terms = [(var, c) for var, c in row.items() if abs(c) > 1e-12]
        if terms:
            bw = float(g.edges[e].get("bw", 1.0))
            prob += pulp.LpAffineExpression(terms) <= bw, f"load_{e[0]}_{e[1]}"
    add_job_rows(prob, v)  # x ≤ a, Σ a ≤ γ (and Σ_s x_{w,s} ≤ γ, implied by u_g ≥ 0)
    for i, s in enumerate(cands):
        k = sum(float(d.get("bw", 1.0)) for _, _, d in g.edges(s, data=True))
        prob += v.a[s] - min(gamma_max, k) * y[s] <= 0, f"open_{i}"
        terms = switch_input_terms(v, s)
        if terms:
            k_in = min(k, job.capacity.get(s, k))
            prob += pulp.LpAffineExpression([*terms, (y[s], -k_in)]) <= 0, f"share_{i}"
    if sd in job.capacity:
        prob += pulp.LpAffineExpression(tor_input_terms(v)) <= job.capacity[sd], "cap_tor"
    if cands:
        prob += pulp.lpSum(y.values()) <= budget, "budget"
    solves = 0

    def run(objective: pulp.LpAffineExpression | pulp.LpVariable, sense: int) -> None:
        nonlocal solves
        prob.sense = sense
        prob.setObjective(objective)
        solves += 1
        try:
            solve_problem(prob, solver, time_limit, [f"all {len(cands)} candidates"])
        except PlanError as exc:
            raise PlanError(f"LP relaxation (budget {budget}): {exc}") from None

    def val(var: pulp.LpVariable) -> float:
        return max(0.0, float(var.value() or 0.0))

    run(v.gamma, pulp.LpMaximize)
    gamma = val(v.gamma)
    if cands:
        prob += v.gamma >= gamma * (1 - STAGE_SLACK), "gamma_star"
        run(pulp.lpSum(y.values()), pulp.LpMinimize)
    return Relaxation(gamma, {s: val(y[s]) for s in cands},
                      {s: val(v.a[s]) / gamma if gamma > 0 else 0.0 for s in cands}, budget,
                      solves, time.perf_counter() - t0)


def _draw(rng: random.Random, weights: dict[str, float], m: int) -> list[str]:
    """m names without replacement, each draw ∝ weight among those left; name order."""
    left = dict(weights)
    out: list[str] = []
    for _ in range(min(m, len(left))):
        names = list(left)
        name = rng.choices(names, weights=[left[s] for s in names])[0]
        out.append(name)
        del left[name]
    return sorted(out, key=natural_key)


@describe(note=f"best of {ROUNDINGS} roundings, seed {{seed}}", one_job=True)
def rounding(
    jobs: Job | Jobs,
    budget: int,
    *,
    lp: Callable[..., LPResult] | None = None,
    seed: int = 0,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    roundings: int = ROUNDINGS,
    max_variables: int = MAX_VARIABLES,
    max_class_variables: int = MAX_CLASS_VARIABLES,
) -> Placement:
    """LP relaxation + randomized rounding, best of ``roundings`` (module doc).

    Parameters
    ----------
    jobs : one job (the relaxation is the one-job LP's: ``--jobs`` refuses this planner).
    budget : M.
    lp : the LP(S) solver for the rounded sets (default :func:`controller.plan.lp.solve_lp`).
    seed : seed of the rounding's ``random.Random``.
    solver, time_limit : for the relaxation and ``lp`` (time per LP).
    roundings : N ≥ 1, how many rounded sets to draw.
    max_variables : refuse (one :class:`PlanError`) a relaxation with more worker-switch
        variables than this (it is as large as the all-programmable LP).
    max_class_variables : refuse one with more class-switch variables (twin classes ×
        candidates, :data:`MAX_CLASS_VARIABLES`): past it the relaxation does not solve
        within a minute, so ``plan``'s baselines table would stall on it.

    Returns
    -------
    :class:`controller.plan.placement.Placement`: the best rounded S (name order), its γ and
    LP(S); no history; lp_solves counts the relaxation's LPs and one per distinct set.
    """
    check_budget(budget)
    if roundings < 1:
        raise PlanError(f"roundings must be >= 1, got {roundings}")
    p = as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit)
    job, solve = p.one, p.lp
    size = len(candidates(job)) * len(job.workers)
    if size > max_variables:
        raise PlanError(f"the relaxation would have {size} worker-switch variables "
                        f"(> limit {max_variables}): as large as the all-programmable LP, "
                        "too slow to solve here")
    n_class = len(worker_groups(job)) * len(candidates(job))
    if n_class > max_class_variables:
        raise PlanError(f"the relaxation would have {n_class} class-switch variables "
                        f"(> limit {max_class_variables}): it does not solve within a minute "
                        "at this size")
    t0 = time.perf_counter()
    rel = relaxation(job, budget, solver=solver, time_limit=time_limit)
    support = {s: w for s, w in rel.y.items() if w > SUPPORT_EPS}
    rng = random.Random(seed)
    solved: dict[tuple[str, ...], LPResult] = {}
    best: LPResult | None = None
    for _ in range(roundings):
        S = tuple(_draw(rng, support, budget))
        if S not in solved:
            solved[S] = solve(job, list(S), solver=solver, time_limit=time_limit)
        res = solved[S]
        if best is None or res.gamma > best.gamma * (1 + REL_TOL):
            best = res
    assert best is not None  # roundings ≥ 1
    return Placement(tuple(best.deployed), best.gamma, best, [], rel.lp_solves + len(solved),
                     time.perf_counter() - t0)
