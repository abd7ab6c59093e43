"""``python -m controller campaign`` (controller/campaign.py): what it sweeps, how it picks the
switch to kill, the table it makes, and a reduced campaign in Mininet that injects 5% loss and
a 4-slot pool (many collisions) into INA and PS-only runs — every round exact."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from controller.campaign import (
    CampaignSettings,
    Fault,
    expand_faults,
    kill_choice,
    plan_runs,
    run_campaign,
    summarize_runs,
    table_markdown,
)
from controller.cli import build_parser
from controller.errors import ExperimentError
from topo.models import parse_topology


def test_default_sweep_is_the_issue_list_with_kill_last() -> None:
    faults = expand_faults(CampaignSettings())
    assert [f.label for f in faults] == ["loss 0", "loss 0.01", "loss 0.02", "loss 0.05",
                                         "loss 0.1", "dup 0.02", "reorder 0.02", "slots 4",
                                         "kill"]
    runs = plan_runs(faults, ("ina", "ps_only"), [0, 1, 2])
    assert len(runs) == 9 * 3 * 2 and runs[-1][0].what == "kill"
    assert runs[:2] == [(faults[0], "ina", 0), (faults[0], "ps_only", 0)]


def test_unknown_fault_is_one_error() -> None:
    with pytest.raises(ExperimentError, match="unknown bogus"):
        expand_faults(CampaignSettings(faults=("loss", "bogus")))


def test_impairment_spec_of_each_fault_clears_the_others() -> None:
    assert Fault("loss", rate=0.05).impairment(2) == "loss=0.05,dup=0.0,reorder=0.0,seed=2"
    assert Fault("dup", rate=0.02).impairment(0) == "loss=0.0,dup=0.02,reorder=0.0,seed=0"
    assert Fault("slots", slots=4).impairment(1) == "loss=0.0,dup=0.0,reorder=0.0,seed=1"
    assert Fault("kill", switch="agg0", round=3).to_json() == {
        "what": "kill", "switch": "agg0", "round": 3}


def test_kill_picks_a_deployed_switch_without_hosts_and_a_round_with_one_after() -> None:
    g = nx.Graph(parse_topology("fattree:4"))
    plan = {"deployed": ["edge1", "agg0"], "ps_tor": "edge0"}
    for seed in range(5):
        sw, rnd = kill_choice(plan, g, 10, seed)
        assert sw == "agg0" and 0 <= rnd <= 8
        assert kill_choice(plan, g, 10, seed) == (sw, rnd)  # reproducible
    # only a ToR deployed: fall back to a switch without hosts (it carries ECMP paths)
    g2 = nx.Graph(parse_topology("leafspine:2,1,2"))
    assert kill_choice({"deployed": ["leaf1"], "ps_tor": "leaf0"}, g2, 2, 0) == ("spine0", 0)
    with pytest.raises(ExperimentError, match="rounds"):
        kill_choice(plan, g, 1, 0)


def test_summary_rows_and_markdown_table() -> None:
    def run(label, what, rate, mode, seed, t, x, exact=True):
        return {"fault": {"what": what, "rate": rate}, "fault_label": label, "mode": mode,
                "seed": seed, "exact": exact, "rounds_completed": 10,
                "time_per_round_s": t, "retransmissions": x}

    runs = [run("loss 0.05", "loss", 0.05, "ina", 0, 0.3, 100),
            run("loss 0.05", "loss", 0.05, "ina", 1, 0.5, 300),
            run("loss 0.05", "loss", 0.05, "ps_only", 0, 1.0, 50)]
    rows = summarize_runs(runs)
    ina = next(r for r in rows if r["mode"] == "ina")
    assert ina["runs"] == 2 and ina["exact"] == 2
    assert ina["time_per_round_s"] == {"mean": 0.4, "std": pytest.approx(0.1)}
    assert ina["retransmissions"]["mean"] == 200
    md = table_markdown(rows)
    assert "| loss 0.05 | ina | 2/2 | 0.400 ± 0.100 | 200 ± 100 |" in md


def test_cli_registers_campaign_with_the_issue_defaults() -> None:
    args = build_parser().parse_args(["campaign"])
    assert (args.topo, args.workers, args.budget, args.bw, args.rounds, args.seeds) == (
        "fattree:4", "6", 2, 1.0, 10, 3)
    args = build_parser().parse_args(["campaign", "--faults", "loss,slots", "--loss-rates",
                                      "0,0.1", "--seeds", "1"])
    assert args.faults == ("loss", "slots") and args.loss_rates == (0.0, 0.1)


@pytest.mark.root
@pytest.mark.mininet
@pytest.mark.slow
def test_reduced_campaign_loss_and_small_slot_pool_stay_exact(tmp_path) -> None:
    """2 faults (5% loss, a 4-slot pool) × 1 seed × 2 modes × 2 rounds on one network."""
    s = CampaignSettings(topo="leafspine:2,1,2", workers="3", budget=1, bw=None,
                         model="logreg", rounds=2, seeds=1, faults=("loss", "slots"),
                         loss_rates=(0.05,), window=8, out=str(tmp_path), name="camp")
    doc = run_campaign(s)
    saved = json.loads((tmp_path / "camp" / "campaign.json").read_text())
    assert saved["complete"] is True and len(saved["networks"]) == 1
    runs = saved["runs"]
    assert [(r["fault"], r["mode"]) for r in runs] == [
        ({"what": "loss", "rate": 0.05}, "ina"), ({"what": "loss", "rate": 0.05}, "ps_only"),
        ({"what": "slots", "slots": 4}, "ina"), ({"what": "slots", "slots": 4}, "ps_only")]
    for r in runs:
        assert r["exact"] is True and r["rounds_completed"] == 2, r
        assert r["time_per_round_s"] > 0 and r["retransmissions"] >= 0
    assert sum(r["retransmissions"] for r in runs if r["fault"]["what"] == "loss") > 0
    # the small pool really collided: INA chunks fell back to the PS
    slots_ina = next(r for r in runs if r["fault"]["what"] == "slots" and r["mode"] == "ina")
    assert slots_ina["ps"]["fallbacks"] > 0
    assert (tmp_path / "camp" / "build-slots4" / "num_slots.txt").read_text().strip() == "4"
    assert (tmp_path / "camp" / "campaign.png").exists()
    assert (tmp_path / "camp" / "table.md").exists() and doc["table"]
