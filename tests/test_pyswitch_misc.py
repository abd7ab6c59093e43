"""pyswitch conformance on tests/p4/pyswitch_misc.p4: range/optional/bool keys, @name,
lookahead + verify with a user error, serializable enums, nested struct copies, out/inout
action parameters, header list assignment, #if/#define."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pyswitch import InvalidArgument, P4CompileError, Switch, compile_p4

HERE = Path(__file__).parent
T = "global_by_len"


@pytest.fixture(scope="module")
def prog():  # noqa: ANN201
    return compile_p4(HERE / "p4/pyswitch_misc.p4")


def frame(version: int, kind: int, length: int, flag: int = 0) -> bytes:
    return b"\x02" * 12 + b"\x88\xb7" + struct.pack(">BBHB", version, kind, length, flag) + b"T"


def parse(data: bytes) -> tuple:
    return struct.unpack(">BBHB", data[19:24]), data[24:29], data[29:]


def test_computation_and_default_port_from_if(prog) -> None:  # noqa: ANN001
    sw = Switch(prog)
    out = sw.process(1, frame(1, 2, 200))
    assert [p for p, _ in out] == [5]  # MODE > 1 -> DEFAULT_PORT 5
    copy, misc2, rest = parse(out[0][1])
    # len + 900 = 1100 > 1000 -> big; kind 2 == Kind.Large -> in1.b
    assert copy == (1, 2, 1100, 0b11)
    assert misc2 == bytes.fromhex("eeddccbbaa") and rest == b"T"
    out = sw.process(1, frame(2, 1, 50))
    assert parse(out[0][1])[0] == (2, 1, 950, 0b00)
    out = sw.process(1, frame(2, 1, 0xFFFF))  # wraps at 16 bits: 0xFFFF + 900
    assert parse(out[0][1])[0] == (2, 1, (0xFFFF + 900) & 0xFFFF, 0b00)


def test_verify_with_user_error_and_lookahead(prog) -> None:  # noqa: ANN001
    sw = Switch(prog)
    out = sw.process(1, frame(3, 1, 1))
    assert [p for p, _ in out] == [7]  # parser_error == error.BadVersion
    assert out[0][1] == frame(3, 1, 1)  # misc not extracted: all payload, unchanged
    assert sw.process(1, b"\x02" * 12 + b"\x88\xb7") == []  # lookahead past end: too short


def test_range_optional_and_bool_keys_with_priority(prog) -> None:  # noqa: ANN001
    sw = Switch(prog)
    sp = "MyIngress.set_out_port"
    sw.insert_entry(T, {"hdr.misc.len": (100, 199), "misc_valid": 1}, sp, {"port": 1}, 10)
    sw.insert_entry(T, {"hdr.misc.len": (150, 160), "hdr.misc.kind": 1, "misc_valid": 1}, sp,
                    {"port": 2}, 20)
    sw.insert_entry(T, {"hdr.misc.len": (0, 0xFFFF), "hdr.misc.kind": 2, "misc_valid": 1}, sp,
                    {"port": 3}, 5)
    # len is the table key after +900 is applied to a copy only: hdr.misc.len is original
    cases = [((1, 1, 120), 1), ((1, 1, 155), 2), ((1, 2, 155), 1), ((1, 2, 300), 3),
             ((1, 1, 300), 5)]
    for args, port in cases:
        assert [p for p, _ in sw.process(1, frame(*args))] == [port], args
    with pytest.raises(InvalidArgument):
        sw.insert_entry(T, {"hdr.misc.len": (10, 5), "misc_valid": 1}, sp, {"port": 1}, 1)
    with pytest.raises(InvalidArgument):
        sw.insert_entry(T, {"hdr.misc.len": (1, 5), "misc_valid": 2}, sp, {"port": 1}, 1)
    # p4c lists an action a control calls directly too (add_to), without params (p4c makes
    # the arguments of a direct call locals)
    acts = {a.preamble.name: [p.name for p in a.params] for a in prog.p4info.actions}
    assert acts == {"MyIngress.set_out_port": ["port"], "MyIngress.nop": [],
                    "MyIngress.add_to": []}


OOR = """#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct metadata { bit<8> m; }
struct headers { ethernet_t ethernet; }
parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<8>>(4) r;
    counter(4, CounterType.packets) c;
    apply {
        bit<32> i = (bit<32>)hdr.ethernet.etherType;
        bit<8> v = 8w99;
        r.read(v, i);
        r.write(i, v + 1);
        c.count(i);
        hdr.ethernet.srcAddr = (bit<48>)v;
        standard_metadata.egress_spec = 1;
    }
}
control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) { apply { packet.emit(hdr.ethernet); } }
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
"""


def test_register_and_counter_index_out_of_range(tmp_path: Path) -> None:
    """Out-of-range reads give 0, writes and counts are ignored (no exception)."""
    f = tmp_path / "oor.p4"
    f.write_text(OOR)
    sw = Switch(compile_p4(f))

    def send(idx: int) -> int:
        out = sw.process(0, b"\x01" * 12 + struct.pack(">H", idx))
        return int.from_bytes(out[0][1][6:12], "big")

    assert [send(2), send(2), send(2)] == [0, 1, 2]
    assert send(300) == 0 and send(2**16 - 1) == 0
    assert [sw.register_read("MyIngress.r", i) for i in range(4)] == [0, 0, 3, 0]
    assert [sw.counter_read("MyIngress.c", i)[0] for i in range(4)] == [0, 0, 3, 0]


COUNTED = OOR.replace("""    register<bit<8>>(4) r;
    counter(4, CounterType.packets) c;
    apply {""", """    register<bit<8>>(4) r;
    counter(4, CounterType.packets) c;
    direct_counter(CounterType.packets_and_bytes) hits;
    action fwd(bit<9> port) { standard_metadata.egress_spec = port; }
    table by_type {
        key = { hdr.ethernet.etherType: exact; }
        actions = { fwd; NoAction; }
        counters = hits;
        size = 16;
        //MORE
    }
    apply {
        by_type.apply();""")


def test_table_with_counters_and_size(tmp_path: Path) -> None:
    """`counters` and `size` are two properties (p4c accepts both); a real duplicate is not."""
    f = tmp_path / "counted.p4"
    f.write_text(COUNTED)
    prog = compile_p4(f)
    (table,) = prog.p4info.tables
    assert table.preamble.name == "MyIngress.by_type" and table.size == 16
    assert [c.preamble.name for c in prog.p4info.direct_counters] == ["MyIngress.hits"]
    sw = Switch(prog)
    sw.insert_entry("MyIngress.by_type", {"hdr.ethernet.etherType": 7}, "MyIngress.fwd",
                    {"port": 1})
    sw.process(0, b"\x01" * 12 + struct.pack(">H", 7))
    sw.process(0, b"\x01" * 12 + struct.pack(">H", 8))
    assert sw.direct_counter_read("MyIngress.by_type", {"hdr.ethernet.etherType": 7}) == (1, 14)
    f.write_text(COUNTED.replace("//MORE", "size = 32;"))
    with pytest.raises(P4CompileError, match="duplicate table property \\(size\\)"):
        compile_p4(f)
