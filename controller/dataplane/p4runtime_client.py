"""P4Runtime client for one switch (pyswitch or BMv2), usable for many switches at once.

p4runtime-shell keeps one global client per process; a controller driving a whole fabric
needs one independent connection per switch, which is what :class:`SwitchConnection` is
(grpcio + the ``p4runtime`` protobufs, nothing global).

Names are P4Info names (``MyIngress.ipv4_lpm``, ``hdr.ipv4.dstAddr``, action parameter
names). Match values by kind:

* exact / optional: an int, a MAC ``"00:11:22:33:44:55"``, an IPv4 ``"10.0.0.1"`` or bytes;
* lpm: ``(value, prefix_len)`` or ``"10.0.1.0/24"`` (host bits are cleared before sending);
* ternary: ``(value, mask)``; range: ``(low, high)``.

Values are sent as canonical byte strings (P4Runtime §8.4), which BMv2 and pyswitch accept;
the value codec and the P4Info index are pyswitch's (``pyswitch.p4runtime.codec``,
``pyswitch.p4runtime.p4info_index``), the same code the switch decodes with.
Failures raise :class:`WriteError` (one :class:`UpdateError` per failed update, with the
canonical code the switch gave), :class:`SwitchTimeout` ("switch s3 at 127.0.0.1:50003 did
not answer within 5 s"), :class:`NotPrimaryError`, or :class:`P4RuntimeError`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pyswitch.inputfile import MAX_DEVICE_CONFIG_BYTES, read_input
from pyswitch.p4runtime.codec import (
    decode_field_match,
    decode_int,
    election_pair,
    encode_field_match,
    encode_int,
    to_int,
)
from pyswitch.p4runtime.p4info_index import P4InfoIndex, TableInfo, load_p4info

CODE_NAMES = {v: k for k, v in code_pb2.Code.items()}


class P4RuntimeError(Exception):
    """A P4Runtime request failed; ``code`` is the gRPC status code (grpc.StatusCode)."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class SwitchTimeout(P4RuntimeError):
    """The switch did not answer in time (or is not reachable)."""


class NotPrimaryError(P4RuntimeError):
    """This connection is not the primary controller of the switch."""


@dataclass(frozen=True)
class UpdateError:
    """The switch's verdict on one update of a Write (index into the request's updates)."""

    index: int
    code: int
    message: str

    @property
    def code_name(self) -> str:
        return CODE_NAMES.get(self.code, str(self.code))


class WriteError(P4RuntimeError):
    """A Write failed; ``errors`` lists the failed updates, ``results`` every update's."""

    def __init__(self, switch: str, results: list[UpdateError], code: grpc.StatusCode,
                 details: str) -> None:
        self.results = results
        self.errors = [r for r in results if r.code != code_pb2.OK]
        lines = [f"{switch}: write failed ({code.name}: {details})"]
        lines += [f"  update {e.index}: {e.code_name}: {e.message}" for e in self.errors]
        super().__init__("\n".join(lines), code)


@dataclass
class TableEntry:
    """A table entry read back from a switch, in names and ints."""

    table: str
    match: dict[str, Any]
    action: str | None
    params: dict[str, int]
    priority: int = 0
    counter: tuple[int, int] | None = None  # (packets, bytes) when asked for
    is_default: bool = False


# ---------------------------------------------------------------- the connection

class SwitchConnection:
    """One P4Runtime session with one switch (its own channel, stream and arbitration)."""

    def __init__(self, address: str, device_id: int = 0, election_id: int | tuple[int, int] = 1,
                 name: str | None = None, timeout: float = 5.0, role: str | None = None) -> None:
        self.address = address
        self.device_id = device_id
        self.election_id = election_pair(election_id)
        self.name = name or f"device {device_id}"
        self.timeout = timeout
        self.role = role
        self.index: P4InfoIndex | None = None  # names and ids of the switch's P4Info
        self.is_primary = False
        self.primary_election_id: tuple[int, int] | None = None
        self.arbitration_code: int | None = None  # status code of the last arbitration answer
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._out: queue.Queue = queue.Queue()
        self._arb: queue.Queue = queue.Queue()
        self.packet_ins: queue.Queue = queue.Queue()
        self.stream_errors: queue.Queue = queue.Queue()
        self._stream: Any = None
        self._reader: threading.Thread | None = None

    # -- session
    def _timeout_error(self) -> SwitchTimeout:
        return SwitchTimeout(f"switch {self.name} at {self.address} did not answer within "
                             f"{self.timeout:g} s", grpc.StatusCode.DEADLINE_EXCEEDED)

    def connect(self, arbitrate: bool = True, require_primary: bool = True) -> SwitchConnection:
        """Open the channel (wait until ready), open the stream and arbitrate."""
        self._channel = grpc.insecure_channel(self.address)
        try:
            ready = grpc.channel_ready_future(self._channel)
            ready.result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            ready.cancel()  # before close: a polling future dies on a closed channel
            self._channel.close()
            raise self._timeout_error() from None
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        if arbitrate:
            self._open_stream()
            self.arbitrate()
            if require_primary and not self.is_primary:
                hi, lo = self.primary_election_id or (0, 0)
                raise NotPrimaryError(
                    f"switch {self.name} at {self.address}: election id "
                    f"{self.election_id} is not primary (primary has {(hi, lo)})",
                    grpc.StatusCode.PERMISSION_DENIED)
        return self

    def _open_stream(self) -> None:
        def requests() -> Iterator[Any]:
            while True:
                item = self._out.get()
                if item is None:
                    return
                yield item

        self._stream = self._stub.StreamChannel(requests())

        def read() -> None:
            try:
                for msg in self._stream:
                    which = msg.WhichOneof("update")
                    if which == "arbitration":
                        self._arb.put(msg.arbitration)
                    elif which == "packet":
                        self.packet_ins.put(msg.packet)
                    elif which == "error":
                        self.stream_errors.put(msg.error)
            except grpc.RpcError as exc:
                self._arb.put(exc)

        self._reader = threading.Thread(target=read, daemon=True, name=f"p4rt-{self.name}")
        self._reader.start()

    def arbitrate(self) -> bool:
        """Send a MasterArbitrationUpdate; return whether this connection is primary."""
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = self.election_id
        if self.role is not None:
            req.arbitration.role.name = self.role
        self._out.put(req)
        try:
            ans = self._arb.get(timeout=self.timeout)
        except queue.Empty:
            raise self._timeout_error() from None
        if isinstance(ans, grpc.RpcError):
            raise P4RuntimeError(f"switch {self.name} at {self.address}: arbitration failed: "
                                 f"{ans.code().name}: {ans.details()}", ans.code())
        self._update_arbitration(ans)
        return self.is_primary

    def _update_arbitration(self, arb: Any) -> None:
        self.is_primary = arb.status.code == code_pb2.OK
        self.arbitration_code = arb.status.code
        self.primary_election_id = (arb.election_id.high, arb.election_id.low)

    def poll_arbitration(self) -> bool:
        """Apply arbitration updates that arrived since (e.g. the primary went away)."""
        while True:
            try:
                ans = self._arb.get_nowait()
            except queue.Empty:
                return self.is_primary
            if not isinstance(ans, grpc.RpcError):
                self._update_arbitration(ans)

    def close(self) -> None:
        self._out.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self._channel is not None:
            self._channel.close()
        if self._reader is not None:
            self._reader.join(2)

    def __enter__(self) -> SwitchConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- RPC plumbing
    def _call(self, method: str, request: Any) -> Any:
        if self._stub is None:
            raise P4RuntimeError(f"switch {self.name}: not connected (call connect())")
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._rpc_error(method, exc) from None

    def _rpc_error(self, method: str, exc: grpc.RpcError) -> P4RuntimeError:
        code = exc.code()
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
            return self._timeout_error()
        if method == "Write" and code == grpc.StatusCode.UNKNOWN:
            results = self._write_results(exc)
            if results:
                return WriteError(self.name, results, code, exc.details())
        if code == grpc.StatusCode.PERMISSION_DENIED:
            return NotPrimaryError(f"switch {self.name} at {self.address}: {method}: "
                                   f"{exc.details()}", code)
        return P4RuntimeError(f"switch {self.name} at {self.address}: {method}: "
                              f"{code.name}: {exc.details()}", code)

    @staticmethod
    def _write_results(exc: grpc.RpcError) -> list[UpdateError]:
        for key, value in exc.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                st = status_pb2.Status()
                st.ParseFromString(value)
                out = []
                for i, detail in enumerate(st.details):
                    err = p4runtime_pb2.Error()
                    if detail.Unpack(err):
                        out.append(UpdateError(i, err.canonical_code, err.message))
                return out
        return []

    def _stamp(self, req: Any) -> Any:
        req.device_id = self.device_id
        req.election_id.high, req.election_id.low = self.election_id
        if self.role is not None:
            req.role = self.role
        return req

    def _need_index(self) -> P4InfoIndex:
        if self.index is None:
            self.index = P4InfoIndex(self.get_p4info())
        return self.index

    # -- pipeline
    def set_pipeline(self, p4info: str | Path | bytes | p4info_pb2.P4Info,
                     device_config: str | Path | bytes, cookie: int = 0,
                     action: str = "VERIFY_AND_COMMIT") -> None:
        """SetForwardingPipelineConfig from a P4Info (file or message) and the device config
        (file path or bytes: BMv2 JSON or pyswitch compile output)."""
        raw = device_config if isinstance(device_config, bytes) else \
            read_input(device_config, MAX_DEVICE_CONFIG_BYTES, "device config")
        info = load_p4info(p4info)
        req = self._stamp(p4runtime_pb2.SetForwardingPipelineConfigRequest())
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.Action.Value(action)
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = raw
        req.config.cookie.cookie = cookie
        self._call("SetForwardingPipelineConfig", req)
        self.index = P4InfoIndex(info)

    def get_p4info(self) -> p4info_pb2.P4Info:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        return self._call("GetForwardingPipelineConfig", req).config.p4info

    def use_p4info(self, p4info: str | Path | bytes | p4info_pb2.P4Info) -> None:
        """Use this P4Info for names without pushing a pipeline."""
        self.index = P4InfoIndex(load_p4info(p4info))

    def api_version(self) -> str:
        return self._call("Capabilities", p4runtime_pb2.CapabilitiesRequest()) \
            .p4runtime_api_version

    # -- building entities
    @staticmethod
    def _field_match(table: TableInfo, name: str, value: Any) -> p4runtime_pb2.FieldMatch:
        """A match value as users write it (see the module docstring) → FieldMatch."""
        f = table.field(name)
        what = f"{table.name} {name}"
        if f.kind in ("exact", "optional"):
            return encode_field_match(f, to_int(value, what), what)
        if f.kind == "lpm":
            if isinstance(value, str) and "/" in value:
                addr, plen_s = value.split("/", 1)
                v, plen = to_int(addr, what), int(plen_s)
            else:
                v, plen = to_int(value[0], what), int(value[1])
            w = f.bitwidth
            if not 0 <= plen <= w:
                raise ValueError(f"{what}: prefix length {plen} not in 0..{w}")
            # host bits cleared: P4Runtime refuses them, users write 10.0.1.77/24 anyway
            v &= ((1 << w) - 1) ^ ((1 << (w - plen)) - 1)
            return encode_field_match(f, (v, plen), what)
        if f.kind == "ternary":
            v, m = to_int(value[0], what), to_int(value[1], what)
            return encode_field_match(f, (v & m, m), what)
        if f.kind == "range":
            return encode_field_match(f, (to_int(value[0], what), to_int(value[1], what)),
                                      what)
        raise ValueError(f"{what}: unsupported match kind {f.kind}")

    @staticmethod
    def _is_dont_care(table: TableInfo, name: str, value: Any) -> bool:
        f = next((f for f in table.fields.values() if f.name == name), None)
        if f is None or value is None:
            return value is None
        if f.kind == "lpm":
            plen = int(value.split("/")[1]) if isinstance(value, str) and "/" in value \
                else (value[1] if isinstance(value, tuple | list) else None)
            return plen == 0
        if f.kind == "ternary" and isinstance(value, tuple | list):
            return to_int(value[1], name) == 0
        if f.kind == "range" and isinstance(value, tuple | list):
            return (to_int(value[0], name), to_int(value[1], name)) == (0, (1 << f.bitwidth) - 1)
        return False

    def _action(self, action: str, params: dict[str, Any] | None) -> p4runtime_pb2.Action:
        a = self._need_index().action(action)
        params = dict(params or {})
        out = p4runtime_pb2.Action(action_id=a.id)
        for p in a.params.values():
            if p.name not in params:
                raise KeyError(f"action {action}: missing parameter {p.name!r}")
            what = f"{action} {p.name}"
            out.params.add(param_id=p.id, value=encode_int(to_int(params.pop(p.name), what),
                                                            p.bitwidth, what))
        if params:
            raise KeyError(f"action {action}: unknown parameter(s) {', '.join(params)}")
        return out

    def table_entry(self, table: str, match: dict[str, Any] | None = None,
                    action: str | None = None, params: dict[str, Any] | None = None,
                    priority: int = 0) -> p4runtime_pb2.TableEntry:
        """Build a TableEntry protobuf from names (don't-care fields are left out)."""
        t = self._need_index().table(table)
        te = p4runtime_pb2.TableEntry(table_id=t.id, priority=priority)
        for name, value in (match or {}).items():
            if not self._is_dont_care(t, name, value):
                te.match.append(self._field_match(t, name, value))
        if action is not None:
            te.action.action.CopyFrom(self._action(action, params))
        return te

    @staticmethod
    def update(kind: str, entity_field: str, msg: Any) -> p4runtime_pb2.Update:
        """An Update of type INSERT/MODIFY/DELETE carrying ``msg`` in ``entity_field``."""
        up = p4runtime_pb2.Update(type=p4runtime_pb2.Update.Type.Value(kind))
        getattr(up.entity, entity_field).CopyFrom(msg)
        return up

    # -- writes
    def write(self, updates: Iterable[p4runtime_pb2.Update]) -> None:
        """One WriteRequest with these updates; raises WriteError listing failed ones."""
        req = self._stamp(p4runtime_pb2.WriteRequest())
        req.updates.extend(updates)
        self._call("Write", req)

    def insert_table_entry(self, table: str, match: dict[str, Any], action: str,
                           params: dict[str, Any] | None = None, priority: int = 0) -> None:
        self.write([self.update("INSERT", "table_entry",
                                self.table_entry(table, match, action, params, priority))])

    def modify_table_entry(self, table: str, match: dict[str, Any], action: str,
                           params: dict[str, Any] | None = None, priority: int = 0) -> None:
        self.write([self.update("MODIFY", "table_entry",
                                self.table_entry(table, match, action, params, priority))])

    def delete_table_entry(self, table: str, match: dict[str, Any], priority: int = 0) -> None:
        self.write([self.update("DELETE", "table_entry",
                                self.table_entry(table, match, None, None, priority))])

    def set_default_action(self, table: str, action: str,
                           params: dict[str, Any] | None = None) -> None:
        te = self.table_entry(table, None, action, params)
        te.is_default_action = True
        self.write([self.update("MODIFY", "table_entry", te)])

    def _pre(self, kind: str, group: bool, ident: int,
             replicas: Iterable[tuple[int, int] | int]) -> None:
        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        entry = pre.multicast_group_entry if group else pre.clone_session_entry
        if group:
            entry.multicast_group_id = ident
        else:
            entry.session_id = ident
        for r in replicas:
            port, rid = (r, 0) if isinstance(r, int) else r
            entry.replicas.add(egress_port=port, instance=rid)
        self.write([self.update(kind, "packet_replication_engine_entry", pre)])

    def insert_multicast_group(self, group_id: int,
                               replicas: Iterable[tuple[int, int] | int]) -> None:
        """Replicas are egress ports or (port, instance) pairs."""
        self._pre("INSERT", True, group_id, replicas)

    def modify_multicast_group(self, group_id: int,
                               replicas: Iterable[tuple[int, int] | int]) -> None:
        self._pre("MODIFY", True, group_id, replicas)

    def delete_multicast_group(self, group_id: int) -> None:
        self._pre("DELETE", True, group_id, [])

    def insert_clone_session(self, session_id: int,
                             replicas: Iterable[tuple[int, int] | int]) -> None:
        self._pre("INSERT", False, session_id, replicas)

    def modify_clone_session(self, session_id: int,
                             replicas: Iterable[tuple[int, int] | int]) -> None:
        self._pre("MODIFY", False, session_id, replicas)

    def delete_clone_session(self, session_id: int) -> None:
        self._pre("DELETE", False, session_id, [])

    def write_counter(self, name: str, index: int, packets: int = 0, nbytes: int = 0) -> None:
        c = self._need_index().counter(name)
        ce = p4runtime_pb2.CounterEntry(counter_id=c.id)
        ce.index.index = index
        ce.data.packet_count, ce.data.byte_count = packets, nbytes
        self.write([self.update("MODIFY", "counter_entry", ce)])

    def write_register(self, name: str, index: int, value: int) -> None:
        """Register write (pyswitch; BMv2's P4Runtime server does not support registers)."""
        r = self._need_index().register(name)
        re_ = p4runtime_pb2.RegisterEntry(register_id=r.id)
        re_.index.index = index
        re_.data.bitstring = encode_int(value, r.bitwidth or 64, name)
        self.write([self.update("MODIFY", "register_entry", re_)])

    # -- reads
    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        if self._stub is None:
            raise P4RuntimeError(f"switch {self.name}: not connected (call connect())")
        out: list[p4runtime_pb2.Entity] = []
        try:
            for resp in self._stub.Read(req, timeout=self.timeout):
                out.extend(resp.entities)
        except grpc.RpcError as exc:
            raise self._rpc_error("Read", exc) from None
        return out

    def _entry_view(self, te: p4runtime_pb2.TableEntry) -> TableEntry:
        index = self._need_index()
        t = index.table(te.table_id)
        match = {t.fields[fm.field_id].name: decode_field_match(fm) for fm in te.match}
        action, params = None, {}
        if te.action.HasField("action") and te.action.action.action_id in index.actions:
            a = index.action(te.action.action.action_id)
            action = a.name
            params = {a.params[p.param_id].name if p.param_id in a.params else str(p.param_id):
                      decode_int(p.value) for p in te.action.action.params}
        counter = (te.counter_data.packet_count, te.counter_data.byte_count) \
            if te.HasField("counter_data") else None
        return TableEntry(t.name, match, action, params, te.priority, counter,
                          te.is_default_action)

    def read_table_entries(self, table: str | None = None, match: dict[str, Any] | None = None,
                           priority: int = 0, with_counters: bool = False) -> list[TableEntry]:
        """All entries of ``table`` (all tables if None), or the one with ``match``."""
        if table is None:
            te = p4runtime_pb2.TableEntry()
        else:
            te = self.table_entry(table, match, None, None, priority)
        if with_counters:
            te.counter_data.SetInParent()
        ents = self.read([p4runtime_pb2.Entity(table_entry=te)])
        return [self._entry_view(e.table_entry) for e in ents if e.HasField("table_entry")]

    def read_default_action(self, table: str) -> TableEntry:
        te = self.table_entry(table)
        te.is_default_action = True
        ents = self.read([p4runtime_pb2.Entity(table_entry=te)])
        return self._entry_view(ents[0].table_entry)

    def read_multicast_groups(self, group_id: int = 0) -> dict[int, list[tuple[int, int]]]:
        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = group_id
        out = {}
        for e in self.read([p4runtime_pb2.Entity(packet_replication_engine_entry=pre)]):
            g = e.packet_replication_engine_entry.multicast_group_entry
            out[g.multicast_group_id] = [(r.egress_port, r.instance) for r in g.replicas]
        return out

    def read_clone_sessions(self, session_id: int = 0) -> dict[int, list[tuple[int, int]]]:
        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        pre.clone_session_entry.session_id = session_id
        out = {}
        for e in self.read([p4runtime_pb2.Entity(packet_replication_engine_entry=pre)]):
            c = e.packet_replication_engine_entry.clone_session_entry
            out[c.session_id] = [(r.egress_port, r.instance) for r in c.replicas]
        return out

    def read_counter(self, name: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """{index: (packets, bytes)} for one index or the whole counter array."""
        c = self._need_index().counter(name)
        ce = p4runtime_pb2.CounterEntry(counter_id=c.id)
        if index is not None:
            ce.index.index = index
        return {e.counter_entry.index.index:
                (e.counter_entry.data.packet_count, e.counter_entry.data.byte_count)
                for e in self.read([p4runtime_pb2.Entity(counter_entry=ce)])}

    def read_counters(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Every cell of every counter array, ``{name: {index: (packets, bytes)}}``, in one
        Read: counter id 0 is P4Runtime's wildcard (one round trip per switch, not one per
        counter)."""
        index = self._need_index()
        out: dict[str, dict[int, tuple[int, int]]] = {}
        wildcard = p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry())
        for e in self.read([wildcard]):
            ce = e.counter_entry
            out.setdefault(index.counter(ce.counter_id).name, {})[ce.index.index] = (
                ce.data.packet_count, ce.data.byte_count)
        return out

    def read_direct_counter(self, table: str, match: dict[str, Any],
                            priority: int = 0) -> tuple[int, int]:
        dce = p4runtime_pb2.DirectCounterEntry()
        dce.table_entry.CopyFrom(self.table_entry(table, match, None, None, priority))
        ents = self.read([p4runtime_pb2.Entity(direct_counter_entry=dce)])
        if not ents:
            raise P4RuntimeError(f"switch {self.name}: no entry {match} in {table}")
        d = ents[0].direct_counter_entry.data
        return d.packet_count, d.byte_count

    def read_register(self, name: str, index: int) -> int:
        r = self._need_index().register(name)
        re_ = p4runtime_pb2.RegisterEntry(register_id=r.id)
        re_.index.index = index
        ents = self.read([p4runtime_pb2.Entity(register_entry=re_)])
        return decode_int(ents[0].register_entry.data.bitstring)

    # -- packet I/O
    def packet_out(self, payload: bytes, **metadata: int) -> None:
        """Send a PacketOut; metadata by the program's ``packet_out`` header field names."""
        metas = self._need_index().packet_out
        msg = p4runtime_pb2.StreamMessageRequest()
        msg.packet.payload = payload
        for m in metas:
            if m.name in metadata:
                msg.packet.metadata.add(metadata_id=m.id, value=encode_int(
                    to_int(metadata.pop(m.name), m.name), m.bitwidth, m.name))
        if metadata:
            raise KeyError(f"unknown packet_out metadata {', '.join(metadata)}")
        self._out.put(msg)

    def get_packet_in(self, timeout: float = 1.0) -> tuple[bytes, dict[str, int]] | None:
        """Next PacketIn as (payload, metadata by name), or None after ``timeout``."""
        try:
            pkt = self.packet_ins.get(timeout=timeout)
        except queue.Empty:
            return None
        mnames = {m.id: m.name for m in self._need_index().packet_in}
        return bytes(pkt.payload), {mnames.get(m.metadata_id, str(m.metadata_id)):
                                    decode_int(m.value) for m in pkt.metadata}


@dataclass
class Fabric:
    """Connections to many switches by name (closed together)."""

    switches: dict[str, SwitchConnection] = field(default_factory=dict)

    def add(self, name: str, address: str, device_id: int = 0, election_id: int = 1,
            timeout: float = 5.0) -> SwitchConnection:
        conn = SwitchConnection(address, device_id, election_id, name=name, timeout=timeout)
        conn.connect()
        self.switches[name] = conn
        return conn

    def __getitem__(self, name: str) -> SwitchConnection:
        return self.switches[name]

    def close(self) -> None:
        for conn in self.switches.values():
            conn.close()
