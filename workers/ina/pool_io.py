"""Several hosts' :class:`workers.ina.driver.HostIO` in one process: one ``poll`` over every
member's sockets, one timer per member (docs/scale.md, "Several hosts per process").

A worker process pays 123–223 µs of CPU per chunk when each RESULT wakes a sleeping process
on shared cores with cold caches; the same work hot in one process is about 21 µs
(docs/results.md, "Host cost per packet").  :class:`HostPool` serves several workers from
one loop: :meth:`HostPool.add` gives each member its own sockets (opened wherever the caller
likes: in the member host's network namespace, :mod:`workers.common.netns`) and a
:class:`MemberIO` -- the member's clock, way out, timer and deferred calls, what its driver
talks to.  :meth:`HostPool.serve` waits on every socket at once until the earliest timer or
deferred call of any member is due, hands each datagram to its member's driver by the same
rules as :class:`workers.ina.socket_io.SocketIO` (``read_ready``: one ``recv`` for what woke a
sleeping ``poll`` on a paced socket, ``recvmmsg`` batches otherwise), then fires every
member's timer that is due.

Timers live in one heap of ``(time, member)`` entries; a member's newer ``wake_at`` leaves
its older entry behind, skipped when it comes up (its time is no longer the member's), so a
turn costs ``log n`` per timer, not a scan of the members.  Each member's ``poll(now)`` (its
control record, its round timeout) runs every ``poll_every`` seconds, not every turn: a turn
is paid per datagram.
"""

from __future__ import annotations

import heapq
import math
import select
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from workers.ina.driver import Address
from workers.ina.socket_io import LONE_GAP, Driven, poll_wait_ms, read_ready, send_packets
from workers.ina.wire import InaPacket

__all__ = ["HostPool", "MemberIO"]


class MemberIO:
    """One member's :class:`workers.ina.driver.HostIO` inside a :class:`HostPool`: its own
    sockets and timer, the pool's clock and loop.  ``driver`` is set once the member's
    driver is built (it needs this object first)."""

    def __init__(self, pool: HostPool, key: Any, index: int, sock: socket.socket,
                 reply: socket.socket | None, paced: bool) -> None:
        self.pool, self.key, self.index = pool, key, index
        self.sock, self.reply, self.paced = sock, reply, paced
        self.driver: Driven | None = None
        self.poll: Callable[[float], None] | None = None
        self.done: Callable[[], bool] = lambda: False
        self.wake: float | None = None

    def now(self) -> float:
        return time.monotonic()

    def send(self, pkts: Sequence[InaPacket], dest: Address) -> None:
        send_packets(self.sock, pkts, dest)

    def wake_at(self, t: float | None) -> None:
        if t == self.wake:  # the usual case after a RESULT: the same deadline
            return
        self.wake = t
        if t is not None:
            self.pool._arm(t, self.index)

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self.pool._later.append((time.monotonic() + delay, self.index, fn))


class HostPool:
    """Several members' sockets, timers and deferred calls, one loop (module docstring).
    ``failed``: the key of the member whose driver raised out of :meth:`serve`."""

    def __init__(self) -> None:
        self.members: list[MemberIO] = []
        self._timers: list[tuple[float, int]] = []  # (time, member index), stale ones too
        self._later: list[tuple[float, int, Callable[[], None]]] = []
        self.failed: Any = None

    def add(self, key: Any, sock: socket.socket, reply: socket.socket | None = None, *,
            paced: bool = False) -> MemberIO:
        """A member named ``key`` with its sockets (non-blocking; ``reply``: a worker's
        second one, read as the first); set the returned view's ``driver`` (and ``poll``,
        ``done``) before :meth:`serve`."""
        m = MemberIO(self, key, len(self.members), sock, reply, paced)
        self.members.append(m)
        return m

    def _arm(self, t: float, index: int) -> None:
        heapq.heappush(self._timers, (t, index))
        if len(self._timers) > 8 * len(self.members) + 64:  # mostly stale: rebuild
            self._timers = [(m.wake, m.index) for m in self.members if m.wake is not None]
            heapq.heapify(self._timers)

    def _next_timer(self) -> float | None:
        """The earliest live timer (stale entries at the top dropped)."""
        timers, members = self._timers, self.members
        while timers:
            t, i = timers[0]
            if members[i].wake == t:
                return t
            heapq.heappop(timers)
        return None

    def serve(self, until: Callable[[], bool] | None = None, *, poll_every: float = 0.01,
              max_wait: float = 0.05) -> None:
        """Run every member until ``until()`` (default: every member's ``done()``); what a
        member's driver (or deferred call, or poll) raises leaves with ``failed`` naming the
        member.  A member that is done no longer reads its sockets (a worker process that
        finished has exited: what still comes for it is not its business)."""
        members = self.members
        if until is None:
            def until() -> bool:
                return all(m.done() for m in members)
        fds: dict[int, tuple[MemberIO, socket.socket]] = {}
        poller = select.poll()
        for m in members:
            for s in (m.sock, m.reply):
                if s is not None:
                    fds[s.fileno()] = (m, s)
                    poller.register(s.fileno(), select.POLLIN)
        live = {m.index for m in members}
        wait_ms = max_wait * 1e3
        monotonic, ceil = time.monotonic, math.ceil
        next_poll = 0.0
        current: MemberIO | None = None
        try:
            while not until():
                now = monotonic()
                if self._later:
                    due = [(i, fn) for t, i, fn in self._later if t <= now]
                    self._later = [e for e in self._later if e[0] > now]
                    for i, fn in due:
                        current = members[i]
                        fn()
                    current = None
                    if until():
                        break
                    now = monotonic()
                if now >= next_poll:
                    next_poll = now + poll_every
                    for m in members:
                        if m.index in live and m.done():  # finished: stop reading for it
                            live.discard(m.index)
                            for s in (m.sock, m.reply):
                                if s is not None:
                                    poller.unregister(s.fileno())
                                    del fds[s.fileno()]
                        elif m.poll is not None and m.index in live:
                            current = m
                            m.poll(now)
                    current = None
                wait = poll_wait_ms(now, self._next_timer(), (t for t, _, _ in self._later),
                                    wait_ms)
                asleep = monotonic()
                try:
                    ready = poller.poll(ceil(wait))
                except InterruptedError:
                    continue
                slept = monotonic() - asleep > LONE_GAP  # what is ready came while we slept
                for fd, _ in ready:
                    got = fds.get(fd)
                    if got is None:
                        continue
                    current, s = got
                    assert current.driver is not None
                    read_ready(s, slept and current.paced, current.driver.on_packets)
                current = None
                if self._timers:
                    now = monotonic()
                    timers = self._timers
                    due_t = []  # popped first: a timer armed in the past fires next turn
                    while timers and timers[0][0] <= now:
                        due_t.append(heapq.heappop(timers))
                    for t, i in due_t:
                        m = members[i]
                        if m.wake != t:
                            continue  # replaced by a newer wake_at
                        m.wake = None
                        current = m
                        assert m.driver is not None
                        m.driver.on_timer()
                    current = None
        except BaseException:
            if current is not None:
                self.failed = current.key
            raise
