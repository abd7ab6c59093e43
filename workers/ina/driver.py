"""The one driver of each host's state machine, over an I/O interface (docs/design.md §3.5, §9).

:class:`WorkerDriver` runs a worker's rounds -- gradient, synchronization by
:class:`workers.ina.worker.WorkerRound` (window, timers, retransmissions), the sum applied,
the next round -- and :class:`PsDriver` feeds :class:`workers.ina.ps.PsState` and sends what
it completes.  Neither does I/O: each talks to a :class:`HostIO`, which two classes implement

* real sockets and the monotonic clock (:class:`workers.ina.socket_io.SocketIO`, used by
  ``worker_node`` and ``ps_node`` in Mininet, on servers and over loopback);
* the simulated network's virtual time (``controller.experiment.simulate.engine``).

So every protocol change is made once, here and in the state machines, and both networks run
it.  A driver is event-driven: the I/O calls :meth:`WorkerDriver.on_packets` with what arrived
(``None`` for a datagram that did not decode) and :meth:`WorkerDriver.on_timer` when the time
it asked for with :meth:`HostIO.wake_at` has come; between two rounds the driver asks
:meth:`HostIO.later` to begin the next one (after the compute pause in virtual time, at once
with real compute, which took its real time already).

What a host does besides synchronizing -- computing a gradient, applying a sum, writing its
files, reading its control record -- is a :class:`WorkerApp`, given to the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from workers.ina.cc import CongestionControl, make_cc
from workers.ina.constants import K
from workers.ina.events import SilentEvent
from workers.ina.job import JobConfig
from workers.ina.ps import PsState
from workers.ina.ps_records import PsOutput
from workers.ina.tree import Tree
from workers.ina.wire import InaPacket
from workers.ina.worker import RttEstimator, WorkerRound, n_chunks_for

__all__ = ["Address", "HostIO", "RoundFailed", "RoundPlan", "WorkerApp", "WorkerDriver",
           "PsDriver", "job_cc", "job_rtt", "timeout_cap"]

Address = tuple[str, int]


class RoundFailed(RuntimeError):
    """A worker cannot finish a round: removed from the job, or no progress in time."""


class HostIO(Protocol):
    """What a driver needs of its host: a clock, a way out, one timer, deferred calls."""

    def now(self) -> float:
        """Seconds on the host's clock (monotonic, or virtual)."""
        ...

    def send(self, pkts: Sequence[InaPacket], dest: Address) -> None:
        """Put ``pkts`` on the wire toward ``dest``, in order."""
        ...

    def wake_at(self, t: float | None) -> None:
        """Call the driver's ``on_timer`` at time ``t`` (the newest request replaces the
        one before; None: no timer needed now)."""
        ...

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """Call ``fn()`` ``delay`` seconds from now, from the host's loop."""
        ...


@dataclass
class RoundPlan:
    """Who synchronizes round ``r`` and how (the control record's view, docs/design.md §9)."""

    members: list[int]
    schedule: list[tuple[int, int, int]]
    expect_mask: int | None = None  # RESULTs must be over exactly this set (members changed)
    version: int = 0  # the schedules' version (re-plans) the round runs on


class WorkerApp(Protocol):
    """A worker's work outside the network: its model, its files, its control record."""

    def gradient(self, round_: int) -> tuple[float, np.ndarray, int]:
        """Round ``round_``'s (loss, quantized int32 gradient, values clipped)."""
        ...

    def plan(self, round_: int) -> RoundPlan:
        """Round ``round_``'s members and schedule (raises :class:`RoundFailed` when this
        worker is no longer a member)."""
        ...

    def applied(self, round_: int, total: np.ndarray, record: dict[str, Any]) -> None:
        """Round ``round_`` synchronized to ``total`` (int32): apply it.  ``record`` is the
        round's entry of the worker's report (time, members, statistics), which the app may
        add to (accuracy)."""
        ...


def timeout_cap(cfg: JobConfig) -> float:
    """The safety cap of a worker's timeouts: the job's ``max_timeout``, and at most half
    the PS's ``worker_timeout_s`` (a live worker is heard from at least that often, so the
    PS never takes a backed-off one for gone); never below ``timeout``.  The measured round
    trip still lifts it (``RttEstimator.cap``)."""
    cap = cfg.max_timeout
    if cfg.worker_timeout_s > 0:
        cap = min(cap, cfg.worker_timeout_s / 2)
    return max(cap, cfg.timeout)


def job_rtt(cfg: JobConfig) -> RttEstimator:
    """The worker's timeout estimator of a job, kept from round to round (workers.ina.worker,
    "Timeouts")."""
    cap = timeout_cap(cfg)
    start = None if cfg.first_timeout is None else min(cap, max(cfg.timeout, cfg.first_timeout))
    return RttEstimator(cfg.timeout, min(0.01, cfg.timeout), cap, start=start)


def job_cc(cfg: JobConfig) -> CongestionControl:
    """The worker's congestion control of a job (``cfg.cc``, workers.ina.cc), kept from round
    to round; the adaptive policies start from the plan's rate times the path's round trip."""
    return make_cc(cfg.cc, cfg.window, cfg.rate_fps, cfg.base_rtt_s)


class RecordSink(Protocol):
    """Where a worker's finished rounds go: ``append`` one record; ``len`` counts them."""

    def append(self, record: dict[str, Any], /) -> None: ...

    def __len__(self) -> int: ...


HELD_MAX = 512  # datagrams held between rounds: about what a UDP socket's default buffer holds


class WorkerDriver:
    """One worker of one job, every round (module docstring).

    ``pause()``: the time between a round's end and the next round's start (0: at once);
    ``on_finished()``: called once after the last round.  ``rounds`` receives each finished
    round's record (``worker_node``'s report: loss, clipped values, members, restarts,
    time, the round's :class:`workers.ina.worker.WorkerStats` and timeouts): a list by
    default, or any container with ``append`` passed in (the worker process passes a file,
    ``worker_node.RoundLog``, so that a long job's records do not grow its memory)."""

    def __init__(self, io: HostIO, cfg: JobConfig, worker_id: int, app: WorkerApp, *,
                 rtt: RttEstimator | None = None, cc: CongestionControl | None = None,
                 pause: Callable[[], float] = lambda: 0.0,
                 on_finished: Callable[[], None] | None = None,
                 rounds: RecordSink | None = None) -> None:
        self.io, self.cfg, self.worker_id, self.app = io, cfg, worker_id, app
        self.rtt = rtt if rtt is not None else job_rtt(cfg)
        self.cc = cc if cc is not None else job_cc(cfg)
        self.pause, self.on_finished = pause, on_finished
        self.rounds: RecordSink = rounds if rounds is not None else []
        self.next_round = 0  # the round being synchronized, or the next one to begin
        self.active: WorkerRound | None = None  # the round in flight (None between rounds)
        self.plan: RoundPlan | None = None
        self._q: np.ndarray | None = None
        self._loss, self._clipped = 0.0, 0
        self._t0 = self._sync_start = 0.0
        self._restarts = self._extra_retx = 0
        self._held: list[InaPacket | None] = []  # arrived between rounds (on_packets)

    @property
    def finished(self) -> bool:
        return self.next_round >= self.cfg.rounds

    def start(self, delay: float = 0.0) -> None:
        """Begin round 0 ``delay`` seconds from now."""
        self.io.later(delay, self._begin)

    # -- events --------------------------------------------------------------------------

    def on_packets(self, pkts: Iterable[InaPacket | None]) -> None:
        """What arrived (``None``: a datagram that did not decode).  Between rounds nothing
        is waited for: what comes is held (up to :data:`HELD_MAX`, as a socket's receive
        buffer holds it while nobody reads) and taken, and counted, by the next round, so
        that every datagram a worker gets is counted somewhere (docs/design.md §9)."""
        out: list[InaPacket] = []
        wr = self.active
        for pkt in pkts:
            if wr is None or wr.done:
                if len(self._held) < HELD_MAX:
                    self._held.append(pkt)
                continue
            if pkt is None:  # not an INA payload: discarded, counted (design §9)
                wr.stats.malformed += 1
            else:
                out += wr.on_packet(pkt, self.io.now())
        if out:
            self.io.send(out, self.cfg.ps_addr)
        if wr is not None and wr is self.active:
            if wr.done:
                self._finish(wr)
            else:
                self.io.wake_at(wr.next_deadline())

    def on_timer(self) -> None:
        """The time asked for came: retransmit what timed out."""
        wr = self.active
        if wr is None:
            return
        out = wr.tick(self.io.now())
        if out:
            self.io.send(out, self.cfg.ps_addr)
        self.io.wake_at(wr.next_deadline())

    def restart(self) -> None:
        """The members of the round in flight changed (docs/design.md §9): synchronize it
        again with the same gradient over the round's new plan."""
        wr = self.active
        if wr is None:
            return
        self._restarts += 1
        self._extra_retx += wr.stats.retransmits
        self._sync()

    def check(self, now: float) -> None:
        """Raise :class:`RoundFailed` when the round in flight took ``round_timeout_s``."""
        wr = self.active
        if wr is not None and now - self._sync_start > self.cfg.round_timeout_s:
            raise RoundFailed(f"worker {self.worker_id}: round {wr.round} not complete after "
                              f"{self.cfg.round_timeout_s:.0f} s ({wr.stats})")

    # -- internals -----------------------------------------------------------------------

    def _begin(self) -> None:
        r = self.next_round
        self._loss, self._q, self._clipped = self.app.gradient(r)
        self._restarts = self._extra_retx = 0
        self._t0 = self.io.now()
        self._sync()

    def _sync(self) -> None:
        """Start (or start again) the synchronization of round ``next_round``."""
        r, cfg = self.next_round, self.cfg
        self.plan = plan = self.app.plan(r)
        if self.worker_id not in plan.members:
            raise RoundFailed(f"worker {self.worker_id}: removed from the job in round {r}")
        assert self._q is not None
        wr = WorkerRound(job_id=cfg.job_id, worker_id=self.worker_id, round_=r, values=self._q,
                         schedule=plan.schedule, k=K, window=cfg.window,
                         timeout=cfg.timeout, max_timeout=timeout_cap(cfg),
                         direct_after=cfg.direct_after, expect_mask=plan.expect_mask,
                         rtt=self.rtt, cc=self.cc, hierarchical=cfg.tree is not None,
                         members=plan.members)
        self.active = wr
        self._sync_start = now = self.io.now()
        self.io.send(wr.start(now), cfg.ps_addr)
        self.io.wake_at(wr.next_deadline())
        if self._held:  # what came between rounds, as the socket would hand it over now
            held, self._held = self._held, []
            self.on_packets(held)

    def _finish(self, wr: WorkerRound) -> None:
        now = self.io.now()
        self.active = None
        self.io.wake_at(None)
        plan = self.plan
        assert plan is not None
        stats = {"time_s": now - (self._t0 if self._restarts else self._sync_start),
                 **asdict(wr.stats), "rto_s": wr.rtt.rto, "first_rto_s": wr.rtt.first_rto,
                 "window": wr.cc.window}
        stats["retransmits"] += self._extra_retx
        record: dict[str, Any] = {"round": wr.round, "loss": float(self._loss),
                                  "clipped": self._clipped,
                                  "schedule_version": plan.version,
                                  "members": list(plan.members), "restarts": self._restarts,
                                  **stats}
        self.app.applied(wr.round, wr.result_values(), record)
        self.rounds.append(record)
        self.next_round += 1
        if self.finished:
            if self.on_finished is not None:
                self.on_finished()
        else:
            self.io.later(self.pause(), self._begin)


# ------------------------------------------------------------------ the PS


@dataclass
class PsDriver:
    """The PS of one job (module docstring): merges what arrives, sends each RESULT to the
    job's ``result_dests``, keeps when each round completed and who went silent."""

    io: HostIO
    cfg: JobConfig
    state: PsState = field(init=False)
    started: float = field(init=False)
    last_progress: float = field(init=False)
    round_done_at: dict[int, float] = field(default_factory=dict)  # round -> s after start
    malformed: int = 0
    member_events: list[dict[str, Any]] = field(default_factory=list)
    silent_every: float = 0.05  # a scan of the lowest round, not per packet
    _reported: set[tuple[int, int]] = field(default_factory=set)
    _last_check: float = 0.0

    def __post_init__(self) -> None:
        cfg = self.cfg
        # NACKs need a path to one worker that no switch reads as INA (reply_dest)
        routes = ({int(w): list(s) for w, s in cfg.schedules.items()}
                  if self.reply_dest(cfg.worker_ids[0]) is not None else None)
        self.state = PsState(cfg.job_id, cfg.worker_ids, n_chunks_for(cfg.n_values, K), K,
                             unicast_late=True, tree=cfg.aggregation_tree(), routes=routes,
                             chain=True)
        self.started = self.last_progress = self.io.now()

    def on_packets(self, pkts: Iterable[InaPacket | None]) -> None:
        """Merge a batch; its RESULTs leave together, after it."""
        batch = PsOutput()
        for pkt in pkts:
            if pkt is None:
                self.malformed += 1
                continue
            out = self.state.on_packet(pkt, self.io.now())
            batch.results += out.results
            batch.replies += out.replies
            batch.nacks += out.nacks
            batch.completed_rounds += out.completed_rounds
        self.deliver(batch)
        self.io.wake_at(self.state.next_deadline())

    def on_timer(self) -> None:
        """Ask for what is overdue (``PsState.tick``)."""
        self.deliver(self.state.tick(self.io.now()))
        self.io.wake_at(self.state.next_deadline())

    def deliver(self, out: PsOutput) -> None:
        """Send ``out``'s RESULTs and replies; note the rounds it completed.  A reply goes to
        its worker alone where the job has a unicast path to it (:meth:`reply_dest`), else
        with the multicast RESULTs."""
        multicast = list(out.results)
        for w, pkt in out.replies:
            dest = self.reply_dest(w)
            if dest is None:
                multicast.append(pkt)
            else:
                self.io.send([pkt], dest)
        for w, pkt in out.nacks:  # never down the tree: a RESULT there releases slots
            dest = self.reply_dest(w)
            if dest is not None:
                self.io.send([pkt], dest)
        if multicast:
            for dest in self.cfg.result_dests:
                self.io.send(multicast, dest)
        now = self.io.now()
        for r in out.completed_rounds:
            self.round_done_at[r] = now - self.started
            self.last_progress = now

    def reply_dest(self, worker: int) -> Address | None:
        """Where a RESULT for worker ``worker`` alone goes (docs/protocol.md §6): its own
        address when the PS sends every RESULT to every worker (loopback: no switch
        multicasts); in a network, the worker's ``reply_port`` -- a UDP port that is not
        INA's, so every switch routes the frame as plain IPv4 to that host, while ina.p4
        multicasts every RESULT to its port down the job's tree; None without one (the
        reply goes with the multicast RESULTs)."""
        cfg = self.cfg
        if not 0 <= worker < len(cfg.worker_addrs):
            return None
        addr = cfg.worker_addrs[worker]
        if len(cfg.result_dests) > 1 and addr in cfg.result_dests:
            return addr
        if cfg.reply_port is not None:
            return (addr[0], cfg.reply_port)
        return None

    def change_members(self, members: list[int], removed: list[Any],
                       at_s: float) -> tuple[int, PsOutput]:
        """A member change (the controller's request, accepted by the control log): the
        round it takes effect in and what it completed at once, which the caller
        :meth:`deliver` s after writing the record the change is in (a RESULT never comes
        before the record that explains it)."""
        e, out = self.state.change_members(members)
        self.member_events.append({"removed": removed, "from_round": e, "at_s": at_s})
        return e, out

    def change_tree(self, tree: Tree, from_round: int) -> None:
        """A hierarchical job's tree from round ``from_round`` on (a fail-over's control
        change, :meth:`workers.ina.ps.PsState.change_tree`)."""
        self.state.change_tree(tree, from_round)

    def stalled(self, now: float) -> bool:
        """No round completed for ``round_timeout_s``."""
        return now - self.last_progress > self.cfg.round_timeout_s

    def silent(self, now: float) -> SilentEvent | None:
        """At most every ``silent_every`` s: the members the lowest incomplete round lacks
        and has not heard from for ``worker_timeout_s``, each reported once per round."""
        if now - self._last_check <= self.silent_every:
            return None
        self._last_check = now
        r = self.state.current_round
        quiet = [w for w in self.state.silent(now, self.cfg.worker_timeout_s)
                 if (r, w) not in self._reported]
        if not quiet:
            return None
        self._reported.update((r, w) for w in quiet)
        return SilentEvent(job=self.cfg.job_id, round=r, workers=quiet,
                           after_s=self.cfg.worker_timeout_s)

    def report(self) -> dict[str, Any]:
        """``ps.json``'s document."""
        return {
            "job_id": self.cfg.job_id,
            "mode": self.cfg.mode,
            "rounds_completed": len(self.round_done_at),
            "round_done_at_s": {str(r): t for r, t in sorted(self.round_done_at.items())},
            "stats": asdict(self.state.stats),
            "malformed_datagrams": self.malformed,
            "anomalies": [asdict(a) for a in self.state.anomalies][:100],
            "member_changes": self.member_events,
        }
