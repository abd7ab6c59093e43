"""Topology models: counts, naming, groups, reachability, file validation (docs/design.md §3.2)."""

import json

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo.models import (
    TopologyError,
    bcube,
    dumbbell,
    fat_tree,
    hosts,
    leaf_spine,
    load_json,
    natural_key,
    parse_topology,
    switch_ids,
    switches,
    to_dict,
)
from topo.symmetry import generators, is_automorphism
from workers.collective.bcube import level_group


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fat_tree_counts_and_degrees(k):
    g = fat_tree(k)
    assert len(hosts(g)) == k**3 // 4
    assert len(switches(g)) == 5 * k * k // 4
    assert hosts(g)[0] == "h0" and hosts(g)[-1] == f"h{k**3 // 4 - 1}"
    # every switch has k ports; every host one
    assert all(g.degree[s] == k for s in switches(g))
    assert all(g.degree[h] == 1 for h in hosts(g))
    assert g.number_of_edges() == 3 * k**3 // 4
    assert nx.is_connected(g)


def test_fat_tree_wiring_k4():
    g = fat_tree(4)
    assert sorted(g.adj["edge0"], key=natural_key) == ["agg0", "agg1", "h0", "h1"]
    # core 0,1 (group 0) join agg index 0 of every pod; core 2,3 agg index 1
    assert sorted(g.adj["core0"], key=natural_key) == ["agg0", "agg2", "agg4", "agg6"]
    assert sorted(g.adj["core3"], key=natural_key) == ["agg1", "agg3", "agg5", "agg7"]
    assert all(d["bw"] == 1.0 for _, _, d in g.edges(data=True))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 5), k=st.integers(1, 3))
def test_bcube_counts_and_level_groups(n, k):
    g = bcube(n, k)
    assert len(hosts(g)) == n**k
    assert len(switches(g)) == k * n ** (k - 1)
    assert all(g.degree[h] == k for h in hosts(g))  # one NIC per level
    assert all(g.degree[s] == n for s in switches(g))
    groups = g.graph["bcube_groups"]
    for lv in range(k):
        assert len(groups[lv]) == n ** (k - 1)
        for sw, members in groups[lv].items():
            assert g.nodes[sw]["level"] == lv
            assert sorted(g.adj[sw], key=natural_key) == sorted(members, key=natural_key)
            first = int(members[0][1:])
            # one-hop group = the servers differing only in digit lv (workers' addressing)
            assert [f"h{s}" for s in level_group(first, lv, n, k)] == members
    assert nx.is_connected(g)


@settings(max_examples=20, deadline=None)
@given(leaves=st.integers(1, 5), spines=st.integers(1, 4), hpl=st.integers(1, 4))
def test_leaf_spine_counts(leaves, spines, hpl):
    g = leaf_spine(leaves, spines, hpl)
    assert len(hosts(g)) == leaves * hpl
    assert len(switches(g)) == leaves + spines
    assert g.number_of_edges() == leaves * hpl + leaves * spines
    assert nx.is_connected(g)


def test_dumbbell():
    g = dumbbell(2, 3, bottleneck=0.5)
    assert hosts(g) == ["h0", "h1", "h2", "h3", "h4"]
    assert g.edges["left", "right"]["bw"] == 0.5
    assert sorted(g.adj["right"], key=natural_key) == ["h2", "h3", "h4", "left"]


def test_switch_ids_are_one_based_in_name_order():
    g = leaf_spine(2, 2, 1)
    assert switch_ids(g) == {"leaf0": 1, "leaf1": 2, "spine0": 3, "spine1": 4}
    g = fat_tree(4)
    ids = switch_ids(g)
    assert sorted(ids.values()) == list(range(1, 21))
    assert ids["agg0"] == 1 and ids["agg7"] == 8 and ids["core0"] == 9 and ids["edge7"] == 20


def test_natural_order():
    assert sorted(["h10", "h2", "h1"], key=natural_key) == ["h1", "h2", "h10"]


@pytest.mark.parametrize("spec,n_hosts,n_switches", [
    ("fattree:4", 16, 20), ("leafspine:2,1,4", 8, 3), ("bcube:4,2", 16, 8),
    ("dumbbell:2,2", 4, 2), ("fattree:4,10", 16, 20), ("dumbbell:1,1,0.5", 2, 2),
])
def test_parse_topology_specs(spec, n_hosts, n_switches):
    g = parse_topology(spec)
    assert (len(hosts(g)), len(switches(g))) == (n_hosts, n_switches)
    assert g.graph["spec"] == spec
    assert nx.is_frozen(g)


@pytest.mark.parametrize("spec", ["fattree:3", "fattree", "mesh:4", "leafspine:2,1", "bcube:1,2",
                                  "fattree:x", "fattree:4,-1", "dumbbell:0,2"])
def test_parse_topology_rejects(spec):
    with pytest.raises(TopologyError, match="fat|leaf|bcube|dumbbell|topology"):
        parse_topology(spec)


def test_json_round_trip(tmp_path):
    g = leaf_spine(2, 2, 2, bw=3.0)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(to_dict(g)))
    g2 = load_json(p)
    assert to_dict(g2) == to_dict(g)
    assert parse_topology(str(p)).number_of_edges() == g.number_of_edges()


BASE = {"hosts": ["a", "b"], "switches": ["s"], "links": [{"a": "a", "b": "s"},
                                                          {"a": "b", "b": "s", "bw": 2}]}


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["links"].append({"a": "a", "b": "zz"}), "unknown node 'zz'"),
    (lambda d: d["switches"].append("a"), "duplicate node name 'a'"),
    (lambda d: d.pop("links"), "missing key 'links'"),
    (lambda d: d["links"].append({"a": "s", "b": "s"}), "self-loop"),
    (lambda d: d["links"].append({"a": "s", "b": "a"}), "duplicates the link"),
    (lambda d: d["links"][0].update(bw=0), "bw must be a positive number"),
    (lambda d: d["links"][0].update(bw="fast"), "bw must be a positive number"),
    (lambda d: d.update(hosts="a"), "'hosts' must be a list"),
])
def test_json_validation_names_file_and_problem(tmp_path, mutate, needle):
    d = json.loads(json.dumps(BASE))
    mutate(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(TopologyError) as ei:
        load_json(p)
    assert str(p) in str(ei.value) and needle in str(ei.value)


def test_bad_json_syntax_and_missing_file(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"hosts": [')
    with pytest.raises(TopologyError, match=r"broken.json:1:\d+: bad JSON"):
        load_json(p)
    with pytest.raises(TopologyError, match="nope.json: cannot read"):
        load_json(tmp_path / "nope.json")


@pytest.mark.parametrize("spec", ["fattree:4", "leafspine:3,2,2"])
def test_symmetry_generators_are_automorphisms(spec):
    g = parse_topology(spec)
    gens = generators(g)
    assert gens  # fat-tree / leaf-spine have some
    assert all(is_automorphism(g, p) for p in gens)
    # a fake generator is rejected: swapping a host with a switch, or two non-twins
    assert not is_automorphism(g, {"h0": switches(g)[0], switches(g)[0]: "h0"})
