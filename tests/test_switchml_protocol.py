"""The SwitchML host protocol (workers/switchml): the codec, the job, the pure worker state
machine, and the whole protocol in process -- N workers and a pyswitch running
p4src/switchml.p4 (both execution paths), frames passed in a loop that loses 10 % of them,
duplicates some, reorders whatever is in flight and delivers a few very late -- every sum
exact, in every round, at every worker.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from pyswitch import Switch, compile_p4
from pyswitch.native import unavailable
from workers.switchml.constants import CELLS, K
from workers.switchml.job import JobConfig, JobError
from workers.switchml.rules import Host, install, job_rules
from workers.switchml.wire import (
    FRAME_BYTES,
    Flag,
    MsgType,
    SmDecodeError,
    SmPacket,
    decode_frame,
    decode_payload,
    encode_frame,
    encode_payload,
)
from workers.switchml.worker import SwitchMLWorker

SWITCHML_P4 = Path(__file__).resolve().parents[1] / "p4src" / "switchml.p4"
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.0.0.254"


def host(w: int) -> Host:
    return Host(port=w + 1, mac=f"02:00:00:00:01:{w:02x}", ip=f"10.0.1.{w + 1}")


def exact_sum(vectors: list[np.ndarray]) -> np.ndarray:
    total = np.sum([v.astype(np.int64) for v in vectors], axis=0)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


# ====================================================================== codec and job


def test_frame_round_trip_and_refusals() -> None:
    pkt = SmPacket.update(5, 3, 2, 1, 7, 11, np.arange(K, dtype=np.int32) - 9,
                          retransmit=True)
    frame = encode_frame(pkt, "02:00:00:00:00:01", SWITCH_MAC, "10.0.0.1", SWITCH_IP)
    assert len(frame) == FRAME_BYTES
    back = decode_frame(frame)
    assert back == pkt and back.flags == Flag.RETRANSMIT and back.key == (7, 11)
    payload = encode_payload(pkt)
    with pytest.raises(SmDecodeError, match="bytes, expected"):
        decode_payload(payload[:-1])
    with pytest.raises(SmDecodeError, match="unknown SwitchML msg_type 9"):
        decode_payload(b"\x09" + payload[1:])
    assert decode_frame(frame[:12] + b"\x86\xdd" + frame[14:]) is None  # not IPv4
    with pytest.raises(ValueError, match="ver must be 0 or 1"):
        SmPacket.update(5, 3, 2, 2, 7, 11, np.zeros(K, np.int32))
    with pytest.raises(ValueError, match="exactly K"):
        encode_payload(SmPacket.update(5, 3, 2, 0, 7, 11, np.zeros(K + 1, np.int32)))


@pytest.mark.parametrize("data, message", [
    ({"job_id": 1, "workers": [], "pool_size": 4}, "at least one worker"),
    ({"job_id": 1, "workers": [0, 0], "pool_size": 4}, "repeat"),
    ({"job_id": 1, "workers": [64], "pool_size": 4}, "outside 0..63"),
    ({"job_id": 1, "workers": [0], "pool_size": 0}, "pool_size 0"),
    ({"job_id": 1, "workers": [0], "pool_size": 4, "pool_base": CELLS - 7}, "do not fit"),
    ({"job_id": 1, "workers": [0], "pool_size": 4, "timeout": 0}, "timeout"),
    ({"job_id": 1, "workers": [0]}, "'pool_size' missing"),
    ({"job_id": 1, "workers": [0], "pool_size": 4, "window": 3}, "unknown job keys"),
    ({"job_id": "x", "workers": [0], "pool_size": 4}, "bad job value"),
])
def test_a_bad_job_is_one_clear_error(data, message) -> None:
    with pytest.raises(JobError, match=message):
        JobConfig.from_dict(data)


def test_job_round_trips_through_its_dict() -> None:
    job = JobConfig(3, (0, 4, 9), pool_size=8, pool_base=16, timeout=0.5)
    assert JobConfig.from_dict(job.to_dict()) == job and job.num_workers == 3


# ====================================================================== the worker alone


def result_for(pkt: SmPacket, values: np.ndarray, count: int, flags: int = 0) -> SmPacket:
    return SmPacket(MsgType.RESULT, flags, pkt.job_id, pkt.worker_id, pkt.pool_index,
                    pkt.ver, count, pkt.round, pkt.chunk, values)


def test_worker_keeps_a_window_of_pool_slots_and_flips_each_slots_version() -> None:
    job = JobConfig(1, (0, 1), pool_size=3, timeout=1.0)
    w = SwitchMLWorker(job, 1)
    vec = np.arange(7 * K - 3, dtype=np.int32)
    first = w.start(1, vec, now=0.0)
    assert [(p.pool_index, p.ver, p.chunk) for p in first] == [(0, 0, 0), (1, 0, 1), (2, 0, 2)]
    assert all(p.worker_id == 1 and p.flags == 0 for p in first)
    # slot 1's RESULT comes first: slot 1 takes its own next chunk, 1 + S = 4 (whatever
    # order the RESULTs come in, every worker puts the same chunk in the same slot), on its
    # other copy
    nxt = w.receive(result_for(first[1], first[1].values * 2, 2), now=0.1)
    assert [(p.pool_index, p.ver, p.chunk) for p in nxt] == [(1, 1, 4)]
    # the same RESULT again (the multicast copy after a shadow reply): ignored
    assert w.receive(result_for(first[1], first[1].values * 2, 2), now=0.1) == []
    # a RESULT of the wrong copy, of too few workers, of another round: ignored
    wrong_ver = result_for(nxt[0], nxt[0].values, 2)
    object.__setattr__(wrong_ver, "ver", 0)
    assert w.receive(wrong_ver, now=0.1) == []
    assert w.receive(result_for(first[0], first[0].values, 1), now=0.1) == []
    other_round = result_for(first[2], first[2].values, 2)
    object.__setattr__(other_round, "round", 0)
    assert w.receive(other_round, now=0.1) == []
    assert w.stats.ignored == 4 and w.stats.results == 1
    # timeouts: slots 0 and 2 (deadline 1.0) go again, slot 1 (deadline 1.1) not yet
    again = w.poll(now=1.0)
    assert [(p.pool_index, p.chunk, p.flags) for p in again] == \
        [(0, 0, Flag.RETRANSMIT), (2, 2, Flag.RETRANSMIT)]
    assert w.next_deadline() == pytest.approx(1.1)
    with pytest.raises(RuntimeError, match="not finished"):
        w.start(2, vec, now=1.0)


def test_worker_finishes_a_round_and_the_versions_carry_over() -> None:
    job = JobConfig(1, (0,), pool_size=2, timeout=1.0)
    w = SwitchMLWorker(job, 0)
    vec = np.arange(3 * K, dtype=np.int32) - 50
    out = w.start(1, vec, now=0.0)
    seen = []
    while out:
        pkt = out.pop(0)
        seen.append((pkt.pool_index, pkt.ver, pkt.chunk))
        out += w.receive(result_for(pkt, pkt.values, 1, Flag.SHADOW), now=0.0)
    assert seen == [(0, 0, 0), (1, 0, 1), (0, 1, 2)]
    assert w.done and np.array_equal(w.result(), vec) and w.stats.shadow_results == 3
    with pytest.raises(ValueError, match="rounds must grow"):
        w.start(1, vec, now=0.0)
    nxt = w.start(2, vec[:K], now=0.0)  # slot 0 was used twice (back on 0), slot 1 once
    assert [(p.pool_index, p.ver) for p in nxt] == [(0, 0)]
    assert w.poll(now=0.5) == [] and w.next_deadline() == 1.0


# ====================================================================== the whole protocol


@dataclass
class Faults:
    """What the loop between the hosts and the switch does to frames (seeded)."""

    loss: float = 0.10
    duplicate: float = 0.05
    late: float = 0.03        # a copy arrives only after 1-3 timeouts
    counts: dict[str, int] = field(default_factory=lambda: dict(lost=0, duplicated=0,
                                                                late=0, delivered=0))


@pytest.fixture(scope="module")
def program():
    return compile_p4(SWITCHML_P4)


@pytest.fixture(params=[False, True], ids=["python", "native"])
def native(request) -> bool:
    if request.param and unavailable() is not None:
        pytest.skip(f"native path: {unavailable()}")
    return request.param


def run_protocol(program, native: bool, job: JobConfig, rounds: int, length: int,
                 faults: Faults, seed: int):
    """Every worker all-reduces `rounds` vectors of `length` int32 through the switch; each
    starts its next round as soon as its own round is done. Returns (sums per worker per
    round, the vectors, the switch, the workers)."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    sw = Switch(program, native=native)
    install(job_rules(job, {w: host(w) for w in job.workers}, group=1), sw)
    workers = {w: SwitchMLWorker(job, w) for w in job.workers}
    vectors = {(r, w): nprng.integers(-(2**26), 2**26, length).astype(np.int32)
               for r in range(1, rounds + 1) for w in job.workers}
    sums: dict[tuple[int, int], np.ndarray] = {}
    round_of = dict.fromkeys(job.workers, 1)
    inflight: list[tuple[float, str, int, bytes]] = []  # (arrival, "sw"/"w", port/id, frame)
    now = 0.0

    def emit(kind: str, where: int, frame: bytes) -> None:
        if rng.random() < faults.loss:
            faults.counts["lost"] += 1
            return
        copies = 1
        if rng.random() < faults.duplicate:
            faults.counts["duplicated"] += 1
            copies = 2
        for _ in range(copies):
            delay = rng.uniform(0, job.timeout / 5)
            if rng.random() < faults.late:
                faults.counts["late"] += 1
                delay += rng.uniform(1, 3) * job.timeout
            inflight.append((now + delay, kind, where, frame))

    def to_switch(w: int, pkts: list[SmPacket]) -> None:
        h = host(w)
        for p in pkts:
            emit("sw", h.port, encode_frame(p, h.mac, SWITCH_MAC, h.ip, SWITCH_IP))

    for w, worker in workers.items():
        to_switch(w, worker.start(1, vectors[1, w], now))
    steps = 0
    while len(sums) < rounds * len(workers) or inflight:
        steps += 1
        assert steps < 200_000, "the protocol does not finish"
        ready = [i for i, f in enumerate(inflight) if f[0] <= now]
        if not ready:
            times = [f[0] for f in inflight]
            times += [d for wk in workers.values() if (d := wk.next_deadline()) is not None]
            now = max(now, min(times))
            for w, worker in workers.items():
                to_switch(w, worker.poll(now))
            continue
        _, kind, where, frame = inflight.pop(rng.choice(ready))  # any order: reordering
        faults.counts["delivered"] += 1
        if kind == "sw":
            for port, data in sw.process(where, frame):
                emit("w", port - 1, data)
            continue
        worker = workers[where]
        pkt = decode_frame(frame)
        assert pkt is not None and frame[30:34] == bytes(
            int(x) for x in host(where).ip.split(".")), "a RESULT addressed to someone else"
        to_switch(where, worker.receive(pkt, now))
        r = round_of[where]
        if worker.done and (r, where) not in sums:
            sums[r, where] = worker.result()
            if r < rounds:
                round_of[where] = r + 1
                to_switch(where, worker.start(r + 1, vectors[r + 1, where], now))
    return sums, vectors, sw, workers


def counter(sw: Switch, name: str) -> int:
    return sw.counter_read(f"MyIngress.{name}", 0)[0]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_sum_is_exact_under_loss_duplication_reordering_and_late_copies(
        program, native, seed) -> None:
    job = JobConfig(9, (0, 2, 3, 5, 6), pool_size=4, pool_base=8, timeout=0.01)
    faults = Faults()
    rounds, length = 4, 20 * K - 5
    sums, vectors, sw, workers = run_protocol(program, native, job, rounds, length, faults,
                                              seed)
    for r in range(1, rounds + 1):
        want = exact_sum([vectors[r, w] for w in job.workers])
        for w in job.workers:
            assert np.array_equal(sums[r, w], want), f"round {r}, worker {w}"
    # the faults happened, and the switch's recovery paths ran
    assert faults.counts["lost"] > 0.05 * faults.counts["delivered"]
    assert faults.counts["duplicated"] > 0 and faults.counts["late"] > 0
    assert sum(wk.stats.retransmitted for wk in workers.values()) > 0
    assert sum(wk.stats.shadow_results for wk in workers.values()) > 0
    assert counter(sw, "shadow_reply") > 0 and counter(sw, "dropped_duplicate") > 0
    assert counter(sw, "dropped_stale") > 0
    chunks = rounds * -(-length // K)
    assert counter(sw, "completed") == chunks  # each chunk completed exactly once
    for name in ("dropped_busy", "dropped_malformed", "dropped_nonmember", "dropped_no_slot"):
        assert counter(sw, name) == 0, name


def test_without_faults_each_chunk_costs_n_updates_in_and_n_results_out(program, native):
    job = JobConfig(2, (0, 1, 2, 3), pool_size=3, timeout=0.01)
    faults = Faults(loss=0, duplicate=0, late=0)
    sums, vectors, sw, workers = run_protocol(program, native, job, 2, 7 * K, faults, 3)
    assert sorted(sums) == [(r, w) for r in (1, 2) for w in job.workers]
    for (r, _w), got in sums.items():
        assert np.array_equal(got, exact_sum([vectors[r, x] for x in job.workers]))
    assert sum(wk.stats.retransmitted for wk in workers.values()) == 0
    chunks = 2 * 7
    assert faults.counts["delivered"] == chunks * 4 * 2  # 4 UPDATEs in, 4 RESULTs out
    assert counter(sw, "completed") == chunks and counter(sw, "aggregated") == chunks * 4


def test_both_paths_run_the_faulty_protocol_identically(program) -> None:
    """The same seed on the Python and the native path: the same sums and the same counts
    of every switch counter (the frames and their order are the same)."""
    if unavailable() is not None:
        pytest.skip(f"native path: {unavailable()}")
    job = JobConfig(4, (1, 2, 3), pool_size=2, timeout=0.01)
    runs = [run_protocol(program, native, job, 2, 9 * K, Faults(), 11) for native in (False, True)]
    (sums_py, _, sw_py, _), (sums_nat, _, sw_nat, _) = runs
    assert sums_py.keys() == sums_nat.keys()
    assert all(np.array_equal(sums_py[k], sums_nat[k]) for k in sums_py)
    names = [c.preamble.name for c in program.p4info.counters]
    assert [sw_py.counter_read(n, 0) for n in names] == [sw_nat.counter_read(n, 0)
                                                         for n in names]
    assert sw_py.counter_read("MyIngress.shadow_reply", 0)[0] > 0
