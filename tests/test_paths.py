"""Per-hop even ECMP (docs/design.md §3.2 option (b)): next hops, fractions, host non-transit."""

from collections import Counter

import networkx as nx
import pytest

from topo.models import bcube, fat_tree, from_dict, leaf_spine
from topo.paths import NoPathError, ecmp_link_fractions, ecmp_next_hops, hop_distance


def _conservation(g, src, dst, fr):
    out = Counter()
    inn = Counter()
    for (u, v), f in fr.items():
        assert f > 0
        out[u] += f
        inn[v] += f
    assert out[src] == pytest.approx(1.0) and inn[dst] == pytest.approx(1.0)
    assert inn[src] == 0 and out[dst] == 0
    for n in set(out) | set(inn):
        if n not in (src, dst):
            assert out[n] == pytest.approx(inn[n])
            assert g.nodes[n]["kind"] == "switch"  # hosts never forward


def test_next_hops_fat_tree_k4():
    g = fat_tree(4)
    assert ecmp_next_hops(g, "h5", "h0") == ["edge2"]
    assert ecmp_next_hops(g, "edge2", "h0") == ["agg2", "agg3"]
    assert ecmp_next_hops(g, "agg2", "h0") == ["core0", "core1"]
    assert ecmp_next_hops(g, "core1", "h0") == ["agg0"]
    assert ecmp_next_hops(g, "edge0", "h0") == ["h0"]
    assert ecmp_next_hops(g, "h0", "h0") == []
    assert hop_distance(g, "h5", "h0") == 6


@pytest.mark.parametrize("src,dst", [("h5", "h0"), ("h2", "h0"), ("edge7", "edge0"),
                                     ("h15", "agg1"), ("core3", "h9")])
def test_fat_tree_per_hop_split_equals_even_split_over_all_shortest_paths(src, dst):
    g = fat_tree(4)
    fr = ecmp_link_fractions(g, src, dst)
    _conservation(g, src, dst, fr)
    # enumerate all shortest paths that transit switches only
    sw = [n for n, k in g.nodes(data="kind") if k == "switch"]
    sub = g.subgraph(sw + [src, dst])
    paths = list(nx.all_shortest_paths(sub, src, dst))
    use = Counter()
    for p in paths:
        for e in zip(p, p[1:], strict=False):
            use[e] += 1 / len(paths)
    assert fr.keys() == use.keys()
    for e in use:
        assert fr[e] == pytest.approx(use[e])


def test_remote_pod_fractions_by_hand():
    g = fat_tree(4)
    fr = ecmp_link_fractions(g, "h5", "h0")
    # h5 -> edge2 -> {agg2, agg3} (1/2 each) -> 2 cores each (1/4) -> agg0/agg1 (1/2) -> edge0
    assert fr[("h5", "edge2")] == 1.0
    assert fr[("edge2", "agg2")] == 0.5
    assert fr[("agg2", "core0")] == 0.25
    assert fr[("core0", "agg0")] == 0.25
    assert fr[("agg0", "edge0")] == 0.5
    assert fr[("edge0", "h0")] == 1.0
    assert len(fr) == 2 + 2 + 4 + 4 + 2


def test_per_hop_split_on_an_asymmetric_graph():
    # s0 has two next hops (a, b); b has two (c, d); so a gets 1/2, c and d 1/4 each.
    d = {"hosts": ["x", "y"], "switches": ["s0", "a", "b", "c", "d", "t"],
         "links": [{"a": "x", "b": "s0"}, {"a": "s0", "b": "a"}, {"a": "s0", "b": "b"},
                   {"a": "a", "b": "t"}, {"a": "b", "b": "t"}, {"a": "t", "b": "y"},
                   {"a": "b", "b": "c"}, {"a": "c", "b": "t"}]}
    g = from_dict(d)
    fr = ecmp_link_fractions(g, "x", "y")
    assert fr[("s0", "a")] == 0.5 and fr[("s0", "b")] == 0.5
    assert ("b", "c") not in fr  # b-c-t is longer than b-t
    _conservation(g, "x", "y", fr)


def test_hosts_never_transit_bcube():
    g = bcube(4, 2)
    # h1 (bc0_0, bc1_1) and h6 (bc0_1, bc1_2) share no switch: BCube would relay through a server, we must not
    with pytest.raises(NoPathError, match="h1.*h6"):
        ecmp_link_fractions(g, "h1", "h6")
    assert ecmp_next_hops(g, "h1", "h6") == []
    assert hop_distance(g, "h1", "h6") is None
    # servers of one level-0 group talk through their switch only
    assert ecmp_link_fractions(g, "h1", "h0") == {("h1", "bc0_0"): 1.0, ("bc0_0", "h0"): 1.0}


def test_leaf_spine_spreads_over_spines():
    g = leaf_spine(2, 3, 1)
    fr = ecmp_link_fractions(g, "h0", "h1")
    for j in range(3):
        assert fr[("leaf0", f"spine{j}")] == pytest.approx(1 / 3)


def test_unfrozen_graph_is_not_cached():
    g = nx.Graph()
    for n in ("x", "y"):
        g.add_node(n, kind="host")
    for n in ("a", "b"):
        g.add_node(n, kind="switch")
    g.add_edges_from([("x", "a"), ("a", "y")])
    assert ecmp_link_fractions(g, "x", "y") == {("x", "a"): 1.0, ("a", "y"): 1.0}
    g.add_edges_from([("x", "b"), ("b", "y")])
    assert ecmp_link_fractions(g, "x", "y")[("x", "b")] == 0.5
