"""P4Runtime reads/writes of switch state other than plain table entries: ternary entries
with priorities, direct counters, indirect counters, registers (pyswitch only: BMv2's
server does not do registers) and clone sessions. The switch runs without ports."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2
from switch_harness import REPO, compile_for, reset_switch, start_switch, target  # noqa: F401

from controller.dataplane.p4runtime_client import UpdateError, WriteError

P4 = REPO / "tests" / "p4" / "rt_state.p4"
ACL = "MyIngress.acl"
ETYPE, DMAC = "hdr.ethernet.etherType", "hdr.ethernet.dstAddr"


@pytest.fixture
def client(target, tmp_path):  # noqa: F811
    sw = start_switch(target, {}, tmp_path)
    try:
        compiled = compile_for(target, P4, tmp_path / "build")
        c = sw.client(election_id=1)
        c.set_pipeline(compiled.p4info_path, compiled.config_path)
        yield c
    finally:
        sw.stop()


def test_ternary_entries_and_direct_counters(client):
    c = client
    match = {ETYPE: (0x0800, 0xFF00), DMAC: "02:00:00:00:00:01"}
    c.insert_table_entry(ACL, match, "MyIngress.set_port", {"port": 4}, priority=20)
    c.insert_table_entry(ACL, {ETYPE: (0x0000, 0x0000), DMAC: 1}, "MyIngress.nop", priority=1)
    entries = sorted(c.read_table_entries(ACL, with_counters=True), key=lambda e: -e.priority)
    assert [(e.priority, e.match, e.action, e.params, e.counter) for e in entries] == [
        (20, {ETYPE: (0x0800, 0xFF00), DMAC: 0x020000000001}, "MyIngress.set_port",
         {"port": 4}, (0, 0)),
        (1, {DMAC: 1}, "MyIngress.nop", {}, (0, 0)),  # the all-zero mask is left out
    ]
    with pytest.raises(WriteError) as info:  # same key and priority again
        c.insert_table_entry(ACL, match, "MyIngress.nop", priority=20)
    assert [e.code for e in info.value.errors] == [code_pb2.ALREADY_EXISTS]
    with pytest.raises(WriteError) as info:  # ternary table without a priority
        c.insert_table_entry(ACL, {ETYPE: (1, 1), DMAC: 3}, "MyIngress.nop")
    assert [e.code for e in info.value.errors] == [code_pb2.INVALID_ARGUMENT]
    # direct counter write through DirectCounterEntry, read back both ways
    dce = p4runtime_pb2.DirectCounterEntry()
    dce.table_entry.CopyFrom(c.table_entry(ACL, match, priority=20))
    dce.data.packet_count, dce.data.byte_count = 11, 1100
    c.write([c.update("MODIFY", "direct_counter_entry", dce)])
    assert c.read_direct_counter(ACL, match, priority=20) == (11, 1100)
    assert c.read_table_entries(ACL, match, priority=20, with_counters=True)[0].counter == \
        (11, 1100)


def test_counters_registers_and_clone_sessions(client, target):  # noqa: F811
    c = client
    assert c.read_counter("MyIngress.port_pkts") == {i: (0, 0) for i in range(8)}
    c.write_counter("MyIngress.port_pkts", 3, packets=5)
    assert c.read_counter("MyIngress.port_pkts", 3) == {3: (5, 0)}
    with pytest.raises(WriteError) as info:
        c.write_counter("MyIngress.port_pkts", 8, packets=1)  # index out of range
    assert [e.code for e in info.value.errors] == [code_pb2.INVALID_ARGUMENT]
    if target == "pyswitch":
        c.write_register("MyIngress.store", 5, 0xDEADBEEF)
        assert c.read_register("MyIngress.store", 5) == 0xDEADBEEF
        assert c.read_register("MyIngress.store", 4) == 0
        re_ = p4runtime_pb2.RegisterEntry(register_id=c.index.register("MyIngress.store").id)
        re_.index.index = 1
        re_.data.bitstring = b"\x01\x00\x00\x00\x00"  # 33 bits into a bit<32> register
        with pytest.raises(WriteError) as info:
            c.write([c.update("MODIFY", "register_entry", re_)])
        assert [e.code for e in info.value.errors] == [code_pb2.INVALID_ARGUMENT]
    c.insert_clone_session(100, [3, (4, 2)])
    assert c.read_clone_sessions() == {100: [(3, 0), (4, 2)]}
    c.modify_clone_session(100, [5])
    assert c.read_clone_sessions(100) == {100: [(5, 0)]}
    with pytest.raises(WriteError) as info:
        c.insert_clone_session(100, [1])
    assert [e.code for e in info.value.errors] == [code_pb2.ALREADY_EXISTS]
    c.delete_clone_session(100)
    assert c.read_clone_sessions() == {}
    with pytest.raises(WriteError) as info:
        c.delete_clone_session(100)
    assert [e.code for e in info.value.errors] == [code_pb2.NOT_FOUND]


def test_harness_reset_deletes_groups_and_sessions(client, target, tmp_path):  # noqa: F811
    c = client
    c.insert_multicast_group(1, [1, 2])
    c.insert_multicast_group(2, [(3, 1)])
    c.insert_clone_session(5, [4])
    compiled = compile_for(target, P4, tmp_path / "build")
    reset_switch(c, compiled, groups=[1, 9])  # 9: created by a test, already gone
    assert c.read_multicast_groups() == {} and c.read_clone_sessions() == {}
    c.insert_multicast_group(1, [2])  # no stale group in the way
    assert c.read_multicast_groups() == {1: [(2, 0)]}


class _BMv2LikeClient:
    """A client stand-in whose switch forgets its groups in reads after a pipeline push
    (as BMv2 does, while keeping their replicas): what reset_switch must cope with."""

    def __init__(self) -> None:
        self.groups, self.sessions = {1: [(1, 0)], 2: [(2, 0)]}, {7: [(3, 0)]}
        self.calls: list[object] = []

    def read_multicast_groups(self) -> dict:
        return dict(self.groups)

    def read_clone_sessions(self) -> dict:
        return dict(self.sessions)

    def _delete(self, table: dict, ident: int, what: str) -> None:
        self.calls.append((what, ident))
        if table.pop(ident, None) is None:
            raise WriteError("sw", [UpdateError(0, code_pb2.NOT_FOUND, "no such entry")],
                             grpc.StatusCode.UNKNOWN, "1 of 1 updates failed")

    def delete_multicast_group(self, gid: int) -> None:
        self._delete(self.groups, gid, "group")

    def delete_clone_session(self, sid: int) -> None:
        self._delete(self.sessions, sid, "session")

    def set_pipeline(self, p4info: object, config: object) -> None:
        self.calls.append("push")
        self.groups, self.sessions = {}, {}  # reads empty, replicas kept: too late to delete


def test_harness_reset_deletes_before_the_pipeline_push(tmp_path):
    c = _BMv2LikeClient()
    compiled = compile_for("pyswitch", P4, tmp_path / "build")
    reset_switch(c, compiled, groups=[2, 3], sessions=[7])
    assert c.calls == [("group", 1), ("group", 2), ("group", 3), ("session", 7), "push"]
