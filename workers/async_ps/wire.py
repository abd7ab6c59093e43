"""Messages of the asynchronous PS (docs/design.md §5): message objects <-> bytes, and sending them
on TCP.

The PS logic (:mod:`workers.async_ps.core`, :class:`workers.async_ps.ps_node.PsService`) only sees
message objects; this module turns them into bytes and back, and carries them over a stream
socket.  A later NDN transport carries the same objects in Interest/Data packets (the
``encode``/``decode`` pair is transport-neutral; only :func:`send_message`/:func:`recv_message`
are TCP-specific).

Framing and arrays
    Length-prefixed frames and the flat-array layout of :mod:`workers.common.framing`.

Body
    ``magic "AS" (2 bytes) ++ version (uint8) ++ type (uint8) ++ fields``; numbers big endian.

    =========  ====  =========================================================================
    message    type  fields
    =========  ====  =========================================================================
    Hello      1     worker (uint32)                       worker -> PS: join
    Welcome    2     t_ps (uint64), params (array)          PS -> worker: current parameters
    Push       3     worker (uint32), t_w (uint64), kappa (float64, NaN = none),
                     n_prev (uint16), previous (n_prev x uint32), gradient (array)
    Answer     4     t_ps (uint64), sigma (uint32), kappa (float64), scale (float64),
                     flags (uint8: bit0 applied, bit1 stop), params (array)
    Stop       5     (none)                                 PS -> worker: budget used up,
                                                            the push was NOT applied
    Error      6     utf-8 text (rest of the body)          PS -> worker: push refused
    =========  ====  =========================================================================
"""

from __future__ import annotations

import math
import socket
import struct
from dataclasses import dataclass

import numpy as np

from workers.async_ps.core import Push, Reply
from workers.common.framing import (
    HEAD,
    FrameDecoder,
    TransportError,
    decode_array,
    encode_array,
    expect_end,
    frame,
    read_fixed,
    read_head,
    recv_frame,
)

__all__ = [
    "ASYNC_TCP_PORT",
    "Answer",
    "Error",
    "Hello",
    "Message",
    "Stop",
    "Welcome",
    "decode",
    "encode",
    "recv_message",
    "send_message",
]

ASYNC_TCP_PORT = 50100
MAGIC = b"AS"
VERSION = 1

_HELLO = struct.Struct("!I")
_WELCOME = struct.Struct("!Q")
_PUSH = struct.Struct("!IQdH")
_ANSWER = struct.Struct("!QIddB")
T_HELLO, T_WELCOME, T_PUSH, T_ANSWER, T_STOP, T_ERROR = range(1, 7)


@dataclass(frozen=True)
class Hello:
    worker: int


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


def encode(msg: Message) -> bytes:
    """The body of ``msg`` (without the length prefix)."""
    if isinstance(msg, Hello):
        return HEAD.pack(MAGIC, VERSION, T_HELLO) + _HELLO.pack(msg.worker)
    if isinstance(msg, Welcome):
        return (HEAD.pack(MAGIC, VERSION, T_WELCOME) + _WELCOME.pack(msg.t_ps)
                + encode_array(msg.params))
    if isinstance(msg, Push):
        prev = tuple(int(x) for x in msg.previous)
        kappa = math.nan if msg.kappa is None else float(msg.kappa)
        return (HEAD.pack(MAGIC, VERSION, T_PUSH)
                + _PUSH.pack(msg.worker, msg.t_w, kappa, len(prev))
                + struct.pack(f"!{len(prev)}I", *prev) + encode_array(msg.gradient))
    if isinstance(msg, Answer):
        r = msg.reply
        flags = (1 if r.applied else 0) | (2 if msg.stop else 0)
        return (HEAD.pack(MAGIC, VERSION, T_ANSWER)
                + _ANSWER.pack(r.t_ps, r.sigma, r.kappa, r.scale, flags)
                + encode_array(r.params))
    if isinstance(msg, Stop):
        return HEAD.pack(MAGIC, VERSION, T_STOP)
    if isinstance(msg, Error):
        return HEAD.pack(MAGIC, VERSION, T_ERROR) + msg.text.encode()
    raise TypeError(f"not a message: {type(msg).__name__}")


def decode(body: bytes) -> Message:
    """The message in ``body``; raises :class:`TransportError` for anything malformed."""
    kind, off = read_head(body, MAGIC, VERSION, "an async-PS")
    if kind == T_HELLO:
        (worker,) = read_fixed(body, off, _HELLO, "Hello")
        expect_end(body, off + _HELLO.size, "Hello")
        return Hello(worker)
    if kind == T_WELCOME:
        (t_ps,) = read_fixed(body, off, _WELCOME, "Welcome")
        params, end = decode_array(body, off + _WELCOME.size)
        expect_end(body, end, "Welcome")
        return Welcome(params, t_ps)
    if kind == T_PUSH:
        worker, t_w, kappa, n_prev = read_fixed(body, off, _PUSH, "Push")
        off += _PUSH.size
        if len(body) < off + 4 * n_prev:
            raise TransportError("truncated Push message (staleness samples)")
        prev = struct.unpack_from(f"!{n_prev}I", body, off)
        grad, end = decode_array(body, off + 4 * n_prev)
        expect_end(body, end, "Push")
        return Push(worker, grad, t_w, tuple(prev), None if math.isnan(kappa) else kappa)
    if kind == T_ANSWER:
        t_ps, sigma, kappa, scale, flags = read_fixed(body, off, _ANSWER, "Answer")
        params, end = decode_array(body, off + _ANSWER.size)
        expect_end(body, end, "Answer")
        return Answer(Reply(params, t_ps, sigma, kappa, scale, bool(flags & 1)), bool(flags & 2))
    if kind == T_STOP:
        expect_end(body, off, "Stop")
        return Stop()
    if kind == T_ERROR:
        return Error(body[off:].decode(errors="replace"))
    raise TransportError(f"unknown message type {kind}")


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
    return decode(recv_frame(sock, decoder, pending))
