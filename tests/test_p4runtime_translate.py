"""P4Runtime id/byte translation (server side) and entity building (client side).

Pure tests on a hand-written P4Info: no gRPC, no switch. They pin the validation rules the
switch must apply exactly as BMv2 does (INVALID_ARGUMENT for unknown ids, values wider than
their field, prefixes longer than the field) and the canonical byte strings of P4Runtime §8.4.
"""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.dataplane.p4runtime_client import SwitchConnection
from pyswitch.p4runtime.codec import CodecError, decode_int, encode_int, to_int
from pyswitch.p4runtime.p4info_index import P4InfoIndex, load_p4info
from pyswitch.p4runtime.translate import P4RTError, Translator, field_value, same_match

P4INFO_TEXT = """
tables {
  preamble { id: 1001 name: "MyIngress.ipv4_lpm" alias: "ipv4_lpm" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 2001 }
  action_refs { id: 2002 }
  size: 1024
}
tables {
  preamble { id: 1002 name: "MyIngress.acl" alias: "acl" }
  match_fields { id: 1 name: "standard_metadata.ingress_port" bitwidth: 9 match_type: EXACT }
  match_fields { id: 2 name: "hdr.ipv4.srcAddr" bitwidth: 32 match_type: TERNARY }
  match_fields { id: 3 name: "hdr.udp.dport" bitwidth: 16 match_type: RANGE }
  action_refs { id: 2002 }
  action_refs { id: 2003 }
  size: 64
}
actions {
  preamble { id: 2001 name: "MyIngress.ipv4_forward" alias: "ipv4_forward" }
  params { id: 1 name: "dstAddr" bitwidth: 48 }
  params { id: 2 name: "port" bitwidth: 9 }
}
actions { preamble { id: 2002 name: "MyIngress.drop" alias: "drop" } }
actions {
  preamble { id: 2003 name: "MyIngress.set_port" alias: "set_port" }
  params { id: 1 name: "port" bitwidth: 9 }
}
counters {
  preamble { id: 3001 name: "MyIngress.rx" }
  spec { unit: BOTH }
  size: 8
}
"""


@pytest.fixture(scope="module")
def p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(P4INFO_TEXT, p4info_pb2.P4Info())


@pytest.fixture(scope="module")
def tr(p4info) -> Translator:
    return Translator(P4InfoIndex(p4info))


def lpm_entry(value: bytes, plen: int, table_id: int = 1001) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=table_id)
    fm = te.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = value, plen
    return te


def code_of(fn, *args) -> int:
    with pytest.raises(P4RTError) as info:
        fn(*args)
    return info.value.code


def test_canonical_bytes():
    assert encode_int(0) == b"\x00"
    assert encode_int(1) == b"\x01"
    assert encode_int(0x100) == b"\x01\x00"
    assert encode_int(0x0A000001) == b"\x0a\x00\x00\x01"
    # receivers accept leading zero bytes as long as the value fits
    assert decode_int(b"\x00\x00\x01\x01", 9, "x") == 0x101
    with pytest.raises(CodecError, match="does not fit in 9 bits"):
        decode_int(b"\x02\x00", 9, "x")
    with pytest.raises(CodecError, match="empty"):
        decode_int(b"", 9, "x")
    # the server answers both with INVALID_ARGUMENT
    assert code_of(field_value, b"\x02\x00", 9, "x") == code_pb2.INVALID_ARGUMENT
    assert code_of(field_value, b"", 9, "x") == code_pb2.INVALID_ARGUMENT
    # a client reading an answer takes the string as it comes
    assert decode_int(b"") == 0 and decode_int(b"\x00\x02\x00") == 512


def test_lpm_rules(tr):
    key = tr.key(lpm_entry(b"\x0a\x00\x01\x00", 24))
    assert key.table.name == "MyIngress.ipv4_lpm"
    assert key.match == {"hdr.ipv4.dstAddr": (0x0A000100, 24)}
    assert code_of(tr.key, lpm_entry(b"\x0a\x00\x01\x00", 33)) == code_pb2.INVALID_ARGUMENT
    assert code_of(tr.key, lpm_entry(b"\x0a\x00\x01\x01", 24)) == code_pb2.INVALID_ARGUMENT
    assert code_of(tr.key, lpm_entry(b"\x01\x0a\x00\x01\x00", 24)) == \
        code_pb2.INVALID_ARGUMENT  # 33-bit value
    assert code_of(tr.key, lpm_entry(b"\x0a\x00\x01\x00", 24, 9999)) == \
        code_pb2.INVALID_ARGUMENT  # unknown table id
    # omitted LPM field = don't care
    assert tr.key(p4runtime_pb2.TableEntry(table_id=1001)).match == \
        {"hdr.ipv4.dstAddr": (0, 0)}


def test_field_kind_ids_and_priority(tr):
    te = p4runtime_pb2.TableEntry(table_id=1001)
    te.match.add(field_id=1).exact.value = b"\x0a\x00\x00\x01"
    assert code_of(tr.key, te) == code_pb2.INVALID_ARGUMENT  # exact on an lpm field
    te = p4runtime_pb2.TableEntry(table_id=1001)
    te.match.add(field_id=7).lpm.value = b"\x0a"
    assert code_of(tr.key, te) == code_pb2.INVALID_ARGUMENT  # unknown field id
    acl = p4runtime_pb2.TableEntry(table_id=1002)
    acl.match.add(field_id=1).exact.value = b"\x01\x01"  # 257 fits in 9 bits
    fm = acl.match.add(field_id=2)
    fm.ternary.value, fm.ternary.mask = b"\x0a\x00\x00\x00", b"\xff\x00\x00\x00"
    assert code_of(tr.key, acl) == code_pb2.INVALID_ARGUMENT  # ternary table needs priority
    acl.priority = 10
    key = tr.key(acl)
    assert key.match == {"standard_metadata.ingress_port": 257,
                         "hdr.ipv4.srcAddr": (0x0A000000, 0xFF000000),
                         "hdr.udp.dport": (0, 0xFFFF)}
    assert key.priority == 10
    missing_exact = p4runtime_pb2.TableEntry(table_id=1002, priority=1)
    assert code_of(tr.key, missing_exact) == code_pb2.INVALID_ARGUMENT
    lpm_with_prio = lpm_entry(b"\x0a\x00\x00\x00", 8)
    lpm_with_prio.priority = 3
    assert code_of(tr.key, lpm_with_prio) == code_pb2.INVALID_ARGUMENT


def test_actions(tr):
    t = tr.index.table(1001)
    a = p4runtime_pb2.TableAction()
    a.action.action_id = 2001
    a.action.params.add(param_id=1, value=b"\x02\x00\x00\x00\x00\x02")
    a.action.params.add(param_id=2, value=b"\x01\xff")
    assert tr.action(t, a) == ("MyIngress.ipv4_forward", {"dstAddr": 0x020000000002,
                                                          "port": 0x1FF})
    a.action.params[1].value = b"\x02\x00"  # 512 does not fit 9 bits
    assert code_of(tr.action, t, a) == code_pb2.INVALID_ARGUMENT
    del a.action.params[1]
    assert code_of(tr.action, t, a) == code_pb2.INVALID_ARGUMENT  # missing param
    b = p4runtime_pb2.TableAction()
    b.action.action_id = 2003  # set_port is not an action of ipv4_lpm
    b.action.params.add(param_id=1, value=b"\x01")
    assert code_of(tr.action, t, b) == code_pb2.INVALID_ARGUMENT
    b.action.action_id = 4242
    assert code_of(tr.action, t, b) == code_pb2.INVALID_ARGUMENT


def test_client_entities_decode_to_the_same_values(p4info, tr):
    conn = SwitchConnection("127.0.0.1:1", name="offline")
    conn.use_p4info(p4info)
    te = conn.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.1.77/24"},
                          "MyIngress.ipv4_forward", {"dstAddr": "02:00:00:00:00:02", "port": 3})
    key = tr.key(te)
    assert key.match == {"hdr.ipv4.dstAddr": (0x0A000100, 24)}  # host bits cleared
    assert tr.action(key.table, te.action) == ("MyIngress.ipv4_forward",
                                               {"dstAddr": 0x020000000002, "port": 3})
    # canonical strings on the wire
    assert te.match[0].lpm.value == b"\x0a\x00\x01\x00"
    assert te.action.action.params[1].value == b"\x03"
    acl = conn.table_entry("MyIngress.acl", {"standard_metadata.ingress_port": 2,
                                             "hdr.ipv4.srcAddr": ("10.0.0.0", "255.0.0.0"),
                                             "hdr.udp.dport": (0, 0xFFFF)},
                           "MyIngress.drop", priority=5)
    assert [m.field_id for m in acl.match] == [1, 2]  # full range left out
    with pytest.raises(ValueError, match="does not fit in 9 bits"):
        conn.table_entry("MyIngress.acl", {"standard_metadata.ingress_port": 512},
                         "MyIngress.drop", priority=1)
    with pytest.raises(KeyError, match="unknown table"):
        conn.table_entry("MyIngress.nope", {})
    with pytest.raises(KeyError, match="missing parameter"):
        conn.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.0.0/8"},
                         "MyIngress.ipv4_forward", {"port": 1})


def test_encode_match_round_trip_and_same_match(tr):
    t = tr.index.table(1002)
    match = {"standard_metadata.ingress_port": 0, "hdr.ipv4.srcAddr": (0, 0),
             "hdr.udp.dport": (10, 20)}
    te = p4runtime_pb2.TableEntry(table_id=1002, priority=1)
    tr.encode_match(t, match, te)
    assert [m.field_id for m in te.match] == [1, 3]
    assert te.match[0].exact.value == b"\x00"
    assert tr.key(te).match == match
    assert same_match(t, match, dict(match, **{"hdr.ipv4.srcAddr": None}))
    assert not same_match(t, match, dict(match, **{"hdr.udp.dport": (10, 21)}))


def test_value_parsing_and_p4info_files(tmp_path, p4info):
    assert to_int("00:00:00:00:01:02", "m") == 0x102
    assert to_int("10.0.0.1", "ip") == 0x0A000001
    assert to_int(b"\x01\x00", "b") == 256
    assert to_int("0x1f", "h") == 31
    with pytest.raises(ValueError):
        to_int("ten", "x")
    text = tmp_path / "p.p4info.txt"
    text.write_text(P4INFO_TEXT)
    binary = tmp_path / "p.p4info.bin"
    binary.write_bytes(p4info.SerializeToString())
    assert load_p4info(text) == p4info == load_p4info(binary)
