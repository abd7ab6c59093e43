"""TEMPORARY shim (replaced by the planners branch)."""
from controller.plan.greedy import greedy as _greedy

DEFAULT_PLANNER = "greedy"


def _g(job, budget, *, lp, seed=0, solver="auto", time_limit=60.0):
    return _greedy(job, budget, solver=solver, time_limit=time_limit, lp=lp)


PLANNERS = {"greedy": _g}


def get_planner(name):
    return PLANNERS[name]
