"""A hierarchical job's aggregation tree, from the plan's deployment and the routing
(docs/protocol.md §5.1).

A job of more workers than the bitmap is wide is aggregated along a tree whose every switch
counts its own children: each worker sends its GRADs to the first aggregation point (a
switch of the plan's deployment, or the PS's ToR s_d) on a shortest path toward s_d, each
aggregation point sends its PARTIAL to the next one on such a path, and s_d, the root,
sends its PARTIAL to the PS.  Where equal-cost paths offer several first points, the child
goes to the one with the fewest children so far (ties in name order), so that a layer of
switches shares its children evenly; re-assigned (a member left, a switch died), a child
keeps its parent while that parent is still one of its choices with room, and its index there.

No switch takes more children than ina.p4 sums (``width``, ``INA_MAX_WORKERS``): a point
keeps one place for every aggregation point that may choose it as parent (so a point below
always finds its parent), and a worker whose first points are full goes to the points after
them toward the root; past a full root, to the nearest point with room off its shortest
paths (a detour: its GRADs take that point's shortest paths), and when no point has room to
the PS itself, which is a host and counts any number of children (its GRADs go to the PS
unaggregated, agg_id 0).  So every deployment gives a tree -- at budget 0 the root sums
``width`` workers and the PS the rest -- and :meth:`Tree.check_width` stays as the check of
what reaches the switches.

Pure: the graph and the plan in, a :class:`workers.ina.tree.Tree` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import networkx as nx

from controller.plan.lp import PlanError
from controller.plan.mcast_tree import result_tree
from controller.plan.types import JobPlan
from topo.models import natural_key
from topo.paths import ecmp_link_fractions, ecmp_next_hops, hop_distance
from workers.ina.constants import MAX_WORKERS
from workers.ina.tree import SWITCH, WORKER, Child, Tree, TreeError

__all__ = ["aggregation_tree", "tree_gamma", "tree_loads", "tree_streams", "without_switch"]


def aggregation_tree(graph: nx.Graph, job: JobPlan, switch_ids: Mapping[str, int],
                     members: Sequence[str] | None = None, *, previous: Tree | None = None,
                     width: int = MAX_WORKERS, reuse: bool = True) -> Tree:
    """The tree of ``job``'s ``members`` (default: its workers; a worker's id is its index
    in ``job.workers``) over the aggregation points ``job.deployed`` and ``job.ps_tor``
    (module doc).  ``previous``: the tree this one replaces (a fail-over or a member
    change): a child that keeps its parent keeps its index, and with ``reuse=False`` no
    new child takes an index ``previous`` had (:meth:`Tree.assign`)."""
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

    # one place kept at a point for every other point that may choose it (module doc)
    reserved: dict[str, int] = {}
    for q in points - {root}:
        for p in first_points(q):
            reserved[p] = reserved.get(p, 0) + 1

    before: dict[Child, int] = {}  # a child's parent in ``previous``: kept when still a choice
    if previous is not None:
        before = {c: p for p, kids in previous.children.items() for c in kids if c is not None}

    def room(s: str, child: Child) -> int:
        """Children ``s`` takes before ``child``: a worker leaves the places kept."""
        return width - reserved.get(s, 0) if child.kind == WORKER else width

    def choose(node: str, child: Child) -> str | None:
        """The point ``child`` (at ``node``) sends to: among the first points on its paths
        to the root with room, else among the points after those, and so on; past a full
        root, for a worker, the nearest point with room off its paths; None: the PS itself
        (no point has room)."""
        cands = first_points(node)
        if not cands:
            raise PlanError(f"{node}: no path to the PS's ToR {root}")
        seen: set[str] = set()
        while cands:
            free = [s for s in cands if load.get(s, 0) < room(s, child)]
            if free:
                kept = [s for s in free if switch_ids[s] == before.get(child)]
                best = kept[0] if kept else min(
                    free, key=lambda s: (load.get(s, 0), natural_key(s)))
                load[best] = load.get(best, 0) + 1
                return best
            seen |= set(cands)
            cands = sorted({t for s in cands for t in first_points(s)} - seen, key=natural_key)
        if child.kind == WORKER:
            # past a full root: the nearest point with room anywhere (a worker is a leaf:
            # no cycle); its GRADs go there on their own shortest paths, and that point's
            # PARTIAL up the tree as any other's
            free = [s for s in points if load.get(s, 0) < room(s, child)]
            if free:
                kept = [s for s in free if switch_ids[s] == before.get(child)]
                best = kept[0] if kept else min(free, key=lambda s: (
                    hop_distance(graph, node, s) or 0, load.get(s, 0), natural_key(s)))
                load[best] = load.get(best, 0) + 1
                return best
        return None

    parent: dict[Child, str | None] = {}
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
                       {c: 0 if p is None else int(switch_ids[p]) for c, p in parent.items()},
                       names=names, previous=previous, reuse=reuse)
    try:
        tree.check_width(width)
    except TreeError as exc:
        raise PlanError(f"job with {len(members)} workers: {exc}") from None
    return tree


def without_switch(tree: Tree, dead: int) -> Tree:
    """``tree`` without switch ``dead`` (a fail-over's rules until the re-assigned tree can
    take over): its children become children of the PS -- their packets, addressed to its
    retired id, reach the PS raw -- and so does a point left with no child; every other
    child keeps its parent and index, and no fan-in grows, so no slot of a round in flight
    waits for a child that does not come."""
    parent_of: dict[Child, int] = {Child(WORKER, w): 0 for w, f in tree.first.items() if f == 0}
    for s, kids in tree.children.items():
        for c in kids:
            if c is not None and c != Child(SWITCH, dead):
                parent_of[c] = 0 if s == dead else s
    while True:  # a point with no child left is no aggregation point: off its parent
        empty = [c for c, p in parent_of.items() if c.kind == SWITCH and p
                 and not any(q == c.id for q in parent_of.values())]
        if not empty:
            break
        for c in empty:
            del parent_of[c]
    return Tree.assign(tree.root, parent_of, names=tree.names, previous=tree, reuse=False)


def tree_gamma(graph: nx.Graph, job: JobPlan, tree: Tree, *, result_load: bool = True) -> float:
    """γ of a hierarchical job that follows ``tree``: the fluid rate of the LP's model
    (docs/design.md §3.3) for the tree's streams instead of the LP's interval split
    (:func:`tree_streams`): γ = min over links of bandwidth (``bw``, default 1) / streams,
    in the units of the plan's γ; 0 when the tree carries nothing."""
    units = tree_streams(graph, job, tree, result_load=result_load)
    return min((_bw(graph, e) / c for e, c in units.items() if c > 0), default=0.0)


def tree_loads(graph: nx.Graph, job: JobPlan, tree: Tree, *,
               result_load: bool = True) -> list[dict[str, float | str]]:
    """The tree's load on every directed link at its γ, in the form of a plan's ``loads``
    (``from``, ``to``, ``load`` = γ x streams, ``bw``): what a hierarchical launch's links
    are compared with (controller.experiment.prediction)."""
    units = tree_streams(graph, job, tree, result_load=result_load)
    g = min((_bw(graph, e) / c for e, c in units.items() if c > 0), default=0.0)
    return [{"from": u, "to": v, "load": g * c, "bw": _bw(graph, (u, v))}
            for (u, v), c in sorted(units.items()) if c > 0]


def tree_streams(graph: nx.Graph, job: JobPlan, tree: Tree, *,
                 result_load: bool = True) -> dict[tuple[str, str], float]:
    """Streams per directed link of a job that follows ``tree``, each of rate γ over the
    ECMP paths of its two ends, split evenly per hop as the LP splits them: each worker's
    GRADs to its first point (the PS for a child of the PS), each aggregation point's
    PARTIALs to its parent (the root's, and those of a point whose parent is the PS, to
    the PS); with ``result_load`` the PS's RESULTs on d->s_d and down the RESULT multicast
    tree (to every worker and deployed switch), one stream per link."""
    names = dict(tree.names)
    per_unit: dict[tuple[str, str], float] = {}

    def add(src: str, dst: str) -> None:
        for e, f in ecmp_link_fractions(graph, src, dst).items():
            per_unit[e] = per_unit.get(e, 0.0) + f

    def end(switch: int) -> str:
        return job.ps if switch == 0 else names[switch]

    for w, first in tree.first.items():
        add(job.workers[w], end(first))
    for s in tree.children:
        if tree.fan_in(s):
            add(names[s], end(tree.parent(s)))
    if result_load:
        per_unit[(job.ps, job.ps_tor)] = per_unit.get((job.ps, job.ps_tor), 0.0) + 1.0
        members = [job.workers[w] for w in tree.first]
        for p, kids in result_tree(graph, job.ps_tor, members, job.deployed).items():
            for c in kids:
                per_unit[(p, c)] = per_unit.get((p, c), 0.0) + 1.0
    return per_unit


def _bw(graph: nx.Graph, e: tuple[str, str]) -> float:
    return float(graph.edges[e].get("bw", 1.0))
