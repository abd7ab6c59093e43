"""Writing result and plan files: atomically, so an interrupted run never leaves half a file.

The writer lives in :mod:`workers.common.files` (host processes write their reports with it
and must not import ``controller``); the controller uses it from here.
:func:`check_output_file` lets a command refuse an output path it could never write *before*
it does its work (an LP, a run), instead of failing at the end with nothing to show.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from workers.common.files import write_json_atomic

__all__ = ["write_json_atomic", "check_output_file", "OutputPathError"]


class OutputPathError(ValueError):
    """An output path that cannot be written (one line naming it)."""


def check_output_file(path: str | Path, option: str) -> Path:
    """Check that ``path`` can later be written by :func:`write_json_atomic`; raise
    :class:`OutputPathError` naming ``option`` and the path otherwise.

    Permission bits alone do not answer this for root (who ignores them) nor on read-only
    file systems, so the nearest existing folder is probed by creating and removing a
    temporary file in it; nothing is left behind and no missing folder is created yet.
    """
    text = str(path)
    if not text.strip():
        raise OutputPathError(f"{option}: empty path")
    if "\0" in text:
        raise OutputPathError(f"{option} {text!r}: a path cannot contain a NUL byte")
    p = Path(text)
    try:  # stat() itself fails on a name longer than the file system allows
        if p.is_dir() or text.endswith(os.sep):
            raise OutputPathError(f"{option} {text}: is a directory; give a file name")
        if p.exists() and not p.is_file():
            raise OutputPathError(f"{option} {text}: exists and is not a regular file")
        folder = next((d for d in (p.parent, *p.parent.parents) if d.exists()), Path("."))
    except OSError as exc:
        raise OutputPathError(f"{option} {text[:80]}…: {exc.strerror or exc}") from None
    if not folder.is_dir():
        raise OutputPathError(f"{option} {text}: {folder} is not a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.probe.", dir=folder)
    except OSError as exc:
        raise OutputPathError(f"{option} {text}: cannot write in {folder} "
                              f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)
    return p
