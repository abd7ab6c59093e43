"""What the PS and worker state machines of docs/design.md §6 share (sync and async modes), no I/O.

The PS is :class:`workers.ndn.ps.PsState`, the worker :class:`workers.ndn.worker.WorkerState`; this
module holds the modes, the events they emit, the segmented :class:`Fetcher` and their common
base.

Each state machine has one face (its link to the first router).  Every entry point takes ``now``
(seconds, any monotone clock) and returns the NDN wires to send on that face; :meth:`tick`
fires timers, :meth:`next_deadline` says when it next needs to be called, and ``events`` collects
what the application must act on.  Names are those of ``workers.ndn.names``.

Rounds and versions
    Parameters version 0 are the model initialization (step 3).  Round r (0 <= r < n_rounds):
    every worker trains from version r and produces a gradient; the PS collects the gradients of
    version r (step 5), computes version r+1 with the injected ``update`` function and
    distributes it (step 6).  After version ``n_rounds`` arrives a worker unsubscribes (step 8).

Async mode (``mode="async"`` in PsConfig and WorkerConfig; docs/design.md §6 with §5's PS)
    The PS does not wait for every worker: each complete gradient is pushed on its own into
    :class:`~workers.ndn.ps.AsyncUpdater` (``workers.async_ps.core.AsyncPS`` and its policies), and
    every C-th push (soft synchronization, docs/design.md §5; C = 1: every push) makes a new
    version, published at once on ``/distribute/<ps>/<train>/v=<version>`` (multicast along the
    persistent PIT to every subscriber, as in sync mode).  Version = the PS clock T_ps = soft-sync
    batches applied so far; the run ends after ``budget`` pushes (default n_rounds x workers, a
    multiple of C), so the last version is ``budget / C``.
    Names  [decision]: the collection Interest is ``/<worker>/<ps>/<train>/v=<k>`` with k the
            worker's *push sequence number* (0, 1, 2, ... per worker), not a global round: the PS
            cannot know which version a worker trained from, only that it wants that worker's next
            gradient.  It stays PS-timed (step 5): push k+1 is requested at t(push k applied) +
            (1 - lead_fraction) * d_g, d_g the EWMA of "push k applied -> first segment of push
            k+1 arrives" -- the sync estimator with the round start replaced by the worker's own
            previous push.  The gradient Data content is ``uint32 LE t_w`` (the version the
            gradient was computed from) followed by the gradient bytes.
    Staleness: the PS computes sigma = T_ps - t_w + 1 of docs/design.md §5 at arrival (>= 1;
            1 = no update since t_w) and reports
            ``staleness = sigma - 1 = current version - gradient's version`` (0 = fresh).  The
            policy scale is AsyncPS's: eta (async), eta/sigma, eta/kappa with kappa the mean of
            sigma and the worker's previous N-1 sigmas; the PS keeps each worker's window on its
            behalf (it computed every sample), which is exactly ``kappa_mode="ps"`` of
            :mod:`workers.async_ps.core` without carrying the window on the wire.
    Worker: trains from the newest complete version it holds.  After handing over gradient k
            (trained from t_w) it waits until every segment of it was sent (the PS collected
            it: a worker never runs ahead of the PS's collection) and it holds a version > the
            newest it held at hand-over (the batch holding its push makes one); versions
            completed meanwhile only replace the newest.  [decision] With C > 1 a worker thus
            waits for the batch its push is in: over NDN it learns the PS's state only from
            distributions, so it cannot tell "my push is pending" from "its version was
            lost" except by waiting; C <= workers keeps that from deadlocking (the waiting workers'
            pushes are the pending ones, so all waiting means C pushes are pending).  The
            probe timer (same history rule) and active fetch of the awaited version recover
            a lost distribution; the worker finishes (and unsubscribes) when it holds the last
            version, even in the middle of a step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ndn.encoding import FormalName

from workers.ndn import names as nn
from workers.ndn.packets import (
    TLV_DATA,
    TLV_INTEREST,
    Data,
    Interest,
    PacketError,
    Reassembler,
    decode_data,
    decode_interest,
    encode_interest,
    packet_type,
)

__all__ = [
    "ACCEPT",
    "DECLINE",
    "GRAD_HEADER",
    "MODES",
    "Applied",
    "Fetcher",
    "Finished",
    "MachineBase",
    "MachineStats",
    "Published",
    "Train",
    "check_mode",
    "pack_gradient",
    "unpack_gradient",
]

ACCEPT = b"accept"
DECLINE = b"decline"
MODES = ("sync", "async")
GRAD_HEADER = 4  # async: uint32 LE version the gradient was computed from, before the gradient


def pack_gradient(version: int, grad: bytes) -> bytes:
    """Async gradient Data content: the version it was trained from, then the gradient."""
    return version.to_bytes(GRAD_HEADER, "little") + grad


def unpack_gradient(payload: bytes) -> tuple[int, bytes]:
    """(t_w, gradient) of an async gradient; ValueError if too short for the header."""
    if len(payload) < GRAD_HEADER:
        raise ValueError(f"async gradient of {len(payload)} bytes has no version header")
    return int.from_bytes(payload[:GRAD_HEADER], "little"), payload[GRAD_HEADER:]


def check_mode(mode: str) -> None:
    """ValueError unless ``mode`` is one of :data:`MODES`."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: must be one of {', '.join(MODES)}")


# ============================================================================ events


@dataclass(frozen=True)
class Train:
    """Worker: start training from parameters ``version`` (call gradient_ready when done)."""

    version: int
    params: bytes


@dataclass(frozen=True)
class Finished:
    """Worker: the final parameters arrived; the worker has unsubscribed."""

    version: int
    params: bytes


@dataclass(frozen=True)
class Applied:
    """PS, async: the push ``seq`` of ``worker`` (computed from ``t_w``) went into ``version``
    (made it when ``applied``, the C-th push of its soft-sync batch).

    ``sigma`` = T_ps - t_w + 1 (docs/design.md §5), ``staleness`` = sigma - 1 = versions the
    gradient missed, ``kappa`` its window context, ``scale`` the learning rate it was applied with.
    """

    worker: str
    seq: int
    t_w: int
    version: int
    sigma: int
    staleness: int
    kappa: float
    scale: float
    applied: bool = True


@dataclass(frozen=True)
class Published:
    """PS: parameters ``version`` were computed and distributed."""

    version: int
    params: bytes


# ============================================================================ fetcher


@dataclass
class Fetcher:
    """Consumer side of a segmented fetch of ``base/seg=i`` into ``reasm``.

    Segments are requested all at once when their count is known (else segment 0 first).
    Each outstanding segment has a deadline: ``wait_s`` after it was expressed, shortened to
    ``rto_s`` after any segment of this fetch arrives (the producer is answering, so a segment
    still missing then was lost).  Expired segments are re-expressed.  ``wait_s`` is the
    Interest lifetime for collection (the worker may hold the Interest until its gradient is
    ready) and ``rto_s`` for content and active fetches (the PS answers at once, or holds a
    fetch of a version it has not published yet, which a re-expression simply renews).
    """

    base: FormalName
    reasm: Reassembler
    wait_s: float
    rto_s: float
    outstanding: dict[int, float] = field(default_factory=dict)
    retransmissions: int = 0
    first_arrival: float | None = None
    got: int = 0

    def request(self, now: float) -> list[int]:
        """Segments to express now (all missing ones not already outstanding)."""
        todo = [s for s in self.reasm.missing() if s not in self.outstanding]
        for s in todo:
            self.outstanding[s] = now + self.wait_s
        return todo

    def on_data(self, data: Data, now: float) -> tuple[bool, list[int]]:
        """Feed a segment; returns (was new, segments to express now)."""
        new = self.reasm.add_data(data)
        if not new:
            return False, []
        self.got += 1
        if self.first_arrival is None:
            self.first_arrival = now
        _base, seg = nn.split_segment(data.name)
        self.outstanding.pop(seg, None)
        cap = now + self.rto_s
        for s, dl in self.outstanding.items():
            if dl > cap:
                self.outstanding[s] = cap
        return True, ([] if self.reasm.complete else self.request(now))

    def due(self, now: float) -> list[int]:
        """Outstanding segments whose deadline passed: re-express them."""
        late = [s for s, dl in self.outstanding.items() if dl <= now]
        deadline = now + (self.rto_s if self.got else self.wait_s)
        for s in late:
            self.outstanding[s] = deadline
        self.retransmissions += len(late)
        return late

    def next_deadline(self) -> float | None:
        return min(self.outstanding.values(), default=None)


# ============================================================================ common


@dataclass
class MachineStats:
    """Counters of a PS or worker state machine."""

    sent_interests: int = 0
    sent_data: int = 0
    received: int = 0
    dropped: int = 0  # malformed, foreign or unexpected packets
    retransmissions: int = 0


class MachineBase:
    """What the PS and worker state machines share: identity, Interest encoding (fresh nonce),
    packet decoding with drop counting, counters and the event queue."""

    def __init__(self, me: str, role: str, lifetime_s: float, rto_s: float, seed: int) -> None:
        self.me = nn.check_id(me, role)
        self.role = role
        self.lifetime_s = lifetime_s
        self.rto_s = rto_s
        self.rng = random.Random(seed)
        self.stats = MachineStats()
        self.events: list[object] = []

    def pop_events(self) -> list[object]:
        """The events since the last call, oldest first."""
        ev, self.events = self.events, []
        return ev

    def interest(self, name: FormalName, lifetime_s: float | None = None) -> bytes:
        self.stats.sent_interests += 1
        ms = round(1000 * (self.lifetime_s if lifetime_s is None else lifetime_s))
        return encode_interest(name, self.rng.getrandbits(32), lifetime_ms=ms)

    def _decode(self, wire: bytes) -> Interest | Data | None:
        self.stats.received += 1
        try:
            typ = packet_type(wire)
            if typ == TLV_INTEREST:
                return decode_interest(wire)
            if typ == TLV_DATA:
                return decode_data(wire)
        except PacketError:
            pass
        self.stats.dropped += 1
        return None
