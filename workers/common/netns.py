"""Sockets opened inside another network namespace (a Mininet host's), from one process.

A socket belongs to the network namespace it was created in, whatever namespace the process
moves to afterwards.  So one process can serve several Mininet hosts: for each host it enters
the host's namespace (``/proc/<host shell pid>/ns/net``), opens and binds that host's sockets,
and returns (:func:`in_netns`).  Python 3.11 has no ``os.setns``: libc's ``setns(2)`` is
called through ctypes.  ``setns`` moves the calling *thread*, so the way back is the
thread's own namespace (``/proc/thread-self/ns/net``), opened before leaving.  Entering a
namespace needs CAP_SYS_ADMIN (root); a namespace the thread is already in is not entered.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Iterator

__all__ = ["CLONE_NEWNET", "NetnsError", "in_netns", "same_netns"]

CLONE_NEWNET = 0x40000000
_SELF = "/proc/thread-self/ns/net"


class NetnsError(OSError):
    """A network namespace that cannot be entered (one line: which, and why)."""


def _libc_setns() -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.setns
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


def same_netns(path: str) -> bool:
    """Whether ``path`` names the namespace this thread is in (same device and inode)."""
    a, b = os.stat(path), os.stat(_SELF)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@contextlib.contextmanager
def in_netns(path: str) -> Iterator[None]:
    """Run the block inside the network namespace ``path`` (e.g. ``/proc/PID/ns/net``), then
    return to this thread's own; sockets created in the block stay in ``path``'s namespace.
    :class:`NetnsError` when ``path`` cannot be opened (a vanished process) or entered
    (not root)."""
    try:
        target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise NetnsError(exc.errno, f"network namespace {path}: cannot open it "
                                    f"({exc.strerror})") from None
    try:
        if same_netns(path):  # already there: nothing to enter, no privilege needed
            yield
            return
        own = os.open(_SELF, os.O_RDONLY | os.O_CLOEXEC)
        try:
            setns = _libc_setns()
            if setns(target, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                why = ("needs root (CAP_SYS_ADMIN)" if err == errno.EPERM
                       else os.strerror(err))
                raise NetnsError(err, f"network namespace {path}: cannot enter it ({why})")
            try:
                yield
            finally:
                if setns(own, CLONE_NEWNET) != 0:  # a thread stuck elsewhere: stop here
                    err = ctypes.get_errno()
                    raise NetnsError(err, f"cannot return to this process's network "
                                          f"namespace ({os.strerror(err)})")
        finally:
            os.close(own)
    finally:
        os.close(target)
