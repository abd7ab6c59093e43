"""Typed values of the intermediate form.

An expression is still Python source text (`PyExpr.code`, what `pyswitch.compiler`'s
``E.code`` holds) with the width of its type.  Proven bounds are carried where a node
assigns a value the C back end cannot see into (a register read's cells, `RegRead.bounds`);
an expression's own interval is still proven by the C back end from its text
(`pyswitch.native.exprs`).  Expressions are the next construct to convert into nodes of
their own, with their bounds; until then the C back end reads `PyExpr.code` with ``ast``
(transitional, like `pyswitch.ir.stmts.PyText`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PyExpr:
    """One expression: Python source `code` (an r-value, or an l-value where a node says
    so) and the `width` of its type in bits when it is ``bit<N>``/``int<N>`` (None: bool,
    error, or not known here)."""

    code: str
    width: int | None = None
