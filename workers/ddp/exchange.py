"""A rank's INA exchanges of gradient buckets, pure (no I/O; time comes from the caller).

Each bucket of a step is one :class:`BucketExchange`: a :class:`workers.ina.worker.WorkerRound`
(window, timeouts, RETRANSMIT with the same route, fall-back straight to the PS after
``direct_after`` retries: docs/design.md §3.9, docs/protocol.md §6) running on the bucket's own
chunk ids.  WorkerRound numbers a round's chunks from 0, so the exchange shifts chunk ids by
the bucket's base on the way out and back on the way in; the state machine itself is reused
unchanged.

:class:`RankEngine` runs a rank's buckets one after the other, in submission order.  Why not all
at once: the window bounds how many slots a job holds in every switch (docs/design.md §3.9);
several buckets in flight together would multiply it.  A bucket handed over while another is
in flight waits in the queue -- DDP keeps computing the next buckets' gradients meanwhile, so
communication still overlaps the backward pass.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from workers.ddp.codec import ChunkRange
from workers.ina.constants import K as DEFAULT_K
from workers.ina.wire import InaPacket
from workers.ina.worker import WorkerRound, WorkerStats


@dataclass(frozen=True)
class SenderParams:
    """The job file's sender settings (``workers/ina/job.py``), shared by a rank's buckets."""

    job_id: int
    worker_id: int
    k: int = DEFAULT_K
    window: int = 16
    timeout: float = 0.05
    max_timeout: float = 1.0
    direct_after: int | None = 3


class BucketExchange:
    """One bucket of one step: the worker state machine on chunk ids ``rng.base ..``."""

    def __init__(self, ticket: int, round_: int, rng: ChunkRange, values: np.ndarray,
                 schedule: Sequence[tuple[int, int, int]], p: SenderParams) -> None:
        self.ticket, self.round, self.rng = ticket, round_, rng
        local = [(c - rng.base, a, f) for c, a, f in schedule]
        self.wr = WorkerRound(job_id=p.job_id, worker_id=p.worker_id, round_=round_,
                              values=values, schedule=local, k=p.k, window=p.window,
                              timeout=p.timeout, max_timeout=p.max_timeout,
                              direct_after=p.direct_after)
        if self.wr.n_chunks != rng.n_chunks:
            raise ValueError(f"bucket values fill {self.wr.n_chunks} chunks, "
                             f"its range has {rng.n_chunks}")

    def owns(self, pkt: InaPacket) -> bool:
        return pkt.round == self.round and self.rng.base <= pkt.chunk_id < self.rng.stop

    def _out(self, pkts: list[InaPacket]) -> list[InaPacket]:
        b = self.rng.base
        return [replace(p, chunk_id=p.chunk_id + b) for p in pkts] if b else pkts

    def start(self, now: float) -> list[InaPacket]:
        return self._out(self.wr.start(now))

    def on_packet(self, pkt: InaPacket, now: float) -> list[InaPacket]:
        return self._out(self.wr.on_packet(replace(pkt, chunk_id=pkt.chunk_id - self.rng.base),
                                           now))

    def tick(self, now: float) -> list[InaPacket]:
        return self._out(self.wr.tick(now))


@dataclass
class Completed:
    """A finished bucket: its int32 sum over all ranks (whole range, padding included)."""

    ticket: int
    round: int
    rng: ChunkRange
    total: np.ndarray
    stats: WorkerStats


@dataclass
class EngineStats:
    buckets: int = 0
    sent: int = 0
    retransmits: int = 0
    direct: int = 0
    dup_results: int = 0
    conflicting_results: int = 0
    ignored: int = 0  # RESULTs of no bucket in flight (late duplicates, other rounds)
    per_round_retransmits: dict[int, int] = field(default_factory=dict)


class RankEngine:
    """A rank's bucket exchanges, one in flight at a time (see the module docstring)."""

    def __init__(self, params: SenderParams) -> None:
        self.params = params
        self.stats = EngineStats()
        self._queue: deque[BucketExchange] = deque()
        self._active: BucketExchange | None = None
        self._completed: list[Completed] = []

    @property
    def busy(self) -> bool:
        return self._active is not None

    def submit(self, ticket: int, round_: int, rng: ChunkRange, values: np.ndarray,
               schedule: Sequence[tuple[int, int, int]], now: float) -> list[InaPacket]:
        """Queue a bucket (``values``: int32, ``rng.n_chunks * k``, from ``encode_bucket``;
        ``schedule``: ``bucket_schedule``'s global entries); returns packets to send now."""
        self._queue.append(BucketExchange(ticket, round_, rng, values, schedule, self.params))
        return self._advance(now) if self._active is None else []

    def on_packet(self, pkt: InaPacket, now: float) -> list[InaPacket]:
        a = self._active
        if a is None or not a.owns(pkt):
            self.stats.ignored += 1
            return []
        out = a.on_packet(pkt, now)
        if a.wr.done:
            out += self._advance(now)
        return out

    def tick(self, now: float) -> list[InaPacket]:
        return [] if self._active is None else self._active.tick(now)

    def next_deadline(self) -> float | None:
        return None if self._active is None else self._active.wr.next_deadline()

    def pop_completed(self) -> list[Completed]:
        done, self._completed = self._completed, []
        return done

    def abandon(self) -> list[int]:
        """Drop every queued and active bucket (the caller gave up); returns their tickets."""
        tickets = ([self._active.ticket] if self._active else []) + [b.ticket for b in self._queue]
        self._active = None
        self._queue.clear()
        return tickets

    def _advance(self, now: float) -> list[InaPacket]:
        """Retire the finished active bucket, start queued ones (an empty-looking start is
        impossible: every bucket has at least one chunk)."""
        out: list[InaPacket] = []
        a = self._active
        if a is not None and a.wr.done:
            self._retire(a)
            self._active = None
        while self._active is None and self._queue:
            self._active = self._queue.popleft()
            out += self._active.start(now)
        return out

    def _retire(self, a: BucketExchange) -> None:
        st, s = self.stats, a.wr.stats
        st.buckets += 1
        st.sent += s.sent
        st.retransmits += s.retransmits
        st.direct += s.direct
        st.dup_results += s.dup_results
        st.conflicting_results += s.conflicting_results
        if s.retransmits:
            st.per_round_retransmits[a.round] = (st.per_round_retransmits.get(a.round, 0)
                                                 + s.retransmits)
        self._completed.append(Completed(a.ticket, a.round, a.rng, a.wr.result.copy(),
                                         WorkerStats(**asdict(s))))
