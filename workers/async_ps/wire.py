"""Messages of the asynchronous PS (SPEC §5) and their length-prefixed framing over TCP.

The PS logic (:mod:`workers.async_ps.core`, :class:`workers.async_ps.ps_node.PsService`) only sees
message objects; this module turns them into bytes and back, and carries them over a stream
socket.  A later NDN transport carries the same objects in Interest/Data packets (the
``encode``/``decode`` pair is transport-neutral; only :func:`send_message`/:func:`recv_message`
are TCP-specific).

Framing
    Every message is ``length (uint32, big endian) ++ body``; ``length`` counts the body only.
    A frame longer than ``max_frame`` (default 64 MiB) is refused before it is buffered, so a
    corrupt or hostile length cannot make a process allocate gigabytes.  TCP delivers a stream,
    so a frame may arrive in any number of pieces and one ``recv`` may hold several frames:
    :class:`FrameDecoder` is the pure incremental reassembler.

Body
    ``magic "AS" (2 bytes) ++ version (uint8) ++ type (uint8) ++ fields``; numbers big endian.

    =========  ====  =========================================================================
    message    type  fields
    =========  ====  =========================================================================
    Hello      1     learner (uint32)                       learner -> PS: join
    Welcome    2     t_ps (uint64), params (array)          PS -> learner: current parameters
    Push       3     learner (uint32), t_w (uint64), kappa (float64, NaN = none),
                     n_prev (uint16), previous (n_prev x uint32), gradient (array)
    Answer     4     t_ps (uint64), sigma (uint32), kappa (float64), scale (float64),
                     flags (uint8: bit0 applied, bit1 stop), params (array)
    Stop       5     (none)                                 PS -> learner: budget used up,
                                                            the push was NOT applied
    Error      6     utf-8 text (rest of the body)          PS -> learner: push refused
    =========  ====  =========================================================================

    An array is ``dtype code (uint8: 1 = float32, 2 = float64) ++ count (uint32) ++ count
    little-endian values`` (numpy's native order on every machine we run on, so encoding is a
    single ``tobytes``).
"""

from __future__ import annotations

import math
import socket
import struct
from dataclasses import dataclass

import numpy as np

from workers.async_ps.core import Push, Reply

__all__ = [
    "ASYNC_TCP_PORT",
    "MAX_FRAME",
    "Answer",
    "Error",
    "FrameDecoder",
    "Hello",
    "Message",
    "Stop",
    "TransportError",
    "Welcome",
    "decode",
    "decode_array",
    "encode",
    "encode_array",
    "frame",
    "recv_message",
    "send_message",
]

ASYNC_TCP_PORT = 50100
MAX_FRAME = 64 << 20
MAGIC = b"AS"
VERSION = 1

_LEN = struct.Struct("!I")
_HEAD = struct.Struct("!2sBB")
_HELLO = struct.Struct("!I")
_WELCOME = struct.Struct("!Q")
_PUSH = struct.Struct("!IQdH")
_ANSWER = struct.Struct("!QIddB")
_ARRAY = struct.Struct("!BI")
_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<f8")}
_CODES = {np.dtype("float32"): 1, np.dtype("float64"): 2}
T_HELLO, T_WELCOME, T_PUSH, T_ANSWER, T_STOP, T_ERROR = range(1, 7)


class TransportError(ValueError):
    """Bytes that are not a valid message (bad magic, version, type, length or array)."""


@dataclass(frozen=True)
class Hello:
    learner: int


@dataclass(frozen=True)
class Welcome:
    params: np.ndarray
    t_ps: int


@dataclass(frozen=True)
class Answer:
    """The PS's reply to an applied-or-accumulated push; ``stop``: no further push wanted."""

    reply: Reply
    stop: bool = False


@dataclass(frozen=True)
class Stop:
    """The push arrived after the push budget was used up and was discarded."""


@dataclass(frozen=True)
class Error:
    text: str


Message = Hello | Welcome | Push | Answer | Stop | Error


def _array(a: np.ndarray) -> bytes:
    a = np.asarray(a)
    if a.ndim != 1:
        raise TransportError(f"only flat arrays are carried, got shape {a.shape}")
    code = _CODES.get(a.dtype)
    if code is None:
        raise TransportError(f"arrays must be float32 or float64, got {a.dtype}")
    return _ARRAY.pack(code, a.size) + a.astype(_DTYPES[code], copy=False).tobytes()


def _read_array(body: bytes, off: int) -> tuple[np.ndarray, int]:
    if len(body) < off + _ARRAY.size:
        raise TransportError("truncated array header")
    code, count = _ARRAY.unpack_from(body, off)
    off += _ARRAY.size
    dtype = _DTYPES.get(code)
    if dtype is None:
        raise TransportError(f"unknown array dtype code {code}")
    end = off + count * dtype.itemsize
    if len(body) < end:
        raise TransportError(f"array of {count} values truncated "
                             f"({len(body) - off} of {end - off} bytes)")
    arr = np.frombuffer(body, dtype=dtype, count=count, offset=off).astype(dtype.newbyteorder("="))
    return arr, end


# The array layout as public names, shared with the clustered-PS messages
# (workers.cluster.wire) so that both protocols carry arrays identically.
encode_array = _array
decode_array = _read_array


def encode(msg: Message) -> bytes:
    """The body of ``msg`` (without the length prefix)."""
    if isinstance(msg, Hello):
        return _HEAD.pack(MAGIC, VERSION, T_HELLO) + _HELLO.pack(msg.learner)
    if isinstance(msg, Welcome):
        return _HEAD.pack(MAGIC, VERSION, T_WELCOME) + _WELCOME.pack(msg.t_ps) + _array(msg.params)
    if isinstance(msg, Push):
        prev = tuple(int(x) for x in msg.previous)
        kappa = math.nan if msg.kappa is None else float(msg.kappa)
        return (_HEAD.pack(MAGIC, VERSION, T_PUSH)
                + _PUSH.pack(msg.learner, msg.t_w, kappa, len(prev))
                + struct.pack(f"!{len(prev)}I", *prev) + _array(msg.gradient))
    if isinstance(msg, Answer):
        r = msg.reply
        flags = (1 if r.applied else 0) | (2 if msg.stop else 0)
        return (_HEAD.pack(MAGIC, VERSION, T_ANSWER)
                + _ANSWER.pack(r.t_ps, r.sigma, r.kappa, r.scale, flags) + _array(r.params))
    if isinstance(msg, Stop):
        return _HEAD.pack(MAGIC, VERSION, T_STOP)
    if isinstance(msg, Error):
        return _HEAD.pack(MAGIC, VERSION, T_ERROR) + msg.text.encode()
    raise TypeError(f"not a message: {type(msg).__name__}")


def _fixed(body: bytes, off: int, st: struct.Struct, what: str) -> tuple:
    if len(body) < off + st.size:
        raise TransportError(f"truncated {what} message ({len(body)} bytes)")
    return st.unpack_from(body, off)


def _done(body: bytes, end: int, what: str) -> None:
    if end != len(body):
        raise TransportError(f"{what} message has {len(body) - end} trailing bytes")


def decode(body: bytes) -> Message:
    """The message in ``body``; raises :class:`TransportError` for anything malformed."""
    magic, version, kind = _fixed(body, 0, _HEAD, "any")
    if magic != MAGIC:
        raise TransportError(f"bad magic {magic!r} (not an async-PS message)")
    if version != VERSION:
        raise TransportError(f"unsupported version {version} (expected {VERSION})")
    off = _HEAD.size
    if kind == T_HELLO:
        (learner,) = _fixed(body, off, _HELLO, "Hello")
        _done(body, off + _HELLO.size, "Hello")
        return Hello(learner)
    if kind == T_WELCOME:
        (t_ps,) = _fixed(body, off, _WELCOME, "Welcome")
        params, end = _read_array(body, off + _WELCOME.size)
        _done(body, end, "Welcome")
        return Welcome(params, t_ps)
    if kind == T_PUSH:
        learner, t_w, kappa, n_prev = _fixed(body, off, _PUSH, "Push")
        off += _PUSH.size
        if len(body) < off + 4 * n_prev:
            raise TransportError("truncated Push message (staleness samples)")
        prev = struct.unpack_from(f"!{n_prev}I", body, off)
        grad, end = _read_array(body, off + 4 * n_prev)
        _done(body, end, "Push")
        return Push(learner, grad, t_w, tuple(prev), None if math.isnan(kappa) else kappa)
    if kind == T_ANSWER:
        t_ps, sigma, kappa, scale, flags = _fixed(body, off, _ANSWER, "Answer")
        params, end = _read_array(body, off + _ANSWER.size)
        _done(body, end, "Answer")
        return Answer(Reply(params, t_ps, sigma, kappa, scale, bool(flags & 1)), bool(flags & 2))
    if kind == T_STOP:
        _done(body, off, "Stop")
        return Stop()
    if kind == T_ERROR:
        return Error(body[off:].decode(errors="replace"))
    raise TransportError(f"unknown message type {kind}")


def frame(body: bytes) -> bytes:
    """``body`` with its length prefix."""
    return _LEN.pack(len(body)) + body


class FrameDecoder:
    """Reassemble length-prefixed frames from a byte stream arriving in arbitrary pieces."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the bodies of every frame completed by it, in order."""
        self._buf += data
        out = []
        while len(self._buf) >= _LEN.size:
            (n,) = _LEN.unpack_from(self._buf, 0)
            if n > self.max_frame:
                raise TransportError(f"frame of {n} bytes exceeds the limit of "
                                     f"{self.max_frame}")
            if len(self._buf) < _LEN.size + n:
                break
            out.append(bytes(self._buf[_LEN.size:_LEN.size + n]))
            del self._buf[:_LEN.size + n]
        return out


def send_message(sock: socket.socket, msg: Message) -> int:
    """Send one framed message (blocking); returns the bytes put on the stream."""
    data = frame(encode(msg))
    sock.sendall(data)
    return len(data)


def recv_message(sock: socket.socket, decoder: FrameDecoder, pending: list[bytes]) -> Message:
    """Block until the next message arrives on ``sock``.

    ``decoder`` and ``pending`` (frames already reassembled but not yet returned) belong to the
    connection and persist across calls.  Raises ConnectionError if the peer closes the
    stream (mid-frame or between frames)."""
    while not pending:
        data = sock.recv(1 << 16)
        if not data:
            state = f"mid-frame ({decoder.buffered} bytes buffered)" if decoder.buffered else ""
            raise ConnectionError(f"connection closed by the peer {state}".strip())
        pending.extend(decoder.feed(data))
    return decode(pending.pop(0))
