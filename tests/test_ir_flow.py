"""The flow-sensitive intervals (`pyswitch.ir.flow`) hold on runs: random functions of
assignments, branches, loops (breaks, continues), a block's exit scope (exits, action
calls that may exit), the parser's scope (parser errors) and returns, run by a small
interpreter of their Python semantics on random inputs; every value a node takes lies in
its proven interval."""

from __future__ import annotations

import random

import pytest

from pyswitch.ir import (
    ActionCall,
    Assign,
    Break,
    Continue,
    Exit,
    ExitScope,
    Function,
    If,
    Line,
    Loop,
    ParserError,
    ParserScope,
    PyExpr,
    Return,
)
from pyswitch.ir.bounds import function_bounds
from pyswitch.ir.exprs import Bin, Cond, Expr, Lit, Local, Slot, Wrap

NAMES = ("x", "y", "z")
MB = [(0, 255), (0, 65535)]


class _Jump(Exception):
    pass


class _Break(_Jump):
    pass


class _Continue(_Jump):
    pass


class _Exit(_Jump):
    pass


class _PErr(_Jump):
    pass


class _Return(_Jump):
    pass


class _Stop(Exception):
    """The run ends (fuel out, a local read before it has a value): what it saw holds."""


class Gen:
    def __init__(self, rnd: random.Random) -> None:
        self.r = rnd

    def expr(self, d: int = 0) -> Expr:  # noqa: PLR0911
        r = self.r
        k = r.randrange(9 if d < 3 else 3)
        if k == 0:
            return Lit(r.choice((0, 1, 3, 7, 100, 255, 300)))
        if k == 1:
            return Slot(r.randrange(2), (8, 16)[r.randrange(2)])
        if k == 2:
            return Local(r.choice(NAMES), 8)
        if k == 3:
            return Wrap(r.choice("+-*"), self.expr(d + 1), self.expr(d + 1), 8)
        if k == 4:
            return Wrap("<<", self.expr(d + 1), Lit(r.randrange(4)), 8)
        if k == 5:
            return Bin(r.choice("&|^"), self.expr(d + 1), self.expr(d + 1))
        if k == 6:
            return Bin(r.choice((">>", "%")), self.expr(d + 1), Lit(r.randrange(1, 5)))
        if k == 7:
            return Bin(r.choice(("==", "<", "+", "-")), self.expr(d + 1), self.expr(d + 1))
        return Cond(self.cond(d + 1), self.expr(d + 1), self.expr(d + 1))

    def cond(self, d: int = 0) -> Expr:
        return Bin(self.r.choice(("==", "<", "!=")), self.expr(d + 1), self.expr(d + 1))

    def body(self, d: int, loop: bool, scope: bool, perr: bool) -> tuple[Line, ...]:
        return tuple(Line(1, self.stmt(d, loop, scope, perr))
                     for _ in range(self.r.randrange(1, 5)))

    def stmt(self, d: int, loop: bool, scope: bool, perr: bool):  # noqa: ANN201, C901, PLR0911
        r = self.r
        k = r.randrange(12 if d < 3 else 3)
        if k <= 2:
            t = r.choice(NAMES)
            return Assign(PyExpr.of(Local(t, 8)), PyExpr.of(self.expr()))
        if k <= 4:
            return If(PyExpr.of(self.cond()), self.body(d + 1, loop, scope, perr),
                      self.body(d + 1, loop, scope, perr) if r.randrange(2) else None)
        if k == 5:
            return Loop(self.body(d + 1, True, scope, perr))
        if k == 6 and loop:
            jump = (Line(1, r.choice((Break(), Continue()))),)
            if r.randrange(2):
                t = r.choice(NAMES)
                jump = (Line(1, Assign(PyExpr.of(Local(t, 8)), PyExpr.of(self.expr()))), *jump)
            return If(PyExpr.of(self.cond()), jump)
        if k == 7:
            return ExitScope(self.body(d + 1, loop, True, perr))
        if k == 8 and scope:
            return r.choice((Exit(), ActionCall("a")))
        if k == 9:
            return ParserScope(self.body(d + 1, loop, scope, True), PyExpr.of(Slot(1, 16)))
        if k == 10 and perr:
            return ParserError(1, PyExpr.of(self.cond()) if r.randrange(3) else None)
        if k == 11 and r.randrange(4) == 0:
            return Return()
        return Assign(PyExpr.of(Local(r.choice(NAMES), 8)), PyExpr.of(self.expr()))


class Run:
    """One run of a function on metadata `m`; `seen` each node evaluated with its value."""

    def __init__(self, m: list[int], rnd: random.Random) -> None:
        self.m, self.r, self.env = m, rnd, {}
        self.fuel = 2000
        self.seen: list[tuple[Expr, int]] = []

    def ev(self, n: Expr) -> int:  # noqa: C901
        self.fuel -= 1
        if self.fuel < 0:
            raise _Stop
        if isinstance(n, Lit):
            v = int(n.value)
        elif isinstance(n, Slot):
            v = self.m[n.index] & ((1 << n.width) - 1)  # type: ignore[operator]
        elif isinstance(n, Local):
            if n.name not in self.env:
                raise _Stop  # Python: UnboundLocalError
            v = self.env[n.name]
        elif isinstance(n, Wrap):
            a, b = self.ev(n.a), self.ev(n.b)
            v = (a << b if n.op == "<<" else {"+": a + b, "-": a - b, "*": a * b}[n.op]) & 255
        elif isinstance(n, Cond):
            v = self.ev(n.a) if self.ev(n.c) else self.ev(n.b)
        else:
            assert isinstance(n, Bin)
            a, b = self.ev(n.a), self.ev(n.b)
            v = int({"&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
                     ">>": lambda: a >> b, "%": lambda: a % b, "==": lambda: a == b,
                     "<": lambda: a < b, "!=": lambda: a != b, "+": lambda: a + b,
                     "-": lambda: a - b}[n.op]())
        self.seen.append((n, v))
        return v

    def body(self, lines: tuple[Line, ...]) -> None:
        for ln in lines:
            self.stmt(ln.stmt)

    def stmt(self, st) -> None:  # noqa: ANN001, C901
        self.fuel -= 1
        if self.fuel < 0:
            raise _Stop
        if isinstance(st, Assign):
            v = self.ev(st.value.node)  # type: ignore[arg-type]
            self.env[st.target.node.name] = v  # type: ignore[union-attr]
            self.seen.append((st.target.node, v))  # type: ignore[arg-type]
        elif isinstance(st, If):
            if self.ev(st.cond.node):  # type: ignore[arg-type]
                self.body(st.then)
            elif st.else_ is not None:
                self.body(st.else_)
        elif isinstance(st, Loop):
            while True:
                try:
                    self.body(st.body)
                except _Break:
                    break
                except _Continue:
                    continue
        elif isinstance(st, (Break, Continue, Exit, Return)):
            raise {Break: _Break, Continue: _Continue, Exit: _Exit, Return: _Return}[type(st)]
        elif isinstance(st, ActionCall):
            if self.r.randrange(3) == 0:
                raise _Exit
        elif isinstance(st, ExitScope):
            try:
                self.body(st.body)
            except _Exit:
                pass
        elif isinstance(st, ParserScope):
            try:
                self.body(st.body)
            except _PErr:
                pass
        elif isinstance(st, ParserError):
            if st.cond is None or self.ev(st.cond.node):  # type: ignore[arg-type]
                raise _PErr


@pytest.mark.parametrize("seed", range(6))
def test_random_functions_stay_within_their_intervals(seed: int) -> None:
    """150 random functions a seed (most locals given a value first), each run 30 times
    on random metadata: each value a node takes (an assignment's target too) within its
    interval, where it has one."""
    rnd = random.Random(seed)
    checked = 0
    for _ in range(150):
        g = Gen(rnd)
        init = tuple(Line(1, Assign(PyExpr.of(Local(t, 8)), PyExpr.of(g.expr(2))))
                     for t in NAMES if rnd.randrange(4))
        fn = Function("f", ("S", "M"), init + g.body(0, False, False, False))
        b = function_bounds(fn, MB)
        for _ in range(30):
            run = Run([rnd.randrange(256), rnd.randrange(65536)], rnd)
            try:
                run.body(fn.body)
            except (_Stop, _Return, _Exit, _Break, _Continue):
                pass
            for n, v in run.seen:
                iv = b.of(n)
                if iv is not None:
                    assert iv[0] <= v <= iv[1], (fn, n, v, iv)
                    checked += 1
    assert checked > 20000
