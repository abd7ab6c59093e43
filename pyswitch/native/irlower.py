"""The native path's lowering of the IR's simple statements to C (a mixin of
`pyswitch.native.cgen.Unit`).

The statements that are nodes of their own without a body (register reads and writes,
counters' counts, exits, parser errors, direct action calls, table applies) are lowered
here from their fields; the extern registry lowers its own (`Extern.c_node`: a register's
``reg_get`` / ``reg_set``, a counter's ``cells_iadd``).  Nothing of the Python back end's
output is read.
"""

from __future__ import annotations

from typing import Any

from pyswitch.ir import (
    ActionCall,
    Exit,
    ParserError,
    PyExpr,
    Stmt,
    TableApply,
)
from pyswitch.ir.exprs import Expr
from pyswitch.native.exprs import Func, NotNative

__all__ = ["IRLower"]
IND = "    "


class IRLower:
    """The nodes' C, for `pyswitch.native.cgen.Unit` (which provides `ex`, `cond`,
    `store`, `g`, `on_rc`, `exact`, `tables`, `meta`, `funcs`, `objs`)."""

    objs: list[Any]
    tables: dict[str, dict]
    meta: dict
    funcs: dict[str, Func]
    ln: int = 0  # the statement's line, for the messages of what the nodes hold

    def node_of(self, e: PyExpr) -> Expr:
        """Expression `e`'s node (every expression the compiler writes is one)."""
        if e.node is None:
            raise NotNative(f"line {self.ln}: expression {e.code[:60]!r} is no node")
        return e.node

    def ir_stmt(self, f: Func, st: Stmt, at: int, o: list[str], d: int) -> None:
        """Node `st`, on line `at`, in C."""
        self.ln = f.ln = at
        ind = IND * d
        if isinstance(st, Exit):
            if st.outs and not f.outs:
                raise NotNative(f"line {at}: exit with values outside a copy-out action")
            if f.exit_label:  # a handler raises again with the values it then has
                o.append(f"{ind}goto {f.exit_label[-1]};")
            elif st.outs:  # the values into the caller's array (copyout)
                self.return_outs(f, list(st.outs), o, d, "RC_EXIT")  # type: ignore[attr-defined]
            else:
                o.append(f"{ind}return RC_EXIT;")
            return
        if isinstance(st, ParserError):
            if not f.perr_label:
                raise NotNative(f"line {at}: a parser error outside the parser")
            code = st.code
            if not isinstance(code, int):  # an error known at run time only (verify)
                x = self.ex(f, self.node_of(code))  # type: ignore[attr-defined]
                if x.lo < 0 or x.hi > 1 << 16:  # the parser_error slot's range
                    raise NotNative(f"line {at}: a parser error's value out of range")
                code = f"(int){x.c}"
            jump = f"perr = {code}; goto {f.perr_label[-1]};"
            if st.cond is None:
                o.append(ind + jump)
            else:
                o.append(f"{ind}if ({self.cond(f, self.node_of(st.cond))}) {{ {jump} }}")  # type: ignore[attr-defined]
            return
        if isinstance(st, TableApply):
            return self.table_apply(f, st, o, d)
        if isinstance(st, ActionCall):
            return self.action_call(f, st, o, d)
        for e in self.objs:  # a register read or write, a counter: pyswitch.externs
            if e.c_node(self, f, st, o, d):
                return
        raise NotNative(f"line {at}: {type(st).__name__}")

    def action_call(self, f: Func, st: ActionCall, o: list[str], d: int) -> None:
        """``f_<fn>(P, st, args)``, its exit or exception passed on (`on_rc`)."""
        callee = self.funcs.get(st.fn)
        if callee is None or callee.kind != "block" or callee.returns or callee.outs:
            raise NotNative(f"line {self.ln}: call of {st.fn}")
        args = self.call_args(f, [self.node_of(a) for a in st.args], False, callee)  # type: ignore[attr-defined]
        o.append(self.on_rc(f, f"f_{st.fn}(P, st{args})", d))  # type: ignore[attr-defined]

    # -- table applies -----------------------------------------------------------------
    def table_apply(self, f: Func, st: TableApply, o: list[str], d: int) -> None:
        """The entry looked up (exact tables in C memory, exact.h; the others through the
        Python table), its direct counter, then its action."""
        ind = IND * d
        e, var = st.entry, st.table
        keep = "P->keep" if self.tables[var].get("direct_counter") else "NULL"
        exact = self.exact(var)  # type: ignore[attr-defined]
        if exact:
            xs = self.g(var + ".native")  # type: ignore[attr-defined]
            if st.kind == "default":
                o.append(f"{ind}if (xt_default({xs}, &e_{e}, {keep}) < 0) return RC_ERR;")
            elif st.kind == "exact":
                if len(st.keys) != len(self.tables[var]["keys"]) or not st.keys:
                    raise NotNative(f"line {self.ln}: key of {len(st.keys)} values")
                vals = ", ".join(self.ex(f, self.node_of(k)).c for k in st.keys)  # type: ignore[attr-defined]
                o.append(f"{ind}if (xt_lookup({xs}, (V[]){{{vals}}}, &e_{e}, {keep}) < 0) "
                         "return RC_ERR;")
            else:
                raise NotNative(f"line {self.ln}: general look-up of an exact table")
        else:
            tab = self.g(var)  # type: ignore[attr-defined]
            tabd = tab.replace("P->g[", "P->gd[")  # its instance dict (process.c, make)
            if st.kind == "default":
                o.append(f"{ind}if (tab_default({tab}, {tabd}, &e_{e}, {keep}) < 0) "
                         "return RC_ERR;")
            elif st.kind == "lookup":
                xs = [self.ex(f, self.node_of(k)).c for k in st.keys]  # type: ignore[attr-defined]
                key = f"v_to_py({xs[0]})" if len(xs) == 1 else \
                    f"key_tuple({len(xs)}, (V[]){{{', '.join(xs)}}})"
                o.append(f"{ind}if (tab_lookup({tab}, {key}, &e_{e}, {keep}) < 0) "
                         "return RC_ERR;")
            else:
                raise NotNative(f"line {self.ln}: exact look-up of a general table")
        if st.count is not None:  # a direct counter: an exact table's Cells, else a list
            add = "xt_count" if exact else "list_iadd"
            n = self.ex(f, self.node_of(st.count)).c  # type: ignore[attr-defined]
            o.append(f"{ind}if (e_{e}.hit) {{")
            for i, v in ((0, "1"), (1, n)):
                o.append(f"{ind}    if ((rc = {add}(e_{e}.counter, {i}, {v})) != 0) "
                         "return raise_index(rc);")
            o.append(f"{ind}}}")
        self.action_switch(f, e, var, o, d)

    def action_switch(self, f: Func, e: str, var: str, o: list[str], d: int) -> None:
        """The entry's action, by its index, with the entry's data."""
        ind = IND * d
        t = self.tables[var]
        o.append(f"{ind}switch (e_{e}.aidx) {{")
        names = {a["name"] for a in t["actions"]}
        for a in self.meta["actions"]:
            if a["name"] not in names:
                continue
            if a["fn"] not in self.funcs or self.funcs[a["fn"]].outs:
                raise NotNative(f"line {self.ln}: action {a['fn']} of a table")
            args = "".join(f", e_{e}.a[{i}]" for i in range(len(a["params"])))
            o.append(f"{ind}case {a['idx']}:")
            o.append(self.on_rc(f, f"f_{a['fn']}(P, st{args})", d + 1))  # type: ignore[attr-defined]
            o.append(f"{ind}    break;")
        o.append(f"{ind}default: return bad_action(e_{e}.aidx);")
        o.append(f"{ind}}}")
