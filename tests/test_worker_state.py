"""Worker sender state machine (docs/design.md §3.9) driven by a fake clock."""

from __future__ import annotations

import numpy as np
import pytest

from workers.ina.constants import AGG_ID_PS, FLAG_FALLBACK, FLAG_RETRANSMIT, TYPE_GRAD, TYPE_RESULT
from workers.ina.messages import InaPacket
from workers.ina.worker import WorkerRound, n_chunks_for, pad_to_chunks, ps_only_schedule

K = 4
JOB = 3


def result(c: int, values, *, r: int = 0, bitmap: int = 0b111, job: int = JOB) -> InaPacket:
    return InaPacket(type=TYPE_RESULT, flags=0, job_id=job, round=r, chunk_id=c, agg_id=0,
                     fan_in=0, count=3, worker_id=0, bitmap=bitmap,
                     values=np.asarray(values, dtype=np.int32))


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
    assert (p.type, p.flags, p.job_id, p.round, p.worker_id, p.bitmap, p.count) == (
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
    w, _ = make()
    w.start(0.0)
    assert w.tick(0.99) == []
    rt = w.tick(1.0)
    assert [(p.chunk_id, p.agg_id, p.fan_in, p.flags) for p in rt] == [
        (2, 5, 2, FLAG_RETRANSMIT), (0, 9, 3, FLAG_RETRANSMIT)]
    assert rt[1].values.tolist() == [10, 20, 30, 40]
    # rto doubled: next retransmission at 1 + 2 = 3; then capped at 3 -> 6, 9
    assert w.tick(2.9) == [] and w.next_deadline() == 3.0
    assert len(w.tick(3.0)) == 2
    assert w.next_deadline() == 6.0
    w.on_packet(result(2, [0] * 4), now=6.5)  # chunk 1 enters the window with a fresh timer
    assert w.next_deadline() == 6.0
    assert [p.chunk_id for p in w.tick(6.0)] == [0]
    assert w.next_deadline() == 7.5 and [p.chunk_id for p in w.tick(7.5)] == [1]
    assert w.stats.retransmits == 6 and w.stats.sent == 3


def test_max_retries_fails_the_round():
    w, _ = make(max_retries=1)
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
    w, _ = make(direct_after=1)
    w.start(0.0)
    first = w.tick(1.0)
    assert [(p.chunk_id, p.agg_id, p.flags) for p in first] == [
        (2, 5, FLAG_RETRANSMIT), (0, 9, FLAG_RETRANSMIT)]
    second = w.tick(3.0)
    assert [(p.chunk_id, p.agg_id, p.fan_in, p.flags) for p in second] == [
        (2, AGG_ID_PS, 2, FLAG_RETRANSMIT | FLAG_FALLBACK),
        (0, AGG_ID_PS, 3, FLAG_RETRANSMIT | FLAG_FALLBACK)]
    assert second[1].values.tolist() == [10, 20, 30, 40] and second[1].bitmap == 0b10
    assert w.stats.direct == 2 and w.stats.retransmits == 4
    now, _ = make(direct_after=0)
    now.start(0.0)
    assert all(p.agg_id == AGG_ID_PS for p in now.tick(1.0))
    never, _ = make(direct_after=None)
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
        wire = protocol.encode_payload(protocol.InaHeader(*p.header_tuple()), p.values)
        back = InaPacket.from_header(*protocol.decode_payload(wire))
        assert back.header_tuple() == p.header_tuple()
        assert back.values.dtype == np.int32 and np.array_equal(back.values, p.values)
