"""The driver of one ring position over its rounds, over an I/O interface (as
:mod:`workers.ina.driver` drives INA's hosts): the simulated network's virtual time drives
it (``controller.experiment.methods.ring.sim``), and sockets could.

Each round: the app's gradient, a :class:`workers.ring.worker.RingRound`, the packets it
returns sent to the successor or the predecessor, its timer armed; when the round is done
the sum goes to the app and, after ``pause()``, the next round begins.  Packets of a later
round are held until it begins (a socket's buffer holds them while nobody reads); packets
after the last round are still answered (a predecessor whose last ACK was lost resends)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from typing import Any, Protocol

import numpy as np

from workers.ring.wire import RingPacket
from workers.ring.worker import RingRound

__all__ = ["RingIO", "RingDriver"]


class RingIO(Protocol):
    """What the driver needs of its host: a clock, two neighbours, one timer, deferred calls."""

    def now(self) -> float:
        """Seconds on the host's clock (monotonic, or virtual)."""
        ...

    def send(self, pkts: Sequence[RingPacket], to: str) -> None:
        """``to``: :data:`workers.ring.worker.NEXT` or :data:`~workers.ring.worker.PREV`."""
        ...

    def wake_at(self, t: float | None) -> None:
        """Call the driver's ``on_timer`` at ``t`` (the newest request replaces the one
        before; None: no timer)."""
        ...

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """Call ``fn()`` ``delay`` seconds from now, from the host's loop."""
        ...


class RingDriver:
    """Position ``rank`` of a ring of ``size`` for ``rounds`` rounds; ``gradient(r)`` gives
    round r's int32 vector, ``applied(r, total, record)`` takes its sum."""

    def __init__(self, io: RingIO, job: int, rank: int, size: int, rounds: int,
                 gradient: Callable[[int], np.ndarray],
                 applied: Callable[[int, np.ndarray, dict[str, Any]], None], *,
                 k: int = 32, window: int = 16, timeout: float = 0.3, max_timeout: float = 2.0,
                 pause: Callable[[], float] = lambda: 0.0,
                 on_finished: Callable[[], None] | None = None) -> None:
        self.io, self.job, self.rank, self.size, self.rounds = io, job, rank, size, rounds
        self.gradient, self.applied, self.pause, self.on_finished = (gradient, applied, pause,
                                                                     on_finished)
        self.k, self.window, self.timeout, self.max_timeout = k, window, timeout, max_timeout
        self.next_round = 0
        self.active: RingRound | None = None
        self.last: RingRound | None = None  # the finished round, answering late resends
        self.records: list[dict[str, Any]] = []
        self._held: list[RingPacket] = []
        self.held = 0  # packets held for a round not begun yet (counted)
        self._t0 = 0.0

    @property
    def finished(self) -> bool:
        return self.next_round >= self.rounds

    def start(self, delay: float = 0.0) -> None:
        """Begin round 0 ``delay`` seconds from now."""
        self.io.later(delay, self._begin)

    def _begin(self) -> None:
        r = self.next_round
        self.active = rr = RingRound(self.job, self.rank, self.size, r, self.gradient(r),
                                     k=self.k, window=self.window, timeout=self.timeout,
                                     max_timeout=self.max_timeout)
        self._t0 = now = self.io.now()
        self._emit(rr.start(now))
        held, self._held = self._held, []
        self.on_packets(held)
        self._after(rr)

    def _emit(self, out: Iterable[tuple[str, RingPacket]]) -> None:
        by: dict[str, list[RingPacket]] = {}
        for to, p in out:
            by.setdefault(to, []).append(p)
        for to, pkts in by.items():
            self.io.send(pkts, to)

    def on_packets(self, pkts: Iterable[RingPacket]) -> None:
        """What arrived from either neighbour."""
        rr = self.active
        for p in pkts:
            target = rr if rr is not None else self.last
            if target is None or (rr is None and p.round > target.round):
                self._held.append(p)  # before round 0, or between rounds: for the next one
                self.held += 1
                continue
            out = target.on_packet(p, self.io.now())
            if out is None:
                self._held.append(p)
                self.held += 1
            else:
                self._emit(out)
        if rr is not None and rr is self.active:
            self._after(rr)

    def on_timer(self) -> None:
        """The timer came: resend what timed out."""
        rr = self.active
        if rr is not None:
            self._emit(rr.tick(self.io.now()))
            self._after(rr)

    def _after(self, rr: RingRound) -> None:
        if not rr.done:
            self.io.wake_at(rr.next_deadline())
            return
        now = self.io.now()
        self.io.wake_at(None)
        self.active, self.last = None, rr
        record = {"round": rr.round, "time_s": now - self._t0, **asdict(rr.stats)}
        self.applied(rr.round, rr.result(), record)
        self.records.append(record)
        self.next_round += 1
        if self.finished:
            if self.on_finished is not None:
                self.on_finished()
        else:
            self.io.later(self.pause(), self._begin)
