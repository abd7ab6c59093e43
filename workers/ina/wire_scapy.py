"""The Scapy layer of the INA header (tests, tools, dissection; never a hot path).

Apart from :mod:`workers.ina.wire` so that host processes, which only use the struct codec,
never pay for importing Scapy (a second or more: it reads the namespace's routes).  The layer is
built on :data:`workers.ina.wire.HEADER_FIELDS` (the layout's one declaration) with the field
classes that make Scapy show each field for what it is, and checked equal to it at import.
"""

from __future__ import annotations

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

from workers.ina.constants import INA_UDP_PORT, TYPE_GRAD, K
from workers.ina.wire import (
    COPY_BITS,
    COPY_SHIFT,
    HEADER_FIELDS,
    HEADER_NAMES,
    Flag,
    InaPacket,
    MsgType,
    is_nack,
)


def _flag_names() -> list[str]:
    """FlagsField wants one name per bit, least significant first; the copy number's bits
    are named too, so Scapy's dissection shows them for what they are."""
    names = [f"bit{i}" for i in range(8)]
    for flag in (Flag.RETRANSMIT, Flag.FALLBACK, Flag.INCOMPLETE):
        names[int(flag).bit_length() - 1] = str(flag.name)
    for i in range(COPY_BITS):
        names[COPY_SHIFT + i] = f"copy{i}"
    return names


_SHOWN_AS = {  # fields not shown as plain unsigned numbers
    "msg_type": lambda: ByteEnumField("msg_type", TYPE_GRAD, {t.value: t.name for t in MsgType}),
    "flags": lambda: FlagsField("flags", 0, 8, _flag_names()),
    "bitmap": lambda: XLongField("bitmap", 0),
}
_PLAIN = {8: ByteField, 16: ShortField, 32: IntField}


class INA(Packet):
    """INA header plus its K int32 values (the values are the layer's last field)."""

    name = "INA"
    fields_desc = [
        *(_SHOWN_AS[n]() if n in _SHOWN_AS else _PLAIN[bits](n, 0) for n, bits in HEADER_FIELDS),
        # a NACK carries no values (workers.ina.wire.NACK_PAYLOAD_BYTES)
        FieldListField("values", [0] * K, SignedIntField("v", 0),
                       count_from=lambda pkt: 0 if is_nack(pkt.msg_type, pkt.flags) else K),
    ]

    def mysummary(self) -> str:
        return self.sprintf(
            "INA %msg_type% job=%job_id% r=%round% c=%chunk_id% agg=%agg_id% "
            "n=%count%/%fan_in% w=%worker_id% bm=%bitmap% fl=%flags%"
        )


def _field_bits(f) -> int:
    return f.size if isinstance(f, FlagsField) else f.sz * 8


if tuple((f.name, _field_bits(f)) for f in INA.fields_desc[:-1]) != HEADER_FIELDS:
    raise RuntimeError("workers/ina/wire_scapy.py: the INA layer is not HEADER_FIELDS")

bind_layers(UDP, INA, dport=INA_UDP_PORT)
# The switch decides by destination port alone; make Scapy's dissector do the same even
# when the source port belongs to another protocol (e.g. 53 -> DNS would otherwise win).
UDP.payload_guess.sort(key=lambda guess: guess[1] is not INA)


def from_scapy(pkt: Packet) -> InaPacket:
    """The InaPacket of a Scapy packet containing an INA layer (tests, tools: not a hot
    path)."""
    layer = pkt[INA]
    header = [int(getattr(layer, name)) for name in HEADER_NAMES]
    values = layer.values if not is_nack(header[0], header[1]) else [0] * K  # none sent
    return InaPacket(*header, np.array(values, dtype=np.int32))


__all__ = ["INA", "from_scapy"]
