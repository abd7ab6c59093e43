"""Several hosts in one process (workers/ina/pool_io.py, workers/ina/pool_node.py): real
WorkerDrivers and a PsDriver over loopback UDP sockets served by one HostPool; each
member's timer on its own; the pool process end to end; its bad input."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from netns import free_udp_ports

from workers.common.model import Replica, TrainConfig
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import K
from workers.ina.driver import PsDriver, RoundFailed, WorkerDriver, job_rtt
from workers.ina.job import JobConfig
from workers.ina.pool_io import HostPool
from workers.ina.udp import open_socket
from workers.ina.worker import n_chunks_for, ps_only_schedule
from workers.ina.worker_node import NodeApp, follow_control


def _job(tmp_path, n_workers: int, rounds: int, n_values: int | None = None,
         train: TrainConfig | None = None) -> JobConfig:
    train = train or TrainConfig(model="logreg", n_workers=n_workers, rounds=rounds,
                                 batch_size=16)
    n_values = n_values or Replica(train, 0).params.size
    ports = free_udp_ports(n_workers + 1)
    workers = [("127.0.0.1", p) for p in ports[1:]]
    return JobConfig(
        job_id=7, mode="ps_only", rounds=rounds, train=train,
        worker_ids=list(range(n_workers)), worker_addrs=workers,
        ps_addr=("127.0.0.1", ports[0]), result_dests=workers,
        schedules={str(w): ps_only_schedule(n_chunks_for(n_values, K))
                   for w in range(n_workers)},
        frac_bits=choose_frac_bits(8.0, n_workers), n_values=n_values, out_dir=str(tmp_path),
        round_timeout_s=30)


def _sock(port: int) -> socket.socket:
    s = open_socket(("127.0.0.1", port))
    s.setblocking(False)
    return s


def test_one_pool_serves_the_ps_and_every_worker_with_exact_sums(tmp_path):
    n_workers, rounds, n_values = 4, 3, 300
    cfg = _job(tmp_path, n_workers, rounds, n_values)
    rng = np.random.default_rng(1)
    grads = rng.integers(-1000, 1000, (n_workers, rounds, n_values), dtype=np.int32)
    pool = HostPool()
    ps_io = pool.add("ps", _sock(cfg.ps_addr[1]))
    ps = PsDriver(ps_io, cfg)
    ps_io.driver = ps
    drivers, apps = [], []
    for w in range(n_workers):
        app = NodeApp(cfg, w, tmp_path, events=lambda e: None, train=False,
                      vectors=lambda r, w=w: grads[w, r])
        io = pool.add(w, _sock(cfg.worker_addrs[w][1]), paced=True)
        d = WorkerDriver(io, cfg, w, app, rtt=job_rtt(cfg), rounds=app.log)
        io.driver, io.poll, io.done = d, follow_control(d, app), (lambda d=d: d.finished)
        drivers.append(d)
        apps.append(app)
    for d in drivers:
        d.start()
    t0 = time.monotonic()
    pool.serve(until=lambda: all(d.finished for d in drivers))
    assert time.monotonic() - t0 < 20
    for app, d in zip(apps, drivers, strict=True):
        app.close(d.rounds)
    exact = grads.astype(np.int64).sum(axis=0)
    for w in range(n_workers):
        data = np.load(tmp_path / f"worker{w}.npz")
        np.testing.assert_array_equal(data["q"], grads[w])
        np.testing.assert_array_equal(data["sums"], exact.astype(np.int32))
        report = json.loads((tmp_path / f"worker{w}.json").read_text())
        assert [r["round"] for r in report["rounds"]] == list(range(rounds))
    assert sorted(ps.round_done_at) == list(range(rounds))
    for io in pool.members:
        io.sock.close()


class _Timers:
    """A driver that only keeps timers: arms ``first`` s ahead, records when each fires."""

    def __init__(self, first: float) -> None:
        self.first, self.fired, self.io, self.packets = first, [], None, 0

    def arm(self) -> None:
        self.t0 = self.io.now()
        self.io.wake_at(self.t0 + self.first)

    def on_packets(self, pkts) -> None:
        self.packets += len(pkts)

    def on_timer(self) -> None:
        self.fired.append(self.io.now() - self.t0)


def test_each_member_keeps_its_own_timer_without_any_traffic():
    pool = HostPool()
    socks = [_sock(0) for _ in range(3)]
    fakes = [_Timers(0.03), _Timers(0.12), _Timers(0.5)]
    for i, (s, f) in enumerate(zip(socks, fakes, strict=True)):
        io = pool.add(i, s)
        io.driver, f.io = f, io
        f.arm()
    fakes[2].io.wake_at(fakes[2].t0 + 0.08)  # replaced: its 0.5 s entry must never fire
    t0 = time.monotonic()
    pool.serve(until=lambda: time.monotonic() - t0 > 0.7)
    assert len(fakes[0].fired) == 1 and 0.03 <= fakes[0].fired[0] < 0.03 + 0.03
    assert len(fakes[1].fired) == 1 and 0.12 <= fakes[1].fired[0] < 0.12 + 0.03
    assert len(fakes[2].fired) == 1 and 0.08 <= fakes[2].fired[0] < 0.08 + 0.03
    assert all(f.packets == 0 for f in fakes)
    for s in socks:
        s.close()


def test_a_datagram_goes_to_its_member_alone():
    pool = HostPool()
    socks = [_sock(0) for _ in range(3)]
    fakes = [_Timers(10.0) for _ in range(3)]
    for i, (s, f) in enumerate(zip(socks, fakes, strict=True)):
        io = pool.add(i, s)
        io.driver, f.io = f, io
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(5):
        tx.sendto(b"not an INA payload", socks[1].getsockname())
    tx.sendto(b"x", socks[2].getsockname())
    t0 = time.monotonic()
    pool.serve(until=lambda: fakes[1].packets == 5 and fakes[2].packets == 1
               or time.monotonic() - t0 > 2)
    assert [f.packets for f in fakes] == [0, 5, 1]
    for s in [*socks, tx]:
        s.close()


def test_a_member_that_fails_is_named():
    pool = HostPool()
    s = _sock(0)

    class Failing(_Timers):
        def on_timer(self) -> None:
            raise RoundFailed("worker 9: round 0 not complete after 1 s")

    quiet, failing = _Timers(10.0), Failing(0.01)
    for key, f in (("quiet", quiet), ("nine", failing)):
        io = pool.add(key, s if key == "nine" else _sock(0))
        io.driver, f.io = f, io
        f.arm()
    with pytest.raises(RoundFailed):
        pool.serve(until=lambda: False)
    assert pool.failed == "nine"
    for io in pool.members:
        io.sock.close()


def test_pool_process_trains_three_workers_exactly(tmp_path):
    n_workers, rounds = 3, 3
    cfg = _job(tmp_path, n_workers, rounds)
    job = tmp_path / "job.json"
    cfg.save(job)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    ps = subprocess.Popen([sys.executable, "-m", "workers.ina.ps_node", str(job)], env=env)
    here = f"/proc/{os.getpid()}/ns/net"  # the test's own namespace: nothing to enter
    pool = subprocess.Popen([sys.executable, "-m", "workers.ina.pool_node", str(job),
                             *[a for w in range(n_workers) for a in ("--member", f"{w}={here}")]],
                            env=env, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = pool.communicate(timeout=60)
        assert pool.returncode == 0
        ps.terminate()
        assert ps.wait(timeout=30) == 0
    finally:
        for p in (ps, pool):
            p.kill()
    lines = out.splitlines()
    assert lines[0] == "pool of workers 0,1,2 ready"  # one ready line per process
    assert sum('"round"' in line for line in lines) == n_workers * rounds
    data = [np.load(tmp_path / f"worker{w}.npz") for w in range(n_workers)]
    exact = np.sum([d["q"].astype(np.int64) for d in data], axis=0)
    for d in data:
        assert d["sums"].shape[0] == rounds
        np.testing.assert_array_equal(d["sums"], exact.astype(np.int32))
    accs = [json.loads((tmp_path / f"worker{w}.json").read_text())["rounds"][-1]["accuracy"]
            for w in range(n_workers)]
    assert len(set(accs)) == 1  # replicas stayed identical


@pytest.mark.parametrize("args, says", [
    (["--member", "x=/proc/1/ns/net"], "expected ID=NETNS_PATH"),
    (["--member", "0=/proc/1/ns/net", "--member", "0=/proc/1/ns/net"], "named twice"),
    (["--member", "5=/proc/1/ns/net"], "worker 5 is not in job"),
    (["--member", "0=/nonexistent/ns/net"], "cannot open it"),
])
def test_pool_process_bad_input_is_one_line(tmp_path, args, says):
    cfg = _job(tmp_path, 2, 1)
    job = tmp_path / "job.json"
    cfg.save(job)
    r = subprocess.run([sys.executable, "-m", "workers.ina.pool_node", str(job), *args],
                       capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 2
    assert says in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_pool_process_names_the_member_whose_round_failed(tmp_path):
    cfg = _job(tmp_path, 2, 2)  # no PS answers: a round times out
    cfg.round_timeout_s = 1
    job = tmp_path / "job.json"
    cfg.save(job)
    here = f"/proc/{os.getpid()}/ns/net"
    r = subprocess.run([sys.executable, "-m", "workers.ina.pool_node", str(job),
                        "--member", f"0={here}", "--member", f"1={here}"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"error: pool member worker ([01]): worker \1: round 0 not complete "
                        r"after 1 s .*", last), last
    for w in (0, 1):  # every member's report is written, with the rounds it finished
        assert json.loads((tmp_path / f"worker{w}.json").read_text())["rounds"] == []


def test_pool_process_stops_on_sigterm_keeping_every_member_s_report(tmp_path):
    import signal

    cfg = _job(tmp_path, 2, 2)  # no PS: the members wait in round 0 until told to stop
    job = tmp_path / "job.json"
    cfg.save(job)
    here = f"/proc/{os.getpid()}/ns/net"
    p = subprocess.Popen([sys.executable, "-m", "workers.ina.pool_node", str(job),
                          "--member", f"0={here}", "--member", f"1={here}"],
                         stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert p.stdout.readline().strip() == "pool of workers 0,1 ready"
        time.sleep(0.5)  # into round 0
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 3 and "workers 0,1 stopped" in out
    for w in (0, 1):
        assert json.loads((tmp_path / f"worker{w}.json").read_text())["rounds"] == []
        assert (tmp_path / f"worker{w}.npz").exists()
