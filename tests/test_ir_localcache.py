"""The metadata-read cache as a pass over the IR (`pyswitch.ir.localcache`): the same Python
as the text pass (`pyswitch.compiler.localcache`) on every function of the test programs
and on random functions, the facts read from the nodes, text left to the text pass."""

from __future__ import annotations

import ast
import contextlib
import random
from pathlib import Path

import pytest

from pyswitch.compiler.localcache import cache_metadata_reads
from pyswitch.ir import (
    ActionCall,
    Assign,
    CopyOutCall,
    CounterCount,
    Emit,
    EmitRun,
    EmitVarbit,
    ExitScope,
    Function,
    HeaderAlias,
    HeaderCopy,
    HeaderSet,
    HeaderSwap,
    If,
    Line,
    Loop,
    ParserError,
    PyExpr,
    PyText,
    RegRead,
    RegWrite,
    Return,
    Seq,
    SiblingsInvalid,
    TableApply,
    function_lines,
)
from pyswitch.ir.exprs import (
    All,
    Bin,
    BufRead,
    Call,
    Concat,
    Cond,
    Digest,
    Elems,
    Expr,
    Field,
    Lit,
    Local,
    Neg,
    Not,
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
)
from pyswitch.ir.localcache import cache_reads, needs_text
from pyswitch.program import compile_p4

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(str(p.relative_to(ROOT)) for d in ("tests/p4", "p4src", "tests/stf")
                  for p in (ROOT / d).glob("*.p4")) + ["examples/l2_switch.p4"]


def _no_text(lines: list[str]) -> list[str]:
    raise AssertionError("fell back to the text pass")


def _ir_pass(fn: Function) -> list[str]:
    return cache_reads(fn, cache_metadata_reads if needs_text(fn) else _no_text)


@pytest.mark.parametrize("rel", PROGRAMS)
def test_programs_as_the_text_pass(rel: str) -> None:
    with contextlib.chdir(ROOT):
        prog = compile_p4(rel, ["p4src/include"])
    fns = [it for it in prog.ir if isinstance(it, Function) and it.cache_reads]
    for fn in fns:
        assert _ir_pass(fn) == cache_metadata_reads(function_lines(fn)), fn.name
    assert not any(needs_text(fn) for fn in fns)  # no text left: every function on the IR route


def _e(n: Expr) -> PyExpr:
    return PyExpr.of(n)


def _fn(*stmts: tuple[int, object]) -> Function:
    return Function("f", ("S", "M"), tuple(Line(d, s) for d, s in stmts))  # type: ignore[arg-type]


M3 = Slot(3, 8)


def test_a_run_reads_a_local() -> None:
    fn = _fn((1, Assign(_e(Local("x", 8)), _e(Wrap("+", M3, M3, 8)))),
             (1, RegWrite("R0", _e(M3), 8, _e(Slot(1, 8)), False)),
             (1, ActionCall("a1", (_e(M3),))))
    assert _ir_pass(fn) == ["def f(S, M):", "    _m3 = M[3]", "    x = ((_m3 + _m3) & 255)",
                            "    R0[_m3] = M[1]", "    a1(S, M, M[3])"]


def test_a_table_apply_ends_a_run_after_its_look_up() -> None:
    """The look-up's keys are in the run; the action's call lets ``M`` out."""
    fn = _fn((1, Assign(_e(Local("x", 8)), _e(Bin("&", M3, M3)))),
             (1, TableApply("T0", "_e0", "exact", (_e(M3),), _e(M3))))
    assert _ir_pass(fn)[1:4] == ["    _m3 = M[3]", "    x = (_m3 & _m3)",
                                 "    _e0 = T0.exact.get(_m3) or T0.default"]
    assert _ir_pass(fn)[4] == "    if _e0.hit: _e0.counter[0] += 1; _e0.counter[1] += _m3"


def test_text_goes_to_the_text_pass() -> None:
    fn = _fn((1, PyText("x = M[3] + M[3] + M[3]")))
    assert needs_text(fn)
    assert cache_reads(fn, cache_metadata_reads)[1] == "    _m3 = M[3]"


def test_a_taken_name_or_no_m_leaves_it() -> None:
    body = ((1, Assign(_e(Local("_m9", 8)), _e(Bin("+", Bin("+", M3, M3), M3)))),)
    assert _ir_pass(_fn(*body)) == function_lines(_fn(*body))
    fn = Function("g", ("S", "N"), _fn(*body).body)
    assert _ir_pass(fn) == function_lines(fn)


# -- random functions: the IR pass and the text pass give the same lines -------------------
SLOTS = (1, 3, 9, 17, 25, 33, 2, 10)  # equal modulo 8 and 16: the loads' order is the sets'


class _Gen:
    """Random functions; `new`: the later kinds too (`Pick` ... `Str`, a digest over the
    payload, the whole headers' statements, `CopyOutCall` with and without its handler),
    drawn after the others so that the old seeds give the old functions; `varbit`: the
    varbit and union kinds too (`VbRead`, `ToBytes`, `VbBytes`, `EmitVarbit`,
    `SiblingsInvalid`), drawn after those."""

    def __init__(self, seed: int, new: bool = False, varbit: bool = False) -> None:
        self.r = random.Random(seed)
        self.new = new
        self.varbit = varbit

    def leaf(self) -> Expr:
        c = self.r.randrange(5)
        if c < 3:
            return Slot(self.r.choice(SLOTS), 8)
        return Lit(self.r.randrange(300)) if c == 3 else Field("h0", 1, 8)

    def ex(self, d: int = 0) -> Expr:  # noqa: C901 - one case per kind
        if d > 1 or self.r.random() < 0.3:
            return self.leaf()
        a, b = self.ex(d + 1), self.ex(d + 1)
        c = self.r.randrange(12)
        out: list[Expr] = [
            Bin(self.r.choice(["&", "|", "==", "<"]), a, b), Wrap("+", a, b, 8), Neg(a, 8),
            Not(a), Cond(Bin("==", a, b), b, a), SignExt(a, 8, 16), SCmp("<", a, b, 8),
            Concat(a, b, 8, 16), Call("min", (a, b)), Digest("crc16", (a, b), (8, 8)),
            Digest("csum16", (a, b), (8, 8)), Paren(a)]
        if self.new and self.r.random() < 0.4:
            if self.varbit and self.r.random() < 0.5:
                return self.r.choice([VbRead(a, b), ToBytes(Paren(a), 2), VbBytes(a)])
            return self.new_ex(a, b)
        return out[c]

    def payload(self) -> int | None:
        """A payload's slot, now and then (one read in a run of several falls back)."""
        return self.r.randrange(40, 80) if self.r.random() < 0.25 else None

    def new_ex(self, a: Expr, b: Expr) -> Expr:
        els = Elems(("h1", "h2"))
        return self.r.choice([
            BufRead(a, 2, 16), SShr(a, b, 8), SShr(a, Call("min", (b, Lit(8))), 8), VbValue(a),
            VbDigest("crc16", (a, b), (8, None)), VbDigest("crc32", (b,), (None,), self.payload()),
            Digest("crc32", (a, b), (8, 8), self.payload()), Pick(("h1", "h2"), a),
            Call("_hs_at", (els, a, Str("p.p4:1:2: i"), Lit(2))),
            Call("_hs_last", (els, a, Str("p.p4:1:2: i")))])

    def cond(self) -> PyExpr:
        """A condition: an expression, or a select's range or keys (whole conditions)."""
        a, b = self.ex(1), self.ex(1)
        return _e(self.r.choice([self.ex(), Range(Lit(1), a, b),
                                 All((Bin("==", a, b, bare=True), Bin("==", b, a, bare=True)))]))

    def target(self) -> PyExpr:
        c = self.r.randrange(3)
        return _e(Slot(self.r.choice(SLOTS), 8) if c == 0 else
                  Local("x", 8) if c == 1 else Field("h0", 1, 8))

    def simple(self) -> object:  # noqa: C901 - one case per kind
        c = self.r.randrange(11)
        g = self.r.random() < 0.5
        if c <= 2:
            return Assign(self.target(), _e(self.ex()))
        if c == 3:
            return RegRead("R0", _e(self.ex()), 8, self.target(), (0, 255), g)
        if c == 4:
            return RegWrite("R0", _e(self.ex()), 8, _e(self.ex()), g)
        if c == 5:
            return CounterCount("C0", _e(self.ex()), 8, _e(self.ex()), g)
        if c == 6:
            return ActionCall("a1", (_e(self.ex()),))
        if c == 7:
            kind = self.r.choice(["exact", "lookup", "default"])
            keys = () if kind == "default" else tuple(
                _e(self.ex()) for _ in range(self.r.randint(1, 2)))
            return TableApply("T0", "_e0", kind, keys,  # type: ignore[arg-type]
                              _e(self.ex()) if g else None)
        if c == 8:
            return ParserError(2, self.cond() if g else None)
        if c == 9:
            return Seq(tuple(Assign(self.target(), _e(self.ex()))
                             for _ in range(self.r.randint(2, 3))))
        return HeaderAlias("h0", 0)

    def one_line(self) -> object:
        if self.new and self.r.random() < 0.3:
            return self.r.choice([HeaderCopy("h1", "h2"), self.header_set()])
        return self.r.choice([Assign(self.target(), _e(self.ex())), Seq((
            Assign(self.target(), _e(self.ex())), Assign(self.target(), _e(self.ex()))))])

    def header_set(self) -> HeaderSet:
        return HeaderSet("h1", self.r.random() < 0.5,
                         tuple(_e(self.ex()) for _ in range(self.r.randint(1, 3))))

    def copy_out_call(self, d: int) -> CopyOutCall:
        args = tuple(_e(self.ex()) for _ in range(self.r.randint(0, 2)))
        result = self.r.choice(["_r1", None])
        on_exit = self.body(d + 1) if d < 2 and self.r.random() < 0.6 else None
        return CopyOutCall("a1", args, result, self.r.random() < 0.3, on_exit,
                           on_exit is not None and self.r.random() < 0.5)

    def body(self, d: int) -> tuple[Line, ...]:
        out = []
        for _ in range(self.r.randint(1, 6)):
            c = self.r.randrange(10)
            if d < 2 and c == 0:
                els = self.body(d + 1) if self.r.random() < 0.5 else None
                out.append(Line(1, If(self.cond(), self.body(d + 1), els)))
            elif d < 2 and c == 1:
                out.append(Line(1, Loop(self.body(d + 1))))
            elif d < 2 and c == 2:
                out.append(Line(1, ExitScope(self.body(d + 1))))
            elif c == 3:
                els = (Line(1, self.one_line()),) if self.r.random() < 0.5 else None
                out.append(Line(1, If(self.cond(), (Line(1, self.one_line()),), els,
                                      inline=True)))
            elif d < 2 and c == 4:
                inner = If(self.cond(), self.body(d + 1), self.body(d + 1))
                out.append(Line(1, If(self.cond(), self.body(d + 1), (Line(1, inner),),
                                      elif_=True)))
            elif c == 5:
                em = (Emit("h0", "_st0", (_e(self.ex()),)), Emit("h1", "_st1", None))
                out.append(Line(1, self.r.choice([em[0], EmitRun("_sd0", em)])))
            elif self.varbit and c == 7:
                pieces = tuple(_e(ToBytes(Paren(self.ex()), 1) if self.r.random() < 0.6
                                  else VbBytes(self.ex())) for _ in range(self.r.randint(1, 3)))
                out.append(Line(1, self.r.choice([
                    EmitVarbit("h1", pieces),
                    SiblingsInvalid((("h1",), ("h2", "h3")), _e(self.ex()))])))
            elif self.new and c == 6:
                out.append(Line(1, self.r.choice([
                    HeaderCopy("h1", "h2"), HeaderSwap("h1", "h2"), self.header_set(),
                    self.copy_out_call(d), self.copy_out_call(d)])))
            else:
                out.append(Line(1, self.simple()))  # type: ignore[arg-type]
        if self.r.random() < 0.2:
            out.append(Line(1, Return()))
        return tuple(out)


@pytest.mark.parametrize("seed", range(30))
def test_random_functions_as_the_text_pass(seed: int) -> None:
    g = _Gen(seed)
    changed = 0
    for _ in range(12):
        fn = Function("f", ("S", "M"), g.body(0))
        want = cache_metadata_reads(function_lines(fn))
        assert cache_reads(fn, _no_text) == want, "\n".join(function_lines(fn))
        ast.parse("\n".join(want))  # still Python
        changed += want != function_lines(fn)
    assert changed  # the pass did something in these functions


@pytest.mark.parametrize("seed", range(30))
def test_random_functions_with_the_later_kinds(seed: int) -> None:
    """The later kinds among the others: the same lines as the text pass.  The pass may
    leave a function to the text pass where a run would need a load it cannot put or a
    read it cannot replace (a run that starts at a handler's ``_rN = _x.args[0]``, a
    digest's payload slot in a run: its ``M[k]`` is printed from an int); rarely."""
    g = _Gen(1000 + seed, new=True)
    changed = fell = 0
    for _ in range(12):
        fn = Function("f", ("S", "M"), g.body(0))
        assert not needs_text(fn)
        want = cache_metadata_reads(function_lines(fn))
        used: list[list[str]] = []

        def text_pass(lines: list[str], used: list[list[str]] = used) -> list[str]:
            used.append(lines)
            return cache_metadata_reads(lines)

        got = cache_reads(fn, text_pass)
        assert got == want, "\n".join(function_lines(fn))
        ast.parse("\n".join(want))
        changed += want != function_lines(fn) and not used
        fell += bool(used)
    assert changed >= 4 and fell <= 3, (changed, fell)


@pytest.mark.parametrize("seed", range(20))
def test_random_functions_with_the_varbit_kinds(seed: int) -> None:
    """The varbit and union kinds among all the others: the same lines as the text pass
    (the IR pass's fallbacks as in the test above)."""
    g = _Gen(2000 + seed, new=True, varbit=True)
    changed = fell = 0
    for _ in range(12):
        fn = Function("f", ("S", "M"), g.body(0))
        assert not needs_text(fn)
        want = cache_metadata_reads(function_lines(fn))
        used: list[list[str]] = []

        def text_pass(lines: list[str], used: list[list[str]] = used) -> list[str]:
            used.append(lines)
            return cache_metadata_reads(lines)

        assert cache_reads(fn, text_pass) == want, "\n".join(function_lines(fn))
        ast.parse("\n".join(want))
        changed += want != function_lines(fn) and not used
        fell += bool(used)
    assert changed >= 4 and fell <= 3, (changed, fell)


def test_the_varbit_kinds_read_slots() -> None:
    """A varbit read's length (printed twice) and start (twice), a piece's bytes, a
    varbit's bytes (its cell printed three times), a union's index: each ``M[k]`` read is
    counted, in `ast.walk`'s order, and replaced, as the text pass does."""
    m9 = Slot(9, 8)
    fn = _fn((1, HeaderSet("h1", True, (_e(VbRead(M3, m9)),))),
             (1, EmitVarbit("h1", (_e(ToBytes(Paren(m9), 1)), _e(VbBytes(M3))))),
             (1, SiblingsInvalid((("h6", ), ("h8", "h9")), _e(m9))))
    want = ["def f(S, M):", "    _m9 = M[9]", "    _m3 = M[3]",
            "    h1[:] = [True, (_m3, int.from_bytes(buf[_m9:_m9 + _m3 // 8], 'big'))]",
            "    if h1[0]: out.append((_m9).to_bytes(1, 'big') + "
            "(_m3[1].to_bytes(_m3[0] // 8, 'big') if _m3 else b''))",
            "    for _s in ((h6, ), (h8, h9, ), )[_m9]: _s[0] = False"]
    assert _ir_pass(fn) == want == cache_metadata_reads(function_lines(fn))
    for n, start in ((9, 1), (1, 9)):  # slots equal modulo 8: the loads in `ast.walk`'s order
        read = Assign(_e(Local("x")), _e(VbRead(Slot(n, 8), Slot(start, 8))))
        fn = _fn((1, read), (1, read))
        assert _ir_pass(fn)[1:3] == [f"    _m{n} = M[{n}]", f"    _m{start} = M[{start}]"]
        assert _ir_pass(fn) == cache_metadata_reads(function_lines(fn))


def test_an_emit_or_a_union_in_a_run_of_other_slots() -> None:
    """Neither lets ``M`` out nor writes a slot: a run goes through them; their bodies
    share their line (no run starts there)."""
    reads = Assign(_e(Slot(5, 8)), _e(Wrap("+", M3, M3, 8)))
    fn = _fn((1, reads), (1, EmitVarbit("h1", (_e(ToBytes(Paren(Slot(7, 8)), 1)),))),
             (1, SiblingsInvalid((("h6", ), ("h8", )), _e(Field("h9", 1, 32)))), (1, reads))
    assert _ir_pass(fn) == ["def f(S, M):", "    _m3 = M[3]", "    M[5] = ((_m3 + _m3) & 255)",
                            "    if h1[0]: out.append((M[7]).to_bytes(1, 'big'))",
                            "    for _s in ((h6, ), (h8, ), )[h9[1]]: _s[0] = False",
                            "    M[5] = ((_m3 + _m3) & 255)"]
    assert _ir_pass(fn) == cache_metadata_reads(function_lines(fn))


def test_the_later_kinds_read_slots() -> None:
    """A header set's values, a packet read's start (printed twice: two reads), a signed
    shift, a pick's index, a stack helper's arguments: each ``M[3]`` read is counted and
    replaced, as the text pass does."""
    els = Elems(("h1", "h2"))
    fn = _fn((1, HeaderSet("h1", True, (_e(M3), _e(SShr(M3, Lit(1), 8))))),
             (1, Assign(_e(Local("x", 16)), _e(BufRead(M3, 2, 16)))),
             (1, Assign(_e(Local("_hs0")), _e(Call("_hs_at", (els, M3, Str("p:1:2: i"), Lit(2)))))),
             (1, HeaderCopy("h1", "h2")), (1, HeaderSwap("h1", "h2")),
             (1, Assign(_e(Local("_hs1")), _e(Pick(("h1", "h2"), M3)))),
             (1, Assign(_e(Slot(4, 8)), _e(VbValue(M3)))))
    want = ["def f(S, M):", "    _m3 = M[3]",
            "    h1[:] = [True, _m3, (((_m3 ^ 128) - 128 >> 1) & 255)]",
            "    x = int.from_bytes(buf[_m3:_m3 + 2], 'big')",
            "    _hs0 = _hs_at((h1, h2, ), _m3, 'p:1:2: i', 2)",
            "    h1[:] = h2", "    h1[:], h2[:] = h2, h1[:]",
            "    _hs1 = (h1, h2, )[_m3]", "    M[4] = (_m3[1] if _m3 else 0)"]
    assert _ir_pass(fn) == want == cache_metadata_reads(function_lines(fn))


def test_a_copy_out_call_lets_m_out_and_its_handler_is_searched() -> None:
    """The call ends a run (``M`` is passed); in its handler a run may start at a line of
    the body, not at ``_r1 = _x.args[0]`` (no node of its own: the text pass then)."""
    reads = Assign(_e(Slot(5, 8)), _e(Wrap("+", Wrap("+", M3, M3, 8), M3, 8)))
    call = CopyOutCall("a1", (_e(M3),), "_r1", False, (Line(1, Return()),), False)
    fn = _fn((1, reads), (1, call), (1, reads))
    out = _ir_pass(fn)
    assert out == cache_metadata_reads(function_lines(fn))
    assert out[1:4] == ["    _m3 = M[3]", "    M[5] = ((((_m3 + _m3) & 255) + _m3) & 255)",
                        "    try:"]
    assert out[4] == "        _r1 = a1(S, M, M[3])"
    body = (Line(1, ActionCall("a2")), Line(1, reads))  # the run starts at a body's line
    fn = _fn((1, CopyOutCall("a1", (), "_r1", False, body, True)))
    assert _ir_pass(fn)[3:8] == ["    except _Exit as _x:", "        _r1 = _x.args[0]",
                                 "        a2(S, M)", "        _m3 = M[3]",
                                 "        M[5] = ((((_m3 + _m3) & 255) + _m3) & 255)"]
    fn = _fn((1, CopyOutCall("a1", (), "_r1", False, (Line(1, reads),), True)))
    assert not needs_text(fn)  # the run starts at `_r1 = _x.args[0]`: the text pass
    assert cache_reads(fn, cache_metadata_reads)[4:6] == ["        _m3 = M[3]",
                                                          "        _r1 = _x.args[0]"]
    with pytest.raises(AssertionError, match="fell back"):
        cache_reads(fn, _no_text)


def test_a_payload_in_a_run_goes_to_the_text_pass() -> None:
    """A digest's payload ``M[k]`` is printed from an int: outside the runs the IR pass
    takes the function, in one the text pass does."""
    d = Digest("crc32", (M3,), (8,), 7)
    fn = _fn(*[(1, Assign(_e(Local("x", 32)), _e(d)))] * 3)  # M[7] read three times too
    assert not needs_text(fn)
    assert cache_reads(fn, cache_metadata_reads)[1:4] == [
        "    _m3 = M[3]", "    _m7 = M[7]", "    x = _crc32(((_m3).to_bytes(1, 'big') + _m7))"]
    with pytest.raises(AssertionError, match="fell back"):
        cache_reads(fn, _no_text)
    fn = _fn(*[(1, Assign(_e(Local("x", 32)), _e(d)))] * 2,
             (1, Assign(_e(Local("y", 8)), _e(M3))))
    assert _ir_pass(fn)[1:3] == ["    _m3 = M[3]", "    x = _crc32(((_m3).to_bytes(1, 'big') + M[7]))"]


def test_a_kind_it_does_not_know_goes_to_the_text_pass() -> None:
    """A node kind added later is seen as the Python it prints until the pass knows it."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Twice:
        a: Expr
        width: int = 8

    fn = _fn((1, Assign(_e(Local("x", 8)), PyExpr("(M[3] + M[3] + M[3])", 8, Twice(M3)))))
    assert needs_text(fn)  # its text is no print of a node the IR knows
    assert cache_reads(fn, cache_metadata_reads)[1] == "    _m3 = M[3]"

    @dataclass(frozen=True)
    class Later:  # a statement kind added later (its print comes with it)
        n: PyExpr

    assert needs_text(_fn((1, Later(_e(M3)))))
