"""P4Runtime value codec, shared by pyswitch's server and the controller's client.

P4Runtime carries every value as a big-endian byte string. The sender uses the canonical
form (shortest string, at least one byte: P4Runtime spec §8.4); a receiver accepts leading
zero bytes as long as the value fits the field's bit width. Everything here is pure: ints,
bytes and protobuf messages, no gRPC and no switch.

Errors are :class:`CodecError` (a ``ValueError``): the server answers them with
INVALID_ARGUMENT, the client lets them reach the caller.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from p4.v1 import p4runtime_pb2

if TYPE_CHECKING:
    from pyswitch.p4runtime.p4info_index import FieldInfo

_U64 = (1 << 64) - 1


class CodecError(ValueError):
    """A value that has no valid P4Runtime encoding for its field."""


def encode_int(value: int, bitwidth: int | None = None, what: str = "value") -> bytes:
    """int → canonical byte string; refuses negative values and values wider than
    ``bitwidth`` (when given)."""
    if value < 0:
        raise CodecError(f"{what}: negative value {value}")
    if bitwidth is not None and value >> bitwidth:
        raise CodecError(f"{what}: value {value:#x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_int(data: bytes, bitwidth: int | None = None, what: str = "value") -> int:
    """Byte string → int. With ``bitwidth`` (a request a switch receives) the string must be
    non-empty and the value must fit; without it (an answer a client reads) it is taken as
    it comes, the empty string meaning 0."""
    value = int.from_bytes(data, "big")
    if bitwidth is None:
        return value
    if not data:
        raise CodecError(f"{what}: empty byte string")
    if value >> bitwidth:
        raise CodecError(f"{what}: value {value:#x} does not fit in {bitwidth} bits")
    return value


def to_int(value: Any, what: str) -> int:
    """A value as users write it → int: an int, bytes, ``"aa:bb:cc:dd:ee:ff"``,
    ``"10.0.0.1"`` or a decimal/hex string."""
    if isinstance(value, bool):  # bool is an int subclass; True as a MAC is a mistake
        raise CodecError(f"{what}: {value!r} is not a value")
    if isinstance(value, int):
        if value < 0:
            raise CodecError(f"{what}: negative value {value}")
        return value
    if isinstance(value, bytes | bytearray):
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        s = value.strip()
        if s.count(":") == 5:
            return int(s.replace(":", ""), 16)
        try:
            return int(ipaddress.IPv4Address(s))
        except ValueError:
            pass
        try:
            return int(s, 0)
        except ValueError:
            raise CodecError(f"{what}: cannot read {value!r} as a value") from None
    raise CodecError(f"{what}: cannot read {value!r} as a value")


def election_int(eid: Any) -> int:
    """A ``p4.v1.Uint128`` election id → int."""
    return (eid.high << 64) | eid.low


def election_pair(eid: int | tuple[int, int]) -> tuple[int, int]:
    """An election id as int or (high, low) → (high, low)."""
    if isinstance(eid, tuple):
        return eid
    return eid >> 64, eid & _U64


# ---------------------------------------------------------------- match fields

def encode_field_match(field: FieldInfo, value: Any,
                       what: str | None = None) -> p4runtime_pb2.FieldMatch:
    """One match field in Switch-API form (ints; pairs for lpm/ternary/range, see
    docs/pyswitch-api.md) → FieldMatch with canonical strings; ``what`` names the field in
    errors. The caller leaves out don't-care fields, as P4Runtime requires."""
    w, what = field.bitwidth, what or field.name
    fm = p4runtime_pb2.FieldMatch(field_id=field.id)
    if field.kind == "exact":
        fm.exact.value = encode_int(value, w, what)
    elif field.kind == "optional":
        fm.optional.value = encode_int(value, w, what)
    elif field.kind == "lpm":
        fm.lpm.value, fm.lpm.prefix_len = encode_int(value[0], w, what), value[1]
    elif field.kind == "ternary":
        fm.ternary.value = encode_int(value[0], w, what)
        fm.ternary.mask = encode_int(value[1], w, what + " mask")
    elif field.kind == "range":
        fm.range.low = encode_int(value[0], w, what + " low")
        fm.range.high = encode_int(value[1], w, what + " high")
    else:
        raise CodecError(f"{what}: unsupported match kind {field.kind}")
    return fm


def decode_field_match(fm: Any) -> Any:
    """A FieldMatch as a switch sent it → its Switch-API value (no validation: the strict
    checks a switch applies to requests live in pyswitch.p4runtime.translate)."""
    which = fm.WhichOneof("field_match_type")
    if which == "exact":
        return decode_int(fm.exact.value)
    if which == "optional":
        return decode_int(fm.optional.value)
    if which == "lpm":
        return decode_int(fm.lpm.value), fm.lpm.prefix_len
    if which == "ternary":
        return decode_int(fm.ternary.value), decode_int(fm.ternary.mask)
    if which == "range":
        return decode_int(fm.range.low), decode_int(fm.range.high)
    return None
