"""Writing result and plan files: atomically, so an interrupted run never leaves half a file.

The writer lives in :mod:`workers.common.files` (host processes write their reports with it
and must not import ``controller``); the controller uses it from here.
:func:`check_output_file` lets a command refuse an output path it could never write *before*
it does its work (an LP, a run), instead of failing at the end with nothing to show.

Input files (topology, jobs, results) are read with :func:`read_input_text` from
``pyswitch.inputfile`` (the lowest layer, so topo and pyswitch use the same helper): regular
files only, each with a size bound, one line naming the path otherwise.
:func:`non_finite` finds a number JSON cannot hold (NaN, infinity) before a file is written.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

from pyswitch.inputfile import InputFileError, read_input_text, shown_path
from workers.common.files import write_json_atomic

__all__ = ["write_json_atomic", "check_output_file", "OutputPathError", "InputFileError",
           "read_input_text", "shown_path", "non_finite"]


def non_finite(data: Any, where: str = "") -> str | None:
    """The dotted path of the first number in ``data`` that standard JSON cannot hold (NaN,
    ±infinity), or ``None``: JSON files are written only when this is ``None``."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (where or "<value>")
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, (list, tuple)):
        items = enumerate(data)
    else:
        return None
    for k, v in items:
        found = non_finite(v, f"{where}.{k}" if where else str(k))
        if found is not None:
            return found
    return None


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
