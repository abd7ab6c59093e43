"""A real model's scaled emulation end to end (docs/models.md): ``run --model resnet50
--scale 100000`` over Mininet on the reduced leaf-spine of tests/test_experiment_e2e.py (PS
h0, workers h1 h2 h3, leaf1 deployed), INA and PS-only.  Every round exact; the gradient is
the scaled ResNet-50's; the results carry the projection, consistent with the measured
rounds by the formula of workers/models/scaling.py."""

from __future__ import annotations

import pytest

from controller.experiment.methods.ina.method import Settings, run_experiment
from workers.ina.constants import K
from workers.ina.wire import FRAME_BYTES
from workers.ina.worker import n_chunks_for

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]


def test_resnet50_scaled_exact_with_projection(tmp_path):
    s = Settings(topo="leafspine:2,1,2", workers="3", budget=1, rounds=2, model="resnet50",
                 scale=100_000, link_gbps=100.0, window=8, modes=("ina", "ps_only"),
                 out=str(tmp_path), name="rn50")
    s.bw = s.workload.emulated_mbps  # as settings_from_args sets it: 1 Mbit/s
    res = run_experiment(s)
    assert res["exact_all_rounds"] is True
    n_values = -(-25_557_032 // 100_000)  # 256
    assert res["modes"]["ina"]["grad_bytes"] == 4 * n_values
    n_chunks = n_chunks_for(n_values, K)
    if res["retransmissions"] == {"ina": 0, "ps_only": 0}:
        assert res["ps_bytes"]["ina"] == n_chunks * FRAME_BYTES
        assert res["ps_bytes"]["ps_only"] == 3 * n_chunks * FRAME_BYTES
    p = res["workload"]
    assert p["model"] == "resnet50" and p["emulated_values"] == n_values
    assert p["emulated_mbps"] == pytest.approx(1.0)
    f = p["time_factor"]
    for mode in ("ina", "ps_only"):
        tau = p["measured_sync_s"][mode]
        assert p["projected_step_s"][mode] == pytest.approx(p["compute_s"] + tau / f)
    assert p["speedup_vs_ps_only"] == pytest.approx(
        p["projected_step_s"]["ps_only"] / p["projected_step_s"]["ina"])
    assert p["speedup_vs_ring"] > 0 and res["accuracy"] is None
