"""Device state and forwarding-pipeline configs of pyswitch's P4Runtime server.

:class:`Device` is what the gRPC threads and the forwarding loop share (one lock): the
``Switch``, the installed :class:`Pipeline` and the state P4Runtime reads back that the
``Switch`` API does not keep. :func:`verify_pipeline` checks a ``ForwardingPipelineConfig``.

The device config is pyswitch's compile output (``Program.to_bytes``), taken bare or wrapped
in BMv2's ``p4.tmp.P4DeviceConfig`` message with the config in ``device_data``, as BMv2
accepts it: clients written for BMv2 (p4lang's tutorials, for one) always wrap it.

Resource limits (docs/pyswitch-api.md, "Limits"): a program whose registers and counters
together need more than :data:`MAX_STATE_CELLS` cells, or one of whose tables declares more
than :data:`MAX_TABLE_SIZE` entries (or all tables together more than
:data:`MAX_TOTAL_TABLE_SIZE`), is refused with RESOURCE_EXHAUSTED naming the object and the
limit before any state is allocated. pyswitch keeps every cell as a Python list slot (8
bytes, plus the int object once written), so without a limit one register declaration could
take the whole machine's memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2

from pyswitch import native
from pyswitch.errors import P4CompileError
from pyswitch.p4runtime.p4info_index import P4InfoIndex
from pyswitch.p4runtime.translate import P4RTError, invalid
from pyswitch.program import Program
from pyswitch.queues import EgressQueues
from pyswitch.switch import Switch

# Register cells + 2 per counter index (packets and bytes): 2^22 list slots are 32 MiB
# empty and ~170 MiB once every cell holds a distinct 32-bit value. ina.p4 needs ~36 K.
MAX_STATE_CELLS = 1 << 22
# Declared table sizes (BMv2 refuses inserts beyond a table's size; so does pyswitch's
# P4Runtime server, with RESOURCE_EXHAUSTED). An entry costs ~1 KiB in pyswitch.
MAX_TABLE_SIZE = 1 << 20
MAX_TOTAL_TABLE_SIZE = 1 << 20


def check_limits(program: Any) -> None:
    """Refuse a program whose state would exceed the documented limits: P4RTError with
    RESOURCE_EXHAUSTED naming the biggest offender and the limit."""
    meta = program.meta
    cells: list[tuple[int, str]] = []
    for r in meta.get("registers", ()):
        cells.append((int(r["size"]), f"register {r['name']}"))
    for c in meta.get("counters", ()):
        cells.append((2 * int(c["size"]), f"counter {c['name']}"))
    total = sum(n for n, _ in cells)
    if total > MAX_STATE_CELLS:
        n, what = max(cells)
        raise P4RTError(code_pb2.RESOURCE_EXHAUSTED,
                        f"program needs {total} register/counter cells ({what}: {n}); the "
                        f"limit is {MAX_STATE_CELLS} cells (docs/pyswitch-api.md, Limits)")
    sizes = [(int(t.get("size") or 0), str(t["name"])) for t in meta.get("tables", ())]
    for n, name in sizes:
        if n > MAX_TABLE_SIZE:
            raise P4RTError(code_pb2.RESOURCE_EXHAUSTED,
                            f"table {name} declares size {n}; the limit is {MAX_TABLE_SIZE} "
                            f"entries per table (docs/pyswitch-api.md, Limits)")
    total = sum(n for n, _ in sizes)
    if total > MAX_TOTAL_TABLE_SIZE:
        raise P4RTError(code_pb2.RESOURCE_EXHAUSTED,
                        f"tables declare {total} entries together; the limit is "
                        f"{MAX_TOTAL_TABLE_SIZE} (docs/pyswitch-api.md, Limits)")


def break_cycles(sw: Any) -> None:
    """Let a replaced switch be freed as soon as its last reference goes. Its generated
    functions and its namespace refer to each other (``exec`` globals), so otherwise only a
    full garbage collection frees its registers: three quick pipeline pushes held three
    switches' state at once."""
    ns = getattr(sw, "ns", None)
    if isinstance(ns, dict):
        ns.clear()
    # the native path's process holds the switch's objects and bound methods
    vars(sw).pop("process", None)


def reclaim_memory() -> None:
    """Collect what is left of a replaced switch and give the freed heap back to the OS."""
    gc.collect()
    trim_heap()


def _glibc() -> Any:
    """glibc through ctypes, or None (another libc: the tuning below is skipped)."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim  # noqa: B018 - AttributeError on a libc without it
            _libc.mallopt  # noqa: B018
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


_libc: Any = None
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def trim_heap() -> None:
    """Give freed heap memory back to the OS (glibc only; a few ms)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def pin_mmap_threshold(nbytes: int = 1 << 20) -> None:
    """Make glibc place every block of ``nbytes`` or more (a register's cell list) in its
    own mapping, returned to the OS when freed. By default glibc raises that threshold to
    the size of the last big block freed, so after one pipeline push the next register
    comes from a thread's heap, and freeing it leaves the process that much bigger
    (measured: +28 MB per 3.5 M-cell register every few pushes). Process-wide: the daemon
    calls it once at start."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, nbytes)


def _p4_device_config_class() -> Any:
    """The message class of BMv2's ``p4.tmp.P4DeviceConfig``.

    The ``p4runtime`` package does not ship ``p4/tmp`` (p4lang/PI does), so the message is
    declared here from its field numbers (``reassign`` 1, ``extras`` 2, ``device_data`` 3),
    in a private descriptor pool so that it never clashes with a ``p4.tmp`` module that
    another package may register.
    """
    fdp = descriptor_pb2.FileDescriptorProto(name="pyswitch_p4tmp_p4config.proto",
                                             package="p4.tmp", syntax="proto3")
    msg = fdp.message_type.add(name="P4DeviceConfig")
    F = descriptor_pb2.FieldDescriptorProto
    extras = msg.nested_type.add(name="Extras")
    kv = extras.nested_type.add(name="KvEntry")
    kv.options.map_entry = True
    kv.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    kv.field.add(name="value", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    extras.field.add(name="kv", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                     type_name=".p4.tmp.P4DeviceConfig.Extras.KvEntry")
    msg.field.add(name="reassign", number=1, type=F.TYPE_BOOL, label=F.LABEL_OPTIONAL)
    msg.field.add(name="extras", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                  type_name=".p4.tmp.P4DeviceConfig.Extras")
    msg.field.add(name="device_data", number=3, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(fdp.SerializeToString())
    desc = pool.FindMessageTypeByName("p4.tmp.P4DeviceConfig")
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.21
    if get_class is not None:
        return get_class(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


P4DeviceConfig = _p4_device_config_class()


def unwrap_device_config(data: bytes) -> bytes | None:
    """The ``device_data`` of a ``p4.tmp.P4DeviceConfig``, or None if ``data`` is not one."""
    wrapper = P4DeviceConfig()
    try:
        wrapper.ParseFromString(data)
    except Exception:  # protobuf's DecodeError, or worse on arbitrary bytes
        return None
    return bytes(wrapper.device_data) or None


def program_from_device_config(data: bytes) -> Program:
    """Device config bytes → Program: pyswitch's compile output, bare or inside a
    ``p4.tmp.P4DeviceConfig``. Raises ``P4CompileError`` when neither holds one."""
    try:
        return Program.from_bytes(data)
    except Exception as exc:  # any parse error: try the wrapped form before giving up
        bare_error = exc
    inner = unwrap_device_config(data)
    if inner is None:
        raise bare_error
    try:
        return Program.from_bytes(inner)
    except Exception as exc:
        raise P4CompileError(
            "<device config>", 0, 0,
            f"a p4.tmp.P4DeviceConfig whose device_data is not a pyswitch device config "
            f"({exc}); pyswitch runs its own compile output, not BMv2 JSON") from None


@dataclass
class Pipeline:
    """A verified forwarding pipeline: the controller's P4Info (its ids) and the program."""

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
    # the egress queues' settings outlive a program, as BMv2's; their clock starts here
    queues: EgressQueues = field(default_factory=EgressQueues)
    t0: float = field(default_factory=time.monotonic)

    def make_switch(self, program: Program) -> Switch:
        kwargs: dict[str, Any] = {"device_id": self.device_id, "seed": self.seed,
                                  "queues": self.queues}
        if self.cpu_port is not None:
            kwargs["cpu_port"] = self.cpu_port
        return Switch(program, **kwargs)

    def load(self, program: Any, device_config: bytes, p4info: p4info_pb2.P4Info | None = None,
             cookie: int = 0) -> None:
        """Install a new pipeline (fresh switch state), under the lock; the old switch is
        freed. Raises P4RTError (RESOURCE_EXHAUSTED) for a program beyond the limits."""
        check_limits(program)
        p4info = p4info if p4info is not None else program.p4info
        pipe = Pipeline(p4info, device_config, cookie, program, P4InfoIndex(p4info))
        require_native(program)  # refused before the old switch goes
        with self.lock:
            # Drop the old switch before building the new one: at most one switch's state
            # is alive at a time (frames arriving meanwhile wait for the lock).
            if self.switch is not None:
                break_cycles(self.switch)
            self.switch = self.pipeline = None  # the last reference: freed here
            self.clone_sessions.clear()
            self.defaults.clear()
            reclaim_memory()
            self.switch, self.pipeline = self.make_switch(program), pipe

    def packet_in(self, frame: bytes) -> None:
        """Hand a frame the pipeline sent to the CPU port to the P4Runtime streams."""
        for cb in list(self.on_packet_in):
            cb(frame)


def require_native(program: Program) -> None:
    """Under PYSWITCH_NATIVE=on, a program the native path cannot run is refused
    (UNIMPLEMENTED, with the reason) instead of running on the Python path."""
    if native.mode() != "on":
        return
    try:
        native.check(program.ir, program.meta)
    except native.NotNative as e:
        raise P4RTError(code_pb2.UNIMPLEMENTED,
                        f"PYSWITCH_NATIVE=on, but the native path cannot run this program: "
                        f"{e}") from None


def verify_pipeline(config: Any) -> Pipeline:
    """Check a ForwardingPipelineConfig: the device config loads and the P4Info names exist
    in the program (ids may differ: the given P4Info defines the controller's ids)."""
    if not config.p4_device_config:
        raise invalid("empty p4_device_config")
    try:
        program = program_from_device_config(bytes(config.p4_device_config))
    except Exception as exc:  # any parse error of the device config
        raise invalid(f"device config is not a pyswitch program: {exc}") from None
    check_limits(program)
    require_native(program)
    p4info = p4info_pb2.P4Info()
    p4info.CopyFrom(config.p4info)
    given = P4InfoIndex(p4info)
    own = P4InfoIndex(program.p4info)
    for kind, g, o in (("table", given.table_by_name, own.table_by_name),
                       ("action", given.action_by_name, own.action_by_name)):
        extra = sorted(set(g) - set(o))
        if extra:
            raise invalid(f"P4Info {kind} {extra[0]} is not in the device config's program")
    difference = p4info_difference(p4info, program.p4info)
    if difference is not None:
        raise invalid(f"the P4Info does not describe the device config: {difference}")
    if not p4info.tables and not p4info.actions:
        p4info = program.p4info
    return Pipeline(p4info, bytes(config.p4_device_config), config.cookie.cookie, program,
                    P4InfoIndex(p4info))



def _by_name(items: Any) -> dict[str, Any]:
    return {x.preamble.name: x for x in items}


def p4info_difference(given: p4info_pb2.P4Info, own: p4info_pb2.P4Info) -> str | None:
    """The first way in which ``given`` (the controller's P4Info) contradicts ``own`` (the
    P4Info of the device config's program), or ``None``. Ids may differ (the controller's
    P4Info defines them) and ``given`` may leave objects out; what it does describe must be
    what the program has: a table's match fields (name, width, match kind, order) and the
    actions it may use; an action's parameters (name, width, order); a counter's or direct
    counter's unit, a register's width. Sizes are not compared (the program's own sizes
    bound the indices and entries). Without this check a P4Info
    saying a 16-bit key is 3 bits wide was committed, and valid entries were refused."""
    own_actions = {a.preamble.id: a.preamble.name for a in own.actions}
    given_actions = {a.preamble.id: a.preamble.name for a in given.actions}
    own_tables = _by_name(own.tables)
    for t in given.tables:
        o = own_tables.get(t.preamble.name)
        if o is None:
            return f"table {t.preamble.name} is not in the program"
        where = f"table {t.preamble.name}"
        g_fields = [(f.name, f.bitwidth, f.match_type) for f in t.match_fields]
        o_fields = [(f.name, f.bitwidth, f.match_type) for f in o.match_fields]
        if g_fields != o_fields:
            for i, (gf, of) in enumerate(zip(g_fields, o_fields, strict=False)):
                if gf != of:
                    return (f"{where}: match field {i + 1} is {_field(gf)} in the P4Info, "
                            f"{_field(of)} in the program")
            return (f"{where}: {len(g_fields)} match fields in the P4Info, "
                    f"{len(o_fields)} in the program")
        refs = {given_actions.get(r.id, f"id {r.id}") for r in t.action_refs}
        extra = sorted(refs - {own_actions.get(r.id) for r in o.action_refs})
        if extra:
            return f"{where}: action {extra[0]} is not one of the table's actions"
    own_by_name = _by_name(own.actions)
    for a in given.actions:
        o = own_by_name.get(a.preamble.name)
        if o is None:
            return f"action {a.preamble.name} is not in the program"
        g_params = [(p.name, p.bitwidth) for p in a.params]
        o_params = [(p.name, p.bitwidth) for p in o.params]
        if g_params != o_params:
            return (f"action {a.preamble.name}: parameters {_params(g_params)} in the "
                    f"P4Info, {_params(o_params)} in the program")
    for kind, g_items, o_items, facts in (
            ("counter", given.counters, own.counters, lambda c: c.spec.unit),
            ("direct counter", given.direct_counters, own.direct_counters,
             lambda c: c.spec.unit),
            ("register", given.registers, own.registers,
             lambda r: r.type_spec.bitstring.bit.bitwidth)):
        o_named = _by_name(o_items)
        for x in g_items:
            o = o_named.get(x.preamble.name)
            if o is None:
                return f"{kind} {x.preamble.name} is not in the program"
            if facts(x) != facts(o):
                what = "width" if kind == "register" else "unit"
                return (f"{kind} {x.preamble.name}: {what} {facts(x)} in the P4Info, "
                        f"{facts(o)} in the program")
    return None


def _field(f: tuple[str, int, int]) -> str:
    kinds = {1: "exact", 2: "lpm", 3: "ternary", 4: "range", 5: "optional"}
    return f"{f[0]} ({f[1]} bits, {kinds.get(f[2], f'match type {f[2]}')})"


def _params(ps: list[tuple[str, int]]) -> str:
    return "(" + ", ".join(f"{n}: {w} bits" for n, w in ps) + ")"
