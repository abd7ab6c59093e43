"""Packet I/O of pyswitch's P4Runtime server: CPU-port frames ⇄ PacketIn / PacketOut.

A frame the pipeline sends to the CPU port starts with the program's ``packet_in`` header
(the ``@controller_header("packet_in")`` fields, packed MSB first and padded to whole
bytes, as BMv2 emits it); the server strips it into PacketIn metadata. A PacketOut's
metadata become a ``packet_out`` header in front of its payload, and the frame enters the
pipeline on the CPU port.
"""

from __future__ import annotations

from typing import Any

from p4.v1 import p4runtime_pb2

from pyswitch.p4runtime.codec import decode_int, encode_int
from pyswitch.p4runtime.p4info_index import MetaInfo


def packet_in_message(metas: list[MetaInfo], frame: bytes) -> p4runtime_pb2.StreamMessageResponse:
    """A CPU-port frame → StreamMessageResponse carrying a PacketIn (metadata by id)."""
    msg = p4runtime_pb2.StreamMessageResponse()
    nbits = sum(m.bitwidth for m in metas)
    nbytes = (nbits + 7) // 8
    if metas and len(frame) >= nbytes:
        hdr = int.from_bytes(frame[:nbytes], "big") >> (nbytes * 8 - nbits)
        shift = nbits
        for m in metas:
            shift -= m.bitwidth
            value = (hdr >> shift) & ((1 << m.bitwidth) - 1)
            msg.packet.metadata.add(metadata_id=m.id, value=encode_int(value))
        frame = frame[nbytes:]
    msg.packet.payload = frame
    return msg


def packet_out_frame(metas: list[MetaInfo], pkt: Any) -> bytes:
    """A PacketOut → the frame that enters the pipeline on the CPU port. Metadata left out
    are 0; values wider than their field are cut to it."""
    given = {m.metadata_id: m.value for m in pkt.metadata}
    hdr, nbits = 0, 0
    for m in metas:
        value = decode_int(given.get(m.id, b"\0")) & ((1 << m.bitwidth) - 1)
        hdr = (hdr << m.bitwidth) | value
        nbits += m.bitwidth
    pad = (-nbits) % 8
    prefix = (hdr << pad).to_bytes((nbits + pad) // 8, "big") if metas else b""
    return prefix + bytes(pkt.payload)
