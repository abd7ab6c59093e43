"""Statements of the intermediate form.

Each statement is a frozen dataclass; `pyswitch.ir.pyprint` prints it as the Python the
compiler has always generated for it, the native path lowers it to C from its fields (the
simple nodes in `pyswitch.native.irlower`, the others in `pyswitch.native.cgen` and its
mixins).  `PyText` is the transitional statement: one line of Python the compiler still
writes as text (none is left in the compiler's output; the native path takes none).  The
structured statements (`If`, `Loop`, `ExitScope`, `ParserScope`, and a `CopyOutCall`'s
handler) hold their bodies: each a tuple of `Line`, depths counted from the node's own
line (a body's first level is 1).  Whole headers are copied, set and swapped by nodes of
their own (`HeaderCopy`, `HeaderSet`, `HeaderSwap`).  The parser's cursor (`ParserStart`, `Extract`,
`Advance`, `ParserEnd`) and the deparser's output (`Emit`, `EmitRun`) are nodes too: their
Python reads and writes the packet with a header's ``struct.Struct`` (a module-level
``_stN``, `pyswitch.ir.module.StructDecl`, named by the node); a varbit header's extract is
a `HeaderSet` of the values read, its emit an `EmitVarbit`; a union stack's siblings made
invalid a `SiblingsInvalid`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pyswitch.ir.values import PyExpr


@dataclass(frozen=True)
class PyText:
    """One line of Python, not yet a node of its own (transitional): printed as is; the C
    back end takes none (a function holding one stays on the Python path)."""

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
    """A parser error `code` (the index of an ``error`` member, or an expression whose
    value it is at run time: ``verify`` with an error not constant), raised when `cond`
    holds (None: always): the parser stops and ``parser_error`` is set to the code."""

    code: int | PyExpr
    cond: PyExpr | None = None


@dataclass(frozen=True)
class ActionCall:
    """A direct call of action function `fn` (an action called from a control or from
    another action) with its arguments (the directionless and ``in`` parameters' values),
    when nothing is copied back from it: an ``exit`` inside it leaves the caller too.  The
    calls that copy parameters back are `CopyOutCall`s."""

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


@dataclass(frozen=True)
class Assign:
    """``target = value``: `target` an l-value the compiler writes as one expression (a
    metadata slot ``M[j]``, a header field ``hN[j]``, a local, an action parameter; or the
    local ``_hsN`` naming a stack element picked at run time), never a tuple or a slice."""

    target: PyExpr
    value: PyExpr


@dataclass(frozen=True)
class HeaderCopy:
    """Header `target` assigned header `source` of its type whole (their Python lists:
    ``hN``, or ``_hsN`` naming a stack element picked at run time), the validity and
    every field: ``hA[:] = hB``.  BMv2 copies the fields of a valid header only: the
    compiler puts the copy in an `If` on the source's validity."""

    target: str
    source: str


@dataclass(frozen=True)
class HeaderSet:
    """Header `header` (``hN``, ``_hsN``) made valid or not (`valid`) with a value for
    each of its fields, `values`: ``h3[:] = [True, 0, 0]`` (`setValid`'s zeros, a list
    expression assigned, a lookahead into a header, a header reset, a varbit header's
    extract).  `listed`: a list expression of no values assigned to a header without
    fields, printed ``h4[:] = [True, ]`` (the same list)."""

    header: str
    valid: bool
    values: tuple[PyExpr, ...]
    listed: bool = False


@dataclass(frozen=True)
class HeaderSwap:
    """Headers `a` and `b` of one type exchange their cells (a stack's ``push_front`` and
    ``pop_front`` moving its elements): ``a[:], b[:] = b, a[:]``."""

    a: str
    b: str


@dataclass(frozen=True)
class CopyOutCall:
    """A direct call of action function `fn` whose parameters are copied back after it:
    `result`, the local its out/inout scalars come back in (``_rN = fn(S, M, ...)``, read
    as ``_rN[i]``; None: it returns none, its header, struct or stack ones are copied
    from their storage).  `data`: a table's wrapper calling its action, the entry's
    action data after the arguments (``*data``).  `on_exit`: what an ``exit`` inside the
    call runs before it leaves the caller too -- the copy-out and the caller's exit
    (``try:`` the call ``except _Exit:`` the body; None: no handler, an exit passes
    through); `values`: the handler takes the exit's values (``except _Exit as _x:``,
    and ``_rN = _x.args[0]`` first when there is a `result`).  The copy-out after the
    call is the statements that follow it."""

    fn: str
    args: tuple[PyExpr, ...] = ()
    result: str | None = None
    data: bool = False
    on_exit: Body | None = None
    values: bool = False


@dataclass(frozen=True)
class If:
    """``if cond:`` `then` (``else:`` `else_`).  `elif_`: `else_` is one `If`, printed as
    ``elif`` (a parser's ``select``, a ``switch``); `inline`: each body is one statement of
    one line, printed after its colon (``if c: x = 1``, ``else: ...`` on the next line).
    The syntax tree is the same."""

    cond: PyExpr
    then: Body
    else_: Body | None = None
    elif_: bool = False
    inline: bool = False


@dataclass(frozen=True)
class ExitScope:
    """A block's body (a control's apply): an ``exit`` in an action it calls ends it
    (``try: ... except _Exit: pass`` in Python; a label after the body in C)."""

    body: Body


@dataclass(frozen=True)
class ParserScope:
    """The parser's states: a parser error inside ends them and sets `slot` (the
    ``parser_error`` metadata slot) to its code (``try: ... except _PErr as _e:`` in
    Python; a label and ``perr`` in C)."""

    body: Body
    slot: PyExpr


@dataclass(frozen=True)
class Seq:
    """Simple statements run in order, printed on one line (``a = 1; b = 2``): two
    metadata slots set together (``mark_to_drop``, a clone's), a union's siblings made
    invalid.  Each is a statement of one line without a body (an `Assign`, a jump)."""

    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class HeaderAlias:
    """``var = S[slot]``: the local `var` names header instance `slot` (its Python list,
    validity first) for the rest of the function."""

    var: str
    slot: int


@dataclass(frozen=True)
class Loop:
    """``while True:`` `body`: left by a `Break` (or a `Return`, an exception); a
    function's early returns, an instantiated control's, a ``for`` loop, a looping
    parser."""

    body: Body


@dataclass(frozen=True)
class Break:
    """``break``: leaves the innermost `Loop`."""


@dataclass(frozen=True)
class Continue:
    """``continue``: the innermost `Loop`'s next turn."""


@dataclass(frozen=True)
class Pass:
    """``pass``: an empty body."""


@dataclass(frozen=True)
class Return:
    """``return`` from the function: a block's ``exit`` and an action's ``return``; with
    `values` (the out/inout parameters' Python names) an action's, printed
    ``return (a, b,)``, which the caller copies out."""

    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParserStart:
    """The parser's start: the packet's length ``L = len(buf)`` and the cursor ``pos = 0``
    at its first byte (two lines in Python)."""


@dataclass(frozen=True)
class ParserEnd:
    """The parser's end, ``return pos``: the bytes it consumed (the payload follows)."""


@dataclass(frozen=True)
class Extract:
    """The fields of header `header` (its Python list: ``hN``, or ``_hsN`` naming a stack
    element picked at run time) read at the cursor with struct `struct` (the module's
    ``_stN``, `size` bytes, `items` big-endian items).  `fields`: each field's value over
    the items ``a0, a1, ...`` (a field cut out of an item, or items joined), printed
    ``a0, a1 = _stN.unpack_from(buf, pos)`` and ``hN[1:] = (f1, f2,)``; None when the
    items are the fields: ``hN[1:] = _stN.unpack_from(buf, pos)``.  The length check
    before it (a `ParserError`), the validity and the cursor's `Advance` after it are
    nodes of their own."""

    header: str
    struct: str
    size: int
    items: int
    fields: tuple[PyExpr, ...] | None = None


@dataclass(frozen=True)
class Advance:
    """``pos += n``: the cursor moved `n` bytes (an extract's size, a varbit header's
    length, ``advance``)."""

    n: PyExpr


@dataclass(frozen=True)
class Emit:
    """``emit`` of header `header` (``hN``; ``_hsN`` a stack element picked at run time):
    when it is valid, its fields packed with struct `struct` (the module's ``_stN``) onto
    the output, ``if hN[0]:`` / ``out.append(_stN.pack(v1, v2))``.  `values`: the pack's
    items over the fields (fields joined, or cut into items); None when the fields are the
    items: ``*hN[1:]``."""

    header: str
    struct: str
    values: tuple[PyExpr, ...] | None = None


@dataclass(frozen=True)
class EmitRun:
    """Consecutive `Emit`s of headers `emits` (two or more), with a fast path: when every
    header is valid, one struct `struct` (the module's ``_sdN``, the formats joined) packs
    them all at once; otherwise each `Emit` as it is (``if h0[0] and h1[0]:`` /
    ``out.append(_sdN.pack(...))`` / ``else:`` and the emits)."""

    struct: str
    emits: tuple[Emit, ...]


@dataclass(frozen=True)
class EmitVarbit:
    """``emit`` of header `header` with a varbit field (``hN``): when it is valid, its
    bytes onto the output, `pieces` in order (each a `ToBytes` of fixed fields joined,
    or the varbit's `VbBytes` at its length): ``if hN[0]: out.append(p1 + p2 + ...)``."""

    header: str
    pieces: tuple[PyExpr, ...]


@dataclass(frozen=True)
class SiblingsInvalid:
    """A union stack's element extracted at its next index `index` (a union's member):
    the other members of that element made invalid.  `groups`: for each element of the
    stack, those other members' header locals: ``for _s in ((h6, ), (h8, ), )[i]: _s[0] =
    False``."""

    groups: tuple[tuple[str, ...], ...]
    index: PyExpr


@dataclass(frozen=True)
class Line:
    """Statement `stmt` at depth `ind` (depth 1 is a function's body, or a structured
    statement's body)."""

    ind: int
    stmt: Stmt

    @classmethod
    def from_python(cls, s: str) -> Line:
        """The `Line` whose Python is the indented text `s` (4 spaces a level): the
        inverse of printing a `PyText` line."""
        body = s.lstrip(" ")
        ind = (len(s) - len(body)) // 4
        return cls(ind, PyText(s[4 * ind:]))


Body = tuple[Line, ...]

Stmt = (PyText | RegRead | RegWrite | CounterCount | Exit | ParserError | ActionCall
        | TableApply | Assign | If | ExitScope | ParserScope | HeaderAlias | Loop | Break
        | Continue | Pass | Return | Seq | ParserStart | ParserEnd | Extract | Advance | Emit
        | EmitRun | HeaderCopy | HeaderSet | HeaderSwap | CopyOutCall | EmitVarbit
        | SiblingsInvalid)
