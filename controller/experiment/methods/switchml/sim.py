"""The SwitchML-style design (``p4src/switchml.p4``, :mod:`workers.switchml`) in the
simulated network: one chosen switch runs ``switchml.p4`` and sums every job's chunks in its
pool of slots with shadow copies; every other switch keeps ``ina.p4`` and its rules from an
INA deployment (:class:`controller.experiment.simulate.engine.SimDeployed`) and forwards the
SwitchML frames as plain IPv4 (they are not to INA's port).

The chosen switch is the ToR of the first job's PS (SwitchML's rack-scale switch, "one chosen
switch" of docs/switchml.md): every worker addresses its UPDATEs to that PS host, so they all
end at that switch, which answers with RESULTs multicast back, one replica per worker.  No PS
process runs.  The switch admits a worker on any of its ports (``sm_member`` for each): a
worker's UPDATEs reach it over whichever path the routes take.  Every job gets its own
``2 * pool_size`` cells (``pool_base``) and multicast group.

Each worker (:class:`workers.switchml.worker.SwitchMLWorker`, pure) all-reduces one vector
per round; its round time is from its first UPDATE to its last RESULT; between rounds it
pauses ``compute_s`` plus a seeded jitter, as INA's simulated workers do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import networkx as nx
import numpy as np

from controller.experiment.methods.ring.sim import wrapped_sum
from controller.experiment.network import P4_PROGRAM
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork
from controller.experiment.simulate.rounds import JobRounds
from workers.switchml.constants import CELLS
from workers.switchml.job import JobConfig
from workers.switchml.rules import Entry, Host, install, job_rules
from workers.switchml.wire import SmDecodeError, SmPacket, decode_frame, encode_frame
from workers.switchml.worker import SwitchMLWorker

__all__ = ["SmJob", "SmJobResult", "SmSimResult", "simulate_switchml", "SWITCHML_P4",
           "COUNTERS", "toward"]

SWITCHML_P4 = P4_PROGRAM.parent / "switchml.p4"
# the switch's counters a run reports (MyIngress.<name>, docs/switchml.md)
COUNTERS = ("aggregated", "completed", "absorbed", "shadow_reply", "dropped_stale",
            "dropped_duplicate", "dropped_busy", "dropped_nonmember", "dropped_no_slot")


@cache
def _program() -> Any:
    import pyswitch

    return pyswitch.compile_p4(str(SWITCHML_P4))


@dataclass
class SmJob:
    """One SwitchML job: its id, PS host (whose ToR is the switch for the first job), its
    workers' hosts (worker id = index), ``gradient(worker, round)``."""

    job: int
    ps: str
    workers: list[str]
    gradient: Callable[[int, int], np.ndarray]


@dataclass
class SmJobResult(JobRounds):
    """One job: per worker its finished rounds' records, per round whether every worker
    applied the exact sum, and every UPDATE resent (finished rounds or not)."""


@dataclass
class SmSimResult:
    switch: str
    cells: int  # the switch's cells every job takes together (2 × pool_size each)
    jobs: list[SmJobResult]
    virtual_s: float
    wall_s: float
    counters: dict[str, int] = field(default_factory=dict)
    moved: dict[tuple[str, str], int] = field(default_factory=dict)  # bytes per link


class _Worker:
    """One worker host: its state machine over its rounds, on virtual-time frames."""

    def __init__(self, loop: EventLoop, net: SimNetwork, host: str, to: tuple[str, str],
                 hosts: dict[str, tuple[str, str]], sm: SwitchMLWorker, rounds: int,
                 gradient: Callable[[int], np.ndarray], pause: Callable[[], float],
                 on_finished: Callable[[], None]) -> None:
        self.loop, self.net, self.host, self.sm, self.rounds = loop, net, host, sm, rounds
        self.ip, self.mac = hosts[host]
        self.to_ip, self.to_mac = to
        self.gradient, self.pause, self.on_finished = gradient, pause, on_finished
        self.round, self.records, self.sums = 0, [], []
        self._t0, self._wake, self._last = 0.0, None, {"sent": 0, "retransmitted": 0}

    def _send(self, pkts: list[SmPacket]) -> None:
        for p in pkts:
            self.net.send(self.host, 0, encode_frame(p, self.mac, self.to_mac, self.ip,
                                                     self.to_ip))
        self._arm()

    def _arm(self) -> None:
        t = self.sm.next_deadline()
        if t is not None and t != self._wake:
            self._wake = t
            self.loop.at(t, self._fire, t)

    def _fire(self, t: float) -> None:
        if self._wake == t and not self.sm.done:
            self._wake = None
            self._send(self.sm.poll(self.loop.now))

    def begin(self) -> None:
        self._t0 = self.loop.now
        self._send(self.sm.start(self.round, self.gradient(self.round), self.loop.now))

    def on_frame(self, f: bytes) -> None:
        try:
            p = decode_frame(f)
        except SmDecodeError:
            return
        if p is None or self.round >= self.rounds or self.sm.done:
            return
        self._send(self.sm.receive(p, self.loop.now))
        if self.sm.done:
            st = self.sm.stats
            self.records.append({"round": self.round, "time_s": self.loop.now - self._t0,
                                 "sent": st.sent - self._last["sent"],
                                 "retransmitted": st.retransmitted - self._last["retransmitted"]})
            self._last = {"sent": st.sent, "retransmitted": st.retransmitted}
            self.sums.append(self.sm.result())
            self.round += 1
            if self.round >= self.rounds:
                self.on_finished()
            else:
                self.loop.at(self.loop.now + self.pause(), lambda _: self.begin())


def toward(graph: nx.Graph, sw: str, host: str, ports: dict[str, dict[str, int]]) -> int:
    """``sw``'s port on a shortest path toward ``host``."""
    return ports[sw][nx.shortest_path(graph, sw, host)[1]]


def simulate_switchml(deployed: Any, jobs: list[SmJob], rounds: int, *, pool_size: int = 16,
                      timeout: float = 0.3, compute_s: float = 0.0, jitter_s: float = 0.0,
                      seed: int = 0, max_time: float = 600.0) -> SmSimResult:
    """Run ``jobs`` for ``rounds`` rounds on a fresh copy of ``deployed``'s network with the
    first job's PS's ToR running ``switchml.p4`` (module docstring)."""
    if 2 * pool_size * len(jobs) > CELLS:
        raise ValueError(f"{len(jobs)} jobs × 2 × pool {pool_size} cells exceed the switch's "
                         f"{CELLS}")
    graph, ports, hosts = deployed.graph, deployed.netplan.ports, deployed.hosts
    target = jobs[0].ps
    sw_name = next(iter(graph.neighbors(target)))
    import pyswitch

    sm_switch = pyswitch.Switch(_program())
    for j, job in enumerate(jobs):
        cfg = JobConfig(job.job, tuple(range(len(job.workers))), pool_size,
                        pool_base=2 * pool_size * j, timeout=timeout)
        where = {w: Host(toward(graph, sw_name, h, ports), hosts[h][1], hosts[h][0])
                 for w, h in enumerate(job.workers)}
        install(job_rules(cfg, where, group=j + 1), sm_switch)
        for w in cfg.workers:  # admitted on every port: the routes pick the way in
            for port in sorted(set(ports[sw_name].values()) - {where[w].port}):
                e = Entry("MyIngress.sm_member", {"hdr.sm.job_id": job.job,
                                                  "hdr.sm.worker_id": w,
                                                  "standard_metadata.ingress_port": port},
                          "MyIngress.member_ok", {})
                sm_switch.insert_entry(e.table, e.match, e.action, e.params)
    opt = deployed.opt
    loop = EventLoop()
    switches = deployed.switches()
    switches[sw_name] = sm_switch
    by_host: dict[str, _Worker] = {}

    def on_host(host: str, f: bytes) -> None:
        w = by_host.get(host)
        if w is not None:
            w.on_frame(f)
    net = SimNetwork(loop, graph, ports, switches, 1.0, opt.delay_ms / 1000.0, opt.queue,
                     deployed.impair, on_host=on_host, proc_s=opt.switch_proc_ms / 1000.0,
                     burst=opt.burst_bytes, wake_s=opt.wake_ms / 1000.0)
    left = [sum(len(j.workers) for j in jobs)]

    def one_done() -> None:
        left[0] -= 1
        if not left[0]:
            loop.stop()
    jitter = random.Random(seed)

    def jit() -> float:
        return jitter.uniform(0.0, jitter_s) if jitter_s else 0.0
    workers: list[list[_Worker]] = []
    for j, job in enumerate(jobs):
        cfg = JobConfig(job.job, tuple(range(len(job.workers))), pool_size,
                        pool_base=2 * pool_size * j, timeout=timeout)
        ws = []
        for w, host in enumerate(job.workers):
            wk = _Worker(loop, net, host, hosts[target], hosts, SwitchMLWorker(cfg, w), rounds,
                         (lambda r, w=w, job=job: job.gradient(w, r)),
                         lambda: compute_s + jit(), one_done)
            by_host[host] = wk
            ws.append(wk)
        workers.append(ws)
    t0 = time.perf_counter()
    for ws in workers:
        for wk in ws:
            loop.at(loop.now + jit(), lambda _, wk=wk: wk.begin())
    loop.run(until=max_time)
    out = []
    for job, ws in zip(jobs, workers, strict=True):
        exact = []
        for r in range(rounds):
            want = wrapped_sum([job.gradient(w, r) for w in range(len(job.workers))])
            exact.append(all(len(wk.sums) > r and np.array_equal(wk.sums[r], want)
                             for wk in ws))
        out.append(SmJobResult(job.job, [wk.records for wk in ws], exact,
                               sum(wk.sm.stats.retransmitted for wk in ws)))
    counters = {}
    for n in COUNTERS:
        try:
            counters[n] = int(sm_switch.counter_read(f"MyIngress.{n}", 0)[0])
        except Exception:  # noqa: BLE001 -- a counter the program does not have
            continue
    return SmSimResult(sw_name, 2 * pool_size * len(jobs), out, loop.now,
                       time.perf_counter() - t0, counters, net.moved())
