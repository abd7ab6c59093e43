"""Expressions of the intermediate form in C, each with the interval of its value.

Each expression node (`pyswitch.ir.exprs`) is lowered from its kind and fields, one method
per kind (`Expressions.KINDS`); the P4 width semantics a node holds (a sum wrapped to its
width, a signed operand through its sign bit) are written as the steps its Python does,
each step bounded.  Python ints never overflow and C's ``__int128`` does, so every value
is bounded before it is emitted: a slot's range comes from its P4 type
(``meta["mbounds"]``, ``meta["hbounds"]``), a register's from its width, an action
parameter's from its width (what a table entry may hold), a literal is itself, and each
operator maps the operands' intervals to the result's::

    [a, b] + [c, d] = [a + c, b + d]          [a, b] - [c, d] = [a - d, b - c]
    x & m, m >= 0: [0, m]                      x | y, x ^ y, both >= 0: [0, 2**k - 1]
    [a, b] << [c, d] = [min, max] of the four corner shifts, likewise >>
    [a, b] // [c, d], c > 0: of the four corner quotients    x % [c, d], c > 0: [0, d - 1]

The interval of a node is met with the one the IR proves for it (`pyswitch.ir.bounds`).
A local has, at each point, the bound of its last assignment (the union over branches;
the union of all its assignments, iterated to a fixed point, around loops and labels; a
bound still growing after eight rounds is widened to the next power of two, in
`pyswitch.native.cgen`).  Anything beyond ``2**126`` raises `NotNative` with the line
(`Func.ln`: the line the Python back end prints the statement on, `pyswitch.native.lines`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyswitch import externs
from pyswitch.ir.bounds import Bounds
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
    """A translated expression: C code and the interval [lo, hi] of its value."""

    c: str
    lo: int
    hi: int


class Pending(Exception):
    """A local's bound is not known yet (fixed-point iteration)."""


def _lit(v: int) -> str:
    if -(1 << 63) < v < (1 << 63):
        return f"((V){v}LL)"
    if v < 0:
        return f"(-{_lit(-v)})"
    return f"((((V){v >> 64}ULL) << 64) | (V){v & ((1 << 64) - 1)}ULL)"


def check(x: X, ln: int) -> X:
    """`x`, when its interval stays within 126 bits (line `ln` for the message)."""
    if x.lo < -LIMIT or x.hi > LIMIT:
        raise NotNative(f"line {ln}: a value may exceed 126 bits")
    return x


def const(v: int | bool, ln: int) -> X:
    """A constant (a negative one is the negation of its magnitude, as Python's)."""
    if isinstance(v, bool):
        return X("1" if v else "0", int(v), int(v))
    if v < 0:
        a = check(X(_lit(-v), -v, -v), ln)
        return X(f"(-{a.c})", v, v)
    return X(_lit(v), v, v)


def int_const(n: Expr) -> int | None:
    """The integer a constant node is, or None."""
    if isinstance(n, Lit) and isinstance(n.value, int) and not isinstance(n.value, bool):
        return n.value
    return None


def wide_varbit(w: int) -> str:
    """Why a varbit slot of `w` bits has no C value (pyswitch.native.varbits)."""
    return f"a varbit of {w} bits (more than 112)"


def _bitlen(lo: int, hi: int) -> int:
    return max(abs(lo).bit_length(), abs(hi).bit_length()) + 1


# the nodes whose Python calls a function (evaluated twice, not the same as once)
_CALLS = (Call, BufRead, VbDigest, VbRead, ToBytes, VbBytes, Opaque)


def pure(n: Expr) -> bool:
    """Whether evaluating `n` twice is the same as once (no call in it)."""
    if isinstance(n, _CALLS) or (isinstance(n, Digest)
                                 and not (n.as_int and n.algo == "identity")):
        return False
    return all(pure(x) for x in operands(n))


def binx(op: str, a: X, b: X, ln: int) -> X:  # noqa: C901 - one case per operator
    """``a op b`` in C with its interval (`op` Python's: ``+ - * & | ^ % // << >>``)."""
    if op == "+":
        return X(f"({a.c} + {b.c})", a.lo + b.lo, a.hi + b.hi)
    if op == "-":
        return X(f"({a.c} - {b.c})", a.lo - b.hi, a.hi - b.lo)
    if op == "*":
        ps = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
        return X(f"({a.c} * {b.c})", min(ps), max(ps))
    if op == "&":
        if a.lo >= 0 and b.lo >= 0:
            return X(f"({a.c} & {b.c})", 0, min(a.hi, b.hi))
        if a.lo >= 0 or b.lo >= 0:
            return X(f"({a.c} & {b.c})", 0, a.hi if a.lo >= 0 else b.hi)
    if op in ("&", "|", "^"):
        if a.lo >= 0 and b.lo >= 0:
            return X(f"({a.c} {op} {b.c})", 0, (1 << max(a.hi, b.hi).bit_length()) - 1)
        w = max(_bitlen(a.lo, a.hi), _bitlen(b.lo, b.hi))
        return X(f"({a.c} {op} {b.c})", -(1 << w), (1 << w) - 1)
    if op in ("%", "//"):
        if b.lo <= 0 <= b.hi:
            raise NotNative(f"line {ln}: a divisor that may be 0")
        if op == "%":
            if b.lo > 0:  # Python's modulo by a positive number: [0, b - 1]
                return X(f"v_div({a.c}, {b.c}, 1)", 0, b.hi - 1)
            m = max(abs(b.lo), abs(b.hi))
            return X(f"v_div({a.c}, {b.c}, 1)", -m, m)
        if b.lo > 0:  # floor division by a positive number is monotone in each operand
            qs = [a.lo // b.lo, a.lo // b.hi, a.hi // b.lo, a.hi // b.hi]
            return X(f"v_div({a.c}, {b.c}, 0)", min(qs), max(qs))
        k = max(abs(a.lo), abs(a.hi))
        return X(f"v_div({a.c}, {b.c}, 0)", -k - 1, k + 1)
    if op in ("<<", ">>"):
        if b.lo < 0 or b.hi > 1000:
            raise NotNative(f"line {ln}: shift by a value that may be negative")
        if op == "<<":
            ps = [a.lo << b.lo, a.lo << b.hi, a.hi << b.lo, a.hi << b.hi]
            if max(abs(p) for p in ps) > LIMIT or b.hi > 126:  # C: a shift < 128
                raise NotNative(f"line {ln}: a value may exceed 126 bits")
            return X(f"({a.c} << (int){b.c})", min(ps), max(ps))
        ps = [a.lo >> b.lo, a.lo >> b.hi, a.hi >> b.lo, a.hi >> b.hi]
        c = f"({a.c} >> (int){b.c})" if b.hi < 127 else f"v_shr({a.c}, {b.c})"
        return X(c, min(ps), max(ps))
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
    locals: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    ents: dict[str, str] = field(default_factory=dict)  # entry local -> table var
    picks: dict[str, list[int]] = field(default_factory=dict)  # stack element -> its slots
    outs: list[str] = field(default_factory=list)  # out/inout parameters it returns
    star: bool = False  # a table's wrapper: (S, M, *data)
    rets: dict[str, str] = field(default_factory=dict)  # out values of a call -> callee
    exit_label: list[str] = field(default_factory=list)
    perr_label: list[str] = field(default_factory=list)
    nlabel: int = 0
    cur: dict[str, tuple[int, int]] = field(default_factory=dict)  # flow-sensitive bounds
    emitted: int = 0  # the deparser's most bytes (each emit counted once: no loop)
    loops: int = 0  # depth of `while True` around the statement being translated
    irb: Bounds | None = None  # the IR's proven intervals (pyswitch.ir.bounds)
    ln: int = 0  # the printed line of the statement being translated (messages)
    line: int = 0  # the line of the function's ``def``


def merge(f: Func, a: dict, b: dict) -> dict:
    """The bounds after two branches: each local's union (its whole-function bound where
    one branch has no flow-sensitive bound)."""
    out = {}
    for k in set(a) | set(b):
        x, y = a.get(k, f.locals.get(k)), b.get(k, f.locals.get(k))
        if x is not None and y is not None:
            out[k] = (min(x[0], y[0]), max(x[1], y[1]))
    return out


class Expressions:
    """Expressions of a `Unit` (pyswitch.native.cgen): C code and bounds, one method per
    node kind (`KINDS`)."""

    hb: list[list[tuple[int, int] | None]]  # header slot -> field bounds (0: validity)
    hoff: list[int]  # header slot -> offset in the C state's `s`
    mb: list[tuple[int, int] | None]  # metadata slot bounds
    nm: int
    regs: dict[str, tuple[int, int]]  # register var -> value bounds
    actions: dict[str, dict]  # action function -> its meta
    funcs: dict[str, Func]
    hvb: dict[tuple[int, int], int]  # varbits: pyswitch.native.varbits
    mvb: dict[int, int]
    KINDS: dict[type, Callable[..., X]] = {}

    # -- slots -------------------------------------------------------------------------
    def slot_of(self, f: Func, base: str, j: int) -> tuple[str, tuple[int, int]] | None:
        """The C and range of item `j` of `base` (``M``, a header local, a stack element
        picked at run time, a call's out values), or None for another name."""
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
            return f"st->s[{self.hoff[k] + j}]", self.hb[k][j]  # type: ignore[return-value]
        if base == "M":
            if not 0 <= j < self.nm or self.mb[j] is None:
                w = self.mvb.get(j)
                raise NotNative(f"line {f.ln}: " + (
                    f"metadata slot M[{j}]" if w is None else wide_varbit(w)))
            return f"st->m[{j}]", self.mb[j]  # type: ignore[return-value]
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

    def slot(self, f: Func, n: Expr) -> tuple[str, tuple[int, int]] | None:
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
        """Node `n`'s C and interval: the kind's own, met with the IR's proven interval
        of the node (`pyswitch.ir.bounds`), where it has one."""
        x = check(self._lower(f, n), f.ln)
        if f.irb is not None and not opaque(n):
            b = f.irb.of(n)
            if b is not None and max(x.lo, b[0]) <= min(x.hi, b[1]):
                return X(x.c, max(x.lo, b[0]), min(x.hi, b[1]))
        return x

    def raw(self, f: Func, n: Expr) -> X:
        """Node `n`'s C and interval, not met with the IR's: a read the lowering of a
        statement makes up (a header's field copied whole, a parameter passed on)."""
        return check(self._lower(f, n), f.ln)

    def _lower(self, f: Func, n: Expr) -> X:
        return self.KINDS[type(n)](self, f, n)

    def _step(self, f: Func, op: str, a: X, b: X) -> X:
        """One step of a node's Python (no node of its own): bounded, not met."""
        return check(binx(op, a, b, f.ln), f.ln)

    def _c(self, f: Func, v: int) -> X:
        return check(const(v, f.ln), f.ln)

    def _bad(self, f: Func, n: Expr) -> X:
        raise NotNative(f"line {f.ln}: expression {text(n)[:60]!r}")

    def _lit_x(self, f: Func, n: Lit) -> X:
        return const(n.value, f.ln)

    def _read(self, f: Func, n: Expr) -> X:
        s = self.slot(f, n)
        if s is not None:
            if self.vb_width(f, n):
                raise NotNative(f"line {f.ln}: a varbit used as a number")
            return X(s[0], *s[1])
        base = self.place(n)[0]  # type: ignore[index]
        if base in self.regs:
            raise NotNative(f"line {f.ln}: register read outside a RegRead node (pyswitch.ir)")
        return self._bad(f, n)

    def _local(self, f: Func, n: Local) -> X:
        if n.name in f.locals:
            b = f.cur.get(n.name, f.locals[n.name])
            if b is None:
                raise Pending(n.name)
            return X(f"l_{n.name}", *b)
        if n.name in f.params:
            return X(f"p_{n.name}", *self.param_bounds(f, n.name))  # type: ignore[attr-defined]
        if f.kind == "parser" and n.name in ("pos", "L"):
            return X(f"(V)l_{n.name}", 0, 1 << 40)
        raise NotNative(f"line {f.ln}: name {n.name}")

    def _paren(self, f: Func, n: Paren) -> X:
        return self._lower(f, n.a)  # the same value: met with the parenthesised node's

    def _bin(self, f: Func, n: Bin) -> X:
        a, b = self.ex(f, n.a), self.ex(f, n.b)
        if n.op in _CMP:
            return X(f"(({a.c} {n.op} {b.c}))", 0, 1)
        if n.op in ("and", "or"):
            return self._bool(f, n.op, [a, b])
        return binx(n.op, a, b, f.ln)

    def _bool(self, f: Func, op: str, xs: list[X]) -> X:
        if any(x.lo < 0 or x.hi > 1 for x in xs):
            raise NotNative(f"line {f.ln}: and/or on non-boolean values")
        return X("(" + (" && " if op == "and" else " || ").join(x.c for x in xs) + ")", 0, 1)

    def _wrap(self, f: Func, n: Wrap) -> X:
        v = self._step(f, n.op, self.ex(f, n.a), self.ex(f, n.b))
        return binx("&", v, self._c(f, (1 << n.width) - 1), f.ln)

    def _neg(self, f: Func, n: Neg) -> X:
        a = self.ex(f, n.a)
        v = check(X(f"(-{a.c})", -a.hi, -a.lo), f.ln)
        return binx("&", v, self._c(f, (1 << n.width) - 1), f.ln)

    def _not(self, f: Func, n: Not) -> X:
        return X(f"(!{self.ex(f, n.a).c})", 0, 1)

    def _cond(self, f: Func, n: Cond) -> X:
        t, a, b = self.ex(f, n.c), self.ex(f, n.a), self.ex(f, n.b)
        return X(f"({t.c} ? {a.c} : {b.c})", min(a.lo, b.lo), max(a.hi, b.hi))

    def _through_sign(self, f: Func, a: X, w: int) -> X:
        """``(a ^ sb) - sb``: `a`'s bits of a signed value of `w` bits as its value."""
        sb = 1 << (w - 1)
        return self._step(f, "-", self._step(f, "^", a, self._c(f, sb)), self._c(f, sb))

    def _sign_ext(self, f: Func, n: SignExt) -> X:
        v = self._through_sign(f, self.ex(f, n.a), n.src)
        return binx("&", v, self._c(f, (1 << n.width) - 1), f.ln)

    def _scmp(self, f: Func, n: SCmp) -> X:
        sb = 1 << (n.src - 1)
        a = self._step(f, "^", self.ex(f, n.a), self._c(f, sb))
        b = self._step(f, "^", self.ex(f, n.b), self._c(f, sb))
        return X(f"(({a.c} {n.op} {b.c}))", 0, 1)

    def _concat(self, f: Func, n: Concat) -> X:
        hi = self._step(f, "<<", self.ex(f, n.a), self._c(f, n.wb))
        return binx("|", hi, self.ex(f, n.b), f.ln)

    def _all(self, f: Func, n: All | AnyOf) -> X:
        return self._bool(f, "and" if isinstance(n, All) else "or",
                          [self.ex(f, x) for x in n.items])

    def _entry(self, f: Func, n: Hit | ActionRun) -> X:
        attr = "hit" if isinstance(n, Hit) else "aidx"
        if n.entry in f.ents:
            return X(f"e_{n.entry}.{attr}", 0, 1 if attr == "hit" else 1 << 20)
        raise NotNative(f"line {f.ln}: expression {n.entry + '.' + attr!r}")

    def _range(self, f: Func, n: Range) -> X:
        lo, a, hi = self.ex(f, n.lo), self.ex(f, n.a), self.ex(f, n.hi)
        if not pure(n.a):
            return self._bad(f, n)
        return X(f"(({lo.c} <= {a.c}) && ({a.c} <= {hi.c}))", 0, 1)

    def _sshr(self, f: Func, n: SShr) -> X:
        v = self._through_sign(f, self.ex(f, n.a), n.width)
        v = self._step(f, ">>", v, self.ex(f, n.b))
        return binx("&", v, self._c(f, (1 << n.width) - 1), f.ln)

    def _vb_value(self, f: Func, n: VbValue) -> X:
        """``(x[1] if x else 0)`` of a varbit slot ``x``: its value."""
        w = self.vb_width(f, n.a)
        if not w:
            self.ex(f, n.a)
            return self._bad(f, n)
        return X(f"vb_val({self.slot(f, n.a)[0]})", 0, (1 << w) - 1)  # type: ignore[index]

    def _str(self, f: Func, n: Str) -> X:
        raise NotNative(f"line {f.ln}: constant {n.value!r}")

    def _extern(self, f: Func, fn: str, n: Expr) -> X | None:
        """An extern's helper (hash, checksum, random): its C from the node
        (`pyswitch.externs.Extern.c_expr`); None when `fn` is no extern's."""
        ext = externs.helpers().get(fn)
        if ext is None:
            return None
        x = ext.c_expr(self, f, n, f.ln)
        if x is None:
            raise NotNative(f"line {f.ln}: call of {fn} (extern {ext.names[0]}: {ext.served})")
        return x

    def _digest(self, f: Func, n: Digest) -> X:
        if n.as_int and n.algo == "identity":
            return binx("&", self.digest_number(f, n), self._c(f, 0xFFFFFFFFFFFFFFFF), f.ln)
        fn = "_csum16i" if n.as_int else f"_{n.algo}"
        x = self._extern(f, fn, n)
        return self._no_call(f, fn) if x is None else x

    def _vb_digest(self, f: Func, n: VbDigest) -> X:
        fn = f"_{n.algo}"
        x = self._extern(f, fn, n)
        return self._no_call(f, fn) if x is None else x

    def digest_number(self, f: Func, d: Digest) -> X:
        """Digest `d`'s field list as the number its C is computed from: its 16-bit words
        summed (``csum16`` taken as a number), else the number of its bytes."""
        if d.as_int and d.algo == "csum16":
            nb = d.nbytes
            shifts, op = [s % 16 for s in d.shifts((nb + nb % 2) * 8)], "+"
        else:
            shifts, op = d.shifts(d.nbytes * 8), "|"
        acc: X | None = None
        for x, s in zip(d.items, shifts, strict=True):
            v = self.ex(f, x)
            if s:
                v = self._step(f, "<<", v, self._c(f, s))
            acc = v if acc is None else self._step(f, op, acc, v)
        return self._c(f, 0) if acc is None else acc

    def _no_call(self, f: Func, fn: str) -> X:
        if fn in self.funcs and self.funcs[fn].returns:
            raise NotNative(f"line {f.ln}: value-returning function {fn}")
        raise NotNative(f"line {f.ln}: call of {fn}")

    def _buf_read(self, f: Func, n: BufRead) -> X:
        """``int.from_bytes(buf[s:s + n], 'big')``: a lookahead, in the parser."""
        if f.kind != "parser":
            return self._no_call(f, "int.from_bytes")
        lo = self.ex(f, n.start)
        hi = self._step(f, "+", self.ex(f, n.start), self._c(f, n.n))
        if not 0 < n.n <= 15 or lo.lo < 0:
            raise NotNative(f"line {f.ln}: lookahead of {n.n} bytes")
        return X(f"be_slice(buf, L_buf, {lo.c}, {hi.c})", 0, (1 << (8 * n.n)) - 1)

    def _call(self, f: Func, n: Call) -> X:  # noqa: C901 - one case per helper
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
            return X(f"(({b.c}) < {w} ? (V)(((UV)({a.c}) << (int)({b.c})) & (UV){m}) : 0)",
                     0, (1 << w) - 1)  # type: ignore[operator]
        if fn == "_div" and len(args) == 3 and isinstance(args[2], Str):
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            m = max(abs(b.lo), abs(b.hi))
            if args[2].value == "%":
                return X(f"v_div({a.c}, {b.c}, 1)", -m, m)
            k = max(abs(a.lo), abs(a.hi))
            return X(f"v_div({a.c}, {b.c}, 0)", -k - 1, k + 1)
        if fn == "_sat_s" and len(args) == 4 and all(int_const(x) is not None for x in args[2:]):
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            sign, w = int_const(args[2]), int_const(args[3])
            if not 0 < w < 126:  # type: ignore[operator]
                raise NotNative(f"line {f.ln}: _sat_s width {w}")
            return X(f"v_sat_s({a.c}, {b.c}, {sign}, {w})", 0, (1 << w) - 1)  # type: ignore[operator]
        if fn in ("min", "max") and len(args) == 2:
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            op = "<" if fn == "min" else ">"
            pick = min if fn == "min" else max
            return X(f"(({a.c}) {op} ({b.c}) ? ({a.c}) : ({b.c}))", pick(a.lo, b.lo),
                     pick(a.hi, b.hi))
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

    def param_width(self, f: Func, name: str) -> int:
        a = self.actions.get(f.name)
        if a is None:
            raise NotNative(f"function {f.name}: parameters of a non-action")
        for p in a["params"]:
            if f"p_{p['name']}" == name:
                return p["width"]
        raise NotNative(f"function {f.name}: parameter {name}")


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
