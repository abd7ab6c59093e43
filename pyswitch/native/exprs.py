"""Expressions of the generated Python in C, each with the interval of its value.

Python ints never overflow and C's ``__int128`` does, so every expression is bounded
before it is emitted: a slot's range comes from its P4 type (``meta["mbounds"]``,
``meta["hbounds"]``), a register's from its width, an action parameter's from its width
(what a table entry may hold), a literal is itself, and each operator maps the operands'
intervals to the result's::

    [a, b] + [c, d] = [a + c, b + d]          [a, b] - [c, d] = [a - d, b - c]
    x & m, m >= 0: [0, m]                      x | y, x ^ y, both >= 0: [0, 2**k - 1]
    [a, b] << [c, d] = [min, max] of the four corner shifts, likewise >>
    [a, b] // [c, d], c > 0: of the four corner quotients    x % [c, d], c > 0: [0, d - 1]

A local has, at each point, the bound of its last assignment (the union over branches;
the union of all its assignments, iterated to a fixed point, around loops and labels; a
bound still growing after eight rounds is widened to the next power of two, in
`pyswitch.native.cgen`).
Anything beyond ``2**126`` raises `NotNative` with the line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from pyswitch import externs
from pyswitch.ir.bounds import Bounds
from pyswitch.ir.exprs import opaque

LIMIT = 1 << 126


class NotNative(Exception):
    """The generated code uses something this translator does not handle (or cannot
    prove free of overflow); the message says what and where."""


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


def _check(x: X, node: ast.AST) -> X:
    if x.lo < -LIMIT or x.hi > LIMIT:
        raise NotNative(f"line {getattr(node, 'lineno', 0)}: a value may exceed 126 bits")
    return x


def _int_const(n: ast.AST) -> int | None:
    """The integer a constant argument is (``-1`` is a unary minus of 1), or None."""
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        v = _int_const(n.operand)
        return None if v is None else -v
    if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
        return n.value
    return None


def wide_varbit(w: int) -> str:
    """Why a varbit slot of `w` bits has no C value (pyswitch.native.varbits)."""
    return f"a varbit of {w} bits (more than 112)"


def _bitlen(lo: int, hi: int) -> int:
    return max(abs(lo).bit_length(), abs(hi).bit_length()) + 1


@dataclass
class Func:
    name: str
    node: ast.FunctionDef
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


def _pure(n: ast.AST) -> bool:
    """Whether evaluating `n` twice is the same as once (no call)."""
    return not any(isinstance(x, ast.Call) for x in ast.walk(n))


def merge(f: Func, a: dict, b: dict) -> dict:
    """The bounds after two branches: each local's union (its whole-function bound where
    one branch has no flow-sensitive bound)."""
    out = {}
    for k in set(a) | set(b):
        x, y = a.get(k, f.locals.get(k)), b.get(k, f.locals.get(k))
        if x is not None and y is not None:
            out[k] = (min(x[0], y[0]), max(x[1], y[1]))
    return out


def forget(f: Func, stmts: list[ast.stmt]) -> None:
    """Drop the flow-sensitive bounds of the locals assigned in `stmts`."""
    for st in stmts:
        for n in ast.walk(st):
            ts = n.targets if isinstance(n, ast.Assign) else (
                [n.target] if isinstance(n, ast.AugAssign) else [])
            for t in ts:
                for x in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(x, ast.Name):
                        f.cur.pop(x.id, None)


class Expressions:
    """Expressions of a `Unit` (pyswitch.native.cgen): C code and bounds."""

    hb: list[list[tuple[int, int] | None]]  # header slot -> field bounds (0: validity)
    hoff: list[int]  # header slot -> offset in the C state's `s`
    mb: list[tuple[int, int] | None]  # metadata slot bounds
    nm: int
    regs: dict[str, tuple[int, int]]  # register var -> value bounds
    actions: dict[str, dict]  # action function -> its meta
    funcs: dict[str, Func]

    # -- expressions -----------------------------------------------------------------
    def slot(self, f: Func, node: ast.AST) -> tuple[str, tuple[int, int]] | None:
        """A header field or metadata slot read or written by `node`, or None."""
        if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Constant):
            return None
        j = node.slice.value
        if not isinstance(j, int) or isinstance(j, bool):
            return None
        base = node.value
        k = None
        if isinstance(base, ast.Name) and base.id in f.picks:  # see pyswitch.native.picks
            return self.pick_slot(f, base.id, j, node)  # type: ignore[attr-defined]
        if isinstance(base, ast.Name) and base.id in f.rets:  # see pyswitch.native.copyout
            return self.ret_slot(f, node)  # type: ignore[attr-defined]
        if isinstance(base, ast.Name) and base.id in f.aliases:
            k = f.aliases[base.id]
        elif (isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name)
              and base.value.id == "S" and isinstance(base.slice, ast.Constant)):
            k = base.slice.value
        if k is not None:
            if not (0 <= k < len(self.hb) and 0 <= j < len(self.hb[k])) or self.hb[k][j] is None:
                w = self.hvb.get((k, j))  # type: ignore[attr-defined]
                raise NotNative(f"line {node.lineno}: " + (
                    f"header slot S[{k}][{j}]" if w is None else wide_varbit(w)))
            return f"st->s[{self.hoff[k] + j}]", self.hb[k][j]
        if isinstance(base, ast.Name) and base.id == "M":
            if not 0 <= j < self.nm or self.mb[j] is None:
                w = self.mvb.get(j)  # type: ignore[attr-defined]
                raise NotNative(f"line {node.lineno}: " + (
                    f"metadata slot M[{j}]" if w is None else wide_varbit(w)))
            return f"st->m[{j}]", self.mb[j]
        return None

    def ex(self, f: Func, node: ast.AST) -> X:
        """`node`'s C and interval: cgen's own, met with the IR's proven interval of the
        expression node it was built from (`pyswitch.ir.bounds`), where it has one."""
        x = _check(self._ex(f, node), node)
        n = getattr(node, "ir_expr", None)
        if n is not None and f.irb is not None and not opaque(n):
            b = f.irb.of(n)
            if b is not None and max(x.lo, b[0]) <= min(x.hi, b[1]):
                return X(x.c, max(x.lo, b[0]), min(x.hi, b[1]))
        return x

    def _ex(self, f: Func, n: ast.AST) -> X:  # noqa: C901 - one case per node type
        ln = getattr(n, "lineno", 0)
        if isinstance(n, ast.Constant):
            if isinstance(n.value, bool):
                return X("1" if n.value else "0", int(n.value), int(n.value))
            if isinstance(n.value, int):
                return X(_lit(n.value), n.value, n.value)
            raise NotNative(f"line {ln}: constant {n.value!r}")
        s = self.slot(f, n)
        if s is not None:
            if self.vbw(f, n):  # type: ignore[attr-defined]
                raise NotNative(f"line {ln}: a varbit used as a number")
            return X(s[0], *s[1])
        if isinstance(n, ast.Name):
            if n.id in f.locals:
                b = f.cur.get(n.id, f.locals[n.id])
                if b is None:
                    raise Pending(n.id)
                return X(f"l_{n.id}", *b)
            if n.id in f.params:
                return X(f"p_{n.id}", *self.param_bounds(f, n.id))  # type: ignore[attr-defined]
            if f.kind == "parser" and n.id in ("pos", "L"):
                return X(f"(V)l_{n.id}", 0, 1 << 40)
            raise NotNative(f"line {ln}: name {n.id}")
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id in f.ents and n.attr in ("hit", "aidx"):
            return X(f"e_{n.value.id}.{n.attr}", 0, 1 if n.attr == "hit" else 1 << 20)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                and n.value.id in self.regs:
            raise NotNative(f"line {ln}: register read outside a RegRead node (pyswitch.ir)")
        if isinstance(n, ast.BinOp):
            return self.binop(f, n)
        if isinstance(n, ast.UnaryOp):
            a = self.ex(f, n.operand)
            if isinstance(n.op, ast.Not):
                return X(f"(!{a.c})", 0, 1)
            if isinstance(n.op, ast.USub):
                return X(f"(-{a.c})", -a.hi, -a.lo)
            if isinstance(n.op, ast.Invert):
                return X(f"(~{a.c})", -a.hi - 1, -a.lo - 1)
            if isinstance(n.op, ast.UAdd):
                return a
        if isinstance(n, ast.Compare):
            ops = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
                   ast.GtE: ">="}
            xs = [self.ex(f, x) for x in [n.left, *n.comparators]]
            if all(type(o) in ops for o in n.ops) and (
                    len(n.ops) == 1 or all(_pure(x) for x in n.comparators[:-1])):
                parts = [f"({xs[i].c} {ops[type(o)]} {xs[i + 1].c})"
                         for i, o in enumerate(n.ops)]
                return X("(" + " && ".join(parts) + ")", 0, 1)
        if isinstance(n, ast.BoolOp):
            xs = [self.ex(f, v) for v in n.values]
            if any(x.lo < 0 or x.hi > 1 for x in xs):
                raise NotNative(f"line {ln}: and/or on non-boolean values")
            op = " && " if isinstance(n.op, ast.And) else " || "
            return X("(" + op.join(x.c for x in xs) + ")", 0, 1)
        if isinstance(n, ast.IfExp):
            x = self.vb_value(f, n)  # type: ignore[attr-defined]
            if x is not None:  # a varbit's value: pyswitch.native.varbits
                return x
            t, a, b = self.ex(f, n.test), self.ex(f, n.body), self.ex(f, n.orelse)
            return X(f"({t.c} ? {a.c} : {b.c})", min(a.lo, b.lo), max(a.hi, b.hi))
        if isinstance(n, ast.Call):
            return self.call(f, n)
        raise NotNative(f"line {ln}: expression {ast.unparse(n)[:60]!r}")

    def cond(self, f: Func, n: ast.AST) -> str:
        """A test: only its truth matters, so and/or/not take any operands."""
        if isinstance(n, ast.BoolOp):
            op = " && " if isinstance(n.op, ast.And) else " || "
            return "(" + op.join(self.cond(f, v) for v in n.values) + ")"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return f"(!{self.cond(f, n.operand)})"
        return f"({self.ex(f, n).c} != 0)"

    def param_width(self, f: Func, name: str) -> int:
        a = self.actions.get(f.name)
        if a is None:
            raise NotNative(f"function {f.name}: parameters of a non-action")
        for p in a["params"]:
            if f"p_{p['name']}" == name:
                return p["width"]
        raise NotNative(f"function {f.name}: parameter {name}")

    def binop(self, f: Func, n: ast.BinOp) -> X:
        a, b = self.ex(f, n.left), self.ex(f, n.right)
        op = type(n.op)
        if op is ast.Add:
            return X(f"({a.c} + {b.c})", a.lo + b.lo, a.hi + b.hi)
        if op is ast.Sub:
            return X(f"({a.c} - {b.c})", a.lo - b.hi, a.hi - b.lo)
        if op is ast.Mult:
            ps = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
            return X(f"({a.c} * {b.c})", min(ps), max(ps))
        if op is ast.BitAnd:
            if a.lo >= 0 and b.lo >= 0:
                return X(f"({a.c} & {b.c})", 0, min(a.hi, b.hi))
            if a.lo >= 0 or b.lo >= 0:
                return X(f"({a.c} & {b.c})", 0, a.hi if a.lo >= 0 else b.hi)
        if op in (ast.BitAnd, ast.BitOr, ast.BitXor):
            sym = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}[op]
            if a.lo >= 0 and b.lo >= 0:
                return X(f"({a.c} {sym} {b.c})", 0, (1 << max(a.hi, b.hi).bit_length()) - 1)
            w = max(_bitlen(a.lo, a.hi), _bitlen(b.lo, b.hi))
            return X(f"({a.c} {sym} {b.c})", -(1 << w), (1 << w) - 1)
        if op in (ast.Mod, ast.FloorDiv):
            if b.lo <= 0 <= b.hi:
                raise NotNative(f"line {n.lineno}: a divisor that may be 0")
            if op is ast.Mod:
                if b.lo > 0:  # Python's modulo by a positive number: [0, b - 1]
                    return X(f"v_div({a.c}, {b.c}, 1)", 0, b.hi - 1)
                m = max(abs(b.lo), abs(b.hi))
                return X(f"v_div({a.c}, {b.c}, 1)", -m, m)
            if b.lo > 0:  # floor division by a positive number is monotone in each operand
                qs = [a.lo // b.lo, a.lo // b.hi, a.hi // b.lo, a.hi // b.hi]
                return X(f"v_div({a.c}, {b.c}, 0)", min(qs), max(qs))
            k = max(abs(a.lo), abs(a.hi))
            return X(f"v_div({a.c}, {b.c}, 0)", -k - 1, k + 1)
        if op in (ast.LShift, ast.RShift):
            if b.lo < 0 or b.hi > 1000:
                raise NotNative(f"line {n.lineno}: shift by a value that may be negative")
            if op is ast.LShift:
                ps = [a.lo << b.lo, a.lo << b.hi, a.hi << b.lo, a.hi << b.hi]
                if max(abs(p) for p in ps) > LIMIT or b.hi > 126:  # C: a shift < 128
                    raise NotNative(f"line {n.lineno}: a value may exceed 126 bits")
                return X(f"({a.c} << (int){b.c})", min(ps), max(ps))
            ps = [a.lo >> b.lo, a.lo >> b.hi, a.hi >> b.lo, a.hi >> b.hi]
            c = f"({a.c} >> (int){b.c})" if b.hi < 127 else f"v_shr({a.c}, {b.c})"
            return X(c, min(ps), max(ps))
        raise NotNative(f"line {n.lineno}: operator {type(n.op).__name__}")

    def call(self, f: Func, n: ast.Call) -> X:
        fn = ast.unparse(n.func)
        args = n.args
        if n.keywords or any(isinstance(a, ast.Starred) for a in args):
            raise NotNative(f"line {n.lineno}: call of {fn}")
        ext = externs.helpers().get(fn)
        node = getattr(n, "ir_node", None)  # built from an expression node (native.exprtree)
        if ext is not None:  # an extern's helper (hash, checksum, ...): its own C, from
            # the expression node the call was built from (native.exprtree) if any
            x = ext.c_expr(self, f, node, n.lineno) if node is not None else \
                ext.c_call(self, f, n, fn)
            if x is None:
                raise NotNative(f"line {n.lineno}: call of {fn} (extern "
                                f"{ext.names[0]}: {ext.served})")
            return x
        if fn == "_shl" and len(args) == 3 and isinstance(args[2], ast.Constant):
            a, b, w = self.ex(f, args[0]), self.ex(f, args[1]), args[2].value
            if not 0 < w < 127:
                raise NotNative(f"line {n.lineno}: _shl width {w}")
            m = _lit((1 << w) - 1)
            return X(f"(({b.c}) < {w} ? (V)(((UV)({a.c}) << (int)({b.c})) & (UV){m}) : 0)",
                     0, (1 << w) - 1)
        if fn == "_div" and len(args) == 3 and isinstance(args[2], ast.Constant):
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            mod = args[2].value == "%"
            m = max(abs(b.lo), abs(b.hi))
            if mod:
                return X(f"v_div({a.c}, {b.c}, 1)", -m, m)
            k = max(abs(a.lo), abs(a.hi))
            return X(f"v_div({a.c}, {b.c}, 0)", -k - 1, k + 1)
        if fn == "_sat_s" and len(args) == 4 and all(_int_const(x) is not None
                                                     for x in args[2:]):
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            sign, w = _int_const(args[2]), _int_const(args[3])
            if not 0 < w < 126:  # type: ignore[operator]
                raise NotNative(f"line {n.lineno}: _sat_s width {w}")
            return X(f"v_sat_s({a.c}, {b.c}, {sign}, {w})", 0, (1 << w) - 1)  # type: ignore[operator]
        if fn in ("min", "max") and len(args) == 2:
            a, b = self.ex(f, args[0]), self.ex(f, args[1])
            op = "<" if fn == "min" else ">"
            pick = min if fn == "min" else max
            return X(f"(({a.c}) {op} ({b.c}) ? ({a.c}) : ({b.c}))", pick(a.lo, b.lo),
                     pick(a.hi, b.hi))
        if (fn == "int.from_bytes" and f.kind == "parser" and len(args) == 2
                and ast.unparse(args[1]) == "'big'" and isinstance(args[0], ast.Subscript)
                and ast.unparse(args[0].value) == "buf"
                and isinstance(args[0].slice, ast.Slice) and args[0].slice.step is None):
            low = args[0].slice.lower or ast.Constant(0)
            up = args[0].slice.upper
            lo, hi = self.ex(f, low), self.ex(f, up)
            if (isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add)
                    and ast.unparse(up.left) == ast.unparse(low)
                    and isinstance(up.right, ast.Constant)):
                nb = up.right.value  # buf[x:x + n]
            else:
                nb = hi.hi - lo.lo
            if not 0 < nb <= 15 or lo.lo < 0:
                raise NotNative(f"line {n.lineno}: lookahead of {nb} bytes")
            return X(f"be_slice(buf, L_buf, {lo.c}, {hi.c})", 0, (1 << (8 * nb)) - 1)
        if fn == "len" and f.kind == "parser" and ast.unparse(args[0]) == "buf":
            return X("(V)L_buf", 0, 1 << 40)
        if fn in self.funcs and self.funcs[fn].returns:
            raise NotNative(f"line {n.lineno}: value-returning function {fn}")
        raise NotNative(f"line {n.lineno}: call of {fn}")
