"""Contributions lost on their way to the PS, told from the order and the times the others
arrive at (RACK's idea, RFC 8985, seen from the receiver).

Free of I/O, ``now`` passed in; :class:`workers.ina.asks.Asks` feeds it every first arrival
at the PS and picks the worker to ask for what it reports (docs/protocol.md §6, "NACKs").

Streams
    Every worker sends its first copies in one order (its schedule's), and a switch's slot
    for chunk c completes when the last of its contributions arrives, which each worker
    sent before its contribution to any later chunk.  So the pieces with one worker set B
    (the aggregate of one subtree; a single worker's raw GRAD) among the chunks of one route
    -- a *stream* -- leave their last switch in the send order.  They may reach the PS a
    little out of order: ina.p4 spreads packets over equal-cost next hops in turn, and
    parallel paths queue differently.  So a piece missing once a later piece of its stream
    arrived is *behind*, and taken as lost when it is still missing ``tau`` after that: the
    reordering window, ``mult`` times the ``quantile`` of how long the recent behind pieces
    that did arrive took to (the samples), at least ``floor``.  Each is reported once.

    A chunk's route is what the workers' schedules say of it: the worker set of each first
    aggregation point.  Chunks with the same groups form one class; positions are ranks in
    the send order within the class.  A stream's last chunks of a round have no later
    piece behind which they could be missing: :class:`Overdue` finds those.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Mapping


class _Window:
    """``mult`` times the ``quantile`` of the last ``window`` samples, at least ``floor``."""

    def __init__(self, mult: float, quantile: float, floor: float, window: int) -> None:
        if mult < 1 or not 0 < quantile <= 1 or floor <= 0 or window < 1:
            raise ValueError("need mult >= 1, 0 < quantile <= 1, floor > 0, window >= 1")
        self.mult, self.quantile, self.floor = mult, quantile, floor
        self.samples: deque[float] = deque(maxlen=window)

    @property
    def tau(self) -> float:
        if not self.samples:
            return self.floor
        ordered = sorted(self.samples)
        q = ordered[min(len(ordered) - 1, int(len(ordered) * self.quantile))]
        return max(self.floor, self.mult * q)


class _Stream:
    __slots__ = ("arrived", "behind", "reported", "top")

    def __init__(self, n: int) -> None:
        self.arrived = bytearray(n)
        self.top = -1  # the highest position arrived
        self.behind: dict[int, float] = {}  # missing position below top -> since when
        self.reported: set[int] = set()


class GapDetector:
    """Finds pieces missing behind later pieces of their stream for longer than ``tau``.

    ``routes``: chunk -> its route (any hashable; chunks with equal routes form a class), in
    the order the workers send the chunks.
    """

    def __init__(self, routes: Mapping[int, Hashable], *, mult: float = 4.0,
                 quantile: float = 0.9, floor: float = 0.02, window: int = 256) -> None:
        self.reorder = _Window(mult, quantile, floor, window)
        classes: dict[Hashable, list[int]] = {}
        for c in routes:  # in send order
            classes.setdefault(routes[c], []).append(c)
        self._members = list(classes.values())  # class id -> its chunks, in send order
        self._where: dict[int, tuple[int, int]] = {}  # chunk -> (class id, position)
        for k, chunks in enumerate(self._members):
            for i, c in enumerate(chunks):
                self._where[c] = (k, i)
        self._streams: dict[tuple[int, int, int], _Stream] = {}
        # (behind since, round, class, piece, position): the oldest first (stale entries
        # -- arrived or reported since -- are skipped when they come up)
        self._heap: list[tuple[float, int, int, int, int]] = []

    @property
    def tau(self) -> float:
        """How long a piece may be behind before it is taken as lost."""
        return self.reorder.tau

    def arrived(self, round_: int, chunk: int, piece: int, now: float) -> None:
        """Piece ``piece`` (a worker set) of ``chunk`` reached the PS in round ``round_``."""
        where = self._where.get(chunk)
        if where is None:
            return
        k, i = where
        key = (round_, k, piece)
        st = self._streams.get(key)
        if st is None:
            st = self._streams[key] = _Stream(len(self._members[k]))
        if st.arrived[i]:
            return
        st.arrived[i] = 1
        since = st.behind.pop(i, None)
        if since is not None and i not in st.reported:
            self.reorder.samples.append(now - since)  # it was only reordered
        for j in range(st.top + 1, i):  # now behind this one
            st.behind[j] = now
            heapq.heappush(self._heap, (now, round_, k, piece, j))
        if i > st.top:
            st.top = i

    def next_deadline(self) -> float | None:
        """When the next piece behind may be taken as lost (None: none is behind)."""
        heap = self._heap
        while heap:
            since, r, k, piece, j = heap[0]
            st = self._streams.get((r, k, piece))
            if st is not None and j in st.behind and j not in st.reported:
                return since + self.tau
            heapq.heappop(heap)
        return None

    def lost(self, now: float) -> list[tuple[int, int, int]]:
        """``(round, chunk, piece)`` of each piece taken as lost at ``now``, once."""
        out = []
        tau, heap = self.tau, self._heap
        while heap and heap[0][0] + tau <= now:
            _, r, k, piece, j = heapq.heappop(heap)
            st = self._streams.get((r, k, piece))
            if st is not None and j in st.behind and j not in st.reported:
                st.reported.add(j)
                out.append((r, self._members[k][j], piece))
        return out

    def forget(self, below: int) -> None:
        """Drop the streams of rounds before ``below`` (completed)."""
        for key in [key for key in self._streams if key[0] < below]:
            del self._streams[key]
        self._heap = [e for e in self._heap if e[1] >= below]
        heapq.heapify(self._heap)


class Overdue:
    """Chunks of one round whose completion is overdue, told from the completions around
    them in the send order (the tail a :class:`GapDetector` cannot see).

    Chunks complete at the PS nearly in the order the workers send them, spaced by the
    busiest link's time for one chunk.  So once chunk p-1, or any chunk sent after p, has
    completed, p should follow within ``tau``: ``mult`` times the ``quantile`` of the
    lateness of the recent chunks that came on their own (each one's completion less the
    first completion at its neighbour p-1 or beyond), at least ``floor``.  A chunk later
    than that is reported once a round (the PS asks for it; after that the recovery is the
    workers' timers' and the NACKs').  Before a round's first completion nothing is
    reported: the workers may still be starting.  ``now`` is passed in.
    """

    def __init__(self, order: list[int], *, mult: float = 4.0, quantile: float = 0.9,
                 floor: float = 0.05, window: int = 256) -> None:
        self.lateness = _Window(mult, quantile, floor, window)
        self.order = list(order)
        self._pos = {c: i for i, c in enumerate(self.order)}
        self.round: int | None = None
        self._reset(None)

    def _reset(self, round_: int | None) -> None:
        self.round = round_
        self._done: set[int] = set()
        self._top = -1  # the highest position completed
        self._t_top = 0.0
        self._holes: dict[int, float] = {}  # incomplete position below _top -> its reference
        self._reported: set[int] = set()

    @property
    def tau(self) -> float:
        """How late a chunk may be before it is reported."""
        return self.lateness.tau

    def completed(self, round_: int, chunk: int, now: float) -> None:
        """Chunk ``chunk`` of ``round_`` completed at ``now`` (a later round starts anew)."""
        p = self._pos.get(chunk)
        if p is None:
            return
        if round_ != self.round:
            self._reset(round_)
        if p in self._done:
            return
        self._done.add(p)
        ref = self._holes.pop(p, None)
        if ref is None and p == self._top + 1 and self._top >= 0:
            ref = self._t_top
        if ref is not None and p not in self._reported:
            self.lateness.samples.append(now - ref)  # came on its own: how late it was
        if p > self._top:
            for h in range(self._top + 1, p):
                self._holes[h] = now  # a chunk sent after it completed first
            self._top, self._t_top = p, now

    def _due(self) -> dict[int, float]:
        """Position -> when it is overdue."""
        tau = self.tau
        due = {h: ref + tau for h, ref in self._holes.items() if h not in self._reported}
        nxt = self._top + 1
        if 0 <= self._top and nxt < len(self.order) and nxt not in self._reported:
            due[nxt] = self._t_top + tau
        return due

    def next_deadline(self) -> float | None:
        """When the next chunk becomes overdue (None: none can)."""
        return min(self._due().values(), default=None)

    def overdue(self, now: float) -> list[int]:
        """The chunks overdue at ``now``, each reported once a round."""
        late = sorted(h for h, t in self._due().items() if t <= now)
        self._reported.update(late)
        return [self.order[h] for h in late]
