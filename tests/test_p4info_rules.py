"""P4Info by p4c's rules (issue 17): the expected messages here are written by hand from the
rules (pyswitch/p4info/build.py, pyswitch/p4info/ids.py), not copied from an output.

The ids use an independent few-line Jenkins one-at-a-time hash; that the hash and the
prefixes are p4c's is pinned by p4c's published ids in tests/test_pyswitch_p4info.py
(basic.p4: MyIngress.ipv4_lpm = 37375156, NoAction = 21257015).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from pyswitch import Switch, compile_p4
from pyswitch.p4info.compare import diff_kind, first_difference, parse_text
from pyswitch.p4info.ids import SymbolTable

HERE = Path(__file__).parent
ACTION, TABLE, COUNTER, DIRECT_COUNTER, REGISTER = 0x01, 0x02, 0x12, 0x13, 0x16


def one_at_a_time(s: str) -> int:
    h = 0
    for b in s.encode():
        h = (h + b) % 2**32
        h = (h + (h << 10)) % 2**32
        h ^= h >> 6
    h = (h + (h << 3)) % 2**32
    h ^= h >> 11
    return (h + (h << 15)) % 2**32


def pid(kind: int, name: str, probe: int = 0) -> int:
    return kind << 24 | ((one_at_a_time(name) + probe) & 0xFFFFFF)


def expected_rules_p4info() -> p4info_pb2.P4Info:
    fwd, drop, noa = pid(ACTION, "c.fwd"), pid(ACTION, "c.drop"), pid(ACTION, "NoAction")
    rename, bump = pid(ACTION, "c.rename_me"), pid(ACTION, "c.bump")
    t1626 = pid(TABLE, "c.t1626")
    t3872 = pid(TABLE, "c.t3872", probe=1)  # same low 24 bits as c.t1626, sorted after it
    dbytes = pid(DIRECT_COUNTER, "c.dbytes")
    text = f'''
pkg_info {{ arch: "v1model" }}
tables {{
  preamble {{ id: {t1626} name: "c.t1626" alias: "t1626" }}
  match_fields {{ id: 1 name: "h.eth.dst" bitwidth: 48 match_type: EXACT }}
  action_refs {{ id: {fwd} }}
  action_refs {{ id: {drop} annotations: "@defaultonly" scope: DEFAULT_ONLY }}
  action_refs {{ id: {noa} annotations: "@defaultonly" scope: DEFAULT_ONLY }}
  initial_default_action {{ action_id: {noa} }}
  size: 1024
  idle_timeout_behavior: NOTIFY_CONTROL
}}
tables {{
  preamble {{ id: {t3872} name: "c.t3872" alias: "t3872" }}
  match_fields {{ id: 1 name: "h.eth.$valid$" bitwidth: 1 match_type: EXACT }}
  match_fields {{ id: 2 name: "h.eth.type" bitwidth: 16 match_type: TERNARY }}
  action_refs {{ id: {fwd} annotations: "@tableonly" scope: TABLE_ONLY }}
  action_refs {{ id: {drop} }}
  action_refs {{ id: {noa} }}
  const_default_action_id: {drop}
  initial_default_action {{ action_id: {drop} }}
  direct_resource_ids: {dbytes}
  size: 64
}}
tables {{
  preamble {{ id: {0x02000077} name: "c.with_id" alias: "with_id" }}
  match_fields {{ id: 1 name: "h.eth.src" bitwidth: 48 match_type: LPM }}
  action_refs {{ id: {rename} }}
  initial_default_action {{ action_id: {rename} arguments {{ param_id: 1 value: "\\007" }} }}
  size: 1024
}}
tables {{
  preamble {{ id: {pid(TABLE, "c.consts")} name: "c.consts" alias: "consts" }}
  match_fields {{ id: 1 name: "h.eth.type" bitwidth: 16 match_type: EXACT }}
  action_refs {{ id: {rename} }}
  action_refs {{ id: {noa} }}
  initial_default_action {{ action_id: {noa} }}
  size: 1024
  is_const_table: true
  has_initial_entries: true
}}
tables {{
  preamble {{ id: {pid(TABLE, "c.dup")} name: "c.dup" alias: "c.dup" }}
  action_refs {{ id: {noa} }}
  initial_default_action {{ action_id: {noa} }}
  size: 1024
}}
tables {{
  preamble {{ id: {pid(TABLE, "e.dup")} name: "e.dup" alias: "e.dup" }}
  action_refs {{ id: {noa} }}
  initial_default_action {{ action_id: {noa} }}
  size: 1024
}}
actions {{
  preamble {{ id: {fwd} name: "c.fwd" alias: "fwd" annotations: "@my_note(\\"kept\\")" }}
  params {{ id: 1 name: "port" bitwidth: 9 }}
}}
actions {{ preamble {{ id: {drop} name: "c.drop" alias: "drop" }} }}
actions {{
  preamble {{ id: {noa} name: "NoAction" alias: "NoAction"
              annotations: "@noWarn(\\"unused\\")" }}
}}
actions {{
  preamble {{ id: {rename} name: "c.rename_me" alias: "rename_me" }}
  params {{ id: 1 name: "v" bitwidth: 8 }}
}}
actions {{ preamble {{ id: {bump} name: "c.bump" alias: "bump" }} }}
counters {{
  preamble {{ id: {pid(COUNTER, "c.hits")} name: "c.hits" alias: "hits" }}
  spec {{ unit: PACKETS }}
  size: 8
}}
direct_counters {{
  preamble {{ id: {dbytes} name: "c.dbytes" alias: "dbytes" }}
  spec {{ unit: BYTES }}
  direct_table_id: {t3872}
}}
registers {{
  preamble {{ id: {pid(REGISTER, "c.last")} name: "c.last" alias: "last" }}
  type_spec {{ bitstring {{ bit {{ bitwidth: 32 }} }} }}
  size: 4
}}
type_info {{ }}
'''
    return parse_text(text)


def test_rules_program_p4info_is_p4cs() -> None:
    """Every rule at once; the program's comments say which construct shows which rule
    (unused, inlined-only, never applied and dead-branch objects are absent)."""
    ours = compile_p4(HERE / "p4/p4info_rules.p4").p4info
    assert first_difference(ours, expected_rules_p4info()) is None


def test_collision_probes_in_sorted_order() -> None:
    assert one_at_a_time("c.t1626") & 0xFFFFFF == one_at_a_time("c.t3872") & 0xFFFFFF
    for order in (["c.t1626", "c.t3872"], ["c.t3872", "c.t1626"]):
        sym = SymbolTable()
        for n in order:
            sym.add(TABLE, n)
        sym.assign()
        assert sym.id(TABLE, "c.t1626") == pid(TABLE, "c.t1626")
        assert sym.id(TABLE, "c.t3872") == pid(TABLE, "c.t1626") + 1


def test_user_ids_first_and_aliases_over_all_kinds() -> None:
    sym = SymbolTable()
    sym.add(ACTION, "a.x")
    sym.add(TABLE, "b.x", user_id=pid(TABLE, "b.x") & 0xFFFFFF)  # the hash id, taken by @id
    sym.add(TABLE, "a.y")
    sym.add(REGISTER, "y")
    sym.assign()
    assert sym.id(TABLE, "b.x") == pid(TABLE, "b.x")
    assert sym.id(ACTION, "a.x") == pid(ACTION, "a.x")
    # the alias is unique among every kind: "x" names an action and a table
    assert (sym.alias("a.x"), sym.alias("b.x"), sym.alias("a.y"), sym.alias("y")) == \
        ("a.x", "b.x", "a.y", "y")


def test_compare_ignores_order_only_where_meaningless() -> None:
    a = expected_rules_p4info()
    b = p4info_pb2.P4Info()
    b.CopyFrom(a)
    b.tables[0].action_refs.reverse()
    b.actions.reverse()
    assert first_difference(a, b) is None
    b.tables[1].match_fields.reverse()  # match field order is part of the contract
    d = first_difference(a, b)
    assert d is not None and diff_kind(d) == "tables.match_fields"
    c = p4info_pb2.P4Info()
    c.CopyFrom(a)
    c.actions[0].preamble.annotations.append("@extra")
    d = first_difference(c, a)
    assert d is not None and "annotations" in d and "c.fwd" in d
    assert text_format.MessageToString(a)  # sanity: the expectation parses


def test_controller_header_id_is_the_header_types() -> None:
    """p4c: the symbol is the header type (its name gives the id); the preamble's name and
    alias are the @controller_header argument."""
    info = compile_p4(HERE / "p4/rt_cpu.p4").p4info
    got = {c.preamble.name: c for c in info.controller_packet_metadata}
    for name, type_name in (("packet_in", "packet_in_t"), ("packet_out", "packet_out_t")):
        pre = got[name].preamble
        assert (pre.id, pre.alias) == (pid(0x04, type_name), name)
        assert list(pre.annotations) == [f'@controller_header("{name}")']


KEYS_P4 = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; @name("b_cp") bit<8> b; }
struct inner_t { bit<8> f; }
struct H { h_t h; }
struct M { @name("local_cp") inner_t local; @name(".global_cp") inner_t g; }
parser P(packet_in pkt, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout H hdr, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    action set(bit<9> p) { sm.egress_spec = p; }
    table t {
        key = { hdr.h.isValid() : exact; hdr.h.b : exact; m.local.f : ternary;
                m.g.f : exact; hdr.h.a : exact @name("mine"); }
        actions = { set; }
    }
    apply { t.apply(); }
}
control D(packet_out pkt, in H hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), VC(), VC(), D()) main;
""".replace("VC(), VC(), D()", "E(), VC(), D()").replace(
    "control D(", "control E(inout H hdr, inout M m, inout standard_metadata_t sm) "
    "{ apply { } }\ncontrol D(")


def test_key_names_are_p4cs(tmp_path: Path) -> None:
    """p4c's TableKeyNames: `isValid()` is `$valid$`; a field with @name is named by it
    (absolute with a leading '.'); an @name on the key element wins. The switch API uses
    the same names."""
    src = tmp_path / "keys.p4"
    src.write_text(KEYS_P4)
    prog = compile_p4(src)
    t = prog.p4info.tables[0]
    assert [m.name for m in t.match_fields] == [
        "hdr.h.$valid$", "hdr.h.b_cp", "m.local_cp.f", "global_cp.f", "mine"]
    sw = Switch(prog)
    sw.insert_entry("I.t", {"hdr.h.$valid$": 1, "hdr.h.b_cp": 2, "m.local_cp.f": (0, 0),
                            "global_cp.f": 0, "mine": 1}, "I.set", {"p": 4}, 1)
    assert [p for p, _ in sw.process(1, b"\x01\x02")] == [4]


def test_compare_cli(tmp_path: Path, capsys: object) -> None:
    from pyswitch.p4info.compare import main

    a, b = tmp_path / "a.txtpb", tmp_path / "b.txtpb"
    exp = expected_rules_p4info()
    a.write_text(text_format.MessageToString(exp))
    exp.tables[0].size = 7
    b.write_text(text_format.MessageToString(exp))
    assert main([str(a), str(a)]) == 0
    assert main([str(a), str(b)]) == 1
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert out.splitlines()[0] == "equal"
    assert out.splitlines()[1] == "tables[c.t1626].size: ours 1024 != p4c 7"
