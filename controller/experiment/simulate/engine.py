"""One mode of one INA job in virtual time: the real worker and PS state machines
(:class:`workers.ina.worker.WorkerRound`, :class:`workers.ina.ps.PsState`) driven by the
drivers ``worker_node`` and ``ps_node`` run (:mod:`workers.ina.driver`), over
:class:`SimHostIO` -- each host's clock, port and timer in virtual time -- on a
:class:`SimNetwork` (docs/simulate.md).  This module is only the adapter: the hosts' I/O, the
simulated workers' gradients, and the record.

Each worker trains its replica (the job's :class:`workers.common.model.TrainConfig`): it
computes and quantizes its gradient, synchronizes it (its round time is the time from its
first GRAD to its last RESULT, as ``worker_node`` measures it), applies the sum and, after
``compute_s`` of virtual time, starts the next round.  The PS sends each RESULT once toward
worker 0, and the switches multicast it (``results_to="network"``).  The record has
``job_record``'s keys, so ``summarize`` and ``compare`` read it as a run's.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork
from workers.common.model import Replica
from workers.common.quantize import dequantize, quantize
from workers.ina.driver import PsDriver, RoundPlan, WorkerDriver
from workers.ina.job import JobConfig
from workers.ina.ps import PsState
from workers.ina.wire import FrameTemplate, InaPacket, decode_frame

__all__ = ["ModeRun", "SimJob", "SimHostIO", "run_mode", "run_jobs"]


@dataclass
class ModeRun:
    """What one simulated mode produced."""

    record: dict[str, Any]  # job_record's keys
    rounds_done: int
    exact: bool
    events: int
    virtual_s: float
    ps_stats: dict[str, Any] = field(default_factory=dict)
    sums: dict[int, list[np.ndarray]] = field(default_factory=dict)  # round -> each worker's


@dataclass
class SimJob:
    """One job of a simulated launch: its file (mode, schedules, window, timeouts), hosts and
    where its gradients come from."""

    cfg: JobConfig
    workers: list[str]  # worker i's host
    ps: str
    train: bool = True  # a model's gradients (False: seeded random int32 vectors)
    gradient_of: Callable[[int, int], np.ndarray] | None = None  # (worker, round) -> int32


def run_mode(loop: EventLoop, net: SimNetwork, cfg: JobConfig, workers: list[str], ps: str,
             hosts: dict[str, tuple[str, str]], compute_s: float = 0.0,
             jitter_s: float = 0.0, train: bool = True,
             max_time: float | None = None,
             gradient_of: Callable[[int, int], np.ndarray] | None = None) -> ModeRun:
    """:func:`run_jobs` of one job."""
    return run_jobs(loop, net, [SimJob(cfg, workers, ps, train, gradient_of)], hosts,
                    compute_s, jitter_s, max_time)[0]


def run_jobs(loop: EventLoop, net: SimNetwork, jobs: list[SimJob],
             hosts: dict[str, tuple[str, str]], compute_s: float = 0.0,
             jitter_s: float = 0.0, max_time: float | None = None) -> list[ModeRun]:
    """Run every job at once on ``net`` (they share its links and switches, as ``run
    --jobs`` launches them behind one start barrier) until every worker of every job
    finished every round (or ``max_time``, default the longest ``round_timeout_s x
    rounds``, of virtual time).  A worker starts round 0 after a seeded uniform
    ``[0, jitter_s)`` (``worker_node`` polls the start file every 10 ms) and each later
    round ``compute_s`` plus such a draw after it finished the previous one.  Returns each
    job's :class:`ModeRun` (``events`` and ``virtual_s`` are the launch's)."""
    left = [len(jobs)]

    def one_done() -> None:
        left[0] -= 1
        if not left[0]:
            loop.stop()

    sims = [_SimJob(loop, net, j, hosts, compute_s, jitter_s, one_done) for j in jobs]
    owner = {h: sim for sim, j in zip(sims, jobs, strict=True) for h in (j.ps, *j.workers)}

    def on_host(host: str, frame: bytes) -> None:
        sim = owner.get(host)
        if sim is not None:
            sim.on_host(host, frame)

    net.on_host = on_host
    before, t0 = loop.events, loop.now
    for sim in sims:
        sim.start()
    loop.run(until=t0 + (max_time if max_time is not None
                         else max(j.cfg.round_timeout_s * j.cfg.rounds for j in jobs)))
    return [sim.result(loop.events - before, loop.now - t0) for sim in sims]


def _call(fn: Callable[[], None]) -> None:
    fn()


class SimHostIO:
    """A host's :class:`workers.ina.driver.HostIO` in virtual time: its clock is the loop's,
    what it sends leaves on its one port as frames (addressed by IPv4, as the kernel would),
    its timer and deferred calls are the loop's events."""

    def __init__(self, loop: EventLoop, net: SimNetwork, host: str,
                 hosts: dict[str, tuple[str, str]]) -> None:
        self.loop, self.net, self.host = loop, net, host
        self.ip, self.mac = hosts[host]
        self.mac_of = {ip: mac for ip, mac in hosts.values()}
        self._tmpl: dict[str, FrameTemplate] = {}
        self._wake: float | None = None
        self.driven: Any = None  # the driver whose on_timer the timer calls

    def now(self) -> float:
        return self.loop.now

    def send(self, pkts: Sequence[InaPacket], dest: tuple[str, int]) -> None:
        tmpl = self._tmpl.get(dest[0])
        if tmpl is None:
            tmpl = self._tmpl[dest[0]] = FrameTemplate(self.mac, self.mac_of[dest[0]],
                                                       self.ip, dest[0])
        for p in pkts:
            self.net.send(self.host, 0, tmpl.encode(p))  # a host has one port

    def wake_at(self, t: float | None) -> None:
        if t is None:
            self._wake = None
        elif t != self._wake:  # one event per new deadline; an outdated one does nothing
            self._wake = t
            self.loop.at(t, self._fire)

    def _fire(self, _: Any) -> None:
        if self._wake != self.loop.now:
            return
        self._wake = None
        self.driven.on_timer()

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self.loop.at(self.loop.now + delay, _call, fn)


class _SimApp:
    """A simulated worker's :class:`workers.ina.driver.WorkerApp`: its replica (or seeded
    vectors), the job file's schedule, the sums kept for the exactness check."""

    def __init__(self, sim: _SimJob, w: int) -> None:
        self.sim, self.w = sim, w
        cfg = sim.job.cfg
        self.plan_ = RoundPlan(members=list(cfg.worker_ids),
                               schedule=[tuple(e) for e in cfg.schedules[str(w)]])

    def gradient(self, r: int) -> tuple[float, np.ndarray, int]:
        sim, w = self.sim, self.w
        job, n = sim.job, len(sim.job.workers)
        if job.gradient_of is not None:
            q = np.asarray(job.gradient_of(w, r), dtype=np.int32)
            loss, clipped = 0.0, 0
        elif job.train:
            loss_, grad = sim.replicas[w].gradient(r)
            q, c = quantize(grad, job.cfg.frac_bits, n)
            loss, clipped = float(loss_), int(c)
        else:
            bound = 2**31 // n
            q = sim.rng.integers(-bound, bound, job.cfg.n_values,
                                 dtype=np.int64).astype(np.int32)
            loss, clipped = 0.0, 0
        sim.q_of[(r, w)] = q
        return loss, q, clipped

    def plan(self, r: int) -> RoundPlan:
        return self.plan_

    def applied(self, r: int, total: np.ndarray, record: dict[str, Any]) -> None:
        sim, w = self.sim, self.w
        sim.sums.setdefault(r, []).append(total)
        if sim.job.train:
            sim.replicas[w].apply(dequantize(total, sim.job.cfg.frac_bits)
                                  / np.float32(len(sim.job.workers)))
            if w == 0:  # one worker's accuracy is the round's (every replica is the same)
                sim.accuracy[r] = sim.replicas[0].test_accuracy()


class _SimJob:
    """One job in virtual time: its PS and worker drivers on their hosts' I/O."""

    def __init__(self, loop: EventLoop, net: SimNetwork, job: SimJob,
                 hosts: dict[str, tuple[str, str]], compute_s: float, jitter_s: float,
                 all_done: Callable[[], None]) -> None:
        cfg, n = job.cfg, len(job.workers)
        self.loop, self.job = loop, job
        self.replicas = [Replica(cfg.train, i) for i in range(n)] if job.train else []
        self.rng = np.random.default_rng(cfg.train.seed)
        jitter = random.Random(cfg.train.seed)
        self.jitter_s = jitter_s

        def jit() -> float:
            return jitter.uniform(0.0, jitter_s) if jitter_s else 0.0
        self.jit = jit
        self.q_of: dict[tuple[int, int], np.ndarray] = {}  # (round, worker) -> gradient
        self.sums: dict[int, list[np.ndarray]] = {}
        self.accuracy: dict[int, float] = {}
        left = [n]

        def one_finished() -> None:
            left[0] -= 1
            if not left[0]:
                all_done()
        ps_io = SimHostIO(loop, net, job.ps, hosts)
        self.ps = ps_io.driven = PsDriver(ps_io, cfg)
        self.drivers: list[WorkerDriver] = []
        for w, h in enumerate(job.workers):
            io = SimHostIO(loop, net, h, hosts)
            d = WorkerDriver(io, cfg, w, _SimApp(self, w),
                             pause=lambda: compute_s + jit(), on_finished=one_finished)
            io.driven = d
            self.drivers.append(d)
        self.by_host: dict[str, Any] = {job.ps: self.ps}
        self.by_host.update(zip(job.workers, self.drivers, strict=True))

    def start(self) -> None:
        for d in self.drivers:
            d.start(self.jit())

    def on_host(self, host: str, frame: bytes) -> None:
        pkt = decode_frame(frame)
        if pkt is not None:
            self.by_host[host].on_packets((pkt,))

    def result(self, events: int, virtual_s: float) -> ModeRun:
        return _result(self.job.cfg, self.drivers, self.q_of, self.sums, self.accuracy,
                       self.ps.state, events, virtual_s)


def _result(cfg: JobConfig, drivers: list[WorkerDriver], q_of: dict, sums: dict,
            accuracy: dict, state: PsState, events: int, virtual_s: float) -> ModeRun:
    """One job's :class:`ModeRun`: per-round record with ``job_record``'s keys, exactness
    against the int32 sum of the workers' vectors."""
    n = len(drivers)
    n_values = cfg.n_values
    done = min(len(d.rounds) for d in drivers)
    rounds, exact_all = [], True
    for r in range(done):
        total = np.sum([q_of[(r, w)].astype(np.int64) for w in range(n)], axis=0)
        wrapped = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
        exact = len(sums[r]) == n and all(np.array_equal(s, wrapped) for s in sums[r])
        exact_all &= exact
        pw = [d.rounds[r] for d in drivers]
        rounds.append({
            "time_s": max(x["time_s"] for x in pw),
            "sync_time_s": min(x["time_s"] for x in pw),
            "accuracy": accuracy.get(r),
            "loss": float(np.mean([x["loss"] for x in pw])),
            "retransmissions": sum(x["retransmits"] for x in pw),
            "clipped": sum(x["clipped"] for x in pw),
            "exact": exact,
            "schedule_version": 0,
        })
    return ModeRun(record={"job_id": cfg.job_id, "rounds": rounds,
                           "ps": asdict(state.stats), "grad_bytes": 4 * n_values},
                   rounds_done=done, exact=exact_all and done == cfg.rounds,
                   events=events, virtual_s=virtual_s,
                   ps_stats=asdict(state.stats), sums=sums)
