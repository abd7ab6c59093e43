"""``recvmmsg``/``sendmmsg`` through ctypes: many datagrams or frames per system call.

One declaration of ``struct iovec``, ``struct msghdr`` and ``struct mmsghdr`` (Linux, as in
``<sys/socket.h>``) and of the two libc calls, shared by pyswitch's ports
(:mod:`pyswitch.ports`) and the hosts' UDP (:mod:`workers.ina.udp`).  ``recvmmsg`` and
``sendmmsg`` are ``None`` where libc lacks them: callers then make one call per datagram.
"""

from __future__ import annotations

import ctypes

__all__ = ["IoVec", "MsgHdr", "MMsgHdr", "recvmmsg", "sendmmsg"]


class IoVec(ctypes.Structure):
    """``struct iovec``."""

    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class MsgHdr(ctypes.Structure):
    """``struct msghdr``."""

    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.c_void_p), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class MMsgHdr(ctypes.Structure):
    """``struct mmsghdr``: a message and the length the kernel sent or received."""

    _fields_ = [("hdr", MsgHdr), ("len", ctypes.c_uint)]


recvmmsg = sendmmsg = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    recvmmsg = _libc.recvmmsg
    recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                         ctypes.c_void_p]
    recvmmsg.restype = ctypes.c_int
    sendmmsg = _libc.sendmmsg
    sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    sendmmsg.restype = ctypes.c_int
except (OSError, AttributeError):  # no such libc functions
    recvmmsg = sendmmsg = None
