"""The Python back end's printer: the intermediate form as the generated Python source.

The text is exactly what the compiler wrote before it had an intermediate form
(tests/test_ir.py compares every program of tests/p4 and p4src byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable

from pyswitch.ir.module import Function, Helper, Line, ModuleItem, ModuleText, StructDecl
from pyswitch.ir.pyhelpers import HELPERS
from pyswitch.ir.stmts import (
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
    HeaderAlias,
    HeaderCopy,
    HeaderSet,
    HeaderSwap,
    If,
    Loop,
    ParserEnd,
    ParserError,
    ParserScope,
    ParserStart,
    Pass,
    PyText,
    RegRead,
    RegWrite,
    Return,
    Seq,
    SiblingsInvalid,
    Stmt,
    TableApply,
)

IND = "    "


def stmt_lines(st: Stmt) -> list[tuple[int, str]]:
    """The Python of one statement: (extra depth, text) per line."""
    if isinstance(st, PyText):
        return [(0, st.text)]
    if isinstance(st, RegRead):
        read = f"{st.target.code} = {st.reg}[{st.index.code}]"
        if not st.guarded:
            return [(0, read)]
        # indices are never negative: only too large ones raise IndexError
        return [(0, f"try: {read}"), (0, f"except IndexError: {st.target.code} = {st.default}")]
    if isinstance(st, RegWrite):
        write = f"{st.reg}[{st.index.code}] = {st.value.code}"
        return [(0, f"try: {write}"), (0, "except IndexError: pass")] if st.guarded \
            else [(0, write)]
    if isinstance(st, CounterCount):
        i, c = st.index.code, st.counter
        pre = f"if {i} < {st.size}: " if st.guarded else ""
        return [(0, f"{pre}{c}p[{i}] += 1; {c}b[{i}] += {st.length.code}")]
    if isinstance(st, Exit):
        return [(0, f"raise _Exit(({', '.join(st.outs)},))" if st.outs else "raise _Exit()")]
    if isinstance(st, ParserError):
        code = st.code if isinstance(st.code, int) else st.code.code
        raise_ = f"raise _PErr({code})"
        return [(0, raise_ if st.cond is None else f"if {st.cond.code}: {raise_}")]
    if isinstance(st, ActionCall):
        return [(0, f"{st.fn}(S, M{''.join(', ' + a.code for a in st.args)})")]
    if isinstance(st, TableApply):
        return _table_apply(st)
    if isinstance(st, HeaderCopy):
        return [(0, f"{st.target}[:] = {st.source}")]
    if isinstance(st, HeaderSet):
        vals = "".join(", " + v.code for v in st.values) + (", " if st.listed else "")
        return [(0, f"{st.header}[:] = [{st.valid}{vals}]")]
    if isinstance(st, HeaderSwap):
        return [(0, f"{st.a}[:], {st.b}[:] = {st.b}, {st.a}[:]")]
    if isinstance(st, CopyOutCall):
        return _copy_out_call(st)
    if isinstance(st, Assign):
        return [(0, f"{st.target.code} = {st.value.code}")]
    if isinstance(st, If):
        return _if(st)
    if isinstance(st, Seq):
        return [(0, "; ".join(_one(s) for s in st.stmts))]
    if isinstance(st, HeaderAlias):
        return [(0, f"{st.var} = S[{st.slot}]")]
    if isinstance(st, Loop):
        return [(0, "while True:"), *_nested(st.body)]
    if isinstance(st, (Break, Continue, Pass)):
        return [(0, type(st).__name__.lower())]
    if isinstance(st, Return):
        return [(0, f"return ({', '.join(st.values)},)" if st.values else "return")]
    if isinstance(st, ExitScope):
        return [(0, "try:"), *_nested(st.body), (0, "except _Exit:"), (1, "pass")]
    if isinstance(st, ParserScope):
        return [(0, "try:"), *_nested(st.body), (0, "except _PErr as _e:"),
                (1, f"{st.slot.code} = _e.code")]
    if isinstance(st, ParserStart):
        return [(0, "L = len(buf)"), (0, "pos = 0")]
    if isinstance(st, ParserEnd):
        return [(0, "return pos")]
    if isinstance(st, Extract):
        return _extract(st)
    if isinstance(st, Advance):
        return [(0, f"pos += {st.n.code}")]
    if isinstance(st, Emit):
        return [(0, f"if {st.header}[0]:"), (1, f"out.append({st.struct}.pack({pack_args(st)}))")]
    if isinstance(st, EmitRun):
        valid = " and ".join(f"{e.header}[0]" for e in st.emits)
        args = ", ".join(pack_args(e) for e in st.emits)
        return [(0, f"if {valid}:"), (1, f"out.append({st.struct}.pack({args}))"), (0, "else:"),
                *((1 + e, t) for em in st.emits for e, t in stmt_lines(em))]
    if isinstance(st, EmitVarbit):
        pieces = " + ".join(p.code for p in st.pieces)
        return [(0, f"if {st.header}[0]: out.append({pieces})")]
    if isinstance(st, SiblingsInvalid):
        groups = "".join(f"({''.join(h + ', ' for h in g)}), " for g in st.groups)
        return [(0, f"for _s in ({groups})[{st.index.code}]: _s[0] = False")]
    raise TypeError(f"not an IR statement: {st!r}")


def call_text(st: CopyOutCall) -> str:
    """The call of a `CopyOutCall`, its result assigned: ``_r1 = a0(S, M, x, *data)``."""
    args = "".join(", " + a.code for a in st.args) + (", *data" if st.data else "")
    return f"{st.result + ' = ' if st.result else ''}{st.fn}(S, M{args})"


def _copy_out_call(st: CopyOutCall) -> list[tuple[int, str]]:
    if st.on_exit is None:
        return [(0, call_text(st))]
    out = [(0, "try:"), (1, call_text(st)),
           (0, "except _Exit as _x:" if st.values else "except _Exit:")]
    if st.values and st.result:
        out.append((1, f"{st.result} = _x.args[0]"))
    return out + _nested(st.on_exit)


def _extract(st: Extract) -> list[tuple[int, str]]:
    read = f"{st.struct}.unpack_from(buf, pos)"
    if st.fields is None:
        return [(0, f"{st.header}[1:] = {read}")]
    names = ", ".join(f"a{i}" for i in range(st.items))
    return [(0, f"{names}{',' if st.items == 1 else ''} = {read}"),
            (0, f"{st.header}[1:] = ({', '.join(f.code for f in st.fields)},)")]


def pack_args(st: Emit) -> str:
    """The items an `Emit` packs, as the Python call's arguments."""
    if st.values is None:
        return f"*{st.header}[1:]"
    return ", ".join(v.code for v in st.values)


def _nested(body: tuple[Line, ...]) -> list[tuple[int, str]]:
    """A structured statement's body: its lines at their depths below the statement."""
    return [(ln.ind + extra, text) for ln in body for extra, text in stmt_lines(ln.stmt)]


def _one(st: Stmt) -> str:
    """The one line of a statement printed on one line."""
    (line,) = stmt_lines(st)
    return line[1]


def _if(st: If) -> list[tuple[int, str]]:
    if st.inline:  # each body one statement of one line, after the colon
        (then,) = st.then
        out = [(0, f"if {st.cond.code}: {_one(then.stmt)}")]
        if st.else_ is not None:
            (els,) = st.else_
            out.append((0, f"else: {_one(els.stmt)}"))
        return out
    out = [(0, f"if {st.cond.code}:"), *_nested(st.then)]
    if st.else_ is None:
        return out
    if st.elif_:  # one If, its first line ``elif``; the rest at its own depths
        (inner,) = st.else_
        rest = stmt_lines(inner.stmt)
        return out + [(inner.ind - 1 + rest[0][0], "el" + rest[0][1]),
                      *((inner.ind - 1 + e, t) for e, t in rest[1:])]
    return out + [(0, "else:"), *_nested(st.else_)]


def _table_apply(st: TableApply) -> list[tuple[int, str]]:
    v, t = st.entry, st.table
    keys = [k.code for k in st.keys]
    key = keys[0] if len(keys) == 1 else f"({', '.join(keys)})"
    if st.kind == "default":
        out = [(0, f"{v} = {t}.default")]
    elif st.kind == "exact":  # a dict look-up in place (Table.exact keeps its identity)
        out = [(0, f"{v} = {t}.exact.get({key}) or {t}.default")]
    else:
        out = [(0, f"{v} = {t}.lookup({key})")]
    if st.count is not None:
        out.append((0, f"if {v}.hit: {v}.counter[0] += 1; {v}.counter[1] += {st.count.code}"))
    out.append((0, f"{v}.fn(S, M, *{v}.args)"))
    return out


def body_lines(body: tuple[Line, ...] | list[Line]) -> list[str]:
    """The indented Python lines of a body."""
    out = []
    for ln in body:
        for extra, text in stmt_lines(ln.stmt):
            out.append(IND * (ln.ind + extra) + text)
    return out


def function_lines(fn: Function) -> list[str]:
    """``def ...:`` and the body's lines."""
    return [f"def {fn.name}({', '.join(fn.params)}):", *body_lines(fn.body)]


def item_text(it: ModuleItem) -> str:
    """One module item as Python (no back-end pass applied)."""
    if isinstance(it, StructDecl):
        return f"{it.var} = _struct.Struct({it.fmt!r})"
    if isinstance(it, Helper):
        return HELPERS[it.name]
    return it.text if isinstance(it, ModuleText) else "\n".join(function_lines(it))


def module_text(items: list[ModuleItem],
                cache_reads: Callable[[Function], list[str]] | None = None) -> str:
    """The generated module: its items, a blank line apart; `cache_reads` (the Python
    back end's pass over one function's IR giving its lines, `pyswitch.ir.localcache`)
    applied to each function that allows it."""
    parts = []
    for it in items:
        if not isinstance(it, Function):
            parts.append(item_text(it))
        else:
            use = cache_reads is not None and it.cache_reads
            parts.append("\n".join(cache_reads(it) if use else function_lines(it)))  # type: ignore[misc]
    return "\n\n".join(parts) + "\n"
