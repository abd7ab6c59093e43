"""The passes over one function's IR before its C is written (a mixin of
`pyswitch.native.cgen.Unit`): the names it assigns sorted (`classify`: header aliases,
table entries, stack elements picked at run time, the out values of calls, locals) and
the out/inout parameters an action returns (`out_names`).  The locals' intervals are the
IR's (`pyswitch.ir.bounds`, flow-sensitive): no pass here computes one.

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
from pyswitch.native.exprs import Func, NotNative
from pyswitch.native.lines import Listing, body_start

__all__ = ["Asg", "Passes", "assignments", "located", "shape"]

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


class Passes:
    """See the module docstring; `Unit` provides `listing`, `funcs`, `classify_pick`,
    `classify_ret`."""

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
