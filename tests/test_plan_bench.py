"""The planner benches' side-by-side forms (issue 41) in their smoke sizes: the previous
planner and today's on the same inputs, with the same answers (tests/test_bench_smoke.py runs
their plain smoke forms)."""

from __future__ import annotations

from test_bench_smoke import _run


def test_joint_greedy_sweep_smoke_new_against_previous() -> None:
    out = _run("bench/plan_jobs_lp.py", "--smoke", "--greedy", "2")
    assert "new:" in out and "previous:" in out and "cold:" in out
    assert "every budget: same S, every γ within 1e-6" in out


def test_plan_scaling_smoke_previous_and_baselines() -> None:
    out = _run("bench/plan_scaling.py", "--smoke", "--previous", "--baselines")
    assert "k=4 M=4 previous:" in out and "same: True" in out
    assert "k=4 M=4 baselines:" in out and "above the greedy" not in out
