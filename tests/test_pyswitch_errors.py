"""Programs outside pyswitch's subset (or wrong) are rejected with file:line:col: message."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyswitch import P4CompileError, compile_p4

BASE = """#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct metadata { bit<8> m; }
struct headers { ethernet_t ethernet; }
//TOP
parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        //PARSER
        transition accept;
    }
    //STATES
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    //DECL
    apply {
        //APPLY
    }
}
control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); }
}
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
"""

CASES = [
    ("TOP", "header_union U { ethernet_t a; bit<8> b; }", "member 'b' must be a header"),
    ("TOP", "header V { varbit<12> x; }", "varbit<12>: pyswitch (as BMv2) needs a positive "
                                          "multiple of 8 bits"),
    ("TOP", "extern Foo { Foo(); void f(); }", "user-defined extern 'Foo' is not supported"),
    ("TOP", "#define F(x) #x", "function-like macro 'F': the # and ## operators are not"),
    ("TOP", "bit<8> f(in bit<8> x) { exit; }", "exit inside a function is not supported"),
    ("DECL", "meter(32, MeterType.packets) m;", "extern 'meter' is not supported"),
    ("DECL", "register<bit<8>>(4) r; action a() { bit<16> v; r.read(v, 0); }",
     "register read result must be a bit<8> l-value"),
    ("APPLY", "meta.m = hdr.ethernet.etherType;", "type mismatch: expected bit<8>, got bit<16>"),
    ("APPLY", "meta.m = meta.m + hdr.ethernet.etherType;",
     "operands have different types: bit<8> and bit<16>"),
    ("APPLY", "meta.m = meta.x;", "struct metadata has no field 'x'"),
    ("APPLY", "meta.m = undefined_thing;", "unknown identifier 'undefined_thing'"),
    ("APPLY", "resubmit(meta.m);", "extern 'resubmit' is not supported"),
    ("APPLY", "frobnicate(1);", "unknown identifier 'frobnicate'"),
    ("APPLY", "hdr.ethernet.push_front(1);", "has no field 'push_front'"),
    ("APPLY", "meta.m = 8w300;", "value 300 does not fit in 8 bits"),
    ("APPLY", "if (meta.m) { }", "if condition must be bool"),
    ("APPLY", "meta.m = meta.m[8:1];", "slice [8:1] out of range for bit<8>"),
    ("PARSER", "packet.extract(hdr.ethernet, 8);", "extract with a length needs a header "
                                                   "with a varbit field"),
    ("APPLY", "meta.m = ;", "syntax error: unexpected ';'"),
    ("APPLY", "hdr.ethernet = meta.m == 1 ? hdr.ethernet : hdr.ethernet;",
     "?: on header ethernet_t values is not supported"),
    ("PARSER", "exit;", "exit is not allowed in a parser"),
    ("DECL", "table t { key = { meta.m: exact; } actions = { NoAction; } }",
     "a table apply inside this expression is not supported"),
    ("TOP", "header_type h_t { fields { x : 8; } }", "syntax error"),
    ("DECL", "table t2 { key = { meta.m: fancy; } actions = { NoAction; } }",
     "unknown match kind 'fancy'"),
    ("APPLY", "hdr.ethernet.etherType = hdr.ethernet.dstAddr[15:0] ++ 8w1;",
     "type mismatch: expected bit<16>, got bit<24>"),
]


@pytest.mark.parametrize("where,snippet,message", CASES)
def test_unsupported_or_wrong_constructs_are_located(tmp_path: Path, where: str, snippet: str,
                                                     message: str) -> None:
    src = BASE.replace(f"//{where}", snippet)
    if "table t {" in snippet:
        src = src.replace("//APPLY", "random(meta.m, 8w0, t.apply().hit ? 8w1 : 8w2);")
    f = tmp_path / "prog.p4"
    f.write_text(src)
    with pytest.raises(P4CompileError) as ei:
        compile_p4(f)
    e = ei.value
    assert message in e.message, str(e)
    assert e.file == str(f)
    first = "t.apply().hit" if "table t {" in snippet else snippet.split("\n")[0].strip()
    marker_line = next(i for i, ln in enumerate(src.splitlines(), 1) if first in ln)
    if where != "PARSER":
        assert e.line == marker_line, str(e)
    assert str(e) == f"{f}:{e.line}:{e.col}: {e.message}"
    assert e.col >= 1


def test_base_program_compiles(tmp_path: Path) -> None:
    f = tmp_path / "prog.p4"
    f.write_text(BASE)
    compile_p4(f)


def test_error_in_included_file_points_into_it(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "defs.p4").write_text("// defs\n\nconst bit<8> K = 8w1 + 16w1;\n")
    src = BASE.replace("//TOP", '#include "inc/defs.p4"')
    f = tmp_path / "prog.p4"
    f.write_text(src)
    with pytest.raises(P4CompileError) as ei:
        compile_p4(f)
    assert ei.value.file.endswith("inc/defs.p4") and ei.value.line == 3
    assert "operands have different types" in ei.value.message


def test_missing_include_and_define_option(tmp_path: Path) -> None:
    f = tmp_path / "prog.p4"
    f.write_text(BASE.replace("//TOP", '#include "nope.p4"'))
    with pytest.raises(P4CompileError, match="cannot find include file 'nope.p4'"):
        compile_p4(f)
    f.write_text(BASE.replace("//APPLY", "meta.m = WIDTH;").replace(
        "//TOP", "#ifndef WIDTH\n#define WIDTH 8w3\n#endif"))
    p = compile_p4(f, defines={"WIDTH": "8w7"})
    assert "= 7" in p.code
