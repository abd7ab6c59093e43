"""Header stacks, header unions, varbits, lookahead of aggregates and the shapes of main:
what pyswitch cannot run as p4c + BMv2 do is rejected with file:line:col; an extract into
a header stack element outside the stack at run time stops the packet with
`StackIndexError` (BMv2 aborts), any other access outside the stack reads zeros and writes
nowhere, with a logged warning. (The behaviour itself: tests/stf/header_stacks.stf,
header_unions.stf, varbit.stf, lookahead_compare.stf, main_shapes.stf.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from pyswitch import P4CompileError, Switch, compile_p4

BASE = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
header v_t { bit<8> k; varbit<16> v; }
header_union u_t { h_t x; v_t y; }
struct metadata { bit<8> m; }
struct b_t { bool f; }
struct headers { h_t h; h_t[2] hs; v_t v; u_t u; u_t[2] us; }
//TOP
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        //PARSER
        transition accept;
    }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        //APPLY
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
//MAIN
"""
MAIN = "V1Switch(P(), VC(), I(), E(), CC(), D()) main;"


def _program(tmp_path: Path, where: str, code: str) -> Path:
    text = BASE.replace(f"//{where}", code)
    if where != "MAIN":
        text = text.replace("//MAIN", MAIN)
    p = tmp_path / "prog.p4"
    p.write_text(text)
    return p


REJECTED = [
    ("APPLY", "hdr.hs.next.a = 1;", "hs.next is only available in a parser"),
    ("PARSER", "meta.m = hdr.hs.next.a;", "hs.next is supported only as the argument of "
                                          "extract"),
    # where p4c's type checker allows next/last/lastIndex and push/pop, and last is read-only
    ("APPLY", "hdr.h.a = hdr.hs.last.a;", "hs.last is only available in a parser"),
    ("APPLY", "hdr.h.a = (bit<8>)hdr.hs.lastIndex;", "hs.lastIndex is only available in a"),
    ("PARSER", "hdr.hs.pop_front(1);", "pop_front cannot be used in a parser"),
    ("PARSER", "pkt.extract(hdr.hs.next); hdr.hs.last.a = 1;", "hs.last cannot be written"),
    ("PARSER", "pkt.extract(hdr.hs.next); hdr.hs.last.setInvalid();", "hs.last cannot be "
                                                                      "written"),
    ("PARSER", "pkt.extract(hdr.hs.last);", "hs.last cannot be written"),
    ("APPLY", "hdr.hs.push_front(meta.m);", "push_front needs a non-negative compile-time "
                                            "constant"),
    ("APPLY", "hdr.hs[2].a = 1;", "index 2 out of bounds"),
    ("APPLY", "hdr.us[meta.m].x.a = 1;", "a run-time index into a stack of header unions"),
    ("APPLY", "hdr.us.push_front(1);", "of a stack of header unions is not supported"),
    ("APPLY", "hdr.us.last.x.a = 1;", "of a stack of header unions is not supported"),
    ("PARSER", "pkt.extract(hdr.v);", "needs its length in bits as a second argument"),
    ("PARSER", "pkt.extract(hdr.us.next);", "extract needs a header: a member of the union"),
    ("PARSER", "pkt.extract(hdr.u);", "extract needs a header"),
    ("PARSER", "pkt.extract(hdr.hs.next, 8);", "extract with a length needs a header with a "
                                               "varbit field"),
    ("TOP", "header w_t { varbit<12> v; }", "varbit<12>: pyswitch (as BMv2) needs a positive "
                                            "multiple of 8 bits"),
    ("TOP", "header w_t { varbit<8> v; varbit<8> w; }", "more than one varbit field"),
    ("TOP", "header w_t { bool f; bit<7> g; varbit<8> v; }", "besides its varbit, pyswitch "
                                                             "supports only bit<N>/int<N>"),
    ("TOP", "header w_t { bit<4> a; varbit<8> v; bit<4> b; }", "the fields before its "
                                                               "varbit must fill whole bytes"),
    ("APPLY", "hdr.h.a = hdr.v.v;", "type mismatch"),
    ("TOP", "header_union w_t { h_t x; bit<8> y; }", "member 'y' must be a header"),
    ("APPLY", "hdr.u.setValid();", "header_union u_t has no field 'setValid'"),
    ("PARSER", "b_t x = pkt.lookahead<b_t>();",
     "lookahead<struct b_t>: pyswitch supports bit<N>, and headers and structs"),
    ("MAIN", "V1Switch(p = P(), vr = VC(), ig = I(), eg = E(), ck = CC(), dp = D()) main;",
     "V1Switch has no parameter 'dp'"),
    ("MAIN", "V1Switch(P(), VC(), I(), E(), CC(), dep = D()) main;",
     "must be all named or all positional"),
    ("MAIN", "I() ig;\nV1Switch(P(), VC(), ig, ig2, CC(), D()) main;",
     "ig2 is not a parser or control instance declared at top level"),
]


@pytest.mark.parametrize("where,code,msg", REJECTED, ids=[r[2][:40] for r in REJECTED])
def test_rejected_with_location(tmp_path: Path, where: str, code: str, msg: str) -> None:
    p = _program(tmp_path, where, code)
    with pytest.raises(P4CompileError) as ei:
        compile_p4(str(p))
    assert msg in str(ei.value)
    assert str(ei.value).startswith(f"{p}:")
    assert ei.value.line > 1


def test_base_program_compiles(tmp_path: Path) -> None:
    compile_p4(str(_program(tmp_path, "APPLY", "")))


def test_runtime_index_outside_the_stack_reads_zeros_and_writes_nowhere(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = _program(tmp_path, "APPLY", "sm.egress_spec = 1; hdr.hs[hdr.h.a].b = 7; "
                                    "hdr.h.b = hdr.hs[hdr.h.a].b + 1;")
    sw = Switch(compile_p4(str(p)))
    assert sw.process(0, bytes([1, 0])) == [(1, bytes([1, 8]))]  # hs[1] written, invalid
    assert not caplog.records
    assert sw.process(0, bytes([2, 0])) == [(1, bytes([2, 1]))]  # nothing written, 0 read
    assert "header stack index 2 is outside the stack of 2" in caplog.text
    assert "prog.p4:" in caplog.text


def test_extract_outside_the_stack_stops_the_packet(tmp_path: Path) -> None:
    p = _program(tmp_path, "PARSER", "pkt.extract(hdr.hs[hdr.h.a]);")
    sw = Switch(compile_p4(str(p)))
    assert sw.process(0, bytes([1, 0, 5, 6])) == [(0, bytes([1, 0, 5, 6]))]
    with pytest.raises(IndexError, match=r"prog\.p4:\d+:\d+: header stack index 2 is outside "
                                         r"the stack of 2 \(BMv2 aborts"):
        sw.process(0, bytes([2, 0, 5, 6]))


def test_last_of_an_empty_stack_stops_the_packet(tmp_path: Path) -> None:
    p = _program(tmp_path, "PARSER", "hdr.h.b = hdr.hs.last.a;")
    sw = Switch(compile_p4(str(p)))
    with pytest.raises(IndexError, match="last of an empty stack"):
        sw.process(0, bytes([2, 0]))
