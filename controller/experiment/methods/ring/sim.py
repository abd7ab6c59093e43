"""The ring all-reduce (:mod:`workers.ring`) in the simulated network: the same switches,
rules, links, queues and impairment as an INA run over that network (a
:class:`controller.experiment.simulate.engine.SimDeployed`), the hosts' ring drivers on
virtual-time I/O instead of INA's drivers.  Every switch forwards the ring's datagrams as
plain IPv4 (they are not to INA's port), so no switch aggregates: the ring is the baseline
without in-network help.

Each job's workers form one ring in their order; every job runs at once (they share the
links).  A worker's round time is from its round's first DATA to its round's end (every DATA
it expected arrived and every DATA it sent was ACKed); between rounds it pauses ``compute_ms``
of virtual time plus a seeded jitter, as INA's simulated workers do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork
from controller.experiment.simulate.rounds import JobRounds
from workers.ring.driver import RingDriver
from workers.ring.wire import RingDecodeError, RingPacket, decode_frame, encode, frame
from workers.ring.worker import NEXT

__all__ = ["RingJob", "RingJobResult", "RingSimResult", "simulate_ring", "wrapped_sum"]


@dataclass
class RingJob:
    """One ring: its id, its workers' hosts in ring order, ``gradient(worker, round)``."""

    job: int
    workers: list[str]
    gradient: Callable[[int, int], np.ndarray]


@dataclass
class RingJobResult(JobRounds):
    """What one ring did: per round each worker's record and whether every worker applied
    exactly the int32 sum."""

    workers: list[str] = field(default_factory=list)


@dataclass
class RingSimResult:
    """Every ring of a launch, and the network's counters."""

    jobs: list[RingJobResult]
    virtual_s: float
    wall_s: float
    events: int
    moved: dict[tuple[str, str], int] = field(default_factory=dict)
    queue_drops: int = 0
    impairment: dict[str, int] = field(default_factory=dict)


def wrapped_sum(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """The int32 sum of ``vectors`` wrapped as the switches' registers wrap (the exact sum
    every design must deliver)."""
    total = np.sum([v.astype(np.int64) for v in vectors], axis=0)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


class _RingHostIO:
    """A ring host's :class:`workers.ring.driver.RingIO` in virtual time: frames on its one
    port, addressed by IPv4 to its successor or predecessor."""

    def __init__(self, loop: EventLoop, net: SimNetwork, host: str, nxt: str, prev: str,
                 hosts: dict[str, tuple[str, str]]) -> None:
        self.loop, self.net, self.host = loop, net, host
        self.ip, self.mac = hosts[host]
        self.peer = {NEXT: hosts[nxt], "prev": hosts[prev]}
        self.driven: RingDriver | None = None
        self._wake: float | None = None

    def now(self) -> float:
        return self.loop.now

    def send(self, pkts: Sequence[RingPacket], to: str) -> None:
        ip, mac = self.peer[to]
        for p in pkts:
            self.net.send(self.host, 0, frame(self.mac, mac, self.ip, ip, encode(p)))

    def wake_at(self, t: float | None) -> None:
        if t is None:
            self._wake = None
        elif t != self._wake:
            self._wake = t
            self.loop.at(t, self._fire)

    def _fire(self, _: Any) -> None:
        if self._wake == self.loop.now and self.driven is not None:
            self._wake = None
            self.driven.on_timer()

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self.loop.at(self.loop.now + delay, lambda _: fn())


def simulate_ring(deployed: Any, jobs: list[RingJob], rounds: int, *, k: int = 32,
                  window: int = 16, timeout: float = 0.3, max_timeout: float = 2.0,
                  compute_s: float = 0.0, jitter_s: float = 0.0, seed: int = 0,
                  max_time: float = 600.0) -> RingSimResult:
    """Run ``jobs``' rings for ``rounds`` rounds on a fresh copy of ``deployed``'s network
    (its switches reloaded with the rules, its options: delay, queue, burst, switch time,
    impairment); returns every record and whether every sum was exact."""
    opt = deployed.opt
    loop = EventLoop()
    switches = deployed.switches()
    by_host: dict[str, RingDriver] = {}

    def on_host(host: str, f: bytes) -> None:
        d = by_host.get(host)
        if d is None:
            return
        try:
            p = decode_frame(f)
        except RingDecodeError:
            return
        if p is not None:
            d.on_packets((p,))

    net = SimNetwork(loop, deployed.graph, deployed.netplan.ports, switches, 1.0,
                     opt.delay_ms / 1000.0, opt.queue, deployed.impair, on_host=on_host,
                     proc_s=opt.switch_proc_ms / 1000.0, burst=opt.burst_bytes,
                     wake_s=opt.wake_ms / 1000.0)
    left = [sum(len(j.workers) for j in jobs)]

    def one_done() -> None:
        left[0] -= 1
        if not left[0]:
            loop.stop()
    sums: list[dict[int, list[np.ndarray]]] = []
    drivers: list[list[RingDriver]] = []
    jitter = random.Random(seed)

    def jit() -> float:
        return jitter.uniform(0.0, jitter_s) if jitter_s else 0.0
    for job in jobs:
        P = len(job.workers)
        got: dict[int, list[np.ndarray]] = {}
        sums.append(got)
        ds = []
        for r, host in enumerate(job.workers):
            io = _RingHostIO(loop, net, host, job.workers[(r + 1) % P],
                             job.workers[(r - 1) % P], deployed.hosts)

            def applied(rnd: int, total: np.ndarray, rec: dict[str, Any],
                        got: dict = got) -> None:
                got.setdefault(rnd, []).append(total)
            d = RingDriver(io, job.job, r, P, rounds,
                           (lambda rnd, r=r, job=job: job.gradient(r, rnd)), applied,
                           k=k, window=window, timeout=timeout, max_timeout=max_timeout,
                           pause=lambda: compute_s + jit(), on_finished=one_done)
            io.driven = by_host[host] = d
            ds.append(d)
        drivers.append(ds)
    t0 = time.perf_counter()
    for ds in drivers:
        for d in ds:
            d.start(jit())
    loop.run(until=max_time)
    loop.run(until=loop.now + 5 * max_timeout)  # late ACKs and resends, as INA's PS serves on
    out = []
    for job, ds, got in zip(jobs, drivers, sums, strict=True):
        exact = []
        for rnd in range(rounds):
            want = wrapped_sum([job.gradient(w, rnd) for w in range(len(job.workers))])
            have = got.get(rnd, [])
            exact.append(len(have) == len(job.workers)
                         and all(np.array_equal(h, want) for h in have))
        resent = sum(x["retransmits"] for d in ds for x in d.records) + sum(
            d.active.stats.retransmits for d in ds if d.active is not None)
        out.append(RingJobResult(job.job, [d.records for d in ds], exact, resent,
                                 workers=list(job.workers)))
    return RingSimResult(out, loop.now, time.perf_counter() - t0, loop.events, net.moved(),
                         net.queue_drops(), net.impairment_counters())
