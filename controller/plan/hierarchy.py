"""A hierarchical job's aggregation tree, from the plan's deployment and the routing
(docs/protocol.md §5.1).

A job of more workers than the bitmap is wide is aggregated along a tree whose every switch
counts its own children: each worker sends its GRADs to the first aggregation point (a
switch of the plan's deployment, or the PS's ToR s_d) on a shortest path toward s_d, each
aggregation point sends its PARTIAL to the next one on such a path, and s_d, the root,
sends its PARTIAL to the PS.  Where equal-cost paths offer several first points, the child
goes to the one with the fewest children so far (ties in name order), so that a layer of
switches shares its children evenly; re-assigned (a member left, a switch died), a child
keeps its parent while that parent is still one of its choices, and its index there.  A switch given more children than ina.p4 sums
(``INA_MAX_WORKERS``) makes the tree impossible: one :class:`PlanError` line names it.

Pure: the graph and the plan in, a :class:`workers.ina.tree.Tree` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import networkx as nx

from controller.plan.lp import PlanError
from controller.plan.types import JobPlan
from topo.models import natural_key
from topo.paths import ecmp_next_hops, hop_distance
from workers.ina.constants import MAX_WORKERS
from workers.ina.tree import SWITCH, WORKER, Child, Tree, TreeError

__all__ = ["aggregation_tree"]


def aggregation_tree(graph: nx.Graph, job: JobPlan, switch_ids: Mapping[str, int],
                     members: Sequence[str] | None = None, *, previous: Tree | None = None,
                     width: int = MAX_WORKERS) -> Tree:
    """The tree of ``job``'s ``members`` (default: its workers; a worker's id is its index
    in ``job.workers``) over the aggregation points ``job.deployed`` and ``job.ps_tor``
    (module doc).  ``previous``: the tree this one replaces (a fail-over or a member
    change): a child that keeps its parent keeps its index (:meth:`Tree.assign`)."""
    root = job.ps_tor
    points = set(job.deployed) | {root}
    index = {w: i for i, w in enumerate(job.workers)}
    members = list(job.workers if members is None else members)
    load: dict[str, int] = {}
    firsts: dict[str, list[str]] = {}

    def first_points(node: str) -> list[str]:
        """The aggregation points that come first on some shortest path node -> root."""
        if node in firsts:
            return firsts[node]
        out: set[str] = set()
        for nh in ecmp_next_hops(graph, node, root):
            out |= {nh} if nh in points else set(first_points(nh))
        firsts[node] = sorted(out, key=natural_key)
        return firsts[node]

    before: dict[Child, int] = {}  # a child's parent in ``previous``: kept when still a choice
    if previous is not None:
        before = {c: p for p, kids in previous.children.items() for c in kids if c is not None}

    def choose(node: str, child: Child) -> str:
        cands = first_points(node)
        if not cands:
            raise PlanError(f"{node}: no path to the PS's ToR {root}")
        kept = [s for s in cands if switch_ids[s] == before.get(child)]
        best = kept[0] if kept else min(cands, key=lambda s: (load.get(s, 0), natural_key(s)))
        load[best] = load.get(best, 0) + 1
        return best

    parent: dict[Child, str] = {}
    for w in sorted(members, key=natural_key):
        parent[Child(WORKER, index[w])] = choose(w, Child(WORKER, index[w]))
    # the points below first: a point's children are all farther from the root than it
    by_distance = sorted(points - {root},
                         key=lambda s: (-(hop_distance(graph, s, root) or 0), natural_key(s)))
    for s in by_distance:
        if load.get(s, 0):
            parent[Child(SWITCH, switch_ids[s])] = choose(s, Child(SWITCH, switch_ids[s]))
    names = {int(switch_ids[s]): s for s in points}
    tree = Tree.assign(int(switch_ids[root]),
                       {c: int(switch_ids[p]) for c, p in parent.items()},
                       names=names, previous=previous)
    try:
        tree.check_width(width)
    except TreeError as exc:
        raise PlanError(f"job with {len(members)} workers: {exc}") from None
    return tree
