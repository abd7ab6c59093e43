"""pyswitch's intermediate form (`pyswitch.ir`, docs/pyswitch-ir.md).

- The Python back end prints exactly the code the compiler generated before the IR: the
  SHA-256 of every program's generated Python (tests/p4, p4src, tests/stf) is the one the
  compiler wrote at commit f54ab7f (before pyswitch.ir), recorded in tests/ir_golden.json.
- Progress: how many statements each of those programs still has as `PyText` (and how many
  are nodes of their own, by kind) is recorded there too, and must match; converting a
  construct changes the counts, and the file is rewritten on purpose with
  ``python tests/test_ir.py --update`` (the digests only when the generated Python is
  meant to change).
- The converted constructs reach the C back end as nodes, not as Python text.
- The printer's text for each node.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from pyswitch.ir import (
    ActionCall,
    Advance,
    Assign,
    Break,
    Continue,
    CopyOutCall,
    CounterCount,
    Emit,
    EmitRun,
    EmitVarbit,
    Exit,
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
    ModuleText,
    ParserEnd,
    ParserError,
    ParserScope,
    ParserStart,
    Pass,
    PyExpr,
    PyText,
    RegRead,
    RegWrite,
    Return,
    Seq,
    SiblingsInvalid,
    StructDecl,
    TableApply,
    expressions,
    item_text,
    module_text,
    stmt_lines,
    walk,
)
from pyswitch.ir.exprs import (
    Bin,
    Elem,
    Field,
    Lit,
    Local,
    Paren,
    Slot,
    ToBytes,
    VbBytes,
    VbRead,
    opaque,
)
from pyswitch.native.lines import Listing
from pyswitch.native.passes import located
from pyswitch.program import compile_p4

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "ir_golden.json"
PROGRAMS = sorted(str(p.relative_to(ROOT)) for d in ("tests/p4", "p4src", "tests/stf")
                  for p in (ROOT / d).glob("*.p4"))


def _compile(rel: str):  # noqa: ANN202 - a Program
    # from the checkout's root, by relative path: error texts in the code hold the path
    with contextlib.chdir(ROOT):
        return compile_p4(rel, ["p4src/include"])


def expr_kind(e: PyExpr) -> str:
    """``expr:node`` (a node through and through), ``expr:mixed`` (a node with an
    `Opaque` operand, text still) or ``expr:text`` (no node)."""
    if e.node is None:
        return "expr:text"
    return "expr:mixed" if opaque(e.node) else "expr:node"


def census(ir: list) -> dict[str, int]:
    """Statements by kind in a program's IR: ``PyText`` lines of function bodies (those in
    the bodies of structured statements too), each node kind, and the module's other
    items by kind (``StructDecl``, ``Helper``, text blocks: ``ModuleText``); and the
    statements' expressions (`expr_kind`)."""
    c: Counter[str] = Counter()
    for it in ir:
        if isinstance(it, Function):
            c.update(type(st).__name__ for st in walk(it.body))
            c.update(expr_kind(e) for st in walk(it.body) for e in expressions(st))
        else:
            c[type(it).__name__] += 1
    return dict(sorted(c.items()))


def record(rel: str) -> dict:
    prog = _compile(rel)
    return {"python_sha256": hashlib.sha256(prog.code.encode()).hexdigest(),
            "census": census(prog.ir)}


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_every_program_is_recorded(golden: dict) -> None:
    assert sorted(golden["programs"]) == PROGRAMS


@pytest.mark.parametrize("rel", PROGRAMS)
def test_python_unchanged_and_census(golden: dict, rel: str) -> None:
    want = golden["programs"][rel]
    got = record(rel)
    assert got["python_sha256"] == want["python_sha256"], \
        f"{rel}: the generated Python changed"
    assert got["census"] == want["census"], f"{rel}: PyText/node counts changed " \
        "(update tests/ir_golden.json with `python tests/test_ir.py --update`)"


def test_ina_converted_constructs_reach_c_as_nodes() -> None:
    """ina.p4's register accesses, parser errors and table applies are nodes; the text the
    C back end still reads (PyText) holds none of their Python idioms."""
    prog = _compile("p4src/ina.p4")
    c = census(prog.ir)
    assert c["RegRead"] >= 32 and c["RegWrite"] >= 32 and c["TableApply"] >= 10
    assert c["ParserError"] >= 5 and c["CounterCount"] >= 20 and c["ActionCall"] >= 30
    assert c.get("PyText", 0) == 0  # every line of ina.p4's functions is a node
    stmts = [st for it in prog.ir if isinstance(it, Function) for st in walk(it.body)]
    assert sum(isinstance(n, RegRead) for n in stmts) == c["RegRead"]
    assert sum(isinstance(n, If) for n in stmts) == c["If"]


@pytest.mark.parametrize("rel", ["tests/p4/native_copy_out.p4", "tests/stf/exit_copy_out.p4",
                                 "tests/stf/action_params.p4", "tests/p4/pyswitch_subparser.p4",
                                 "tests/stf/lookahead_compare.p4", "tests/stf/functions.p4"])
def test_whole_headers_and_copy_out_calls_reach_c_as_nodes(rel: str) -> None:
    """Programs whose last text was whole headers (copies, sets, sub-parsers, lookahead
    into a header) and calls that copy out: every line of their functions is a node."""
    prog = _compile(rel)
    c = census(prog.ir)
    assert "PyText" not in c
    assert c.get("HeaderCopy", 0) + c.get("HeaderSet", 0) + c.get("CopyOutCall", 0) >= 2


def _left_text(rel: str) -> list[str]:
    """The `PyText` lines of a program's functions (their bodies' too)."""
    return [st.text for it in _compile(rel).ir if isinstance(it, Function)
            for st in walk(it.body) if isinstance(st, PyText)]


def test_no_program_has_text_left() -> None:
    """No program of tests/p4, p4src and tests/stf has a `PyText` line (docs/pyswitch-ir.md,
    "Still PyText"): the last ones, a union stack's siblings made invalid and a varbit
    header's extract and emit, are `SiblingsInvalid`, `HeaderSet` (of `VbRead` and the
    fixed fields' values) and `EmitVarbit` nodes."""
    assert {rel: lines for rel in PROGRAMS if (lines := _left_text(rel))} == {}


@pytest.mark.parametrize(("rel", "want"), [
    ("tests/p4/native_stack_ops.p4", {"SiblingsInvalid": 2}),
    ("tests/stf/header_unions.p4", {"SiblingsInvalid": 2}),
    ("tests/p4/native_varbit.p4", {"VbRead": 9, "EmitVarbit": 6}),
    ("tests/stf/varbit.p4", {"VbRead": 2, "EmitVarbit": 2})])
def test_union_siblings_and_varbits_reach_c_as_nodes(rel: str, want: dict) -> None:
    """The four programs whose last text was a union stack's siblings and a varbit
    header's extract and emit: those are nodes (a varbit extract a `HeaderSet` whose
    varbit cell is a `VbRead`)."""
    ir = _compile(rel).ir
    stmts = [st for it in ir if isinstance(it, Function) for st in walk(it.body)]
    got: Counter[str] = Counter(type(st).__name__ for st in stmts
                                if isinstance(st, (SiblingsInvalid, EmitVarbit)))
    got.update(type(e.node).__name__ for st in stmts if isinstance(st, HeaderSet)
               for e in st.values if isinstance(e.node, VbRead))
    assert dict(got) == want


def test_printer_text_of_each_node() -> None:
    i, v = PyExpr("M[3]", 32), PyExpr("h4[2]", 32)
    assert stmt_lines(RegRead("R0", i, 8, v, (0, 255), guarded=True)) == [
        (0, "try: h4[2] = R0[M[3]]"), (0, "except IndexError: h4[2] = 0")]
    assert stmt_lines(RegRead("R0", PyExpr("3"), 8, v, (0, 255), guarded=False)) == [
        (0, "h4[2] = R0[3]")]
    assert stmt_lines(RegWrite("R1", i, 8, v, guarded=True)) == [
        (0, "try: R1[M[3]] = h4[2]"), (0, "except IndexError: pass")]
    assert stmt_lines(CounterCount("C0", i, 8, PyExpr("M[31]"), guarded=True)) == [
        (0, "if M[3] < 8: C0p[M[3]] += 1; C0b[M[3]] += M[31]")]
    assert stmt_lines(CounterCount("C1", PyExpr("0"), 8, PyExpr("M[31]"), guarded=False)) == [
        (0, "C1p[0] += 1; C1b[0] += M[31]")]
    assert stmt_lines(Exit()) == [(0, "raise _Exit()")]
    assert stmt_lines(Exit(("p_a", "p_b"))) == [(0, "raise _Exit((p_a, p_b,))")]
    assert stmt_lines(ParserError(2)) == [(0, "raise _PErr(2)")]
    assert stmt_lines(ParserError(1, PyExpr("pos + 4 > L"))) == [
        (0, "if pos + 4 > L: raise _PErr(1)")]
    assert stmt_lines(TableApply("T1", "_e1", "exact", (i, v), PyExpr("M[31]"))) == [
        (0, "_e1 = T1.exact.get((M[3], h4[2])) or T1.default"),
        (0, "if _e1.hit: _e1.counter[0] += 1; _e1.counter[1] += M[31]"),
        (0, "_e1.fn(S, M, *_e1.args)")]
    assert stmt_lines(TableApply("T2", "_e2", "lookup", (i,))) == [
        (0, "_e2 = T2.lookup(M[3])"), (0, "_e2.fn(S, M, *_e2.args)")]
    assert stmt_lines(TableApply("T3", "_e3", "default")) == [
        (0, "_e3 = T3.default"), (0, "_e3.fn(S, M, *_e3.args)")]
    assert stmt_lines(ActionCall("a3", (i, PyExpr("7")))) == [(0, "a3(S, M, M[3], 7)")]
    assert stmt_lines(ActionCall("a4")) == [(0, "a4(S, M)")]
    assert stmt_lines(PyText("pos += 4")) == [(0, "pos += 4")]


def test_printer_text_of_structured_statements() -> None:
    a = Assign(PyExpr("M[3]"), PyExpr("(h0[1] + 1) & 255"))
    assert stmt_lines(a) == [(0, "M[3] = (h0[1] + 1) & 255")]
    inner = If(PyExpr("_k1 == 2"), (Line(1, PyText("pass")),),
               (Line(1, ParserError(2)),))
    chain = If(PyExpr("_k1 == 1"), (Line(1, a), Line(1, Exit())), (Line(1, inner),),
               elif_=True)
    assert stmt_lines(chain) == [
        (0, "if _k1 == 1:"), (1, "M[3] = (h0[1] + 1) & 255"), (1, "raise _Exit()"),
        (0, "elif _k1 == 2:"), (1, "pass"), (0, "else:"), (1, "raise _PErr(2)")]
    nested = If(PyExpr("M[1] == 0"), (Line(1, PyText("while True:")), Line(2, inner)))
    assert stmt_lines(nested) == [
        (0, "if M[1] == 0:"), (1, "while True:"), (2, "if _k1 == 2:"), (3, "pass"),
        (2, "else:"), (3, "raise _PErr(2)")]
    drop = Seq((Assign(PyExpr("M[28]"), PyExpr("511")), Assign(PyExpr("M[38]"), PyExpr("0"))))
    assert stmt_lines(drop) == [(0, "M[28] = 511; M[38] = 0")]
    copy = If(PyExpr("h8[0]"), (Line(1, PyText("h10[:] = h8")),),
              (Line(1, Assign(PyExpr("h10[0]"), PyExpr("False"))),), inline=True)
    assert stmt_lines(copy) == [(0, "if h8[0]: h10[:] = h8"), (0, "else: h10[0] = False")]
    assert stmt_lines(If(PyExpr("not _c1"), (Line(1, Break()),), inline=True)) == [
        (0, "if not _c1: break")]
    assert stmt_lines(Loop((Line(1, Continue()), Line(1, Pass())))) == [
        (0, "while True:"), (1, "continue"), (1, "pass")]
    assert stmt_lines(HeaderAlias("h3", 3)) == [(0, "h3 = S[3]")]
    assert stmt_lines(Return()) == [(0, "return")]
    assert stmt_lines(Return(("p_a", "p_b"))) == [(0, "return (p_a, p_b,)")]
    assert stmt_lines(ExitScope((Line(1, a),))) == [
        (0, "try:"), (1, "M[3] = (h0[1] + 1) & 255"), (0, "except _Exit:"), (1, "pass")]
    assert stmt_lines(ParserScope((Line(1, PyText("pos += 4")),), PyExpr("M[41]"))) == [
        (0, "try:"), (1, "pos += 4"), (0, "except _PErr as _e:"), (1, "M[41] = _e.code")]


def _where(items: list) -> dict[str, int]:
    """Each statement of the functions of `items` (by its kind and first printed line)
    with the line the native path's messages give it (`pyswitch.native.lines`)."""
    lst = Listing(items)
    return {type(st).__name__ + ":" + stmt_lines(st)[0][1]: ln for it in items
            if isinstance(it, Function) for st, ln in located(lst, it.body, lst.defs[it.name] + 1)}


def test_lines_of_structured_statements() -> None:
    """The lines the native path numbers statements by: the Python's print, each
    statement's first line (a simple node's one line), the bodies where they print."""
    a = Assign(PyExpr("M[3]"), PyExpr("h0[1]"))
    body = (Line(1, PyText("h0 = S[0]")),
            Line(1, ExitScope((
                Line(1, If(PyExpr("h0[0]"), (Line(1, a), Line(1, Exit())),
                           (Line(1, If(PyExpr("M[2] == 1"), (Line(1, PyText("pass")),))),),
                           elif_=True)),
                Line(1, Assign(PyExpr("_v1"), PyExpr("M[3] + 1")))))),)
    items = [Function("ingress", ("S", "M"), body)]
    assert Listing(items).shown == [
        "def ingress(S, M):", "    h0 = S[0]", "    try:", "        if h0[0]:",
        "            M[3] = h0[1]", "            raise _Exit()", "        elif M[2] == 1:",
        "            pass", "        _v1 = M[3] + 1", "    except _Exit:", "        pass"]
    lines = _where(items)
    assert lines["Assign:M[3] = h0[1]"] == 5 and lines["Assign:_v1 = M[3] + 1"] == 9
    assert lines["If:if M[2] == 1:"] == 7 and lines["ExitScope:try:"] == 3
    assert lines["Exit:raise _Exit()"] == 6 and lines["PyText:h0 = S[0]"] == 2


def test_printer_text_of_parser_and_deparser_nodes() -> None:
    assert stmt_lines(ParserStart()) == [(0, "L = len(buf)"), (0, "pos = 0")]
    assert stmt_lines(ParserEnd()) == [(0, "return pos")]
    assert stmt_lines(Advance(PyExpr("14"))) == [(0, "pos += 14")]
    assert stmt_lines(Advance(PyExpr("_adv1 >> 3"))) == [(0, "pos += _adv1 >> 3")]
    assert stmt_lines(Extract("h2", "_st2", 8, 4)) == [
        (0, "h2[1:] = _st2.unpack_from(buf, pos)")]
    assert stmt_lines(Extract("h1", "_st1", 3, 2, (PyExpr("(a0 >> 4)"), PyExpr("(a0 & 15)"),
                                                    PyExpr("a1")))) == [
        (0, "a0, a1 = _st1.unpack_from(buf, pos)"), (0, "h1[1:] = ((a0 >> 4), (a0 & 15), a1,)")]
    assert stmt_lines(Extract("_hs3", "_st0", 2, 1, (PyExpr("(a0 >> 8)"),))) == [
        (0, "a0, = _st0.unpack_from(buf, pos)"), (0, "_hs3[1:] = ((a0 >> 8),)")]
    e0 = Emit("h0", "_st0")
    e1 = Emit("h1", "_st1", (PyExpr("((h1[1] << 4) | h1[2])"), PyExpr("h1[3]")))
    assert stmt_lines(e0) == [(0, "if h0[0]:"), (1, "out.append(_st0.pack(*h0[1:]))")]
    assert stmt_lines(e1) == [(0, "if h1[0]:"),
                              (1, "out.append(_st1.pack(((h1[1] << 4) | h1[2]), h1[3]))")]
    assert stmt_lines(EmitRun("_sd4", (e0, e1))) == [
        (0, "if h0[0] and h1[0]:"),
        (1, "out.append(_sd4.pack(*h0[1:], ((h1[1] << 4) | h1[2]), h1[3]))"),
        (0, "else:"), (1, "if h0[0]:"), (2, "out.append(_st0.pack(*h0[1:]))"),
        (1, "if h1[0]:"), (2, "out.append(_st1.pack(((h1[1] << 4) | h1[2]), h1[3]))")]
    assert stmt_lines(ParserError(PyExpr("M[7]"), PyExpr("not M[3]"))) == [
        (0, "if not M[3]: raise _PErr(M[7])")]


def test_lines_of_parser_and_deparser_nodes() -> None:
    """The parser's and deparser's nodes take every line they print."""
    fields = (PyExpr("(a0 >> 4)"), PyExpr("(a0 & 15)"))
    parser = (Line(1, ParserStart()),
              Line(1, ParserScope((Line(1, Extract("h1", "_st1", 1, 1, fields)),
                                   Line(1, Advance(PyExpr("1")))), PyExpr("M[5]"))),
              Line(1, ParserEnd()))
    run = EmitRun("_sd2", (Emit("h0", "_st0"), Emit("h1", "_st1", (PyExpr("h1[1]"),))))
    items = [Function("parser", ("S", "M", "buf"), parser),
             Function("deparser", ("S", "M", "out"), (Line(1, run),))]
    assert Listing(items).shown == [
        "def parser(S, M, buf):", "    L = len(buf)", "    pos = 0", "    try:",
        "        a0, = _st1.unpack_from(buf, pos)", "        h1[1:] = ((a0 >> 4), (a0 & 15),)",
        "        pos += 1", "    except _PErr as _e:", "        M[5] = _e.code",
        "    return pos", "", "def deparser(S, M, out):", "    if h0[0] and h1[0]:",
        "        out.append(_sd2.pack(*h0[1:], h1[1]))", "    else:", "        if h0[0]:",
        "            out.append(_st0.pack(*h0[1:]))", "        if h1[0]:",
        "            out.append(_st1.pack(h1[1]))"]
    lines = _where(items)
    assert lines["Advance:pos += 1"] == 7 and lines["ParserEnd:return pos"] == 10
    assert lines["EmitRun:if h0[0] and h1[0]:"] == 13


def test_printer_text_of_whole_headers() -> None:
    assert stmt_lines(HeaderCopy("h10", "h8")) == [(0, "h10[:] = h8")]
    assert stmt_lines(HeaderCopy("_hs34", "_hs35")) == [(0, "_hs34[:] = _hs35")]
    zero = PyExpr.of(Lit(0))
    assert stmt_lines(HeaderSet("h3", True, (zero, zero))) == [(0, "h3[:] = [True, 0, 0]")]
    assert stmt_lines(HeaderSet("h3", False, (zero, PyExpr.of(Lit(0xccbb, None, True))))) == [
        (0, "h3[:] = [False, 0, 0xccbb]")]
    assert stmt_lines(HeaderSet("h4", True, ())) == [(0, "h4[:] = [True]")]
    assert stmt_lines(HeaderSet("h4", True, (), listed=True)) == [(0, "h4[:] = [True, ]")]
    assert stmt_lines(HeaderSwap("h3", "h2")) == [(0, "h3[:], h2[:] = h2, h3[:]")]


def test_lines_of_whole_headers() -> None:
    """Whole headers' copies, sets and swaps take one line each; an inline ``if`` two."""
    copy = If(PyExpr.of(Field("h8", 0)), (Line(1, HeaderCopy("h10", "h8")),),
              (Line(1, Assign(PyExpr.of(Field("h10", 0)), PyExpr.of(Lit(False)))),),
              inline=True)
    body = (Line(1, copy),
            Line(1, HeaderSet("h3", True, (PyExpr.of(Lit(0)), PyExpr.of(Local("_v1"))))),
            Line(1, HeaderSwap("h3", "h2")))
    items = [Function("ingress", ("S", "M"), body)]
    assert Listing(items).shown == ["def ingress(S, M):", "    if h8[0]: h10[:] = h8",
                                    "    else: h10[0] = False", "    h3[:] = [True, 0, _v1]",
                                    "    h3[:], h2[:] = h2, h3[:]"]
    lines = _where(items)
    assert lines["HeaderCopy:h10[:] = h8"] == 2 and lines["Assign:h10[0] = False"] == 3
    assert lines["HeaderSwap:h3[:], h2[:] = h2, h3[:]"] == 5


def _varbit_nodes() -> tuple[HeaderSet, EmitVarbit, SiblingsInvalid]:
    """A varbit header's extract (``h1``: 8 bits, the varbit, 8 bits) and emit, and a
    union stack's siblings made invalid, as the compiler makes them."""
    pos1 = Bin("+", Local("pos"), Lit(1), bare=True)
    fixed = [PyExpr.of(Bin("&", Local("_vf3", 8), Lit(255, 8, hexed=True), 8)),
             PyExpr.of(VbRead(Local("_vn1"), pos1)),
             PyExpr.of(Bin("&", Bin(">>", Local("_vf4", 16), Lit(8), 16),
                           Lit(255, 8, hexed=True), 8))]
    joined = Bin("|", Bin("<<", Field("h1", 1, 8), Lit(8), 16), Field("h1", 3, 8), 16,
                 bare=True)
    emit = EmitVarbit("h1", (PyExpr.of(VbBytes(Field("h1", 2))),
                             PyExpr.of(ToBytes(Paren(joined), 2))))
    sibs = SiblingsInvalid((("h6", "h7"), ("h8", "h9")), PyExpr.of(Field("h10", 1, 32)))
    return HeaderSet("h1", True, tuple(fixed)), emit, sibs


def test_printer_text_of_varbits_and_union_siblings() -> None:
    extract, emit, sibs = _varbit_nodes()
    assert stmt_lines(extract) == [(0, "h1[:] = [True, (_vf3 & 0xff), (_vn1, int.from_bytes("
                                    "buf[pos + 1:pos + 1 + _vn1 // 8], 'big')), "
                                    "((_vf4 >> 8) & 0xff)]")]
    assert stmt_lines(emit) == [(0, "if h1[0]: out.append((h1[2][1].to_bytes(h1[2][0] // 8, "
                                 "'big') if h1[2] else b'') + ((h1[1] << 8) | h1[3])"
                                 ".to_bytes(2, 'big'))")]
    assert stmt_lines(sibs) == [(0, "for _s in ((h6, h7, ), (h8, h9, ), )[h10[1]]: "
                                 "_s[0] = False")]


def test_module_declarations() -> None:
    """The module's `StructDecl`s and `Helper`s: printed as the compiler wrote them; the
    native path numbers their lines as printed (cgen reads a struct's format from its
    node, and the C calls its own helpers)."""
    fmt = StructDecl("_st0", ">BBH")
    assert item_text(fmt) == "_st0 = _struct.Struct('>BBH')"
    assert item_text(Helper("pack_bits")).startswith("def _pack_bits(parts):\n")
    stacks = item_text(Helper("stacks"))
    assert "def _hs_at(elems, i, what, nfields):" in stacks and "def _hs_last(" in stacks
    fn = Function("verify", ("S", "M"), (Line(1, Pass()),))
    items = [fmt, fn, Helper("stacks")]
    assert module_text(items) == f"_st0 = _struct.Struct('>BBH')\n\n{item_text(fn)}\n\n{stacks}\n"
    lst = Listing(items)
    assert lst.shown == module_text(items).rstrip("\n").split("\n")
    assert lst.defs == {"verify": 3} and lst.structs == [(1, fmt)]


def test_no_module_text_left() -> None:
    """No program of tests/p4, p4src and tests/stf has a module-level text block: its
    structs are `StructDecl`s, its helpers `Helper`s."""
    assert [rel for rel in PROGRAMS if any(isinstance(it, ModuleText)
                                           for it in _compile(rel).ir)] == []


def test_printer_text_of_copy_out_calls() -> None:
    x, y = PyExpr.of(Local("p_x")), PyExpr.of(Lit(3))
    assert stmt_lines(CopyOutCall("a0", (x, y), "_r2")) == [(0, "_r2 = a0(S, M, p_x, 3)")]
    back = (Line(1, Assign(PyExpr.of(Slot(0)), PyExpr.of(Elem("_r1", 0)))), Line(1, Return()))
    assert stmt_lines(CopyOutCall("a0", (x,), "_r1", on_exit=back, values=True)) == [
        (0, "try:"), (1, "_r1 = a0(S, M, p_x)"), (0, "except _Exit as _x:"),
        (1, "_r1 = _x.args[0]"), (1, "M[0] = _r1[0]"), (1, "return")]
    assert stmt_lines(CopyOutCall("a0", (), None, on_exit=(Line(1, Return()),),
                                  values=True)) == [
        (0, "try:"), (1, "a0(S, M)"), (0, "except _Exit as _x:"), (1, "return")]
    assert stmt_lines(CopyOutCall("a0", (x,), "_r1", on_exit=(Line(1, Exit(("p_x",))),))) == [
        (0, "try:"), (1, "_r1 = a0(S, M, p_x)"), (0, "except _Exit:"),
        (1, "raise _Exit((p_x,))")]
    assert stmt_lines(CopyOutCall("a2", (y,), "_r3", data=True, on_exit=(Line(1, Exit()),),
                                  values=True))[:2] == [(0, "try:"),
                                                        (1, "_r3 = a2(S, M, 3, *data)")]


def test_lines_of_copy_out_calls() -> None:
    """A call that copies out: ``try:``, the call, the handler's lines as printed."""
    back = Assign(PyExpr.of(Slot(0)), PyExpr.of(Elem("_r1", 0)))
    call = CopyOutCall("a0", (PyExpr.of(Field("h0", 2)),), "_r1",
                       on_exit=(Line(1, back), Line(1, Exit())), values=True)
    wrap = CopyOutCall("a2", (PyExpr.of(Lit(0)),), None, data=True,
                       on_exit=(Line(1, Exit()),), values=True)
    items = [Function("a1", ("S", "M"), (Line(1, call), Line(1, back),
                                         Line(1, CopyOutCall("a0", (), "_r2")))),
             Function("a2_t", ("S", "M", "*data"), (Line(1, wrap),))]
    assert Listing(items).shown == [
        "def a1(S, M):", "    try:", "        _r1 = a0(S, M, h0[2])", "    except _Exit as _x:",
        "        _r1 = _x.args[0]", "        M[0] = _r1[0]", "        raise _Exit()",
        "    M[0] = _r1[0]", "    _r2 = a0(S, M)", "", "def a2_t(S, M, *data):", "    try:",
        "        a2(S, M, 0, *data)", "    except _Exit as _x:", "        raise _Exit()"]
    lst = Listing(items)
    got = [(type(st).__name__, ln) for st, ln in located(lst, items[0].body, 2)]
    assert got == [("CopyOutCall", 2), ("Assign", 6), ("Exit", 7), ("Assign", 8),
                   ("CopyOutCall", 9)]


@pytest.mark.parametrize("rel", PROGRAMS)
def test_each_statement_is_numbered_at_its_printed_line(rel: str) -> None:
    """Every statement of every function is numbered at a line that shows it (its first
    printed line, after the colon of an inline ``if``; ``elif`` for the `If` an ``elif``
    prints), as the messages need."""
    ir = _compile(rel).ir
    lst = Listing(ir)
    for it in ir:
        if isinstance(it, Function):
            at = lst.defs[it.name]
            assert lst.shown[at - 1] == f"def {it.name}({', '.join(it.params)}):"
            for st, ln in located(lst, it.body, at + 1):
                first = stmt_lines(st)[0][1]
                shown = lst.shown[ln - 1].strip()
                assert shown in (first, "el" + first) or shown.endswith(": " + first), ln


def test_native_path_reads_no_python() -> None:
    """No module of pyswitch/native, nor the externs' C lowering, imports ``ast``: the C
    is lowered from the IR's nodes, never from a Python syntax tree."""
    mods = [*(ROOT / "pyswitch" / "native").glob("*.py"),
            *(ROOT / "pyswitch" / "externs").glob("*.py")]
    assert len(mods) > 10
    for p in mods:
        tree = ast.parse(p.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                    for a in n.names} | {n.module for n in ast.walk(tree)
                                         if isinstance(n, ast.ImportFrom)}
        assert "ast" not in imported, p.name
    assert not (ROOT / "pyswitch" / "native" / "irtree.py").exists()
    assert not (ROOT / "pyswitch" / "native" / "exprtree.py").exists()


def main() -> None:
    """``--update``: rewrite tests/ir_golden.json (census always; digests too only with
    ``--digests``, when the generated Python is meant to change); otherwise print the
    census table."""
    old = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {"programs": {}}
    new = {rel: record(rel) for rel in PROGRAMS}
    if "--update" in sys.argv:
        for rel, r in new.items():
            if "--digests" not in sys.argv and rel in old["programs"]:
                r["python_sha256"] = old["programs"][rel]["python_sha256"]
        doc = {"about": old.get("about", ""), "programs": new}
        GOLDEN.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for rel, r in new.items():
        print(f"{rel:45} {r['census']}")


if __name__ == "__main__":
    main()
