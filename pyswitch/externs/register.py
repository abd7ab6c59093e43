"""v1model's ``register<T>``: an array of ``bit<N>``/``int<N>`` cells, read and written by
the program and the control plane.

Python: a list per instance (``R<k>``), read and written in place; an index that may be out
of range is guarded by ``IndexError`` (a read gives 0, a write is ignored: BMv2 logs an
error since behavioral-model PR #637).  Native: `pyswitch.native.cgen` reads and writes the
cells in C memory (``Cells`` of pyswitch/native/cells.h, made by `Register.native_state`
when the switch binds its native module), read and written by ``reg_get``/``reg_set``
(`Register.c_node`, from the IR's `RegRead`/`RegWrite`) without a Python int; the switch's ``registers`` and the code's names
hold that object, a list-like view of the same cells, so the control plane sees one state.
"""

from __future__ import annotations

from typing import Any

from pyswitch.compiler.model import ExternInst, ScalarLoc
from pyswitch.externs import Extern
from pyswitch.ir import RegRead, RegWrite
from pyswitch.types import Bits, same_type


class Register(Extern):
    names = ("register",)
    kind = "object"
    signature = ("extern register<T> { register(bit<32> size); "
                 "void read(out T result, in bit<32> index); "
                 "void write(in bit<32> index, in T value); }")
    served = "Python: a list R<k>; native: C cells seen as a list, reg_get/reg_set (cells.h)"
    meta_key = "registers"
    order = 30
    p4info_kind = "REGISTER"

    def instantiate(self, cx: Any, ty: Any, full: str, args: list, scope: Any,
                    node: Any) -> ExternInst:
        if len(ty.args) != 1 or not isinstance(ty.args[0], Bits):
            raise cx.err(node, "register<T> needs T = bit<N> or int<N>")
        if len(args) != 1:
            raise cx.err(node, "register needs exactly one argument (its size)")
        insts = cx.extern_insts.setdefault(self.meta_key, [])
        size = cx.extern_size(args[0], scope, "register")
        inst = ExternInst("register", full, f"R{len(insts)}", size, ty.args[0])
        insts.append(inst)
        return inst

    def method(self, cx: Any, obj: ExternInst, mn: str, args: list, scope: Any, em: Any,
               node: Any) -> None:
        if mn == "read":
            if len(args) != 2:
                raise cx.err(node, "register.read(out result, in index)")
            lv = cx.lvalue(args[0], scope, em)
            if not isinstance(lv, ScalarLoc) or not same_type(lv.ty, obj.elem):
                raise cx.err(args[0], f"register read result must be a {obj.elem.show()}"
                                      " l-value")
            ie = cx.convert(cx.expr(args[1], scope, em), Bits(32), args[1])
            ic, ok = cx.idx_code(ie, obj.size, em)
            em.emit(RegRead(obj.var, ic, obj.size,
                            cx.loc_e(lv).py(), self.cell_bounds(obj.elem.width),
                            guarded=not ok))
            return None
        if mn == "write":
            if len(args) != 2:
                raise cx.err(node, "register.write(in index, in value)")
            ie = cx.convert(cx.expr(args[0], scope, em), Bits(32), args[0])
            ve = cx.convert(cx.expr(args[1], scope, em), obj.elem, args[1])
            ic, ok = cx.idx_code(ie, obj.size, em)
            em.emit(RegWrite(obj.var, ic, obj.size,
                             ve.py(), guarded=not ok))
            return None
        raise cx.err(node, f"register has no method {mn!r}")

    def meta_entries(self, insts: list) -> list[dict]:
        return [{"name": r.name, "var": r.var, "size": r.size, "width": r.elem.width}
                for r in insts]

    @staticmethod
    def cell_bounds(width: int) -> tuple[int, int]:
        """The values a cell of `width` bits holds (``int<W>`` too: its W-bit pattern)."""
        return (0, (1 << width) - 1)

    def c_values(self, entries: list[dict]) -> dict[str, tuple[int, int]]:
        return {r["var"]: self.cell_bounds(r["width"]) for r in entries}

    def c_node(self, t: Any, f: Any, node: Any, o: list[str], d: int) -> bool:
        """`RegRead`, `RegWrite`: ``reg_get``/``reg_set`` on the register's cells.  An
        index out of range raises IndexError (as Python's list would) or, `guarded`,
        gives the read's default / writes nothing (BMv2's behaviour)."""
        from pyswitch.native.exprs import X
        if not isinstance(node, (RegRead, RegWrite)):
            return False
        ind = "    " * d
        g, i = t.g(node.reg), t.ex(f, t.node_of(node.index))
        if isinstance(node, RegWrite):
            x = t.ex(f, t.node_of(node.value))
            if node.guarded:
                o.append(f"{ind}if ((rc = reg_set({g}, {i.c}, {x.c})) < 0) return RC_ERR;")
            else:
                o.append(f"{ind}if ((rc = reg_set({g}, {i.c}, {x.c})) != 0) "
                         "return raise_index(rc);")
            return True
        tg = t.node_of(node.target)
        if not node.guarded:
            o.append(f"{ind}{{ V r_; if ((rc = reg_get({g}, {i.c}, &r_)) != 0) "
                     "return raise_index(rc);")
            t.store(f, tg, X("r_", *node.bounds), o, d + 1)
            o.append(f"{ind}}}")
            return True
        o.append(f"{ind}{{ V r_; rc = reg_get({g}, {i.c}, &r_);")
        o.append(f"{ind}  if (rc < 0) return RC_ERR;")
        o.append(f"{ind}  if (rc == 0) {{")
        t.store(f, tg, X("r_", *node.bounds), o, d + 2)
        o.append(f"{ind}  }} else {{")
        t.store(f, tg, X(str(node.default), node.default, node.default), o, d + 2)
        o.append(f"{ind}  }} }}")
        return True

    def state(self, sw: Any, ns: dict[str, Any], entries: list[dict]) -> None:
        sw.registers = {}
        for r in entries:
            lst = [0] * r["size"]
            ns[r["var"]] = lst
            sw.registers[r["name"]] = (lst, r)

    def native_state(self, sw: Any, ns: dict[str, Any], entries: list[dict], mod: Any) -> None:
        """Each register's list becomes a `Cells` of `mod` (runtime.h's cells.h: the
        cells in C memory, a list-like view for Python) holding the same values, in `ns`
        and in `sw.registers`; one already a Cells stays (a process rebuilt on the same
        state).  The native code then reads and writes cells without a Python int."""
        from pyswitch.native.cgen import NotNative
        for r in entries:
            cur = ns[r["var"]]
            if type(cur).__name__ == "Cells":
                continue
            if not 1 <= r["width"] <= 126:
                raise NotNative(f"register {r['name']} of {r['width']} bits (more than 126)")
            cells = mod.cells(cur, r["width"])
            ns[r["var"]] = cells
            sw.registers[r["name"]] = (cells, r)

    def p4info_symbols(self, sym: Any, entries: list[dict], xi: dict) -> None:
        from pyswitch.p4info.build import user_id
        from pyswitch.p4info.ids import P
        for r in entries:
            sym.add(P.REGISTER, r["name"], user_id(xi.get(r["name"], {})))

    def p4info(self, info: Any, sym: Any, entries: list[dict], xi: dict,
               tables: set[str]) -> bool:
        from pyswitch.p4info.build import preamble
        from pyswitch.p4info.ids import P
        for r in entries:
            pr = info.registers.add()
            preamble(pr.preamble, sym, P.REGISTER, r["name"],
                     xi.get(r["name"], {}).get("annotations", []))
            pr.type_spec.bitstring.bit.bitwidth = r["width"]
            pr.size = r["size"]
        return bool(entries)

    def bmv2_json(self, entries: list[dict], doc: dict) -> None:
        doc["register_arrays"] = [{"name": r["name"], "id": i, "size": r["size"],
                                   "bitwidth": r["width"]} for i, r in enumerate(entries)]


EXTERNS = [Register()]
