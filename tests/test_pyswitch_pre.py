"""pyswitch packet replication on tests/p4/pyswitch_pre.p4: multicast with rids, I2E and
E2E clones, drops in ingress and egress, BMv2's after-ingress order and defaults. Each output
frame carries a tag header written by egress: (egress_port, egress_rid, instance_type,
ingress_port, egress_spec seen at end of egress)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pyswitch import EntryNotFound, InvalidArgument, Switch, compile_p4

HERE = Path(__file__).parent
SRC = bytes.fromhex("0000000000aa")
DST = bytes.fromhex("0000000000bb")
EE = bytes.fromhex("0000000000ee")


@pytest.fixture()
def sw() -> Switch:
    s = Switch(compile_p4(HERE / "p4/pyswitch_pre.p4"))
    s.set_multicast_group(1, [(1, 10), (2, 20), (2, 21)])
    s.set_multicast_group(2, [(6, 7)])
    s.set_clone_session(5, [(9, 0)])
    s.set_clone_session(6, [(10, 3)])
    return s


def frame(ethertype: int) -> bytes:
    return DST + SRC + struct.pack(">H", ethertype) + b"PAYLOAD"


def decode(data: bytes) -> tuple[bytes, tuple[int, int, int, int, int], bytes]:
    tag = struct.unpack(">HHIHB", data[14:14 + 11])
    return data[6:12], tag, data[25:]


def test_multicast_copies_with_rids(sw: Switch) -> None:
    out = sw.process(4, frame(0x1000))
    assert [p for p, _ in out] == [1, 2, 2]
    tags = [decode(d)[1] for _, d in out]
    assert tags == [(1, 10, 5, 4, 0), (2, 20, 5, 4, 0), (2, 21, 5, 4, 0)]
    assert all(decode(d)[0] == EE and decode(d)[2] == b"PAYLOAD" for _, d in out)


def test_multicast_beats_drop_port_and_unknown_group_drops(sw: Switch) -> None:
    out = sw.process(4, frame(0x1004))
    assert [(p, decode(d)[1][1]) for p, d in out] == [(6, 7)]
    sw.delete_multicast_group(2)
    assert sw.process(4, frame(0x1004)) == []
    with pytest.raises(EntryNotFound):
        sw.delete_multicast_group(2)


def test_i2e_clone_carries_the_original_packet(sw: Switch) -> None:
    out = sw.process(3, frame(0x1001))
    assert sorted(p for p, _ in out) == [2, 9]
    by_port = {p: decode(d) for p, d in out}
    src, tag, _ = by_port[9]
    assert src == SRC  # ingress modifications are not in an I2E clone
    assert tag == (9, 0, 1, 3, 0)  # instance_type 1 = INGRESS_CLONE
    src, tag, _ = by_port[2]
    assert src == EE and tag == (2, 0, 0, 3, 0)


def test_e2e_clone_carries_egress_modifications(sw: Switch) -> None:
    out = sw.process(3, frame(0x1002))
    assert sorted(p for p, _ in out) == [3, 10]
    by_port = {p: d for p, d in out}
    _src, tag, rest = decode(by_port[10])
    # instance_type 2 = EGRESS_CLONE, rid from the session; metadata was reset (BMv2
    # clone_with_phv_reset_metadata), so ingress_port reads 0
    assert tag == (10, 3, 2, 0, 0)
    # headers are those after the original's egress: dstAddr rewritten there
    assert by_port[10][:6] == bytes.fromhex("0000000000dd")
    assert by_port[3][:6] == bytes.fromhex("0000000000dd")
    assert decode(by_port[3])[1] == (3, 0, 0, 3, 0)
    assert rest == b"PAYLOAD"


def test_drops(sw: Switch) -> None:
    assert sw.process(1, frame(0x1003)) == []  # mark_to_drop in ingress
    assert sw.process(1, frame(0x1005)) == []  # mark_to_drop in egress (port 4)
    assert sw.stats.dropped == 2
    assert sw.stats.rx[1] == 2 and sum(sw.stats.tx.values()) == 0


def test_unset_egress_spec_goes_to_port_0(sw: Switch) -> None:
    out = sw.process(5, frame(0x1006))
    assert [p for p, _ in out] == [0]
    assert decode(out[0][1])[1] == (0, 0, 0, 5, 0)


def test_pre_api_validation(sw: Switch) -> None:
    with pytest.raises(InvalidArgument):
        sw.set_multicast_group(0, [(1, 1)])
    with pytest.raises(InvalidArgument):
        sw.set_multicast_group(3, [(512, 1)])
    with pytest.raises(EntryNotFound):
        sw.delete_clone_session(99)
    assert sw.multicast_groups()[1] == [(1, 10), (2, 20), (2, 21)]


def test_multicast_copies_with_equal_headers_give_the_general_paths_bytes() -> None:
    """The specialised `process` deparses a copy whose headers after egress equal the
    previous copy's once (ComputeChecksum and the deparser read headers only): same frames,
    same order and same counters as the general path, with equal and differing copies."""
    reps = [(2, 20), (2, 20), (2, 20), (3, 20), (3, 20), (2, 20)]
    outs, stats = [], []
    for general in (False, True):
        s = Switch(compile_p4(HERE / "p4/pyswitch_pre.p4"))
        s.set_multicast_group(1, reps)
        run = (lambda p, f, s=s: Switch.process(s, p, f)) if general else s.process
        outs.append([run(4, frame(0x1000)) for _ in range(2)])
        stats.append((dict(s.stats.tx), s.stats.dropped))
    assert outs[0] == outs[1] and stats[0] == stats[1]
    assert [p for p, _ in outs[0][0]] == [2, 2, 2, 3, 3, 2]
    assert len({d for _, d in outs[0][0]}) == 2  # two distinct frames: per port
