"""The RESULT-tree term of the LP (controller.plan.lp.result_tree_coeffs), hand-computed.

fat-tree k=4, PS h0 (edge0), workers h1 (edge0), h2, h3 (edge1), h4 (edge2), S = {edge1},
all links capacity 1.  The RESULT tree from edge0 reaches edge1 through agg0 (the
smallest-named parent), so agg0→edge1 carries one RESULT stream besides any gradient that
h1 and h4 send to edge1 (split evenly over agg0 and agg1).
"""

import pytest

from controller.plan.lp import compute_loads, make_job, result_tree_coeffs, solve_lp
from controller.plan.lp_fast import FastLP
from topo.models import parse_topology

WORKERS = ["h1", "h2", "h3", "h4"]


@pytest.fixture(scope="module")
def graph():
    return parse_topology("fattree:4")


def test_tree_coefficients_by_hand(graph):
    job = make_job(graph, "h0", WORKERS, result_load=True)
    links = {e for e, _ in result_tree_coeffs(job, ["edge1"])}
    assert links == {("h0", "edge0"), ("edge0", "h1"), ("edge0", "agg0"), ("agg0", "edge1"),
                     ("edge1", "h2"), ("edge1", "h3"), ("agg0", "core0"),
                     ("core0", "agg2"), ("agg2", "edge2"), ("edge2", "h4")}


def test_result_stream_doubles_the_load_into_a_deployed_edge(graph):
    # All four workers aggregate at edge1 at γ = 1 (the docs/design.md §3.3 solution measured on the
    # testbed): h1's and h4's streams split over agg0/agg1 -> 1/2 + 1/2 on agg0->edge1, and
    # the RESULT stream adds 1 there: load 2 on a link of capacity 1.
    x = {(w, "edge1"): 1.0 for w in WORKERS}
    a = {"edge1": 1.0}
    plain = compute_loads(make_job(graph, "h0", WORKERS), ["edge1"], 1.0, x, a)
    with_results = compute_loads(make_job(graph, "h0", WORKERS, result_load=True),
                                 ["edge1"], 1.0, x, a)
    assert plain[("agg0", "edge1")] == pytest.approx(1.0)
    assert with_results[("agg0", "edge1")] == pytest.approx(2.0)
    assert with_results[("agg1", "edge1")] == pytest.approx(1.0)  # not on the tree


def test_result_aware_lp_routes_around_the_shared_link(graph):
    # Sending h1 and h4 raw to s_d instead keeps every link within capacity at γ = 1.
    job = make_job(graph, "h0", WORKERS, result_load=True)
    res = solve_lp(job, ["edge1"])
    assert res.gamma == pytest.approx(1.0)
    loads = compute_loads(job, ["edge1"], res.gamma, res.x, res.a)
    assert max(loads.values()) <= 1.0 + 1e-9
    assert loads[("agg0", "edge1")] == pytest.approx(
        res.gamma + (res.x["h1", "edge1"] + res.x["h4", "edge1"]) / 2)
    assert FastLP(job)(job, ["edge1"]).gamma == pytest.approx(res.gamma)


def test_result_load_does_not_change_the_leaf_spine_case():
    # RESULTs flow down (leaf2 → spine → leaf1 → w), gradients up: no shared direction.
    from topo.models import from_dict

    g = from_dict({"hosts": ["w1", "w2", "w3", "w4", "ps"], "switches": ["leaf1", "leaf2", "spine"],
                   "links": [{"a": w, "b": "leaf1"} for w in ["w1", "w2", "w3", "w4"]]
                   + [{"a": "ps", "b": "leaf2"}, {"a": "leaf1", "b": "spine"},
                      {"a": "leaf2", "b": "spine"}]})
    job = make_job(g, "ps", ["w1", "w2", "w3", "w4"], result_load=True)
    assert solve_lp(job, ["leaf1"]).gamma == pytest.approx(1.0)
    assert solve_lp(job, []).gamma == pytest.approx(0.25)
