"""A worker's sender state machine for one synchronization round (docs/design.md §3.5, §3.7, §3.9),
no I/O.

Input: the worker's schedule for the round -- a list of ``(chunk_id, agg_id, fan_in)`` covering
every chunk of the gradient exactly once (``controller.plan.document.chunk_schedule`` computes it from
the plan; :func:`ps_only_schedule` is the no-INA mode) -- and its quantized gradient (int32,
zero-padded to n_chunks * K).  Output: GRAD packets to send, and, once every chunk has its
RESULT, the synchronized int32 sum vector.

Window
    At most ``cc.window`` chunks are in flight (sent, no RESULT yet; "Congestion control").  Chunks are sent in schedule
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
    With ``max_retries`` set, a chunk that needs more retransmissions fails the round
    (``failed`` holds why); the caller decides what to do.

Timeouts: measured (RFC 6298), backed off per chunk  [decision]
    Each copy of a GRAD carries its copy number (0 = first, mod 16) in flags bits 4-7
    (``InaPacket.grad(copy=...)``); the PS echoes, in every RESULT, the ``worker_id`` of the
    packet that caused it and, if that packet was a worker's own GRAD, ``fan_in`` = 1 + its
    copy number (docs/protocol.md §6; read as ``InaPacket.echo``).  So a RESULT naming this
    worker and one of its copies times that copy's round trip exactly, retransmitted or not;
    Karn's rule holds where the echo cannot tell (two copies with the same number mod 16, a
    retransmitted chunk's RESULT naming no copy of ours: no sample).  One naming this worker
    with no copy number (``fan_in`` 0) and no retransmission times an aggregate its only
    copy completed.  :class:`RttEstimator` (one per job, kept across rounds) turns these
    into:

    * ``first_rto``, how long a chunk's first copy waits for the other workers to start:
      twice the median time from a chunk's only copy to its RESULT (Karn; not a RESULT
      the PS sent again, flagged RETRANSMIT: docs/protocol.md §6), at least
      ``timeout`` and ``rto`` (``RttEstimator``'s ``trust`` can lift the floors).  Retransmitting before the
      others' copies could arrive only adds flushes;
    * ``rto``, the timeout of every retransmission, and of a first copy once a RESULT
      arrived after it (the others have started, the pipeline answers): RFC 6298's
      ``srtt + max(G, 4 rttvar)`` of the exact round trips, at least a quarter of
      ``first_rto``; ``timeout`` until the first sample;
    * both at most ``cap``: ``max_timeout`` (1 s in a job file, at most half the PS's
      silence limit, ``workers.ina.driver.timeout_cap``), never below the measured
      ``srtt``.  A cap below the round trip (it was 1 s while round trips under
      load were 1.8-4 s) resent every chunk in flight each second: the collapse measured in
      docs/simulate.md.

    Back-off (RFC 6298 5.5, per chunk): the i-th timeout of a chunk in a row waits
    ``backoff**i`` times ``rto`` (``first_rto`` before any sample), up to the cap.  A RESULT
    ends every chunk's back-off and brings its timer to ``rto`` from then (RFC 6298 5.7:
    the path answers again, so what is still missing was lost, not delayed): random loss is
    not congestion, and at 10 % loss per port a chunk needs several retransmissions, so
    doubling through them made a round last tens of seconds (bench/ina_loss_twin.py).
    Before the first completion sample, every ``escape`` completions of retransmitted chunks
    double ``first_rto``; when no RESULT has come for ``silence`` seconds (default 1 s: a
    dead link, a removed worker), the worker sends one retransmission per interval, in
    turn, not its whole window; the next RESULT brings every deferred timer back to ``rto``.

NACKs and probers  [decision]
    With 64 contributions per chunk almost every chunk loses one somewhere at 1 % loss per
    port, and every worker times out on it at once: 63 of the 64 retransmissions only make
    the switch flush what it already holds to the PS (and, once complete, re-emit it), and
    those flushes queued the PS's link to 1.5 s, the measured round trip and timeouts grew
    with it and the run collapsed (docs/results.md, "Timeouts and congestion control").  So,
    when the round knows its ``members``, each chunk has one **prober**
    (:func:`workers.ina.messages.prober`, the same at the PS): it retransmits at the
    measured timeout, its first two probes not backed off (when it lacked the chunk itself,
    its probe completes its own part and only the next one flushes), and at once when
    ``dupthresh`` chunks sent after it to the same aggregation point completed first and it
    is older than twice the fastest completion (fast retransmit; chunks of different points
    complete out of order by their paths).  ``dupthresh`` is 0 (no fast retransmit) by
    default: on Mininet, chunks of one point also complete out of order (per-packet ECMP,
    the processes' scheduling), and at 4 make run resent 1.6 chunks a round for nothing.  Every other worker waits ``holdoff`` times its
    timeout before its first retransmission.  A flush reaching the PS makes it ask the
    workers the flush lacks (a **NACK**: a RESULT flagged INCOMPLETE to that worker's reply
    port, bitmap = the workers the PS has, no values; ``workers.ina.ps``, "NACKs"): a NACK
    resends the chunk at once on its route, unless a copy left less than half a
    ``probe_rto`` ago.  Below s_d a point asks itself (a NACK naming it in ``agg_id``,
    multicast to all its workers): only a worker whose chunk goes there and whose bit it
    lacks resends, flagged INCOMPLETE too (docs/protocol.md §6).  Without ``members`` (a
    round on its own) every chunk is this worker's to probe and none of this applies.

    Once the worker has been NACKed (:meth:`RttEstimator.nack`), the prober's timeout is
    ``probe_rto``, twice the median of the loss-free completions (the fastest ``1 -
    chunk_loss`` of them, the chunk loss estimated from this worker's NACKs), not
    ``rto``: under loss per port nearly every chunk waits for a recovery, so the median
    completion and ``rto`` (the job's ``timeout`` until an exact round trip is measured,
    and under loss few workers measure one) held each lost contribution 0.3 s where
    loss-free chunks took 0.03-0.05 s (docs/results.md, issue 39).  The others' hold-off
    stays ``holdoff`` times ``rto``: shortened with it, their retransmissions stormed.

Under loss
    Once ``probe_rto`` follows the loss-free completions (``loss_ready``), a prober's first
    copy waits at most ``probe_first`` (2) times it, not ``first_rto`` (the median
    completion, recoveries included: when every chunk of a round's first window lost a
    contribution nothing completed for 0.3 s of a 0.45 s round); and a round's last
    ``tail`` (4) chunks in flight, every first copy sent, retransmit at ``probe_rto``
    without back-off (the job waits for them; a lost answer waited 0.3 then 0.6 s).  k=16,
    64 workers, budget 4, 1 % loss, 12 seeds: median ratio 0.383 -> 0.449 (docs/results.md).

Chained RESULTs
    A RESULT names the chunk its PS completed before it in the round (``prev_mark``,
    ``workers.ina.ps``, "Lost RESULTs").  The PS sent that chunk's RESULT first, down the
    same tree, so if it is still in flight here its RESULT was lost: the worker asks for
    it at once (a retransmission on its route, counted ``chased``; the PS answers it
    alone with the stored RESULT, naming the chunk before that one, so a worker that lost
    several asks along the chain), not after its hold-off (6 timeouts, 1.1-1.8 s at k=16
    under loss).  It asks again only once ``rto`` has passed since its last copy (the
    answer may be coming).  A RESULT naming no chunk, a completed one or one never sent
    asks nothing.

Congestion control
    How many chunks may be in flight is a policy passed in (``cc``, :mod:`workers.ina.cc`):
    the round asks it for its window before each first copy and tells it of every copy
    sent, every RESULT (with its exact round trip when the echo gave one), every RESULT
    marked ``FLAG_ECN`` (docs/protocol.md §6, "Congestion marks") and every timeout.  Without one,
    the window is the constant ``window``.

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

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.ina.cc import CongestionControl, Fixed
from workers.ina.constants import (
    AGG_ID_PS,
    FLAG_FALLBACK,
    FLAG_INCOMPLETE,
    FLAG_RETRANSMIT,
    TYPE_RESULT,
    load_constants,
)
from workers.ina.constants import K as DEFAULT_K
from workers.ina.messages import fold_mask, prober
from workers.ina.wire import COPY_MOD, PREV_MOD, InaPacket

Schedule = Sequence[tuple[int, int, int]]

FLAG_ECN: int | None = load_constants().get("INA_FLAG_ECN")
"""A RESULT's congestion mark (``constants.p4``; docs/protocol.md §6, "Congestion marks");
None under a constants.p4 without it, and then no RESULT is read as marked."""
SILENCE = 1.0
"""Seconds without a RESULT after which a worker probes one chunk per ``rto`` (default)."""


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
    marks: int = 0  # RESULTs with a congestion mark (FLAG_ECN)
    fell_back: int = 0  # RESULTs whose chunk had a packet fall back (FLAG_FALLBACK)
    fast: int = 0  # of retransmits: a prober's, when later chunks completed first
    nacks: int = 0  # the PS's asks to resend an in-flight chunk ("NACKs and probers")
    point_nacks: int = 0  # an aggregation point's asks (docs/protocol.md §6)
    chased: int = 0  # of retransmits: asks for a RESULT a later one named ("Chained RESULTs")


class RttEstimator:
    """A worker's two retransmission timeouts, measured (module docstring, "Timeouts").  It
    outlives a round: the I/O shell passes the same one to every :class:`WorkerRound` of a
    job, so that round r starts with what rounds < r measured.

    ``sample(rtt)``: the exact round trip of one copy, known from the RESULT echo.
    ``completion(t)``: the time from a chunk's only copy to its RESULT (Karn's rule), which
    also holds the wait for the other workers' copies.  ``ambiguous()``: a retransmitted
    chunk completed.  Both timeouts lie within ``[min_rto, cap]``:

    * ``rto``, every copy after the first: RFC 6298, ``srtt + max(G, 4 rttvar)`` over the
      exact round trips (``G`` = ``granularity``; unambiguous samples, so it follows a
      growing queue within a few samples), at least a quarter of ``first_rto`` (a worker
      next to the PS measures very short round trips, and a window of copies that fast would
      fill its own link); ``initial`` before the first sample;
    * ``first_rto``, a chunk's first copy: ``mult`` times the median of the last ``window``
      completion times (a median: some of them also hold another worker's loss recovery),
      at least ``initial`` (the job's ``timeout``) and ``rto`` -- or, with ``trust`` set
      (off by default, see ``__init__``), only until ``trust`` of them are measured.  From
      then on neither floor applies: under loss the exact round
      trips vary with the recoveries (0.03-0.44 s at 0.1 % loss per port, k=16, budget 4),
      and ``rto``'s variance term, or the 0.3 s ``timeout``, held every lost contribution
      0.3 s where chunks complete in 0.07 s (ratio 0.28 -> 0.34 with the silent points'
      NACKs; docs/results.md, issue 39);
    * ``cap``: ``max_rto``, never below the measured ``srtt`` -- a cap below the round trip resends every chunk
      in flight each ``cap`` seconds (docs/simulate.md, "Why 4 x 64 workers collapse").

    ``start`` (default ``initial``): both timeouts until their first sample -- the plan's
    time for a worker's first window (``workers.ina.cc.first_timeout``), which a first copy
    only queued behind the start burst needs; ``initial`` stays ``first_rto``'s floor.

    Until the first completion sample, ``escape`` ambiguous completions in a row double the
    completion timeout: a first timeout below the completion time (a ``timeout`` set too
    short) retransmits every chunk, so no completion sample could ever correct it.
    """

    def __init__(self, initial: float, min_rto: float, max_rto: float, *, mult: float = 2.0,
                 window: int = 64, escape: int = 32, granularity: float = 0.01,
                 trust: int | None = None, loss_mult: float = 2.0,
                 loss_after: int = 16, start: float | None = None) -> None:
        if not 0 < min_rto <= max_rto or not 0 < initial <= max_rto:
            raise ValueError("need 0 < min_rto <= max_rto and 0 < initial <= max_rto")
        if start is not None and not initial <= start <= max_rto:
            raise ValueError("need initial <= start <= max_rto")
        if mult < 1 or window < 1 or escape < 1 or granularity < 0:
            raise ValueError("need mult >= 1, window >= 1, escape >= 1 and granularity >= 0")
        self.initial, self.min_rto, self.max_rto = initial, min_rto, max_rto
        self.mult, self.escape, self.granularity = mult, escape, granularity
        # completions measured before first_rto follows them alone (None: never).  Off by
        # default: on Mininet, where completions vary with the processes' scheduling, it
        # resent first copies early, and walkthrough-p4's lossless run saw 9 slot
        # collisions of those late copies (0 with the floors); with 16 it helped the
        # simulated k=16 runs under loss (docs/results.md, issue 39)
        self.trust = trust
        if loss_mult < 1 or loss_after < 1:
            raise ValueError("need loss_mult >= 1 and loss_after >= 1")
        self.loss_mult, self.loss_after = loss_mult, loss_after
        # the measured loss (probe_rto): first copies sent and NACKs received over the job,
        # and the contributions per chunk (the round's members; WorkerRound sets it)
        self.firsts = self.nacked = 0
        self.members = 1
        self.rtts: deque[float] = deque(maxlen=window)
        self.completions: deque[float] = deque(maxlen=window)
        # before the first sample: ``start`` (the plan's time for a first window, the job's
        # first_timeout), else ``initial``; ``initial`` stays the floor of first_rto
        self._rtt_rto = self._wait = initial if start is None else start
        self.srtt: float | None = None
        self.rttvar = 0.0
        self._run = 0  # ambiguous completions in a row, before the first completion sample

    @property
    def measured(self) -> bool:
        """Whether a round trip was measured yet."""
        return bool(self.rtts)

    @property
    def cap(self) -> float:
        """The largest timeout: ``max_rto``, or the smoothed round trip when it is longer."""
        s, m = self.srtt or 0.0, self.max_rto  # max() by hand: read ~9 times per RESULT
        return s if s > m else m

    @property
    def rto(self) -> float:
        return min(self.cap, max(self._rtt_rto, self.first_rto / 4))

    @property
    def probe_rto(self) -> float:
        """A prober's timeout: ``rto``; once this worker was NACKed and ``loss_after``
        completions are measured, ``loss_mult`` times :attr:`quick` instead (a loss-free
        chunk's time; :meth:`nack`)."""
        if self.loss_ready:
            return min(self.cap, max(self.min_rto, self.loss_mult * self.quick))
        return self.rto

    @property
    def loss_ready(self) -> bool:
        """Whether :attr:`probe_rto` follows the loss-free completions."""
        return self.nacked > 0 and len(self.completions) >= self.loss_after

    @property
    def lossy(self) -> bool:
        """Whether this worker has seen loss (a NACK)."""
        return self.nacked > 0

    @property
    def chunk_loss(self) -> float:
        """The share of chunks that wait for someone's recovery: ``1 - (1 - p) ** members``,
        ``p`` the share of this worker's first copies the PS NACKed (0 before any NACK)."""
        if not self.nacked or not self.firsts:
            return 0.0
        p = min(1.0, self.nacked / self.firsts)
        return 1.0 - (1.0 - p) ** self.members

    @property
    def quick(self) -> float:
        """A loss-free chunk's completion time: the median of the fastest ``1 -
        chunk_loss`` of the recent completions (0 before any).  Under loss per port nearly
        every chunk of a 64-worker job waits for someone's recovery, so the median of all
        of them measures the recoveries; the few chunks no loss held are their fast end.
        Without much loss it is the median (a fixed low quantile was too early there: the
        first window of a round completes before the queues fill, and its probes, NACKs and
        RESULT copies spread to every worker)."""
        if not self.completions:
            return 0.0
        ordered = sorted(self.completions)
        q = (1.0 - self.chunk_loss) / 2
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]

    def first_sent(self) -> None:
        """A first copy left (the denominator of :attr:`chunk_loss`)."""
        self.firsts += 1

    def nack(self) -> None:
        """The PS lacked this worker's contribution after a switch's flush (a NACK): loss
        seen.  From then on (kept across rounds) :attr:`probe_rto` is ``loss_mult`` times
        :attr:`quick`, once ``loss_after`` completions are measured: neither the job's
        ``timeout`` nor the variance of the exact round trips holds it.  Without loss no
        NACK comes (no probe, no flush), so a lossless run keeps its timers."""
        self.nacked += 1

    @property
    def first_rto(self) -> float:
        if self.trust is not None and len(self.completions) >= self.trust:
            return min(self.cap, max(self.min_rto, self._wait))
        return min(self.cap, max(self.initial, self._rtt_rto, self._wait))

    def sample(self, rtt: float) -> None:
        """One exact round trip (RFC 6298 section 2)."""
        rtt = max(0.0, rtt)
        self.rtts.append(rtt)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        rto = self.srtt + max(self.granularity, 4 * self.rttvar)
        self._rtt_rto = min(self.cap, max(self.min_rto, rto))

    @property
    def fastest(self) -> float:
        """The shortest recent completion time (0 before any): a chunk that all workers'
        copies reached at once and no loss held; a chunk younger than twice it is not yet
        late, whatever completed after it ("NACKs and probers")."""
        return min(self.completions, default=0.0)

    def completion(self, t: float) -> None:
        self.completions.append(max(0.0, t))
        ordered = sorted(self.completions)
        median = ordered[len(ordered) // 2]
        self._wait = min(self.cap, max(self.min_rto, self.mult * median))

    def ambiguous(self) -> None:
        if self.completions:
            return
        self._run += 1
        if self._run >= self.escape:
            self._run = 0
            self._wait = min(self.cap, 2 * self.first_rto)


class _Flight:
    """An in-flight chunk: its timer and when each of its copies went out."""

    __slots__ = ("deadline", "passed", "retries", "rto", "seq", "strikes", "times")

    def __init__(self, now: float, rto: float, seq: int = 0) -> None:
        self.deadline, self.retries, self.rto = now + rto, 0, rto
        self.seq = seq  # its place in the send order
        self.passed = 0  # chunks sent after it that completed before it
        self.strikes = 0  # timeouts in a row with no RESULT in between: the back-off exponent
        self.times = [now]  # copy i went out at times[i] (copy 0: the first transmission)


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
        rtt: RttEstimator | None = None,
        min_timeout: float = 0.01,
        silence: float | None = None,
        cc: CongestionControl | None = None,
        members: Sequence[int] | None = None,
        holdoff: float = 6.0,
        dupthresh: int = 0,
        hierarchical: bool = False,
        probe_first: float = 2.0,
        tail: int = 4,
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
        self.silence = SILENCE if silence is None else silence
        self.expect_mask = expect_mask
        # "NACKs and probers": one member per chunk retransmits at the measured timeout,
        # the others wait ``holdoff`` times longer before their first retransmission
        if holdoff < 1:
            raise ValueError(f"holdoff must be >= 1, got {holdoff}")
        self.holdoff = holdoff
        if dupthresh < 0:
            raise ValueError(f"dupthresh must be >= 0 (0: no fast retransmit), got {dupthresh}")
        self.dupthresh = dupthresh
        if probe_first <= 0 or tail < 0:
            raise ValueError("need probe_first > 0 and tail >= 0")
        self.probe_first, self.tail = probe_first, tail  # "Under loss"
        ms = sorted(members) if members else []
        self._probing = worker_id in ms  # members known: probers, fast retransmit, NACKs
        # the chunks this worker probes, found once a round: a RESULT's loop asks for every
        # chunk in flight (prober sorts the members: 64 of them per ask cost more than the
        # rest of the RESULT's handling; bench/ina_host_pps.py)
        probes = frozenset(c for c, _, _ in sched if self._probing
                           and prober(ms, c, round_) == worker_id)
        self._prober = probes.__contains__ if self._probing else (lambda c: True)
        # one estimator per job in the I/O shell; a round on its own starts from ``timeout``
        self.rtt = rtt if rtt is not None else RttEstimator(timeout, min(min_timeout, timeout),
                                                            max_timeout)
        # the congestion control policy, one per job in the I/O shell (workers.ina.cc)
        self.rtt.members = max(1, len(ms))  # contributions per chunk (chunk_loss)
        self.cc: CongestionControl = cc if cc is not None else Fixed(window)
        # a hierarchical job's GRADs carry no bit (the switches' child tables give it) and
        # its RESULTs the members folded to the bitmap's width (docs/protocol.md §5.1)
        self.hierarchical = hierarchical
        self.bit = fold_mask(1 << worker_id)
        if expect_mask is not None:
            self.expect_mask = fold_mask(expect_mask)
        self.result = np.zeros_like(self.values)
        self.stats = WorkerStats()
        self.failed: str | None = None
        self._next = 0  # index into schedule of the next chunk to send
        self._route = {c: (a, f) for c, a, f in sched}
        self._inflight: dict[int, _Flight] = {}
        self._copies_of_done: dict[int, list[float]] = {}  # completed chunk -> its copies' times
        self._progress_at = float("-inf")  # when a RESULT last completed a chunk
        self._probe_at = float("-inf")  # in a silence: when the next probe may go
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
        return min([f.deadline for f in self._inflight.values()])  # a list: no generator

    # -- events ------------------------------------------------------------------------------

    def start(self, now: float) -> list[InaPacket]:
        """First packets: fill the window."""
        if self._started:
            raise RuntimeError("start() called twice")
        self._started = True
        self._progress_at = now
        return self._fill(now)

    def on_packet(self, pkt: InaPacket, now: float) -> list[InaPacket]:
        """Take a received packet (a RESULT); return the packets to send next."""
        st = self.stats
        if pkt.msg_type != TYPE_RESULT or pkt.job_id != self.job_id:
            st.unexpected_results += 1
            return []
        if pkt.round != self.round:
            st.stale_results += 1
            return []
        c = pkt.chunk_id
        if pkt.flags & FLAG_INCOMPLETE:
            return self._on_nack(pkt, now)
        if (c not in self._route or not pkt.bitmap & self.bit
                or (self.expect_mask is not None and pkt.bitmap != self.expect_mask)
                or getattr(pkt.values, "shape", None) != (self.k,)):
            st.unexpected_results += 1
            return []
        if self._done[c]:
            st.dup_results += 1
            if not np.array_equal(self.result[c * self.k:(c + 1) * self.k], pkt.values):
                st.conflicting_results += 1
            if c in self._copies_of_done:  # it may still time one of our late copies
                self._echo(self._copies_of_done[c], pkt, now)
            return self._chase(pkt, now)
        if c not in self._inflight:  # never sent: it cannot contain our contribution
            st.unexpected_results += 1
            return []
        chased = self._chase(pkt, now)
        f = self._inflight.pop(c)
        self.cc.on_result(now, self._measure(f, pkt, now))
        if FLAG_ECN is not None and pkt.flags & FLAG_ECN:
            self.stats.marks += 1
            self.cc.on_mark(now)
        if pkt.flags & FLAG_FALLBACK:  # a packet of the chunk fell back (the PS says)
            self.stats.fell_back += 1
            self.cc.on_fallback(now)
        if f.retries:
            self._copies_of_done[c] = f.times
        self._progress_at = now
        self.result[c * self.k:(c + 1) * self.k] = pkt.values
        self._done[c] = True
        self._n_done += 1
        st.results += 1
        # The network answers: whatever is still in flight gets its timeout from now at
        # most -- a first copy rto (its longer first_rto covers the others' start; once
        # RESULTs come after it, they have started: module docstring), a retransmitted one
        # its backed-off timeout.  Also ends a silence's deferrals.
        # A RESULT also ends every chunk's back-off (RFC 6298 5.7: the path answers again,
        # so what is still missing was lost, not delayed).
        rto = self.rtt.rto
        # _hold's rule, its waits found once per RESULT, not once per chunk in flight
        probe_wait, held = self._hold_times(rto)
        probing, probes = self._probing, self._prober
        out = []
        # only chunks of the same aggregation point count as passing: chunks of different
        # points complete out of order by their paths' lengths (make run's interleaved
        # intervals on Mininet: about 3 spurious retransmissions a round otherwise)
        via = self._route[c][0]
        for d, g in list(self._inflight.items()):
            g.strikes = 0
            wait = (probe_wait if probing and probes(d)
                    else rto if g.retries or not probing else held)
            if g.seq < f.seq and not g.retries and self._route[d][0] == via:
                g.passed += 1
                if g.passed == self.dupthresh and self._probing and self._prober(d) \
                        and now - g.times[0] >= 2 * self.rtt.fastest:
                    # later chunks complete: this one is stuck (a contribution or the
                    # RESULT lost); its prober asks at once
                    self.stats.fast += 1
                    out.append(self._retransmit(d, g, self._hold(d, g, rto), now))
                    continue
            if g.deadline > now + wait:
                g.deadline = now + wait
        return chased + out + self._fill(now)

    def tick(self, now: float) -> list[InaPacket]:
        """Retransmit every in-flight chunk whose timer expired at ``now``."""
        if self.failed:
            return []
        # earliest deadline first; ties in (re)transmission order (dict order, stable sort)
        due = sorted((c for c, f in self._inflight.items() if f.deadline <= now),
                     key=lambda c: self._inflight[c].deadline)
        out = []
        for c in due:
            f = self._inflight[c]
            if self.max_retries is not None and f.retries >= self.max_retries:
                f.deadline = now
                self.failed = (f"worker {self.worker_id} round {self.round}: chunk {c} "
                               f"unanswered after {f.retries} retransmissions")
                return out
            self.cc.on_timeout(now)
            # RFC 6298 5.5, per chunk: the i-th timeout in a row with no RESULT in between
            # waits backoff**i times the measured rto (the first timeout before any round
            # trip is measured), up to the cap
            f.strikes += 1
            base = self.rtt.rto if self.rtt.measured else self.rtt.first_rto
            if self.rtt.loss_ready and self._probing and self._prober(c):
                base = self.rtt.probe_rto  # loss seen: the prober's own timeout
            # a prober's first probes are not backed off: when it lacked the chunk
            # itself, its probe completes its own part and only the next one flushes
            strikes = 0 if self._probing and f.retries < 2 and self._prober(c) else f.strikes
            if self._in_tail():
                base, strikes = min(base, self.rtt.probe_rto), 0  # "Under loss"
            rto = min(self.rtt.cap, base * self.backoff ** strikes)
            if now - self._progress_at >= self.silence:
                # nothing came for a while (a dead link, a removed worker, or bad luck): one
                # probe per interval, not the whole window
                if now < self._probe_at:
                    f.deadline = self._probe_at
                    continue
                self._probe_at = now + rto
            out.append(self._retransmit(c, f, rto, now))
        return out

    # -- internals ---------------------------------------------------------------------------

    def _in_tail(self) -> bool:
        """Whether this round is in its last ``tail`` chunks under loss ("Under loss"):
        every first copy sent, at most ``tail`` chunks in flight, loss seen."""
        return (self.rtt.loss_ready and self._next >= len(self.schedule)
                and len(self._inflight) <= self.tail)

    def _hold_times(self, rto: float) -> tuple[float, float]:
        """:meth:`_hold`'s two waits besides ``rto``: a probed chunk's, and a first copy's
        of a chunk this worker does not probe."""
        return self.rtt.probe_rto, min(self.rtt.cap * self.holdoff, rto * self.holdoff)

    def _hold(self, c: int, f: _Flight, rto: float) -> float:
        """How long chunk ``c``'s copy waits: ``rto``, ``holdoff`` times it before the first
        retransmission of a chunk this worker does not probe ("NACKs and probers";
        :meth:`on_packet` applies the same rule inline, over every chunk in flight)."""
        if self._probing and self._prober(c):
            return self.rtt.probe_rto
        if f.retries or not self._probing:
            return rto
        return min(self.rtt.cap * self.holdoff, rto * self.holdoff)

    def _chase(self, pkt: InaPacket, now: float) -> list[InaPacket]:
        """A RESULT names the chunk its PS completed before it (``prev_mark``; "Chained
        RESULTs"): if that chunk is still in flight here, its RESULT was lost on the way
        (the PS sent it first, down the same tree): ask for it at once, unless a
        retransmission of it left less than ``rto`` ago (its answer may be coming)."""
        mark = pkt.prev_mark
        if mark is None:
            return []
        if self.n_chunks <= PREV_MOD:
            f = self._inflight.get(mark)
            p = mark
        else:  # ids wrap: the one chunk in flight with that mark, if only one
            hits = [d for d in self._inflight if d % PREV_MOD == mark]
            p = hits[0] if len(hits) == 1 else -1
            f = self._inflight.get(p)
        if f is None or self.failed or (f.retries and now - f.times[-1] < self.rtt.rto):
            return []
        self.stats.chased += 1
        return [self._retransmit(p, f, self.rtt.rto, now)]

    def _on_nack(self, pkt: InaPacket, now: float) -> list[InaPacket]:
        """The PS asks for chunk ``pkt.chunk_id`` again: a switch flushed its aggregate
        without this worker (``pkt.bitmap``: the workers it has), or the chunk is missing
        behind later ones or overdue (flagged RETRANSMIT: the PS saw chunks sent after it,
        so no copy of it is on its way; ``workers.ina.asks``).  Resend it at once, unless,
        after a flush, a copy left less than half a ``probe_rto`` ago (it answers the ask).
        A NACK naming a switch (``agg_id``) is that aggregation point's, multicast to all of
        its workers: only one whose chunk goes there and whose bit it lacks resends."""
        c = pkt.chunk_id
        f = self._inflight.get(c)
        if pkt.agg_id:
            if (f is None or self.failed or pkt.bitmap & self.bit
                    or self._route[c][0] != pkt.agg_id):
                return []  # another worker's ask, or answered already
            self.stats.point_nacks += 1
        elif f is None or pkt.bitmap & self.bit or self.failed:
            self.stats.unexpected_results += 1
            return []
        else:
            self.stats.nacks += 1
        self.rtt.nack()
        rto = self.rtt.rto
        # a copy younger than half the prober's timeout may still be on its way (once loss
        # is seen that is a loss-free chunk's completion time, not rto's 0.15 s: k=16,
        # budget 4, 1 % loss, NACKs 55 ms after the first copy were refused twice)
        if not pkt.flags & FLAG_RETRANSMIT and now - f.times[-1] < self.rtt.probe_rto / 2:
            return []
        return [self._retransmit(c, f, rto, now, answer=bool(pkt.agg_id))]

    def _measure(self, f: _Flight, pkt: InaPacket, now: float) -> float | None:
        """Feed the estimator from a RESULT that completed the in-flight chunk ``f``; the
        exact round trip it gave (None: none)."""
        # Karn: a retransmitted chunk's RESULT may answer any copy; a RESULT the PS sent
        # again (a top-up, docs/protocol.md §6 "Lost RESULTs") times the PS, not the path
        if not f.retries and not pkt.flags & FLAG_RETRANSMIT:
            self.rtt.completion(now - f.times[0])
        else:
            self.rtt.ambiguous()
        rtt = self._echo(f.times, pkt, now)
        if rtt is None and pkt.echo.worker == self.worker_id \
                and not f.retries and not pkt.flags & FLAG_RETRANSMIT:
            rtt = now - f.times[0]  # an aggregate that our only copy completed
            self.rtt.sample(rtt)
        return rtt

    def _echo(self, times: list[float], pkt: InaPacket, now: float) -> float | None:
        """If the RESULT echo names one of our GRADs (and its copy number mod 16), sample its
        exact round trip and return it.  Karn's rule where the echo cannot tell: when two
        copies share the number (more than 16), no sample."""
        echo = pkt.echo
        if echo.worker != self.worker_id or echo.copy is None:
            return None
        copies = [t for i, t in enumerate(times) if i % COPY_MOD == echo.copy]
        if len(copies) != 1:
            return None
        self.rtt.sample(now - copies[0])
        return now - copies[0]

    def _retransmit(self, c: int, f: _Flight, rto: float, now: float,
                    answer: bool = False) -> InaPacket:
        """Send chunk ``c`` again and restart its timer with ``rto``; an ``answer`` to an
        aggregation point's NACK is flagged INCOMPLETE as well (its point does not ask
        again when it crosses the first copy)."""
        copy = len(f.times)
        self.cc.on_send(now)
        f.deadline, f.rto = now + rto, rto
        f.retries += 1
        f.times.append(now)
        self._inflight[c] = self._inflight.pop(c)  # ties in tick(): retransmission order
        self.stats.retransmits += 1
        if self.direct_after is not None and f.retries > self.direct_after:
            self.stats.direct += 1
            return self._grad(c, FLAG_RETRANSMIT | FLAG_FALLBACK, copy, AGG_ID_PS)
        return self._grad(c, FLAG_RETRANSMIT | (FLAG_INCOMPLETE if answer else 0), copy)

    def _fill(self, now: float) -> list[InaPacket]:
        out = []
        first = self.rtt.first_rto  # first_sent() below does not change it
        # "Under loss": a prober's first copy follows the loss-free completions (found
        # once a window, as ``first``: first_sent() below moves chunk_loss a little)
        probe = (min(first, self.probe_first * self.rtt.probe_rto) if self.rtt.loss_ready
                 else first)
        while len(self._inflight) < self.cc.window and self._next < len(self.schedule):
            c = self.schedule[self._next][0]
            self._next += 1
            self.cc.on_send(now)
            self.rtt.first_sent()
            self._inflight[c] = f = _Flight(now, first, self._next)
            # a first copy waits first_rto (the others' copies may still come), a
            # non-prober holdoff times longer ("NACKs and probers")
            f.deadline = now + (probe if self._probing and self._prober(c)
                                else self._hold(c, f, first))
            self.stats.sent += 1
            out.append(self._grad(c, 0))
        return out

    def _grad(self, c: int, flags: int, copy: int = 0, agg_id: int | None = None) -> InaPacket:
        """Copy number ``copy`` of chunk ``c``'s GRAD (to ``agg_id``, default its route)."""
        agg, fan_in = self._route[c]
        if agg_id is not None:
            agg = agg_id
        return InaPacket.grad(self.job_id, self.round, c, agg, fan_in, self.worker_id,
                              self.values[c * self.k:(c + 1) * self.k], flags=flags, copy=copy,
                              hierarchical=self.hierarchical)
