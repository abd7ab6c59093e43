"""pyswitch's P4Runtime server under abuse (issue 20 item 4): huge and failing Write batches,
wrong widths and unknown ids, garbage device configs, controllers fighting for mastership,
thousands of StreamChannels. Every test checks the status codes a client gets and that the
server keeps serving; limits are those of docs/pyswitch-api.md ("Limits").

Counts are reduced where the full size would be slow (the bench, bench/p4runtime_abuse.py,
runs the campaign at full size and measures memory and file descriptors); the 10,000-update
batches and the 1,000 streams are full size. One switch process serves the whole module;
only loopback addresses are used.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import tempfile
import time
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from switch_harness import compile_for, start_switch

from controller.dataplane.p4runtime_client import NotPrimaryError, P4RuntimeError, WriteError
from pyswitch.p4runtime.pipeline import MAX_STATE_CELLS, MAX_TABLE_SIZE
from pyswitch.p4runtime.server import WRITE_REPORT_LIMIT, write_error_status
from pyswitch.program import FORMAT

BIG, PLAIN, DST, SRC = "Ing.big", "Ing.plain", "hdr.ethernet.dstAddr", "hdr.ethernet.srcAddr"

PROGRAM = """
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct headers { ethernet_t ethernet; }
struct metadata { }

parser P(packet_in packet, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(CELLS) store;
    counter(8, CounterType.packets_and_bytes) hits;
    direct_counter(CounterType.packets_and_bytes) big_hits;
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table big {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { set_port; drop; }
        size = SIZE;
        counters = big_hits;
        default_action = drop();
    }
    table plain {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { set_port; drop; }
        size = 16;
        default_action = drop();
    }
    apply {
        big.apply();
        plain.apply();
        hits.count(0);
        bit<32> x;
        store.read(x, 0);
        store.write(0, x + 1);
    }
}
control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.ethernet); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""


def program_source(cells: int = 16, size: int = 16384) -> str:
    """The test program with a ``cells``-cell register and a ``size``-entry table ``big``."""
    return PROGRAM.replace("CELLS", str(cells)).replace("SIZE", str(size))


@functools.cache
def _base_config() -> dict:
    from pyswitch.preprocess import preprocess

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "abuse.p4"
        path.write_text(program_source())
        src = preprocess(str(path))
    return {"format": FORMAT, "name": "abuse", "source": src.text,
            "linemap": [list(x) for x in src.linemap]}


def device_config(cells: int = 16, size: int = 16384, source: str | None = None) -> bytes:
    """A pyswitch device config (the compile output: preprocessed source, compiled again by
    the switch) with a ``cells``-cell register and a ``size``-entry table, or with the
    given ``source``; made by editing the text, so huge declarations cost nothing here."""
    doc = dict(_base_config())
    if source is not None:
        doc["source"] = source
    else:
        doc["source"] = doc["source"].replace("(16) store", f"({cells}) store") \
            .replace("size = 16384", f"size = {size}")
    return json.dumps(doc).encode()


def proc_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture(scope="module")
def switch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("abuse")
    src = tmp / "abuse.p4"
    src.write_text(program_source())
    sw = start_switch("pyswitch", {}, tmp)
    try:
        sw.compiled = compile_for("pyswitch", src, tmp / "build")
        sw.c = sw.client(election_id=1)
        sw.c.set_pipeline(sw.compiled.p4info_path, sw.compiled.config_path)
        yield sw
    finally:
        sw.stop()


@pytest.fixture
def c(switch):
    """The primary controller, with a fresh pipeline (empty tables)."""
    switch.c.set_pipeline(switch.compiled.p4info_path, switch.compiled.config_path)
    yield switch.c
    assert switch.alive(), switch.log()[-2000:]


def mac(i: int) -> int:
    return 0x020000000000 + i


def inserts(c, n: int, start: int = 0) -> list[p4runtime_pb2.Update]:
    return [c.update("INSERT", "table_entry",
                     c.table_entry(BIG, {DST: mac(start + i)}, "Ing.set_port", {"port": 1}))
            for i in range(n)]


def raw_write(switch, c, updates) -> grpc.RpcError | None:
    """A Write with a plain default gRPC client (no options): the error it gets, or None."""
    req = c._stamp(p4runtime_pb2.WriteRequest())
    req.updates.extend(updates)
    with grpc.insecure_channel(switch.address) as ch:
        try:
            p4runtime_pb2_grpc.P4RuntimeStub(ch).Write(req, timeout=60)
        except grpc.RpcError as exc:
            return exc
    return None


def become_primary(conn) -> None:
    """Arbitrate again and wait until this connection is primary. Earlier notifications
    (other controllers came and went) may still sit in the client's queue, so the answer
    to this arbitration is not necessarily the next message read."""
    conn.poll_arbitration()
    conn.arbitrate()
    deadline = time.monotonic() + 5
    while not conn.poll_arbitration() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert conn.is_primary


def capabilities(address: str, timeout: float = 5) -> str:
    with grpc.insecure_channel(address) as ch:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        return stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(),
                                 timeout=timeout).p4runtime_api_version


# ---------------------------------------------------------------- Write batches

def test_batch_of_10000_inserts_all_ok(switch, c):
    c.write(inserts(c, 10_000))
    assert len(c.read_table_entries(BIG)) == 10_000


def test_batch_of_10000_duplicate_inserts_reports_the_failures_naming_the_limit(switch, c):
    batch = inserts(c, 10_000)
    c.write(batch)
    err = raw_write(switch, c, batch)  # the same again: every update ALREADY_EXISTS
    assert err is not None and err.code() == grpc.StatusCode.UNKNOWN  # as BMv2
    assert f"at most {WRITE_REPORT_LIMIT} updates" in err.details()
    assert "10000 of 10000 updates failed" in err.details()
    assert "ALREADY_EXISTS x10000" in err.details()
    assert [e.match[DST] for e in c.read_table_entries(BIG, {DST: mac(9999)})] == [mac(9999)]
    assert capabilities(switch.address) == "1.4.1"


def test_batch_of_1000_with_one_failure_applies_the_rest_as_bmv2(switch, c):
    c.write(inserts(c, 1, start=500))
    err = raw_write(switch, c, inserts(c, 1000))  # update 500 fails
    assert err is not None and err.code() == grpc.StatusCode.UNKNOWN
    assert "1 of 1000 updates failed, the other 999 were applied" in err.details()
    assert "update 500: ALREADY_EXISTS" in err.details()
    assert sorted(e.match[DST] for e in c.read_table_entries(BIG)) == \
        sorted(mac(i) for i in range(1000))


def test_large_mixed_batch_applies_every_update_that_can_be(switch, c):
    c.write(inserts(c, 3))
    batch = [c.update("MODIFY", "table_entry",
                      c.table_entry(BIG, {DST: mac(0)}, "Ing.drop")),
             c.update("DELETE", "table_entry", c.table_entry(BIG, {DST: mac(1)})),
             *inserts(c, 150, start=100)]
    re_ = p4runtime_pb2.RegisterEntry(register_id=c.index.register("Ing.store").id)
    re_.index.index = 3
    re_.data.bitstring = b"\x05"
    batch.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY))
    batch[-1].entity.register_entry.CopyFrom(re_)
    batch += inserts(c, 1, start=2)  # the one failure: ALREADY_EXISTS
    err = raw_write(switch, c, batch)
    assert err is not None and err.code() == grpc.StatusCode.UNKNOWN
    assert f"update {len(batch) - 1}: ALREADY_EXISTS" in err.details()
    entries = {e.match[DST]: e.action for e in c.read_table_entries(BIG)}
    assert entries[mac(0)] == "Ing.drop" and mac(1) not in entries
    assert len(entries) == 2 + 150
    assert c.read_register("Ing.store", 3) == 5


@pytest.mark.parametrize("n", [1, 37, WRITE_REPORT_LIMIT])
def test_failing_batch_up_to_the_limit_reports_each_update_to_a_default_client(switch, c, n):
    """The issue's case: 100+ failing updates overflowed the 8 KiB metadata limit of a
    default client, which then saw RESOURCE_EXHAUSTED."""
    c.write(inserts(c, n))
    err = raw_write(switch, c, inserts(c, n))
    assert err is not None and err.code() == grpc.StatusCode.UNKNOWN, err
    (st_bytes,) = [v for k, v in err.trailing_metadata() if k == "grpc-status-details-bin"]
    st = status_pb2.Status.FromString(st_bytes)
    codes = []
    for d in st.details:
        e = p4runtime_pb2.Error()
        assert d.Unpack(e)
        codes.append(e.canonical_code)
    assert codes == [code_pb2.ALREADY_EXISTS] * n
    # the project's client reads them too
    with pytest.raises(WriteError) as info:
        c.write(inserts(c, n))
    assert [r.index for r in info.value.errors] == list(range(n))


def test_error_status_fits_8_kib_with_long_messages():
    errors = [p4runtime_pb2.Error(canonical_code=code_pb2.INVALID_ARGUMENT, message="x" * 5000)
              for _ in range(WRITE_REPORT_LIMIT)]
    data = write_error_status(errors, "100 of 100 updates failed")
    assert len(data) * 4 / 3 < 8192 - 512  # base64 on the wire, with room for the rest
    st = status_pb2.Status.FromString(data)
    assert len(st.details) == WRITE_REPORT_LIMIT
    short = [p4runtime_pb2.Error(canonical_code=code_pb2.NOT_FOUND, message="no such entry")]
    st = status_pb2.Status.FromString(write_error_status(short, "1 of 1"))
    e = p4runtime_pb2.Error()
    st.details[0].Unpack(e)
    assert e.message == "no such entry"  # messages are cut only when needed


def test_batch_one_over_the_limit_all_failing_names_the_failures(switch, c):
    n = WRITE_REPORT_LIMIT + 1
    err = raw_write(switch, c, [c.update("DELETE", "table_entry",
                                         c.table_entry(BIG, {DST: mac(i)}))
                                for i in range(n)])
    assert err is not None and err.code() == grpc.StatusCode.UNKNOWN
    assert f"{n} of {n} updates failed" in err.details() and "NOT_FOUND" in err.details()


def test_insert_into_full_table_is_resource_exhausted(switch, c):
    c.write([c.update("INSERT", "table_entry",
                      c.table_entry(PLAIN, {SRC: mac(i)}, "Ing.drop")) for i in range(16)])
    with pytest.raises(WriteError) as info:
        c.insert_table_entry(PLAIN, {SRC: mac(99)}, "Ing.drop")
    assert [e.code for e in info.value.errors] == [code_pb2.RESOURCE_EXHAUSTED]
    assert "full" in info.value.errors[0].message


# ---------------------------------------------------------------- wrong widths, unknown ids

def _bad_updates(c) -> list[tuple[str, p4runtime_pb2.Update, int]]:
    """(what, update, expected canonical code) for one batch of wrong updates."""
    def entry(**kw):
        te = c.table_entry(BIG, {DST: mac(1)}, "Ing.set_port", {"port": 1})
        for k, v in kw.items():
            setattr(te, k, v)
        return te

    out = []
    te = entry(table_id=0x7FFFFFF)
    out.append(("unknown table id", te, code_pb2.INVALID_ARGUMENT))
    te = entry()
    te.match[0].field_id = 99
    out.append(("unknown match field id", te, code_pb2.INVALID_ARGUMENT))
    te = entry()
    te.match[0].exact.value = b"\x01" + b"\0" * 6
    out.append(("match 49 bits wide", te, code_pb2.INVALID_ARGUMENT))
    te = entry()
    te.match[0].exact.value = b""
    out.append(("empty match value", te, code_pb2.INVALID_ARGUMENT))
    te = entry()
    te.action.action.action_id = 0x1234
    out.append(("unknown action id", te, code_pb2.INVALID_ARGUMENT))
    te = entry()
    te.action.action.params[0].param_id = 42
    out.append(("unknown param id", te, code_pb2.INVALID_ARGUMENT))
    te = entry()
    te.action.action.params[0].value = b"\x02\x00"
    out.append(("param 10 bits for 9", te, code_pb2.INVALID_ARGUMENT))
    te = entry(priority=5)
    out.append(("priority on an exact table", te, code_pb2.INVALID_ARGUMENT))
    updates = [(w, c.update("INSERT", "table_entry", te), code) for w, te, code in out]

    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.register_entry.register_id = 0x16000001
    u.entity.register_entry.data.bitstring = b"\x01"
    updates.append(("unknown register id", u, code_pb2.INVALID_ARGUMENT))
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.register_entry.register_id = c.index.register("Ing.store").id
    u.entity.register_entry.index.index = 0
    u.entity.register_entry.data.bitstring = b"\x01" + b"\0" * 4
    updates.append(("register value 33 bits for 32", u, code_pb2.INVALID_ARGUMENT))
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.counter_entry.counter_id = c.index.counter("Ing.hits").id
    u.entity.counter_entry.index.index = 8
    updates.append(("counter index out of range", u, code_pb2.INVALID_ARGUMENT))
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.direct_counter_entry.table_entry.CopyFrom(
        c.table_entry(PLAIN, {SRC: mac(1)}, None))
    updates.append(("direct counter on a table without one", u, code_pb2.INVALID_ARGUMENT))
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.direct_counter_entry.table_entry.CopyFrom(c.table_entry(BIG, {DST: mac(77)}))
    updates.append(("direct counter of a missing entry", u, code_pb2.NOT_FOUND))
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    u.entity.table_entry.CopyFrom(entry())
    u.type = p4runtime_pb2.Update.UNSPECIFIED
    updates.append(("update type unspecified", u, code_pb2.INVALID_ARGUMENT))
    updates.append(("empty entity", p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT),
                    code_pb2.INVALID_ARGUMENT))
    return updates


def test_wrong_widths_and_unknown_ids_get_per_update_codes(switch, c):
    bad = _bad_updates(c)
    good = inserts(c, 1, start=500)[0]
    with pytest.raises(WriteError) as info:
        c.write([good] + [u for _, u, _ in bad])
    got = {w: r.code for (w, _, _), r in zip(bad, info.value.results[1:], strict=True)}
    assert got == {w: code for w, _, code in bad}
    assert info.value.results[0].code == code_pb2.OK
    assert [e.match[DST] for e in c.read_table_entries(BIG)] == [mac(500)]


def test_direct_counter_write_on_table_without_one_is_invalid_argument(switch, c):
    c.write([c.update("INSERT", "table_entry", c.table_entry(PLAIN, {SRC: mac(1)}, "Ing.drop"))])
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.direct_counter_entry.table_entry.CopyFrom(c.table_entry(PLAIN, {SRC: mac(1)}))
    u.entity.direct_counter_entry.data.packet_count = 5
    with pytest.raises(WriteError) as info:
        c.write([u])
    assert [e.code for e in info.value.errors] == [code_pb2.INVALID_ARGUMENT]
    assert "has no direct counter" in info.value.errors[0].message


def test_reads_with_unknown_ids_are_invalid_argument(switch, c):
    for ent in (p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=0x7FFFFFF)),
                p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry(register_id=9)),
                p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(counter_id=9))):
        req = p4runtime_pb2.ReadRequest(device_id=0, entities=[ent])
        with grpc.insecure_channel(switch.address) as ch:
            with pytest.raises(grpc.RpcError) as info:
                list(p4runtime_pb2_grpc.P4RuntimeStub(ch).Read(req, timeout=10))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# ---------------------------------------------------------------- garbage device configs

GARBAGE_CONFIGS = [
    ("random bytes", lambda: bytes(range(256)) * 4, grpc.StatusCode.INVALID_ARGUMENT, "not a pyswitch"),
    ("json of the wrong kind", lambda: b'{"format": "bmv2"}', grpc.StatusCode.INVALID_ARGUMENT,
     "not a pyswitch"),
    ("json list", lambda: b"[1, 2, 3]", grpc.StatusCode.INVALID_ARGUMENT, "not a pyswitch"),
    ("program that does not parse", lambda: device_config(source="control {"),
     grpc.StatusCode.INVALID_ARGUMENT, "device config"),
    ("config missing its source", lambda: b'{"format": "pyswitch-device-config/1"}',
     grpc.StatusCode.INVALID_ARGUMENT, "device config"),
    ("100M-cell register", lambda: device_config(cells=100_000_000),
     grpc.StatusCode.RESOURCE_EXHAUSTED, f"register Ing.store: 100000000); the limit is "
                                         f"{MAX_STATE_CELLS}"),
    ("2^31-1-cell register", lambda: device_config(cells=2**31 - 1),
     grpc.StatusCode.RESOURCE_EXHAUSTED, "register Ing.store: 2147483647"),
    ("table of 2^24 entries", lambda: device_config(size=1 << 24),
     grpc.StatusCode.RESOURCE_EXHAUSTED, f"the limit is {MAX_TABLE_SIZE} entries per table"),
]


@pytest.mark.parametrize("what, config, code, text", GARBAGE_CONFIGS,
                         ids=[g[0] for g in GARBAGE_CONFIGS])
def test_garbage_device_config_is_refused_and_old_pipeline_kept(switch, c, what, config, code,
                                                                text):
    c.write(inserts(c, 1))
    rss = proc_rss_kib(switch.proc.pid)
    with pytest.raises(P4RuntimeError) as info:
        c.set_pipeline(switch.compiled.p4info_path, config())
    assert info.value.code == code, str(info.value)
    assert text in str(info.value)
    assert proc_rss_kib(switch.proc.pid) < rss + 20_000  # nothing big was allocated
    assert len(c.read_table_entries(BIG)) == 1  # the running pipeline is untouched


def test_p4info_naming_tables_the_program_lacks_is_invalid(switch, c):
    from p4.config.v1 import p4info_pb2

    info = p4info_pb2.P4Info()
    info.CopyFrom(switch.compiled.p4info)
    info.tables[0].preamble.name = "Ing.nonexistent"
    with pytest.raises(P4RuntimeError) as err:
        c.set_pipeline(info, switch.compiled.config_path)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_replaced_pipelines_are_freed(switch, c):
    """The issue: three pushes of a big-register program grew RSS 826 -> 830 -> 1,593 MB.
    Here 3.5 M cells (28 MB of list slots) pushed four times must not add up."""
    config = device_config(cells=3_500_000)
    rss = []
    for _ in range(4):
        c.set_pipeline(switch.compiled.p4info_path, config)
        rss.append(proc_rss_kib(switch.proc.pid))
    assert rss[-1] - rss[0] < 12_000, rss
    c.set_pipeline(switch.compiled.p4info_path, switch.compiled.config_path)


# ---------------------------------------------------------------- mastership

def test_two_controllers_fighting_for_mastership(switch, c):
    a = switch.client(election_id=2, connect=False).connect(require_primary=False)
    b = switch.client(election_id=3, connect=False).connect(require_primary=False)
    try:
        eid = 3
        for rnd in range(20):  # each round the other one outbids
            eid += 1
            x, y = (a, b) if rnd % 2 == 0 else (b, a)
            x.election_id = (0, eid)
            become_primary(x)
            deadline = time.monotonic() + 5
            while y.poll_arbitration() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not y.is_primary and y.primary_election_id == (0, eid)
            x.write(inserts(x, 1, start=1000 + rnd))
            with pytest.raises(NotPrimaryError):
                y.write(inserts(y, 1, start=2000 + rnd))
            with pytest.raises(NotPrimaryError):
                c.write(inserts(c, 1, start=3000 + rnd))
        assert len(a.read_table_entries(BIG)) == 20
        # the same election id as the primary's ends the stream with INVALID_ARGUMENT
        y.election_id = x.election_id
        y.poll_arbitration()
        with pytest.raises(P4RuntimeError) as info:
            y.arbitrate()
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert capabilities(switch.address) == "1.4.1"
    finally:
        a.close()
        b.close()
        c.election_id = (0, 1000)  # above both, so the fixture's client is primary again
        become_primary(c)


# ---------------------------------------------------------------- stream channels

async def _open_streams(address: str, n: int, arbitrate: bool, base_eid: int = 10_000
                        ) -> tuple[list[grpc.aio.Channel], list]:
    """``n`` StreamChannels over 10 channels (a cheap asyncio client, no thread per stream);
    with ``arbitrate`` each sends a MasterArbitrationUpdate and reads the answer."""
    channels = [grpc.aio.insecure_channel(address) for _ in range(10)]
    calls = []
    for i in range(n):
        call = p4runtime_pb2_grpc.P4RuntimeStub(channels[i % 10]).StreamChannel()
        if arbitrate:
            req = p4runtime_pb2.StreamMessageRequest()
            req.arbitration.device_id = 0
            req.arbitration.election_id.low = base_eid + i
            req.arbitration.role.name = "abuse"  # not the default role: c stays primary
            await call.write(req)
            await asyncio.wait_for(call.read(), 10)
        calls.append(call)
    return channels, calls


async def _close(channels: list, calls: list) -> None:
    for call in calls:
        call.cancel()
    for ch in channels:
        await ch.close()


def test_1000_stream_channels_opened_and_dropped(switch, c):
    pid = switch.proc.pid
    rss0, fds0 = proc_rss_kib(pid), proc_fds(pid)

    async def churn() -> None:
        for _ in range(10):
            channels, calls = await _open_streams(switch.address, 100, arbitrate=True)
            await _close(channels, calls)

    asyncio.run(churn())
    assert capabilities(switch.address) == "1.4.1"
    c.write(inserts(c, 1))
    time.sleep(0.5)
    assert proc_fds(pid) <= fds0 + 2
    assert proc_rss_kib(pid) < rss0 + 15_000


def test_100_streams_held_open_while_unary_calls_succeed(switch, c):
    async def scenario() -> None:
        channels, calls = await _open_streams(switch.address, 50, arbitrate=True)
        idle = await _open_streams(switch.address, 50, arbitrate=False)
        try:
            loop = asyncio.get_running_loop()
            # the unary calls run in threads (the project's blocking client)
            assert await loop.run_in_executor(None, capabilities, switch.address, 5) == "1.4.1"
            await loop.run_in_executor(None, c.write, inserts(c, 10))
            assert len(await loop.run_in_executor(None, c.read_table_entries, BIG)) == 10
            # above the other's 5 whatever ran before (alone, the fixture's client has 1)
            c.election_id = max(c.election_id, (0, 1000))
            await loop.run_in_executor(None, become_primary, c)
            other = switch.client(election_id=5, connect=False)
            await loop.run_in_executor(None, lambda: other.connect(require_primary=False))
            assert other.arbitration_code == code_pb2.ALREADY_EXISTS
            await loop.run_in_executor(None, other.close)
            await loop.run_in_executor(None, lambda: c.set_pipeline(
                switch.compiled.p4info_path, switch.compiled.config_path))
        finally:
            await _close(channels, calls)
            await _close(*idle)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_stream_limit_answers_resource_exhausted():
    """In-process server with a limit of 4 streams: the fifth is refused, unary calls go on,
    and a dropped stream frees its place."""
    from pyswitch.p4runtime.pipeline import Device
    from pyswitch.p4runtime.server import serve

    server, port = serve(Device(), "127.0.0.1:0", max_streams=4)
    address = f"127.0.0.1:{port}"
    try:
        async def scenario() -> None:
            channels, calls = await _open_streams(address, 4, arbitrate=True)
            try:
                extra = p4runtime_pb2_grpc.P4RuntimeStub(channels[0]).StreamChannel()
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await asyncio.wait_for(extra.read(), 10)
                assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "limit is 4" in info.value.details()
                loop = asyncio.get_running_loop()
                assert await loop.run_in_executor(None, capabilities, address, 5) == "1.4.1"
                calls[0].cancel()
                await asyncio.sleep(0.3)
                again = await _open_streams(address, 1, arbitrate=True, base_eid=99)
                await _close(*again)
            finally:
                await _close(channels, calls)

        asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        server.stop(0).wait(5)


# ---------------------------------------------------------------- the log stays bounded

def test_log_does_not_grow_per_failed_update(switch, c):
    before = len(switch.log().splitlines())
    for _ in range(30):
        raw_write(switch, c, [c.update("DELETE", "table_entry",
                                       c.table_entry(BIG, {DST: mac(i)})) for i in range(50)])
    grown = len(switch.log().splitlines()) - before
    assert grown <= 25, switch.log()[-3000:]  # 1,500 failed updates, a bounded few lines
    assert capabilities(switch.address) == "1.4.1"


def test_unexpected_exception_is_internal_with_a_message_never_empty_unknown():
    """2^31-1 register cells used to end in MemoryError, answered as an empty UNKNOWN;
    the limits refuse that config now, and any exception left is INTERNAL with its name."""
    from pyswitch.p4runtime.pipeline import Device
    from pyswitch.p4runtime.server import serve

    server, port = serve(Device(), "127.0.0.1:0")

    def out_of_memory(request):
        raise MemoryError()

    server.servicer._get_pipeline = out_of_memory
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            with pytest.raises(grpc.RpcError) as info:
                p4runtime_pb2_grpc.P4RuntimeStub(ch).GetForwardingPipelineConfig(
                    p4runtime_pb2.GetForwardingPipelineConfigRequest(), timeout=10)
        assert info.value.code() == grpc.StatusCode.INTERNAL
        assert "MemoryError" in info.value.details()
    finally:
        server.stop(0).wait(5)


def test_run_refuses_a_program_beyond_the_limits(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "huge.json"
    path.write_bytes(device_config(cells=100_000_000))
    run = subprocess.run([sys.executable, "-m", "pyswitch", "run", "--grpc-server-addr",
                          "127.0.0.1:0", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "the limit is" in lines[0] and "Ing.store" in lines[0], run.stderr
