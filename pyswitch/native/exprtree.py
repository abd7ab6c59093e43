"""An expression's syntax tree for `pyswitch.native.cgen`, built from its node's fields.

`cgen` translates Python syntax trees (transitional, `pyswitch.native.irtree`); an
expression the compiler made a node (`pyswitch.ir.exprs`) gets its tree from the node's
kind and fields here, the one text parsed being an `Opaque` operand's (and an expression
that is no node at all, `PyExpr.code`).  The tree is the one ``ast`` gives for the
printed Python (`tests/test_ir.py` checks it on every program).  A `Digest`'s call
carries its node (``ir_node``): its extern lowers it from the node's fields
(`pyswitch.externs.Extern.c_expr`), not from the call's tree.
"""

from __future__ import annotations

import ast

from pyswitch.ir import PyExpr
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
)

__all__ = ["digest_words", "expr_tree", "node_tree"]

_BINOPS: dict[str, type[ast.operator]] = {
    "+": ast.Add, "-": ast.Sub, "*": ast.Mult, "&": ast.BitAnd, "|": ast.BitOr,
    "^": ast.BitXor, "<<": ast.LShift, ">>": ast.RShift, "%": ast.Mod, "//": ast.FloorDiv}
_CMPOPS: dict[str, type[ast.cmpop]] = {
    "==": ast.Eq, "!=": ast.NotEq, "<": ast.Lt, ">": ast.Gt, "<=": ast.LtE, ">=": ast.GtE}
_BOOLOPS: dict[str, type[ast.boolop]] = {"and": ast.And, "or": ast.Or}


def _const(v: int | bool) -> ast.expr:
    if not isinstance(v, bool) and v < 0:
        return ast.UnaryOp(ast.USub(), ast.Constant(-v))
    return ast.Constant(v)


def _binop(a: ast.expr, op: str, b: ast.expr) -> ast.expr:
    if op in _CMPOPS:
        return ast.Compare(a, [_CMPOPS[op]()], [b])
    if op in _BOOLOPS:
        return ast.BoolOp(_BOOLOPS[op](), [a, b])
    return ast.BinOp(a, _BINOPS[op](), b)


def _mask(w: int) -> ast.expr:
    return ast.Constant((1 << w) - 1)


def _build(n: Expr) -> ast.expr:
    """Node `n`'s tree; its root carries the node (``ir_expr``: cgen meets its interval
    with the node's proven one, `pyswitch.ir.bounds`)."""
    t = _kind(n)
    t.ir_expr = n  # type: ignore[attr-defined]
    return t


def _kind(n: Expr) -> ast.expr:  # noqa: C901 - one case per kind
    if isinstance(n, Lit):
        return _const(n.value)
    if isinstance(n, Slot):
        return ast.Subscript(ast.Name("M", ast.Load()), ast.Constant(n.index), ast.Load())
    if isinstance(n, Field):
        return ast.Subscript(ast.Name(n.header, ast.Load()), ast.Constant(n.index), ast.Load())
    if isinstance(n, Local):
        return ast.Name(n.name, ast.Load())
    if isinstance(n, Elem):
        return ast.Subscript(ast.Name(n.name, ast.Load()), ast.Constant(n.index), ast.Load())
    if isinstance(n, Paren):
        return _build(n.a)
    if isinstance(n, Opaque):
        return ast.parse(n.code, mode="eval").body
    if isinstance(n, Bin):
        return _binop(_build(n.a), n.op, _build(n.b))
    if isinstance(n, Wrap):
        return ast.BinOp(_binop(_build(n.a), n.op, _build(n.b)), ast.BitAnd(), _mask(n.width))
    if isinstance(n, Neg):
        return ast.BinOp(ast.UnaryOp(ast.USub(), _build(n.a)), ast.BitAnd(), _mask(n.width))
    if isinstance(n, Not):
        return ast.UnaryOp(ast.Not(), _build(n.a))
    if isinstance(n, Cond):
        return ast.IfExp(_build(n.c), _build(n.a), _build(n.b))
    if isinstance(n, SignExt):
        sb = ast.Constant(1 << (n.src - 1))
        x = ast.BinOp(ast.BinOp(_build(n.a), ast.BitXor(), sb), ast.Sub(), sb)
        return ast.BinOp(x, ast.BitAnd(), _mask(n.width))
    if isinstance(n, SCmp):
        sb = 1 << (n.src - 1)
        a = ast.BinOp(_build(n.a), ast.BitXor(), ast.Constant(sb))
        b = ast.BinOp(_build(n.b), ast.BitXor(), ast.Constant(sb))
        return ast.Compare(a, [_CMPOPS[n.op]()], [b])
    if isinstance(n, Concat):
        hi = ast.BinOp(_build(n.a), ast.LShift(), ast.Constant(n.wb))
        return ast.BinOp(hi, ast.BitOr(), _build(n.b))
    if isinstance(n, (All, AnyOf)):
        op = ast.And() if isinstance(n, All) else ast.Or()
        return ast.BoolOp(op, [_build(x) for x in n.items])
    if isinstance(n, ActionRun):
        return ast.Attribute(ast.Name(n.entry, ast.Load()), "aidx", ast.Load())
    if isinstance(n, Range):
        return ast.Compare(_build(n.lo), [ast.LtE(), ast.LtE()], [_build(n.a), _build(n.hi)])
    if isinstance(n, Hit):
        return ast.Attribute(ast.Name(n.entry, ast.Load()), "hit", ast.Load())
    if isinstance(n, Call):
        return ast.Call(ast.Name(n.fn, ast.Load()), [_build(x) for x in n.args], [])
    if isinstance(n, Digest):
        return _digest(n)
    return _build_more(n)


def _name(s: str) -> ast.expr:
    return ast.Name(s, ast.Load())


def _build_more(n: Expr) -> ast.expr:  # noqa: C901 - one case per kind
    if isinstance(n, Pick):  # native.picks reads the pick from this tree
        elems = ast.Tuple([_name(h) for h in n.elems], ast.Load())
        return ast.Subscript(elems, _build(n.index), ast.Load())
    if isinstance(n, Elems):  # and the stack helpers' calls (`Call`) with these
        return ast.Tuple([_name(h) for h in n.elems], ast.Load())
    if isinstance(n, Str):
        return ast.Constant(n.value)
    if isinstance(n, BufRead):  # the start's tree twice: a tree is no DAG
        end = ast.BinOp(_build(n.start), ast.Add(), ast.Constant(n.n))
        data = ast.Subscript(_name("buf"), ast.Slice(_build(n.start), end), ast.Load())
        return ast.Call(ast.Attribute(_name("int"), "from_bytes", ast.Load()),
                        [data, ast.Constant("big")], [])
    if isinstance(n, SShr):
        sb = ast.Constant(1 << (n.width - 1))
        x = ast.BinOp(ast.BinOp(_build(n.a), ast.BitXor(), sb), ast.Sub(), sb)
        return ast.BinOp(ast.BinOp(x, ast.RShift(), _build(n.b)), ast.BitAnd(), _mask(n.width))
    if isinstance(n, VbValue):
        return ast.IfExp(_build(n.a), ast.Subscript(_build(n.a), ast.Constant(1), ast.Load()),
                         ast.Constant(0))
    if isinstance(n, VbDigest):  # c_call reads it from this tree (no ir_node)
        parts = [ast.BoolOp(ast.Or(), [_build(x), ast.Tuple([ast.Constant(0), ast.Constant(0)],
                                                             ast.Load())]) if w is None else
                 ast.Tuple([ast.Constant(w), _build(x)], ast.Load())
                 for x, w in zip(n.items, n.widths, strict=True)]
        data: ast.expr = ast.Call(_name("_pack_bits"), [ast.Tuple(parts, ast.Load())], [])
        if n.payload is not None:
            data = ast.BinOp(data, ast.Add(), ast.Subscript(
                _name("M"), ast.Constant(n.payload), ast.Load()))
        return ast.Call(_name(f"_{n.algo}"), [data], [])
    if isinstance(n, VbRead):  # native.varbits reads the extract's cell from this tree
        end = ast.BinOp(_build(n.start), ast.Add(),
                        ast.BinOp(_build(n.n), ast.FloorDiv(), ast.Constant(8)))
        data = ast.Subscript(_name("buf"), ast.Slice(_build(n.start), end), ast.Load())
        read = ast.Call(ast.Attribute(_name("int"), "from_bytes", ast.Load()),
                        [data, ast.Constant("big")], [])
        return ast.Tuple([_build(n.n), read], ast.Load())
    if isinstance(n, ToBytes):  # and an emit's pieces (`native.varbits.emit_bytes`)
        return _to_bytes(_build(n.a), ast.Constant(n.n))
    if isinstance(n, VbBytes):
        size = ast.BinOp(ast.Subscript(_build(n.a), ast.Constant(0), ast.Load()),
                         ast.FloorDiv(), ast.Constant(8))
        value = ast.Subscript(_build(n.a), ast.Constant(1), ast.Load())
        return ast.IfExp(_build(n.a), _to_bytes(value, size), ast.Constant(b""))
    raise TypeError(f"not an expression node: {n!r}")


def _to_bytes(a: ast.expr, n: ast.expr) -> ast.expr:
    """``a.to_bytes(n, 'big')``."""
    return ast.Call(ast.Attribute(a, "to_bytes", ast.Load()), [n, ast.Constant("big")], [])


def _fold(parts: list[ast.expr], op: type[ast.operator]) -> ast.expr:
    if not parts:
        return ast.Constant(0)
    t = parts[0]
    for x in parts[1:]:
        t = ast.BinOp(t, op(), x)
    return t


def _packed(d: Digest) -> ast.expr:
    """The field list as one number of its whole bytes' bits."""
    return _fold([ast.BinOp(_build(x), ast.LShift(), ast.Constant(s)) if s else _build(x)
                  for x, s in zip(d.items, d.shifts(d.nbytes * 8), strict=True)], ast.BitOr)


def _csum(d: Digest) -> ast.expr:
    """The field list's 16-bit words summed as one number (``_csum16i``'s argument)."""
    nb = d.nbytes
    return _fold([ast.BinOp(_build(x), ast.LShift(), ast.Constant(s % 16)) if s % 16
                  else _build(x) for x, s in zip(d.items, d.shifts((nb + nb % 2) * 8),
                                                 strict=True)], ast.Add)


def _digest(d: Digest) -> ast.expr:
    if d.as_int and d.algo == "identity":
        return ast.BinOp(_packed(d), ast.BitAnd(), ast.Constant(0xFFFFFFFFFFFFFFFF))
    if d.as_int:
        call = ast.Call(ast.Name("_csum16i", ast.Load()), [_csum(d)], [])
    else:
        data: ast.expr = ast.Call(ast.Attribute(_packed(d), "to_bytes", ast.Load()),
                                  [ast.Constant(d.nbytes), ast.Constant("big")], [])
        if d.payload is not None:
            data = ast.BinOp(data, ast.Add(), ast.Subscript(
                ast.Name("M", ast.Load()), ast.Constant(d.payload), ast.Load()))
        call = ast.Call(ast.Name(f"_{d.algo}", ast.Load()), [data], [])
    call.ir_node = d  # type: ignore[attr-defined]  # the extern lowers the node (c_expr)
    return call


def digest_words(d: Digest, at: int) -> ast.expr:
    """Digest `d`'s field list as the number its C is computed from, at line `at`: its
    16-bit words summed (``csum16``, no payload), else the number of its bytes."""
    return _at(_csum(d) if d.as_int and d.algo == "csum16" else _packed(d), at)


def _at(tree: ast.expr, at: int) -> ast.expr:
    for x in ast.walk(tree):
        if isinstance(x, (ast.expr, ast.stmt)):
            x.lineno = x.end_lineno = at
            x.col_offset = x.end_col_offset = 0
    return tree


def node_tree(n: Expr, at: int) -> ast.expr:
    """Node `n`'s tree, its line `at`."""
    return _at(_build(n), at)


def expr_tree(e: PyExpr, at: int) -> ast.expr:
    """Expression `e`'s tree at line `at`: built from its node, or (not converted) its
    `code` read with ``ast``."""
    if e.node is not None:
        return node_tree(e.node, at)
    return _at(ast.parse(e.code, mode="eval").body, at)
