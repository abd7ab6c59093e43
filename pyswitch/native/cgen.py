"""Lower a program's intermediate form (`pyswitch.ir`, pyswitch.compiler's output) to C.

Every statement of the IR is lowered from its node, one method per kind (`STMTS`): the
simple nodes -- register reads and writes, counters' counts, exits, parser errors,
direct action calls, table applies (the exact store's ``xt_lookup``, runtime.h's exact.h;
the others' ``tab_lookup``) -- in `pyswitch.native.irlower`; assignments, ``if``, loops,
returns, the blocks' and the parser's scopes here; the parser's and deparser's nodes (the
cursor, the headers' struct reads and writes) and whole headers' copies, sets and swaps in
`pyswitch.native.headers`; stack elements picked at run time in `pyswitch.native.picks`,
the calls that copy out an action's out/inout parameters in `pyswitch.native.copyout`,
varbits as ``(nbits, value)`` pairs in `pyswitch.native.varbits`; the expressions from
their nodes (`pyswitch.native.exprs`).  The passes before (the names a function
assigns) are `pyswitch.native.passes`; every interval is the IR's (`pyswitch.ir.bounds`).
Nothing of the Python back end's output is read but the line numbers of its print, which
the messages give (`pyswitch.native.lines`).  One C function per function, so that both paths have one
semantics: the compiler's.  The packet loop around those functions (``process``: the
after-ingress and after-egress decisions, the copies) is lowered from its one
description, `pyswitch.native.loop.LOOP`, as the Python path's specialised ``process`` is.

Values are ``__int128``; each expression is proven to stay within 126 bits first, with
the IR's intervals (pyswitch.native.exprs), and each store within its target's range.
Anything outside what is lowered, or not proven, raises :class:`NotNative` with the line:
the switch then runs the Python path, which is always there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from pyswitch import externs
from pyswitch.ir import (
    ActionCall,
    Advance,
    Assign,
    Break,
    Continue,
    CopyOutCall,
    CounterCount,
    Emit,
    EmitRun,
    EmitVarbit,
    Exit,
    ExitScope,
    Extract,
    Function,
    HeaderAlias,
    HeaderCopy,
    HeaderSet,
    HeaderSwap,
    If,
    Line,
    Loop,
    ModuleItem,
    ParserEnd,
    ParserError,
    ParserScope,
    ParserStart,
    Pass,
    RegRead,
    RegWrite,
    Return,
    Seq,
    SiblingsInvalid,
    Stmt,
    TableApply,
    walk,
)
from pyswitch.ir.bounds import program_bounds
from pyswitch.ir.exprs import Bin, Expr, Lit, Local, text
from pyswitch.native.copyout import CopyOut
from pyswitch.native.exprs import Expressions, Func, NotNative, X
from pyswitch.native.headers import Headers
from pyswitch.native.irlower import IRLower
from pyswitch.native.lines import Listing, body_start, handler_start
from pyswitch.native.loop import c_source
from pyswitch.native.passes import Passes
from pyswitch.native.picks import Picks
from pyswitch.native.varbits import Varbits, vb_hi
from pyswitch.tables import table_kind

__all__ = ["NotNative", "Unit"]

_FMT = {"B": 1, "H": 2, "I": 4, "Q": 8}
IND = "    "


class Unit(Headers, IRLower, CopyOut, Picks, Varbits, Passes, Expressions):
    """One program (its IR, `Program.ir`, and meta): `translate()` returns the C source of
    its extension module."""

    STMTS: dict[type, Callable[..., None]] = {}

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
        self.varbit_slots(meta)  # their C range in hb, mb: pyswitch.native.varbits
        self.objs = externs.objects()  # registers, counters: their IR statements (c_node)
        self.regs = {k: b for e in self.objs
                     for k, b in e.c_values(meta.get(e.meta_key, [])).items()}
        self.tables = {t["var"]: t for t in meta["tables"]}
        self.actions = {a["fn"]: a for a in meta["actions"]}
        self.gidx: dict[str, int] = {}
        self.structs: dict[str, list[tuple[str, int]]] = {}
        self.funcs: dict[str, Func] = {}
        self.irb = program_bounds(ir, meta)  # the nodes' proven intervals: the only ones
        self.listing = Listing(ir)  # the printed lines, for the messages
        self.lines = self.listing.shown
        for line, decl in self.listing.structs:  # the module's `StructDecl`s
            self.structs[decl.var] = self._fmt(decl.fmt, line)
        other = dict((id(it), line) for line, it in self.listing.other)
        for it in ir:  # (the helpers, `Helper`: the C calls its own)
            if isinstance(it, Function):
                self._declare(it)
            elif id(it) in other:
                raise NotNative(f"line {other[id(it)]}: module-level text")

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

    def _declare(self, fn: Function) -> None:
        line = self.listing.defs[fn.name]
        stars = [p for p in fn.params if p.startswith("*")]
        names = [p for p in fn.params if not p.startswith("*")]
        star = stars == ["*data"] and fn.params[-1] == "*data"  # a table's wrapper
        if (stars and not star) or not all(p.isidentifier() for p in names):
            raise NotNative(f"line {line}: signature of {fn.name}")
        if star:
            if names != ["S", "M"]:
                raise NotNative(f"line {line}: signature of {fn.name}")
            names += self.data_params(fn, line)
        if fn.name == "parser" and names == ["S", "M", "buf"]:
            kind = "parser"
        elif fn.name == "deparser" and names == ["S", "M", "out"]:
            kind = "deparser"
        elif names[:2] == ["S", "M"]:
            kind = "block"
        else:
            raise NotNative(f"line {line}: signature of {fn.name}")
        f = Func(fn.name, fn, names[2:] if kind == "block" else [], kind)
        f.line = line
        f.irb = self.irb.get(fn.name)
        f.returns = any(isinstance(st, ParserEnd) or (isinstance(st, Return) and st.values)
                        for st in walk(fn.body))
        f.star = star
        if kind == "block":  # an action returning its out/inout parameters: copyout
            f.outs = self.out_names(fn, line + 1) or []
            f.returns = f.returns and not f.outs
        self.funcs[fn.name] = f

    def g(self, name: str) -> str:
        """The context slot of a global Python object (register list, table, ...)."""
        if name not in self.gidx:
            self.gidx[name] = len(self.gidx)
        return f"P->g[{self.gidx[name]}]"

    # -- statements ------------------------------------------------------------------
    def body(self, f: Func, lines: tuple[Line, ...], at: int, o: list[str], d: int) -> None:
        """The statements of `lines`, the first on line `at`, at depth `d`."""
        for ln in lines:
            self.stmt(f, ln.stmt, at, o, d)
            at += self.listing.span(ln.stmt)

    def stmt(self, f: Func, st: Stmt, at: int, o: list[str], d: int) -> None:
        """Statement `st`, on line `at`, by its kind (`STMTS`)."""
        f.ln = self.ln = at
        lower = self.STMTS.get(type(st))
        if lower is None:
            raise NotNative(f"line {at}: statement {type(st).__name__}")
        lower(self, f, st, at, o, d)

    def on_rc(self, f: Func, call: str, d: int) -> str:
        """Run `call` (an int-returning C call); unwind on an exception or an exit."""
        ind = IND * d
        tgt = f"goto {f.exit_label[-1]};" if f.exit_label else "return RC_EXIT;"
        return (f"{ind}if ((rc = {call}) != 0) {{ if (rc < 0) return RC_ERR; {tgt} }}")

    def store(self, f: Func, t: Expr, v: X, o: list[str], d: int) -> None:
        """`v` into l-value `t` (a slot, a field, a local, a parameter), within its range:
        the IR's interval of the target's node (its declared range, `Bounds.of`), a
        varbit slot's C range (`native.varbits.vb_hi`)."""
        ind = IND * d
        s = self.slot(f, t)
        if s is not None:
            w = self.vb_width(f, t)
            rng = (0, vb_hi(w)) if w else self.iv(f, t)
            if rng is None or v.lo < rng[0] or v.hi > rng[1]:
                raise NotNative(f"line {f.ln}: a value outside its slot's range")
            o.append(f"{ind}{s} = {v.c};")
            return
        if isinstance(t, Local) and t.name in f.locals:
            o.append(f"{ind}l_{t.name} = {v.c};")
            return
        if isinstance(t, Local) and t.name in f.params:
            lo, hi = self.param_bounds(f, t.name)
            if v.lo < lo or v.hi > hi:
                raise NotNative(f"line {f.ln}: a value outside its parameter's range")
            o.append(f"{ind}p_{t.name} = {v.c};")
            return
        raise NotNative(f"line {f.ln}: assignment to {text(t)[:40]!r}")

    def assign(self, f: Func, t: Expr, v: Expr, o: list[str], d: int) -> None:
        """``t = v``: a local naming a header or a stack element, the parser's cursor, or
        a value stored."""
        if isinstance(t, Local):
            x = t.name
            if x in f.aliases:
                return
            if x in f.picks:
                return self.pick(f, x, v, o, d)
            if x in f.rets:
                raise NotNative(f"line {f.ln}: call of {f.rets[x]}")
            if f.kind == "parser" and x == "L":
                return
            if f.kind == "parser" and x == "pos":
                o.append(f"{IND * d}l_pos = (Py_ssize_t){self.ex(f, v).c};")
                return
        self.store(f, t, self.val(f, t, v, o, d), o, d)

    def branch(self, f: Func, test: str, then: Callable[[], None],
               else_: Callable[[], None] | None, o: list[str], d: int) -> None:
        """``if (test) { then } else { else_ }``."""
        ind = IND * d
        o.append(f"{ind}if ({test}) {{")
        then()
        if else_ is not None:
            o.append(f"{ind}}} else {{")
            else_()
        o.append(f"{ind}}}")

    def _assign(self, f: Func, st: Assign, at: int, o: list[str], d: int) -> None:
        self.assign(f, self.node_of(st.target), self.node_of(st.value), o, d)

    def _alias(self, f: Func, st: HeaderAlias, at: int, o: list[str], d: int) -> None:
        """``var = S[slot]``: the local names the header (`classify`), no C."""

    def _pass(self, f: Func, st: Pass, at: int, o: list[str], d: int) -> None:
        """``pass``: no C."""

    def _jump(self, f: Func, st: Break | Continue, at: int, o: list[str], d: int) -> None:
        o.append(f"{IND * d}{'break' if isinstance(st, Break) else 'continue'};")

    def _return(self, f: Func, st: Return, at: int, o: list[str], d: int) -> None:
        if f.kind == "parser":
            raise NotNative(f"line {at}: parser return")
        if not st.values:
            o.append(f"{IND * d}return 0;")
        elif f.outs:
            self.return_outs(f, list(st.values), o, d, "0")
        else:
            raise NotNative(f"line {at}: return of a value")

    def _seq(self, f: Func, st: Seq, at: int, o: list[str], d: int) -> None:
        for s in st.stmts:
            self.stmt(f, s, at, o, d)

    def _if(self, f: Func, st: If, at: int, o: list[str], d: int) -> None:
        lst = self.listing
        els = st.else_
        self.branch(f, self.cond(f, self.node_of(st.cond)),
                    lambda: self.body(f, st.then, body_start(lst, st, at, 0), o, d + 1),
                    (lambda: self.body(f, els, body_start(lst, st, at, 1), o, d + 1))
                    if els else None, o, d)

    def _loop(self, f: Func, st: Loop, at: int, o: list[str], d: int) -> None:
        ind = IND * d
        o.append(f"{ind}for (;;) {{")
        f.loops += 1
        self.body(f, st.body, at + 1, o, d + 1)
        f.loops -= 1
        o.append(f"{ind}}}")

    def exit_scope(self, f: Func, run: Callable[[], None], o: list[str], d: int) -> None:
        """What `run` writes, an exit inside it jumping to the label after it."""
        f.nlabel += 1
        lab = f"exit_{f.nlabel}"
        f.exit_label.append(lab)
        run()
        f.exit_label.pop()
        o.append(f"{IND * d}{lab}: ;")

    def _exit_scope(self, f: Func, st: ExitScope, at: int, o: list[str], d: int) -> None:
        self.exit_scope(f, lambda: self.body(f, st.body, at + 1, o, d), o, d)

    def _parser_scope(self, f: Func, st: ParserScope, at: int, o: list[str], d: int) -> None:
        ind = IND * d
        if f.kind != "parser":
            raise NotNative(f"line {at}: try ... except _PErr")
        f.nlabel += 1
        lab, done = f"perr_{f.nlabel}", f"perr_done_{f.nlabel}"
        f.perr_label.append(lab)
        self.body(f, st.body, at + 1, o, d)
        f.perr_label.pop()
        o.append(f"{ind}goto {done};")
        o.append(f"{ind}{lab}: ;")
        f.ln = handler_start(self.listing, st, at) + 1
        self.store(f, self.node_of(st.slot), X("(V)perr", 0, 1 << 16), o, d)
        o.append(f"{ind}{done}: ;")

    def _parser_start(self, f: Func, st: ParserStart, at: int, o: list[str], d: int) -> None:
        """``L = len(buf)``, ``pos = 0``: the cursor at the packet's first byte."""
        if f.kind != "parser":
            raise NotNative(f"line {at}: call of len")
        f.ln = at + 1
        o.append(f"{IND * d}l_pos = (Py_ssize_t){self.ex(f, Lit(0)).c};")

    def _parser_end(self, f: Func, st: ParserEnd, at: int, o: list[str], d: int) -> None:
        if f.kind != "parser":
            raise NotNative(f"line {at}: return of a value")
        o.append(f"{IND * d}*ret = l_pos; return 0;")

    def _advance(self, f: Func, st: Advance, at: int, o: list[str], d: int) -> None:
        n = self.node_of(st.n)
        if f.kind == "parser":
            o.append(f"{IND * d}l_pos += (Py_ssize_t){self.ex(f, n).c};")
            return
        pos = Bin("+", Local("pos"), n)  # ``pos += n`` outside the parser: a sum stored
        self.store(f, pos.a, self.ex(f, pos), o, d)

    def _simple(self, f: Func, st: Stmt, at: int, o: list[str], d: int) -> None:
        self.ir_stmt(f, st, at, o, d)

    def exact(self, var: str) -> bool:
        """Whether table `var` is all-exact: its entries are looked up in C memory."""
        return table_kind(self.tables[var]["keys"]) == "exact"

    # -- functions ---------------------------------------------------------------------
    def function(self, f: Func) -> list[str]:
        self.classify(f)
        body: list[str] = []
        if f.kind == "parser":
            body.append("    Py_ssize_t l_pos = 0, l_L = L_buf; int perr = 0; (void)perr; (void)l_L;")
        self.body(f, f.node.body, f.line + 1, body, 1)
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


Unit.STMTS = {
    Assign: Unit._assign, HeaderAlias: Unit._alias, Pass: Unit._pass, Break: Unit._jump,
    Continue: Unit._jump, Return: Unit._return, Seq: Unit._seq, If: Unit._if,
    Loop: Unit._loop, ExitScope: Unit._exit_scope, ParserScope: Unit._parser_scope,
    ParserStart: Unit._parser_start, ParserEnd: Unit._parser_end, Advance: Unit._advance,
    Extract: Unit.extract, HeaderCopy: Unit.header_copy, HeaderSet: Unit.header_set,
    HeaderSwap: Unit.headers_swap, Emit: Unit.emit_stmt, EmitRun: Unit.emit_run,
    EmitVarbit: Unit.emit_varbit, SiblingsInvalid: Unit.siblings_invalid,
    CopyOutCall: Unit.copy_out_call, RegRead: Unit._simple, RegWrite: Unit._simple,
    CounterCount: Unit._simple, Exit: Unit._simple, ParserError: Unit._simple,
    ActionCall: Unit._simple, TableApply: Unit._simple,
}
RUNTIME_INCLUDE = '#include "runtime.h"'
PROCESS_C = Path(__file__).resolve().parent / "process.c"


