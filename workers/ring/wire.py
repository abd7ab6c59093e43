"""The ring all-reduce's datagrams (bytes <-> :class:`RingPacket`) and their frames.

A ring datagram is UDP to :data:`RING_UDP_PORT` -- not INA's port, so every switch running
``ina.p4`` forwards it as plain IPv4 -- carrying a 16-byte header in network byte order and
up to K int32 values (INA's K: a DATA frame is the size of an INA frame, so both designs
move the same bytes per value):

==========  ====  ===========================================================
field       bits  meaning
==========  ====  ===========================================================
magic       16    ``b"RG"``
type        8     1 = DATA (values for the next position), 2 = ACK (no values)
job         8     the job
round       32    the all-reduce
step        16    the schedule's step, 0 .. 2(P-1)-1 (reduce-scatter, then all-gather)
index       32    the packet's index inside the step's chunk (K values each)
count       16    values that follow (0 in an ACK)
==========  ====  ===========================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from workers.ina.wire import ipv4_checksum

__all__ = ["RING_UDP_PORT", "TYPE_DATA", "TYPE_ACK", "HEADER", "RingPacket", "RingDecodeError",
           "encode", "decode", "frame", "decode_frame"]

RING_UDP_PORT = 18200
"""UDP port of ring datagrams (ina.p4 parses INA on 18000, SwitchML's program on 18100)."""
TYPE_DATA, TYPE_ACK = 1, 2
HEADER = struct.Struct("!2sBBIHIH")
MAGIC = b"RG"
_ETH_IP_UDP = 14 + 20 + 8


class RingDecodeError(ValueError):
    """A datagram to the ring's port that is not a ring packet."""


@dataclass(frozen=True)
class RingPacket:
    """One ring datagram: DATA carries ``values`` (int32) for ``(round, step, index)``; an
    ACK carries none and acknowledges that key."""

    type: int
    job: int
    round: int
    step: int
    index: int
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32), compare=False)

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.round, self.step, self.index)


def encode(p: RingPacket) -> bytes:
    """The datagram's payload (header + values, big-endian)."""
    vals = np.asarray(p.values, dtype=">i4")
    return HEADER.pack(MAGIC, p.type, p.job, p.round, p.step, p.index, len(vals)) + vals.tobytes()


def decode(data: bytes | memoryview) -> RingPacket:
    """A payload back to its packet (:class:`RingDecodeError` for anything else)."""
    if len(data) < HEADER.size:
        raise RingDecodeError(f"ring datagram of {len(data)} bytes, header is {HEADER.size}")
    magic, typ, job, rnd, step, idx, count = HEADER.unpack_from(data)
    if magic != MAGIC or typ not in (TYPE_DATA, TYPE_ACK):
        raise RingDecodeError(f"not a ring datagram (magic {magic!r}, type {typ})")
    if len(data) != HEADER.size + 4 * count or (typ == TYPE_ACK and count):
        raise RingDecodeError(f"ring datagram length {len(data)} does not match count {count}")
    vals = np.frombuffer(bytes(data[HEADER.size:]), dtype=">i4").astype(np.int32)
    return RingPacket(typ, job, rnd, step, idx, vals)


def _mac(m: str) -> bytes:
    return bytes(int(x, 16) for x in m.split(":"))


def _ip(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


def frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, payload: bytes,
          sport: int = RING_UDP_PORT) -> bytes:
    """Ethernet/IPv4/UDP around ``payload`` to :data:`RING_UDP_PORT` (UDP checksum 0, as
    INA's frames)."""
    udp_len = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0, 64, 17, 0, _ip(src_ip),
                     _ip(dst_ip))
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    return (_mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + ip
            + struct.pack("!HHHH", sport, RING_UDP_PORT, udp_len, 0) + payload)


def decode_frame(f: bytes | memoryview) -> RingPacket | None:
    """The ring packet in an Ethernet frame, None when the frame is not IPv4/UDP to the
    ring's port; :class:`RingDecodeError` when it is but does not decode."""
    if (len(f) < _ETH_IP_UDP or f[12] != 0x08 or f[13] != 0x00 or f[14] != 0x45
            or f[23] != 17 or ((f[36] << 8) | f[37]) != RING_UDP_PORT):
        return None
    return decode(memoryview(f)[_ETH_IP_UDP:])
