"""Programs p4c rejects are rejected here too, with p4c's reason and location (issue 17
item 7, issue 20's duplicate names). Each case is our own small program: a v1model skeleton
with one construct changed; the line of the construct is found by a marker comment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pyswitch import P4CompileError, Switch, compile_p4

SKELETON = """\
#include <core.p4>
{pre}
#include <v1model.p4>
header h_t {{ bit<16> f; }}
struct H {{ h_t h; }}
struct M {{ bit<8> v; }}
{top}
parser P(packet_in pkt, out H hdr, inout M m, inout standard_metadata_t sm) {{
    state start {{
        pkt.extract(hdr.h);
{parser}
        transition accept;
    }}
}}
control VC(inout H hdr, inout M m) {{ apply {{ }} }}
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout H hdr, inout M m, inout standard_metadata_t sm) {{
{egress}
}}
control D(packet_out pkt, in H hdr) {{ apply {{ pkt.emit(hdr.h); }} }}
V1Switch(P(), VC(), I(), E(), VC(), D()) main;
"""


def program(tmp_path: Path, pre: str = "", top: str = "", parser: str = "",
            ingress: str = "apply { }", egress: str = "apply { }") -> Path:
    p = tmp_path / "prog.p4"
    p.write_text(SKELETON.format(pre=pre, top=top, parser=parser, ingress=ingress,
                                 egress=egress))
    return p


def line_of(p: Path, marker: str, nth: int = 0) -> int:
    lines = [i for i, ln in enumerate(p.read_text().splitlines(), 1) if marker in ln]
    return lines[nth]


def reject(p: Path) -> P4CompileError:
    with pytest.raises(P4CompileError) as ei:
        compile_p4(p)
    return ei.value


def test_defaultonly_action_in_an_entry(tmp_path: Path) -> None:
    p = program(tmp_path, ingress="""
    action a1() { m.v = 1; }
    action a3() { m.v = 3; }
    table t {
        key = { hdr.h.f : exact; }
        actions = { a1; @defaultonly a3; }
        const entries = {
            3 : a3();   // ENTRY
        }
    }
    apply { t.apply(); }""")
    e = reject(p)
    assert e.line == line_of(p, "// ENTRY")
    assert "Entry: Action marked with defaultonly used in table" in e.message


def test_tableonly_action_as_default(tmp_path: Path) -> None:
    p = program(tmp_path, ingress="""
    action a1() { m.v = 1; }
    table t {
        key = { hdr.h.f : exact; }
        actions = { @tableonly a1; NoAction; }
        default_action = a1;   // DEFAULT
    }
    apply { t.apply(); }""")
    e = reject(p)
    assert e.line == line_of(p, "// DEFAULT")
    assert "Action marked with tableonly used as default action" in e.message


@pytest.mark.parametrize("where", ["same control", "two controls"])
def test_two_actions_with_one_control_plane_name(tmp_path: Path, where: str) -> None:
    first = """
    @name(".foo") action act1() { m.v = 1; }   // FIRST
    table t1 { actions = { act1; } }"""
    second = """
    @name(".foo") action act2() { m.v = 2; }   // SECOND
    table t2 { actions = { act2; } }"""
    if where == "same control":
        p = program(tmp_path, ingress=first + second + "\n    apply { t1.apply(); t2.apply(); }")
    else:
        p = program(tmp_path, ingress=first + "\n    apply { t1.apply(); }",
                    egress=second.replace("t2", "t1") + "\n    apply { t1.apply(); }")
    e = reject(p)
    assert e.line == line_of(p, "// SECOND")
    assert "foo: conflicting control plane name" in e.message
    assert f":{line_of(p, '// FIRST')}:" in e.message  # the other declaration


def test_two_tables_with_one_name_in_one_control(tmp_path: Path) -> None:
    """issue 20: this compiled to a P4Info with two tables of one id."""
    p = program(tmp_path, ingress="""
    action a() { m.v = 1; }
    table t { actions = { a; } }   // FIRST
    table t { actions = { a; } }   // SECOND
    apply { t.apply(); }""")
    e = reject(p)
    assert e.line == line_of(p, "// SECOND")
    assert e.message.startswith("t: Duplicates declaration t")
    assert f":{line_of(p, '// FIRST')}:" in e.message


@pytest.mark.parametrize("decls", [
    "action a() { m.v = 1; }   // FIRST\n    action a() { m.v = 2; }   // SECOND",
    "bit<8> x;   // FIRST\n    bit<16> x;   // SECOND",
    "counter(4, CounterType.packets) c;   // FIRST\n"
    "    register<bit<8>>(4) c;   // SECOND",
])
def test_other_duplicate_declarations_in_one_control(tmp_path: Path, decls: str) -> None:
    p = program(tmp_path, ingress=f"    {decls}\n    apply {{ }}")
    e = reject(p)
    assert e.line == line_of(p, "// SECOND")
    assert "Duplicates declaration" in e.message
    assert f":{line_of(p, '// FIRST')}:" in e.message


def test_same_local_name_in_two_controls_is_fine(tmp_path: Path) -> None:
    body = "    action a() { m.v = 1; }\n    table t { actions = { a; } }\n" \
           "    apply { t.apply(); }"
    p = program(tmp_path, ingress=body, egress=body)
    names = sorted(t.preamble.name for t in compile_p4(p).p4info.tables)
    assert names == ["E.t", "I.t"]


def test_switch_with_two_default_labels(tmp_path: Path) -> None:
    p = program(tmp_path, ingress="""
    action a() { m.v = 1; }
    table t { actions = { a; } default_action = a; }
    apply {
        switch (t.apply().action_run) {   // SWITCH
            a: { sm.egress_spec = 1; }
            default: { sm.egress_spec = 2; }   // D1
            default: { sm.egress_spec = 3; }   // D2
        }
    }""")
    e = reject(p)
    assert e.line == line_of(p, "// SWITCH")
    assert "switch has multiple 'default' labels" in e.message
    assert f"{line_of(p, '// D1')}:" in e.message and f"{line_of(p, '// D2')}:" in e.message


def test_action_call_in_a_parser(tmp_path: Path) -> None:
    p = program(tmp_path, top="action foo(in bit<16> x, out bit<8> y) { y = (bit<8>) x; }",
                parser="        foo(hdr.h.f, m.v);   // CALL")
    e = reject(p)
    assert e.line == line_of(p, "// CALL")
    assert "Action calls are not allowed within parsers" in e.message


@pytest.mark.parametrize("version,message", [
    ("-6419018", "-6419018: expected v1model version to be a non-negative number"),
    ("20000101", "20000101: unknown v1model version; initial supported version is "
                 "20180101, latest is 20200408"),
    ("20200409", "unknown v1model version"),
])
def test_bad_v1model_version(tmp_path: Path, version: str, message: str) -> None:
    p = program(tmp_path, pre=f"#define V1MODEL_VERSION {version}")
    e = reject(p)
    assert Path(e.file).name == "v1model.p4"  # where p4c reports it too
    assert message in e.message


@pytest.mark.parametrize("version", ["20180101", "20200408", None])
def test_known_v1model_versions_compile(tmp_path: Path, version: str | None) -> None:
    pre = f"#define V1MODEL_VERSION {version}" if version else ""
    compile_p4(program(tmp_path, pre=pre))


def test_one_table_name_from_two_instances(tmp_path: Path) -> None:
    """An absolute @name on a table of a control instantiated twice: one P4Info name for
    two tables (p4c: "Name 't0' is used for multiple table objects in the P4Info")."""
    p = program(tmp_path, top="""
control Sub(inout standard_metadata_t sm) {
    @name(".t0") table t0 {   // TABLE
        key = { sm.ingress_port : exact; }
        actions = { NoAction; }
    }
    apply { t0.apply(); }
}""", ingress="""
    Sub() c1;
    Sub() c2;
    apply { c1.apply(sm); c2.apply(sm); }""")
    e = reject(p)
    assert e.line == line_of(p, "// TABLE")
    assert "Name 't0' is used for multiple table objects in the P4Info message" in e.message


def test_switch_in_a_used_action(tmp_path: Path) -> None:
    """BMv2 back end: no switch statement in an action; an unused action is dropped by
    p4c before that check, so it stays accepted."""
    body = """
    action a0() {
        switch (m.v) {   // SWITCH
            8w0: { m.v = 1; }
        }
    }
    apply { %s }"""
    p = program(tmp_path, ingress=body % "a0();")
    e = reject(p)
    assert e.line == line_of(p, "// SWITCH")
    assert "switch statements not supported in actions on this target" in e.message
    compile_p4(program(tmp_path, ingress=body % ""))


def test_parser_that_never_reaches_accept_or_reject(tmp_path: Path) -> None:
    p = tmp_path / "loop.p4"
    p.write_text(SKELETON.format(pre="", top="", parser="", ingress="apply { }",
                                 egress="apply { }").replace(
        "        transition accept;\n    }", "        transition s1;\n    }\n"
        "    state s1 { transition s2; }\n    state s2 { transition s1; }"))
    e = reject(p)
    assert e.line == line_of(p, "parser P(")
    assert e.message == "parser P: Parser never reaches accept or reject state"


def test_param_name_annotation_is_the_control_plane_name(tmp_path: Path) -> None:
    """p4c names an action parameter by its @name in P4Info; the switch API takes the same
    name, so P4Runtime writes that use it reach the action."""
    p = program(tmp_path, ingress="""
    action fwd(@name("out_port") bit<9> port) { sm.egress_spec = port; }
    table t { key = { hdr.h.f : exact; } actions = { fwd; } }
    apply { t.apply(); }""")
    prog = compile_p4(p)
    act = {a.preamble.name: a for a in prog.p4info.actions}["I.fwd"]
    assert [x.name for x in act.params] == ["out_port"]
    sw = Switch(prog)
    sw.insert_entry("I.t", {"hdr.h.f": 7}, "I.fwd", {"out_port": 3})
    out = sw.process(1, b"\x00\x07")
    assert [port for port, _ in out] == [3]


@pytest.mark.parametrize("decls", [
    "struct S { bit<8> a; }   // FIRST\nstruct S { bit<16> b; }   // SECOND",
    "const bit<8> K = 1;   // FIRST\nconst bit<8> K = 2;   // SECOND",
    "action g() { }   // FIRST\naction g() { }   // SECOND",
])
def test_duplicate_top_level_declarations(tmp_path: Path, decls: str) -> None:
    p = program(tmp_path, top=decls)
    e = reject(p)
    assert e.line == line_of(p, "// SECOND")
    assert "Duplicates declaration" in e.message
    assert f":{line_of(p, '// FIRST')}:" in e.message


@pytest.mark.parametrize("ids,message", [
    ("@id(0x01000005) table t", "I.t: @id has the wrong 8-bit prefix"),
    ("@id(5) table t", "@id 33554437 is assigned to multiple declarations"),
])
def test_bad_user_ids(tmp_path: Path, ids: str, message: str) -> None:
    p = program(tmp_path, ingress=f"""
    @id(5) table u {{ actions = {{ NoAction; }} }}
    {ids} {{ actions = {{ NoAction; }} }}   // SECOND
    apply {{ u.apply(); t.apply(); }}""")
    e = reject(p)
    assert e.line == line_of(p, "// SECOND")
    assert e.message == message


def test_newtype_as_shift_amount(tmp_path: Path) -> None:
    # p4c: the right operand of a shift must be bit<S> or a known non-negative integer; a
    # `type bit<8>` value is neither until it is cast
    p = program(tmp_path, top="type bit<8> amount_t;", ingress="""
    apply {
        amount_t n = (amount_t) m.v;
        hdr.h.f = hdr.h.f << n;   // SHIFT
    }""")
    e = reject(p)
    assert e.line == line_of(p, "// SHIFT")
    assert "shift amount of type amount_t" in e.message


def test_newtype_cast_to_bits_shifts(tmp_path: Path) -> None:
    p = program(tmp_path, top="type bit<8> amount_t;", ingress="""
    apply {
        amount_t n = (amount_t) m.v;
        hdr.h.f = hdr.h.f << (bit<8>) n;
    }""")
    compile_p4(p)
