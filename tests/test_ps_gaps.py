"""The PS's loss detectors (workers.ina.gaps) and whom they ask (workers.ina.asks): hand-traced
arrival orders, the NACKs they cause, and the chunks still summed exactly."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_ps_state import JOB, Grads, K
from workers.ina.asks import Asks
from workers.ina.constants import FLAG_INCOMPLETE, FLAG_RETRANSMIT, TYPE_PARTIAL, TYPE_RESULT
from workers.ina.gaps import GapDetector, Overdue
from workers.ina.ps import PsState


def test_a_piece_behind_a_later_one_for_tau_is_lost_once():
    # two routes, sent interleaved: chunks 0, 2, 4, 6 on route "a", 1, 3, 5 on route "b"
    d = GapDetector({c: "a" if c % 2 == 0 else "b" for c in range(7)}, mult=4.0, floor=0.02)
    d.arrived(0, 0, 0b11, now=1.0)
    # route b's arrivals are another stream: chunk 1 behind chunk 3 says nothing of route a
    d.arrived(0, 3, 0b11, now=1.001)
    d.arrived(0, 4, 0b11, now=1.002)  # 2 (route a) and 1 (route b) are now behind
    assert d.next_deadline() == pytest.approx(1.021)  # 1 behind since 1.001, tau 20 ms
    assert d.lost(1.0209) == []
    assert d.lost(1.021) == [(0, 1, 0b11)]
    assert d.lost(1.022) == [(0, 2, 0b11)]
    assert d.lost(9.0) == [] and d.next_deadline() is None  # each once
    # another piece of the same chunks (a second subtree) is its own stream
    d.arrived(0, 4, 0b100, now=1.1)
    assert d.next_deadline() == pytest.approx(1.12)  # its 0 and 2 behind since 1.1


def test_the_reordering_window_grows_with_what_only_came_late():
    d = GapDetector({c: "r" for c in range(8)}, mult=4.0, quantile=0.9, floor=0.02)
    d.arrived(0, 0, 1, now=0.0)
    d.arrived(0, 2, 1, now=0.001)
    d.arrived(0, 1, 1, now=0.011)  # behind for 10 ms, then came: reordered, not lost
    assert d.tau == pytest.approx(0.04) and d.lost(1.0) == []
    # the order is the send order given, not the chunk numbers; a new round starts anew
    d = GapDetector({3: "a", 0: "a", 2: "a", 1: "a"})
    d.arrived(5, 0, 1, now=0.0)  # 3 was sent first: behind
    assert d.lost(0.02) == [(5, 3, 1)]
    d.arrived(6, 2, 1, now=1.0)
    d.forget(6)
    assert d.lost(2.0) == [(6, 3, 1), (6, 0, 1)]
    with pytest.raises(ValueError):
        GapDetector({0: "r"}, floor=0)


def test_an_overdue_chunk_is_reported_after_tau_once():
    late = Overdue([10, 11, 12, 13], mult=4.0, quantile=0.9, floor=0.02)
    assert late.next_deadline() is None  # nothing before a round's first completion
    late.completed(0, 10, 1.0)
    assert late.next_deadline() == pytest.approx(1.02)  # chunk 11 follows within tau
    late.completed(0, 12, 1.01)  # 11 is a hole now, 13 the next
    assert late.next_deadline() == pytest.approx(1.03)
    assert late.overdue(1.029) == []
    assert late.overdue(1.03) == [11, 13]
    assert late.overdue(5.0) == [] and late.next_deadline() is None  # reported once
    late.completed(0, 11, 1.05)  # came after its report: not a sample of lateness
    assert late.tau == pytest.approx(0.02)
    # a new round starts anew; chunks that come on their own teach tau
    late.completed(1, 10, 2.0)
    late.completed(1, 11, 2.004)  # 4 ms after its neighbour: 4 x 4 ms < floor
    assert late.tau == pytest.approx(0.02)
    late.completed(1, 12, 2.014)  # 10 ms: samples (4, 10) ms, the 0.9 quantile is 10 ms
    assert late.tau == pytest.approx(0.04)
    assert late.next_deadline() == pytest.approx(2.054)


def _routes(n_workers: int, n_chunks: int, point: int = 5):
    return {w: [(c, point, n_workers) for c in range(n_chunks)] for w in range(n_workers)}


def test_the_ps_asks_for_a_gap_and_the_chunk_completes_exactly():
    """Chunks 0, 2, 3 of one switch's stream arrive, 1 does not: once 1 is behind for the
    reordering window, the PS NACKs chunk 1's prober (a worker of the piece), and the
    switch's re-emitted aggregate completes it exactly."""
    g = Grads(4, 6)
    # no flush, so no contribution is known lost: nothing is asked (8 jobs at k=32 reorder
    # enough without loss that asks would only flush slots still waiting)
    quiet = PsState(JOB, range(4), n_chunks=6, k=K, unicast_late=True, routes=_routes(4, 6))
    for c in (0, 2, 3):
        quiet.on_packet(g.pkt(range(4), c=c, typ=TYPE_PARTIAL), now=0.001 * c)
    assert quiet.next_deadline() == pytest.approx(0.022) and quiet.tick(0.5).nacks == []
    # a flush of chunk 5 (3 of its 4 workers): the PS asks the missing one, and from now on
    # it also asks for what it finds lost itself
    ps = PsState(JOB, range(4), n_chunks=6, k=K, unicast_late=True, routes=_routes(4, 6))
    out = ps.on_packet(g.pkt([0, 1, 2], c=5, flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE), now=0.0)
    assert [(w, p.chunk_id) for w, p in out.nacks] == [(3, 5)]
    for c in (0, 2, 3):
        assert ps.on_packet(g.pkt(range(4), c=c, typ=TYPE_PARTIAL), now=0.001 * c).nacks == []
    assert ps.next_deadline() == pytest.approx(0.022)  # 1 behind since 2 ms, tau 20 ms
    out = ps.tick(0.022)
    assert [(w, p.chunk_id) for w, p in out.nacks] == [(1, 1)]  # prober of chunk 1, round 0
    (_, nack), = out.nacks
    # flagged RETRANSMIT: the chunks after it came, so the worker resends at once
    assert nack.msg_type == TYPE_RESULT and nack.flags == FLAG_INCOMPLETE | FLAG_RETRANSMIT
    assert nack.bitmap == 0b1101 and not nack.values.any()
    assert ps.stats.gaps == 1 and ps.stats.nacks == 2
    out = ps.on_packet(g.pkt(range(4), c=1, typ=TYPE_PARTIAL, flags=FLAG_RETRANSMIT), now=0.05)
    assert out.results and np.array_equal(out.results[0].values, g.exact(0, range(4), 1))


def test_the_ps_asks_for_an_overdue_tail_chunk_at_its_deadline():
    """The round's last chunk (no later chunk can show its gap) is asked for once it is
    later than its neighbour by tau; a chunk a NACK already asked for is not asked again."""
    g = Grads(4, 3)
    ps = PsState(JOB, range(4), n_chunks=3, k=K, unicast_late=True, routes=_routes(4, 3))
    # chunk 0 flushed without worker 3 (a contribution was lost: from now on the PS asks
    # for what it finds late), then completed by worker 3's resend
    out = ps.on_packet(g.pkt([0, 1, 2], flags=FLAG_RETRANSMIT | FLAG_INCOMPLETE), now=1.0)
    assert [(w, p.chunk_id) for w, p in out.nacks] == [(3, 0)]
    ps.on_packet(g.pkt([3], flags=FLAG_RETRANSMIT), now=1.0)
    ps.on_packet(g.pkt(range(4), c=1, typ=TYPE_PARTIAL), now=1.002)
    # chunk 0's first copy never came (only the recovery): a gap, but it is complete
    assert ps.next_deadline() == pytest.approx(1.022) and ps.tick(1.022).nacks == []
    due = ps.next_deadline()
    assert due == pytest.approx(1.052)  # tau: the 0.05 s floor (one 2 ms sample x 4 below it)
    assert ps.tick(due - 0.001).nacks == []
    out = ps.tick(due)
    (w, nack), = out.nacks
    assert (w, nack.chunk_id) == (2, 2)  # chunk 2's prober, asked to resend at once
    assert nack.flags == FLAG_INCOMPLETE | FLAG_RETRANSMIT
    assert ps.stats.overdue == 1 and ps.tick(due + 1).nacks == []
    out = ps.on_packet(g.pkt(range(4), c=2, typ=TYPE_PARTIAL, flags=FLAG_RETRANSMIT), now=1.03)
    assert out.completed_rounds == [0]
    assert np.array_equal(ps.round_sum(0), g.exact(0, range(4), None))


def test_in_order_arrivals_ask_nobody():
    g = Grads(4, 6)
    ps = PsState(JOB, range(4), n_chunks=6, k=K, unicast_late=True, routes=_routes(4, 6))
    for r in range(2):
        for c in range(6):
            out = ps.on_packet(g.pkt(range(4), r=r, c=c, typ=TYPE_PARTIAL), now=r + 0.001 * c)
            assert out.nacks == [] and ps.tick(r + 0.001 * c).nacks == []
    assert ps.stats.nacks == 0 and ps.is_round_complete(1)


def test_asks_after_a_flush_and_for_overdue_chunks():
    # workers 0-2 at switch 5, 3-4 at switch 7, 5 raw to the PS (point 0), one chunk
    point = {0: 5, 1: 5, 2: 5, 3: 7, 4: 7, 5: 0}
    asks = Asks({w: [(0, a, 1)] for w, a in point.items()})
    full = 0b111111
    # switch 5 flushed {0, 2}: its missing 1, one worker of silent switch 7, raw worker 5
    assert asks.after_flush(0, 0b101, 0b101, full) == 0b101010
    # overdue with nothing received: the prober; with switch 5's aggregate: one of switch 7
    assert asks.overdue(0, 0, 0, full, list(range(6))) == 1 << 0
    assert asks.overdue(0, 0, 0b111, full, list(range(6))) == 1 << 3
    # a point whose first copies arrive as GRADs sums nothing: its senders' streams show gaps
    asks.arrived(0, 0, 1 << 3, raw_from=3, now=0.0)
    assert asks.overdue(0, 0, 0b111, full, list(range(6))) == 0
