"""Bodies and module items of the intermediate form.

A body is a list of `Line`: a statement at a depth (the compiler's indentation level, 4
spaces each in Python).  A module is a list of items: a `Function` (one generated
function: parser, a block, an action, a table's wrapper) or `ModuleText` (a module-level
block still written as text: a ``struct.Struct`` declaration, the stack helpers).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyswitch.ir.stmts import PyText, Stmt


@dataclass(frozen=True)
class Line:
    """Statement `stmt` at depth `ind` (depth 1 is a function's body)."""

    ind: int
    stmt: Stmt

    @classmethod
    def from_python(cls, s: str) -> Line:
        """The `Line` whose Python is the indented text `s` (4 spaces a level): the
        inverse of printing a `PyText` line."""
        body = s.lstrip(" ")
        ind = (len(s) - len(body)) // 4
        return cls(ind, PyText(s[4 * ind:]))


def shift(lines: list[Line], n: int) -> list[Line]:
    """`lines` `n` levels shallower (negative: deeper)."""
    return [replace(ln, ind=ln.ind - n) for ln in lines]


@dataclass(frozen=True)
class Function:
    """``def name(params):`` and its body.  `cache_reads`: the Python back end may read
    metadata slots into locals in it (`pyswitch.compiler.localcache`, a Python-only
    optimisation the C back end does not need)."""

    name: str
    params: tuple[str, ...]
    body: tuple[Line, ...]
    cache_reads: bool = True


@dataclass(frozen=True)
class ModuleText:
    """A module-level block of Python still written as text (transitional)."""

    text: str


ModuleItem = Function | ModuleText
