"""The SwitchML worker as processes (workers/switchml/switchml_node.py) over loopback UDP,
through the real ``switchml.p4`` on an in-process pyswitch: a bridge thread takes each
worker's datagram, hands the switch the frame it would see on that worker's port, drops a
seeded 5 % of them, and sends every frame the switch emits to the address it carries.  Four
processes, three rounds: every worker's sum of every round exactly the wrapped int32 sum.
A bad job file is one line and exit 2."""

from __future__ import annotations

import json
import os
import random
import select
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from pyswitch import Switch, compile_p4
from workers.ring.ring_node import seeded_vector
from workers.switchml.job import JobConfig
from workers.switchml.rules import Host, install, job_rules
from workers.switchml.wire import decode_frame, decode_payload, encode_frame

ROOT = Path(__file__).resolve().parents[1]
SWITCH_IP = "127.0.0.1"
SWITCHML_P4 = ROOT / "p4src" / "switchml.p4"


def _free_port() -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _node(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "workers.switchml.switchml_node", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


class Bridge(threading.Thread):
    """The switch between the workers' sockets: worker w (address ``ips[w]``) on port w + 1."""

    def __init__(self, job: JobConfig, ips: list[str], port: int, loss: float) -> None:
        super().__init__(daemon=True)
        self.ips, self.port, self.loss = ips, port, loss
        self.hosts = {w: Host(i + 1, f"02:00:00:00:00:{i + 2:02x}", ip)
                      for i, (w, ip) in enumerate(zip(job.workers, ips, strict=True))}
        self.by_ip = {ip: self.hosts[w] for w, ip in zip(job.workers, ips, strict=True)}
        self.sw = Switch(compile_p4(str(SWITCHML_P4)))
        install(job_rules(job, self.hosts, group=1), self.sw)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((SWITCH_IP, port))
        self.stop = threading.Event()
        self.rng = random.Random(1)
        self.dropped = self.forwarded = 0

    def run(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if not ready:
                continue
            data, (ip, _) = self.sock.recvfrom(65535)
            if self.rng.random() < self.loss:
                self.dropped += 1
                continue
            h = self.by_ip[ip]
            frame = encode_frame(decode_payload(data), h.mac, "02:00:00:00:00:01", ip, SWITCH_IP)
            for _, out in self.sw.process(h.port, frame):
                pkt = decode_frame(out)
                assert pkt is not None
                dst = ".".join(str(b) for b in out[30:34])
                if self.rng.random() < self.loss:
                    self.dropped += 1
                    continue
                self.forwarded += 1
                self.sock.sendto(out[42:], (dst, self.port))


def test_four_processes_through_switchml_p4_exact_under_loss(tmp_path: Path) -> None:
    P, rounds, n, seed = 4, 3, 20 * 32 - 5, 9
    port = _free_port()
    ips = [f"127.0.0.{w + 2}" for w in range(P)]
    job = JobConfig(1, tuple(range(P)), pool_size=8, timeout=0.1)
    bridge = Bridge(job, ips, port, loss=0.05)
    bridge.start()
    doc = {"job": job.to_dict(), "hosts": ips, "switch": SWITCH_IP, "rounds": rounds,
           "n_values": n, "seed": seed, "out_dir": str(tmp_path), "port": port,
           "start_file": str(tmp_path / "start"), "max_round_s": 60}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    procs = [_node(str(path), str(w)) for w in range(P)]
    try:
        assert [p.stdout.readline().strip() for p in procs] == [
            f"switchml {w} ready" for w in range(P)]
        (tmp_path / "start").touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
    finally:
        bridge.stop.set()
        bridge.join(5)
    for r in range(rounds):
        vecs = [seeded_vector(seed, w, r, P, n) for w in range(P)]
        total = np.sum([v.astype(np.int64) for v in vecs], axis=0)
        want = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
        for w in range(P):
            with np.load(tmp_path / f"switchml{w}.npz") as d:
                assert np.array_equal(d["q"][r], vecs[w])
                assert np.array_equal(d["sums"][r], want)
    recs = [json.loads((tmp_path / f"switchml{w}.json").read_text()) for w in range(P)]
    assert [x["round"] for x in recs[0]["rounds"]] == list(range(rounds))
    assert all(x["sent"] == 20 for rec in recs for x in rec["rounds"])  # 20 chunks a round
    assert bridge.dropped > 0 and sum(rec["stats"]["retransmitted"] for rec in recs) > 0
    assert bridge.sw.counter_read("MyIngress.dropped_busy", 0)[0] == 0


@pytest.mark.parametrize("doc, what", [
    ({"hosts": ["127.0.0.1"], "switch": "127.0.0.1", "rounds": 1, "n_values": 4},
     "'job'"),
    ({"job": {"job_id": 1, "workers": [0, 1], "pool_size": 4}, "hosts": ["127.0.0.1"],
      "switch": "127.0.0.1", "rounds": 1, "n_values": 4}, "1 hosts for the job's 2 workers"),
    ({"job": {"job_id": 1, "workers": [0], "pool_size": 0}, "hosts": ["127.0.0.1"],
      "switch": "127.0.0.1", "rounds": 1, "n_values": 4}, "pool_size 0"),
])
def test_bad_job_file(tmp_path: Path, doc: dict, what: str) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    p = _node(str(path), "0")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: switchml_node:") and what in last
