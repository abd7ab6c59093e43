"""Functions, side effects inside expressions and action parameters: what pyswitch cannot
run as p4c + BMv2 do is rejected with file:line:col (the behaviour itself: tests/stf/
functions.stf, action_params.stf)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyswitch import P4CompileError, compile_p4

BASE = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct metadata { bit<8> m; }
struct headers { h_t h; }
bit<8> bump(inout bit<8> v) { v = v + 1; return v; }
bit<8> pure(in bit<8> v) { return v + 1; }
//TOP
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set(bit<8> x, bit<8> y) { hdr.h.a = x; hdr.h.b = y; }
    register<bit<8>>(4) r;
    table t { key = { hdr.h.a: exact; } actions = { NoAction; } }
    //DECL
    apply {
        //APPLY
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

REJECTED = [
    # an effect inside the arguments of an action or an extern
    ("APPLY", "set(hdr.h.a, bump(hdr.h.a));", "a call of 'bump' (it has out/inout parameters)"),
    ("APPLY", "r.write(0, bump(hdr.h.a));", "a call of 'bump' (it has out/inout parameters)"),
    ("APPLY", "hash(meta.m, HashAlgorithm.crc16, 8w0, { hdr.h.a, bump(hdr.h.a) }, 8w16);",
     "a call of 'bump'"),
    ("APPLY", "r.write(0, t.apply().hit ? 8w1 : 8w2);", "a table apply inside this expression"),
    ("TOP", "bit<8> rec(in bit<8> v) { return rec(v); }", "recursive call of function 'rec'"),
    ("TOP", "T gen<T>(in T v) { return v; }", "generic function 'gen' is not supported"),
    ("TOP", "bit<8> pure(in bit<16> v) { return 1; }", "'pure' is already declared"),
    ("TOP", "action top() { }\nvoid calls() { top(); }", "a function cannot call an action"),
    ("APPLY", "hdr.h.a = pure(hdr.h.a, 1);", "function 'pure' expects 1 arguments, got 2"),
    ("APPLY", "hdr.h.a = bump(1);", "expression cannot be assigned to"),
    ("APPLY", "hdr.h.a = bump(meta.m) + bump(hdr.h.b[3:0] ++ 4w0);", "cannot be assigned"),
    ("APPLY", "break;", "break outside a loop"),
    ("APPLY", "for (bit<8> i = 0; i < 4; i = i + bump(meta.m)) { }", "a call of 'bump'"),
    # action parameters: data must be scalar, directional ones bound in an actions list
    ("DECL", "action s(h_t x) { }", "only bit<N>/int<N>/bool parameters are supported"),
    ("DECL", "action o(inout bit<8> x) { }\n    table c { key = { } actions = { o; } }",
     "the actions list must bind its 1 parameter(s) with a direction"),
    ("DECL", "action o(inout bit<8> x) { }\n    table c { key = { } actions = { o(meta.m); } }"
             "\n    table d { key = { } actions = { o(meta.m); } }",
     "binding it twice is not supported"),
    ("DECL", "table c { key = { hdr.h.a: ternary; } actions = { NoAction; }\n"
             "    largest_priority_wins = 1; }", "largest_priority_wins must be a compile-time bool"),
    ("DECL", "table c { key = { hdr.h.a: ternary; } actions = { NoAction; }\n"
             "    priority_delta = 0; }", "priority_delta must be a positive value"),
    ("DECL", "table c { key = { hdr.h.a: exact; } actions = { NoAction; }\n"
             "    const entries = { priority = 3: 1 : NoAction(); } }",
     "a table with 'const' entries cannot have priorities"),
]


@pytest.mark.parametrize("where,snippet,message", REJECTED)
def test_rejected_with_location(tmp_path: Path, where: str, snippet: str, message: str) -> None:
    src = BASE.replace(f"//{where}", snippet)
    f = tmp_path / "prog.p4"
    f.write_text(src)
    with pytest.raises(P4CompileError) as ei:
        compile_p4(f)
    e = ei.value
    assert message in e.message, str(e)
    first = snippet.split("\n")[-1]  # the error is on the last line of the snippet
    line = next(i for i, ln in enumerate(src.splitlines(), 1) if first.strip() in ln)
    assert e.line == line and e.col >= 1, str(e)


ACCEPTED = [
    # effects where P4's order is kept: the whole right side, operands, nested calls
    "hdr.h.b = hdr.h.a + bump(hdr.h.a);",
    "bit<8> v = pure(bump(hdr.h.a)) + bump(hdr.h.b);",
    "if (t.apply().hit || bump(hdr.h.a) == 2) { meta.m = 1; }",
    "hdr.h.a = t.apply().hit ? pure(1) : bump(hdr.h.b);",
    "bump(hdr.h.a);",
    "hdr.h = { hdr.h.a, bump(hdr.h.a) };",
]


@pytest.mark.parametrize("snippet", ACCEPTED)
def test_ordered_effects_compile(tmp_path: Path, snippet: str) -> None:
    f = tmp_path / "prog.p4"
    f.write_text(BASE.replace("//APPLY", snippet))
    compile_p4(f)


def test_priority_properties_on_const_entries(tmp_path: Path) -> None:
    """p4c reads largest_priority_wins/priority_delta only to number non-const `entries`:
    on const entries they change nothing (BMv2's order: @priority, else the position)."""
    f = tmp_path / "prog.p4"
    f.write_text(BASE.replace("//DECL", """table c {
        key = { hdr.h.a: ternary; } actions = { NoAction; set; }
        largest_priority_wins = false; priority_delta = 10;
        const entries = { 1 &&& 1 : set(1, 1); 3 &&& 3 : set(2, 2) @priority(0); } }"""))
    prog = compile_p4(f)
    ents = next(t for t in prog.meta["tables"] if t["name"].endswith(".c"))["const_entries"]
    assert [e["priority"] for e in ents] == [1, 2]  # pyswitch's: larger wins
