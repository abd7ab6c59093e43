"""The ring all-reduce as processes (workers/ring/ring_node.py): four positions over UDP on
loopback, three rounds, every position's sum of every round exactly the wrapped int32 sum of
the four vectors; a bad job file is one line and exit 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from workers.ring.ring_node import seeded_vector

ROOT = Path(__file__).resolve().parents[1]


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _node(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "workers.ring.ring_node", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_four_processes_exact(tmp_path: Path) -> None:
    P, rounds, n = 4, 3, 1000
    job = {"job": 1, "hosts": [["127.0.0.1", p] for p in _free_ports(P)], "rounds": rounds,
           "n_values": n, "seed": 7, "window": 8, "timeout": 0.2, "max_timeout": 0.5,
           "out_dir": str(tmp_path)}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    procs = [_node(str(path), str(r)) for r in range(P)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    for r in range(rounds):
        vecs = [seeded_vector(7, w, r, P, n) for w in range(P)]
        total = np.sum([v.astype(np.int64) for v in vecs], axis=0)
        want = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
        for w in range(P):
            with np.load(tmp_path / f"ring{w}.npz") as d:
                assert np.array_equal(d["q"][r], vecs[w])
                assert np.array_equal(d["sums"][r], want)
    rec = json.loads((tmp_path / "ring0.json").read_text())
    assert [x["round"] for x in rec["rounds"]] == list(range(rounds))
    assert rec["rounds"][0]["data_sent"] > 0 and rec["malformed"] == 0


def test_start_file_barrier_and_the_suites_vectors(tmp_path: Path) -> None:
    """With ``start_file`` every position says ready and waits for it (nothing is written
    before); with ``first`` and ``n_workers`` a position draws worker first + rank's vector
    among n_workers (the suite's draw for a second job's ring); the sums are exact."""
    import time

    P, rounds, n, first, n_all = 3, 2, 300, 3, 6
    start = tmp_path / "start"
    job = {"job": 2, "hosts": [["127.0.0.1", p] for p in _free_ports(P)], "rounds": rounds,
           "n_values": n, "seed": 5, "window": 4, "timeout": 0.2, "max_timeout": 0.4,
           "out_dir": str(tmp_path), "start_file": str(start), "first": first,
           "n_workers": n_all}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    procs = [_node(str(path), str(r)) for r in range(P)]
    assert [p.stdout.readline().strip() for p in procs] == [f"ring {r} ready" for r in range(P)]
    time.sleep(0.5)
    assert all(p.poll() is None for p in procs) and not list(tmp_path.glob("ring*.npz"))
    start.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    for r in range(rounds):
        vecs = [seeded_vector(5, first + w, r, n_all, n) for w in range(P)]
        want = np.sum([v.astype(np.int64) for v in vecs], axis=0).astype(np.int32)
        for w in range(P):
            with np.load(tmp_path / f"ring{w}.npz") as d:
                assert np.array_equal(d["q"][r], vecs[w]) and np.array_equal(d["sums"][r], want)


def test_bad_job_file(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"job": 1, "hosts": [], "rounds": 1, "n_values": 4}))
    p = _node(str(path), "0")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: ring_node:")
    path.write_text(json.dumps({"job": 1, "hosts": [["127.0.0.1", 1], ["127.0.0.1", 2]],
                                "rounds": 1, "n_values": 4, "first": 1, "n_workers": 2}))
    p = _node(str(path), "0")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "cannot hold workers 1..2" in err.strip().splitlines()[-1]
