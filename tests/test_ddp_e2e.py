"""``run --method ddp`` end to end (reduced): Mininet, pyswitch, P4Runtime deploy, torchrun.

Leaf-spine with 2 leaves and 2 hosts each: PS h0 on leaf0, ranks h1 (leaf0) and h2 (leaf1),
budget 1; 4 training steps of examples/ddp_train.py in each mode (ina, ps_only, gloo with one
seed).  Checked from the run's own measurements: every step's bucket sums are exact in both
hook modes, the PS receives fewer bytes with INA than PS-only (one aggregated frame per chunk
instead of one per rank), and results.json has the keys docs/ddp.md promises.  Skips without
torch.
"""

from __future__ import annotations

import json

import pytest

from controller.cli.main import main
from workers.ina.wire import FRAME_BYTES

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]

STEPS = 4


def test_ddp_two_ranks_ina_ps_only_gloo(tmp_path):
    pytest.importorskip("torch")
    code = main(["run", "--method", "ddp", "--topo", "leafspine:2,1,2", "--ps", "h0",
                 "--workers", "2", "--budget", "1", "--rounds", str(STEPS), "--bw", "0",
                 "--ddp-gloo-seeds", "1", "--out", str(tmp_path), "--name", "ddp"])
    assert code == 0
    res = json.loads((tmp_path / "ddp" / "results.json").read_text())
    assert res["complete"] is True and res["method"] == "ddp"
    modes = res["modes"]
    assert set(modes) == {"ina", "ps_only", "gloo"}
    for name, m in modes.items():
        assert {"exact_all_rounds", "time_per_step_s", "ps_bytes_per_step",
                "rank0_bytes_per_step", "accuracy"} <= set(m)
        assert m["steps"] == STEPS and len(m["rounds"]) == STEPS
        assert 0.0 <= m["accuracy"]["final"] <= 1.0 and m["accuracy"]["vs_steps"]
        assert m["time_per_step_s"] > 0 and m["rank0_bytes_per_step"] > 0
        assert name in res["provenance"]["cpu"]
    for name in ("ina", "ps_only"):  # exact sums in every step, every bucket checked
        m = modes[name]
        assert m["exact_all_rounds"] is True
        assert all(r["exact"] for r in m["rounds"])
        assert m["exact"]["steps"] == STEPS and m["exact"]["mismatches"] == []
    assert modes["gloo"]["exact_all_rounds"] is None
    assert modes["gloo"]["ps_bytes_per_step"] is None
    capacity = res["settings"]["capacity"]
    ina, ps_only = modes["ina"]["ps_bytes_per_step"], modes["ps_only"]["ps_bytes_per_step"]
    assert ina < ps_only
    # no loss: the PS's ToR aggregates both ranks, so one frame per chunk reaches the PS with
    # INA and one per rank without (retransmissions would only add)
    if modes["ina"]["retransmissions"] == 0 and modes["ps_only"]["retransmissions"] == 0:
        assert ina == capacity * FRAME_BYTES
        assert ps_only == 2 * capacity * FRAME_BYTES
    assert res["accuracy"]["gloo_band"]["n"] == 1
    assert (tmp_path / "ddp" / "accuracy.png").stat().st_size > 0
