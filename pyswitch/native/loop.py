"""The v1model packet loop's fast path, described once (`LOOP`) and lowered twice: to the
Python ``process`` of `pyswitch.switch.Switch` (`python_source`) and to the C ``process`` of
the native path (`c_source`, which `pyswitch.native.cgen` puts into each program's module).

`LOOP` is a table of steps over the named metadata slots of the compiled program
(``meta["std"]`` and ``meta["hidden"]``): receive, parser, VerifyChecksum, Ingress, the
after-ingress decisions (an I2E clone to the general path, the copies of a multicast group,
the drop port, unicast), and for each copy the egress metadata, Egress, the after-egress
decisions (an E2E clone or a drop in egress to the general path) and the frame out
(ComputeChecksum, the deparser, the payload).  Each lowering knows how to write each kind
of step and nothing of the order, the slots or the values, which come from the table; a
step kind a lowering does not know is an error, not a silent omission.

The general path (`Switch.process`, `_after_ingress`, `_after_egress` in pyswitch/switch.py:
BMv2's decisions written out in full, every clone and resubmission case) is not lowered
from here: both lowerings hand it the state where `LOOP` says ``Handoff``.

It lives in pyswitch.native, not beside the switch, because the native modules' cache key is
this package's sources (`pyswitch.native._translator_digest`): a changed step rebuilds them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DROP_PORT", "LOOP", "PKT_INSTANCE_TYPE_EGRESS_CLONE",
           "PKT_INSTANCE_TYPE_INGRESS_CLONE", "PKT_INSTANCE_TYPE_NORMAL",
           "PKT_INSTANCE_TYPE_REPLICATION", "c_source", "python_source"]

DROP_PORT = 511
PKT_INSTANCE_TYPE_NORMAL = 0
PKT_INSTANCE_TYPE_INGRESS_CLONE = 1
PKT_INSTANCE_TYPE_EGRESS_CLONE = 2
PKT_INSTANCE_TYPE_REPLICATION = 5
CLONE_I2E, CLONE_E2E = 1, 2  # the hidden clone_type slot: which clone the program asked for


# ------------------------------------------------------------------------- the steps
@dataclass(frozen=True)
class Receive:
    """Count the frame in ``rx[ingress_port]``; a fresh state from the program's templates."""


@dataclass(frozen=True)
class Set:
    """Metadata slot ``slot`` := ``value``: a constant, or one of the loop's values
    ``ingress_port``, ``frame_length``, ``port``, ``rid`` (the copy's port and replica id)."""

    slot: str
    value: int | str


@dataclass(frozen=True)
class Parse:
    """The parser; the unparsed rest of the frame is the payload (slot ``payload``)."""


@dataclass(frozen=True)
class Run:
    """A control block of the program on the state: ``verify``, ``ingress``, ``egress``."""

    block: str


@dataclass(frozen=True)
class Handoff:
    """When any (slot, value) of ``when`` holds, the general path (``to``:
    ``after_ingress`` with the frame as received, ``after_egress`` with the copy's port)
    takes over the packet, or the copy, from here."""

    when: tuple[tuple[str, int], ...]
    to: str


@dataclass(frozen=True)
class Drop:
    """When any (slot, value) of ``when`` holds: count a drop, no frame out."""

    when: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Emit:
    """ComputeChecksum, the deparser and the payload behind it: the copy's frame, counted in
    ``tx[port]``.  A copy of a group equal to the copy before it after egress (headers and
    payload) is that copy's bytes again, where ComputeChecksum and the deparser read only
    the headers (``dedupe``, decided by the switch)."""


@dataclass(frozen=True)
class Enqueue:
    """The copy into its egress queue (`pyswitch.queues`, BMv2's egress buffers): the
    switch's ``enqueue(port, priority)`` gives the queueing metadata (``enq_timestamp``,
    ``enq_qdepth``, ``deq_timedelta``, ``deq_qdepth``) or None when the queue drops it
    (counted there).  Only where the switch has queues: no rate set, no step."""


Step = Receive | Set | Parse | Run | Handoff | Drop | Emit | Enqueue
QUEUE_SLOTS = ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")


@dataclass(frozen=True)
class Replicate:
    """When slot ``group`` is not 0: one copy per (port, rid) of that multicast group, each
    through ``copy`` (the last copy takes the packet's own state, the others a copy of
    it); a group unknown or empty is a drop."""

    group: str
    copy: tuple[Step, ...]


@dataclass(frozen=True)
class Unicast:
    """One copy to the port in slot ``port`` through ``copy``."""

    port: str
    copy: tuple[Step, ...]


def _copy(rid: int | str, itype: int | None) -> tuple[Step, ...]:
    """One copy into its queue and through egress (BMv2: egress_port set, egress_spec
    reset, clone_type cleared), then to the general path for an E2E clone or a drop in
    egress, else out."""
    meta: tuple[Step, ...] = (Set("egress_port", "port"), Set("egress_spec", 0),
                              Set("egress_rid", rid))
    if itype is not None:
        meta += (Set("instance_type", itype),)
    return (Enqueue(), *meta, Set("clone_type", 0), Run("egress"),
            Handoff((("clone_type", CLONE_E2E), ("egress_spec", DROP_PORT)), "after_egress"),
            Emit())


LOOP: tuple[Step | Replicate | Unicast, ...] = (
    Receive(),
    Set("ingress_port", "ingress_port"),
    Set("packet_length", "frame_length"),
    Parse(),
    Run("verify"),
    Run("ingress"),
    Handoff((("clone_type", CLONE_I2E),), "after_ingress"),
    Replicate("mcast_grp", _copy("rid", PKT_INSTANCE_TYPE_REPLICATION)),
    Drop((("egress_spec", DROP_PORT),)),
    Unicast("egress_spec", _copy(0, None)),
)
"""The fast path of BMv2 simple_switch's loop for one frame (pyswitch/switch.py's module
docstring has the decisions and their sources)."""


def _slots(meta: dict) -> dict[str, int]:
    """Metadata slot index by name: standard_metadata's fields and the hidden ones."""
    if set(meta["std"]) & set(meta["hidden"]):
        raise ValueError("a hidden metadata slot shadows a standard_metadata field")
    return {**meta["std"], **meta["hidden"]}


def _unknown(step: object, where: str) -> ValueError:
    return ValueError(f"pyswitch.native.loop: {type(step).__name__} {where}")


# ------------------------------------------------------------------------- Python
class _Python:
    """`LOOP` as the source of ``def process(ingress_port, frame)``; the names it uses
    (blocks, templates, statistics, the general path) are `Switch._specialised_process`'s
    namespace."""

    _VALUES = {"ingress_port": "ingress_port", "frame_length": "len(frame)", "port": "port",
               "rid": "rid"}

    def __init__(self, meta: dict, dedupe: bool, queues: bool) -> None:
        self.slot = _slots(meta)
        self.nh = len(meta["htempl"])
        self.dedupe = dedupe
        self.queues = queues
        comma = "," if self.nh == 1 else ""
        self.fresh = f"[{', '.join(f'_h{k}[:]' for k in range(self.nh))}{comma}]"

    def copy_of(self, s: str) -> str:
        comma = "," if self.nh == 1 else ""
        return f"[{', '.join(f'{s}[{k}][:]' for k in range(self.nh))}{comma}]"

    def cond(self, m: str, when: tuple[tuple[str, int], ...]) -> str:
        return " or ".join(f"{m}[{self.slot[s]}] == {v}" for s, v in when)

    def source(self) -> str:
        o = ["def process(ingress_port, frame):",
             "    if frame.__class__ is not bytes:",
             "        frame = bytes(frame)"]
        for st in LOOP:
            o += self.top(st)
        return "\n".join(o) + "\n"

    def top(self, st: object) -> list[str]:
        i = "    "
        pl = self.slot["payload"]
        if isinstance(st, Receive):
            return [f"{i}rx[ingress_port] += 1", f"{i}S = {self.fresh}", f"{i}M = _mt[:]"]
        if isinstance(st, Set):
            return [f"{i}M[{self.slot[st.slot]}] = {self.value(st.value)}"]
        if isinstance(st, Parse):
            return [f"{i}M[{pl}] = frame[parser(S, M, frame):]"]
        if isinstance(st, Run):
            return [f"{i}{st.block}(S, M)"]
        if isinstance(st, Handoff) and st.to == "after_ingress":
            return [f"{i}if {self.cond('M', st.when)}:",
                    f"{i}    return after_ingress(ingress_port, frame, S, M)"]
        if isinstance(st, Drop):
            return [f"{i}if {self.cond('M', st.when)}:", f"{i}    stats.dropped += 1",
                    f"{i}    return []"]
        if isinstance(st, Replicate):
            o = [f"{i}mg = M[{self.slot[st.group]}]", f"{i}if mg:",
                 f"{i}    reps = mcast.get(mg)", f"{i}    if not reps:",
                 f"{i}        stats.dropped += 1", f"{i}        return []",
                 f"{i}    out = []", f"{i}    last = len(reps) - 1",
                 f"{i}    prev_s = prev_p = prev_b = None",
                 f"{i}    for n, (port, rid) in enumerate(reps):",
                 f"{i}        if n == last:", f"{i}            S2, M2 = S, M",
                 f"{i}        else:", f"{i}            S2, M2 = {self.copy_of('S')}, M[:]"]
            for c in st.copy:
                o += self.step(c, "S2", "M2", 3, True)
            return [*o, f"{i}    return out"]
        if isinstance(st, Unicast):
            o = [f"{i}port = M[{self.slot[st.port]}]"]
            for c in st.copy:
                o += self.step(c, "S", "M", 1, False)
            return o
        raise _unknown(st, "at the top of the loop")

    def value(self, v: int | str) -> str:
        return str(v) if isinstance(v, int) else self._VALUES[v]

    def step(self, st: object, s: str, m: str, d: int, replica: bool) -> list[str]:
        """One step of a copy on state (`s`, `m`): of a group (`replica`) or the unicast."""
        i = "    " * d
        pl = self.slot["payload"]
        if isinstance(st, Set):
            return [f"{i}{m}[{self.slot[st.slot]}] = {self.value(st.value)}"]
        if isinstance(st, Run):
            return [f"{i}{st.block}({s}, {m})"]
        if isinstance(st, Enqueue):
            if not self.queues:
                return []
            dsts = ", ".join(f"{m}[{self.slot[k]}]" for k in QUEUE_SLOTS)
            return [f"{i}q = enqueue(port, {m}[{self.slot['priority']}])",
                    f"{i}if q is None:", f"{i}    {'continue' if replica else 'return []'}",
                    f"{i}{dsts} = q"]
        if isinstance(st, Handoff) and st.to == "after_egress":
            if replica:
                return [f"{i}if {self.cond(m, st.when)}:",
                        f"{i}    after_egress({s}, {m}, port, out, 0)", f"{i}    continue"]
            return [f"{i}if {self.cond(m, st.when)}:", f"{i}    out = []",
                    f"{i}    after_egress({s}, {m}, port, out, 0)", f"{i}    return out"]
        if isinstance(st, Emit):
            frame = [f"{i}compute({s}, {m})", f"{i}parts = []",
                     f"{i}deparser({s}, {m}, parts)", f"{i}parts.append({m}[{pl}])",
                     f"{i}tx[port] += 1"]
            if not replica:
                return [*frame, f"{i}return [(port, b\"\".join(parts))]"]
            if not self.dedupe:
                return [*frame, f"{i}out.append((port, b\"\".join(parts)))"]
            return [f"{i}if n and {s} == prev_s and {m}[{pl}] is prev_p:",
                    f"{i}    tx[port] += 1", f"{i}    out.append((port, prev_b))",
                    f"{i}    continue", f"{i}if n < last:",
                    f"{i}    prev_s, prev_p = {self.copy_of(s)}, {m}[{pl}]",
                    *frame, f"{i}out.append((port, b\"\".join(parts)))",
                    f"{i}prev_b = out[-1][1]"]
        raise _unknown(st, "in a copy")


def python_source(meta: dict, dedupe: bool, queues: bool = False) -> str:
    """The source of ``process(ingress_port, frame)`` for a program (`meta`: its compiled
    metadata), lowered from `LOOP`; `queues`: with the `Enqueue` steps (the switch's
    ``enqueue``), else without them (no rate set: the path as it was)."""
    return _Python(meta, dedupe, queues).source()


# ------------------------------------------------------------------------- C
class _C:
    """`LOOP` as C over the native state ``St`` (runtime.h, cgen.py): ``process_into`` (one
    frame; what it emits appended to a list it is given, so that a batch fills one list)
    and one function per copy kind, using process.c's helpers (``general``, ``run``,
    ``emit_one``, ``count_rx``, ``count_drop``, ``flush_counts``)."""

    def __init__(self, meta: dict, dedupe: bool) -> None:
        self.slot = _slots(meta)
        self.dedupe = dedupe
        self.funcs: list[str] = []

    def cond(self, s: str, when: tuple[tuple[str, int], ...]) -> str:
        return " || ".join(f"{s}->m[{self.slot[k]}] == {v}" for k, v in when)

    def value(self, v: int | str) -> str:
        if isinstance(v, int):
            return str(v)
        return {"ingress_port": "ip", "frame_length": "L", "port": "port_v",
                "rid": "rid_v"}[v]

    def source(self) -> str:
        body = ["/* 0, or -1 with an exception set */",
                "static int process_into(Proc *P, PyObject *ipo, PyObject *frame, PyObject *out) {",
                "    St st_, *st = &st_;",
                "    memset(st, 0, sizeof st_);",
                "    int res = -1;",
                "    V ip;",
                "    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(frame);",
                "    Py_ssize_t L = PyBytes_GET_SIZE(frame);"]
        for st in LOOP:
            body += self.top(st)
        body += ["done:",
                 "    Py_XDECREF(st->payload);",
                 "    if (PyList_GET_SIZE(P->keep) && PyList_SetSlice(P->keep, 0, "
                 "PyList_GET_SIZE(P->keep), NULL) < 0)",
                 "        res = -1;",
                 "    return res;",
                 "}"]
        return "\n".join([*self.funcs, *body]) + "\n"

    def top(self, st: object) -> list[str]:  # noqa: C901 - one branch per step kind
        i = "    "
        if isinstance(st, Receive):
            return [f"{i}if (v_from_py(ipo, &ip) < 0) goto done;",
                    f"{i}if (count_rx(P, ipo, ip) < 0) goto done;"]
        if isinstance(st, Set):
            return [f"{i}st->m[{self.slot[st.slot]}] = {self.value(st.value)};"]
        if isinstance(st, Parse):  # the payload is St's own field, not a slot, in C
            return [f"{i}{{ Py_ssize_t pos = 0; int rc = f_parser(P, st, buf, L, &pos);",
                    f"{i}  if (rc) {{ if (rc == RC_EXIT) PyErr_SetNone(P->exit_cls); "
                    "goto done; }",
                    f"{i}  if (pos > L) pos = L;",
                    f"{i}  st->payload = PyBytes_FromStringAndSize((const char *)buf + pos, "
                    "L - pos);",
                    f"{i}  if (!st->payload) goto done; }}"]
        if isinstance(st, Run):
            return [f"{i}if (run(P, st, f_{st.block}) < 0) goto done;"]
        if isinstance(st, Handoff) and st.to == "after_ingress":
            return [f"{i}if ({self.cond('st', st.when)}) {{",
                    f"{i}    if (flush_counts(P) < 0) goto done;",
                    f"{i}    PyObject *r = general(P->after_ingress, ipo, frame, st, NULL, NULL);",
                    f"{i}    if (r) {{ res = extend(out, r); Py_DECREF(r); }}",
                    f"{i}    goto done;", f"{i}}}"]
        if isinstance(st, Drop):
            return [f"{i}if ({self.cond('st', st.when)}) {{",
                    f"{i}    res = count_drop(P);",
                    f"{i}    goto done;", f"{i}}}"]
        if isinstance(st, Replicate):
            fn = self.replicate(st)
            g = self.slot[st.group]
            return [f"{i}if (st->m[{g}]) {{",
                    f"{i}    PyObject *k = v_to_py(st->m[{g}]);",
                    f"{i}    if (!k) goto done;",
                    f"{i}    PyObject *reps = PyDict_GetItemWithError(P->mcast, k);",
                    f"{i}    Py_DECREF(k);",
                    f"{i}    if (!reps && PyErr_Occurred()) goto done;",
                    f"{i}    if (!reps || PyObject_Length(reps) == 0) {{",
                    f"{i}        res = count_drop(P);",
                    f"{i}        goto done;", f"{i}    }}",
                    f"{i}    Py_INCREF(reps);",
                    f"{i}    res = {fn}(P, st, reps, out);",
                    f"{i}    Py_DECREF(reps);",
                    f"{i}    goto done;", f"{i}}}"]
        if isinstance(st, Unicast):
            fn = self.unicast(st)
            return [f"{i}{{ V port_v = st->m[{self.slot[st.port]}];",
                    f"{i}  PyObject *port_o = v_to_py(port_v);",
                    f"{i}  if (!port_o) goto done;",
                    f"{i}  res = {fn}(P, st, port_v, port_o, out);",
                    f"{i}  Py_DECREF(port_o);",
                    f"{i}  goto done; }}"]
        raise _unknown(st, "at the top of the loop")

    def unicast(self, st: Unicast) -> str:
        name = f"unicast_{len(self.funcs)}"
        o = [f"static int {name}(Proc *P, St *st, V port_v, PyObject *port_o, PyObject *out) {{"]
        for c in st.copy:
            o += self.step(c, "st", 1, "return 0;")
        o += ["    return 0;", "fail:", "    return -1;", "}", ""]
        self.funcs.append("\n".join(o))
        return name

    def replicate(self, st: Replicate) -> str:
        name = f"replicate_{len(self.funcs)}"
        o = [f"static int {name}(Proc *P, St *st, PyObject *reps, PyObject *out) {{",
             "    Py_ssize_t nrep = PyList_Check(reps) ? PyList_GET_SIZE(reps) : -1;",
             "    if (nrep < 0) { PyErr_SetString(PyExc_TypeError, "
             "\"multicast group is not a list\"); return -1; }",
             "    Py_ssize_t last = nrep - 1;",
             "    St prev;",
             "    PyObject *prev_p = NULL, *prev_b = NULL;",
             "    (void)prev; (void)prev_p; (void)prev_b;",
             "    for (Py_ssize_t n = 0; n < nrep; n++) {",
             "        PyObject *pr = PyList_GET_ITEM(reps, n);",
             "        PyObject *port_o = PyTuple_GetItem(pr, 0), *rid_o = PyTuple_GetItem(pr, 1);",
             "        if (!port_o || !rid_o) goto fail;",
             "        St c2, *s2 = st;",
             "        if (n != last) { c2 = *st; s2 = &c2; }",
             "        V port_v, rid_v;",
             "        if (v_from_py(port_o, &port_v) < 0 || v_from_py(rid_o, &rid_v) < 0) "
             "goto fail;"]
        for c in st.copy:
            o += self.step(c, "s2", 2, "continue;", replica=True)
        o += ["    }", "    return 0;", "fail:", "    return -1;", "}", ""]
        self.funcs.append("\n".join(o))
        return name

    def step(self, st: object, s: str, d: int, end: str, replica: bool = False) -> list[str]:
        """One step of a copy on state `s`; `end` leaves the copy (after a handoff)."""
        i = "    " * d
        if isinstance(st, Set):
            return [f"{i}{s}->m[{self.slot[st.slot]}] = {self.value(st.value)};"]
        if isinstance(st, Run):
            return [f"{i}if (run(P, {s}, f_{st.block}) < 0) goto fail;"]
        if isinstance(st, Enqueue):  # one pointer test when the switch has no queues
            sl = ", ".join(str(self.slot[k]) for k in QUEUE_SLOTS)
            return [f"{i}if (P->enqueue != Py_None) {{",
                    f"{i}    static const int qs[4] = {{{sl}}};",
                    f"{i}    int rc = flush_counts(P);",
                    f"{i}    if (rc == 0) rc = enqueue(P, {s}, port_o, {self.slot['priority']}, qs);",
                    f"{i}    if (rc < 0) goto fail;",
                    f"{i}    if (rc == 0) {end}", f"{i}}}"]
        if isinstance(st, Handoff) and st.to == "after_egress":
            return [f"{i}if ({self.cond(s, st.when)}) {{",
                    f"{i}    if (flush_counts(P) < 0) goto fail;",
                    f"{i}    PyObject *zero = PyLong_FromLong(0);",
                    f"{i}    PyObject *r = general(P->after_egress, port_o, NULL, {s}, out, zero);",
                    f"{i}    Py_DECREF(zero);",
                    f"{i}    if (!r) goto fail;",
                    f"{i}    Py_DECREF(r);",
                    f"{i}    {end}", f"{i}}}"]
        if isinstance(st, Emit):
            emit = [f"{i}if (emit_one(P, {s}, port_v, port_o, out) < 0) goto fail;"]
            if not (replica and self.dedupe):
                return emit
            return [f"{i}if (n && prev_p && {s}->payload == prev_p",
                    f"{i}        && memcmp({s}->s, prev.s, sizeof(prev.s)) == 0) {{",
                    f"{i}    if (count_tx(P, port_o, port_v) < 0) goto fail;",
                    f"{i}    PyObject *t = PyTuple_Pack(2, port_o, prev_b);",
                    f"{i}    if (!t || PyList_Append(out, t) < 0) {{ Py_XDECREF(t); goto fail; }}",
                    f"{i}    Py_DECREF(t);",
                    f"{i}    continue;", f"{i}}}",
                    f"{i}if (n < last) {{ memcpy(prev.s, {s}->s, sizeof(prev.s)); "
                    f"prev_p = {s}->payload; }}",
                    *emit,
                    f"{i}prev_b = PyTuple_GET_ITEM(PyList_GET_ITEM(out, "
                    "PyList_GET_SIZE(out) - 1), 1);"]
        raise _unknown(st, "in a copy")


def c_source(meta: dict, dedupe: bool) -> str:
    """The C of ``process`` (and its copy functions) for a program, lowered from `LOOP`;
    process.c puts it after its helpers."""
    return _C(meta, dedupe).source()
