"""The PS's control channel under a flood of bad requests during a lossy run (issue 43, "Must
show"): a PS and three workers over loopback, every datagram through a relay that drops 10 %
each way, while 10,000 garbage lines, oversized lines, deep JSON, invalid UTF-8 and invalid
schedules go into the control FIFO, with one valid schedule change among them.  Every round
stays exact, the PS and the workers stay alive, the valid change takes effect where the PS
says, and the refusals are reported at a bounded rate.  (No switch: on loopback the PS
merges every chunk -- the INA protocol's GRAD/RESULT, loss recovery and control channel,
without in-network aggregation.)"""

from __future__ import annotations

import json
import os
import random
import select
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from netns import free_udp_ports

from controller.experiment.methods.ina.method import exact_sums_by_round
from workers.common.model import Replica, TrainConfig
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import K
from workers.ina.control_io import request_path
from workers.ina.events import ControlEvent, RefusedEvent, parse_event
from workers.ina.job import JobConfig
from workers.ina.worker import n_chunks_for, ps_only_schedule

LOSS = 0.10


class _Relay(threading.Thread):
    """Forwards datagrams from each of its sockets to one address, dropping ``LOSS``."""

    def __init__(self, routes: list[tuple[int, tuple[str, int]]], seed: int = 43) -> None:
        super().__init__(daemon=True)
        self.socks = []
        self.dest: dict[int, tuple[str, int]] = {}
        for port, dest in routes:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", port))
            s.setblocking(False)
            self.socks.append(s)
            self.dest[s.fileno()] = dest
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.passed = self.dropped = 0

    def run(self) -> None:
        out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        while not self.stop.is_set():
            ready, _, _ = select.select(self.socks, [], [], 0.05)
            for s in ready:
                while True:
                    try:
                        data = s.recv(65536)
                    except BlockingIOError:
                        break
                    if self.rng.random() < LOSS:
                        self.dropped += 1
                    else:
                        self.passed += 1
                        out.sendto(data, self.dest[s.fileno()])
        for s in self.socks:
            s.close()
        out.close()


def _bad_lines(n_chunks: int) -> list[bytes]:
    """10,000 lines the PS must refuse, of every kind the probe found."""
    rng = random.Random(7)
    good = ps_only_schedule(n_chunks)
    lines: list[bytes] = []
    bad_schedules = [
        [[-1, 0, 1]] + [list(e) for e in good[1:]],
        [[2**70, 0, 1]] + [list(e) for e in good[1:]],
        [[0, 0, 0]] + [list(e) for e in good[1:]],
        [[0, 0, -5]] + [list(e) for e in good[1:]],
        [[0, 0, True]] + [list(e) for e in good[1:]],
        [list(e) for e in good] + [[0, 0, 1]],
    ]
    while len(lines) < 10_000:
        kind = len(lines) % 8
        if kind == 0:
            raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
            lines.append(raw.replace(b"\n", b"x").strip() or b"x")
        elif kind == 1:
            lines.append(b'{"kind": "members", "removed": [1], "cause": {"w": "\xff\xfe"}}')
        elif kind == 2:
            lines.append(b'{"a":' * 3000)  # deep (the parser's limit is ~1,000)
        elif kind == 3:
            s = bad_schedules[(len(lines) // 8) % len(bad_schedules)]
            lines.append(json.dumps({"kind": "schedules", "from_round": 1,
                                     "schedules": {"0": s}}).encode())
        elif kind == 4:
            lines.append(json.dumps({"kind": "members", "removed": [True]}).encode())
        elif kind == 5:
            lines.append(json.dumps({"kind": "schedules", "from_round": 10**6,
                                     "schedules": {"0": [list(e) for e in good]}}).encode())
        elif kind == 6:
            lines.append(b"[" * 5000)
        else:
            lines.append(b"members 1 please")
    for i in range(0, 10_000, 2500):  # oversized: past the job's line cap, one never ends
        lines[i] = b"7" * (3 << 20)
    return lines


def _flood(path: Path, lines: list[bytes], good: bytes, at: int, tail: bytes) -> None:
    """Write ``lines`` into the FIFO (``good`` after the ``at``-th), then a line that never
    ends (``tail``), as a careless or hostile writer would."""
    fd = os.open(path, os.O_WRONLY)
    try:
        for i, line in enumerate(lines):
            if i == at:
                os.write(fd, good + b"\n")
            view = memoryview(line + b"\n")
            while view:
                view = view[os.write(fd, view):]
        os.write(fd, tail)
    finally:
        os.close(fd)


def test_the_ps_and_workers_survive_a_flood_of_bad_requests_during_a_lossy_run(tmp_path):
    n_workers, rounds = 3, 12
    train = TrainConfig(model="logreg", n_workers=n_workers, rounds=rounds, batch_size=16)
    n_values = Replica(train, 0).params.size
    n_chunks = n_chunks_for(n_values, K)
    ports = free_udp_ports(2 * n_workers + 2)
    ps_real, ps_relay = ("127.0.0.1", ports[0]), ("127.0.0.1", ports[1])
    workers = [("127.0.0.1", p) for p in ports[2:2 + n_workers]]
    to_workers = [("127.0.0.1", p) for p in ports[2 + n_workers:]]
    control = tmp_path / "control.json"
    common = dict(
        job_id=9, mode="ps_only", rounds=rounds, train=train,
        worker_ids=list(range(n_workers)), worker_addrs=workers,
        schedules={str(w): ps_only_schedule(n_chunks) for w in range(n_workers)},
        frac_bits=choose_frac_bits(8.0, n_workers), n_values=n_values,
        out_dir=str(tmp_path), round_timeout_s=60, timeout=0.02, max_timeout=0.2,
        control_file=str(control), start_file=str(tmp_path / "start"))
    # the PS sends RESULTs through the relay; the workers send GRADs through it
    JobConfig(**common, ps_addr=ps_real, result_dests=to_workers).save(tmp_path / "ps.json")
    JobConfig(**common, ps_addr=ps_relay, result_dests=[]).save(tmp_path / "w.json")
    relay = _Relay([(ps_relay[1], ps_real)] + list(zip(ports[2 + n_workers:], workers, strict=True)))
    relay.start()
    err = open(tmp_path / "ps.err", "w")
    ps = subprocess.Popen([sys.executable, "-m", "workers.ina.ps_node", str(tmp_path / "ps.json")],
                          stdout=subprocess.PIPE, stderr=err, text=True)
    procs = [subprocess.Popen([sys.executable, "-m", "workers.ina.worker_node",
                               str(tmp_path / "w.json"), "--worker", str(w)],
                              stdout=subprocess.PIPE, text=True) for w in range(n_workers)]
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(ps.stdout.readline, "")),
                              daemon=True)
    reverse = {str(w): [list(e) for e in reversed(ps_only_schedule(n_chunks))]
               for w in range(n_workers)}
    good = json.dumps({"kind": "schedules", "from_round": 3, "schedules": reverse,
                       "cause": {"test": "flood"}}).encode()
    lines = _bad_lines(n_chunks)
    try:
        assert ps.stdout.readline() == "ps ready\n"
        reader.start()
        for p in procs:
            assert p.stdout.readline().endswith("ready\n")
        t0 = time.monotonic()
        (tmp_path / "start").touch()
        flood = threading.Thread(target=_flood, args=(request_path(control), lines, good,
                                                      2000, b"9" * (4 << 20)))
        flood.start()
        flood.join(timeout=60)
        assert not flood.is_alive()
        codes = [p.wait(timeout=120) for p in procs]
        elapsed = time.monotonic() - t0
        assert ps.poll() is None  # alive, and serving, until the runner stops it
        ps.terminate()
        assert ps.wait(timeout=30) == 0
        reader.join(timeout=10)
    finally:
        for p in [ps, *procs]:
            p.kill()
        relay.stop.set()
        err.close()
    assert codes == [0] * n_workers
    assert relay.dropped > 0.05 * (relay.passed + relay.dropped)  # the run was lossy
    members = [list(range(n_workers))] * rounds
    assert exact_sums_by_round(tmp_path, n_workers, n_values, members) == [True] * rounds
    events = [e for e in map(parse_event, out) if e is not None]
    changes = [e for e in events if isinstance(e, ControlEvent)]
    refused = [e for e in events if isinstance(e, RefusedEvent)]
    # the one valid request among the garbage: taken, and every worker switched there
    assert [(c.version, c.cause) for c in changes] == [(1, {"test": "flood"})]
    start = changes[0].from_round
    assert 3 <= start < rounds
    for w in range(n_workers):
        per_round = json.loads((tmp_path / f"worker{w}.json").read_text())["rounds"]
        assert [r["schedule_version"] for r in per_round] == [0] * start + [1] * (rounds - start)
    assert sum(r["retransmits"] for r in per_round) > 0
    # 10,000 refusals, reported at most 20 a second, each report counting those left out
    logged = [ln for ln in (tmp_path / "ps.err").read_text().splitlines()]
    assert logged and all(ln.startswith("ps: control request refused: ") for ln in logged)
    assert len(refused) == len(logged) <= 20 * (elapsed + 2)
    assert len(refused) + sum(e.unreported for e in refused) <= 10_000 + 1
    assert "Traceback" not in (tmp_path / "ps.err").read_text()
    assert stat.S_IMODE(control.stat().st_mode) == 0o600
    assert json.loads(control.read_text())["version"] == 1
    print(f"flood: {len(lines)} bad lines, {len(refused)} refusals reported, "
          f"{relay.dropped}/{relay.dropped + relay.passed} datagrams dropped, "
          f"{rounds} rounds in {elapsed:.1f} s")
