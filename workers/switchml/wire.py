"""The SwitchML wire format: the header layout (declared once, here), the host-side record
of a packet and its codec.

Frame: Ethernet / IPv4 (IHL 5) / UDP (dport = UDP_PORT, checksum 0) / SwitchML header /
K x int32 (big-endian two's complement, INA's values header).  Header (18 bytes)::

    msg_type:8  flags:8  job_id:16  worker_id:16  pool_index:16  ver:8  count:8
    round:32    chunk:32

`HEADER_FIELDS` is the layout's one declaration: `SmPacket`'s fields are checked against it
at import, and the P4 header ``switchml_h`` (p4src/include/switchml_headers.p4) is tested
equal to it field by field (tests/test_switchml_p4.py).  The UDP checksum is 0 for the
reason INA's is (docs/protocol.md): the switch rewrites the values.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from enum import IntEnum, IntFlag
from operator import attrgetter

import numpy as np

from workers.ina.wire import ipv4_checksum
from workers.switchml.constants import (
    FLAG_RETRANSMIT,
    FLAG_SHADOW,
    HDR_BYTES,
    MAX_WORKERS,
    TYPE_RESULT,
    TYPE_UPDATE,
    UDP_LEN,
    UDP_PORT,
    K,
)


class MsgType(IntEnum):
    """Message types (field ``msg_type``)."""

    UPDATE = TYPE_UPDATE
    RESULT = TYPE_RESULT


class Flag(IntFlag):
    """Flag bits (field ``flags``)."""

    NONE = 0
    RETRANSMIT = FLAG_RETRANSMIT
    SHADOW = FLAG_SHADOW


HEADER_FIELDS: tuple[tuple[str, int], ...] = (
    ("msg_type", 8), ("flags", 8), ("job_id", 16), ("worker_id", 16), ("pool_index", 16),
    ("ver", 8), ("count", 8), ("round", 32), ("chunk", 32),
)
"""(name, bit width) of the SwitchML header in wire order."""

HEADER_NAMES: tuple[str, ...] = tuple(name for name, _ in HEADER_FIELDS)
HEADER_STRUCT = struct.Struct(
    "!" + "".join({8: "B", 16: "H", 32: "I", 64: "Q"}[w] for _, w in HEADER_FIELDS))
PAYLOAD_BYTES = HDR_BYTES + 4 * K
FRAME_PREFIX_BYTES = 14 + 20 + 8
FRAME_BYTES = FRAME_PREFIX_BYTES + PAYLOAD_BYTES
_VALUES = np.dtype(">i4")

if HEADER_STRUCT.size != HDR_BYTES or UDP_LEN != 8 + PAYLOAD_BYTES:
    raise RuntimeError("p4src/include/switchml_constants.p4: SWITCHML_HDR_BYTES/UDP_LEN "
                       "disagree with HEADER_FIELDS in workers/switchml/wire.py")


class SmDecodeError(ValueError):
    """Bytes that are not a well-formed SwitchML payload."""


@dataclass(frozen=True, slots=True, eq=False)
class SmPacket:
    """One SwitchML packet, decoded: the header fields in wire order and ``values`` (K
    int32).  Equality compares the header and the values numerically."""

    msg_type: int
    flags: int
    job_id: int
    worker_id: int
    pool_index: int
    ver: int
    count: int
    round: int
    chunk: int
    values: np.ndarray

    @classmethod
    def update(cls, job_id: int, worker_id: int, pool_index: int, ver: int, round: int,
               chunk: int, values: np.ndarray, retransmit: bool = False) -> SmPacket:
        """Worker ``worker_id``'s UPDATE of ``chunk`` in pool slot ``pool_index``, copy
        ``ver``."""
        if not 0 <= worker_id < MAX_WORKERS:
            raise ValueError(f"worker_id {worker_id} outside 0..{MAX_WORKERS - 1}")
        if ver not in (0, 1):
            raise ValueError(f"ver must be 0 or 1, got {ver}")
        flags = Flag.RETRANSMIT if retransmit else Flag.NONE
        return cls(TYPE_UPDATE, int(flags), job_id, worker_id, pool_index, ver, 1, round,
                   chunk, values)

    @property
    def key(self) -> tuple[int, int]:
        """(round, chunk): which chunk the packet is about (the switch's key)."""
        return self.round, self.chunk

    def header(self) -> tuple[int, ...]:
        """The header fields in wire order."""
        return _header_of(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SmPacket):
            return NotImplemented
        return (_header_of(self) == _header_of(other)
                and np.array_equal(self.values, other.values))

    __hash__ = None  # type: ignore[assignment]  # the values are a mutable array

    def __repr__(self) -> str:
        try:
            kind = MsgType(self.msg_type).name
        except ValueError:
            kind = str(self.msg_type)
        return (f"SmPacket({kind} flags={self.flags:#x} job={self.job_id} w={self.worker_id} "
                f"slot={self.pool_index}/{self.ver} count={self.count} r={self.round} "
                f"c={self.chunk})")


_header_of = attrgetter(*HEADER_NAMES)

if tuple(f.name for f in fields(SmPacket)) != (*HEADER_NAMES, "values"):
    raise RuntimeError("workers/switchml/wire.py: SmPacket's fields are not HEADER_FIELDS")


def encode_payload(pkt: SmPacket) -> bytes:
    """UDP payload: packed header + K big-endian int32."""
    arr = np.asarray(pkt.values)
    if arr.shape != (K,):
        raise ValueError(f"a SwitchML packet carries exactly K={K} values, got {arr.shape}")
    if arr.dtype != np.int32:
        if arr.dtype.kind not in "iu" or (arr.size and (
                int(arr.min()) < -(2**31) or int(arr.max()) > 2**31 - 1)):
            raise ValueError("SwitchML values must be integers that fit int32")
    return HEADER_STRUCT.pack(*_header_of(pkt)) + arr.astype(_VALUES).tobytes()


def decode_payload(buf: bytes | memoryview, offset: int = 0) -> SmPacket:
    """The packet in ``buf[offset:]``; SmDecodeError when it is not exactly PAYLOAD_BYTES
    long or has an unknown type (what the switch counts as malformed)."""
    if len(buf) - offset != PAYLOAD_BYTES:
        raise SmDecodeError(f"SwitchML payload of {len(buf) - offset} bytes, expected "
                            f"{PAYLOAD_BYTES}")
    header = HEADER_STRUCT.unpack_from(buf, offset)
    if header[0] not in (TYPE_UPDATE, TYPE_RESULT):
        raise SmDecodeError(f"unknown SwitchML msg_type {header[0]}")
    values = np.frombuffer(buf, _VALUES, K, offset + HDR_BYTES).astype(np.int32)
    return SmPacket(*header, values)


def _mac(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return bytes(int(p, 16) for p in parts)


def _ip(ip: str) -> bytes:
    parts = [int(p) for p in ip.split(".")]
    if len(parts) != 4 or not all(0 <= p <= 255 for p in parts):
        raise ValueError(f"not an IPv4 address: {ip!r}")
    return bytes(parts)


def encode_frame(pkt: SmPacket, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str,
                 ttl: int = 64) -> bytes:
    """The whole Ethernet frame of ``pkt`` between two endpoints (UDP checksum 0)."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + UDP_LEN, 0, 0, ttl, 17, 0,
                     _ip(src_ip), _ip(dst_ip))
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", UDP_PORT, UDP_PORT, UDP_LEN, 0)
    return _mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + ip + udp + encode_payload(pkt)


def decode_frame(frame: bytes | memoryview) -> SmPacket | None:
    """The packet if ``frame`` is a SwitchML frame as the switch parses it (IPv4 IHL 5, UDP,
    destination port UDP_PORT), else None; SmDecodeError when it is one but malformed."""
    if (len(frame) < FRAME_PREFIX_BYTES or frame[12] != 0x08 or frame[13] != 0x00
            or frame[14] != 0x45 or frame[23] != 17
            or ((frame[36] << 8) | frame[37]) != UDP_PORT):
        return None
    return decode_payload(frame, FRAME_PREFIX_BYTES)


__all__ = [
    "FRAME_BYTES", "FRAME_PREFIX_BYTES", "HEADER_FIELDS", "HEADER_NAMES", "HEADER_STRUCT",
    "PAYLOAD_BYTES", "Flag", "MsgType", "SmDecodeError", "SmPacket", "decode_frame",
    "decode_payload", "encode_frame", "encode_payload",
]
