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

import contextlib
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from pyswitch.ir import (
    ActionCall,
    CounterCount,
    Exit,
    Function,
    ParserError,
    PyExpr,
    PyText,
    RegRead,
    RegWrite,
    TableApply,
    stmt_lines,
)
from pyswitch.native.irlower import marked_module
from pyswitch.program import compile_p4

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "ir_golden.json"
PROGRAMS = sorted(str(p.relative_to(ROOT)) for d in ("tests/p4", "p4src", "tests/stf")
                  for p in (ROOT / d).glob("*.p4"))


def _compile(rel: str):  # noqa: ANN202 - a Program
    # from the checkout's root, by relative path: error texts in the code hold the path
    with contextlib.chdir(ROOT):
        return compile_p4(rel, ["p4src/include"])


def census(ir: list) -> dict[str, int]:
    """Statements by kind in a program's IR: ``PyText`` lines of function bodies, each
    node kind, and module-level text blocks (``ModuleText``)."""
    c: Counter[str] = Counter()
    for it in ir:
        if isinstance(it, Function):
            c.update(type(ln.stmt).__name__ for ln in it.body)
        else:
            c["ModuleText"] += 1
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
    text, shown, nodes = marked_module(prog.ir)
    for idiom in ("IndexError", ".exact.get(", ".lookup(", ".default", "_PErr(", ".fn(S, M",
                  "C0p[", "C0b["):
        assert idiom not in text, idiom
    assert len(text.splitlines()) == len(shown)  # messages show the node's Python line
    assert sum(isinstance(n, RegRead) for n in nodes) == c["RegRead"]


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
