"""PS merge state machine (docs/design.md §3.9): hand-traced sequences and a randomized exact-cover oracle."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from workers.ina.constants import (
    FLAG_FALLBACK,
    FLAG_INCOMPLETE,
    FLAG_RETRANSMIT,
    TYPE_GRAD,
    TYPE_PARTIAL,
    TYPE_RESULT,
)
from workers.ina.cover import CoverBudgetExceeded, find_exact_cover
from workers.ina.messages import mask_of
from workers.ina.ps import PsState
from workers.ina.result_copies import ResultCopies
from workers.ina.wire import InaPacket

K = 32
JOB = 7


class Grads:
    """Random int32 worker gradients g[round][worker] (n_chunks*K) and exact sums of any set."""

    def __init__(self, n_workers: int, n_chunks: int, seed: int = 0, big: bool = False) -> None:
        rng = np.random.default_rng(seed)
        lo, hi = (-(2**31), 2**31) if big else (-1000, 1000)
        self.n_chunks = n_chunks
        self.g: dict[int, np.ndarray] = {}
        self._rng, self._lo, self._hi, self.n_workers = rng, lo, hi, n_workers

    def of(self, r: int) -> np.ndarray:
        if r not in self.g:
            self.g[r] = self._rng.integers(self._lo, self._hi, (self.n_workers, self.n_chunks * K),
                                           dtype=np.int64).astype(np.int32)
        return self.g[r]

    def exact(self, r: int, workers, chunk: int | None = None) -> np.ndarray:
        """Sum with Python integers, reduced to int32 two's complement (independent of numpy)."""
        g = self.of(r)
        sl = slice(None) if chunk is None else slice(chunk * K, (chunk + 1) * K)
        tot = [sum(int(g[w, sl][i]) for w in workers) for i in range(len(g[0, sl]))]
        return np.array([((t + 2**31) % 2**32) - 2**31 for t in tot], dtype=np.int32)

    def pkt(self, workers, r: int = 0, c: int = 0, *, typ: int | None = None, flags: int = 0,
            job: int = JOB, count: int | None = None) -> InaPacket:
        ws = sorted(workers)
        if typ is None:
            typ = TYPE_GRAD if len(ws) == 1 else TYPE_PARTIAL
        return InaPacket(msg_type=typ, flags=flags, job_id=job, round=r, chunk_id=c, agg_id=0,
                         fan_in=len(ws), count=len(ws) if count is None else count,
                         worker_id=ws[0], bitmap=mask_of(ws), values=self.exact(r, ws, c))


def feed(ps: PsState, pkts):
    results, rounds = [], []
    for p in pkts:
        out = ps.on_packet(p)
        results += out.results + [r for _, r in out.replies]  # every RESULT sent
        rounds += out.completed_rounds
    return results, rounds


def test_full_partial_completes_chunk_and_round():
    g = Grads(4, 2)
    ps = PsState(JOB, range(4), n_chunks=2, k=K)
    res, rounds = feed(ps, [g.pkt(range(4), c=0)])
    assert len(res) == 1 and rounds == []
    r = res[0]
    assert (r.msg_type, r.flags, r.round, r.chunk_id, r.bitmap, r.count) == (
        TYPE_RESULT, 0, 0, 0, 0b1111, 4)
    assert np.array_equal(r.values, g.exact(0, range(4), 0))
    res, rounds = feed(ps, [g.pkt(range(4), c=1)])
    assert rounds == [0] and ps.current_round == 1
    assert np.array_equal(ps.round_sum(0), g.exact(0, range(4)))
    assert ps.stats.partials == 2 and ps.stats.chunks_completed == 2


def test_int32_wraparound_is_exact():
    g = Grads(5, 1, seed=3, big=True)
    ps = PsState(JOB, range(5), n_chunks=1, k=K)
    res, _ = feed(ps, [g.pkt([w]) for w in range(5)])
    exact = g.exact(0, range(5))
    assert np.array_equal(res[0].values, exact)
    # the big values really wrapped somewhere (else this test would not test wrapping)
    unwrapped = g.of(0).astype(np.int64).sum(axis=0)
    assert np.any(unwrapped != exact)


def test_collision_fallbacks_merge_with_partial():
    # s aggregated {0,1}; workers 2 and 3 collided at s_d and were forwarded raw (FALLBACK)
    g = Grads(4, 1)
    ps = PsState(JOB, range(4), n_chunks=1, k=K)
    res, _ = feed(ps, [g.pkt([2], flags=FLAG_FALLBACK), g.pkt([0, 1])])
    assert res == [] and ps.missing(0) == {0: 0b1000}
    res, rounds = feed(ps, [g.pkt([3], flags=FLAG_FALLBACK)])
    assert rounds == [0] and np.array_equal(res[0].values, g.exact(0, range(4)))
    assert ps.stats.fallbacks == 2 and ps.stats.grads == 2 and ps.stats.partials == 1


def test_lost_partial_recovered_by_raw_retransmissions():
    # s_d flushed {2,3} INCOMPLETE; the PARTIAL {0,1} of the other switch was lost;
    # workers 0 and 1 time out and their retransmissions reach the PS raw.
    g = Grads(4, 1)
    ps = PsState(JOB, range(4), n_chunks=1, k=K)
    res, _ = feed(ps, [g.pkt([2, 3], flags=FLAG_INCOMPLETE),
                       g.pkt([0], flags=FLAG_RETRANSMIT)])
    assert res == [] and ps.missing(0) == {0: 0b0010}
    res, _ = feed(ps, [g.pkt([1], flags=FLAG_RETRANSMIT)])
    assert np.array_equal(res[0].values, g.exact(0, range(4)))
    assert ps.stats.retransmits == 2 and ps.stats.incomplete == 1


def test_duplicates_are_not_double_counted_and_late_packets_get_the_result_again():
    g = Grads(3, 1)
    ps = PsState(JOB, range(3), n_chunks=1, k=K)
    res, _ = feed(ps, [g.pkt([0, 1]), g.pkt([0, 1]), g.pkt([0]), g.pkt([1])])
    assert res == [] and ps.stats.duplicates == 1 and ps.stats.redundant == 2
    res, _ = feed(ps, [g.pkt([2])])
    assert np.array_equal(res[0].values, g.exact(0, range(3)))
    # a retransmission (the RESULT was lost) and a re-emitted partial: stored RESULT again,
    # the second time in resend_copies (2) copies
    res, rounds = feed(ps, [g.pkt([1], flags=FLAG_RETRANSMIT), g.pkt([0, 1, 2])])
    assert rounds == [] and len(res) == 3
    for r in res:
        assert r.flags == FLAG_RETRANSMIT and np.array_equal(r.values, g.exact(0, range(3)))
    assert ps.stats.late == 2 and ps.stats.results_resent == 2 and ps.stats.results_sent == 1


def test_superset_after_incomplete_partial_replaces_it():
    g = Grads(4, 1)
    ps = PsState(JOB, range(4), n_chunks=1, k=K)
    res, _ = feed(ps, [g.pkt([0, 1], flags=FLAG_INCOMPLETE), g.pkt([0, 1, 2]), g.pkt([3])])
    assert np.array_equal(res[0].values, g.exact(0, range(4)))
    assert ps.stats.superseded == 1 and ps.anomalies == []


@pytest.mark.parametrize("raws", [[3, 4], [1, 2], [4, 2, 1]])
def test_partial_overlap_is_an_anomaly_but_still_exact(raws):
    # {0,3,4} stuck at s_d and {0,1,2} from another switch both reached the PS
    g = Grads(5, 1)
    ps = PsState(JOB, range(5), n_chunks=1, k=K)
    res, _ = feed(ps, [g.pkt([0, 3, 4], flags=FLAG_INCOMPLETE), g.pkt([0, 1, 2])])
    assert res == [] and ps.stats.overlaps == 1
    assert [(a.kind, a.bitmap) for a in ps.anomalies] == [("overlap", 0b00111)]
    res, _ = feed(ps, [g.pkt([w], flags=FLAG_RETRANSMIT) for w in raws])
    assert len(res) == 1 and np.array_equal(res[0].values, g.exact(0, range(5)))


def test_conflicting_duplicate_keeps_first_and_is_reported():
    g = Grads(2, 1)
    ps = PsState(JOB, range(2), n_chunks=1, k=K)
    good = g.pkt([0])
    bad = InaPacket(**{**{f: getattr(good, f) for f in good.__slots__},
                       "values": good.values + np.int32(1)})
    res, _ = feed(ps, [good, bad, g.pkt([1])])
    assert np.array_equal(res[0].values, g.exact(0, [0, 1]))
    assert ps.stats.conflicts == 1 and ps.anomalies[0].kind == "conflict"


def test_malformed_packets_are_dropped_and_counted():
    g = Grads(3, 2)
    ps = PsState(JOB, [0, 1, 2], n_chunks=2, k=K)
    good = g.pkt([0])
    fields = {f: getattr(good, f) for f in good.__slots__}
    bad = [
        g.pkt([0], job=JOB + 1),
        InaPacket(**{**fields, "msg_type": TYPE_RESULT}),
        InaPacket(**{**fields, "chunk_id": 2}),
        InaPacket(**{**fields, "bitmap": 0}),
        InaPacket(**{**fields, "bitmap": 1 << 5}),
        InaPacket(**{**fields, "bitmap": 0b10}),  # GRAD of worker 0 claiming worker 1
        g.pkt([0, 1], count=3),
        InaPacket(**{**fields, "values": good.values[:-1]}),
        InaPacket(**{**fields, "values": good.values.astype(np.int64)}),
        InaPacket(**{**fields, "round": -1}),
    ]
    res, _ = feed(ps, bad)
    assert res == [] and ps.stats.malformed == len(bad) and ps.stats.packets == 0
    assert ps.stats.malformed_reasons == {"job": 1, "type": 1, "chunk": 1, "bitmap": 2,
                                          "grad_bitmap": 1, "count": 1, "values": 2, "round": 1}
    assert ps.missing(0) == {0: 0b111, 1: 0b111}


def test_round_rules_old_current_future():
    g = Grads(2, 1)
    ps = PsState(JOB, [0, 1], n_chunks=1, k=K, keep_done=1, max_ahead=1)
    # round 1 arrives before round 0 completes: merged into its own state (max_ahead=1)
    _, rounds = feed(ps, [g.pkt([0], r=1), g.pkt([1], r=1)])
    assert rounds == [1] and ps.current_round == 0 and ps.is_round_complete(1)
    # round 2 is 2 ahead of current round 0: dropped
    feed(ps, [g.pkt([0], r=2)])
    assert ps.stats.future_round == 1
    _, rounds = feed(ps, [g.pkt([0, 1], r=0)])
    assert rounds == [0] and ps.current_round == 2  # jumps over the completed round 1
    # round 1 is kept (keep_done=1): a late packet gets its RESULT again; round 0 is gone
    res, _ = feed(ps, [g.pkt([1], r=1, flags=FLAG_RETRANSMIT), g.pkt([1], r=0)])
    assert [(r.round, r.flags) for r in res] == [(1, FLAG_RETRANSMIT)]
    assert np.array_equal(res[0].values, g.exact(1, [0, 1]))
    assert ps.stats.stale_round == 1
    with pytest.raises(KeyError):
        ps.round_sum(0)
    with pytest.raises(KeyError):
        ps.round_sum(2)


def test_pieces_cap_keeps_singletons():
    g = Grads(4, 1)
    ps = PsState(JOB, range(4), n_chunks=1, k=K, max_pieces=2)
    res, _ = feed(ps, [g.pkt([0, 1]), g.pkt([1, 2]), g.pkt([2, 3]), g.pkt([3]), g.pkt([2])])
    assert ps.stats.pieces_dropped == 1 and ps.anomalies[-1].kind == "pieces_cap"
    assert len(res) == 1 and np.array_equal(res[0].values, g.exact(0, range(4)))


def test_cover_budget_anomaly():
    g = Grads(4, 1)
    ps = PsState(JOB, range(4), n_chunks=1, k=K, cover_budget=1)
    res, _ = feed(ps, [g.pkt([0, 1]), g.pkt([1, 2, 3]), g.pkt([0])])
    assert res == [] and ps.anomalies[-1].kind == "cover_budget"


def test_find_exact_cover_by_hand():
    assert find_exact_cover([0b011, 0b100], 0b111) == [0b011, 0b100]
    assert find_exact_cover([0b001, 0b010, 0b100, 0b011], 0b111) == [0b011, 0b100]  # larger first
    # {0,1} is a dead end (no piece holds 2 without 1): backtrack to {0} + {1,2}
    assert find_exact_cover([0b011, 0b110, 0b001], 0b111) == [0b001, 0b110]
    assert find_exact_cover([0b011, 0b110], 0b111) is None
    assert find_exact_cover([0b1001, 0b110], 0b111) is None  # bit 3 outside full: ignored
    with pytest.raises(CoverBudgetExceeded):
        find_exact_cover([0b011, 0b110, 0b001], 0b111, budget=1)


def _brute_cover_exists(bitmaps: set[int], full: int) -> bool:
    bs = sorted(bitmaps)
    for n in range(1, len(bs) + 1):
        for combo in itertools.combinations(bs, n):
            acc = 0
            ok = True
            for b in combo:
                if acc & b:
                    ok = False
                    break
                acc |= b
            if ok and acc == full:
                return True
    return False


def test_randomized_arrivals_give_the_exact_sum_exactly_when_a_cover_exists():
    """Any order, duplication and mix of valid pieces: the PS completes exactly when an exact
    cover exists among what arrived (brute-force oracle), once, with the exact sum."""
    rng = np.random.default_rng(12345)
    for trial in range(300):
        n = int(rng.integers(1, 7))
        g = Grads(n, 1, seed=trial, big=bool(trial % 2))
        full = (1 << n) - 1
        ps = PsState(JOB, range(n), n_chunks=1, k=K)
        # a valid decomposition (random partition) plus random extra valid pieces
        labels = rng.integers(0, n, n)
        pkts = [g.pkt([w for w in range(n) if labels[w] == lab]) for lab in set(labels)]
        for _ in range(int(rng.integers(0, 6))):
            sub = [w for w in range(n) if rng.random() < 0.5] or [int(rng.integers(0, n))]
            pkts.append(g.pkt(sub))
        pkts += [pkts[int(i)] for i in rng.integers(0, len(pkts), int(rng.integers(0, 4)))]
        order = rng.permutation(len(pkts))
        seen: set[int] = set()
        done = False
        for i in order:
            p = pkts[int(i)]
            seen.add(p.bitmap)
            out = ps.on_packet(p)
            if done:
                assert all(r.flags == FLAG_RETRANSMIT for r in out.results)
                continue
            expect = _brute_cover_exists(seen, full)
            assert bool(out.results) == expect, (trial, sorted(seen))
            if expect:
                done = True
                assert out.completed_rounds == [0]
                assert np.array_equal(out.results[0].values, g.exact(0, range(n)))
        assert done  # the decomposition itself is a cover
        assert ps.stats.results_sent == 1


def test_result_echo_names_the_packet_that_caused_it():
    """docs/protocol.md §6: RESULT worker_id = sender of the packet that completed (or asked
    again for) the chunk; fan_in = 1 + its copy number when it is a raw GRAD, else 0."""
    from dataclasses import replace

    from workers.ina.wire import NO_WORKER, Echo, with_copy

    g = Grads(3, 2)
    ps = PsState(JOB, range(3), n_chunks=2, k=K)
    # chunk 0: an aggregate from a switch (worker_id = the GRAD that completed it there)
    res, _ = feed(ps, [replace(g.pkt([0, 1, 2]), worker_id=2)])
    assert (res[0].flags, res[0].worker_id, res[0].fan_in) == (0, 2, 0)
    assert res[0].echo == Echo(2, None)
    # chunk 1: completed by worker 1's raw copy 3 (FALLBACK, RETRANSMIT)
    res, _ = feed(ps, [g.pkt([0, 2], c=1),
                       g.pkt([1], c=1, flags=with_copy(FLAG_RETRANSMIT | FLAG_FALLBACK, 3))])
    # (FALLBACK on the RESULT: a merged packet fell back, docs/protocol.md §6)
    assert (res[0].flags, res[0].worker_id, res[0].fan_in) == (FLAG_FALLBACK, 1, 4)
    assert res[0].echo == Echo(1, 3)
    # a late copy 5 of worker 0: the resend names it
    res, _ = feed(ps, [g.pkt([0], c=1, flags=with_copy(FLAG_RETRANSMIT, 5))])
    assert (res[0].flags, res[0].worker_id, res[0].fan_in) == (FLAG_RETRANSMIT, 0, 6)
    assert res[0].echo == Echo(0, 5)
    # copy bits above the protocol flags never change what is merged
    assert np.array_equal(res[0].values, g.exact(0, range(3), 1))
    # a member change completes a chunk on its own: no packet caused that RESULT
    ps2 = PsState(JOB, range(3), n_chunks=1, k=K)
    feed(ps2, [g.pkt([0, 1])])
    _, out = ps2.change_members([0, 1])
    assert [(r.worker_id, r.fan_in) for r in out.results] == [(NO_WORKER, 0)]


def test_resends_escalate_to_more_copies_from_the_second_one():
    g = Grads(2, 2)
    ps = PsState(JOB, range(2), n_chunks=2, k=K)
    feed(ps, [g.pkt([0, 1]), g.pkt([0, 1], c=1)])
    late = g.pkt([0], flags=FLAG_RETRANSMIT)
    assert [len(feed(ps, [late])[0]) for _ in range(4)] == [1, 2, 2, 2]
    assert len(feed(ps, [g.pkt([1], c=1, flags=FLAG_RETRANSMIT)])[0]) == 1  # per chunk
    assert ps.stats.late == 5 and ps.stats.results_resent == 5
    one = PsState(JOB, range(2), n_chunks=1, k=K, resend_copies=1)
    feed(one, [g.pkt([0, 1])])
    assert [len(feed(one, [late])[0]) for _ in range(3)] == [1, 1, 1]
    with pytest.raises(ValueError):
        PsState(JOB, range(2), n_chunks=1, k=K, resend_copies=0)


def test_a_late_grad_is_answered_to_its_worker_alone():
    """A worker's own late GRAD (it lost the RESULT, or timed out early): the stored RESULT
    for that worker alone; a switch's re-emitted PARTIAL (several workers asked): down the
    tree, which also releases the slots on the way (docs/protocol.md §6)."""
    g = Grads(3, 1)
    ps = PsState(JOB, range(3), n_chunks=1, k=K, unicast_late=True)
    out = ps.on_packet(g.pkt([0, 1, 2]))
    assert len(out.results) == 1 and out.replies == []
    out = ps.on_packet(g.pkt([2], flags=FLAG_RETRANSMIT))
    assert out.results == [] and [w for w, _ in out.replies] == [2]
    (w, res), = out.replies
    assert res.flags == FLAG_RETRANSMIT and res.bitmap == 0b111
    assert np.array_equal(res.values, g.exact(0, range(3)))
    # a re-emitted aggregate (worker 0's retransmission made a switch send it) after the
    # first answer: to worker 0 alone, once (it had not asked before)
    out = ps.on_packet(g.pkt([0, 1], flags=FLAG_RETRANSMIT))
    assert out.results == [] and [w for w, _ in out.replies] == [0]
    out = ps.on_packet(g.pkt([0], flags=FLAG_RETRANSMIT))  # it asks again: 2 copies
    assert [w for w, _ in out.replies] == [0, 0] and out.results == []
    assert ps.stats.results_resent == 3 and ps.stats.results_unicast == 3
    # the first late request of a chunk that is a PARTIAL goes down the tree (it releases
    # the slots that still hold the chunk on the way)
    first = PsState(JOB, range(3), n_chunks=1, k=K, unicast_late=True)
    first.on_packet(g.pkt([0, 1, 2]))
    out = first.on_packet(g.pkt([0, 1], flags=FLAG_RETRANSMIT))
    assert out.replies == [] and len(out.results) == 1
    # without unicast_late (a caller that can only multicast): every answer multicast
    multi = PsState(JOB, range(3), n_chunks=1, k=K)
    multi.on_packet(g.pkt([0, 1, 2]))
    out = multi.on_packet(g.pkt([2], flags=FLAG_RETRANSMIT))
    assert out.replies == [] and len(out.results) == 1 and multi.stats.results_unicast == 0


def test_many_late_asks_of_one_chunk_at_once_get_one_multicast():
    """Asks for a completed chunk from many workers at once (its RESULT is late in the PS's
    own queue): the third within LATE_WINDOW_S is answered by one RESULT down the tree, and
    none for a window after it (workers.ina.late_asks)."""
    g = Grads(4, 1)
    ps = PsState(JOB, range(4), n_chunks=1, k=K, unicast_late=True)
    assert len(ps.on_packet(g.pkt([0, 1, 2, 3]), now=1.0).results) == 1
    answers = [ps.on_packet(g.pkt([w], flags=FLAG_RETRANSMIT), now=1.2 + 0.01 * w)
               for w in range(4)]
    assert [[w for w, _ in o.replies] for o in answers] == [[0], [1], [], []]
    assert [len(o.results) for o in answers] == [0, 0, 1, 0]
    (res,) = answers[2].results
    assert res.bitmap == 0b1111 and np.array_equal(res.values, g.exact(0, range(4)))
    assert ps.stats.results_late_multicast == 1 and ps.stats.results_unicast == 2
    # a window later one ask is one worker's again
    out = ps.on_packet(g.pkt([3], flags=FLAG_RETRANSMIT), now=1.5)
    assert [w for w, _ in out.replies] == [3] and out.results == []


def test_a_flush_asks_the_workers_it_lacks():
    """A switch flushed an incomplete aggregate (someone's retransmission found it waiting):
    the PS asks exactly the workers of that aggregation point the flush lacks, each with a
    RESULT flagged INCOMPLETE whose bitmap leaves that worker out, never down the tree
    (docs/protocol.md §6, "NACKs")."""
    g = Grads(6, 2)
    # workers 0-2 aggregate at switch 5, workers 3-5 at switch 7, for both chunks
    routes = {w: [(c, 5 if w < 3 else 7, 3) for c in range(2)] for w in range(6)}
    ps = PsState(JOB, range(6), n_chunks=2, k=K, unicast_late=True, routes=routes)
    out = ps.on_packet(g.pkt([0, 2], flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE), 0.0)
    assert out.results == [] and out.replies == []
    # switch 5's group lacks 1; switch 7's group (3-5), of which the PS has nothing, is
    # asked through one worker, whose resend makes switch 7 flush or re-emit
    assert [w for w, _ in out.nacks] == [1, 3]
    (_, nack), _ = out.nacks
    assert nack.msg_type == TYPE_RESULT and nack.flags == FLAG_INCOMPLETE
    assert not nack.bitmap >> 1 & 1 and not nack.bitmap >> 3 & 1 and nack.chunk_id == 0
    # a flush from higher up (several points' workers): every worker the PS has not got
    out = ps.on_packet(g.pkt([0, 1, 2, 3], c=1, flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE), 0.0)
    assert [w for w, _ in out.nacks] == [4, 5]
    # the asked workers' pieces complete the chunk exactly; nothing more is asked (3 was
    # asked a moment ago: its answer may be on its way)
    out = ps.on_packet(g.pkt([1], flags=FLAG_RETRANSMIT | FLAG_FALLBACK), 0.01)
    assert out.nacks == []
    out = ps.on_packet(g.pkt([3, 4, 5], flags=0), 0.02)
    # (3 NACKs for 2 chunks' 12 deliveries: the RESULT goes in copies, "Lost RESULTs")
    assert out.results and all(np.array_equal(res.values, g.exact(0, range(6), 0))
                               for res in out.results)
    assert ps.stats.nacks == 4
    # without routes (no path to one worker alone) the PS asks nobody
    quiet = PsState(JOB, range(6), n_chunks=2, k=K, unicast_late=True)
    assert quiet.on_packet(g.pkt([0, 2], flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE)).nacks == []


def test_a_retransmission_that_came_raw_asks_again_whom_a_lost_nack_asked():
    """A prober whose copies now go straight to the PS (``direct_after``) no longer makes
    the waiting slot flush, and a flush is what asked again whom a lost NACK had asked.  So
    a raw retransmission asks again the workers asked for the chunk at least the NACK
    round-trip bound ago and not heard from since (k=4, 2 % loss: a chunk waited 1.7 s for
    that worker's own hold-off), not those asked less long ago; a raw retransmission of a
    chunk nobody was asked for asks nothing."""
    g = Grads(6, 2)
    # worker 0 sends to s_d (9), workers 1-5 aggregate at switch 5, whose PARTIAL s_d waits for
    routes = {w: [(c, 9 if w == 0 else 5, 5) for c in range(2)] for w in range(6)}
    ps = PsState(JOB, range(6), n_chunks=2, k=K, unicast_late=True, routes=routes)
    escaped = FLAG_RETRANSMIT | FLAG_FALLBACK
    assert ps.on_packet(g.pkt([0], c=1, flags=escaped), 0.0).nacks == []
    # chunk 1: a round trip measured (worker 2 asked at 0.0, heard at 0.01): bound 0.04
    ps.on_packet(g.pkt([1, 3, 4, 5], c=1, flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE), 0.0)
    ps.on_packet(g.pkt([2], c=1, flags=escaped), 0.01)
    assert ps.result_copies.rtt_bound() == pytest.approx(0.04)
    # chunk 0: s_d's flush holds worker 0; switch 5 is silent: worker 1 asked (lost)
    flush = g.pkt([0], typ=TYPE_PARTIAL, flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE)
    assert [w for w, _ in ps.on_packet(flush, 1.0).nacks] == [1]
    assert ps.on_packet(g.pkt([0], flags=escaped), 1.02).nacks == []  # within the bound
    assert [w for w, _ in ps.on_packet(g.pkt([0], flags=escaped), 1.05).nacks] == [1]
    out = ps.on_packet(g.pkt([1, 2, 3, 4, 5], flags=FLAG_RETRANSMIT), 1.06)
    assert out.results and np.array_equal(out.results[0].values, g.exact(0, range(6), 0))


def _reask_due(ps: PsState) -> float | None:
    """When ``ps`` next asks again an unanswered NACK of round 0 (None: none due)."""
    return ps.result_copies.reask_due(0, ps.n_chunks - ps._rounds[0].n_done)


def test_a_lost_nack_in_a_rounds_last_chunks_is_asked_again():
    """A NACK (or its answer) can be lost, and then the chunk waits for its prober's next
    timeout, backed off.  In a round's last ``tail`` (4) chunks the PS's timer asks a worker
    again when its NACK went unanswered for twice the round-trip bound, then four and eight
    times it, at most REASKS (3) times, flagged RETRANSMIT (the worker never refuses it),
    one loss counted once; earlier in the round (more than 4 chunks left) it does not."""
    g = Grads(3, 6)
    routes = {w: [(c, 5, 3) for c in range(6)] for w in range(3)}
    ps = PsState(JOB, range(3), n_chunks=6, k=K, unicast_late=True, routes=routes)
    flush = FLAG_RETRANSMIT | FLAG_INCOMPLETE
    # chunk 5: worker 2 asked at t=0 and heard at t=0.01: bound 0.04, and a chunk done
    assert [w for w, _ in ps.on_packet(g.pkt([0, 1], c=5, flags=flush), 0.0).nacks] == [2]
    assert ps.on_packet(g.pkt([2], c=5, flags=FLAG_RETRANSMIT | FLAG_FALLBACK), 0.01).results
    assert ps.result_copies.rtt_bound(answers=True) == pytest.approx(0.04)
    # chunk 0: worker 1 asked at t=1.0, never heard; five chunks left: not asked again
    assert [w for w, _ in ps.on_packet(g.pkt([0, 2], flags=flush), 1.0).nacks] == [1]
    assert _reask_due(ps) is None
    assert [n for _, n in ps.tick(2.0).nacks if n.chunk_id == 0] == []
    assert ps.stats.reasked == 0
    # chunks 1-4 complete: the round's tail (one chunk left)
    for c in range(1, 5):
        assert ps.on_packet(g.pkt([0, 1, 2], c=c), 2.0).results
    due = _reask_due(ps)
    assert due == pytest.approx(1.0 + 2 * 0.04) and ps.next_deadline() <= due
    counted = ps.result_copies._nacks[0][0]
    (w, nack), = ps.tick(2.0).nacks
    assert w == 1 and nack.chunk_id == 0 and ps.stats.reasked == 1
    assert nack.flags == FLAG_INCOMPLETE | FLAG_RETRANSMIT and not nack.bitmap >> 1 & 1
    assert ps.result_copies._nacks[0][0] == counted  # one loss, counted once
    # again 4 and 8 bounds after each ask, then no more
    assert _reask_due(ps) == pytest.approx(2.0 + 4 * 0.04)
    for t in (2.159, 2.16, 2.48):
        assert [w for w, n in ps.tick(t).nacks if n.chunk_id == 0] == ([] if t < 2.16 else [1])
    assert _reask_due(ps) is None and ps.stats.reasked == 3
    assert [w for w, n in ps.tick(9.0).nacks if n.chunk_id == 0] == []
    # the answer completes the chunk exactly
    out = ps.on_packet(g.pkt([1], flags=FLAG_RETRANSMIT), 9.1)
    assert out.results and np.array_equal(out.results[0].values, g.exact(0, range(3), 0))


def test_a_round_merged_again_after_a_member_change_leaves_its_tail():
    """A member change merges the lowest incomplete round again from the start: the
    chunks it had completed count no more, so its NACKs are asked again only once its
    last four chunks are reached again."""
    g = Grads(3, 6)
    routes = {w: [(c, 5, 3) for c in range(6)] for w in range(3)}
    ps = PsState(JOB, range(3), n_chunks=6, k=K, unicast_late=True, routes=routes)
    flush = FLAG_RETRANSMIT | FLAG_INCOMPLETE
    ps.on_packet(g.pkt([0, 1], c=5, flags=flush), 0.0)
    ps.on_packet(g.pkt([2], c=5, flags=FLAG_RETRANSMIT | FLAG_FALLBACK), 0.01)
    assert [w for w, _ in ps.on_packet(g.pkt([0, 2], flags=flush), 1.0).nacks] == [1]
    for c in range(1, 5):
        ps.on_packet(g.pkt([0, 1, 2], c=c), 2.0)
    assert _reask_due(ps) == pytest.approx(1.08)
    ps.change_members([0, 1])
    assert ps.current_round == 0 and _reask_due(ps) is None


def test_a_worker_asked_less_than_a_round_trip_ago_is_not_asked_again():
    """Every retransmission that reaches a waiting slot flushes it again; a worker the PS
    asked for the chunk less than its round-trip bound ago (``ResultCopies.pending``: 4x
    the lower quartile of its NACK round trips) is not asked again -- its answer may be on
    its way -- and is asked again once the bound has passed without it."""
    g = Grads(3, 2)
    routes = {w: [(c, 5, 3) for c in range(2)] for w in range(3)}
    ps = PsState(JOB, range(3), n_chunks=2, k=K, unicast_late=True, routes=routes)
    flush = FLAG_RETRANSMIT | FLAG_INCOMPLETE
    # chunk 1: worker 2 asked at t=0 and heard at t=0.01: one round trip, bound 0.04
    assert [w for w, _ in ps.on_packet(g.pkt([0, 1], c=1, flags=flush), 0.0).nacks] == [2]
    ps.on_packet(g.pkt([2], c=1, flags=FLAG_RETRANSMIT | FLAG_FALLBACK), 0.01)
    assert ps.result_copies.rtt_bound() == pytest.approx(0.04)
    # chunk 0: worker 1 asked at t=1.0; flushes at 1.02 and 1.039 ask nobody
    assert [w for w, _ in ps.on_packet(g.pkt([0, 2], flags=flush), 1.0).nacks] == [1]
    assert ps.on_packet(g.pkt([0], flags=flush), 1.02).nacks == []
    assert ps.on_packet(g.pkt([2], flags=flush), 1.039).nacks == []
    # the bound passed: asked again, and its answer completes the chunk exactly
    assert [w for w, _ in ps.on_packet(g.pkt([0, 2], flags=flush), 1.041).nacks] == [1]
    out = ps.on_packet(g.pkt([1], flags=FLAG_RETRANSMIT | FLAG_FALLBACK), 1.05)
    assert out.results and np.array_equal(out.results[0].values, g.exact(0, range(3), 0))
    assert ps.stats.nacks == 3


def test_a_piece_at_the_instant_of_an_ask_does_not_shorten_the_wait_for_its_answer():
    """A piece that reaches the PS at the very instant of a NACK was on its way before it:
    a round trip of zero, no answer.  Where such pieces made the lower quartile 0, every
    flush asked the same workers again (k=16, budget 4, 0.1 % loss, seed 2: the start of a
    storm, ratio 0.195).  ``pending`` leaves them out of its bound; the judgement of lost
    RESULTs (``rtt_bound()``) keeps them."""
    g = Grads(3, 2)
    routes = {w: [(c, 5, 3) for c in range(2)] for w in range(3)}
    ps = PsState(JOB, range(3), n_chunks=2, k=K, unicast_late=True, routes=routes)
    rc = ps.result_copies
    flush = FLAG_RETRANSMIT | FLAG_INCOMPLETE
    # chunk 1: worker 2 asked at t=0 and heard at t=0.01 (a round trip of 0.01 s), then
    # three asks whose pieces came at their instant (round trips of 0)
    assert [w for w, _ in ps.on_packet(g.pkt([0, 1], c=1, flags=flush), 0.0).nacks] == [2]
    ps.on_packet(g.pkt([2], c=1, flags=FLAG_RETRANSMIT | FLAG_FALLBACK), 0.01)
    for t in (0.5, 0.6, 0.7):
        rc.nacked(0, 1, 1, 0, t)
        rc.heard(0, 1, 1 << 0, t)
    assert rc.rtt_bound() == 0.0 and rc.rtt_bound(answers=True) == pytest.approx(0.04)
    # chunk 0: worker 1 asked at t=1.0; the flush at 1.02 asks nobody, the one at 1.041 asks
    # it again, and its answer completes the chunk exactly
    assert [w for w, _ in ps.on_packet(g.pkt([0, 2], flags=flush), 1.0).nacks] == [1]
    assert ps.on_packet(g.pkt([0], typ=TYPE_PARTIAL, flags=flush), 1.02).nacks == []
    assert [w for w, _ in ps.on_packet(g.pkt([2], typ=TYPE_PARTIAL, flags=flush),
                                       1.041).nacks] == [1]
    out = ps.on_packet(g.pkt([1], flags=FLAG_RETRANSMIT | FLAG_FALLBACK), 1.05)
    assert out.results and np.array_equal(out.results[0].values, g.exact(0, range(3), 0))


def test_a_whole_group_s_flush_asks_the_silent_points():
    """A flush of a group that is all there (k=16, budget 4: the prober's own switch had
    everything; what is missing is another point's PARTIAL) asks one worker of each point
    the PS has heard nothing from, every raw sender it lacks, and nobody of a point it has
    heard from (that point's own flush asked its missing ones).  Before, it asked nobody
    and the chunk waited for the other workers' hold-off."""
    g = Grads(8, 1)
    # workers 0-2 at switch 5, 3-4 at switch 7, 5 at switch 9, 6-7 raw to the PS
    point = {0: 5, 1: 5, 2: 5, 3: 7, 4: 7, 5: 9, 6: 0, 7: 0}
    routes = {w: [(0, a, 1)] for w, a in point.items()}
    ps = PsState(JOB, range(8), n_chunks=1, k=K, unicast_late=True, routes=routes)
    assert ps.on_packet(g.pkt([5], typ=TYPE_PARTIAL)).nacks == []  # switch 9's aggregate
    assert ps.on_packet(g.pkt([6])).nacks == []  # a raw GRAD
    out = ps.on_packet(g.pkt([0, 1, 2], flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE))
    assert [w for w, _ in out.nacks] == [3, 7]
    # their answers (switch 7's re-emitted aggregate, worker 7's GRAD) complete it exactly
    ps.on_packet(g.pkt([3, 4], flags=FLAG_RETRANSMIT))
    out = ps.on_packet(g.pkt([7], flags=FLAG_RETRANSMIT))
    assert len(out.results) >= 1 and np.array_equal(out.results[0].values,
                                                      g.exact(0, range(8), 0))


def _ask(g: Grads, w: int, c: int, copy: int, r: int = 0) -> InaPacket:
    """Worker ``w``'s retransmitted GRAD of chunk ``c``, copy number ``copy``."""
    return InaPacket.grad(JOB, r, c, 0, 1, w, g.exact(r, [w], c), FLAG_RETRANSMIT, copy=copy)


def test_results_go_in_copies_while_workers_lose_them():
    """Lost RESULTs (workers/ina/result_copies.py): each new RESULT goes in the fewest copies
    n with q ** n x (chunks x workers) <= lost_target.  4 workers, 4 chunks (16 deliveries
    a round, a round so far counted as 8).  Worker 1 asks for chunk 0 (no evidence: the PS
    answers), then asks again by a later copy: q ** 2 = 1/8, q = 0.354, so
    ceil(log(1/16) / log(0.354)) = 3 copies, and chunks 0 and 1, sent in one, get the
    2 missing copies each at once (flagged RETRANSMIT, echoing no packet).  The counts
    halve at the round's end: round 1 q = sqrt(0.5 / 8), 2 copies (round 0's RESULTs
    already went in more); round 2 the repeated ask is dropped, 1 copy."""
    g = Grads(4, 4)
    ps = PsState(JOB, range(4), n_chunks=4, k=K, unicast_late=True)
    assert len(ps.on_packet(g.pkt(range(4), c=0)).results) == 1
    assert len(ps.on_packet(_ask(g, 1, 0, 1)).replies) == 1  # answered, not yet evidence
    assert len(ps.on_packet(g.pkt(range(4), c=1)).results) == 1
    assert len(ps.on_packet(_ask(g, 1, 0, 2)).replies) == 2  # asked again (resend_copies)
    out = ps.on_packet(g.pkt(range(4), c=2))
    assert [(p.chunk_id, p.flags) for p in out.results] == (
        [(2, 0)] * 3 + [(0, FLAG_RETRANSMIT)] * 2 + [(1, FLAG_RETRANSMIT)] * 2)
    assert out.results[0] is out.results[2]
    assert all(p.worker_id == 0xFFFF and np.array_equal(p.values, g.exact(0, range(4), p.chunk_id))
               for p in out.results[3:])
    ps.on_packet(g.pkt(range(4), c=3))
    assert [len(ps.on_packet(g.pkt(range(4), r=1, c=c)).results) for c in range(4)] == [2] * 4
    assert [len(ps.on_packet(g.pkt(range(4), r=2, c=c)).results) for c in range(4)] == [1] * 4
    assert ps.stats.results_doubled == 6 and ps.stats.result_copies == 2 * 2 + 4 * 1
    assert ps.stats.result_topups == 4


def test_delayed_results_and_spurious_late_grads_send_one_copy():
    """Congestion is not loss: every worker's timer firing before its queued RESULT arrives
    (one late GRAD each, of every chunk, in every round, within the PS's measured round
    trip of 0.1 s), the delayed first copies arriving after them, network duplicates of
    both, and a switch's flush whose NACKs ask for contributions merely queued: every
    RESULT still goes in one copy.  (Before the fix the first late GRAD of round 0 already
    doubled the next RESULT, and 16 late GRADs a round asked for 4.)"""
    g = Grads(4, 4)
    ps = PsState(JOB, range(4), n_chunks=4, k=K, unicast_late=True)
    rc = ps.result_copies
    rc.nacked(0, 1, 0, 3, 0.0)
    rc.heard(0, 0, 1 << 3, 0.1)  # one NACK round trip: 0.1 s, bound 0.3 s
    t = 1.0
    for r in range(3):
        for c in range(4):
            out = ps.on_packet(g.pkt(range(4), r=r, c=c), t)
            assert len(out.results) == 1, (r, c)
            for w in range(4):
                for pkt in (_ask(g, w, c, 1, r), _ask(g, w, c, 1, r), _ask(g, w, c, 0, r)):
                    ps.on_packet(pkt, t + 0.05 * (w + 1))
            rc.nacked(r, 3)  # flushes of queued contributions
            t += 1.0
    assert ps.stats.results_doubled == 0 and ps.stats.late == 3 * 4 * 4 * 3
    assert rc.lost_by == {} and rc.copies(3, 4) == 1


def test_a_late_grad_is_a_lost_result_only_when_it_cannot_have_crossed_it():
    """"Lost RESULTs" (workers/ina/result_copies.py): a worker's first ask of a completed
    chunk counts as a lost RESULT only when it arrives more than the PS's round-trip bound
    after the RESULT (3 times the median of its NACK round trips: NACK -> the NACKed
    worker's contribution), since one sent before the RESULT reached its worker crossed
    it; without a clock or a measured round trip, never.  8 workers at one switch, 4
    chunks (32 deliveries a round, so far counted as 16).  (Before the fix a NACK alone
    doubled the RESULT and any late GRAD asked for 4 copies.)"""
    g = Grads(8, 4)
    routes = {w: [(c, 5, 8) for c in range(4)] for w in range(8)}
    ps = PsState(JOB, range(8), n_chunks=4, k=K, unicast_late=True, routes=routes)
    rc = ps.result_copies
    # chunk 0: the switch flushes workers 0-6, the PS NACKs worker 7, whose resend comes
    # 0.05 s later and completes it: bound 4 x 0.05 = 0.2 s
    out = ps.on_packet(g.pkt(range(7), flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE), 10.0)
    assert [w for w, _ in out.nacks] == [7]
    out = ps.on_packet(_ask(g, 7, 0, 1), 10.05)
    assert len(out.results) == 1 and rc.rtt_bound() == pytest.approx(0.2)
    # worker 3 asks within the bound, worker 5 with no clock: answered, no evidence
    assert len(ps.on_packet(_ask(g, 3, 0, 1), 10.2).replies) == 1
    assert len(ps.on_packet(_ask(g, 5, 0, 1)).replies) == 1
    assert len(ps.on_packet(g.pkt(range(8), c=1), 10.9).results) == 1
    assert rc.lost_by == {}
    # worker 4 asks 1 s after the RESULT: it was lost.  q = 1/16, so
    # ceil(log(1/32) / log(1/16)) = 2 copies (the NACKs count from now on too: 1/16), and
    # chunks 0 and 1, sent in one, get their second copy at once
    assert len(ps.on_packet(_ask(g, 4, 0, 1), 11.05).replies) == 1
    assert rc.lost_by == {(1, 1): 1.0}
    out = ps.on_packet(g.pkt(range(8), c=2), 11.2)
    assert [p.chunk_id for p in out.results] == [2, 2, 0, 1]
    assert ps.stats.results_doubled == 1 and ps.stats.result_topups == 2
    # before any NACK round trip is measured the PS does not judge
    fresh = PsState(JOB, range(8), n_chunks=4, k=K, unicast_late=True, routes=routes)
    fresh.on_packet(g.pkt(range(8)), 0.0)
    fresh.on_packet(_ask(g, 4, 0, 1), 5.0)
    assert fresh.result_copies.lost_by == {} and fresh.copies(0) == 1
    # the bound follows the lower quartile of the NACK round trips, timed from the
    # latest NACK: NACKs answered late (refused while the worker's copy was young, or the
    # answer lost) do not move it
    for rtt in (0.9, 0.04, 0.06, 0.7):
        rc.nacked(0, 1, 3, 1, 19.0)
        rc.nacked(0, 1, 3, 1, 20.0)
        rc.heard(0, 3, 1 << 1, 20.0 + rtt)
    assert rc.rtt_bound() == pytest.approx(4 * 0.05)


def test_result_copies_follow_the_loss_and_its_cap():
    """4 workers, 4 chunks (16 deliveries a round; a round so far counts as 8).  Repeated
    asks of a RESULT sent once are q ** 2 of its deliveries: 1 of 8 asks for 3 copies, 2
    (q = 1/2) for 4, 4 (q = 0.71) for 8, held at ``max_copies`` (4; 1: one copy whatever
    is lost).  Of a RESULT sent in 2 copies q ** 3: 1 of 8 is q = 1/2, 4 copies.  NACKs
    count once a repeated ask has shown RESULTs lost: 6 of 8 (q = 3/4) ask for 10, the
    cap 4; without a repeated ask none."""
    for lost, cap, want in (([1], 4, 3), ([1, 2], 4, 4), ([0, 1, 2, 3], 6, 6),
                            ([0, 1, 2, 3], 1, 1)):
        g = Grads(4, 4)
        ps = PsState(JOB, range(4), n_chunks=4, k=K, unicast_late=True, max_copies=cap)
        ps.on_packet(g.pkt(range(4), c=0))
        for w in lost:
            ps.on_packet(_ask(g, w, 0, 1))
            ps.on_packet(_ask(g, w, 0, 2))
            ps.on_packet(_ask(g, w, 0, 3))  # a third ask: q ** (m + 2), not counted
        out = ps.on_packet(g.pkt(range(4), c=1))  # (chunk 0 is topped up to as many)
        assert sum(p.chunk_id == 1 for p in out.results) == min(cap, want)
    rc = ResultCopies(4)
    rc.sent(0, 2, 4)
    assert not rc.late_grad(0, 0, 1, 5, 2) and rc.late_grad(0, 0, 1, 6, 2)
    assert rc.copies(0, 4) == 4
    for nacks, want in ((0, 3), (6, 4)):
        rc = ResultCopies(4)
        rc.sent(0, 1, 4)
        rc.nacked(0, nacks)
        assert rc.copies(0, 4) == 1  # NACKs alone: no RESULT shown lost
        rc.late_grad(0, 0, 1, 15, 1)
        assert rc.late_grad(0, 0, 1, 0, 1)  # copy numbers wrap mod 16
        assert rc.copies(0, 4) == want


def test_chained_results_name_the_chunk_completed_before_and_copy_only_the_tail():
    """Chained RESULTs (workers/ina/ps.py, "Lost RESULTs"; docs/protocol.md §6): with
    ``chain`` each RESULT names the chunk the PS completed before it in its round
    (``prev_mark``; none for the round's first), and so does every answer to a late GRAD
    (a worker that lost both asks on along the chain).  Without loss every RESULT goes in
    one copy; once the job has shown loss (a retransmission reached the PS) the round's
    last ``chain_tail`` RESULTs, which no later one names, go in ``max_copies``, the
    others still in one, and nothing is topped up.  Every sum exact."""
    g = Grads(4, 6)
    ps = PsState(JOB, range(4), n_chunks=6, k=K, unicast_late=True, chain=True, chain_tail=2)
    order = [3, 1, 0, 5, 2, 4]
    outs = [ps.on_packet(g.pkt(range(4), c=c), 1.0 + i) for i, c in enumerate(order)]
    assert [[(p.chunk_id, p.prev_mark) for p in o.results] for o in outs] == [
        [(3, None)], [(1, 3)], [(0, 1)], [(5, 0)], [(2, 5)], [(4, 2)]]
    assert all(np.array_equal(o.results[0].values, g.exact(0, range(4), c))
               for o, c in zip(outs, order, strict=True))
    reply = ps.on_packet(_ask(g, 2, 1, 1), 8.0).replies
    assert [(w, p.chunk_id, p.prev_mark, p.flags) for w, p in reply] == [
        (2, 1, 3, FLAG_RETRANSMIT)]
    assert ps.stats.results_doubled == 0
    # round 1: a retransmission reached the PS (worker 0's second copy of chunk 0)
    ps.on_packet(g.pkt([0], r=1, c=0, flags=FLAG_RETRANSMIT), 9.0)
    counts = []
    for i, c in enumerate(order):
        o = ps.on_packet(g.pkt(range(1, 4), r=1, c=c) if c == 0 else g.pkt(range(4), r=1, c=c),
                         10.0 + i)
        counts.append(len(o.results))
        assert all(np.array_equal(p.values, g.exact(1, range(4), c)) for p in o.results)
    assert counts == [1, 1, 1, 1, 4, 4]
    assert ps.stats.result_topups == 0 and ps.stats.results_doubled == 2


def test_chained_results_outside_the_tail_go_in_at_most_chain_copies():
    """Chained RESULTs (workers/ina/ps.py, "Lost RESULTs"): 4 workers, 8 chunks, each
    worker asked twice for chunk 0 of a RESULT sent once: 4 repeated asks of at least 16
    deliveries are q ** 2, q = 1/2, and the chain's rule (``q ** n`` times the 32
    deliveries at most 0.5 x 8) asks for 3 copies.  Outside the round's last
    ``chain_tail`` (2) a RESULT goes in at most ``chain_copies`` (2 by default), in the
    rule's 3 when the cap is 4; the last two in ``max_copies`` (4) either way.  Every copy
    carries the exact sum."""
    g = Grads(4, 8)
    for cap, first in ((None, 2), (4, 3)):
        extra = {} if cap is None else {"chain_copies": cap}
        ps = PsState(JOB, range(4), n_chunks=8, k=K, unicast_late=True, chain=True,
                     chain_tail=2, **extra)
        rc = ps.result_copies
        rc.sent(0, 1, 4)
        for w in range(4):
            assert not rc.late_grad(0, 0, w, 1, 1)  # no round trip measured: not judged
            assert rc.late_grad(0, 0, w, 2, 1)  # asked again by a later copy: lost
        assert rc.copies(0, 4, 8 * 0.5) == 3
        counts = []
        for c in range(8):
            out = ps.on_packet(g.pkt(range(4), c=c), 1.0 + c)
            counts.append(len(out.results))
            assert all(np.array_equal(p.values, g.exact(0, range(4), c)) for p in out.results)
        assert counts == [first] * 6 + [4, 4]
    with pytest.raises(ValueError, match="chain_copies"):
        PsState(JOB, range(4), n_chunks=8, k=K, chain=True, chain_copies=0)
