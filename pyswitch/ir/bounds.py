"""Proven bounds of the expression nodes: an interval [lo, hi] each node's value lies in.

One algorithm, abstract interpretation over intervals.  A value is an integer (a bool is
0 or 1; a ``bit<W>`` or ``int<W>`` is kept as its W-bit two's complement pattern, in
[0, 2**W - 1], as the generated code stores every value normalised to its type).  Each
node's interval is computed from its operands' (`Bounds.of`):

=================  ===============================================================
node               interval
=================  ===============================================================
``Lit`` v          [v, v]
``Slot``, ``Field`` the slot's (``meta["mbounds"]``, ``meta["hbounds"]`` through the
                   function's header aliases; a header's field 0 is its valid bit,
                   [0, 1]) met with the width's [0, 2**W - 1]
``Local``          its interval in the state it is read in (below); none when only
                   text assigns it; a parameter
                   its type's (``meta["fbounds"]``); the parser's ``pos``, ``L``: [0, 2**40]
                   (a packet is shorter than 2**40 bytes, as the C back end assumes)
``Elem`` ``_rN[i]`` the callee's out parameter i's (``_rN = a0(...)``, a `CopyOutCall`;
                   `out_bounds`) met with its width's
``Opaque``         its width's (an operand still text)
``Bin`` + - *      [a+c, b+d], [a-d, b-c], the corners' min and max
``Bin`` & (>= 0)   [0, min(b, d)] (one side >= 0: [0, its hi])
``Bin`` | ^ (>= 0) [0, 2**k - 1], k the bits of max(b, d) (``|``: lo max(a, c))
``Bin`` >>, b >= 0 the corners' min and max (floor: monotone in a, toward 0 or -1
                   in b);  ``%`` by c > 0: [0, d - 1] (x >= 0: [0, min(b, d - 1)])
comparisons, ``and``/``or``, ``Not``, ``SCmp``, ``All``, ``AnyOf``, ``Range``, ``Hit``: [0, 1]
``Wrap`` op, W     r = a op b as above (``<<``: the corners' shifts); r mod 2**W when
                   r lies within one multiple of 2**W (r's two ends have the same
                   ``// 2**W``), else [0, 2**W - 1]; ``Neg`` likewise with r = -a
``SignExt`` s->W   a's interval when below the sign bit 2**(s-1); shifted by
                   2**W - 2**s when at or above it; else [a.lo, a.hi + 2**W - 2**s]
``Concat`` a, b    [(a.lo << wb) + b.lo, (a.hi << wb) + b.hi] (b within wb bits)
``Cond`` c, a, b   the union of a's and b's
``Call``           ``_shl``, ``_sat_s``: [0, 2**W - 1]; ``min``/``max``: of the ends;
                   ``_hmod`` h, m: [0, h.hi]; ``_random`` lo, hi: [lo.lo, max(lo.hi, hi.hi)];
                   another extern's helper: its extern's (`Extern.bounds`); else none
``Digest``         crc32: [0, 2**32 - 1]; crc16, csum16: [0, 2**16 - 1]; identity:
                   [0, min(2**64 - 1, sum of each item's hi at its shift)]
``ActionRun``      [0, 2**20] (an entry's action index, as the C runtime holds it)
``BufRead`` s, n   [0, 2**(8n) - 1] (n bytes big-endian) met with the width's
``SShr`` a, b, W   ``(a as int<W>) >> b`` as W unsigned bits, for a within [0, 2**W - 1]
                   and b >= 0 (a shift by W or more is the sign's, as by W): a's part
                   below the sign bit 2**(W-1) gives [lo >> b.hi, hi >> b.lo]; its part
                   at or above it is the negative s = a - 2**W, monotone in s and
                   rising to -1 with b: [(s.lo >> b.lo) + 2**W, (s.hi >> b.hi) + 2**W];
                   the hull of the two (an operand without one: [0, 2**W - 1])
``VbDigest``       as ``Digest``'s algorithm: crc32 [0, 2**32 - 1]; crc16, csum16
                   [0, 2**16 - 1]; identity [0, 2**64 - 1] (its result is masked so)
``VbValue`` a      [0, 2**W - 1], W the varbit's maximum width (``meta["varbits"]``: a
                   header field's through the function's aliases, of a picked element's
                   the largest over the elements, a metadata slot's); none without one
``Pick``, ``Call`` none: a header (a list of cells), no number: ``(h1, h2, )[i]``,
 ``_hs_at``,       ``_hs_at(...)``, ``_hs_last(...)``; the fields read through the local
 ``_hs_last``      ``_hsN`` it is assigned to are the hull of the elements' fields
                   (below)
``Elems``, ``Str`` none: no values (a tuple of headers, a string: the stack helpers'
                   arguments)
=================  ===============================================================

A field of a stack element picked at run time (``_hsN[i]``, ``_hsN`` a local every
assignment of which is a ``Pick``, an ``_hs_at`` or an ``_hs_last`` of elements the
function aliases) lies in the hull of field i's interval over the elements; with 0 too
when an ``_hs_at`` may give its scratch header of zeros (its field count >= 0: an index
outside the stack, read as an invalid header of zeros).

A node whose operand has no interval (an ``Opaque`` operand of unknown width) has none
(None).  Every interval with a width is met with [0, 2**W - 1] only where the node's
value is the type's pattern by construction (a read of a slot, a field, a parameter, an
operand still text, a wrapped or masked result); elsewhere it is what the operators
prove.

The locals of a function (`function_bounds`) are bounded flow-sensitively, by abstract
interpretation over its statements (`pyswitch.ir.flow`).  A state maps each local to an
interval, to None (not proven) or to nothing (bottom: no value reaches that point yet);
a whole state is None where no run reaches (after a jump).  The join of two states, where
paths meet, is local by local the hull of the two intervals (a local without a value in
one state has the other's; None absorbs).  The function starts from the empty state (a
local has no value before its first assignment: Python raises on reading it).  Each
statement maps the state s before it to the state after it, its own expressions
evaluated in s (the assignments' targets after):

==========================  ==========================================================
statement                   state after
==========================  ==========================================================
``Assign`` x = v            s with x: v's interval in s met with W(x) (below); a
                            target still text: x not proven
``RegRead`` into x          x: the register cells' bounds (its default too when
                            guarded) met with W(x)
``Extract`` (items)         ``a0, a1, ...``: their struct item's [0, 2**(8n) - 1]
                            (the fields over them evaluated after)
``If``                      the join of its two bodies' ends (no ``else``: s)
``Loop``                    the join of the states at its ``Break``s; its body runs
                            from the head's state, the least fixed point of head =
                            s join the body's end join its ``Continue``s, by Kleene
                            iteration from s (below)
``ExitScope``,              the join of its body's end and of the state before every
``ParserScope``             statement inside it (any of them may jump to the label:
                            an ``exit`` in an action it calls, a parser error raised
                            by a stack helper)
``CopyOutCall``, handler    s joined with the handler's end (the handler runs from s)
``Break``, ``Continue``     None (s goes to the loop's exit, its head)
``Return``, ``Exit``,       None (s goes to the caller, or to a label: above)
``ParserEnd``, a
``ParserError`` always
any other                   s (a call or a header's statement assigns no local here)
==========================  ==========================================================

A loop's head is iterated with its body walked from the head of the round before; a bound
still growing after 8 rounds is widened to the next power of two (a loop counter stops
at a mask); after 40 rounds a local still moving is not proven.  A node's interval
(`Bounds.of`) is the join of its intervals in the states it is evaluated in; a node is one
place of its function (the IR holds each node object once, `pyswitch.ir.module.unshared`),
so it is its interval there (over every turn of the loops around it).  A node read where a
local in it has no value is not run there; one never run (after a jump), or not of the
function, is bounded with W.

W, each local's whole-function interval, is the flow-insensitive bound: the union of the
intervals of the values assigned to it anywhere in the function (the same statements),
computed by Kleene iteration from the empty interval, each round re-evaluating every
assignment with the intervals of the round before (widened and given up as above).  It is
sound on its own; every state is met with it, so that no widening leaves a local looser
than it.  A local assigned a value still text has no W; nor has one a `PyText` line of the
function may assign (a name before an ``=`` of the line, after a ``for`` or an ``as``: the
transitional text is not parsed here), and a function still holding text is bounded with
W only (its text's jumps are not seen).

`Bounds.steps` gives the intervals of the values a node's evaluation computes that are no
node of their own (a `Wrap`'s operation before its mask, ...), by the same rules.  The C
back end (`pyswitch.native`) takes every interval it needs from here and has none of its
own (`tests/test_ir_bounds.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

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
    Opaque,
    Paren,
    Pick,
    Range,
    SCmp,
    SignExt,
    Slot,
    SShr,
    VbDigest,
    VbRead,
    VbValue,
    Wrap,
    operands,
)
from pyswitch.ir.flow import ROUNDS, WIDEN_AFTER, Flow, Iv, join_iv, meet_iv, widen_iv
from pyswitch.ir.module import Function, ModuleItem, ModuleText, StructDecl, walk
from pyswitch.ir.stmts import (
    Assign,
    CopyOutCall,
    Exit,
    Extract,
    HeaderAlias,
    PyText,
    RegRead,
    Return,
)

__all__ = ["Bounds", "Iv", "PACKET_MAX", "arith", "function_bounds", "out_bounds",
           "param_bounds", "picked", "program_bounds", "struct_items", "width_iv"]

PACKET_MAX = 1 << 40
_BOOL: Iv = (0, 1)
_CMP = {"==", "!=", "<", ">", "<=", ">=", "and", "or"}


def width_iv(w: int | None) -> Iv | None:
    """[0, 2**w - 1], or None without a width."""
    return None if w is None else (0, (1 << w) - 1)


def _join(a: Iv | None, b: Iv) -> Iv:
    return b if a is None else (min(a[0], b[0]), max(a[1], b[1]))


def _wrap(r: Iv, w: int) -> Iv:
    """Interval `r` taken modulo 2**w (exact when r lies within one multiple of 2**w)."""
    m = 1 << w
    if r[0] // m == r[1] // m:
        return (r[0] % m, r[1] % m)
    return (0, m - 1)


def arith(op: str, a: Iv, b: Iv) -> Iv | None:
    """``a op b`` over the integers (None: an operator not bounded here)."""
    if op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        ps = [x * y for x in a for y in b]
        return (min(ps), max(ps))
    if op == "<<" and b[0] >= 0 and b[1] <= 1024:
        ps = [x << y for x in a for y in b]
        return (min(ps), max(ps))
    if op == ">>" and b[0] >= 0:  # floor division by 2**b: monotone in a, toward -1 or 0
        ps = [x >> y for x in a for y in b]
        return (min(ps), max(ps))
    if op == "&" and (a[0] >= 0 or b[0] >= 0):
        if a[0] >= 0 and b[0] >= 0:
            return (0, min(a[1], b[1]))
        return (0, a[1] if a[0] >= 0 else b[1])
    if op in ("|", "^") and a[0] >= 0 and b[0] >= 0:
        top = (1 << max(a[1], b[1]).bit_length()) - 1
        return (max(a[0], b[0]) if op == "|" else 0, top)
    if op == "%" and b[0] > 0:  # Python's: within [0, d - 1] whatever a's sign
        return (0, min(a[1], b[1] - 1) if a[0] >= 0 else b[1] - 1)
    if op == "//" and b[0] > 0:
        qs = [x // y for x in a for y in b]
        return (min(qs), max(qs))
    return None


_DIGEST_BITS = {"crc32": 32, "crc16": 16, "csum16": 16}
_STACK_HELPERS = ("_hs_at", "_hs_last")


def picked(v: Expr | None) -> tuple[tuple[str, ...], bool] | None:
    """The element headers a stack element picked at run time may be (`v` a `Pick`, an
    ``_hs_at`` or ``_hs_last`` call on `Elems`) and whether it may be ``_hs_at``'s scratch
    header of zeros (its field count >= 0); None: `v` picks no element."""
    if isinstance(v, Pick):
        return v.elems, False
    if isinstance(v, Call) and v.fn in _STACK_HELPERS and v.args and isinstance(v.args[0], Elems):
        if v.fn == "_hs_last":
            return v.args[0].elems, False
        nf = v.args[3] if len(v.args) > 3 else None
        return v.args[0].elems, not (isinstance(nf, Lit) and int(nf.value) < 0)
    return None


@dataclass
class Bounds:
    """The intervals of one function's expression nodes: `mbounds` and `hbounds` (the
    program's ``meta``), `aliases` (header local -> header slot), `locals` (name ->
    interval: the whole-function intervals W; a state's, `pyswitch.ir.flow`), `flow`
    (each node of the function -> its interval at its place), `params` (a parameter's
    interval: its type's, ``meta["fbounds"]``), `parser` (the parser's ``pos`` and
    ``L`` are locals),
    `picks` (a local naming a stack element picked at run time -> the elements' header
    locals, and whether it may be the scratch header of zeros: `picked`), `varbits` (the
    program's ``meta["varbits"]``: each varbit's maximum width), `elems` (a local a
    `CopyOutCall` assigns its callee's out values to -> each out parameter's interval,
    its type's: `out_bounds`)."""

    mbounds: Sequence[Iv | None] = ()
    hbounds: Sequence[Sequence[Iv | None]] = ()
    aliases: dict[str, int] = field(default_factory=dict)
    locals: dict[str, Iv | None] = field(default_factory=dict)
    params: dict[str, Iv] = field(default_factory=dict)
    parser: bool = False
    picks: dict[str, tuple[tuple[str, ...], bool]] = field(default_factory=dict)
    varbits: dict = field(default_factory=dict)
    elems: dict[str, Sequence[Iv | None]] = field(default_factory=dict)
    flow: dict[int, tuple[Expr, Iv | None]] = field(default_factory=dict, repr=False)
    _memo: dict[int, tuple[Expr, Iv | None]] = field(default_factory=dict, repr=False)

    def of(self, n: Expr) -> Iv | None:
        """Node `n`'s interval (None: not proven, an operand of unknown range in it): at
        the points of the function it is evaluated at (`flow`), else with `locals`."""
        hit = self.flow.get(id(n))
        if hit is not None and hit[0] is n:
            return hit[1]
        hit = self._memo.get(id(n))
        if hit is not None and hit[0] is n:
            return hit[1]
        b = self._of(n)
        self._memo[id(n)] = (n, b)
        return b

    def _leaf(self, n: Expr) -> Iv | None:  # noqa: C901 - one case per kind of read
        if isinstance(n, Lit):
            return (int(n.value), int(n.value))
        if isinstance(n, Slot):
            mb = self.mbounds[n.index] if 0 <= n.index < len(self.mbounds) else None
            return meet_iv(mb, width_iv(n.width))
        if isinstance(n, Field):
            if n.index == 0:
                return _BOOL  # the valid bit
            if n.header in self.picks:
                return self._picked_field(n)
            k = self.aliases.get(n.header)
            hb = self.hbounds[k] if k is not None and 0 <= k < len(self.hbounds) else ()
            return meet_iv(hb[n.index] if n.index < len(hb) else None, width_iv(n.width))
        if isinstance(n, Local):
            if n.name in self.params:
                return self.params[n.name]
            if self.parser and n.name in ("pos", "L"):  # moved by `Advance` too
                return (0, PACKET_MAX)
            if n.name in self.locals:
                return self.locals[n.name]
            return None  # assigned in text only (`PyText`): not proven here
        if isinstance(n, Elem):
            outs = self.elems.get(n.name, ())
            iv = outs[n.index] if 0 <= n.index < len(outs) else None
            return meet_iv(iv, width_iv(n.width))
        if isinstance(n, Opaque):
            return width_iv(n.width)
        if isinstance(n, ActionRun):
            return (0, 1 << 20)
        if isinstance(n, (Hit, Not, SCmp, All, AnyOf, Range)):
            return _BOOL
        return None  # a kind not known here, or no value (`Elems`, `Str`): no interval

    def _picked_field(self, n: Field) -> Iv | None:
        """Field `n` of a picked element: the hull of that field over the elements (and 0
        when the pick may be the scratch header of zeros)."""
        elems, zeros = self.picks[n.header]
        out: Iv | None = (0, 0) if zeros else None
        for h in elems:
            if h not in self.aliases:
                return width_iv(n.width)  # an element not aliased here: the width's
            b = self._leaf(Field(h, n.index, n.width))
            if b is None:
                return None  # a varbit
            out = _join(out, b)
        return out

    def _of(self, n: Expr) -> Iv | None:  # noqa: C901, PLR0911 - one case per kind
        if isinstance(n, Paren):
            return self.of(n.a)
        if isinstance(n, (Bin, Wrap)):
            a, b = self.of(n.a), self.of(n.b)
            if isinstance(n, Bin) and n.op in _CMP:
                return _BOOL
            if a is None or b is None:
                return width_iv(n.width) if isinstance(n, Wrap) else None
            r = arith(n.op, a, b)
            if isinstance(n, Wrap):
                return width_iv(n.width) if r is None else _wrap(r, n.width)
            return r
        if isinstance(n, Neg):
            a = self.of(n.a)
            return width_iv(n.width) if a is None else _wrap((-a[1], -a[0]), n.width)
        if isinstance(n, Cond):
            self.of(n.c)
            a, b = self.of(n.a), self.of(n.b)
            return None if a is None or b is None else _join(a, b)
        if isinstance(n, SignExt):
            return self._signext(n)
        if isinstance(n, Concat):
            a, b = self.of(n.a), self.of(n.b)
            if a is None or b is None or a[0] < 0 or b[0] < 0 or b[1] >> n.wb:
                return width_iv(n.width)
            return ((a[0] << n.wb) + b[0], (a[1] << n.wb) + b[1])
        if isinstance(n, Call):
            return self._call(n)
        if isinstance(n, Digest):
            return self._digest(n)
        if isinstance(n, BufRead):
            self.of(n.start)
            return meet_iv((0, (1 << (8 * n.n)) - 1), width_iv(n.width))
        if isinstance(n, SShr):
            return self._sshr(n)
        if isinstance(n, VbDigest):
            for x in n.items:
                self.of(x)
            return width_iv(_DIGEST_BITS.get(n.algo, 64 if n.algo == "identity" else None))
        if isinstance(n, Pick):
            self.of(n.index)
            return None  # a header, no number
        if isinstance(n, VbValue):
            self.of(n.a)
            return width_iv(self._varbit_width(n.a))
        for x in (n.items if isinstance(n, (All, AnyOf)) else
                  (n.lo, n.a, n.hi) if isinstance(n, Range) else
                  (n.a, n.b) if isinstance(n, SCmp) else (n.a,) if isinstance(n, Not) else ()):
            self.of(x)  # each operand gets its own interval
        return self._leaf(n)

    def _signext(self, n: SignExt) -> Iv:
        a, full = self.of(n.a), width_iv(n.width)
        sb, up = 1 << (n.src - 1), (1 << n.width) - (1 << n.src)
        if a is None or a[0] < 0 or a[1] >= 2 * sb or n.width < n.src:
            return full  # type: ignore[return-value]
        if a[1] < sb:
            return a
        if a[0] >= sb:
            return (a[0] + up, a[1] + up)
        return (a[0], a[1] + up)

    def _varbit_width(self, a: Expr) -> int | None:
        """The maximum width of the varbit cell `a` is (None: not known here)."""
        while isinstance(a, Paren):
            a = a.a
        vb = self.varbits or {}
        if isinstance(a, Slot):
            return {j: w for j, w in vb.get("m", ())}.get(a.index)
        if not isinstance(a, Field):
            return None
        hw = {(k, j): w for k, j, w in vb.get("h", ())}
        hs = self.picks[a.header][0] if a.header in self.picks else (a.header,)
        ws = [hw.get((self.aliases[h], a.index)) if h in self.aliases else None for h in hs]
        return None if not ws or None in ws else max(ws)  # type: ignore[type-var]

    def _sshr(self, n: SShr) -> Iv:
        a, b, full = self.of(n.a), self.of(n.b), (0, (1 << n.width) - 1)
        if a is None or b is None or a[0] < 0 or a[1] > full[1] or b[0] < 0:
            return full
        m, sb, b0, b1 = 1 << n.width, 1 << (n.width - 1), min(b[0], n.width), min(b[1], n.width)
        parts: list[Iv] = []
        if a[0] < sb:  # a's values below the sign bit: non-negative
            parts.append((a[0] >> b1, min(a[1], sb - 1) >> b0))
        if a[1] >= sb:  # at or above it: the negative s = a - 2**W
            parts.append(((max(a[0], sb) - m >> b0) + m, (a[1] - m >> b1) + m))
        return (min(p[0] for p in parts), max(p[1] for p in parts))

    def _call(self, n: Call) -> Iv | None:
        xs = [self.of(x) for x in n.args]
        if n.fn in _STACK_HELPERS:
            return None  # a header (a stack's element), no number
        if n.fn in ("_shl", "_sat_s") and isinstance(n.args[-1], Lit):
            return width_iv(int(n.args[-1].value))
        if any(x is None for x in xs):
            return _extern_bounds(n, xs)
        if n.fn in ("min", "max") and len(xs) == 2:
            pick = min if n.fn == "min" else max
            return (pick(xs[0][0], xs[1][0]), pick(xs[0][1], xs[1][1]))  # type: ignore[index]
        if n.fn == "_hmod" and len(xs) == 2 and xs[0][0] >= 0 and xs[1][0] >= 0:  # type: ignore[index]
            return (0, xs[0][1])  # type: ignore[index]
        if n.fn == "_random" and len(xs) == 2:
            return (xs[0][0], max(xs[0][1], xs[1][1]))  # type: ignore[index]
        return _extern_bounds(n, xs)



    def _digest(self, d: Digest) -> Iv | None:
        num = self.digest_number(d)
        if d.algo in _DIGEST_BITS:
            return width_iv(_DIGEST_BITS[d.algo])
        if d.algo == "identity" and num is not None:
            return (0, min((1 << 64) - 1, num[1]))  # the items' number, masked
        return None

    def digest_number(self, d: Digest) -> Iv | None:
        """The number digest `d`'s field list is, each item at its shift: its 16-bit words
        summed (``csum16`` taken as a number: the shifts modulo 16), else its bytes (an
        or of non-negative values at most their sum); None when an item may be negative
        or has no interval."""
        xs = [self.of(x) for x in d.items]
        if any(x is None or x[0] < 0 for x in xs):
            return None
        if d.as_int and d.algo == "csum16":
            nb = d.nbytes
            shifts = [s % 16 for s in d.shifts((nb + nb % 2) * 8)]
        else:
            shifts = d.shifts(d.nbytes * 8)
        return (0, sum(x[1] << s for x, s in zip(xs, shifts, strict=True)))  # type: ignore[index]

    def steps(self, n: Expr) -> list[Iv | None]:  # noqa: PLR0911 - one case per kind
        """The intervals of the values node `n`'s evaluation computes that are no node of
        their own (its Python's steps, which a back end computes too: the operation
        before a `Wrap`'s or a `Neg`'s mask, a signed operand through its sign bit, a
        `Concat`'s shifted half, a `BufRead`'s end, a `VbRead`'s byte count and end, a
        `Digest`'s number); None: a step not proven.  The node's own interval is `of`."""
        if isinstance(n, (Wrap, Neg)):
            a = self.of(n.a)
            b = self.of(n.b) if isinstance(n, Wrap) else (0, 0)
            if a is None or b is None:
                return [None]
            return [arith(n.op, a, b) if isinstance(n, Wrap) else (-a[1], -a[0])]
        if isinstance(n, (SignExt, SCmp, SShr)):
            src = n.width if isinstance(n, SShr) else n.src
            sb = (1 << (src - 1),) * 2
            out: list[Iv | None] = []
            for x in (n.a, n.b) if isinstance(n, SCmp) else (n.a,):
                a = self.of(x)
                flipped = None if a is None else arith("^", a, sb)
                out.append(flipped)
                if not isinstance(n, SCmp):
                    out.append(None if flipped is None else arith("-", flipped, sb))
            if isinstance(n, SShr):
                b = self.of(n.b)
                out.append(None if out[-1] is None or b is None else arith(">>", out[-1], b))
            return out
        if isinstance(n, Concat):
            a = self.of(n.a)
            return [None if a is None else arith("<<", a, (n.wb, n.wb))]
        if isinstance(n, BufRead):
            a = self.of(n.start)
            return [None if a is None else arith("+", a, (n.n, n.n))]
        if isinstance(n, VbRead):
            a, nn = self.of(n.start), self.of(n.n)
            nb = None if nn is None else arith("//", nn, (8, 8))
            return [nb, None if a is None or nb is None else arith("+", a, nb)]
        if isinstance(n, Digest):
            return [self.digest_number(n)]
        return []


def _extern_bounds(n: Call, xs: list[Iv | None]) -> Iv | None:
    """A call of a helper no rule here knows: its extern's interval (`Extern.bounds`, from
    the arguments'), or None (another helper: not proven)."""
    from pyswitch import externs  # the registry, which imports the IR's nodes
    ext = externs.helpers().get(n.fn)
    return None if ext is None else ext.bounds(n, xs)


def struct_items(ir: Iterable[ModuleItem]) -> dict[str, list[int]]:
    """Each module-level struct's items' sizes in bytes: a `StructDecl`'s (a big-endian
    format of ``B H I Q``), or a ``_stN = _struct.Struct('>...')`` still in `ModuleText`."""
    sizes = {"B": 1, "H": 2, "I": 4, "Q": 8}
    out: dict[str, list[int]] = {}
    for it in ir:
        if isinstance(it, StructDecl) and re.fullmatch(r">[BHIQ]*", it.fmt):
            out[it.var] = [sizes[c] for c in it.fmt[1:]]
        elif isinstance(it, ModuleText):
            for m in re.finditer(r"^(\w+) = _struct\.Struct\('>([BHIQ]*)'\)", it.text, re.M):
                out[m.group(1)] = [sizes[c] for c in m.group(2)]
    return out


def function_bounds(fn: Function, mbounds: Sequence[Iv | None] = (),
                    hbounds: Sequence[Sequence[Iv | None]] = (),
                    structs: dict[str, list[int]] | None = None,
                    params: dict[str, Iv] | None = None, varbits: dict | None = None,
                    outs: dict[str, list[Iv | None]] | None = None) -> Bounds:
    """The `Bounds` of function `fn`'s nodes (module docstring): its locals' whole-function
    intervals (`Bounds.locals`) and each node's at its place (`Bounds.flow`,
    `pyswitch.ir.flow`); `structs` the module's struct items (`struct_items`), `params`
    and `varbits` as `Bounds` has them, `outs` each action function's out values'
    intervals (`out_bounds`)."""
    aliases = {st.var: st.slot for st in walk(fn.body) if isinstance(st, HeaderAlias)}
    elems: dict[str, list[Iv | None]] = {}
    for st in walk(fn.body):  # a call's out values, read ``_rN[i]`` (an `Elem`)
        if isinstance(st, CopyOutCall) and st.result and st.fn in (outs or {}):
            new, old = (outs or {})[st.fn], elems.get(st.result)
            elems[st.result] = list(new) if old is None else [] if len(old) != len(new) \
                else [join_iv(a, b) for a, b in zip(old, new, strict=True)]

    picks: dict[str, tuple[tuple[str, ...], bool]] = {}
    others: set[str] = set()  # assigned anything else too: not a pick
    for st in walk(fn.body):
        t = st.target.node if isinstance(st, (Assign, RegRead)) else None
        if isinstance(t, Local):
            p = picked(st.value.node) if isinstance(st, Assign) else None
            if p is None:
                others.add(t.name)
            else:
                old = picks.get(t.name, ((), False))
                picks[t.name] = (tuple(dict.fromkeys(old[0] + p[0])), old[1] or p[1])
    picks = {k: v for k, v in picks.items() if k not in others}

    def env(locs: dict[str, Iv | None]) -> Bounds:
        return Bounds(mbounds, hbounds, aliases, locs, dict(params or {}), fn.name == "parser",
                      picks, varbits or {}, elems)

    assigns: list[tuple[str, Expr | Iv | None]] = []  # None: a value still text
    text = [st.text for st in walk(fn.body) if isinstance(st, PyText)]
    for st in walk(fn.body):
        t = st.target.node if isinstance(st, (Assign, RegRead)) else None
        if isinstance(st, (Assign, RegRead)) and t is None and st.target.code.isidentifier():
            assigns.append((st.target.code, None))  # a target still text
        elif isinstance(st, Assign) and isinstance(t, Local):
            assigns.append((t.name, st.value.node))
        elif isinstance(st, RegRead) and isinstance(t, Local):
            lo, hi = st.bounds
            if st.guarded:
                lo, hi = min(lo, st.default), max(hi, st.default)
            assigns.append((t.name, (lo, hi)))
        elif isinstance(st, Extract) and st.fields is not None:
            for i, size in enumerate((structs or {}).get(st.struct, [])[:st.items]):
                assigns.append((f"a{i}", (0, (1 << (8 * size)) - 1)))
    names = {name for name, _ in assigns}
    locs: dict[str, Iv | None] = dict.fromkeys(names)
    for turn in range(ROUNDS):
        e, new = env(locs), dict(locs)
        for name, v in assigns:
            b = v if isinstance(v, tuple) or v is None else _eval(e, v, locs)
            if b is not None:
                new[name] = _join(new[name], b)
        if turn >= WIDEN_AFTER:
            new = {name: widen_iv(locs[name], cur) for name, cur in new.items()}
        if new == locs:
            break
        locs = new
    else:
        locs = dict.fromkeys(names)  # not settled: no interval
    e = env(locs)
    for name, v in assigns:  # an assignment without an interval leaves its local without
        if v is None or not isinstance(v, tuple) and e.of(v) is None:
            locs[name] = None
    targets = " ".join(_text_targets(line) for line in text)
    for name in names:  # a local a text line may assign too: not proven here
        if re.search(rf"\b{re.escape(name)}\b", targets):
            locs[name] = None
    out = env(locs)
    if not text:  # the text's jumps are not seen here: flow-insensitive only
        whole = {k: v for k, v in locs.items()
                 if k not in out.params and not (out.parser and k in ("pos", "L"))}

        def items(st: Extract) -> list[Iv | None]:
            sizes = (structs or {}).get(st.struct)
            return [None if sizes is None or i >= len(sizes) else (0, (1 << (8 * sizes[i])) - 1)
                    for i in range(st.items)]

        out.flow = Flow(lambda s: replace(out, locals=s, flow={}, _memo={}), whole,
                        items).run(fn.body)
    return out


_ASSIGN = re.compile(r"^(.*?)(?<![=!<>])(?:[-+*/%&|^]|<<|>>|//)?=(?!=)")
_BINDS = re.compile(r"\b(?:for|as)\s+([\w\s,()]+?)(?:\s+in\b|:|$)")


def _text_targets(line: str) -> str:
    """What a line of Python text may assign: the part before its assignment's ``=`` (of
    each statement on it), the names after ``for`` and ``as`` (a superset: never fewer)."""
    out = [m.group(1) for m in _BINDS.finditer(line)]
    for part in line.split(";"):
        m = _ASSIGN.match(part)
        if m:
            out.append(m.group(1))
    return " ".join(out)


def _eval(env: Bounds, v: Expr, locs: dict[str, Iv | None]) -> Iv | None:
    """`v`'s interval this round; None while a local it reads has none yet."""
    if any(isinstance(x, Local) and x.name in locs and locs[x.name] is None
           and x.name not in env.params for x in _nodes(v)):
        return None
    return env.of(v)


def _nodes(n: Expr) -> Iterable[Expr]:
    yield n
    for x in operands(n):
        yield from _nodes(x)


def param_bounds(meta: dict, fn: Function) -> dict[str, Iv]:
    """The intervals of `fn`'s parameters: their types' (``meta["fbounds"]``), a table
    wrapper's action data (``_dN``) by its width."""
    out = {k: tuple(v) for k, v in meta.get("fbounds", {}).get(fn.name, {}).items()
           if v is not None}
    for a in meta.get("actions", ()):
        if a["fn"] == fn.name:
            for i, p in enumerate(a["params"]):  # its action data: a table entry's width
                out.setdefault(f"_d{i}", (0, (1 << p["width"]) - 1))
                out.setdefault(f"p_{p['name']}", (0, (1 << p["width"]) - 1))
    return out  # type: ignore[return-value]


def out_bounds(fn: Function, params: dict[str, Iv]) -> list[Iv | None] | None:
    """The intervals of the out/inout values action function `fn` returns (``return (p_a,
    p_b,)``, ``raise _Exit((p_a, p_b,))``: a `Return`'s or an `Exit`'s names, the first
    found), each its parameter's (`params`); None when it returns none."""
    for st in walk(fn.body):
        names = st.values if isinstance(st, Return) else st.outs if isinstance(st, Exit) else ()
        if names:
            return [params.get(x) for x in names]
    return None


def program_bounds(ir: Sequence[ModuleItem], meta: dict) -> dict[str, Bounds]:
    """`function_bounds` of every function of a program (its IR and its ``meta``)."""
    structs = struct_items(ir)
    fns = [it for it in ir if isinstance(it, Function)]
    params = {it.name: param_bounds(meta, it) for it in fns}
    outs = {it.name: o for it in fns if (o := out_bounds(it, params[it.name])) is not None}
    return {it.name: function_bounds(it, meta["mbounds"], meta["hbounds"], structs,
                                     params[it.name], meta.get("varbits"), outs)
            for it in fns}
