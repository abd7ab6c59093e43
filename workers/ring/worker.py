"""One position of a ring all-reduce, one round: a pure state machine (no I/O, ``now`` passed).

The schedule is the ring of :mod:`workers.collective.ring` (reduce-scatter, then all-gather;
position r sends to r+1 and receives from r-1; P chunks, ``split_range``), cut into packets
of K values and pipelined per packet, as ring implementations pipeline: packet i of step s
leaves as soon as packet i of step s-1 has arrived from the predecessor, because both belong
to the same chunk (``ring_chunk_sent(P, r, s) == ring_chunk_sent(P, r-1, s-1)``).  What
leaves at step s:

* s = 0: the position's own values of the chunk;
* 1 <= s <= P-1: own + what arrived at s-1 (the reduce-scatter, and at s = P-1 the fully
  reduced chunk ``r+1`` the position owns, which starts the all-gather);
* s >= P: what arrived at s-1, forwarded.

The result is chunk ``r+1`` (own + step P-2's arrival) and every other chunk as it arrived
during the all-gather.  Sums wrap in int32, as the switches' registers do, so every position
holds exactly the int32 sum of all vectors.

Reliability over loss, duplication and reordering: the receiver ACKs every DATA (again for a
duplicate: its ACK may have been lost); the sender keeps at most ``window`` DATA unacked and
resends each after its timeout (doubled per resend, up to ``max_timeout``).  A DATA of an
older round is ACKed and dropped (its sender missed our ACK); one of a later round is for the
caller to hold until its round starts (:meth:`RingRound.on_packet` says so).  A round is done
when every expected DATA arrived and every DATA sent was ACKed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from workers.collective.ring import ring_chunk_sent
from workers.collective.schedule import split_range
from workers.ring.wire import TYPE_ACK, TYPE_DATA, RingPacket

__all__ = ["NEXT", "PREV", "RingStats", "RingRound", "Out", "ring_packets"]

NEXT, PREV = "next", "prev"  # where a packet goes: the successor or the predecessor
Out = list[tuple[str, RingPacket]]


@dataclass
class RingStats:
    """What one position sent and saw in a round."""

    data_sent: int = 0        # DATA, first copies
    retransmits: int = 0      # DATA sent again after a timeout
    acks_sent: int = 0
    data_received: int = 0    # new DATA stored
    duplicates: int = 0       # DATA already stored (ACKed again)
    stale: int = 0            # DATA or ACK of an older round
    values_sent: int = 0      # int32 values in first copies of DATA


def ring_packets(n: int, P: int, k: int) -> int:
    """DATA packets position 0 sends per round (first copies): over 2(P-1) steps, P-1 chunks
    per phase, ceil(|chunk| / k) packets each -- for a test or a prediction."""
    chunks = split_range(0, n, P)
    return sum(-(-(hi - lo) // k) for r in (0,) for s in range(2 * (P - 1))
               for lo, hi in [chunks[ring_chunk_sent(P, r, s)]])


@dataclass
class _Flight:
    pkt: RingPacket
    deadline: float
    rto: float


@dataclass
class RingRound:
    """Position ``rank`` of ``size`` in round ``round`` of job ``job`` over ``values``."""

    job: int
    rank: int
    size: int
    round: int
    values: np.ndarray
    k: int = 32
    window: int = 16
    timeout: float = 0.3
    max_timeout: float = 2.0
    stats: RingStats = field(default_factory=RingStats)

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.size:
            raise ValueError(f"ring: rank {self.rank} outside a ring of {self.size}")
        if self.k < 1 or self.window < 1:
            raise ValueError(f"ring: k and window must be >= 1, got {self.k}, {self.window}")
        self.values = np.asarray(self.values, dtype=np.int32)
        P, n = self.size, len(self.values)
        self._chunks = split_range(0, n, P)
        self.steps = 2 * (P - 1)
        self._recv: dict[tuple[int, int], np.ndarray] = {}
        self._need = sum(self._npk(ring_chunk_sent(P, (self.rank - 1) % P, s))
                         for s in range(self.steps))
        self._to_send = sum(self._npk(ring_chunk_sent(P, self.rank, s))
                            for s in range(self.steps))
        self._ready: deque[tuple[int, int]] = deque()
        self._flight: dict[tuple[int, int], _Flight] = {}
        self._sent_keys = 0

    # -- schedule -------------------------------------------------------------------------

    def _npk(self, chunk: int) -> int:
        lo, hi = self._chunks[chunk]
        return -(-(hi - lo) // self.k)

    def _seg(self, chunk: int, i: int) -> slice:
        lo, hi = self._chunks[chunk]
        return slice(lo + i * self.k, min(hi, lo + (i + 1) * self.k))

    def _payload(self, s: int, i: int) -> np.ndarray:
        own = self.values[self._seg(ring_chunk_sent(self.size, self.rank, s), i)]
        if s == 0:
            return own.copy()
        got = self._recv[(s - 1, i)]
        return own + got if s <= self.size - 1 else got.copy()  # int32: wraps as a switch

    # -- events ---------------------------------------------------------------------------

    def start(self, now: float) -> Out:
        """The round's first DATA (step 0, up to the window)."""
        self._ready.extend((0, i) for i in range(self._npk(ring_chunk_sent(self.size,
                                                                           self.rank, 0)))
                           if self.steps)
        return self._pump(now)

    def on_packet(self, pkt: RingPacket, now: float) -> Out | None:
        """Take one packet; returns what to send, or None for a packet of a later round
        (the caller holds it for that round)."""
        if pkt.round > self.round:
            return None
        if pkt.round < self.round:
            self.stats.stale += 1
            if pkt.type == TYPE_DATA:  # its sender missed our ACK: say it again
                self.stats.acks_sent += 1
                return [(PREV, RingPacket(TYPE_ACK, self.job, pkt.round, pkt.step, pkt.index))]
            return []
        key = (pkt.step, pkt.index)
        if pkt.type == TYPE_ACK:
            if self._flight.pop(key, None) is None:
                self.stats.duplicates += 1
            return self._pump(now)
        if not 0 <= pkt.step < self.steps or key in self._recv:
            self.stats.duplicates += 1
        else:
            self._recv[key] = np.asarray(pkt.values, dtype=np.int32)
            self.stats.data_received += 1
            if pkt.step + 1 < self.steps:
                self._ready.append((pkt.step + 1, pkt.index))
        self.stats.acks_sent += 1
        out: Out = [(PREV, RingPacket(TYPE_ACK, self.job, self.round, pkt.step, pkt.index))]
        return out + self._pump(now)

    def tick(self, now: float) -> Out:
        """Resend every DATA past its deadline (its timeout doubled, up to the cap)."""
        out: Out = []
        for f in self._flight.values():
            if f.deadline <= now:
                f.rto = min(2 * f.rto, self.max_timeout)
                f.deadline = now + f.rto
                self.stats.retransmits += 1
                out.append((NEXT, f.pkt))
        return out

    def _pump(self, now: float) -> Out:
        out: Out = []
        while self._ready and len(self._flight) < self.window:
            s, i = self._ready.popleft()
            pkt = RingPacket(TYPE_DATA, self.job, self.round, s, i, self._payload(s, i))
            self._flight[(s, i)] = _Flight(pkt, now + self.timeout, self.timeout)
            self._sent_keys += 1
            self.stats.data_sent += 1
            self.stats.values_sent += len(pkt.values)
            out.append((NEXT, pkt))
        return out

    # -- state ----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`tick` has something to resend (None: nothing in flight)."""
        return min((f.deadline for f in self._flight.values()), default=None)

    @property
    def received_all(self) -> bool:
        return len(self._recv) == self._need

    @property
    def done(self) -> bool:
        """Every DATA expected arrived and every DATA sent was ACKed."""
        return (self.received_all and self._sent_keys == self._to_send and not self._flight)

    def result(self) -> np.ndarray:
        """The all-reduced vector (int32; only once :attr:`received_all`)."""
        if not self.received_all:
            raise RuntimeError(f"ring position {self.rank}: round {self.round} incomplete")
        P, r = self.size, self.rank
        out = self.values.copy()
        if P == 1:
            return out
        own = (r + 1) % P
        for i in range(self._npk(own)):
            sl = self._seg(own, i)
            out[sl] = self.values[sl] + self._recv[(P - 2, i)]
        for s in range(P - 1, self.steps):
            c = ring_chunk_sent(P, (r - 1) % P, s)
            for i in range(self._npk(c)):
                out[self._seg(c, i)] = self._recv[(s, i)]
        return out
