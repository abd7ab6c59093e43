"""Metadata slots read into locals: the Python back end's pass over a function's IR.

What it does is `pyswitch.compiler.localcache`'s (its docstring has the rule): within a run
of consecutive Python statements of one block that neither writes slot ``k`` nor lets
``M`` out (an action's call, a table's action), with at least `MIN_READS` reads of
``M[k]``, starting and ending on lines of their own, ``_mk = M[k]`` is read once before the
run and ``_mk`` is read in it.  Here the facts come from the nodes' fields instead of the
printed text: which slots a statement reads (its expressions' `Slot` nodes, a digest's
payload), which it writes (an `Assign`'s, a `RegRead`'s target, the parser's error slot),
whether it lets ``M`` out (`ActionCall`, `CopyOutCall`, `TableApply`'s action); and the
change is made on the nodes (each `Slot` read in a run becomes the `Local` ``_mk``, an
`Assign` ``_mk = M[k]`` is put before the run's first line), then printed.

The generated Python is the text pass's byte for byte, so the pass sees a node as the
Python statements it prints (`_units`): a `TableApply` is three (the look-up, the direct
counter's ``if``, the action's call, which lets ``M`` out: a run may end after the
look-up), a `Seq` one per statement on one line, a guarded register access a ``try``
whose body shares its line, a `CopyOutCall` with a handler a ``try`` whose handler's body
is searched for runs (its call lets ``M`` out).  The order in which several locals are loaded before one
statement is the text pass's too: the order Python's `ast.walk` (breadth first) meets
each slot's first read (`_bfs` walks the nodes in the shape of their printed syntax
tree).

A function is left to the text pass (`fallback`, `pyswitch.compiler.localcache`) where it
still holds Python text: a `PyText` line, an expression without a node or with an
`Opaque` operand (none is left in the 41 programs and l2_switch, nor in p4c's samples), or
a kind of node or statement this pass does not know yet (a new one is seen here as the
Python it prints before the pass takes it: `needs_text`).  Two runs it meets are left to
the text pass too (`_Shared`): one that starts at a `CopyOutCall` handler's ``_rN =
_x.args[0]`` (a line of the node, no `Line` a load can go before), one through a digest
whose payload is the run's slot (its ``M[k]`` is printed from an int, no `Slot` node to
replace).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace

from pyswitch.ir.exprs import (
    ActionRun,
    All,
    AnyOf,
    Bin,
    BufRead,
    Call,
    Concat,
    Cond,
    Digest,
    Elem,
    Elems,
    Expr,
    Field,
    Hit,
    Lit,
    Local,
    Neg,
    Not,
    Paren,
    Pick,
    Range,
    SCmp,
    SignExt,
    Slot,
    SShr,
    Str,
    ToBytes,
    VbBytes,
    VbDigest,
    VbRead,
    VbValue,
    Wrap,
    opaque,
    operands,
    text,
)
from pyswitch.ir.module import Function, Line, walk
from pyswitch.ir.pyprint import function_lines, stmt_lines
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
from pyswitch.ir.values import PyExpr

__all__ = ["MIN_READS", "cache_reads", "needs_text"]

MIN_READS = 3
_LOCAL = re.compile(r"_m\d+$")


@dataclass
class _V:
    """A node of the printed syntax tree that is none of ours (a subscript's, a call's,
    a mask's ``&``): only its place in the breadth-first order matters."""

    kids: list = field(default_factory=list)


@dataclass
class _W:
    """``M[k]`` written (an assignment's target): no read."""

    slot: int


@dataclass
class _Unit:
    """One Python statement a node prints: its tree (`kids`), the lines it spans (`lo`,
    `hi`, the function's line numbers), whether it starts (`head`) and ends (`tail`) its
    lines, the bodies the pass looks into (those on lines of their own)."""

    kids: list
    lo: int
    hi: int
    head: bool = True
    tail: bool = True
    bodies: list[list[_Unit]] = field(default_factory=list)
    reads: Counter[int] = field(default_factory=Counter)
    written: set[int] = field(default_factory=set)
    escapes: bool = False


def _ekids(n: Expr) -> list:  # noqa: C901 - one case per kind
    """The children of node `n` in the syntax tree of its printed Python: intermediate
    nodes as `_V`."""
    if isinstance(n, (Bin, Cond, Range, All, AnyOf, Not)):
        return list(operands(n))
    if isinstance(n, Wrap):
        return [_V([n.a, n.b])]
    if isinstance(n, Neg):
        return [_V([n.a])]
    if isinstance(n, SignExt):
        return [_V([_V([n.a])])]
    if isinstance(n, SCmp):
        return [_V([n.a]), _V([n.b])]
    if isinstance(n, Concat):
        return [_V([n.a]), n.b]
    if isinstance(n, Call):
        return list(n.args)
    if isinstance(n, Digest):
        return _digest(n)
    return _ekids_more(n)


def _ekids_more(n: Expr) -> list:
    if isinstance(n, Pick):  # (h1, h2, )[i]: the tuple, then the index
        return [_V(), n.index]
    if isinstance(n, BufRead):  # int.from_bytes(buf[s:s + n], 'big'): the start twice
        return [_V([_V([n.start, _V([n.start])])])]
    if isinstance(n, SShr):  # (((a ^ sb) - sb >> b) & mask)
        return [_V([_V([_V([n.a])]), n.b])]
    if isinstance(n, VbValue):  # (a[1] if a else 0): the test, then the subscript
        return [n.a, _V([n.a])]
    if isinstance(n, VbDigest):  # _algo(_pack_bits(((w, x), (v or (0, 0)), )) [+ M[k]])
        data: object = _V([_V([_V([x]) for x in n.items])])
        if n.payload is not None:
            data = _V([data, Slot(n.payload)])
        return [data]
    return _ekids_varbit(n)


def _ekids_varbit(n: Expr) -> list:
    if isinstance(n, VbRead):  # (n, int.from_bytes(buf[s:s + n // 8], 'big'))
        return [n.n, _V([_V([_V([n.start, _V([n.start, _V([n.n])])])])])]
    if isinstance(n, ToBytes):  # a.to_bytes(n, 'big'): the call's attribute's value
        return [_V([n.a])]
    if isinstance(n, VbBytes):  # (a[1].to_bytes(a[0] // 8, 'big') if a else b'')
        return [n.a, _V([_V([_V([n.a])]), _V([_V([n.a])])])]
    return []  # a leaf: Lit, Slot, Field, Local, Elem, Hit, ActionRun, Elems, Str


def _chain(parts: list) -> object:
    """The tree of a left-folded chain ``p0 op p1 op p2`` (none: the constant 0)."""
    if not parts:
        return _V()
    return parts[0] if len(parts) == 1 else _V([_chain(parts[:-1]), parts[-1]])


def _kids_of(x: object) -> list:
    return _ekids(x) if not isinstance(x, (_V, _Unit, _W)) else (  # type: ignore[arg-type]
        x.kids if isinstance(x, (_V, _Unit)) else [])


def _digest(d: Digest) -> list:
    if d.as_int and d.algo == "csum16":
        nb = d.nbytes
        parts = [_V([x]) if s % 16 else x
                 for x, s in zip(d.items, d.shifts((nb + nb % 2) * 8), strict=True)]
        return [_chain(parts)]  # _csum16i(sum)
    parts = [_V([x]) if s else x for x, s in zip(d.items, d.shifts(d.nbytes * 8), strict=True)]
    packed = _chain(parts)
    if d.as_int:
        return [packed]  # packed & 0xff..
    data = _V([_V([packed])])  # packed.to_bytes(n, 'big')
    if d.payload is not None:
        data = _V([data, Slot(d.payload)])
    return [data]


def _bfs(kids: list) -> Iterator[object]:
    """Every node below a statement, breadth first (as `ast.walk`)."""
    todo = list(kids)
    i = 0
    while i < len(todo):
        x = todo[i]
        i += 1
        while isinstance(x, Paren):  # the same node of the tree as its operand
            x = x.a
        yield x
        todo.extend(_kids_of(x))


def _e(p: PyExpr | None) -> list:
    return [] if p is None else [p.node]


def _target(p: PyExpr) -> object:
    n = p.node
    while isinstance(n, Paren):
        n = n.a
    return _W(n.index) if isinstance(n, Slot) else _V()


class _Layout:
    """The units of a body, with the function's line numbers as `pyprint` prints it."""

    def __init__(self) -> None:
        self.line = 1  # line 0 is ``def ...:``
        self.where: dict[int, set[int]] = {}  # id(Line) -> its first lines
        self.expr_line: dict[int, set[int]] = {}  # id(PyExpr) -> the lines it is printed on

    def body(self, body: tuple[Line, ...]) -> list[_Unit]:
        out: list[_Unit] = []
        for ln in body:
            self.where.setdefault(id(ln), set()).add(self.line)
            out += self.stmt(ln.stmt)
        return out

    def at(self, p: PyExpr | None, line: int) -> list:
        if p is not None:
            self.expr_line.setdefault(id(p), set()).add(line)
        return _e(p)

    def stmt(self, st: Stmt) -> list[_Unit]:  # noqa: C901, PLR0911, PLR0912 - one case per kind
        lo = self.line
        if isinstance(st, If) and not st.inline:
            kids = self.at(st.cond, lo)
            self.line += 1
            then = self.body(st.then)
            els: list[_Unit] = []
            if st.else_ is not None:
                if not st.elif_:
                    self.line += 1  # else:
                els = self.body(st.else_)
                if st.elif_ and els:  # ``elif``: nothing may go before it
                    els[0].head = False
            return [_Unit(kids + then + els, lo, self.line - 1,
                          bodies=[then] + ([els] if st.else_ is not None else []))]
        if isinstance(st, Loop):
            self.line += 1
            b = self.body(st.body)
            return [_Unit(list(b), lo, self.line - 1, bodies=[b])]
        if isinstance(st, (ExitScope, ParserScope)):
            self.line += 1
            b = self.body(st.body)
            self.line += 1  # except ...:
            h = self.line
            self.line += 1
            if isinstance(st, ExitScope):
                hu = _Unit([], h, h)  # pass
            else:
                self.at(st.slot, h)
                hu = _Unit([_target(st.slot)], h, h)  # M[j] = _e.code
            return [_Unit([*b, _V([hu])], lo, h, bodies=[b, [hu]])]
        if isinstance(st, Seq):
            us = []
            for s in st.stmts:
                us += self.stmt(s)
                self.line = lo
            self.line = lo + 1
            return [replace(u, head=i == 0, tail=i == len(us) - 1) for i, u in enumerate(us)]
        if isinstance(st, CopyOutCall) and st.on_exit is not None:
            return self.copy_out_call(st, lo)
        if isinstance(st, EmitRun):
            args = [x for em in st.emits for x in (em.values or ())]
            for x in args:
                self.at(x, lo + 1)
            app = _Unit([_V([_V([x.node for x in args])])], lo + 1, lo + 1)
            self.line = lo + 3
            emits = []
            for em in st.emits:
                emits += self.stmt(em)
            return [_Unit([app, *emits], lo, self.line - 1, bodies=[[app], emits])]
        n = len(stmt_lines(st))
        self.line += n
        return self.simple(st, lo, n)

    def copy_out_call(self, st: CopyOutCall, lo: int) -> list[_Unit]:
        """``try:`` / the call (it lets ``M`` out) / ``except _Exit ...:`` / the handler:
        ``_rN = _x.args[0]`` (a line no load may go before) and its body."""
        call = _Unit([_V([self.at(x, lo + 1)[0] for x in st.args])], lo + 1, lo + 1,
                     escapes=True)
        self.line = lo + 3
        hs: list[_Unit] = []
        if st.values and st.result:
            hs.append(_Unit([], self.line, self.line))
            self.line += 1
        hs += self.body(st.on_exit or ())
        return [_Unit([call, _V(list(hs))], lo, self.line - 1, bodies=[[call], hs])]

    def simple(self, st: Stmt, lo: int, n: int) -> list[_Unit]:  # noqa: C901, PLR0911
        one = lo + n - 1
        if isinstance(st, If):  # inline: `if c: s` (`else: s`); its bodies share lines
            kids = self.at(st.cond, lo)
            for b, line in ((st.then, lo), (st.else_ or (), lo + 1)):
                for ln in b:
                    self.where.setdefault(id(ln), set()).add(-1)  # nothing goes before it
                    save, self.line = self.line, line
                    kids += self.stmt(ln.stmt)
                    self.line = save
            return [_Unit(kids, lo, one)]
        if isinstance(st, RegRead):
            a = _Unit([_target(st.target), _V(self.at(st.index, lo))], lo, lo)
            if not st.guarded:
                return [a]
            return [_Unit([a, _V([_Unit([_target(st.target)], one, one)])], lo, one)]
        if isinstance(st, RegWrite):
            a = _Unit([_V(self.at(st.index, lo)), *self.at(st.value, lo)], lo, lo)
            return [_Unit([a, _V()], lo, one) if st.guarded else a]
        if isinstance(st, CounterCount):
            i, ln = self.at(st.index, lo), self.at(st.length, lo)
            p, b = _Unit([_V(i)], lo, lo), _Unit([_V(i), *ln], lo, lo)
            if st.guarded:
                return [_Unit([_V(i), p, b], lo, lo)]
            return [replace(p, tail=False), replace(b, head=False)]
        if isinstance(st, ParserError):
            code = self.at(st.code, lo) if isinstance(st.code, PyExpr) else []
            r = _Unit([_V(code)], lo, lo)
            return [r] if st.cond is None else [_Unit([*self.at(st.cond, lo), r], lo, lo)]
        if isinstance(st, (ActionCall, CopyOutCall)):  # a call without a handler
            return [_Unit([_V([self.at(x, lo)[0] for x in st.args])], lo, lo, escapes=True)]
        if isinstance(st, HeaderSet):  # h[:] = [valid, v1, ...]
            return [_Unit([_V([self.at(x, lo)[0] for x in st.values])], lo, lo)]
        if isinstance(st, TableApply):
            keys = [self.at(k, lo)[0] for k in st.keys]
            key = keys[0] if len(keys) == 1 else _V(keys)
            look = _Unit([_V([_V([key])])] if st.kind == "exact" else
                         [_V([key])] if st.kind == "lookup" else [], lo, lo)
            out = [look]
            if st.count is not None:
                out.append(_Unit([_Unit([], lo + 1, lo + 1),
                                  _Unit(self.at(st.count, lo + 1), lo + 1, lo + 1)],
                                 lo + 1, lo + 1))
            return [*out, _Unit([], one, one, escapes=True)]
        if isinstance(st, Assign):
            return [_Unit([_target(st.target), *self.at(st.value, lo)], lo, lo)]
        if isinstance(st, Advance):
            return [_Unit(self.at(st.n, lo), lo, lo)]
        if isinstance(st, Extract):
            if st.fields is None:
                return [_Unit([], lo, lo)]
            items = [self.at(x, lo + 1)[0] for x in st.fields]
            return [_Unit([], lo, lo), _Unit([_V(items)], lo + 1, lo + 1)]
        if isinstance(st, Emit):
            items = [self.at(x, lo + 1)[0] for x in st.values or ()]
            app = _Unit([_V([_V(items)])], lo + 1, lo + 1)
            return [_Unit([app], lo, one, bodies=[[app]])]
        if isinstance(st, ParserStart):
            return [_Unit([], lo, lo), _Unit([], lo + 1, lo + 1)]
        if isinstance(st, EmitVarbit):  # if hN[0]: out.append(p1 + p2 + ...) (one line)
            pieces = _chain([self.at(x, lo)[0] for x in st.pieces])
            return [_Unit([_V(), _Unit([_V([_V(), pieces])], lo, lo)], lo, lo)]
        if isinstance(st, SiblingsInvalid):  # for _s in (groups, )[i]: _s[0] = False
            return [_Unit([_V(), _V([_V(), *self.at(st.index, lo)]),
                           _Unit([_V(), _V()], lo, lo)], lo, lo)]
        if isinstance(st, _NO_READS):
            return [_Unit([], lo, one)]
        raise _Shared  # a statement this pass does not know: the text pass


def _facts(u: _Unit) -> None:
    """`u`'s reads (in `ast.walk`'s order), writes and escape, its nested statements'
    included."""
    u.reads, u.written = Counter(), set()
    for x in _bfs(u.kids):
        if isinstance(x, Slot):
            u.reads[x.index] += 1
        elif isinstance(x, _W):
            u.written.add(x.slot)
        elif isinstance(x, _Unit):
            u.escapes |= x.escapes


def _all_units(us: list[_Unit]) -> list[_Unit]:
    """Every unit of `us` and every statement nested in them, each once."""
    seen: set[int] = set()
    out: list[_Unit] = []
    todo = list(us)
    while todo:
        u = todo.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        out.append(u)
        todo += [x for x in _bfs(u.kids) if isinstance(x, _Unit)]
    return out


def _runs(body: list[_Unit], out: list[tuple[int, list[_Unit]]]) -> None:
    """(slot, run) for every slot and maximal run of `body` where it may be cached (the
    text pass's `_runs`, over units)."""
    slots: set[int] = set()
    for u in body:
        slots |= set(u.reads)
    for k in slots:
        cur: list[_Unit] = []
        for u in [*body, None]:
            if u is not None and not u.escapes and k not in u.written:
                cur.append(u)
                continue
            if sum(s.reads[k] for s in cur) >= MIN_READS:
                out.append((k, cur))
            cur = []
    for u in body:
        if u.escapes or u.written:
            for b in u.bodies:
                _runs(b, out)


def needs_text(fn: Function) -> bool:
    """Whether `fn` still holds Python text the pass cannot see into (module docstring)."""
    for st in walk(fn.body):
        if isinstance(st, PyText) or not isinstance(st, _STMTS):
            return True
        for f in fields(st):
            v = getattr(st, f.name)
            for x in v if isinstance(v, tuple) else (v,):
                if isinstance(x, PyExpr) and (x.node is None or _unseen(x.node)
                                              or opaque(x.node) or x.code != text(x.node)):
                    return True
    return False


_KINDS = (Lit, Slot, Field, Local, Elem, Paren, Bin, Wrap, Neg, Not, Cond, SignExt, SCmp,
          Concat, All, AnyOf, Range, Hit, ActionRun, Call, Digest, Pick, BufRead, SShr, VbValue,
          VbDigest, Elems, Str, VbRead, ToBytes, VbBytes)
_NO_READS = (HeaderAlias, HeaderCopy, HeaderSwap, Exit, Return, ParserEnd, Break, Continue, Pass)
_STMTS = (*_NO_READS, RegRead, RegWrite, CounterCount, ParserError, ActionCall, CopyOutCall,
          TableApply, Assign, HeaderSet, If, Loop, ExitScope, ParserScope, Seq, ParserStart,
          Extract, Advance, Emit, EmitRun, EmitVarbit, SiblingsInvalid)


def _unseen(n: Expr) -> bool:
    """Whether `n` holds a kind of node this pass does not know."""
    return not isinstance(n, _KINDS) or any(_unseen(x) for x in operands(n))


def _payloads(n: Expr) -> set[int]:
    """The slots of the payloads `n`'s digests read (``M[k]``, printed from an int field:
    no `Slot` node to replace)."""
    out = {n.payload} if isinstance(n, (Digest, VbDigest)) and n.payload is not None else set()
    for x in operands(n):
        out |= _payloads(x)
    return out


def _names(fn: Function) -> Iterator[str]:
    """The names `fn` uses (a name the pass would introduce must be free)."""
    yield from fn.params
    for st in walk(fn.body):
        for f in fields(st):
            v = getattr(st, f.name)
            for x in v if isinstance(v, tuple) else (v,):
                if isinstance(x, str):
                    yield x
                elif isinstance(x, tuple):  # a `SiblingsInvalid`'s groups of header locals
                    yield from (h for h in x if isinstance(h, str))
                elif isinstance(x, PyExpr) and x.node is not None:
                    yield from _expr_names(x.node)


def _expr_names(n: Expr) -> Iterator[str]:
    if isinstance(n, Str):
        return  # a string constant, no name (as the text pass sees it)
    for f in fields(n):
        v = getattr(n, f.name)
        if isinstance(v, str):
            yield v
    for x in operands(n):
        yield from _expr_names(x)


def _subst(n: Expr, ks: set[int]) -> Expr:
    """`n` with each read of a slot in `ks` the local ``_mk``."""
    if isinstance(n, Slot) and n.index in ks:
        return Local(f"_m{n.index}", n.width)
    ch = {}
    for f in fields(n):
        v = getattr(n, f.name)
        if isinstance(v, tuple) and v and hasattr(v[0], "__dataclass_fields__"):
            ch[f.name] = tuple(_subst(x, ks) for x in v)
        elif not isinstance(v, (int, str, bool, tuple, type(None))):
            ch[f.name] = _subst(v, ks)
    return replace(n, **ch) if ch else n


class _Shared(Exception):
    """A node printed on two lines that the runs treat differently (an `EmitRun`'s items,
    printed on its fast path and by its emits), or a statement the pass does not know:
    left to the text pass."""


class _Rewrite:
    """The function with the chosen runs applied: reads replaced on the lines `repl`
    gives, loads put before the lines `ins` gives."""

    def __init__(self, lay: _Layout, repl: dict[int, set[int]], ins: dict[int, list[int]]):
        self.lay, self.repl, self.ins = lay, repl, ins

    def expr(self, p: PyExpr) -> PyExpr:
        kss = {frozenset(self.repl.get(line, ())) for line in self.lay.expr_line.get(id(p), ())}
        if len(kss) > 1:
            raise _Shared
        ks = set(next(iter(kss))) if kss else set()
        if not ks or p.node is None:
            return p
        if ks & _payloads(p.node):
            raise _Shared  # a payload's read in a run: the text pass replaces it
        n = _subst(p.node, ks)
        return p if n is p.node else PyExpr(text(n), p.width, n)

    def body(self, body: tuple[Line, ...]) -> tuple[Line, ...]:
        out: list[Line] = []
        for ln in body:
            starts = self.lay.where[id(ln)]
            loads = [self.ins.get(line, []) for line in starts]
            if len(starts) > 1 and any(loads):
                raise _Shared
            for k in loads[0]:
                out.append(Line(ln.ind, Assign(PyExpr.of(Local(f"_m{k}")),
                                               PyExpr.of(Slot(k)))))
            out.append(replace(ln, stmt=self.stmt(ln.stmt)))
        return tuple(out)

    def stmt(self, st: Stmt) -> Stmt:
        ch: dict[str, object] = {}
        for f in fields(st):
            v = getattr(st, f.name)
            if isinstance(v, PyExpr):
                ch[f.name] = self.expr(v)
            elif isinstance(v, tuple) and v and isinstance(v[0], PyExpr):
                ch[f.name] = tuple(self.expr(x) for x in v)
            elif isinstance(v, tuple) and v and isinstance(v[0], Line):
                ch[f.name] = self.body(v)
            elif isinstance(v, tuple) and v and hasattr(v[0], "__dataclass_fields__"):  # Seq, EmitRun
                ch[f.name] = tuple(self.stmt(x) for x in v)
        return replace(st, **ch) if ch else st


def cache_reads(fn: Function, fallback: Callable[[list[str]], list[str]]) -> list[str]:
    """The lines of `fn` (``def ...:`` and its body) with the qualifying metadata reads
    taken from locals (module docstring); `fallback` (the text pass) where the function
    still holds text."""
    if needs_text(fn):
        return fallback(function_lines(fn))
    if "M" not in fn.params or any(_LOCAL.match(x) for x in _names(fn)):
        return function_lines(fn)
    lay = _Layout()
    try:
        units = lay.body(fn.body)
    except _Shared:
        return fallback(function_lines(fn))
    for u in _all_units(units):
        _facts(u)
    found: list[tuple[int, list[_Unit]]] = []
    _runs(units, found)
    starts = {line for lines in lay.where.values() for line in lines}
    ins: dict[int, list[int]] = {}
    repl: dict[int, set[int]] = {}
    for k, run in found:
        lo, hi = run[0].lo, run[-1].hi
        if not run[0].head or not run[-1].tail:
            continue  # the run shares its first or last line with code outside it
        if any(k in repl.get(i, ()) for i in range(lo, hi + 1)):
            continue
        if lo not in starts:  # not the first line of a node's: left to the text pass
            return fallback(function_lines(fn))
        ins.setdefault(lo, []).append(k)
        for i in range(lo, hi + 1):
            repl.setdefault(i, set()).add(k)
    if not ins:
        return function_lines(fn)
    try:
        new = replace(fn, body=_Rewrite(lay, repl, ins).body(fn.body))
    except _Shared:
        return fallback(function_lines(fn))
    return function_lines(new)
