"""Proven bounds of the IR's expression nodes (`pyswitch.ir.bounds`): intervals computed by
hand for each operator and for the locals' fixed point, every node of the test programs
bounded within its width, and the C back end taking its intervals from them (its choices
and refusals follow a node's interval)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from pyswitch.ir import (
    ActionCall,
    Assign,
    Break,
    Continue,
    Exit,
    ExitScope,
    Function,
    HeaderAlias,
    If,
    Line,
    Loop,
    ParserError,
    ParserScope,
    PyExpr,
    RegRead,
    Return,
    expressions,
    unshared,
    walk,
)
from pyswitch.ir.bounds import Bounds, function_bounds, program_bounds
from pyswitch.ir.exprs import (
    Bin,
    BufRead,
    Call,
    Concat,
    Cond,
    Digest,
    Elem,
    Elems,
    Expr,
    Field,
    Lit,
    Local,
    Neg,
    Not,
    Opaque,
    Paren,
    Pick,
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
    operands,
)
from pyswitch.program import compile_p4

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(str(p.relative_to(ROOT)) for d in ("tests/p4", "p4src", "tests/stf")
                  for p in (ROOT / d).glob("*.p4"))

M8, M16, M100 = Slot(0, 8), Slot(1, 16), Slot(2, 8)
ENV = Bounds(mbounds=[(0, 255), (0, 65535), (0, 100), None],
             hbounds=[[(0, 1), (0, 3), (200, 255)]], aliases={"h0": 0})


@pytest.mark.parametrize(("node", "iv"), [
    (Lit(7), (7, 7)),
    (M8, (0, 255)),
    (Slot(3, 4), (0, 15)),                                # no meta bound: the width's
    (Field("h0", 0), (0, 1)),                             # the valid bit
    (Field("h0", 1, 8), (0, 3)),                          # the field's type
    (Wrap("+", M8, Lit(1), 8), (0, 255)),                 # [1, 256] wraps
    (Wrap("+", M100, Lit(1), 8), (1, 101)),               # does not
    (Wrap("-", Lit(5), Field("h0", 1, 8), 8), (2, 5)),
    (Wrap("-", Lit(0), Lit(1), 8), (255, 255)),           # -1 within one multiple of 256
    (Wrap("*", M100, Lit(2), 8), (0, 200)),
    (Wrap("<<", Field("h0", 1, 8), Lit(4), 8), (0, 48)),
    (Neg(Lit(1), 8), (255, 255)),
    (Bin("&", M16, Lit(0xFF)), (0, 255)),
    (Bin("|", Bin("+", Lit(4), Field("h0", 1, 8)), Lit(1)), (4, 7)),
    (Bin("^", M8, Lit(1)), (0, 255)),
    (Bin(">>", M16, Lit(4)), (0, 4095)),
    (Bin(">>", Bin("-", Lit(0), M8), Lit(2)), (-64, 0)),  # -255..0 >> 2: floor, toward -1
    (Bin("%", M16, Lit(10)), (0, 9)),
    (Bin("==", M16, Lit(10)), (0, 1)),
    (Bin("+", Local("pos"), Lit(14), bare=True), None),   # not the parser: pos unknown
    (Not(M8), (0, 1)),
    (Concat(M8, Slot(1, 16), 16, 24), (0, (1 << 24) - 1)),
    (Concat(Bin("+", Lit(1), Field("h0", 1, 8)), Field("h0", 1, 8), 8, 16), (256, 1027)),
    (SignExt(M8, 8, 16), (0, 65535)),                     # both signs: [0, 255 + 65280]
    (SignExt(Field("h0", 2, 8), 8, 16), (65480, 65535)),  # negative only: -56..-1
    (SignExt(M100, 8, 16), (0, 100)),                     # positive only
    (Cond(Bin("<", M8, Lit(3)), Lit(3), Lit(9)), (3, 9)),
    (Call("min", (M100, Lit(50))), (0, 50)),
    (Call("max", (M100, Lit(50))), (50, 100)),
    (Call("_shl", (M8, M8, Lit(8))), (0, 255)),
    (Call("_hmod", (M100, M8)), (0, 100)),
    (Digest("crc16", (M8,), (8,)), (0, 65535)),
    (Digest("identity", (M8, M8), (8, 8)), (0, 65535)),
    (Opaque("x[i]", 4), (0, 15)),
    (Opaque("x[i]"), None),
    (BufRead(Local("pos"), 2, 16), (0, 65535)),           # two bytes, wherever they start
    (BufRead(Lit(3), 1, 8), (0, 255)),
    (SShr(M100, Lit(2), 8), (0, 25)),                     # non-negative: 100 >> 2
    (SShr(Field("h0", 2, 8), Lit(2), 8), (242, 255)),     # -56..-1 >> 2: -14..-1
    (SShr(Wrap("+", M100, Lit(100), 8), Lit(3), 8), (12, 249)),  # 100..127 >> 3, -128..-56 >> 3
    (SShr(Field("h0", 2, 8), Call("min", (M8, Lit(8))), 8), (200, 255)),  # by 0..8: -56..-1
    (SShr(M8, Lit(1), 8), (0, 255)),                      # 0..63 and 192..255
    (SShr(Opaque("x"), Lit(1), 8), (0, 255)),             # an operand without one: the width's
    (VbDigest("crc32", (Field("h0", 3),), (None,)), (0, (1 << 32) - 1)),
    (VbDigest("csum16", (M8, Field("h0", 3)), (8, None)), (0, 65535)),
    (VbDigest("identity", (Field("h0", 3),), (None,)), (0, (1 << 64) - 1)),
    (VbValue(Field("h0", 3)), None),                      # no varbits known: no width
    (Pick(("h0", "h1"), M8), None),                       # a header, no number
    (Call("_hs_at", (Elems(("h0", "h1")), M8, Str("p.p4:1:2: i"), Lit(2))), None),
    (Call("_hs_last", (Elems(("h0", "h1")), M8, Str("p.p4:1:2: i"))), None),
    (Elems(("h0", "h1")), None),                          # no values: a helper's arguments
    (Str("p.p4:1:2: i"), None),
])
def test_operators(node: Expr, iv: tuple[int, int] | None) -> None:
    assert ENV.of(node) == iv


@pytest.mark.parametrize(("node", "steps"), [
    (Wrap("+", M8, Lit(1), 8), [(1, 256)]),              # the sum before its mask
    (Neg(M100, 8), [(-100, 0)]),
    (SignExt(Field("h0", 2, 8), 8, 16), [(0, 255), (-128, 127)]),  # ^ 128, then - 128
    (SCmp("<", M100, Lit(5), 8), [(0, 255), (0, 255)]),  # each operand ^ 128
    (SShr(M100, Lit(2), 8), [(0, 255), (-128, 127), (-32, 31)]),  # through the sign, >> 2
    (Concat(M8, Slot(1, 16), 16, 24), [(0, 255 << 16)]),  # the high half shifted
    (BufRead(Lit(3), 1, 8), [(4, 4)]),                     # its end
    (VbRead(M8, Lit(2)), [(0, 31), (2, 33)]),              # n // 8 bytes, its end
    (Digest("identity", (M8, M8), (8, 8)), [(0, 65535)]),  # 255 << 8 + 255
    # csum16 as a number: 3 bytes padded to 4, shifts 24 and 8 taken modulo 16
    (Digest("csum16", (M8, M16), (8, 16)), [(0, (255 << 8) + (65535 << 8))]),
    (Digest("crc32", (Bin("-", Lit(0), M8),), (8,)), [None]),  # a negative item
    (Bin("+", M8, M8), []),                                 # no step but its own
    (Wrap("+", Opaque("x"), Lit(1), 8), [None]),
])
def test_steps(node: Expr, steps: list) -> None:
    """The values a node's evaluation computes before its own (`Bounds.steps`), which the
    C back end proves within 126 bits."""
    assert ENV.steps(node) == steps


def test_a_helper_no_rule_knows_has_its_externs_interval(monkeypatch) -> None:  # noqa: ANN001
    """A `Call` of a helper the IR has no rule for: its extern's `bounds`, from the
    arguments' intervals (a popcount of a value up to 255: at most 8); none without one."""
    from pyswitch import externs

    class Count(externs.Extern):
        def bounds(self, node, args):  # noqa: ANN001, ANN201
            return None if args[0] is None else (0, args[0][1].bit_length())

    monkeypatch.setattr(externs, "helpers", lambda: {"_count": Count()})
    assert ENV.of(Call("_count", (M8,))) == (0, 8)
    assert ENV.of(Call("_count", (Opaque("x"),))) is None
    assert ENV.of(Call("_other", (M8,))) is None


def test_a_copy_outs_values_have_their_parameters_intervals() -> None:
    """``_r1[i]`` (an `Elem`) read after ``_r1 = a0(...)``: the interval of the callee's
    out parameter i (its type's, ``fbounds``), met with the node's width; without the
    call, the width's (or none)."""
    from pyswitch.ir import CopyOutCall
    from pyswitch.ir.bounds import param_bounds
    a0 = Function("a0", ("S", "M", "p_x", "p_y", "p_z"),
                  (Line(1, Return(("p_y", "p_z"))),))
    untyped, typed = Elem("_r1", 0), Elem("_r1", 1, 8)
    c = _fn("c", (1, CopyOutCall("a0", result="_r1")),
            (1, Assign(PyExpr.of(Slot(0, 8)), PyExpr.of(untyped))),
            (1, Assign(PyExpr.of(Slot(1, 8)), PyExpr.of(typed))))
    meta = {"mbounds": [(0, 255), (0, 255)], "hbounds": [],
            "fbounds": {"a0": {"p_y": (0, 1), "p_z": (0, 300)}},
            "actions": [{"fn": "a0", "params": [{"name": "x", "width": 9}]}]}
    assert param_bounds(meta, a0) == {"p_y": (0, 1), "p_z": (0, 300), "_d0": (0, 511),
                                      "p_x": (0, 511)}  # action data: its width
    b = program_bounds([a0, c], meta)["c"]
    assert b.elems == {"_r1": [(0, 1), (0, 300)]}
    assert b.of(untyped) == (0, 1)
    assert b.of(typed) == (0, 255)
    assert b.of(Elem("_r2", 0)) is None and b.of(Elem("_r2", 0, 4)) == (0, 15)


def _fn(name: str, *stmts: tuple[int, object]) -> Function:
    return Function(name, ("S", "M"), tuple(Line(d, s) for d, s in stmts))  # type: ignore[arg-type]


def _set(name: str, v: Expr, w: int | None = 8) -> Assign:
    return Assign(PyExpr.of(Local(name, w)), PyExpr.of(v))


def test_loop_counter_settles_at_its_wrap() -> None:
    """``i = 0; while True: i = (i + 1) & 0xff``: grows one a round, widened after 8
    rounds to 15, 31, ...; the wrap to 8 bits stops it at [0, 255]."""
    i = Local("i", 8)
    fn = _fn("f", (1, _set("i", Lit(0))),
             (1, Loop((Line(1, _set("i", Wrap("+", i, Lit(1), 8))),))))
    b = function_bounds(fn)
    assert b.locals == {"i": (0, 255)}
    assert b.of(Wrap("+", i, Lit(1), 8)) == (0, 255)


def test_unbounded_counter_has_no_interval() -> None:
    i = Local("i")
    fn = _fn("f", (1, _set("i", Lit(0), None)),
             (1, Loop((Line(1, _set("i", Bin("+", i, Lit(1)), None)),))))
    assert function_bounds(fn).locals == {"i": None}


def test_locals_join_their_assignments() -> None:
    """A local is the union of what is assigned to it (a register read's cells and its
    default too); one assigned from it follows it."""
    read = RegRead("R0", PyExpr.of(Lit(0)), 4, PyExpr.of(Local("r", 16)), (10, 20), True, 99)
    fn = _fn("f", (1, read), (1, _set("x", Lit(3))), (1, _set("x", Local("r", 16))),
             (1, _set("y", Wrap("+", Local("x", 16), Lit(1), 16))))
    assert function_bounds(fn).locals == {"r": (10, 99), "x": (3, 99), "y": (4, 100)}


def _if(c: Expr, then: tuple, else_: tuple | None = None) -> If:
    return If(PyExpr.of(c), tuple(Line(1, x) for x in then),
              None if else_ is None else tuple(Line(1, x) for x in else_))


def _body(*stmts: object) -> tuple[Line, ...]:
    return tuple(Line(1, x) for x in stmts)  # type: ignore[arg-type]


MB = [(0, 255), (0, 65535)]


def test_a_local_read_has_its_last_assignments_interval() -> None:
    """``x = M[1]`` (16 bits), ``x = 3``, ``y = (x + 1) & 0xffff``, ``z = y``: x is read
    as [3, 3] there and y is [4, 4]; x's whole-function interval is [0, 65535], and so
    is y's (x + 1 is [1, 65536] over it, which wraps)."""
    x, y = Local("x", 16), Local("y", 16)
    v = Wrap("+", x, Lit(1), 16)
    fn = _fn("f", (1, _set("x", M16, 16)), (1, _set("x", Lit(3), 16)), (1, _set("y", v, 16)),
             (1, _set("z", y, 16)))
    b = function_bounds(fn, MB)
    assert b.locals == {"x": (0, 65535), "y": (0, 65535), "z": (0, 65535)}
    assert (b.of(x), b.of(v), b.of(y)) == ((3, 3), (4, 4), (4, 4))


def test_branches_join() -> None:
    """``x = 1``; ``if M[0] == 1: x = 5 else: x = 9``; read: [5, 9]; ``if M[0] == 2: x =
    20`` (no else); read: [5, 20].  The same node object read in both places: the
    join, [5, 20].  r's whole-function interval is over x's, [1, 20]."""
    r1, r2, both = Local("x", 8), Local("x", 8), Local("x", 8)
    c1, c2 = Bin("==", M8, Lit(1)), Bin("==", M8, Lit(2))
    fn = _fn("f", (1, _set("x", Lit(1))), (1, _if(c1, (_set("x", Lit(5)),), (_set("x", Lit(9)),))),
             (1, _set("r", r1)), (1, _set("s", both)), (1, _if(c2, (_set("x", Lit(20)),))),
             (1, _set("r", r2)), (1, _set("s", both)))
    b = function_bounds(fn, MB)
    assert b.locals["x"] == (1, 20)
    assert (b.of(r1), b.of(r2), b.of(both)) == ((5, 9), (5, 20), (5, 20))
    assert b.locals["r"] == (1, 20)


def test_a_loop_reaches_its_fixed_point() -> None:
    """``x = 100``; ``while True: r = x; x = 5; if M[0] == 1: break``; ``s = x``; ``x =
    200``: in the loop x is [5, 100] (its entry's or the turn before's), after it [5, 5]
    (the break's); its whole-function interval is [5, 200].  A ``continue`` goes to the
    head: ``while True: if M[0] == 2: y = 7; continue``; ``y = 8``; ``t = y``; ``if M[0]
    == 3: break`` reads y in [7, 8] at the head's turn after (``u = y``, first in the
    body: no value the first turn, 7 or 8 after)."""
    r, s, u = Local("x", 8), Local("x", 8), Local("y", 8)
    brk = _if(Bin("==", M8, Lit(1)), (Break(),))
    fn = _fn("f", (1, _set("x", Lit(100))), (1, Loop(_body(_set("r", r), _set("x", Lit(5)), brk))),
             (1, _set("s", s)), (1, _set("x", Lit(200))),
             (1, Loop(_body(_set("u", u), _if(Bin("==", M8, Lit(2)), (_set("y", Lit(7)), Continue())),
                            _set("y", Lit(8)), _if(Bin("==", M8, Lit(3)), (Break(),))))))
    b = function_bounds(fn, MB)
    assert b.locals["x"] == (5, 200)
    assert (b.of(r), b.of(s), b.of(u)) == ((5, 100), (5, 5), (7, 8))


def test_an_unbounded_counter_in_a_loop_has_no_interval() -> None:
    """``i = 0``; ``while True: r = i; i = i + 1`` (no wrap): widened, still moving after
    40 rounds: not proven; ``j = 0``, ``while True: j = (j + 1) & 0xff`` settles."""
    i, j = Local("i"), Local("j", 8)
    fn = _fn("f", (1, _set("i", Lit(0), None)),
             (1, Loop(_body(_set("r", i, None), _set("i", Bin("+", Local("i"), Lit(1)), None)))))
    assert function_bounds(fn).of(i) is None
    fn = _fn("f", (1, _set("j", Lit(0))),
             (1, Loop(_body(_set("r", j), _set("j", Wrap("+", Local("j", 8), Lit(1), 8))))))
    assert function_bounds(fn).of(j) == (0, 255)


def test_an_exit_label_joins_the_states_inside() -> None:
    """``x = 1``; a block's scope: ``x = 2``, a call of an action (which may exit), ``x =
    3``, ``if M[0] == 1: x = 4; exit; r = x``, ``x = 6``; then ``s = x``; ``x = 50``.  The
    label joins the body's end (6) and the state before each statement inside (1, 2, 3,
    4: any may jump there): [1, 6]; ``r = x`` after the exit is never run: x's
    whole-function interval [1, 50]."""
    r, s = Local("x", 8), Local("x", 8)
    scope = ExitScope(_body(_set("x", Lit(2)), ActionCall("a0"), _set("x", Lit(3)),
                            _if(Bin("==", M8, Lit(1)), (_set("x", Lit(4)), Exit(), _set("r", r))),
                            _set("x", Lit(6))))
    fn = _fn("f", (1, _set("x", Lit(1))), (1, scope), (1, _set("s", s)), (1, _set("x", Lit(50))))
    b = function_bounds(fn, MB)
    assert (b.of(s), b.of(r), b.locals["x"]) == ((1, 6), (1, 50), (1, 50))
    fn = _fn("f", (1, _set("x", Lit(1))), (1, Return()), (1, _set("r", r)))
    assert function_bounds(fn, MB).of(r) == (1, 1)  # never run: the whole function's


def test_a_parser_error_label_joins_the_states_inside() -> None:
    """The parser's scope: ``x = 1``, an error when ``M[0] == 1``, ``x = 2``, an error,
    ``x = 3`` (never run); then ``r = x``: [1, 2] (the state before each statement that
    runs: 1, 2); x's whole-function interval is [1, 3]."""
    r = Local("x", 8)
    scope = ParserScope(_body(_set("x", Lit(1)), ParserError(1, PyExpr.of(Bin("==", M8, Lit(1)))),
                              _set("x", Lit(2)), ParserError(2), _set("x", Lit(3))),
                        PyExpr.of(Slot(1, 16)))
    fn = Function("parser", ("S", "M", "buf"), _body(scope, _set("r", r)))
    b = function_bounds(fn, MB)
    assert (b.of(r), b.locals["x"]) == ((1, 2), (1, 3))


def test_parser_cursor_and_params() -> None:
    fn = Function("parser", ("S", "M", "buf"), ())
    b = function_bounds(fn, params={"p_x": (0, 7)})
    assert b.of(Bin("+", Local("pos"), Lit(14), bare=True)) == (14, (1 << 40) + 14)
    assert b.of(Local("p_x", 3)) == (0, 7)


HB2 = [[(0, 1), (0, 3), (200, 255)], [(0, 1), (0, 3), (100, 150)]]


def test_a_varbits_value_within_its_maximum_width() -> None:
    """``meta["varbits"]``: header 0's field 3 of at most 12 bits, header 1's of 20, slot 5
    of 9; a picked element's is the largest over the elements."""
    vb = {"h": [[0, 3, 12], [1, 3, 20]], "m": [[5, 9]]}
    fn = _fn("f", (1, HeaderAlias("h0", 0)), (1, HeaderAlias("h1", 1)),
             (1, Assign(PyExpr.of(Local("_hs0")), PyExpr.of(Pick(("h0", "h1"), Lit(0))))))
    b = function_bounds(fn, varbits=vb)
    assert b.of(VbValue(Field("h0", 3))) == (0, 4095)
    assert b.of(VbValue(Paren(Field("h1", 3)))) == (0, (1 << 20) - 1)
    assert b.of(VbValue(Field("_hs0", 3))) == (0, (1 << 20) - 1)
    assert b.of(VbValue(Slot(5))) == (0, 511)
    assert b.of(VbValue(Slot(6))) is None  # no varbit known there
    assert b.of(VbValue(Field("h2", 3))) is None  # not an alias of the function


@pytest.mark.parametrize(("pick", "iv"), [
    (Pick(("h1", "h2"), Field("h0", 1, 8)), (100, 255)),
    (Call("_hs_last", (Elems(("h1", "h2")), Field("h0", 1, 8), Str("w"))), (100, 255)),
    (Call("_hs_at", (Elems(("h1", "h2")), Local("i", 8), Str("w"), Lit(-1))), (100, 255)),
    (Call("_hs_at", (Elems(("h1", "h2")), Local("i", 8), Str("w"), Lit(2))), (0, 255)),
])
def test_a_picked_elements_field_is_the_hull(pick: Expr, iv: tuple[int, int]) -> None:
    """``_hs0 = <pick>``; ``_hs0[2]`` is field 2 of h1 (200..255) or of h2 (100..150), or
    of ``_hs_at``'s scratch header of zeros when its field count is not -1 (an extract's
    strict pick raises instead)."""
    fn = _fn("f", (1, HeaderAlias("h1", 0)), (1, HeaderAlias("h2", 1)),
             (1, Assign(PyExpr.of(Local("_hs0")), PyExpr.of(pick))))
    b = function_bounds(fn, hbounds=HB2)
    assert b.picks == {"_hs0": (("h1", "h2"), iv[0] == 0)}
    assert b.of(Field("_hs0", 2, 8)) == iv
    assert b.of(Field("_hs0", 0)) == (0, 1)
    assert b.of(Local("_hs0")) is None  # the local is a header, no number


def test_a_local_assigned_a_pick_and_else_is_no_pick() -> None:
    fn = _fn("f", (1, HeaderAlias("h1", 0)), (1, HeaderAlias("h2", 1)),
             (1, Assign(PyExpr.of(Local("_hs0")), PyExpr.of(Pick(("h1", "h2"), Lit(0))))),
             (1, Assign(PyExpr.of(Local("_hs0")), PyExpr.of(Local("h1")))))
    b = function_bounds(fn, hbounds=HB2)
    assert b.picks == {}
    assert b.of(Field("_hs0", 2, 8)) == (0, 255)  # not an alias: the width's


def _compile(rel: str):  # noqa: ANN202 - a Program
    with contextlib.chdir(ROOT):
        return compile_p4(rel, ["p4src/include"])


def _nodes(n: Expr):  # noqa: ANN202
    yield n
    for x in operands(n):
        yield from _nodes(x)


def _why_none(n: Expr, b: Bounds, meta: dict) -> str | None:
    """Why node `n` may have no interval: text in it, or it reads a varbit (no number:
    a varbit's slot or field, a varbit header's extracted cell),
    a local only text assigns; it is a header (a
    stack element picked at run time, a local naming one) or no value at all (a stack
    helper's arguments: its elements, a string; a varbit emit's bytes); None: no
    reason."""
    for x in _nodes(n):
        if isinstance(x, Opaque):
            return "text"
        if isinstance(x, Pick) or isinstance(x, Call) and x.fn in ("_hs_at", "_hs_last") \
                or isinstance(x, Local) and x.name in b.picks:
            return "a header"
        if isinstance(x, (Elems, Str, ToBytes, VbBytes)):
            return "no value"  # a helper's arguments; an emit's bytes
        if isinstance(x, VbRead):
            return "varbit"  # a varbit header's cell: its length and value, no number
        if isinstance(x, Local) and b.locals.get(x.name, None) is None \
                and x.name not in b.params and x.name not in ("pos", "L"):
            return "local assigned in text"
        if isinstance(x, Slot) and meta["mbounds"][x.index] is None:
            return "varbit"
        if isinstance(x, Field) and x.header in b.aliases \
                and meta["hbounds"][b.aliases[x.header]][x.index] is None:
            return "varbit"
    return None


@pytest.mark.parametrize("rel", PROGRAMS)
def test_every_node_bounded_within_its_width(rel: str) -> None:
    from pyswitch.ir import expressions
    prog = _compile(rel)
    bounds = program_bounds(prog.ir, prog.meta)
    seen = 0
    for it in prog.ir:
        if not isinstance(it, Function):
            continue
        b = bounds[it.name]
        for st in walk(it.body):
            for e in expressions(st):
                for n in _nodes(e.node) if e.node is not None else ():
                    iv = b.of(n)
                    if iv is None:
                        assert _why_none(n, b, prog.meta), (it.name, n)
                        continue
                    seen += 1
                    assert iv[0] <= iv[1], (it.name, n, iv)
                    if n.width is not None:
                        assert 0 <= iv[0] and iv[1] < 1 << n.width, (it.name, n, iv)
    assert seen


_REAL_OF = Bounds.of


def _overriding(monkeypatch, over: dict[int, tuple[int, int] | None]) -> None:  # noqa: ANN001
    """`Bounds.of` as if the IR proved `over`'s interval (by node id) for those nodes."""
    monkeypatch.setattr(Bounds, "of",
                        lambda self, n: over[id(n)] if id(n) in over else _REAL_OF(self, n))


def _c(prog, dedupe: bool = True) -> str:  # noqa: ANN001
    from pyswitch.native.cgen import NotNative, Unit
    try:
        return Unit(prog.ir, prog.meta, "m").translate(dedupe)
    except NotNative as e:
        return f"refused: {e}"


def _find(prog, fn: str, pred) -> Expr:  # noqa: ANN001
    """The first node of function `fn` (walked in order) `pred` holds for."""
    for it in prog.ir:
        if isinstance(it, Function) and it.name == fn:
            for st in walk(it.body):
                for e in expressions(st):
                    for n in _nodes(e.node) if e.node is not None else ():
                        if pred(n):
                            return n
    raise AssertionError(fn)


def test_a_shifts_form_is_chosen_by_the_ir_interval(monkeypatch) -> None:  # noqa: ANN001
    """``>>`` in C while the IR proves the shift below 127, ``v_shr`` where it may reach
    127: the choice reads the shift's node's interval from `Bounds`."""
    prog = _compile("tests/p4/pyswitch_ops.p4")
    sh = _find(prog, "ingress", lambda n: isinstance(n, Bin) and n.op == ">>"
               and isinstance(n.b, Lit) and n.b.value == 31)
    before = _c(prog)
    assert ">> (int)((V)31LL))" in before and "v_shr(" not in before
    _overriding(monkeypatch, {id(sh.b): (31, 126)})
    assert _c(prog) == before
    _overriding(monkeypatch, {id(sh.b): (31, 127)})
    after = _c(prog)
    assert "v_shr(" in after and after.count("v_shr(") == 1
    assert after.replace("v_shr(", "").count("((V)31LL)") == before.count("((V)31LL)")


def test_a_picks_guard_is_chosen_by_the_ir_interval(monkeypatch) -> None:  # noqa: ANN001
    """``hs.next``'s element: the C checks the index against the stack's size unless the
    IR proves it within (here the index is a 32-bit field: checked)."""
    prog = _compile("tests/p4/native_stack_index.p4")
    pick = _find(prog, "parser", lambda n: isinstance(n, Pick))
    guard = "if (i_ < 0 || i_ >= 4)"
    before = _c(prog)
    n = before.count(guard)
    assert n >= 1
    _overriding(monkeypatch, {id(pick.index): (0, 3)})
    assert _c(prog).count(guard) == n - 1
    _overriding(monkeypatch, {id(pick.index): (0, 4)})
    assert _c(prog) == before


def test_a_refusal_follows_the_ir_interval(monkeypatch) -> None:  # noqa: ANN001
    """A node whose IR interval may pass 126 bits, one without an interval, a value
    outside the slot it is stored into: each refused at the node's line."""
    prog = _compile("tests/p4/pyswitch_ops.p4")
    sh = _find(prog, "ingress", lambda n: isinstance(n, Bin) and n.op == ">>"
               and isinstance(n.b, Lit) and n.b.value == 31)
    _overriding(monkeypatch, {id(sh.a): (0, 1 << 127)})
    got = _c(prog)
    assert got.startswith("refused: ingress, generated line ")
    assert got.endswith(": a value may exceed 126 bits")
    line = got.split("generated line ")[1].split(" ")[0]
    _overriding(monkeypatch, {id(sh.a): None})
    assert _c(prog) == (f"refused: ingress, generated line {line} "
                        + got.split(f"generated line {line} ")[1].split("`: ")[0]
                        + "`: no proven interval of 'h1[6]'")
    st = next(st for it in prog.ir if isinstance(it, Function) and it.name == "ingress"
              for st in walk(it.body) if isinstance(st, Assign)
              and isinstance(st.target.node, Field) and st.target.node.width)
    w = st.target.node.width  # type: ignore[union-attr]
    _overriding(monkeypatch, {id(st.value.node): (0, (1 << w) - 1)})
    assert not _c(prog).startswith("refused")
    _overriding(monkeypatch, {id(st.value.node): (0, 1 << w)})  # one more than its width
    assert _c(prog).endswith(": a value outside its slot's range")


def test_the_lowering_asks_the_ir_for_every_node_it_lowers(monkeypatch) -> None:  # noqa: ANN001
    """On every program of tests/p4, p4src and tests/stf: each node the C lowering
    lowers (those it makes up too: a header's field copied whole, a parameter passed on)
    has its interval looked up in `Bounds`: the back end has no interval of its own."""
    from pyswitch.native import exprs
    lowered: list[Expr] = []
    asked: set[int] = set()
    real_lower, real_of = exprs.Expressions._lower, Bounds.of

    def lower(self, f, n):  # noqa: ANN001, ANN202
        lowered.append(n)
        return real_lower(self, f, n)

    def of(self, n):  # noqa: ANN001, ANN202
        asked.add(id(n))
        return real_of(self, n)

    monkeypatch.setattr(exprs.Expressions, "_lower", lower)
    monkeypatch.setattr(Bounds, "of", of)
    for rel in PROGRAMS:
        prog = _compile(rel)
        lowered.clear()
        asked.clear()
        c = _c(prog)
        assert lowered, rel
        missed = [n for n in lowered if id(n) not in asked]
        assert missed == [], (rel, missed[:3], c[:200])


@pytest.mark.parametrize("rel", PROGRAMS)
def test_each_node_object_in_one_place(rel: str) -> None:
    """A function's IR holds each expression node object once (`unshared`): a node's
    interval is its value's at its one place."""
    for it in _compile(rel).ir:
        if isinstance(it, Function):
            ids = [id(n) for st in walk(it.body) for e in expressions(st)
                   for n in (_nodes(e.node) if e.node is not None else ())]
            assert len(ids) == len(set(ids)), it.name


def test_unshared_copies_a_node_met_again() -> None:
    x = Local("x", 8)
    body = (Line(1, _set("y", x)), Line(1, _set("z", Bin("+", x, Lit(1)))))
    u = unshared(body)
    assert u == body
    assert u[0] is body[0]  # the first place keeps its objects
    assert u[1].stmt.value.node.a is not x  # type: ignore[union-attr]
    assert unshared(u)[1] is u[1]


def test_a_local_text_may_assign_is_not_proven() -> None:
    """A `PyText` line that may assign a local (before an ``=``, after ``for``/``as``)
    takes its interval away; one that only reads it does not."""
    from pyswitch.ir import PyText
    for line, want in (("x = y + 1", None), ("for x in (h1, h2):", None),
                       ("except _Exit as x:", None), ("a, x = f()", None),
                       ("if x == 1: pass", (3, 3)), ("y = x + 1", (3, 3))):
        fn = _fn("f", (1, _set("x", Lit(3))), (1, PyText(line)))
        assert function_bounds(fn).locals["x"] == want, line
