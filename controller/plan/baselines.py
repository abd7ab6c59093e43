"""Baselines computed with the same model as the plan (docs/design.md §3.3).

* ``ps_only``: no aggregation anywhere (closed form, :func:`controller.plan.lp.ps_only`);
* ``tor_only``: S = ∅ (only s_d aggregates);
* ``all_programmable``: S = all candidates (upper bound: γ is monotone in S, since adding a
  switch with x = a = 0 keeps a solution feasible);
* ``random``: M switches other than s_d drawn with ``random.Random(seed)``;
* ``top_degree``: the M switches other than s_d of largest degree (ties by name);
* ``exact``: the best M-subset of the candidates by brute force (by monotonicity the best
  subset of size min(M, |candidates|) is the optimum over all subsets of size ≤ M; pruned
  switches never change γ), refused above ``max_combinations``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from itertools import combinations

from controller.plan.lp import Job, LPResult, PlanError, candidates, ps_only, solve_lp
from topo.models import natural_key, switches

__all__ = [
    "random_set",
    "top_degree_set",
    "exact_optimum",
    "all_baselines",
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
    """Best subset by brute force; ties: the first subset in name order."""
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


def all_baselines(
    job: Job,
    budget: int,
    *,
    seed: int = 0,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    max_combinations: int = 2000,
    max_all_programmable: int = 200_000,
    lp: Callable[..., LPResult] = solve_lp,
) -> dict[str, dict]:
    """name → {"gamma": float | None, "deployed": [...], "note": str}.  A baseline that is
    too large to compute (exact beyond ``max_combinations``; all-programmable beyond
    ``max_all_programmable`` worker-switch variables) has γ None and a note saying why."""
    out: dict[str, dict] = {}
    kw = {"solver": solver, "time_limit": time_limit}
    g_ps, _ = ps_only(job)
    out["ps_only"] = {"gamma": g_ps, "deployed": [], "note": "no aggregation"}
    out["tor_only"] = {"gamma": lp(job, [], **kw).gamma, "deployed": [], "note": "S = {}"}
    cands = candidates(job)
    size = len(cands) * len(job.workers)
    if size <= max_all_programmable:
        res = lp(job, cands, **kw)
        out["all_programmable"] = {"gamma": res.gamma, "deployed": cands, "note": "upper bound"}
    else:
        out["all_programmable"] = {"gamma": None, "deployed": cands,
                                   "note": f"skipped: {size} variables"}
    for name, chosen in (
        ("random", random_set(job, budget, seed)),
        ("top_degree", top_degree_set(job, budget)),
    ):
        usable = [s for s in chosen if s in set(cands)]  # pruned switches cannot carry traffic
        out[name] = {"gamma": lp(job, usable, **kw).gamma, "deployed": chosen,
                     "note": f"seed {seed}" if name == "random" else "largest degree"}
    try:
        res = exact_optimum(job, budget, max_combinations=max_combinations, lp=lp, **kw)
        out["exact"] = {"gamma": res.gamma, "deployed": list(res.deployed),
                        "note": "brute force"}
    except PlanError as exc:
        out["exact"] = {"gamma": None, "deployed": [], "note": f"skipped: {exc}"}
    return out
