"""The line each statement of the IR is printed on, for the native path's messages.

A refusal names the generated line it stops at (``parser, generated line 10 `h0[1:] =
...`: ...``, `pyswitch.native.cgen.Unit.where`): the Python back end's print
(`pyswitch.ir.pyprint`) is the listing users see.  This module numbers the IR's
statements as that listing does, with one rule of its own: a simple node (a register
read or write, a counter, an exit, a parser error, an action call, a table apply) takes
one line, its first, however many it prints.  The line numbers are read from the print
and its text is shown in the messages; no C is ever written from it.
"""

from __future__ import annotations

from pyswitch.ir import (
    Advance,
    Assign,
    Break,
    Continue,
    CopyOutCall,
    Emit,
    EmitRun,
    EmitVarbit,
    ExitScope,
    Extract,
    Function,
    HeaderAlias,
    HeaderCopy,
    HeaderSet,
    HeaderSwap,
    Helper,
    If,
    Line,
    Loop,
    ModuleItem,
    ParserEnd,
    ParserScope,
    ParserStart,
    Pass,
    PyText,
    Return,
    Seq,
    SiblingsInvalid,
    Stmt,
    StructDecl,
    item_text,
    stmt_lines,
)

IND = "    "
# the parser's and deparser's nodes: every line they print
PACKET = (ParserStart, ParserEnd, Extract, Advance, Emit, EmitRun)
# the statements shown whole: their lines, their bodies' (a simple node shows its first)
STRUCTURED = (Assign, If, ExitScope, ParserScope, HeaderAlias, Loop, Break, Continue, Pass,
              Return, Seq, CopyOutCall, HeaderCopy, HeaderSet, HeaderSwap, EmitVarbit,
              SiblingsInvalid, *PACKET)

__all__ = ["PACKET", "STRUCTURED", "Listing", "body_start", "handler_start"]


class Listing:
    """A module's lines as shown (`shown`), the line of each function's ``def``
    (`defs`) and of each struct's declaration (`structs`)."""

    def __init__(self, items: list[ModuleItem]) -> None:
        self.shown: list[str] = []
        self.defs: dict[str, int] = {}
        self.structs: list[tuple[int, StructDecl]] = []
        self.other: list[tuple[int, ModuleItem]] = []  # module text (none is written)
        self._span: dict[int, tuple[Stmt, int]] = {}
        for n, it in enumerate(items):
            if n:
                self.shown.append("")
            if isinstance(it, StructDecl):
                self.structs.append((len(self.shown) + 1, it))
            if isinstance(it, (StructDecl, Helper)):
                self.shown += item_text(it).split("\n")
            elif isinstance(it, Function):
                self.shown.append(f"def {it.name}({', '.join(it.params)}):")
                self.defs[it.name] = len(self.shown)
                self.write(it.body, 0, self.shown)
            else:
                self.other.append((len(self.shown) + 1, it))
                self.shown += it.text.split("\n")

    def write(self, body: tuple[Line, ...], base: int, shown: list[str]) -> None:
        """`body`'s shown lines into `shown`, its depths from `base`."""
        for ln in body:
            st = ln.stmt
            if isinstance(st, PyText):
                shown += (IND * (base + ln.ind) + st.text).split("\n")
            elif isinstance(st, STRUCTURED):
                shown += self.region(st, base + ln.ind)
            else:
                shown.append(IND * (base + ln.ind) + stmt_lines(st)[0][1])

    def region(self, st: Stmt, d: int) -> list[str]:
        """The shown lines of structured statement `st` at depth `d`."""
        shown = [IND * d + stmt_lines(st)[0][1]]
        if isinstance(st, PACKET):  # its lines, no body
            shown = [IND * (d + e) + t for e, t in stmt_lines(st)]
        elif isinstance(st, If) and st.inline:  # each body on a line of the statement
            shown = [IND * d + t for _, t in stmt_lines(st)]
        elif isinstance(st, If):
            self.write(st.then, d, shown)
            if st.else_ is not None:
                if st.elif_:  # the one If of the else body, its first line ``elif``
                    at = len(shown)
                    self.write(st.else_, d - 1, shown)
                    shown[at] = shown[at].replace("if ", "elif ", 1)
                else:
                    shown.append(IND * d + "else:")
                    self.write(st.else_, d, shown)
        elif isinstance(st, Loop):
            self.write(st.body, d, shown)
        elif isinstance(st, CopyOutCall) and st.on_exit is not None:
            lines = stmt_lines(st)  # try:, the call, except, the values taken, the body
            shown = [IND * (d + e) + t for e, t in lines[:3 + bool(st.values and st.result)]]
            self.write(st.on_exit, d, shown)
        elif isinstance(st, (ExitScope, ParserScope)):
            self.write(st.body, d, shown)
            shown += [IND * (d + e) + t for e, t in stmt_lines(st)[-2:]]
        return shown

    def span(self, st: Stmt) -> int:
        """How many lines statement `st` takes."""
        hit = self._span.get(id(st))
        if hit is not None and hit[0] is st:
            return hit[1]
        if isinstance(st, PyText):
            n = len(st.text.split("\n"))
        elif isinstance(st, STRUCTURED):
            n = len(self.region(st, 0))
        else:
            n = 1
        self._span[id(st)] = (st, n)
        return n

    def body_span(self, body: tuple[Line, ...]) -> int:
        """How many lines `body` takes."""
        return sum(self.span(ln.stmt) for ln in body)


def body_start(lst: Listing, st: Stmt, at: int, k: int) -> int:
    """The line of the first statement of body `k` of structured statement `st` (0: its
    first body, 1: an `If`'s else body), `st` on line `at`."""
    if isinstance(st, If):
        if st.inline:
            return at + k
        if k == 0:
            return at + 1
        return at + 1 + lst.body_span(st.then) + (0 if st.elif_ else 1)
    if isinstance(st, CopyOutCall):  # the handler's body, after the values taken
        return at + 3 + bool(st.values and st.result)
    return at + 1  # a loop's, a scope's


def handler_start(lst: Listing, st: ExitScope | ParserScope, at: int) -> int:
    """The line of a scope's ``except``, `st` on line `at`."""
    return at + 1 + lst.body_span(st.body)
