"""The digits cache (issue 43): a cache file that is not a split this code wrote --
truncated, garbage, wrong shapes or dtypes, labels outside 0-9, NaN, a FIFO, a link, another
user's -- is made again from scikit-learn with one line on stderr, never a traceback, a hang
or silently used; the cache is 0600 in a 0700 folder whatever the umask."""

from __future__ import annotations

import io
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from workers.common import data as data_mod
from workers.common.data import load_digits_split


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, bytes]:
    """The split scikit-learn makes, and the cache file this code writes for it."""
    folder = tmp_path_factory.mktemp("ref")
    os.environ["INSYNC_CACHE_DIR"] = str(folder)
    try:
        d = load_digits_split(0.2, 0)
        (path,) = folder.glob("digits-split-*.npz")
        return ({k: np.array(getattr(d, k)) for k in ("x_train", "y_train", "x_test",
                                                     "y_test")}, path.read_bytes())
    finally:
        del os.environ["INSYNC_CACHE_DIR"]


def _npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _changed(ref: dict, **kw: np.ndarray) -> bytes:
    return _npz(**{**ref, **kw})


# name -> (what to put at the cache path, what the line says)
Maker = Callable[[Path, dict, bytes], None]


def _bytes(f: Callable[[dict, bytes], bytes]) -> Maker:
    def make(path: Path, ref: dict, good: bytes) -> None:
        path.write_bytes(f(ref, good))
        path.chmod(0o600)
    return make


def _fifo(path: Path, ref: dict, good: bytes) -> None:
    os.mkfifo(path, 0o600)


def _dir(path: Path, ref: dict, good: bytes) -> None:
    path.mkdir()


def _link(path: Path, ref: dict, good: bytes) -> None:
    elsewhere = path.parent.parent / f"{path.parent.name}-elsewhere.npz"
    elsewhere.write_bytes(good)
    path.symlink_to(elsewhere)


def _mode(mode: int) -> Maker:
    def make(path: Path, ref: dict, good: bytes) -> None:
        path.write_bytes(good)
        path.chmod(mode)
    return make


def _huge(path: Path, ref: dict, good: bytes) -> None:
    with open(path, "wb") as f:
        f.truncate(64 << 20)
    path.chmod(0o600)


def _nan(ref: dict, good: bytes) -> bytes:
    x = ref["x_train"].copy()
    x[3, 5] = np.nan
    return _changed(ref, x_train=x)


def _label(value: int) -> Callable[[dict, bytes], bytes]:
    def f(ref: dict, good: bytes) -> bytes:
        y = ref["y_test"].copy()
        y[0] = value
        return _changed(ref, y_test=y)
    return f


CASES: dict[str, tuple[Maker, str]] = {
    "truncated": (_bytes(lambda r, g: g[: len(g) // 2]), "unreadable"),
    "garbage": (_bytes(lambda r, g: os.urandom(5000)), "unreadable"),
    "empty": (_bytes(lambda r, g: b""), "unreadable"),
    "zip_of_nothing": (_bytes(lambda r, g: _npz()), "arrays [], not a split's"),
    "missing_array": (_bytes(lambda r, g: _npz(x_train=r["x_train"])), "not a split's"),
    "extra_array": (_bytes(lambda r, g: _changed(r, z=np.zeros(1))), "not a split's"),
    "pickled_object": (_bytes(lambda r, g: _changed(r, y_test=np.array([{}], dtype=object))),
                       "unreadable"),
    "x_wrong_shape": (_bytes(lambda r, g: _changed(r, x_train=r["x_train"][:10])),
                      "x_train is float32 (10, 64)"),
    "x_wrong_dtype": (_bytes(lambda r, g: _changed(r, x_test=r["x_test"].astype(np.float64))),
                      "x_test is float64"),
    "y_wrong_dtype": (_bytes(lambda r, g: _changed(r, y_train=r["y_train"].astype(np.int8))),
                      "y_train is int8"),
    "y_2d": (_bytes(lambda r, g: _changed(r, y_test=r["y_test"][:, None])), "y_test is int64"),
    "label_10": (_bytes(_label(10)), "labels outside 0..9"),
    "label_minus_1": (_bytes(_label(-1)), "labels outside 0..9"),
    "nan_feature": (_bytes(_nan), "NaN"),
    "feature_over_1": (_bytes(lambda r, g: _changed(r, x_test=r["x_test"] * 3)),
                       "outside [0, 1]"),
    "fifo": (_fifo, "not a regular file"),
    "symlink": (_link, "symbolic links"),
    "writable_by_others": (_mode(0o666), "writable by others"),
    "huge": (_huge, "more than a split takes"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_cache_file_is_made_again_with_one_line(name, reference, tmp_path, monkeypatch,
                                                      capfd):
    ref, good = reference
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("INSYNC_CACHE_DIR", str(folder))
    path = data_mod._cache_file(0.2, 0)
    make, needle = CASES[name]
    make(path, ref, good)
    got: list = []
    t = threading.Thread(target=lambda: got.append(load_digits_split(0.2, 0)), daemon=True)
    t.start()
    t.join(timeout=60)
    assert got, "load_digits_split hung"
    d = got[0]
    for k, v in ref.items():
        np.testing.assert_array_equal(getattr(d, k), v)
        assert getattr(d, k).dtype == v.dtype
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"insync: digits cache {path}: "), err
    assert needle in err and err.endswith("; made again from scikit-learn\n"), err
    # made again: a regular 0600 file of this user, read back without a word
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert path.read_bytes() == good
    load_digits_split(0.2, 0)
    assert capfd.readouterr().err == ""


def test_a_directory_named_like_the_cache_costs_a_line_each_time_not_a_traceback(
        reference, tmp_path, monkeypatch, capfd):
    ref, _ = reference
    monkeypatch.setenv("INSYNC_CACHE_DIR", str(tmp_path))
    data_mod._cache_file(0.2, 0).mkdir()
    for _ in range(2):
        np.testing.assert_array_equal(load_digits_split(0.2, 0).y_test, ref["y_test"])
        assert "not a regular file" in capfd.readouterr().err


def test_another_users_cache_file_is_not_read(reference, tmp_path, monkeypatch, capfd):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    ref, good = reference
    monkeypatch.setenv("INSYNC_CACHE_DIR", str(tmp_path))
    path = data_mod._cache_file(0.2, 0)
    path.write_bytes(good)
    os.chown(path, 65534, 65534)
    path.chmod(0o600)
    np.testing.assert_array_equal(load_digits_split(0.2, 0).x_test, ref["x_test"])
    assert "not this user's" in capfd.readouterr().err
    assert os.lstat(path).st_uid == 0


@pytest.mark.parametrize("mask", [0o000, 0o022])
def test_the_cache_is_0600_in_a_0700_folder_whatever_the_umask(reference, tmp_path,
                                                               monkeypatch, mask):
    folder = tmp_path / "new" / "cache"
    monkeypatch.setenv("INSYNC_CACHE_DIR", str(folder))
    old = os.umask(mask)
    try:
        load_digits_split(0.2, 0)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    (path,) = folder.glob("digits-split-*.npz")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_folder_others_may_write_is_not_used(tmp_path, monkeypatch):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv("INSYNC_CACHE_DIR", str(folder))
    assert data_mod._cache_file(0.2, 0) is None
    load_digits_split(0.2, 0)
    assert list(folder.iterdir()) == []
