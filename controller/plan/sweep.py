"""A sweep of budgets × planners (issue 41 item 5): ``plan --budgets 0,1,2,4 --planners ...``.

One row per (planner, budget): γ (one job) or the joint score's first entry (several jobs,
min_j γ_j / w_j for max-min), the deployment, the LPs and seconds it took.

Work reused across budgets: the greedy (one job or the joint greedy) runs once, for the
largest budget, and the plan of every smaller budget is its prefix.  The greedy loop
(:func:`controller.plan.greedy.greedy_loop`) makes the same choice at step k whatever the
budget (the budget only bounds the number of steps), so the run for budget M' ≤ M is the
first M' steps of the run for M; a run that stopped early at k < M' (nothing improves) stops
at k for M' too.  The γ after step k is the history's; budget 0 is LP(∅).  The other planners
run once per budget (their choice depends on the budget as a whole).  With several jobs each
row's score is then the one ``plan --jobs`` deploys for that S: every job re-solved on the
switches it aggregates on (:func:`controller.plan.joint.used_only`, one more joint LP).

Pure: no file is written here (the ``plan`` command writes the table, JSON and figure).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from controller.plan.greedy import greedy_jobs
from controller.plan.lp import PlanError
from controller.plan.placement import Jobs, limits_for
from controller.plan.planners import get_planner

__all__ = ["SweepRow", "sweep", "parse_list"]


@dataclass
class SweepRow:
    """One planner at one budget; ``gamma`` None with ``note`` when the planner refused."""

    planner: str
    budget: int
    gamma: float | None
    deployed: list[str]
    lp_solves: int
    seconds: float
    note: str = ""

    def to_dict(self) -> dict:
        """The row as JSON-ready data."""
        return asdict(self)


def parse_list(text: str, what: str) -> list[str]:
    """A comma-separated option value, its items stripped; empty items refused in one line."""
    items = [t.strip() for t in text.split(",")]
    if not items or any(not t for t in items):
        raise PlanError(f"{what}: expected a comma-separated list, got {text!r}")
    return items


def _greedy_rows(p: Jobs, budgets: Sequence[int], seed: int) -> list[SweepRow]:
    """The greedy at every budget from one run at the largest (module doc)."""
    t0 = time.perf_counter()
    top = max(budgets)
    if p.several:
        assert p.jobset is not None
        run = greedy_jobs(p.jobset, top, objective=p.objective, solver=p.solver,
                          time_limit=p.time_limit, lp=p.lp)  # type: ignore[arg-type]
        deployed, values, solves = list(run.deployed), [s[0] for _, s in run.history], \
            run.lp_solves
    else:
        placed = get_planner("greedy")(p, top, seed=seed, solver=p.solver,
                                       time_limit=p.time_limit)
        deployed, values, solves = list(placed.deployed), [g for _, g in placed.history], \
            placed.lp_solves
    empty = p.value(p.solve([])) if 0 in budgets else None
    seconds = time.perf_counter() - t0
    rows = []
    for b in budgets:
        k = min(b, len(deployed))
        g = values[k - 1] if k else empty
        rows.append(SweepRow("greedy", b, g, deployed[:k], solves, seconds,
                             f"prefix of one run for budget {top}"))
    return rows


def sweep(p: Jobs, budgets: Sequence[int], planners: Sequence[str], *, seed: int = 0,
          max_combinations: int = 2000) -> list[SweepRow]:
    """Every planner at every budget (module doc), rows by planner then budget."""
    budgets = sorted(set(budgets))
    if not budgets or budgets[0] < 0:
        raise PlanError(f"--budgets must be >= 0, got {budgets}")
    for name in planners:
        get_planner(name, several=p.several)  # one line before any LP
    rows: list[SweepRow] = []
    for name in planners:
        if name == "greedy":
            rows += _greedy_rows(p, budgets, seed)
            continue
        planner = get_planner(name)
        for b in budgets:
            t0 = time.perf_counter()
            try:
                placed = planner(p, b, seed=seed, solver=p.solver, time_limit=p.time_limit,
                                 **limits_for(planner, max_combinations=max_combinations))
            except PlanError as exc:
                rows.append(SweepRow(name, b, None, [], 0, time.perf_counter() - t0,
                                     f"skipped: {exc}"))
                continue
            rows.append(SweepRow(name, b, placed.gamma, list(placed.deployed),
                                 placed.lp_solves, time.perf_counter() - t0))
    if p.several:
        _as_deployed(p, rows)
    return rows


def _as_deployed(p: Jobs, rows: list[SweepRow]) -> None:
    """Each row's score as ``plan --jobs`` deploys its S (module doc); one LP per distinct S."""
    from controller.plan.joint import used_only

    assert p.jobset is not None
    done: dict[tuple[str, ...], float] = {}
    for r in rows:
        if r.gamma is None:
            continue
        key = tuple(r.deployed)
        if key not in done:
            res = p.solve(list(key))
            done[key] = p.value(used_only(p.jobset, res, p.lp, p.objective))
        r.gamma = max(r.gamma, done[key])


def sweep_jobs(graph, req, *, ps: str | None = None, workers: Sequence[str] | None = None,
               jobs: Sequence | None = None) -> Jobs:
    """The job set a sweep places, scored by the fast LP as ``plan`` scores it: one job
    (``ps``, ``workers``) or several (``jobs``, entries of a jobs file), with ``req``'s
    capacity, RESULT load, solver, time limit and objective."""
    from controller.plan.lp import make_job
    from controller.plan.lp_fast import FastLP
    from controller.plan.lp_jobs import FastJointLP, make_jobset
    from controller.plan.placement import as_jobs

    if jobs is not None:
        js = make_jobset(graph, jobs, capacity=req.capacity, result_load=req.result_load)
        return as_jobs(js, lp=FastJointLP(js, solver=req.solver, time_limit=req.time_limit),
                       solver=req.solver, time_limit=req.time_limit, objective=req.objective)
    if ps is None or workers is None:
        raise PlanError("give a PS and workers (one job), or jobs (several)")
    job = make_job(graph, ps, list(workers), capacity=req.capacity, result_load=req.result_load)
    return as_jobs(job, lp=FastLP(job, solver=req.solver, time_limit=req.time_limit),
                   solver=req.solver, time_limit=req.time_limit)
