"""Congestion control policies (workers.ina.cc) and their use by the worker state machine,
driven by a fake clock."""

from __future__ import annotations

import numpy as np
import pytest

from workers.ina.cc import (
    DEFAULT_WINDOW,
    MAX_WINDOW,
    POLICIES,
    Aimd,
    Delay,
    Fixed,
    TwoWindow,
    bdp_window,
    default_window,
    first_timeout,
    make_cc,
)
from workers.ina.wire import Echo, InaPacket
from workers.ina.worker import RttEstimator, WorkerRound

JOB, K = 3, 4


def test_bdp_window():
    assert bdp_window(80.0, 0.1, 16) == 8  # 80 frames/s over 0.1 s
    assert bdp_window(80.0, 0.101, 16) == 9  # rounded up
    assert bdp_window(None, 0.1, 16) == 16 and bdp_window(80.0, None, 16) == 16
    assert bdp_window(1e6, 1.0, 16) == 128 and bdp_window(1.0, 1e-6, 16) == 1
    # γ / frame time x (2 x 6 hops x frame time): 12 whatever the float rounding says
    frame = 196 * 8 / 1e6
    assert bdp_window(1.0 / frame, 12 * frame, 16) == 12


def test_default_window_is_two_bandwidth_delay_products_at_least_the_constant():
    """``fixed``'s window when none is given, by hand: 196-byte frames at 1 Mbit/s take
    1.568 ms; the PS's farthest worker 6 hops away (fat-tree) makes the unloaded round trip
    12 frame times, 18.816 ms."""
    assert (DEFAULT_WINDOW, MAX_WINDOW) == (16, 128)
    frame = 196 * 8 / 1e6
    rtt = 12 * frame
    # γ = 1 (k=16's polished plan at budget 8): 12 frames per round trip, x2 = 24
    assert default_window(1.0 / frame, rtt) == 24
    # γ = 0.6288 (the greedy's at budget 8): 7.55 frames, x2 = 15.09 -> 16, the floor
    assert default_window(0.6288 / frame, rtt) == 16
    # γ = 0.7: 8.4, x2 = 16.8 -> 17
    assert default_window(0.7 / frame, rtt) == 17
    # PS-only, 64 workers: 1/64 of the link, 0.1875 frames per round trip: the floor
    assert default_window(1 / 64 / frame, rtt) == 16
    # at 0.1 Mbit/s the frame takes 10x longer and so does the round trip: the same window
    assert default_window(1.0 / (10 * frame), 10 * rtt) == 24
    assert default_window(1.0 / frame, rtt, headroom=1.0) == 16  # 12, the floor
    assert default_window(1.0 / frame, rtt, headroom=1.5) == 18
    assert default_window(1.0 / frame, rtt, floor=4, headroom=1.0) == 12
    assert default_window(1e6, 1.0) == 128  # the cap
    assert default_window(None, rtt) == default_window(1.0 / frame, None) == 16  # unknown
    with pytest.raises(ValueError, match="headroom"):
        default_window(1.0 / frame, rtt, headroom=0)


def test_first_timeout_is_twice_the_plans_time_for_a_first_window():
    """The first timeout before anything is measured, by hand: twice (window / the plan's
    frames per second of one worker + the unloaded round trip), never below the floor."""
    assert first_timeout(0.3, 16, 40.0, 0.1) == pytest.approx(1.0)  # 2 x (0.4 + 0.1)
    assert first_timeout(0.3, 8, 80.0, 0.05) == pytest.approx(0.3)  # 2 x 0.15 = 0.3
    assert first_timeout(0.5, 8, 80.0, 0.05) == 0.5  # the floor (--timeout) wins
    assert first_timeout(0.3, 16, 40.0, 0.1, mult=1.0) == pytest.approx(0.5)
    # fat-tree k=16, 4 x 64 workers, PSs on one edge, budget 1: γ 0.0843 Mbit/s per job,
    # 196-byte frames: 53.8 frames/s; 16 / 53.8 = 0.2975 s + 18.816 ms, x 2 = 0.633 s
    frame = 196 * 8 / 1e6
    gamma = 0.08433807563304802
    assert first_timeout(0.3, 16, gamma / frame, 12 * frame) == pytest.approx(
        2 * (16 * frame / gamma + 12 * frame))
    assert 0.632 < first_timeout(0.3, 16, gamma / frame, 12 * frame) < 0.634
    # one job at γ = 1, window 24 (simulate's budget 8): 2 x (37.6 + 18.8) ms, the floor
    assert first_timeout(0.3, 24, 1.0 / frame, 12 * frame) == 0.3
    # unknown rate or round trip (unshaped links): the floor
    assert first_timeout(0.3, 16, None, 0.1) == 0.3 and first_timeout(0.3, 16, 40.0, None) == 0.3
    with pytest.raises(ValueError):
        first_timeout(0.3, 0, 40.0, 0.1)


def test_rtt_estimator_starts_from_the_first_timeout():
    """``start`` holds both timeouts until their first sample; ``initial`` stays the floor of
    ``first_rto`` after them (by hand: RFC 6298 on one 0.05 s sample, 2 x the median
    completion)."""
    e = RttEstimator(0.3, 0.01, 1.0, start=0.633)
    assert e.first_rto == 0.633 and e.rto == 0.633
    e.completion(0.1)  # 2 x 0.1: below the exact round trips' start, which still holds
    assert e.first_rto == 0.633
    e.sample(0.05)  # srtt 0.05, rttvar 0.025: rto 0.05 + 4 x 0.025 = 0.15
    assert e.rto == pytest.approx(0.15)
    assert e.first_rto == 0.3  # the floor, above 0.15 and 2 x 0.1
    e.completion(0.4)
    e.completion(0.5)  # median 0.4: 0.8
    assert e.first_rto == pytest.approx(0.8)
    assert RttEstimator(0.3, 0.01, 1.0).first_rto == 0.3  # no start: initial
    with pytest.raises(ValueError):
        RttEstimator(0.3, 0.01, 1.0, start=0.2)  # below initial
    with pytest.raises(ValueError):
        RttEstimator(0.3, 0.01, 1.0, start=1.5)  # above the cap


def test_table_and_factory():
    assert set(POLICIES) == {"fixed", "aimd", "delay", "two-window"}
    assert make_cc("fixed", 16, 80.0, 0.1).window == 16  # the constant, whatever the rate
    assert make_cc("aimd", 16, 80.0, 0.1).window == 8
    assert make_cc("delay", 16, None, None).window == 16
    with pytest.raises(ValueError, match="unknown congestion control 'tcp'"):
        make_cc("tcp", 16)
    with pytest.raises(ValueError):
        Fixed(0)


def test_fixed_never_moves():
    f = Fixed(5)
    for t in range(10):
        f.on_result(t, 0.1)
        f.on_timeout(t)
        f.on_mark(t)
    assert f.window == 5


def test_aimd_adds_one_per_result_and_halves_once_per_round_trip():
    a = Aimd(4.0, cap=10, ssthresh=8.0)
    a.on_result(0.0, 0.2)
    a.on_result(0.1, 0.2)
    assert a.window == 6 and a.srtt == pytest.approx(0.2)
    a.on_timeout(0.2)  # RESULTs still come (one 0.1 s ago): a random loss, no cut
    assert a.window == 6 and a.decreases == 0
    a.on_timeout(1.0)  # nothing for 0.9 s > srtt: the path stalls
    assert a.window == 3 and a.ssthresh == 3.0
    a.on_timeout(1.1)  # same loss event (within srtt 0.2): no second cut
    a.on_mark(1.15)
    assert a.window == 3 and a.decreases == 1
    a.on_mark(1.2)  # a mark after one round trip: halved again, whatever RESULTs do
    assert a.window == 1 and a.decreases == 2
    a.on_result(1.3, None)  # at ssthresh (1.5): +1 per window of RESULTs, 1/cwnd each
    assert a.cwnd == pytest.approx(1.5 + 1 / 1.5)
    slow = Aimd(2.0, ssthresh=4.0)
    slow.on_result(0.0, None)
    slow.on_result(0.0, None)  # below ssthresh: +1 each
    assert slow.cwnd == 4.0
    for _ in range(200):
        a.on_result(2.0, None)
    assert a.window == 10  # the cap
    for t in range(10):
        a.on_timeout(10.0 + t)
    assert a.window == 1  # never below one


def test_delay_follows_the_round_trip_gradient():
    d = Delay(10.0, cap=64)
    d.on_result(0.0, 0.10)  # the least round trip: grow
    d.on_result(0.1, 0.12)  # below 1.5 x min: grow
    assert d.window == 12
    d.on_result(0.2, None)  # no exact sample, no signal
    assert d.window == 12
    for i in range(5):  # a queue builds: 0.2, 0.25, ... growing -> cut by the gradient
        d.on_result(0.3 + i / 10, 0.2 + i * 0.05)
    grown = d.window
    assert grown < 12 and d.gradient > 0
    before = d.cwnd
    d.on_result(1.0, 0.8)  # 8 x min, above high = 4: cut by 0.5 * (1 - 4 * 0.1 / 0.8)
    assert d.cwnd == pytest.approx(max(1.0, before * 0.75))
    assert d.window < grown
    before = d.cwnd
    d.on_timeout(5.0)  # a timeout is no signal to this policy
    assert d.cwnd == before


def _round(cc, window=16, n_chunks=40):
    vals = np.arange(n_chunks * K, dtype=np.int32)
    return WorkerRound(job_id=JOB, worker_id=1, round_=0, values=vals,
                       schedule=[(c, 9, 3) for c in range(n_chunks)], k=K, window=window,
                       timeout=1.0, max_timeout=60.0, rtt=RttEstimator(1.0, 0.01, 60.0),
                       cc=cc, silence=100.0)


def _result(c: int, copy: int | None = 0) -> InaPacket:
    return InaPacket.result(JOB, 0, c, 0b111, np.zeros(K, dtype=np.int32),
                            echo=Echo(1, copy))


def test_worker_round_follows_the_policy_window():
    """aimd in the state machine: the first window is the policy's, each RESULT opens two
    places (one freed, one added), a timeout halves it."""
    cc = Aimd(2.0, cap=8, ssthresh=8.0)
    w = _round(cc)
    assert [p.chunk_id for p in w.start(0.0)] == [0, 1]
    out = w.on_packet(_result(0), 0.1)  # window 3: chunks 2 and 3
    assert [p.chunk_id for p in out] == [2, 3] and cc.srtt == pytest.approx(0.1)
    assert w.in_flight == 3
    w.tick(w.next_deadline())  # every chunk times out, no RESULT since 0.1: one cut
    assert cc.window == 1 and cc.decreases == 1  # 3 -> 1.5
    # nothing new goes out until the flight is below the window
    assert w.on_packet(_result(1, copy=None), 10.0) == []
    fixed = _round(Fixed(16))
    assert len(fixed.start(0.0)) == 16


def test_ecn_mark_halves_the_window():
    """A RESULT marked INA_FLAG_ECN (constants.p4, set by p4src/include/congestion.p4)
    reaches the policy's on_mark."""
    import workers.ina.worker as worker_mod
    assert worker_mod.FLAG_ECN == 0x8
    cc = Aimd(8.0)
    w = _round(cc)
    w.start(0.0)
    pkt = InaPacket.result(JOB, 0, 0, 0b111, np.zeros(K, dtype=np.int32), flags=0x8,
                           echo=Echo(1, 0))
    w.on_packet(pkt, 0.1)
    assert w.stats.marks == 1 and cc.window == 4  # +1 then halved: (8 + 1) / 2


def test_two_window_cuts_each_window_by_its_own_signal():
    """A2TP-like: marks shrink the link window, fall-backs the aggregator window, by the
    EWMA of their share per window of RESULTs (DCTCP's alpha / 2); the smaller binds."""
    assert "two-window" in POLICIES and make_cc("two-window", 16, 80.0, 0.1).window == 8
    clean, marked, fell = TwoWindow(8.0), TwoWindow(8.0), TwoWindow(8.0)
    for t in range(40):
        for tw in (clean, marked, fell):
            tw.on_result(t, 0.1)
        marked.on_mark(t)
        fell.on_fallback(t)
    assert clean.link.alpha == clean.agg.alpha == 0 and clean.window > 8  # both grew
    assert marked.link.alpha > 0 and marked.agg.alpha == 0
    assert marked.link.cwnd < clean.link.cwnd and marked.window == int(marked.link.cwnd)
    assert fell.agg.alpha > 0 and fell.link.alpha == 0
    assert fell.agg.cwnd < fell.link.cwnd and fell.window == int(fell.agg.cwnd)
    tw = marked
    tw.on_timeout(100.0)  # no RESULT for longer than srtt: the link window halves
    assert tw.decreases == 1


def test_the_ps_tells_the_workers_a_chunk_fell_back():
    """A RESULT carries FALLBACK when a merged packet fell back; the worker counts it and
    its policy hears it (on_fallback)."""
    from workers.ina.constants import FLAG_FALLBACK
    from workers.ina.ps import PsState

    ps = PsState(JOB, [0, 1, 2], n_chunks=1, k=K)
    v = np.zeros(K, dtype=np.int32)
    ps.on_packet(InaPacket.grad(JOB, 0, 0, 0, 1, 0, v, FLAG_FALLBACK))
    (res,) = ps.on_packet(InaPacket(2, 0, JOB, 0, 0, 0, 2, 2, 1, 0b110, v)).results
    assert res.flags & FLAG_FALLBACK
    tw = TwoWindow(4.0)
    w = _round(tw)
    w.start(0.0)
    w.on_packet(res, 0.1)
    assert w.stats.fell_back == 1 and tw.agg.hits == 1
