"""One pipeline from the settings of a job (or of several) to its plan document.

``plan``, ``run``, the campaign, the benches and ``plan --jobs`` / ``run --jobs`` all plan
through :func:`make_plan` (a :class:`controller.plan.types.Plan`), with the defaults of :class:`PlanRequest`, so that a plan printed
by ``plan`` is the plan ``run`` deploys for the same settings (same γ, same deployment):

* the RESULT multicast load is counted (``result_load=True``): the data plane multicasts every
  RESULT down a tree from the PS's ToR (:func:`controller.plan.lp.result_tree_coeffs`), so the
  γ it can reach is the LP's with that load; the γ of the same deployment in the model of
  docs/design.md §3.3 (without it) is kept as ``gamma_without_result_load``;
* the placement algorithm is a name in :data:`controller.plan.planners.PLANNERS`
  (``greedy`` by default); with ``polish`` (on by default), the default planner's plan
  below a baseline of its table (``exact`` aside) is improved by local search from that
  baseline's set (:func:`polish`, recorded in the plan's
  ``local_search``), so that it never loses to its own table;
* one job's document is :func:`controller.plan.document.build_plan`'s; several jobs' is
  :func:`controller.plan.joint.joint_plan`'s (joint greedy + LP, docs/design.md §3.10).

Pure but for the time it measures; writing the document is the caller's
(:func:`controller.plan.document.write_plan`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from controller.plan.baselines import all_baselines, beaten_by, honesty_warning
from controller.plan.document import build_plan
from controller.plan.jobs import JobEntry
from controller.plan.joint import JointGreedyResult, joint_plan
from controller.plan.local_search import local_search
from controller.plan.lp import PlanError, candidates, make_job, solve_lp
from controller.plan.lp_fast import FastLP
from controller.plan.lp_jobs import OBJECTIVES
from controller.plan.placement import Jobs, Placement, as_jobs, limits_for
from controller.plan.planners import DEFAULT_PLANNER, get_planner
from controller.plan.types import Plan

__all__ = ["PlanRequest", "make_plan", "plan_one_job", "plan_several_jobs", "polish"]


@dataclass(frozen=True)
class PlanRequest:
    """What a plan depends on besides the graph and the jobs; the one set of defaults."""

    budget: int
    planner: str = DEFAULT_PLANNER
    result_load: bool = True  # count the RESULT multicast tree (module docstring)
    capacity: float | None = None  # C_s of every switch; None = unlimited
    objective: str = "maxmin"  # several jobs: max-min of γ_j / w_j, or "sum"
    solver: str = "auto"
    time_limit: float | None = 60.0  # seconds per LP
    seed: int = 0  # of the random baseline and of randomized planners
    baselines: bool = True  # one job: the baselines table; several: each job planned alone
    max_combinations: int = 2000  # the exact baseline's limit
    # one job, the default planner with its baselines: local search from a baseline that
    # beats it (polish; issue 41 item 4: the default never below its own table, exact
    # aside).  On make run's own job it lifts the greedy's {edge1, agg0} (γ 0.75) to
    # {agg0, agg1} (γ 1): the same bytes into the PS, a round about a fifth shorter
    polish: bool = True
    spec: str | None = None  # the --topo text, kept in the document

    def check(self) -> None:
        """One :class:`PlanError` per bad value (before any LP)."""
        if self.budget < 0:
            raise PlanError(f"--budget must be >= 0, got {self.budget}")
        if self.capacity is not None and not self.capacity > 0:
            raise PlanError(f"--capacity must be > 0, got {self.capacity}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise PlanError(f"--time-limit must be > 0, got {self.time_limit}")
        if self.objective not in OBJECTIVES:
            raise PlanError(f"--objective: expected one of {', '.join(OBJECTIVES)}, "
                            f"got {self.objective!r}")
        get_planner(self.planner)  # an unknown name: one line listing the known ones


def polish(p: Jobs, placed: Placement, baselines: dict[str, dict[str, Any]], budget: int,
           *, max_lps: int = 400, seconds: float = 30.0
           ) -> tuple[Placement, dict[str, Any] | None]:
    """The default planner's rule (issue 41 item 4): never below a baseline of its own table
    (``exact`` aside).  If a baseline's γ is above ``placed``'s by more than 1e-9 relative
    (:func:`controller.plan.baselines.beaten_by`), search from the best such baseline's set
    (:func:`controller.plan.local_search.local_search`, every move strictly better, so the result is at least that
    baseline's γ) and return the set reached, with a record of the search; otherwise
    ``placed`` itself and None.  The history of the returned placement is the moves
    (``"from NAME"``, then one entry per move)."""
    rival = beaten_by(placed.gamma, {k: v.get("gamma") for k, v in baselines.items()
                                     if k != "exact"}, rel_tol=1e-9)
    if not rival:
        return placed, None
    name, g0 = rival[0]
    t0 = time.perf_counter()
    found = local_search(p, baselines[name]["deployed"], budget, max_lps=max_lps,
                         seconds=seconds)
    value = p.value(found.result)
    history = [(f"from {name}", g0)] + [(" ".join(m), value) for m in found.moves]
    record = {"from": name, "gamma_start": g0, "gamma_greedy": placed.gamma,
              "moves": [list(m) for m in found.moves], "lp_solves": found.lp_solves,
              "local_optimum": found.local_optimum,
              "seconds": time.perf_counter() - t0}
    return Placement(found.deployed, value, found.result, history,
                     placed.lp_solves + found.lp_solves, placed.seconds + record["seconds"],
                     placed.starts), record


def plan_one_job(graph: nx.Graph, ps: str, workers: Sequence[str],
                 req: PlanRequest) -> Plan:
    """The plan document of one job: its placement by ``req.planner``, the LP routing of
    that placement, the baselines (unless ``req.baselines`` is False: every other planner of
    the table) and the timings."""
    req.check()
    job = make_job(graph, ps, list(workers), capacity=req.capacity,
                   result_load=req.result_load)
    fast = FastLP(job, solver=req.solver, time_limit=req.time_limit)
    t0 = time.perf_counter()
    planner = get_planner(req.planner)
    placed = planner(as_jobs(job, lp=fast, solver=req.solver, time_limit=req.time_limit),
                     req.budget, seed=req.seed, solver=req.solver, time_limit=req.time_limit,
                     **limits_for(planner, max_combinations=req.max_combinations))
    t_place = time.perf_counter() - t0
    t1 = time.perf_counter()
    base = (all_baselines(job, req.budget, seed=req.seed, solver=req.solver,
                          time_limit=req.time_limit, lp=fast,
                          max_combinations=req.max_combinations, skip=(req.planner,),
                          known=placed.starts)
            if req.baselines else {})
    t_base = time.perf_counter() - t1
    searched = None
    if req.polish and req.planner == DEFAULT_PLANNER and base:
        # the default never loses to its own table (exact aside): local search from the
        # best baseline above it (polish)
        placed, searched = polish(as_jobs(job, lp=fast, solver=req.solver,
                                          time_limit=req.time_limit),
                                  placed, base, req.budget)
    extra = {}
    if req.result_load:  # the same deployment in the model of docs/design.md §3.3
        plain = make_job(graph, ps, list(workers), capacity=req.capacity)
        extra["gamma_without_result_load"] = solve_lp(plain, list(placed.deployed)).gamma
    bound = base.get("all_programmable", {}).get("gamma")
    warning = honesty_warning(req.planner, placed.gamma, budget=req.budget,
                              deployed=placed.deployed, candidates=candidates(job),
                              baselines={k: v["gamma"] for k, v in base.items()}, bound=bound)
    return build_plan(job, placed.lp, budget=req.budget, baselines=base, spec=req.spec,
                      capacity=req.capacity, greedy_history=placed.history,
                      timings={"greedy": t_place, "baselines": t_base,
                               "lp_solves": placed.lp_solves},
                      job_extra=extra, planner=req.planner, result_load=req.result_load,
                      warning=warning, local_search=searched)


def plan_several_jobs(graph: nx.Graph, specs: Sequence[JobEntry], req: PlanRequest,
                      planned: JointGreedyResult | None = None) -> Plan:
    """The plan document of several jobs sharing the switches (docs/design.md §3.10): the
    joint LP with ``req.objective`` on the set ``req.planner`` places (any planner of the
    table that places several jobs); each job planned alone too when ``req.baselines``.
    ``planned``: a joint greedy run of a larger budget to take the first choices of
    (:func:`controller.plan.joint.prefix`)."""
    req.check()
    get_planner(req.planner, several=True)  # one line before any LP
    return joint_plan(graph, specs, req.budget, objective=req.objective,
                      capacity=req.capacity, result_load=req.result_load, solver=req.solver,
                      time_limit=req.time_limit, alone=req.baselines, spec=req.spec,
                      planner=req.planner, seed=req.seed, planned=planned,
                      max_combinations=req.max_combinations)


def make_plan(graph: nx.Graph, req: PlanRequest, *, ps: str | None = None,
              workers: Sequence[str] | None = None,
              jobs: Sequence[JobEntry] | None = None) -> Plan:
    """One job (``ps`` and ``workers``) or several (``jobs``): the plan document."""
    if jobs is not None:
        return plan_several_jobs(graph, jobs, req)
    if ps is None or workers is None:
        raise PlanError("give a PS and workers (one job), or jobs (several)")
    return plan_one_job(graph, ps, workers, req)
