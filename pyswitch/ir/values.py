"""Typed values of the intermediate form.

An expression (`PyExpr`) is, where the compiler has converted it, a node
(`pyswitch.ir.exprs`: constants, slot, field and local reads, operators with P4's width
semantics) with its Python source `code` printed from it; elsewhere it is still the Python
source alone (transitional, like `pyswitch.ir.stmts.PyText`: none is left in the
compiler's output), which the C back end does not take.  Proven bounds are carried where a node assigns a value the
IR cannot see into (a register read's cells, `RegRead.bounds`); every expression node's
interval is proven over the IR (`pyswitch.ir.bounds`), and the C back end meets it with its
own (`pyswitch.native.exprs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyswitch.ir.exprs import Expr, text


@dataclass(frozen=True)
class PyExpr:
    """One expression: Python source `code` (an r-value, or an l-value where a node says
    so), the `width` of its type in bits when it is ``bit<N>``/``int<N>`` (None: bool,
    error, or not known here), and its `node` when the compiler made one (then `code` is
    the node's print, `of`)."""

    code: str
    width: int | None = None
    node: Expr | None = None

    @classmethod
    def of(cls, node: Expr, width: int | None = None) -> PyExpr:
        """The expression of `node` (its width unless `width` is given)."""
        return cls(text(node), node.width if width is None else width, node)
