"""How the PS answers asks for a chunk it already completed (docs/protocol.md §6, "Late
asks answered together"); pure, no I/O (the caller passes the clock).

A worker asks again for a completed chunk when its RESULT was lost, or when the RESULT is
still queued (often in the PS's own link) while its timer fires.  One ask is answered by a
RESULT to that worker alone: a multicast per ask is what collapsed 64-worker jobs
(docs/simulate.md).  But when the PS's link is the queue, the asks come from many workers of
one chunk at once, and a unicast answer to each puts dozens of RESULTs of one chunk on the
link that is already late: fat-tree k=16, 64 workers, budget 4, 1 % loss, seed 4, one
round took 5.5 s with 3,715 unicast answers for 76 chunks.  So the ``many``-th ask of a
chunk within ``window`` seconds is answered by one RESULT down the job's tree, and no ask
of that chunk is answered for ``window`` after it (it is on its way).  Measured with the
points' own NACKs, over six rounds and seeds 0-5 (docs/results.md, "Points ask their
children, and late asks answered together"): the median ratio 0.288 -> 0.370 with
``many`` 3 and 0.1 s, 0.329 with ``many`` 2 (seeds 0-11, against main: 0.300 -> 0.340).
"""

from __future__ import annotations

__all__ = ["HOLD", "LATE_MANY", "LATE_WINDOW_S", "LateAsks", "MULTICAST", "UNICAST"]

UNICAST, MULTICAST, HOLD = "unicast", "multicast", "hold"
LATE_MANY = 3
"""Asks of one chunk within the window that are answered by one multicast RESULT."""
LATE_WINDOW_S = 0.1
"""The window, seconds: a RESULT's time through a queued 1 Mbit/s PS link and back (k=16's
loss-free chunks complete in 0.03-0.05 s)."""


class LateAsks:
    """The late asks of one round, per chunk: :meth:`answer` says how to answer one."""

    def __init__(self, many: int = LATE_MANY, window: float = LATE_WINDOW_S) -> None:
        if many < 1 or not window >= 0:
            raise ValueError(f"need many >= 1 and window >= 0, got {many}, {window}")
        self.many, self.window = many, window
        self._asks: dict[int, list[float]] = {}  # chunk -> its asks within the window
        self._sent: dict[int, float] = {}  # chunk -> when its last multicast answer went

    def answer(self, chunk: int, now: float) -> str:
        """How to answer an ask for ``chunk`` at ``now``: :data:`UNICAST` (to the worker
        that asked), :data:`MULTICAST` (one RESULT down the tree) or :data:`HOLD` (none: a
        multicast answer left less than ``window`` ago)."""
        recent = [t for t in self._asks.get(chunk, ()) if now - t < self.window]
        recent.append(now)
        self._asks[chunk] = recent
        if now - self._sent.get(chunk, -self.window - 1.0) < self.window:
            return HOLD
        if len(recent) >= self.many:
            self._sent[chunk] = now
            return MULTICAST
        return UNICAST
