"""Expressions of the intermediate form in C, each with the interval the IR proves for it.

Each expression node (`pyswitch.ir.exprs`) is lowered from its kind and fields, one method
per kind (`Expressions.KINDS`); the P4 width semantics a node holds (a sum wrapped to its
width, a signed operand through its sign bit) are written as the steps its Python does.
Python ints never overflow and C's ``__int128`` does, so every value is proven within 126
bits before it is emitted, with the intervals of `pyswitch.ir.bounds` (one `Bounds` per
function, `Func.irb`): a node's is `Bounds.of` (`Expressions.ex`: a slot's range from its
P4 type, a parameter's from its type or its width, a local's at the point it is read, an
operator's from its operands'), and the steps of a node that have no node of their own are
`Bounds.steps` (a sum before its mask, a value through its sign bit, a `Concat`'s shifted
half, a `Digest`'s field list as one number: `Bounds.digest_number`).  This module has no
interval arithmetic of its own: what it decides from an interval reads the IR's -- the
form of a shift (``>>`` while the shift stays below 127, else ``v_shr``) and of a division
(refused for a divisor that may be 0: `binc`), ``and``/``or`` of values that may not be
booleans refused.  A node without an interval in the IR is refused (``no proven interval``),
anything beyond ``2**126`` raises `NotNative` with the line (`Func.ln`: the line the Python
back end prints the statement on, `pyswitch.native.lines`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyswitch import externs
from pyswitch.ir.bounds import Bounds, Iv
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
from pyswitch.ir.module import Function

LIMIT = 1 << 126


class NotNative(Exception):
    """The program uses something this translator does not handle (or cannot prove free
    of overflow); the message says what and where."""


@dataclass
class X:
    """A translated expression: C code and the interval [lo, hi] of its value (the IR's;
    a varbit's C form, a register's cells: their declared range)."""

    c: str
    lo: int
    hi: int


def _lit(v: int) -> str:
    if -(1 << 63) < v < (1 << 63):
        return f"((V){v}LL)"
    if v < 0:
        return f"(-{_lit(-v)})"
    return f"((((V){v >> 64}ULL) << 64) | (V){v & ((1 << 64) - 1)}ULL)"


def within(iv: Iv | None, ln: int) -> Iv:
    """Interval `iv`, when it is proven and stays within 126 bits (line `ln` for the
    message)."""
    if iv is None or iv[0] < -LIMIT or iv[1] > LIMIT:
        raise NotNative(f"line {ln}: a value may exceed 126 bits")
    return iv


def const(v: int | bool, ln: int) -> str:
    """A constant's C (a negative one is the negation of its magnitude, as Python's)."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if v < 0:
        within((-v, -v), ln)
        return f"(-{_lit(-v)})"
    return _lit(v)


def int_const(n: Expr) -> int | None:
    """The integer a constant node is, or None."""
    if isinstance(n, Lit) and isinstance(n.value, int) and not isinstance(n.value, bool):
        return n.value
    return None


def wide_varbit(w: int) -> str:
    """Why a varbit slot of `w` bits has no C value (pyswitch.native.varbits)."""
    return f"a varbit of {w} bits (more than 112)"


# the nodes whose Python calls a function (evaluated twice, not the same as once)
_CALLS = (Call, BufRead, VbDigest, VbRead, ToBytes, VbBytes, Opaque)


def pure(n: Expr) -> bool:
    """Whether evaluating `n` twice is the same as once (no call in it)."""
    if isinstance(n, _CALLS) or (isinstance(n, Digest)
                                 and not (n.as_int and n.algo == "identity")):
        return False
    return all(pure(x) for x in operands(n))


def binc(op: str, a: str, b: X, ln: int) -> str:
    """``a op b`` in C (`op` Python's: ``+ - * & | ^ % // << >>``): a division's or a
    shift's form chosen by `b`'s proven interval (a divisor that may be 0, a shift that
    may be negative or past the value's bits refused; ``>>`` by a value that may reach
    127 is ``v_shr``)."""
    if op in ("+", "-", "*", "&", "|", "^"):
        return f"({a} {op} {b.c})"
    if op in ("%", "//"):
        if b.lo <= 0 <= b.hi:
            raise NotNative(f"line {ln}: a divisor that may be 0")
        return f"v_div({a}, {b.c}, {int(op == '%')})"
    if op in ("<<", ">>"):
        if b.lo < 0 or b.hi > 1000:
            raise NotNative(f"line {ln}: shift by a value that may be negative")
        if op == "<<":
            if b.hi > 126:  # C: a shift < 128
                raise NotNative(f"line {ln}: a value may exceed 126 bits")
            return f"({a} << (int){b.c})"
        return f"({a} >> (int){b.c})" if b.hi < 127 else f"v_shr({a}, {b.c})"
    raise NotNative(f"line {ln}: operator {op}")


_CMP = ("==", "!=", "<", ">", "<=", ">=")


@dataclass
class Func:
    """One function of the module being translated: its IR (`node`, a
    `pyswitch.ir.Function`) and what the passes learn of it."""

    name: str
    node: Function
    params: list[str]
    kind: str  # "parser", "deparser" or "block"
    returns: bool = False
    aliases: dict[str, int] = field(default_factory=dict)
    locals: dict[str, None] = field(default_factory=dict)  # its C locals, in order
    ents: dict[str, str] = field(default_factory=dict)  # entry local -> table var
    picks: dict[str, list[int]] = field(default_factory=dict)  # stack element -> its slots
    outs: list[str] = field(default_factory=list)  # out/inout parameters it returns
    star: bool = False  # a table's wrapper: (S, M, *data)
    rets: dict[str, str] = field(default_factory=dict)  # out values of a call -> callee
    exit_label: list[str] = field(default_factory=list)
    perr_label: list[str] = field(default_factory=list)
    nlabel: int = 0
    emitted: int = 0  # the deparser's most bytes (each emit counted once: no loop)
    loops: int = 0  # depth of `while True` around the statement being translated
    irb: Bounds | None = None  # the IR's proven intervals (pyswitch.ir.bounds)
    ln: int = 0  # the printed line of the statement being translated (messages)
    line: int = 0  # the line of the function's ``def``


class Expressions:
    """Expressions of a `Unit` (pyswitch.native.cgen): C code and bounds, one method per
    node kind (`KINDS`)."""

    hb: list[list[tuple[int, int] | None]]  # header slot -> fields' ranges (None: no C value)
    hoff: list[int]  # header slot -> offset in the C state's `s`
    mb: list[tuple[int, int] | None]  # metadata slots' ranges (None: no C value)
    nm: int
    regs: dict[str, tuple[int, int]]  # register var -> its cells' range (a name read)
    actions: dict[str, dict]  # action function -> its meta
    funcs: dict[str, Func]
    hvb: dict[tuple[int, int], int]  # varbits: pyswitch.native.varbits
    mvb: dict[int, int]
    KINDS: dict[type, Callable[..., str]] = {}

    # -- slots -------------------------------------------------------------------------
    def slot_of(self, f: Func, base: str, j: int) -> str | None:
        """The C of item `j` of `base` (``M``, a header local, a stack element picked at
        run time, a call's out values), or None for another name; a slot without a C
        value (a varbit of more than 112 bits) refused."""
        if base in f.picks:  # see pyswitch.native.picks
            return self.pick_slot(f, base, j)  # type: ignore[attr-defined]
        if base in f.rets:  # see pyswitch.native.copyout
            return self.ret_slot(f, base, j)  # type: ignore[attr-defined]
        if base in f.aliases:
            k = f.aliases[base]
            if not (0 <= k < len(self.hb) and 0 <= j < len(self.hb[k])) or self.hb[k][j] is None:
                w = self.hvb.get((k, j))
                raise NotNative(f"line {f.ln}: " + (
                    f"header slot S[{k}][{j}]" if w is None else wide_varbit(w)))
            return f"st->s[{self.hoff[k] + j}]"
        if base == "M":
            if not 0 <= j < self.nm or self.mb[j] is None:
                w = self.mvb.get(j)
                raise NotNative(f"line {f.ln}: " + (
                    f"metadata slot M[{j}]" if w is None else wide_varbit(w)))
            return f"st->m[{j}]"
        return None

    @staticmethod
    def place(n: Expr) -> tuple[str, int] | None:
        """(base, item) of a read of a slot: ``M[j]``, ``hN[j]``, ``_rN[j]``."""
        if isinstance(n, Slot):
            return "M", n.index
        if isinstance(n, Field):
            return n.header, n.index
        if isinstance(n, Elem):
            return n.name, n.index
        return None

    def slot(self, f: Func, n: Expr) -> str | None:
        """The header field or metadata slot node `n` reads or writes, or None."""
        p = self.place(n)
        return None if p is None else self.slot_of(f, *p)

    def vb_width(self, f: Func, n: Expr) -> int:
        """The maximum width of the varbit slot node `n` is, or 0 when it is none."""
        p = self.place(n)
        if p is None:
            return 0
        base, j = p
        if base in f.picks:
            return self.hvb.get((f.picks[base][0], j), 0)
        if base in f.aliases:
            return self.hvb.get((f.aliases[base], j), 0)
        if base == "M":
            return self.mvb.get(j, 0)
        return 0

    # -- expressions -------------------------------------------------------------------
    def ex(self, f: Func, n: Expr) -> X:
        """Node `n`'s C (its kind's method, `KINDS`) and its interval, the one the IR
        proves for it (`pyswitch.ir.bounds`: `Bounds.of`), within 126 bits.  A node the
        lowering makes up (a header's field copied whole, a parameter passed on) has
        the interval the IR's rules give it over the function's whole-function state."""
        c = self._lower(f, n)
        iv = self.iv(f, n)
        if iv is None:
            raise NotNative(f"line {f.ln}: no proven interval of {text(n)[:40]!r}")
        return X(c, *within(iv, f.ln))

    def iv(self, f: Func, n: Expr) -> Iv | None:
        """The IR's proven interval of node `n` (None: none)."""
        return None if f.irb is None or opaque(n) else f.irb.of(n)

    def steps(self, f: Func, n: Expr) -> None:
        """The values node `n`'s C computes before its own (`Bounds.steps`: a sum before
        its mask, a value through its sign bit, ...) proven within 126 bits."""
        for iv in f.irb.steps(n) if f.irb is not None else [None]:
            within(iv, f.ln)

    def _lower(self, f: Func, n: Expr) -> str:
        return self.KINDS[type(n)](self, f, n)

    def _c(self, f: Func, v: int) -> str:
        return const(within((v, v), f.ln)[0], f.ln)

    def _bad(self, f: Func, n: Expr) -> str:
        raise NotNative(f"line {f.ln}: expression {text(n)[:60]!r}")

    def _lit_x(self, f: Func, n: Lit) -> str:
        return const(n.value, f.ln)

    def _read(self, f: Func, n: Expr) -> str:
        s = self.slot(f, n)
        if s is not None:
            if self.vb_width(f, n):
                raise NotNative(f"line {f.ln}: a varbit used as a number")
            return s
        base = self.place(n)[0]  # type: ignore[index]
        if base in self.regs:
            raise NotNative(f"line {f.ln}: register read outside a RegRead node (pyswitch.ir)")
        return self._bad(f, n)

    def _local(self, f: Func, n: Local) -> str:
        if n.name in f.locals:
            return f"l_{n.name}"
        if n.name in f.params:
            return f"p_{n.name}"
        if f.kind == "parser" and n.name in ("pos", "L"):
            return f"(V)l_{n.name}"
        raise NotNative(f"line {f.ln}: name {n.name}")

    def _paren(self, f: Func, n: Paren) -> str:
        return self._lower(f, n.a)  # the same value (the IR's interval is the operand's)

    def _bin(self, f: Func, n: Bin) -> str:
        a, b = self.ex(f, n.a), self.ex(f, n.b)
        if n.op in _CMP:
            return f"(({a.c} {n.op} {b.c}))"
        if n.op in ("and", "or"):
            return self._bool(f, n.op, [a, b])
        return binc(n.op, a.c, b, f.ln)

    def _bool(self, f: Func, op: str, xs: list[X]) -> str:
        if any(x.lo < 0 or x.hi > 1 for x in xs):
            raise NotNative(f"line {f.ln}: and/or on non-boolean values")
        return "(" + (" && " if op == "and" else " || ").join(x.c for x in xs) + ")"

    def _mask(self, f: Func, c: str, w: int) -> str:
        """``c & (2**w - 1)``: a value taken to `w` bits."""
        return f"({c} & {self._c(f, (1 << w) - 1)})"

    def _wrap(self, f: Func, n: Wrap) -> str:
        v = binc(n.op, self.ex(f, n.a).c, self.ex(f, n.b), f.ln)
        self.steps(f, n)
        return self._mask(f, v, n.width)

    def _neg(self, f: Func, n: Neg) -> str:
        a = self.ex(f, n.a)
        self.steps(f, n)
        return self._mask(f, f"(-{a.c})", n.width)

    def _not(self, f: Func, n: Not) -> str:
        return f"(!{self.ex(f, n.a).c})"

    def _cond(self, f: Func, n: Cond) -> str:
        t, a, b = self.ex(f, n.c), self.ex(f, n.a), self.ex(f, n.b)
        return f"({t.c} ? {a.c} : {b.c})"

    def _through_sign(self, f: Func, a: str, w: int) -> str:
        """``(a ^ sb) - sb``: `a`'s bits of a signed value of `w` bits as its value."""
        sb = self._c(f, 1 << (w - 1))
        return f"(({a} ^ {sb}) - {sb})"

    def _sign_ext(self, f: Func, n: SignExt) -> str:
        a = self.ex(f, n.a)
        self.steps(f, n)
        return self._mask(f, self._through_sign(f, a.c, n.src), n.width)

    def _scmp(self, f: Func, n: SCmp) -> str:
        sb = self._c(f, 1 << (n.src - 1))
        a, b = self.ex(f, n.a), self.ex(f, n.b)
        self.steps(f, n)
        return f"((({a.c} ^ {sb}) {n.op} ({b.c} ^ {sb})))"

    def _concat(self, f: Func, n: Concat) -> str:
        a = self.ex(f, n.a)
        wb = n.wb
        hi = binc("<<", a.c, X(self._c(f, wb), wb, wb), f.ln)
        self.steps(f, n)
        return f"({hi} | {self.ex(f, n.b).c})"

    def _all(self, f: Func, n: All | AnyOf) -> str:
        return self._bool(f, "and" if isinstance(n, All) else "or",
                          [self.ex(f, x) for x in n.items])

    def _entry(self, f: Func, n: Hit | ActionRun) -> str:
        attr = "hit" if isinstance(n, Hit) else "aidx"
        if n.entry in f.ents:
            return f"e_{n.entry}.{attr}"
        raise NotNative(f"line {f.ln}: expression {n.entry + '.' + attr!r}")

    def _range(self, f: Func, n: Range) -> str:
        lo, a, hi = self.ex(f, n.lo), self.ex(f, n.a), self.ex(f, n.hi)
        if not pure(n.a):
            return self._bad(f, n)
        return f"(({lo.c} <= {a.c}) && ({a.c} <= {hi.c}))"

    def _sshr(self, f: Func, n: SShr) -> str:
        v = self._through_sign(f, self.ex(f, n.a).c, n.width)
        v = binc(">>", v, self.ex(f, n.b), f.ln)
        self.steps(f, n)
        return self._mask(f, v, n.width)

    def _vb_value(self, f: Func, n: VbValue) -> str:
        """``(x[1] if x else 0)`` of a varbit slot ``x``: its value."""
        if not self.vb_width(f, n.a):
            self.ex(f, n.a)
            return self._bad(f, n)
        return f"vb_val({self.slot(f, n.a)})"

    def _str(self, f: Func, n: Str) -> str:
        raise NotNative(f"line {f.ln}: constant {n.value!r}")

    def _extern(self, f: Func, fn: str, n: Expr) -> str | None:
        """An extern's helper (hash, checksum, random): its C from the node
        (`pyswitch.externs.Extern.c_expr`); None when `fn` is no extern's."""
        ext = externs.helpers().get(fn)
        if ext is None:
            return None
        x = ext.c_expr(self, f, n, f.ln)
        if x is None:
            raise NotNative(f"line {f.ln}: call of {fn} (extern {ext.names[0]}: {ext.served})")
        return x

    def _digest(self, f: Func, n: Digest) -> str:
        if n.as_int and n.algo == "identity":
            return self._mask(f, self.digest_number(f, n)[0], 64)
        fn = "_csum16i" if n.as_int else f"_{n.algo}"
        x = self._extern(f, fn, n)
        return self._no_call(f, fn) if x is None else x

    def _vb_digest(self, f: Func, n: VbDigest) -> str:
        fn = f"_{n.algo}"
        x = self._extern(f, fn, n)
        return self._no_call(f, fn) if x is None else x

    def digest_number(self, f: Func, d: Digest) -> tuple[str, Iv | None]:
        """Digest `d`'s field list as the number its C is computed from (its 16-bit words
        summed, ``csum16`` taken as a number, else the number of its bytes) and the IR's
        interval of it (`Bounds.digest_number`, within 126 bits; None: an item may be
        negative)."""
        if d.as_int and d.algo == "csum16":
            nb = d.nbytes
            shifts, op = [s % 16 for s in d.shifts((nb + nb % 2) * 8)], "+"
        else:
            shifts, op = d.shifts(d.nbytes * 8), "|"
        acc: str | None = None
        for x, s in zip(d.items, shifts, strict=True):
            v = self.ex(f, x).c
            if s:
                v = binc("<<", v, X(self._c(f, s), s, s), f.ln)
            acc = v if acc is None else f"({acc} {op} {v})"
        num = f.irb.digest_number(d) if f.irb is not None else None
        if num is not None:
            within(num, f.ln)
        return (self._c(f, 0) if acc is None else acc), num

    def _no_call(self, f: Func, fn: str) -> str:
        if fn in self.funcs and self.funcs[fn].returns:
            raise NotNative(f"line {f.ln}: value-returning function {fn}")
        raise NotNative(f"line {f.ln}: call of {fn}")

    def _buf_read(self, f: Func, n: BufRead) -> str:
        """``int.from_bytes(buf[s:s + n], 'big')``: a lookahead, in the parser."""
        if f.kind != "parser":
            return self._no_call(f, "int.from_bytes")
        lo = self.ex(f, n.start)
        self.steps(f, n)
        if not 0 < n.n <= 15 or lo.lo < 0:
            raise NotNative(f"line {f.ln}: lookahead of {n.n} bytes")
        return f"be_slice(buf, L_buf, {lo.c}, ({lo.c} + {self._c(f, n.n)}))"

    def _call(self, f: Func, n: Call) -> str:
        fn, args = n.fn, n.args
        x = self._extern(f, fn, n)
        if x is not None:
            return x
        if fn == "_shl" and len(args) == 3 and int_const(args[2]) is not None \
                and args[2].value >= 0:  # type: ignore[union-attr, operator]
            a, b, w = self.ex(f, args[0]), self.ex(f, args[1]), int_const(args[2])
            if not 0 < w < 127:  # type: ignore[operator]
                raise NotNative(f"line {f.ln}: _shl width {w}")
            m = _lit((1 << w) - 1)  # type: ignore[operator]
            return f"(({b.c}) < {w} ? (V)(((UV)({a.c}) << (int)({b.c})) & (UV){m}) : 0)"
        if fn == "_sat_s" and len(args) == 4 and all(int_const(x) is not None for x in args[2:]):
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            sign, w = int_const(args[2]), int_const(args[3])
            if not 0 < w < 126:  # type: ignore[operator]
                raise NotNative(f"line {f.ln}: _sat_s width {w}")
            return f"v_sat_s({a.c}, {b.c}, {sign}, {w})"
        if fn in ("min", "max") and len(args) == 2:
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            op = "<" if fn == "min" else ">"
            return f"(({a.c}) {op} ({b.c}) ? ({a.c}) : ({b.c}))"
        return self._no_call(f, fn)

    def cond(self, f: Func, n: Expr) -> str:
        """A test: only its truth matters, so and/or/not take any operands."""
        k = n
        while isinstance(k, Paren):
            k = k.a
        if isinstance(k, (All, AnyOf)) or (isinstance(k, Bin) and k.op in ("and", "or")):
            items = k.items if isinstance(k, (All, AnyOf)) else (k.a, k.b)
            op = " && " if isinstance(k, All) or getattr(k, "op", "") == "and" else " || "
            return "(" + op.join(self.cond(f, v) for v in items) + ")"
        if isinstance(k, Not):
            return f"(!{self.cond(f, k.a)})"
        return f"({self.ex(f, n).c} != 0)"


Expressions.KINDS = {
    Lit: Expressions._lit_x, Slot: Expressions._read, Field: Expressions._read,
    Elem: Expressions._read, Local: Expressions._local, Paren: Expressions._paren,
    Opaque: Expressions._bad, Bin: Expressions._bin, Wrap: Expressions._wrap,
    Neg: Expressions._neg, Not: Expressions._not, Cond: Expressions._cond,
    SignExt: Expressions._sign_ext, SCmp: Expressions._scmp, Concat: Expressions._concat,
    All: Expressions._all, AnyOf: Expressions._all, Range: Expressions._range,
    Hit: Expressions._entry, ActionRun: Expressions._entry, Call: Expressions._call,
    Digest: Expressions._digest, VbDigest: Expressions._vb_digest, Pick: Expressions._bad,
    Elems: Expressions._bad, Str: Expressions._str, BufRead: Expressions._buf_read,
    SShr: Expressions._sshr, VbValue: Expressions._vb_value, VbRead: Expressions._bad,
    ToBytes: Expressions._bad, VbBytes: Expressions._bad,
}
