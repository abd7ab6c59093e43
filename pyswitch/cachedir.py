"""pyswitch's caches (built native modules, the parser's tables) are trusted only when they
are ours: a folder owned by the effective user that nobody else may write, files created
0600 whatever the umask, lock files opened without following a symlink or truncating.

A cache entry is code (an extension module) or a pickle: a file another local user could
plant or replace would run as us.  These helpers say why a folder or file is not ours
(`NotOurs`); the callers then fall back to building without a cache, with that reason.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["NotOurs", "check_ours", "open_lock", "private_dir", "write_private"]


class NotOurs(OSError):
    """A cache folder or file that another user owns or may write: not trusted."""


def check_ours(st: os.stat_result, what: str, kind: str) -> None:
    """Raise NotOurs unless `st` is owned by the effective user and not writable by group or
    others (`kind` is "folder" or "file": what the entry must be)."""
    if kind == "folder" and not stat.S_ISDIR(st.st_mode):  # a mistake, not a trust issue
        raise NotADirectoryError(f"cache {what} is not a folder")
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        raise NotOurs(f"cache {what} is not a regular file")
    if st.st_uid != os.geteuid():
        raise NotOurs(f"cache {kind} {what} is owned by uid {st.st_uid}, not by us "
                      f"(uid {os.geteuid()})")
    if st.st_mode & 0o022:
        raise NotOurs(f"cache {kind} {what} is writable by group or others "
                      f"(mode {stat.S_IMODE(st.st_mode):o})")


def private_dir(path: Path) -> Path:
    """`path`, created (with every missing parent) mode 0700 whatever the umask, and checked
    to be ours: a folder owned by the effective user, not writable by group or others.
    Raises NotOurs (or another OSError: a file in the way, no permission)."""
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)  # the umask only removes bits: at most 0700
        except FileExistsError:  # created meanwhile (another switch starting): checked below
            continue
    check_ours(os.stat(path), str(path), "folder")
    return path


def open_lock(path: Path) -> int:
    """A descriptor on lock file `path`: created 0600, opened without following a symlink
    and without truncating (a planted link cannot make us clobber its target)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            # left by an older version under a loose umask, in a folder only we can
            # write: nobody else made it; its contents are never read. Tightened.
            os.fchmod(fd, 0o600)
            st = os.fstat(fd)
        check_ours(st, str(path), "file")
    except OSError:
        os.close(fd)
        raise
    return fd


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (a temporary file beside it, renamed over it), mode
    0600: readers never see half a file, and nobody else may write it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mkstemp: 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
