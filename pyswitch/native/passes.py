"""The passes over one function's IR before its C is written (a mixin of
`pyswitch.native.cgen.Unit`): the names it assigns sorted (`classify`: header aliases,
table entries, stack elements picked at run time, the out values of calls, locals), each
local's interval to a fixed point (`bound_locals`), the out/inout parameters an action
returns (`out_names`), and the names a body assigns (`assigned`: the flow-sensitive
bounds it forgets).

The assignments are taken in the order the generated Python's syntax tree holds them
breadth first (`assignments`): a local's C declaration comes in that order, so the C is
the same as when this walked that tree.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from pyswitch.ir import (
    Advance,
    Assign,
    CopyOutCall,
    Exit,
    ExitScope,
    Extract,
    HeaderAlias,
    If,
    Line,
    Loop,
    ParserEnd,
    ParserScope,
    ParserStart,
    RegRead,
    Return,
    Seq,
    Stmt,
    TableApply,
    walk,
)
from pyswitch.ir.exprs import (
    BufRead,
    Call,
    Digest,
    Elem,
    Expr,
    Field,
    Local,
    Paren,
    Pick,
    Slot,
    ToBytes,
    VbDigest,
)
from pyswitch.native.exprs import Func, NotNative, Pending
from pyswitch.native.lines import Listing, body_start

__all__ = ["Asg", "Passes", "assigned", "assignments", "forget", "located", "shape"]

# one assignment: (kind, the names it assigns, whether they are a tuple's, value, line)
Asg = tuple[str, list[str], bool, Any, int]


def shape(kind: str, v: Any) -> str:
    """What the value of an assignment is in Python: ``sub`` (a subscript), ``call`` or
    ``other``."""
    if kind in ("call", "start_L"):
        return "call"
    if kind == "took":
        return "sub"  # ``_x.args[0]``
    if kind != "value":
        return "other"
    while isinstance(v, Paren):
        v = v.a
    if isinstance(v, (Slot, Field, Elem, Pick)):
        return "sub"
    if isinstance(v, (Call, BufRead, VbDigest, ToBytes)) or (
            isinstance(v, Digest) and not (v.as_int and v.algo == "identity")):
        return "call"
    return "other"


def _items(lst: Listing, body: tuple[Line, ...], at: int) -> list[tuple[Any, int]]:
    """`body`'s statements as the Python's statements (a `Seq`, a parser's start, an
    extract are several), each with its line."""
    out: list[tuple[Any, int]] = []
    for ln in body:
        st = ln.stmt
        if isinstance(st, Seq):
            out += [(s, at) for s in st.stmts]
        elif isinstance(st, ParserStart):
            out += [(("start_L",), at), (("start_pos",), at + 1)]
        elif isinstance(st, Extract) and st.fields is not None:
            out += [(("unpack", st), at), (("slice", st), at + 1)]
        else:
            out.append((st, at))
        at += lst.span(st)
    return out


def _children(lst: Listing, it: Any, at: int) -> list[tuple[Any, int]]:
    """The statements one level below statement `it` in the Python's syntax tree."""
    if isinstance(it, If):
        out = _items(lst, it.then, body_start(lst, it, at, 0))
        return out + _items(lst, it.else_ or (), body_start(lst, it, at, 1))
    if isinstance(it, Loop):
        return _items(lst, it.body, at + 1)
    if isinstance(it, (ExitScope, ParserScope)):
        return _items(lst, it.body, at + 1) + [(("handler", it), 0)]
    if isinstance(it, CopyOutCall) and it.on_exit is not None:
        return [(("run", it), at + 1), (("handler", it), at + 2)]
    if isinstance(it, tuple) and it[0] == "handler" and isinstance(it[1], CopyOutCall):
        st = it[1]
        took = [(("took", st), at + 1)] if st.values and st.result else []
        return took + _items(lst, st.on_exit or (), body_start(lst, st, at - 2, 0))
    return []


def assignments(lst: Listing, fn: Any, at: int) -> list[Asg]:
    """Function `fn`'s assignments (its body on line `at`), breadth first."""
    q = deque(_items(lst, fn.body, at))
    out: list[Asg] = []
    while q:
        it, ln = q.popleft()
        q.extend(_children(lst, it, ln))
        a = _assignment(it, ln)
        if a is not None:
            out.append(a)
    return out


def _assignment(it: Any, ln: int) -> Asg | None:  # noqa: C901 - one case per statement
    if isinstance(it, tuple):
        kind = it[0]
        if kind == "start_L":
            return ("start_L", ["L"], False, None, ln)
        if kind == "start_pos":
            return ("start_pos", ["pos"], False, None, ln)
        if kind == "unpack":
            return ("unpack", [f"a{i}" for i in range(it[1].items)], True, it[1], ln)
        if kind == "run" and it[1].result:
            return ("call", [it[1].result], False, it[1], ln)
        if kind == "took":
            return ("took", [it[1].result], False, None, ln)
        return None
    if isinstance(it, RegRead):
        t = it.target.node
        return ("node", [t.name] if isinstance(t, Local) else [], False, it, ln)
    if isinstance(it, TableApply):
        return ("node", [it.entry], False, it, ln)
    if isinstance(it, Assign):
        t = it.target.node
        return ("value", [t.name] if isinstance(t, Local) else [], False, it.value.node, ln)
    if isinstance(it, HeaderAlias):
        return ("alias", [it.var], False, it.slot, ln)
    if isinstance(it, CopyOutCall) and it.on_exit is None and it.result:
        return ("call", [it.result], False, it, ln)
    if isinstance(it, Advance):
        return ("aug", ["pos"], False, it.n.node, ln)
    return None


def located(lst: Listing, body: tuple[Line, ...], at: int) -> Iterator[tuple[Stmt, int]]:
    """Every statement of `body` (on line `at`), those of its statements' bodies too, with
    its line."""
    for ln in body:
        st = ln.stmt
        yield st, at
        if isinstance(st, If):
            yield from located(lst, st.then, body_start(lst, st, at, 0))
            yield from located(lst, st.else_ or (), body_start(lst, st, at, 1))
        elif isinstance(st, (Loop, ExitScope, ParserScope)):
            yield from located(lst, st.body, at + 1)
        elif isinstance(st, CopyOutCall) and st.on_exit is not None:
            yield from located(lst, st.on_exit, body_start(lst, st, at, 0))
        at += lst.span(st)


def assigned(body: tuple[Line, ...]) -> set[str]:
    """The names the statements of `body` assign (at any depth)."""
    out: set[str] = set()
    for st in walk(body):
        if isinstance(st, (RegRead, Assign)):
            t = st.target.node
            if isinstance(t, Local):
                out.add(t.name)
        elif isinstance(st, TableApply):
            out.add(st.entry)
        elif isinstance(st, HeaderAlias):
            out.add(st.var)
        elif isinstance(st, Extract) and st.fields is not None:
            out.update(f"a{i}" for i in range(st.items))
        elif isinstance(st, ParserStart):
            out.update(("L", "pos"))
        elif isinstance(st, Advance):
            out.add("pos")
        elif isinstance(st, CopyOutCall) and st.result:
            out.add(st.result)
    return out


def forget(f: Func, body: tuple[Line, ...]) -> None:
    """Drop the flow-sensitive bounds of the locals assigned in `body`."""
    for x in assigned(body):
        f.cur.pop(x, None)


class Passes:
    """See the module docstring; `Unit` provides `listing`, `funcs`, `ex`, `raw`,
    `unpacked`, `node_bounds`, `classify_pick`, `classify_ret`."""

    listing: Listing
    funcs: dict[str, Func]

    def out_names(self, fn: Any, at: int) -> list[str] | None:
        """The out/inout parameters action function `fn` (its body on line `at`) returns
        (every ``return`` and every exit, an IR `Exit`, must give the same names), or
        None when it returns nothing."""
        outs: list[list[str]] = []
        for st, ln in located(self.listing, fn.body, at):
            if isinstance(st, Exit) and st.outs:
                outs.append(list(st.outs))
            elif isinstance(st, Return) and st.values:
                outs.append(list(st.values))
            elif isinstance(st, ParserEnd):
                raise NotNative(f"line {ln}: return of a value")
        if not outs:
            return None
        if any(o != outs[0] for o in outs):
            raise NotNative(f"function {fn.name}: returns of different parameters")
        return outs[0]

    def classify(self, f: Func) -> None:  # noqa: C901 - one case per kind of name
        """Sort the names a function assigns: header aliases, table entries, stack
        elements picked at run time, locals."""
        maybe_picks: list[tuple[str, Expr, int]] = []
        maybe_rets: list[tuple[str, str, Any, int]] = []
        for kind, names, tup, v, ln in self.assigns(f):
            if kind == "aug":
                x = names[0]
                if not (f.kind == "parser" and x == "pos") and x not in f.params:
                    f.locals[x] = None
                continue
            for x in names:
                sh = shape(kind, v)
                if kind == "node":  # a node: a table's entry, or a value
                    if isinstance(v, TableApply):
                        f.ents[x] = v.table
                    elif x not in f.params:
                        f.locals[x] = None
                elif kind == "alias":
                    f.aliases[x] = v
                elif (f.kind == "parser" and x in ("pos", "L")) or x in f.params:
                    pass
                elif not tup and sh in ("sub", "call") and x.startswith("_hs"):
                    maybe_picks.append((x, v, ln))
                elif not tup and x.startswith("_r") and (sh == "call" or kind == "took"):
                    maybe_rets.append((x, kind, v, ln))
                else:
                    f.locals[x] = None
        maybe_rets.sort(key=lambda r: r[1] == "took")  # the calls first
        for name, kind, v, ln in maybe_rets:
            f.ln = ln
            if not self.classify_ret(f, name, kind, v):  # type: ignore[attr-defined]
                f.locals[name] = None
        for name, v, ln in maybe_picks:  # once every alias is known
            f.ln = ln
            if not self.classify_pick(f, name, v):  # type: ignore[attr-defined]
                f.locals[name] = None
        if set(f.picks) & set(f.locals):
            raise NotNative(f"function {f.name}: name {sorted(set(f.picks) & set(f.locals))[0]}"
                            " is a stack element and a value")
        both = (set(f.aliases) | set(f.ents)) & set(f.locals) or set(f.aliases) & set(f.ents)
        if both:
            raise NotNative(f"function {f.name}: name {sorted(both)[0]} has two kinds")

    def assigns(self, f: Func) -> list[Asg]:
        return assignments(self.listing, f.node, f.line + 1)

    def bound_locals(self, f: Func) -> None:
        """Each local's interval: the union of what is assigned to it, to a fixed point."""
        todo: list[tuple[str, str, Any, int]] = []
        for kind, names, tup, v, ln in self.assigns(f):
            if tup:
                f.ln = ln
                for x, u in zip(names, self.unpacked(f, v), strict=False):  # type: ignore[attr-defined]
                    if x in f.locals:
                        todo += [(x, "const", u.lo, ln), (x, "const", u.hi, ln)]
            elif names and names[0] in f.locals and kind != "alias":
                todo.append((names[0], kind, v, ln))
        for turn in range(40):
            changed = False
            for name, kind, v, ln in todo:
                try:
                    lo, hi = self._assigned_bounds(f, name, kind, v, ln)
                except Pending:
                    continue
                old = f.locals[name]
                new = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
                if new != old and old is not None and turn >= 8:
                    # widening: a loop counter grows by one a turn; round the bound up to
                    # the next power of two (still a bound), so that a mask stops it
                    new = (-(1 << (-new[0]).bit_length()) if new[0] < 0 else new[0],
                           (1 << new[1].bit_length()) - 1 if new[1] > 0 else new[1])
                if new != old:
                    f.locals[name] = new
                    changed = True
            if not changed:
                return
        raise NotNative(f"function {f.name}: the locals' ranges do not settle")

    def _assigned_bounds(self, f: Func, name: str, kind: str, v: Any,  # noqa: C901
                         ln: int) -> tuple[int, int]:
        """The interval of one value assigned to local `name`."""
        f.ln = ln
        if kind == "const":
            return v, v
        if kind == "node":
            b = self.node_bounds(v)  # type: ignore[attr-defined]
            if b is None:
                raise NotNative(f"line {ln}: call of _ir")
            return b
        if kind == "start_pos":
            return 0, 0
        if kind == "aug":
            x = self.raw(f, Local(name))  # type: ignore[attr-defined]
            x = self._step(f, "+", x, self.ex(f, v))  # type: ignore[attr-defined]
            return x.lo, x.hi
        if kind == "value":
            x = self.ex(f, v)  # type: ignore[attr-defined]
            return x.lo, x.hi
        if kind == "call":
            return self.call_value(f, v)  # type: ignore[attr-defined]
        if kind == "start_L":
            raise NotNative(f"line {ln}: call of len")
        raise NotNative(f"line {ln}: expression '_x.args[0]'")
