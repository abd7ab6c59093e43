"""The TCP bulk flow's state machine (controller/experiment/simulate/tcp.py), by hand-computed
cases: slow start, congestion avoidance, fast retransmit and recovery, RFC 6298's RTO and its
back-off, the receiver's cumulative ACKs."""

from __future__ import annotations

import pytest

from controller.experiment.simulate.tcp import RenoSender, TcpReceiver


def test_slow_start_doubles_per_round_trip():
    s = RenoSender(init_cwnd=2)
    assert s.poll(0.0) == [0, 1]
    assert s.deadline == pytest.approx(1.0)  # RFC 6298 (2.1): 1 s before any sample
    s.on_ack(1, 0.1)
    s.on_ack(2, 0.1)
    assert s.cwnd == 4.0  # +1 per ACK of new data
    assert s.poll(0.1) == [2, 3, 4, 5]
    for a in range(3, 7):
        s.on_ack(a, 0.2)
    assert s.cwnd == 8.0
    assert s.poll(0.2) == list(range(6, 14))


def test_first_rtt_sample_and_rto():
    s = RenoSender(init_cwnd=1)
    s.poll(0.0)
    s.on_ack(1, 0.5)
    # RFC 6298 (2.2): SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR = 0.5 + 1.0
    assert (s.srtt, s.rttvar, s.rto) == (0.5, 0.25, 1.5)
    s.poll(0.5)
    s.on_ack(2, 1.3)  # R = 0.8
    # (2.3): RTTVAR = 3/4 0.25 + 1/4 |0.5 - 0.8| = 0.2625; SRTT = 7/8 0.5 + 1/8 0.8 = 0.5375
    assert s.rttvar == pytest.approx(0.2625)
    assert s.srtt == pytest.approx(0.5375)
    assert s.rto == pytest.approx(0.5375 + 4 * 0.2625)


def test_rto_floor():
    s = RenoSender(init_cwnd=1)
    s.poll(0.0)
    s.on_ack(1, 0.01)  # 0.01 + 0.02 < min_rto
    assert s.rto == 0.2


def test_congestion_avoidance_adds_one_per_window():
    s = RenoSender(init_cwnd=4)
    s.ssthresh = 4.0  # at the threshold: congestion avoidance from the start
    s.poll(0.0)
    for a in range(1, 5):
        s.on_ack(a, 0.1)
    # 4 ACKs of 1/cwnd each: 4 + 1/4 + 1/4.25 + 1/4.485.. + 1/4.708..
    c = 4.0
    for _ in range(4):
        c += 1 / c
    assert s.cwnd == pytest.approx(c)
    assert 4.9 < s.cwnd < 5.0


def test_three_duplicates_halve_and_resend_the_hole():
    s = RenoSender(init_cwnd=10, min_rto=0.2)
    s.ssthresh = 10.0
    assert s.poll(0.0) == list(range(10))
    s.on_ack(1, 0.1)  # segment 1 is lost; 2..9 each bring a duplicate ACK of 1
    assert s.poll(0.1) == [10]  # cwnd 10.1: one new
    s.on_ack(1, 0.11)
    s.on_ack(1, 0.12)
    assert s.recover is None and s.poll(0.12) == []
    s.on_ack(1, 0.13)  # the third
    assert s.fast_retransmits == 1
    assert s.ssthresh == 5.0  # flight 10 (1..10) / 2
    assert s.cwnd == 8.0  # ssthresh + 3
    assert s.poll(0.13) == [1]  # the hole at once, nothing new (flight 10 > 8)
    for _ in range(5):  # 5 more duplicates: cwnd 13, flight 10: 3 new ones
        s.on_ack(1, 0.14)
    assert s.cwnd == 13.0
    assert s.poll(0.14) == [11, 12, 13]
    s.on_ack(14, 0.3)  # the resent 1 fills the hole: a full ACK (recover = 11)
    assert s.recover is None and s.cwnd == 5.0  # deflated to ssthresh: halved
    assert s.resent == 1


def test_partial_ack_resends_the_next_hole():
    s = RenoSender(init_cwnd=8)
    s.ssthresh = 8.0
    s.poll(0.0)  # 0..7; 0 and 3 lost
    for _ in range(3):
        s.on_ack(0, 0.1)
    assert s.poll(0.1) == [0]
    assert s.recover == 8
    s.on_ack(3, 0.2)  # partial: 0..2 acknowledged, 3 still missing
    assert s.recover == 8
    assert s.poll(0.2)[0] == 3
    s.on_ack(8, 0.3)
    assert s.recover is None and s.cwnd == s.ssthresh == 4.0


def test_timeout_backs_off_and_goes_back():
    s = RenoSender(init_cwnd=4)
    s.poll(0.0)
    s.on_ack(1, 0.4)  # RTO = 0.4 + 4 * 0.2 = 1.2, restarted: deadline 1.6
    assert s.deadline == pytest.approx(1.6)
    assert s.poll(0.4) == [4, 5]  # cwnd 5: 1..5 in flight
    s.on_timeout(1.0)  # too early: nothing
    assert s.timeouts == 0
    s.on_timeout(1.6)
    assert (s.timeouts, s.cwnd, s.ssthresh) == (1, 1.0, 2.5)  # flight 5 / 2
    assert s.rto == pytest.approx(2.4)  # doubled (RFC 6298 5.5)
    assert s.poll(1.6) == [1]  # go back to the first hole, one segment
    assert s.deadline == pytest.approx(1.6 + 2.4)
    s.on_timeout(4.0)
    assert s.rto == pytest.approx(4.8)  # doubled again
    assert s.poll(4.0) == [1]
    s.on_ack(2, 4.5)  # ACK of a resent segment: no sample (Karn), back-off kept
    assert s.rto == pytest.approx(4.8)
    assert s.cwnd == 2.0  # slow start again: 1 < ssthresh 2.5, +1
    assert s.poll(4.5) == [2, 3]


def test_rto_capped():
    s = RenoSender(init_cwnd=1, max_rto=3.0)
    s.poll(0.0)
    for t in (1.0, 3.0, 6.0, 9.0):
        s.on_timeout(t)
        s.poll(t)
    assert s.rto == 3.0


def test_finite_flow_ends_and_timer_stops():
    s = RenoSender(total=3, init_cwnd=10)
    assert s.poll(0.0) == [0, 1, 2]
    s.on_ack(3, 0.1)
    assert s.done and s.deadline is None and s.poll(0.2) == []


def test_receive_window_caps_flight():
    s = RenoSender(init_cwnd=10, rwnd=4)
    assert s.poll(0.0) == [0, 1, 2, 3]


def test_receiver_cumulative_acks():
    r = TcpReceiver()
    assert [r.on_segment(x) for x in (0, 2, 3, 1, 1, 5, 4)] == [1, 1, 1, 4, 4, 4, 6]
    assert r.delivered == 6 and r.duplicates == 1


def test_bad_parameters():
    with pytest.raises(ValueError):
        RenoSender(mss=0)


def test_echoed_timestamps_sample_the_retransmission_not_the_wait():
    r = TcpReceiver()
    r.on_segment(0, tsval=1.0)
    r.on_segment(2, tsval=1.1)  # out of order: TS.Recent stays at segment 0's
    assert r.ts_recent == 1.0
    r.on_segment(1, tsval=5.0)  # the retransmission fills the hole
    assert r.ts_recent == 5.0 and r.expected == 3
    s = RenoSender(init_cwnd=1)
    s.poll(0.0)
    s.on_ack(1, 0.3, echo=0.0)
    assert s.srtt == pytest.approx(0.3)


def test_impatient_newreno_restarts_the_timer_on_the_first_partial_ack_only():
    s = RenoSender(init_cwnd=8)
    s.ssthresh = 8.0
    s.poll(0.0)  # 0, 2 and 4 lost
    for _ in range(3):
        s.on_ack(0, 0.1)
    s.poll(0.1)
    s.on_ack(2, 0.2)  # first partial ACK: restarted (RTO 0.2 + 4 x 0.1 = 0.6)
    assert s.deadline == pytest.approx(0.8)
    s.poll(0.2)
    s.on_ack(4, 0.3)  # second: the timer keeps its deadline
    assert s.deadline == pytest.approx(0.8)
