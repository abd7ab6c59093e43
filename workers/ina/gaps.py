"""Contributions lost on their way to the PS, told from the order the others arrive in.

Free of I/O; :class:`workers.ina.asks.Asks` feeds it every first arrival at the PS and picks
the worker to ask for what it reports (docs/protocol.md §6, "NACKs").

Streams
    Every worker sends its first copies in chunk order, and a switch's slot for chunk c
    completes when the last of its contributions arrives, which each worker sent before its
    contribution to any later chunk.  So the pieces with one worker set B (the aggregate of
    one subtree; a single worker's raw GRAD) among the chunks of one route -- a *stream* --
    leave their last switch in chunk order.  They may reach the PS a little out of order
    (ina.p4 spreads packets over equal-cost next hops in turn, and parallel paths queue
    differently), so a chunk of a stream whose piece B is still missing once ``dupthresh``
    later chunks of the stream delivered theirs is taken as lost: TCP's fast retransmit
    (RFC 5681 section 3.2) seen from the receiver, per stream.

    A chunk's route is what the workers' schedules say of it: the worker set of each first
    aggregation point (``PsState``'s groups).  Chunks with the same groups form one class;
    positions are ranks within the class.  Each (round, class, piece) stream reports a chunk
    at most once; a stream's last ``dupthresh`` chunks of a round are never reported (no
    later chunk comes): the workers' timeouts find those.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping


class _Stream:
    __slots__ = ("arrived", "low", "reported")

    def __init__(self, n: int) -> None:
        self.arrived = bytearray(n)
        self.low = 0  # every position below has arrived
        self.reported: set[int] = set()


class GapDetector:
    """Finds chunks whose piece of a stream is missing behind ``dupthresh`` later arrivals.

    ``routes``: chunk -> its route (any hashable; chunks with equal routes form a class), in
    the order the workers send the chunks.
    """

    def __init__(self, routes: Mapping[int, Hashable], dupthresh: int = 3) -> None:
        if dupthresh < 1:
            raise ValueError(f"dupthresh must be >= 1, got {dupthresh}")
        self.dupthresh = dupthresh
        classes: dict[Hashable, list[int]] = {}
        for c in routes:  # in send order
            classes.setdefault(routes[c], []).append(c)
        self._members = list(classes.values())  # class id -> its chunks, ascending
        self._where: dict[int, tuple[int, int]] = {}  # chunk -> (class id, position)
        for k, chunks in enumerate(self._members):
            for i, c in enumerate(chunks):
                self._where[c] = (k, i)
        self._streams: dict[tuple[int, int, int], _Stream] = {}

    def arrived(self, round_: int, chunk: int, piece: int) -> list[int]:
        """Piece ``piece`` (a worker set) of ``chunk`` reached the PS in round ``round_``:
        the chunks of its stream now taken as lost, each reported once."""
        where = self._where.get(chunk)
        if where is None:
            return []
        k, i = where
        key = (round_, k, piece)
        st = self._streams.get(key)
        if st is None:
            st = self._streams[key] = _Stream(len(self._members[k]))
        if st.arrived[i]:
            return []
        st.arrived[i] = 1
        lost: list[int] = []
        later = 1  # arrivals at positions j+1 .. i
        for j in range(i - 1, st.low - 1, -1):
            if st.arrived[j]:
                later += 1
            elif later >= self.dupthresh and j not in st.reported:
                st.reported.add(j)
                lost.append(self._members[k][j])
        while st.low < len(st.arrived) and st.arrived[st.low]:
            st.low += 1
        return lost

    def forget(self, below: int) -> None:
        """Drop the streams of rounds before ``below`` (completed)."""
        for key in [key for key in self._streams if key[0] < below]:
            del self._streams[key]


class Overdue:
    """Chunks of one round whose completion is overdue, told from the completions around
    them in the send order (the tail a :class:`GapDetector` cannot see).

    Chunks complete at the PS nearly in the order the workers send them, spaced by the
    busiest link's time for one chunk.  So once chunk p-1, or any chunk sent after p, has
    completed, p should follow within ``tau``: ``mult`` times the ``quantile`` of the
    lateness of the recent chunks that came on their own (each one's completion less the
    first completion at its neighbour p-1 or beyond), at least ``floor``.  A chunk later
    than that is reported (the PS asks for it), then again every ``tau * 2**strikes``.
    Before a round's first completion nothing is reported: the workers may still be
    starting.  ``now`` is passed in.
    """

    def __init__(self, order: list[int], *, mult: float = 4.0, quantile: float = 0.9,
                 floor: float = 0.02, window: int = 256) -> None:
        if mult < 1 or not 0 < quantile <= 1 or floor <= 0 or window < 1:
            raise ValueError("need mult >= 1, 0 < quantile <= 1, floor > 0, window >= 1")
        self.order = list(order)
        self._pos = {c: i for i, c in enumerate(self.order)}
        self.mult, self.quantile, self.floor = mult, quantile, floor
        self.samples: deque[float] = deque(maxlen=window)
        self.round = None
        self._reset(None)

    def _reset(self, round_: int | None) -> None:
        self.round = round_
        self._done: set[int] = set()
        self._top = -1  # the highest position completed
        self._t_top = 0.0
        self._holes: dict[int, float] = {}  # incomplete position below _top -> its reference
        self._strikes: dict[int, int] = {}  # position -> reports so far

    @property
    def tau(self) -> float:
        """How late a chunk may be before it is reported."""
        if not self.samples:
            return self.floor
        ordered = sorted(self.samples)
        q = ordered[min(len(ordered) - 1, int(len(ordered) * self.quantile))]
        return max(self.floor, self.mult * q)

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
        if ref is not None and p not in self._strikes:
            self.samples.append(now - ref)  # came on its own: how late it was
        if p > self._top:
            for h in range(self._top + 1, p):
                self._holes[h] = now  # a chunk sent after it completed first
            self._top, self._t_top = p, now

    def _due(self) -> dict[int, float]:
        """Position -> when it is overdue."""
        tau = self.tau
        due = {h: ref + tau for h, ref in self._holes.items() if h not in self._strikes}
        nxt = self._top + 1
        if 0 <= self._top and nxt < len(self.order) and nxt not in self._strikes:
            due[nxt] = self._t_top + tau
        return due

    def next_deadline(self) -> float | None:
        """When the next chunk becomes overdue (None: none can)."""
        return min(self._due().values(), default=None)

    def overdue(self, now: float) -> list[int]:
        """The chunks overdue at ``now``; each is reported again only after its back-off."""
        late = [h for h, t in self._due().items() if t <= now]
        for h in late:
            self._strikes[h] = self._strikes.get(h, 0) + 1
            if h in self._holes:
                self._holes[h] = now
            else:
                self._t_top = now  # the next position's reference restarts too
        return [self.order[h] for h in sorted(late)]
