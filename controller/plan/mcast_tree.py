"""The RESULT (ACK) distribution tree of a job.

The PS sends each RESULT once, to its ToR s_d; switches release the chunk's slot and
replicate the packet down a tree that must reach

* every worker (they apply the result), and
* every deployed aggregation switch (it must see the RESULT to release its slot, docs/design.md §3.7),

with each of them receiving exactly one copy.  We take the shortest-path tree rooted at s_d
over the switch graph (parents chosen deterministically: the smallest-named neighbour one hop
closer to s_d), keep only the branches that lead to a worker or a deployed switch, and give
each switch the list of its children.  Hosts never forward, so the tree runs over switches and
ends at worker hosts.

Pure function of the topology: the installer turns ``children[switch]`` into one multicast
group per (switch, job) whose members are the ports facing those children.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import networkx as nx

from topo.paths import switch_distances

Link = tuple[str, str]


def result_tree(
    graph: nx.Graph, root: str, workers: Iterable[str], deployed: Iterable[str] = ()
) -> dict[str, list[str]]:
    """Children of every switch in the RESULT tree rooted at ``root`` (the PS's ToR).

    Returns ``{switch: sorted children}`` for every switch on the tree (a leaf switch that
    must only release its slots maps to ``[]``).  Raises ``ValueError`` when a worker or a
    deployed switch cannot be reached from ``root`` through switches.
    """
    switches = {n for n, kind in graph.nodes(data="kind") if kind == "switch"}
    if root not in switches:
        raise ValueError(f"tree root {root!r} is not a switch")
    # BFS over switches only: hosts are leaves.
    dist = nx.single_source_shortest_path_length(graph.subgraph(switches), root)
    targets = set(workers) | set(deployed)
    children: dict[str, set[str]] = {}

    def parent_of(node: str) -> str:
        if graph.nodes[node].get("kind") == "switch":
            options = [n for n in graph.neighbors(node) if dist.get(n, -2) == dist[node] - 1]
        else:  # a worker host hangs off its (smallest-named) attached switch
            options = [n for n in graph.neighbors(node) if n in dist]
        if not options:
            raise ValueError(f"{node!r} is not reachable from {root!r} through switches")
        return min(options)

    for target in sorted(targets):
        if target == root:
            children.setdefault(root, set())
            continue
        if target in switches:
            if target not in dist:
                raise ValueError(f"{target!r} is not reachable from {root!r} through switches")
            children.setdefault(target, set())
        node = target
        while node != root:
            parent = parent_of(node)
            children.setdefault(parent, set()).add(node)
            node = parent
    children.setdefault(root, set())
    return {s: sorted(c) for s, c in sorted(children.items())}


# per frozen graph: root -> {switch: parent}, and (root, switch) -> root path
_PARENTS: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def switch_parents(graph: nx.Graph, root: str) -> dict[str, str]:
    """The tree parent of every switch reachable from ``root`` through switches (``root``
    itself excluded), by :func:`result_tree`'s rule (the smallest-named neighbour one hop
    closer); one BFS, cached per frozen graph."""
    cache = _PARENTS.setdefault(graph, {}) if nx.is_frozen(graph) else {}
    hit = cache.get(root)
    if hit is not None:
        return hit
    if root not in graph or graph.nodes[root].get("kind") != "switch":
        raise ValueError(f"tree root {root!r} is not a switch")
    adj = graph.adj
    dist = switch_distances(graph, root)  # BFS over switches only, as result_tree's
    hit = cache[root] = {
        n: min(v for v in adj[n] if dist.get(v, -2) == d - 1)
        for n, d in dist.items() if n != root
    }
    return hit


def root_path(graph: nx.Graph, root: str, switch: str) -> frozenset[Link]:
    """The links (parent, child) from ``root`` down to ``switch``: the links of
    ``result_tree(graph, root, (), [switch])`` (every node has one parent whatever the
    targets), without a BFS per switch; cached per frozen graph."""
    cache = _PARENTS.setdefault(graph, {}) if nx.is_frozen(graph) else {}
    key = (root, switch)
    hit = cache.get(key)
    if hit is None:
        parent = switch_parents(graph, root)
        if switch != root and switch not in parent:
            raise ValueError(f"{switch!r} is not reachable from {root!r} through switches")
        links = []
        node = switch
        while node != root:
            links.append((parent[node], node))
            node = parent[node]
        hit = cache[key] = frozenset(links)
    return hit
