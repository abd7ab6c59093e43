"""The ``tor_all`` planner: the ToRs of the workers' racks (ATP's placement, NSDI'21).

ATP aggregates on the top-of-rack switch of every rack that holds workers of a job as well
as on the PS's: a rack's workers are summed as they leave it, and the PS's ToR sums the
racks' partials.  Here S is those ToRs outside D (the PSs' ToRs, which aggregate anyway),
the racks with the most workers first (ties by name), at most M = ``budget`` of them, and
only those that can carry the job's traffic (:meth:`Jobs.usable`); the LP of S routes it.

A worker's ToR is its first switch neighbour in name order, the rule
:func:`controller.plan.lp.make_job` applies to the PS (a fat-tree's edge switch; BCube's
level-0 switch).  With a budget at least the number of racks (``bench/suite``'s ``atp``
design passes one) S is every such ToR; with a smaller one it is a baseline like the
others of the table: the M fullest racks.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import networkx as nx

from controller.plan.placement import JobsLike, Placement, as_jobs, check_budget, describe
from topo.models import natural_key

__all__ = ["tor_all", "worker_tors", "tor_of"]


def tor_of(graph: nx.Graph, host: str) -> str | None:
    """``host``'s ToR: its first switch neighbour in name order (None: no switch)."""
    tors = sorted((n for n in graph.neighbors(host) if graph.nodes[n].get("kind") == "switch"),
                  key=natural_key)
    return tors[0] if tors else None


def worker_tors(jobs: JobsLike) -> list[str]:
    """The ToRs of every job's workers outside D, the racks with the most workers first
    (ties by name)."""
    p = as_jobs(jobs)
    d = set(p.tors)
    count = Counter(t for w in p.workers for t in [tor_of(p.graph, w)] if t is not None
                    and t not in d)
    return sorted(count, key=lambda t: (-count[t], natural_key(t)))


@describe(note="workers' ToRs, fullest racks first")
def tor_all(jobs: JobsLike, budget: int, *, lp: Callable[..., Any] | None = None,
            seed: int = 0, solver: str = "auto",
            time_limit: float | None = 60.0) -> Placement:
    """The ``tor_all`` planner (module doc): the LP of the first ``budget`` of
    :func:`worker_tors` that can carry traffic (``seed`` unused)."""
    check_budget(budget)
    t0 = time.perf_counter()
    p = as_jobs(jobs, lp=lp, solver=solver, time_limit=time_limit)
    return p.place(p.usable(worker_tors(p))[:budget], started=t0)
