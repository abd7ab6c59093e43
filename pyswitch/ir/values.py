"""Typed values of the intermediate form.

An expression is still Python source text (`PyExpr.code`, what `pyswitch.compiler`'s
``E.code`` holds) with what is known about its value: the width of its type and the interval
it is proven to stay in.  Expressions are the next construct to convert into nodes of their
own; until then the C back end reads `PyExpr.code` with ``ast`` (transitional, like
`pyswitch.ir.stmts.PyText`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PyExpr:
    """One expression: Python source `code` (an r-value, or an l-value where a node says
    so), the `width` of its type in bits when it is ``bit<N>``/``int<N>`` (None: bool,
    error, or not known here), and `bounds`, the interval ``(lo, hi)`` its value is proven
    to stay in (None: not known here; the C back end proves its own)."""

    code: str
    width: int | None = None
    bounds: tuple[int, int] | None = None
