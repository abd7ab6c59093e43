"""A worker killed mid-run, end to end in Mininet (docs/design.md §9, issue 20 item 2), reduced:
leaf-spine with 2 leaves, PS h0 and h1 on leaf0, h2 and h3 on leaf1 (deployed), 8 rounds at
1 Mbit/s (so that a round outlasts the controller's 50 ms poll).
``--kill-worker h3@1`` SIGKILLs h3's worker process once it finished round 1.

* ``stop``: one line naming h3, its exit code and round; the finished rounds are in
  results.json (``complete: false``) with the event, all exact.
* ``continue``: the PS takes h3 out from the round it has not completed, the switches lose
  its membership (rule differences only), the survivors get new schedules, and every round
  is exact over its members: all three before, h1 and h2 from the change on.
"""

from __future__ import annotations

import json

import pytest

from controller.errors import ExperimentError
from controller.experiment.methods.ina.method import Settings, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]

ROUNDS = 8
BASE = dict(topo="leafspine:2,1,2", workers="3", budget=1, rounds=ROUNDS, model="logreg",
            bw=1.0, window=8, kill_worker="h3@1")


def test_killed_worker_with_stop_ends_the_job_naming_it(tmp_path):
    with pytest.raises(ExperimentError,
                       match=r"^worker h3 died \(exit code -9\) in round \d+; the job stops$"):
        run_experiment(Settings(**BASE, modes=("ina",), on_worker_failure="stop",
                                out=str(tmp_path), name="stop"))
    saved = json.loads((tmp_path / "stop" / "results.json").read_text())
    assert saved["complete"] is False
    ina = saved["modes"]["ina"]
    assert "h3 died" in ina["stopped"]
    (ev,) = ina["worker_failure"]
    assert (ev["worker"], ev["cause"], ev["exit_code"], ev["policy"]) == ("h3", "exit", -9,
                                                                         "stop")
    assert ev["round_effective"] is None and ev["detected_s"] < 1.0
    # the rounds every survivor finished are kept, each exact over all three workers
    n = len(ina["rounds"])
    assert 2 <= ev["round_noticed"] <= n <= ev["round_noticed"] + 1 < ROUNDS
    assert all(r["exact"] for r in ina["rounds"])
    assert ev["exact_before"] is True


def test_killed_worker_with_continue_trains_on_with_exact_survivor_sums(tmp_path):
    res = run_experiment(Settings(**BASE, modes=("ina", "ps_only"),
                                  on_worker_failure="continue", out=str(tmp_path),
                                  name="continue"))
    assert res["exact_all_rounds"] is True
    events = res["worker_failure"]
    assert [(e["worker"], e["job_mode"], e["mode"]) for e in events] == [
        ("h3", "ina", "continue"), ("h3", "ps_only", "continue")]
    for e in events:
        mode = res["modes"][e["job_mode"]]
        rounds = mode["rounds"]
        assert len(rounds) == ROUNDS  # the run completed
        start = e["round_effective"]
        assert 2 <= e["round_noticed"] <= start <= e["round_noticed"] + 1 < ROUNDS
        assert e["detected_s"] < 1.0
        assert [r["members"] for r in rounds] == (
            [["h1", "h2", "h3"]] * start + [["h1", "h2"]] * (ROUNDS - start))
        assert all(r["exact"] for r in rounds)  # over each round's members
        assert e["exact_before"] is True and e["exact_after"] is True
        assert e["accuracy_after"] == rounds[-1]["accuracy"] > 0.5
    # INA: the switches lost h3 from job 1 by rule differences (mask, membership, tree)
    assert events[0]["writes"] > 0
    # the PS's control record: one member change, with the survivors' schedules
    members = json.loads((tmp_path / "continue" / "ina" / "control.json").read_text())["changes"]
    assert [m["members"] for m in members] == [[0, 1]] and set(members[0]["schedules"]) == {
        "0", "1"}
