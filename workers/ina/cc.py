"""Congestion control: how many chunks a worker keeps in flight, as a policy passed in
(docs/protocol.md §6, "Congestion control"), free of I/O.

A policy is one object per worker and job, kept from round to round like the worker's
:class:`workers.ina.worker.RttEstimator`; :class:`workers.ina.worker.WorkerRound` asks it for
:attr:`CongestionControl.window` before it sends a first copy and tells it what happened:

* ``on_send(now)``: a copy left (first or retransmitted);
* ``on_result(now, rtt)``: a RESULT completed an in-flight chunk (``rtt``: its exact round
  trip when the RESULT echo gave one, else None);
* ``on_mark(now)``: a RESULT carried a congestion mark, ``INA_FLAG_ECN`` of
  ``constants.p4``: a switch whose egress queue was over the controller's threshold marked
  a packet of the chunk (``p4src/include/congestion.p4``) and the PS ORed it into the
  RESULT (:data:`workers.ina.worker.FLAG_ECN`);
* ``on_fallback(now)``: a RESULT said a packet of its chunk fell back (a slot collision, or
  no aggregator: flags FALLBACK, set by the PS, docs/protocol.md §6);
* ``on_timeout(now)``: a chunk's timer expired (called once per expired chunk).

The policies (:data:`POLICIES`, ``--cc NAME``):

* ``fixed`` -- a constant window (the job's ``window``: the user's, or by default
  :func:`default_window`, the larger of 16 and two bandwidth-delay products): no reaction
  to marks, delay or loss, the transport as it was;
* ``aimd`` -- ATP's (NSDI'21) with TCP's two phases: +1 per RESULT up to ``ssthresh``
  (the job's ``window`` at first), then +1 per window of RESULTs (one per round trip);
  halved on a mark, and on a timeout when no RESULT came for a smoothed round trip (the
  path stalls: a queue overflowing or a link down -- while RESULTs keep coming a timeout is
  a random loss, and halving on it took a 2 %-loss round from 1.6 to 8-12 s, measured in
  docs/results.md), at most once per smoothed round trip (one loss event is many expired
  chunks), ``ssthresh`` with it; within ``[1, cap]``.  Without marks (today) a window that
  doubled per round trip outgrew the measured timeout before it outgrew the queues, hence
  the second phase;
* ``delay`` -- reacts to the round-trip gradient (TIMELY-like, no switch support): +1 per
  RESULT while the round trip is below ``low`` times the least one seen or does not grow,
  a cut proportional to the normalized gradient when it grows, and to how far it is above
  ``high`` times the least one.  A timeout does not cut it: random loss is not congestion,
  and a queue shows in the round trip before it overflows.

* ``two-window`` -- A2TP-like (EuroSys'23): two windows, the smaller one binds.  The link
  window grows by one per RESULT and, once per window of RESULTs, keeps an EWMA ``alpha``
  of the fraction marked ECN and shrinks by ``alpha / 2`` when any was (DCTCP's rule); the
  aggregator window does the same with the fraction of RESULTs whose chunk fell back (the
  aggregators' slots collide: fewer chunks in flight, fewer keys in the slots).  A timeout
  while RESULTs stall halves the link window, as ``aimd``.

The adaptive policies start from a bandwidth-delay product, :func:`bdp_window`: the plan's
predicted rate per worker (frames per second) times the round trip, not a constant.  So does
``fixed``'s window when the user names none (:func:`default_window`): the larger of
:data:`DEFAULT_WINDOW` and :data:`BDP_HEADROOM` bandwidth-delay products.  A worker's
timeouts before it has measured follow the same figures (:func:`first_timeout`): at least the
time the plan gives its first window, with the margin the measured timeouts keep.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["DEFAULT_CC", "POLICIES", "CongestionControl", "Fixed", "Aimd", "Delay", "TwoWindow",
           "bdp_window", "default_window", "first_timeout", "make_cc", "MAX_WINDOW",
           "DEFAULT_WINDOW", "BDP_HEADROOM", "FIRST_TIMEOUT_MULT"]

DEFAULT_CC = "fixed"
"""The policy of a run that names none (``--cc``)."""
MAX_WINDOW = 128
"""The adaptive policies' largest window (ATP caps at 100 ACK-clocked packets), and the
largest window :func:`default_window` gives."""
DEFAULT_WINDOW = 16
"""Chunks in flight per worker when the user names no window and the path is unknown
(unshaped links), the least window :func:`default_window` gives, and the adaptive
policies' ``window`` (``aimd``'s first ``ssthresh``).  The one source of this default:
``--window``, the run's settings and the job file read it here."""
BDP_HEADROOM = 2.0
"""How many bandwidth-delay products :func:`default_window` keeps in flight.  The round trip
it is computed from is the unloaded one (store-and-forward of one frame per link, both
ways); the measured one is longer: a slot completes only when the last worker's
contribution arrives, so a chunk also waits for the other workers' queues and start skew
(simulated k=16, 64 workers, budget 8, the polished plan at γ = 1: median round trip 28.2 ms
against 18.8 ms unloaded, x1.5, with a window of 16 full 82 % of the time).  Measured there,
windows of 16 / 18 / 24 / 36 (1.33 / 1.5 / 2 / 3 products): γ ratio 0.730 / 0.765 / 0.786 /
0.786, queue depth p99 13 / 15 / 21 / 33 frames: two is the least that takes the whole gain
(docs/results.md, "The default window follows the bandwidth-delay product")."""


FIRST_TIMEOUT_MULT = 2.0
""":func:`first_timeout`'s margin over the plan's completion time of a first window: the
same factor the worker's measured ``first_rto`` takes over the measured completions
(``workers.ina.worker.RttEstimator``'s ``mult``)."""


class CongestionControl(Protocol):
    """What :class:`workers.ina.worker.WorkerRound` needs of a policy (module docstring)."""

    name: str

    @property
    def window(self) -> int:
        """Chunks that may be in flight now (>= 1)."""
        ...

    def on_send(self, now: float) -> None: ...

    def on_result(self, now: float, rtt: float | None) -> None: ...

    def on_mark(self, now: float) -> None: ...

    def on_fallback(self, now: float) -> None: ...

    def on_timeout(self, now: float) -> None: ...


def bdp_window(rate_fps: float | None, rtt_s: float | None, default: int,
               cap: int = MAX_WINDOW) -> int:
    """Frames in flight that keep ``rate_fps`` (frames per second, the plan's prediction
    for one worker) going over a round trip of ``rtt_s``: ``ceil(rate * rtt)`` within
    ``[1, cap]``; ``default`` when either is unknown.  (A product that is a whole number
    but for rounding -- γ / frame time x hops x frame time -- is that number.)"""
    if not rate_fps or not rtt_s or rate_fps <= 0 or rtt_s <= 0:
        return default
    return max(1, min(cap, math.ceil(rate_fps * rtt_s - 1e-9)))


def default_window(rate_fps: float | None, rtt_s: float | None, *,
                   floor: int = DEFAULT_WINDOW, headroom: float = BDP_HEADROOM,
                   cap: int = MAX_WINDOW) -> int:
    """``fixed``'s window when the user names none: ``headroom`` bandwidth-delay products
    (:func:`bdp_window` of ``headroom * rate_fps`` over ``rtt_s``), never below ``floor``
    (the constant it replaces: a small product -- PS-only's rate is 1/N of the link -- keeps
    it) nor above ``cap``; ``floor`` when either is unknown."""
    if headroom <= 0:
        raise ValueError(f"headroom must be > 0, got {headroom}")
    if not rate_fps:
        return floor
    return max(floor, bdp_window(headroom * rate_fps, rtt_s, floor, cap))


def first_timeout(floor: float, window: int, rate_fps: float | None, rtt_s: float | None, *,
                  mult: float = FIRST_TIMEOUT_MULT) -> float:
    """A job's first timeout, before a worker has measured anything: ``mult`` times the
    time the plan gives the last chunk of a worker's first window -- ``window / rate_fps``
    (its frames cross the busiest link at the plan's rate, ``rate_fps`` frames per second
    of one worker) plus ``rtt_s`` (the unloaded round trip) --, never below ``floor`` (the
    job's ``timeout``); ``floor`` when the rate or round trip is unknown.

    Why: every worker sends its first window at once, and where the plan saturates a link
    the window's copies queue there for ``window / rate_fps``; a timeout shorter than that
    fires on copies that are only queued.  Fat-tree k=16, 4 x 64 workers, PSs on one edge,
    budget 1: each worker's rate is 53.8 frames/s, so a window of 16 takes 0.30 s, the
    0.3 s default fired on every late chunk of the first window, and the probes, NACKs and
    RESULT copies they caused loaded the links the plan saturates (γ ratio 0.617, 351
    retransmissions; docs/results.md, "The first timeout follows the plan's rate")."""
    if window < 1 or mult <= 0:
        raise ValueError(f"need window >= 1 and mult > 0, got {window}, {mult}")
    if not rate_fps or not rtt_s or rate_fps <= 0 or rtt_s <= 0:
        return floor
    return max(floor, mult * (window / rate_fps + rtt_s))


@dataclass
class Fixed:
    """A constant window (module docstring)."""

    size: int
    name: str = "fixed"

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"window must be >= 1, got {self.size}")

    @property
    def window(self) -> int:
        return self.size

    def on_send(self, now: float) -> None:
        pass

    def on_result(self, now: float, rtt: float | None) -> None:
        pass

    def on_mark(self, now: float) -> None:
        pass

    def on_fallback(self, now: float) -> None:
        pass

    def on_timeout(self, now: float) -> None:
        pass


@dataclass
class Aimd:
    """ATP-like additive increase, multiplicative decrease (module docstring).

    ``cwnd`` is a float; :attr:`window` its floor.  A decrease waits ``srtt`` (the smoothed
    exact round trip it has seen; ``hold`` until one is seen) before the next one."""

    cwnd: float
    cap: int = MAX_WINDOW
    hold: float = 0.3
    ssthresh: float = float(MAX_WINDOW)
    name: str = "aimd"
    srtt: float | None = None
    decreases: int = 0
    _next_cut: float = float("-inf")
    _last_result: float = float("-inf")

    def __post_init__(self) -> None:
        if self.cap < 1:
            raise ValueError(f"cap must be >= 1, got {self.cap}")
        self.cwnd = float(min(self.cap, max(1.0, self.cwnd)))

    @property
    def window(self) -> int:
        return max(1, int(self.cwnd))

    def on_send(self, now: float) -> None:
        pass

    def on_result(self, now: float, rtt: float | None) -> None:
        self._last_result = now
        if rtt is not None:
            self._rtt(rtt)
        step = 1.0 if self.cwnd < self.ssthresh else 1.0 / self.cwnd
        self.cwnd = min(float(self.cap), self.cwnd + step)

    def on_mark(self, now: float) -> None:
        self._cut(now, 0.5)

    def on_fallback(self, now: float) -> None:
        pass  # a collision is not a queue: aimd reads marks and stalls only

    def on_timeout(self, now: float) -> None:
        if now - self._last_result >= self._hold():
            self._cut(now, 0.5)

    def _hold(self) -> float:
        return self.srtt if self.srtt is not None else self.hold

    def _rtt(self, rtt: float) -> None:
        self.srtt = rtt if self.srtt is None else 0.875 * self.srtt + 0.125 * rtt

    def _cut(self, now: float, factor: float) -> None:
        if now < self._next_cut:
            return  # the same congestion event
        self.cwnd = self.ssthresh = max(1.0, self.cwnd * factor)
        self.decreases += 1
        self._next_cut = now + self._hold()


@dataclass
class Delay(Aimd):
    """Reacts to the round-trip gradient (module docstring).  ``beta``: the largest cut per
    sample; ``low``/``high``: round trips below ``low * min_rtt`` always grow the window,
    above ``high * min_rtt`` always shrink it."""

    beta: float = 0.5
    low: float = 1.5
    high: float = 4.0
    name: str = "delay"
    min_rtt: float | None = None
    prev_rtt: float | None = None
    gradient: float = 0.0  # EWMA of (rtt - previous rtt) / min_rtt

    def on_result(self, now: float, rtt: float | None) -> None:
        if rtt is None or rtt <= 0:
            return  # no exact sample: no signal either way
        self._rtt(rtt)
        self.min_rtt = rtt if self.min_rtt is None else min(self.min_rtt, rtt)
        if self.prev_rtt is not None:
            self.gradient = 0.875 * self.gradient + 0.125 * (rtt - self.prev_rtt) / self.min_rtt
        self.prev_rtt = rtt
        if rtt < self.low * self.min_rtt:
            self.cwnd = min(float(self.cap), self.cwnd + 1.0)
        elif rtt > self.high * self.min_rtt:
            self.cwnd = max(1.0, self.cwnd * (1 - self.beta * (1 - self.high * self.min_rtt / rtt)))
        elif self.gradient <= 0:
            self.cwnd = min(float(self.cap), self.cwnd + 1.0)
        else:
            self.cwnd = max(1.0, self.cwnd * (1 - self.beta * min(1.0, self.gradient)))

    def on_timeout(self, now: float) -> None:
        pass  # module docstring: the round trip is this policy's only signal


@dataclass
class _Share:
    """One of :class:`TwoWindow`'s windows: +1 per RESULT; per window of RESULTs, an EWMA
    ``alpha`` of the share that carried its signal, and a cut by ``alpha / 2`` if any did."""

    cwnd: float
    cap: int
    gain: float = 1 / 16  # DCTCP's g
    alpha: float = 0.0
    seen: int = 0  # RESULTs in the current window of them
    hits: int = 0  # of which with the signal

    def on_result(self) -> None:
        self.seen += 1
        self.cwnd = min(float(self.cap), self.cwnd + 1.0 / max(1.0, self.cwnd))
        if self.seen >= max(1, int(self.cwnd)):
            share = min(1.0, self.hits / self.seen)
            self.alpha = (1 - self.gain) * self.alpha + self.gain * share
            if self.hits:
                self.cwnd = max(1.0, self.cwnd * (1 - self.alpha / 2))
            self.seen = self.hits = 0


@dataclass
class TwoWindow:
    """A2TP-like: a link window (ECN marks) and an aggregator window (fall-backs); the
    smaller binds (module docstring)."""

    initial: float
    cap: int = MAX_WINDOW
    hold: float = 0.3
    name: str = "two-window"
    link: _Share = field(init=False)
    agg: _Share = field(init=False)
    srtt: float | None = None
    decreases: int = 0
    _last_result: float = float("-inf")
    _next_cut: float = float("-inf")

    def __post_init__(self) -> None:
        start = float(min(self.cap, max(1.0, self.initial)))
        self.link, self.agg = _Share(start, self.cap), _Share(start, self.cap)

    @property
    def window(self) -> int:
        return max(1, int(min(self.link.cwnd, self.agg.cwnd)))

    def on_send(self, now: float) -> None:
        pass

    def on_result(self, now: float, rtt: float | None) -> None:
        self._last_result = now
        if rtt is not None:
            self.srtt = rtt if self.srtt is None else 0.875 * self.srtt + 0.125 * rtt
        self.link.on_result()
        self.agg.on_result()

    def on_mark(self, now: float) -> None:
        self.link.hits += 1  # the worker calls it after that RESULT's on_result

    def on_fallback(self, now: float) -> None:
        self.agg.hits += 1

    def on_timeout(self, now: float) -> None:
        hold = self.srtt if self.srtt is not None else self.hold
        if now - self._last_result >= hold and now >= self._next_cut:
            self.link.cwnd = max(1.0, self.link.cwnd / 2)
            self.decreases += 1
            self._next_cut = now + hold


# name -> (help, factory(window, initial window)), as the planners' table
POLICIES: dict[str, tuple[str, Callable[[int, int], CongestionControl]]] = {
    "fixed": ("a constant window (--window; by default the larger of 16 and 2 bandwidth-delay "
              "products): the transport before congestion control",
              lambda window, initial: Fixed(window)),
    "aimd": ("ATP-like: +1 per RESULT up to --window, then +1 per round trip, halved on a "
             "timeout or an ECN mark, from the bandwidth-delay product",
             lambda window, initial: Aimd(float(initial), ssthresh=float(window))),
    "delay": ("reacts to the round-trip gradient (no switch support), from the "
              "bandwidth-delay product", lambda window, initial: Delay(float(initial))),
    "two-window": ("A2TP-like: a link window cut by the EWMA of ECN marks and an aggregator "
                   "window cut by the EWMA of fall-backs, the smaller binds, from the "
                   "bandwidth-delay product", lambda window, initial: TwoWindow(float(initial))),
}


def make_cc(name: str, window: int, rate_fps: float | None = None,
            rtt_s: float | None = None) -> CongestionControl:
    """The policy ``name`` for one worker: ``window`` is ``fixed``'s window (the job file's:
    the user's, or :func:`default_window`'s, chosen by the controller) and the adaptive
    ones' start when the rate or round trip is unknown; the adaptive ones start from
    :func:`bdp_window` of ``rate_fps`` and ``rtt_s``."""
    if name not in POLICIES:
        raise ValueError(f"unknown congestion control {name!r}; one of {', '.join(POLICIES)}")
    return POLICIES[name][1](window, bdp_window(rate_fps, rtt_s, window))
