"""Greedy placement (docs/design.md §3.4): one loop, the objective passed in.

:func:`greedy_loop` is the loop of docs/design.md §3.4 for any objective.  With a solve function
S ↦ R (an LP result of the deployment set S), a rule ``pick`` that names the winner of a step
among the candidates' results (ties included) and a test ``improves(new, old)``::

    S ← ∅;  U ← pool;  best ← solve(∅)
    while |S| < M and U ≠ ∅:
        R_s ← solve(S ∪ {s})  for s ∈ U           (one solve per class, see ``classes``)
        s* ← pick({s: R_s})
        if not improves(R_{s*}, best): stop        (no candidate improves)
        S ← S ∪ {s*};  U ← U \\ {s*};  best ← solve(S)  (already solved unless s* shared a class)
    return S in choice order (= interval order), best, history [(s*, best after)]

Two objectives use it:

* :func:`greedy` (one job): R = LP(S) of :mod:`controller.plan.lp`; ``pick`` = the largest
  γ, candidates within ``REL_TOL`` (relative) of it tied and broken by name
  (:func:`pick_best`); ``improves`` = γ larger by more than ``REL_TOL`` relative.
* :func:`greedy_jobs` (several jobs, docs/design.md §3.10): R = the joint LP
  (:class:`controller.plan.lp_jobs.FastJointLP`), scored by ``(t, next level, …)`` for max-min
  and by ``(Σ γ_j, levels…)`` for sum, compared lexicographically with relative tolerance
  ``SCORE_TOL`` (:func:`controller.plan.lp_jobs.better_score`; ties by name: scanning in name
  order, a later candidate must be strictly better).  It scores one candidate per class of
  :func:`controller.plan.orbits.result_orbits` (automorphisms that fix every job's PS, ToR and
  workers, and map each job's RESULT tree).  Its cost is one joint LP (a handful of solves)
  per class and step: a budget sweep takes the first choices of one run (:func:`prefix`).
  Its classes are scored lazily (:mod:`controller.plan.lazy_joint`: by default in decreasing
  order of their last first-entry gain, only while they could still reach the best): at
  fat-tree k = 16, 4 jobs × 64 workers, budgets 0..16, 720 LP solves and 41.6 s CPU against
  1,500 and 97.8 s exhaustive, the same plans (4.1 s CPU once the joint LP merges
  symmetric groups, :mod:`controller.plan.lp_orbits`).

The ``greedy`` planner (:func:`greedy`) is both: it places one job with the first and a job
set with the second.

Speed-ups of the single-job greedy that do not change the answer:

* the LP merges twin workers (:mod:`controller.plan.lp`, exact);
* candidates that cannot carry traffic are pruned (exact: γ(S ∪ {s}) = γ(S) for them);
* symmetry (``classes``): if an automorphism σ of the capacitated graph fixes d, s_d, the
  worker set, the switch capacities and S (setwise), then LP(S ∪ {s}) and LP(S ∪ {σ(s)}) are
  the same LP up to renaming, so γ is equal.  :func:`topo.symmetry.candidate_orbits` returns
  classes of candidates proven equivalent by such automorphisms (verified permutations, so a
  class is never merged by mistake); the loop solves one LP per class (its first member in
  name order) and gives every member that result.  ``pick`` then sees *all* candidates exactly
  as in the plain loop, so the chosen switch is the same; if the winner is not the solved
  member, its own LP is solved for its routing.  With the RESULT tree counted the classes
  are :func:`controller.plan.orbits.result_orbits`' (σ must also map the tree);
* lazy scoring (:mod:`controller.plan.lazy`): the classes' representatives are solved in
  decreasing order of a dual bound, only while they can still win;
* warm starts: each candidate's LP starts from LP(S)'s basis
  (:func:`controller.plan.lp_fast.set_basis`), and the final S is re-solved cold;
* inside each LP, worker groups interchangeable under automorphisms that fix S and the
  RESULT tree share one column (:mod:`controller.plan.lp_orbits`: the same optimum, by
  symmetry and convexity), and every group's ECMP vectors towards a destination come from
  one sparse product (:mod:`controller.plan.ecmp_matrix`).

At fat-tree k = 16, 1,023 workers, M = 16, RESULT load (issue 41): 201 LPs, 15.3 s CPU;
without lazy scoring 490 LPs, 76 s; without warm starts 200 LPs, 24.3 s; without the
RESULT-aware classes (the planner before) 4,203 LPs, 1,522 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controller.plan.lp import Job, LPResult, PlanError, candidates
from controller.plan.lp_fast import FastLP
from controller.plan.lp_jobs import (
    FastJointLP,
    JobSet,
    JointResult,
    better_score,
    joint_candidates,
    per_job_sets,
    solve_jobs_lp,
)
from controller.plan.placement import Jobs, Placement, as_jobs, check_budget, describe
from topo.models import natural_key

__all__ = ["greedy", "greedy_loop", "pick_best", "greedy_jobs", "JointGreedyResult", "prefix"]

REL_TOL = 1e-9

R = TypeVar("R")


def pick_best(scores: dict[str, float]) -> tuple[str, float]:
    """argmax γ; candidates within REL_TOL of the best are ties, broken by name order."""
    top = max(scores.values())
    tied = [s for s, v in scores.items() if v >= top - REL_TOL * max(abs(top), 1e-300)]
    name = min(tied, key=natural_key)
    return name, scores[name]


def greedy_loop(
    solve: Callable[[Sequence[str]], R],
    pool: Sequence[str],
    budget: int,
    *,
    pick: Callable[[Mapping[str, R]], str],
    improves: Callable[[R, R], bool],
    classes: Callable[[Sequence[str], Sequence[str]], list[list[str]]] | None = None,
    progress: Callable[[int, str, R], None] | None = None,
    start: Sequence[str] = (),
    lazy: Callable[[Sequence[str], R, list[str]], dict[str, R]] | None = None,
) -> tuple[list[str], R, list[tuple[str, R]]]:
    """The greedy of the module doc for the objective given by ``solve``, ``pick``, ``improves``.

    Parameters
    ----------
    solve : S ↦ its result (S in choice order).
    pool : the candidates U, in the order ``pick`` sees them.
    budget : M ≥ 0, the most switches to choose.
    pick : {candidate: result of S ∪ {candidate}} (in ``pool`` order) ↦ the winner's name.
    improves : ``improves(new, best)`` is true when ``new`` is worth taking over ``best``.
    classes : ``classes(S, U)`` ↦ a partition of U into classes whose members are proven to
        have equal results; one ``solve`` per class (its first member by name).  Default:
        singletons.
    progress : called as ``progress(|S|, chosen switch, result)`` after every step.
    start : choices already made by this same greedy (a run with a smaller budget): the loop
        continues from there instead of choosing them again (one ``solve`` per choice for
        the history).
    lazy : ``lazy(S, best, representatives)`` ↦ the results of the representatives it solved,
        leaving out only those proven neither the winner nor tied with it, and nothing when
        none can improve on ``best`` (:func:`controller.plan.lazy.lazy_scores`); default:
        every representative is solved.

    Returns
    -------
    (S in choice order, result of S, history [(switch, result after)]).
    """
    check_budget(budget)
    if len(start) > budget or len(set(start)) != len(start) or not set(start) <= set(pool):
        raise PlanError(f"greedy start {list(start)}: at most {budget} distinct candidates")
    history: list[tuple[str, R]] = [(s, solve(list(start[:k + 1]))) for k, s in enumerate(start)]
    S: list[str] = list(start)
    best = history[-1][1] if history else solve(S)
    U = [s for s in pool if s not in S]
    while len(S) < budget and U:
        groups = classes(S, U) if classes is not None else [[s] for s in U]
        rep_of: dict[str, str] = {}
        reps: list[str] = []
        for cls in groups:
            reps.append(min(cls, key=natural_key))
            for s in cls:
                rep_of[s] = reps[-1]
        if lazy is None:
            solved = {rep: solve([*S, rep]) for rep in reps}
        else:
            solved = lazy(S, best, reps)
            if not solved:  # no candidate can improve
                break
        scored = {s: solved[rep_of[s]] for s in U if rep_of.get(s) in solved}
        name = pick(scored)
        if not improves(scored[name], best):
            break
        if name not in solved:  # a class member: solve it to get its own routing
            solved[name] = solve([*S, name])
        S.append(name)
        U.remove(name)
        best = solved[name]
        history.append((name, best))
        if progress is not None:
            progress(len(S), name, best)
    return S, best, history


@describe(note="greedy + LP, docs/design.md §3.4")
def greedy(
    jobs: Job | JobSet | Jobs,
    budget: int,
    *,
    lp: Callable[..., Any] | None = None,
    seed: int = 0,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
    symmetry: bool = True,
    progress: Callable[[int, str, float], None] | None = None,
    lazy: bool = True,
    warm: bool = True,
) -> Placement:
    """Greedy deployment of at most ``budget`` switches besides s_d (the ``greedy`` planner).

    Parameters
    ----------
    jobs : the job set (:func:`controller.plan.placement.as_jobs`); several jobs are placed by
        :func:`greedy_jobs` with the job set's joint LP and objective.
    budget : M.
    lp : the LP(S) solver (:func:`controller.plan.lp.solve_lp` or a :class:`controller.plan.lp_fast.FastLP`;
        for several jobs a :class:`FastJointLP`).
    seed : unused (the greedy is deterministic); part of the planners' common signature.
    solver, time_limit, merge : passed to ``lp`` (time limit per LP).
    symmetry : solve one LP per candidate orbit (module doc); with the RESULT tree counted
        (``job.result_load``) only orbits whose automorphisms also map the tree
        (:mod:`controller.plan.orbits`).
    progress : called as ``progress(|S|, chosen switch, γ after)``.
    lazy : with a :class:`controller.plan.lp_fast.FastLP` as ``lp``, solve a candidate only
        when its dual bound says it could still win (:mod:`controller.plan.lazy`: the same
        S as the exhaustive greedy, ``lazy=False``); one job only.
    warm : with ``lazy``, start each candidate's LP from the basis of LP(S)
        (:func:`controller.plan.lp_fast.set_basis`; the final S is re-solved cold, so the
        plan's routing is a cold solve's).

    Returns
    -------
    :class:`controller.plan.placement.Placement`: S in choice order, γ, LP(S), the history
    (switch, γ after) and the number of LPs solved.
    """
    check_budget(budget)
    p = as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit)
    if p.jobset is not None:
        run = greedy_jobs(p.jobset, budget, objective=p.objective, solver=p.solver,
                          time_limit=p.time_limit, merge=merge, lp=p.lp, lazy=lazy)
        return Placement(run.deployed, p.value(run.result), run.result, list(run.history),
                         run.lp_solves, run.seconds)
    job, solve_one = p.one, p.lp
    t0 = time.perf_counter()
    solves = 0

    def solve(S: Sequence[str]) -> LPResult:
        nonlocal solves
        solves += 1
        return solve_one(job, S, solver=solver, time_limit=time_limit, merge=merge)

    def orbits(S: Sequence[str], U: Sequence[str]) -> list[list[str]]:
        if job.result_load:  # the RESULT tree must map too (controller.plan.orbits)
            from controller.plan.orbits import result_orbits

            return result_orbits(job.graph, [job], [S], job.capacity, S, U)
        from topo.symmetry import candidate_orbits

        return candidate_orbits(job.graph, job.ps, job.ps_tor, job.workers, job.capacity,
                                S, U)

    def step(k: int, name: str, res: LPResult) -> None:
        if progress is not None:
            progress(k, name, res.gamma)

    lazy_step = None
    fast = solve_one if lazy and isinstance(solve_one, FastLP) and solve_one.job is job \
        and solver != "cbc" and solve_one.have_highs and merge == solve_one.merge else None
    if fast is not None:
        from controller.plan.lazy import bounds, lazy_scores

        def lazy_step(S: Sequence[str], best: LPResult, reps: list[str]) -> dict[str, LPResult]:
            fast.warm = best  # every candidate's LP starts from LP(S)'s basis
            return lazy_scores(bounds(fast, best, reps), lambda s: solve([*S, s]),
                               best.gamma, REL_TOL)

    keep = (fast.keep_duals, fast.warm_start) if fast is not None else (False, False)
    if fast is not None:
        fast.keep_duals, fast.warm_start = True, warm
    try:
        S, best, history = greedy_loop(
            solve, candidates(job), budget,
            pick=lambda scored: pick_best({s: r.gamma for s, r in scored.items()})[0],
            improves=lambda new, old: new.gamma > old.gamma * (1 + REL_TOL),
            classes=orbits if symmetry else None,
            progress=step, lazy=lazy_step,
        )
    finally:
        if fast is not None:
            fast.keep_duals, fast.warm_start = keep
            fast.warm = None
    if fast is not None and warm and S:
        # the plan's routing from a cold solve, as without warm starts: a warm-started
        # solve has the same γ but, where LP(S) has several optima, may pick another one
        best = solve(S)
    return Placement(tuple(S), best.gamma, best, [(s, r.gamma) for s, r in history], solves,
                     time.perf_counter() - t0)


# ------------------------------------------------------------------ several jobs (§3.10)


def _first_best(scored: Mapping[str, JointResult]) -> str:
    """The winner of a greedy step: scanning the candidates in name order, a later one must
    be strictly better (:func:`better_score`) to take the lead, so ties go to the first name."""
    top: JointResult | None = None
    name = ""
    for s, res in scored.items():
        if top is None or better_score(res.score, top.score):
            top, name = res, s
    return name


@dataclass
class JointGreedyResult:
    deployed: tuple[str, ...]
    result: JointResult
    history: list[tuple[str, tuple[float, ...]]] = field(default_factory=list)
    lp_solves: int = 0
    seconds: float = 0.0
    budget: int = 0  # the budget it ran for (fewer choices: it stopped, nothing improved)

    def covers(self, budget: int) -> bool:
        """Whether this run holds the greedy's plan for ``budget``: a budget it ran for, or
        any budget once it stopped early (from the same S it would stop again)."""
        return budget <= self.budget or len(self.deployed) < self.budget


def greedy_jobs(
    js: JobSet,
    budget: int,
    *,
    objective: str = "maxmin",
    solver: str = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
    progress: Callable[[int, str, tuple[float, ...]], None] | None = None,
    fast: bool = True,
    start: Sequence[str] = (),
    lp: FastJointLP | None = None,
    symmetry: bool = True,
    warm: bool = True,
    lazy: bool | str = "stale",
) -> JointGreedyResult:
    """Greedy placement of docs/design.md §3.4 for several jobs, each S scored by the joint LP.

    Parameters
    ----------
    js : the jobs.
    budget : M, the most switches besides the PSs' ToRs.
    objective : ``"maxmin"`` or ``"sum"`` (:func:`controller.plan.lp_jobs.solve_jobs_lp`).
    fast : score with :class:`FastJointLP` (default; ``lp`` if given), else with
        :func:`controller.plan.lp_jobs.solve_jobs_lp` (PuLP), the reference the fast path is
        tested against.
    start : the choices of a run of this greedy with a smaller budget, to continue from
        (:func:`greedy_loop`).
    symmetry : score one candidate per class proven to have the same joint score
        (:func:`controller.plan.orbits.result_orbits`: automorphisms fixing every job's PS,
        ToR and workers, S and, with the RESULT term, each job's tree).
    warm : start each candidate's joint LP from the first-stage basis of LP(S) (the final
        S re-solved cold).  At fat-tree k = 16, 4 jobs × 64 workers, budgets 0..16: 97.7 s
        CPU with, 158.3 s without (five single candidates timed alone showed no gain:
        without a basis HiGHS presolves, which pays on some LPs and not on most).
    lazy : with ``fast`` and HiGHS, solve the candidates' joint LPs in decreasing order of
        an estimate of their first score entry, only while it could still win
        (:mod:`controller.plan.lazy_joint`): ``"stale"`` (or True) the last gain (never
        solved: +∞), ``"bound"`` a dual bound (a true bound, loose); False solves
        every candidate (the exhaustive greedy).  The module states when each can differ
        from the exhaustive greedy.

    Returns
    -------
    :class:`JointGreedyResult`: S in choice order, the last joint LP, the history
    (switch, score after) and the number of LPs solved.
    """
    t0 = time.perf_counter()
    solves = 0
    joint = lp if lp is not None else FastJointLP(js, solver=solver, time_limit=time_limit,
                                                  merge=merge)

    def solve(S: Sequence[str]) -> JointResult:
        nonlocal solves
        if fast:
            res = joint(S, objective=objective)
            if len(S) <= len(start):  # LP(start): the first step's warm start
                joint.warm = res
        else:
            res = solve_jobs_lp(js, S, objective=objective, solver=solver,
                                time_limit=time_limit, merge=merge)
        solves += res.lp_solves
        return res

    def step(k: int, name: str, res: JointResult) -> None:
        joint.warm = res  # the next step's candidates start from LP(S)'s first-stage basis
        if progress is not None:
            progress(k, name, res.score)

    usable = [set(candidates(job)) for job in js.jobs]

    def orbits(S: Sequence[str], U: Sequence[str]) -> list[list[str]]:
        from controller.plan.orbits import result_orbits

        return result_orbits(js.graph, js.jobs, per_job_sets(js, S), js.capacity, S, U,
                             usable)

    last_classes: dict[str, list[str]] = {}

    def classes(S: Sequence[str], U: Sequence[str]) -> list[list[str]]:
        out = orbits(S, U) if symmetry else [[s] for s in U]
        last_classes.clear()
        for cls in out:
            last_classes[min(cls, key=natural_key)] = cls
        return out

    lazy_step = None
    mode = ""
    if lazy and fast and joint.solver != "cbc" and joint.fast[0].have_highs:
        from controller.plan.lazy_joint import (
            LAZY_MODES,
            StaleGains,
            joint_bounds,
            joint_duals,
            lazy_joint_scores,
        )

        mode = "stale" if lazy is True else lazy
        if mode not in LAZY_MODES:
            raise PlanError(f"lazy: {lazy!r} is not one of {', '.join(LAZY_MODES)}")
        stale = StaleGains()

        def lazy_step(S: Sequence[str], best: JointResult, reps: list[str]
                      ) -> dict[str, JointResult]:
            now = best.score[0]
            if mode == "stale":  # the dual bound left every candidate in: not computed
                est = stale.estimate(dict.fromkeys(reps, float("inf")), now)
            else:
                est = joint_bounds(joint, best, reps)
            out = lazy_joint_scores(est, lambda s: solve([*S, s]), best.score)
            for rep, res in out.items():
                stale.record(last_classes.get(rep, [rep]), now, res.score[0])
            return out

    keep = joint.warm_start, joint.warm, joint.dual_hook
    joint.warm_start, joint.warm = fast and warm, None
    if lazy_step is not None and mode == "bound":
        joint.dual_hook = joint_duals
    try:
        S, best, history = greedy_loop(
            solve, joint_candidates(js), budget, pick=_first_best,
            improves=lambda new, old: better_score(new.score, old.score), progress=step,
            start=start, classes=classes, lazy=lazy_step)
    finally:
        joint.warm_start, joint.warm, joint.dual_hook = keep
    if fast and warm and S:
        # the plan's routing from a cold solve (a warm start may find another optimum of
        # the same levels where the joint LP has several)
        best = solve(S)
    return JointGreedyResult(tuple(S), best, [(s, r.score) for s, r in history], solves,
                             time.perf_counter() - t0, budget)


def prefix(planned: JointGreedyResult, budget: int, lp: FastJointLP,
           objective: str = "maxmin") -> JointGreedyResult:
    """The joint greedy's plan for a budget the run ``planned`` covers: its first ``budget``
    choices (the greedy is the same loop up to there; all of them if it stopped earlier)
    and their LP."""
    if not planned.covers(budget):
        raise PlanError(f"a greedy run for budget {planned.budget} has no plan for {budget}")
    S = list(planned.deployed[:budget])
    return JointGreedyResult(tuple(S), lp(S, objective=objective), planned.history[:budget],
                             planned.lp_solves, planned.seconds, budget)
