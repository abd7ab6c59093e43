"""Expressions as nodes of the intermediate form (`pyswitch.ir.exprs`, docs/pyswitch-ir.md).

- The Python back end's text of each node kind (what the compiler wrote before the nodes).
- The C back end lowers each node kind from its fields, one method per kind
  (`pyswitch.native.exprs.Expressions.KINDS`): the steps its Python does, each bounded.
- In every program of tests/p4, p4src and tests/stf, each expression that is a node prints
  as its `PyExpr.code`; no program has text left in its expressions.
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path

import pytest

from pyswitch.compiler.model import BOOL, E, Emitter, nlit, too_short, valid_e
from pyswitch.ir import Assign, Function, PyExpr, expressions, walk
from pyswitch.ir.exprs import (
    KINDS,
    ActionRun,
    All,
    AnyOf,
    Bin,
    BufRead,
    Call,
    Concat,
    Cond,
    Digest,
    Elem,
    Elems,
    Field,
    Hit,
    Lit,
    Local,
    Neg,
    Not,
    Opaque,
    Paren,
    Pick,
    Range,
    SCmp,
    SignExt,
    Slot,
    SShr,
    Str,
    ToBytes,
    VbBytes,
    VbDigest,
    VbRead,
    VbValue,
    Wrap,
    opaque,
    operands,
    text,
)
from pyswitch.native.exprs import Expressions
from pyswitch.program import compile_p4
from pyswitch.types import Bits

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(str(p.relative_to(ROOT)) for d in ("tests/p4", "p4src", "tests/stf")
                  for p in (ROOT / d).glob("*.p4"))

X, Y = Slot(3, 8), Field("h2", 1, 8)
CASES = [
    (Lit(5), "5"),
    (Lit(0xFFFF, 16, hexed=True), "0xffff"),
    (Lit(True), "True"),
    (Lit(-1), "-1"),
    (Slot(12, 9), "M[12]"),
    (Field("h3", 2, 16), "h3[2]"),
    (Local("p_port", 9), "p_port"),
    (Elem("_r3", 1, 9), "_r3[1]"),
    (Bin("|", Paren(X), Lit(1 << 33), bare=True), "(M[3]) | 8589934592"),
    (Bin("+", Lit(2), Bin("//", Local("_vn6"), Lit(8), bare=True), bare=True), "2 + _vn6 // 8"),
    (Opaque("_random(0, 7)", 3), "_random(0, 7)"),
    (Bin("&", X, Lit(15)), "(M[3] & 15)"),
    (Bin("==", Y, Lit(1)), "(h2[1] == 1)"),
    (Bin(">>", X, Lit(4), 8), "(M[3] >> 4)"),
    (Bin("or", Local("a"), Not(Local("b"))), "(a or (not b))"),
    (Bin(">", Bin("+", Local("pos"), Lit(14), bare=True), Local("L"), bare=True),
     "pos + 14 > L"),
    (Wrap("+", X, Y, 8), "((M[3] + h2[1]) & 255)"),
    (Wrap("*", X, Y, 16), "((M[3] * h2[1]) & 0xffff)"),
    (Wrap("<<", X, Lit(3), 8), "((M[3] << 3) & 255)"),
    (Neg(X, 8), "(-M[3] & 255)"),
    (Not(Hit("_e4")), "(not _e4.hit)"),
    (Cond(Local("c"), X, Lit(0), 8), "(M[3] if c else 0)"),
    (Cond(Local("c"), Lit(1), Lit(0), 1), "(1 if c else 0)"),
    (SignExt(X, 8, 16), "(((M[3]) ^ 128) - 128 & 0xffff)"),
    (SCmp("<", X, Y, 8), "((M[3] ^ 128) < (h2[1] ^ 128))"),
    (Concat(X, Y, 8, 16), "((M[3] << 8) | h2[1])"),
    (All((Bin("==", Local("_k0"), Lit(6), bare=True),
          Bin("==", Bin("&", Local("_k1"), Lit(240), bare=True), Lit(64), bare=True))),
     "_k0 == 6 and _k1 & 240 == 64"),
    (Range(Lit(1), Local("_k0"), Lit(0x1FF, hexed=True)), "1 <= _k0 <= 0x1ff"),
    (AnyOf((Bin("==", ActionRun("_e4"), Lit(2), bare=True),
            Bin("==", ActionRun("_e4"), Lit(3), bare=True))),
     "_e4.aidx == 2 or _e4.aidx == 3"),
    (Not(Bin("==", Y, Lit(5)), bare=True), "not (h2[1] == 5)"),
    (Hit("_e7"), "_e7.hit"),
    (Call("_shl", (X, Y, Lit(8)), 8), "_shl(M[3], h2[1], 8)"),
    (Call("_sat_s", (X, Y, Lit(-1), Lit(8)), 8), "_sat_s(M[3], h2[1], -1, 8)"),
    (Call("min", (Bin("+", X, Y, bare=True), Lit(255)), 8), "min(M[3] + h2[1], 255)"),
    (Digest("crc32", (Field("h3", 3), Field("h3", 4)), (16, 8)),
     "_crc32(((h3[3] << 8) | h3[4]).to_bytes(3, 'big'))"),
    (Digest("csum16", (Field("h1", 1), Field("h1", 2), X), (4, 4, 8)),
     "_csum16i((((h1[1]) << 12) + ((h1[2]) << 8) + (M[3])))"),
    (Digest("identity", (Local("_v17"),), (64,)), "((_v17) & 0xffffffffffffffff)"),
    (Digest("csum16", (Field("h0", 1),), (16,), payload=5),
     "_csum16(((h0[1]).to_bytes(2, 'big') + M[5]))"),
    (Pick(("h1", "h2", "h3"), Field("h5", 1, 32)), "(h1, h2, h3, )[h5[1]]"),
    (BufRead(Local("pos"), 2, 16), "int.from_bytes(buf[pos:pos + 2], 'big')"),
    (BufRead(Bin("+", Bin("+", Bin("+", Local("pos"), Lit(1), bare=True),
                          Bin("//", Local("_vn1"), Lit(8), bare=True), bare=True), Lit(8),
                 bare=True), 1, 8),
     "int.from_bytes(buf[pos + 1 + _vn1 // 8 + 8:pos + 1 + _vn1 // 8 + 8 + 1], 'big')"),
    (SShr(Field("h1", 3, 8), Lit(2), 8), "(((h1[3] ^ 128) - 128 >> 2) & 255)"),
    (SShr(X, Call("min", (Y, Lit(16))), 16),
     "(((M[3] ^ 0x8000) - 0x8000 >> min(h2[1], 16)) & 0xffff)"),
    (Bin("==", VbValue(Field("h1", 2)), VbValue(Field("h2", 2))),
     "((h1[2][1] if h1[2] else 0) == (h2[2][1] if h2[2] else 0))"),
    (VbDigest("crc16", (Field("h1", 1), Field("h1", 2), Field("h2", 2)), (8, None, None)),
     "_crc16(_pack_bits(((8, h1[1]), (h1[2] or (0, 0)), (h2[2] or (0, 0)), )))"),
    (VbDigest("csum16", (Field("h1", 2),), (None,), payload=4),
     "_csum16((_pack_bits(((h1[2] or (0, 0)), )) + M[4]))"),
    (Call("_hs_at", (Elems(("h1", "h2")), Bin("&", Local("_v6"), Lit(1)), Str("p.p4:44:13: x"),
                     Lit(-1))), "_hs_at((h1, h2, ), (_v6 & 1), 'p.p4:44:13: x', -1)"),
    (Call("_hs_last", (Elems(("h1",)), Field("h3", 1, 32), Str("it's"))),
     """_hs_last((h1, ), h3[1], "it's")"""),
    (VbRead(Local("_vn1"), Bin("+", Local("pos"), Lit(1), bare=True)),
     "(_vn1, int.from_bytes(buf[pos + 1:pos + 1 + _vn1 // 8], 'big'))"),
    (ToBytes(Paren(Field("h1", 1, 8)), 1), "(h1[1]).to_bytes(1, 'big')"),
    (ToBytes(Paren(Bin("|", Bin("<<", Field("h7", 1, 4), Lit(4), 8), Field("h7", 2, 4), 8,
                       bare=True)), 1), "((h7[1] << 4) | h7[2]).to_bytes(1, 'big')"),
    (VbBytes(Field("h4", 1)), "(h4[1][1].to_bytes(h4[1][0] // 8, 'big') if h4[1] else b'')"),
]


def test_every_kind_has_a_case() -> None:
    def kinds(n):  # noqa: ANN001, ANN202
        return {type(n)}.union(*(kinds(x) for x in operands(n)))

    assert set().union(*(kinds(n) for n, _ in CASES)) == set(KINDS)


@pytest.mark.parametrize(("node", "want"), CASES, ids=[t for _, t in CASES])
def test_printer_text_of_each_expression_node(node, want: str) -> None:  # noqa: ANN001
    assert text(node) == want
    assert PyExpr.of(node).code == want


def test_every_node_kind_has_its_c_lowering() -> None:
    """The C back end's table of lowerings covers every expression node kind, no more."""
    assert set(Expressions.KINDS) == set(KINDS)


def test_c_of_node_kinds_from_their_fields() -> None:
    """The C of node kinds with P4's width semantics, lowered from their fields (on
    ina.p4's ingress: ``M[3]`` is a bool slot, ``h2[1]`` a field of 8 bits), with the
    interval the IR's rules give the node (`Bounds.of`: a bool's sum 1..2 not wrapped, its
    sign extension and signed shift below the sign bit)."""
    from pyswitch.ir.bounds import Bounds
    from pyswitch.ir.exprs import Concat, Cond, Neg, Not, Range, SCmp, SignExt, SShr, Wrap
    from pyswitch.native.cgen import Unit

    prog = _compile("p4src/ina.p4")
    u = Unit(prog.ir, prog.meta, "x")
    f = u.funcs["ingress"]
    f.aliases["h2"] = 3
    f.irb = Bounds(prog.meta["mbounds"], prog.meta["hbounds"], {"h2": 3})
    m3, h = "st->m[3]", "st->s[23]"
    cases = [
        (Wrap("+", X, Lit(1), 8), f"(({m3} + ((V)1LL)) & ((V)255LL))", (1, 2)),
        (Neg(X, 8), f"((-{m3}) & ((V)255LL))", (0, 255)),
        (SignExt(X, 8, 16), f"((({m3} ^ ((V)128LL)) - ((V)128LL)) & ((V)65535LL))", (0, 1)),
        (SCmp("<", X, Y, 8), f"((({m3} ^ ((V)128LL)) < ({h} ^ ((V)128LL))))", (0, 1)),
        (Concat(X, Y, 8, 16), f"(({m3} << (int)((V)8LL)) | {h})", (0, 511)),
        (Range(Lit(1), X, Lit(7)), f"((((V)1LL) <= {m3}) && ({m3} <= ((V)7LL)))", (0, 1)),
        (Cond(Not(Y), X, Lit(-5)), f"((!{h}) ? {m3} : (-((V)5LL)))", (-5, 1)),
        (SShr(X, Lit(3), 8),
         f"(((({m3} ^ ((V)128LL)) - ((V)128LL)) >> (int)((V)3LL)) & ((V)255LL))", (0, 0)),
        (Paren(Bin("^", X, Y)), f"({m3} ^ {h})", (0, 255)),
        (Lit(True), "1", (1, 1)),
    ]
    for node, c, iv in cases:
        x = u.ex(f, node)
        assert (x.c, (x.lo, x.hi)) == (c, iv), text(node)


def test_compiled_expressions_carry_their_nodes() -> None:
    """The compiler's side: constants become `Lit` in the compiler's spelling, a name
    assigned is a `Local`, the parser's checks and valid bits are nodes."""
    assert E("0x1ff", Bits(9), 0x1FF).as_node() == Lit(0x1FF, 9, hexed=True)
    assert E("7", Bits(9), 7).as_node() == Lit(7, 9)
    assert E("True", BOOL, True).as_node() == Lit(True)
    assert E("_random(0, 7)", Bits(3)).as_node() == Opaque("_random(0, 7)", 3)
    assert E("_random(0, 7)", Bits(3)).py() == PyExpr("_random(0, 7)", 3)
    assert nlit(255) == Lit(255) and nlit(256) == Lit(256, hexed=True)
    assert too_short(20).code == "pos + 20 > L" and too_short(20).node is not None
    em = Emitter()
    em.assign("_v3", E.of(Wrap("+", X, Lit(1), 8), Bits(8)))
    em.assign(valid_e("h4"), "False")
    em.assign("M[7]", "_x")
    a, b, c = (ln.stmt for ln in em.lines)
    assert isinstance(a, Assign) and a.target.node == Local("_v3")
    assert a.value.node == Wrap("+", X, Lit(1), 8) and a.value.code == "((M[3] + 1) & 255)"
    assert b.target.node == Field("h4", 0) and b.value.node == Lit(False)
    assert c.target.node is None and c.value.node is None  # text stays text


def _compile(rel: str):  # noqa: ANN202 - a Program
    with contextlib.chdir(ROOT):
        return compile_p4(rel, ["p4src/include"])


@pytest.mark.parametrize("rel", PROGRAMS)
def test_program_expression_nodes_print(rel: str) -> None:
    """Every expression node of the program prints as its `code` (the Python's tree of
    it that code's)."""
    nodes = [e for it in _compile(rel).ir if isinstance(it, Function)
             for st in walk(it.body) for e in expressions(st) if e.node is not None]
    assert nodes
    want = [ast.dump(ast.parse(e.code, mode="eval").body) for e in nodes]
    assert [text(e.node) for e in nodes] == [e.code for e in nodes]
    assert [ast.dump(ast.parse(text(e.node), mode="eval").body) for e in nodes] == want


@pytest.mark.parametrize(("rel", "digests"), [("p4src/ina.p4", 4), ("p4src/switchml.p4", 2)])
def test_ina_and_switchml_expressions_are_nodes(rel: str, digests: int) -> None:
    """ina.p4, switchml.p4: every expression is a node through and through, the checksums'
    and hashes' digests too (`Digest`)."""
    es = [e for it in _compile(rel).ir if isinstance(it, Function)
          for st in walk(it.body) for e in expressions(st)]
    assert all(e.node is not None and not opaque(e.node) for e in es)
    assert sum(len(_digests(e.node)) for e in es) == digests


@pytest.mark.parametrize("rel", PROGRAMS)
def test_no_expression_is_text(rel: str) -> None:
    """No program of tests/p4, p4src and tests/stf has an expression still text: the
    stacks' picks (`Pick`), the packet's bytes (`BufRead`), signed shifts (`SShr`), the
    comparisons of headers, structs and varbits (`VbValue`), the digests of field lists
    with varbits (`VbDigest`), the functions' results are nodes too."""
    es = [e for it in _compile(rel).ir if isinstance(it, Function)
          for st in walk(it.body) for e in expressions(st)]
    assert [e.code for e in es if e.node is None or opaque(e.node)] == []


def test_stack_picks_are_nodes() -> None:
    """A stack element picked at run time: ``extract(hs.next)``'s `Pick`, and the helpers'
    ``_hs_at`` (an extract's strict one with -1 fields: StackIndexError outside) and
    ``_hs_last`` as the `Call` an `Assign` holds, no longer `PyText`."""
    ir = _compile("tests/p4/native_stack_index.p4").ir
    calls = [(st.target.node, st.value.node) for it in ir if isinstance(it, Function)
             for st in walk(it.body) if isinstance(st, Assign)
             and isinstance(st.value.node, Call) and st.value.node.fn.startswith("_hs_")]
    assert all(isinstance(t, Local) and t.name.startswith("_hs") for t, _ in calls)
    at = [c for _, c in calls if c.fn == "_hs_at"]
    assert [c.args[3] for c in at] == [Lit(-1)] + [Lit(1)] * (len(at) - 1)
    assert all(isinstance(c.args[0], Elems) and c.args[0].elems == ("h1", "h2", "h3", "h4")
               and isinstance(c.args[2], Str) and "header stack index" in c.args[2].value
               for c in at)
    last = [c for _, c in calls if c.fn == "_hs_last"]
    assert len(last) == 1 and last[0].args[1] == Field("h5", 1, 32)  # the next index
    ir = _compile("tests/stf/header_stacks.p4").ir
    kinds = {type(e.node).__name__ for it in ir if isinstance(it, Function)
             for st in walk(it.body) for e in expressions(st)}
    assert "Pick" in kinds


def _digests(n):  # noqa: ANN001, ANN202
    if isinstance(n, Digest):
        return [n]
    return [x for m in operands(n) for x in _digests(m)]


@pytest.mark.parametrize("rel", ["p4src/ina.p4", "p4src/switchml.p4", "tests/p4/pyswitch_hash.p4"])
def test_digests_reach_c_as_nodes(rel: str, monkeypatch) -> None:  # noqa: ANN001
    """The native path lowers each `Digest` (and ``_hmod``, a `Call`) from its fields
    (`Hash.c_expr`); the extern has no lowering of a call's syntax tree left."""
    from pyswitch.externs.hashing import Hash
    from pyswitch.native.cgen import Unit

    prog = _compile(rel)
    want = Unit(prog.ir, prog.meta, "m").translate(True)
    seen: list[str] = []
    real_expr = Hash.c_expr

    def spy(self, t, f, node, line):  # noqa: ANN001, ANN202
        seen.append(type(node).__name__)
        return real_expr(self, t, f, node, line)

    monkeypatch.setattr(Hash, "c_expr", spy)
    assert Unit(prog.ir, prog.meta, "m").translate(True) == want
    assert "Digest" in seen and set(seen) <= {"Digest", "Call", "VbDigest"}
    assert not hasattr(Hash, "c_call")
