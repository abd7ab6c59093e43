"""Bodies and module items of the intermediate form.

A body is a list of `Line`: a statement at a depth (the compiler's indentation level, 4
spaces each in Python).  A module is a list of items: a `Function` (one generated
function: parser, a block, an action, a table's wrapper), a `StructDecl` (a header's
``struct.Struct``, which the parser's and the deparser's nodes name), a `Helper` (a helper
of the Python back end the functions call: the stack helpers, ``_pack_bits``) or
`ModuleText` (a module-level block still written as text: none in the compiler's output).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from pyswitch.ir.exprs import Expr
from pyswitch.ir.stmts import (
    CopyOutCall,
    EmitRun,
    ExitScope,
    If,
    Line,
    Loop,
    ParserScope,
    Seq,
    Stmt,
)
from pyswitch.ir.values import PyExpr

__all__ = ["Function", "Helper", "Line", "ModuleItem", "ModuleText", "StructDecl", "bodies",
           "expressions", "shift", "unshared", "walk"]


def shift(lines: Sequence[Line], n: int) -> list[Line]:
    """`lines` `n` levels shallower (negative: deeper); a structured statement's bodies
    are counted from its own line and move with it."""
    return [replace(ln, ind=ln.ind - n) for ln in lines]


def unshared(lines: Sequence[Line]) -> tuple[Line, ...]:
    """`lines` with each expression node object in one place only: a node met again (the
    compiler reuses a variable's read node, a value's) is copied, and so are the nodes,
    the expression and the statements holding it; the rest is kept as it is.  A node's
    interval is its value's at the point it is evaluated (`pyswitch.ir.bounds`), which
    tells the places apart by the node's identity."""
    seen: set[int] = set()

    def copy(v: Any) -> Any:
        if isinstance(v, tuple):
            items = tuple(copy(x) for x in v)
            return v if all(a is b for a, b in zip(items, v, strict=True)) else items
        if not is_dataclass(v) or isinstance(v, type):
            return v
        new = {f.name: copy(getattr(v, f.name)) for f in fields(v)}
        node = isinstance(v, Expr)  # type: ignore[arg-type, misc]
        if (node and id(v) in seen) or any(new[k] is not getattr(v, k) for k in new):
            v = replace(v, **new)  # a new object (the same fields)
        if node:
            seen.add(id(v))
        return v

    return tuple(copy(ln) for ln in lines)


def bodies(st: Stmt) -> tuple[tuple[Line, ...], ...]:
    """The bodies statement `st` holds (none for a simple statement)."""
    if isinstance(st, If):
        return (st.then,) if st.else_ is None else (st.then, st.else_)
    if isinstance(st, (ExitScope, ParserScope, Loop)):
        return (st.body,)
    if isinstance(st, CopyOutCall) and st.on_exit is not None:
        return (st.on_exit,)
    return ()


def walk(body: Sequence[Line]) -> Iterator[Stmt]:
    """Every statement of `body`, those inside structured statements (and a `Seq`'s, an
    `EmitRun`'s) too, in order."""
    for ln in body:
        yield ln.stmt
        if isinstance(ln.stmt, Seq):
            yield from ln.stmt.stmts
        if isinstance(ln.stmt, EmitRun):
            yield from ln.stmt.emits
        for b in bodies(ln.stmt):
            yield from walk(b)


def expressions(st: Stmt) -> Iterator[PyExpr]:
    """The expressions statement `st` holds itself (not those of its bodies, nor of the
    statements a `Seq` or an `EmitRun` holds: `walk` yields those)."""
    if isinstance(st, (Seq, EmitRun)):
        return
    for f in fields(st):
        v = getattr(st, f.name)
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, PyExpr):
                yield x


@dataclass(frozen=True)
class Function:
    """``def name(params):`` and its body (each expression node object in one place of
    it: `unshared`).  `cache_reads`: the Python back end may read metadata slots into
    locals in it (`pyswitch.compiler.localcache`, a Python-only optimisation the C back
    end does not need)."""

    name: str
    params: tuple[str, ...]
    body: tuple[Line, ...]
    cache_reads: bool = True


@dataclass(frozen=True)
class ModuleText:
    """A module-level block of Python still written as text (transitional)."""

    text: str


@dataclass(frozen=True)
class StructDecl:
    """A ``struct.Struct`` of big-endian format `fmt` in the module's variable `var`: a
    header's (``_stN``, its fields' items: `pyswitch.ir.stmts.Extract`, `Emit`) or a
    deparser's run of emits (``_sdN``, the formats joined: `EmitRun`)."""

    var: str
    fmt: str


@dataclass(frozen=True)
class Helper:
    """A helper of the Python back end the generated functions call, declared once by
    `name`: ``stacks`` (``_hs_at``, ``_hs_last`` and their ``StackIndexError``: a stack
    element picked at run time outside the checked range, ``hs.last``) or ``pack_bits``
    (``_pack_bits``: a field list with varbits as bytes).  Its source is the Python back
    end's (`pyswitch.ir.pyhelpers`); the native path calls its own C instead."""

    name: str


ModuleItem = Function | StructDecl | Helper | ModuleText
