"""The one driver of the worker and PS state machines (workers/ina/driver.py) over a fake I/O:
a clock the test advances, a wire that delivers in order after a fixed delay and can drop
what the test names, one timer per host."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from workers.common.model import TrainConfig
from workers.ina.driver import PsDriver, RoundFailed, RoundPlan, WorkerDriver
from workers.ina.job import JobConfig
from workers.ina.messages import mask_of
from workers.ina.wire import InaPacket
from workers.ina.worker import n_chunks_for, ps_only_schedule

K_VALUES = 200
N_CHUNKS = n_chunks_for(K_VALUES)  # the last one padded
DELAY = 0.001


class Wire:
    """Hosts by address; every packet arrives ``DELAY`` later unless ``drop`` says no."""

    def __init__(self) -> None:
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0
        self.hosts: dict[tuple[str, int], Any] = {}
        self.drop: Callable[[InaPacket], bool] = lambda p: False
        self.sent: list[InaPacket] = []
        self.sent_to: list[tuple[tuple[str, int], InaPacket]] = []

    def at(self, t: float, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (max(t, self.now), self.seq, fn))

    def run(self, until: float = 1e9, stop: Callable[[], bool] = lambda: False) -> None:
        while self.heap and self.heap[0][0] <= until and not stop():
            self.now, _, fn = heapq.heappop(self.heap)
            fn()


class FakeIO:
    """A host's :class:`workers.ina.driver.HostIO` on the :class:`Wire`."""

    def __init__(self, wire: Wire) -> None:
        self.wire, self.driven = wire, None
        self.wake: float | None = None
        self.wakes = 0

    def now(self) -> float:
        return self.wire.now

    def send(self, pkts: Sequence[InaPacket], dest: tuple[str, int]) -> None:
        for p in pkts:
            self.wire.sent.append(p)
            self.wire.sent_to.append((dest, p))
            if not self.wire.drop(p):
                host = self.wire.hosts[dest]
                self.wire.at(self.wire.now + DELAY, lambda h=host, p=p: h.on_packets([p]))

    def wake_at(self, t: float | None) -> None:
        self.wake = t
        if t is not None:
            self.wakes += 1
            self.wire.at(t, lambda t=t: self._fire(t))

    def _fire(self, t: float) -> None:
        if self.wake == t:
            self.wake = None
            self.driven.on_timer()

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self.wire.at(self.wire.now + delay, fn)


class App:
    """Seeded int32 gradients; the sums each round applied."""

    def __init__(self, w: int, members: list[int], schedule: list) -> None:
        self.w, self.members, self.schedule = w, members, schedule
        self.sums: dict[int, np.ndarray] = {}
        self.plans = 0

    def q(self, r: int) -> np.ndarray:
        return np.random.default_rng(100 * r + self.w).integers(-1000, 1000, K_VALUES,
                                                                  dtype=np.int32)

    def gradient(self, r: int) -> tuple[float, np.ndarray, int]:
        return 0.5, self.q(r), 0

    def plan(self, r: int) -> RoundPlan:
        self.plans += 1
        return RoundPlan(list(self.members), self.schedule,
                         expect_mask=mask_of(self.members) if len(self.members) < 3 else None)

    def applied(self, r: int, total: np.ndarray, record: dict) -> None:
        self.sums[r] = total
        record["accuracy"] = 1.0


def job(rounds: int = 3, n: int = 3, **kw: Any) -> JobConfig:
    addrs = [(f"10.0.0.{i + 1}", 5000) for i in range(n)]
    kw.setdefault("out_dir", "/nonexistent")
    return JobConfig(job_id=5, mode="ps_only", rounds=rounds, train=TrainConfig(),
                     worker_ids=list(range(n)), worker_addrs=addrs, ps_addr=("10.0.0.9", 5000),
                     result_dests=addrs, schedules={}, frac_bits=8, n_values=K_VALUES,
                     window=2, timeout=0.05, **kw)


def launch(cfg: JobConfig, pause: float = 0.01) -> tuple[Wire, PsDriver, list, list[App]]:
    wire = Wire()
    ps_io = FakeIO(wire)
    ps = ps_io.driven = PsDriver(ps_io, cfg)
    wire.hosts[cfg.ps_addr] = ps
    sched = ps_only_schedule(n_chunks_for(K_VALUES))
    apps = [App(w, list(cfg.worker_ids), sched) for w in cfg.worker_ids]
    drivers = []
    for w, a in zip(cfg.worker_ids, apps, strict=True):
        io = FakeIO(wire)
        d = io.driven = WorkerDriver(io, cfg, w, a, pause=lambda: pause)
        wire.hosts[cfg.worker_addrs[w]] = d
        drivers.append(d)
    return wire, ps, drivers, apps


def exact(apps: list[App], r: int, members: list[int]) -> np.ndarray:
    return np.sum([apps[w].q(r) for w in members], axis=0, dtype=np.int64).astype(np.int32)


def test_every_round_is_exact_and_recorded_in_virtual_time() -> None:
    cfg = job()
    wire, ps, drivers, apps = launch(cfg)
    done = []
    drivers[0].on_finished = lambda: done.append(wire.now)
    for i, d in enumerate(drivers):
        d.start(0.002 * i)
    wire.run()
    assert all(d.finished for d in drivers) and done
    for r in range(cfg.rounds):
        for a in apps:
            np.testing.assert_array_equal(a.sums[r], exact(apps, r, [0, 1, 2]))
    rec = drivers[2].rounds[1]
    # window 2, no loss: one first copy and one RESULT per chunk, nothing else
    assert (rec["round"], rec["sent"], rec["results"], rec["retransmits"]) == (
        1, N_CHUNKS, N_CHUNKS, 0)
    assert rec["members"] == [0, 1, 2] and rec["accuracy"] == 1.0 and rec["time_s"] > 0
    # the last worker starts 4 ms after the first: its round is the shortest
    assert drivers[2].rounds[0]["time_s"] < drivers[0].rounds[0]["time_s"]
    assert ps.report()["rounds_completed"] == cfg.rounds
    assert sorted(ps.round_done_at) == [0, 1, 2]


def test_a_lost_grad_is_resent_when_its_timer_fires() -> None:
    cfg = job(rounds=1)
    wire, ps, drivers, apps = launch(cfg)
    lost = []

    def drop(p: InaPacket) -> bool:  # worker 1's first copy of chunk 3
        hit = p.msg_type == 1 and p.worker_id == 1 and p.chunk_id == 3 and not lost
        if hit:
            lost.append(wire.now)
        return hit
    wire.drop = drop
    for d in drivers:
        d.start()
    wire.run()
    np.testing.assert_array_equal(apps[0].sums[0], exact(apps, 0, [0, 1, 2]))
    rec = drivers[1].rounds[0]
    # worker 1 resent chunk 3 alone, copy 1, when its timer fired (the others, waiting for
    # the same chunk's RESULT, may time out too)
    resent = [p for p in wire.sent if p.msg_type == 1 and p.worker_id == 1]
    assert lost and rec["retransmits"] == 1 and rec["sent"] == N_CHUNKS
    assert [p.copy_number for p in resent if p.chunk_id == 3] == [0, 1]
    assert all(p.copy_number == 0 for p in resent if p.chunk_id != 3)


def test_malformed_datagrams_are_counted_those_between_rounds_by_the_next_round() -> None:
    cfg = job(rounds=2)
    wire, ps, drivers, apps = launch(cfg, pause=1.0)
    for d in drivers:
        d.start()
    wire.run(until=0.5)  # round 0 done, round 1 not begun (a 1 s pause)
    assert [len(d.rounds) for d in drivers] == [1, 1, 1] and drivers[0].active is None
    drivers[0].on_packets([None])  # between rounds: held, as a socket holds it
    wire.run(stop=lambda: drivers[0].active is not None)
    assert wire.now > 1.0
    drivers[0].on_packets([None, None])  # in round 1
    ps.on_packets([None])
    wire.run()
    # the one that came between rounds is counted by round 1 (every datagram counted once)
    assert drivers[0].rounds[1]["malformed"] == 3 and drivers[0].rounds[0]["malformed"] == 0
    assert ps.report()["malformed_datagrams"] == 1


def test_a_member_change_restarts_the_round_over_the_survivors() -> None:
    cfg = job(rounds=2)
    wire, ps, drivers, apps = launch(cfg)
    # worker 2 never starts: round 0 waits for it
    for d in drivers[:2]:
        d.start()
    wire.run(until=0.2)
    assert not drivers[0].rounds and drivers[0].active is not None
    assert ps.silent(20.0) is not None and ps.silent(20.0) is None  # reported once
    e, out = ps.change_members([0, 1], ["h2"], at_s=0.2)
    for a in apps[:2]:
        a.members = [0, 1]
    ps.deliver(out)
    t_restart = wire.now
    for d in drivers[:2]:
        d.restart()
    wire.run()
    assert e == 0 and ps.member_events == [{"removed": ["h2"], "from_round": 0, "at_s": 0.2}]
    for r in range(2):
        for a in apps[:2]:
            np.testing.assert_array_equal(a.sums[r], exact(apps, r, [0, 1]))
    rec = drivers[0].rounds[0]
    assert rec["restarts"] == 1 and rec["members"] == [0, 1] and rec["retransmits"] >= 1
    assert rec["time_s"] > t_restart > 0.1  # from the first attempt's start
    assert drivers[0].rounds[1]["restarts"] == 0


def test_a_round_that_takes_too_long_fails_and_a_removed_worker_stops() -> None:
    cfg = job(rounds=1, round_timeout_s=5.0)
    wire, ps, drivers, apps = launch(cfg)
    drivers[0].start()
    wire.run(until=4.0)
    drivers[0].check(4.0)  # within the round's time
    with pytest.raises(RoundFailed, match="round 0 not complete after 5 s"):
        drivers[0].check(5.5)
    apps[1].members = [0, 2]
    drivers[1].start()
    with pytest.raises(RoundFailed, match="worker 1: removed from the job in round 0"):
        wire.run()


def test_the_timer_is_asked_for_once_per_new_deadline() -> None:
    cfg = job(rounds=1)
    wire, ps, drivers, apps = launch(cfg)
    for d in drivers:
        d.start()
    wire.run()
    # a timer per (re)armed deadline, and none left when the round is over
    assert all(d.io.wake is None for d in drivers)
    assert all(0 < d.io.wakes <= 2 * N_CHUNKS + 1 for d in drivers)


@pytest.mark.parametrize("network", [False, True])
def test_a_late_request_is_answered_to_the_worker_that_asked(network: bool) -> None:
    """Worker 1 loses chunk 3's RESULT and asks again: the PS answers worker 1 alone where
    it can address one worker (loopback: it sends every RESULT to every worker), and down
    the multicast tree in a network (one copy to the tree's entry; ina.p4 multicasts every
    RESULT, docs/protocol.md §6)."""
    cfg = job(rounds=1)
    if network:
        cfg.result_dests = cfg.worker_addrs[:1]
    wire, ps, drivers, apps = launch(cfg)
    if network:  # stand-in for the switches: the entry's copy reaches every worker
        class Tree:
            def on_packets(self, pkts: list) -> None:
                for d in drivers:
                    d.on_packets(pkts)
        wire.hosts[cfg.worker_addrs[0]] = Tree()
    lost: list[float] = []

    def drop(p: InaPacket) -> bool:  # the first RESULT of chunk 3 toward worker 1
        hit = p.msg_type == 3 and p.chunk_id == 3 and not lost and (
            network or wire.sent_to[-1][0] == cfg.worker_addrs[1])
        if hit and not network:
            lost.append(wire.now)
        return hit and not network
    wire.drop = drop
    if network:
        drivers[1].on_packets = (lambda orig: lambda pkts: orig(
            [p for p in pkts if not (p.chunk_id == 3 and not lost and not lost.append(0))]))(
            drivers[1].on_packets)
    for d in drivers:
        d.start()
    wire.run()
    np.testing.assert_array_equal(apps[1].sums[0], exact(apps, 0, [0, 1, 2]))
    late = [(dest, p) for dest, p in wire.sent_to if p.msg_type == 3 and p.flags & 1]
    assert lost and drivers[1].rounds[0]["retransmits"] >= 1
    assert ps.state.stats.results_unicast >= 1
    dests = {dest for dest, _ in late}
    assert dests == ({cfg.worker_addrs[0]} if network else {cfg.worker_addrs[1]})


def test_in_a_network_a_late_request_is_answered_on_the_reply_port() -> None:
    """With a reply port (every network job, make_job_config), the answer to worker 1's
    late GRAD goes to worker 1's address at that port alone, not down the tree."""
    cfg = job(rounds=1, reply_port=18001)
    cfg.result_dests = cfg.worker_addrs[:1]
    wire, ps, drivers, apps = launch(cfg)

    class Tree:  # stand-in for the switches: the entry's copy reaches every worker
        def on_packets(self, pkts: list) -> None:
            for d in drivers:
                d.on_packets(pkts)
    wire.hosts[cfg.worker_addrs[0]] = Tree()
    for w, d in enumerate(drivers):
        wire.hosts[(cfg.worker_addrs[w][0], 18001)] = d
    missed: list[int] = []
    real = drivers[1].on_packets

    def lossy(pkts: list) -> None:  # worker 1 misses chunk 3's first RESULT
        keep = [p for p in pkts if not (p.chunk_id == 3 and not missed)]
        if len(keep) < len(pkts):
            missed.append(3)
        real(keep)
    drivers[1].on_packets = lossy
    for d in drivers:
        d.start()
    wire.run()
    np.testing.assert_array_equal(apps[1].sums[0], exact(apps, 0, [0, 1, 2]))
    late = [dest for dest, p in wire.sent_to if p.msg_type == 3 and p.flags & 1]
    assert missed and late and set(late) == {(cfg.worker_addrs[1][0], 18001)}


def test_a_file_round_log_takes_the_records_and_the_report_reads_them_back(tmp_path) -> None:
    """The worker process's records go to a file, not a list (bench/soak.py measured the list
    growing a worker by 1.4 KiB a round); the report holds them all, the file is then gone."""
    from workers.ina.worker_node import NodeApp, RoundLog

    cfg = job(rounds=3)
    wire, ps, drivers, apps = launch(cfg)
    logs = [RoundLog(tmp_path / f"w{i}.jsonl") for i in range(3)]
    for d, log in zip(drivers, logs, strict=True):
        d.rounds = log
        d.start()
    wire.run()
    assert all(d.finished for d in drivers)
    assert [len(log) for log in logs] == [3, 3, 3]
    lines = (tmp_path / "w1.jsonl").read_text().splitlines()
    assert [json.loads(x)["round"] for x in lines] == [0, 1, 2]
    assert [r["results"] for r in logs[1]] == [N_CHUNKS] * 3
    assert len(RoundLog(tmp_path / "w1.jsonl")) == 0 and not (tmp_path / "w1.jsonl").read_text()

    ncfg = job(rounds=1, out_dir=str(tmp_path))
    app = NodeApp(ncfg, 0, tmp_path, events=lambda e: None, train=False,
                  vectors=lambda r: np.arange(K_VALUES, dtype=np.int32))
    _, q, _ = app.gradient(0)
    app.applied(0, q, {"round": 0, "members": [0], "time_s": 0.1, "retransmits": 0})
    app.log.append({"round": 0, "time_s": 0.1})
    report = app.close(app.log)
    assert report["rounds"] == [{"round": 0, "time_s": 0.1}]
    assert json.loads((tmp_path / "worker0.json").read_text())["rounds"] == report["rounds"]
    assert not app.log.path.exists()
