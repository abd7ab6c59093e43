"""What the simulated network sees of each worker's transport (docs/simulate.md, "Where
prediction and data plane part"): window occupancy, time blocked on a full window, and each
chunk's round trip from its first GRAD to the first RESULT that brings it back.

Only the simulation can watch every event at no cost, so the figures exist only in a
simulated run's ``sim`` record (``transport``).  The probe reads the driver's round
(``WorkerRound.in_flight``, ``window``) and the frames a worker sends and receives; it
changes nothing the run does."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from workers.ina.constants import TYPE_GRAD, TYPE_RESULT

__all__ = ["WorkerProbe", "transport_summary"]


class WorkerProbe:
    """One worker's window and round trips over a whole launch."""

    def __init__(self) -> None:
        self.t = 0.0  # when the occupancy last changed
        self.occ = 0  # chunks in flight since then
        self.window = 0
        self.max_window = 0  # the round's window (0 between rounds)
        self.active_s = 0.0  # time with a round in flight
        self.occ_s = 0.0  # integral of the occupancy over active time
        self.blocked_s = 0.0  # active time with the window full
        self.sent: dict[tuple[int, int], float] = {}  # (round, chunk) -> first GRAD's time
        self.rtts: list[float] = []

    def grads(self, now: float, pkts: Iterable[Any]) -> None:
        """The worker sent ``pkts``: note each chunk's first GRAD."""
        for p in pkts:
            if p.msg_type == TYPE_GRAD:
                self.sent.setdefault((p.round, p.chunk_id), now)

    def result(self, now: float, pkt: Any) -> None:
        """A RESULT reached the worker: the chunk's round trip, once."""
        if pkt.msg_type == TYPE_RESULT:
            t = self.sent.pop((pkt.round, pkt.chunk_id), None)
            if t is not None:
                self.rtts.append(now - t)

    def sample(self, now: float, driver: Any) -> None:
        """The driver's state after an event: close the interval since the last sample."""
        dt = now - self.t
        if self.occ or self.window:
            self.active_s += dt
            self.occ_s += self.occ * dt
            if self.window and self.occ >= self.window:
                self.blocked_s += dt
        wr = driver.active
        self.t = now
        self.occ, self.window = (wr.in_flight, wr.window) if wr is not None else (0, 0)
        self.max_window = max(self.max_window, self.window)


def transport_summary(probes: list[WorkerProbe]) -> dict[str, Any]:
    """The probes of one job's workers as one record: mean occupancy over active time,
    share of active time blocked on a full window, round-trip median and 90th percentile
    (seconds), the window."""
    active = sum(p.active_s for p in probes)
    rtts = [r for p in probes for r in p.rtts]
    return {
        "window": max((p.max_window for p in probes), default=0) or None,
        "window_occupancy": (sum(p.occ_s for p in probes) / active) if active else None,
        "blocked_share": (sum(p.blocked_s for p in probes) / active) if active else None,
        "rtt_s": {"median": float(np.median(rtts)), "p90": float(np.percentile(rtts, 90)),
                  "min": float(min(rtts))} if rtts else None,
    }
