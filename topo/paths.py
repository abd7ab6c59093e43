"""Deterministic ECMP: per-hop even split over shortest-path next hops (docs/design.md §3.2, option (b)).

One function family serves the planner's LP (:func:`ecmp_link_fractions` is the fractional
path set P_{u,t}) and the rule installer (:func:`ecmp_next_hops` is the next-hop list a switch
hashes a chunk over).  Same function → the LP's link loads are what the data plane does.

Model
    Distances are hop counts on the graph in which **hosts never forward**: a path may start or
    end at a host but never passes through one.  (This matters for BCube, whose own routing
    relays through servers; the INA data plane forwards only in P4 switches, so for the LP BCube
    servers are plain hosts.)  ``ecmp_next_hops(G, u, t)`` is the list of neighbours v of u that
    may carry traffic (a switch, or t itself) with ``dist(v, t) = dist(u, t) − 1``, in
    :func:`topo.models.natural_key` order.  Every node splits the traffic it holds for t evenly
    over that list; :func:`ecmp_link_fractions` propagates the split layer by layer (all next
    hops are exactly one hop closer, so one pass in decreasing distance is exact) and returns
    the fraction of u→t traffic on every directed link.  The data plane realises the same split
    by hashing (chunk id, switch id) over the same list (many chunks → even split).

Why (b), the even per-hop split, rather than (a), one hashed path per pair
    * It is what a data centre does (ECMP spreading), and on a fat-tree the per-hop split equals
      the even split over all equal-cost paths (every node at a given distance has the same
      number of next hops), so no link is a funnel: with one path per destination the PS's ToR
      downlinks are loaded unevenly and ToR-only γ drops (docs/design.md §3.2 measured 8× at k=16).
    * It makes every host whose neighbourhood (neighbours and link capacities) is identical —
      e.g. all hosts under one edge switch — *interchangeable*: their path sets differ only in
      their own access links.  Option (a) would break that symmetry with per-pair hashes.  The
      planner uses it to merge such workers into one LP variable per (group, switch) without
      changing the optimum (proof in :mod:`controller.plan.lp`).

Host routes (plain IPv4): one next hop per (switch, destination)
    An IPv4 /32 route has one next hop, so traffic the LP does not count -- the PS's unicast
    answers and NACKs to a worker's reply port, and every plain-IP method (async, cluster) --
    cannot be split per packet.  :func:`route_next_hop` picks, at each switch, one member of
    :func:`ecmp_next_hops` per destination by a stable hash of (switch, destination), so that
    one switch's routes toward many hosts spread over all its equal-cost next hops;
    :func:`route_path` is the one path that results.  The rule installer
    (``controller.dataplane.deploy.routing_rules``) writes exactly these hops, and the
    simulated network executes the installed rules.  Every route is still a shortest path
    (each hop is an ECMP next hop).  Over many destinations the per-destination choice
    approaches the LP's even split; for one destination it is one path, not a split.

Caching
    Per-destination BFS distances and per-pair fractions are cached for *frozen* graphs (all of
    :mod:`topo.models`' graphs are frozen), keyed weakly on the graph object; unfrozen graphs
    are recomputed on every call (they could change under us).
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from typing import Any

import networkx as nx

from topo.models import natural_key

__all__ = ["NoPathError", "ecmp_next_hops", "ecmp_link_fractions", "hop_distance", "reachable",
           "route_next_hop", "route_path", "switch_distances"]

Link = tuple[str, str]


class NoPathError(ValueError):
    """No host-free path from a source to a destination."""


class _Cache:
    def __init__(self, max_pairs: int = 200_000) -> None:
        self.dist: dict[str, dict[str, int]] = {}
        self.fractions: OrderedDict[tuple[str, str], tuple[tuple[Link, float], ...]] = (
            OrderedDict()
        )
        self.max_pairs = max_pairs


_CACHES: weakref.WeakKeyDictionary[Any, _Cache] = weakref.WeakKeyDictionary()


def _cache(graph: nx.Graph) -> _Cache | None:
    if not nx.is_frozen(graph):
        return None
    c = _CACHES.get(graph)
    if c is None:
        c = _CACHES[graph] = _Cache()
    return c


def _is_switch(graph: nx.Graph, node: str) -> bool:
    return graph.nodes[node].get("kind") == "switch"


def switch_distances(graph: nx.Graph, dst: str) -> dict[str, int]:
    """Hop distance to ``dst`` of every switch (and of ``dst``) over host-free paths."""
    c = _cache(graph)
    if c is not None and dst in c.dist:
        return c.dist[dst]
    if dst not in graph:
        raise NoPathError(f"unknown node {dst!r}")
    dist = {dst: 0}
    frontier = [dst]
    adj = graph.adj
    nodes = graph.nodes
    while frontier:
        nxt = []
        for u in frontier:
            du = dist[u] + 1
            for v in adj[u]:
                if v not in dist and nodes[v].get("kind") == "switch":
                    dist[v] = du
                    nxt.append(v)
        frontier = nxt
    if c is not None:
        c.dist[dst] = dist
    return dist


def hop_distance(graph: nx.Graph, node: str, dst: str) -> int | None:
    """Hops from ``node`` to ``dst`` without transiting hosts; ``None`` when unreachable."""
    dist = switch_distances(graph, dst)
    if node in dist:
        return dist[node]
    if node not in graph:
        raise NoPathError(f"unknown node {node!r}")
    best = [dist[v] for v in graph.adj[node] if v in dist]
    return 1 + min(best) if best else None


def reachable(graph: nx.Graph, src: str, dst: str) -> bool:
    """Whether ``src`` reaches ``dst`` over a host-free path."""
    return src == dst or hop_distance(graph, src, dst) is not None


def ecmp_next_hops(graph: nx.Graph, node: str, dst: str) -> list[str]:
    """The neighbours of ``node`` on shortest host-free paths to ``dst``, in name order.

    Empty when ``node == dst`` or ``dst`` is unreachable.
    """
    if node == dst:
        return []
    d = hop_distance(graph, node, dst)
    if d is None:
        return []
    dist = switch_distances(graph, dst)
    return sorted((v for v in graph.adj[node] if dist.get(v) == d - 1), key=natural_key)


def _route_index(node: str, dst: str, n: int) -> int:
    """The member of an ``n``-long next-hop list that ``node``'s route to ``dst`` takes.

    Why a keyed hash of both names, and not the destination's index among the hosts modulo
    ``n`` (Al-Fares' suffix routing):
      * jobs' workers are laid out with strides: at fat-tree k=16 with 4 jobs x 64 workers,
        job j's workers are h(16 i + 8 + j), whose index is j modulo 8 -- every route from the
        PSs' edge switch toward one job's workers would leave by the same of its 8 uplinks,
        the funnel the first-next-hop routes made (docs/results.md, issue 39).  A hash of the
        name has no such arithmetic resonance: there, each job's 64 workers fall 10-13 on
        the busiest uplink (8 even), the four jobs' 256 on 25-39 per uplink (32 even).
      * the switch's name is in the key so that each layer chooses afresh: with a key of
        the destination alone, an aggregation switch would receive from an edge only the
        destinations whose key picked it and send them all to one core.  The hash is
        blake2b, not crc32: crc32 is affine, crc32(a + h) ^ crc32(b + h) does not depend on
        h's content, so its low bits at two switches are the same choice again (measured
        there: 20 of the 64 agg-to-core links used, against 62 with blake2b).
      * names, not indices: the choice depends on nothing but the two nodes, so the
        simulated network (whose rules are computed without the idle hosts) installs the
        routes Mininet installs, and a route does not move when another host is added."""
    if n == 1:
        return 0
    digest = hashlib.blake2b(f"{node}>{dst}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def route_next_hop(graph: nx.Graph, node: str, dst: str) -> str | None:
    """The one next hop of ``node``'s plain-IPv4 route toward host ``dst``: a member of
    :func:`ecmp_next_hops` chosen by a stable hash of (``node``, ``dst``) (why:
    :func:`_route_index`).  ``None`` when ``node == dst`` or ``dst`` is unreachable."""
    hops = ecmp_next_hops(graph, node, dst)
    if not hops:
        return None
    return hops[_route_index(node, dst, len(hops))]


def route_path(graph: nx.Graph, src: str, dst: str) -> list[str]:
    """The nodes a plain-IPv4 packet from ``src`` to ``dst`` crosses, both ends included,
    following :func:`route_next_hop` at every hop (a shortest host-free path).

    Raises :class:`NoPathError` when there is none."""
    if src != dst and hop_distance(graph, src, dst) is None:
        raise NoPathError(f"no path from {src!r} to {dst!r} that does not cross a host")
    path = [src]
    while path[-1] != dst:
        nxt = route_next_hop(graph, path[-1], dst)
        assert nxt is not None  # every ECMP next hop is one hop closer and reachable
        path.append(nxt)
    return path


_KEYS: dict[str, tuple] = {}


def _name_key(name: str) -> tuple:
    """:func:`topo.models.natural_key`, memoised (millions of calls at fat-tree k = 32)."""
    key = _KEYS.get(name)
    if key is None:
        key = _KEYS[name] = natural_key(name)
    return key


def _fractions(graph: nx.Graph, src: str, dst: str) -> tuple[tuple[Link, float], ...]:
    c = _cache(graph)
    key = (src, dst)
    if c is not None:
        hit = c.fractions.get(key)
        if hit is not None:
            c.fractions.move_to_end(key)
            return hit
    if src == dst:
        out: tuple[tuple[Link, float], ...] = ()
    else:
        if hop_distance(graph, src, dst) is None:
            raise NoPathError(f"no path from {src!r} to {dst!r} that does not cross a host")
        loads: dict[Link, float] = {}
        layer: dict[str, float] = {src: 1.0}
        dist = switch_distances(graph, dst)
        adj = graph.adj
        while layer:
            nxt: dict[str, float] = {}
            for u, f in layer.items():
                du = dist.get(u)
                if du is None:  # src, a host: ecmp_next_hops works out its distance
                    hops = ecmp_next_hops(graph, u, dst)
                else:  # ecmp_next_hops inlined (the hot loop at fat-tree k = 32)
                    hops = sorted((v for v in adj[u] if dist.get(v) == du - 1), key=_name_key)
                share = f / len(hops)
                for v in hops:
                    loads[(u, v)] = loads.get((u, v), 0.0) + share
                    if v != dst:
                        nxt[v] = nxt.get(v, 0.0) + share
            layer = nxt
        out = tuple(loads.items())
    if c is not None:
        c.fractions[key] = out
        if len(c.fractions) > c.max_pairs:
            c.fractions.popitem(last=False)
    return out


def ecmp_link_fractions(graph: nx.Graph, src: str, dst: str) -> dict[Link, float]:
    """Fraction of ``src``→``dst`` traffic on every directed link ``(u, v)`` under per-hop
    even ECMP splitting.  Fractions leaving ``src`` (and entering ``dst``) sum to 1.

    Raises :class:`NoPathError` when there is no host-free path.
    """
    return dict(_fractions(graph, src, dst))
