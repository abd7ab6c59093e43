"""Worker sender state machine (docs/design.md §3.9) driven by a fake clock."""

from __future__ import annotations

import numpy as np
import pytest

from workers.ina.constants import (
    AGG_ID_PS,
    FLAG_FALLBACK,
    FLAG_INCOMPLETE,
    FLAG_RETRANSMIT,
    TYPE_GRAD,
)
from workers.ina.messages import prober
from workers.ina.wire import NO_WORKER, Echo, InaPacket
from workers.ina.worker import (
    RttEstimator,
    WorkerRound,
    n_chunks_for,
    pad_to_chunks,
    ps_only_schedule,
)

K = 4
JOB = 3


def result(c: int, values, *, r: int = 0, bitmap: int = 0b111, job: int = JOB,
           flags: int = 0, echo: int = NO_WORKER, copy: int | None = None) -> InaPacket:
    """A RESULT; ``echo``/``copy``: the worker and GRAD copy the PS names as its cause."""
    return InaPacket.result(job, r, c, bitmap, np.asarray(values, dtype=np.int32), flags=flags,
                            echo=Echo(echo, copy))


def flags_copy(p: InaPacket) -> tuple[int, int]:
    """(protocol flags, copy number) of a GRAD."""
    return p.flag_bits, p.copy_number


def make(n_values: int = 10, window: int = 2, **kw) -> tuple[WorkerRound, np.ndarray]:
    vals = np.arange(1, n_values + 1, dtype=np.int32) * 10
    n = n_chunks_for(n_values, K)
    # chunks sent in the order 2, 0, 1; chunk 2 to switch 5 (fan-in 2), others to s_d = 9
    sched = [(2, 5, 2), (0, 9, 3), (1, 9, 3)][:n] if n == 3 else [(c, 9, 3) for c in range(n)]
    w = WorkerRound(job_id=JOB, worker_id=1, round_=0, values=vals, schedule=sched, k=K,
                    window=window, timeout=1.0, backoff=2.0, max_timeout=3.0, **kw)
    return w, vals


def test_padding_helpers():
    assert n_chunks_for(10, 4) == 3 and n_chunks_for(8, 4) == 2 and n_chunks_for(0, 4) == 1
    assert pad_to_chunks(np.array([1, 2, 3, 4, 5], dtype=np.int32), 4).tolist() == [
        1, 2, 3, 4, 5, 0, 0, 0]
    with pytest.raises(ValueError):
        pad_to_chunks(np.zeros(3, dtype=np.float32), 4)


def test_window_and_packet_fields():
    w, vals = make()
    out = w.start(now=0.0)
    assert [(p.chunk_id, p.agg_id, p.fan_in) for p in out] == [(2, 5, 2), (0, 9, 3)]
    p = out[0]
    assert (p.msg_type, p.flags, p.job_id, p.round, p.worker_id, p.bitmap, p.count) == (
        TYPE_GRAD, 0, JOB, 0, 1, 0b10, 1)
    assert p.values.tolist() == [90, 100, 0, 0]  # last chunk zero-padded
    assert out[1].values.tolist() == [10, 20, 30, 40]
    assert w.in_flight == 2 and w.stats.sent == 2 and w.next_deadline() == 1.0
    with pytest.raises(RuntimeError):
        w.start(0.0)


def test_results_slide_the_window_and_fill_the_sum():
    w, _ = make()
    w.start(0.0)
    nxt = w.on_packet(result(0, [1, 2, 3, 4]), now=0.5)
    assert [p.chunk_id for p in nxt] == [1] and w.next_deadline() == 1.0
    assert not w.done
    assert w.on_packet(result(2, [9, 9, 9, 9]), now=0.6) == []
    with pytest.raises(RuntimeError):
        w.result_values()
    assert w.on_packet(result(1, [5, 6, 7, 8]), now=0.7) == []
    assert w.done and w.next_deadline() is None
    assert w.result_values().tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]  # trimmed to 10
    assert w.stats.results == 3 and w.stats.retransmits == 0


def test_timeout_retransmits_same_route_with_flag_and_backoff():
    w, _ = make(silence=100.0)  # no silence probing here (its own test)
    w.start(0.0)
    assert w.tick(0.99) == []
    rt = w.tick(1.0)
    assert [(p.chunk_id, p.agg_id, p.fan_in, flags_copy(p)) for p in rt] == [
        (2, 5, 2, (FLAG_RETRANSMIT, 1)), (0, 9, 3, (FLAG_RETRANSMIT, 1))]
    assert rt[1].values.tolist() == [10, 20, 30, 40]
    # no round trip measured yet: each chunk's timer doubles, next retransmission at
    # 1 + 2 = 3; then capped at 3 -> 6
    assert w.tick(2.9) == [] and w.next_deadline() == 3.0
    assert [flags_copy(p) for p in w.tick(3.0)] == [(FLAG_RETRANSMIT, 2)] * 2
    assert w.next_deadline() == 6.0
    # the RESULT of chunk 2 names our copy 2 (sent at 3.0): a round trip of 0.5 s
    assert [p.chunk_id for p in w.on_packet(result(2, [0] * 4, echo=1, copy=2), 3.5)] == [1]
    assert w.rtt.measured and w.rtt.srtt == 0.5 and w.rtt.rto == 1.5  # 0.5 + 4 * 0.25
    # a RESULT ends every back-off (RFC 6298 5.7): chunk 0's doubled timer (6.0) comes back
    # to now + rto; chunk 1 entered with the first timeout max(rto, the job's timeout) = 1.5
    assert w._inflight[0].deadline == 5.0 and w._inflight[1].deadline == 5.0
    assert [p.chunk_id for p in w.tick(5.0)] == [0, 1]
    # no RESULT since: the i-th timeout in a row waits rto * 2**i, up to the cap
    assert w.next_deadline() == 5.0 + 3.0
    assert [p.chunk_id for p in w.tick(8.0)] == [0, 1]
    assert w.next_deadline() == 8.0 + 3.0  # 1.5 * 4, capped at max_timeout 3
    assert w.stats.retransmits == 8 and w.stats.sent == 3


def test_max_retries_fails_the_round():
    w, _ = make(max_retries=1, silence=100.0)
    w.start(0.0)
    assert len(w.tick(1.0)) == 2
    assert w.tick(3.0) == [] and w.failed and "chunk 2" in w.failed
    assert w.tick(100.0) == []


def test_bad_and_duplicate_results_are_ignored_and_counted():
    w, _ = make(window=3)
    w.start(0.0)
    w.on_packet(result(0, [1, 1, 1, 1]), 0.1)
    w.on_packet(result(0, [1, 1, 1, 1]), 0.2)  # duplicate
    w.on_packet(result(0, [2, 1, 1, 1]), 0.3)  # conflicting duplicate: first kept
    w.on_packet(result(1, [7] * 4, r=1), 0.3)  # other round
    w.on_packet(result(1, [7] * 4, job=JOB + 1), 0.3)  # other job
    w.on_packet(result(1, [7] * 4, bitmap=0b101), 0.3)  # without worker 1's bit
    w.on_packet(result(1, [7] * 3), 0.3)  # wrong size
    w.on_packet(result(5, [7] * 4), 0.3)  # no such chunk
    grad_echo = w._grad(1, 0)
    w.on_packet(grad_echo, 0.3)  # not a RESULT
    s = w.stats
    assert (s.results, s.dup_results, s.conflicting_results, s.stale_results,
            s.unexpected_results) == (1, 2, 1, 1, 5)
    assert w.result[:4].tolist() == [1, 1, 1, 1] and w.result[4:].tolist() == [0] * 8


def test_result_for_unsent_chunk_is_rejected():
    w, _ = make(window=1)
    w.start(0.0)  # only chunk 2 in flight
    assert w.on_packet(result(0, [1] * 4), 0.1) == []
    assert w.stats.unexpected_results == 1 and w.in_flight == 1


def test_ps_only_mode():
    sched = ps_only_schedule(3)
    assert sched == [(0, AGG_ID_PS, 1), (1, AGG_ID_PS, 1), (2, AGG_ID_PS, 1)]
    w = WorkerRound(job_id=JOB, worker_id=0, round_=4, values=np.ones(12, dtype=np.int32),
                    schedule=sched, k=K, window=8)
    out = w.start(0.0)
    assert [(p.chunk_id, p.agg_id, p.fan_in, p.round) for p in out] == [
        (0, 0, 1, 4), (1, 0, 1, 4), (2, 0, 1, 4)]


@pytest.mark.parametrize("sched", [
    [(0, 9, 3), (1, 9, 3)],  # chunk 2 missing
    [(0, 9, 3), (1, 9, 3), (1, 9, 3)],  # chunk 1 twice
    [(0, 9, 3), (1, 9, 3), (2, 9, 0)],  # fan-in 0
])
def test_bad_schedules_are_rejected(sched):
    with pytest.raises(ValueError):
        WorkerRound(job_id=JOB, worker_id=0, round_=0, values=np.ones(12, dtype=np.int32),
                    schedule=sched, k=K)


def test_direct_escape_after_retries_goes_raw_to_the_ps():
    w, _ = make(direct_after=1, silence=100.0)
    w.start(0.0)
    first = w.tick(1.0)
    assert [(p.chunk_id, p.agg_id, flags_copy(p)) for p in first] == [
        (2, 5, (FLAG_RETRANSMIT, 1)), (0, 9, (FLAG_RETRANSMIT, 1))]
    second = w.tick(3.0)
    assert [(p.chunk_id, p.agg_id, p.fan_in, flags_copy(p)) for p in second] == [
        (2, AGG_ID_PS, 2, (FLAG_RETRANSMIT | FLAG_FALLBACK, 2)),
        (0, AGG_ID_PS, 3, (FLAG_RETRANSMIT | FLAG_FALLBACK, 2))]
    assert second[1].values.tolist() == [10, 20, 30, 40] and second[1].bitmap == 0b10
    assert w.stats.direct == 2 and w.stats.retransmits == 4
    now, _ = make(direct_after=0)
    now.start(0.0)
    assert all(p.agg_id == AGG_ID_PS for p in now.tick(1.0))
    never, _ = make(direct_after=None, silence=100.0)
    never.start(0.0)
    for t in (1.0, 3.0, 6.0, 9.0, 12.0):
        assert [p.agg_id for p in never.tick(t)] == [5, 9]
    with pytest.raises(ValueError):
        make(direct_after=-1)


def test_packets_round_trip_through_the_wire_codec():
    protocol = pytest.importorskip("workers.ina.wire")
    from workers.ina.constants import K as WIRE_K

    vals = np.arange(-40, 2 * WIRE_K - 40, dtype=np.int32) * 1_000_003
    w = WorkerRound(job_id=513, worker_id=37, round_=70000, values=vals,
                    schedule=[(1, 258, 5), (0, 0, 1)], k=WIRE_K, window=2)
    for p in w.start(0.0) + w.tick(10.0):
        wire = protocol.encode_payload(p)
        back = protocol.decode_payload(wire)
        assert back.header() == p.header()
        assert back.values.dtype == np.int32 and np.array_equal(back.values, p.values)


def test_rtt_estimator_timeouts():
    e = RttEstimator(0.3, 0.01, 1.0)
    assert (e.rto, e.first_rto, e.measured) == (0.3, 0.3, False)
    e.sample(0.1)  # RFC 6298: srtt 0.1, rttvar 0.05 -> 0.3
    assert e.measured and e.rto == pytest.approx(0.3)
    e.sample(0.1)  # rttvar 0.0375, srtt 0.1 -> 0.25
    assert e.rto == pytest.approx(0.25)
    # completion timeout: 2 x the median of the completion times, at least rto
    for t in (0.2, 0.05, 0.3):
        e.completion(t)
    assert e.first_rto == pytest.approx(0.4)
    # rto at least a quarter of the completion timeout; all within [min_rto, max_rto]
    for _ in range(60):
        e.sample(0.001)
    assert e.rto == pytest.approx(0.1)
    for t in (5.0, 5.0, 5.0):
        e.completion(t)
    assert e.first_rto == 1.0 and e.rto == 0.25
    # the job's timeout stays the least first timeout (by default for good; with
    # ``trust`` until that many completions are measured); rto at least a quarter of it
    tiny = RttEstimator(0.3, 0.01, 1.0)
    trusting = RttEstimator(0.3, 0.01, 1.0, trust=16)
    for e2 in (tiny, trusting):
        for _ in range(10):
            e2.sample(0.0)
            e2.completion(0.0)
        assert e2.rto == 0.075 and e2.first_rto == 0.3
    # with ``trust``, from then on twice the median completion alone, at least min_rto:
    # under loss the timeout, or rto's variance, held lost contributions far longer than
    # chunks took (docs/results.md, issue 39); without it the floors stay
    for e2 in (tiny, trusting):
        for _ in range(6):
            e2.completion(0.0)
    assert trusting.rto == 0.01 and trusting.first_rto == 0.01
    assert tiny.first_rto == 0.3
    noisy = RttEstimator(0.3, 0.01, 1.0, trust=3)
    for rtt in (0.03, 0.44, 0.05, 0.40):
        noisy.sample(rtt)
    for t in (0.07, 0.07):
        noisy.completion(t)
    assert noisy.first_rto > 0.3  # 2 completions: rto's variance still rules
    noisy.completion(0.06)
    assert noisy.rto > 0.3 and noisy.first_rto == pytest.approx(0.14)
    assert RttEstimator(0.02, 0.01, 1.0).rto == 0.02
    tiny = RttEstimator(0.02, 0.01, 1.0)
    tiny.sample(0.0)
    assert tiny.rto == 0.01  # min_rto
    with pytest.raises(ValueError):
        RttEstimator(2.0, 0.01, 1.0)


def test_completion_timeout_escapes_a_too_short_start():
    """Before any completion sample, every `escape` retransmitted completions in a row double
    the first timeout (it may be below the completion time, so no sample could come)."""
    e = RttEstimator(0.05, 0.01, 1.0, escape=4)
    for _ in range(3):
        e.ambiguous()
    assert e.first_rto == 0.05
    e.ambiguous()
    assert e.first_rto == 0.1
    for _ in range(4):
        e.ambiguous()
    assert e.first_rto == 0.2
    e.completion(0.03)  # a sample: the measured value rules from now on
    assert e.first_rto == pytest.approx(0.06)
    for _ in range(20):
        e.ambiguous()
    assert e.first_rto == pytest.approx(0.06)


def test_only_our_own_copies_are_timed():
    """Which RESULTs give a round-trip sample (the RESULT echo) and which a completion
    sample (Karn's rule)."""
    w, _ = make(window=3)
    w.start(0.0)  # chunks 2, 0, 1 at t = 0
    w.on_packet(result(2, [0] * 4, echo=0, copy=0), 0.2)  # another worker's GRAD
    assert not w.rtt.measured and list(w.rtt.completions) == [0.2]
    w.on_packet(result(0, [0] * 4, echo=1), 0.3)  # an aggregate our only copy completed
    assert list(w.rtt.rtts) == [0.3]
    w.tick(1.0)  # chunk 1 retransmitted: copy 1 at t = 1.0
    w.on_packet(result(1, [0] * 4, echo=1, flags=FLAG_RETRANSMIT), 1.1)  # resend, no copy
    assert list(w.rtt.rtts) == [0.3] and list(w.rtt.completions) == [0.2, 0.3]
    # the PS answers our late copy 1 again after completion: its exact round trip
    w.on_packet(result(1, [0] * 4, echo=1, copy=1, flags=FLAG_RETRANSMIT), 1.25)
    assert w.rtt.rtts[-1] == pytest.approx(0.25) and w.stats.dup_results == 1


def test_a_result_sent_again_gives_no_completion_sample():
    """A RESULT the PS sent again (flagged RETRANSMIT: a top-up of a RESULT first sent in
    fewer copies, docs/protocol.md §6 "Lost RESULTs", or a re-emit's answer) tells when
    the PS learnt of a loss, not how long the path takes: a chunk it completes gives no
    completion sample, which would stretch ``first_rto`` and the probers' timers after a
    lossy start (k=16, 1 % loss: round 1 began 0.78 s late)."""
    w, _ = make(window=3)
    w.start(0.0)  # chunks 2, 0, 1 at t = 0, each sent once
    w.on_packet(result(2, [0] * 4, flags=FLAG_RETRANSMIT), 0.9)
    assert w.stats.results == 1 and not w.rtt.completions
    w.on_packet(result(0, [0] * 4), 1.0)
    assert list(w.rtt.completions) == [1.0]


def test_copy_numbers_count_retransmissions_mod_16():
    w, _ = make(n_values=4, window=1, silence=100.0, direct_after=None)
    assert flags_copy(w.start(0.0)[0]) == (0, 0)
    copies = []
    t = 0.0
    for _ in range(18):
        t = w.next_deadline()
        copies += [flags_copy(p)[1] for p in w.tick(t)]
    assert copies == [*range(1, 16), 0, 1, 2]
    # Karn's rule where the echo cannot tell: copies 1 and 17 share the number 1, so an
    # echo of copy 1 gives no sample (either could have caused it)
    w.on_packet(result(0, [0] * 4, echo=1, copy=1), t + 0.5)
    assert w.done and not w.rtt.measured


def test_silence_probes_one_chunk_per_interval():
    """No RESULT for `silence` seconds (a dead link or worker): one retransmission per
    interval, oldest timer first, instead of the whole window; a RESULT ends it."""
    w, _ = make(window=3, silence=2.5)
    w.start(0.0)  # all three time out at 1.0, 3.0 (doubling: nothing measured yet)
    assert len(w.tick(1.0)) == 3
    probed = []
    t = 3.0
    for _ in range(3):  # silent since 0.0 for >= 2.5 s: one probe per tick, in turn
        out = w.tick(t)
        assert len(out) == 1 and w.next_deadline() == t + 3.0  # the rto (capped doubling)
        probed.append(out[0].chunk_id)
        t = w.next_deadline()
    assert sorted(probed) == [0, 1, 2]
    w.on_packet(result(probed[0], [0] * 4), t - 0.5)  # a RESULT: deferred timers come back
    assert w.next_deadline() <= t - 0.5 + 1.0 and len(w.tick(t + 0.5)) == 2


def test_estimator_carries_over_to_the_next_round():
    e = RttEstimator(0.1, 0.01, 3.0)
    w, _ = make(rtt=e)
    w.start(0.0)
    w.on_packet(result(2, [0] * 4, echo=1), 0.1)
    w.on_packet(result(0, [0] * 4, echo=1), 0.1)
    w.on_packet(result(1, [0] * 4, echo=1), 0.2)
    assert w.done
    vals = np.ones(10, dtype=np.int32)
    nxt = WorkerRound(job_id=JOB, worker_id=1, round_=1, values=vals,
                      schedule=[(c, 9, 3) for c in range(3)], k=K, window=2, timeout=1.0,
                      max_timeout=3.0, rtt=e)
    nxt.start(5.0)
    # round 1 starts with what round 0 measured, not with its own timeout (1.0)
    # three round trips of 0.1 (window 2: chunk 1 left at 0.1): srtt 0.1, rttvar 0.028125
    assert e.first_rto == pytest.approx(0.1 + 4 * 0.028125)
    assert nxt.next_deadline() == pytest.approx(5.0 + e.first_rto) and e.first_rto < 1.0


def test_first_copies_wait_first_rto_until_a_later_result_comes():
    """The first window of a round waits first_rto (the others may not have started); once
    a RESULT arrives after a chunk was sent, the chunk gets rto from then at most."""
    e = RttEstimator(1.0, 0.01, 3.0)
    e.sample(0.1)  # rto 0.1 + max(4 * 0.05, 0.1) = 0.3; first_rto stays the timeout, 1.0
    assert (e.rto, e.first_rto) == (pytest.approx(0.3), 1.0)
    w, _ = make(rtt=e, silence=100.0)
    w.start(0.0)  # chunks 2 and 0, until 1.0
    assert w.next_deadline() == 1.0
    assert [p.chunk_id for p in w.on_packet(result(2, [0] * 4), 0.2)] == [1]
    assert w._inflight[0].deadline == pytest.approx(0.5)  # cut to 0.2 + rto
    assert w._inflight[1].deadline == pytest.approx(1.2)  # sent now: first_rto
    assert [p.chunk_id for p in w.tick(0.5)] == [0]
    w.on_packet(result(0, [0] * 4), 0.6)
    assert w._inflight[1].deadline == pytest.approx(0.9)


def test_rto_is_rfc_6298_and_never_capped_below_the_round_trip():
    """RTO = SRTT + max(G, 4 RTTVAR); the safety cap (max_rto) gives way to a measured
    round trip above it (the collapse of docs/simulate.md: 1 s cap, 1.8-4 s round trips)."""
    e = RttEstimator(0.3, 0.01, 1.0, granularity=0.05)
    e.sample(0.2)  # srtt 0.2, rttvar 0.1 -> 0.2 + 0.4
    assert e.rto == pytest.approx(0.6)
    for _ in range(40):
        e.sample(0.2)  # rttvar -> 0: the clock granularity G remains
    assert e.rto == pytest.approx(0.25, abs=1e-3)
    slow = RttEstimator(0.3, 0.01, 1.0)
    slow.sample(3.0)  # srtt 3, rttvar 1.5: 9 s, capped at max(max_rto, srtt) = 3
    assert slow.cap == 3.0 and slow.rto == 3.0 and slow.first_rto == 3.0
    w, _ = make(rtt=slow, silence=100.0, max_retries=None)
    w.start(0.0)
    assert w.next_deadline() == 3.0  # not 1.0: below the round trip every copy is spurious
    w.tick(3.0)
    assert w.next_deadline() == 6.0  # back-off, capped at the measured round trip


def test_backoff_per_chunk_until_a_result():
    """Each chunk backs off on its own timeouts in a row; a RESULT (the path answers) ends
    every chunk's back-off."""
    e = RttEstimator(1.0, 0.01, 60.0)
    e.sample(0.5)  # rto 1.5
    w, _ = make(rtt=e, silence=100.0, window=3)
    w.start(0.0)  # first_rto = max(timeout 1.0, 1.5) = 1.5
    assert {c: f.deadline for c, f in w._inflight.items()} == {2: 1.5, 0: 1.5, 1: 1.5}
    w.tick(1.5)
    assert {c: f.deadline for c, f in w._inflight.items()} == {2: 4.5, 0: 4.5, 1: 4.5}
    w.on_packet(result(2, [0] * 4), 2.0)  # completes chunk 2 (no sample: retransmitted)
    assert {c: f.deadline for c, f in w._inflight.items()} == {0: 3.5, 1: 3.5}
    w.tick(3.5)
    assert w.next_deadline() == 3.5 + 3.0
    w.tick(6.5)
    assert w.next_deadline() == 6.5 + 6.0
    assert w.stats.retransmits == 7


def test_karn_no_sample_from_a_retransmitted_chunk_without_echo():
    """A retransmitted chunk's RESULT that names no copy of ours times nothing (Karn): no
    round trip, no completion sample; only the ambiguous count."""
    e = RttEstimator(1.0, 0.01, 60.0)
    w, _ = make(rtt=e, silence=100.0)
    w.start(0.0)
    w.tick(1.0)  # chunks 2 and 0 go again
    w.on_packet(result(2, [0] * 4, echo=1, flags=FLAG_RETRANSMIT), 1.2)
    w.on_packet(result(0, [0] * 4, echo=0, copy=1), 1.3)  # another worker's copy
    assert not e.measured and not e.completions and e._run == 2


def _job_round(worker_id: int, n_chunks: int, window: int, **kw) -> WorkerRound:
    """Worker ``worker_id`` of members 0..3, every chunk to s_d 9 (fan-in 4), chunks sent in
    order; timeout 1 s, no round trip measured yet."""
    vals = np.arange(1, n_chunks * K + 1, dtype=np.int32)
    return WorkerRound(job_id=JOB, worker_id=worker_id, round_=0, values=vals,
                       schedule=[(c, 9, 4) for c in range(n_chunks)], k=K, window=window,
                       timeout=1.0, backoff=2.0, max_timeout=10.0, members=[0, 1, 2, 3], **kw)


def test_one_prober_per_chunk_the_others_hold_off():
    """NACKs and probers (docs/protocol.md §6): every chunk has exactly one prober among the
    members, rotated by round; it retransmits at the timeout, the others wait ``holdoff``
    times longer (their retransmissions would only flush what the switch holds)."""
    members = [7, 2, 5, 9]
    for r in range(3):
        probers = [prober(members, c, r) for c in range(8)]
        assert sorted(probers[:4]) == [2, 5, 7, 9] and probers[:4] == probers[4:]
    assert prober(members, 0, 1) == prober(members, 1, 0)
    for wid in range(4):
        w = _job_round(wid, 4, window=4, holdoff=6.0)
        w.start(0.0)
        # chunk c's prober is member c: its timer is 1 s, everyone else's 6 s
        assert {c: f.deadline for c, f in w._inflight.items()} == {
            c: 1.0 if c == wid else 6.0 for c in range(4)}
        out = w.tick(1.0)
        assert [p.chunk_id for p in out] == [wid]
    with pytest.raises(ValueError):
        _job_round(0, 4, window=4, holdoff=0.5)


def test_a_prober_resends_a_chunk_that_later_chunks_passed():
    """Fast retransmit: when ``dupthresh`` chunks sent after an in-flight chunk completed
    and it is older than twice the fastest completion, its prober resends it at once; a
    worker that does not probe it waits (the prober's probe brings it a NACK)."""
    for wid, expect in ((0, [0]), (1, [])):
        w = _job_round(wid, 8, window=8, dupthresh=3)
        w.start(0.0)
        sent = []
        for c, t in ((1, 0.1), (2, 0.15), (3, 0.25)):  # fastest 0.1; chunk 0 is 0.25 old
            sent += w.on_packet(result(c, [1] * K, bitmap=0b1111), now=t)
        assert [p.chunk_id for p in sent] == expect
        if expect:
            assert flags_copy(sent[0]) == (FLAG_RETRANSMIT, 1) and w.stats.fast == 1
    # not before the chunk is twice as old as the fastest completion
    w = _job_round(0, 8, window=8, dupthresh=1)
    w.start(0.0)
    assert w.on_packet(result(1, [1] * K, bitmap=0b1111), now=0.1) == []  # fastest 0.1


def test_chunks_of_another_aggregation_point_do_not_pass():
    """Fast retransmit counts only chunks sent to the same aggregation point: chunks of a
    nearer point complete first by their path alone (make run's interleaved intervals)."""
    vals = np.arange(1, 8 * K + 1, dtype=np.int32)
    sched = [(0, 0, 4)] + [(c, 9, 4) for c in range(1, 8)]  # chunk 0 to the PS, others to 9
    w = WorkerRound(job_id=JOB, worker_id=0, round_=0, values=vals, schedule=sched, k=K,
                    window=8, timeout=1.0, backoff=2.0, max_timeout=10.0,
                    members=[0, 1, 2, 3], dupthresh=3)
    w.start(0.0)
    sent = []
    for c, t in ((1, 0.1), (2, 0.15), (3, 0.25), (4, 0.3)):
        sent += w.on_packet(result(c, [1] * K, bitmap=0b1111), now=t)
    assert sent == [] and w.stats.fast == 0


def test_a_nack_resends_the_chunk_at_once():
    """The PS's ask (a RESULT flagged INCOMPLETE whose bitmap leaves this worker out): the
    chunk goes again on its route at once, unless a copy left less than half an rto ago;
    it completes nothing and a NACK naming this worker's bit is refused."""
    w = _job_round(1, 2, window=2)
    w.start(0.0)
    nack = result(0, [0] * K, bitmap=0b1101, flags=FLAG_INCOMPLETE)
    out = w.on_packet(nack, now=0.6)  # rto 1 s (nothing measured): the copy of 0 is old
    assert [(p.chunk_id, p.agg_id, flags_copy(p)) for p in out] == [(0, 9, (FLAG_RETRANSMIT, 1))]
    assert w.stats.nacks == 1 and w.stats.results == 0 and not w.done
    assert w.on_packet(nack, now=0.7) == []  # its copy of 0.6 answers that one
    assert w.on_packet(result(1, [0] * K, bitmap=0b1111, flags=FLAG_INCOMPLETE), now=2) == []
    assert w.stats.unexpected_results == 1
    assert w.on_packet(result(0, [5] * K, bitmap=0b1111), now=2.1) == []
    assert w.result[:K].tolist() == [5] * K


def _recovering(q_free: float = 0.05, recovered: float = 0.4) -> RttEstimator:
    """An estimator that measured 20 completions under loss per port: 2 chunks no loss held
    (``q_free`` s), 18 that waited for someone's recovery (``recovered`` s)."""
    e = RttEstimator(0.3, 0.01, 1.0)
    for i in range(20):
        e.completion(q_free if i < 2 else recovered)
    return e


def test_a_prober_times_from_the_loss_free_completions_once_nacked():
    """Under loss per port nearly every chunk of a 64-worker job waits for a recovery, so
    the median completion (and the job's ``timeout`` floor) measure the recoveries: a
    prober waited 0.3 s for chunks that take 0.05 s (docs/results.md, issue 39).  Once the
    worker has been NACKed, its probes wait ``loss_mult`` times the median of the fastest
    ``1 - chunk_loss`` of the completions; without a NACK nothing changes (make run: no
    retransmission), and with little loss that is the median of them all."""
    e = _recovering()
    e.members = 64
    for _ in range(20):
        e.first_sent()
    assert (e.rto, e.probe_rto, e.first_rto, e.lossy) == (0.3, 0.3, pytest.approx(0.8), False)
    e.nack()  # 1 of 20 contributions lost: 1 - 0.95^64 = 96 % of chunks wait for one
    assert e.chunk_loss == pytest.approx(1 - 0.95 ** 64)
    assert e.quick == 0.05 and e.probe_rto == pytest.approx(0.1)
    assert e.rto == 0.3 and e.first_rto == pytest.approx(0.8)  # the others' timers stay
    light = _recovering()
    light.members = 64
    for _ in range(1000):
        light.first_sent()
    light.nack()  # 1 of 1,000: 6 % of chunks: the median of the fastest 94 %
    assert light.quick == 0.4 and light.probe_rto == pytest.approx(0.8)
    few = RttEstimator(0.3, 0.01, 1.0)
    few.first_sent()
    few.nack()
    for _ in range(15):
        few.completion(0.05)
    assert few.probe_rto == 0.3  # fewer than loss_after completions: not yet
    few.completion(0.05)
    assert few.probe_rto == pytest.approx(0.1)
    with pytest.raises(ValueError):
        RttEstimator(0.3, 0.01, 1.0, loss_mult=0.5)


@pytest.mark.parametrize("nacked", [True, False])
def test_nacks_bring_the_probe_forward(nacked: bool):
    """NACKs for 3 of its 8 chunks (members 0..3: 85 % of chunks wait for a recovery): the
    prober of a stuck chunk then resends it ``probe_rto`` after the last RESULT instead of
    ``rto``.  A non-prober keeps its hold-off (``holdoff`` times ``rto``: shortening it
    started storms), and a RESULT received twice (the PS's copies, sent after one NACK
    anywhere in the job) is no evidence of this worker's own."""
    for wid in (0, 1):  # worker 0 probes chunk 0 of round 0 (members 0..3); worker 1 not
        rtt = _recovering()
        w = _job_round(wid, 8, window=8, rtt=rtt)
        w.start(0.0)
        w.on_packet(result(1, [1] * K, bitmap=0b1111), now=0.02)
        w.on_packet(result(1, [1] * K, bitmap=0b1111), now=0.025)
        if nacked:
            for c in (2, 4, 5):
                w.on_packet(result(c, [0] * K, bitmap=0b1111 & ~(1 << wid),
                                   flags=FLAG_INCOMPLETE), now=0.03)
        assert rtt.lossy == nacked and rtt.members == 4
        w.on_packet(result(3, [1] * K, bitmap=0b1111), now=0.04)
        early = [p.chunk_id for p in w.tick(0.15) if p.chunk_id == 0]  # 0.04 + 2 x 0.05
        assert early == ([0] if wid == 0 and nacked else [])
        late = [p.chunk_id for p in w.tick(0.35) if p.chunk_id == 0]  # 0.04 + rto 0.3
        if wid == 1 or not nacked:
            assert late == ([0] if wid == 0 else [])


def test_a_nack_after_loss_waits_a_loss_free_completion_not_rtos_floor():
    """A NACK is refused while the worker's last copy may still be on its way: less than
    half a ``probe_rto`` old.  Once loss is seen that is a loss-free chunk's completion
    time (0.05 s here), not half the 0.3 s ``rto`` floor, which refused the PS's early asks
    twice in a row at k=16, budget 4, 1 % loss."""
    w = _job_round(1, 2, window=2, rtt=_recovering())
    w.start(0.0)
    nack = result(0, [0] * K, bitmap=0b1101, flags=FLAG_INCOMPLETE)
    assert [p.chunk_id for p in w.on_packet(nack, now=0.06)] == [0]
    assert w.on_packet(nack, now=0.08) == []  # its copy of 0.06 answers that one
    assert w.rtt.lossy and w.stats.nacks == 2


def test_the_ps_s_ask_for_a_gap_is_answered_even_right_after_a_copy():
    """A NACK flagged RETRANSMIT is the PS's ask for a chunk missing behind later ones or
    overdue (workers.ina.asks): the chunks sent after it arrived, so no copy of it is on its
    way, and the worker resends at once even when its last copy is young."""
    w = _job_round(1, 2, window=2, rtt=_recovering())
    w.start(0.0)
    flush = result(0, [0] * K, bitmap=0b1101, flags=FLAG_INCOMPLETE)
    gap = result(0, [0] * K, bitmap=0b1101, flags=FLAG_INCOMPLETE | FLAG_RETRANSMIT)
    assert [p.chunk_id for p in w.on_packet(flush, now=0.06)] == [0]
    assert w.on_packet(flush, now=0.08) == []  # a flush's ask: its copy of 0.06 answers
    out = w.on_packet(gap, now=0.08)
    assert [(p.chunk_id, flags_copy(p)) for p in out] == [(0, (FLAG_RETRANSMIT, 2))]
    assert w.on_packet(result(0, [7] * K, bitmap=0b1111), now=0.1) == []
    assert w.result[:K].tolist() == [7] * K


def test_a_result_naming_an_earlier_chunk_in_flight_asks_for_it_once_per_rto():
    """Chained RESULTs (docs/protocol.md §6, "Lost RESULTs"): a RESULT names the chunk its
    PS completed before it (``prev_mark``).  Still in flight here, that chunk's RESULT was
    lost on the way (sent first, down the same tree): worker 1, which probes none of chunks
    0, 2, 3 and would hold off 6 s, asks for chunk 0 at once, on its route, flagged
    RETRANSMIT.  It asks again only once ``rto`` (1 s, nothing measured) has passed since
    its ask; the answer, RESULT 0, completes it, and a further copy of RESULT 2 asks
    nothing (chunk 0 is no longer in flight)."""
    w = _job_round(1, 4, window=4, holdoff=6.0)
    w.start(0.0)
    res = InaPacket.result(JOB, 0, 2, 0b1111, np.full(K, 7, np.int32), prev=0)
    assert res.prev_mark == 0
    out = w.on_packet(res, now=0.2)
    assert [(p.chunk_id, p.agg_id, flags_copy(p)) for p in out] == [(0, 9, (FLAG_RETRANSMIT, 1))]
    assert w.stats.chased == 1 and w.stats.retransmits == 1 and w._inflight[0].deadline == 1.2
    assert w.on_packet(res, now=0.5) == []  # a second copy of RESULT 2: the ask is young
    assert w.stats.dup_results == 1 and w.stats.chased == 1
    assert [p.chunk_id for p in w.on_packet(res, now=1.3)] == [0]  # rto later: again
    assert w.stats.chased == 2
    w.on_packet(InaPacket.result(JOB, 0, 0, 0b1111, np.full(K, 5, np.int32)), now=1.4)
    assert w.result[:K].tolist() == [5] * K and w.stats.results == 2
    assert w.on_packet(InaPacket.result(JOB, 0, 2, 0b1111, np.full(K, 7, np.int32), prev=0),
                       now=2.5) == []
    assert w.stats.chased == 2 and w.stats.dup_results == 3


def test_a_result_naming_no_chunk_in_flight_asks_nothing():
    """A RESULT naming no chunk (agg_id 0: a round's first, or a PS without chaining), a
    chunk already completed here, one never sent, or another round's RESULT asks nothing:
    each only completes its own chunk and slides the window."""
    def res(c: int, prev: int | None = None, r: int = 0) -> InaPacket:
        return InaPacket.result(JOB, r, c, 0b1111, np.ones(K, np.int32), prev=prev)

    w = _job_round(1, 4, window=1)
    assert [p.chunk_id for p in w.start(0.0)] == [0]
    assert [p.chunk_id for p in w.on_packet(res(0), now=0.1)] == [1]
    assert [p.chunk_id for p in w.on_packet(res(1, prev=3), now=0.2)] == [2]  # 3 unsent
    assert [p.chunk_id for p in w.on_packet(res(2, prev=1), now=0.3)] == [3]  # 1 done
    assert w.on_packet(res(2, prev=3, r=1), now=0.4) == []  # stale: 3 in flight, no ask
    assert w.stats.chased == 0 and w.stats.retransmits == 0 and w.stats.stale_results == 1


def point_nack(c: int, point: int, bitmap: int) -> InaPacket:
    """An aggregation point's NACK (aggregation.p4, ask_children): agg_id names the point."""
    nack = InaPacket.result(JOB, 0, c, bitmap, np.zeros(K, dtype=np.int32),
                            flags=FLAG_INCOMPLETE, prev=point - 1)
    assert nack.agg_id == point
    return nack


def test_a_points_nack_is_answered_by_its_own_missing_workers_only():
    """A point multicasts its NACK to all of its workers: the worker whose chunk goes there
    and whose bit it lacks resends, flagged INCOMPLETE as well (an answer: the point does not
    ask again when it crosses the first copy); the others let it pass, uncounted."""
    w, _ = make()  # worker 1: chunk 2 to switch 5, chunks 0 and 1 to s_d 9
    w.start(0.0)
    (out,) = w.on_packet(point_nack(2, 5, 0b01), now=0.6)  # rto 1 s: the copy is old
    assert (out.chunk_id, out.agg_id) == (2, 5)
    assert flags_copy(out) == (FLAG_RETRANSMIT | FLAG_INCOMPLETE, 1)
    assert w.stats.point_nacks == 1 and w.stats.nacks == 0
    assert w.on_packet(point_nack(2, 5, 0b11), now=2.0) == []  # it holds worker 1 now
    assert w.on_packet(point_nack(0, 5, 0b01), now=2.0) == []  # chunk 0 goes to 9
    assert w.on_packet(point_nack(3, 5, 0b01), now=2.0) == []  # no such chunk in flight
    assert w.stats.point_nacks == 1 and w.stats.unexpected_results == 0


def _lossy(nacks: int = 10) -> RttEstimator:
    """:func:`_recovering`'s completions (timeouts up to 10 s), 20 first copies sent and
    ``nacks`` of them NACKed: with 4 members, 10 NACKs make 1 - 0.5^4 = 94 % of chunks
    wait for a recovery, so ``quick`` is the fastest completion (0.05 s) and ``probe_rto``
    0.1 s; ``first_rto`` stays twice the median, 0.8 s."""
    e = RttEstimator(0.3, 0.01, 10.0)
    for i in range(20):
        e.completion(0.05 if i < 2 else 0.4)
    for _ in range(20):
        e.first_sent()
    for _ in range(nacks):
        e.nack()
    return e


def test_under_loss_a_probers_first_copy_waits_probe_first_probe_rtos():
    """Worker.py "Under loss": once ``probe_rto`` follows the loss-free completions, a
    prober's first copy waits ``probe_first`` (2) times it, 0.2 s, not ``first_rto`` (0.8
    s, the median completion, recoveries included); the chunks it does not probe keep
    ``holdoff`` times ``first_rto``.  Without loss seen nothing changes."""
    for nacks, probe_first, want in ((10, 2.0, 0.2), (10, 4.0, 0.4), (0, 2.0, 0.8)):
        rtt = _lossy(nacks)
        w = _job_round(1, 4, window=4, rtt=rtt, probe_first=probe_first)
        assert rtt.loss_ready == bool(nacks)
        w.start(0.0)
        assert {c: f.deadline for c, f in w._inflight.items()} == pytest.approx(
            {c: want if c == 1 else 6 * 0.8 for c in range(4)})
    with pytest.raises(ValueError):
        _job_round(1, 4, window=4, probe_first=0.0)


def test_under_loss_a_rounds_last_chunks_retransmit_at_probe_rto_without_back_off():
    """Worker.py "Under loss": with every first copy sent and at most ``tail`` (4) chunks
    in flight, a timeout retransmits at ``probe_rto`` (0.1 s) and does not back off;
    outside the tail (first copies still to send, or ``tail=0``) the same chunk backs off
    from ``first_rto`` (0.8, 1.6, 3.2 s)."""
    def gaps(w: WorkerRound, start: float) -> list[float]:
        t, out = start, []
        for _ in range(3):
            sent = [p.chunk_id for p in w.tick(t)]
            assert sent == [0]
            out.append(w._inflight[0].deadline - t)
            t = w._inflight[0].deadline
        return out

    for n_chunks, tail, want in ((2, 4, [0.1, 0.1, 0.1]), (2, 0, [1.6, 3.2, 6.4]),
                                 (8, 4, [1.6, 3.2, 6.4])):
        w = _job_round(1, n_chunks, window=2, rtt=_lossy(), tail=tail)
        w.start(0.0)
        w._inflight.pop(1)  # only chunk 0 (probed by worker 0) left in flight
        assert gaps(w, w._inflight[0].deadline) == pytest.approx(want)
    with pytest.raises(ValueError):
        _job_round(1, 4, window=4, tail=-1)
