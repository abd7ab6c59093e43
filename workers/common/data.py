"""The training data: scikit-learn's bundled digits, split, sharded and batched deterministically.

Everything is a pure function of ``(seed, worker_id, round)`` so that N worker processes on N
hosts and the single-process reference (``workers/common/model.py``) draw exactly the same samples.

Data
    ``sklearn.datasets.load_digits`` (1797 8x8 images, 10 classes, shipped inside
    scikit-learn: no download).  Features are the 64 pixel intensities divided by 16 (so in
    [0, 1]), float32.  Train/test split: stratified, ``test_fraction`` held out, shuffled with
    ``seed``.

Sharding
    The training indices are permuted with ``seed`` and cut into W contiguous shards whose
    sizes differ by at most one (``np.array_split``); worker w owns shard w.

Batches
    Worker w reads its shard as an endless stream of epochs; epoch e is the shard in the order
    of a permutation drawn from ``default_rng((seed, w, e))``.  Round r's batch is the stream
    positions ``[r*b, (r+1)*b)``.  Every worker uses the same batch size b, so the global batch
    of a round is the union of the W worker batches and the mean of the W worker gradients
    equals the gradient of the union (each loss is a mean over its b samples).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """A train/test split: features float32 (n, d), labels int64 (n,)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def n_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max()) + 1)


@cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int64)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


def load_digits_split(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Stratified, seeded split of the digits data set (see module docstring)."""
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    x, y = _digits()
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return Dataset(x_tr, y_tr, x_te, y_te)


def shard_indices(n: int, n_workers: int, seed: int = 0) -> list[np.ndarray]:
    """Cut ``range(n)`` into ``n_workers`` disjoint shards of near-equal size (seeded)."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    if n < n_workers:
        raise ValueError(f"cannot shard {n} samples over {n_workers} workers")
    perm = np.random.default_rng(seed).permutation(n)
    return [np.sort(s) for s in np.array_split(perm, n_workers)]


def batch_indices(
    shard: np.ndarray, round_: int, batch_size: int, seed: int, worker_id: int
) -> np.ndarray:
    """Indices (into the training set) of worker ``worker_id``'s batch in round ``round_``."""
    n = len(shard)
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch size {batch_size} must be in [1, shard size {n}]")
    if round_ < 0:
        raise ValueError(f"round must be >= 0, got {round_}")
    pos = round_ * batch_size + np.arange(batch_size)
    epochs = pos // n
    out = np.empty(batch_size, dtype=np.int64)
    for e in np.unique(epochs):
        perm = np.random.default_rng((seed, worker_id, int(e))).permutation(n)
        sel = epochs == e
        out[sel] = shard[perm[pos[sel] % n]]
    return out
