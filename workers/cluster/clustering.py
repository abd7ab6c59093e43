"""Clustering workers and electing temporary parameter servers (docs/design.md §7 steps 3, 4 and 7).

Pure functions of (vectors, seeds): no I/O, no global random state.

k-means
    scikit-learn's :class:`~sklearn.cluster.KMeans` (k-means++ initialisation, ``n_init=10``
    restarts, ``random_state=seed``), so the same vectors and seed give the same partition.
    Cluster ids are then renumbered canonically: cluster 0 is the one holding the lowest worker
    index, cluster 1 the one holding the lowest index not in cluster 0, and so on.  The labels
    are therefore a function of the *partition* only, not of k-means' internal numbering.

Choosing k
    With ``k=None`` every k in ``k_range`` (clipped to 2 … n−1, the range where the silhouette
    is defined) is tried and the k with the highest mean silhouette coefficient
    (:func:`sklearn.metrics.silhouette_score`, Euclidean) wins; ties go to the smaller k.  A k
    whose k-means run yields fewer than 2 distinct clusters (e.g. identical vectors) has no
    silhouette and is skipped; if no k qualifies (fewer than 3 workers, or fewer than 2 distinct
    vectors) all workers form one cluster.

Temporary PS election and re-election  [decision]
    Periods are numbered 0, 1, …; with re-election every R periods, *epoch* e = p // R covers
    periods e·R … e·R + R − 1, and each cluster keeps one temporary PS for a whole epoch.  In
    epoch e the PS of cluster c is drawn uniformly from the cluster's members with the RNG
    ``numpy.random.default_rng((seed, e, c))`` -- a pure function of (seed, epoch, cluster), so
    any process can compute the schedule independently and agree.  With ``avoid_repeat=True``
    (default) the draw excludes the previous epoch's PS when the cluster has more than one
    member: re-election exists to move the PS's traffic and work to another worker, and drawing the
    same worker again would silently skip that.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.cluster.features import NodeProfile, node_vectors

__all__ = [
    "Clustering",
    "canonical_labels",
    "choose_k",
    "cluster_workers",
    "cluster_profile",
    "elect",
    "epoch_of",
    "kmeans_labels",
    "ps_schedule",
]


@dataclass(frozen=True)
class Clustering:
    """A partition of workers 0 … n−1: ``labels[i]`` is worker i's cluster (canonical ids)."""

    labels: tuple[int, ...]
    silhouette: float | None  # mean silhouette of the partition (None when k = 1)

    @property
    def k(self) -> int:
        return len(set(self.labels))

    @property
    def members(self) -> list[list[int]]:
        """Worker indices of each cluster, ascending, in cluster-id order."""
        out: list[list[int]] = [[] for _ in range(self.k)]
        for worker, c in enumerate(self.labels):
            out[c].append(worker)
        return out


def canonical_labels(labels: Sequence[int] | np.ndarray) -> tuple[int, ...]:
    """Renumber cluster ids in order of first appearance (module docstring)."""
    mapping: dict[int, int] = {}
    return tuple(mapping.setdefault(int(lab), len(mapping)) for lab in labels)


def _as_vectors(vectors: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"need a (workers, features) matrix, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("node vectors must be finite")
    return x


def kmeans_labels(vectors: np.ndarray | Sequence[Sequence[float]], k: int,
                  seed: int = 0) -> tuple[int, ...]:
    """Canonical k-means labels of the rows of ``vectors`` (k given, seeded)."""
    from sklearn.cluster import KMeans

    x = _as_vectors(vectors)
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}] for {n} workers, got {k}")
    if k == 1:
        return (0,) * n
    with warnings.catch_warnings():
        # Fewer distinct points than k: scikit-learn warns and returns fewer clusters;
        # the caller sees that in the labels (choose_k skips such k).
        warnings.simplefilter("ignore", category=UserWarning)
        km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(x)
    return canonical_labels(km.labels_)


def _silhouette(x: np.ndarray, labels: Sequence[int]) -> float | None:
    from sklearn.metrics import silhouette_score

    k = len(set(labels))
    if not 2 <= k <= x.shape[0] - 1:
        return None
    return float(silhouette_score(x, np.asarray(labels)))


def choose_k(vectors: np.ndarray | Sequence[Sequence[float]], k_range: Sequence[int],
             seed: int = 0) -> Clustering:
    """The partition with the best silhouette over ``k_range`` (module docstring)."""
    x = _as_vectors(vectors)
    n = x.shape[0]
    best: Clustering | None = None
    for k in sorted(set(int(k) for k in k_range)):
        if not 2 <= k <= n - 1:
            continue
        labels = kmeans_labels(x, k, seed)
        s = _silhouette(x, labels)
        if s is None:
            continue
        if best is None or s > best.silhouette:  # type: ignore[operator]
            best = Clustering(labels, s)
    return best if best is not None else Clustering((0,) * n, None)


def cluster_workers(vectors: np.ndarray | Sequence[Sequence[float]], k: int | None = None,
                    k_range: Sequence[int] = range(2, 9), seed: int = 0) -> Clustering:
    """k-means with the given ``k``, or the silhouette-best k over ``k_range`` when None."""
    if k is None:
        return choose_k(vectors, k_range, seed)
    x = _as_vectors(vectors)
    labels = kmeans_labels(x, k, seed)
    return Clustering(labels, _silhouette(x, labels))


def cluster_profile(profile: NodeProfile, periods: int, k: int | None = None,
                    k_range: Sequence[int] = range(2, 9), seed: int = 0,
                    window: int | None = None) -> Clustering:
    """Cluster a profile's nodes (in ``profile.nodes`` order) after collecting ``periods``
    exchange periods of features: weighted normalized vectors of the latest period
    (:func:`workers.cluster.features.node_vectors`), then :func:`cluster_workers`."""
    if periods < 1:
        raise ValueError(f"need at least one period of features, got {periods}")
    vectors = node_vectors(profile.history(periods, window), profile.weight_vector())
    return cluster_workers(vectors, k, k_range, seed)


def epoch_of(period: int, reelect_every: int) -> int:
    """The election epoch of exchange period ``period`` when re-electing every R periods."""
    if reelect_every < 1:
        raise ValueError(f"re-election interval must be >= 1 period, got {reelect_every}")
    if period < 0:
        raise ValueError(f"period must be >= 0, got {period}")
    return period // reelect_every


def elect(members: Sequence[int], seed: int, epoch: int, cluster: int,
          previous: int | None = None) -> int:
    """The temporary PS of ``cluster`` in ``epoch``: uniform over ``members`` (minus
    ``previous`` when given and the cluster has other members), RNG (seed, epoch, cluster)."""
    if not members:
        raise ValueError(f"cluster {cluster} has no members")
    pool = sorted(members)
    if previous is not None and len(pool) > 1:
        pool = [m for m in pool if m != previous]
    rng = np.random.default_rng((seed, epoch, cluster))
    return int(pool[int(rng.integers(len(pool)))])


def ps_schedule(members: Sequence[Sequence[int]], periods: int, reelect_every: int,
                seed: int = 0, avoid_repeat: bool = True) -> list[tuple[int, ...]]:
    """Temporary PS of every cluster in every period: ``out[p][c]`` (module docstring).

    A new PS is drawn at the first period of every epoch (p % R == 0) and kept for R periods.
    """
    if periods < 0:
        raise ValueError(f"periods must be >= 0, got {periods}")
    if reelect_every < 1:
        raise ValueError(f"re-election interval must be >= 1 period, got {reelect_every}")
    out: list[tuple[int, ...]] = []
    current: tuple[int, ...] | None = None
    for p in range(periods):
        e = epoch_of(p, reelect_every)
        if p % reelect_every == 0:
            prev = current if (avoid_repeat and current is not None) else None
            current = tuple(
                elect(m, seed, e, c, prev[c] if prev is not None else None)
                for c, m in enumerate(members)
            )
        assert current is not None
        out.append(current)
    return out
