"""Statements of the intermediate form.

Each statement is a frozen dataclass; `pyswitch.ir.pyprint` prints it as the Python the
compiler has always generated for it, the native path (`pyswitch.native.irlower`) lowers
it to C from its fields.  `PyText` is the transitional statement: one line of Python the
compiler still writes as text (it may open a block: ``if ...:``, ``try:``; the lines after
it at a greater depth are that block).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pyswitch.ir.values import PyExpr


@dataclass(frozen=True)
class PyText:
    """One line of Python, not yet a node of its own (transitional): printed as is; the C
    back end reads it, and the block it opens, with ``ast``."""

    text: str


@dataclass(frozen=True)
class RegRead:
    """``target = reg[index]`` of a ``register<bit<W>>`` of `size` cells.  `guarded`: the
    index is not proven below `size`, and an index out of range gives `default` (BMv2
    reads 0 and logs an error) instead of raising.  `target` is an l-value (a metadata
    slot, a header field, a local or an action parameter); `bounds` the cells' values."""

    reg: str
    index: PyExpr
    size: int
    target: PyExpr
    bounds: tuple[int, int]
    guarded: bool
    default: int = 0


@dataclass(frozen=True)
class RegWrite:
    """``reg[index] = value``; `guarded`: an index not proven below `size` writes
    nothing when out of range (BMv2 ignores it and logs an error)."""

    reg: str
    index: PyExpr
    size: int
    value: PyExpr
    guarded: bool


@dataclass(frozen=True)
class CounterCount:
    """``counter.count(index)`` of an indexed counter of `size` cells: one packet and
    `length` bytes added at `index`; `guarded`: an index not proven below `size` counts
    nothing when out of range (as BMv2)."""

    counter: str
    index: PyExpr
    size: int
    length: PyExpr
    guarded: bool


@dataclass(frozen=True)
class Exit:
    """P4's ``exit`` inside an action function: leaves the action and the blocks that
    called it (``raise _Exit()`` in Python; the return code RC_EXIT or the enclosing exit
    label in C), carrying the values of the action's out/inout parameters `outs` (their
    Python names), which P4 copies out on exit too.  A block's exit (``return``) is still
    `PyText`."""

    outs: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParserError:
    """A parser error `code` (the index of an ``error`` member), raised when `cond` holds
    (None: always): the parser stops and ``parser_error`` is set to the code."""

    code: int
    cond: PyExpr | None = None


@dataclass(frozen=True)
class ActionCall:
    """A direct call of action function `fn` (an action called from a control or from
    another action) with its arguments (the directionless and ``in`` parameters' values),
    when nothing is copied back from it: an ``exit`` inside it leaves the caller too.  The
    calls that copy out/inout parameters back are still `PyText`."""

    fn: str
    args: tuple[PyExpr, ...] = ()


TableKind = Literal["default", "exact", "lookup"]


@dataclass(frozen=True)
class TableApply:
    """``table.apply()``: the entry for `keys` (`kind` ``exact``: a dict look-up of the
    all-exact table's entries, the default action on a miss; ``lookup``: the table's
    general match; ``default``: a keyless table, always its default entry) into the entry
    local `entry`, the table's direct counter counted on a hit with `count` (the
    packet's length; None: no direct counter), then the entry's action called with its
    data.  `table` is the table's variable (meta ``tables[].var``)."""

    table: str
    entry: str
    kind: TableKind
    keys: tuple[PyExpr, ...] = ()
    count: PyExpr | None = None


Stmt = (PyText | RegRead | RegWrite | CounterCount | Exit | ParserError | ActionCall
        | TableApply)
