"""Write and Read of pyswitch's P4Runtime server: entities applied to and read from a device.

:class:`Entities` carries out one validated update (table entries and default actions,
multicast groups and clone sessions, counter, direct counter and register cells) on the
device's ``Switch`` and answers Read queries with P4Runtime entities. The caller holds the
device lock. Switch errors become canonical codes as in BMv2: ``EntryExists`` →
ALREADY_EXISTS, ``EntryNotFound`` → NOT_FOUND, ``InvalidArgument`` → INVALID_ARGUMENT.

Given an ``undo`` list, :meth:`Entities.apply` appends a callable that reverts each update
it carried out (the server applies every update it can, as BMv2, and no longer rolls
batches back; the undo steps remain for callers that want all-or-nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from pyswitch.errors import EntryExists, EntryNotFound, InvalidArgument, SwitchError
from pyswitch.p4runtime.codec import encode_int
from pyswitch.p4runtime.p4info_index import TableInfo
from pyswitch.p4runtime.pipeline import Device
from pyswitch.p4runtime.translate import (
    EntryKey,
    P4RTError,
    Translator,
    field_value,
    indexed_cells,
    invalid,
    same_match,
)


class Entities:
    """Applies updates to, and reads entities from, one device (caller holds its lock)."""

    def __init__(self, device: Device) -> None:
        self.dev = device

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Rebuild each table's lookup structure once per Write instead of once per update.

        pyswitch's ``Table`` rebuilds its lookup index after every insert, modify and delete
        (O(entries) each), so a 10,000-insert batch took ~8 s with the device lock held, the
        data plane frozen meanwhile. Nothing looks entries up during a Write (packets need
        the lock the caller holds; Write and Read use the entry dict, not the index), so the
        rebuilds can wait until the batch ends.
        """
        with contextlib.ExitStack() as stack:
            for t in getattr(self.dev.switch, "tables", {}).values():
                stack.enter_context(t.deferred_rebuild())
            yield

    # -- write
    def apply(self, tr: Translator, update: Any, undo: list[Callable[[], None]] | None = None
              ) -> None:
        """Carry out one Update; raises P4RTError with the update's canonical code. With
        ``undo``, a callable reverting the update is appended when it succeeded."""
        U = p4runtime_pb2.Update
        kind = update.type
        if kind not in (U.INSERT, U.MODIFY, U.DELETE):
            raise invalid("update type not specified")
        ent = update.entity
        which = ent.WhichOneof("entity")
        sw = self.dev.switch
        try:
            if which == "table_entry":
                self._apply_table(tr, kind, ent.table_entry, undo)
            elif which == "packet_replication_engine_entry":
                self._apply_pre(kind, ent.packet_replication_engine_entry, undo)
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
                if undo is not None:
                    old_c = [(i, *sw.counter_read(info.name, i)) for i in indices]
                    undo.append(lambda n=info.name, o=old_c: [sw.counter_write(n, *c)
                                                              for c in o])
                for i in indices:
                    sw.counter_write(info.name, i, ce.data.packet_count, ce.data.byte_count)
            elif which == "direct_counter_entry":
                if kind != U.MODIFY:
                    raise invalid("direct counter entries can only be modified")
                dce = ent.direct_counter_entry
                k = tr.key(dce.table_entry)
                if k.table.direct_counter_id is None:
                    # as the Read path and BMv2: no direct counter, nothing to write
                    raise invalid(f"table {k.table.name} has no direct counter")
                writer = getattr(sw, "direct_counter_write", None)
                if writer is None:
                    raise P4RTError(code_pb2.UNIMPLEMENTED, "direct counter writes")
                old_dc = sw.direct_counter_read(k.table.name, k.match, priority=k.priority)
                writer(k.table.name, k.match, dce.data.packet_count, dce.data.byte_count,
                       priority=k.priority)
                if undo is not None:
                    undo.append(lambda k=k, o=old_dc: writer(k.table.name, k.match, *o,
                                                             priority=k.priority))
            elif which == "register_entry":
                if kind != U.MODIFY:
                    raise invalid("register entries can only be modified")
                re_ = ent.register_entry
                info = tr.index.registers.get(re_.register_id)
                if info is None:
                    raise invalid(f"unknown register id {re_.register_id}")
                if re_.data.WhichOneof("data") != "bitstring":
                    raise invalid(f"register {info.name}: data must be a bitstring")
                value = field_value(re_.data.bitstring, info.bitwidth, f"register {info.name}")
                indices = [re_.index.index] if re_.HasField("index") else range(info.size)
                for i in indices:
                    if not 0 <= i < info.size:
                        raise invalid(f"register {info.name}: index {i} out of range")
                if undo is not None:
                    old_r = [(i, sw.register_read(info.name, i)) for i in indices]
                    undo.append(lambda n=info.name, o=old_r: [sw.register_write(n, *c)
                                                              for c in o])
                for i in indices:
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

    def _apply_table(self, tr: Translator, kind: int, te: Any,
                     undo: list[Callable[[], None]] | None) -> None:
        U = p4runtime_pb2.Update
        sw = self.dev.switch
        if te.is_default_action:
            t = tr.table(te.table_id)
            if kind != U.MODIFY:
                raise invalid(f"table {t.name}: the default action can only be modified")
            if len(te.match):
                raise invalid(f"table {t.name}: a default-action entry has no match")
            if t.const_default_action_id:
                raise P4RTError(code_pb2.PERMISSION_DENIED,
                                f"table {t.name}: the default action is const")
            action, params = tr.action(t, te.action)
            if undo is not None:
                undo.append(self._default_undo(t.name))
            sw.set_default_action(t.name, action, params)
            self.dev.defaults[t.name] = (action, params)
            return
        k = tr.key(te)
        if k.table.is_const:
            raise P4RTError(code_pb2.PERMISSION_DENIED, f"table {k.table.name} is const")
        name = k.table.name
        if kind == U.DELETE:
            old = self._entry(k) if undo is not None else None
            sw.delete_entry(name, k.match, priority=k.priority)
            if old is not None and undo is not None:
                undo.append(lambda: self._restore(k, *old))
            return
        action, params = tr.action(k.table, te.action)
        if kind == U.INSERT:
            table = getattr(sw, "tables", {}).get(name)
            size = getattr(table, "size", 0)
            if size and len(table.entries) >= size:
                # BMv2 also refuses inserts beyond a table's size; without this check a
                # controller could grow the switch's memory without bound
                raise P4RTError(code_pb2.RESOURCE_EXHAUSTED,
                                f"table {name} is full ({size} entries, its declared size)")
            sw.insert_entry(name, k.match, action, params, priority=k.priority)
            if undo is not None:
                undo.append(lambda: sw.delete_entry(name, k.match, priority=k.priority))
        else:
            old = self._entry(k) if undo is not None else None
            sw.modify_entry(name, k.match, action, params, priority=k.priority)
            if old is not None and undo is not None:
                undo.append(lambda: sw.modify_entry(name, k.match, old[0], old[1],
                                                    priority=k.priority))

    # -- undo helpers (only used for batches that may have to be rolled back)
    def _entry(self, k: EntryKey) -> tuple[str, dict[str, int], tuple[int, int]] | None:
        """The action, params and direct counter of an installed entry, or None."""
        try:
            e = self.dev.switch.tables[k.table.name].find(k.match, k.priority)
        except Exception:  # not installed (the update itself will say NOT_FOUND) or no API
            return None
        return e.action, dict(e.params), (e.counter[0], e.counter[1])

    def _restore(self, k: EntryKey, action: str, params: dict[str, int],
                 counter: tuple[int, int]) -> None:
        sw = self.dev.switch
        sw.insert_entry(k.table.name, k.match, action, params, priority=k.priority)
        sw.direct_counter_write(k.table.name, k.match, *counter, priority=k.priority)

    def _default_undo(self, table: str) -> Callable[[], None]:
        sw, defaults = self.dev.switch, self.dev.defaults
        before = defaults.get(table)
        getter = getattr(sw, "get_default_action", None)
        current = getter(table) if getter is not None else before

        def revert() -> None:
            if current is not None:
                sw.set_default_action(table, current[0], current[1])
            if before is None:
                defaults.pop(table, None)
            else:
                defaults[table] = before
        return revert

    def _apply_pre(self, kind: int, pre: Any, undo: list[Callable[[], None]] | None) -> None:
        U = p4runtime_pb2.Update
        sw = self.dev.switch
        which = pre.WhichOneof("type")
        if undo is not None:
            undo.append(self._pre_undo())
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
    def read(self, tr: Translator, ent: Any, resp: Any) -> None:
        """Append the entities that match the query ``ent`` to the ReadResponse ``resp``
        (or the server's ``wire.ReadChunks``: ``resp.entities`` is read once per entity
        added, with ``resp.entities.add()``, after the previous one is filled)."""
        which = ent.WhichOneof("entity")
        sw = self.dev.switch
        idx = tr.index
        if which == "table_entry":
            q = ent.table_entry
            tables = [tr.table(q.table_id)] if q.table_id else list(idx.tables.values())
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
            tables = [tr.table(q.table_id)] if q.table_id else list(idx.tables.values())
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
            self._read_unsupported(tr, ent, which)

    def _read_unsupported(self, tr: Translator, ent: Any, which: str) -> None:
        """A kind pyswitch does not keep (meters, action profiles, value sets, digests,
        externs). As BMv2: a wildcard Read answers every kind the program has, so a kind the
        program has none of answers nothing (what p4runtime-shell's "read all" needs); an id
        the P4Info does not hold is NOT_FOUND; only a kind the program really has is
        UNIMPLEMENTED."""
        p4info_field, id_field = _UNSUPPORTED_READS.get(which, (None, None))
        if p4info_field is None:
            raise P4RTError(code_pb2.UNIMPLEMENTED, f"reading {which} is not supported")
        objs = getattr(tr.index.p4info, p4info_field)
        declared = ({i.preamble.id for x in objs for i in x.instances}
                    if p4info_field == "externs" else {x.preamble.id for x in objs})
        q = getattr(ent, which)
        wanted = getattr(q, id_field) if id_field else 0
        if wanted and wanted not in declared:
            raise P4RTError(code_pb2.NOT_FOUND, f"{which}: the P4Info has no "
                            f"{p4info_field[:-1].replace('_', ' ')} with id {wanted}")
        if declared:
            raise P4RTError(code_pb2.UNIMPLEMENTED, f"reading {which} is not supported by "
                            "pyswitch")

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


    def _pre_undo(self) -> Callable[[], None]:
        """Revert every multicast group and clone session to what they are now (a PRE
        update touches one; saving all keeps this simple and the PRE is small)."""
        sw, dev = self.dev.switch, self.dev
        groups = sw.multicast_groups()
        sessions = {s: list(r) for s, r in dev.clone_sessions.items()}

        def revert() -> None:
            for g in set(sw.multicast_groups()) - set(groups):
                sw.delete_multicast_group(g)
            for g, reps in groups.items():
                sw.set_multicast_group(g, reps)
            for sid in set(dev.clone_sessions) - set(sessions):
                sw.delete_clone_session(sid)
            for sid, reps in sessions.items():
                sw.set_clone_session(sid, reps)
            dev.clone_sessions.clear()
            dev.clone_sessions.update(sessions)
        return revert


# entity kind -> (P4Info field listing the objects of that kind, the entity's id field)
_UNSUPPORTED_READS = {
    "meter_entry": ("meters", "meter_id"),
    "direct_meter_entry": ("direct_meters", ""),
    "action_profile_member": ("action_profiles", "action_profile_id"),
    "action_profile_group": ("action_profiles", "action_profile_id"),
    "value_set_entry": ("value_sets", "value_set_id"),
    "digest_entry": ("digests", "digest_id"),
    "extern_entry": ("externs", ""),
}


def _replicas(reps: Any) -> list[tuple[int, int]]:
    out = []
    for r in reps:
        port = r.egress_port
        if not port and r.port:
            port = int.from_bytes(r.port, "big")
        out.append((port, r.instance))
    return out

