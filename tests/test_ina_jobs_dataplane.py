"""Several jobs on one ina.p4 switch (docs/design.md §3.10), pyswitch in-process.

Each job has its own PS (agg_id 0 is routed by job id: ps_route), its own slot range from
job_table (``shared``: the whole pool; ``partitioned``: the controller's part), and no job
ever changes another job's sums: a slot held by another job is a collision that falls back,
and a RESULT releases only a slot holding its own key.  The slot ranges the controller
computes (:func:`controller.dataplane.deploy.slot_ranges`) are checked against hand-computed ones.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from ina_harness import InaSwitch, PySwitchTarget, compiled_pyswitch_program, pyswitch_unavailable

from controller.dataplane.deploy import SwitchJob, slot_ranges
from controller.plan.types import JobPlan, Plan
from workers.ina import constants as C
from workers.ina.wire import Flag, InaPacket, MsgType

AGG, TOR = 5, 9
UPLINKS = [20, 21]
PS_A, PS_B = [30], [31]  # the two jobs' PSs sit behind different ports
JA, JB = 1, 5


def crc_slot(job: int, rnd: int, chunk: int, base: int, size: int) -> int:
    """The slot of a key in range [base, base + size) (independent of workers.ina.wire)."""
    return base + zlib.crc32(struct.pack("!HII", job, rnd, chunk)) % size


def two_jobs(ranges: dict[int, tuple[int, int]], is_ps_tor: bool = False) -> InaSwitch:
    """A switch with job JA (workers 0, 1 on ports 1, 2) and JB (workers 0, 1 on ports 3,
    4), each with its own PS route and slot range."""
    why = pyswitch_unavailable()
    if why:
        pytest.skip(why)
    sw = InaSwitch(PySwitchTarget(compiled_pyswitch_program()), AGG).configure()
    sw.fabric(*UPLINKS, *PS_A, *PS_B)
    sw.route(TOR, UPLINKS)
    for job, ports, ps in ((JA, (1, 2), PS_A), (JB, (3, 4), PS_B)):
        base, size = ranges[job]
        sw.job(job, [0, 1], is_ps_tor=is_ps_tor, tor_id=TOR, mcast_grp=job,
               member_ports=False, slot_base=base, slot_size=size)
        for w, port in enumerate(ports):
            sw.member(job, w, port)
        sw.ps_route(job, ps)
    return sw


def send(sw: InaSwitch, job: int, worker: int, chunk: int, values, rnd: int = 0,
         agg: int = AGG) -> list:
    port = worker + (1 if job == JA else 3)
    pkt = InaPacket.grad(job, rnd, chunk, agg, 2, worker, values)
    return sw.send(port, InaSwitch.frame(pkt, src_ip=f"10.0.{job}.{worker + 1}"))


def test_agg_id_0_goes_to_each_jobs_own_ps() -> None:
    sw = two_jobs({JA: (0, C.num_slots()), JB: (0, C.num_slots())})
    v = np.arange(C.K)
    (a,) = send(sw, JA, 0, 7, v, agg=0)
    (b,) = send(sw, JB, 0, 7, v, agg=0)
    assert (a.port, b.port) == (PS_A[0], PS_B[0])
    # a job with no PS route here: counted and dropped, never sent to another job's PS
    sw.job(99, [0], is_ps_tor=False, tor_id=TOR, member_ports=False)
    sw.member(99, 0, 6)
    before = sw.target.counter("dropped_noroute")
    pkt = InaPacket.grad(99, 0, 7, 0, 1, 0, v)
    assert sw.send(6, InaSwitch.frame(pkt)) == []
    assert sw.target.counter("dropped_noroute") == before + 1


def test_retired_switch_id_is_routed_to_the_packets_own_ps() -> None:
    sw = two_jobs({JA: (0, C.num_slots()), JB: (0, C.num_slots())})
    sw.retire(77)
    v = np.arange(C.K)
    (a,) = send(sw, JA, 1, 3, v, agg=77)
    (b,) = send(sw, JB, 1, 3, v, agg=77)
    assert (a.port, b.port) == (PS_A[0], PS_B[0])


def test_shared_pool_cross_job_collisions_fall_back_and_every_sum_is_exact() -> None:
    """Both jobs hash into the same 3 slots: a slot held by the other job is a collision
    (FALLBACK toward s_d), never a join; per job and chunk, what leaves adds up exactly."""
    pool = (0, 3)
    sw = two_jobs({JA: pool, JB: pool})
    rng = np.random.default_rng(11)
    chunks = range(40, 52)
    vals = {(j, w, c): rng.integers(-(2**30), 2**30, size=C.K)
            for j in (JA, JB) for w in (0, 1) for c in chunks}
    out: dict[tuple[int, int], list] = {(j, c): [] for j in (JA, JB) for c in chunks}
    owner: dict[int, tuple[int, int]] = {}
    for w in (0, 1):
        for c in chunks:  # the jobs interleave: A's chunk, then B's
            for j in (JA, JB):
                if w == 0:
                    owner.setdefault(crc_slot(j, 0, c, *pool), (j, c))
                out[(j, c)] += send(sw, j, w, c, vals[(j, w, c)])
    cross = 0
    for (j, c), got in out.items():
        exact = vals[(j, 0, c)] + vals[(j, 1, c)]
        assert sum(o.pkt.bitmap for o in got) == 0b11, (j, c)
        assert all(o.pkt.job_id == j for o in got)
        total = np.sum([o.values.astype(np.int64) for o in got], axis=0)
        assert total.tolist() == exact.tolist(), (j, c)
        holder = owner[crc_slot(j, 0, c, *pool)]
        if holder != (j, c):
            assert all(o.pkt.flags & Flag.FALLBACK for o in got)
            cross += holder[0] != j
    assert cross > 0  # the test really made jobs collide with each other
    assert sw.counters("collision")["collision"] == 2 * sum(
        owner[crc_slot(j, 0, c, *pool)] != (j, c) for j in (JA, JB) for c in chunks)


def test_partitioned_ranges_keep_each_jobs_slots_apart() -> None:
    """JA owns slots [0, 2), JB [2, 5): every key lands in its own job's range, so the jobs
    never collide with each other (only within a range)."""
    sw = two_jobs({JA: (0, 2), JB: (2, 3)})
    v = np.ones(C.K, dtype=np.int64)
    for c in range(8):
        send(sw, JA, 0, c, v)
        send(sw, JB, 0, c, v)
    keys = [sw.target.register("slot_key", i) for i in range(5)]
    job_of = [k >> 64 for k in keys]
    assert job_of[:2] == [JA, JA] and job_of[2:] == [JB, JB, JB]
    for i, k in enumerate(keys):
        j, c = k >> 64, k & 0xFFFFFFFF
        assert crc_slot(j, 0, c, *((0, 2) if j == JA else (2, 3))) == i


def test_a_job_without_slots_here_goes_to_its_ps_unaggregated() -> None:
    sw = two_jobs({JA: (0, 4), JB: (0, 0)})
    v = np.arange(C.K)
    (out,) = send(sw, JB, 0, 9, v)
    assert out.pkt.agg_id == 0 and out.pkt.flags & Flag.FALLBACK and out.port == PS_B[0]
    assert send(sw, JA, 0, 9, v) == []  # JA still aggregates
    # a range outside the pool counts as none (the program never indexes past its registers)
    sw2 = two_jobs({JA: (C.num_slots() - 1, 2), JB: (0, 1)})
    (out2,) = send(sw2, JA, 0, 9, v)
    assert out2.pkt.flags & Flag.FALLBACK and out2.port == PS_A[0]


def test_a_result_releases_only_its_own_jobs_slot() -> None:
    pool = (0, 1)  # one slot: both jobs' keys land in it
    sw = two_jobs({JA: pool, JB: pool})
    v = np.arange(C.K)
    assert send(sw, JA, 0, 4, v) == []  # JA's chunk 4 holds the slot
    # JB's RESULT of the same round and chunk: another key, nothing released
    res = InaPacket(MsgType.RESULT, 0, JB, 0, 4, 0, 0, 2, 0, 0b11, v)
    sw.send(UPLINKS[0], InaSwitch.frame(res))
    assert sw.counters("release")["release"] == 0
    assert sw.target.register("slot_key", 0) >> 64 == JA
    (part,) = send(sw, JA, 1, 4, 2 * v)
    assert part.pkt.msg_type == MsgType.PARTIAL and part.values.tolist() == (3 * v).tolist()


# ---------------------------------------------------------------- slot_ranges (pure)


def _plan(deployed: list[str], tor: str, gamma: float) -> Plan:
    """A one-job plan with what slot_ranges reads: the deployment, the PS ToR and γ."""
    job = JobPlan(ps="h0", ps_tor=tor, ps_tor_id=1, workers=[], worker_ids={}, gamma=gamma,
                  deployed=list(deployed), intervals={}, fractions={})
    return Plan(topology={}, switch_ids={}, jobs={"job": job}, deployed=list(deployed))


def test_shared_policy_gives_every_job_the_whole_pool() -> None:
    jobs = [SwitchJob(1, ("h1",), plan=_plan(["s1"], "s0", 1.0)),
            SwitchJob(5, ("h2",), plan=_plan([], "s2", 1.0))]
    assert slot_ranges(jobs, {}, ["s0", "s1", "s2"], "shared", 16) == {
        s: {1: (0, 16), 5: (0, 16)} for s in ("s0", "s1", "s2")}


def test_partitioned_policy_splits_by_planned_gamma_per_switch() -> None:
    """At s1 tenants a (γ 0.3) and b (γ 0.1) aggregate: 1 slot each, then the 8 left by
    γ share 6 : 2 -> 7 and 3.  At s0 only a (its PS ToR): all 10.  At s2 only b.  The modes
    of tenant a (job ids 1 and 3) share a's range; a job without slots at a switch gets
    (0, 0)."""
    a = _plan(["s1"], "s0", 0.3)
    b = _plan(["s1"], "s2", 0.1)
    jobs = [SwitchJob(1, ("h1",), plan=a, tenant="a"), SwitchJob(3, ("h1",), plan=a, tenant="a"),
            SwitchJob(5, ("h2",), plan=b, tenant="b")]
    got = slot_ranges(jobs, {}, ["s0", "s1", "s2", "s3"], "partitioned", 10)
    assert got["s1"] == {1: (0, 7), 3: (0, 7), 5: (7, 3)}
    assert got["s0"] == {1: (0, 10), 3: (0, 10), 5: (0, 0)}
    assert got["s2"] == {1: (0, 0), 3: (0, 0), 5: (0, 10)}
    assert got["s3"] == {1: (0, 0), 3: (0, 0), 5: (0, 0)}


def test_partitioned_policy_without_gamma_splits_equally_and_needs_a_slot_each() -> None:
    jobs = [SwitchJob(i, ("h",), plan=_plan(["s1"], "s1", 0.0)) for i in (1, 2, 3)]
    assert slot_ranges(jobs, {}, ["s1"], "partitioned", 8)["s1"] == {
        1: (0, 3), 2: (3, 3), 3: (6, 2)}
    with pytest.raises(ValueError, match="only 2 slots"):
        slot_ranges(jobs, {}, ["s1"], "partitioned", 2)
    with pytest.raises(ValueError, match="slot policy"):
        slot_ranges(jobs, {}, ["s1"], "private", 8)
