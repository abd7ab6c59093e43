"""P4Runtime error answers, as BMv2 gives them (measured on BMv2, see docs/pyswitch-api.md):
a failing Write ends with gRPC UNKNOWN and one p4.v1.Error per update (0 ok,
6 ALREADY_EXISTS, 5 NOT_FOUND, 3 INVALID_ARGUMENT); non-primary writes get
PERMISSION_DENIED; a backup controller is told code 6. Bad writes never crash the switch.
Device configs are taken bare or in BMv2's p4.tmp.P4DeviceConfig wrapper. The switch runs
without ports (no root needed)."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from switch_harness import REPO, compile_for, start_switch, target  # noqa: F401

from controller.dataplane.p4runtime_client import NotPrimaryError, P4RuntimeError, WriteError

P4 = REPO / "tests" / "p4" / "rt_forward.p4"
L2, DST = "MyIngress.l2", "hdr.ethernet.dstAddr"
LPM, IPDST = "MyIngress.ipv4_lpm", "hdr.ipv4.dstAddr"
MAC = "02:00:00:00:00:02"


@pytest.fixture
def switch(target, tmp_path):  # noqa: F811
    sw = start_switch(target, {}, tmp_path)
    try:
        compiled = compile_for(target, P4, tmp_path / "build")
        sw.compiled = compiled
        yield sw
    finally:
        sw.stop()


def write_codes(c, updates) -> tuple[grpc.StatusCode, list[int]]:
    with pytest.raises(WriteError) as info:
        c.write(updates)
    return info.value.code, [r.code for r in info.value.results]


def test_per_update_error_codes(switch):
    c = switch.client(election_id=1)
    c.set_pipeline(switch.compiled.p4info_path, switch.compiled.config_path)
    ins = c.update("INSERT", "table_entry",
                   c.table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 2}))
    c.write([ins])
    # duplicate insert
    assert write_codes(c, [ins]) == (grpc.StatusCode.UNKNOWN, [code_pb2.ALREADY_EXISTS])
    # delete / modify of a missing entry
    missing = c.table_entry(L2, {DST: "02:00:00:00:00:09"}, "MyIngress.set_port", {"port": 1})
    assert write_codes(c, [c.update("DELETE", "table_entry", missing)])[1] == \
        [code_pb2.NOT_FOUND]
    assert write_codes(c, [c.update("MODIFY", "table_entry", missing)])[1] == \
        [code_pb2.NOT_FOUND]
    # unknown table id
    bad_table = c.table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 2})
    bad_table.table_id = 0x7FFFFFF
    assert write_codes(c, [c.update("INSERT", "table_entry", bad_table)])[1] == \
        [code_pb2.INVALID_ARGUMENT]
    # match value wider than the 48-bit field
    wide = c.table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 2})
    wide.match[0].exact.value = b"\x01" + b"\x00" * 6
    assert write_codes(c, [c.update("INSERT", "table_entry", wide)])[1] == \
        [code_pb2.INVALID_ARGUMENT]
    # lpm prefix longer than the 32-bit field
    long_prefix = c.table_entry(LPM, {IPDST: "10.0.0.0/8"}, "MyIngress.drop")
    long_prefix.match[0].lpm.prefix_len = 33
    assert write_codes(c, [c.update("INSERT", "table_entry", long_prefix)])[1] == \
        [code_pb2.INVALID_ARGUMENT]
    # action parameter wider than its field (port is 9 bits)
    wide_param = c.table_entry(L2, {DST: "02:00:00:00:00:05"}, "MyIngress.set_port",
                               {"port": 1})
    wide_param.action.action.params[0].value = b"\x02\x00"
    assert write_codes(c, [c.update("INSERT", "table_entry", wide_param)])[1] == \
        [code_pb2.INVALID_ARGUMENT]
    # one batch, one error per update, the good updates applied
    good = c.update("INSERT", "table_entry",
                    c.table_entry(L2, {DST: "02:00:00:00:00:03"}, "MyIngress.set_port",
                                  {"port": 3}))
    assert write_codes(c, [good, ins, c.update("DELETE", "table_entry", missing)])[1] == \
        [code_pb2.OK, code_pb2.ALREADY_EXISTS, code_pb2.NOT_FOUND]
    assert sorted(e.match[DST] for e in c.read_table_entries(L2)) == [0x020000000002,
                                                                     0x020000000003]
    # multicast group insert twice / delete missing
    c.insert_multicast_group(3, [1, 2])
    with pytest.raises(WriteError) as info:
        c.insert_multicast_group(3, [1])
    assert [e.code for e in info.value.errors] == [code_pb2.ALREADY_EXISTS]
    with pytest.raises(WriteError) as info:
        c.delete_multicast_group(4)
    assert [e.code for e in info.value.errors] == [code_pb2.NOT_FOUND]
    assert switch.alive()
    assert c.api_version() == "1.4.1"


def test_arbitration_and_write_without_arbitration(switch):
    primary = switch.client(election_id=10)
    primary.set_pipeline(switch.compiled.p4info_path, switch.compiled.config_path)
    # a second controller with a lower election id is a backup: arbitration code 6
    backup = switch.client(election_id=3, connect=False)
    backup.connect(require_primary=False)
    assert not backup.is_primary
    assert backup.arbitration_code == code_pb2.ALREADY_EXISTS
    assert backup.primary_election_id == (0, 10)
    with pytest.raises(NotPrimaryError) as info:
        backup.insert_table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 1})
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
    # backups may read
    assert backup.read_table_entries(L2) == []
    # a Write on a channel that never arbitrated
    with grpc.insecure_channel(switch.address) as ch:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        req = p4runtime_pb2.WriteRequest(device_id=0)
        req.election_id.low = 99
        req.updates.append(primary.update(
            "INSERT", "table_entry",
            primary.table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 1})))
        with pytest.raises(grpc.RpcError) as rpc:
            stub.Write(req, timeout=5)
        assert rpc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # the primary still writes; when it leaves, the backup becomes primary
    primary.insert_table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 1})
    primary.close()
    import time

    deadline = time.monotonic() + 5
    while not backup.poll_arbitration() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert backup.is_primary
    backup.delete_table_entry(L2, {DST: MAC})
    assert backup.read_table_entries(L2) == []


def test_pipeline_errors(switch):
    c = switch.client(election_id=1)
    c.use_p4info(switch.compiled.p4info_path)
    with pytest.raises(P4RuntimeError) as info:  # no pipeline yet
        c.insert_table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 1})
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(P4RuntimeError) as info:
        c.set_pipeline(switch.compiled.p4info_path, b"this is not a program")
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    c.set_pipeline(switch.compiled.p4info_path, switch.compiled.config_path, cookie=42)
    req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=0)
    with grpc.insecure_channel(switch.address) as ch:
        resp = p4runtime_pb2_grpc.P4RuntimeStub(ch).GetForwardingPipelineConfig(req, timeout=5)
    assert resp.config.cookie.cookie == 42
    assert resp.config.p4_device_config == switch.compiled.config_path.read_bytes()
    assert {t.preamble.name for t in resp.config.p4info.tables} == {L2, LPM}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def wrapped_device_config(device_data: bytes) -> bytes:
    """BMv2's ``p4.tmp.P4DeviceConfig`` as BMv2 clients send it (``reassign`` true, an
    ``extras`` map, the config in ``device_data``), written here byte by byte from the
    message's field numbers (reassign 1, extras 2, device_data 3) so that the test does not
    lean on the server's own declaration of the message."""
    kv = _len_field(1, _len_field(1, b"port") + _len_field(2, b"9090"))
    return _varint(1 << 3 | 0) + b"\x01" + _len_field(2, kv) + _len_field(3, device_data)


def test_device_config_wrapped_in_p4_device_config(switch, target):  # noqa: F811
    """Issue 17 item 8: clients written for BMv2 wrap the device config; pyswitch takes it
    bare or wrapped, as BMv2 does."""
    raw = switch.compiled.config_path.read_bytes()
    wrapped = wrapped_device_config(raw)
    c = switch.client(election_id=1)
    c.set_pipeline(switch.compiled.p4info_path, wrapped, cookie=7)
    c.insert_table_entry(L2, {DST: MAC}, "MyIngress.set_port", {"port": 2})
    assert [(e.match, e.params) for e in c.read_table_entries(L2)] == \
        [({DST: 0x020000000002}, {"port": 2})]
    # the same program bare again: a fresh pipeline, as for any push
    c.set_pipeline(switch.compiled.p4info_path, raw)
    assert c.read_table_entries(L2) == []
    if target == "pyswitch":
        with pytest.raises(P4RuntimeError) as info:  # a wrapper around something else
            c.set_pipeline(switch.compiled.p4info_path,
                           wrapped_device_config(b'{"program": "bmv2 json"}'))
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "P4DeviceConfig" in str(info.value)


def test_wrapped_device_config_offline():
    from pyswitch import compile_p4
    from pyswitch.p4runtime.pipeline import program_from_device_config

    prog = compile_p4(str(P4))
    raw = prog.to_bytes()
    for data in (raw, wrapped_device_config(raw)):
        assert program_from_device_config(data).p4info == prog.p4info
    with pytest.raises(Exception, match="not a pyswitch device config"):
        program_from_device_config(b"this is not a program")


@pytest.mark.parametrize("args, code, text", [
    (["-i", "eth0"], 2, "expected N@IFACE"),
    (["-i", "x@eth0"], 2, "is not a number"),
    (["-i", "1@a", "-i", "1@b"], 2, "port 1 given twice"),
    (["--impair", "1:loss=3"], 2, "probability"),
    (["--impair", "all:bogus=1", "-i", "1@lo"], 2, "unknown impairment key"),
    (["/nonexistent/prog.json"], 2, "cannot read /nonexistent/prog.json"),
    (["-i", "1@nosuchif0"], 1, "nosuchif0"),
])
def test_run_command_line_mistakes(args, code, text):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "pyswitch", "run",
                          "--grpc-server-addr", "127.0.0.1:0", *args],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert run.returncode == code
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pyswitch run: ") and text in lines[0], \
        run.stderr
