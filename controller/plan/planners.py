"""Placement algorithms by name (docs/design.md §3.4a): the ``PLANNERS`` table.

Every planner has the signature of :class:`controller.plan.placement.Planner`::

    planner(job, budget, *, lp=solve_lp, seed=0, solver="auto", time_limit=60.0) -> Placement

and returns S (at most M = ``budget`` switches besides s_d, in interval order) with γ = LP(S)
computed by the ``lp`` it was given.  A caller picks one by name (:func:`get_planner`), as
networkx passes an algorithm as an argument.

=============  ==================================================================================
``greedy``     greedy + LP of docs/design.md §3.4 (:func:`controller.plan.greedy.greedy`), default
``exact``      the best subset of min(M, |C|) candidates by brute force (:func:`exact_optimum`),
               refused above ``max_combinations`` LPs
``top_degree`` the M switches ≠ s_d of largest degree, ties by name
``random``     M switches ≠ s_d drawn with ``random.Random(seed)``
``tor_only``   S = ∅: only s_d aggregates
``rounding``   LP relaxation + randomized rounding, best of N (:mod:`controller.plan.rounding`)
=============  ==================================================================================

``top_degree`` and ``random`` choose among all switches ≠ s_d, as the baselines always did;
a chosen switch that cannot carry traffic (not a candidate, docs/design.md §3.3) is dropped
before LP(S), since it changes nothing (or LP(S) would refuse it).

``exact`` relies on γ being monotone in S (a new switch with x = a = 0 keeps a solution
feasible), which holds without the RESULT term; with ``job.result_load`` a deployed switch
also adds RESULT tree links, so a smaller set can be better and ``exact`` is the best set of
exactly min(M, |C|) switches, not necessarily the best of at most M.

Adding a planner: write a module with one function of the signature above, then add one line
``"name": function`` to :data:`PLANNERS` (docs/design.md §3.4a).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from itertools import combinations

from controller.plan.greedy import greedy
from controller.plan.lp import Job, LPResult, PlanError, candidates, solve_lp
from controller.plan.placement import Placement, Planner, check_budget, place
from controller.plan.rounding import rounding
from topo.models import natural_key, switches

__all__ = [
    "PLANNERS",
    "DEFAULT_PLANNER",
    "get_planner",
    "exact",
    "top_degree",
    "random_planner",
    "tor_only",
    "random_set",
    "top_degree_set",
    "exact_optimum",
]


def _others(job: Job) -> list[str]:
    return [s for s in switches(job.graph) if s != job.ps_tor]


def random_set(job: Job, budget: int, seed: int = 0) -> list[str]:
    """M switches (≠ s_d) sampled uniformly with the given seed, kept in name order."""
    pool = _others(job)
    return sorted(random.Random(seed).sample(pool, min(budget, len(pool))), key=natural_key)


def top_degree_set(job: Job, budget: int) -> list[str]:
    """The M switches (≠ s_d) of largest degree, ties by name."""
    pool = sorted(_others(job), key=lambda s: (-job.graph.degree[s], natural_key(s)))
    return pool[:budget]


def exact_optimum(
    job: Job,
    budget: int,
    *,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    max_combinations: int = 2000,
    lp: Callable[..., LPResult] = solve_lp,
) -> LPResult:
    """Best subset of min(M, |C|) candidates by brute force; ties: the first subset in name
    order.  Refused (:class:`PlanError`) above ``max_combinations`` subsets."""
    cands = candidates(job)
    m = min(budget, len(cands))
    n_comb = math.comb(len(cands), m)
    if n_comb > max_combinations:
        raise PlanError(
            f"exact optimum needs {n_comb} LPs (> limit {max_combinations}); "
            "use a smaller topology or raise the limit"
        )
    best: LPResult | None = None
    for combo in combinations(cands, m):
        res = lp(job, list(combo), solver=solver, time_limit=time_limit)
        if best is None or res.gamma > best.gamma * (1 + 1e-9):
            best = res
    assert best is not None  # m = 0 gives one (empty) combination
    return best


def _usable(job: Job, chosen: list[str]) -> list[str]:
    """The chosen switches that can carry traffic (pruned ones change nothing, §3.3)."""
    cands = set(candidates(job))
    return [s for s in chosen if s in cands]


def exact(job: Job, budget: int, *, lp: Callable[..., LPResult] = solve_lp, seed: int = 0,
          solver: str = "auto", time_limit: float | None = 60.0,
          max_combinations: int = 2000) -> Placement:
    """The ``exact`` planner: :func:`exact_optimum` (``seed`` unused)."""
    check_budget(budget)
    t0 = time.perf_counter()
    res = exact_optimum(job, budget, solver=solver, time_limit=time_limit,
                        max_combinations=max_combinations, lp=lp)
    n = len(candidates(job))
    return Placement(tuple(res.deployed), res.gamma, res, [], math.comb(n, min(budget, n)),
                     time.perf_counter() - t0)


def top_degree(job: Job, budget: int, *, lp: Callable[..., LPResult] = solve_lp,
               seed: int = 0, solver: str = "auto",
               time_limit: float | None = 60.0) -> Placement:
    """The ``top_degree`` planner: LP(:func:`top_degree_set`) (``seed`` unused)."""
    check_budget(budget)
    t0 = time.perf_counter()
    return place(job, _usable(job, top_degree_set(job, budget)), lp=lp, solver=solver,
                 time_limit=time_limit, started=t0)


def random_planner(job: Job, budget: int, *, lp: Callable[..., LPResult] = solve_lp,
                   seed: int = 0, solver: str = "auto",
                   time_limit: float | None = 60.0) -> Placement:
    """The ``random`` planner: LP(:func:`random_set` with ``seed``)."""
    check_budget(budget)
    t0 = time.perf_counter()
    return place(job, _usable(job, random_set(job, budget, seed)), lp=lp, solver=solver,
                 time_limit=time_limit, started=t0)


def tor_only(job: Job, budget: int, *, lp: Callable[..., LPResult] = solve_lp, seed: int = 0,
             solver: str = "auto", time_limit: float | None = 60.0) -> Placement:
    """The ``tor_only`` planner: S = ∅ whatever the budget (only s_d aggregates)."""
    check_budget(budget)
    return place(job, [], lp=lp, solver=solver, time_limit=time_limit)


# name → planner; a new algorithm is one module and one line here
PLANNERS: dict[str, Planner] = {
    "greedy": greedy,
    "exact": exact,
    "top_degree": top_degree,
    "random": random_planner,
    "tor_only": tor_only,
    "rounding": rounding,
}

DEFAULT_PLANNER = "greedy"


def get_planner(name: str) -> Planner:
    """The planner called ``name``; an unknown name is a one-line :class:`PlanError`."""
    try:
        return PLANNERS[name]
    except KeyError:
        raise PlanError(f"unknown planner {name!r} (expected one of "
                        f"{', '.join(PLANNERS)})") from None
