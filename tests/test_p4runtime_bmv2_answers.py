"""pyswitch's P4Runtime server answers what BMv2 answers (issue 27, item 2): a wildcard Read
of every entity kind (what p4runtime-shell and many controllers send) on ``ina.p4``, and a
P4Info that does not describe the device config refused with INVALID_ARGUMENT naming the
difference. Large batches are covered in tests/test_p4runtime_abuse.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import grpc
import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.dataplane.p4runtime_client import P4RuntimeError, SwitchConnection
from pyswitch.p4runtime.pipeline import Device, p4info_difference
from pyswitch.p4runtime.server import serve
from pyswitch.program import Program, compile_p4

ROOT = Path(__file__).resolve().parents[1]
ENTITY_KINDS = [f.name for f in p4runtime_pb2.Entity.DESCRIPTOR.oneofs_by_name["entity"].fields]


@pytest.fixture(scope="module")
def ina() -> Program:
    return compile_p4(ROOT / "p4src" / "ina.p4")


@pytest.fixture(scope="module")
def server(ina: Program):
    srv, port = serve(Device(), "127.0.0.1:0")
    c = SwitchConnection(f"127.0.0.1:{port}", election_id=1, name="sw").connect()
    c.set_pipeline(ina.p4info, ina.to_bytes())
    srv.c, srv.address = c, f"127.0.0.1:{port}"
    try:
        yield srv
    finally:
        c.close()
        srv.stop(0).wait(5)


def _wildcard(kind: str) -> p4runtime_pb2.Entity:
    """An entity of ``kind`` with every id 0 (a wildcard), as p4runtime-shell sends it."""
    ent = p4runtime_pb2.Entity()
    sub = getattr(ent, kind)
    sub.SetInParent()
    if kind == "packet_replication_engine_entry":
        sub.multicast_group_entry.SetInParent()
    if kind == "direct_counter_entry":
        sub.table_entry.SetInParent()
    return ent


def _read(address: str, entities: list[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
    req = p4runtime_pb2.ReadRequest(device_id=0, entities=entities)
    with grpc.insecure_channel(address) as ch:
        return [e for r in p4runtime_pb2_grpc.P4RuntimeStub(ch).Read(req, timeout=30)
                for e in r.entities]


def test_ina_has_no_meters_action_profiles_value_sets_or_digests(ina: Program) -> None:
    info = ina.p4info
    assert not (info.meters or info.direct_meters or info.action_profiles or info.value_sets
                or info.digests or info.externs)
    assert info.tables and info.counters and info.registers


def test_wildcard_read_of_every_entity_kind_answers_on_ina(server, ina: Program) -> None:
    """One ReadRequest holding every kind: the kinds ina.p4 has are answered (its counter
    and register cells, every table's entries), the kinds it has none of answer nothing."""
    got = _read(server.address, [_wildcard(k) for k in ENTITY_KINDS])
    kinds = [e.WhichOneof("entity") for e in got]
    assert kinds.count("counter_entry") == sum(x.size for x in ina.p4info.counters)
    assert kinds.count("register_entry") == sum(r.size for r in ina.p4info.registers)
    assert not {"meter_entry", "direct_meter_entry", "action_profile_member",
                "action_profile_group", "value_set_entry", "digest_entry",
                "extern_entry"} & set(kinds)
    assert "table_entry" not in kinds  # no entries yet (default actions are not listed)


@pytest.mark.parametrize("kind", ["meter_entry", "direct_meter_entry", "action_profile_member",
                                  "action_profile_group", "value_set_entry", "digest_entry",
                                  "extern_entry"])
def test_each_kind_ina_has_none_of_answers_empty(server, kind: str) -> None:
    assert _read(server.address, [_wildcard(kind)]) == []


def test_an_id_the_p4info_does_not_hold_is_not_found(server) -> None:
    ent = p4runtime_pb2.Entity()
    ent.meter_entry.meter_id = 0x15000001
    with pytest.raises(grpc.RpcError) as info:
        _read(server.address, [ent])
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert "meter" in info.value.details()


def _mismatched(info: p4info_pb2.P4Info, edit: str) -> p4info_pb2.P4Info:
    out = p4info_pb2.P4Info()
    out.CopyFrom(info)
    t = next(t for t in out.tables if t.match_fields)
    if edit == "width":
        t.match_fields[0].bitwidth = 3
    elif edit == "match":
        t.match_fields[0].match_type = (p4info_pb2.MatchField.TERNARY
                                        if t.match_fields[0].match_type !=
                                        p4info_pb2.MatchField.TERNARY
                                        else p4info_pb2.MatchField.EXACT)
    elif edit == "field-name":
        t.match_fields[0].name = "hdr.nothing.here"
    elif edit == "param":
        a = next(a for a in out.actions if a.params)
        a.params[0].bitwidth += 1
    elif edit == "register":
        out.registers[0].type_spec.bitstring.bit.bitwidth += 1
    return out


@pytest.mark.parametrize("edit, needle", [
    ("width", "3 bits"), ("match", "match field 1"), ("field-name", "hdr.nothing.here"),
    ("param", "parameters"), ("register", "register"),
])
def test_p4info_not_describing_the_device_config_is_refused(server, ina: Program, edit: str,
                                                            needle: str) -> None:
    c = server.c
    bad = _mismatched(ina.p4info, edit)
    assert p4info_difference(bad, ina.p4info) is not None
    with pytest.raises(P4RuntimeError) as info:
        c.set_pipeline(bad, ina.to_bytes())
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not describe the device config" in str(info.value) and needle in str(info.value)
    # the running pipeline is untouched
    assert server.servicer.dev.pipeline.p4info == ina.p4info


def test_p4info_describing_the_device_config_is_accepted(server, ina: Program) -> None:
    assert p4info_difference(ina.p4info, ina.p4info) is None
    server.c.set_pipeline(ina.p4info, ina.to_bytes())


SHELL_SCRIPT = textwrap.dedent("""
    import sys
    import p4runtime_sh.shell as sh
    from p4.v1 import p4runtime_pb2
    addr, p4info, config, bad_p4info = sys.argv[1:5]
    try:
        sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 7),
                 config=sh.FwdPipeConfig(bad_p4info, config), verbose=False)
    except (Exception, SystemExit) as exc:  # p4runtime-shell logs the error and exits
        print("refused:", type(exc).__name__)
    sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 7),
             config=sh.FwdPipeConfig(p4info, config), verbose=False)
    kinds = [f.name for f in p4runtime_pb2.Entity.DESCRIPTOR.oneofs_by_name["entity"].fields]
    for kind in kinds:
        ent = p4runtime_pb2.Entity()
        getattr(ent, kind).SetInParent()
        if kind == "packet_replication_engine_entry":
            ent.packet_replication_engine_entry.multicast_group_entry.SetInParent()
        if kind == "direct_counter_entry":
            ent.direct_counter_entry.table_entry.SetInParent()
        n = sum(len(r.entities) for r in sh.client.read_one(ent))
        print("read", kind, n)
    sh.teardown()
""")


def test_p4runtime_shell_reads_every_kind_and_is_refused_a_mismatched_p4info(
        server, ina: Program, tmp_path: Path) -> None:
    from google.protobuf import text_format

    p4info, config, bad = tmp_path / "ina.txtpb", tmp_path / "ina.json", tmp_path / "bad.txtpb"
    p4info.write_text(text_format.MessageToString(ina.p4info))
    bad.write_text(text_format.MessageToString(_mismatched(ina.p4info, "width")))
    config.write_bytes(ina.to_bytes())
    run = subprocess.run([sys.executable, "-c", SHELL_SCRIPT, server.address, str(p4info),
                          str(config), str(bad)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("refused:"), lines[0]
    assert "INVALID_ARGUMENT" in run.stderr and "does not describe the device config" in \
        run.stderr and "3 bits" in run.stderr  # p4runtime-shell logs the server's answer
    counts = dict(line.split()[1:] for line in lines[1:])
    assert set(counts) == set(ENTITY_KINDS)
    assert int(counts["counter_entry"]) == sum(x.size for x in ina.p4info.counters)
    assert int(counts["register_entry"]) == sum(x.size for x in ina.p4info.registers)
    assert counts["meter_entry"] == counts["action_profile_group"] == "0"
