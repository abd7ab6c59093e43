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

import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

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


def _cache_file(test_fraction: float, seed: int) -> Path | None:
    """Where a split is kept between processes: ``$INSYNC_CACHE_DIR`` (default
    ``~/.cache/insync``), a folder this user owns and nobody else may write; None when
    there is none.  The name holds scikit-learn's version (read from its metadata, without
    importing it), whose ``train_test_split`` made the split."""
    try:
        version = importlib.metadata.version("scikit-learn")
        folder = Path(os.environ.get("INSYNC_CACHE_DIR") or Path.home() / ".cache" / "insync")
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except (OSError, importlib.metadata.PackageNotFoundError):
        return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    return folder / f"digits-split-{test_fraction!r}-{seed}-sklearn{version}.npz"


def load_digits_split(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Stratified, seeded split of the digits data set (see module docstring).

    The split is kept in a cache file (:func:`_cache_file`; plain arrays, read without
    pickle) so that the 65 processes of a 64-worker run do not each import scikit-learn
    (over a second of CPU apiece on our 2 cores); the file holds exactly the arrays
    scikit-learn returned."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    path = _cache_file(test_fraction, seed)
    if path is not None:
        try:
            with np.load(path, allow_pickle=False) as f:
                return Dataset(*(f[k] for k in ("x_train", "y_train", "x_test", "y_test")))
        except (OSError, KeyError, ValueError):
            pass  # absent or unreadable: made again below
    from sklearn.model_selection import train_test_split

    x, y = _digits()
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    data = Dataset(x_tr, y_tr, x_te, y_te)
    if path is not None:
        try:  # written beside, then renamed: a reader never sees half a file
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz",
                                             delete=False) as tmp:
                np.savez(tmp, x_train=x_tr, y_train=y_tr, x_test=x_te, y_test=y_te)
            os.replace(tmp.name, path)
        except OSError:
            pass
    return data


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
