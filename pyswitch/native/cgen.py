"""Lower a program's intermediate form (`pyswitch.ir`, pyswitch.compiler's output) to C.

The simple nodes -- register reads and writes, counters' counts, exits, parser errors,
direct action calls, table applies (the exact store's ``xt_lookup``, runtime.h's exact.h;
the others' ``tab_lookup``) -- are lowered from their fields (`pyswitch.native.irlower`).
The structured statements (assignments, ``if``, loops, returns, the blocks' and the
parser's scopes) and the parser's and deparser's nodes (the cursor, the headers' struct
reads and writes) are built into a Python syntax tree from their fields, their
expressions from their nodes (`pyswitch.native.exprtree`; parsed only where an expression
is still text, `PyExpr.code`) (`pyswitch.native.irtree`); the rest is still `PyText`,
a small, regular subset of Python: scalar slots ``M[j]`` and header fields ``h[j]`` (``h
= S[k]``), integer arithmetic normalised by masks, whole headers, the copy-out of an action's out/inout parameters (`pyswitch.native.copyout`), and varbits as
``(nbits, value)`` pairs (their idioms: pyswitch.native.varbits).  Transitionally, this
module translates that tree (one marker line per simple node) and writes the same steps
in C, one C function per function, so that both paths have one semantics: the
compiler's.  The packet loop around
those functions (``process``: the after-ingress and after-egress decisions, the copies) is
not translated but lowered from its one description, `pyswitch.native.loop.LOOP`, as the
Python path's specialised ``process`` is.

Values are ``__int128``; each expression is proven to stay within 126 bits first
(pyswitch.native.exprs).  Anything outside the subset, or not proven, raises
:class:`NotNative` with the line: the switch then runs the Python path, which is always there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pyswitch import externs
from pyswitch.ir import ModuleItem, TableApply
from pyswitch.ir.bounds import program_bounds
from pyswitch.native.copyout import CopyOut, out_names
from pyswitch.native.exprs import Func, NotNative, Pending, X, merge
from pyswitch.native.irlower import IRLower, marker, module_tree
from pyswitch.native.loop import c_source
from pyswitch.native.picks import Picks
from pyswitch.native.treeexprs import TreeExpressions, forget
from pyswitch.native.varbits import Varbits
from pyswitch.tables import table_kind

__all__ = ["NotNative", "Unit"]

_FMT = {"B": 1, "H": 2, "I": 4, "Q": 8}


class Unit(IRLower, CopyOut, Picks, Varbits, TreeExpressions):
    """One program (its IR, `Program.ir`, and meta): `translate()` returns the C source of
    its extension module."""

    def __init__(self, ir: list[ModuleItem], meta: dict, modname: str) -> None:
        self.meta = meta
        self.modname = modname
        self.mb = meta["mbounds"]
        self.hb = meta["hbounds"]
        self.hoff: list[int] = []
        off = 0
        for hb in self.hb:
            self.hoff.append(off)
            off += len(hb)
        self.ns = max(off, 1)
        self.nm = len(self.mb)
        self.varbit_slots(meta)  # their bounds in hb, mb: pyswitch.native.varbits
        self.objs = externs.objects()  # registers, counters: their IR statements (c_node)
        self.regs = {k: b for e in self.objs
                     for k, b in e.c_values(meta.get(e.meta_key, [])).items()}
        self.tables = {t["var"]: t for t in meta["tables"]}
        self.actions = {a["fn"]: a for a in meta["actions"]}
        self.gidx: dict[str, int] = {}
        self.structs: dict[str, list[tuple[str, int]]] = {}
        self.funcs: dict[str, Func] = {}
        self.irb = program_bounds(ir, meta)  # the nodes' proven intervals
        tree, self.lines, self.nodes, structs = module_tree(ir)  # transitional: irtree
        for line, decl in structs:  # the module's `StructDecl`s, read from the nodes
            self.structs[decl.var] = self._fmt(decl.fmt, line)
        for st in tree.body:  # (the helpers, `Helper`: not in the tree, the C calls its own)
            if isinstance(st, ast.FunctionDef):
                self._declare(st)
            else:
                raise NotNative(f"line {st.lineno}: module-level {type(st).__name__}")

    # -- declarations ----------------------------------------------------------------
    def _fmt(self, fmt: str, line: int) -> list[tuple[str, int]]:
        """A struct's big-endian format as (item code, bytes) per item."""
        if not fmt.startswith(">"):
            raise NotNative(f"line {line}: struct format")
        out = []
        for ch in fmt[1:]:
            if ch not in _FMT:
                raise NotNative(f"line {line}: struct format {ch!r}")
            out.append((ch, _FMT[ch]))
        return out

    def _declare(self, fn: ast.FunctionDef) -> None:
        a = fn.args
        star = a.vararg is not None and a.vararg.arg == "data"  # a table's wrapper
        if (a.vararg and not star) or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise NotNative(f"line {fn.lineno}: signature of {fn.name}")
        names = [x.arg for x in a.args]
        if star:
            if names != ["S", "M"]:
                raise NotNative(f"line {fn.lineno}: signature of {fn.name}")
            names += self.data_params(fn)
        if fn.name == "parser" and names == ["S", "M", "buf"]:
            kind = "parser"
        elif fn.name == "deparser" and names == ["S", "M", "out"]:
            kind = "deparser"
        elif names[:2] == ["S", "M"]:
            kind = "block"
        else:
            raise NotNative(f"line {fn.lineno}: signature of {fn.name}")
        f = Func(fn.name, fn, names[2:] if kind == "block" else [], kind)
        f.irb = self.irb.get(fn.name)
        f.returns = any(isinstance(n, ast.Return) and n.value is not None
                        for n in ast.walk(fn))
        f.star = star
        if kind == "block":  # an action returning its out/inout parameters: copyout
            f.outs = out_names(fn, self.nodes) or []
            f.returns = f.returns and not f.outs
        self.funcs[fn.name] = f

    def g(self, name: str) -> str:
        """The context slot of a global Python object (register list, table, ...)."""
        if name not in self.gidx:
            self.gidx[name] = len(self.gidx)
        return f"P->g[{self.gidx[name]}]"

    # -- statements ------------------------------------------------------------------
    def body(self, f: Func, stmts: list[ast.stmt], o: list[str], d: int) -> None:
        for st in stmts:
            self.stmt(f, st, o, d)

    def on_rc(self, f: Func, call: str, d: int) -> str:
        """Run `call` (an int-returning C call); unwind on an exception or an exit."""
        ind = "    " * d
        tgt = f"goto {f.exit_label[-1]};" if f.exit_label else "return RC_EXIT;"
        return (f"{ind}if ((rc = {call}) != 0) {{ if (rc < 0) return RC_ERR; {tgt} }}")

    def store(self, f: Func, t: ast.AST, v: X, o: list[str], d: int) -> None:
        ind = "    " * d
        s = self.slot(f, t)
        if s is not None:
            lo, hi = s[1]
            if v.lo < lo or v.hi > hi:
                raise NotNative(f"line {t.lineno}: a value outside its slot's range")
            o.append(f"{ind}{s[0]} = {v.c};")
            return
        if isinstance(t, ast.Name) and t.id in f.locals:
            o.append(f"{ind}l_{t.id} = {v.c};")
            f.cur[t.id] = (v.lo, v.hi)
            return
        if isinstance(t, ast.Name) and t.id in f.params:
            lo, hi = self.param_bounds(f, t.id)
            if v.lo < lo or v.hi > hi:
                raise NotNative(f"line {t.lineno}: a value outside its parameter's range")
            o.append(f"{ind}p_{t.id} = {v.c};")
            return
        raise NotNative(f"line {t.lineno}: assignment to {ast.unparse(t)[:40]!r}")

    def stmt(self, f: Func, st: ast.stmt, o: list[str], d: int) -> None:  # noqa: C901
        ind = "    " * d
        ln = st.lineno
        if isinstance(st, ast.Pass):
            return
        k = marker(st)
        if k is not None:  # a node of the IR: pyswitch.native.irlower
            return self.ir_stmt(f, self.nodes[k], st, o, d)
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            t, v = st.targets[0], st.value
            if isinstance(t, ast.Name) and t.id in f.aliases:
                return
            if isinstance(t, ast.Name) and t.id in f.picks:
                return self.pick(f, t.id, v, o, d)
            if isinstance(t, ast.Name) and t.id in f.rets:
                return self.ret_call(f, t.id, v, o, d)
            if f.kind == "parser" and isinstance(t, ast.Name) and t.id == "L":
                return
            if f.kind == "parser" and isinstance(t, ast.Name) and t.id == "pos":
                o.append(f"{ind}l_pos = (Py_ssize_t){self.ex(f, v).c};")
                return
            if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Slice):
                return self.slice_store(f, t, v, o, d)
            if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple):
                return self.headers_swap(f, t, v, o, d)
            if isinstance(t, ast.Tuple):
                return self.unpack(f, [e for e in t.elts], v, o, d)
            return self.store(f, t, self.val(f, t, v, o, d), o, d)
        if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add):
            t = st.target
            if f.kind == "parser" and isinstance(t, ast.Name) and t.id == "pos":
                o.append(f"{ind}l_pos += (Py_ssize_t){self.ex(f, st.value).c};")
                return
            return self.store(f, t, self.ex(f, ast.BinOp(t, ast.Add(), st.value,
                                                          lineno=ln)), o, d)
        if isinstance(st, ast.If):
            o.append(f"{ind}if ({self.cond(f, st.test)}) {{")
            before = dict(f.cur)
            self.body(f, st.body, o, d + 1)
            after_a, f.cur = f.cur, dict(before)
            if st.orelse:
                o.append(f"{ind}}} else {{")
                self.body(f, st.orelse, o, d + 1)
            o.append(f"{ind}}}")
            f.cur = merge(f, after_a, f.cur)
            return
        if isinstance(st, ast.While) and isinstance(st.test, ast.Constant) \
                and st.test.value is True and not st.orelse:
            o.append(f"{ind}for (;;) {{")
            forget(f, st.body)  # a value may come round the loop: the whole-function bound
            f.loops += 1
            self.body(f, st.body, o, d + 1)
            f.loops -= 1
            o.append(f"{ind}}}")
            forget(f, st.body)  # any break may have left: the whole-function bound
            return
        if isinstance(st, ast.Break):
            o.append(f"{ind}break;")
            return
        if isinstance(st, ast.Continue):
            o.append(f"{ind}continue;")
            return
        if isinstance(st, ast.Return):
            if f.kind == "parser":
                if st.value is None or ast.unparse(st.value) != "pos":
                    raise NotNative(f"line {ln}: parser return")
                o.append(f"{ind}*ret = l_pos; return 0;")
            elif st.value is None:
                o.append(f"{ind}return 0;")
            elif f.outs and isinstance(st.value, ast.Tuple):
                self.return_outs(f, st.value, o, d, "0")
            else:
                raise NotNative(f"line {ln}: return of a value")
            return
        if isinstance(st, ast.Raise):  # exits, parser errors: nodes of the IR (irlower)
            raise NotNative(f"line {ln}: raise {ast.unparse(st)[:40]!r}")
        if isinstance(st, ast.Try):
            return self.try_(f, st, o, d)
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            return self.call_stmt(f, st.value, o, d)
        if isinstance(st, ast.For):
            return self.for_picked(f, st, o, d)
        raise NotNative(f"line {ln}: statement {ast.unparse(st)[:60]!r}")

    def try_(self, f: Func, st: ast.Try, o: list[str], d: int) -> None:
        ind = "    " * d
        if st.orelse or st.finalbody or len(st.handlers) != 1:
            raise NotNative(f"line {st.lineno}: try statement")
        h = st.handlers[0]
        exc = ast.unparse(h.type) if h.type is not None else ""
        if exc == "_Exit" and h.name is None and all(isinstance(x, ast.Pass) for x in h.body):
            f.nlabel += 1
            lab = f"exit_{f.nlabel}"
            f.exit_label.append(lab)
            self.body(f, st.body, o, d)
            f.exit_label.pop()
            o.append(f"{ind}{lab}: ;")
            forget(f, st.body)  # reached from any exit inside
            return
        if exc == "_Exit" and h.name in (None, "_x"):  # copy-out on exit: copyout
            return self.exit_handler(f, st, o, d)
        if exc == "_PErr" and f.kind == "parser":
            f.nlabel += 1
            lab, done = f"perr_{f.nlabel}", f"perr_done_{f.nlabel}"
            f.perr_label.append(lab)
            self.body(f, st.body, o, d)
            f.perr_label.pop()
            forget(f, st.body)  # reached from any parser error inside
            o.append(f"{ind}goto {done};")
            o.append(f"{ind}{lab}: ;")
            for x in h.body:
                if (isinstance(x, ast.Assign) and isinstance(x.value, ast.Attribute)
                        and isinstance(x.value.value, ast.Name) and x.value.value.id == h.name
                        and x.value.attr == "code"):
                    self.store(f, x.targets[0], X("(V)perr", 0, 1 << 16), o, d)
                else:
                    raise NotNative(f"line {x.lineno}: parser error handler")
            o.append(f"{ind}{done}: ;")
            return
        raise NotNative(f"line {st.lineno}: try ... except {exc}")

    def exact(self, var: str) -> bool:
        """Whether table `var` is all-exact: its entries are looked up in C memory."""
        return table_kind(self.tables[var]["keys"]) == "exact"

    def call_stmt(self, f: Func, c: ast.Call, o: list[str], d: int) -> None:
        fn = ast.unparse(c.func)
        if fn in self.funcs and self.funcs[fn].kind == "block":
            callee = self.funcs[fn]
            if callee.returns or callee.outs:  # out values are assigned: copyout
                raise NotNative(f"line {c.lineno}: call of {fn}")
            o.append(self.on_rc(f, f"f_{fn}(P, st{self.call_args(f, c, callee)})", d))
            return
        if f.kind == "deparser" and fn == "out.append" and len(c.args) == 1:
            return self.emit(f, c.args[0], o, d)
        raise NotNative(f"line {c.lineno}: call of {fn}")

    # -- parser and deparser -------------------------------------------------------------
    def unpacked(self, f: Func, v: ast.AST) -> list[X]:
        """``_stN.unpack_from(buf, pos)``: one big-endian read per format item."""
        src = ast.unparse(v)
        if not (f.kind == "parser" and isinstance(v, ast.Call)
                and isinstance(v.func, ast.Attribute) and v.func.attr == "unpack_from"
                and isinstance(v.func.value, ast.Name) and v.func.value.id in self.structs
                and src.endswith("(buf, pos)")):
            raise NotNative(f"line {v.lineno}: {src[:40]!r}")
        out, off = [], 0
        for _, n in self.structs[v.func.value.id]:
            out.append(X(f"get_be(buf + l_pos + {off}, {n})", 0, (1 << (8 * n)) - 1))
            off += n
        return out

    def read_guard(self, v: ast.AST, d: int) -> str:
        """Python's unpack_from raises on a short buffer; so does this (the generated
        parser checks the length first, so neither happens in practice)."""
        size = sum(n for _, n in self.structs[v.func.value.id])  # type: ignore[attr-defined]
        return f"{'    ' * d}if (l_pos + {size} > L_buf) return short_read({size});"

    def unpack(self, f: Func, ts: list[ast.AST], v: ast.AST, o: list[str], d: int) -> None:
        xs = self.unpacked(f, v)
        if len(xs) != len(ts):
            raise NotNative(f"line {v.lineno}: unpack count")
        o.append(self.read_guard(v, d))
        for t, x in zip(ts, xs, strict=True):
            self.store(f, t, x, o, d)

    def slice_store(self, f: Func, t: ast.Subscript, v: ast.AST, o: list[str], d: int) -> None:
        sl = t.slice
        first = sl.lower.value if isinstance(sl.lower, ast.Constant) else (
            0 if sl.lower is None else -1)
        if not (isinstance(sl, ast.Slice) and first in (0, 1) and sl.upper is None
                and sl.step is None):
            raise NotNative(f"line {t.lineno}: slice assignment")
        def at(j: int) -> ast.Subscript:
            return ast.Subscript(t.value, ast.Constant(j), lineno=t.lineno)
        if isinstance(v, (ast.Tuple, ast.List)):  # a varbit's guard, if any, goes first
            xs = [self.val(f, at(j), e, o, d) for j, e in enumerate(v.elts, first)]
        elif self._is_header(f, v):  # a header copied whole
            xs = [self.val(f, at(j), ast.Subscript(v, ast.Constant(j), lineno=t.lineno), o, d)
                  for j in range(first, self._nfields(f, v))]
        else:
            xs = self.unpacked(f, v)
            o.append(self.read_guard(v, d))
        if first + len(xs) != self._nfields(f, t.value):
            raise NotNative(f"line {t.lineno}: slice assignment of another length")
        # every item is evaluated before the first is stored (Python's tuple assignment)
        ind = "    " * d
        o.append(f"{ind}{{")
        for j, x in enumerate(xs):
            o.append(f"{ind}    V t{j}_ = {x.c};")
        for j, x in enumerate(xs, first):
            self.store(f, ast.Subscript(t.value, ast.Constant(j), lineno=t.lineno),
                       X(f"t{j - first}_", x.lo, x.hi), o, d + 1)
        o.append(f"{ind}}}")

    def emit(self, f: Func, c: ast.AST, o: list[str], d: int) -> None:
        """``out.append(_sdN.pack(...))``: each item written big-endian into the buffer."""
        ind = "    " * d
        if f.loops:
            raise NotNative(f"line {getattr(c, 'lineno', 0)}: deparser output inside a loop")
        if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr == "pack" and isinstance(c.func.value, ast.Name)
                and c.func.value.id in self.structs):
            return self.emit_bytes(f, c, o, d)  # pieces of bytes, varbits: native.varbits
        fmt = self.structs[c.func.value.id]
        items: list[ast.AST] = []
        for a in c.args:
            if isinstance(a, ast.Starred):
                s = a.value
                if not (isinstance(s, ast.Subscript) and isinstance(s.slice, ast.Slice)
                        and ast.unparse(s.slice) == "1:"):
                    raise NotNative(f"line {c.lineno}: deparser item")
                nf = self._nfields(f, s.value)
                items += [ast.Subscript(s.value, ast.Constant(j), lineno=c.lineno)
                          for j in range(1, nf)]
            else:
                items.append(a)
        if len(items) != len(fmt):
            raise NotNative(f"line {c.lineno}: deparser item count")
        off = 0
        for (_, n), it in zip(fmt, items, strict=True):
            x = self.ex(f, it)
            if x.lo < 0 or x.hi >= (1 << (8 * n)):
                raise NotNative(f"line {c.lineno}: a deparsed value may not fit its field")
            o.append(f"{ind}put_be(ob + *on + {off}, {x.c}, {n});")
            off += n
        o.append(f"{ind}*on += {off};")
        f.emitted += off

    @staticmethod
    def _is_header(f: Func, h: ast.AST) -> bool:
        """A header (an alias, ``S[k]``, or a stack element picked at run time)."""
        return (isinstance(h, ast.Name) and (h.id in f.aliases or h.id in f.picks)) or (
            isinstance(h, ast.Subscript) and ast.unparse(h.value) == "S"
            and isinstance(h.slice, ast.Constant))

    def _nfields(self, f: Func, h: ast.AST) -> int:
        if isinstance(h, ast.Name) and h.id in f.picks:
            return self.pick_width(f, h.id)
        if isinstance(h, ast.Name) and h.id in f.aliases:
            return len(self.hb[f.aliases[h.id]])
        if (isinstance(h, ast.Subscript) and ast.unparse(h.value) == "S"
                and isinstance(h.slice, ast.Constant)):
            return len(self.hb[h.slice.value])
        raise NotNative(f"deparser item {ast.unparse(h)[:30]!r}")

    # -- functions ---------------------------------------------------------------------
    def classify(self, f: Func) -> None:
        """Sort the names a function assigns: header aliases, table entries, stack
        elements picked at run time, locals."""
        maybe_picks: list[tuple[str, ast.AST]] = []
        maybe_rets: list[tuple[str, ast.AST]] = []
        for n in ast.walk(f.node):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                t, v = n.targets[0], n.value
                names = t.elts if isinstance(t, ast.Tuple) else [t]
                for x in names:
                    if not isinstance(x, ast.Name):
                        continue
                    k = marker(v)
                    if k is not None:  # a node: a table's entry, or a value
                        if isinstance(self.nodes[k], TableApply):
                            f.ents[x.id] = self.nodes[k].table  # type: ignore[union-attr]
                        elif x.id not in f.params:
                            f.locals[x.id] = None
                    elif (isinstance(v, ast.Subscript) and ast.unparse(v.value) == "S"
                            and isinstance(v.slice, ast.Constant)):
                        f.aliases[x.id] = v.slice.value
                    elif (f.kind == "parser" and x.id in ("pos", "L")) or x.id in f.params:
                        pass
                    elif isinstance(t, ast.Name) and isinstance(v, (ast.Subscript, ast.Call)) \
                            and x.id.startswith("_hs"):
                        maybe_picks.append((x.id, v))
                    elif isinstance(t, ast.Name) and x.id.startswith("_r") and (
                            isinstance(v, ast.Call) or ast.unparse(v) == "_x.args[0]"):
                        maybe_rets.append((x.id, v))
                    else:
                        f.locals[x.id] = None
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                if not (f.kind == "parser" and n.target.id == "pos") \
                        and n.target.id not in f.params:
                    f.locals[n.target.id] = None
        maybe_rets.sort(key=lambda r: ast.unparse(r[1]) == "_x.args[0]")  # the calls first
        for name, v in maybe_rets:
            if not self.classify_ret(f, name, v):
                f.locals[name] = None
        for name, v in maybe_picks:  # once every alias is known
            if not self.classify_pick(f, name, v):
                f.locals[name] = None
        if set(f.picks) & set(f.locals):
            raise NotNative(f"function {f.name}: name {sorted(set(f.picks) & set(f.locals))[0]}"
                            " is a stack element and a value")
        both = (set(f.aliases) | set(f.ents)) & set(f.locals) or set(f.aliases) & set(f.ents)
        if both:
            raise NotNative(f"function {f.name}: name {sorted(both)[0]} has two kinds")

    def bound_locals(self, f: Func) -> None:
        """Each local's interval: the union of what is assigned to it, to a fixed point."""
        assigns: list[tuple[str, ast.AST]] = []
        for n in ast.walk(f.node):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                t = n.targets[0]
                if isinstance(t, ast.Name) and t.id in f.locals:
                    assigns.append((t.id, n.value))
                elif isinstance(t, ast.Tuple) and not isinstance(n.value, ast.Tuple):
                    for x, u in zip(t.elts, self.unpacked(f, n.value), strict=False):
                        if isinstance(x, ast.Name) and x.id in f.locals:
                            assigns.append((x.id, ast.Constant(u.lo)))
                            assigns.append((x.id, ast.Constant(u.hi)))
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) \
                    and n.target.id in f.locals:
                assigns.append((n.target.id, ast.BinOp(n.target, n.op, n.value,
                                                       lineno=n.lineno)))
        for turn in range(40):
            changed = False
            for name, v in assigns:
                try:
                    k = marker(v)
                    b = self.node_bounds(self.nodes[k]) if k is not None else None
                    if b is not None:  # a node's value (a register read)
                        lo, hi = b
                    else:
                        x = self.ex(f, v)
                        lo, hi = x.lo, x.hi
                except Pending:
                    continue
                old = f.locals[name]
                new = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
                if new != old and old is not None and turn >= 8:
                    # widening: a loop counter grows by one a turn; round the bound up to
                    # the next power of two (still a bound), so that a mask stops it
                    new = (-(1 << (-new[0]).bit_length()) if new[0] < 0 else new[0],
                           (1 << new[1].bit_length()) - 1 if new[1] > 0 else new[1])
                if new != old:
                    f.locals[name] = new
                    changed = True
            if not changed:
                return
        raise NotNative(f"function {f.name}: the locals' ranges do not settle")

    def function(self, f: Func) -> list[str]:
        self.classify(f)
        self.bound_locals(f)
        for k, b in f.locals.items():
            if b is None:
                raise NotNative(f"function {f.name}: local {k} is never given a value")
        body: list[str] = []
        if f.kind == "parser":
            body.append("    Py_ssize_t l_pos = 0, l_L = L_buf; int perr = 0; (void)perr; (void)l_L;")
        self.body(f, f.node.body, body, 1)
        if f.kind == "parser" and not body[-1].strip().startswith("*ret = l_pos"):
            raise NotNative("parser: no final `return pos`")
        head = [self.signature(f) + " {", "    int rc = 0; (void)rc;"]
        head += [f"    V l_{k} = 0;" for k in f.locals]
        head += [f"    Ent e_{k};" for k in f.ents]
        head += self.pick_decls(f)
        head += self.ret_decls(f)
        tail = [] if f.kind == "parser" else ["    return 0;"]
        return head + body + tail + ["}", ""]

    def where(self, f: Func, msg: str) -> str:
        """`msg` (``line N: what``) with the block it is in, in the program's terms (an
        action's P4 name), and the generated line itself: one line saying which construct
        keeps the program off the native path, and where."""
        block = f.name
        for a in self.meta["actions"]:
            if a["fn"] == f.name or a["fn"].startswith(f.name + "_"):
                block = f"action {a['name']}"
                break
        m = re.match(r"line (\d+): (.*)", msg, re.S)
        if m is None:
            return f"{block}: {msg.removeprefix(f'function {f.name}: ')}"
        n = int(m.group(1))
        src = self.lines[n - 1].strip() if 0 < n <= len(self.lines) else ""
        src = src if len(src) <= 70 else src[:67] + "..."
        return f"{block}, generated line {n} `{src}`: {m.group(2)}"

    def signature(self, f: Func) -> str:
        if f.kind == "parser":
            return (f"static int f_{f.name}(Proc *P, St *st, const unsigned char *buf, "
                    "Py_ssize_t L_buf, Py_ssize_t *ret)")
        if f.kind == "deparser":
            return f"static int f_{f.name}(Proc *P, St *st, unsigned char *ob, Py_ssize_t *on)"
        ret = ", V *ret" if f.outs else ""
        return (f"static int f_{f.name}(Proc *P, St *st"
                f"{''.join(f', V p_{p}' for p in f.params)}{ret})")

    # -- the module ----------------------------------------------------------------------
    def translate(self, dedupe: bool) -> str:
        """The C source of the module; `dedupe` as `Switch._specialised_process` decides
        (ComputeChecksum and the deparser read headers only)."""
        for need in ("parser", "verify", "ingress", "egress", "compute", "deparser"):
            if need not in self.funcs:
                raise NotNative(f"no function {need}")
        bodies: list[str] = []
        for f in self.funcs.values():
            try:
                bodies += self.function(f)
            except NotNative as e:
                raise NotNative(self.where(f, str(e))) from None
        c = {"NS": self.ns, "NM": self.nm, "NG": len(self.gidx),
             "OBMAX": max(self.funcs["deparser"].emitted, 1)}
        out = [f"/* generated by pyswitch.native from {self.modname}; do not edit */",
               RUNTIME_INCLUDE]
        out += [e.c_support for e in externs.served() if e.c_support]  # their C helpers
        out += [f"#define {k} {v}" for k, v in c.items()]
        out.append("typedef struct { V s[NS]; V m[NM]; PyObject *payload; } St;")
        out.append("typedef struct { PyObject_HEAD PyObject *g[NG > 0 ? NG : 1]; PyObject *rx, *tx, *stats,"
                   " *mcast, *after_ingress, *after_egress, *exit_cls, *keep, *enqueue;"
                   " vectorcallfunc vectorcall; PyObject *gd[NG > 0 ? NG : 1]; Counts *cnt; } Proc;")
        out += [self.signature(f) + ";" for f in self.funcs.values()]
        out += bodies
        regs = [self.gidx[r["var"]] for r in self.meta.get("registers", ())
                if r["var"] in self.gidx]  # the context slots `make` checks are Cells
        out.append(f"#define NREG {len(regs)}")
        out.append(f"static const int REG_G[{max(len(regs), 1)}] = "
                   f"{{{', '.join(map(str, regs or [0]))}}};")
        xts = [i for n, i in self.gidx.items() if n.endswith(".native")]  # exact stores
        out.append(f"#define NXT {len(xts)}")
        out.append(f"static const int XT_G[{max(len(xts), 1)}] = "
                   f"{{{', '.join(map(str, xts or [0]))}}};")
        out.append(self.boxing())
        out.append(PROCESS_C.read_text().replace("@LOOP@", c_source(self.meta, dedupe))
                   .replace("@MOD@", self.modname))
        return "\n".join(out) + "\n"

    def boxing(self) -> str:
        """C that builds the Python state lists ``S``, ``M`` from a C state, for the
        general paths (clones, drops in egress) that stay in Python."""
        mt = self.meta["mtempl"]
        lines = ["static PyObject *box_S(St *st) {", f"    PyObject *S = PyList_New({len(self.hb)});",
                 "    if (!S) return NULL;"]
        for k, hb in enumerate(self.hb):
            off = self.hoff[k]
            lines += [f"    {{ PyObject *h = PyList_New({len(hb)}); if (!h) goto fail;",
                      f"      PyList_SET_ITEM(S, {k}, h);",
                      f"      PyObject *v0 = PyBool_FromLong((long)st->s[{off}]);",
                      "      PyList_SET_ITEM(h, 0, v0);"]
            for j in range(1, len(hb)):
                box = "vb_to_py" if (k, j) in self.hvb else "v_to_py"
                lines += [f"      {{ PyObject *v = {box}(st->s[{off + j}]); if (!v) goto fail;"
                          f" PyList_SET_ITEM(h, {j}, v); }}"]
            lines.append("    }")
        lines += ["    return S;", "fail: Py_DECREF(S); return NULL;", "}",
                  "static PyObject *box_M(St *st) {", f"    PyObject *M = PyList_New({self.nm});",
                  "    if (!M) return NULL;"]
        for j, v in enumerate(mt):
            if j == self.meta["hidden"]["payload"]:
                lines.append(f"    Py_INCREF(st->payload); PyList_SET_ITEM(M, {j}, st->payload);")
            elif v is False:
                lines.append(f"    PyList_SET_ITEM(M, {j}, PyBool_FromLong((long)st->m[{j}]));")
            else:
                box = "vb_to_py" if j in self.mvb else "v_to_py"
                lines.append(f"    {{ PyObject *v = {box}(st->m[{j}]); if (!v) goto fail;"
                             f" PyList_SET_ITEM(M, {j}, v); }}")
        lines += ["    return M;", "fail: Py_DECREF(M); return NULL;", "}"]
        return "\n".join(lines)


RUNTIME_INCLUDE = '#include "runtime.h"'
PROCESS_C = Path(__file__).resolve().parent / "process.c"


