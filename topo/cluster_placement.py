"""Which server runs which node of a topology (``run --servers A,B,...``; docs/servers.md).

Pure logic, no I/O: the servers are names, the graph a :mod:`topo.models` graph.  The rule,
the same for every topology:

1. every switch's *tier* is its distance (in hops) to the nearest host: edge/leaf switches 1,
   fat-tree aggregation 2, cores 3;
2. if the switches span more than one tier, the *top tier* (fat-tree cores, leaf-spine
   spines) is set apart and the *pods* are the connected parts of the rest: a fat-tree pod
   (its edge and aggregation switches and their hosts), a leaf with its hosts; with one tier
   only (dumbbell, BCube, one switch) every switch is a pod with the hosts whose first switch
   (in name order) it is;
3. pods, in the name order of their first switch, go to the servers in contiguous blocks as
   even as possible (pod i of P to server ``i * N // P``), the top tier to the first server
   (the local one, where the controller runs);
4. more servers than pods is an error (a server would be empty).

Only links between nodes on different servers become tunnels (:attr:`Placement.tunnels`):
for a fat-tree, the aggregation--core links of the pods placed away from the first server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

from topo.models import natural_key

__all__ = ["PlacementError", "Placement", "parse_servers", "tiers", "pods", "place"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


class PlacementError(ValueError):
    """A ``--servers`` value or a placement that cannot be made (one line)."""


@dataclass(frozen=True)
class Placement:
    """Servers (the first is the local one), node -> server, and the links that cross
    servers (as ``(u, v)`` in name order, sorted)."""

    servers: tuple[str, ...]
    server_of: dict[str, str]
    tunnels: tuple[tuple[str, str], ...]

    def nodes_on(self, server: str) -> list[str]:
        """The nodes placed on ``server``, in name order."""
        return sorted((n for n, s in self.server_of.items() if s == server), key=natural_key)


def parse_servers(spec: str) -> tuple[str, ...]:
    """``A,B,...`` -> the server names (host names or IPv4 addresses), checked for form only:
    at least two, no empty or repeated name, no user part (``user@``: the run's own user)."""
    names = tuple(p.strip() for p in spec.split(","))
    if len(names) < 2:
        raise PlacementError(f"--servers {spec[:60]!r}: name at least two servers, the "
                             "local one first (A,B,...)")
    for name in names:
        if not name:
            raise PlacementError(f"--servers {spec[:60]!r}: an empty server name")
        if not _NAME.fullmatch(name):
            raise PlacementError(f"--servers: {name[:60]!r} is not a host name or address")
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise PlacementError(f"--servers: {dup} is named twice")
    return names


def tiers(graph: nx.Graph) -> dict[str, int]:
    """Every switch's distance in hops to its nearest host (a switch no host reaches: 0)."""
    kinds = dict(graph.nodes(data="kind"))
    hosts = [n for n, k in kinds.items() if k == "host"]
    dist = nx.multi_source_dijkstra_path_length(graph, hosts, weight=None) if hosts else {}
    return {n: int(dist.get(n, 0)) for n, k in kinds.items() if k == "switch"}


def _sorted(nodes: Iterable[str]) -> list[str]:
    return sorted(nodes, key=natural_key)


def pods(graph: nx.Graph) -> tuple[list[list[str]], list[str]]:
    """(pods, top tier) by rule 2 of the module docstring: each pod its nodes in name order,
    pods in the name order of their first switch."""
    kinds = dict(graph.nodes(data="kind"))
    tier = tiers(graph)
    switches = _sorted(tier)
    if not switches:
        raise PlacementError("the topology has no switch to place")
    top_tier = max(tier.values())
    if len({t for t in tier.values() if t > 0}) > 1:
        top = [s for s in switches if tier[s] == top_tier]
        rest = graph.subgraph(n for n in graph.nodes if n not in set(top))
        groups = [_sorted(c) for c in nx.connected_components(rest)]
    else:
        top = []
        members: dict[str, list[str]] = {s: [s] for s in switches}
        for h in _sorted(n for n, k in kinds.items() if k == "host"):
            first = _sorted(m for m in graph.neighbors(h) if kinds.get(m) == "switch")
            if not first:
                raise PlacementError(f"host {h} is linked to no switch: it cannot be placed "
                                     "(Mininet's cluster mode places a host with a switch)")
            members[first[0]].append(h)
        groups = [_sorted(g) for g in members.values()]
    stray = [g for g in groups if not any(kinds[n] == "switch" for n in g)]
    if stray:
        raise PlacementError(f"host {stray[0][0]} is linked to no switch below the top tier")

    def first_switch(group: list[str]) -> tuple:
        return natural_key(next(n for n in group if kinds[n] == "switch"))

    return sorted(groups, key=first_switch), top


def place(graph: nx.Graph, servers: tuple[str, ...] | list[str]) -> Placement:
    """Every node of ``graph`` on one of ``servers`` (module docstring: pods in contiguous
    blocks, the top tier on the first server)."""
    servers = tuple(servers)
    if not servers:
        raise PlacementError("--servers: no server")
    groups, top = pods(graph)
    if len(servers) > len(groups):
        raise PlacementError(f"--servers: {len(servers)} servers but the topology has only "
                             f"{len(groups)} pod{'s' if len(groups) != 1 else ''} to place "
                             "(name at most that many)")
    server_of = {n: servers[0] for n in top}
    for i, group in enumerate(groups):
        for n in group:
            server_of[n] = servers[i * len(servers) // len(groups)]
    tunnels = sorted((tuple(sorted((u, v), key=natural_key)) for u, v in graph.edges
                      if server_of[u] != server_of[v]),
                     key=lambda e: (natural_key(e[0]), natural_key(e[1])))
    return Placement(servers, server_of, tuple(tunnels))  # type: ignore[arg-type]
