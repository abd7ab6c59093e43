"""The SwitchML worker: a pure state machine (no I/O, no clock: ``now`` is passed in).

One all-reduce ("round") of an int32 vector: the vector is cut into chunks of K values
(the last one padded with zeros); the worker keeps its window of S = pool_size slots busy,
slot i carrying chunks i, i + S, i + 2S, ... one at a time.  Each slot's version flips on
every use and is kept across rounds, so consecutive uses of a slot alternate between the
switch's two copies (docs/switchml.md).  A RESULT for the chunk a slot is waiting for
completes it and sends the slot's next chunk; any other RESULT (a duplicate, the multicast
copy after a shadow reply, a late one) is ignored.  A chunk whose RESULT has not come by its
deadline is sent again (RETRANSMIT), with a fresh deadline.

Drive it with `start` (a round's vector), `receive` (each decoded packet) and `poll`
(timeouts); each returns the UPDATEs to send.  `next_deadline` says when to poll next.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workers.switchml.constants import TYPE_RESULT, K
from workers.switchml.job import JobConfig
from workers.switchml.wire import Flag, SmPacket


@dataclass
class WorkerStats:
    """What a worker sent and saw, over all its rounds."""

    sent: int = 0            # UPDATEs, first copies
    retransmitted: int = 0   # UPDATEs sent again after a timeout
    results: int = 0         # RESULTs that completed a chunk here
    shadow_results: int = 0  # ... of which answered from a shadow copy
    ignored: int = 0         # RESULTs for nothing outstanding (duplicates, late copies)


@dataclass
class _Slot:
    ver: int = 0                    # the version this slot's next (or current) chunk uses
    chunk: int | None = None        # the chunk outstanding in it, None: idle
    deadline: float = 0.0


@dataclass
class SwitchMLWorker:
    """Worker ``worker_id`` of ``job``."""

    job: JobConfig
    worker_id: int
    stats: WorkerStats = field(default_factory=WorkerStats)

    def __post_init__(self) -> None:
        if self.worker_id not in self.job.workers:
            raise ValueError(f"worker {self.worker_id} is not in job {self.job.job_id}'s "
                             f"workers {list(self.job.workers)}")
        self._slots = [_Slot() for _ in range(self.job.pool_size)]
        self._round: int | None = None
        self._length = 0
        self._chunks: np.ndarray = np.zeros((0, K), np.int32)
        self._result: np.ndarray = np.zeros((0, K), np.int32)
        self._done = 0          # chunks whose RESULT arrived

    # ------------------------------------------------------------------ a round

    def start(self, round: int, vector: np.ndarray, now: float) -> list[SmPacket]:
        """Begin all-reducing ``vector`` (1-D int32) as round ``round`` (larger than every
        earlier round of this worker); returns the window's first UPDATEs."""
        if self._round is not None and not self.done:
            raise RuntimeError(f"round {self._round} is not finished")
        if self._round is not None and round <= self._round:
            raise ValueError(f"round {round} after round {self._round}: rounds must grow")
        vec = np.asarray(vector)
        if vec.ndim != 1 or vec.dtype != np.int32:
            raise ValueError(f"the vector must be 1-D int32, got {vec.dtype} {vec.shape}")
        n = -(-len(vec) // K)
        chunks = np.zeros(n * K, np.int32)
        chunks[:len(vec)] = vec
        self._round, self._length = round, len(vec)
        self._chunks = chunks.reshape(n, K)
        self._result = np.zeros((n, K), np.int32)
        self._done = 0
        # slot i carries chunks i, i + S, i + 2S, ...: the same mapping at every worker
        return [self._send(index, slot, index, now)
                for index, slot in enumerate(self._slots) if index < n]

    @property
    def done(self) -> bool:
        """Every chunk of the current round has its RESULT."""
        return self._round is not None and self._done == len(self._chunks)

    def result(self) -> np.ndarray:
        """The round's sum over the job's workers (int32 wrap-around), padding removed."""
        if not self.done:
            raise RuntimeError("the round is not finished")
        return self._result.reshape(-1)[:self._length].copy()

    # ------------------------------------------------------------------ events

    def receive(self, pkt: SmPacket, now: float) -> list[SmPacket]:
        """A decoded packet from the switch; returns the UPDATEs it makes this worker send."""
        if (pkt.msg_type != TYPE_RESULT or pkt.job_id != self.job.job_id
                or pkt.round != self._round or not 0 <= pkt.pool_index < len(self._slots)):
            self.stats.ignored += 1
            return []
        index = pkt.pool_index
        slot = self._slots[index]
        if slot.chunk is None or pkt.chunk != slot.chunk or pkt.ver != slot.ver \
                or pkt.count != self.job.num_workers:
            self.stats.ignored += 1
            return []
        self._result[slot.chunk] = pkt.values
        self._done += 1
        self.stats.results += 1
        if pkt.flags & Flag.SHADOW:
            self.stats.shadow_results += 1
        slot.ver ^= 1  # the slot's next use takes the other copy
        chunk, slot.chunk = slot.chunk + len(self._slots), None
        if chunk < len(self._chunks):
            return [self._send(index, slot, chunk, now)]
        return []

    def poll(self, now: float) -> list[SmPacket]:
        """The UPDATEs of every slot whose deadline has passed, sent again."""
        out = []
        for index, slot in enumerate(self._slots):
            if slot.chunk is not None and now >= slot.deadline:
                out.append(self._send(index, slot, slot.chunk, now, retransmit=True))
        return out

    def next_deadline(self) -> float | None:
        """When `poll` next has something to send (None: nothing outstanding)."""
        times = [s.deadline for s in self._slots if s.chunk is not None]
        return min(times) if times else None

    # ------------------------------------------------------------------ helpers

    def _send(self, index: int, slot: _Slot, chunk: int, now: float,
              retransmit: bool = False) -> SmPacket:
        slot.chunk, slot.deadline = chunk, now + self.job.timeout
        if retransmit:
            self.stats.retransmitted += 1
        else:
            self.stats.sent += 1
        assert self._round is not None
        return SmPacket.update(self.job.job_id, self.worker_id, index, slot.ver, self._round,
                               chunk, self._chunks[chunk], retransmit)


__all__ = ["SwitchMLWorker", "WorkerStats"]
