"""Transports for the DDP hook: a rank's :class:`RankEngine` in a thread of its own.

The hook runs inside DDP's backward pass and must return at once with a future; the INA
exchange (sending, waiting for RESULTs, retransmitting on timeouts) therefore runs in one
background thread per rank, which owns the engine and the rank's channel.  The thread is the
only one that touches the engine, so the engine needs no lock; the hook hands buckets over
through a queue and the thread wakes up through the channel.

Channels: :class:`UdpChannel` (one UDP socket per rank, the codec and socket helpers of
``workers/ina/udp.py``: the real network, or a PS on loopback) and the in-process channel of
``workers/ddp/fake.py`` (tests).
"""

from __future__ import annotations

import queue
import select
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from workers.ddp.codec import ChunkRange
from workers.ddp.exchange import EngineStats, RankEngine, SenderParams
from workers.ina.udp import open_socket, receive_many, send, send_many
from workers.ina.wire import InaPacket


class ExchangeFailed(RuntimeError):
    """A bucket made no progress for ``stall_timeout_s`` (the network or the PS is gone)."""


class Channel(Protocol):
    def send(self, pkt: InaPacket) -> None: ...

    def send_all(self, pkts: list[InaPacket]) -> None:
        """Send ``pkts`` in order (as many per system call as the channel can)."""

    def recv(self, timeout: float) -> list[InaPacket]:
        """Packets that arrived, waiting up to ``timeout`` s for the first (or a wake-up)."""
        ...

    def wake(self) -> None:
        """Make a pending :meth:`recv` return now (called from other threads)."""
        ...

    def close(self) -> None: ...


class Transport(Protocol):
    """What the hook needs: hand a bucket over, get its int32 sum later."""

    def exchange(self, round_: int, rng: ChunkRange, values: np.ndarray,
                 schedule: Sequence[tuple[int, int, int]]) -> Future[np.ndarray]: ...

    @property
    def stats(self) -> EngineStats: ...

    def close(self) -> None: ...


class UdpChannel:
    """A rank's UDP socket: GRADs to the PS address (the switches aggregate on the way),
    RESULTs back on the same socket.  A socketpair wakes ``select``."""

    def __init__(self, bind: tuple[str, int], ps_addr: tuple[str, int]) -> None:
        self.sock = open_socket(bind)
        self.sock.setblocking(False)
        self.ps_addr = ps_addr
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.malformed = 0

    def send(self, pkt: InaPacket) -> None:
        send(self.sock, pkt, self.ps_addr)

    def send_all(self, pkts: list[InaPacket]) -> None:
        send_many(self.sock, pkts, self.ps_addr)

    def recv(self, timeout: float) -> list[InaPacket]:
        ready, _, _ = select.select([self.sock, self._wake_r], [], [], max(0.0, timeout))
        if self._wake_r in ready:
            try:
                self._wake_r.recv(4096)
            except BlockingIOError:
                pass
        out: list[InaPacket] = []
        if self.sock in ready:
            while True:
                got = receive_many(self.sock)  # every waiting datagram, one system call
                if not got:
                    break
                for pkt in got:
                    if pkt is None:
                        self.malformed += 1
                    else:
                        out.append(pkt)
        return out

    def wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):  # already woken (buffer full) or closed
            pass

    def close(self) -> None:
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()


@dataclass
class _Request:
    ticket: int
    round: int
    rng: ChunkRange
    values: np.ndarray
    schedule: list[tuple[int, int, int]]
    future: Future[np.ndarray]


class EngineTransport:
    """A :class:`RankEngine` and a :class:`Channel`, driven by one daemon thread.

    ``stall_timeout_s`` (the job's ``round_timeout_s``): when buckets are pending and no RESULT
    completed one for that long, every pending future fails with :class:`ExchangeFailed`
    instead of hanging DDP forever.
    """

    def __init__(self, params: SenderParams, channel: Channel, *,
                 stall_timeout_s: float = 120.0, poll_s: float = 0.05) -> None:
        self.params, self.channel = params, channel
        self.engine = RankEngine(params)
        self.stall_timeout_s, self.poll_s = stall_timeout_s, poll_s
        self._inbox: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._pending: dict[int, _Request] = {}
        self._tickets = 0
        self._lock = threading.Lock()  # guards _tickets and _closed (hook vs close)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"ina-rank{params.worker_id}",
                                        daemon=True)
        self._thread.start()

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    def exchange(self, round_: int, rng: ChunkRange, values: np.ndarray,
                 schedule: Sequence[tuple[int, int, int]]) -> Future[np.ndarray]:
        fut: Future[np.ndarray] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("transport is closed")
            self._tickets += 1
            ticket = self._tickets
        self._inbox.put(_Request(ticket, round_, rng, values, list(schedule), fut))
        self.channel.wake()
        return fut

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.channel.wake()
        self._thread.join(timeout=5.0)
        self.channel.close()

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        eng, ch = self.engine, self.channel
        last_progress = time.monotonic()
        try:
            while not self._closed:
                now = time.monotonic()
                out: list[InaPacket] = []
                while True:
                    try:
                        req = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    if not self._pending:
                        last_progress = now  # the stall clock starts with the first bucket
                    self._pending[req.ticket] = req
                    out += eng.submit(req.ticket, req.round, req.rng, req.values, req.schedule,
                                      now)
                if out:
                    ch.send_all(out)
                deadline = eng.next_deadline()
                wait = self.poll_s if deadline is None else min(self.poll_s, deadline - now)
                out = []
                for pkt in ch.recv(wait):
                    out += eng.on_packet(pkt, time.monotonic())
                out += eng.tick(time.monotonic())
                if out:
                    ch.send_all(out)
                for c in eng.pop_completed():
                    last_progress = time.monotonic()
                    self._pending.pop(c.ticket).future.set_result(c.total)
                if self._pending and time.monotonic() - last_progress > self.stall_timeout_s:
                    self._fail(ExchangeFailed(
                        f"worker {self.params.worker_id}: no bucket completed for "
                        f"{self.stall_timeout_s:.0f} s ({eng.stats})"))
        except BaseException as exc:  # never leave DDP waiting on a dead thread
            self._fail(exc)
            raise
        self._fail(RuntimeError("transport closed with buckets in flight"))

    def _fail(self, exc: BaseException) -> None:
        self.engine.abandon()
        while True:  # buckets handed over but not yet taken by the loop fail too
            try:
                req = self._inbox.get_nowait()
            except queue.Empty:
                break
            self._pending[req.ticket] = req
        for req in self._pending.values():
            if not req.future.done():
                req.future.set_exception(exc)
        self._pending.clear()


def udp_transport(params: SenderParams, bind: tuple[str, int], ps_addr: tuple[str, int], *,
                  stall_timeout_s: float = 120.0) -> EngineTransport:
    """The real transport: one UDP socket per rank bound to ``bind``, GRADs to ``ps_addr``."""
    return EngineTransport(params, UdpChannel(bind, ps_addr), stall_timeout_s=stall_timeout_s)
