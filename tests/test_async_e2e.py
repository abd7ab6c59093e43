"""The asynchronous PS as a method of the testbed (docs/design.md §5), end to end.

* pure helpers of ``controller.experiment.methods.async_ps`` on hand-made logs;
* the PS and worker processes over TCP on the loopback (no root), soft sync C = 2;
* a reduced ``run --method async`` over Mininet (root): leaf-spine, PS h0, workers h1, h2 and
  a 4x slower h3, all three policies.  Checked from the run's own logs: the push budget, the
  clock, that the slow worker really is staler, and that every applied scale is the policy's
  (eta, eta/sigma, eta/kappa with kappa recomputed from the worker's own staleness sequence).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from controller.cli.main import main as cli_main
from controller.errors import ExperimentError
from controller.experiment.methods.async_ps.method import (
    aggregate,
    expected_duration,
    parse_policies,
    parse_slow,
    ps_link_seconds,
    staleness_histogram,
    summarize_run,
)
from workers.async_ps.core import staleness_context
from workers.async_ps.job import AsyncJob
from workers.common.model import TrainConfig

ROOT = Path(__file__).resolve().parent.parent
LEARNERS = ["h1", "h2", "h3", "h4"]


def test_parse_slow_forms_and_errors():
    assert parse_slow("2x4", LEARNERS) == [1, 1, 4, 4]
    assert parse_slow("h1:2.5,h4:4", LEARNERS) == [2.5, 1, 1, 4]
    assert parse_slow("", LEARNERS) == [1, 1, 1, 1]
    for spec, msg in (("5x4", "only 4 learners"), ("h9:2", "h9 is not a learner"),
                      ("h1:0.5", "factors must be >= 1"), ("h1:fast", "'fast' is not a number"),
                      ("h1", "expected KxFACTOR")):
        with pytest.raises(ExperimentError, match=msg):
            parse_slow(spec, LEARNERS)


def test_parse_policies():
    assert parse_policies("kappa, async") == ("kappa", "async")
    with pytest.raises(ExperimentError, match="unknown policy 'eta'"):
        parse_policies("async,eta")
    with pytest.raises(ExperimentError, match="twice"):
        parse_policies("sigma,sigma")


def test_expected_duration_is_budget_over_the_summed_rates():
    # 6 learners at 20 pushes/s and 2 at 5 pushes/s: 130 pushes/s
    assert expected_duration(1300, 0.05, [1] * 6 + [4] * 2) == pytest.approx(10.0)
    # full duplex: each direction carries 1000 pushes x 1000 values x 4 B = 4 MB; 8 Mbit/s = 1 MB/s
    assert ps_link_seconds(1000, 1000, 8.0) == pytest.approx(4.0)
    assert ps_link_seconds(1000, 1000, None) == 0.0


def test_summarize_run_on_hand_made_logs():
    t0 = 1000.0
    ps = {"accepted": 4, "updates": 4, "pushes": [
        {"sigma": s} for s in (1, 2, 1, 3)], "evaluations": [
        {"time": t0, "t_ps": 0, "pushes": 0, "accuracy": 0.1, "loss": 2.0},
        {"time": t0 + 1, "t_ps": 2, "pushes": 2, "accuracy": 0.85, "loss": 0.5},
        {"time": t0 + 2, "t_ps": 4, "pushes": 4, "accuracy": 0.91, "loss": 0.3}]}
    learners = [
        {"worker": 0, "slowdown": 1.0, "pushes": [
            {"time": t0 + 0.5, "loss": 1.0, "sigma": 1, "kappa": 1.0, "rtt": 0.002},
            {"time": t0 + 1.5, "loss": 0.4, "sigma": 1, "kappa": 1.0, "rtt": 0.004}]},
        {"worker": 1, "slowdown": 4.0, "pushes": [
            {"time": t0 + 0.9, "loss": 0.8, "sigma": 2, "kappa": 2.0, "rtt": 0.003},
            {"time": t0 + 1.9, "loss": 0.2, "sigma": 3, "kappa": 2.5, "rtt": 0.003}]}]
    s = summarize_run(ps, learners, t0, target_acc=0.9)
    assert s["final_accuracy"] == 0.91 and s["duration_s"] == 2.0
    assert (s["time_to_target_s"], s["updates_to_target"]) == (2.0, 4)
    assert s["staleness_histogram"] == {"1": 2, "2": 1, "3": 1}
    # last quarter of 4 losses in time order (1.0, 0.8, 0.4, 0.2) is at least 2 values
    assert s["train_loss_variance_last"] == pytest.approx(np.var([0.4, 0.2]))
    assert s["test_loss_variance_last"] == pytest.approx(np.var([0.5, 0.3]))
    slow = s["learners"][1]
    assert slow["mean_sigma"] == 2.5 and slow["max_sigma"] == 3 and slow["mean_kappa"] == 2.25
    assert slow["mean_rtt_ms"] == pytest.approx(3.0)
    assert summarize_run(ps, learners, t0, target_acc=0.95)["time_to_target_s"] is None
    agg = aggregate([s, {**s, "final_accuracy": 0.81, "time_to_target_s": None}])
    assert agg["final_accuracy"]["mean"] == pytest.approx(0.86)
    assert agg["final_accuracy"]["std"] == pytest.approx(0.05)
    assert agg["time_to_target_s"] == {"mean": 2.0, "std": 0.0, "n": 1, "of": 2}
    assert staleness_histogram([]) == {}


def test_cli_mistakes_are_one_line(tmp_path, capsys):
    for extra, msg in ((["--policies", "fast"], "unknown policy 'fast'"),
                       (["--soft-sync", "0"], "--soft-sync must be >= 1"),
                       (["--async-slow", "h7:4"], "h7 is not a learner"),
                       (["--workers", "h1,h99"], "h99 is not a host")):
        code = cli_main(["run", "--method", "async", "--topo", "leafspine:2,1,2", "--workers",
                         "3", "--out", str(tmp_path), *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and msg in err, err
        assert err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def _check_run(out: Path, job: AsyncJob, n: int) -> tuple[dict, list[dict]]:
    """What every run must satisfy, from the files its processes wrote."""
    ps = json.loads((out / "ps.json").read_text())
    reps = [json.loads((out / f"worker{i}.json").read_text()) for i in range(n)]
    assert ps["accepted"] == job.budget and ps["updates"] == job.budget // job.soft_sync
    # every accepted push was answered to exactly one worker
    assert sum(len(r["pushes"]) for r in reps) == job.budget
    clocks = [p["t_ps"] for p in ps["pushes"]]
    assert clocks == [(k + 1) // job.soft_sync for k in range(job.budget)]
    for r in reps:
        sig = [p["sigma"] for p in r["pushes"]]
        assert r["staleness"] == sig and all(s >= 1 for s in sig)
        for k, p in enumerate(r["pushes"]):
            prev = sig[max(0, k - job.window + 1):k]
            assert p["kappa"] == pytest.approx(staleness_context(sig[k], prev))
    lr = job.lr
    for rec in ps["pushes"]:
        want = {"async": lr, "sigma": lr / rec["sigma"], "kappa": lr / rec["kappa"]}
        assert rec["scale"] == pytest.approx(want[job.policy])
    return ps, reps


def test_processes_over_loopback_tcp_with_soft_sync(tmp_path):
    """PS and 3 worker processes on 127.0.0.1: C = 2, window N = 3, worker 2 is 3x slower."""
    n = 3
    job = AsyncJob(policy="kappa", train=TrainConfig(model="logreg", n_workers=n, seed=1),
                   n_workers=n, budget=30, lr=0.3, soft_sync=2, window=3,
                   ps_addr=("127.0.0.1", 50000 + os.getpid() % 10000),
                   slowdown=[1.0, 1.0, 3.0], step_s=0.01, jitter=0.0, eval_every=5,
                   out_dir=str(tmp_path), start_file=str(tmp_path / "start"), timeout_s=60)
    job.save(tmp_path / "job.json")
    py = [sys.executable, "-m"]
    ps = subprocess.Popen([*py, "workers.async_ps.ps_node", str(tmp_path / "job.json")], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True)
    procs = []
    try:
        assert ps.stdout.readline().strip() == "ps ready"
        procs = [subprocess.Popen([*py, "workers.async_ps.worker_node", str(tmp_path / "job.json"),
                                   "--worker", str(i)], cwd=ROOT, stdout=subprocess.PIPE,
                                  text=True) for i in range(n)]
        for p in procs:  # the start barrier: nobody pushes before everybody joined
            assert p.stdout.readline().strip().endswith("ready")
        (tmp_path / "start").touch()
        assert [p.wait(timeout=60) for p in procs] == [0] * n
        assert ps.wait(timeout=30) == 0
    finally:
        for p in [ps, *procs]:
            if p.poll() is None:
                p.kill()
    ps_rep, reps = _check_run(tmp_path, job, n)
    assert [e["t_ps"] for e in ps_rep["evaluations"]] == [0, 5, 10, 15]
    assert ps_rep["evaluations"][-1]["accuracy"] > ps_rep["evaluations"][0]["accuracy"] + 0.2
    assert len(reps[2]["pushes"]) < min(len(reps[0]["pushes"]), len(reps[1]["pushes"]))


@pytest.mark.root
@pytest.mark.mininet
@pytest.mark.slow
def test_reduced_async_experiment_over_mininet(tmp_path):
    code = cli_main(["run", "--method", "async", "--topo", "leafspine:2,1,2", "--ps", "h0",
                     "--workers", "3", "--rounds", "20", "--model", "logreg", "--bw", "0",
                     "--async-slow", "h3:4", "--async-step-ms", "20", "--async-lr", "0.3",
                     "--async-eval-every", "5", "--staleness-window", "3",
                     "--out", str(tmp_path), "--name", "reduced"])
    assert code == 0
    out = tmp_path / "reduced"
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "async" and list(res["policies"]) == ["async", "sigma", "kappa"]
    for policy, d in res["policies"].items():
        (run,) = d["runs"]
        job = AsyncJob.load(out / f"{policy}-seed0" / "job.json")
        assert (job.budget, job.window, job.slowdown) == (60, 3, [1.0, 1.0, 4.0])
        _check_run(out / f"{policy}-seed0", job, 3)
        fast = [ln["mean_sigma"] for ln in run["learners"][:2]]
        slow = run["learners"][2]
        # the 4x slower learner computes on parameters several updates old
        assert slow["mean_sigma"] > 2 * max(fast), run["learners"]
        assert slow["pushes"] < min(ln["pushes"] for ln in run["learners"][:2])
        assert run["curve"][0]["accuracy"] < 0.2 and run["final_accuracy"] > 0.6
        assert run["ps_link_bytes"] > 60 * 2 * 650 * 4  # 60 gradients in, 60 models out
    for png in ("accuracy_vs_time.png", "accuracy_vs_updates.png", "staleness_histograms.png"):
        assert (out / png).stat().st_size > 0
