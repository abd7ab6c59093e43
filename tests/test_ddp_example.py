"""examples/ddp_train.py end to end: torchrun with 2 ranks on loopback, INA hook vs gloo.

Skips cleanly without torch.  The PS is :class:`workers.ddp.fake.LoopbackPs` in this process
(the job file written by the example's own ``--write-job --loopback``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workers.ddp.check import check_exact
from workers.ddp.fake import LoopbackPs
from workers.ina.job import JobConfig
from workers.ina.worker import n_chunks_for

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ddp_train.py"
STEPS = 6


def _free_udp_block(n: int) -> int:
    """A port p with p .. p+n free for UDP on 127.0.0.1 (checked, not reserved)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        try:
            socks = []
            for p in range(base + 1, base + 1 + n):
                t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(t)
                t.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free UDP port block")


def _torchrun(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
           str(EXAMPLE), "--eval-every", "3", *args]
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_example_ina_matches_gloo(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    base = _free_udp_block(2)
    job = tmp_path / "job.json"
    out = subprocess.run([sys.executable, str(EXAMPLE), "--write-job", str(job), "--loopback",
                          "2", "--steps", str(STEPS), "--port", str(base),
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    cfg = JobConfig.load(job)
    assert cfg.rounds == STEPS and cfg.extra["method"] == "ddp"
    with LoopbackPs(cfg.job_id, cfg.worker_ids, n_chunks_for(cfg.n_values), cfg.result_dests,
                    port=cfg.ps_addr[1]) as ps:
        ina = _torchrun(["--ina-job", str(job), "--out", str(tmp_path / "ina"), "--record"],
                        tmp_path)
        assert ina.returncode == 0, ina.stderr[-3000:]
        assert ps.state.stats.rounds_completed == STEPS
    gloo = _torchrun(["--steps", str(STEPS), "--out", str(tmp_path / "gloo")], tmp_path)
    assert gloo.returncode == 0, gloo.stderr[-3000:]
    assert f"step {STEPS}/{STEPS}" in ina.stdout and "final accuracy" in gloo.stdout
    exact = check_exact([tmp_path / "ina" / f"rank{r}.npz" for r in range(2)])
    assert exact["exact"] and exact["steps"] == STEPS, exact
    rep = {m: json.loads((tmp_path / m / "rank0.json").read_text()) for m in ("ina", "gloo")}
    assert rep["ina"]["mode"] == "ps_only" and rep["gloo"]["mode"] == "gloo"
    # quantization error (2^-26 per value) barely moves a few steps of training
    li = [s["loss"] for s in rep["ina"]["steps"]]
    lg = [s["loss"] for s in rep["gloo"]["steps"]]
    assert np.allclose(li, lg, rtol=1e-4, atol=1e-5)
    assert abs(rep["ina"]["final_accuracy"] - rep["gloo"]["final_accuracy"]) <= 0.01
