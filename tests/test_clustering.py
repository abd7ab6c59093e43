"""k-means of node vectors, silhouette choice of k, and the temporary-PS (re-)election schedule."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from workers.cluster.clustering import (
    canonical_labels,
    choose_k,
    cluster_profile,
    cluster_workers,
    elect,
    epoch_of,
    kmeans_labels,
    ps_schedule,
)
from workers.cluster.features import load_profile, node_vectors

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "profiles" / "hetero8.json"


def _blobs(seed: int = 1) -> tuple[np.ndarray, tuple[int, ...]]:
    """Three tight, far-apart groups, members interleaved so the partition is not index order."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [0.0, 5.0, 5.0]])
    truth = (0, 1, 2, 1, 0, 2, 2, 1, 0, 1)
    x = centres[list(truth)] + rng.normal(0, 0.1, size=(len(truth), 3))
    return x, truth


def test_kmeans_recovers_obvious_groups_with_canonical_ids():
    x, truth = _blobs()
    for seed in range(3):
        assert kmeans_labels(x, 3, seed) == truth  # truth is already canonical
    assert canonical_labels([7, 7, 2, 7, 5, 2]) == (0, 0, 1, 0, 2, 1)


def test_silhouette_chooses_the_true_k():
    x, truth = _blobs()
    c = choose_k(x, range(2, 7), seed=0)
    assert c.k == 3 and c.labels == truth
    assert c.silhouette is not None and c.silhouette > 0.9
    assert c.members == [[0, 4, 8], [1, 3, 7, 9], [2, 5, 6]]
    # the given k wins over the silhouette when passed
    assert cluster_workers(x, k=2, seed=0).k == 2


def test_example_profile_splits_into_its_two_groups():
    prof = load_profile(EXAMPLE)
    vectors = node_vectors(prof.history(4), prof.weight_vector())
    c = cluster_workers(vectors, k=None, seed=0)
    assert c.k == 2
    assert [[prof.nodes[i] for i in m] for m in c.members] == [
        ["h1", "h2", "h3", "h4"], ["h5", "h6", "h7", "h8"]]
    assert cluster_profile(prof, 4, seed=0) == c
    # forcing k = 4 still never mixes the two groups
    four = cluster_profile(prof, 4, k=4, seed=0)
    assert four.k == 4 and all(max(m) < 4 or min(m) >= 4 for m in four.members)


def test_degenerate_inputs():
    same = np.ones((5, 2))
    assert choose_k(same, range(2, 5)).labels == (0,) * 5  # no silhouette anywhere -> 1 cluster
    assert choose_k(np.array([[0.0], [1.0]]), range(2, 4)).k == 1  # n = 2: silhouette undefined
    assert kmeans_labels(same, 1) == (0,) * 5
    with pytest.raises(ValueError, match="k must be in"):
        kmeans_labels(same, 6)
    with pytest.raises(ValueError, match="finite"):
        kmeans_labels([[np.nan], [1.0]], 1)


def test_reelection_schedule():
    members = [[0, 4, 8], [1, 3, 7, 9], [2]]
    R, periods = 3, 10
    sched = ps_schedule(members, periods, R, seed=5)
    assert len(sched) == periods
    assert [epoch_of(p, R) for p in range(periods)] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    for p, row in enumerate(sched):
        for c, s in enumerate(row):
            assert s in members[c]
        if p % R:  # inside an epoch the PS is kept
            assert row == sched[p - 1]
        elif p:  # at every re-election a cluster with >1 member gets a different PS
            assert row[0] != sched[p - 1][0] and row[1] != sched[p - 1][1]
            assert row[2] == 2  # a singleton keeps its only node
    # pure: recomputing, or computing a longer run, gives the same prefix
    assert ps_schedule(members, periods, R, seed=5) == sched
    assert ps_schedule(members, 2 * periods, R, seed=5)[:periods] == sched
    # R larger than the run: one election
    assert len(set(ps_schedule(members, periods, 100, seed=5))) == 1
    # R = 1: re-elected every period
    every = ps_schedule(members, 4, 1, seed=5)
    assert all(every[p][1] != every[p - 1][1] for p in range(1, 4))
    with pytest.raises(ValueError, match="re-election interval"):
        ps_schedule(members, 3, 0)


def test_election_is_uniform_over_members_and_seeded():
    counts = Counter(elect([3, 1, 2, 0], seed=s, epoch=0, cluster=0) for s in range(4000))
    assert set(counts) == {0, 1, 2, 3}
    assert all(850 < n < 1150 for n in counts.values())  # 1000 expected, > 4 sigma margin
    assert elect([3, 1, 2, 0], seed=9, epoch=2, cluster=1) == elect([0, 1, 2, 3], 9, 2, 1)
    excl = Counter(elect([0, 1, 2], seed=s, epoch=1, cluster=0, previous=1) for s in range(300))
    assert set(excl) == {0, 2}
    assert elect([4], seed=0, epoch=3, cluster=0, previous=4) == 4
