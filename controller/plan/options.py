"""The planner's options, one group for ``plan``, ``run`` and ``simulate``, and the
:class:`~controller.plan.pipeline.PlanRequest` they make (:func:`request_from_args`).

One set of flags with one set of defaults (:class:`PlanRequest`'s), so that ``plan`` and
``run`` of the same settings plan the same thing: ``--budget``, ``--planner``,
``--objective``, ``--seed``, ``--max-combinations``, ``--capacity``, ``--solver``,
``--time-limit``, ``--result-load``, ``--polish`` and (``plan``) ``--no-baselines``.  ``run`` and
``simulate`` add ``--budget`` and ``--seed`` with their other shared options (the seed also
seeds their impairments), so they ask the group without them.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.options import MAX_COMBINATIONS, finite_float, int_option
from controller.plan.lp_jobs import OBJECTIVES
from controller.plan.pipeline import PlanRequest
from controller.plan.planners import DEFAULT_PLANNER, PLANNERS

__all__ = ["DEFAULTS", "add_plan_options", "request_from_args"]

DEFAULTS = PlanRequest(budget=0)
"""The defaults every command plans with (the budget has none: each command says its own)."""

SOLVERS = ("auto", "highs", "cbc")


def add_plan_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                     budget: int | None = None, with_budget: bool = True,
                     with_seed: bool = True, with_baselines: bool = False) -> None:
    """Add the planner's options to ``p`` (module doc).  ``budget``: ``--budget``'s default
    (None: required); ``with_budget``/``with_seed``: add ``--budget``/``--seed`` (a command
    that has them among its shared options says False); ``with_baselines``: add
    ``--no-baselines``."""
    d = DEFAULTS
    if with_budget:
        p.add_argument("--budget", type=int_option(), required=budget is None,
                       default=budget,  # < 0: PlanRequest.check's message
                       help="M: programmable switches besides the PS's ToR")
    p.add_argument("--planner", choices=sorted(PLANNERS), default=d.planner,
                   help=f"placement algorithm (default {DEFAULT_PLANNER}; "
                        "controller/plan/planners.py, docs/design.md §3.4a: adding one is a "
                        "module and a line in PLANNERS)")
    p.add_argument("--objective", choices=OBJECTIVES, default=d.objective,
                   help="with --jobs: maximise min_j γ_j/w_j (default) or the sum of γ_j")
    if with_seed:
        p.add_argument("--seed", type=int_option(), default=d.seed,
                       help="seed of the random planner and of randomized planners")
    p.add_argument("--max-combinations", type=int_option(0, MAX_COMBINATIONS),
                   default=d.max_combinations,
                   help="largest number of subsets the exact planner and baseline try "
                        f"(default {d.max_combinations}; at most {MAX_COMBINATIONS:,})")
    p.add_argument("--capacity", type=finite_float, default=d.capacity,
                   help="aggregation capacity C_s of every switch (default: unlimited)")
    p.add_argument("--solver", choices=SOLVERS, default=d.solver,
                   help=f"LP solver (default {d.solver})")
    p.add_argument("--time-limit", type=finite_float, default=d.time_limit,
                   help=f"seconds per LP (default {d.time_limit:g})")
    p.add_argument("--result-load", action=argparse.BooleanOptionalAction,
                   default=d.result_load,
                   help="count the RESULT multicast tree in link loads, as the data plane "
                        "does (default); --no-result-load: the model of docs/design.md §3.3, "
                        "which leaves it out")
    p.add_argument("--polish", action=argparse.BooleanOptionalAction, default=d.polish,
                   help="when a baseline (exact aside) beats the planner's plan, search "
                        "from that baseline's set and deploy the better one (default; "
                        "docs/planner.md); --no-polish: the planner's own plan")
    if with_baselines:
        p.add_argument("--no-baselines", action="store_true", help="skip the baselines")


def request_from_args(args: argparse.Namespace, *, spec: str | None = None) -> PlanRequest:
    """The :class:`PlanRequest` of the options :func:`add_plan_options` added (an option a
    command did not add keeps the default); ``spec``: the topology text kept in the plan."""
    d = DEFAULTS

    def get(name: str, default: Any) -> Any:
        return getattr(args, name, default)

    return PlanRequest(
        budget=get("budget", d.budget), planner=get("planner", d.planner),
        result_load=get("result_load", d.result_load), capacity=get("capacity", d.capacity),
        objective=get("objective", d.objective), solver=get("solver", d.solver),
        time_limit=get("time_limit", d.time_limit), seed=get("seed", d.seed),
        baselines=not get("no_baselines", False),
        max_combinations=get("max_combinations", d.max_combinations),
        polish=get("polish", d.polish), spec=spec)
