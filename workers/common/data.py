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
import math
import os
import stat
import sys
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


CACHE_MAX_BYTES = 4 << 20  # the split is ~0.5 MB; anything larger is not ours
N_DIGITS, N_PIXELS, N_CLASSES = 1797, 64, 10  # load_digits' shape


def _cache_file(test_fraction: float, seed: int) -> Path | None:
    """Where a split is kept between processes: ``$INSYNC_CACHE_DIR`` (default
    ``~/.cache/insync``), a folder this user owns and nobody else may write (created 0700);
    None when there is none.  The name holds scikit-learn's version (read from its metadata,
    without importing it), whose ``train_test_split`` made the split."""
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


class CacheError(ValueError):
    """A cache file that is not a split this code wrote (why, in a few words)."""


def check_split(data: Dataset, test_fraction: float) -> Dataset:
    """``data`` if it is a digits split with ``test_fraction`` held out: float32 features of
    64 finite pixels in [0, 1], int64 labels 0..9, as many of each as the split has; else
    CacheError."""
    n_test = math.ceil(test_fraction * N_DIGITS)  # as train_test_split rounds it
    for name, x, y, n in (("train", data.x_train, data.y_train, N_DIGITS - n_test),
                          ("test", data.x_test, data.y_test, n_test)):
        if x.dtype != np.float32 or x.shape != (n, N_PIXELS):
            raise CacheError(f"x_{name} is {x.dtype} {x.shape}, not float32 ({n}, {N_PIXELS})")
        if y.dtype != np.int64 or y.shape != (n,):
            raise CacheError(f"y_{name} is {y.dtype} {y.shape}, not int64 ({n},)")
        if not np.isfinite(x).all() or x.min() < 0.0 or x.max() > 1.0:
            raise CacheError(f"x_{name} has values outside [0, 1] (or NaN)")
        if y.min() < 0 or y.max() >= N_CLASSES:
            raise CacheError(f"y_{name} has labels outside 0..{N_CLASSES - 1}")
    return data


def _read_cache(path: Path, test_fraction: float) -> Dataset:
    """The split cached at ``path``, checked (:func:`check_split`); FileNotFoundError when
    there is none, CacheError when there is one this code cannot use.  Opened without
    following a link and without waiting on a FIFO; only a regular file of this user that
    nobody else may write is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheError("not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise CacheError("not this user's, or writable by others")
        if st.st_size > CACHE_MAX_BYTES:
            raise CacheError(f"{st.st_size} bytes, more than a split takes")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:
        try:
            with np.load(fh, allow_pickle=False) as f:
                if sorted(f.files) != ["x_test", "x_train", "y_test", "y_train"]:
                    raise CacheError(f"arrays {sorted(f.files)[:6]}, not a split's")
                arrays = [f[k] for k in ("x_train", "y_train", "x_test", "y_test")]
        except CacheError:
            raise
        except Exception as exc:  # noqa: BLE001 -- truncated, garbage, a pickle: any way
            raise CacheError(f"unreadable ({type(exc).__name__})") from None
    for a in arrays:
        a.setflags(write=False)
    return check_split(Dataset(*arrays), test_fraction)


def _write_cache(path: Path, data: Dataset) -> None:
    """Keep ``data`` at ``path``: written beside it (0600), then renamed over whatever had
    the name, so a reader never sees half a file; a failure only means no cache."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".npz")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)  # mkstemp's mode already; said, not assumed
            np.savez(fh, x_train=data.x_train, y_train=data.y_train, x_test=data.x_test,
                     y_test=data.y_test)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def load_digits_split(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Stratified, seeded split of the digits data set (see module docstring).

    The split is kept in a cache file (:func:`_cache_file`; plain arrays, read without
    pickle) so that the 65 processes of a 64-worker run do not each import scikit-learn
    (over a second of CPU apiece on our 2 cores); the file holds exactly the arrays
    scikit-learn returned.  A cache file that is not such a split (truncated, garbage,
    wrong shapes or types, labels outside 0..9, NaN, a FIFO, another user's) is made again
    from scikit-learn, with one line on stderr saying why."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    path = _cache_file(test_fraction, seed)
    if path is not None:
        try:
            return _read_cache(path, test_fraction)
        except FileNotFoundError:
            pass  # the first run: made below
        except (OSError, CacheError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"insync: digits cache {path}: {why}; made again from scikit-learn",
                  file=sys.stderr, flush=True)
    from sklearn.model_selection import train_test_split

    x, y = _digits()
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    data = Dataset(x_tr, y_tr, x_te, y_te)
    if path is not None:
        _write_cache(path, data)
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
    # the epochs in order, as np.unique gives them: np.unique imports numpy.ma on its first
    # call (about 40 ms of a worker's first round, 64 workers at once on 2 cores)
    for e in sorted(set(epochs.tolist())):
        perm = np.random.default_rng((seed, worker_id, int(e))).permutation(n)
        sel = epochs == e
        out[sel] = shard[perm[pos[sel] % n]]
    return out
