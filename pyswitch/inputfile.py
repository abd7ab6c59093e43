"""Reading an input file the user named: a regular file only, and at most a bounded size.

Every command that reads a file it was given (``pyswitch compile`` and ``stf``; the
controller's topology, jobs and results files, through ``controller.files``) reads it with
:func:`read_input`, so that a FIFO, a device (``/dev/zero``, directly or through a symlink),
a directory or a path the OS cannot even look up gives one line naming the path instead of
a hang, unbounded memory or a traceback.  The file is opened without blocking (opening a
FIFO with no writer would wait forever), checked with ``fstat`` on the open descriptor (no
race with a rename), and read up to its limit plus one byte (a file that grows while read
is still refused).  It lives in ``pyswitch`` (the lowest layer) so that every package can
use the same helper.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["InputFileError", "read_input", "read_input_text", "shown_path",
           "MAX_DEVICE_CONFIG_BYTES"]

# a compiled program (pyswitch's or BMv2's JSON) read from a file: far above any real one
# (ina.p4's is well under 1 MiB), far below what would exhaust memory
MAX_DEVICE_CONFIG_BYTES = 64 << 20


class InputFileError(ValueError):
    """A named input file that cannot be read (one line: the path and why)."""


def shown_path(path: str | Path, limit: int = 120) -> str:
    """``path`` for an error line: cut in the middle when longer than ``limit`` characters."""
    text = str(path)
    if len(text) <= limit:
        return text
    return f"{text[:limit // 2]}…{text[-limit // 2:]} ({len(text):,} characters)"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_input(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), at most ``limit`` bytes.

    Raises :class:`InputFileError` ``"PATH: why"`` for anything else: missing, unreadable,
    a FIFO, a device, a directory, a name the OS refuses (too long, NUL byte), or larger
    than ``limit`` (``what`` names the file's role in that message).
    """
    shown = shown_path(path)
    text = os.fspath(path)
    if "\0" in text:
        raise InputFileError(f"{shown!r}: a path cannot contain a NUL byte")
    try:
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError(f"{shown}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{shown}: is {_kind(st.st_mode)}; the {what} must be a "
                                 "regular file")
        if st.st_size > limit:
            raise InputFileError(f"{shown}: {what} of {st.st_size:,} bytes is larger than the "
                                 f"limit of {limit:,}")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise InputFileError(f"{shown}: {what} grew past the limit of {limit:,} bytes "
                                 "while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise InputFileError(f"{shown}: cannot read {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_input_text(path: str | Path, limit: int, what: str = "file") -> str:
    """:func:`read_input` decoded as UTF-8; a byte that is not UTF-8 is an
    :class:`InputFileError` naming its offset."""
    data = read_input(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{shown_path(path)}: {what} is not UTF-8 text (byte "
                             f"{exc.start})") from None
