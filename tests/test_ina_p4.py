"""Packet tests of p4src/ina.p4 (docs/design.md §3.6–3.7), run on every available P4 target.

Topology of the switch under test (see ina_harness.InaSwitch): worker w on host port w+1;
fabric uplinks 20, 21 toward the PS's ToR (id TOR); the PS on port 30 when the switch is
the ToR; another switch (id OTHER) behind fabric ports 22, 23, 24.

Targets (tests/ina_harness.py): ``pyswitch`` in-process; ``pyswitch-net`` = ``python -m
pyswitch run`` on veths configured over P4Runtime (root); ``bmv2`` = simple_switch_grpc the
same way (root; skipped without simple_switch_grpc and p4c). The network targets have veths
on ports 1-9, 20-24 and 30 only (tests/ina_net_target.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ina_harness import (
    COUNTERS,
    INA_P4,
    InaSwitch,
    PySwitchTarget,
    colliding_chunks,
    ecmp_member,
    slot_of,
    target_unavailable,
)
from ina_net_target import pools_for
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from workers.ina import constants as C
from workers.ina.wire import (
    HEADER_FIELDS,
    PREFIX_FIELDS,
    Flag,
    InaPacket,
    MsgType,
    decode_frame,
    frame_span,
)

REPO = Path(__file__).resolve().parents[1]
P4SRC = REPO / "p4src"
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)

AGG, TOR, OTHER = 5, 9, 7          # switch ids
UPLINKS, OTHER_PORTS, PS_PORT = [20, 21], [22, 23, 24], 30
JOB = 3
MCAST = 1
WORKERS8, JOB10, JOB6 = tuple(range(8)), tuple(range(10)), tuple(range(6))


# ====================================================================== static checks


def _p4_header_fields(text: str, name: str) -> list[tuple[str, int]]:
    body = re.search(r"header\s+" + name + r"\s*\{(.*?)\}", text, re.S)
    assert body, f"header {name} not found"
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", body.group(1), flags=re.S)
    return [(f, int(w)) for w, f in re.findall(r"bit<(\d+)>\s+(\w+)\s*;", code)]


def test_p4_header_matches_scapy_layer_field_by_field() -> None:
    text = (P4SRC / "include" / "headers.p4").read_text()
    assert tuple(_p4_header_fields(text, "ina_h")) == HEADER_FIELDS
    vals = _p4_header_fields((P4SRC / "include" / "values_header.p4").read_text(),
                             "ina_values_h")
    assert vals == [(f"v{i}", 32) for i in range(C.K)]


def test_frame_prefix_layout_matches_p4_headers() -> None:
    """PREFIX_FIELDS (the offsets the simulator's shortcut reads frames by) is ethernet_t,
    ipv4_t and udp_t of headers.p4, typedefs resolved, in order."""
    inc = P4SRC / "include"
    types = dict((n, int(w)) for w, n in re.findall(
        r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", (inc / "types.p4").read_text()))
    text = (inc / "headers.p4").read_text()
    for name, w in types.items():
        text = re.sub(rf"\b{name}\b", f"bit<{w}>", text)
    want = [(f"{h}.{f}", w) for h in ("ethernet", "ipv4", "udp")
            for f, w in _p4_header_fields(text, f"{h}_t")]
    assert tuple(want) == PREFIX_FIELDS
    assert frame_span("ipv4.ttl") == slice(22, 23)
    assert frame_span("ina.chunk_id") == slice(50, 54)
    with pytest.raises(ValueError, match="whole bytes"):
        frame_span("ipv4.version")


def test_generated_value_code_is_current() -> None:
    res = subprocess.run([sys.executable, str(P4SRC / "gen_values.py"), "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    regs = (P4SRC / "include" / "values_regs.p4").read_text()
    assert len(re.findall(r"register<bit<32>>\(INA_NUM_SLOTS\) agg_v\d+;", regs)) == C.K


def test_independent_hashes_match_zlib_reference_values() -> None:
    # Pin the hash definitions used by the controller and the tests (crc32 = zlib.crc32).
    import struct
    import zlib

    assert slot_of(1, 2, 3) == zlib.crc32(struct.pack("!HII", 1, 2, 3)) % C.NUM_SLOTS
    assert zlib.crc32(b"123456789") == 0xCBF43926  # the CRC-32 check value BMv2's crc32 meets



def test_ecmp_member_is_a_round_robin_shifted_by_the_switch_id() -> None:
    # routing.p4's twin: member (turn + switch_id) mod size, the turn wrapping at the size
    assert ecmp_member(0, 5, 3) == (2, 1)
    assert ecmp_member(1, 5, 3) == (0, 2)
    assert ecmp_member(2, 5, 3) == (1, 0)
    assert ecmp_member(7, 5, 3) == (2, 1)        # a turn past a shrunk group starts again
    assert ecmp_member(0, 9, 1) == (0, 0)
    assert ecmp_member(3, 0xFFFF, 4) == (2, 0)   # the 16-bit sum wraps as in the P4
    turn, seen = 0, []
    for _ in range(12):
        m, turn = ecmp_member(turn, 6, 4)
        seen.append(m)
    assert seen == [2, 3, 0, 1] * 3


# ====================================================================== target fixture


@pytest.fixture(scope="module")
def net_pools(tmp_path_factory):
    """Switch processes of the network targets, started on first use, shared by the module."""
    with pools_for(INA_P4, tmp_path_factory) as get:
        yield get


@pytest.fixture(params=[
    pytest.param("pyswitch"),
    pytest.param("pyswitch-net", marks=pytest.mark.root),
    pytest.param("bmv2", marks=[pytest.mark.root, pytest.mark.bmv2]),
])
def make_target(request):
    """Factory of fresh switches of one target kind (skips when the target is absent).

    Network targets hand out the module's switch processes (first call: switch 0, second
    call: switch 1), each reset by a pipeline push; after the test they must be quiet."""
    why = target_unavailable(request.param)
    if why:
        pytest.skip(why)
    if request.param == "pyswitch":
        yield PySwitchTarget
        return
    pool = request.getfixturevalue("net_pools")(request.param)
    handed: list = []

    def make():
        handed.append(pool.get(len(handed)))
        return handed[-1]

    yield make
    errors = []
    for sw in handed:
        try:
            sw.finish()
        except AssertionError as exc:
            errors.append(str(exc))
    assert not errors, "\n".join(errors)


@pytest.fixture
def target(make_target):
    return make_target()


def agg_switch(target, workers=WORKERS8, job_workers=JOB10) -> InaSwitch:
    """Intermediate aggregation switch AGG; the job has more workers than its fan-in."""
    sw = InaSwitch(target, AGG).configure()
    sw.fabric(*UPLINKS, *OTHER_PORTS)
    sw.job(JOB, list(job_workers), is_ps_tor=False, tor_id=TOR, mcast_grp=MCAST,
           member_ports=False)
    for w in workers:
        sw.member(JOB, w, w + 1)
    sw.route(TOR, UPLINKS)
    sw.route(0, UPLINKS)
    sw.route(OTHER, OTHER_PORTS)
    target.set_multicast_group(MCAST, [1, 2, 3, 20])
    return sw


def tor_switch(target, job_workers=JOB6) -> InaSwitch:
    """The PS's ToR (s_d) with the PS on PS_PORT."""
    sw = InaSwitch(target, TOR).configure()
    sw.fabric(*UPLINKS)
    sw.job(JOB, list(job_workers), is_ps_tor=True, tor_id=TOR, ps_port=PS_PORT,
           mcast_grp=MCAST)
    sw.route(0, [PS_PORT])
    sw.route(AGG, UPLINKS)
    target.set_multicast_group(MCAST, [1, 2, 20, PS_PORT])
    return sw


def grad(worker, values, chunk=11, rnd=0, agg=AGG, fan_in=2, flags=0, job=JOB) -> bytes:
    return InaSwitch.frame(InaPacket.grad(job, rnd, chunk, agg, fan_in, worker, values, flags),
                           src_ip=f"10.0.1.{worker + 1}")


def vals(*xs) -> np.ndarray:
    """K values: the given ones, then a ramp, so every index is exercised."""
    out = np.arange(C.K, dtype=np.int64) * 3 - 40
    out[: len(xs)] = xs
    return out


# ====================================================================== aggregation


def _extreme_values(n: int, rng: np.random.Generator) -> np.ndarray:
    """n x K int32 values whose exact sum fits int32 but whose prefix sums may not."""
    limit = I32_MAX // n
    v = rng.integers(-limit, limit, size=(n, C.K), endpoint=True)
    v[:, 0] = limit                      # sum n*limit: at the top of the range
    v[:, 1] = -limit                     # ... and the bottom
    v[:, 2] = 0
    v[0, 2] = I32_MAX                    # INT32_MAX + 5 - 5: a prefix sum may overflow
    v[1, 2] = 5 if n > 2 else -5         # (with two workers no prefix is left to do so)
    if n > 2:
        v[2, 2] = -5
    v[:, 3] = 0
    v[0, 3] = I32_MIN                    # INT32_MIN alone
    v[:, 4] = -1                         # negatives
    return v


@pytest.mark.parametrize("n", [2, 4, 8])
def test_n_workers_give_one_partial_with_exact_sums(target, n) -> None:
    sw = agg_switch(target)
    rng = np.random.default_rng(n)
    values = _extreme_values(n, rng)
    chunk = 1000 + n
    outs = []
    order = rng.permutation(n)
    for w in order:
        outs += sw.send(int(w) + 1, grad(int(w), values[w], chunk=chunk, fan_in=n))
    assert len(outs) == 1
    (out,) = outs
    exact = values.sum(axis=0)
    assert np.all((exact >= I32_MIN) & (exact <= I32_MAX))
    assert out.values.tolist() == exact.tolist()
    # worker_id: that of the GRAD that completed the chunk
    assert out.pkt == InaPacket(MsgType.PARTIAL, 0, JOB, 0, chunk, TOR, n, n,
                                int(order[-1]), (1 << n) - 1, exact)
    assert out.port == sw.expected_port(TOR)
    # the job has 10 workers: completion was by fan-in, not by the job's mask
    assert sw.counters("aggregated", "completed") == {"aggregated": n, "completed": 1}


def test_tor_completes_on_full_mask_not_fan_in(target) -> None:
    sw = tor_switch(target)                      # job = workers 0..5
    rng = np.random.default_rng(1)
    g = rng.integers(-1000, 1000, size=(6, C.K))
    # workers 0, 1 send straight to s_d with fan_in 2: no completion at count == fan_in
    assert sw.send(1, grad(0, g[0], agg=TOR, fan_in=2)) == []
    assert sw.send(2, grad(1, g[1], agg=TOR, fan_in=2)) == []
    # PARTIAL from AGG with workers 2..5 arrives on a fabric port and completes the mask
    part = InaPacket(MsgType.PARTIAL, 0, JOB, 0, 11, TOR, 4, 4, 2, 0b111100, g[2:].sum(axis=0))
    outs = sw.send(20, InaSwitch.frame(part))
    assert len(outs) == 1
    out = outs[0]
    assert out.port == PS_PORT
    assert (out.pkt.msg_type, out.pkt.agg_id, out.pkt.count, out.pkt.bitmap) == (
        MsgType.PARTIAL, 0, 6, 0b111111)
    assert out.values.tolist() == g.sum(axis=0).tolist()


def test_duplicate_before_completion_is_not_added(target) -> None:
    sw = agg_switch(target)
    a, b = vals(100, -7), vals(5, I32_MIN + 7)
    assert sw.send(1, grad(0, a, fan_in=2)) == []
    assert sw.send(1, grad(0, a, fan_in=2)) == []             # network duplicate: dropped
    outs = sw.send(2, grad(1, b, fan_in=2))
    assert len(outs) == 1 and outs[0].values.tolist() == (a + b).tolist()
    assert outs[0].pkt.count == 2
    assert sw.counters("duplicate", "aggregated") == {"duplicate": 1, "aggregated": 2}


def test_duplicate_after_completion_reemits_stored_partial(target) -> None:
    sw = agg_switch(target)
    a, b = vals(1, 2, 3), vals(-4, -5, -6)
    sw.send(1, grad(0, a))
    (first,) = sw.send(2, grad(1, b))
    # a retransmitted GRAD (its sender missed the RESULT because the PARTIAL was lost),
    # carrying different (e.g. recomputed) values that must not be added
    (again,) = sw.send(1, grad(0, vals(999), flags=Flag.RETRANSMIT))
    assert again.values.tolist() == first.values.tolist() == (a + b).tolist()
    assert replace(again.pkt, flags=0, worker_id=0) == replace(first.pkt, worker_id=0)
    assert again.pkt.flags == Flag.RETRANSMIT
    assert again.port == sw.expected_port(TOR)
    # a plain network duplicate after completion is answered the same way
    (third,) = sw.send(2, grad(1, b))
    assert third.values.tolist() == first.values.tolist()
    assert sw.counters("duplicate", "reemitted", "completed") == {
        "duplicate": 2, "reemitted": 2, "completed": 1}


def test_retransmit_never_claims_a_free_slot_but_joins_its_own(target) -> None:
    sw = agg_switch(target)
    g0 = vals(11, -11)
    frame = grad(0, g0, chunk=40, flags=Flag.RETRANSMIT)
    (out,) = sw.send(1, frame)
    # unchanged except agg_id -> PS, FALLBACK flag, TTL; not aggregated
    assert out.pkt == InaPacket.grad(JOB, 0, 40, 0, 2, 0, g0, Flag.RETRANSMIT | Flag.FALLBACK)
    assert out.values.tolist() == g0.tolist()
    assert out.port == sw.expected_port(0)
    assert sw.counters("aggregated", "bypassed") == {"aggregated": 0, "bypassed": 1}
    # the slot stayed free: a normal GRAD claims it, and a retransmitted GRAD (the first
    # copy was lost) joins it and completes the chunk
    g1 = vals(5, 6)
    assert sw.send(2, grad(1, g1, chunk=40)) == []
    (done,) = sw.send(1, frame)
    assert done.pkt.msg_type == MsgType.PARTIAL and done.values.tolist() == (g0 + g1).tolist()


ASK_GROUP = 0x8000  # controller.dataplane.deploy.ASK_GROUP_BASE


def asking(sw: InaSwitch, ports: list[int]) -> InaSwitch:
    """``sw`` with its NACK tree for the job (deploy.ask_trees): down ``ports``."""
    sw.target.insert_entry("MyIngress.ask_group", {"hdr.ina.job_id": JOB, "hdr.ina.agg_id": AGG},
                           "MyIngress.set_ask_group", {"grp": ASK_GROUP})
    sw.target.set_multicast_group(ASK_GROUP, ports)
    return sw


def test_incomplete_slot_asks_its_workers_on_retransmit(target) -> None:
    """A retransmission finds a flat job's point incomplete: the point multicasts a NACK
    (a RESULT flagged INCOMPLETE, bitmap = what it holds, agg_id = itself) down its own
    tree, back to the asker's port too (the workers behind it may lack), and keeps the slot
    for the answers."""
    sw = asking(agg_switch(target), [1, 2, 3])
    g0 = vals(3, 4)
    assert sw.send(1, grad(0, g0, chunk=50, fan_in=3)) == []
    outs = sw.send(1, grad(0, g0, chunk=50, fan_in=3, flags=Flag.RETRANSMIT))
    assert sorted(o.port for o in outs) == [1, 2, 3]
    assert {(o.pkt.msg_type, o.pkt.flags, o.pkt.agg_id, o.pkt.count, o.pkt.bitmap)
            for o in outs} == {(MsgType.RESULT, Flag.INCOMPLETE, AGG, 1, 0b1)}
    assert sw.counters("asked", "flushed", "release") == {"asked": 1, "flushed": 0,
                                                          "release": 0}
    g1, g2 = vals(5), vals(-7, 1)
    assert sw.send(2, grad(1, g1, chunk=50, fan_in=3)) == []
    (done,) = sw.send(3, grad(2, g2, chunk=50, fan_in=3, flags=Flag.RETRANSMIT))
    assert (done.pkt.msg_type, done.pkt.bitmap, done.pkt.count) == (MsgType.PARTIAL, 0b111, 3)
    assert done.values.tolist() == (g0 + g1 + g2).tolist()


def test_a_points_nack_passes_a_slot_without_releasing_it(target) -> None:
    """Another point's NACK on its way down crosses a switch that holds the chunk: it
    follows that point's tree there and leaves the slot; the RESULT releases it."""
    sw = asking(agg_switch(target), [2, 3])
    g0 = vals(8, 9)
    assert sw.send(1, grad(0, g0, chunk=51, fan_in=2)) == []
    # as ask_children leaves it: a whole frame (a host's NACK is its header alone)
    ask = bytearray(InaSwitch.frame(InaPacket.result(JOB, 0, 51, 0b10, vals(0), prev=AGG - 1)))
    ask[frame_span("ina.flags")] = bytes([Flag.INCOMPLETE])
    outs = sw.send(UPLINKS[0], bytes(ask))
    assert {(o.pkt.flags, o.pkt.agg_id) for o in outs} == {(Flag.INCOMPLETE, AGG)}
    assert sorted(o.port for o in outs) == [2, 3]
    assert sw.counters("release")["release"] == 0
    assert sw.target.register("slot_count", slot_of(JOB, 0, 51)) == 1
    sw.send(UPLINKS[0], InaSwitch.frame(InaPacket.result(JOB, 0, 51, 0b11, vals(1))))
    assert sw.counters("release")["release"] == 1


def test_a_point_without_its_nack_tree_drops_the_ask(target) -> None:
    """No ask_group entry (a controller that installs none): the NACK is counted as
    unroutable, never multicast down the RESULT tree."""
    sw = agg_switch(target)
    g0 = vals(3, 4)
    assert sw.send(1, grad(0, g0, chunk=52, fan_in=3)) == []
    assert sw.send(1, grad(0, g0, chunk=52, fan_in=3, flags=Flag.RETRANSMIT)) == []
    assert sw.counters("asked", "dropped_noroute") == {"asked": 1, "dropped_noroute": 1}


def test_incomplete_slot_at_s_d_is_flushed_to_ps_on_retransmit(target) -> None:
    """s_d has no point above it to ask for: it flushes what it holds to the PS, which
    asks the workers (docs/protocol.md §6)."""
    sw = tor_switch(target)
    g0 = vals(3, 4)
    assert sw.send(1, grad(0, g0, chunk=50, agg=TOR, fan_in=6)) == []
    (out,) = sw.send(1, grad(0, g0, chunk=50, agg=TOR, fan_in=6, flags=Flag.RETRANSMIT))
    assert out.pkt.msg_type == MsgType.PARTIAL and out.pkt.agg_id == 0
    assert out.pkt.flags == Flag.RETRANSMIT | Flag.INCOMPLETE
    assert (out.pkt.count, out.pkt.bitmap) == (1, 1)
    assert out.values.tolist() == g0.tolist()
    assert out.port == PS_PORT
    assert sw.counters("flushed", "asked") == {"flushed": 1, "asked": 0}


def test_collision_falls_back_to_tor_then_to_ps(make_target) -> None:
    sw = agg_switch(make_target())
    (other,) = colliding_chunks(JOB, 0, 11)
    assert slot_of(JOB, 0, other) == slot_of(JOB, 0, 11)
    assert sw.send(1, grad(0, vals(1), chunk=11)) == []      # chunk 11 holds the slot
    g = vals(77, -77)
    (out,) = sw.send(2, grad(1, g, chunk=other))
    assert out.pkt == InaPacket.grad(JOB, 0, other, TOR, 2, 1, g, Flag.FALLBACK)
    assert out.values.tolist() == g.tolist()
    assert out.port == sw.expected_port(TOR)
    assert sw.counters("collision", "aggregated") == {"collision": 1, "aggregated": 1}

    tor = tor_switch(make_target())
    assert tor.send(1, grad(0, vals(1), chunk=11, agg=TOR)) == []
    (out2,) = tor.send(20, out.frame)                       # the fallback reaches s_d
    assert out2.port == PS_PORT
    assert out2.pkt == InaPacket.grad(JOB, 0, other, 0, 2, 1, g, Flag.FALLBACK)
    assert out2.values.tolist() == g.tolist()
    assert tor.counters("collision")["collision"] == 1


def test_partial_overlap_goes_to_ps_unaggregated(target) -> None:
    sw = tor_switch(target)
    assert sw.send(1, grad(0, vals(1), agg=TOR)) == []
    part = InaPacket(MsgType.PARTIAL, 0, JOB, 0, 11, TOR, 3, 3, 0, 0b000111,  # has worker 0
                     vals(9))
    (out,) = sw.send(20, InaSwitch.frame(part))
    assert out.port == PS_PORT and out.pkt == replace(part, agg_id=0, flags=Flag.FALLBACK)
    assert out.values.tolist() == vals(9).tolist()


def test_result_releases_slot_and_is_multicast(target) -> None:
    sw = agg_switch(target)
    sw.send(1, grad(0, vals(1)))
    (partial,) = sw.send(2, grad(1, vals(2)))
    (other,) = colliding_chunks(JOB, 0, 11)
    (coll,) = sw.send(1, grad(0, vals(5), chunk=other))      # slot busy: collision
    assert coll.pkt.flags == Flag.FALLBACK
    res_vals = vals(3, 3, 3)
    result = InaPacket(MsgType.RESULT, 0, JOB, 0, 11, 0, 0, 2, 0, 0b11, res_vals)
    outs = sw.send(20, InaSwitch.frame(result))
    # group {1, 2, 3, 20} minus the ingress port 20, payload untouched
    assert sorted(o.port for o in outs) == [1, 2, 3]
    assert all(o.pkt == result and o.values.tolist() == res_vals.tolist() for o in outs)
    assert sw.counters("release")["release"] == 1
    slot = slot_of(JOB, 0, 11)
    state = [target.register(r, slot) for r in ("slot_count", "slot_bitmap", "slot_key",
                                                 "agg_v0", f"agg_v{C.K - 1}")]
    if state[0] is not None:                                # key, bitmap, count, values cleared
        assert state == [0, 0, 0, 0, 0]
    # The same seen through packets (BMv2's P4Runtime cannot read registers): the slot is
    # free, so a retransmitted GRAD of the released chunk neither re-emits the stored
    # PARTIAL nor joins (it would if key and count had survived) but bypasses to the PS.
    (late,) = sw.send(1, grad(0, vals(1), flags=Flag.RETRANSMIT))
    assert late.pkt == InaPacket.grad(JOB, 0, 11, 0, 2, 0, vals(1),
                                      Flag.RETRANSMIT | Flag.FALLBACK)
    assert late.values.tolist() == vals(1).tolist()
    assert sw.counters("bypassed", "reemitted") == {"bypassed": 1, "reemitted": 0}
    # released: the colliding key can claim the slot now and complete there
    assert sw.send(1, grad(0, vals(5), chunk=other)) == []
    (p2,) = sw.send(2, grad(1, vals(6), chunk=other))
    assert p2.pkt.msg_type == MsgType.PARTIAL and p2.values.tolist() == (vals(5) + vals(6)).tolist()
    # a RESULT for a key not held releases nothing but is still multicast
    outs = sw.send(20, InaSwitch.frame(replace(result, chunk_id=12345)))
    assert len(outs) == 3 and sw.counters("release")["release"] == 1


def test_result_only_from_ps_port_at_tor_and_rewritten_per_port(target) -> None:
    sw = tor_switch(target)
    target.insert_entry("MyEgress.result_rewrite", {"standard_metadata.egress_port": 1},
                        "MyEgress.set_result_dst",
                        {"dstAddr": 0x020000000011, "ip": 0x0A000101})
    result = InaSwitch.frame(InaPacket(MsgType.RESULT, 0, JOB, 0, 11, 0, 0, 6, 0, 63, vals(8)))
    assert sw.send(2, result) == []                          # a worker cannot inject RESULTs
    assert sw.counters("dropped_nonmember")["dropped_nonmember"] == 1
    outs = {o.port: o for o in sw.send(PS_PORT, result)}
    assert sorted(outs) == [1, 2, 20]
    pkt1 = Ether(outs[1].frame)
    assert (pkt1.dst, pkt1[IP].dst) == ("02:00:00:00:00:11", "10.0.1.1")
    chk = pkt1[IP].chksum
    del pkt1[IP].chksum
    assert Ether(bytes(pkt1))[IP].chksum == chk               # IPv4 checksum recomputed
    assert Ether(outs[2].frame)[IP].dst == "10.0.0.100"       # no rewrite entry: unchanged


def test_result_without_multicast_group_is_dropped(target) -> None:
    sw = InaSwitch(target, AGG).configure()
    sw.fabric(20)
    sw.job(JOB, [0, 1], is_ps_tor=False, tor_id=TOR, mcast_grp=0)
    result = InaSwitch.frame(InaPacket(MsgType.RESULT, 0, JOB, 0, 11, 0, 0, 2, 0, 3, vals()))
    assert target.process(20, result) == []
    assert sw.counters("dropped_noroute")["dropped_noroute"] == 1


def test_stale_round_slot_is_reclaimed(target) -> None:
    sw = agg_switch(target)
    assert sw.send(1, grad(0, vals(1), chunk=11, rnd=4)) == []   # round 4 never completed
    c = 11
    while slot_of(JOB, 5, c) != slot_of(JOB, 4, 11):
        c += 1
    assert sw.send(1, grad(0, vals(2), chunk=c, rnd=5)) == []
    (out,) = sw.send(2, grad(1, vals(3), chunk=c, rnd=5))
    assert out.values.tolist() == (vals(2) + vals(3)).tolist()
    assert sw.counters("evicted", "collision") == {"evicted": 1, "collision": 0}


# ====================================================================== forwarding


def test_ina_forwarded_by_agg_id_over_ecmp(target) -> None:
    sw = agg_switch(target)
    ports = []
    for chunk in range(60):
        frame = grad(0, vals(chunk), chunk=chunk, agg=OTHER)
        (out,) = sw.send(1, frame)
        assert out.port == sw.expected_port(OTHER)
        ports.append(out.port)
        # only the TTL (and so the IPv4 checksum) changed
        sent, got = Ether(frame), Ether(out.frame)
        assert got[IP].ttl == sent[IP].ttl - 1
        assert bytes(got[UDP]) == bytes(sent[UDP])
    # the members in turn (sorted ports), from member AGG mod size: an exactly even split,
    # whatever the chunk ids
    members = sorted(OTHER_PORTS)
    n = len(members)
    assert ports == [members[(i + AGG) % n] for i in range(60)]
    assert all(ports.count(p) == 60 // n for p in members)
    assert sw.counters("aggregated")["aggregated"] == 0
    # an agg_id without a route is dropped and counted
    assert sw.send(1, grad(0, vals(), agg=4242)) == []
    assert sw.counters("dropped_noroute")["dropped_noroute"] == 1


def test_disabled_aggregation_forwards_to_ps(target) -> None:
    sw = agg_switch(target)
    sw.configure(agg_enabled=False)
    (out,) = sw.send(1, grad(0, vals(4)))
    assert out.pkt == InaPacket.grad(JOB, 0, 11, 0, 2, 0, vals(4), Flag.FALLBACK)
    assert sw.counters("aggregated", "bypassed") == {"aggregated": 0, "bypassed": 1}


def test_plain_ipv4_uses_lpm(target) -> None:
    agg_switch(target)
    for prefix, plen, mac, port in [(0x0A000000, 8, 0x0A0A0A0A0A0A, 5),
                                    (0x0A000200, 24, 0x0B0B0B0B0B0B, 6)]:
        target.insert_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (prefix, plen)},
                            "MyIngress.ipv4_forward", {"dstAddr": mac, "port": port})
    pkt = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:fe") / IP(
        src="10.0.1.1", dst="10.0.2.7", ttl=9) / UDP(sport=5, dport=53) / Raw(b"q" * 20)
    outs = target.process(1, bytes(pkt))
    assert [p for p, _ in outs] == [6]                      # the /24 wins over the /8
    got = Ether(outs[0][1])
    assert (got.src, got.dst, got[IP].ttl) == ("02:00:00:00:00:fe", "0b:0b:0b:0b:0b:0b", 8)
    assert bytes(got[UDP]) == bytes(pkt[UDP])
    pkt[IP].dst = "10.9.9.9"
    assert [p for p, _ in target.process(1, bytes(pkt))] == [5]
    pkt[IP].dst = "192.168.0.1"
    assert target.process(1, bytes(pkt)) == []              # no route


# ====================================================================== bad input


def test_malformed_ina_dropped_and_counted(target) -> None:
    sw = agg_switch(target)
    good = grad(0, vals(1), fan_in=1)
    bad = [
        good[:-1],                                           # one value byte short
        good[: 42 + C.INA_HDR_BYTES + 5],                    # header + 1 value
        good[: 42 + 10],                                     # inside the INA header
        good[:-4] + b"",                                     # a whole value missing
        good[:42] + bytes([9]) + good[43:],                  # unknown msg_type
        good[:42] + bytes([0]) + good[43:],                  # msg_type 0
    ]
    # GRAD whose bitmap is not 1 << worker_id, and GRAD with count 2
    bad.append(InaSwitch.frame(replace(InaPacket.grad(JOB, 0, 11, AGG, 1, 0, vals()), bitmap=3)))
    bad.append(InaSwitch.frame(replace(InaPacket.grad(JOB, 0, 11, AGG, 1, 0, vals()), count=2)))
    # UDP length field disagreeing with the INA size (frame itself complete)
    p = Ether(good)
    p[UDP].len = C.INA_UDP_LEN - 4
    bad.append(bytes(p))
    # bad IPv4 header checksum
    p = Ether(good)
    p[IP].chksum ^= 0x1111
    bad.append(bytes(p))
    for frame in bad:
        assert target.process(1, frame) == [], frame.hex()
    assert sw.counters("dropped_malformed", "aggregated", "completed") == {
        "dropped_malformed": len(bad), "aggregated": 0, "completed": 0}
    # the switch still works afterwards, and nothing was half-added to the slot
    (out,) = sw.send(1, good)
    assert out.values.tolist() == vals(1).tolist()


def test_nonmember_contributions_dropped_and_counted(target) -> None:
    sw = agg_switch(target, workers=(0, 1, 2, 3), job_workers=tuple(range(6)))
    cases = [
        (2, grad(0, vals(1))),             # worker 0 on worker 1's port
        (9, grad(8, vals(1))),             # worker 8: no registration on any port
        (1, grad(0, vals(1), job=99)),     # unknown job
        (1, InaSwitch.frame(InaPacket(MsgType.PARTIAL, 0, JOB, 0, 11, AGG, 2, 2, 0, 3,
                                      vals(1)))),  # PARTIAL from a host port
        (20, grad(7, vals(1))),            # from the fabric, but worker 7 is not in the job
    ]
    for port, frame in cases:
        assert target.process(port, frame) == []
    assert sw.counters("dropped_nonmember", "aggregated") == {
        "dropped_nonmember": len(cases), "aggregated": 0}


# ====================================================================== randomized


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_order_and_duplicates_give_exact_sums(target, seed) -> None:
    rng = np.random.default_rng(seed)
    sw = agg_switch(target)
    n_chunks = 24
    fan = {c: int(rng.integers(1, 9)) for c in range(n_chunks)}    # workers 0..fan-1
    values = {c: rng.integers(-(2**27), 2**27, size=(fan[c], C.K)) for c in range(n_chunks)}
    sends = []
    for c in range(n_chunks):
        for w in range(fan[c]):
            sends.append((c, w, 0))
            for _ in range(int(rng.integers(0, 3))):               # random duplicates
                sends.append((c, w, int(rng.choice([0, Flag.RETRANSMIT]))))
    order = rng.permutation(len(sends))
    partials: dict[int, list] = {}
    fallbacks: dict[int, set[int]] = {}
    for i in order:
        c, w, flags = sends[i]
        frame = grad(w, values[c][w], chunk=c, fan_in=fan[c], flags=flags)
        for out in sw.send(w + 1, frame):
            if out.pkt.msg_type == MsgType.PARTIAL:
                # every emitted partial is the exact sum of the workers in its bitmap
                members = [b for b in range(fan[c]) if out.pkt.bitmap >> b & 1]
                assert out.pkt.count == len(members)
                assert out.values.tolist() == values[c][members].sum(axis=0).tolist()
                if not out.pkt.flags & Flag.INCOMPLETE:
                    assert out.pkt.bitmap == (1 << fan[c]) - 1 and out.pkt.agg_id == TOR
                    partials.setdefault(c, []).append(out)
            else:                                                  # GRAD sent on unaggregated
                assert out.pkt.flags & Flag.FALLBACK
                assert out.values.tolist() == values[c][w].tolist()
                fallbacks.setdefault(c, set()).add(w)
    for c in range(n_chunks):
        # every chunk completes exactly once (re-emits repeat it identically), or, when
        # its slot was taken by another chunk, reaches the next point as raw GRADs
        if c in partials:
            firsts = [p for p in partials[c] if not p.pkt.flags & Flag.RETRANSMIT]
            assert len(firsts) == 1
            assert all(p.values.tolist() == firsts[0].values.tolist() for p in partials[c])
        else:
            assert fallbacks.get(c) == set(range(fan[c])), f"chunk {c} lost contributions"
    assert sw.counters("completed")["completed"] == len(partials)


def test_counter_names_exist(target) -> None:
    sw = agg_switch(target)
    assert all(v == 0 for v in sw.counters(*COUNTERS).values())


def test_frame_template_and_switch_agree_on_addresses(target) -> None:
    """GRADs are addressed to the PS: the PARTIAL keeps the PS as IP destination."""
    sw = agg_switch(target)
    sw.send(1, grad(0, vals(1)))
    (out,) = sw.send(2, grad(1, vals(1)))
    pkt = Ether(out.frame)
    assert pkt[IP].dst == "10.0.0.100" and pkt[UDP].dport == C.INA_UDP_PORT
    assert pkt[UDP].chksum == 0


# ====================================================================== two-level, lossy


def _disjoint_cover(sets: list[tuple[int, np.ndarray]], full: int) -> np.ndarray | None:
    """Sum of a sub-family of pairwise disjoint bitmaps whose union is `full` (or None)."""

    def search(covered: int, start_bit: int) -> np.ndarray | None:
        if covered == full:
            return np.zeros(C.K, dtype=np.int64)
        bit = next(b for b in range(start_bit, 64) if full >> b & 1 and not covered >> b & 1)
        for bm, v in sets:
            if bm >> bit & 1 and not bm & covered and not bm & ~full:
                rest = search(covered | bm, bit + 1)
                if rest is not None:
                    return rest + v
        return None

    return search(0, 0)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_two_switches_lossy_reordering_network_exact_results(make_target, seed) -> None:
    """Workers 0-3 aggregate at AGG (fan-in 4), workers 4-5 send to s_d = TOR; a PS merges.

    Every delivery may be lost (10%) or duplicated (10%) and deliveries are reordered.
    Workers retransmit on "timeout" (the network went quiet) with RETRANSMIT and, after
    two tries, send straight to the PS (agg_id 0). Every chunk must end with every worker
    holding a RESULT equal to the exact sum (the correctness bar of docs/design.md §3.9)."""
    rng = np.random.default_rng(seed)
    workers, full = range(6), 0b111111
    agg = InaSwitch(make_target(), AGG).configure()
    agg.fabric(20)
    agg.job(JOB, list(workers), is_ps_tor=False, tor_id=TOR, mcast_grp=MCAST,
            member_ports=False)
    for w in range(4):
        agg.member(JOB, w, w + 1)
    agg.route(TOR, [20])
    agg.route(0, [20])
    agg.target.set_multicast_group(MCAST, [1, 2, 3, 4])
    tor = InaSwitch(make_target(), TOR).configure()
    tor.fabric(20)
    tor.job(JOB, list(workers), is_ps_tor=True, tor_id=TOR, ps_port=PS_PORT,
            mcast_grp=MCAST, member_ports=False)
    for w in (4, 5):
        tor.member(JOB, w, w + 1)
    tor.route(0, [PS_PORT])
    tor.target.set_multicast_group(MCAST, [5, 6, 20, PS_PORT])

    chunks = [int(c) for c in rng.choice(5000, size=16, replace=False)]
    chunks += colliding_chunks(JOB, 0, chunks[0], 3)          # force collisions
    grads = {c: rng.integers(-(2**28), 2**28, size=(6, C.K)) for c in chunks}
    exact = {c: grads[c].sum(axis=0) for c in chunks}

    got: dict[tuple[int, int], list[int]] = {}                # (chunk, worker) -> RESULT
    ps_sets: dict[int, list] = {c: [] for c in chunks}
    ps_done: dict[int, np.ndarray] = {}
    queue: list[tuple[str, int, bytes]] = []                  # (where, port, frame)

    def send_grad(c: int, w: int, tries: int) -> None:
        flags = Flag.RETRANSMIT if tries else 0
        if tries >= 3:
            agg_id, flags = 0, Flag.RETRANSMIT | Flag.FALLBACK  # straight to the PS
        else:
            agg_id = AGG if w < 4 else TOR
        frame = InaSwitch.frame(InaPacket.grad(JOB, 0, c, agg_id, 4, w, grads[c][w], flags))
        queue.append(("agg" if w < 4 else "tor", w + 1, frame))

    def ps_receive(frame: bytes) -> None:
        pkt = decode_frame(frame)
        c = pkt.chunk_id
        if c not in ps_done:
            ps_sets[c].append((pkt.bitmap, pkt.values.astype(np.int64)))
            total = _disjoint_cover(ps_sets[c], full)
            if total is None:
                return
            ps_done[c] = total
        res = InaPacket(MsgType.RESULT, 0, JOB, 0, c, 0, 0, 6, 0, full, ps_done[c])
        queue.append(("tor", PS_PORT, InaSwitch.frame(res)))

    for c in chunks:
        for w in workers:
            send_grad(c, w, 0)
    tries = 0
    while True:
        while queue:
            where, port, frame = queue.pop(int(rng.integers(len(queue))))
            if rng.random() < 0.1:
                continue                                      # lost
            if rng.random() < 0.1:
                queue.append((where, port, frame))            # duplicated
            sw = agg if where == "agg" else tor
            for out_port, data in sw.target.process(port, frame):
                pkt = decode_frame(data)
                if where == "agg" and out_port == 20:
                    queue.append(("tor", 20, data))
                elif where == "tor" and out_port == 20:
                    queue.append(("agg", 20, data))
                elif where == "tor" and out_port == PS_PORT:
                    ps_receive(data)
                else:                                         # a RESULT copy to a worker
                    assert pkt.msg_type == MsgType.RESULT
                    got[(pkt.chunk_id, out_port - 1)] = pkt.values.tolist()
        missing = [(c, w) for c in chunks for w in workers if (c, w) not in got]
        if not missing:
            break
        tries += 1
        assert tries < 12, f"no progress: {len(missing)} RESULTs missing"
        for c, w in missing:                                  # timeout: retransmit
            send_grad(c, w, tries)
    for (c, _w), v in got.items():
        assert v == exact[c].tolist()
    assert agg.counters("dropped_malformed", "dropped_nonmember") == {
        "dropped_malformed": 0, "dropped_nonmember": 0}
