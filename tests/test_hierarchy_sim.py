"""A hierarchical job (docs/protocol.md §5.1) in the simulated network, under the fault
campaign's faults: fat-tree k=8, PS h0, 70 workers (more than the bitmap's 64, so every
switch counts its children), budget 2 (agg4, agg5 under the root edge0), rounds of 10
chunks, every sum checked against the one computed by hand -- duplication, reordering and a
small slot pool each on its own as ``python -m controller simulate`` runs them, a killed
switch (the tree re-assigned), and ``campaign --network simulated`` with loss 5 % and a
kill (docs/simulate.md, "A hierarchical job under the campaign's faults")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from controller.experiment.methods.ina.core import Settings
from controller.experiment.simulate.run import SimOptions, simulate
from workers.ina import constants as C

pytestmark = pytest.mark.slow  # a k=8 network of 70 workers per test: 1-2 min each on 2 cores

N, N_VALUES, ROUNDS = 70, 310, 2


def gradient(w: int, r: int) -> np.ndarray:
    v = np.array([(w + 1) * (i + 1) * (r + 1) for i in range(N_VALUES)], dtype=np.int64)
    v[0] = 2**31 - 1 - w
    return v.astype(np.int32)


def hand_sum(r: int) -> np.ndarray:
    return np.sum([gradient(w, r).astype(np.int64) for w in range(N)], axis=0).astype(
        np.int64).astype(np.uint32).astype(np.int32)


def _run(tmp_path: Path, name: str, rounds: int = ROUNDS, **kw: object) -> dict:
    s = Settings(topo="fattree:8", workers=str(N), budget=2, hidden=4, rounds=rounds,
                 modes=("ina",), **kw)  # type: ignore[arg-type]
    sums: dict = {}
    doc, _ = simulate(s, SimOptions(reference=False), tmp_path / name, name,
                      gradient_of=gradient, sums=sums)
    for r in range(rounds):
        assert len(sums["ina"][r]) == N
        for got in sums["ina"][r]:
            assert np.array_equal(got, hand_sum(r))
    assert doc["exact_all_rounds"]
    return doc


@pytest.mark.parametrize("fault", [{"dup": 0.1}, {"reorder": 0.1}])
def test_a_70_worker_job_is_exact_under_each_fault(fault: dict, tmp_path: Path) -> None:
    doc = _run(tmp_path, "f", **fault)
    rec = doc["modes"]["ina"]
    assert rec["sim"]["impairment"]["dropped" if "loss" in fault else
                                     "duplicated" if "dup" in fault else "reordered"] > 0


def test_a_small_slot_pool_collides_and_stays_exact(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(C.SLOTS_ENV, "4")
    doc = _run(tmp_path, "slots")
    assert doc["modes"]["ina"]["collisions"] > 0


def test_a_killed_switch_re_assigns_the_tree_and_every_round_stays_exact(
        tmp_path: Path) -> None:
    """The greedy's budget 2 is agg4 and agg5 (pod 1's 16 workers, 8 each, under the
    root edge0); agg4 dies after round 0: its workers go to agg5 or past it, the PS reads
    rounds 2 and 3 with the new tree, and no index the old tree had is reused."""
    from workers.ina.control import ControlRecord
    from workers.ina.job import JobConfig
    from workers.ina.tree import Tree

    doc = _run(tmp_path, "kill", rounds=4, fail_switch="agg4@0")
    (ev,) = doc["failover"]
    assert ev["switch"] == "agg4" and "agg4" not in ev["deployed_after"]
    old = JobConfig.load(tmp_path / "kill" / "ina" / "job.json").aggregation_tree()
    rec = ControlRecord.from_json(__import__("json").loads(
        (tmp_path / "kill" / "ina" / "control.json").read_text()))
    (change,) = rec.changes
    assert change.kind == "schedules" and change.from_round == 2 and change.tree is not None
    new = Tree.from_json(change.tree)
    assert old is not None and new.workers_below(new.root) | sum(
        1 << w for w, f in new.first.items() if f == 0) == (1 << N) - 1
    ids = {n: i for i, n in old.names.items()}
    moved = [w for w, f in old.first.items() if f == ids["agg4"]]
    assert len(moved) == 8 and all(new.first[w] != ids["agg4"] for w in moved)
    for s, kids in new.children.items():  # survivors keep their index, nothing reused
        before = old.children.get(s, [])
        for i, c in enumerate(kids):
            if i < len(before) and before[i] is not None:
                assert c in (before[i], None)
            elif i < len(before):
                assert c is None
    # the schedules of the moved workers name their new first point
    for w in moved:
        assert {a for _, a, _ in change.schedules[str(w)]} == {new.first[w]}


def test_the_campaign_runs_in_the_simulated_network(tmp_path: Path) -> None:
    """``campaign --network simulated`` on the 70-worker job: loss 5 % per port and
    direction (each its own stream: 10 % took round 2 past the campaign's virtual-time
    limit, a GRAD crossing up to 10 impairments) and a killed
    switch (a deployed one, after a round drawn from the seed), every run exact."""
    import json

    from controller.experiment.campaign import CampaignSettings, run_campaign

    doc = run_campaign(CampaignSettings(
        topo="fattree:8", workers=str(N), budget=2, rounds=3, seeds=1, hidden=4,
        faults=("loss", "kill"), loss_rates=(0.05,), modes=("ina",), network="simulated",
        out=str(tmp_path), name="c"))
    runs = doc["runs"]
    assert [r["fault_label"].split()[0] for r in runs] == ["loss", "kill"]
    assert all(r["exact"] and r["rounds_completed"] == 3 for r in runs), runs
    loss, kill = runs
    assert loss["impairment"]["dropped"] > 0 and loss["retransmissions"] > 0
    assert kill["fault"]["switch"] in ("agg4", "agg5") and kill["failover"]
    assert json.loads((tmp_path / "c" / "campaign.json").read_text())["complete"]


def test_the_prediction_is_the_trees_and_the_run_meets_it(tmp_path: Path) -> None:
    from controller.plan.document import load_plan
    from controller.plan.hierarchy import tree_gamma
    from workers.ina.job import JobConfig

    doc = _run(tmp_path, "clean")
    plan = load_plan(tmp_path / "clean" / "plan.json")
    cfg = JobConfig.load(tmp_path / "clean" / "ina" / "job.json")
    tree = cfg.aggregation_tree()
    assert tree is not None and max(tree.fan_in(s) for s in tree.children) <= C.MAX_WORKERS
    g = tree_gamma(plan.own_graph(), plan.job, tree, result_load=plan.result_load)
    assert doc["gamma"]["predicted"] == pytest.approx(g) != pytest.approx(plan.job.gamma)
    # no fault: nothing resent, and the measured rate within 15 % of the tree's
    assert sum(r["retransmissions"] for r in doc["modes"]["ina"]["rounds"]) == 0
    assert 0.85 < doc["gamma"]["ratio"] < 1.1
