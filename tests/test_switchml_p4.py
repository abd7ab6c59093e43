"""Packet tests of p4src/switchml.p4 (docs/switchml.md) on every available P4 target, plus
the static checks: the P4 header equals the Python layout, the generated value registers are
current, the control-plane names agree with P4Info.

Targets (the `target` fixture; the harness of tests/ina_harness.py and
tests/ina_net_target.py, the same one ina.p4's packet tests run on):

* ``python`` / ``native``: pyswitch in process (`PySwitchTarget`), on its Python path and on
  its native one, compiled to C (skipped without a C compiler);
* ``pyswitch-net``: ``python -m pyswitch run`` on veths, configured over P4Runtime (the rules
  of workers/switchml/rules.py written with the project's client), real frames in and out,
  counters and registers read back over P4Runtime (root);
* ``bmv2``: BMv2's ``simple_switch_grpc`` the same way, the program compiled by p4c (root;
  skipped without simple_switch_grpc and p4c). Its P4Runtime server cannot read registers:
  there `register()` is None and only the register assertions are left out (`check_reg`).

The network targets know a frame is done with by the harness's probe: a plain IPv4 frame
routed by the program's own ``MyIngress.ipv4_lpm`` (switchml.p4 has ina.p4's table and
``ipv4_forward`` action, which count nothing), see tests/ina_net_target.py.

The switch under test: one job (JOB) of three workers, worker w on port w + 1, pool of S = 4
slots at cells [BASE, BASE + 8); RESULTs multicast on group GROUP to ports 1-3. Worker 3 is
not a member; port 9 belongs to nobody; port 20 (another switch's side) is used by one test.
Ports 1-4, 9 and 20 all have veths on the network targets (ina_net_target.TEST_PORTS; a
send into any other port fails there).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ina_harness import PySwitchTarget, Target, target_unavailable
from ina_net_target import NetSwitchTarget, pools_for

from pyswitch import compile_p4
from pyswitch.native import unavailable
from workers.switchml import constants as C
from workers.switchml.job import JobConfig
from workers.switchml.rules import Host, install, job_rules
from workers.switchml.wire import (
    HEADER_FIELDS,
    Flag,
    MsgType,
    SmPacket,
    decode_frame,
    encode_frame,
)

REPO = Path(__file__).resolve().parents[1]
P4SRC = REPO / "p4src"
SWITCHML_P4 = P4SRC / "switchml.p4"
JOB, GROUP, S, BASE = 7, 3, 4, 16
WORKERS = (0, 1, 2)
COUNTERS = ("aggregated", "completed", "shadow_reply", "absorbed", "dropped_duplicate",
            "dropped_stale", "dropped_busy", "dropped_malformed", "dropped_nonmember",
            "dropped_no_slot", "dropped_not_ipv4", "dropped_ipv4_noroute")


def host(w: int) -> Host:
    return Host(port=w + 1, mac=f"02:00:00:00:00:{w + 1:02x}", ip=f"10.0.0.{w + 1}")


# ====================================================================== static checks


def _p4_header_fields(text: str, name: str) -> list[tuple[str, int]]:
    body = re.search(r"header\s+" + name + r"\s*\{(.*?)\}", text, re.S)
    assert body, f"header {name} not found"
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", body.group(1), flags=re.S)
    return [(f, int(w)) for w, f in re.findall(r"bit<(\d+)>\s+(\w+)\s*;", code)]


def test_p4_header_equals_the_python_layout_field_by_field() -> None:
    text = (P4SRC / "include" / "switchml_headers.p4").read_text()
    assert tuple(_p4_header_fields(text, "switchml_h")) == HEADER_FIELDS
    assert sum(w for _, w in HEADER_FIELDS) == 8 * C.HDR_BYTES


def test_generated_value_registers_are_current() -> None:
    res = subprocess.run([sys.executable, str(P4SRC / "gen_switchml_values.py"), "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    regs = (P4SRC / "include" / "switchml_values.p4").read_text()
    assert len(re.findall(r"register<bit<32>>\(SWITCHML_CELLS\) sm_v\d+;", regs)) == C.K


def test_shared_facts_come_from_inas_constants() -> None:
    from workers.ina import constants as ina

    assert (C.K, C.MAX_WORKERS) == (ina.K, ina.MAX_WORKERS)
    assert C.UDP_PORT != ina.INA_UDP_PORT  # another header: another port
    text = (P4SRC / "include" / "switchml_constants.p4").read_text()
    assert "INA_K" in text and not re.search(r"#define\s+SWITCHML_K\b", text)


# ====================================================================== the switch


@pytest.fixture(scope="module")
def program():
    return compile_p4(SWITCHML_P4)


@pytest.fixture(scope="module")
def net_pools(tmp_path_factory):
    """Switch processes of the network targets running switchml.p4, started on first use and
    shared by the module (each test gets switch 0 of its kind, reset by a pipeline push)."""
    with pools_for(SWITCHML_P4, tmp_path_factory) as get:
        yield get


@pytest.fixture(params=[
    pytest.param("python"),
    pytest.param("native"),
    pytest.param("pyswitch-net", marks=pytest.mark.root),
    pytest.param("bmv2", marks=[pytest.mark.root, pytest.mark.bmv2]),
])
def target(request, program):
    """A fresh switch running switchml.p4 with no rules, on one target (skips when the
    target is absent). A network target must be quiet after the test (`finish`)."""
    kind = request.param
    if kind in ("python", "native"):
        native = kind == "native"
        if native and unavailable() is not None:
            pytest.skip(f"native path: {unavailable()}")
        yield PySwitchTarget(program, native=native)   # checks the path it got
        return
    why = target_unavailable(kind)
    if why:
        pytest.skip(why)
    sw = request.getfixturevalue("net_pools")(kind).get(0)
    yield sw
    sw.finish()


@pytest.fixture
def sw(target) -> Target:
    """A switch configured for JOB (workers 0-2 on ports 1-3), on one target."""
    job = JobConfig(JOB, WORKERS, pool_size=S, pool_base=BASE)
    install(job_rules(job, {w: host(w) for w in WORKERS}, GROUP), target)
    return target


def vals(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-(2**28), 2**28, C.K).astype(np.int32)


def update(w: int, chunk: int, values: np.ndarray, slot: int = 0, ver: int = 0,
           rnd: int = 1, job: int = JOB, retransmit: bool = False) -> bytes:
    pkt = SmPacket.update(job, w, slot, ver, rnd, chunk, values, retransmit)
    return encode_frame(pkt, f"02:00:00:00:00:{w + 1:02x}", "02:00:00:00:00:fe",
                        f"10.0.0.{w + 1}", "10.0.0.254")


def send(sw: Target, port: int, frame: bytes) -> list[tuple[int, SmPacket, bytes]]:
    out = []
    for p, data in sw.process(port, frame):
        pkt = decode_frame(data)
        assert pkt is not None, f"non-SwitchML frame out of port {p}"
        out.append((p, pkt, data))
    return out


def counters(sw: Target) -> dict[str, int]:
    return {n: sw.counter(n) for n in COUNTERS}


def nonzero(sw: Target) -> dict[str, int]:
    return {n: v for n, v in counters(sw).items() if v}


def check_reg(sw: Target, name: str, cell: int, want: int) -> None:
    """Register ``name``[cell] == want; left out only where the target cannot read registers
    (BMv2's P4Runtime server: the packets of the test still show the state)."""
    got = sw.register(name, cell)
    if got is None:
        assert isinstance(sw, NetSwitchTarget) and not sw.kind.reads_registers, (
            f"{type(sw).__name__} returned no value for {name}[{cell}]")
        return
    assert got == want, f"{name}[{cell}] = {got:#x}, expected {want:#x}"


def contribute(sw: Target, chunk: int, data: dict[int, np.ndarray], slot: int = 0,
               ver: int = 0, rnd: int = 1) -> list[tuple[int, SmPacket, bytes]]:
    """Every worker's UPDATE in order; all but the last are absorbed."""
    order = sorted(data)
    for w in order[:-1]:
        assert send(sw, w + 1, update(w, chunk, data[w], slot, ver, rnd)) == []
    return send(sw, order[-1] + 1, update(order[-1], chunk, data[order[-1]], slot, ver, rnd))


def exact(data: dict[int, np.ndarray]) -> np.ndarray:
    total = sum(v.astype(np.int64) for v in data.values())
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


# ====================================================================== aggregation


def test_sum_is_exact_and_multicast_to_every_worker(sw) -> None:
    data = {w: vals(w) for w in WORKERS}
    out = contribute(sw, chunk=0, data=data)
    assert sorted(p for p, _, _ in out) == [1, 2, 3]
    for port, pkt, frame in out:
        assert pkt.msg_type == MsgType.RESULT and pkt.flags == 0
        assert (pkt.job_id, pkt.pool_index, pkt.ver, pkt.round, pkt.chunk) == (JOB, 0, 0, 1, 0)
        assert pkt.count == 3 and pkt.worker_id == 2  # the worker that completed it
        assert np.array_equal(pkt.values, exact(data))
        w = port - 1  # the copy is addressed to the worker behind its port ...
        assert frame[0:6] == bytes.fromhex(host(w).mac.replace(":", ""))
        assert frame[30:34] == bytes(int(x) for x in host(w).ip.split("."))
        # ... from the address the UPDATEs were sent to (the switch's)
        assert frame[6:12] == bytes.fromhex("0200000000fe") and frame[26:30] == bytes(
            [10, 0, 0, 254])
    assert nonzero(sw) == {"aggregated": 3, "absorbed": 2, "completed": 1}
    cell = BASE  # slot 0, version 0
    check_reg(sw, "sm_count", cell, 3)
    check_reg(sw, "sm_bitmap", cell, 0b111)
    check_reg(sw, "sm_key", cell, (1 << 32) | 0)


def test_extreme_values_wrap_like_int32(sw) -> None:
    hi, lo = 2**31 - 1, -(2**31)
    data = {0: np.full(C.K, hi, np.int32), 1: np.full(C.K, 5, np.int32),
            2: np.full(C.K, -5, np.int32)}
    data[2][1], data[0][2] = lo, lo
    out = contribute(sw, chunk=3, data=data, slot=3)
    assert {tuple(p.values) for _, p, _ in out} == {tuple(exact(data))}
    assert out[0][1].values[0] == hi  # hi + 5 - 5: an intermediate sum wrapped and came back


def test_pool_slots_and_copies_are_independent(sw) -> None:
    a = {w: vals(10 + w) for w in WORKERS}
    b = {w: vals(20 + w) for w in WORKERS}
    outs = []
    for w in WORKERS:  # interleaved: slot 1 copy 0 and slot 2 copy 1
        outs.append(send(sw, w + 1, update(w, 1, a[w], slot=1)))
        outs.append(send(sw, w + 1, update(w, 6, b[w], slot=2, ver=1)))
    assert outs[:4] == [[], [], [], []]
    assert {(p.pool_index, p.ver, tuple(p.values)) for _, p, _ in outs[4] + outs[5]} == \
        {(1, 0, tuple(exact(a))), (2, 1, tuple(exact(b)))}
    check_reg(sw, "sm_count", BASE + S + 2, 3)
    check_reg(sw, "sm_count", BASE + 1, 3)
    check_reg(sw, "sm_count", BASE + 2, 0)  # slot 2's copy 0 unused


def test_duplicate_before_completion_is_summed_once(sw) -> None:
    data = {w: vals(30 + w) for w in WORKERS}
    assert send(sw, 1, update(0, 0, data[0])) == []
    assert send(sw, 1, update(0, 0, data[0])) == []
    assert send(sw, 1, update(0, 0, data[0], retransmit=True)) == []
    assert send(sw, 2, update(1, 0, data[1])) == []
    out = send(sw, 3, update(2, 0, data[2]))
    assert len(out) == 3 and np.array_equal(out[0][1].values, exact(data))
    assert nonzero(sw) == {"aggregated": 3, "absorbed": 2, "completed": 1,
                           "dropped_duplicate": 2}


def test_retransmission_after_completion_is_answered_from_the_shadow_copy(sw) -> None:
    data = {w: vals(40 + w) for w in WORKERS}
    contribute(sw, 0, data)
    # worker 1 lost its RESULT and sends its chunk again: only it gets the stored sum
    out = send(sw, 2, update(1, 0, data[1], retransmit=True))
    assert [(p, pk.msg_type, pk.flags, pk.worker_id) for p, pk, _ in out] == \
        [(2, MsgType.RESULT, Flag.SHADOW, 1)]
    assert np.array_equal(out[0][1].values, exact(data)) and out[0][1].count == 3
    assert out[0][2][30:34] == bytes([10, 0, 0, 2]) and out[0][2][26:30] == bytes(
        [10, 0, 0, 254])
    assert out[0][2][0:6] == bytes.fromhex("020000000002")
    # ... and again, while the slot's other copy is busy with the next chunk of others
    nxt = {w: vals(50 + w) for w in WORKERS}
    assert send(sw, 1, update(0, S, nxt[0], ver=1)) == []
    out = send(sw, 2, update(1, 0, data[1], retransmit=True))
    assert [p for p, _, _ in out] == [2] and np.array_equal(out[0][1].values, exact(data))
    assert counters(sw)["shadow_reply"] == 2
    # the sums were not touched by the replies
    out = send(sw, 2, update(1, S, nxt[1], ver=1))
    assert out == []
    out = send(sw, 3, update(2, S, nxt[2], ver=1))
    assert {tuple(p.values) for _, p, _ in out} == {tuple(exact(nxt))}


def test_version_flip_clears_the_workers_bit_in_the_other_copy(sw) -> None:
    first = {w: vals(60 + w) for w in WORKERS}
    contribute(sw, 0, first)                              # chunk 0: slot 0, copy 0
    check_reg(sw, "sm_bitmap", BASE, 0b111)
    second = {w: vals(70 + w) for w in WORKERS}
    assert send(sw, 1, update(0, S, second[0], ver=1)) == []  # chunk S: slot 0, copy 1
    # worker 0 has chunk 0's result: its bit in copy 0 is cleared, the others' kept
    check_reg(sw, "sm_bitmap", BASE, 0b110)
    check_reg(sw, "sm_bitmap", BASE + S, 0b001)
    # a late copy of worker 0's chunk 0 is not answered again: worker 0 has moved on
    assert send(sw, 1, update(0, 0, first[0], retransmit=True)) == []
    assert counters(sw)["dropped_stale"] == 1
    send(sw, 2, update(1, S, second[1], ver=1))
    out = send(sw, 3, update(2, S, second[2], ver=1))
    assert {tuple(p.values) for _, p, _ in out} == {tuple(exact(second))}
    check_reg(sw, "sm_bitmap", BASE, 0)
    # chunk 2S reuses copy 0: the claim starts from this chunk's values, not chunk 0's sum
    third = {w: vals(80 + w) for w in WORKERS}
    out = contribute(sw, 2 * S, third, ver=0)
    assert {tuple(p.values) for _, p, _ in out} == {tuple(exact(third))}
    check_reg(sw, "sm_bitmap", BASE + S, 0)
    check_reg(sw, "sm_key", BASE, (1 << 32) | 2 * S)
    # a late chunk 0 now meets a newer chunk in its copy: stale, nothing sent
    assert send(sw, 2, update(1, 0, first[1], retransmit=True)) == []
    assert counters(sw)["dropped_stale"] == 2
    assert counters(sw)["completed"] == 3


def test_a_newer_chunk_on_an_incomplete_copy_is_dropped_busy(sw) -> None:
    send(sw, 1, update(0, 0, vals(1)))
    assert send(sw, 2, update(1, 2 * S, vals(2))) == []  # skipped a whole use of the slot
    assert nonzero(sw) == {"aggregated": 1, "absorbed": 1, "dropped_busy": 1}


def test_the_slot_versions_carry_on_across_rounds(sw) -> None:
    """Round 2's chunk 0 takes slot 0's other copy (the worker's version flipped); round 1's
    result stays for a late retransmission, and round 3 claims copy 0 over it."""
    r1 = {w: vals(90 + w) for w in WORKERS}
    contribute(sw, 0, r1, ver=0, rnd=1)
    r2 = {w: vals(95 + w) for w in WORKERS}
    assert send(sw, 1, update(0, 0, r2[0], ver=1, rnd=2)) == []
    out = send(sw, 3, update(2, 0, r1[2], ver=0, rnd=1, retransmit=True))
    assert [p for p, _, _ in out] == [3] and np.array_equal(out[0][1].values, exact(r1))
    send(sw, 2, update(1, 0, r2[1], ver=1, rnd=2))
    out = send(sw, 3, update(2, 0, r2[2], ver=1, rnd=2))
    assert {tuple(p.values) for _, p, _ in out} == {tuple(exact(r2))}
    r3 = {w: vals(99 + w) for w in WORKERS}
    out = contribute(sw, 0, r3, ver=0, rnd=3)
    assert {tuple(p.values) for _, p, _ in out} == {tuple(exact(r3))}
    check_reg(sw, "sm_key", BASE, (3 << 32) | 0)


def test_workers_behind_one_port_get_a_replica_each(target) -> None:
    """On a switch that is not the workers' ToR several workers share a port: the group
    has one replica per worker (rid = worker_id + 1) and each is addressed to its worker."""
    s = target
    far = {0: Host(20, "02:00:00:00:00:10", "10.0.2.1"), 1: Host(20, "02:00:00:00:00:11",
                                                                  "10.0.2.2"),
           2: host(2)}
    install(job_rules(JobConfig(JOB, WORKERS, pool_size=S), far, GROUP), s)
    data = {w: vals(5 + w) for w in WORKERS}
    assert send(s, 20, update(0, 0, data[0])) == []
    assert send(s, 20, update(1, 0, data[1])) == []
    out = send(s, 3, update(2, 0, data[2]))
    got = sorted((p, bytes(f[30:34])) for p, _, f in out)
    assert got == [(3, bytes([10, 0, 0, 3])), (20, bytes([10, 0, 2, 1])),
                   (20, bytes([10, 0, 2, 2]))]
    assert all(np.array_equal(pk.values, exact(data)) for _, pk, _ in out)


# ====================================================================== admission


def test_a_non_member_is_dropped_and_counted(sw) -> None:
    assert send(sw, 4, update(3, 0, vals(1))) == []        # worker 3: not in the job
    assert send(sw, 9, update(0, 0, vals(1))) == []        # worker 0 on a port not its own
    assert send(sw, 1, update(0, 0, vals(1), job=JOB + 1)) == []  # unknown job
    assert nonzero(sw) == {"dropped_nonmember": 3}
    check_reg(sw, "sm_count", BASE, 0)


def test_malformed_and_out_of_pool_updates_are_dropped_and_counted(sw) -> None:
    good = update(0, 0, vals(1))
    bad_ver = bytearray(good)
    bad_ver[42 + 8] = 2                                    # ver = 2
    result = bytearray(good)
    result[42] = MsgType.RESULT                            # only the switch makes RESULTs
    for frame in (bytes(bad_ver), bytes(result), good[:60]):
        assert send(sw, 1, frame) == []
    assert counters(sw)["dropped_malformed"] == 3
    assert send(sw, 1, update(0, 0, vals(1), slot=S)) == []  # beyond the job's pool
    assert counters(sw)["dropped_no_slot"] == 1
    arp = bytes.fromhex("ffffffffffff020000000001" "0806") + bytes(28)
    assert sw.process(1, arp) == []
    assert counters(sw)["dropped_not_ipv4"] == 1
    assert counters(sw)["aggregated"] == 0


# ====================================================================== control plane


def test_control_plane_names_and_the_rules_agree_with_p4info(program) -> None:
    """What P4Info names (as p4c names it: the @name(".MyIngress.x") of the inner controls)
    and what workers/switchml/rules.py writes: every entry's table, key fields, action and
    parameters exist, with those names. (p4c itself is not on our machines; see
    docs/switchml.md for the constructs kept p4c-valid.)"""
    info = program.p4info
    tables = {t.preamble.name: t for t in info.tables}
    actions = {a.preamble.id: a for a in info.actions}
    assert sorted(tables) == ["MyEgress.result_dst", "MyIngress.ipv4_lpm",
                              "MyIngress.job_table", "MyIngress.sm_member"]
    assert sorted(c.preamble.name for c in info.counters) == sorted(
        f"MyIngress.{n}" for n in COUNTERS)
    assert sorted(r.preamble.name for r in info.registers) == sorted(
        ["MyIngress.sm_key", "MyIngress.sm_bitmap", "MyIngress.sm_count"]
        + [f"MyIngress.sm_v{i}" for i in range(C.K)])
    assert {r.preamble.name: r.size for r in info.registers}["MyIngress.sm_key"] == C.CELLS
    job = JobConfig(JOB, WORKERS, pool_size=S, pool_base=BASE)
    rules = job_rules(job, {w: host(w) for w in WORKERS}, GROUP)
    assert {e.table for e in rules.entries} == {"MyIngress.job_table", "MyIngress.sm_member",
                                                "MyEgress.result_dst"}
    for e in rules.entries:
        t = tables[e.table]
        assert [m.name for m in t.match_fields] == list(e.match)
        acts = {actions[r.id].preamble.name: actions[r.id] for r in t.action_refs}
        assert e.action in acts, (e.table, e.action)
        assert [p.name for p in acts[e.action].params] == list(e.params)


def test_the_docs_header_table_equals_the_layout() -> None:
    text = (REPO / "docs" / "switchml.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \|", text, re.M)
    assert tuple((name, int(bits)) for name, bits in rows) == HEADER_FIELDS
