"""RESULT tree: reaches every worker and deployed switch exactly once."""

import networkx as nx
import pytest

from controller.plan.mcast_tree import result_tree


def _graph(links, hosts):
    g = nx.Graph()
    for a, b in links:
        for n in (a, b):
            g.add_node(n, kind="host" if n in hosts else "switch")
        g.add_edge(a, b)
    return g


def test_leaf_spine_tree_by_hand():
    # ps - leaf2 - spine - leaf1 - {w1, w2};  leaf3 - w3 ; spine2 unused
    links = [("ps", "leaf2"), ("leaf2", "spine"), ("leaf2", "spine2"), ("spine", "leaf1"),
             ("spine2", "leaf1"), ("spine", "leaf3"), ("spine2", "leaf3"),
             ("leaf1", "w1"), ("leaf1", "w2"), ("leaf3", "w3")]
    g = _graph(links, {"ps", "w1", "w2", "w3"})
    tree = result_tree(g, "leaf2", ["w1", "w2", "w3"], deployed=["leaf1"])
    # parents are the smallest-named switch one hop closer: spine (not spine2)
    assert tree == {"leaf1": ["w1", "w2"], "leaf2": ["spine"], "leaf3": ["w3"],
                    "spine": ["leaf1", "leaf3"]}


def test_deployed_switch_off_the_worker_tree_is_a_leaf():
    links = [("ps", "leaf2"), ("leaf2", "spine"), ("leaf2", "spine2"), ("spine", "leaf1"),
             ("spine2", "leaf1"), ("leaf1", "w1")]
    g = _graph(links, {"ps", "w1"})
    tree = result_tree(g, "leaf2", ["w1"], deployed=["spine2"])
    assert tree["spine2"] == []
    assert tree["leaf2"] == ["spine", "spine2"]
    # every target has exactly one parent
    parents = [c for kids in tree.values() for c in kids]
    assert sorted(parents) == sorted(set(parents))


def test_unreachable_worker_is_an_error():
    g = _graph([("ps", "s1"), ("w1", "s2")], {"ps", "w1"})
    with pytest.raises(ValueError, match="w1"):
        result_tree(g, "s1", ["w1"])
