"""P4Runtime 1.4 gRPC server for pyswitch (behaves like BMv2's simple_switch_grpc).

Layers:

* :class:`P4InfoIndex` — id ↔ name lookup over a P4Info, and the P4Runtime byte-string codec.
  Values travel as big-endian byte strings; the server accepts any length as long as the
  value fits the field's bit width (leading zero bytes allowed) and answers with canonical
  strings (shortest form, at least one byte), as the P4Runtime spec §8.4 prescribes.
* :class:`Translator` — P4Runtime entities ⇄ the pyswitch ``Switch`` API (names and ints).
  Every malformed update raises :class:`P4RTError` with a canonical code.
* :class:`Device` — the switch state shared with the forwarding loop (one lock), the
  pipeline, clone sessions and default actions set by the controller.
* :class:`P4RuntimeServicer` — the gRPC service: StreamChannel with primary arbitration per
  (device, role), packet-in/out, Set/GetForwardingPipelineConfig, Write, Read, Capabilities.

Error answers match what BMv2 does (measured, /work/shared/reference/README.md): a Write whose
updates fail ends with gRPC status UNKNOWN and a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer holding one ``p4.v1.Error`` per update (canonical code 0
for updates that succeeded); a non-primary Write gets PERMISSION_DENIED; a backup
controller's arbitration answer carries status code 6 (ALREADY_EXISTS) and the primary's
election id.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pyswitch.errors import EntryExists, EntryNotFound, InvalidArgument, SwitchError

log = logging.getLogger("pyswitch.p4runtime")

P4RUNTIME_VERSION = "1.4.1"
MT = p4info_pb2.MatchField.MatchType
KIND = {MT.EXACT: "exact", MT.LPM: "lpm", MT.TERNARY: "ternary", MT.RANGE: "range",
        MT.OPTIONAL: "optional"}
CODE_NAMES = {v: k for k, v in code_pb2.Code.items()}


class P4RTError(Exception):
    """One failed update/request: canonical google.rpc code + message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(msg: str) -> P4RTError:
    return P4RTError(code_pb2.INVALID_ARGUMENT, msg)


# ---------------------------------------------------------------- byte strings

def decode_int(data: bytes, bitwidth: int, what: str) -> int:
    """P4Runtime byte string → int; INVALID_ARGUMENT if empty or wider than ``bitwidth``."""
    if not data:
        raise invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise invalid(f"{what}: value 0x{value:x} does not fit in {bitwidth} bits")
    return value


def encode_int(value: int, bitwidth: int | None = None) -> bytes:
    """int → canonical P4Runtime byte string (shortest big-endian form, at least 1 byte)."""
    if value < 0:
        raise ValueError(f"negative value {value}")
    if bitwidth is not None and value >> bitwidth:
        raise ValueError(f"value 0x{value:x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def election_int(eid: Any) -> int:
    return (eid.high << 64) | eid.low


# ---------------------------------------------------------------- P4Info index

@dataclass
class FieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: str


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


@dataclass
class ArrayInfo:
    """Indexed extern (counter or register)."""

    id: int
    name: str
    size: int
    bitwidth: int = 0


@dataclass
class MetaInfo:
    id: int
    name: str
    bitwidth: int


class P4InfoIndex:
    """Lookups by id and by name over one P4Info message."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.tables: dict[int, TableInfo] = {}
        self.actions: dict[int, ActionInfo] = {}
        self.counters: dict[int, ArrayInfo] = {}
        self.direct_counters: dict[int, tuple[str, int]] = {}
        self.registers: dict[int, ArrayInfo] = {}
        self.packet_in: list[MetaInfo] = []
        self.packet_out: list[MetaInfo] = []
        for a in p4info.actions:
            self.actions[a.preamble.id] = ActionInfo(
                a.preamble.id, a.preamble.name,
                {p.id: ParamInfo(p.id, p.name, p.bitwidth) for p in a.params})
        for t in p4info.tables:
            fields = {}
            for mf in t.match_fields:
                kind = KIND.get(mf.match_type, mf.other_match_type or "unspecified")
                fields[mf.id] = FieldInfo(mf.id, mf.name, mf.bitwidth, kind)
            self.tables[t.preamble.id] = TableInfo(
                t.preamble.id, t.preamble.name, fields, {r.id for r in t.action_refs},
                any(f.kind in ("ternary", "range", "optional") for f in fields.values()),
                t.const_default_action_id, t.is_const_table,
                initial_default=t.initial_default_action
                if t.HasField("initial_default_action") else None)
        for c in p4info.counters:
            self.counters[c.preamble.id] = ArrayInfo(c.preamble.id, c.preamble.name, c.size)
        for d in p4info.direct_counters:
            self.direct_counters[d.preamble.id] = (d.preamble.name, d.direct_table_id)
            if d.direct_table_id in self.tables:
                self.tables[d.direct_table_id].direct_counter_id = d.preamble.id
        for r in p4info.registers:
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            self.registers[r.preamble.id] = ArrayInfo(r.preamble.id, r.preamble.name, r.size,
                                                      width)
        for cpm in p4info.controller_packet_metadata:
            metas = [MetaInfo(m.id, m.name, m.bitwidth) for m in cpm.metadata]
            if cpm.preamble.name == "packet_in":
                self.packet_in = metas
            elif cpm.preamble.name == "packet_out":
                self.packet_out = metas
        self.table_by_name = {t.name: t for t in self.tables.values()}
        self.action_by_name = {a.name: a for a in self.actions.values()}

    def table(self, table_id: int) -> TableInfo:
        try:
            return self.tables[table_id]
        except KeyError:
            raise invalid(f"unknown table id {table_id}") from None

    def action(self, action_id: int) -> ActionInfo:
        try:
            return self.actions[action_id]
        except KeyError:
            raise invalid(f"unknown action id {action_id}") from None


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


# ---------------------------------------------------------------- translation

@dataclass
class EntryKey:
    table: TableInfo
    match: dict[str, Any]
    priority: int


class Translator:
    """P4Runtime protobuf entities ⇄ pyswitch Switch-API arguments, with full validation."""

    def __init__(self, index: P4InfoIndex) -> None:
        self.index = index

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
                out[f.name] = decode_int(fm.exact.value, w, what)
            elif which == "lpm":
                plen = fm.lpm.prefix_len
                if plen > w:
                    raise invalid(f"{what}: prefix length {plen} > {w} bits")
                if plen <= 0:
                    raise invalid(f"{what}: a /0 prefix must be omitted (don't care)")
                v = decode_int(fm.lpm.value, w, what)
                if v & ((1 << (w - plen)) - 1):
                    raise invalid(f"{what}: bits beyond the /{plen} prefix are not zero")
                out[f.name] = (v, plen)
            elif which == "ternary":
                v = decode_int(fm.ternary.value, w, what)
                m = decode_int(fm.ternary.mask, w, what + " mask")
                if m == 0:
                    raise invalid(f"{what}: an all-zero mask must be omitted (don't care)")
                if v & ~m:
                    raise invalid(f"{what}: value has bits outside the mask")
                out[f.name] = (v, m)
            elif which == "range":
                lo = decode_int(fm.range.low, w, what + " low")
                hi = decode_int(fm.range.high, w, what + " high")
                if lo > hi:
                    raise invalid(f"{what}: range low > high")
                if (lo, hi) == (0, (1 << w) - 1):
                    raise invalid(f"{what}: a full range must be omitted (don't care)")
                out[f.name] = (lo, hi)
            elif which == "optional":
                out[f.name] = decode_int(fm.optional.value, w, what)
        for fid, f in t.fields.items():
            if fid not in seen:
                out[f.name] = wildcard(f)
        return out

    def key(self, te: Any) -> EntryKey:
        t = self.index.table(te.table_id)
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
        a = self.index.action(action.action.action_id)
        if t is not None and a.id not in t.action_ids:
            raise invalid(f"action {a.name} is not an action of table {t.name}")
        params: dict[str, int] = {}
        for p in action.action.params:
            info = a.params.get(p.param_id)
            if info is None:
                raise invalid(f"action {a.name}: unknown parameter id {p.param_id}")
            if info.name in params:
                raise invalid(f"action {a.name}: parameter {info.name} given twice")
            params[info.name] = decode_int(p.value, info.bitwidth, f"{a.name} param {info.name}")
        missing = [p.name for p in a.params.values() if p.name not in params]
        if missing:
            raise invalid(f"action {a.name}: missing parameter(s) {', '.join(missing)}")
        return a.name, params

    # -- encode
    def encode_match(self, t: TableInfo, match: dict[str, Any], te: Any) -> None:
        for f in t.fields.values():
            if f.name not in match or is_wildcard(f, match[f.name]):
                continue
            v = match[f.name]
            fm = te.match.add(field_id=f.id)
            if f.kind == "exact":
                fm.exact.value = encode_int(v)
            elif f.kind == "lpm":
                fm.lpm.value, fm.lpm.prefix_len = encode_int(v[0]), v[1]
            elif f.kind == "ternary":
                fm.ternary.value, fm.ternary.mask = encode_int(v[0]), encode_int(v[1])
            elif f.kind == "range":
                fm.range.low, fm.range.high = encode_int(v[0]), encode_int(v[1])
            elif f.kind == "optional":
                fm.optional.value = encode_int(v)

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


# ---------------------------------------------------------------- device state

def program_from_bytes(data: bytes) -> Any:
    """Device config bytes (pyswitch compile output) → Program."""
    import pyswitch

    program_cls = getattr(pyswitch, "Program", None)
    if program_cls is not None and hasattr(program_cls, "from_bytes"):
        return program_cls.from_bytes(data)
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        tmp.write(data)
        tmp.flush()
        return pyswitch.load_compiled(tmp.name)


@dataclass
class Pipeline:
    p4info: p4info_pb2.P4Info
    device_config: bytes
    cookie: int
    program: Any
    index: P4InfoIndex


@dataclass
class Device:
    """Everything the gRPC threads and the forwarding loop share. Hold ``lock`` to touch
    ``switch``. ``inject(port, frame)`` (set by the daemon) processes a frame as received on
    ``port`` and transmits the result; ``packet_in`` is called by the daemon for each frame
    the pipeline sends to the CPU port."""

    device_id: int = 0
    cpu_port: int | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    switch: Any = None
    pipeline: Pipeline | None = None
    saved: Pipeline | None = None
    clone_sessions: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    defaults: dict[str, tuple[str, dict[str, int]]] = field(default_factory=dict)
    inject: Callable[[int, bytes], None] | None = None
    on_packet_in: list[Callable[[bytes], None]] = field(default_factory=list)
    seed: int = 0

    def make_switch(self, program: Any) -> Any:
        from pyswitch import Switch

        kwargs: dict[str, Any] = {"device_id": self.device_id, "seed": self.seed}
        if self.cpu_port is not None:
            kwargs["cpu_port"] = self.cpu_port
        return Switch(program, **kwargs)

    def load(self, program: Any, device_config: bytes, p4info: p4info_pb2.P4Info | None = None,
             cookie: int = 0) -> None:
        """Install a new pipeline (fresh switch state), under the lock."""
        p4info = p4info if p4info is not None else program.p4info
        pipe = Pipeline(p4info, device_config, cookie, program, P4InfoIndex(p4info))
        sw = self.make_switch(program)
        with self.lock:
            self.switch, self.pipeline = sw, pipe
            self.clone_sessions.clear()
            self.defaults.clear()

    def packet_in(self, frame: bytes) -> None:
        for cb in list(self.on_packet_in):
            cb(frame)


def verify_pipeline(config: Any) -> Pipeline:
    """Check a ForwardingPipelineConfig: the device config loads and the P4Info names exist
    in the program (ids may differ: the given P4Info defines the controller's ids)."""
    if not config.p4_device_config:
        raise invalid("empty p4_device_config")
    try:
        program = program_from_bytes(bytes(config.p4_device_config))
    except Exception as exc:  # any parse error of the device config
        raise invalid(f"device config is not a pyswitch program: {exc}") from None
    p4info = p4info_pb2.P4Info()
    p4info.CopyFrom(config.p4info)
    given = P4InfoIndex(p4info)
    own = P4InfoIndex(program.p4info)
    for kind, g, o in (("table", given.table_by_name, own.table_by_name),
                       ("action", given.action_by_name, own.action_by_name)):
        extra = sorted(set(g) - set(o))
        if extra:
            raise invalid(f"P4Info {kind} {extra[0]} is not in the device config's program")
    if not p4info.tables and not p4info.actions:
        p4info = program.p4info
    return Pipeline(p4info, bytes(config.p4_device_config), config.cookie.cookie, program,
                    P4InfoIndex(p4info))


# ---------------------------------------------------------------- gRPC service

class _Abort:
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code, self.message = code, message


@dataclass(eq=False)
class _Stream:
    q: queue.Queue
    device_id: int | None = None
    role: str | None = None
    election_id: int | None = None  # None: arbitrated without an election id (never primary)
    role_msg: Any = None


class _Status(grpc.Status):
    def __init__(self, code: grpc.StatusCode, details: str, trailing: tuple) -> None:
        self.code, self.details, self.trailing_metadata = code, details, trailing


def _abort_with_errors(context: grpc.ServicerContext, errors: list[p4runtime_pb2.Error],
                       message: str) -> None:
    st = status_pb2.Status(code=code_pb2.UNKNOWN, message=message)
    for e in errors:
        any_msg = any_pb2.Any()
        any_msg.Pack(e)
        st.details.append(any_msg)
    context.abort_with_status(_Status(grpc.StatusCode.UNKNOWN, message,
                                      (("grpc-status-details-bin", st.SerializeToString()),)))


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service of one pyswitch device."""

    def __init__(self, device: Device) -> None:
        self.dev = device
        self._streams: list[_Stream] = []
        self._arb_lock = threading.Lock()
        device.on_packet_in.append(self._send_packet_in)

    # -- arbitration
    def _primary(self, role: str) -> _Stream | None:
        best = None
        for s in self._streams:
            if s.role == role and s.election_id is not None:
                if best is None or s.election_id > best.election_id:
                    best = s
        return best

    def _arb_reply(self, s: _Stream, primary: _Stream | None) -> None:
        msg = p4runtime_pb2.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = self.dev.device_id
        if s.role_msg is not None:
            arb.role.CopyFrom(s.role_msg)
        if primary is not None:
            arb.election_id.high = primary.election_id >> 64
            arb.election_id.low = primary.election_id & ((1 << 64) - 1)
        if primary is s:
            arb.status.code = code_pb2.OK
            arb.status.message = "is primary"
        elif primary is None:
            arb.status.code = code_pb2.NOT_FOUND
            arb.status.message = "no primary"
        else:
            arb.status.code = code_pb2.ALREADY_EXISTS
            arb.status.message = "is not primary"
        s.q.put(msg)

    def _arbitrate(self, s: _Stream, arb: Any) -> None:
        if arb.device_id != self.dev.device_id:
            s.q.put(_Abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {arb.device_id}"))
            return
        role = arb.role.name if arb.HasField("role") else ""
        eid = election_int(arb.election_id) if arb.HasField("election_id") else None
        with self._arb_lock:
            if s.role is not None and s.role != role:
                s.q.put(_Abort(grpc.StatusCode.FAILED_PRECONDITION,
                               "role cannot change on a stream"))
                return
            if eid is not None and any(o is not s and o.role == role and o.election_id == eid
                                       for o in self._streams):
                s.q.put(_Abort(grpc.StatusCode.INVALID_ARGUMENT,
                               f"election id {eid} is already used by another controller"))
                return
            before = self._primary(role)
            s.device_id, s.role, s.election_id = arb.device_id, role, eid
            s.role_msg = p4runtime_pb2.Role()
            if arb.HasField("role"):
                s.role_msg.CopyFrom(arb.role)
            if s not in self._streams:
                self._streams.append(s)
            after = self._primary(role)
            targets = [o for o in self._streams if o.role == role] if after is not before \
                else [s]
            for o in targets:
                self._arb_reply(o, after)
        log.info("arbitration: role %r election id %s -> %s", role, eid,
                 "primary" if after is s else "backup")

    def _drop_stream(self, s: _Stream) -> None:
        with self._arb_lock:
            if s not in self._streams:
                return
            before = self._primary(s.role)
            self._streams.remove(s)
            after = self._primary(s.role)
            if after is not before:
                for o in self._streams:
                    if o.role == s.role:
                        self._arb_reply(o, after)

    def _is_primary(self, role: str, eid_msg: Any, has_eid: bool) -> bool:
        with self._arb_lock:
            p = self._primary(role)
            return p is not None and has_eid and p.election_id == election_int(eid_msg)

    # -- packet I/O
    def _send_packet_in(self, frame: bytes) -> None:
        pipe = self.dev.pipeline
        with self._arb_lock:
            primary = self._primary("")
        if primary is None or pipe is None:
            return
        msg = p4runtime_pb2.StreamMessageResponse()
        metas = pipe.index.packet_in
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
        primary.q.put(msg)

    def _packet_out(self, pkt: Any) -> None:
        pipe, dev = self.dev.pipeline, self.dev
        if pipe is None or dev.inject is None or dev.cpu_port is None:
            log.warning("packet-out dropped: no pipeline or no CPU port")
            return
        metas = pipe.index.packet_out
        given = {m.metadata_id: m.value for m in pkt.metadata}
        hdr, nbits = 0, 0
        for m in metas:
            value = int.from_bytes(given.get(m.id, b"\0"), "big") & ((1 << m.bitwidth) - 1)
            hdr = (hdr << m.bitwidth) | value
            nbits += m.bitwidth
        pad = (-nbits) % 8
        prefix = (hdr << pad).to_bytes((nbits + pad) // 8, "big") if metas else b""
        dev.inject(dev.cpu_port, prefix + bytes(pkt.payload))

    def StreamChannel(self, request_iterator: Iterator[Any], context: grpc.ServicerContext):
        s = _Stream(queue.Queue())

        def reader() -> None:
            try:
                for req in request_iterator:
                    which = req.WhichOneof("update")
                    if which == "arbitration":
                        self._arbitrate(s, req.arbitration)
                    elif which == "packet":
                        if s.election_id is None or self._primary(s.role) is not s:
                            err = p4runtime_pb2.StreamMessageResponse()
                            err.error.canonical_code = code_pb2.PERMISSION_DENIED
                            err.error.message = "packet-out from a non-primary controller"
                            err.error.packet_out.packet_out.CopyFrom(req.packet)
                            s.q.put(err)
                            continue
                        try:
                            self._packet_out(req.packet)
                        except Exception:  # never let a bad packet kill the stream
                            log.exception("packet-out failed")
            except Exception:  # the client went away
                pass
            finally:
                self._drop_stream(s)
                s.q.put(None)

        threading.Thread(target=reader, daemon=True, name="p4rt-stream").start()
        context.add_callback(lambda: (self._drop_stream(s), s.q.put(None)))
        while True:
            item = s.q.get()
            if item is None:
                return
            if isinstance(item, _Abort):
                self._drop_stream(s)
                context.abort(item.code, item.message)
            yield item

    # -- pipeline
    def _check_write_access(self, request: Any, context: grpc.ServicerContext) -> None:
        if request.device_id != self.dev.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {request.device_id}")
        if not self._is_primary(request.role, request.election_id,
                                request.HasField("election_id")):
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          "not the primary controller (no arbitration or wrong election id)")

    def SetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext):
        self._check_write_access(request, context)
        A = p4runtime_pb2.SetForwardingPipelineConfigRequest
        action = request.action
        try:
            if action == A.COMMIT:
                if self.dev.saved is None:
                    raise P4RTError(code_pb2.FAILED_PRECONDITION, "no saved pipeline to commit")
                pipe = self.dev.saved
            elif action in (A.VERIFY, A.VERIFY_AND_SAVE, A.VERIFY_AND_COMMIT,
                            A.RECONCILE_AND_COMMIT):
                pipe = verify_pipeline(request.config)
            else:
                raise invalid(f"unsupported action {action}")
        except P4RTError as e:
            context.abort(grpc.StatusCode(_grpc_code(e.code)), e.message)
        if action == A.VERIFY:
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        if action == A.VERIFY_AND_SAVE:
            self.dev.saved = pipe
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        cur = self.dev.pipeline
        if action == A.RECONCILE_AND_COMMIT and cur is not None \
                and cur.device_config == pipe.device_config:
            # Same program: keep the forwarding state, adopt the new P4Info/cookie.
            with self.dev.lock:
                self.dev.pipeline = pipe
        else:
            self.dev.load(pipe.program, pipe.device_config, pipe.p4info, pipe.cookie)
        self.dev.saved = None
        log.info("pipeline committed (%d tables)", len(pipe.index.tables))
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext):
        if request.device_id != self.dev.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {request.device_id}")
        pipe = self.dev.pipeline
        if pipe is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline set")
        R = p4runtime_pb2.GetForwardingPipelineConfigRequest
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        resp.config.cookie.cookie = pipe.cookie
        if request.response_type in (R.ALL, R.P4INFO_AND_COOKIE):
            resp.config.p4info.CopyFrom(pipe.p4info)
        if request.response_type in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            resp.config.p4_device_config = pipe.device_config
        return resp

    def Capabilities(self, request: Any, context: grpc.ServicerContext):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_VERSION)

    # -- write
    def Write(self, request: Any, context: grpc.ServicerContext):
        self._check_write_access(request, context)
        pipe = self.dev.pipeline
        if pipe is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline set")
        if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity")
        tr = Translator(pipe.index)
        errors: list[p4runtime_pb2.Error] = []
        failed = 0
        with self.dev.lock:
            for update in request.updates:
                try:
                    self._apply(tr, update)
                    errors.append(p4runtime_pb2.Error(canonical_code=code_pb2.OK))
                except P4RTError as e:
                    failed += 1
                    errors.append(p4runtime_pb2.Error(canonical_code=e.code, message=e.message))
                except Exception as e:  # a bug must not kill the switch
                    log.exception("write update failed")
                    failed += 1
                    errors.append(p4runtime_pb2.Error(canonical_code=code_pb2.INTERNAL,
                                                      message=f"internal error: {e}"))
        if failed:
            for e in errors:
                if e.canonical_code:
                    log.info("write error: %s %s", CODE_NAMES.get(e.canonical_code), e.message)
            _abort_with_errors(context, errors,
                               f"{failed} of {len(errors)} updates failed")
        return p4runtime_pb2.WriteResponse()

    def _apply(self, tr: Translator, update: Any) -> None:
        U = p4runtime_pb2.Update
        kind = update.type
        if kind not in (U.INSERT, U.MODIFY, U.DELETE):
            raise invalid("update type not specified")
        ent = update.entity
        which = ent.WhichOneof("entity")
        sw = self.dev.switch
        try:
            if which == "table_entry":
                self._apply_table(tr, kind, ent.table_entry)
            elif which == "packet_replication_engine_entry":
                self._apply_pre(kind, ent.packet_replication_engine_entry)
            elif which == "counter_entry":
                if kind != U.MODIFY:
                    raise invalid("counter entries can only be modified")
                ce = ent.counter_entry
                info = tr.index.counters.get(ce.counter_id)
                if info is None:
                    raise invalid(f"unknown counter id {ce.counter_id}")
                indices = [ce.index.index] if ce.HasField("index") else range(info.size)
                for i in indices:
                    if not 0 <= i < info.size:
                        raise invalid(f"counter {info.name}: index {i} out of range")
                    sw.counter_write(info.name, i, ce.data.packet_count, ce.data.byte_count)
            elif which == "direct_counter_entry":
                if kind != U.MODIFY:
                    raise invalid("direct counter entries can only be modified")
                dce = ent.direct_counter_entry
                k = tr.key(dce.table_entry)
                writer = getattr(sw, "direct_counter_write", None)
                if writer is None:
                    raise P4RTError(code_pb2.UNIMPLEMENTED, "direct counter writes")
                writer(k.table.name, k.match, dce.data.packet_count, dce.data.byte_count,
                       priority=k.priority)
            elif which == "register_entry":
                if kind != U.MODIFY:
                    raise invalid("register entries can only be modified")
                re_ = ent.register_entry
                info = tr.index.registers.get(re_.register_id)
                if info is None:
                    raise invalid(f"unknown register id {re_.register_id}")
                if re_.data.WhichOneof("data") != "bitstring":
                    raise invalid(f"register {info.name}: data must be a bitstring")
                value = decode_int(re_.data.bitstring, info.bitwidth, f"register {info.name}")
                indices = [re_.index.index] if re_.HasField("index") else range(info.size)
                for i in indices:
                    if not 0 <= i < info.size:
                        raise invalid(f"register {info.name}: index {i} out of range")
                    sw.register_write(info.name, i, value)
            elif which is None:
                raise invalid("empty entity")
            else:
                raise P4RTError(code_pb2.UNIMPLEMENTED, f"{which} is not supported by pyswitch")
        except EntryExists as e:
            raise P4RTError(code_pb2.ALREADY_EXISTS, str(e)) from None
        except EntryNotFound as e:
            raise P4RTError(code_pb2.NOT_FOUND, str(e)) from None
        except InvalidArgument as e:
            raise invalid(str(e)) from None
        except SwitchError as e:
            raise P4RTError(code_pb2.UNKNOWN, str(e)) from None

    def _apply_table(self, tr: Translator, kind: int, te: Any) -> None:
        U = p4runtime_pb2.Update
        sw = self.dev.switch
        if te.is_default_action:
            t = tr.index.table(te.table_id)
            if kind != U.MODIFY:
                raise invalid(f"table {t.name}: the default action can only be modified")
            if len(te.match):
                raise invalid(f"table {t.name}: a default-action entry has no match")
            if t.const_default_action_id:
                raise P4RTError(code_pb2.PERMISSION_DENIED,
                                f"table {t.name}: the default action is const")
            action, params = tr.action(t, te.action)
            sw.set_default_action(t.name, action, params)
            self.dev.defaults[t.name] = (action, params)
            return
        k = tr.key(te)
        if k.table.is_const:
            raise P4RTError(code_pb2.PERMISSION_DENIED, f"table {k.table.name} is const")
        if kind == U.DELETE:
            sw.delete_entry(k.table.name, k.match, priority=k.priority)
            return
        action, params = tr.action(k.table, te.action)
        if kind == U.INSERT:
            sw.insert_entry(k.table.name, k.match, action, params, priority=k.priority)
        else:
            sw.modify_entry(k.table.name, k.match, action, params, priority=k.priority)

    def _apply_pre(self, kind: int, pre: Any) -> None:
        U = p4runtime_pb2.Update
        sw = self.dev.switch
        which = pre.WhichOneof("type")
        if which == "multicast_group_entry":
            g = pre.multicast_group_entry
            gid = g.multicast_group_id
            if gid == 0:
                raise invalid("multicast group id 0 is reserved")
            exists = gid in sw.multicast_groups()
            if kind == U.INSERT and exists:
                raise P4RTError(code_pb2.ALREADY_EXISTS, f"multicast group {gid} exists")
            if kind != U.INSERT and not exists:
                raise P4RTError(code_pb2.NOT_FOUND, f"multicast group {gid} does not exist")
            if kind == U.DELETE:
                sw.delete_multicast_group(gid)
            else:
                sw.set_multicast_group(gid, _replicas(g.replicas))
        elif which == "clone_session_entry":
            c = pre.clone_session_entry
            sid = c.session_id
            if sid == 0:
                raise invalid("clone session id 0 is reserved")
            exists = sid in self.dev.clone_sessions
            if kind == U.INSERT and exists:
                raise P4RTError(code_pb2.ALREADY_EXISTS, f"clone session {sid} exists")
            if kind != U.INSERT and not exists:
                raise P4RTError(code_pb2.NOT_FOUND, f"clone session {sid} does not exist")
            if kind == U.DELETE:
                sw.delete_clone_session(sid)
                del self.dev.clone_sessions[sid]
            else:
                reps = _replicas(c.replicas)
                sw.set_clone_session(sid, reps)
                self.dev.clone_sessions[sid] = reps
        else:
            raise invalid("empty packet replication engine entry")

    # -- read
    def Read(self, request: Any, context: grpc.ServicerContext):
        if request.device_id != self.dev.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {request.device_id}")
        pipe = self.dev.pipeline
        if pipe is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline set")
        tr = Translator(pipe.index)
        resp = p4runtime_pb2.ReadResponse()
        try:
            with self.dev.lock:
                for ent in request.entities:
                    self._read_entity(tr, ent, resp)
        except P4RTError as e:
            context.abort(grpc.StatusCode(_grpc_code(e.code)), e.message)
        except (InvalidArgument, EntryNotFound) as e:
            code = code_pb2.NOT_FOUND if isinstance(e, EntryNotFound) else \
                code_pb2.INVALID_ARGUMENT
            context.abort(grpc.StatusCode(_grpc_code(code)), str(e))
        yield resp

    def _read_entity(self, tr: Translator, ent: Any, resp: Any) -> None:
        which = ent.WhichOneof("entity")
        sw = self.dev.switch
        idx = tr.index
        if which == "table_entry":
            q = ent.table_entry
            tables = [idx.table(q.table_id)] if q.table_id else list(idx.tables.values())
            if q.is_default_action:
                for t in tables:
                    self._read_default(tr, t, resp)
                return
            want = tr.match(tables[0], q.match) if q.table_id and len(q.match) else None
            with_counters = q.HasField("counter_data")
            for t in tables:
                for view in sw.read_entries(t.name):
                    if want is not None and (not same_match(t, want, view.match) or
                                             (q.priority and view.priority != q.priority)):
                        continue
                    te = resp.entities.add().table_entry
                    te.table_id = t.id
                    te.priority = view.priority
                    tr.encode_match(t, view.match, te)
                    tr.encode_action(view.action, view.params, te.action)
                    if with_counters and t.direct_counter_id is not None:
                        pk, by = sw.direct_counter_read(t.name, view.match,
                                                        priority=view.priority)
                        te.counter_data.packet_count, te.counter_data.byte_count = pk, by
        elif which == "counter_entry":
            q = ent.counter_entry
            for info, i in indexed_cells(idx.counters, q.counter_id, q, "counter"):
                pk, by = sw.counter_read(info.name, i)
                ce = resp.entities.add().counter_entry
                ce.counter_id, ce.index.index = info.id, i
                ce.data.packet_count, ce.data.byte_count = pk, by
        elif which == "direct_counter_entry":
            q = ent.direct_counter_entry.table_entry
            tables = [idx.table(q.table_id)] if q.table_id else list(idx.tables.values())
            want = tr.match(tables[0], q.match) if q.table_id and len(q.match) else None
            for t in tables:
                if t.direct_counter_id is None:
                    if q.table_id:
                        raise invalid(f"table {t.name} has no direct counter")
                    continue
                for view in sw.read_entries(t.name):
                    if want is not None and not same_match(t, want, view.match):
                        continue
                    pk, by = sw.direct_counter_read(t.name, view.match, priority=view.priority)
                    dce = resp.entities.add().direct_counter_entry
                    dce.table_entry.table_id = t.id
                    dce.table_entry.priority = view.priority
                    tr.encode_match(t, view.match, dce.table_entry)
                    dce.data.packet_count, dce.data.byte_count = pk, by
        elif which == "register_entry":
            q = ent.register_entry
            for info, i in indexed_cells(idx.registers, q.register_id, q, "register"):
                re_ = resp.entities.add().register_entry
                re_.register_id, re_.index.index = info.id, i
                re_.data.bitstring = encode_int(sw.register_read(info.name, i))
        elif which == "packet_replication_engine_entry":
            pre = ent.packet_replication_engine_entry
            if pre.WhichOneof("type") == "multicast_group_entry":
                gid = pre.multicast_group_entry.multicast_group_id
                for g, reps in sorted(sw.multicast_groups().items()):
                    if gid and g != gid:
                        continue
                    out = resp.entities.add().packet_replication_engine_entry
                    out.multicast_group_entry.multicast_group_id = g
                    for port, rid in reps:
                        out.multicast_group_entry.replicas.add(egress_port=port, instance=rid)
            elif pre.WhichOneof("type") == "clone_session_entry":
                sid = pre.clone_session_entry.session_id
                for s, reps in sorted(self.dev.clone_sessions.items()):
                    if sid and s != sid:
                        continue
                    out = resp.entities.add().packet_replication_engine_entry
                    out.clone_session_entry.session_id = s
                    for port, rid in reps:
                        out.clone_session_entry.replicas.add(egress_port=port, instance=rid)
        elif which is None:
            raise invalid("empty entity")
        else:
            raise P4RTError(code_pb2.UNIMPLEMENTED, f"reading {which} is not supported")

    def _read_default(self, tr: Translator, t: TableInfo, resp: Any) -> None:
        te = p4runtime_pb2.TableEntry(table_id=t.id, is_default_action=True)
        getter = getattr(self.dev.switch, "get_default_action", None)
        if getter is not None:
            action, params = getter(t.name)
            tr.encode_action(action, params, te.action)
        elif t.name in self.dev.defaults:
            action, params = self.dev.defaults[t.name]
            tr.encode_action(action, params, te.action)
        elif t.initial_default is not None and t.initial_default.action_id:
            te.action.action.action_id = t.initial_default.action_id
            for arg in t.initial_default.arguments:
                te.action.action.params.add(param_id=arg.param_id, value=arg.value)
        elif t.const_default_action_id:
            te.action.action.action_id = t.const_default_action_id
        resp.entities.add().table_entry.CopyFrom(te)


def _replicas(reps: Any) -> list[tuple[int, int]]:
    out = []
    for r in reps:
        port = r.egress_port
        if not port and r.port:
            port = int.from_bytes(r.port, "big")
        out.append((port, r.instance))
    return out


def _grpc_code(code: int) -> tuple[int, str]:
    for sc in grpc.StatusCode:
        if sc.value[0] == code:
            return sc.value
    return grpc.StatusCode.UNKNOWN.value


def serve(device: Device, address: str, max_workers: int = 16) -> tuple[grpc.Server, int]:
    """Start the gRPC server on ``address`` (HOST:PORT); returns (server, bound port).
    Raises OSError with a clear message when the address cannot be bound."""
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4rt"))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(P4RuntimeServicer(device), server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {address}: {exc}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address} (address in use or invalid)")
    server.start()
    return server, port
