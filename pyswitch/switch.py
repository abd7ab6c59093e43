"""One v1model switch executing a compiled program, with BMv2 simple_switch semantics.

Two descriptions of the packet loop exist: the general path here (`Switch.process`,
`_after_ingress`, `_after_egress`: every decision below, written out), and the fast path's
table of steps, `pyswitch.native.loop.LOOP`, from which each switch's specialised
``process`` is lowered, as Python or, on the native path, as C.

Per packet (``process``): parser -> VerifyChecksum -> Ingress -> after-ingress decisions
-> for each copy: Egress -> after-egress decisions -> ComputeChecksum -> Deparser.
Sources for the decisions: BMv2 ``docs/simple_switch.md`` ("after-ingress/after-egress
pseudocode") and ``targets/simple_switch/simple_switch.cpp``:

- after ingress: an I2E clone (if ``clone`` was called) is made first, of the packet as it
  was received, re-parsed, with fresh metadata except ingress_port, instance_type=1; then
  ``mcast_grp != 0`` -> one copy per (port, rid) of the group (instance_type=5, egress_rid)
  -- checked *before* the drop port; else ``egress_spec == 511`` -> drop; else unicast to
  ``egress_spec`` (which defaults to 0: a program that never sets it sends to port 0, as
  BMv2 does).
- egress starts with ``egress_port`` set and ``egress_spec`` reset to 0; after egress an
  E2E clone (headers as modified, metadata reset, instance_type=2) goes through egress
  again (its ingress_port reads 0: BMv2 resets all metadata of an E2E clone except the
  packet length); then ``egress_spec == 511`` -> drop (mark_to_drop in egress).
- parser errors do not drop: ingress runs with ``standard_metadata.parser_error`` set, the
  headers extracted before the error valid and the unparsed rest of the frame as payload
  (BMv2 docs: "a packet reaching the reject parser state ... is not automatically
  dropped"). Likewise a checksum error only sets ``checksum_error``.
- registers/counters with an index out of range: reads give 0, writes/counts are ignored
  (BMv2 aborted on this before behavioral-model PR #637 and only logs an error since; the
  P4 spec's PSA discussion, p4-spec issue #323, leaves the read value undefined).
"""

from __future__ import annotations

import dis
import random as _random_mod
import re
import struct as _struct
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyswitch import externs
from pyswitch.errors import EntryNotFound, InvalidArgument
from pyswitch.names import check_int, resolve
from pyswitch.native import attach
from pyswitch.native.loop import (
    DROP_PORT,
    PKT_INSTANCE_TYPE_EGRESS_CLONE,
    PKT_INSTANCE_TYPE_INGRESS_CLONE,
    PKT_INSTANCE_TYPE_NORMAL,
    PKT_INSTANCE_TYPE_REPLICATION,
    QUEUE_SLOTS,
    python_source,
)
from pyswitch.queues import EgressQueues
from pyswitch.tables import Table, TableEntryView

__all__ = ["DROP_PORT", "PKT_INSTANCE_TYPE_EGRESS_CLONE", "PKT_INSTANCE_TYPE_INGRESS_CLONE",
           "PKT_INSTANCE_TYPE_NORMAL", "PKT_INSTANCE_TYPE_REPLICATION", "PortStats", "Switch"]

_MAX_E2E_DEPTH = 8
_U32 = (1 << 32) - 1  # the clone session's bits of the hidden clone_session slot


class _PErr(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


class _Exit(Exception):
    pass


def _shl(a: int, b: int, w: int) -> int:
    return (a << b) & ((1 << w) - 1) if b < w else 0


def _div(a: int, b: int, op: str) -> int:
    if b == 0:
        return 0
    return a // b if op == "//" else a % b


def _sat_s(a: int, b: int, sign: int, w: int) -> int:
    sb = 1 << (w - 1)
    x = (a ^ sb) - sb
    y = (b ^ sb) - sb
    r = x + y if sign > 0 else x - y
    r = max(-sb, min(sb - 1, r))
    return r & ((1 << w) - 1)


# what ComputeChecksum and the deparser may use for `_headers_only` to hold: the struct
# objects, the exit exception, a few methods and builtins, and the externs' pure helpers
# (the checksum and hash functions: `Extern.pure` in pyswitch.externs)
_PURE_NAMES = re.compile(r"(_sd\d+|_st\d+|_Exit|_shl|_div|_sat_s|append|pack|to_bytes|"
                         r"from_bytes|len|bytes|int)$")


def _pure(name: str) -> bool:
    return bool(_PURE_NAMES.match(name)) or any(name in e.pure for e in externs.served())


def _headers_only(fn: Any) -> bool:
    """Whether a generated block reads nothing but its headers ``S``: it never loads ``M``
    (so no metadata, and no call that receives it), holds no nested code and names only
    pure helpers (no register, counter, table or ``random``), so that two runs on equal
    headers give equal headers and bytes."""
    code = fn.__code__
    if any(isinstance(c, types.CodeType) for c in code.co_consts):
        return False
    if not all(_pure(n) for n in code.co_names):
        return False
    return not any(i.argval == "M" for i in dis.get_instructions(code)
                   if i.opname.startswith(("LOAD_", "STORE_", "DELETE_")))


@dataclass
class PortStats:
    """Per-port frame counters of a switch (``rx[port]``, ``tx[port]``) and drops (all of
    them in ``dropped``; those of a full egress queue also in ``queue_drops[port]``)."""

    rx: Counter = field(default_factory=Counter)
    tx: Counter = field(default_factory=Counter)
    dropped: int = 0
    queue_drops: Counter = field(default_factory=Counter)


class Switch:
    """A v1model switch running `prog` in-process (no I/O); see docs/pyswitch-api.md."""

    def __init__(self, prog: Any, device_id: int = 0, seed: int = 0,
                 cpu_port: int | None = None, native: bool | None = None,
                 queues: EgressQueues | None = None) -> None:
        """`native`: True runs the compiled path (or raises NotNative), False the Python
        path, None lets PYSWITCH_NATIVE decide (default: native where it can be).
        `queues`: the egress queues (kept across programs by the daemon; default one
        queue per port, no rate: nothing queues)."""
        self.prog = prog
        self.device_id = device_id
        self.cpu_port = cpu_port
        meta = prog.meta
        self.meta = meta
        self.rng = _random_mod.Random(seed)
        ns: dict[str, Any] = {"_PErr": _PErr, "_Exit": _Exit, "_struct": _struct,
                              "_shl": _shl, "_div": _div, "_sat_s": _sat_s}
        self.registers: dict[str, tuple[list[int], dict]] = {}
        self.counters: dict[str, tuple[list[int], list[int], dict]] = {}
        self.direct_counters: dict[str, dict] = {}
        for ext in externs.served():  # helpers (hash, random, ...) and state (registers, ...)
            ns.update(ext.runtime(self))
            if ext.meta_key:
                ext.state(self, ns, meta.get(ext.meta_key, []))
        exec(prog.code_obj, ns)  # noqa: S102 - code generated by pyswitch.compiler
        actions = {a["name"]: a for a in meta["actions"]}
        fns = {a["fn"]: ns[a["fn"]] for a in meta["actions"]}
        self.tables: dict[str, Table] = {}
        for t in meta["tables"]:
            tab = Table(t, actions, fns)
            ns[t["var"]] = tab
            self.tables[t["name"]] = tab
        self._parser = ns["parser"]
        self._verify = ns["verify"]
        self._ingress = ns["ingress"]
        self._egress = ns["egress"]
        self._compute = ns["compute"]
        self._deparser = ns["deparser"]
        self.ns = ns
        std = meta["std"]
        self._i = {k: std[k] for k in ("ingress_port", "egress_spec", "egress_port",
                                       "instance_type", "packet_length", "mcast_grp",
                                       "egress_rid")}
        self._hid = meta["hidden"]
        self._htempl = meta["htempl"]
        self._mtempl = meta["mtempl"]
        self.mcast: dict[int, list[tuple[int, int]]] = {}
        self.clone_sessions: dict[int, list[tuple[int, int]]] = {}
        self.stats = PortStats()
        self.queues = queues if queues is not None else EgressQueues()
        self.now = 0.0  # seconds since the switch started: the queues' clock
        self.departure: dict[int, float] = {}  # port -> when its last copy leaves the queue
        self._qslots = [std[k] for k in QUEUE_SLOTS]
        self._queued = self.queues.active
        self.native_why = "not tried"
        self._native = native
        self._python_stages = False
        self._wrap_process: Any = None  # the packet trace's wrapper (pyswitch/observe.py)
        self.process = self._specialised_process()  # type: ignore[method-assign]

    @property
    def path(self) -> str:
        """Which path runs the packets: ``native``, or ``python (why)``."""
        return "native" if not self.native_why else f"python ({self.native_why})"

    # ------------------------------------------------------------------ tables
    def _table(self, name: str) -> Table:
        """Table `name`: its full name, or its short name when unambiguous (``l2`` for
        ``MyIngress.l2``, as the STF runner accepts); one line with a suggestion if none."""
        t = self.tables.get(name)
        if t is None:
            t = self.tables[resolve(self.tables, name, "table")]
        return t

    def insert_entry(self, table: str, match: dict, action: str, params: dict | None = None,
                     priority: int = 0) -> None:
        self._table(table).insert(match, action, params or {}, priority)

    def modify_entry(self, table: str, match: dict, action: str, params: dict | None = None,
                     priority: int = 0) -> None:
        self._table(table).modify(match, action, params or {}, priority)

    def delete_entry(self, table: str, match: dict, priority: int = 0) -> None:
        self._table(table).delete(match, priority)

    def set_default_action(self, table: str, action: str, params: dict | None = None) -> None:
        self._table(table).set_default(action, params or {})

    def read_entries(self, table: str) -> list[TableEntryView]:
        t = self._table(table)
        return [TableEntryView(t.name, e) for e in sorted(t.entries.values(), key=lambda e: e.seq)]

    def clear_table(self, table: str) -> None:
        self._table(table).clear()

    def get_default_action(self, table: str) -> tuple[str, dict[str, int]]:
        d = self._table(table).default
        return d.action, dict(d.params)

    # ------------------------------------------------------------------ PRE
    @staticmethod
    def _check_replicas(replicas: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out = []
        for port, rid in replicas:
            if not (0 <= port < 512) or not (0 <= rid < 65536):
                raise InvalidArgument(f"bad replica ({port}, {rid})")
            out.append((int(port), int(rid)))
        return out

    def set_multicast_group(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        if not 0 < group_id < 65536:
            raise InvalidArgument(f"bad multicast group id {group_id}")
        self.mcast[group_id] = self._check_replicas(replicas)

    def delete_multicast_group(self, group_id: int) -> None:
        if group_id not in self.mcast:
            raise EntryNotFound(f"no multicast group {group_id}")
        del self.mcast[group_id]

    def multicast_groups(self) -> dict[int, list[tuple[int, int]]]:
        return {g: list(r) for g, r in self.mcast.items()}

    def set_clone_session(self, session_id: int, replicas: list[tuple[int, int]]) -> None:
        if not 0 < session_id < 2**32:
            raise InvalidArgument(f"bad clone session id {session_id}")
        self.clone_sessions[session_id] = self._check_replicas(replicas)

    def delete_clone_session(self, session_id: int) -> None:
        if session_id not in self.clone_sessions:
            raise EntryNotFound(f"no clone session {session_id}")
        del self.clone_sessions[session_id]

    # ------------------------------------------------------------------ queues
    def set_queue_rate(self, rate_pps: float, port: int | None = None,
                       priority: int | None = None) -> None:
        """BMv2's ``set_queue_rate`` (`port` given) / ``set_all_queue_rate`` (None):
        packets per second, 0 unlimited; `priority`: one priority queue of the port."""
        self.queues.set_rate(rate_pps, port, priority)
        self._requeue()

    def set_queue_depth(self, depth: int, port: int | None = None,
                        priority: int | None = None) -> None:
        """BMv2's ``set_queue_depth`` / ``set_all_queue_depth``: capacity in packets."""
        self.queues.set_depth(depth, port, priority)
        self._requeue()

    def _requeue(self) -> None:
        """The packet loop with queue steps once a rate is set, without them otherwise (the
        fast path stays as it was while nothing can queue)."""
        if self.queues.active != self._queued:
            self._queued = self.queues.active
            proc = self._specialised_process(not self._python_stages)
            self.process = self._wrap_process(proc) if self._wrap_process else proc

    @property
    def queued(self) -> bool:
        """Whether copies go through the egress queues (a rate is set somewhere)."""
        return self._queued

    def process_at(self, now: float, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """`process` for a frame arriving at `now` (seconds since the switch started, never
        decreasing): the egress queues see that time; ``departure[port]`` says when each
        copy leaves its queue."""
        self.now = now
        return self.process(ingress_port, frame)

    def _enqueue(self, port: int, priority: int) -> tuple[int, int, int, int] | None:
        """A copy into the queue of (`port`, `priority`) at ``now``: its queueing metadata
        (`QUEUE_SLOTS`' order), or None when dropped (counted per port)."""
        a = self.queues.enqueue(port, priority, self.now)
        if a is None:
            self.stats.dropped += 1
            self.stats.queue_drops[port] += 1
            return None
        self.departure[port] = a.departure
        return a.enq_timestamp, a.enq_qdepth, a.deq_timedelta, a.deq_qdepth

    # ------------------------------------------------------------------ externs
    def _register(self, name: str) -> tuple[list[int], dict]:
        r = self.registers.get(name)
        if r is None:
            r = self.registers[resolve(self.registers, name, "register")]
        return r

    def _counter(self, name: str) -> tuple:
        c = self.counters.get(name)
        if c is None:
            c = self.counters[resolve(self.counters, name, "counter")]
        return c

    def register_read(self, name: str, index: int) -> int:
        lst, _ = self._register(name)
        check_int(index, "register index")
        if not 0 <= index < len(lst):
            raise InvalidArgument(f"index {index} out of range for {name!r}")
        return lst[index]

    def register_write(self, name: str, index: int, value: int) -> None:
        lst, r = self._register(name)
        check_int(index, "register index")
        if not 0 <= index < len(lst):
            raise InvalidArgument(f"index {index} out of range for {name!r}")
        check_int(value, f"value for register {name!r}")
        if value < 0 or value >> r["width"]:
            raise InvalidArgument(f"value {value} does not fit in {r['width']} bits")
        lst[index] = value

    def register_reset(self, name: str) -> None:
        lst, _ = self._register(name)
        lst[:] = [0] * len(lst)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        c = self._counter(name)
        check_int(index, "counter index")
        if not 0 <= index < len(c[0]):
            raise InvalidArgument(f"index {index} out of range for {name!r}")
        return c[0][index], c[1][index]

    def counter_write(self, name: str, index: int, packets: int, bytes_: int) -> None:
        c = self._counter(name)
        check_int(index, "counter index")
        if not 0 <= index < len(c[0]):
            raise InvalidArgument(f"index {index} out of range for {name!r}")
        for v, what in ((packets, "packets"), (bytes_, "bytes")):
            check_int(v, f"{what} for counter {name!r}")
            if v < 0 or v >> 64:  # BMv2's counters are 64 bits; so are the native cells
                raise InvalidArgument(f"{what} {v} does not fit in 64 bits")
        c[0][index], c[1][index] = packets, bytes_

    def direct_counter_read(self, table: str, match: dict, priority: int = 0) -> tuple[int, int]:
        e = self._table(table).find(match, priority)
        return e.counter[0], e.counter[1]

    def direct_counter_write(self, table: str, match: dict, packets: int, bytes_: int,
                             priority: int = 0) -> None:
        e = self._table(table).find(match, priority)
        for v, what in ((packets, "packets"), (bytes_, "bytes")):
            check_int(v, f"{what} for the direct counter of {table!r}")
            if v < 0 or v >> 64:  # as counter_write: 64 bits, as BMv2 and the native cells
                raise InvalidArgument(f"{what} {v} does not fit in 64 bits")
        e.counter[0], e.counter[1] = packets, bytes_

    # ------------------------------------------------------------------ packets
    def _new_state(self) -> tuple[list, list]:
        return [h[:] for h in self._htempl], self._mtempl[:]

    def _specialised_process(self, native: bool = True) -> Any:
        """`process` for this program, lowered from the loop's one description
        (`pyswitch.native.loop.LOOP`): compiled by pyswitch.native where it can be, unless
        `native` is False (`native_why` says why not), else as Python source with the
        metadata indices as constants and the state copied without a loop.  Both run the
        common cases to the end inline: a drop after ingress, a unicast frame and the copies
        of a multicast group without clones (the last copy takes the state itself, the
        others a copy of it).  An I2E clone, and an E2E clone or a drop in egress, take the
        general path (`_after_ingress`, `_after_egress`)."""
        # a copy whose headers (after egress) and payload are those of the copy before it
        # leaves as the same bytes, when ComputeChecksum and the deparser read nothing else
        dedupe = _headers_only(self._compute) and _headers_only(self._deparser)
        enqueue = self._enqueue if self._queued else None
        if native:
            proc, self.native_why = attach(self, dedupe, _Exit, self._native, enqueue)
            if proc is not None:
                return proc
        else:  # e.g. the packet trace, around its own Python stages (pyswitch/observe.py)
            self._python_stages = True
            self.native_why = "the Python stages were asked for"
        ns: dict[str, Any] = {f"_h{k}": h for k, h in enumerate(self._htempl)}
        ns.update(_mt=self._mtempl, parser=self._parser, verify=self._verify,
                  ingress=self._ingress, egress=self._egress, compute=self._compute,
                  deparser=self._deparser, stats=self.stats, rx=self.stats.rx,
                  tx=self.stats.tx, after_ingress=self._after_ingress,
                  after_egress=self._after_egress, bytes=bytes, mcast=self.mcast,
                  enqueue=enqueue)
        src = python_source(self.meta, dedupe, self._queued)
        exec(compile(src, "<pyswitch:process>", "exec"), ns)  # noqa: S102 - from LOOP
        return ns["process"]

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run one frame through the pipeline; returns every emitted (port, frame).
        (Each switch replaces this by `_specialised_process`'s equivalent.)"""
        frame = bytes(frame)
        i = self._i
        hid = self._hid
        self.stats.rx[ingress_port] += 1
        S, M = self._new_state()
        M[i["ingress_port"]] = ingress_port
        M[i["packet_length"]] = len(frame)
        pos = self._parser(S, M, frame)
        M[hid["payload"]] = frame[pos:]
        self._verify(S, M)
        self._ingress(S, M)
        return self._after_ingress(ingress_port, frame, S, M)

    def process_batch(self, frames: Any, port: int | None = None,
                      errors: list | None = None) -> list[tuple[int, bytes]]:
        """`process` for many frames, in order: `frames` are (ingress_port, frame) pairs,
        or, with `port`, frames all received on `port`; returns every (port, frame) they
        emit, in order, in one list.  With `errors` (a list), a frame whose processing
        raises an ``Exception`` is recorded there as (its index, the exception), without
        the copies it emitted before raising, and the batch goes on; without it, the
        exception propagates (the batch's outputs are lost, its effects on the state
        kept, as from that many `process` calls).  On the native path the loop runs in C
        and the statistics are counted there, added to ``stats`` before the call returns
        (docs/pyswitch-api.md, "The native path")."""
        batch = getattr(self.process, "batch", None)  # the native Process's own loop
        if batch is not None:
            return batch(frames, port, errors)
        process: Any = self.process
        out: list[tuple[int, bytes]] = []
        if errors is None:  # the common case, without a test per frame
            if port is None:
                for p, f in frames:
                    out += process(p, f)
            else:
                for f in frames:
                    out += process(port, f)
            return out
        for i, item in enumerate(frames):
            p, f = (port, item) if port is not None else item
            try:
                out += process(p, f)
            except Exception as e:  # noqa: BLE001 - recorded for the caller, as in C
                errors.append((i, e))
        return out

    def _after_ingress(self, ingress_port: int, frame: bytes, S: list,
                       M: list) -> list[tuple[int, bytes]]:
        """BMv2's after-ingress decisions (module docstring), then egress for each copy."""
        i = self._i
        hid = self._hid
        out: list[tuple[int, bytes]] = []
        if M[hid["clone_type"]] == 1:
            for port, rid in self.clone_sessions.get(M[hid["clone_session"]] & _U32, []):
                S2, M2 = self._new_state()
                M2[i["ingress_port"]] = ingress_port
                M2[i["packet_length"]] = len(frame)
                p2 = self._parser(S2, M2, frame)
                M2[hid["payload"]] = frame[p2:]
                self._preserve(M, M2)
                self._egress_copy(S2, M2, port, rid, PKT_INSTANCE_TYPE_INGRESS_CLONE, out, 0)
        mg = M[i["mcast_grp"]]
        if mg:
            reps = self.mcast.get(mg, [])
            for port, rid in reps:
                S2 = [h[:] for h in S]
                self._egress_copy(S2, M[:], port, rid, PKT_INSTANCE_TYPE_REPLICATION, out, 0)
            if not reps:
                self.stats.dropped += 1
        elif M[i["egress_spec"]] == DROP_PORT:
            self.stats.dropped += 1
        else:
            self._egress_copy(S, M, M[i["egress_spec"]], 0, M[i["instance_type"]], out, 0)
        return out

    def _preserve(self, M: list, M2: list) -> None:
        """A clone asked for by ``clone_preserving_field_list(type, session, index)``: the
        user metadata fields annotated ``@field_list(index)`` keep the values the packet
        has now (end of ingress for I2E, of egress for E2E), as BMv2 copies the field list
        into the clone's reset metadata; an index no field carries preserves nothing."""
        fl = M[self._hid["clone_session"]] >> 32
        if fl:
            for k in self.meta["field_lists"].get(fl - 1, ()):
                M2[k] = M[k]

    def _egress_copy(self, S: list, M: list, port: int, rid: int, itype: int,
                     out: list[tuple[int, bytes]], depth: int) -> None:
        i = self._i
        hid = self._hid
        if self._queued:
            q = self._enqueue(port, M[self.meta["std"]["priority"]])
            if q is None:
                return
            for k, v in zip(self._qslots, q, strict=True):
                M[k] = v
        M[i["egress_port"]] = port
        M[i["egress_spec"]] = 0
        M[i["egress_rid"]] = rid
        M[i["instance_type"]] = itype
        M[hid["clone_type"]] = 0
        self._egress(S, M)
        self._after_egress(S, M, port, out, depth)

    def _after_egress(self, S: list, M: list, port: int, out: list[tuple[int, bytes]],
                      depth: int) -> None:
        """E2E clones, the drop decision, ComputeChecksum and the deparser of one copy."""
        i = self._i
        hid = self._hid
        if M[hid["clone_type"]] == 2 and depth < _MAX_E2E_DEPTH:
            for cport, crid in self.clone_sessions.get(M[hid["clone_session"]] & _U32, []):
                M2 = self._mtempl[:]  # metadata reset, headers kept (BMv2 E2E clone)
                M2[i["packet_length"]] = M[i["packet_length"]]
                M2[hid["payload"]] = M[hid["payload"]]
                self._preserve(M, M2)
                self._egress_copy([h[:] for h in S], M2, cport, crid,
                                  PKT_INSTANCE_TYPE_EGRESS_CLONE, out, depth + 1)
        if M[i["egress_spec"]] == DROP_PORT:
            self.stats.dropped += 1
            return
        self._compute(S, M)
        parts: list[bytes] = []
        self._deparser(S, M, parts)
        parts.append(M[hid["payload"]])
        self.stats.tx[port] += 1
        out.append((port, b"".join(parts)))
