"""v1model's ``counter`` (indexed) and ``direct_counter`` (one per entry of the table that
names it): packets and bytes, whatever the CounterType (the control plane reads both).

Python: two lists per counter (``C<k>p``, ``C<k>b``), counted in place (an index out of
range is ignored, as BMv2 does); a direct counter is counted by its table on a hit (each
entry's ``counter``).  Native: an indexed counter's two lists become C cells of 64 bits
(``Cells``, pyswitch/native/cells.h, as a register's), counted by ``cells_iadd`` without a
Python int and seen by the control plane as list-like views of the same cells; a value
wraps at 2**64 there, as BMv2's 64-bit counters (``Switch.counter_write`` refuses wider
values on both paths).  A direct counter's entry lists are counted with ``list_iadd``; on an
exact table they are 64-bit ``Cells`` (pyswitch/native/exact.h), counted with ``xt_count``.
"""

from __future__ import annotations

from typing import Any

from pyswitch.compiler.model import ExternInst
from pyswitch.externs import Extern
from pyswitch.ir import CounterCount
from pyswitch.types import Bits, EnumTy


def _counter_type(cx: Any, arg: Any, scope: Any, what: str) -> str:
    ct = cx.expr(arg, scope)
    if not (isinstance(ct.ty, EnumTy) and ct.ty.name == "CounterType"):
        raise cx.err(arg, f"{what} must be a CounterType")
    return [k for k, v in ct.ty.members.items() if v == ct.const][0]


def _unit(kind: str) -> Any:
    from p4.config.v1 import p4info_pb2
    return {"packets": p4info_pb2.CounterSpec.PACKETS,
            "bytes": p4info_pb2.CounterSpec.BYTES,
            "packets_and_bytes": p4info_pb2.CounterSpec.BOTH}[kind]


class Counter(Extern):
    names = ("counter",)
    kind = "object"
    signature = ("extern counter { counter(bit<32> size, CounterType type); "
                 "void count(in bit<32> index); }")
    served = ("Python: lists C<k>p, C<k>b; native: C cells of 64 bits seen as lists, "
              "cells_iadd")
    c_support = r"""
/* counter[i] += v on 64-bit cells (wrapping, as BMv2's counters): 0, 1 for IndexError */
static inline int cells_iadd(PyObject *o, V i, V v) {
    Cells *c = (Cells *)o;
    Py_ssize_t k;
    if (cells_index(c->n, i, &k)) return 1;
    cells_put(c, k, (V)(uint64_t)((uint64_t)cells_at(c, k) + (uint64_t)v));
    return 0;
}
"""
    meta_key = "counters"
    order = 10
    p4info_kind = "COUNTER"

    def instantiate(self, cx: Any, ty: Any, full: str, args: list, scope: Any,
                    node: Any) -> ExternInst:
        if len(args) != 2:
            raise cx.err(node, "counter needs (size, CounterType)")
        insts = cx.extern_insts.setdefault(self.meta_key, [])
        size = cx.extern_size(args[0], scope, "counter")
        ctype = _counter_type(cx, args[1], scope, "second counter argument")
        inst = ExternInst("counter", full, f"C{len(insts)}", size, None, ctype)
        insts.append(inst)
        return inst

    def method(self, cx: Any, obj: ExternInst, mn: str, args: list, scope: Any, em: Any,
               node: Any) -> None:
        if mn != "count" or len(args) != 1:
            raise cx.err(node, "counter supports count(index)")
        ie = cx.convert(cx.expr(args[0], scope, em), Bits(32), args[0])
        ic, ok = cx.idx_code(ie, obj.size, em)
        plen = cx.loc_e(cx.std.fields["packet_length"]).py()
        em.emit(CounterCount(obj.var, ic, obj.size, plen,
                             guarded=not ok))
        return None

    def meta_entries(self, insts: list) -> list[dict]:
        return [{"name": c.name, "var": c.var, "size": c.size, "type": c.ctype}
                for c in insts]

    def c_node(self, t: Any, f: Any, node: Any, o: list[str], d: int) -> bool:
        """`CounterCount`: ``cells_iadd`` on the counter's two cells (packets, bytes); a
        guarded index out of range counts nothing."""
        if not isinstance(node, CounterCount):
            return False
        ind = "    " * d
        i, n = t.ex(f, t.node_of(node.index)), t.ex(f, t.node_of(node.length))
        if node.guarded:
            o.append(f"{ind}if ({i.c} < {node.size}) {{")
            d += 1
        for s, v in (("p", "((V)1LL)"), ("b", n.c)):
            o.append(f"{'    ' * d}if ((rc = cells_iadd({t.g(node.counter + s)}, {i.c}, {v})) "
                     "!= 0) return raise_index(rc);")
        if node.guarded:
            o.append(f"{ind}}}")
        return True

    def native_state(self, sw: Any, ns: dict[str, Any], entries: list[dict], mod: Any) -> None:
        """Each counter's two lists become 64-bit `Cells` of `mod` holding the same values,
        in `ns` and in `sw.counters` (one already Cells stays: a process rebuilt)."""
        for c in entries:
            pb = []
            for s in "pb":
                cur = ns[c["var"] + s]
                if type(cur).__name__ != "Cells":
                    cur = ns[c["var"] + s] = mod.cells(cur, 64)
                pb.append(cur)
            sw.counters[c["name"]] = (pb[0], pb[1], c)

    def state(self, sw: Any, ns: dict[str, Any], entries: list[dict]) -> None:
        sw.counters = {}
        for c in entries:
            p, b = [0] * c["size"], [0] * c["size"]
            ns[c["var"] + "p"] = p
            ns[c["var"] + "b"] = b
            sw.counters[c["name"]] = (p, b, c)

    def p4info_symbols(self, sym: Any, entries: list[dict], xi: dict) -> None:
        from pyswitch.p4info.build import user_id
        from pyswitch.p4info.ids import P
        for c in entries:
            sym.add(P.COUNTER, c["name"], user_id(xi.get(c["name"], {})))

    def p4info(self, info: Any, sym: Any, entries: list[dict], xi: dict,
               tables: set[str]) -> bool:
        from pyswitch.p4info.build import preamble
        from pyswitch.p4info.ids import P
        for c in entries:
            pc = info.counters.add()
            preamble(pc.preamble, sym, P.COUNTER, c["name"],
                     xi.get(c["name"], {}).get("annotations", []))
            pc.spec.unit = _unit(c["type"])
            pc.size = c["size"]
        return bool(entries)

    def bmv2_json(self, entries: list[dict], doc: dict) -> None:
        arrays = doc.setdefault("counter_arrays", [])
        arrays += [{"name": c["name"], "id": len(arrays) + i, "is_direct": False,
                    "size": c["size"]} for i, c in enumerate(entries)]


class DirectCounter(Extern):
    names = ("direct_counter",)
    kind = "object"
    signature = "extern direct_counter { direct_counter(CounterType type); void count(); }"
    served = ("counted by its table on a hit: each entry's counter list, on both paths "
              "(native: list_iadd; an exact table's entries: 64-bit Cells, xt_count)")
    meta_key = "direct_counters"
    order = 20
    p4info_kind = "DIRECT_COUNTER"

    def instantiate(self, cx: Any, ty: Any, full: str, args: list, scope: Any,
                    node: Any) -> ExternInst:
        if len(args) != 1:
            raise cx.err(node, "direct_counter needs (CounterType)")
        ctype = _counter_type(cx, args[0], scope, "direct_counter argument")
        inst = ExternInst("direct_counter", full, "", 0, None, ctype)
        inst.used_by = None  # type: ignore[attr-defined]  # the table naming it
        cx.extern_insts.setdefault(self.meta_key, []).append(inst)
        return inst

    def method(self, cx: Any, obj: ExternInst, mn: str, args: list, scope: Any, em: Any,
               node: Any) -> None:
        if mn != "count" or args:
            raise cx.err(node, "direct_counter supports count()")
        return None  # counted by the table on a hit, as BMv2 does

    def meta_entries(self, insts: list) -> list[dict]:
        return [{"name": c.name, "type": c.ctype,
                 "table": c.used_by.name if getattr(c, "used_by", None) else None}
                for c in insts]

    def state(self, sw: Any, ns: dict[str, Any], entries: list[dict]) -> None:
        sw.direct_counters = {d["name"]: d for d in entries}

    def p4info_symbols(self, sym: Any, entries: list[dict], xi: dict) -> None:
        from pyswitch.p4info.build import user_id
        from pyswitch.p4info.ids import P
        for d in entries:
            sym.add(P.DIRECT_COUNTER, d["name"], user_id(xi.get(d["name"], {})))

    def p4info(self, info: Any, sym: Any, entries: list[dict], xi: dict,
               tables: set[str]) -> bool:
        from pyswitch.p4info.build import preamble
        from pyswitch.p4info.ids import P
        for d in entries:
            if not d["table"] or d["table"] not in tables:
                continue  # p4c emits a direct counter through the table that uses it
            pd = info.direct_counters.add()
            preamble(pd.preamble, sym, P.DIRECT_COUNTER, d["name"],
                     xi.get(d["name"], {}).get("annotations", []))
            pd.spec.unit = _unit(d["type"])
            pd.direct_table_id = sym.id(P.TABLE, d["table"])
        return bool(entries)

    def bmv2_json(self, entries: list[dict], doc: dict) -> None:
        arrays = doc.setdefault("counter_arrays", [])
        base = len(arrays)
        arrays += [{"name": d["name"], "id": base + i, "is_direct": True,
                    "binding": d["table"]} for i, d in enumerate(entries)]


EXTERNS = [Counter(), DirectCounter()]
