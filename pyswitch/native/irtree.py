"""The syntax tree the native path's passes walk, built from the intermediate form.

`pyswitch.native.cgen` keeps one Python syntax tree per function (its passes -- the locals
and their bounds, exit and parser-error labels, stack elements picked at run time -- walk
it).  Transitionally (issue 42, scope 1) that tree is made of three kinds of pieces:

- `PyText` lines, still read with ``ast`` as text;
- the simple nodes (register reads and writes, counters, exits, parser errors, action
  calls, table applies): one marker line each, ``_ir(k)`` (``target = _ir(k)`` when the
  node assigns a target), lowered by `pyswitch.native.irlower.IRLower.ir_stmt` from the
  node's fields where the translator meets it;
- the structured statements (`Assign`, `HeaderAlias`, `If`, `Loop` and its `Break` and
  `Continue`, `Pass`, `Return`, `Seq`, `ExitScope`, `ParserScope`, the whole headers'
  `HeaderCopy`, `HeaderSet`, `HeaderSwap`, the calls that copy out, `CopyOutCall`, with
  their handler, a union stack's `SiblingsInvalid`) and the parser's and
  deparser's nodes (`ParserStart`, `Extract`, `Advance`, `ParserEnd`, `Emit`, `EmitRun`,
  `EmitVarbit`):
  their syntax tree is built here from their fields -- the bodies from their `Line`s,
  the expressions from their nodes (`pyswitch.native.exprtree`), the text parsed only
  where an expression is no node yet (`PyExpr.code`) -- not from the printed Python.

The module's declarations are not in the tree: a `StructDecl` is handed to `cgen` as it is
(`Marked.structs`, with its line), a `Helper` is left out (the C calls its own); their
lines are blank in the text parsed.

Line numbers follow the Python back end's print (each simple node one line), so that a
message's ``line N`` names the line `Marked.shown` holds: a structured statement's
marker line is followed by blank lines in the text parsed, one for each further line
it prints; its bodies are parsed apart and numbered where they print.
"""

from __future__ import annotations

import ast

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
    PyExpr,
    PyText,
    RegRead,
    Return,
    Seq,
    SiblingsInvalid,
    Stmt,
    StructDecl,
    TableApply,
    item_text,
    stmt_lines,
)
from pyswitch.native.exprtree import expr_tree

MARK = "_ir"
IND = "    "
# the nodes of several lines without a body: the packet's cursor and the deparser's output
PACKET = (ParserStart, ParserEnd, Extract, Advance, Emit, EmitRun)
# whole headers' copies, sets and swaps
HEADERS = (HeaderCopy, HeaderSet, HeaderSwap)
# the statements of one line whose Python was text last: a varbit header's emit, a union
# stack's siblings made invalid
ONE_LINE = (EmitVarbit, SiblingsInvalid)
STRUCTURED = (Assign, If, ExitScope, ParserScope, HeaderAlias, Loop, Break, Continue, Pass,
              Return, Seq, CopyOutCall, *HEADERS, *PACKET, *ONE_LINE)

__all__ = ["MARK", "PACKET", "STRUCTURED", "Marked", "assigned", "marker", "module_tree"]


def assigned(st: Stmt) -> str | None:
    """The target a simple node assigns, as Python source (None: it assigns no target)."""
    if isinstance(st, RegRead):
        return st.target.code
    if isinstance(st, TableApply):
        return st.entry
    return None


def marker(node: ast.AST) -> int | None:
    """k when `node` is marker ``_ir(k)``, or a statement made of one, else None."""
    if isinstance(node, (ast.Expr, ast.Assign)):
        node = node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == MARK and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)):
        return int(node.args[0].value)
    return None


class Marked:
    """A module's marked text (see the module docstring) and what it takes to build its
    tree: `nodes` by marker number, `shown` (each line as the Python back end shows it, a
    simple node by its first line), `parsed` (every line parsed, the bodies' too)."""

    def __init__(self, items: list[ModuleItem]) -> None:
        self.nodes: list[Stmt] = []
        self.structs: list[tuple[int, StructDecl]] = []  # (line, declaration)
        self.parts: dict[int, list[tuple[int, list[str]]]] = {}  # bodies: (offset, text)
        self.handler: dict[int, int] = {}  # a scope's ``except`` line: its offset
        self.parsed: list[str] = []
        text: list[str] = []
        self.shown: list[str] = []
        for n, it in enumerate(items):
            if n:
                text.append("")
                self.shown.append("")
            if isinstance(it, (StructDecl, Helper)):  # declarations: not in the tree
                if isinstance(it, StructDecl):  # cgen reads it from the node, at its line
                    self.structs.append((len(text) + 1, it))
                lines = item_text(it).split("\n")
                text += [""] * len(lines)
                self.shown += lines
                continue
            if not isinstance(it, Function):
                text += it.text.split("\n")
                self.shown += it.text.split("\n")
                continue
            head = f"def {it.name}({', '.join(it.params)}):"
            text.append(head)
            self.shown.append(head)
            self.write(it.body, 0, 0, text, self.shown)
        self.text = "\n".join(text) + "\n"
        self.parsed += text

    def write(self, body: tuple[Line, ...] | list[Line], tbase: int, sbase: int,
              text: list[str], shown: list[str]) -> None:
        """`body`'s marked lines into `text` (depths from `tbase`) and its shown lines
        into `shown` (from `sbase`), one for one."""
        for ln in body:
            st = ln.stmt
            if isinstance(st, PyText):
                text += (IND * (tbase + ln.ind) + st.text).split("\n")
                shown += (IND * (sbase + ln.ind) + st.text).split("\n")
                continue
            k = len(self.nodes)
            self.nodes.append(st)
            ind = IND * (tbase + ln.ind)
            if isinstance(st, STRUCTURED):
                region = self.region(k, st, sbase + ln.ind)
                text.append(f"{ind}{MARK}({k})")
                text += [""] * (len(region) - 1)
                shown += region
                continue
            tgt = assigned(st)
            text.append(f"{ind}{tgt + ' = ' if tgt else ''}{MARK}({k})")
            shown.append(IND * (sbase + ln.ind) + stmt_lines(st)[0][1])

    def region(self, k: int, st: Stmt, d: int) -> list[str]:
        """The shown lines of structured statement `st` (node `k`) at depth `d`; its
        bodies' marked text into `parts`, by their offset from its line."""
        parts: list[tuple[int, list[str]]] = []
        shown = [IND * d + stmt_lines(st)[0][1]]

        def body(b: tuple[Line, ...], sbase: int = d) -> None:
            t: list[str] = []
            parts.append((len(shown), t))
            self.write(b, -1, sbase, t, shown)
            self.parsed.extend(t)

        if isinstance(st, PACKET):  # its lines, no body
            shown = [IND * (d + e) + t for e, t in stmt_lines(st)]
        elif isinstance(st, If) and st.inline:  # each body on a line of the statement
            shown = [IND * d + t for _, t in stmt_lines(st)]
            for off, b in enumerate((st.then,) if st.else_ is None else (st.then, st.else_)):
                t: list[str] = []
                self.write(b, -1, d, t, [])
                parts.append((off, t))
                self.parsed.extend(t)
        elif isinstance(st, If):
            body(st.then)
            if st.else_ is not None:
                if st.elif_:  # the one If of the else body, its first line ``elif``
                    at = len(shown)
                    body(st.else_, d - 1)  # at this statement's depth
                    shown[at] = shown[at].replace("if ", "elif ", 1)
                else:
                    shown.append(IND * d + "else:")
                    body(st.else_)
        elif isinstance(st, Loop):
            body(st.body)
        elif isinstance(st, CopyOutCall) and st.on_exit is not None:
            lines = stmt_lines(st)  # try:, the call, except, the values taken, the body
            shown = [IND * (d + e) + t for e, t in lines[:3 + bool(st.values and st.result)]]
            body(st.on_exit)
        elif isinstance(st, (ExitScope, ParserScope)):
            body(st.body)
            self.handler[k] = len(shown)
            shown += [IND * (d + e) + t for e, t in stmt_lines(st)[-2:]]
        self.parts[k] = parts
        return shown

    # -- the tree ------------------------------------------------------------------------
    def tree(self) -> ast.Module:
        """The module's syntax tree, each structured statement built from its fields."""
        mod = ast.parse(self.text)
        mod.body = self.resolve(mod.body)
        return ast.fix_missing_locations(mod)

    def resolve(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        """`stmts` with every structured statement's marker (at any depth) replaced by
        its tree."""
        out: list[ast.stmt] = []
        for s in stmts:
            k = marker(s) if isinstance(s, ast.Expr) else None
            if k is not None and isinstance(self.nodes[k], STRUCTURED):
                out += self.build(k, s.lineno)
                continue
            for name in ("body", "orelse", "finalbody"):
                sub = getattr(s, name, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    setattr(s, name, self.resolve(sub))
            for h in getattr(s, "handlers", ()):
                h.body = self.resolve(h.body)
            out.append(s)
        return out

    def build(self, k: int, at: int) -> list[ast.stmt]:
        """Structured node `k`, whose line is `at`, as statement trees (a `Seq` several)."""
        st = self.nodes[k]
        bodies = []
        for off, text in self.parts.get(k, ()):
            mod = ast.parse("\n".join(text) + "\n")
            ast.increment_lineno(mod, at + off - 1)
            bodies.append(self.resolve(mod.body))
        if isinstance(st, Seq):
            return [simple(s, at) for s in st.stmts]
        if isinstance(st, PACKET):
            return packet(st, at)
        if isinstance(st, If):
            return [ast.If(expr(st.cond, at), bodies[0], bodies[1] if len(bodies) > 1 else [],
                           lineno=at)]
        if isinstance(st, Loop):
            return [ast.While(ast.Constant(True), bodies[0], [], lineno=at)]
        if isinstance(st, CopyOutCall):
            return [copy_out_call(st, at, bodies[0] if bodies else [])]
        if not isinstance(st, (ExitScope, ParserScope)):
            return [simple(st, at)]
        handler_at = at + self.handler[k]
        if isinstance(st, ExitScope):
            h = ast.ExceptHandler(ast.Name("_Exit", ast.Load(), lineno=handler_at), None,
                                  [ast.Pass(lineno=handler_at + 1)], lineno=handler_at)
        else:
            code = ast.Attribute(ast.Name("_e", ast.Load()), "code", ast.Load(),
                                 lineno=handler_at + 1)
            h = ast.ExceptHandler(ast.Name("_PErr", ast.Load(), lineno=handler_at), "_e",
                                  [ast.Assign([expr(st.slot, handler_at + 1, store=True)],
                                              code, lineno=handler_at + 1)],
                                  lineno=handler_at)
        return [ast.Try(bodies[0], [h], [], [], lineno=at)]


def simple(st: Stmt, at: int) -> ast.stmt:
    """The tree of a structured statement of one line without a body, at line `at`."""
    if isinstance(st, Assign):
        return ast.Assign([expr(st.target, at, store=True)], expr(st.value, at), lineno=at)
    if isinstance(st, HeaderAlias):
        return ast.Assign([ast.Name(st.var, ast.Store())],
                          ast.Subscript(ast.Name("S", ast.Load()), ast.Constant(st.slot),
                                        ast.Load()), lineno=at)
    if isinstance(st, (Break, Continue, Pass)):
        return {Break: ast.Break, Continue: ast.Continue, Pass: ast.Pass}[type(st)](lineno=at)
    if isinstance(st, Return):
        vals = [ast.Name(v, ast.Load()) for v in st.values]
        return ast.Return(ast.Tuple(vals, ast.Load()) if vals else None, lineno=at)
    if isinstance(st, HeaderCopy):
        return ast.Assign([_whole(st.target, True)], _name(st.source), lineno=at)
    if isinstance(st, HeaderSet):
        cells = [ast.Constant(st.valid), *(expr(v, at) for v in st.values)]
        return ast.Assign([_whole(st.header, True)], ast.List(cells, ast.Load()), lineno=at)
    if isinstance(st, HeaderSwap):
        return ast.Assign([ast.Tuple([_whole(st.a, True), _whole(st.b, True)], ast.Store())],
                          ast.Tuple([_name(st.b), _whole(st.a)], ast.Load()), lineno=at)
    if isinstance(st, EmitVarbit):  # native.varbits reads the pieces from this tree
        data = expr(st.pieces[0], at)
        for p in st.pieces[1:]:
            data = ast.BinOp(data, ast.Add(), expr(p, at), lineno=at)
        call = _method("out", "append", [data])
        call.lineno = at
        return ast.If(_valid(st.header), [ast.Expr(call, lineno=at)], [], lineno=at)
    if isinstance(st, SiblingsInvalid):  # native.picks: one case per element
        groups = ast.Tuple([ast.Tuple([_name(h) for h in g], ast.Load()) for g in st.groups],
                           ast.Load())
        clear = ast.Assign([ast.Subscript(_name("_s"), ast.Constant(0), ast.Store())],
                           ast.Constant(False), lineno=at)
        return ast.For(_name("_s", True), ast.Subscript(groups, expr(st.index, at), ast.Load()),
                       [clear], [], lineno=at)
    raise TypeError(f"not a statement of one line built from its fields: {st!r}")


def _name(n: str, store: bool = False) -> ast.Name:
    return ast.Name(n, ast.Store() if store else ast.Load())


def _method(obj: str, name: str, args: list[ast.expr]) -> ast.Call:
    """``obj.name(args)``."""
    return ast.Call(ast.Attribute(_name(obj), name, ast.Load()), args, [])


def _whole(h: str, store: bool = False) -> ast.Subscript:
    """``h[:]``: a header's cells, the validity first."""
    return ast.Subscript(_name(h), ast.Slice(), ast.Store() if store else ast.Load())


def copy_out_call(st: CopyOutCall, at: int, handler: list[ast.stmt]) -> ast.stmt:
    """The tree of a `CopyOutCall` at line `at`: the call (its result assigned), inside
    ``try:`` ... ``except _Exit`` with the handler's statements `handler` when it has one."""
    ln = at if st.on_exit is None else at + 1
    args = [_name("S"), _name("M"), *(expr(a, ln) for a in st.args)]
    if st.data:
        args.append(ast.Starred(_name("data"), ast.Load()))
    call = ast.Call(_name(st.fn), args, [], lineno=ln)
    run: ast.stmt = ast.Assign([_name(st.result, True)], call, lineno=ln) if st.result \
        else ast.Expr(call, lineno=ln)
    if st.on_exit is None:
        return run
    took: list[ast.stmt] = []
    if st.values and st.result:  # ``_rN = _x.args[0]``
        took.append(ast.Assign([_name(st.result, True)], ast.Subscript(
            ast.Attribute(_name("_x"), "args", ast.Load()), ast.Constant(0), ast.Load()),
            lineno=at + 3))
    h = ast.ExceptHandler(_name("_Exit"), "_x" if st.values else None, took + handler,
                          lineno=at + 2)
    return ast.Try([run], [h], [], [], lineno=at)


def _fields(h: str, store: bool = False) -> ast.Subscript:
    """``h[1:]``: a header's fields."""
    return ast.Subscript(_name(h), ast.Slice(ast.Constant(1), None, None),
                         ast.Store() if store else ast.Load())


def packet(st: Stmt, at: int) -> list[ast.stmt]:
    """The trees of a parser's or deparser's node (`PACKET`), its first line `at`."""
    if isinstance(st, ParserStart):
        return [ast.Assign([_name("L", True)], ast.Call(_name("len"), [_name("buf")], []),
                           None, lineno=at),
                ast.Assign([_name("pos", True)], ast.Constant(0), None, lineno=at + 1)]
    if isinstance(st, ParserEnd):
        return [ast.Return(_name("pos"), lineno=at)]
    if isinstance(st, Advance):
        return [ast.AugAssign(_name("pos", True), ast.Add(), expr(st.n, at), lineno=at)]
    if isinstance(st, Extract):
        read = _method(st.struct, "unpack_from", [_name("buf"), _name("pos")])
        if st.fields is None:
            return [ast.Assign([_fields(st.header, True)], read, None, lineno=at)]
        items = ast.Tuple([_name(f"a{i}", True) for i in range(st.items)], ast.Store())
        vals = ast.Tuple([expr(f, at + 1) for f in st.fields], ast.Load())
        return [ast.Assign([items], read, None, lineno=at),
                ast.Assign([_fields(st.header, True)], vals, None, lineno=at + 1)]
    if isinstance(st, Emit):
        return [ast.If(_valid(st.header), [_append(st.struct, _pack_items(st, at + 1), at + 1)],
                       [], lineno=at)]
    if isinstance(st, EmitRun):
        test = ast.BoolOp(ast.And(), [_valid(e.header) for e in st.emits])
        items = [x for e in st.emits for x in _pack_items(e, at + 1)]
        each = [t for i, e in enumerate(st.emits) for t in packet(e, at + 3 + 2 * i)]
        return [ast.If(test, [_append(st.struct, items, at + 1)], each, lineno=at)]
    raise TypeError(f"not a parser's or deparser's node: {st!r}")


def _valid(h: str) -> ast.Subscript:
    return ast.Subscript(_name(h), ast.Constant(0), ast.Load())


def _pack_items(st: Emit, at: int) -> list[ast.expr]:
    if st.values is None:
        return [ast.Starred(_fields(st.header), ast.Load())]
    return [expr(v, at) for v in st.values]


def _append(struct: str, items: list[ast.expr], at: int) -> ast.Expr:
    """``out.append(struct.pack(items))`` at line `at`."""
    call = _method("out", "append", [_method(struct, "pack", items)])
    call.lineno = at
    return ast.Expr(call, lineno=at)


def expr(e: PyExpr, at: int, store: bool = False) -> ast.expr:
    """Expression `e`'s tree (from its node, `pyswitch.native.exprtree`, or its `code`
    parsed where it is no node yet), at line `at`; an l-value's context `Store`."""
    tree = expr_tree(e, at)
    if store and hasattr(tree, "ctx"):
        tree.ctx = ast.Store()  # type: ignore[attr-defined]
    return tree


def module_tree(items: list[ModuleItem]) -> tuple[ast.Module, list[str], list[Stmt],
                                                  list[tuple[int, StructDecl]]]:
    """(the module's syntax tree, its lines as shown, the nodes by marker number, the
    structs' declarations with their lines: the tree holds the functions, and any text)."""
    m = Marked(items)
    return m.tree(), m.shown, m.nodes, m.structs

