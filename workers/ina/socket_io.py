"""The real hosts' :class:`workers.ina.driver.HostIO`: one UDP socket, the monotonic clock,
``poll`` (docs/design.md §3.5).

:meth:`SocketIO.serve` is the one loop of a worker or PS process: it waits on the socket (and
any other file the host watches, e.g. the PS's control FIFO) until the driver's timer or the
next deferred call is due -- at most ``max_wait`` seconds, so that ``poll`` (a control record
read, a silence scan, a round timeout) runs regularly -- then hands the driver every waiting
datagram (many per system call, ``workers.ina.udp.receive_many``; a worker's: one ``recv``
for a datagram that woke it, :data:`LONE_GAP`) and fires its timer.
"""

from __future__ import annotations

import math
import select
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from workers.ina.driver import Address
from workers.ina.udp import BATCH, receive_many, receive_one, send, send_many
from workers.ina.wire import InaPacket

__all__ = ["SocketIO", "Driven", "LONE_GAP", "read_ready", "send_packets", "poll_wait_ms"]

LONE_GAP = 50e-6
"""A ``poll`` that waited longer than this woke for what arrived while it slept: on a paced
socket (``SocketIO(paced=True)``: a worker's, whose RESULTs the network hands over one at a
time) most likely one datagram, which :meth:`SocketIO.serve` reads with one ``recv``
(``workers.ina.udp.receive_one``, cheaper than ``recvmmsg`` through ctypes).  A ``poll``
that returned at once found datagrams waiting: every one of them in one ``recvmmsg``
(``receive_many``).  So a burst after a quiet spell costs one more turn (its first datagram
alone), never one turn per datagram; the PS, whose GRADs come in bursts, reads every time
with ``recvmmsg`` (a burst split in two sent its RESULTs to each destination twice)."""


def poll_wait_ms(now: float, wake: float | None, later: Iterable[float], cap_ms: float) -> float:
    """How long a turn's ``poll`` may sleep, in milliseconds: ``cap_ms``, less when the
    timer (``wake``) or a deferred call (``later``: their times) is due sooner; never < 0."""
    wait = cap_ms
    if wake is not None:
        wait = min(wait, max(0.0, (wake - now) * 1e3))
    for t in later:
        wait = min(wait, max(0.0, (t - now) * 1e3))
    return wait


def send_packets(sock: socket.socket, pkts: Sequence[InaPacket], dest: Address) -> None:
    """``HostIO.send`` over ``sock``: one ``sendto`` for one datagram (a worker's usual
    answer to a RESULT), one ``sendmmsg`` per ``BATCH`` for more."""
    if len(pkts) == 1:
        send(sock, pkts[0], dest)
    elif pkts:
        send_many(sock, list(pkts), dest)


def read_ready(sock: socket.socket, lone: bool,
               on_packets: Callable[[list[InaPacket | None]], None]) -> None:
    """Hand ``on_packets`` what waits on ``sock``, which ``poll`` said is readable: with
    ``lone`` (a paced socket whose ``poll`` slept, :data:`LONE_GAP`) its first datagram
    with one ``recv`` (others may wait: the next ``poll`` says so at once), else every
    waiting datagram, ``BATCH`` per ``recvmmsg``."""
    if lone:
        got = receive_one(sock)
        if got:
            on_packets(got)
        return
    while True:
        got = receive_many(sock)  # every waiting datagram, one system call
        if got:
            on_packets(got)
        if len(got) < BATCH:  # none was left waiting
            return


class Driven(Protocol):
    """What :meth:`SocketIO.serve` drives (:class:`workers.ina.driver.WorkerDriver`,
    :class:`workers.ina.driver.PsDriver`)."""

    def on_packets(self, pkts: list[InaPacket | None]) -> None: ...

    def on_timer(self) -> None: ...


class SocketIO:
    """A host's socket and clock (module docstring)."""

    def __init__(self, sock: socket.socket, reply: socket.socket | None = None, *,
                 paced: bool = False) -> None:
        self.sock = sock
        # datagrams most often come one at a time (a worker's RESULTs, each sent by the
        # network as its own): read what wakes the loop with one recv (LONE_GAP)
        self.paced = paced
        # a worker's second socket, on the job's reply_port: the PS's answers to this
        # worker alone (docs/protocol.md §6), read as the first one
        self.reply = reply
        self._wake: float | None = None
        self._later: list[tuple[float, Callable[[], None]]] = []

    def now(self) -> float:
        return time.monotonic()

    def send(self, pkts: Sequence[InaPacket], dest: Address) -> None:
        send_packets(self.sock, pkts, dest)

    def wake_at(self, t: float | None) -> None:
        self._wake = t

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self._later.append((time.monotonic() + delay, fn))

    def serve(self, driven: Driven, until: Callable[[], bool],
              poll: Callable[[float], None] | None = None, max_wait: float = 0.05,
              others: Sequence[Any] = (), on_ready: Callable[[Any], None] | None = None,
              ) -> None:
        """Run ``driven`` until ``until()``: deferred calls when due, ``poll(now)`` once per
        turn, then wait for a datagram (or one of ``others``, handed to ``on_ready``), its
        timer or ``max_wait``.

        A turn is paid per datagram on a paced link (issue 42), so it allocates nothing
        when no deferred call waits: one ``poll`` object registered once (``select``
        rebuilt its descriptor sets every turn), its timeout in whole milliseconds rounded
        up (a timer fires at its time or up to 1 ms late, never early); with ``paced``, what
        woke a sleeping ``poll`` is read with one ``recv`` (:data:`LONE_GAP`)."""
        mine = {self.sock.fileno(): self.sock}
        if self.reply is not None:
            mine[self.reply.fileno()] = self.reply
        rest = {f.fileno(): f for f in others}
        poller = select.poll()
        for fd in (*rest, *mine):  # the others first in a turn, as select handed them
            poller.register(fd, select.POLLIN)
        wait_ms = max_wait * 1e3
        monotonic, ceil = time.monotonic, math.ceil
        on_packets, on_timer = driven.on_packets, driven.on_timer
        while not until():
            now = monotonic()
            if self._later:
                due = [fn for t, fn in self._later if t <= now]
                self._later = [(t, fn) for t, fn in self._later if t > now]
                for fn in due:
                    fn()
                if until():
                    break
                now = monotonic()
            if poll is not None:
                poll(now)
            wait = poll_wait_ms(now, self._wake, (t for t, _ in self._later), wait_ms)
            asleep = monotonic()
            try:
                ready = poller.poll(ceil(wait))
            except InterruptedError:
                continue
            lone = self.paced and monotonic() - asleep > LONE_GAP  # came while we slept
            for fd, _ in ready:
                s = mine.get(fd)
                if s is None:
                    if on_ready is not None and fd in rest:
                        on_ready(rest[fd])
                    continue
                read_ready(s, lone, on_packets)
            if self._wake is not None and monotonic() >= self._wake:
                self._wake = None
                on_timer()
