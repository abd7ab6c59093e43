"""One mode of one INA job in virtual time: the real worker and PS state machines
(:class:`workers.ina.worker.WorkerRound`, :class:`workers.ina.ps.PsState`) driven the way
``worker_node`` and ``ps_node`` drive them, on a :class:`SimNetwork` (docs/simulate.md).

Each worker trains its replica (the job's :class:`workers.common.model.TrainConfig`): it
computes and quantizes its gradient, synchronizes it (its round time is the time from its
first GRAD to its last RESULT, as ``worker_node`` measures it), applies the sum and, after
``compute_s`` of virtual time, starts the next round.  The PS sends each RESULT once toward
worker 0, and the switches multicast it (``results_to="network"``).  The record has
``job_record``'s keys, so ``summarize`` and ``compare`` read it as a run's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork
from workers.common.model import Replica
from workers.common.quantize import dequantize, quantize
from workers.ina.constants import K
from workers.ina.job import JobConfig
from workers.ina.ps import PsState
from workers.ina.wire import FrameTemplate, decode_frame
from workers.ina.worker import RttEstimator, WorkerRound

__all__ = ["ModeRun", "SimJob", "run_mode", "run_jobs"]


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

    sims = [_job(loop, net, j, hosts, compute_s, jitter_s, one_done) for j in jobs]
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


def _job(loop: EventLoop, net: SimNetwork, job: SimJob, hosts: dict[str, tuple[str, str]],
         compute_s: float, jitter_s: float, all_done: Callable[[], None]) -> Any:
    """The closures that run one job (``start``, ``on_host``, ``result``)."""
    cfg, workers, ps, train, gradient_of = (job.cfg, job.workers, job.ps, job.train,
                                            job.gradient_of)
    n = len(workers)
    n_values = cfg.n_values
    ps_ip, ps_mac = hosts[ps]
    tmpl = [FrameTemplate(hosts[h][1], ps_mac, hosts[h][0], ps_ip) for h in workers]
    dest_ip, dest_mac = hosts[workers[0]]
    ps_tmpl = FrameTemplate(ps_mac, dest_mac, ps_ip, dest_ip)
    state = PsState(cfg.job_id, cfg.worker_ids, -(-n_values // K), K)
    replicas = [Replica(cfg.train, i) for i in range(n)] if train else []
    rng = np.random.default_rng(cfg.train.seed)
    jitter = random.Random(cfg.train.seed)

    def jit() -> float:
        return jitter.uniform(0.0, jitter_s) if jitter_s else 0.0
    rtts = [RttEstimator(cfg.timeout, min(0.01, cfg.timeout), cfg.max_timeout)
            for _ in range(n)]
    machines: dict[int, WorkerRound] = {}
    tick_at: dict[int, float] = {}
    started = [0.0] * n
    round_of = [0] * n
    q_of: dict[tuple[int, int], np.ndarray] = {}  # (round, worker) -> quantized gradient
    sums: dict[int, list[np.ndarray]] = {}
    per_round: dict[int, list[dict[str, Any]]] = {}
    accuracy: dict[int, float] = {}
    finished = 0
    host_of = {h: i for i, h in enumerate(workers)}
    ps_port, port0 = 0, 0  # a host has one port

    def gradient(w: int, r: int) -> tuple[float, np.ndarray, int]:
        if gradient_of is not None:
            return 0.0, np.asarray(gradient_of(w, r), dtype=np.int32), 0
        if train:
            loss, grad = replicas[w].gradient(r)
            q, clipped = quantize(grad, cfg.frac_bits, n)
            return float(loss), q, int(clipped)
        bound = 2**31 // n
        return 0.0, rng.integers(-bound, bound, n_values, dtype=np.int64).astype(np.int32), 0

    losses: dict[tuple[int, int], tuple[float, int]] = {}

    def send(w: int, pkts: list) -> None:
        for p in pkts:
            net.send(workers[w], port0, tmpl[w].encode(p))

    def arm(w: int) -> None:
        d = machines[w].next_deadline()
        if d is not None and tick_at.get(w) != d:
            tick_at[w] = d
            loop.at(d, tick, w)

    def tick(w: int) -> None:
        if tick_at.get(w) != loop.now:
            return
        del tick_at[w]
        m = machines[w]
        send(w, m.tick(loop.now))
        arm(w)

    def begin(w: int) -> None:
        r = round_of[w]
        loss, q, clipped = gradient(w, r)
        q_of[(r, w)] = q
        losses[(r, w)] = (loss, clipped)
        m = WorkerRound(job_id=cfg.job_id, worker_id=w, round_=r, values=q,
                        schedule=[tuple(e) for e in cfg.schedules[str(w)]], k=K,
                        window=cfg.window, timeout=cfg.timeout, max_timeout=cfg.max_timeout,
                        direct_after=cfg.direct_after, rtt=rtts[w])
        machines[w] = m
        started[w] = loop.now
        send(w, m.start(loop.now))
        arm(w)

    def finish(w: int, m: WorkerRound) -> None:
        nonlocal finished
        r = m.round
        total = m.result_values()
        sums.setdefault(r, []).append(total)
        if train:
            replicas[w].apply(dequantize(total, cfg.frac_bits) / np.float32(n))
            if w == 0:
                accuracy[r] = replicas[0].test_accuracy()
        loss, clipped = losses.pop((r, w))
        per_round.setdefault(r, []).append({
            "worker": w, "time_s": loop.now - started[w], "loss": loss, "clipped": clipped,
            **asdict(m.stats)})
        tick_at.pop(w, None)
        round_of[w] += 1
        if round_of[w] == cfg.rounds:
            finished += 1
            if finished == n:
                all_done()
        else:
            loop.at(loop.now + compute_s + jit(), begin, w)

    def on_host(host: str, frame: bytes) -> None:
        pkt = decode_frame(frame)
        if pkt is None:
            return
        if host == ps:
            for res in state.on_packet(pkt, loop.now).results:
                net.send(ps, ps_port, ps_tmpl.encode(res))
            return
        w = host_of.get(host)
        m = machines.get(w) if w is not None else None
        if m is None or m.done:
            return
        send(w, m.on_packet(pkt, loop.now))
        if m.done:
            finish(w, m)
        else:
            arm(w)

    def start() -> None:
        for w in range(n):
            loop.at(loop.now + jit(), begin, w)

    def result(events: int, virtual_s: float) -> ModeRun:
        return _result(cfg, n, round_of, q_of, sums, per_round, accuracy, state, events,
                       virtual_s)

    return SimpleNamespace(start=start, on_host=on_host, result=result)


def _result(cfg: JobConfig, n: int, round_of: list[int], q_of: dict, sums: dict,
            per_round: dict, accuracy: dict, state: PsState, events: int,
            virtual_s: float) -> ModeRun:
    """One job's :class:`ModeRun`: per-round record with ``job_record``'s keys, exactness
    against the int32 sum of the workers' vectors."""
    n_values = cfg.n_values
    done = min(round_of)
    rounds, exact_all = [], True
    for r in range(done):
        total = np.sum([q_of[(r, w)].astype(np.int64) for w in range(n)], axis=0)
        wrapped = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
        exact = len(sums[r]) == n and all(np.array_equal(s, wrapped) for s in sums[r])
        exact_all &= exact
        pw = per_round[r]
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
