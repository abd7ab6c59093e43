"""How many copies of a new RESULT the PS sends down the tree (docs/protocol.md §6, "Lost
RESULTs"), from the loss it can observe; pure, no I/O (the caller passes the clock).

A round waits for its last worker, and a worker that does not probe a chunk finds a lost
RESULT only after several timeouts (``workers.ina.worker``, "NACKs and probers"), so one
lost delivery near a round's end costs the whole job those timeouts.  Each new RESULT
therefore goes in ``n`` copies, the fewest with ``q ** n * D <= lost_target`` (one), up to
``max_copies`` (4), where ``D`` is the round's deliveries (chunks x workers) and ``q`` the
loss of one delivery.  The copies must answer loss, not congestion: a copy loads every
downlink of the tree, so copies sent for a delay lengthen the queues that caused it (make
run's fat-tree, ``atp`` design, VGG-16, no loss: 1,119 of 1,299 RESULTs in 4 copies and
4.0 s a round where one copy takes 1.27, when every late GRAD counted as a lost RESULT).

A late GRAD is evidence only when it was sent after the RESULT could have arrived
    A late GRAD (a worker's own, for a chunk already completed) is sent either because the
    RESULT was lost or because the worker's timer fired while the RESULT was still on its
    way (queued; the GRAD crosses it).  A crossing GRAD was sent before the RESULT reached
    its worker, so it reaches the PS less than one round trip after the PS sent the
    RESULT; one arriving later was sent when the RESULT should have been there: lost.  The
    **round trip** is the PS's own measurement, no header field: from the latest NACK it
    sent a worker to the first piece holding that worker's contribution to the chunk
    (``nacked``, ``heard``).  Those times have long tails both ways -- a worker refuses a
    NACK while its last copy is young and answers a later one or its own timer, an answer
    is lost; a contribution only queued arrives at once -- so the bound is ``margin`` (4)
    times the lower quartile of the last ``window`` (32) of them (:meth:`rtt_bound`), and
    before the first one the PS does not judge (the GRAD is not counted).  Measured
    (``bench.suite``'s lossless ``atp`` cell: every first ask 0.003-0.038 s after its
    RESULT, NACK round trips 0.009-0.045 s; fat-tree k=16, 64 workers, 1 % loss, one copy:
    the asks of RESULTs lost 0.2-0.3 s after them from NACKed workers and probers, 0.4-2.3
    s from the others, which hold off six timeouts; lower quartile 0.01-0.04 s).

    Such an ask is ``q ** m`` of the deliveries of RESULTs sent in ``m`` copies (all lost);
    a worker asking **again**, by a later copy number (``InaPacket.copy_number``), for a
    chunk the PS already answered it is ``q ** (m + 1)`` (the RESULT and the one-copy answer
    both lost; rare under delay: the worker's back-off doubles its timer), counted
    whenever it comes, at most once per worker and chunk.
NACKs not asked twice
    The PS does not ask a worker again for a chunk while its last ask may still be
    answered (:meth:`pending`: asked less than the bound ago).  That bound leaves out the
    round trips of zero: a piece that arrives at the very instant of the ask was on its way
    before it, no answer.  Where they made the quartile 0, every flush asked the same
    workers again: one chunk's 41 asks were followed by 4 x 25 more within 10 ms, and a
    storm of re-asks, re-emits and answers to late asks held the round 2.4 s (fat-tree
    k=16, 64 workers, budget 4, 0.1 % loss, seed 2: ratio 0.195, 0.650 without them;
    docs/results.md).  The judgements of a lost RESULT or an unanswered NACK keep them:
    left out there as well, 1 % loss at budget 4 fell (median of 6 seeds 0.240 -> 0.184).
NACKs asked again
    A NACK, or the answer it asks for, can be lost too; the chunk then waits for its
    prober's next timeout, backed off (0.3 s at 0.1 % loss, where the round takes 0.25).
    Mid-round the other chunks keep the links busy meanwhile; in a round's last ``tail``
    (4) chunks nothing does, so there the PS asks a worker again when its NACK went
    unanswered for twice the round-trip bound (of the round trips longer than zero), four
    and eight times after that, at most :data:`REASKS` (3) times (:meth:`reask`; each
    flagged RETRANSMIT, which the worker never refuses, and counted once as a loss).  At
    any chunk it cost more than it saved under 1 % loss (fat-tree k=16, 64 workers, budget
    4, seeds 0-5: median 0.369 -> 0.303: mid-round an answer is mostly late behind the
    queues, and asking again adds to them); in the tail only, 0.1 % loss seed 0 went 0.464
    -> 0.533, every seed of twelve at least that (docs/results.md, "NACKs asked again").
Decay
    The counts of RESULTs sent in ``m`` copies and of their lost asks are kept over the job,
    halved at each completed round (counts below a half are dropped): the estimate for
    ``m`` copies keeps its ratio while no RESULT goes in ``m`` copies, and fades, through
    the floor of half a round's deliveries below, after the loss stops.
NACKs
    A NACK (``workers.ina.ps``, "NACKs") is a contribution lost on the way up, and a path
    loses as much down: it tells the loss before most RESULTs could be asked for.  But a
    switch also flushes when a prober's timer fires while the others' GRADs are only
    queued, so the NACKs' share of the deliveries (this round so far and the previous one)
    counts only in a job that has shown RESULTs lost, by a lost ask since the counts
    above were last dropped.
Floors
    A round so far counts as at least half a round of deliveries, so that a few early
    events are not taken for a loss rate.
Top-ups
    The first lost ask comes a round trip and a timer after its RESULT, so the RESULTs
    sent before it went in one copy; when the estimate rises the PS sends those of this
    round and the previous one (its workers may still wait for them) the copies they now
    lack (``workers.ina.ps``, ``PsState._top_up``; :meth:`topped_up` moves their
    deliveries to the new count).  Measured both ways (docs/results.md, "Late asks timed
    against the PS's round trip"): neither is at or above the old rule on every loss row.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator

from workers.ina.wire import COPY_MOD

REASKS = 3
"""The most times the PS asks a worker again for one chunk (:meth:`ResultCopies.reask`)."""


class ResultCopies:
    """The PS's loss meter for its RESULT copies (module docstring).  ``n_chunks``:
    chunks per round; ``lost_target``: the lost deliveries a round may expect;
    ``max_copies``: the most copies of one RESULT; ``decay``: the factor each completed
    round applies to the job's counts; ``tail``: a round's last chunks, in which a NACK
    that went unanswered is asked again ("NACKs asked again")."""

    def __init__(self, n_chunks: int, lost_target: float = 1.0, max_copies: int = 4,
                 decay: float = 0.5, window: int = 32, margin: float = 4.0,
                 tail: int = 4) -> None:
        if lost_target <= 0 or max_copies < 1:
            raise ValueError("need lost_target > 0 and max_copies >= 1")
        if not 0 < decay <= 1:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.n_chunks, self.lost_target, self.max_copies = n_chunks, lost_target, max_copies
        self.decay = decay
        self.margin = margin  # rtt_bound: this many times the NACK round trips' quartile
        self.tail = tail  # _reasks: a round's last chunks, whose lost NACKs are asked again
        self.sent_by: dict[int, float] = {}  # m -> deliveries of RESULTs sent in m copies
        # (m, p) -> lost asks of those, each q ** p of the deliveries (module docstring)
        self.lost_by: dict[tuple[int, int], float] = {}
        # round -> [NACKs sent, deliveries of the chunks completed]
        self._nacks: dict[int, list[float]] = {}
        # (round, chunk, worker) -> copy number of the late GRAD the PS answered; None: a
        # repeated ask was counted
        self._answered: dict[tuple[int, int, int], int | None] = {}
        # (round, chunk) -> {worker: when the PS NACKed it} until its contribution is heard
        self._asked: dict[tuple[int, int], dict[int, float]] = {}
        self.rtts: deque[float] = deque(maxlen=window)  # the last NACK round trips
        # (round, chunk, worker) -> times asked again (_reasks)
        self._reasked: dict[tuple[int, int, int], int] = {}

    # -- events ----------------------------------------------------------------------------

    def sent(self, round_: int, copies: int, workers: int) -> None:
        """A new RESULT of ``round_`` went in ``copies`` copies to ``workers`` workers."""
        self.sent_by[copies] = self.sent_by.get(copies, 0.0) + workers
        self._nacks.setdefault(round_, [0.0, 0.0])[1] += workers

    def nacked(self, round_: int, n: int = 1, chunk: int | None = None,
               worker: int | None = None, now: float | None = None) -> None:
        """The PS sent ``n`` NACKs for chunks of ``round_``; with ``chunk``, ``worker`` and
        ``now``, one to that worker at that time, whose answer :meth:`heard` times."""
        self._nacks.setdefault(round_, [0.0, 0.0])[0] += n
        if chunk is not None and worker is not None and now is not None:
            # the latest NACK: a worker refuses one while its last copy is young and
            # answers the next, so the earliest would time its timer, not the path
            self._asked.setdefault((round_, chunk), {})[worker] = now

    def heard(self, round_: int, chunk: int, workers: int, now: float) -> None:
        """A piece of chunk ``chunk`` of ``round_`` holding the workers of mask ``workers``
        arrived at ``now``: a round-trip sample for each of them the PS NACKed for it."""
        asked = self._asked.get((round_, chunk))
        if not asked:
            return
        for w in [w for w in asked if workers >> w & 1]:
            self.rtts.append(max(0.0, now - asked.pop(w)))
        if not asked:
            del self._asked[(round_, chunk)]

    def pending(self, round_: int, chunk: int, now: float) -> int:
        """The workers asked for chunk ``chunk`` of ``round_`` less than :meth:`rtt_bound`
        (of the round trips longer than zero: "NACKs not asked twice") before ``now`` whose
        contribution has not been heard since (their answer may be on its way), as a
        bitmap; none before the first such round trip."""
        return self._unheard(round_, chunk, now, self.rtt_bound(answers=True), within=True)

    def unanswered(self, round_: int, chunk: int, now: float) -> int:
        """The workers asked for chunk ``chunk`` of ``round_`` at least :meth:`rtt_bound`
        before ``now`` and not heard from since (their NACK or its answer was lost), as a
        bitmap; none before the first round trip."""
        return self._unheard(round_, chunk, now, self.rtt_bound(), within=False)

    def _unheard(self, round_: int, chunk: int, now: float, bound: float | None,
                 within: bool) -> int:
        """The workers asked for the chunk and not heard from since, asked less than
        ``bound`` ago (``within``) or at least that long ago; none without a bound."""
        asked = self._asked.get((round_, chunk))
        if bound is None or not asked:
            return 0
        return sum(1 << w for w, t in asked.items() if (now - t < bound) == within)

    def completed(self, round_: int, chunk: int) -> None:
        """Chunk ``chunk`` of ``round_`` completed: none of its NACKs waits any more."""
        self._asked.pop((round_, chunk), None)

    def reask_due(self, round_: int, left: int) -> float | None:
        """When the PS next asks again a worker whose NACK for a chunk of ``round_``, which
        has ``left`` chunks to complete, went unanswered ("NACKs asked again"; None: none
        due)."""
        return min((when for when, *_ in self._reasks(round_, left)), default=None)

    def reask(self, round_: int, left: int, now: float) -> dict[int, int]:
        """The unanswered NACKs of ``round_`` (``left`` chunks to complete) to ask again at
        ``now``, as chunk -> workers (the caller sends them; :meth:`nacked` restarts their
        clocks)."""
        out: dict[int, int] = {}
        for when, c, w, k in list(self._reasks(round_, left)):
            if when <= now:
                self._reasked[(round_, c, w)] = k + 1
                out[c] = out.get(c, 0) | 1 << w
        return out

    def _reasks(self, round_: int, left: int) -> Iterator[tuple[float, int, int, int]]:
        """``(when, chunk, worker, times asked again)`` of each NACK of ``round_`` not heard
        from that is to be asked again: only in the round's last ``tail`` chunks, at most
        :data:`REASKS` times, ``2 ** (k + 1)`` times :meth:`rtt_bound` after the last ask."""
        if left > self.tail:
            return
        bound = self.rtt_bound(answers=True)
        if not bound:
            return
        for (r, c), asked in self._asked.items():
            if r == round_:
                for w, t in asked.items():
                    k = self._reasked.get((r, c, w), 0)
                    if k < REASKS:
                        yield t + bound * 2 ** (k + 1), c, w, k

    def rtt_bound(self, answers: bool = False) -> float | None:
        """The longest the PS expects a round trip to a worker to take: ``margin`` times
        the lower quartile of its last ``window`` NACK round trips (module docstring);
        None before the first.  ``answers``: of those longer than zero only, the pieces
        that can have answered an ask (:meth:`pending`; "NACKs not asked twice")."""
        ordered = sorted(t for t in self.rtts if t > 0.0 or not answers)
        if not ordered:
            return None
        return self.margin * ordered[(len(ordered) - 1) // 4]

    def late_grad(self, round_: int, chunk: int, worker: int, copy: int, copies: int,
                  since: float | None = None) -> bool:
        """Worker ``worker``'s GRAD of copy number ``copy`` asked for chunk ``chunk`` of
        ``round_``, completed ``since`` seconds ago and sent in ``copies`` copies; the PS
        answers it.  True if it counted as a lost RESULT (module docstring): a first ask
        arriving more than :meth:`rtt_bound` after the RESULT, or a worker asking again by
        a later copy than the ask the PS answered."""
        key = (round_, chunk, worker)
        if key not in self._answered:
            self._answered[key] = copy
            bound = self.rtt_bound()
            if since is None or bound is None or since <= bound:
                return False  # it may have crossed the RESULT
            self._count(copies, copies)
            return True
        first = self._answered[key]
        if first is None or not 0 < (copy - first) % COPY_MOD < COPY_MOD // 2:
            return False  # counted already, or a duplicate or an older copy
        self._answered[key] = None
        self._count(copies, copies + 1)
        return True

    def _count(self, copies: int, power: int) -> None:
        self.lost_by[(copies, power)] = self.lost_by.get((copies, power), 0.0) + 1

    def topped_up(self, from_copies: int, to_copies: int, workers: int) -> None:
        """A RESULT sent in ``from_copies`` copies to ``workers`` workers got the copies
        up to ``to_copies`` (``workers.ina.ps``, "Lost RESULTs")."""
        self.sent_by[from_copies] = max(0.0, self.sent_by.get(from_copies, 0.0) - workers)
        self.sent_by[to_copies] = self.sent_by.get(to_copies, 0.0) + workers

    def round_done(self, round_: int) -> None:
        """Round ``round_`` completed: the job's counts decay (module docstring), and what
        is kept per round is dropped for rounds before it."""
        for m in self.sent_by:
            self.sent_by[m] *= self.decay
        self.lost_by = {k: a * self.decay for k, a in self.lost_by.items()
                        if a * self.decay >= 0.5}
        self._nacks = {r: v for r, v in self._nacks.items() if r >= round_}
        self._answered = {k: v for k, v in self._answered.items() if k[0] >= round_}
        self._asked = {k: v for k, v in self._asked.items() if k[0] >= round_}
        self._reasked = {k: v for k, v in self._reasked.items() if k[0] >= round_}

    # -- the estimate ----------------------------------------------------------------------

    def loss(self, round_: int, workers: int) -> float:
        """``q``, the estimated loss of one delivery for a RESULT of ``round_`` to
        ``workers`` workers (module docstring)."""
        half = max(1.0, self.n_chunks / 2) * workers
        q = 0.0
        for (m, p), lost in self.lost_by.items():
            seen = max(half, self.sent_by.get(m, 0.0))
            q = max(q, min(1.0, lost / seen) ** (1 / p))
        if q > 0.0:  # RESULTs shown lost: the NACKs tell the loss too
            for r in (round_ - 1, round_):
                nacks, done = self._nacks.get(r, (0.0, 0.0))
                q = max(q, min(1.0, nacks / max(half, done)))
        return q

    def copies(self, round_: int, workers: int, lost_target: float | None = None) -> int:
        """How many copies a new RESULT of ``round_`` to ``workers`` workers goes in: the
        fewest ``n`` with ``q ** n`` times the round's deliveries at most ``lost_target``
        (default: the meter's), between 1 and ``max_copies``."""
        target = self.lost_target if lost_target is None else lost_target
        q = self.loss(round_, workers)
        if q <= 0.0:
            return 1
        if q >= 1.0:
            return self.max_copies
        n = self.n_chunks * workers
        if q * n <= target:
            return 1
        need = math.ceil(math.log(target / n) / math.log(q))
        return max(1, min(self.max_copies, need))
