"""A TCP bulk flow as a state machine in virtual time (issue 39, "Fairness with other traffic").

Pure: no I/O, no clock of its own; every call takes ``now`` and returns what to send.  The
simulated network (:mod:`controller.experiment.simulate.cross`) carries the segments and ACKs
as frames over its links, through the switches, sharing the drop-tail queues with the INA
traffic.

The sender is NewReno (RFC 5681, RFC 6582) counted in whole segments of ``mss`` bytes:

* slow start: ``cwnd`` += 1 per ACK of new data while ``cwnd < ssthresh`` (RFC 5681 §3.1
  with RFC 3465's L = 1: one segment per ACK, however many it covers);
* congestion avoidance: ``cwnd`` += 1/cwnd per ACK of new data (about one per round trip);
* fast retransmit on the 3rd duplicate ACK: ``ssthresh = max(flight / 2, 2)``, the first
  unacknowledged segment sent again, ``cwnd = ssthresh + 3``; each further duplicate adds
  one (inflation); a partial ACK sends the next hole at once and deflates by what it
  acknowledged (RFC 6582 §3.2) and, the "Impatient" variant RFC 6582 §4 recommends, only
  the first partial ACK restarts the retransmission timer (many holes: the timer goes off
  and slow start recovers them faster than one per round trip); the ACK that covers
  ``recover`` ends it with ``cwnd = ssthresh``;
* the retransmission timer of RFC 6298: SRTT/RTTVAR from the timestamps the ACKs echo (RFC
  7323: the send time of the segment that last advanced the receiver's in-order edge, so a
  hole filled by a retransmission samples the retransmission, not the wait), or without
  echoes from segments sent once (Karn), RTO = SRTT + max(G, 4·RTTVAR) bounded by ``min_rto`` .. ``max_rto``, 1 s before the
  first sample, doubled on every expiry (back-off kept until a new sample); on expiry
  ``ssthresh = max(flight / 2, 2)``, ``cwnd = 1`` and the sender goes back to the first
  unacknowledged segment (go-back-N, as Linux does after a timeout).

What it leaves out, on purpose: delayed ACKs (the receiver ACKs every segment), SACK,
Nagle, a receive window that changes (``rwnd`` segments, fixed), the SYN/FIN
exchanges (the flow starts established and never closes), CUBIC (Linux's default; a Reno
flow is the textbook reference of TCP-friendliness).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RenoSender", "TcpReceiver", "MIN_RTO_S", "MAX_RTO_S", "INITIAL_RTO_S"]

INITIAL_RTO_S = 1.0  # RFC 6298 (2.1)
MIN_RTO_S = 0.2  # Linux's TCP_RTO_MIN (RFC 6298 says 1 s; every deployed stack uses less)
MAX_RTO_S = 60.0  # RFC 6298 (2.5): a maximum of at least 60 s
CLOCK_G_S = 0.001  # the clock granularity G of RFC 6298 (2.2)


@dataclass
class RenoSender:
    """One bulk sender (module docstring): :meth:`poll` says which segments to put on the
    wire now, :meth:`on_ack` takes a cumulative ACK (the next segment the receiver expects),
    :meth:`on_timeout` is called at :attr:`deadline`.  ``total``: segments to send (None:
    without end); ``init_cwnd``: RFC 6928's 10 by default; ``rwnd``: the receiver's window,
    segments."""

    mss: int = 1448
    total: int | None = None
    init_cwnd: float = 10.0
    rwnd: int = 2048  # ~3 MB at 1448 B: Linux's default tcp_rmem max (6 MB), halved by
    # tcp_adv_win_scale for its own overhead
    min_rto: float = MIN_RTO_S
    max_rto: float = MAX_RTO_S
    cwnd: float = field(init=False)
    ssthresh: float = field(init=False, default=float("inf"))
    snd_una: int = field(init=False, default=0)  # first segment not acknowledged
    snd_nxt: int = field(init=False, default=0)  # next segment to send
    high: int = field(init=False, default=0)  # highest segment sent + 1 (recovery point base)
    dupacks: int = field(init=False, default=0)
    recover: int | None = field(init=False, default=None)  # in fast recovery: its end
    partial: bool = field(init=False, default=False)  # a partial ACK seen in this recovery
    srtt: float | None = field(init=False, default=None)
    rttvar: float = field(init=False, default=0.0)
    rto: float = field(init=False, default=INITIAL_RTO_S)
    deadline: float | None = field(init=False, default=None)  # the retransmission timer
    sent: int = field(init=False, default=0)  # segments put on the wire, resent included
    resent: int = field(init=False, default=0)
    fast_retransmits: int = field(init=False, default=0)
    timeouts: int = field(init=False, default=0)
    _sent_at: dict[int, float] = field(init=False, default_factory=dict)  # once-sent only
    _again: set[int] = field(init=False, default_factory=set)  # segments sent more than once
    _hole: list[int] = field(init=False, default_factory=list)  # to resend before new data

    def __post_init__(self) -> None:
        if self.mss < 1 or self.init_cwnd < 1 or self.rwnd < 1:
            raise ValueError("mss, init_cwnd and rwnd must be >= 1")
        self.cwnd = float(self.init_cwnd)

    # -- what the sender may put on the wire ---------------------------------------------

    @property
    def flight(self) -> int:
        """Segments sent and not acknowledged (RFC 5681's FlightSize)."""
        return self.snd_nxt - self.snd_una

    @property
    def done(self) -> bool:
        """Every segment of a finite flow acknowledged."""
        return self.total is not None and self.snd_una >= self.total

    def poll(self, now: float) -> list[int]:
        """The segments to send now: a hole first (fast retransmit, partial ACK), then as
        many as the window allows.  Arms the timer if data is outstanding and it is off."""
        out = [self._send(s, now) for s in self._hole]
        self._hole.clear()
        window = min(int(self.cwnd), self.rwnd)
        end = self.total if self.total is not None else float("inf")
        while self.snd_nxt < end and self.snd_nxt - self.snd_una < window:
            out.append(self._send(self.snd_nxt, now))
            self.snd_nxt += 1
        self.high = max(self.high, self.snd_nxt)
        if out and self.deadline is None:
            self.deadline = now + self.rto
        return out

    def _send(self, seg: int, now: float) -> int:
        self.sent += 1
        if seg < self.high:  # sent before: no round-trip sample from it (Karn)
            self.resent += 1
            self._again.add(seg)
            self._sent_at.pop(seg, None)
        else:
            self._sent_at[seg] = now
        return seg

    # -- what comes back ---------------------------------------------------------------

    def on_ack(self, ack: int, now: float, echo: float | None = None) -> None:
        """A cumulative ACK: ``ack`` is the next segment the receiver expects; ``echo``: the
        send time it echoes (RFC 7323's TSecr; None: no timestamps, Karn's samples)."""
        if ack > self.snd_nxt:  # after a go-back-N: the receiver held what we resend
            self.snd_nxt = ack
        if ack <= self.snd_una:
            if ack == self.snd_una and self.flight > 0:
                self._duplicate()
            return
        newly = ack - self.snd_una
        if echo is not None:
            self._update_rto(now - echo)
        else:
            self._sample(ack, now)
        for s in range(self.snd_una, ack):
            self._sent_at.pop(s, None)
            self._again.discard(s)
        self.snd_una = ack
        self.dupacks = 0
        if self.recover is not None:
            if ack >= self.recover:  # full ACK: recovery ends (RFC 6582 §3.2 (3))
                self.recover = None
                self.cwnd = self.ssthresh
            else:  # partial ACK: the next hole at once, deflate, +1 (RFC 6582 §3.2 (3))
                self._hole.append(ack)
                self.cwnd = max(self.cwnd - newly + 1, 1.0)
                if self.partial:  # Impatient: the timer keeps running after the first
                    return
                self.partial = True
        elif self.cwnd < self.ssthresh:
            self.cwnd += 1.0
        else:
            self.cwnd += 1.0 / self.cwnd
        # RFC 6298 (5.2), (5.3): off when all is acknowledged, else restarted
        self.deadline = None if self.flight == 0 else now + self.rto

    def _duplicate(self) -> None:
        self.dupacks += 1
        if self.recover is not None:
            self.cwnd += 1.0  # inflation: a segment left the network
        elif self.dupacks == 3:
            self.fast_retransmits += 1
            self.ssthresh = max(self.flight / 2.0, 2.0)
            self.cwnd = self.ssthresh + 3.0
            self.recover = self.snd_nxt
            self.partial = False
            self._hole.append(self.snd_una)

    def _sample(self, ack: int, now: float) -> None:
        """RFC 6298 (2.2), (2.3) from the newest segment this ACK covers that was sent once;
        a sample also ends the back-off (the RTO is computed afresh)."""
        seg = ack - 1
        t = self._sent_at.get(seg)
        if t is None or seg in self._again:
            return
        self._update_rto(now - t)

    def _update_rto(self, r: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = r, r / 2.0
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r
        self.rto = min(max(self.srtt + max(CLOCK_G_S, 4.0 * self.rttvar), self.min_rto),
                       self.max_rto)

    def on_timeout(self, now: float) -> None:
        """The retransmission timer expired (call at :attr:`deadline`): RFC 5681 (4), RFC
        6298 (5.4)-(5.6): halve into ``ssthresh``, one segment, back off, go back."""
        if self.deadline is None or now < self.deadline or self.flight == 0:
            return
        self.timeouts += 1
        self.ssthresh = max(self.flight / 2.0, 2.0)
        self.cwnd = 1.0
        self.recover = None
        self.dupacks = 0
        self._hole.clear()
        self.rto = min(self.rto * 2.0, self.max_rto)
        self.snd_nxt = self.snd_una  # go back: poll() resends from the first hole
        self.deadline = None


@dataclass
class TcpReceiver:
    """The receiving end: keeps what arrives out of order and ACKs every segment with the
    next one it expects (cumulative; no delayed ACKs)."""

    expected: int = 0
    delivered: int = 0  # segments handed to the application, in order
    duplicates: int = 0
    ts_recent: float = 0.0  # RFC 7323's TS.Recent: what the ACKs echo
    _held: set[int] = field(default_factory=set)

    def on_segment(self, seg: int, tsval: float = 0.0) -> int:
        """One segment arrived (sent at ``tsval``); returns the ACK to send (the next segment
        expected), which echoes :attr:`ts_recent`: the segment's own time when it is the
        next in order (RFC 7323 §4.3: TS.Recent moves only with the left edge)."""
        if seg <= self.expected and tsval >= self.ts_recent:
            self.ts_recent = tsval
        if seg < self.expected or seg in self._held:
            self.duplicates += 1
        elif seg == self.expected:
            self.expected += 1
            while self.expected in self._held:
                self._held.discard(self.expected)
                self.expected += 1
        else:
            self._held.add(seg)
        self.delivered = self.expected
        return self.expected
