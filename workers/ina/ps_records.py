"""What the PS's merge (:class:`workers.ina.ps.PsState`) reports -- its counters, the anomalies
a correct network should not produce, and what one packet asks the I/O shell to do -- and the
state it keeps per round and chunk."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workers.ina.late_asks import LateAsks
from workers.ina.wire import InaPacket


@dataclass
class PsStats:
    """Counters of everything the PS saw (all monotone)."""

    packets: int = 0  # accepted (well-formed) GRAD/PARTIAL packets
    grads: int = 0  # raw worker packets (type GRAD)
    partials: int = 0  # aggregated packets (type PARTIAL)
    fallbacks: int = 0  # packets flagged FALLBACK
    retransmits: int = 0  # packets flagged RETRANSMIT
    incomplete: int = 0  # PARTIALs flagged INCOMPLETE
    duplicates: int = 0  # worker set already stored for the chunk
    conflicts: int = 0  # duplicate set with different values (anomaly)
    superseded: int = 0  # arrived as a strict superset of a stored piece
    redundant: int = 0  # arrived as a strict subset of a stored piece
    overlaps: int = 0  # partial overlap with a stored piece (anomaly)
    pieces_dropped: int = 0  # non-singleton pieces over the max_pieces cap
    late: int = 0  # packets for an already completed chunk (answered with RESULT)
    stale_round: int = 0
    future_round: int = 0
    malformed: int = 0
    chunks_completed: int = 0
    rounds_completed: int = 0
    results_sent: int = 0
    results_resent: int = 0  # answers to asks for completed chunks (none while one is held)
    results_unicast: int = 0  # of results_resent: to the one worker that asked
    results_late_multicast: int = 0  # of results_resent: one answer to many asks at once
    marked: int = 0  # of results_sent: carrying a congestion mark (FLAG_ECN) of a merged packet
    results_doubled: int = 0  # of results_sent: sent in more than one copy ("Lost RESULTs")
    result_copies: int = 0  # the extra copies of those
    result_topups: int = 0  # copies sent later, once the loss estimate asked for more
    nacks: int = 0  # asks to resend sent to single workers (workers.ina.ps, "NACKs")
    overdue: int = 0  # of nacks: a chunk later than its neighbours (the same)
    gaps: int = 0  # of nacks: a stream's piece missing behind later ones (the same)
    reasked: int = 0  # of nacks: asked again, the last one unanswered (the same)
    malformed_reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Anomaly:
    """Something a correct network should not produce, recorded for the run report."""

    round: int
    chunk_id: int
    kind: str  # "conflict" | "overlap" | "cover_budget" | "pieces_cap"
    bitmap: int
    detail: str = ""


@dataclass
class PsOutput:
    """What one :meth:`PsState.on_packet` call asks the I/O shell to do."""

    results: list[InaPacket] = field(default_factory=list)  # RESULTs to multicast
    # (worker, RESULT) answers to one worker's late GRAD: sent to that worker alone
    replies: list[tuple[int, InaPacket]] = field(default_factory=list)
    # (worker, NACK) asks to one worker whose contribution a switch's flush lacks: sent to
    # that worker alone, never down the tree (a RESULT there would release the slot)
    nacks: list[tuple[int, InaPacket]] = field(default_factory=list)
    completed_rounds: list[int] = field(default_factory=list)


class ChunkPieces:
    """The pieces stored for one incomplete chunk (worker set -> values) and their union."""

    __slots__ = ("pieces", "union")

    def __init__(self) -> None:
        self.pieces: dict[int, np.ndarray] = {}
        self.union = 0


class RoundState:
    """The PS's state of one round (``workers.ina.ps``)."""

    def __init__(self, n_chunks: int, k: int, mask: int) -> None:
        self.mask = mask  # the round's full mask F (members change between rounds, §9)
        self.chunks: dict[int, ChunkPieces] = {}
        self.done = np.zeros(n_chunks, dtype=bool)
        self.resent = np.zeros(n_chunks, dtype=np.int64)  # RESULT resends per chunk
        self.asked = [0] * n_chunks  # per chunk: the workers a resend already answered
        self.copies = np.ones(n_chunks, dtype=np.int64)  # copies each RESULT went in
        self.sent_at = np.full(n_chunks, np.nan)  # when each new RESULT went ("Lost RESULTs")
        self.nacked = [0] * n_chunks  # per chunk: the workers a NACK asked
        self.late = LateAsks()  # how asks for completed chunks are answered
        self.fewest = 0  # the fewest copies a completed chunk's RESULT went in (0: none)
        self.marked = np.zeros(n_chunks, dtype=bool)  # a merged packet carried FLAG_ECN
        self.fell = np.zeros(n_chunks, dtype=bool)  # a merged packet carried FLAG_FALLBACK
        self.sums = np.zeros((n_chunks, k), dtype=np.int32)
        self.n_done = 0
        # "Chained RESULTs": per chunk the chunk completed before it (-1: none), the last
        self.prev = np.full(n_chunks, -1, dtype=np.int64)
        self.last = -1

    @property
    def left(self) -> int:
        """Chunks not completed yet."""
        return len(self.done) - self.n_done

    @property
    def complete(self) -> bool:
        return self.left == 0
