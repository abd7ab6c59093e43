"""The simulator's discrete-event core: one heap of ``(time, seq, callback, arg)``.

Chosen over SimPy by ``bench/sim_event_core.py`` (docs/simulate.md): the simulator's events
are plain callbacks (a frame delivered, a timer fired), so SimPy's processes and event
objects only add cost per event.  ``seq`` breaks ties in the order events were scheduled,
so a run is deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["EventLoop"]


class EventLoop:
    """Virtual time: :meth:`at` schedules ``callback(arg)``; :meth:`run` pops in time order."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0  # callbacks run so far
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self._stop = False

    def at(self, t: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` at virtual time ``t`` (not before :attr:`now`)."""
        self._seq += 1
        heapq.heappush(self._heap, (t if t > self.now else self.now, self._seq, callback, arg))

    def stop(self) -> None:
        """End :meth:`run` after the current event."""
        self._stop = True

    def run(self, until: float = float("inf")) -> None:
        """Run events in time order until none is left, :meth:`stop`, or time ``until``."""
        heap, pop = self._heap, heapq.heappop
        self._stop = False
        n = 0
        while heap and not self._stop:
            if heap[0][0] > until:
                break
            t, _, cb, arg = pop(heap)
            self.now = t
            cb(arg)
            n += 1
        self.events += n

    def __len__(self) -> int:
        return len(self._heap)
