"""The INA wire protocol: the header layout, what each field means per message type, the one
host-side record of a packet, and a fast codec (the Scapy layer: :mod:`workers.ina.wire_scapy`).

Frame: Ethernet / IPv4 (IHL 5) / UDP (dport = INA_UDP_PORT, checksum 0) / INA header /
K x int32 (big-endian two's complement). See docs/protocol.md for the semantics.

INA header (26 bytes, network byte order)::

    msg_type:8  flags:8  job_id:16  round:32  chunk_id:32  agg_id:16
    fan_in:8    count:8  worker_id:16  bitmap:64

Declared once, here, and checked everywhere else it is written down:

* the layout: `HEADER_FIELDS`; the Scapy layer `INA` (built on it in
  :mod:`workers.ina.wire_scapy`, apart so that host processes never import Scapy, which
  takes them a second or more) is checked equal to it at import, and the P4 header `ina_h`
  (p4src/include/headers.p4) is tested equal to it field by field (tests/test_ina_p4.py);
* the meaning of each field in each message type: `FIELD_MEANINGS`, beside the layout; the
  table of docs/protocol.md §1 is tested equal to it and the comments of `ina_h` to follow
  it (tests/test_protocol.py).  Three uses belong to the hosts only (the switches never
  read those fields there): a GRAD's copy number in ``flags`` bits 4-7, a RESULT's echo
  in ``worker_id`` / ``fan_in`` and its previous chunk in ``agg_id`` (docs/protocol.md
  §6).  Code reads and writes them through `InaPacket.copy_number` / `with_copy` /
  `InaPacket.grad`, `InaPacket.echo` / `Echo` / `InaPacket.result` and
  `InaPacket.prev_mark`, never by hand;
* the host-side record: `InaPacket`, one decoded packet (header fields under their wire
  names, plus the values), checked at import to have exactly the layout's fields. The state
  machines (workers/ina/ps.py, worker.py) consume and produce it and never see bytes.

The hot-path codec (`encode_payload`, `decode_payload`, `FrameTemplate`, `decode_frame`;
struct + numpy, ~100x faster than Scapy) goes straight between bytes and `InaPacket` and is
tested byte-for-byte equal to Scapy.

Why UDP checksum 0: aggregation rewrites the values in flight; recomputing a UDP
checksum over the payload in every switch costs more than it protects (Ethernet FCS
covers each hop), and IPv4 allows 0 = "no checksum".
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, fields
from enum import IntEnum, IntFlag
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from workers.ina.constants import (
    AGG_ID_PS,
    FLAG_ECN,
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
    ECN = FLAG_ECN


# The two host-only overloads (docs/protocol.md §6).  They live in Python only: the switches
# pass a GRAD's copy bits through and never read a RESULT's echo, so constants.p4 has no say.
COPY_SHIFT = 4
"""A GRAD's ``flags`` bits COPY_SHIFT.. carry which copy of the chunk it is (0 = first)."""
COPY_BITS = 4
COPY_MOD = 1 << COPY_BITS
"""Copy numbers are carried mod COPY_MOD."""
COPY_MASK = (COPY_MOD - 1) << COPY_SHIFT
"""The copy-number bits of ``flags``."""
NO_WORKER = 0xFFFF
"""RESULT ``worker_id`` when no packet of a worker caused the RESULT."""
PREV_MOD = 0xFFFF
"""A RESULT's ``agg_id`` carries the chunk its PS completed before it in the round, as 1 +
that chunk id mod PREV_MOD (0: none; docs/protocol.md §6, "Lost RESULTs")."""


HEADER_FIELDS: tuple[tuple[str, int], ...] = (
    ("msg_type", 8), ("flags", 8), ("job_id", 16), ("round", 32), ("chunk_id", 32),
    ("agg_id", 16), ("fan_in", 8), ("count", 8), ("worker_id", 16), ("bitmap", 64),
)
"""(name, bit width) of the INA header in wire order: the layout's one declaration.  The
Scapy layer `INA` (:mod:`workers.ina.wire_scapy`, never imported by host processes) is
built from it and checked equal to it at import, and so is the P4 header ina_h
(tests/test_ina_p4.py)."""

HEADER_NAMES: tuple[str, ...] = tuple(name for name, _ in HEADER_FIELDS)
"""The header's field names in wire order."""

HEADER_STRUCT = struct.Struct(
    "!" + "".join({8: "B", 16: "H", 32: "I", 64: "Q"}[w] for _, w in HEADER_FIELDS)
)
"""struct layout of `HEADER_FIELDS` (26 bytes)."""


# ---------------------------------------------------------------- meaning per message type


class Meaning(NamedTuple):
    """What one field of the layer holds in each message type (markdown: the words of the
    table in docs/protocol.md §1, which is tested equal to `FIELD_MEANINGS`)."""

    grad: str
    partial: str
    result: str

    def of(self, msg_type: int) -> str:
        """The meaning in a packet of type ``msg_type``."""
        return getattr(self, MsgType(msg_type).name.lower())


def _same(text: str) -> Meaning:
    return Meaning(text, text, text)


_COPY_BITS_TEXT = f"bits {COPY_SHIFT}–{COPY_SHIFT + COPY_BITS - 1}"
_EMITTED = "that of the packet that made a switch emit it"

FIELD_MEANINGS: dict[str, Meaning] = {
    "msg_type": Meaning(str(TYPE_GRAD), str(TYPE_PARTIAL), str(TYPE_RESULT)),
    "flags": Meaning(
        f"RETRANSMIT={FLAG_RETRANSMIT}, FALLBACK={FLAG_FALLBACK}, ECN={FLAG_ECN} (a switch's "
        f"queue was over its threshold, §6), INCOMPLETE={FLAG_INCOMPLETE} with RETRANSMIT: "
        f"an answer to a point's NACK (§6); {_COPY_BITS_TEXT}: copy number, mod {COPY_MOD} "
        f"(§6)",
        f"RETRANSMIT={FLAG_RETRANSMIT} (re-emitted or flushed), INCOMPLETE={FLAG_INCOMPLETE} "
        f"(flushed), FALLBACK={FLAG_FALLBACK} (§5), ECN={FLAG_ECN}; {_COPY_BITS_TEXT}: 0",
        f"RETRANSMIT={FLAG_RETRANSMIT} on a resend; INCOMPLETE={FLAG_INCOMPLETE}: a NACK to "
        f"one worker, bitmap = the workers the PS has, no values (its header alone, §6), "
        f"with RETRANSMIT when the PS found the loss itself (§6), or, with `agg_id` = a "
        f"switch, that aggregation point's NACK to its workers (a whole frame, §6); "
        f"ECN={FLAG_ECN}: a "
        f"merged packet or this copy was marked; FALLBACK={FLAG_FALLBACK}: a merged packet "
        f"fell back"),
    "job_id": _same("job"),
    "round": _same("training round"),
    "chunk_id": _same("chunk of K values"),
    "agg_id": Meaning(
        f"aggregation point it is addressed to ({AGG_ID_PS} = the PS)",
        f"next aggregation point ({AGG_ID_PS} = the PS)",
        f"{AGG_ID_PS}, or 1 + (the chunk its PS completed before it mod {PREV_MOD}) (hosts "
        f"only: RESULTs follow the multicast tree, §6)"),
    "fan_in": Meaning(
        "contributions the `agg_id` switch waits for (not read at s_d, nor in a "
        "hierarchical job)",
        _EMITTED,
        "echo: 1 + copy number if the packet that caused it was a worker's own GRAD, "
        "else 0 (§6)"),
    "count": Meaning("1", "contributions summed (= popcount(`bitmap`))",
                     "popcount(`bitmap`)"),
    "worker_id": Meaning(
        "sender",
        f"flat job: {_EMITTED}; hierarchical job: the emitting switch's id (§5.1)",
        f"echo: `worker_id` of the packet that caused it, `0x{NO_WORKER:04X}` for none (§6)"),
    "bitmap": Meaning(
        "flat job: `1 << worker_id`; hierarchical job: 0 (the `agg_id` switch's child table "
        "gives the sender's bit, §5.1)",
        "contributions summed: flat job: bit i = worker i; hierarchical job: bit i = child i "
        "of the emitting switch (§5.1)",
        f"the round's members, bit (i mod {MAX_WORKERS}) = worker i (a flat job's full mask)"),
    "values": Meaning("quantized gradient", "sums over `bitmap`", "global sum"),
}
"""For every field of the layer (header fields and values), what it holds in a GRAD, a
PARTIAL and a RESULT.  The hosts' three overloads -- a GRAD's copy number in ``flags``, a
RESULT's echo in ``worker_id`` and ``fan_in`` and its previous chunk in ``agg_id`` -- are
read and written only through the accessors below (`with_copy`, `Echo`, `InaPacket.grad` /
`.result` / `.copy_number` / `.echo` / `.prev_mark`), so their bit positions live here
alone."""


def with_copy(flags: int, copy: int) -> int:
    """GRAD ``flags``: the Flag bits of ``flags`` and copy number ``copy`` (mod COPY_MOD) in
    the copy bits (whatever copy number ``flags`` held is replaced)."""
    if copy < 0:
        raise ValueError(f"copy number {copy} < 0")
    return (int(flags) & ~COPY_MASK) | (copy % COPY_MOD) << COPY_SHIFT


class Echo(NamedTuple):
    """A RESULT's echo of the packet that caused it (docs/protocol.md §6): on the wire,
    ``worker_id`` = ``worker`` and ``fan_in`` = 1 + ``copy``, or 0 when ``copy`` is None."""

    worker: int = NO_WORKER
    """``worker_id`` of the causing packet; NO_WORKER: no packet caused the RESULT."""
    copy: int | None = None
    """Copy number of the causing packet when it was a worker's own GRAD, else None."""

    @classmethod
    def of(cls, cause: InaPacket) -> Echo:
        """The echo of a RESULT that ``cause`` (a GRAD or PARTIAL) made the PS send."""
        return cls(cause.worker_id,
                   cause.copy_number if cause.msg_type == TYPE_GRAD else None)

    @property
    def fan_in(self) -> int:
        """The RESULT ``fan_in`` that carries ``copy``."""
        return 0 if self.copy is None else 1 + self.copy


NO_ECHO = Echo()
"""The echo of a RESULT no packet caused (e.g. a completion by a member change)."""


# ---------------------------------------------------------------- the host-side record


@dataclass(frozen=True, slots=True, eq=False)
class InaPacket:
    """One INA packet, decoded: the header fields under their wire names (in wire order:
    the layer's, checked at import) and ``values``, a 1-D ``np.int32`` array of K values
    (the state machines check that themselves: a hostile record is theirs to refuse).

    Equality compares every header field and the values (numerically)."""

    msg_type: int
    flags: int
    job_id: int
    round: int
    chunk_id: int
    agg_id: int
    fan_in: int
    count: int
    worker_id: int
    bitmap: int
    values: np.ndarray

    @classmethod
    def grad(cls, job_id: int, round: int, chunk_id: int, agg_id: int, fan_in: int,
             worker_id: int, values: np.ndarray, flags: int = 0, copy: int = 0,
             hierarchical: bool = False) -> InaPacket:
        """Worker ``worker_id``'s GRAD: count 1, bitmap = 1 << worker_id (0 in a
        ``hierarchical`` job, whose switches take the sender's bit from their child
        tables), ``flags`` (Flag bits only) with copy number ``copy`` (mod COPY_MOD) in the
        copy bits."""
        top = NO_WORKER if hierarchical else MAX_WORKERS
        if not 0 <= worker_id < top:
            raise ValueError(f"worker_id {worker_id} outside 0..{top - 1}")
        if int(flags) & COPY_MASK:
            raise ValueError(f"flags {int(flags):#x} hold copy bits: give the copy number as "
                             "copy=")
        return _packet(TYPE_GRAD, with_copy(flags, copy), job_id, round, chunk_id, agg_id,
                       fan_in, 1, worker_id, 0 if hierarchical else 1 << worker_id, values)

    @classmethod
    def result(cls, job_id: int, round: int, chunk_id: int, bitmap: int, values: np.ndarray,
               flags: int = 0, echo: Echo = NO_ECHO, prev: int | None = None) -> InaPacket:
        """The PS's RESULT of a chunk summed over ``bitmap``, echoing ``echo``: count =
        popcount(bitmap), agg_id AGG_ID_PS, or with ``prev`` (the chunk the PS completed
        before this one in the round) 1 + ``prev`` mod PREV_MOD (`prev_mark`)."""
        agg = AGG_ID_PS if prev is None or prev < 0 else 1 + prev % PREV_MOD
        return _packet(TYPE_RESULT, int(flags), job_id, round, chunk_id, agg, echo.fan_in,
                       bitmap.bit_count(), echo.worker, bitmap, values)

    @property
    def copy_number(self) -> int:
        """A GRAD's copy number (0 = first, mod COPY_MOD); 0 in what a switch emits."""
        return (self.flags & COPY_MASK) >> COPY_SHIFT

    @property
    def flag_bits(self) -> int:
        """``flags`` without the copy-number bits: the Flag bits (and any unassigned)."""
        return self.flags & ~COPY_MASK

    @property
    def echo(self) -> Echo:
        """A RESULT's echo of the packet that caused it (its ``worker_id`` and ``fan_in``)."""
        return Echo(self.worker_id, self.fan_in - 1 if self.fan_in else None)

    @property
    def prev_mark(self) -> int | None:
        """A RESULT's previous chunk (the one its PS completed before it in the round), mod
        PREV_MOD; None when it names none (docs/protocol.md §6, "Lost RESULTs")."""
        return self.agg_id - 1 if self.agg_id else None

    def header(self) -> tuple[int, ...]:
        """The header fields in wire order (what HEADER_STRUCT packs)."""
        return _header_of(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InaPacket):
            return NotImplemented
        return (_header_of(self) == _header_of(other)
                and np.array_equal(self.values, other.values))

    __hash__ = None  # type: ignore[assignment]  # the values are a mutable array

    def __repr__(self) -> str:  # short, for test failure messages
        try:
            kind = MsgType(self.msg_type).name
        except ValueError:
            kind = str(self.msg_type)
        return (
            f"InaPacket({kind} flags={self.flags:#x} job={self.job_id} r={self.round} "
            f"c={self.chunk_id} agg={self.agg_id} fan_in={self.fan_in} count={self.count} "
            f"w={self.worker_id} bitmap={self.bitmap:#x})"
        )


_header_of = attrgetter(*HEADER_NAMES)  # InaPacket -> header tuple, at C speed


class _Unfrozen:
    """InaPacket's slots without the frozen ``__setattr__``: :func:`_packet` fills one and
    makes it an InaPacket (same slots, so Python allows the class change)."""

    __slots__ = InaPacket.__slots__


def _packet(msg_type: int, flags: int, job_id: int, round: int, chunk_id: int, agg_id: int,
            fan_in: int, count: int, worker_id: int, bitmap: int,
            values: np.ndarray) -> InaPacket:
    """``InaPacket(...)`` for the hot paths (the codec, ``grad``): the frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, 0.9 µs a packet
    (issue 42); plain slot stores and a class change take 0.27 µs.  The result is an
    ordinary frozen InaPacket (checked equal to the constructor's at import)."""
    p = _Unfrozen()
    p.msg_type, p.flags, p.job_id, p.round, p.chunk_id = msg_type, flags, job_id, round, chunk_id
    p.agg_id, p.fan_in, p.count, p.worker_id, p.bitmap = agg_id, fan_in, count, worker_id, bitmap
    p.values = values
    p.__class__ = InaPacket  # type: ignore[assignment]
    return p  # type: ignore[return-value]


# The layout is declared once, by HEADER_FIELDS: everything above that names its fields is
# checked against it here, at import, so a field added to one and not the others fails
# loudly rather than shifting bytes.
if tuple(f.name for f in fields(InaPacket)) != (*HEADER_NAMES, "values"):
    raise RuntimeError("workers/ina/wire.py: InaPacket's fields are not the INA layout's")
_probe = _packet(*range(len(HEADER_NAMES)), np.zeros(K, np.int32))  # type: ignore[arg-type]
if (type(_probe) is not InaPacket
        or _probe.header() != tuple(range(len(HEADER_NAMES)))
        or not _probe == InaPacket(*range(len(HEADER_NAMES)), np.zeros(K, np.int32))):
    raise RuntimeError("workers/ina/wire.py: _packet does not fill InaPacket's fields in order")
del _probe
if tuple(FIELD_MEANINGS) != (*HEADER_NAMES, "values"):
    raise RuntimeError("workers/ina/wire.py: FIELD_MEANINGS does not cover the INA layer's "
                       "fields in wire order")
if COPY_MASK >> dict(HEADER_FIELDS)["flags"] or COPY_MASK & (
        FLAG_RETRANSMIT | FLAG_FALLBACK | FLAG_INCOMPLETE):
    raise RuntimeError("workers/ina/wire.py: the copy-number bits overlap the flag bits of "
                       "constants.p4 or leave the flags field")

PREFIX_FIELDS: tuple[tuple[str, int], ...] = (
    ("ethernet.dstAddr", 48), ("ethernet.srcAddr", 48), ("ethernet.etherType", 16),
    ("ipv4.version", 4), ("ipv4.ihl", 4), ("ipv4.diffserv", 8), ("ipv4.totalLen", 16),
    ("ipv4.identification", 16), ("ipv4.flags", 3), ("ipv4.fragOffset", 13), ("ipv4.ttl", 8),
    ("ipv4.protocol", 8), ("ipv4.hdrChecksum", 16), ("ipv4.srcAddr", 32),
    ("ipv4.dstAddr", 32),
    ("udp.srcPort", 16), ("udp.dstPort", 16), ("udp.length", 16), ("udp.checksum", 16),
)
"""(name, bit width) of the headers before the INA header in an INA frame, in wire order:
Ethernet, IPv4 without options, UDP, as ``ethernet_t``, ``ipv4_t`` and ``udp_t`` of
p4src/include/headers.p4 declare them (tests/test_ina_p4.py checks them equal)."""

FRAME_FIELDS: tuple[tuple[str, int], ...] = PREFIX_FIELDS + tuple(
    (f"ina.{name}", width) for name, width in HEADER_FIELDS)
"""Every header field of an INA frame in wire order: `PREFIX_FIELDS`, then `HEADER_FIELDS`
named ``ina.<field>``; the values follow."""


def _bit_offsets(layout: tuple[tuple[str, int], ...]) -> dict[str, tuple[int, int]]:
    out, bit = {}, 0
    for name, width in layout:
        out[name] = (bit, width)
        bit += width
    return out


FRAME_BITS: dict[str, tuple[int, int]] = _bit_offsets(FRAME_FIELDS)
"""(bit offset, bit width) of each field of `FRAME_FIELDS` in an INA frame: what a reader
of raw frames (the simulator's forwarding shortcut) takes its offsets from."""


def frame_span(first: str, last: str | None = None) -> slice:
    """The bytes of an INA frame from field ``first`` to field ``last`` (default: ``first``)
    inclusive; ValueError unless both ends fall on byte boundaries."""
    start, _ = FRAME_BITS[first]
    end = sum(FRAME_BITS[last or first])
    if start % 8 or end % 8 or end <= start:
        raise ValueError(f"fields {first}..{last or first} are not whole bytes")
    return slice(start // 8, end // 8)


PAYLOAD_BYTES = INA_HDR_BYTES + 4 * K
"""UDP payload of an INA datagram: header + K int32."""

FRAME_PREFIX_BYTES = 14 + 20 + 8
"""Ethernet + IPv4 (no options) + UDP."""

FRAME_BYTES = FRAME_PREFIX_BYTES + PAYLOAD_BYTES

NACK_PAYLOAD_BYTES = INA_HDR_BYTES
"""UDP payload of a NACK (a RESULT flagged INCOMPLETE, `is_nack`): the header alone.  Its
values are 0 and say nothing, and it goes to one worker's reply port, which no switch
parses as INA (docs/protocol.md §6), so it need not carry them: at 1 % loss per port the
PS's NACKs were a third of its downlink's frames, each 196 bytes where 68 do."""
_VALUES_DTYPE = np.dtype(">i4")
_INT32 = np.dtype(np.int32)
_SHAPE = (K,)
_TYPES = frozenset((TYPE_GRAD, TYPE_PARTIAL, TYPE_RESULT))
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

if (HEADER_STRUCT.size != INA_HDR_BYTES or INA_UDP_LEN != 8 + PAYLOAD_BYTES
        or frame_span("ina.msg_type").start != FRAME_PREFIX_BYTES):
    raise RuntimeError("p4src/include/constants.p4: INA_HDR_BYTES/INA_UDP_LEN (or PREFIX_FIELDS) disagree with "
                       "the INA header layout in workers/ina/wire.py")


_unpack_header = HEADER_STRUCT.unpack_from
_frombuffer = np.frombuffer


class InaDecodeError(ValueError):
    """Bytes that are not a well-formed INA payload (too short, bad type...)."""


def _values_bytes(values: np.ndarray | list[int]) -> bytes:
    if type(values) is np.ndarray and values.dtype == _INT32 and values.shape == _SHAPE:
        return values.astype(_VALUES_DTYPE).tobytes()  # the usual packet: nothing to check
    arr = np.asarray(values)
    if arr.shape != (K,):
        raise ValueError(f"an INA packet carries exactly K={K} values, got shape {arr.shape}")
    if arr.dtype != np.int32:
        if arr.dtype.kind not in "iu":
            raise ValueError(f"INA values must be integers, got dtype {arr.dtype}")
        if arr.size and (int(arr.min()) < _INT32_MIN or int(arr.max()) > _INT32_MAX):
            raise ValueError("INA values must fit int32")
    return arr.astype(_VALUES_DTYPE, copy=False).tobytes()


def is_nack(msg_type: int, flags: int) -> bool:
    """A NACK: the PS's RESULT flagged INCOMPLETE, asking one worker to resend
    (``workers.ina.ps``, "NACKs"); it travels as a header alone (`NACK_PAYLOAD_BYTES`)."""
    return msg_type == TYPE_RESULT and bool(flags & FLAG_INCOMPLETE)


_NO_VALUES = np.zeros(K, np.int32)
_NO_VALUES.setflags(write=False)  # a NACK's values, shared: nobody may write them


def encode_payload(pkt: InaPacket) -> bytes:
    """UDP payload bytes: packed header + K big-endian int32 values (a NACK: the header
    alone, `NACK_PAYLOAD_BYTES`)."""
    head = HEADER_STRUCT.pack(*_header_of(pkt))
    # inline is_nack: a GRAD (the hot path) fails the first comparison
    if pkt.msg_type == TYPE_RESULT and pkt.flags & FLAG_INCOMPLETE:
        return head
    return head + _values_bytes(pkt.values)


def _nack(header: tuple[int, ...]) -> InaPacket | None:
    """The NACK a header-long payload holds (values 0), None when it is no NACK."""
    return _packet(*header, _NO_VALUES) if is_nack(header[0], header[1]) else None


def decode_payload(buf: bytes | memoryview, offset: int = 0) -> InaPacket:
    """Parse the packet (values as a native int32 array) from `buf[offset:]`.

    Raises InaDecodeError when the payload is not exactly PAYLOAD_BYTES long (a NACK:
    exactly NACK_PAYLOAD_BYTES, its values then 0) or msg_type is not a known type (the same
    packets the switch counts as malformed: it checks the UDP length, so a host must not
    accept a longer datagram either)."""
    size = len(buf) - offset
    if size == NACK_PAYLOAD_BYTES:
        nack = _nack(_unpack_header(buf, offset))
        if nack is None:
            raise InaDecodeError(f"INA payload of {size} bytes that is not a NACK")
        return nack
    if size != PAYLOAD_BYTES:
        raise InaDecodeError(f"INA payload of {size} bytes, expected {PAYLOAD_BYTES}")
    header = _unpack_header(buf, offset)
    if header[0] not in _TYPES:
        raise InaDecodeError(f"unknown INA msg_type {header[0]}")
    return _packet(*header, _frombuffer(buf, _VALUES_DTYPE, K, offset + INA_HDR_BYTES)
                   .astype(_INT32))


def decode_payloads(buf: object, lengths: list[int], stride: int) -> list[InaPacket | None]:
    """Datagram ``i`` of a receive batch is ``buf[i * stride:i * stride + lengths[i]]``:
    each decoded as :func:`decode_payload` does, ``None`` for one it refuses (a length of -1:
    truncated).  One numpy conversion for the whole batch's values (each packet's are a row
    of it): a recvmmsg batch's per-datagram conversions cost more than the system call
    (issue 42)."""
    n = len(lengths)
    if n == 0:
        return []
    rows = np.ndarray((n, K), _VALUES_DTYPE, buf, INA_HDR_BYTES,  # type: ignore[call-overload]
                      (stride, 4)).astype(_INT32)
    out: list[InaPacket | None] = []
    unpack, size = _unpack_header, PAYLOAD_BYTES
    for i, ln in enumerate(lengths):
        if ln != size:
            out.append(_nack(unpack(buf, i * stride))  # type: ignore[arg-type]
                       if ln == NACK_PAYLOAD_BYTES else None)
            continue
        header = unpack(buf, i * stride)  # type: ignore[arg-type]
        out.append(_packet(*header, rows[i]) if header[0] in _TYPES else None)
    return out


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


def _frame_prefix(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, sport: int,
                  ttl: int, ip_id: int, tos: int, dport: int, payload: int) -> bytes:
    """The Ethernet/IPv4/UDP bytes before an INA payload of ``payload`` bytes."""
    eth = _mac_bytes(dst_mac) + _mac_bytes(src_mac) + b"\x08\x00"
    ip_wo_sum = struct.pack(
        "!BBHHHBBH4s4s", 0x45, tos, 28 + payload, ip_id, 0, ttl, 17, 0,
        _ip_bytes(src_ip), _ip_bytes(dst_ip),
    )
    csum = ipv4_checksum(ip_wo_sum)
    ip = ip_wo_sum[:10] + struct.pack("!H", csum) + ip_wo_sum[12:]
    return eth + ip + struct.pack("!HHHH", sport, dport, 8 + payload, 0)


class FrameTemplate:
    """Prebuilt Ethernet/IPv4/UDP prefix for INA frames between two fixed endpoints.

    Every INA frame has the same length (but a NACK, `NACK_PAYLOAD_BYTES`), so the IPv4
    header (and its checksum) is constant per (src, dst, ttl, id) and computed once;
    encoding a frame is then one struct pack plus one numpy byte-swap. Equal byte-for-byte
    to ``Ether(src, dst)/IP(src, dst, id, ttl)/UDP(sport, INA_UDP_PORT, chksum=0)/INA(...)``.
    """

    def __init__(
        self, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str,
        sport: int = INA_UDP_PORT, ttl: int = 64, ip_id: int = 0, tos: int = 0,
        dport: int = INA_UDP_PORT,
    ) -> None:
        args = (src_mac, dst_mac, src_ip, dst_ip, sport, ttl, ip_id, tos, dport)
        self.prefix: bytes = _frame_prefix(*args, PAYLOAD_BYTES)
        self.nack_prefix: bytes = _frame_prefix(*args, NACK_PAYLOAD_BYTES)

    def encode(self, pkt: InaPacket) -> bytes:
        """Whole frame bytes for `pkt` (a NACK's without values)."""
        head = HEADER_STRUCT.pack(*_header_of(pkt))
        if pkt.msg_type == TYPE_RESULT and pkt.flags & FLAG_INCOMPLETE:  # is_nack, inline
            return self.nack_prefix + head
        return self.prefix + head + _values_bytes(pkt.values)


def decode_frame(frame: bytes | memoryview, port: int = INA_UDP_PORT) -> InaPacket | None:
    """Return the packet if `frame` is an INA frame as the switch parses it, else None.

    Mirrors the P4 parser: Ethernet type 0x0800, IPv4 with IHL 5 and protocol 17, UDP
    destination port INA_UDP_PORT. An INA frame that is truncated or has a bad type
    raises InaDecodeError (the switch would count it malformed).  ``port``: another
    destination port whose payload is INA too (a host's reply port, docs/protocol.md §6)."""
    dport = (frame[36] << 8) | frame[37] if len(frame) >= FRAME_PREFIX_BYTES else -1
    if (
        len(frame) < FRAME_PREFIX_BYTES
        or frame[12] != 0x08
        or frame[13] != 0x00
        or frame[14] != 0x45
        or frame[23] != 17
        or (dport != INA_UDP_PORT and dport != port)
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


def ecmp_member(turn: int, switch_id: int, group_size: int) -> tuple[int, int]:
    """``(member, next turn)`` of a GRAD/PARTIAL that switch ``switch_id`` routes over an
    equal-cost group whose register ``ecmp_turn`` holds ``turn``, as ina.p4 computes it
    (routing.p4): the group's members in turn, round robin, shifted by the switch id --
    member = (turn + switch_id) mod group_size (v1model's identity hash of the 16-bit sum),
    indexing the group's sorted next-hop ports.  A turn at or past the size (a group that
    shrank) starts again at 0."""
    t = turn if turn < group_size else 0
    return ((t + switch_id) & 0xFFFF) % group_size, (0 if t + 1 == group_size else t + 1)


__all__ = [
    "COPY_BITS",
    "COPY_MASK",
    "COPY_MOD",
    "COPY_SHIFT",
    "FIELD_MEANINGS",
    "FRAME_BITS",
    "FRAME_BYTES",
    "NACK_PAYLOAD_BYTES",
    "FRAME_FIELDS",
    "FRAME_PREFIX_BYTES",
    "HEADER_FIELDS",
    "HEADER_NAMES",
    "HEADER_STRUCT",
    "NO_ECHO",
    "NO_WORKER",
    "PAYLOAD_BYTES",
    "PREFIX_FIELDS",
    "Echo",
    "Flag",
    "FrameTemplate",
    "InaDecodeError",
    "InaPacket",
    "Meaning",
    "MsgType",
    "decode_frame",
    "decode_payload",
    "decode_payloads",
    "ecmp_member",
    "encode_payload",
    "frame_span",
    "ipv4_checksum",
    "is_nack",
    "slot_index",
    "with_copy",
]
