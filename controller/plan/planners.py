"""Placement algorithms by name (docs/design.md §3.4a): the ``PLANNERS`` table, the only one.

Every planner has the signature of :class:`controller.plan.placement.Planner`::

    planner(jobs, budget, *, lp=None, seed=0, solver="auto", time_limit=60.0) -> Placement

``jobs`` is a job set (:class:`controller.plan.placement.Jobs`: one job is a set of one;
a :class:`~controller.plan.lp.Job` or a :class:`~controller.plan.lp_jobs.JobSet` is accepted
too), and the planner returns S (at most M = ``budget`` switches besides the PSs' ToRs, in
interval order) with the γ its LP gives.  ``plan``, ``run``, ``simulate``, with or without
``--jobs``, and the baselines table (:mod:`controller.plan.baselines`) all read this table;
a planner that cannot place several jobs declares it (``describe(one_job=True)``,
:mod:`controller.plan.placement`) and ``--jobs`` refuses it in one line.

=============  ==================================================================================
``greedy``     greedy + LP of docs/design.md §3.4 (:func:`controller.plan.greedy.greedy`), default;
               several jobs: the joint greedy of §3.10
``exact``      the best subset of min(M, |C|) candidates by brute force (:func:`exact`),
               refused above ``max_combinations`` LPs
``top_degree`` the M switches outside D of largest degree, ties by name
``random``     M switches outside D drawn with ``random.Random(seed)``
``tor_only``   S = ∅: only the PSs' ToRs aggregate
``rounding``   LP relaxation + randomized rounding, best of N (:mod:`controller.plan.rounding`);
               one job only
``best``       the best of every other planner but ``exact``, improved by local search (swap,
               add and drop moves, :mod:`controller.plan.local_search`)
``tor_all``    the ToRs of the workers' racks, fullest first, at most M (ATP's placement,
               :mod:`controller.plan.tor_all`)
=============  ==================================================================================

``best`` never loses to a baseline of the table (``exact`` aside): it runs the same planners
with the same arguments (seed, LP, limits) as the baselines table, keeps the best of them
(ties to the first in table order) and accepts only strictly better moves from there, so its
γ (or joint score) is ≥ each of theirs.  The baselines table reuses its runs
(:attr:`Placement.starts`).

``top_degree`` and ``random`` choose among all switches outside D (the PSs' ToRs), as the
baselines always did; a chosen switch that cannot carry traffic (not a candidate,
docs/design.md §3.3) is dropped before the LP, since it changes nothing (or the LP would
refuse it).

``exact`` relies on γ being monotone in S (a new switch with x = a = 0 keeps a solution
feasible), which holds without the RESULT term; with ``job.result_load`` a deployed switch
also adds RESULT tree links, so a smaller set can be better and ``exact`` is the best set of
exactly min(M, |C|) switches, not necessarily the best of at most M.

Adding a planner: one module with one function of the signature above, written on
:class:`~controller.plan.placement.Jobs` (it then works with ``--jobs`` too), and one line
``"name": function`` in :data:`PLANNERS` (docs/walkthrough-planner.md).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from itertools import combinations
from typing import Any

from controller.plan.greedy import greedy
from controller.plan.local_search import local_search
from controller.plan.lp import Job, LPResult, PlanError, solve_lp
from controller.plan.placement import (
    JobsLike,
    Placement,
    Planner,
    as_jobs,
    check_budget,
    check_several,
    describe,
    limits_for,
    places_several,
)
from controller.plan.rounding import MAX_VARIABLES, rounding
from controller.plan.tor_all import tor_all
from topo.models import natural_key

__all__ = [
    "PLANNERS",
    "DEFAULT_PLANNER",
    "get_planner",
    "several_planners",
    "exact",
    "top_degree",
    "random_planner",
    "tor_only",
    "random_set",
    "top_degree_set",
    "exact_optimum",
    "best",
]

def random_set(jobs: JobsLike, budget: int, seed: int = 0) -> list[str]:
    """M switches outside D sampled uniformly with the given seed, kept in name order."""
    pool = as_jobs(jobs).others()
    return sorted(random.Random(seed).sample(pool, min(budget, len(pool))), key=natural_key)


def top_degree_set(jobs: JobsLike, budget: int) -> list[str]:
    """The M switches outside D of largest degree, ties by name."""
    p = as_jobs(jobs)
    return sorted(p.others(), key=lambda s: (-p.graph.degree[s], natural_key(s)))[:budget]


@describe(note="brute force")
def exact(jobs: JobsLike, budget: int, *, lp: Callable[..., Any] | None = None, seed: int = 0,
          solver: str = "auto", time_limit: float | None = 60.0,
          max_combinations: int = 2000, max_seconds: float | None = None) -> Placement:
    """The ``exact`` planner: the best subset of min(M, |C|) candidates by brute force
    (one job: largest γ; several: the joint LP's score), ties to the first subset in name
    order; refused (:class:`PlanError`) above ``max_combinations`` subsets (``seed``
    unused).  ``max_seconds`` (the baselines table's time left): refused, in one line,
    when the first LP's time × the number of subsets exceeds it, or when it is spent."""
    check_budget(budget)
    p = as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit)
    t0 = time.perf_counter()
    cands = p.candidates()
    m = min(budget, len(cands))
    n_comb = math.comb(len(cands), m)
    if n_comb > max_combinations:
        raise PlanError(f"exact optimum needs {n_comb} LPs (> limit {max_combinations}); "
                        "use a smaller topology or raise the limit")
    best: Any = None
    for i, combo in enumerate(combinations(cands, m)):
        res = p.solve(combo)
        if best is None or p.better(res, best):
            best = res
        spent = time.perf_counter() - t0
        if max_seconds is not None and i + 1 < n_comb:
            if i == 0 and spent * n_comb > max_seconds:
                raise PlanError(f"exact optimum needs {n_comb} LPs, about "
                                f"{spent * n_comb:.0f} s at the first one's {spent:.2f} s "
                                f"(> {max_seconds:.0f} s of time budget left)")
            if spent > max_seconds:
                raise PlanError(f"exact optimum: the time budget ({max_seconds:.0f} s) was "
                                f"spent after {i + 1} of {n_comb} LPs")
    assert best is not None  # m = 0 gives one (empty) combination
    return Placement(tuple(best.deployed), p.value(best), best, [], n_comb,
                     time.perf_counter() - t0)


def exact_optimum(job: Job, budget: int, *, solver: str = "auto",
                  time_limit: float | None = 60.0, max_combinations: int = 2000,
                  lp: Callable[..., LPResult] = solve_lp) -> LPResult:
    """LP(S) of the ``exact`` planner's S for one job."""
    return exact(job, budget, lp=lp, solver=solver, time_limit=time_limit,
                 max_combinations=max_combinations).lp


@describe(note="largest degree")
def top_degree(jobs: JobsLike, budget: int, *, lp: Callable[..., Any] | None = None,
               seed: int = 0, solver: str = "auto",
               time_limit: float | None = 60.0) -> Placement:
    """The ``top_degree`` planner: the LP of :func:`top_degree_set` (``seed`` unused)."""
    check_budget(budget)
    t0 = time.perf_counter()
    p = as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit)
    return p.place(p.usable(top_degree_set(p, budget)), started=t0)


@describe(note="seed {seed}")
def random_planner(jobs: JobsLike, budget: int, *, lp: Callable[..., Any] | None = None,
                   seed: int = 0, solver: str = "auto",
                   time_limit: float | None = 60.0) -> Placement:
    """The ``random`` planner: the LP of :func:`random_set` with ``seed``."""
    check_budget(budget)
    t0 = time.perf_counter()
    p = as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit)
    return p.place(p.usable(random_set(p, budget, seed)), started=t0)


@describe(note="S = {}")
def tor_only(jobs: JobsLike, budget: int, *, lp: Callable[..., Any] | None = None,
             seed: int = 0, solver: str = "auto",
             time_limit: float | None = 60.0) -> Placement:
    """The ``tor_only`` planner: S = ∅ whatever the budget (only the PSs' ToRs aggregate)."""
    check_budget(budget)
    return as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit).place([])


DEFAULT_START = "greedy"  # the one planner whose refusal ``best`` passes on


@describe(note="best of the table + local search")
def best(jobs: JobsLike, budget: int, *, lp: Callable[..., Any] | None = None, seed: int = 0,
         solver: str = "auto", time_limit: float | None = 60.0,
         max_variables: int = MAX_VARIABLES, max_lps: int = 400,
         search_seconds: float = 30.0) -> Placement:
    """The ``best`` planner (module doc): every planner of :data:`PLANNERS` but ``exact``
    and itself (those that place several jobs, for several), the best of them, then
    :func:`controller.plan.local_search.local_search` (at most ``max_lps`` LPs and about
    ``search_seconds`` s).  A planner that refuses is left out (its reason kept in
    ``starts``)."""
    check_budget(budget)
    t0 = time.perf_counter()
    p = as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit)
    starts: dict[str, Any] = {}
    top: Placement | None = None
    solves = 0
    for name, planner in PLANNERS.items():
        if name in ("best", "exact") or (p.several and not places_several(planner)):
            continue
        try:
            placed = planner(p, budget, seed=seed, solver=solver, time_limit=time_limit,
                             **limits_for(planner, max_variables=max_variables))
        except PlanError as exc:
            if name == DEFAULT_START:  # the greedy's own error (e.g. an LP not solved) is ours
                raise
            starts[name] = f"skipped: {exc}"
            continue
        starts[name] = placed
        solves += placed.lp_solves
        if top is None or p.better(placed.lp, top.lp):
            top = placed
    assert top is not None  # the greedy raised, or placed
    found = local_search(p, top.deployed, budget, start_result=top.lp, max_lps=max_lps,
                         seconds=search_seconds)
    history = [(" ".join(m), p.value(found.result)) for m in found.moves]
    return Placement(found.deployed, p.value(found.result), found.result, history,
                     solves + found.lp_solves, time.perf_counter() - t0, starts)


# name → planner; a new algorithm is one module and one line here
PLANNERS: dict[str, Planner] = {
    "greedy": greedy,
    "exact": exact,
    "top_degree": top_degree,
    "random": random_planner,
    "tor_only": tor_only,
    "rounding": rounding,
    "best": best,
    "tor_all": tor_all,
}

DEFAULT_PLANNER = "greedy"


def get_planner(name: str, *, several: bool = False) -> Planner:
    """The planner called ``name``; an unknown name, or (``several``) a planner that declared
    it places one job, is a one-line :class:`PlanError`."""
    try:
        planner = PLANNERS[name]
    except KeyError:
        raise PlanError(f"unknown planner {name!r} (expected one of "
                        f"{', '.join(PLANNERS)})") from None
    if several:
        check_several(name, planner, PLANNERS)
    return planner


def several_planners() -> list[str]:
    """The names of the planners that place several jobs (``--jobs``)."""
    return [n for n, p in PLANNERS.items() if places_several(p)]
