"""Contribution rule, plain average, bytes per link and the in-process clustered-PS training
(docs/design.md §7), against hand-traced numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from topo.models import dumbbell, fat_tree
from workers.cluster.clustering import cluster_workers
from workers.cluster.features import load_profile, node_vectors
from workers.cluster.sync import (
    ContributionTracker,
    TemporaryPS,
    busiest_link,
    central_period_messages,
    cluster_period_messages,
    combine,
    combine_all,
    link_bytes,
    plain_average,
    positive_cosine,
    simulate,
)
from workers.common.model import TrainConfig, load_data

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "profiles" / "hetero8.json"
R2 = math.sqrt(2.0)

# Hand trace, 3 clusters, 2 exchanges of 2-d averages:
#   period 1: g1=(1,0) g2=(1,1) g3=(-1,0): cos12 = 1/√2, cos13 = -1 -> 0, cos23 = -1/√2 -> 0
#   period 2: g1=(0,1) g2=(1,1) g3=(0,1):  cos12 = 1/√2, cos13 = 1,       cos23 = 1/√2
#   accumulated: c12 = √2, c13 = 1, c23 = 1/√2
P1 = [np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([-1.0, 0.0])]
P2 = [np.array([0.0, 1.0]), np.array([1.0, 1.0]), np.array([0.0, 1.0])]


def test_positive_cosine():
    assert positive_cosine(np.array([1.0, 0.0]), np.array([1.0, 1.0])) == pytest.approx(1 / R2)
    assert positive_cosine(np.array([1.0, 0.0]), np.array([-1.0, 0.1])) == 0.0
    assert positive_cosine(np.zeros(3), np.ones(3)) == 0.0
    with pytest.raises(ValueError, match="differ in length"):
        positive_cosine(np.ones(2), np.ones(3))


def test_contribution_accumulation_by_hand():
    t = ContributionTracker(3)
    t.record(P1)
    np.testing.assert_allclose(t.alpha("mean"), [[0, 1 / R2, 0], [1 / R2, 0, 0], [0, 0, 0]])
    t.record(P2)
    np.testing.assert_allclose(t.c, [[0, R2, 1], [R2, 0, 1 / R2], [1, 1 / R2, 0]])
    np.testing.assert_allclose(t.alpha("mean"), [[0, R2 / 2, 0.5], [R2 / 2, 0, R2 / 4],
                                                 [0.5, R2 / 4, 0]])
    s = 1 + R2  # row 1 sum; row 2: √2 + 1/√2 = 3/√2; row 3: 1 + 1/√2
    np.testing.assert_allclose(t.alpha("sum"), [
        [0, R2 / s, 1 / s],
        [R2 / (3 / R2), 0, (1 / R2) / (3 / R2)],
        [1 / (1 + 1 / R2), (1 / R2) / (1 + 1 / R2), 0]])
    assert np.allclose(t.alpha("sum").sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="normalization"):
        t.alpha("max")  # type: ignore[arg-type]


def test_combined_gradient_by_hand():
    t = ContributionTracker(3)
    t.record(P1)
    t.record(P2)
    u = combine_all(P2, t.alpha("mean"))
    # cluster 1: ((0,1) + (√2/2)(1,1) + 0.5 (0,1)) / (1 + √2/2 + 0.5) = ((√2/2)/d, 1), d = 1.5+√2/2
    d = 1.5 + R2 / 2
    np.testing.assert_allclose(u[0], [(R2 / 2) / d, 1.0], rtol=1e-6)
    # cluster 3: ((0,1) + 0.5 (0,1) + (√2/4)(1,1)) / (1 + 0.5 + √2/4) = ((√2/4)/d3, 1)
    d3 = 1.5 + R2 / 4
    np.testing.assert_allclose(u[2], [(R2 / 4) / d3, 1.0], rtol=1e-6)
    # cluster 2: ((1,1) + (√2/2)(0,1) + (√2/4)(0,1)) / (1 + 3√2/4)
    d2 = 1 + 3 * R2 / 4
    np.testing.assert_allclose(u[1], [1 / d2, 1.0], rtol=1e-6)
    assert all(x.dtype == np.float32 for x in u)
    # all alphas 1 is the plain average; all alphas 0 keeps the own average
    np.testing.assert_allclose(combine_all(P2, np.ones((3, 3)) - np.eye(3))[1],
                               plain_average(P2), rtol=1e-7)
    np.testing.assert_array_equal(combine(P2[0], P2[1:], [0.0, 0.0]), P2[0].astype(np.float32))
    np.testing.assert_allclose(plain_average(P1), [1 / 3, 1 / 3], rtol=1e-7)
    with pytest.raises(ValueError, match=">= 0"):
        combine(P2[0], P2[1:], [-1.0, 0.0])


def test_temporary_ps_state_machine_by_hand():
    # K = 2 clusters, B = 2 batches; this is cluster 0 with members {0, 1}.
    ps = TemporaryPS(0, [1, 0], n_clusters=2, batches_per_period=2)
    assert ps.add_gradient(0, 0, 0, np.array([2.0, 0.0])) is None
    assert ps.add_gradient(0, 0, 0, np.array([9.0, 9.0])) is None  # duplicate: ignored
    with pytest.raises(ValueError, match="not a member"):
        ps.add_gradient(0, 0, 2, np.zeros(2))
    with pytest.raises(ValueError, match="expected period 0 batch 0"):
        ps.add_gradient(0, 1, 1, np.zeros(2))
    np.testing.assert_array_equal(ps.add_gradient(0, 0, 1, np.array([0.0, 2.0])), [1.0, 1.0])
    assert ps.add_gradient(0, 0, 1, np.zeros(2)) is None  # late retransmission: ignored
    # The peer's average may come before ours is complete; our last gradient then finishes.
    assert ps.add_peer_average(0, 1, np.array([1.0, 1.0])) is None
    assert ps.add_gradient(0, 1, 0, np.array([1.0, 0.0])) is None
    u = ps.add_gradient(0, 1, 1, np.array([1.0, 0.0]))  # own average (1, 0)
    # α_01 = cos((1,0),(1,1)) / 1 period = 1/√2:  u = ((1,0) + (1/√2)(1,1)) / (1 + 1/√2)
    a = 1 / R2
    np.testing.assert_allclose(u, [(1 + a) / (1 + a), a / (1 + a)], rtol=1e-6)
    np.testing.assert_allclose(ps.last_alpha, [0.0, a])
    assert (ps.period, ps.batch, ps.own_average) == (1, 0, None)
    # Re-election between periods: the new PS keeps the accumulated contributions.
    new = ps.handover()
    assert new.tracker is ps.tracker and new.period == 1
    assert new.add_peer_average(0, 1, np.ones(2)) is None  # old period: ignored
    new.add_peer_average(1, 1, np.array([0.0, -1.0]))  # cos with (1,0) = 0 -> α = (1/√2)/2
    new.add_gradient(1, 0, 0, np.zeros(2))
    new.add_gradient(1, 0, 1, np.zeros(2))
    new.add_gradient(1, 1, 0, np.array([1.0, 0.0]))
    u2 = new.add_gradient(1, 1, 1, np.array([1.0, 0.0]))
    np.testing.assert_allclose(new.last_alpha, [0.0, a / 2])
    np.testing.assert_allclose(u2, [1 / (1 + a / 2), -(a / 2) / (1 + a / 2)], rtol=1e-6)
    with pytest.raises(ValueError, match="bad peer cluster"):
        new.add_peer_average(2, 0, np.zeros(2))
    with pytest.raises(ValueError, match="this PS is at period 2"):
        new.add_peer_average(4, 1, np.zeros(2))


def test_temporary_ps_buffers_an_early_next_period_average_and_lone_cluster():
    ps = TemporaryPS(1, [5], n_clusters=3, batches_per_period=1, rule="average")
    ps.add_peer_average(0, 0, np.array([3.0]))
    ps.add_peer_average(1, 0, np.array([30.0]))  # a fast peer is already in period 1
    assert ps.add_gradient(0, 0, 5, np.array([6.0])) is None  # still waiting for cluster 2
    np.testing.assert_allclose(ps.add_peer_average(0, 2, np.array([0.0])), [3.0])  # (3+6+0)/3
    ps.add_peer_average(1, 2, np.array([0.0]))
    np.testing.assert_allclose(ps.add_gradient(1, 0, 5, np.array([0.0])), [10.0])
    np.testing.assert_allclose(ps.last_alpha, [1.0, 0.0, 1.0])
    lone = TemporaryPS(0, [0, 1], n_clusters=1, batches_per_period=1)
    lone.add_gradient(0, 0, 0, np.array([1.0]))
    np.testing.assert_allclose(lone.add_gradient(0, 0, 1, np.array([3.0])), [2.0])
    assert lone.period == 1


def test_bytes_per_link_on_a_dumbbell_by_hand():
    g = dumbbell(4, 4)  # h0..h3 on 'left', h4..h7 on 'right'
    left, right = ["h0", "h1", "h2", "h3"], ["h4", "h5", "h6", "h7"]
    msgs = cluster_period_messages([left, right], ["h0", "h4"], batches=2, grad_bytes=100)
    loads = link_bytes(g, msgs)
    # 3 members x 2 batches x 100 into each PS, + the other PS's average (100)
    assert loads[("left", "h0")] == loads[("h0", "left")] == 700
    assert loads[("h1", "left")] == loads[("left", "h1")] == 200
    assert loads[("left", "right")] == loads[("right", "left")] == 100  # only the exchange
    assert busiest_link(loads) == (("h0", "left"), 700)  # ties: name order
    central = link_bytes(g, central_period_messages(left + right, "h0", 2, 100))
    assert central[("left", "h0")] == 7 * 200
    assert central[("right", "left")] == central[("left", "right")] == 4 * 200
    assert busiest_link(central) == (("h0", "left"), 1400)
    with pytest.raises(ValueError, match="not a member"):
        cluster_period_messages([left], ["h4"], 1, 1)
    with pytest.raises(ValueError, match="not in the topology"):
        link_bytes(g, [("h0", "h99", 1)])


def test_bytes_follow_the_installed_host_route_on_a_fat_tree():
    """A message takes its one /32 route (what deploy installs), not an even ECMP split."""
    from topo.paths import route_path

    g = fat_tree(4)
    loads = link_bytes(g, [("h1", "h15", 1000.0)])  # different pods: one of the 4 cores
    path = route_path(g, "h1", "h15")
    assert len(path) == 7 and path[0] == "h1" and path[-1] == "h15"
    assert loads == {link: 1000.0 for link in zip(path[:-1], path[1:], strict=True)}
    assert [v for v in path if v.startswith("core")] and loads[("h1", "edge0")] == 1000.0


@pytest.fixture(scope="module")
def setting():
    """8 workers from the example profile, clustered from 4 periods of features."""
    cfg = TrainConfig(n_workers=8, seed=0, batch_size=16)
    prof = load_profile(EXAMPLE)
    c = cluster_workers(node_vectors(prof.history(4), prof.weight_vector()), k=None, seed=0)
    assert c.labels == (0, 0, 0, 0, 1, 1, 1, 1)
    return cfg, c.labels, load_data(cfg), list(prof.nodes)


def test_in_process_training_all_methods_learn(setting):
    cfg, labels, data, hosts = setting
    g = fat_tree(4)  # workers on h1..h8, the central PS on h0
    P, B = 6, 5
    res = {m: simulate(cfg, labels, m, periods=P, batches_per_period=B, reelect_every=P,
                       seed=3, data=data, graph=g, hosts=hosts, central_ps="h0")
           for m in ("contribution", "average", "central")}
    for m, r in res.items():
        assert len(r.accuracy) == P
        assert r.final_accuracy > 0.75, (m, r.accuracy)  # chance is 0.1
        assert r.accuracy[0] < r.final_accuracy
    for m in ("contribution", "average"):
        r = res[m]
        for members in ([0, 1, 2, 3], [4, 5, 6, 7]):  # members of a cluster stay identical
            for i in members[1:]:
                np.testing.assert_array_equal(r.params[i], r.params[members[0]])
        assert not np.array_equal(r.params[0], r.params[4])  # clusters drift apart
        assert len(set(r.ps)) == 1  # R = P: one election
    alpha = res["contribution"].alpha[-1]
    assert alpha[0, 0] == 0 and 0 < alpha[0, 1] < 1 and alpha[0, 1] == alpha[1, 0]
    # Bytes: S = float32 gradient.  Central PS h0: 8 workers x B gradients in per period.
    S = 4.0 * res["central"].params[0].shape[0]
    assert res["central"].busiest_link == ("edge0", "h0")
    assert res["central"].busiest_link_bytes_per_period == 8 * B * S
    # Cluster method, fixed PSs: a PS link carries 3 members x B gradients + 1 exchanged average.
    r = res["contribution"]
    ps_hosts = {hosts[s] for s in r.ps[0]}
    assert r.busiest_link_bytes_per_period == 3 * B * S + S
    assert ps_hosts & set(r.busiest_link)
    assert res["average"].link_bytes == r.link_bytes  # same message pattern


def test_one_batch_periods_plain_average_equals_central(setting):
    # B = 1 and equal cluster sizes: the mean of the two cluster means is the mean of all 8.
    cfg, labels, data, _ = setting
    avg = simulate(cfg, labels, "average", periods=5, batches_per_period=1, data=data)
    cen = simulate(cfg, labels, "central", periods=5, batches_per_period=1, data=data)
    for p in avg.params:
        np.testing.assert_allclose(p, cen.params[0], atol=1e-6)
    # One cluster of all 8 workers is the central PS, bit for bit, for any B.
    one = simulate(cfg, [0] * 8, "contribution", periods=3, batches_per_period=2,
                   reelect_every=1, data=data)
    cen2 = simulate(cfg, labels, "central", periods=3, batches_per_period=2, data=data)
    for p in one.params:
        np.testing.assert_array_equal(p, cen2.params[0])
    assert one.accuracy == cen2.accuracy


def test_sum_normalization_with_two_clusters_is_the_plain_average(setting):
    # The documented reason "mean" is the default: with K = 2, "sum" gives alpha = 1.
    cfg, labels, data, _ = setting
    s = simulate(cfg, labels, "contribution", periods=3, batches_per_period=3, reelect_every=1,
                 normalization="sum", data=data)
    a = simulate(cfg, labels, "average", periods=3, batches_per_period=3, reelect_every=1,
                 data=data)
    assert all(np.array_equal(al, [[0, 1], [1, 0]]) for al in s.alpha)
    for ps, pa in zip(s.params, a.params, strict=True):
        np.testing.assert_array_equal(ps, pa)
    assert s.ps == a.ps  # same seed, same elections
    assert s.ps[0] != s.ps[1] != s.ps[2]  # re-elected every period


def test_include_current_false_keeps_own_average_first(setting):
    cfg, labels, data, _ = setting
    r = simulate(cfg, labels, "contribution", periods=2, batches_per_period=2,
                 include_current=False, data=data)
    assert np.array_equal(r.alpha[0], np.zeros((2, 2)))  # nothing accumulated before period 0
    assert r.alpha[1][0, 1] > 0
    with pytest.raises(ValueError, match="labels"):
        simulate(cfg, labels[:3], "average", 1, 1, data=data)
