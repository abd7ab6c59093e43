"""Baselines computed with the same model as the plan (docs/design.md §3.3).

* ``ps_only``: no aggregation anywhere (closed form, :func:`controller.plan.lp.ps_only`);
* ``tor_only``: S = ∅ (only s_d aggregates);
* ``all_programmable``: S = all candidates (upper bound: γ is monotone in S, since adding a
  switch with x = a = 0 keeps a solution feasible; not with the RESULT term, see
  :mod:`controller.plan.rounding`);
* ``random``: M switches other than s_d drawn with ``random.Random(seed)``;
* ``top_degree``: the M switches other than s_d of largest degree (ties by name);
* ``exact``: the best M-subset of the candidates by brute force (by monotonicity the best
  subset of size min(M, |candidates|) is the optimum over all subsets of size ≤ M; pruned
  switches never change γ), refused above ``max_combinations``;
* ``rounding``: LP relaxation + randomized rounding, best of N (:mod:`controller.plan.rounding`).

Every entry that is a planner (``tor_only``, ``random``, ``top_degree``, ``exact``,
``rounding``) is computed through :data:`controller.plan.planners.PLANNERS`, so the table shows
what ``--planner NAME`` would deploy.  The choosers :func:`random_set`, :func:`top_degree_set`
and :func:`exact_optimum` live in :mod:`controller.plan.planners` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable

from controller.plan.lp import Job, LPResult, PlanError, candidates, ps_only, solve_lp
from controller.plan.planners import PLANNERS, exact_optimum, random_set, top_degree_set
from controller.plan.rounding import ROUNDINGS

__all__ = [
    "random_set",
    "top_degree_set",
    "exact_optimum",
    "all_baselines",
]


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
    too large to compute (exact beyond ``max_combinations``; all-programmable and rounding
    beyond ``max_all_programmable`` worker-switch variables) has γ None and a note saying
    why."""
    out: dict[str, dict] = {}
    kw = {"solver": solver, "time_limit": time_limit}
    g_ps, _ = ps_only(job)
    out["ps_only"] = {"gamma": g_ps, "deployed": [], "note": "no aggregation"}
    out["tor_only"] = {"gamma": PLANNERS["tor_only"](job, budget, lp=lp, **kw).gamma,
                       "deployed": [], "note": "S = {}"}
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
        # the planner drops chosen switches that cannot carry traffic; the table keeps
        # showing the whole choice, as it always has
        placed = PLANNERS[name](job, budget, lp=lp, seed=seed, **kw)
        out[name] = {"gamma": placed.gamma, "deployed": chosen,
                     "note": f"seed {seed}" if name == "random" else "largest degree"}
    try:
        placed = PLANNERS["exact"](job, budget, lp=lp, max_combinations=max_combinations, **kw)
        out["exact"] = {"gamma": placed.gamma, "deployed": list(placed.deployed),
                        "note": "brute force"}
    except PlanError as exc:
        out["exact"] = {"gamma": None, "deployed": [], "note": f"skipped: {exc}"}
    if size > max_all_programmable:  # its relaxation is as large as all-programmable's LP
        out["rounding"] = {"gamma": None, "deployed": [], "note": f"skipped: {size} variables"}
    else:
        try:
            placed = PLANNERS["rounding"](job, budget, lp=lp, seed=seed, **kw)
            out["rounding"] = {"gamma": placed.gamma, "deployed": list(placed.deployed),
                               "note": f"best of {ROUNDINGS} roundings, seed {seed}"}
        except PlanError as exc:
            out["rounding"] = {"gamma": None, "deployed": [], "note": f"skipped: {exc}"}
    return out
