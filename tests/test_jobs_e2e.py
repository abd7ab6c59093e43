"""Several jobs at once, end to end in Mininet (docs/design.md §3.10), reduced: leaf-spine with
2 leaves of 5 hosts, ``--jobs 3`` (job1: PS h0, workers h3 h6 h9; job2: PS h1, workers h4 h7;
job3: PS h2, workers h5 h8), budget 1, 1 Mbit/s, a pool of 8 slots shared by all jobs (so
that their chunks collide), 5 rounds.  Faults: job1's worker h3 is killed after round 1
(``--on-worker-failure stop``), job2's PS after round 1 (``--kill-ps``).  Each of those jobs
stops alone with one line; job3 runs every round with exact sums, through collisions.
"""

from __future__ import annotations

import json

import pytest

from controller.experiment.methods.ina.method import Settings, run_experiment
from workers.ina.constants import SLOTS_ENV

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]

ROUNDS = 12  # rounds outlast the 50 ms poll, so a stopped job has rounds left (timers are fast now)


def test_one_job_losing_a_worker_and_one_losing_its_ps_leave_the_third_exact(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv(SLOTS_ENV, "8")
    res = run_experiment(Settings(
        topo="leafspine:2,1,5", jobs="3", budget=1, rounds=ROUNDS, model="logreg", bw=1.0,
        window=8, modes=("ina",), no_alone=True, kill_worker="h3@1", kill_ps="h1@1",
        out=str(tmp_path), name="jobs"))
    jobs = res["jobs"]
    assert [jobs[j]["ps"] for j in ("job1", "job2", "job3")] == ["h0", "h1", "h2"]
    assert jobs["job1"]["stopped"]["ina"].startswith("job1: worker h3 died (exit code -9)")
    assert jobs["job2"]["stopped"]["ina"].startswith("job2: its PS on h1 exited")
    # the stopped jobs keep the rounds their survivors finished, each exact
    assert 1 <= jobs["job1"]["rounds_completed"]["ina"] < ROUNDS
    assert all(r["exact"] for r in res["modes"]["job1/ina"]["rounds"])
    j3 = jobs["job3"]
    assert j3["stopped"] == {} and j3["rounds_completed"] == {"ina": ROUNDS}
    assert j3["exact_all_rounds"] is True
    assert j3["collisions"]["ina"] > 0  # 3 jobs over 8 slots: fallbacks reached its PS
    assert j3["accuracy"]["final"] == j3["accuracy"]["reference"]
    assert j3["gamma"]["measured"] > 0 and res["fairness"] is not None
    # each job has its own job ids and folder
    assert {jobs[j]["job_ids"]["ina"] for j in jobs} == {1, 5, 9}
    saved = json.loads((tmp_path / "jobs" / "results.json").read_text())
    assert saved["complete"] is True and set(saved["jobs"]) == {"job1", "job2", "job3"}
    assert (tmp_path / "jobs" / "ina" / "job3" / "ps.json").exists()
