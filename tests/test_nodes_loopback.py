"""PS and worker processes over loopback UDP (no switch): exact sums, real training."""

import json
import subprocess
import sys

import numpy as np
from netns import free_udp_ports

from workers.common.model import Replica, TrainConfig
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import K
from workers.ina.job import JobConfig
from workers.ina.worker import n_chunks_for, ps_only_schedule


def test_ps_only_over_loopback_gives_exact_sums(tmp_path):
    n_workers, rounds = 3, 3
    train = TrainConfig(model="logreg", n_workers=n_workers, rounds=rounds, batch_size=16)
    n_values = Replica(train, 0).params.size
    ports = free_udp_ports(n_workers + 1)
    workers = [("127.0.0.1", p) for p in ports[1:]]
    cfg = JobConfig(
        job_id=7, mode="ps_only", rounds=rounds, train=train, worker_ids=[0, 1, 2],
        worker_addrs=workers, ps_addr=("127.0.0.1", ports[0]), result_dests=workers,
        schedules={str(w): ps_only_schedule(n_chunks_for(n_values, K)) for w in range(3)},
        frac_bits=choose_frac_bits(8.0, n_workers), n_values=n_values, out_dir=str(tmp_path),
        round_timeout_s=30,
    )
    job = tmp_path / "job.json"
    cfg.save(job)
    ps = subprocess.Popen([sys.executable, "-m", "workers.ina.ps_node", str(job)])
    procs = [subprocess.Popen([sys.executable, "-m", "workers.ina.worker_node", str(job),
                               "--worker", str(w)]) for w in range(n_workers)]
    try:
        assert [p.wait(timeout=60) for p in procs] == [0] * n_workers
        ps.terminate()  # as the runner does once every worker is done
        assert ps.wait(timeout=30) == 0
    finally:
        for p in [ps, *procs]:
            p.kill()
    data = [np.load(tmp_path / f"worker{w}.npz") for w in range(n_workers)]
    exact = np.sum([d["q"].astype(np.int64) for d in data], axis=0)
    assert np.abs(exact).max() < 2**31  # quantization made overflow impossible
    for d in data:
        np.testing.assert_array_equal(d["sums"], exact.astype(np.int32))
    report = json.loads((tmp_path / "ps.json").read_text())
    assert report["rounds_completed"] == rounds
    # PS-only: every worker's every chunk arrives raw at the PS
    assert report["stats"]["grads"] >= n_workers * rounds * n_chunks_for(n_values, K)
    accs = [json.loads((tmp_path / f"worker{w}.json").read_text())["rounds"][-1]["accuracy"]
            for w in range(n_workers)]
    assert len(set(accs)) == 1  # replicas stayed identical
