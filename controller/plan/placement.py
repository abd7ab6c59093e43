"""What a placement algorithm returns, the job set it places, and the one signature every
planner has.

A *planner* chooses the deployment set S (at most M switches besides the PSs' ToRs,
docs/design.md §3.1) for a *job set*: one job (a set of one, routed by LP(S) of
docs/design.md §3.3) or several sharing the switches (the joint LP of §3.10).  Every planner
of :data:`controller.plan.planners.PLANNERS` is called the same way::

    planner(jobs, budget, *, lp=None, seed=0, solver="auto", time_limit=60.0) -> Placement

``jobs`` is a :class:`Jobs` (what ``plan`` and ``run`` pass), or, for convenience, one
:class:`controller.plan.lp.Job` or a :class:`controller.plan.lp_jobs.JobSet`, which
:func:`as_jobs` turns into one.  A :class:`Jobs` knows the switches a planner may choose
(:meth:`Jobs.others`, :meth:`Jobs.candidates`), scores a set (:meth:`Jobs.solve`,
:meth:`Jobs.value`, :meth:`Jobs.better`) and places it (:meth:`Jobs.place`), whatever the
number of jobs: a planner written on it works with ``--jobs`` unchanged.

``lp`` is the LP(S) solver of one job (:func:`controller.plan.lp.solve_lp` or a
:class:`controller.plan.lp_fast.FastLP` instance) or the joint LP of several
(:class:`controller.plan.lp_jobs.FastJointLP`), so that a caller chooses the backend once for
all planners; ``None``: the default of the job set.  A planner may take further keyword
arguments with defaults (e.g. the greedy's ``symmetry``); callers that go through the table
pass only the common ones, and the limits its signature names (``max_combinations``,
``max_variables``).

A planner that can only place one job says so with :func:`describe` (``one_job=True``):
``--jobs`` then refuses it in one line (:func:`check_several`), instead of a planner that
silently plans something else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import networkx as nx

from controller.plan.lp import Job, PlanError, candidates, solve_lp
from controller.plan.lp_jobs import FastJointLP, JobSet, JointResult, better_score, joint_candidates
from topo.models import switches

__all__ = ["Placement", "Planner", "Jobs", "JobsLike", "as_jobs", "check_budget", "place", "describe",
           "places_several", "note_of", "check_several", "limits_for"]

REL_TOL = 1e-9  # one job: a γ larger by more than this (relative) is better


@dataclass
class Placement:
    """A planner's answer.

    Attributes
    ----------
    deployed : S in interval order (the order LP(S) lays the intervals out, docs/design.md §3.5).
    gamma : one job: γ of LP(S), equal to ``lp.gamma``; several: the first entry of the joint
        LP's score (min γ_j / w_j for max-min, Σ γ_j for sum).
    lp : the LP(S) solution (routing x, a, u): an :class:`LPResult`, or a
        :class:`JointResult` for several jobs.
    history : (switch, γ or score after) per step of an incremental planner (the greedy);
        empty for planners that choose S at once.
    lp_solves : how many LPs the planner solved.
    seconds : wall time of the planner.
    starts : a planner built on others (``best``): each one's Placement, or the one-line
        reason it refused, by name (the baselines table reuses them).
    """

    deployed: tuple[str, ...]
    gamma: float
    lp: Any  # LPResult | JointResult
    history: list[tuple[str, Any]] = field(default_factory=list)
    lp_solves: int = 0
    seconds: float = 0.0
    starts: dict[str, Any] = field(default_factory=dict)  # ``best``: name → Placement | refusal


@dataclass(frozen=True)
class Jobs:
    """The job set a planner places: one job (``job``) or several (``jobset``), with the LP
    that scores a deployment set.  Build it with :func:`as_jobs`."""

    graph: nx.Graph
    job: Job | None  # the only job, or None for several
    jobset: JobSet | None  # several jobs, or None for one
    lp: Callable[..., Any]
    solver: str = "auto"
    time_limit: float | None = 60.0
    objective: str = "maxmin"  # several jobs: the joint LP's objective

    @property
    def several(self) -> bool:
        """True for several jobs (the joint LP of docs/design.md §3.10)."""
        return self.jobset is not None

    @property
    def one(self) -> Job:
        """The only job; :class:`PlanError` for several (a planner that places one job)."""
        if self.job is None:
            raise PlanError("this planner places one job; several jobs (--jobs) need another")
        return self.job

    @property
    def members(self) -> tuple[Job, ...]:
        """Every job of the set."""
        return (self.job,) if self.job is not None else tuple(self.jobset.jobs)  # type: ignore[union-attr]

    @property
    def tors(self) -> list[str]:
        """D: the PSs' ToRs, which aggregate anyway and are never chosen."""
        if self.jobset is not None:
            return self.jobset.tors
        return [self.one.ps_tor]

    @property
    def workers(self) -> list[str]:
        """The workers of every job."""
        return [w for j in self.members for w in j.workers]

    def others(self) -> list[str]:
        """Every switch outside D, in name order (what simple rules choose among)."""
        tors = set(self.tors)
        return [s for s in switches(self.graph) if s not in tors]

    def candidates(self) -> list[str]:
        """The switches that can carry some job's traffic (docs/design.md §3.3), name
        order; a chosen switch outside them changes nothing."""
        if self.jobset is not None:
            return joint_candidates(self.jobset)
        return candidates(self.one)

    def usable(self, chosen: Sequence[str]) -> list[str]:
        """``chosen`` without the switches that cannot carry traffic (they change nothing)."""
        cands = set(self.candidates())
        return [s for s in chosen if s in cands]

    def solve(self, deployed: Sequence[str]) -> Any:
        """The LP of S = ``deployed``: an :class:`LPResult` (one job) or a
        :class:`JointResult` (several)."""
        if self.jobset is not None:
            return self.lp(list(deployed), objective=self.objective)
        return self.lp(self.one, list(deployed), solver=self.solver, time_limit=self.time_limit)

    def value(self, res: Any) -> float:
        """What a planner reports as γ: one job's γ, or the joint score's first entry."""
        if isinstance(res, JointResult):
            return float(res.score[0])
        return float(res.gamma)

    def better(self, new: Any, old: Any) -> bool:
        """Whether ``new`` beats ``old`` by more than the tolerance (ties keep ``old``)."""
        if isinstance(new, JointResult):
            return better_score(new.score, old.score)
        return bool(new.gamma > old.gamma * (1 + REL_TOL))

    def place(self, deployed: Sequence[str], *, started: float | None = None,
              lp_solves: int = 0) -> Placement:
        """The :class:`Placement` of a set chosen at once: its LP solved once.  ``started``
        (a :func:`time.perf_counter` value) and ``lp_solves`` (LPs solved before) let a
        planner count its own work into the result."""
        t0 = time.perf_counter() if started is None else started
        res = self.solve(deployed)
        return Placement(tuple(res.deployed), self.value(res), res, [],
                         lp_solves + getattr(res, "lp_solves", 1),
                         time.perf_counter() - t0)


JobsLike = Job | JobSet | Jobs  # what a planner accepts as its job set


def as_jobs(jobs: JobsLike, *, lp: Callable[..., Any] | None = None,
            solver: str = "auto", time_limit: float | None = 60.0,
            objective: str = "maxmin") -> Jobs:
    """``jobs`` as a :class:`Jobs` (returned unchanged if it is one): one job scored by ``lp``
    (default :func:`solve_lp`), or a job set scored by ``lp`` (default a
    :class:`FastJointLP` with ``solver`` and ``time_limit``) with ``objective``."""
    if isinstance(jobs, Jobs):
        return jobs
    if isinstance(jobs, JobSet):
        joint = lp if lp is not None else FastJointLP(jobs, solver=solver, time_limit=time_limit)
        return Jobs(jobs.graph, None, jobs, joint, solver, time_limit, objective)
    if isinstance(jobs, Job):
        return Jobs(jobs.graph, jobs, None, lp if lp is not None else solve_lp, solver,
                    time_limit, objective)
    raise PlanError(f"a planner places a Job, a JobSet or Jobs, not {type(jobs).__name__}")


class Planner(Protocol):
    """The signature of every entry of :data:`controller.plan.planners.PLANNERS`."""

    def __call__(self, jobs: Any, budget: int, *, lp: Any = ..., seed: int = ...,
                 solver: str = ..., time_limit: float | None = ...) -> Placement: ...


F = TypeVar("F", bound=Callable[..., Any])


def describe(*, note: str = "", one_job: bool = False) -> Callable[[F], F]:
    """A planner's own declaration: ``note`` (shown in the baselines table; ``{seed}`` is
    replaced by the seed) and ``one_job`` (True: it cannot place several jobs, and ``--jobs``
    refuses it in one line).  A planner without it places any job set, with no note."""
    def mark(planner: F) -> F:
        planner.note = note  # type: ignore[attr-defined]
        planner.one_job = one_job  # type: ignore[attr-defined]
        return planner
    return mark


def places_several(planner: Callable[..., Any]) -> bool:
    """Whether ``planner`` places several jobs (its :func:`describe` declaration)."""
    return not getattr(planner, "one_job", False)


def note_of(planner: Callable[..., Any], seed: int) -> str:
    """The planner's note for the baselines table (:func:`describe`)."""
    return str(getattr(planner, "note", "")).replace("{seed}", str(seed))


def limits_for(planner: Callable[..., Any], **limits: Any) -> dict[str, Any]:
    """The limits among ``limits`` (``max_combinations``, ``max_variables``,
    ``max_seconds``) that ``planner``'s signature names: what a caller passes besides the
    common arguments."""
    import inspect

    params = inspect.signature(planner).parameters
    return {k: v for k, v in limits.items() if k in params}


def check_several(name: str, planner: Callable[..., Any], table: dict[str, Any]) -> None:
    """Refuse, in one line, a planner that declared it places one job, for several jobs."""
    if not places_several(planner):
        able = [n for n, p in table.items() if places_several(p)]
        raise PlanError(f"--planner {name} places one job; several jobs (--jobs) are placed "
                        f"by one of {', '.join(able)}")


def check_budget(budget: int) -> None:
    """Every planner refuses a negative budget M with the same one-line :class:`PlanError`."""
    if budget < 0:
        raise PlanError(f"budget must be >= 0, got {budget}")


def place(
    jobs: JobsLike,
    deployed: Sequence[str],
    *,
    lp: Callable[..., Any] | None = None,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    started: float | None = None,
    lp_solves: int = 0,
) -> Placement:
    """:meth:`Jobs.place` of ``as_jobs(jobs, lp=lp, ...)``: S solved once."""
    return as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit).place(
        deployed, started=started, lp_solves=lp_solves)
