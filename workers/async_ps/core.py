"""Staleness-aware asynchronous parameter server, transport-free (docs/design.md §5).

Nothing here does I/O.  :class:`AsyncPS` and :class:`Worker` exchange plain values
(:class:`Push`, :class:`Reply`); a transport (TCP, later NDN) only has to carry them, and
:func:`run_virtual_time` drives both in-process on a virtual clock for tests and offline studies.

Clocks and staleness
    The PS keeps a logical clock ``T_ps`` (starts at 0, +1 after every parameter update).  A
    worker keeps ``T_w``, the PS clock of the parameters it last received.  A push that arrives
    when the PS clock is ``T_ps`` has staleness ``sigma = T_ps - T_w + 1`` (>= 1; 1 = fresh: no
    update happened since the worker's parameters were sent).  Inside one soft-sync batch the
    clock does not move, so the clock at arrival is also the clock at which the gradient is
    applied.

Sliding-window context
    A worker keeps its previous N-1 staleness samples; the context of a push is
    ``kappa = mean(sigma, previous N-1 samples)``; with N = 1, ``kappa = sigma``; while fewer than
    N-1 samples exist the mean is over what exists; after use the new sigma joins the window and
    the oldest sample drops out.

Who computes sigma and kappa  [decision]
    sigma needs ``T_ps`` *at arrival*, which only the PS knows; kappa includes that sigma.  The
    method as specified (docs/design.md §5) has the worker send (gradient, kappa), which a worker
    cannot do exactly.  Design taken (``kappa_mode="ps"``, the default): the worker owns the window,
    as specified, and the push carries ``T_w`` and the worker's previous N-1 samples; the PS
    computes sigma at arrival and kappa = mean(sigma, window) -- exactly the definition above -- and
    returns sigma (and kappa) in the reply; the worker appends sigma to its window.  The wire cost
    is N-1 small integers per push.  Alternative kept (``kappa_mode="learner"``, the specified
    message, literally): the worker sends a kappa it can compute, the mean of its last N *known*
    samples (a window lagged by one push; 1.0 before any sample), and the PS uses it as given.  It
    equals the exact kappa whenever the staleness is steady, and lags by one push when it changes.

Soft synchronization and the update rule  [decision]
    The PS accumulates pushes; when C pushes have arrived (C gradients, whichever workers sent
    them: a fast worker may contribute two gradients to one batch, as in the n-softsync protocol
    of Zhang et al. 2016 where the PS counts gradients) it applies::

        W <- W - (1/C) * sum_j (eta / kappa_j) * g_j ,   T_ps <- T_ps + 1

    The learning rate is *divided* by the context.  The specified formula multiplies, but
    its stated intent is to damp stale gradients; multiplying would give the stalest gradients
    the largest steps.  Dividing is the staleness-aware rule eta/sigma of Zhang et al. (IJCAI
    2016) with sigma replaced by kappa, and it reduces to plain SGD (eta) when every push is fresh
    (kappa = 1).  Policies (``policy=``): ``"async"`` eta for every gradient (kappa ignored),
    ``"sigma"`` eta/sigma of the individual push, ``"kappa"`` eta/kappa (the method of
    docs/design.md §5).

Replies
    Every push is answered at once with the current parameters and clock.  If the push completes
    a batch, the reply carries the parameters *after* the update (and the new clock); otherwise
    the parameters as they are, without the pending gradients of the unfinished batch.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

POLICIES = ("async", "sigma", "kappa")
KAPPA_MODES = ("ps", "learner")

__all__ = [
    "KAPPA_MODES",
    "POLICIES",
    "AsyncPS",
    "Worker",
    "Push",
    "PushRecord",
    "Reply",
    "run_virtual_time",
    "staleness",
    "staleness_context",
]


def staleness(t_ps: int, t_w: int) -> int:
    """sigma = T_ps - T_w + 1 for a push computed on parameters of clock ``t_w`` arriving at
    clock ``t_ps``.  ``t_w`` may not be ahead of the PS (that push would be forged or from
    another job)."""
    if t_w < 0 or t_w > t_ps:
        raise ValueError(f"staleness: parameter clock T_w={t_w} must be in 0..T_ps={t_ps}")
    return t_ps - t_w + 1


def staleness_context(sigma: int, previous: Sequence[int]) -> float:
    """kappa = mean(sigma, *previous): the sliding-window staleness context.

    ``previous`` are the worker's previous (at most N-1) samples; empty gives ``kappa = sigma``.
    """
    return (sigma + sum(previous)) / (1 + len(previous))


@dataclass(frozen=True)
class Push:
    """A worker's push: gradient plus what the PS needs to weigh it.

    ``t_w``: PS clock of the parameters the gradient was computed on.  ``previous``: the
    worker's previous N-1 staleness samples (oldest first).  ``kappa``: set only in
    ``kappa_mode="learner"`` -- a context computed by the worker, used by the PS as given.
    """

    worker: int
    gradient: np.ndarray
    t_w: int
    previous: tuple[int, ...] = ()
    kappa: float | None = None


@dataclass(frozen=True)
class Reply:
    """The PS's immediate answer to a push.

    ``params``/``t_ps``: current parameters and clock (after the update if this push completed
    the batch: ``applied``).  ``sigma``/``kappa``: the staleness and context this push was
    weighed with (``kappa`` is reported under every policy, used only by ``"kappa"``).
    ``scale``: the learning rate applied to this gradient before the 1/C average.
    """

    params: np.ndarray
    t_ps: int
    sigma: int
    kappa: float
    scale: float
    applied: bool


class AsyncPS:
    """Parameter server with a logical clock and soft synchronization over C pushes."""

    def __init__(
        self,
        params: np.ndarray,
        lr: float,
        soft_sync: int = 1,
        policy: str = "kappa",
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"AsyncPS: policy must be one of {', '.join(POLICIES)}; "
                             f"got {policy!r}")
        if not isinstance(soft_sync, int) or soft_sync < 1:
            raise ValueError(f"AsyncPS: soft-sync size C must be an integer >= 1, got {soft_sync}")
        if not (np.isfinite(lr) and lr > 0):
            raise ValueError(f"AsyncPS: learning rate must be a finite number > 0, got {lr}")
        w = np.asarray(params)
        if not np.issubdtype(w.dtype, np.floating):
            w = w.astype(np.float64)
        self._w = w.copy()
        self.lr = float(lr)
        self.soft_sync = soft_sync
        self.policy = policy
        self._t_ps = 0
        self._acc = np.zeros(self._w.shape, dtype=np.float64)
        self._pending = 0
        self.pushes = 0

    @property
    def t_ps(self) -> int:
        """The logical clock: number of updates applied so far."""
        return self._t_ps

    @property
    def pending(self) -> int:
        """Pushes accumulated in the current, unfinished soft-sync batch."""
        return self._pending

    @property
    def params(self) -> np.ndarray:
        """A copy of the current parameters."""
        return self._w.copy()

    def pull(self) -> tuple[np.ndarray, int]:
        """Current parameters and clock, for a worker that joins (no gradient)."""
        return self._w.copy(), self._t_ps

    def _scale(self, sigma: int, kappa: float) -> float:
        if self.policy == "async":
            return self.lr
        if self.policy == "sigma":
            return self.lr / sigma
        return self.lr / kappa

    def push(self, p: Push) -> Reply:
        """Accept one push; apply the batch update when it is the C-th; answer at once.

        Raises ValueError (and changes nothing) for a push the PS must not apply: wrong gradient
        shape, non-finite values, a clock from the future, staleness samples < 1, kappa < 1.
        """
        g = np.asarray(p.gradient)
        if g.shape != self._w.shape:
            raise ValueError(f"push from worker {p.worker}: gradient shape {g.shape}, "
                             f"parameters have {self._w.shape}")
        if not np.all(np.isfinite(g)):
            raise ValueError(f"push from worker {p.worker}: gradient has NaN or inf values")
        try:
            sigma = staleness(self._t_ps, p.t_w)
        except ValueError as e:
            raise ValueError(f"push from worker {p.worker}: {e}") from None
        if any(int(x) != x or x < 1 for x in p.previous):
            raise ValueError(f"push from worker {p.worker}: staleness samples must be "
                             f"integers >= 1, got {list(p.previous)}")
        if p.kappa is None:
            kappa = staleness_context(sigma, p.previous)
        else:
            kappa = float(p.kappa)
            if not (np.isfinite(kappa) and kappa >= 1):
                raise ValueError(f"push from worker {p.worker}: context kappa must be >= 1, "
                                 f"got {p.kappa}")
        scale = self._scale(sigma, kappa)
        self._acc += scale * g.astype(np.float64)
        self._pending += 1
        self.pushes += 1
        applied = self._pending == self.soft_sync
        if applied:
            self._w -= (self._acc / self.soft_sync).astype(self._w.dtype)
            self._acc[:] = 0.0
            self._pending = 0
            self._t_ps += 1
        return Reply(self._w.copy(), self._t_ps, sigma, kappa, scale, applied)


class Worker:
    """A worker's synchronization state: its clock T_w and its staleness window.

    ``window`` is N: the context of a push is the mean of its own sigma and the previous N-1
    samples.  Training itself (gradients) is outside; this class only builds pushes and adopts
    replies.  One push may be outstanding at a time (the PS answers immediately).
    """

    def __init__(self, worker_id: int, window: int = 1, kappa_mode: str = "ps") -> None:
        if not isinstance(window, int) or window < 1:
            raise ValueError(f"worker {worker_id}: window N must be an integer >= 1, "
                             f"got {window}")
        if kappa_mode not in KAPPA_MODES:
            raise ValueError(f"worker {worker_id}: kappa_mode must be one of "
                             f"{', '.join(KAPPA_MODES)}; got {kappa_mode!r}")
        self.worker_id = worker_id
        self.window = window
        self.kappa_mode = kappa_mode
        self.t_w: int | None = None
        # the last N samples: N-1 of them are "previous" for the exact context, all N feed the
        # lagged estimate of kappa_mode="learner"
        self._samples: deque[int] = deque(maxlen=window)
        self.staleness_log: list[int] = []
        self.kappa_log: list[float] = []
        self._in_flight = False

    @property
    def previous(self) -> tuple[int, ...]:
        """The previous N-1 staleness samples, oldest first."""
        if self.window == 1:
            return ()
        return tuple(self._samples)[-(self.window - 1):]

    def lagged_kappa(self) -> float:
        """kappa_mode="learner": mean of the last N known samples (1.0 before any)."""
        if not self._samples:
            return 1.0
        return sum(self._samples) / len(self._samples)

    def adopt(self, params: np.ndarray, t_ps: int) -> np.ndarray:
        """Take parameters from the PS (join, or a re-fetch): T_w <- t_ps."""
        self.t_w = t_ps
        return params

    def make_push(self, gradient: np.ndarray) -> Push:
        """The push for a gradient computed on the parameters of clock T_w."""
        if self.t_w is None:
            raise RuntimeError(f"worker {self.worker_id}: push before receiving parameters")
        if self._in_flight:
            raise RuntimeError(f"worker {self.worker_id}: push while the previous one is "
                               "unanswered")
        self._in_flight = True
        kappa = self.lagged_kappa() if self.kappa_mode == "learner" else None
        return Push(self.worker_id, gradient, self.t_w, self.previous, kappa)

    def cancel_push(self) -> None:
        """Forget the outstanding push (rejected or lost by the transport); nothing is recorded."""
        self._in_flight = False

    def on_reply(self, reply: Reply) -> np.ndarray:
        """Adopt the reply's parameters and clock; record the push's sigma in the window."""
        if not self._in_flight:
            raise RuntimeError(f"worker {self.worker_id}: reply without an outstanding push")
        self._in_flight = False
        self._samples.append(reply.sigma)
        self.staleness_log.append(reply.sigma)
        self.kappa_log.append(reply.kappa)
        self.t_w = reply.t_ps
        return reply.params


@dataclass(frozen=True)
class PushRecord:
    """One push in a :func:`run_virtual_time` trace."""

    time: float
    worker: int
    sigma: int
    kappa: float
    scale: float
    t_ps: int
    applied: bool


GradFn = Callable[[int, np.ndarray, int], np.ndarray]


def run_virtual_time(
    ps: AsyncPS,
    workers: Sequence[Worker],
    compute_times: Sequence[float],
    grad_fn: GradFn,
    total_pushes: int,
) -> list[PushRecord]:
    """Run workers against ``ps`` on a virtual clock with zero network delay.

    Worker i joins at time 0 (pulls parameters), and then repeatedly spends
    ``compute_times[i]`` computing ``grad_fn(i, params, k)`` (k = its k-th push) on the
    parameters it holds, pushes, and adopts the reply.  Events at equal times are served in
    worker order, so a run is deterministic.  Stops after ``total_pushes`` pushes in all.
    """
    if len(compute_times) != len(workers):
        raise ValueError(f"run_virtual_time: {len(workers)} workers but "
                         f"{len(compute_times)} compute times")
    if any(not (c > 0) for c in compute_times):
        raise ValueError(f"run_virtual_time: compute times must be > 0, got {list(compute_times)}")
    params = []
    for ln in workers:
        w, t = ps.pull()
        params.append(ln.adopt(w, t))
    counts = [0] * len(workers)
    events = [(float(compute_times[i]), i) for i in range(len(workers))]
    heapq.heapify(events)
    trace: list[PushRecord] = []
    while len(trace) < total_pushes:
        now, i = heapq.heappop(events)
        g = grad_fn(i, params[i], counts[i])
        counts[i] += 1
        reply = ps.push(workers[i].make_push(g))
        params[i] = workers[i].on_reply(reply)
        trace.append(PushRecord(now, i, reply.sigma, reply.kappa, reply.scale, reply.t_ps,
                                reply.applied))
        heapq.heappush(events, (now + compute_times[i], i))
    return trace
