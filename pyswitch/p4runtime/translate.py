"""P4Runtime entities ⇄ the pyswitch ``Switch`` API (names and ints), with full validation.

The server's translation layer: a table entry, action or counter/register query of a
request becomes the names and ints of docs/pyswitch-api.md, and a switch's entries become
P4Runtime entities again. Every malformed request raises :class:`P4RTError` with the
canonical code BMv2 gives for it (INVALID_ARGUMENT for unknown ids, values wider than their
field, prefixes longer than the field, a don't-care field sent explicitly, and so on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import code_pb2

from pyswitch.p4runtime.codec import CodecError, decode_int, encode_field_match, encode_int
from pyswitch.p4runtime.p4info_index import ActionInfo, ArrayInfo, FieldInfo, P4InfoIndex, TableInfo

CODE_NAMES = {v: k for k, v in code_pb2.Code.items()}


class P4RTError(Exception):
    """One failed update/request: canonical google.rpc code + message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(msg: str) -> P4RTError:
    return P4RTError(code_pb2.INVALID_ARGUMENT, msg)


def grpc_status(code: int) -> grpc.StatusCode:
    """The gRPC status code with the number of a canonical google.rpc code."""
    for sc in grpc.StatusCode:
        if sc.value[0] == code:
            return sc
    return grpc.StatusCode.UNKNOWN


def field_value(data: bytes, bitwidth: int, what: str) -> int:
    """A byte string of a request → int, or INVALID_ARGUMENT (empty, wider than the field)."""
    try:
        return decode_int(data, bitwidth, what)
    except CodecError as exc:
        raise invalid(str(exc)) from None


def wildcard(f: FieldInfo) -> Any:
    """The Switch-API value of a match field left out of a P4Runtime entry (don't care)."""
    if f.kind == "lpm":
        return (0, 0)
    if f.kind == "ternary":
        return (0, 0)
    if f.kind == "range":
        return (0, (1 << f.bitwidth) - 1)
    if f.kind == "optional":
        return None
    raise invalid(f"match field {f.name} ({f.kind}) is required")


def is_wildcard(f: FieldInfo, value: Any) -> bool:
    if value is None:
        return True
    if f.kind in ("lpm", "ternary"):
        return tuple(value)[1] == 0
    if f.kind == "range":
        return tuple(value) == (0, (1 << f.bitwidth) - 1)
    return False


@dataclass
class EntryKey:
    table: TableInfo
    match: dict[str, Any]
    priority: int


class Translator:
    """P4Runtime protobuf entities ⇄ pyswitch Switch-API arguments, with full validation."""

    def __init__(self, index: P4InfoIndex) -> None:
        self.index = index

    # -- lookups (an unknown id is the client's mistake: INVALID_ARGUMENT, as BMv2)
    def table(self, table_id: int) -> TableInfo:
        try:
            return self.index.table(table_id)
        except KeyError as exc:
            raise invalid(str(exc)) from None

    def action_info(self, action_id: int) -> ActionInfo:
        try:
            return self.index.action(action_id)
        except KeyError as exc:
            raise invalid(str(exc)) from None

    # -- decode
    def match(self, t: TableInfo, fms: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: set[int] = set()
        for fm in fms:
            f = t.fields.get(fm.field_id)
            if f is None:
                raise invalid(f"table {t.name}: unknown match field id {fm.field_id}")
            if fm.field_id in seen:
                raise invalid(f"table {t.name}: match field {f.name} given twice")
            seen.add(fm.field_id)
            which = fm.WhichOneof("field_match_type")
            if which != f.kind:
                raise invalid(f"table {t.name}: field {f.name} is {f.kind}, got {which}")
            what = f"{t.name} field {f.name}"
            w = f.bitwidth
            if which == "exact":
                out[f.name] = field_value(fm.exact.value, w, what)
            elif which == "lpm":
                plen = fm.lpm.prefix_len
                if plen > w:
                    raise invalid(f"{what}: prefix length {plen} > {w} bits")
                if plen <= 0:
                    raise invalid(f"{what}: a /0 prefix must be omitted (don't care)")
                v = field_value(fm.lpm.value, w, what)
                if v & ((1 << (w - plen)) - 1):
                    raise invalid(f"{what}: bits beyond the /{plen} prefix are not zero")
                out[f.name] = (v, plen)
            elif which == "ternary":
                v = field_value(fm.ternary.value, w, what)
                m = field_value(fm.ternary.mask, w, what + " mask")
                if m == 0:
                    raise invalid(f"{what}: an all-zero mask must be omitted (don't care)")
                if v & ~m:
                    raise invalid(f"{what}: value has bits outside the mask")
                out[f.name] = (v, m)
            elif which == "range":
                lo = field_value(fm.range.low, w, what + " low")
                hi = field_value(fm.range.high, w, what + " high")
                if lo > hi:
                    raise invalid(f"{what}: range low > high")
                if (lo, hi) == (0, (1 << w) - 1):
                    raise invalid(f"{what}: a full range must be omitted (don't care)")
                out[f.name] = (lo, hi)
            elif which == "optional":
                out[f.name] = field_value(fm.optional.value, w, what)
        for fid, f in t.fields.items():
            if fid not in seen:
                out[f.name] = wildcard(f)
        return out

    def key(self, te: Any) -> EntryKey:
        t = self.table(te.table_id)
        match = self.match(t, te.match)
        if t.needs_priority and te.priority <= 0:
            raise invalid(f"table {t.name}: entries need a priority > 0")
        if not t.needs_priority and te.priority != 0:
            raise invalid(f"table {t.name}: priority must be 0 (no ternary/range/optional)")
        return EntryKey(t, match, te.priority)

    def action(self, t: TableInfo | None, action: Any) -> tuple[str, dict[str, int]]:
        which = action.WhichOneof("type")
        if which != "action":
            if which is None:
                raise invalid("no action given")
            raise P4RTError(code_pb2.UNIMPLEMENTED, f"{which} (action profiles) not supported")
        a = self.action_info(action.action.action_id)
        if t is not None and a.id not in t.action_ids:
            raise invalid(f"action {a.name} is not an action of table {t.name}")
        params: dict[str, int] = {}
        for p in action.action.params:
            info = a.params.get(p.param_id)
            if info is None:
                raise invalid(f"action {a.name}: unknown parameter id {p.param_id}")
            if info.name in params:
                raise invalid(f"action {a.name}: parameter {info.name} given twice")
            params[info.name] = field_value(p.value, info.bitwidth, f"{a.name} param {info.name}")
        missing = [p.name for p in a.params.values() if p.name not in params]
        if missing:
            raise invalid(f"action {a.name}: missing parameter(s) {', '.join(missing)}")
        return a.name, params

    # -- encode
    def encode_match(self, t: TableInfo, match: dict[str, Any], te: Any) -> None:
        """Append the match of a switch entry to ``te``, leaving don't-care fields out."""
        for f in t.fields.values():
            if f.name in match and not is_wildcard(f, match[f.name]):
                te.match.append(encode_field_match(f, match[f.name]))

    def encode_action(self, action: str, params: dict[str, int], out: Any) -> None:
        a = self.index.action_by_name.get(action)
        if a is None:
            return
        out.action.action_id = a.id
        for p in a.params.values():
            if p.name in params:
                out.action.params.add(param_id=p.id, value=encode_int(params[p.name]))


def indexed_cells(arrays: dict[int, ArrayInfo], ident: int, query: Any,
                  kind: str) -> list[tuple[ArrayInfo, int]]:
    """(array, index) pairs a counter/register Read asks for: id 0 = every array of the kind,
    no index = every cell; unknown ids and out-of-range indices are INVALID_ARGUMENT."""
    if ident == 0:
        infos = list(arrays.values())
    elif ident in arrays:
        infos = [arrays[ident]]
    else:
        raise invalid(f"unknown {kind} id {ident}")
    cells = []
    for info in infos:
        indices = [query.index.index] if query.HasField("index") else range(info.size)
        for i in indices:
            if not 0 <= i < info.size:
                raise invalid(f"{kind} {info.name}: index {i} out of range")
            cells.append((info, i))
    return cells


def same_match(t: TableInfo, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two Switch-API matches name the same entry (don't-care in any spelling)."""
    for f in t.fields.values():
        va, vb = a.get(f.name), b.get(f.name)
        wa, wb = is_wildcard(f, va), is_wildcard(f, vb)
        if wa or wb:
            if wa != wb:
                return False
            continue
        if (tuple(va) if isinstance(va, list | tuple) else va) != \
                (tuple(vb) if isinstance(vb, list | tuple) else vb):
            return False
    return True

