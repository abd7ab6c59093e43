"""P4Info index, shared by pyswitch's server and the controller's client.

One pass over a ``P4Info`` message builds plain records (tables with their match fields,
actions with their parameters, counters, registers, packet-in/out metadata) and lookups by
id (what a switch receives) and by name or alias (what a controller writes). An unknown id
or name raises :class:`UnknownEntity`, a ``KeyError`` whose text names what was asked for;
the server answers it with INVALID_ARGUMENT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

_MT = p4info_pb2.MatchField.MatchType
MATCH_KINDS = {_MT.EXACT: "exact", _MT.LPM: "lpm", _MT.TERNARY: "ternary",
               _MT.RANGE: "range", _MT.OPTIONAL: "optional"}
# Match kinds whose entries need a priority (P4Runtime orders overlapping entries by it).
PRIORITY_KINDS = ("ternary", "range", "optional")


class UnknownEntity(KeyError):
    """An id or name the P4Info does not define."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass
class FieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: str  # exact, lpm, ternary, range, optional, or the other_match_type


@dataclass
class TableInfo:
    id: int
    name: str
    fields: dict[int, FieldInfo]
    action_ids: set[int]
    needs_priority: bool
    const_default_action_id: int
    is_const: bool
    direct_counter_id: int | None = None
    initial_default: Any = None  # p4info TableActionCall or None
    alias: str = ""

    def field(self, name: str) -> FieldInfo:
        """The match field called ``name``."""
        for f in self.fields.values():
            if f.name == name:
                return f
        known = ", ".join(f.name for f in self.fields.values())
        raise UnknownEntity(f"table {self.name}: no match field {name!r} (fields: {known})")


@dataclass
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass
class ActionInfo:
    id: int
    name: str
    params: dict[int, ParamInfo]
    alias: str = ""


@dataclass
class ArrayInfo:
    """Indexed extern (counter or register)."""

    id: int
    name: str
    size: int
    bitwidth: int = 0
    alias: str = ""


@dataclass
class MetaInfo:
    """One field of the ``packet_in`` / ``packet_out`` controller header."""

    id: int
    name: str
    bitwidth: int


@dataclass
class _Kind:
    """The records of one kind by id, and by name and alias (full names win)."""

    label: str
    by_id: dict[int, Any] = field(default_factory=dict)
    by_name: dict[str, Any] = field(default_factory=dict)

    def add(self, info: Any) -> None:
        self.by_id[info.id] = info
        self.by_name[info.name] = info

    def add_aliases(self) -> None:
        for info in list(self.by_id.values()):
            if info.alias and info.alias not in self.by_name:
                self.by_name[info.alias] = info

    def get(self, ref: int | str) -> Any:
        if isinstance(ref, str):
            try:
                return self.by_name[ref]
            except KeyError:
                names = sorted(i.name for i in self.by_id.values())
                raise UnknownEntity(f"unknown {self.label} {ref!r} "
                                    f"(known: {', '.join(names) or 'none'})") from None
        try:
            return self.by_id[ref]
        except KeyError:
            raise UnknownEntity(f"unknown {self.label} id {ref}") from None


class P4InfoIndex:
    """Lookups by id and by name over one P4Info message.

    ``tables``, ``actions``, ``counters``, ``registers`` map ids to records;
    ``table_by_name`` and ``action_by_name`` hold full names only; :meth:`table`,
    :meth:`action`, :meth:`counter`, :meth:`register` take an id, a full name or an alias.
    """

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self._tables = _Kind("table")
        self._actions = _Kind("action")
        self._counters = _Kind("counter")
        self._registers = _Kind("register")
        self.direct_counters: dict[int, tuple[str, int]] = {}  # id -> (name, table id)
        self.packet_in: list[MetaInfo] = []
        self.packet_out: list[MetaInfo] = []
        for a in p4info.actions:
            self._actions.add(ActionInfo(
                a.preamble.id, a.preamble.name,
                {p.id: ParamInfo(p.id, p.name, p.bitwidth) for p in a.params},
                a.preamble.alias))
        for t in p4info.tables:
            fields = {}
            for mf in t.match_fields:
                kind = MATCH_KINDS.get(mf.match_type, mf.other_match_type or "unspecified")
                fields[mf.id] = FieldInfo(mf.id, mf.name, mf.bitwidth, kind)
            self._tables.add(TableInfo(
                t.preamble.id, t.preamble.name, fields, {r.id for r in t.action_refs},
                any(f.kind in PRIORITY_KINDS for f in fields.values()),
                t.const_default_action_id, t.is_const_table,
                initial_default=t.initial_default_action
                if t.HasField("initial_default_action") else None,
                alias=t.preamble.alias))
        for c in p4info.counters:
            self._counters.add(ArrayInfo(c.preamble.id, c.preamble.name, c.size,
                                         alias=c.preamble.alias))
        for d in p4info.direct_counters:
            self.direct_counters[d.preamble.id] = (d.preamble.name, d.direct_table_id)
            if d.direct_table_id in self.tables:
                self.tables[d.direct_table_id].direct_counter_id = d.preamble.id
        for r in p4info.registers:
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            self._registers.add(ArrayInfo(r.preamble.id, r.preamble.name, r.size, width,
                                          alias=r.preamble.alias))
        for cpm in p4info.controller_packet_metadata:
            metas = [MetaInfo(m.id, m.name, m.bitwidth) for m in cpm.metadata]
            if cpm.preamble.name == "packet_in":
                self.packet_in = metas
            elif cpm.preamble.name == "packet_out":
                self.packet_out = metas
        # Full names only (a P4Info compared with a program's must not match on aliases).
        self.table_by_name: dict[str, TableInfo] = dict(self._tables.by_name)
        self.action_by_name: dict[str, ActionInfo] = dict(self._actions.by_name)
        for kind in (self._tables, self._actions, self._counters, self._registers):
            kind.add_aliases()

    @property
    def tables(self) -> dict[int, TableInfo]:
        return self._tables.by_id

    @property
    def actions(self) -> dict[int, ActionInfo]:
        return self._actions.by_id

    @property
    def counters(self) -> dict[int, ArrayInfo]:
        return self._counters.by_id

    @property
    def registers(self) -> dict[int, ArrayInfo]:
        return self._registers.by_id

    def table(self, ref: int | str) -> TableInfo:
        return self._tables.get(ref)

    def action(self, ref: int | str) -> ActionInfo:
        return self._actions.get(ref)

    def counter(self, ref: int | str) -> ArrayInfo:
        return self._counters.get(ref)

    def register(self, ref: int | str) -> ArrayInfo:
        return self._registers.get(ref)


def load_p4info(source: str | Path | bytes | p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """A P4Info from a message, a text-format file (p4c's ``.p4info.txt``) or a binary file."""
    if isinstance(source, p4info_pb2.P4Info):
        return source
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    info = p4info_pb2.P4Info()
    try:
        text_format.Merge(data.decode(), info, allow_unknown_field=True)
        return info
    except (UnicodeDecodeError, text_format.ParseError):
        info.ParseFromString(data)
        return info
