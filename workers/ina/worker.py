"""A worker's sender state machine for one synchronization round (docs/design.md §3.5, §3.7, §3.9),
no I/O.

Input: the worker's schedule for the round -- a list of ``(chunk_id, agg_id, fan_in)`` covering
every chunk of the gradient exactly once (``controller.plan.chunk_schedule`` computes it from
the plan; :func:`ps_only_schedule` is the no-INA mode) -- and its quantized gradient (int32,
zero-padded to n_chunks * K).  Output: GRAD packets to send, and, once every chunk has its
RESULT, the synchronized int32 sum vector.

Window
    At most ``window`` chunks are in flight (sent, no RESULT yet).  Chunks are sent in schedule
    order; each RESULT that completes an in-flight chunk frees a place, which the next pending
    chunk takes at once.  A bounded window keeps the aggregators' slot demand bounded (a
    switch holds a slot per chunk from the first GRAD to the RESULT).

Timeouts and retransmission  [decision]
    Time comes from the caller: every method takes ``now`` (seconds, any monotone clock) and
    :meth:`WorkerRound.tick` fires the timers, so tests drive it with a fake clock.  An
    in-flight chunk whose RESULT has not come ``rto`` seconds after its last (re)transmission is
    sent again, with FLAG_RETRANSMIT set and the SAME agg_id and fan_in: by docs/design.md §3.7 a
    retransmitted packet never claims a free slot but joins a slot that holds its key (so it
    completes an aggregation that lost this worker's first packet, or makes a complete slot
    re-emit its aggregate after a lost PARTIAL); if no slot holds the key it goes on toward the
    PS, which merges it raw, or answers with the stored RESULT when the chunk is already
    complete (the RESULT was lost).  Keeping agg_id thus recovers the ordinary loss cases in the
    network, while sending to agg_id 0 at once would bypass a slot still waiting for this
    contribution (its other contributors' sums then reach the PS only by flushes).
    Liveness escape (docs/protocol.md §6): the switches' answers to retransmissions can leave
    the PS holding only overlapping sets (e.g. {1,2,3} re-emitted by one switch and {1,4,5}
    flushed INCOMPLETE by s_d, forever), from which no exact cover exists.  So after
    ``direct_after`` retransmissions of a chunk with its scheduled route, further ones are sent
    with agg_id = AGG_ID_PS and FLAG_RETRANSMIT | FLAG_FALLBACK: no switch aggregates them, the
    PS receives this worker's raw contribution, and raw singletons always complete a cover.
    (``tests/ina_sim.py`` reproduces the deadlock when this is disabled.)
    rto starts at ``timeout`` and is multiplied by ``backoff`` after every retransmission of
    that chunk, capped at ``max_timeout``.  With ``max_retries`` set, a chunk that needs more
    retransmissions fails the round (``failed`` holds why); the caller decides what to do.

RESULT handling
    A RESULT for this job and round, of a chunk this worker has sent, whose bitmap contains
    this worker, completes the chunk (its K values fill the result vector); with
    ``expect_mask`` set (the round's member set changed, docs/design.md §9) the bitmap must be
    exactly that mask, since a RESULT over the old one counted a removed worker.  RESULTs for other
    rounds (stale), unsent or unknown chunks, or without this worker's bit are ignored and
    counted; a second RESULT of a completed chunk is a duplicate (with different values it is
    also counted as a conflict; the first is kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.ina.constants import AGG_ID_PS, FLAG_FALLBACK, FLAG_RETRANSMIT, TYPE_GRAD, TYPE_RESULT
from workers.ina.constants import K as DEFAULT_K
from workers.ina.messages import InaPacket

Schedule = Sequence[tuple[int, int, int]]


def ps_only_schedule(n_chunks: int) -> list[tuple[int, int, int]]:
    """PS-only mode: every chunk goes raw to the PS (agg_id 0, fan_in 1)."""
    return [(c, AGG_ID_PS, 1) for c in range(n_chunks)]


def n_chunks_for(n_values: int, k: int = DEFAULT_K) -> int:
    """Chunks of k values needed for a gradient of n_values (the last one zero-padded)."""
    return max(1, -(-n_values // k))


def pad_to_chunks(values: np.ndarray, k: int = DEFAULT_K) -> np.ndarray:
    """Int32 copy of ``values`` zero-padded to a multiple of k."""
    v = np.asarray(values)
    if v.ndim != 1 or v.dtype != np.int32:
        raise ValueError(f"expected a 1-D int32 vector, got {v.dtype} shape {v.shape}")
    out = np.zeros(n_chunks_for(len(v), k) * k, dtype=np.int32)
    out[: len(v)] = v
    return out


@dataclass
class WorkerStats:
    sent: int = 0  # first transmissions
    retransmits: int = 0
    direct: int = 0  # retransmissions sent straight to the PS (agg_id 0, FALLBACK)
    results: int = 0  # RESULTs that completed a chunk
    dup_results: int = 0
    conflicting_results: int = 0
    stale_results: int = 0  # other round
    unexpected_results: int = 0  # wrong job, unknown/unsent chunk, bitmap without us, bad size
    malformed: int = 0  # datagrams that did not decode (counted by the I/O shell)


class WorkerRound:
    """One worker, one round.  See the module docstring for the rules."""

    def __init__(
        self,
        *,
        job_id: int,
        worker_id: int,
        round_: int,
        values: np.ndarray,
        schedule: Schedule,
        k: int = DEFAULT_K,
        window: int = 16,
        timeout: float = 0.05,
        backoff: float = 2.0,
        max_timeout: float = 1.0,
        max_retries: int | None = None,
        direct_after: int | None = 3,
        expect_mask: int | None = None,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if timeout <= 0 or backoff < 1.0 or max_timeout < timeout:
            raise ValueError("need timeout > 0, backoff >= 1, max_timeout >= timeout")
        self.job_id, self.worker_id, self.round, self.k = job_id, worker_id, round_, k
        self.n_values = len(values)
        self.values = pad_to_chunks(values, k)
        self.values.setflags(write=False)  # GRAD packets carry views of it
        self.n_chunks = len(self.values) // k
        sched = [(int(c), int(a), int(f)) for c, a, f in schedule]
        ids = sorted(c for c, _, _ in sched)
        if ids != list(range(self.n_chunks)):
            raise ValueError(
                f"worker {worker_id}: schedule must list chunks 0..{self.n_chunks - 1} once each, "
                f"got {len(sched)} entries"
            )
        if any(f < 1 for _, _, f in sched):
            raise ValueError(f"worker {worker_id}: fan_in must be >= 1")
        self.schedule = sched
        self.window, self.timeout, self.backoff = window, timeout, backoff
        self.max_timeout, self.max_retries = max_timeout, max_retries
        if direct_after is not None and direct_after < 0:
            raise ValueError(f"direct_after must be >= 0 or None, got {direct_after}")
        self.direct_after = direct_after
        self.expect_mask = expect_mask
        self.bit = 1 << worker_id
        self.result = np.zeros_like(self.values)
        self.stats = WorkerStats()
        self.failed: str | None = None
        self._next = 0  # index into schedule of the next chunk to send
        self._route = {c: (a, f) for c, a, f in sched}
        # chunk -> (deadline, retries, rto) for chunks in flight
        self._inflight: dict[int, tuple[float, int, float]] = {}
        self._done = np.zeros(self.n_chunks, dtype=bool)
        self._n_done = 0
        self._started = False

    # -- queries -----------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._n_done == self.n_chunks

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    def result_values(self) -> np.ndarray:
        """The synchronized sum, trimmed to the original gradient length (after ``done``)."""
        if not self.done:
            raise RuntimeError(f"worker {self.worker_id} round {self.round} is not complete")
        return self.result[: self.n_values].copy()

    def next_deadline(self) -> float | None:
        """Earliest retransmission time, for the caller's poll timeout (None: nothing pending)."""
        if not self._inflight:
            return None
        return min(d for d, _, _ in self._inflight.values())

    # -- events ------------------------------------------------------------------------------

    def start(self, now: float) -> list[InaPacket]:
        """First packets: fill the window."""
        if self._started:
            raise RuntimeError("start() called twice")
        self._started = True
        return self._fill(now)

    def on_packet(self, pkt: InaPacket, now: float) -> list[InaPacket]:
        """Take a received packet (a RESULT); return the packets to send next."""
        st = self.stats
        if pkt.type != TYPE_RESULT or pkt.job_id != self.job_id:
            st.unexpected_results += 1
            return []
        if pkt.round != self.round:
            st.stale_results += 1
            return []
        c = pkt.chunk_id
        if (c not in self._route or not pkt.bitmap & self.bit
                or (self.expect_mask is not None and pkt.bitmap != self.expect_mask)
                or getattr(pkt.values, "shape", None) != (self.k,)):
            st.unexpected_results += 1
            return []
        if self._done[c]:
            st.dup_results += 1
            if not np.array_equal(self.result[c * self.k:(c + 1) * self.k], pkt.values):
                st.conflicting_results += 1
            return []
        if c not in self._inflight:  # never sent: it cannot contain our contribution
            st.unexpected_results += 1
            return []
        del self._inflight[c]
        self.result[c * self.k:(c + 1) * self.k] = pkt.values
        self._done[c] = True
        self._n_done += 1
        st.results += 1
        return self._fill(now)

    def tick(self, now: float) -> list[InaPacket]:
        """Retransmit every in-flight chunk whose timer expired at ``now``."""
        if self.failed:
            return []
        # earliest deadline first; ties in (re)transmission order (dict order, stable sort)
        due = sorted((c for c, (d, _, _) in self._inflight.items() if d <= now),
                     key=lambda c: self._inflight[c][0])
        out = []
        for c in due:
            _, retries, rto = self._inflight.pop(c)
            if self.max_retries is not None and retries >= self.max_retries:
                self._inflight[c] = (now, retries, rto)
                self.failed = (f"worker {self.worker_id} round {self.round}: chunk {c} "
                               f"unanswered after {retries} retransmissions")
                return out
            rto = min(rto * self.backoff, self.max_timeout)
            self._inflight[c] = (now + rto, retries + 1, rto)
            self.stats.retransmits += 1
            if self.direct_after is not None and retries >= self.direct_after:
                self.stats.direct += 1
                out.append(self._grad(c, FLAG_RETRANSMIT | FLAG_FALLBACK, AGG_ID_PS))
            else:
                out.append(self._grad(c, FLAG_RETRANSMIT))
        return out

    # -- internals ---------------------------------------------------------------------------

    def _fill(self, now: float) -> list[InaPacket]:
        out = []
        while len(self._inflight) < self.window and self._next < len(self.schedule):
            c = self.schedule[self._next][0]
            self._next += 1
            self._inflight[c] = (now + self.timeout, 0, self.timeout)
            self.stats.sent += 1
            out.append(self._grad(c, 0))
        return out

    def _grad(self, c: int, flags: int, agg_id: int | None = None) -> InaPacket:
        agg, fan_in = self._route[c]
        if agg_id is not None:
            agg = agg_id
        return InaPacket(
            type=TYPE_GRAD,
            flags=flags,
            job_id=self.job_id,
            round=self.round,
            chunk_id=c,
            agg_id=agg,
            fan_in=fan_in,
            count=1,
            worker_id=self.worker_id,
            bitmap=self.bit,
            values=self.values[c * self.k:(c + 1) * self.k],
        )
