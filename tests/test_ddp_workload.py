"""workers/ddp/workload.py end to end on loopback: a real model's scaled gradient through
PyTorch DDP with 2 ranks and the INA hook (PS-only, :class:`workers.ddp.fake.LoopbackPs`;
gloo runs in the Mininet test).  Checks exactness, and that DDP's own buckets -- from the second step on, after it
rebuilt them -- are the ones :func:`workers.models.buckets.ddp_buckets` computes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workers.common.quantize import choose_frac_bits
from workers.ddp.check import check_exact
from workers.ddp.fake import LoopbackPs
from workers.ddp.job import loopback_job
from workers.ddp.workload import capacity
from workers.ina.worker import n_chunks_for
from workers.models.buckets import BUCKET_CAP_BYTES, FIRST_BUCKET_BYTES, ddp_buckets
from workers.models.scaling import scale_workload
from workers.models.synthetic import synthetic_gradient

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "workers" / "ddp" / "workload.py"
STEPS = 3
MODEL, SCALE = "resnet50", 10_000


def _free_udp_block(n: int) -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        socks = []
        try:
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
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
           str(SCRIPT), "--model", MODEL, "--scale", str(SCALE), "--compute-s", "0.01", *args]
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_workload_through_ddp(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    cap, n_values = capacity(MODEL, SCALE)
    sw = scale_workload(MODEL, SCALE, compute_s=0.0)
    assert n_values == sw.n_values == 2556
    base = _free_udp_block(2)
    cfg = loopback_job(n_ranks=2, steps=STEPS, capacity=cap, frac_bits=choose_frac_bits(8.0, 2),
                       out_dir=str(tmp_path), base_port=base)
    job = tmp_path / "job.json"
    cfg.save(job)
    with LoopbackPs(cfg.job_id, cfg.worker_ids, n_chunks_for(cfg.n_values), cfg.result_dests,
                    port=cfg.ps_addr[1]) as ps:
        ina = _torchrun(["--ina-job", str(job), "--out", str(tmp_path / "ina"), "--record"],
                        tmp_path)
        assert ina.returncode == 0, ina.stderr[-3000:]
        assert ps.state.stats.rounds_completed == STEPS
    assert f"step {STEPS}/{STEPS}" in ina.stdout
    files = [tmp_path / "ina" / f"rank{r}.npz" for r in range(2)]
    exact = check_exact(files)
    assert exact["exact"] and exact["steps"] == STEPS, exact
    with np.load(files[0]) as d:
        sizes = {k: d[k].size for k in d.files if k.endswith("_q")}
    # step 0: DDP's initial buckets, built in registration order with the same limits and
    # reversed; from step 1 on the rebuilt ones, in gradient-ready order: ours
    first = ddp_buckets(sw.numels, first_bytes=FIRST_BUCKET_BYTES / SCALE,
                        cap_bytes=BUCKET_CAP_BYTES / SCALE, ready_order=range(len(sw.numels)))
    assert [sizes[f"s0_b{i}_q"] for i in range(len(first))] == \
        [sum(sw.numels[i] for i in b) for b in reversed(first)]
    ours = [sum(sw.numels[i] for i in b) for b in sw.buckets()]
    for step in range(1, STEPS):
        got = [sizes[f"s{step}_b{i}_q"] for i in range(len(ours))]
        assert got == ours and f"s{step}_b{len(ours)}_q" not in sizes
    # the sum is the two ranks' synthetic gradients (quantized), in bucket order
    with np.load(files[1]) as d:
        q0 = np.concatenate([d[f"s1_b{i}_q"] for i in range(len(ours))])
    g1 = synthetic_gradient(2556, 0, 1, 1)
    order = [i for b in sw.buckets() for i in b]
    cuts = np.cumsum(sw.numels)[:-1]
    g_bucketed = np.concatenate([np.split(g1, cuts)[i] for i in order])
    assert np.allclose(q0 / 2.0 ** cfg.frac_bits, g_bucketed, atol=2.0 ** -cfg.frac_bits)
    rep = json.loads((tmp_path / "ina" / "rank0.json").read_text())
    assert rep["mode"] == "ps_only" and len(rep["steps"]) == STEPS and rep["values"] == 2556
