"""NDN packets for the PS transport (docs/design.md §6): encode/parse with python-ndn, segmentation
and reassembly, and Ethernet framing.  Pure bytes in / bytes out, no I/O.

TLV
    Every packet is real NDN packet format 0.3, produced by ``ndn.encoding.make_interest`` /
    ``make_data`` and read by ``parse_interest`` / ``parse_data``; nothing here writes TLV by
    hand.  Data are signed with DigestSha256 (signature type 0: SHA-256 over Name..SignatureInfo,
    the integrity-only signature NDN defines), so a receiver can check that a Data was not
    corrupted or truncated on the way; :func:`decode_data` verifies it by default.  Any parse
    failure is turned into one :class:`PacketError` so callers drop and count (docs/design.md §9).

Segmentation
    A payload larger than one frame is cut into ``ceil(len/seg_size)`` pieces (at least one, so
    an empty payload is one empty segment) named ``<base>/seg=<i>``; every segment carries
    FinalBlockId = ``seg=<n-1>``, so a receiver learns the count from any one of them.  The
    segment size is a protocol parameter shared by both ends (not derived from the name length)
    so that the consumer can compute the number of segments of a payload whose size it knows;
    :func:`segment` checks that every segment, framed, fits the MTU.
    :class:`Reassembler` collects segments in any order, ignores duplicates, and reports the
    missing ones (for re-fetching).

Ethernet
    Frames carry NDN directly over Ethernet with the NDN ethertype 0x8624 (as NFD's Ethernet
    face does).  Frames shorter than 60 bytes are zero-padded; the receiver trims the padding by
    reading the outer TLV length.  (NDNLPv2 fragmentation is not used: segmentation is done at
    the application layer with segment names, as docs/design.md §6 asks.)
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field

from ndn.encoding import (
    Component,
    FormalName,
    InterestParam,
    MetaInfo,
    Name,
    NonStrictName,
    SignatureType,
    make_data,
    make_interest,
    parse_data,
    parse_interest,
    parse_tl_num,
)
from ndn.security import DigestSha256Signer

from workers.ndn.names import split_segment, with_segment

NDN_ETHERTYPE = 0x8624
# NFD's default Ethernet multicast group: every frame goes to it, so a face is a link, not a
# neighbour's address (our links are point to point; nobody needs to learn a MAC)
NDN_MULTICAST_MAC = "01:00:5e:00:17:aa"
TLV_INTEREST = 0x05
TLV_DATA = 0x06
ETH_HEADER = 14
ETH_MIN_FRAME = 60  # without FCS
DEFAULT_MTU = 1500
DEFAULT_SEG_SIZE = 1200  # bytes of content per segment; framed Data stays < 1500 for names < 200 B
DEFAULT_LIFETIME_MS = 4000

_SIGNER = DigestSha256Signer()


class PacketError(ValueError):
    """A packet that cannot be parsed, fails its digest, or cannot be built (message: why)."""


@dataclass(frozen=True)
class Interest:
    """A parsed Interest (only the fields the transport uses)."""

    name: FormalName
    nonce: int | None
    lifetime_ms: int | None
    can_be_prefix: bool
    must_be_fresh: bool
    hop_limit: int | None


@dataclass(frozen=True)
class Data:
    """A parsed Data.  ``final_block`` is the FinalBlockId's segment number, if it has one."""

    name: FormalName
    content: bytes
    final_block: int | None
    freshness_ms: int | None
    signed: bool  # carries a DigestSha256 signature (verified when decode_data(verify=True))


def encode_interest(name: NonStrictName, nonce: int, lifetime_ms: int = DEFAULT_LIFETIME_MS,
                    can_be_prefix: bool = False, must_be_fresh: bool = False) -> bytes:
    """An Interest wire (python-ndn).  ``nonce`` is a 32-bit integer chosen by the consumer."""
    if not 0 <= nonce < 2**32:
        raise PacketError(f"nonce {nonce}: must be a 32-bit unsigned integer")
    param = InterestParam(can_be_prefix=can_be_prefix, must_be_fresh=must_be_fresh,
                          nonce=nonce, lifetime=lifetime_ms)
    return bytes(make_interest(name, param))


def encode_data(name: NonStrictName, content: bytes, final_block: int | None = None,
                freshness_ms: int | None = None) -> bytes:
    """A DigestSha256-signed Data wire (python-ndn); ``final_block`` is a segment number."""
    meta = MetaInfo(freshness_period=freshness_ms,
                    final_block_id=None if final_block is None
                    else Component.from_segment(final_block))
    return bytes(make_data(name, meta, content, signer=_SIGNER))


def packet_type(wire: bytes) -> int | None:
    """The outer TLV type (TLV_INTEREST, TLV_DATA, ...) or None if unreadable."""
    try:
        typ, _ = parse_tl_num(wire, 0)
    except (IndexError, ValueError, TypeError, struct.error):
        return None
    return typ


def decode_interest(wire: bytes) -> Interest:
    """Parse an Interest; PacketError if it is not a well-formed Interest."""
    if packet_type(wire) != TLV_INTEREST:
        raise PacketError("not an Interest (outer TLV type is not 0x05)")
    try:
        name, param, _app, _sig = parse_interest(wire)
        if not isinstance(name, list) or not name:
            raise PacketError("Interest without a Name")
        return Interest(name=[bytes(c) for c in name], nonce=param.nonce,
                        lifetime_ms=param.lifetime, can_be_prefix=bool(param.can_be_prefix),
                        must_be_fresh=bool(param.must_be_fresh), hop_limit=param.hop_limit)
    except PacketError:
        raise
    except Exception as exc:  # python-ndn raises DecodeError/IndexError/ValueError/struct.error
        raise PacketError(f"malformed Interest: {exc!r}") from exc


def decode_data(wire: bytes, verify: bool = True) -> Data:
    """Parse a Data; with ``verify``, check its DigestSha256 signature when it has one.

    The digest covers the signed portion python-ndn reports (Name, MetaInfo, Content,
    SignatureInfo); a mismatch means corruption and raises PacketError.
    """
    if packet_type(wire) != TLV_DATA:
        raise PacketError("not a Data (outer TLV type is not 0x06)")
    try:
        return _decode_data(wire, verify)
    except PacketError:
        raise
    except Exception as exc:  # anything python-ndn or the digest check trips over
        raise PacketError(f"malformed Data: {exc!r}") from exc


def _decode_data(wire: bytes, verify: bool) -> Data:
    try:
        name, meta, content, sig = parse_data(wire)
    except Exception as exc:
        raise PacketError(f"malformed Data: {exc!r}") from exc
    if not isinstance(name, list) or not name:
        raise PacketError("Data without a Name")
    signed = (sig.signature_info is not None
              and sig.signature_info.signature_type == SignatureType.DIGEST_SHA256)
    if verify and signed:
        h = hashlib.sha256()
        for part in sig.signature_covered_part:
            h.update(part)
        if sig.signature_value_buf is None or h.digest() != bytes(sig.signature_value_buf):
            raise PacketError("Data digest mismatch (corrupted)")
    final = None
    if meta.final_block_id is not None:
        fb = bytes(meta.final_block_id)
        try:
            if Component.get_type(fb) == Component.TYPE_SEGMENT:
                final = Component.to_number(fb)
        except Exception as exc:
            raise PacketError(f"malformed FinalBlockId: {exc!r}") from exc
    try:
        comps = [bytes(c) for c in name]
        body = bytes(content or b"")
    except Exception as exc:
        raise PacketError(f"malformed Data: {exc!r}") from exc
    return Data(name=comps, content=body,
                final_block=final, freshness_ms=meta.freshness_period, signed=signed)


# --------------------------------------------------------------------------- segmentation


def n_segments(n_bytes: int, seg_size: int = DEFAULT_SEG_SIZE) -> int:
    """Number of segments of an ``n_bytes`` payload: ceil(n/seg_size), at least 1."""
    if seg_size <= 0:
        raise PacketError(f"segment size {seg_size}: must be > 0")
    return max(1, math.ceil(n_bytes / seg_size))


def segment(base: NonStrictName, payload: bytes, seg_size: int = DEFAULT_SEG_SIZE,
            mtu: int = DEFAULT_MTU, freshness_ms: int | None = None) -> list[bytes]:
    """Cut ``payload`` into Data ``<base>/seg=i`` (i = 0..n-1), each with FinalBlockId n-1.

    Raises PacketError if a segment's wire would exceed ``mtu`` (the Ethernet payload).
    """
    n = n_segments(len(payload), seg_size)
    out = []
    for i in range(n):
        wire = encode_data(with_segment(base, i), payload[i * seg_size:(i + 1) * seg_size],
                           final_block=n - 1, freshness_ms=freshness_ms)
        if len(wire) > mtu:
            raise PacketError(f"segment {i} of {Name.to_str(Name.normalize(base))} is "
                              f"{len(wire)} bytes > MTU {mtu}; lower the segment size")
        out.append(wire)
    return out


@dataclass
class Reassembler:
    """Collect the segments of one payload; report what is missing.

    ``expected`` (the segment count, if the consumer knows the payload size) may be None; the
    count is then learnt from the first segment's FinalBlockId.  A segment whose FinalBlockId
    contradicts the count, or whose number is beyond it, is rejected (``rejected`` counter).
    """

    expected: int | None = None
    parts: dict[int, bytes] = field(default_factory=dict)
    duplicates: int = 0
    rejected: int = 0

    def add(self, seg: int, content: bytes, final_block: int | None) -> bool:
        """Store segment ``seg``; True if it was new and accepted."""
        if final_block is not None:
            if self.expected is None:
                self.expected = final_block + 1
            elif self.expected != final_block + 1:
                self.rejected += 1
                return False
        if seg < 0 or (self.expected is not None and seg >= self.expected):
            self.rejected += 1
            return False
        if seg in self.parts:
            self.duplicates += 1
            return False
        self.parts[seg] = content
        return True

    def add_data(self, data: Data) -> bool:
        """Store a parsed segment Data (its name must end with a segment component)."""
        _base, seg = split_segment(data.name)
        if seg is None:
            self.rejected += 1
            return False
        return self.add(seg, data.content, data.final_block)

    @property
    def complete(self) -> bool:
        return self.expected is not None and len(self.parts) == self.expected

    def missing(self) -> list[int]:
        """Segment numbers not yet received ([0] while the count is still unknown and 0 is)."""
        if self.expected is None:
            return [] if 0 in self.parts else [0]
        return [i for i in range(self.expected) if i not in self.parts]

    def payload(self) -> bytes:
        """The reassembled payload; PacketError if incomplete."""
        if not self.complete:
            raise PacketError(f"payload incomplete: missing segments {self.missing()}")
        return b"".join(self.parts[i] for i in range(self.expected or 0))


# --------------------------------------------------------------------------- Ethernet


def _mac(mac: bytes | str, what: str) -> bytes:
    if isinstance(mac, str):
        try:
            mac = bytes.fromhex(mac.replace(":", ""))
        except ValueError as exc:
            raise PacketError(f"{what} MAC {mac!r}: not hex") from exc
    if len(mac) != 6:
        raise PacketError(f"{what} MAC: must be 6 bytes, got {len(mac)}")
    return bytes(mac)


def eth_frame(dst: bytes | str, src: bytes | str, ndn_wire: bytes,
              mtu: int = DEFAULT_MTU) -> bytes:
    """An Ethernet II frame (ethertype 0x8624) carrying one NDN packet, zero-padded to 60 B."""
    if len(ndn_wire) > mtu:
        raise PacketError(f"NDN packet of {len(ndn_wire)} bytes exceeds the MTU {mtu}")
    frame = _mac(dst, "destination") + _mac(src, "source") + NDN_ETHERTYPE.to_bytes(2, "big") \
        + ndn_wire
    if len(frame) < ETH_MIN_FRAME:
        frame += bytes(ETH_MIN_FRAME - len(frame))
    return frame


def eth_unframe(frame: bytes) -> tuple[bytes, bytes, bytes]:
    """``(dst, src, ndn_wire)`` of an NDN Ethernet frame; padding is trimmed.

    PacketError when the frame is short, not ethertype 0x8624, or its TLV overruns the frame.
    """
    if len(frame) < ETH_HEADER + 2:
        raise PacketError(f"frame of {len(frame)} bytes is too short")
    if int.from_bytes(frame[12:14], "big") != NDN_ETHERTYPE:
        raise PacketError(f"ethertype 0x{int.from_bytes(frame[12:14], 'big'):04x} is not NDN")
    body = memoryview(frame)[ETH_HEADER:]
    try:
        _typ, n1 = parse_tl_num(body, 0)
        length, n2 = parse_tl_num(body, n1)
    except (IndexError, ValueError, struct.error) as exc:
        raise PacketError("truncated NDN TLV header") from exc
    end = n1 + n2 + length
    if end > len(body):
        raise PacketError(f"NDN TLV of {end} bytes overruns the {len(body)}-byte frame")
    return bytes(frame[0:6]), bytes(frame[6:12]), bytes(body[:end])
