"""The INA wire protocol: Scapy layer (the layout's Python truth), enums and a fast codec.

Frame: Ethernet / IPv4 (IHL 5) / UDP (dport = INA_UDP_PORT, checksum 0) / INA header /
K x int32 (big-endian two's complement). See docs/protocol.md for the semantics.

INA header (26 bytes, network byte order)::

    msg_type:8  flags:8  job_id:16  round:32  chunk_id:32  agg_id:16
    fan_in:8    count:8  worker_id:16  bitmap:64

The Scapy layer `INA` is the single definition of that layout on the Python side; the
P4 header `ina_h` (p4src/include/headers.p4) is tested equal to it field by field, and
the hot-path codec (`encode_payload`, `decode_payload`, `FrameTemplate`, `decode_frame`;
struct + numpy, ~100x faster than Scapy) is tested byte-for-byte equal to it.

Why UDP checksum 0: aggregation rewrites the values in flight; recomputing a UDP
checksum over the payload in every switch costs more than it protects (Ethernet FCS
covers each hop), and IPv4 allows 0 = "no checksum".
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum, IntFlag
from typing import NamedTuple

import numpy as np
from scapy.fields import (
    ByteEnumField,
    ByteField,
    FieldListField,
    FlagsField,
    IntField,
    ShortField,
    SignedIntField,
    XLongField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from workers.ina.constants import (
    FLAG_FALLBACK,
    FLAG_INCOMPLETE,
    FLAG_RETRANSMIT,
    INA_HDR_BYTES,
    INA_UDP_LEN,
    INA_UDP_PORT,
    MAX_WORKERS,
    NUM_SLOTS,
    TYPE_GRAD,
    TYPE_PARTIAL,
    TYPE_RESULT,
    K,
)


class MsgType(IntEnum):
    """INA message types (field ``msg_type``)."""

    GRAD = TYPE_GRAD
    PARTIAL = TYPE_PARTIAL
    RESULT = TYPE_RESULT


class Flag(IntFlag):
    """INA flag bits (field ``flags``)."""

    NONE = 0
    RETRANSMIT = FLAG_RETRANSMIT
    FALLBACK = FLAG_FALLBACK
    INCOMPLETE = FLAG_INCOMPLETE


def _flag_names() -> list[str]:
    """FlagsField wants one name per bit, least significant first."""
    names = [f"bit{i}" for i in range(8)]
    for flag in (Flag.RETRANSMIT, Flag.FALLBACK, Flag.INCOMPLETE):
        names[int(flag).bit_length() - 1] = str(flag.name)
    return names


class INA(Packet):
    """INA header plus its K int32 values (the values are the layer's last field)."""

    name = "INA"
    fields_desc = [
        ByteEnumField("msg_type", TYPE_GRAD, {t.value: t.name for t in MsgType}),
        FlagsField("flags", 0, 8, _flag_names()),
        ShortField("job_id", 0),
        IntField("round", 0),
        IntField("chunk_id", 0),
        ShortField("agg_id", 0),
        ByteField("fan_in", 0),
        ByteField("count", 0),
        ShortField("worker_id", 0),
        XLongField("bitmap", 0),
        FieldListField("values", [0] * K, SignedIntField("v", 0), count_from=lambda pkt: K),
    ]

    def mysummary(self) -> str:
        return self.sprintf(
            "INA %msg_type% job=%job_id% r=%round% c=%chunk_id% agg=%agg_id% "
            "n=%count%/%fan_in% w=%worker_id% bm=%bitmap% fl=%flags%"
        )


bind_layers(UDP, INA, dport=INA_UDP_PORT)
# The switch decides by destination port alone; make Scapy's dissector do the same even
# when the source port belongs to another protocol (e.g. 53 -> DNS would otherwise win).
UDP.payload_guess.sort(key=lambda guess: guess[1] is not INA)

def _field_bits(f) -> int:
    return f.size if isinstance(f, FlagsField) else f.sz * 8


HEADER_FIELDS: tuple[tuple[str, int], ...] = tuple(
    (f.name, _field_bits(f)) for f in INA.fields_desc if f.name != "values"
)
"""(name, bit width) of the INA header in wire order, read off the Scapy layer; the P4
header ina_h is tested equal to it (tests/test_ina_p4.py)."""

HEADER_STRUCT = struct.Struct(
    "!" + "".join({8: "B", 16: "H", 32: "I", 64: "Q"}[w] for _, w in HEADER_FIELDS)
)
"""struct layout of `HEADER_FIELDS` (26 bytes)."""

PAYLOAD_BYTES = INA_HDR_BYTES + 4 * K
"""UDP payload of an INA datagram: header + K int32."""

FRAME_PREFIX_BYTES = 14 + 20 + 8
"""Ethernet + IPv4 (no options) + UDP."""

FRAME_BYTES = FRAME_PREFIX_BYTES + PAYLOAD_BYTES
_VALUES_DTYPE = np.dtype(">i4")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

if HEADER_STRUCT.size != INA_HDR_BYTES or INA_UDP_LEN != 8 + PAYLOAD_BYTES:
    raise RuntimeError("p4src/include/constants.p4: INA_HDR_BYTES/INA_UDP_LEN disagree with "
                       "the INA header layout in workers/ina/wire.py")


class InaDecodeError(ValueError):
    """Bytes that are not a well-formed INA payload (too short, bad type...)."""


# The header fields in wire order, as a tuple type (struct packs it directly).  Derived from
# the Scapy layer like HEADER_FIELDS, so the layout is declared once.
InaHeader = NamedTuple("InaHeader", [(name, int) for name, _ in HEADER_FIELDS])


def grad_header(
    job_id: int, round: int, chunk_id: int, agg_id: int, fan_in: int, worker_id: int,
    flags: int = 0,
) -> InaHeader:
    """Header of worker `worker_id`'s GRAD: count 1, bitmap = 1 << worker_id."""
    if not 0 <= worker_id < MAX_WORKERS:
        raise ValueError(f"worker_id {worker_id} outside 0..{MAX_WORKERS - 1}")
    return InaHeader(int(MsgType.GRAD), flags, job_id, round, chunk_id, agg_id, fan_in, 1,
                     worker_id, 1 << worker_id)


def _values_bytes(values: np.ndarray | list[int]) -> bytes:
    arr = np.asarray(values)
    if arr.shape != (K,):
        raise ValueError(f"an INA packet carries exactly K={K} values, got shape {arr.shape}")
    if arr.dtype != np.int32:
        if arr.dtype.kind not in "iu":
            raise ValueError(f"INA values must be integers, got dtype {arr.dtype}")
        if arr.size and (int(arr.min()) < _INT32_MIN or int(arr.max()) > _INT32_MAX):
            raise ValueError("INA values must fit int32")
    return arr.astype(_VALUES_DTYPE, copy=False).tobytes()


def encode_payload(header: InaHeader, values: np.ndarray | list[int]) -> bytes:
    """UDP payload bytes: packed header + K big-endian int32 values."""
    return HEADER_STRUCT.pack(*header) + _values_bytes(values)


def decode_payload(buf: bytes | memoryview, offset: int = 0) -> tuple[InaHeader, np.ndarray]:
    """Parse header and values (native int32 array) from `buf[offset:]`.

    Raises InaDecodeError when the payload is not exactly PAYLOAD_BYTES long or msg_type is
    not a known type (the same packets the switch counts as malformed: it checks the UDP
    length, so a host must not accept a longer datagram either)."""
    if len(buf) - offset != PAYLOAD_BYTES:
        raise InaDecodeError(
            f"INA payload of {len(buf) - offset} bytes, expected {PAYLOAD_BYTES}"
        )
    header = InaHeader._make(HEADER_STRUCT.unpack_from(buf, offset))
    if header.msg_type not in (TYPE_GRAD, TYPE_PARTIAL, TYPE_RESULT):
        raise InaDecodeError(f"unknown INA msg_type {header.msg_type}")
    values = np.frombuffer(buf, _VALUES_DTYPE, K, offset + INA_HDR_BYTES).astype(np.int32)
    return header, values


def ipv4_checksum(header: bytes) -> int:
    """RFC 1071 ones'-complement checksum of an IPv4 header (checksum field zeroed)."""
    if len(header) % 2:
        header += b"\0"
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return bytes(int(p, 16) for p in parts)


def _ip_bytes(ip: str) -> bytes:
    parts = [int(p) for p in ip.split(".")]
    if len(parts) != 4 or not all(0 <= p <= 255 for p in parts):
        raise ValueError(f"not an IPv4 address: {ip!r}")
    return bytes(parts)


class FrameTemplate:
    """Prebuilt Ethernet/IPv4/UDP prefix for INA frames between two fixed endpoints.

    Every INA frame has the same length, so the IPv4 header (and its checksum) is
    constant per (src, dst, ttl, id) and computed once; encoding a frame is then one
    struct pack plus one numpy byte-swap. Equal byte-for-byte to
    ``Ether(src, dst)/IP(src, dst, id, ttl)/UDP(sport, INA_UDP_PORT, chksum=0)/INA(...)``.
    """

    def __init__(
        self, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str,
        sport: int = INA_UDP_PORT, ttl: int = 64, ip_id: int = 0, tos: int = 0,
    ) -> None:
        eth = _mac_bytes(dst_mac) + _mac_bytes(src_mac) + b"\x08\x00"
        ip_wo_sum = struct.pack(
            "!BBHHHBBH4s4s", 0x45, tos, 20 + INA_UDP_LEN, ip_id, 0, ttl, 17, 0,
            _ip_bytes(src_ip), _ip_bytes(dst_ip),
        )
        csum = ipv4_checksum(ip_wo_sum)
        ip = ip_wo_sum[:10] + struct.pack("!H", csum) + ip_wo_sum[12:]
        udp = struct.pack("!HHHH", sport, INA_UDP_PORT, INA_UDP_LEN, 0)
        self.prefix: bytes = eth + ip + udp

    def encode(self, header: InaHeader, values: np.ndarray | list[int]) -> bytes:
        """Whole frame bytes for `header` and `values`."""
        return self.prefix + HEADER_STRUCT.pack(*header) + _values_bytes(values)


def decode_frame(frame: bytes | memoryview) -> tuple[InaHeader, np.ndarray] | None:
    """Return (header, values) if `frame` is an INA frame as the switch parses it, else None.

    Mirrors the P4 parser: Ethernet type 0x0800, IPv4 with IHL 5 and protocol 17, UDP
    destination port INA_UDP_PORT. An INA frame that is truncated or has a bad type
    raises InaDecodeError (the switch would count it malformed)."""
    if (
        len(frame) < FRAME_PREFIX_BYTES
        or frame[12] != 0x08
        or frame[13] != 0x00
        or frame[14] != 0x45
        or frame[23] != 17
        or ((frame[36] << 8) | frame[37]) != INA_UDP_PORT
    ):
        return None
    return decode_payload(frame, FRAME_PREFIX_BYTES)


def slot_index(job_id: int, round: int, chunk_id: int, base: int = 0,
               size: int | None = None) -> int:
    """Aggregator slot of a key, as ina.p4 computes it: base + v1model crc32 (= zlib.crc32)
    over job_id:16 ++ round:32 ++ chunk_id:32, mod size -- the job's slot range at the
    switch (docs/design.md §3.10; default the whole pool, NUM_SLOTS)."""
    n = NUM_SLOTS if size is None else size
    return base + zlib.crc32(struct.pack("!HII", job_id, round, chunk_id)) % n


def ecmp_member(chunk_id: int, switch_id: int, group_size: int) -> int:
    """Index into the sorted equal-cost next-hop ports that switch `switch_id` picks for
    `chunk_id`, as ina.p4 computes it: crc32(chunk_id:32 ++ switch_id:16) mod group_size."""
    return zlib.crc32(struct.pack("!IH", chunk_id, switch_id)) % group_size


def header_from_scapy(pkt: Packet) -> InaHeader:
    """InaHeader of a Scapy packet containing an INA layer."""
    layer = pkt[INA]
    return InaHeader(*(int(getattr(layer, name)) for name, _ in HEADER_FIELDS))


__all__ = [
    "FRAME_BYTES",
    "FRAME_PREFIX_BYTES",
    "HEADER_FIELDS",
    "HEADER_STRUCT",
    "INA",
    "PAYLOAD_BYTES",
    "Flag",
    "FrameTemplate",
    "InaDecodeError",
    "InaHeader",
    "MsgType",
    "decode_frame",
    "decode_payload",
    "ecmp_member",
    "encode_payload",
    "grad_header",
    "header_from_scapy",
    "ipv4_checksum",
    "slot_index",
]
