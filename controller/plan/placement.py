"""What a placement algorithm returns, and the one signature every planner has.

A *planner* chooses the deployment set S (at most M switches besides s_d, docs/design.md §3.1)
for one job; the routing of S is then LP(S) of docs/design.md §3.3.  Every planner of
:mod:`controller.plan.planners` is called the same way::

    planner(job, budget, *, lp=solve_lp, seed=0, solver="auto", time_limit=60.0) -> Placement

``lp`` is the LP(S) solver the planner must use for every LP over an integral S
(:func:`controller.plan.lp.solve_lp` or a :class:`controller.plan.lp_fast.FastLP` instance), so
that a caller chooses the backend once for all planners.  A planner may take further
keyword arguments with defaults (e.g. the greedy's ``symmetry``); callers that go through
the table pass only the common ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from controller.plan.lp import Job, LPResult, PlanError, solve_lp

__all__ = ["Placement", "Planner", "check_budget", "place"]


@dataclass
class Placement:
    """A planner's answer.

    Attributes
    ----------
    deployed : S in interval order (the order LP(S) lays the intervals out, docs/design.md §3.5).
    gamma : γ of LP(S), equal to ``lp.gamma``.
    lp : the LP(S) solution (routing x, a, u).
    history : (switch, γ after) per step of an incremental planner (the greedy);
        empty for planners that choose S at once.
    lp_solves : how many LPs the planner solved.
    seconds : wall time of the planner.
    """

    deployed: tuple[str, ...]
    gamma: float
    lp: LPResult
    history: list[tuple[str, float]] = field(default_factory=list)
    lp_solves: int = 0
    seconds: float = 0.0


class Planner(Protocol):
    """The signature of every entry of :data:`controller.plan.planners.PLANNERS`."""

    def __call__(self, job: Job, budget: int, *, lp: Callable[..., LPResult] = ...,
                 seed: int = ..., solver: str = ...,
                 time_limit: float | None = ...) -> Placement: ...


def check_budget(budget: int) -> None:
    """Every planner refuses a negative budget M with the same one-line :class:`PlanError`."""
    if budget < 0:
        raise PlanError(f"budget must be >= 0, got {budget}")


def place(
    job: Job,
    deployed: Sequence[str],
    *,
    lp: Callable[..., LPResult] = solve_lp,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    started: float | None = None,
    lp_solves: int = 0,
) -> Placement:
    """The :class:`Placement` of a set chosen at once: solve LP(S) once with ``lp``.

    ``started`` (a :func:`time.perf_counter` value) and ``lp_solves`` (LPs the planner solved
    before) let a planner count its own work into the result.
    """
    t0 = time.perf_counter() if started is None else started
    res = lp(job, list(deployed), solver=solver, time_limit=time_limit)
    return Placement(tuple(res.deployed), res.gamma, res, [], lp_solves + 1,
                     time.perf_counter() - t0)
