"""Packet tests of ina.p4's hierarchical jobs (docs/protocol.md §5.1) on pyswitch, on both of
its execution paths (the Python path and the native one).

A two-level tree of job JOB: workers 100..103 are children 0..3 of LEAF (switch 5), whose
PARTIAL is child 0 of ROOT (switch 9, the PS's ToR), and worker 200 is ROOT's child 1.
Worker ids above 64 on purpose: a hierarchical job's bits are children, not workers.  The
PS here is :class:`workers.ina.ps.PsState` with the same tree, so each test checks what
the PS makes of what the switches emit: one exact sum, never a double count.
"""

from __future__ import annotations

import numpy as np
import pytest
from ina_harness import InaSwitch, PySwitchTarget

from pyswitch.native import unavailable
from workers.ina import constants as C
from workers.ina.ps import PsState
from workers.ina.tree import SWITCH, WORKER, Child, Tree
from workers.ina.wire import Flag, InaPacket, MsgType

LEAF, ROOT = 5, 9
JOB, JOB2 = 3, 4
MCAST = 1
LEAF_WORKERS = (100, 101, 102, 103)
DIRECT = 200
UP, PS_PORT = 20, 30            # LEAF's uplink toward ROOT; ROOT's port of the PS
ALL = (*LEAF_WORKERS, DIRECT)
LEAF_KIDS = {w: i for i, w in enumerate(LEAF_WORKERS)}  # worker -> its child index at LEAF


def Target(native: bool) -> PySwitchTarget:
    """ina.p4 on an in-process pyswitch Switch, on the Python or the native path."""
    return PySwitchTarget(native=native)


@pytest.fixture(params=["python", "native"])
def native(request) -> bool:
    if request.param == "native" and unavailable() is not None:
        pytest.skip(str(unavailable()))
    return request.param == "native"


def port_of(worker: int) -> int:
    return {100: 1, 101: 2, 102: 3, 103: 4, 200: 5}[worker]


def leaf(native: bool, jobs=((JOB, LEAF_KIDS),)) -> InaSwitch:
    """LEAF: each (job, {worker: child index}) a hierarchical job waiting for those."""
    sw = InaSwitch(Target(native), LEAF).configure()
    sw.fabric(UP)
    for job, kids in jobs:
        sw.job(job, [], is_ps_tor=False, tor_id=ROOT, mcast_grp=MCAST, member_ports=False,
               fan_in=len(kids))
        for w, i in kids.items():
            sw.member(job, w, port_of(w))
            sw.child(job, MsgType.GRAD, w, i)
    sw.route(ROOT, [UP])
    sw.route(0, [UP])
    sw.target.set_multicast_group(MCAST, [1, 2, 3, 4, UP])
    return sw


def root(native: bool, jobs=(JOB,)) -> InaSwitch:
    """ROOT, the PS's ToR: children LEAF (0) and worker 200 (1) in each job."""
    sw = InaSwitch(Target(native), ROOT).configure()
    sw.fabric(UP)
    for job in jobs:
        sw.job(job, [], is_ps_tor=True, tor_id=ROOT, ps_port=PS_PORT, mcast_grp=MCAST,
               member_ports=False, fan_in=2)
        sw.member(job, DIRECT, port_of(DIRECT))
        sw.child(job, MsgType.PARTIAL, LEAF, 0)
        sw.child(job, MsgType.GRAD, DIRECT, 1)
    sw.route(0, [PS_PORT])
    sw.route(LEAF, [UP])
    sw.target.set_multicast_group(MCAST, [port_of(DIRECT), UP, PS_PORT])
    return sw


def tree(job_leaf=None, to_ps=()) -> Tree:
    """The PS's view: LEAF's children ``job_leaf``, ROOT's two; ``to_ps``: workers whose
    GRADs go to the PS itself."""
    kids = job_leaf or LEAF_KIDS
    row: list[Child | None] = [None] * (max(kids.values()) + 1)
    for w, i in kids.items():
        row[i] = Child(WORKER, w)
    return Tree(ROOT, {LEAF: row, ROOT: [Child(SWITCH, LEAF), Child(WORKER, DIRECT)]},
                {**dict.fromkeys(kids, LEAF), DIRECT: ROOT, **dict.fromkeys(to_ps, 0)})


def grads(chunk: int, seed: int = 0) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed + chunk)
    return {w: rng.integers(-(2**24), 2**24, size=C.K).astype(np.int32) for w in ALL}


def grad(w: int, v: dict[int, np.ndarray], chunk: int, agg: int, fan_in: int, flags=0,
         job=JOB) -> bytes:
    return InaSwitch.frame(InaPacket.grad(job, 0, chunk, agg, fan_in, w, v[w], flags,
                                          hierarchical=True))


def exact(v: dict[int, np.ndarray], ws=ALL) -> list[int]:
    return np.sum([v[w].astype(np.int64) for w in ws], axis=0).tolist()


def test_two_levels_one_exact_partial_and_a_child_resending_after_its_parent_forwarded(
        native) -> None:
    lf, rt, chunk = leaf(native), root(native), 77
    v = grads(chunk)
    outs = []
    for w in LEAF_WORKERS:
        outs += lf.send(port_of(w), grad(w, v, chunk, LEAF, 4))
    (p,) = outs  # LEAF complete: one PARTIAL naming LEAF, its children's bits
    assert (p.port, p.pkt.msg_type, p.pkt.agg_id) == (UP, MsgType.PARTIAL, ROOT)
    assert (p.pkt.worker_id, p.pkt.bitmap, p.pkt.count, p.pkt.flags) == (LEAF, 0b1111, 4, 0)
    assert p.values.tolist() == exact(v, LEAF_WORKERS)
    assert rt.send(UP, p.frame) == []  # ROOT waits for its other child
    (top,) = rt.send(port_of(DIRECT), grad(DIRECT, v, chunk, ROOT, 2))
    assert (top.port, top.pkt.agg_id, top.pkt.worker_id, top.pkt.bitmap, top.pkt.count) == (
        PS_PORT, 0, ROOT, 0b11, 2)
    assert top.values.tolist() == exact(v)
    ps = PsState(JOB, ALL, n_chunks=100, tree=tree())
    assert ps.on_packet(top.pkt).results[0].values.tolist() == exact(v)

    # worker 101 resends after ROOT forwarded: LEAF re-emits its stored PARTIAL, ROOT
    # re-emits its own (both RETRANSMIT, the same sums), and the PS answers with the
    # stored RESULT: nothing is added twice anywhere
    (again,) = lf.send(port_of(101), grad(101, v, chunk, LEAF, 4, Flag.RETRANSMIT))
    assert (again.pkt.flags, again.pkt.worker_id, again.pkt.bitmap) == (
        Flag.RETRANSMIT, LEAF, 0b1111)
    assert again.values.tolist() == exact(v, LEAF_WORKERS)
    (top2,) = rt.send(UP, again.frame)
    assert (top2.port, top2.pkt.flags, top2.pkt.bitmap) == (PS_PORT, Flag.RETRANSMIT, 0b11)
    assert top2.values.tolist() == exact(v)
    res = ps.on_packet(top2.pkt).results
    assert ps.stats.chunks_completed == 1 and res[0].flags == Flag.RETRANSMIT
    assert res[0].values.tolist() == exact(v)
    assert rt.counters("aggregated", "completed", "reemitted") == {
        "aggregated": 2, "completed": 1, "reemitted": 1}

    # the RESULT releases both slots on its way down; a late resend of LEAF's PARTIAL then
    # finds no slot and goes on to the PS, which reads it as workers 100..103 and answers
    result = InaSwitch.frame(res[0])
    down = rt.send(PS_PORT, result)
    assert {o.port for o in down} == {port_of(DIRECT), UP}
    lf.send(UP, next(o.frame for o in down if o.port == UP))
    assert lf.counters("release")["release"] == 1 and rt.counters("release")["release"] == 1
    (late,) = rt.send(UP, again.frame)
    assert (late.port, late.pkt.worker_id, late.pkt.bitmap) == (PS_PORT, LEAF, 0b1111)
    assert late.pkt.flags & Flag.FALLBACK
    assert ps.on_packet(late.pkt).results[0].values.tolist() == exact(v)
    assert ps.stats.chunks_completed == 1


def test_a_flushed_incomplete_partial_and_fallback_grads_make_one_exact_sum(native) -> None:
    """Workers 102 and 103 are lost on the way to LEAF: 101's retransmission flushes what LEAF
    holds (INCOMPLETE, to the PS), 200's GRAD waits at ROOT for LEAF's PARTIAL, which never
    comes: ROOT's slot is flushed by 200's retransmission; 102 and 103 go straight to the
    PS.  The PS covers the job's workers exactly once."""
    lf, rt, chunk = leaf(native), root(native), 78
    v = grads(chunk)
    assert lf.send(port_of(100), grad(100, v, chunk, LEAF, 4)) == []
    assert lf.send(port_of(101), grad(101, v, chunk, LEAF, 4)) == []
    (flush,) = lf.send(port_of(101), grad(101, v, chunk, LEAF, 4, Flag.RETRANSMIT))
    assert (flush.pkt.agg_id, flush.pkt.worker_id, flush.pkt.bitmap, flush.pkt.count) == (
        0, LEAF, 0b11, 2)
    assert flush.pkt.flags == Flag.RETRANSMIT | Flag.INCOMPLETE
    assert rt.send(port_of(DIRECT), grad(DIRECT, v, chunk, ROOT, 2)) == []
    (flush2,) = rt.send(port_of(DIRECT), grad(DIRECT, v, chunk, ROOT, 2, Flag.RETRANSMIT))
    assert (flush2.pkt.worker_id, flush2.pkt.bitmap) == (ROOT, 0b10)
    # LEAF's flush crosses ROOT toward the PS (agg_id 0: not aggregated there)
    (through,) = rt.send(UP, flush.frame)
    assert through.port == PS_PORT and through.pkt == flush.pkt
    ps = PsState(JOB, ALL, n_chunks=100, tree=tree())
    pieces = [through.pkt, flush2.pkt, through.pkt]  # and a duplicate
    pieces += [InaPacket.grad(JOB, 0, chunk, 0, 1, w, v[w], Flag.RETRANSMIT | Flag.FALLBACK,
                              hierarchical=True) for w in (102, 103)]
    results = [r for p in pieces for r in ps.on_packet(p).results]
    assert len(results) == 1 and results[0].values.tolist() == exact(v)
    assert ps.stats.duplicates == 1 and ps.stats.malformed == 0


def test_a_child_of_two_jobs_counts_in_each_with_its_own_bit(native) -> None:
    """Worker 100 is child 0 of LEAF in JOB (fan-in 4) and child 2 in JOB2 (fan-in 3, with
    101 and 103); LEAF is ROOT's child 0 in both.  The same chunk id of both jobs in flight
    at once: each job's slot, bits and sum are its own."""
    kids2 = {101: 0, 103: 1, 100: 2}
    lf = leaf(native, jobs=((JOB, LEAF_KIDS), (JOB2, kids2)))
    rt, chunk = root(native, jobs=(JOB, JOB2)), 79
    v1, v2 = grads(chunk, 1), grads(chunk, 2)
    outs = []
    for w in (100, 101, 103):   # interleaved: both jobs' slots open at once
        outs += lf.send(port_of(w), grad(w, v1, chunk, LEAF, 4))
        outs += lf.send(port_of(w), grad(w, v2, chunk, LEAF, 3, job=JOB2))
    (p2,) = outs                # JOB2 complete on its three children
    assert (p2.pkt.job_id, p2.pkt.worker_id, p2.pkt.bitmap, p2.pkt.count) == (JOB2, LEAF,
                                                                               0b111, 3)
    assert p2.values.tolist() == exact(v2, (100, 101, 103))
    (p1,) = lf.send(port_of(102), grad(102, v1, chunk, LEAF, 4))
    assert (p1.pkt.job_id, p1.pkt.bitmap, p1.pkt.count) == (JOB, 0b1111, 4)
    assert p1.values.tolist() == exact(v1, LEAF_WORKERS)
    # worker 102 is a member of JOB2 at this port but none of LEAF's children in it (it
    # belongs elsewhere in JOB2's tree): its GRAD goes on to the PS unaggregated
    lf.member(JOB2, 102, port_of(102))
    (by,) = lf.send(port_of(102), grad(102, v2, chunk, LEAF, 3, job=JOB2))
    assert (by.pkt.agg_id, by.pkt.msg_type, by.pkt.bitmap) == (0, MsgType.GRAD, 0)
    assert by.pkt.flags & Flag.FALLBACK and lf.counters("bypassed")["bypassed"] == 1
    for p, v, ws in ((p1, v1, ALL), (p2, v2, (100, 101, 103, DIRECT))):
        assert rt.send(UP, p.frame) == []
        (top,) = rt.send(port_of(DIRECT), grad(DIRECT, v, chunk, ROOT, 2, job=p.pkt.job_id))
        assert (top.pkt.job_id, top.pkt.bitmap) == (p.pkt.job_id, 0b11)
        assert top.values.tolist() == exact(v, ws)
    ps2 = PsState(JOB2, (100, 101, 102, 103, DIRECT), n_chunks=100, tree=tree(kids2, to_ps=(102,)))
    assert ps2.on_packet(by.pkt).results == []          # worker 102's own piece
    assert ps2.on_packet(top.pkt).results[0].values.tolist() == exact(v2)


def test_hierarchical_admission_and_a_sender_that_is_no_child(native) -> None:
    lf, chunk = leaf(native), 80
    v = grads(chunk)
    # a hierarchical job's GRAD carries no bit: one with a bit is malformed
    flat = InaSwitch.frame(InaPacket(MsgType.GRAD, 0, JOB, 0, chunk, LEAF, 4, 1, 100, 1,
                                     v[100]))
    assert lf.send(port_of(100), flat) == []
    assert lf.counters("dropped_malformed")["dropped_malformed"] == 1
    # a PARTIAL from a switch that is none of LEAF's children: on to the PS, unchanged
    stray = InaPacket(MsgType.PARTIAL, 0, JOB, 0, chunk, LEAF, 4, 2, 77, 0b11, v[100])
    (out,) = lf.send(UP, InaSwitch.frame(stray))
    assert (out.pkt.agg_id, out.pkt.worker_id, out.pkt.bitmap) == (0, 77, 0b11)
    assert lf.counters("bypassed", "aggregated") == {"bypassed": 1, "aggregated": 0}
    # ... where the tree cannot read it: malformed, never summed
    ps = PsState(JOB, ALL, n_chunks=100, tree=tree())
    assert ps.on_packet(out.pkt).results == []
    assert ps.stats.malformed_reasons == {"child": 1}
