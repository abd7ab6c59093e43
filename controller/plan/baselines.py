"""Baselines computed with the same model as the plan (docs/design.md §3.3).

Two rows are not planners:

* ``ps_only``: no aggregation anywhere (closed form, :func:`controller.plan.lp.ps_only`);
* ``all_programmable``: S = all candidates (upper bound: γ is monotone in S, since adding a
  switch with x = a = 0 keeps a solution feasible; not with the RESULT term, see
  :mod:`controller.plan.rounding`), skipped above ``max_all_programmable`` worker-switch
  variables;

then one row per entry of :data:`controller.plan.planners.PLANNERS` but the plan's own
(``skip``) and ``best`` (the best of the others, improved: no baseline), in the table's order, computed through the table: the row shows what
``--planner NAME`` would deploy, with the planner's note (its ``describe`` declaration).  A
planner that refuses (``exact`` above ``max_combinations`` LPs, ``rounding`` above
``max_all_programmable`` variables, or a planner's own :class:`PlanError`) has γ None and a
note saying why.  A planner added to the table is a baseline at once.

The choosers :func:`random_set`, :func:`top_degree_set` and :func:`exact_optimum` live in
:mod:`controller.plan.planners` and are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from controller.plan.lp import Job, LPResult, PlanError, candidates, ps_only, solve_lp
from controller.plan.placement import limits_for, note_of
from controller.plan.planners import PLANNERS, exact_optimum, random_set, top_degree_set

BASELINE_SECONDS = 120.0  # the baselines table's time budget (checked between rows)

__all__ = [
    "random_set",
    "top_degree_set",
    "exact_optimum",
    "all_baselines",
    "beaten_by",
    "honesty_warning",
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
    skip: Collection[str] = ("greedy",),
    known: Mapping[str, Any] | None = None,
    seconds: float | None = BASELINE_SECONDS,
) -> dict[str, dict]:
    """name → {"gamma": float | None, "deployed": [...], "note": str} (module doc): the
    two reference rows, then every planner of the table but those in ``skip`` (the plan's
    own).  ``known``: planners already run with these same arguments (the ``best``
    planner's :attr:`~controller.plan.placement.Placement.starts`), reused.  ``seconds``:
    the table's time budget, checked before each planner row (a planner already running
    finishes, but ``exact`` gets the time left and refuses when its LPs would exceed it):
    once spent, the remaining rows are skipped with a note saying so, so that ``plan``
    never stalls on its baselines (None: no budget)."""
    known = known or {}
    t0 = time.perf_counter()
    out: dict[str, dict] = {}
    kw = {"solver": solver, "time_limit": time_limit}
    g_ps, _ = ps_only(job)
    out["ps_only"] = {"gamma": g_ps, "deployed": [], "note": "no aggregation"}
    cands = candidates(job)
    size = len(cands) * len(job.workers)
    if size <= max_all_programmable:
        res = lp(job, cands, **kw)
        out["all_programmable"] = {"gamma": res.gamma, "deployed": cands, "note": "upper bound"}
    else:
        out["all_programmable"] = {"gamma": None, "deployed": cands,
                                   "note": f"skipped: {size} variables"}
    for name, planner in PLANNERS.items():
        if name in skip or name == "best":  # best is the others' best, improved: not a baseline
            continue
        spent = time.perf_counter() - t0
        limits = limits_for(planner, max_combinations=max_combinations,
                            max_variables=max_all_programmable,
                            max_seconds=None if seconds is None else max(0.0, seconds - spent))
        if seconds is not None and spent > seconds and name not in known:
            out[name] = {"gamma": None, "deployed": [],
                         "note": f"skipped: the baselines' time budget ({seconds:g} s) is spent"}
            continue
        if isinstance(known.get(name), str):  # refused with these arguments
            out[name] = {"gamma": None, "deployed": [], "note": known[name]}
            continue
        try:
            placed = known.get(name) or planner(job, budget, lp=lp, seed=seed, **kw, **limits)
        except PlanError as exc:
            out[name] = {"gamma": None, "deployed": [], "note": f"skipped: {exc}"}
            continue
        out[name] = {"gamma": placed.gamma, "deployed": list(placed.deployed),
                     "note": note_of(planner, seed)}
    return out


def beaten_by(gamma: float, baselines: dict[str, float | None], *,
              rel_tol: float = 1e-6) -> list[tuple[str, float]]:
    """The planner baselines (not ``ps_only``, not the ``all_programmable`` bound, which
    ignores the budget) whose γ is above ``gamma`` by more than ``rel_tol`` (relative),
    best first."""
    out = [(name, float(g)) for name, g in baselines.items()
           if name not in ("ps_only", "all_programmable") and g is not None
           and g > gamma * (1 + rel_tol) + 1e-12]
    return sorted(out, key=lambda kv: -kv[1])


def honesty_warning(planner: str, gamma: float, *, budget: int | None,
                    deployed: Sequence[str], candidates: Sequence[str],
                    baselines: Mapping[str, float | None],
                    bound: float | None) -> str | None:
    """One line when the plan is not the best its own table knows (issue 38: a planner that
    is honest), else None:

    * a baseline planner beats the chosen one (:func:`beaten_by`): which, and by how much;
    * the budget is left unused (fewer than ``budget`` switches deployed while candidates
      remain) although γ is below ``bound`` (γ with every candidate programmable), so more
      switches could raise it: how many were used and how many candidates were left.

    A planner that stops early at the bound (nothing left to gain) is not warned about."""
    parts = []
    beaten = beaten_by(gamma, dict(baselines))
    if beaten:
        name, g = beaten[0]
        also = f" (also {', '.join(n for n, _ in beaten[1:])})" if len(beaten) > 1 else ""
        parts.append(f"baseline {name} reaches γ {g:.4g}{also}, above {planner}'s {gamma:.4g}")
    left = [s for s in candidates if s not in set(deployed)]
    if (budget and len(deployed) < budget and left and bound is not None
            and bound > gamma * (1 + 1e-6) + 1e-12):
        parts.append(f"{planner} used {len(deployed)} of budget {budget} switches with "
                     f"{len(left)} candidates left, and γ {gamma:.4g} is below the "
                     f"all-programmable {bound:.4g}")
    return "warning: " + "; ".join(parts) if parts else None
