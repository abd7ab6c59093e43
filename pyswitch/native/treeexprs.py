"""Transitional (issue 42, scope 1): the statements' syntax trees' expressions in C.

`pyswitch.native.cgen` still walks a Python syntax tree per function (`native.irtree`);
an expression tree built from a node (`native.exprtree`, which sets ``ir_expr``) is
lowered from the node (`pyswitch.native.exprs`), the few trees the statements build
around nodes here.
"""

from __future__ import annotations

import ast

from pyswitch import externs
from pyswitch.native.exprs import (
    Expressions,
    Func,
    NotNative,
    Pending,
    X,
    _lit,
    binx,
    check,
    wide_varbit,
)


def _check(x: X, node: ast.AST) -> X:
    return check(x, getattr(node, "lineno", 0))


def _int_const(n: ast.AST) -> int | None:
    """The integer a constant argument is (``-1`` is a unary minus of 1), or None."""
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        v = _int_const(n.operand)
        return None if v is None else -v
    if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
        return n.value
    return None


def _pure(n: ast.AST) -> bool:
    """Whether evaluating `n` twice is the same as once (no call)."""
    return not any(isinstance(x, ast.Call) for x in ast.walk(n))


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


class TreeExpressions(Expressions):
    """Expressions of a `Unit` given as syntax trees (transitional)."""

    hb: list[list[tuple[int, int] | None]]  # header slot -> field bounds (0: validity)
    hoff: list[int]  # header slot -> offset in the C state's `s`
    mb: list[tuple[int, int] | None]  # metadata slot bounds
    nm: int
    regs: dict[str, tuple[int, int]]  # register var -> value bounds
    actions: dict[str, dict]  # action function -> its meta
    funcs: dict[str, Func]

    # -- expressions -----------------------------------------------------------------
    def slot(self, f: Func, node):  # type: ignore[override]
        """A header field or metadata slot read or written by `node` (a tree, or a node:
        `Expressions.slot`), or None."""
        if not isinstance(node, ast.AST):
            return super().slot(f, node)
        if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Constant):
            return None
        j = node.slice.value
        if not isinstance(j, int) or isinstance(j, bool):
            return None
        base = node.value
        f.ln = node.lineno
        if isinstance(base, ast.Name):
            return self.slot_of(f, base.id, j)
        if (isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name)
                and base.value.id == "S" and isinstance(base.slice, ast.Constant)):
            k = base.slice.value
            if not (0 <= k < len(self.hb) and 0 <= j < len(self.hb[k])) or self.hb[k][j] is None:
                w = self.hvb.get((k, j))
                raise NotNative(f"line {node.lineno}: " + (
                    f"header slot S[{k}][{j}]" if w is None else wide_varbit(w)))
            return f"st->s[{self.hoff[k] + j}]", self.hb[k][j]
        return None

    def ex(self, f: Func, node):  # type: ignore[override]
        """`node`'s C and interval: a tree built from an expression node (``ir_expr``)
        lowered from the node (`Expressions.ex`), another tree here."""
        if not isinstance(node, ast.AST):
            return super().ex(f, node)
        n = getattr(node, "ir_expr", None)
        if n is not None:
            f.ln = node.lineno
            return super().ex(f, n)
        return _check(self._ex(f, node), node)

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

    def cond(self, f: Func, n) -> str:  # type: ignore[override]
        """A test: only its truth matters, so and/or/not take any operands."""
        if not isinstance(n, ast.AST):
            return super().cond(f, n)
        if isinstance(n, ast.BoolOp):
            op = " && " if isinstance(n.op, ast.And) else " || "
            return "(" + op.join(self.cond(f, v) for v in n.values) + ")"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return f"(!{self.cond(f, n.operand)})"
        return f"({self.ex(f, n).c} != 0)"

    def binop(self, f: Func, n: ast.BinOp) -> X:
        a, b = self.ex(f, n.left), self.ex(f, n.right)
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|",
               ast.BitXor: "^", ast.Mod: "%", ast.FloorDiv: "//", ast.LShift: "<<",
               ast.RShift: ">>"}
        if type(n.op) not in ops:
            raise NotNative(f"line {n.lineno}: operator {type(n.op).__name__}")
        return binx(ops[type(n.op)], a, b, n.lineno)

    def call(self, f: Func, n: ast.Call) -> X:
        fn = ast.unparse(n.func)
        args = n.args
        if n.keywords or any(isinstance(a, ast.Starred) for a in args):
            raise NotNative(f"line {n.lineno}: call of {fn}")
        ext = externs.helpers().get(fn)
        if ext is not None:  # an extern's helper: lowered from its node (exprs)
            raise NotNative(f"line {n.lineno}: call of {fn} (extern "
                            f"{ext.names[0]}: {ext.served})")
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
