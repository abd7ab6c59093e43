"""Egress queues between ingress and egress, as BMv2 simple_switch has them: pure (no clock,
no I/O; the time ``now`` is passed in, in seconds since the switch started).

BMv2 (``targets/simple_switch/simple_switch.cpp``, ``bm_sim/queueing.h``,
``QueueingLogicPriRL``): one queue per egress port, ``--priority-queues N`` of them per
port (``standard_metadata.priority`` picks one; a priority >= N is dropped), each with a
capacity in packets (default 64) and a rate in packets per second (default unlimited),
set by the runtime CLI's ``set_queue_depth`` / ``set_queue_rate`` (per port, or per port
and priority) and ``set_all_queue_depth`` / ``set_all_queue_rate``.  A packet leaves its
queue at ``max(now, previous departure + 1/rate)`` (BMv2's ``get_next_tp``); a packet that
finds the queue full is dropped (drop-tail).  The egress pipeline then sees
``enq_timestamp`` (µs at enqueue), ``enq_qdepth`` (packets in the queue when it was
enqueued), ``deq_timedelta`` (µs spent in the queue) and ``deq_qdepth``.

What differs, and why: pyswitch runs egress when the packet is enqueued (its departure is
known then, from the rate), so a packet's ``deq_qdepth`` can only count packets already
enqueued, and in one FIFO queue all of those leave before it: ``deq_qdepth`` is 0.  Each
(port, priority) queue is served at its own rate (no strict priority between the queues of
a port, which would need the later arrivals).  Arrivals and departures at the same instant:
the arrival is counted first, so a burst at one instant sees depths 0, 1, 2, ...
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

__all__ = ["DEFAULT_DEPTH", "Admitted", "EgressQueues", "PortQueue", "rate_pps"]

DEFAULT_DEPTH = 64  # BMv2's default queue capacity, in packets
_U32 = (1 << 32) - 1


@dataclass(frozen=True)
class Admitted:
    """One packet through a queue: the metadata egress sees (µs, packets) and when it
    leaves the queue (``departure``, seconds)."""

    enq_timestamp: int
    enq_qdepth: int
    deq_timedelta: int
    deq_qdepth: int
    departure: float


@dataclass
class PortQueue:
    """One FIFO queue: capacity `depth` packets, served at `rate` packets/s (0: unlimited)."""

    depth: int = DEFAULT_DEPTH
    rate: float = 0.0
    last: float = float("-inf")  # departure time of the last packet admitted
    waiting: deque = field(default_factory=deque)  # departure times not yet reached

    def enqueue(self, now: float) -> Admitted | None:
        """Admit a packet arriving at `now` (None: the queue is full, drop-tail)."""
        w = self.waiting
        while w and w[0] < now:  # departures at `now` itself come after this arrival
            w.popleft()
        qdepth = len(w)
        if qdepth >= self.depth:
            return None
        dep = now if self.rate <= 0 else max(now, self.last + 1.0 / self.rate)
        self.last = dep
        if self.rate > 0:
            w.append(dep)
        return Admitted(int(now * 1e6) & _U32, qdepth, int(round((dep - now) * 1e6)) & _U32,
                        0, dep)


class EgressQueues:
    """Every egress queue of a switch: ``nb_queues`` per port, created on first use with
    the switch's defaults; drops counted per port (``drops``)."""

    def __init__(self, nb_queues: int = 1) -> None:
        if nb_queues < 1:
            raise ValueError("the number of priority queues must be >= 1")
        self.nb_queues = nb_queues
        self.default_depth = DEFAULT_DEPTH
        self.default_rate = 0.0
        self.queues: dict[tuple[int, int], PortQueue] = {}
        self.drops: Counter = Counter()

    @property
    def active(self) -> bool:
        """Whether any queue can hold a packet (a rate is set): else nothing queues and
        every field egress sees is 0 but the timestamp."""
        return self.default_rate > 0 or any(q.rate > 0 for q in self.queues.values())

    def queue(self, port: int, priority: int = 0) -> PortQueue:
        q = self.queues.get((port, priority))
        if q is None:
            q = self.queues[(port, priority)] = PortQueue(self.default_depth, self.default_rate)
        return q

    def _targets(self, port: int | None, priority: int | None) -> list[PortQueue]:
        prios = range(self.nb_queues) if priority is None else [priority]
        if priority is not None and not 0 <= priority < self.nb_queues:
            raise ValueError(f"priority {priority} out of range (0..{self.nb_queues - 1})")
        if port is None:
            return list(self.queues.values())
        return [self.queue(port, p) for p in prios]

    def set_depth(self, depth: int, port: int | None = None,
                  priority: int | None = None) -> None:
        """Capacity in packets of one port's queue(s), or of all (`port` None)."""
        if depth < 0:
            raise ValueError(f"queue depth {depth} < 0")
        if port is None:
            self.default_depth = depth
        for q in self._targets(port, priority):
            q.depth = depth

    def set_rate(self, rate_pps: float, port: int | None = None,
                 priority: int | None = None) -> None:
        """Rate in packets per second of one port's queue(s), or of all; 0 is unlimited."""
        if rate_pps < 0:
            raise ValueError(f"queue rate {rate_pps} < 0")
        if port is None:
            self.default_rate = float(rate_pps)
        for q in self._targets(port, priority):
            q.rate = float(rate_pps)

    def enqueue(self, port: int, priority: int, now: float) -> Admitted | None:
        """A packet for `port` at priority `priority` arriving at `now`; None: dropped
        (queue full, or a priority with no queue, as BMv2), counted in ``drops[port]``."""
        if priority >= self.nb_queues:
            self.drops[port] += 1
            return None
        a = self.queue(port, priority).enqueue(now)
        if a is None:
            self.drops[port] += 1
        return a


def rate_pps(link_mbps: float, frame_bytes: int = 1500) -> float:
    """The queue rate (packets/s, what ``set_queue_rate`` takes) that drains a link of
    `link_mbps` Mbit/s with frames of `frame_bytes` bytes (the controller passes each
    switch port's link rate; BMv2's queues count packets, not bytes)."""
    if link_mbps <= 0 or frame_bytes <= 0:
        raise ValueError("link rate and frame size must be > 0")
    return link_mbps * 1e6 / (8 * frame_bytes)
