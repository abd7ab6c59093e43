"""The flow-sensitive part of `pyswitch.ir.bounds`: the intervals of a function's locals at
each point of its body, and of each expression node at the points it is evaluated.

The lattice (`pyswitch.ir.bounds` has the maths): a local's value at a point is an
interval, None (not proven: no bound) or absent (no value reaches it yet, bottom); a
state maps the locals to theirs, and is None where no run reaches (after a jump).
`join_iv`, `meet_iv` and `widen_iv` are the operations on one local's interval;
`join_states` joins two states local by local (absent is the identity, None absorbs).

`Flow` walks a function's statements once, in order, from the state where no local has a
value, and records every expression node's interval in the state it is evaluated in
(joined over the points where the same node is evaluated); a `Loop` is iterated to its
fixed point first, without recording.  The node intervals come from the rules of
`pyswitch.ir.bounds.Bounds` (`Bounds` here: what the walk needs of it), with the state as
the locals' intervals.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from pyswitch.ir.exprs import Expr, Local, operands
from pyswitch.ir.module import expressions
from pyswitch.ir.stmts import (
    Assign,
    Break,
    Continue,
    CopyOutCall,
    EmitRun,
    Exit,
    ExitScope,
    Extract,
    If,
    Line,
    Loop,
    ParserEnd,
    ParserError,
    ParserScope,
    RegRead,
    Return,
    Seq,
    Stmt,
)

__all__ = ["ROUNDS", "WIDEN_AFTER", "Bounds", "Flow", "Iv", "State", "join_iv", "join_states",
           "meet_iv", "widen_iv"]

Iv = tuple[int, int]
State = dict[str, "Iv | None"]
WIDEN_AFTER, ROUNDS = 8, 40


class Bounds(Protocol):
    """What the walk needs of `pyswitch.ir.bounds.Bounds`: a node's interval."""

    def of(self, n: Expr) -> Iv | None:
        """Node `n`'s interval (None: not proven)."""


def join_iv(a: Iv | None, b: Iv | None) -> Iv | None:
    """The smallest interval holding `a` and `b` (None, not proven, absorbs)."""
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def meet_iv(a: Iv | None, b: Iv | None) -> Iv | None:
    """`a` and `b` both hold a value: their intersection (None, no bound, is the
    identity; two disjoint intervals, which two sound bounds never are: `a`)."""
    if a is None or b is None:
        return a if b is None else b
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else a


def widen_iv(old: Iv | None, cur: Iv | None) -> Iv | None:
    """`cur` (which holds `old`) with each end that moved rounded outwards to a power of
    two (minus one above): a counter that grows a step a round stops at a mask."""
    if old is None or cur is None or cur == old:
        return cur
    return (-(1 << (-cur[0]).bit_length()) if cur[0] < 0 else cur[0],
            (1 << cur[1].bit_length()) - 1 if cur[1] > 0 else cur[1])


def join_states(a: State | None, b: State | None) -> State | None:
    """Two states joined where the paths meet: each local's intervals joined (absent in
    one: the other's; not reached, None: the other state)."""
    if a is None or b is None:
        return a if b is None else b
    out = dict(a)
    for k, v in b.items():
        out[k] = join_iv(out[k], v) if k in out else v
    return out


class Flow:
    """One function's walk: `env` gives the `Bounds` of a state (its locals' intervals),
    `whole` is each local's whole-function interval (the flow-insensitive fixed point,
    which every state is met with; a parameter is none of them), `items` the intervals
    an `Extract` gives its items ``a0, a1, ...`` (None: not known).  `run` returns each
    node's interval (by ``id``, with the node)."""

    def __init__(self, env: Callable[[State], Bounds], whole: State,
                 items: Callable[[Extract], Sequence[Iv | None]]) -> None:
        self.env, self.whole, self.items = env, whole, items
        self.at: dict[int, tuple[Expr, Iv | None]] = {}
        self.recording = True
        self.loops: list[tuple[list[State | None], list[State | None]]] = []  # breaks, continues
        self.labels: dict[type, list[list[State | None]]] = {ExitScope: [], ParserScope: []}

    def run(self, body: Sequence[Line]) -> dict[int, tuple[Expr, Iv | None]]:
        """Walk `body` from the function's entry (no local has a value yet)."""
        self.body(body, {})
        return self.at

    # -- states ------------------------------------------------------------------------
    def assign(self, s: State, name: str, iv: Iv | None) -> None:
        """Local `name` given a value of interval `iv` (met with its whole-function one)."""
        s[name] = meet_iv(iv, self.whole.get(name))

    def record(self, s: State, es: Iterable[Expr | None]) -> Bounds:
        """Each node of expressions `es` evaluated in state `s`: its interval joined into
        the node's (when recording), except where it reads a local without a value."""
        b = self.env(s)
        if self.recording:
            for e in es:
                if e is not None:
                    self._visit(b, s, e)
        return b

    def _visit(self, b: Bounds, s: State, n: Expr) -> bool:
        reached = True
        for x in operands(n):
            reached = self._visit(b, s, x) and reached
        if isinstance(n, Local) and n.name in self.whole and n.name not in s:
            reached = False  # no value reaches this read: the node is not evaluated here
        if reached:
            iv, old = b.of(n), self.at.get(id(n))
            self.at[id(n)] = (n, iv if old is None else join_iv(old[1], iv))
        return reached

    # -- statements --------------------------------------------------------------------
    def body(self, lines: Sequence[Line], s: State | None) -> State | None:
        """The state after `lines` run from state `s` (None: not reached)."""
        for ln in lines:
            s = self.stmt(ln.stmt, s)
        return s

    def stmt(self, st: Stmt, s: State | None) -> State | None:  # noqa: C901, PLR0911, PLR0912
        """The state after statement `st` run from state `s`."""
        if s is None:
            return None  # not reached (after a jump): its nodes are not evaluated here
        for stack in self.labels.values():  # a jump to the label may leave from here
            if stack:
                stack[-1].append(s)
        if isinstance(st, Seq):
            return self.body([Line(1, x) for x in st.stmts], s)
        if isinstance(st, EmitRun):
            self.record(s, (e.node for x in st.emits for e in expressions(x)))
            return s
        if isinstance(st, Assign):
            return self._assign(st.target.node, st.target.code, st.value.node, s)
        if isinstance(st, RegRead):
            self.record(s, (st.index.node,))
            lo, hi = st.bounds
            if st.guarded:
                lo, hi = min(lo, st.default), max(hi, st.default)
            return self._assign(st.target.node, st.target.code, (lo, hi), s)
        if isinstance(st, Extract) and st.fields is not None:
            s = dict(s)
            for i, iv in enumerate(self.items(st)):
                self.assign(s, f"a{i}", iv)
            self.record(s, (e.node for e in st.fields))
            return s
        self.record(s, (e.node for e in expressions(st)))
        if isinstance(st, If):
            return join_states(self.body(st.then, s),
                               s if st.else_ is None else self.body(st.else_, s))
        if isinstance(st, Loop):
            return self.loop(st.body, s)
        if isinstance(st, (ExitScope, ParserScope)):
            self.labels[type(st)].append([])
            end = self.body(st.body, s)
            for x in self.labels[type(st)].pop():
                end = join_states(end, x)
            return end
        if isinstance(st, CopyOutCall) and st.on_exit is not None:
            return join_states(s, self.body(st.on_exit, s))  # its handler, then an exit
        if isinstance(st, (Break, Continue)) and self.loops:
            self.loops[-1][0 if isinstance(st, Break) else 1].append(s)
            return None
        if isinstance(st, (Break, Continue, Return, Exit, ParserEnd)) or (
                isinstance(st, ParserError) and st.cond is None):
            return None  # left to a label (recorded above), a loop or the caller
        return s

    def _assign(self, t: Expr | None, code: str, v: Expr | Iv, s: State) -> State:
        """``target = v`` (an interval: a value the IR cannot see into, a register's)."""
        b = self.record(s, (v,)) if not isinstance(v, tuple) else None
        out = dict(s)
        if isinstance(t, Local):
            self.assign(out, t.name, v if isinstance(v, tuple) else b.of(v))  # type: ignore[union-attr]
        elif t is None and code.isidentifier():
            out[code] = None  # a target still text
        self.record(out, (t,))
        return out

    def loop(self, body: Sequence[Line], s: State) -> State | None:
        """``while True:`` `body` from state `s`: the head's state iterated to its fixed
        point (widened after `WIDEN_AFTER` rounds; after `ROUNDS`, a local still moving
        is not proven; each round met with the whole-function intervals), then the body
        walked once more from it; the state after is the breaks' join."""
        recording, self.recording = self.recording, False
        head = s
        for turn in itertools.count():
            new = self._turn(body, head)[1]
            if turn >= WIDEN_AFTER:
                new = {k: widen_iv(head[k], v) if k in head else v for k, v in new.items()}
            if turn >= ROUNDS:  # not settled: a local still moving is not proven
                new = {k: v if k in head and head[k] == v else None for k, v in new.items()}
            new = {k: meet_iv(v, self.whole.get(k)) for k, v in new.items()}
            if new == head:
                break
            head = new
        self.recording = recording
        return self._turn(body, head)[0]

    def _turn(self, body: Sequence[Line], head: State) -> tuple[State | None, State]:
        """One turn of a loop's body from state `head`: the state after the loop (the
        breaks' join) and the head's next (`head` joined with the end's and continues')."""
        self.loops.append(([], []))
        end = self.body(body, head)
        breaks, conts = self.loops.pop()
        after: State | None = None
        for x in breaks:
            after = join_states(after, x)
        nxt: State | None = join_states(head, end)
        for x in conts:
            nxt = join_states(nxt, x)
        return after, nxt  # type: ignore[return-value]
