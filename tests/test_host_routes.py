"""Plain-IPv4 /32 routes spread over the equal-cost next hops (topo.paths.route_next_hop,
controller.dataplane.deploy.routing_rules; issue 39's one-edge collapse)."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from controller.dataplane.deploy import routing_rules
from controller.experiment.simulate.network import active_graph
from topo.mininet_net import plan_network
from topo.models import parse_topology
from topo.paths import (
    NoPathError,
    ecmp_next_hops,
    hop_distance,
    route_next_hop,
    route_path,
)

ING = "MyIngress."


def _routes(graph: nx.Graph, net, switch: str) -> dict[str, int]:
    """host → the port of ``switch``'s /32 route to it, as routing_rules writes it."""
    addrs = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    rules = routing_rules(graph, net.ports, addrs, net.device_ids)
    ip_host = {i.ip: h for h, i in net.hosts.items()}
    return {ip_host[e.match["hdr.ipv4.dstAddr"][0]]: e.params["port"]
            for e in rules[switch].entries if e.table == ING + "ipv4_lpm"}


@pytest.fixture(scope="module")
def k4():
    g = parse_topology("fattree:4")
    return g, plan_network(g)


def test_fattree4_routes_by_hand(k4):
    """edge0 (ports agg0 1, agg1 2, h0 3, h1 4) and agg0 (core0 1, core1 2, edge0 3,
    edge1 4): each host's /32 port, pinned.  With the first ECMP next hop every remote host
    left edge0 by port 1 and agg0 by port 1; now both uplinks carry routes, and the hosts
    below a switch keep their one downward port."""
    g, net = k4
    assert net.ports["edge0"] == {"agg0": 1, "agg1": 2, "h0": 3, "h1": 4}
    assert net.ports["agg0"] == {"core0": 1, "core1": 2, "edge0": 3, "edge1": 4}
    edge0 = _routes(g, net, "edge0")
    assert edge0 == {"h0": 3, "h1": 4, "h2": 1, "h3": 2, "h4": 2, "h5": 2, "h6": 2, "h7": 1,
                     "h8": 2, "h9": 1, "h10": 2, "h11": 2, "h12": 1, "h13": 1, "h14": 2,
                     "h15": 2}
    agg0 = _routes(g, net, "agg0")
    assert agg0 == {"h0": 3, "h1": 3, "h2": 4, "h3": 4, "h4": 1, "h5": 2, "h6": 2, "h7": 1,
                    "h8": 2, "h9": 2, "h10": 2, "h11": 1, "h12": 1, "h13": 1, "h14": 1,
                    "h15": 2}
    # make run's job (PS h0, workers h2-h7): the PS's unicast leaves edge0 by both uplinks
    assert Counter(edge0[h] for h in ("h2", "h3", "h4", "h5", "h6", "h7")) == {1: 2, 2: 4}
    # a core has one path down to each host
    core0 = _routes(g, net, "core0")
    assert all(core0[f"h{i}"] == net.ports["core0"][f"agg{2 * (i // 4)}"] for i in range(16))


@pytest.mark.parametrize("topo", ["fattree:4", "leafspine:3,2,2", "bcube:3,1"])
def test_every_route_is_a_shortest_path(topo):
    g = parse_topology(topo)
    hosts = [n for n, k in g.nodes(data="kind") if k == "host"]
    switches = [n for n, k in g.nodes(data="kind") if k == "switch"]
    for s in switches:
        for h in hosts:
            hop = route_next_hop(g, s, h)
            if hop is None:
                assert hop_distance(g, s, h) is None
                continue
            assert hop in ecmp_next_hops(g, s, h)
    for a in hosts:
        for b in hosts:
            if hop_distance(g, a, b) is None:
                with pytest.raises(NoPathError):
                    route_path(g, a, b)
                continue
            path = route_path(g, a, b)
            assert path[0] == a and path[-1] == b
            assert len(path) == (hop_distance(g, a, b) or 0) + 1
            assert all(g.has_edge(u, v) for u, v in zip(path, path[1:], strict=False))
            assert all(g.nodes[n]["kind"] == "switch" for n in path[1:-1])


def test_routes_are_deterministic_and_ignore_idle_hosts(k4):
    """The same routes from a fresh graph, and from the graph without idle hosts (the
    simulated network computes its rules on that one: simulate.network.active_graph)."""
    g, net = k4
    again = parse_topology("fattree:4")
    used = {"h0", "h2", "h5", "h7", "h12"}
    small = active_graph(g, used)
    for s in ("edge0", "agg0", "agg3", "core2", "edge5"):
        full = _routes(g, net, s)
        assert _routes(again, net, s) == full
        assert _routes(small, net, s) == {h: p for h, p in full.items() if h in used}


def test_one_edge_unicast_spreads_over_its_uplinks():
    """k=16, 4 jobs x 64 workers (bench/sim_scale.py's layout: job j's workers
    h(16 i + 8 + j)), the four PSs on edge0: the routes from edge0 to the 256 workers use
    all 8 uplinks, 25-39 each (32 even; before: all 256 on agg0), each job's 64 at most 13
    on one (8 even); and the routes on from the aggregation switches toward the 240 workers
    in other pods use 62 of pod 0's 64 agg-to-core links, at most 9 each."""
    g = parse_topology("fattree:16")
    jobs = [[f"h{16 * i + 8 + j}" for i in range(64)] for j in range(4)]
    per_uplink = Counter(route_next_hop(g, "edge0", h) for job in jobs for h in job)
    assert set(per_uplink) == {f"agg{i}" for i in range(8)}
    assert min(per_uplink.values()) == 25 and max(per_uplink.values()) == 39
    for job in jobs:
        assert max(Counter(route_next_hop(g, "edge0", h) for h in job).values()) <= 13
    core_links: Counter[tuple[str, str]] = Counter()
    for job in jobs:
        for h in job:
            agg = route_next_hop(g, "edge0", h)
            assert agg is not None
            if len(ecmp_next_hops(g, agg, h)) > 1:  # h in another pod
                core_links[(agg, route_next_hop(g, agg, h))] += 1
    assert sum(core_links.values()) == 240
    assert len(core_links) == 62 and max(core_links.values()) == 9
