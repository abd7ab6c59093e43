"""Length-prefixed frames over TCP and the flat-array layout, shared by the asynchronous PS
(:mod:`workers.async_ps.wire`) and the clustered PSs (:mod:`workers.cluster.wire`).

Pure except :func:`recv_frame` (which reads a socket): bytes in, frame bodies out.

Framing
    Every message is ``length (uint32, big endian) ++ body``; ``length`` counts the body only.
    A frame longer than ``max_frame`` (default 64 MiB) is refused before it is buffered, so a
    corrupt or hostile length cannot make a process allocate gigabytes.  TCP delivers a stream,
    so a frame may arrive in any number of pieces and one ``recv`` may hold several frames:
    :class:`FrameDecoder` is the pure incremental reassembler.

Arrays
    An array is ``dtype code (uint8: 1 = float32, 2 = float64) ++ count (uint32) ++ count
    little-endian values`` (numpy's native order on every machine we run on, so encoding is a
    single ``tobytes``).
"""

from __future__ import annotations

import socket
import struct

import numpy as np

__all__ = [
    "MAX_FRAME",
    "FrameDecoder",
    "TransportError",
    "decode_array",
    "encode_array",
    "frame",
    "recv_frame",
]

MAX_FRAME = 64 << 20

_LEN = struct.Struct("!I")
_ARRAY = struct.Struct("!BI")
_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<f8")}
_CODES = {np.dtype("float32"): 1, np.dtype("float64"): 2}


class TransportError(ValueError):
    """Bytes that are not a valid message (bad magic, version, type, length or array)."""


HEAD = struct.Struct("!2sBB")
"""Every message body starts ``magic (2 bytes) ++ version (uint8) ++ type (uint8)``."""


def read_fixed(body: bytes, off: int, st: struct.Struct, what: str) -> tuple:
    """``st`` unpacked at ``off``; :class:`TransportError` if ``body`` is too short."""
    if len(body) < off + st.size:
        raise TransportError(f"truncated {what} message ({len(body)} bytes)")
    return st.unpack_from(body, off)


def expect_end(body: bytes, end: int, what: str) -> None:
    """:class:`TransportError` unless the message ends at ``end``."""
    if end != len(body):
        raise TransportError(f"{what} message has {len(body) - end} trailing bytes")


def read_head(body: bytes, magic: bytes, version: int, protocol: str) -> tuple[int, int]:
    """The message type and the offset of its fields, after checking magic and version."""
    got, ver, kind = read_fixed(body, 0, HEAD, "any")
    if got != magic:
        raise TransportError(f"bad magic {got!r} (not {protocol} message)")
    if ver != version:
        raise TransportError(f"unsupported version {ver} (expected {version})")
    return kind, HEAD.size


def encode_array(a: np.ndarray) -> bytes:
    """``a`` (flat, float32 or float64) in the array layout of the module docstring."""
    a = np.asarray(a)
    if a.ndim != 1:
        raise TransportError(f"only flat arrays are carried, got shape {a.shape}")
    code = _CODES.get(a.dtype)
    if code is None:
        raise TransportError(f"arrays must be float32 or float64, got {a.dtype}")
    return _ARRAY.pack(code, a.size) + a.astype(_DTYPES[code], copy=False).tobytes()


def decode_array(body: bytes, off: int) -> tuple[np.ndarray, int]:
    """The array starting at ``body[off]`` and the offset just past it."""
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


def recv_frame(sock: socket.socket, decoder: FrameDecoder, pending: list[bytes]) -> bytes:
    """Block until the next frame body arrives on ``sock``.

    ``decoder`` and ``pending`` (frames already reassembled but not yet returned) belong to the
    connection and persist across calls.  Raises ConnectionError if the peer closes the
    stream (mid-frame or between frames)."""
    while not pending:
        data = sock.recv(1 << 16)
        if not data:
            state = f"mid-frame ({decoder.buffered} bytes buffered)" if decoder.buffered else ""
            raise ConnectionError(f"connection closed by the peer {state}".strip())
        pending.extend(decoder.feed(data))
    return pending.pop(0)
