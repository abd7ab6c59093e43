"""``python -m controller campaign`` (controller/experiment/campaign.py): what it sweeps, how it picks the
switch to kill, the table it makes, the switch counters it records per run
(controller/dataplane/drop_counters.py: differences per drop reason, read over P4Runtime from a real
pyswitch), and a reduced campaign in Mininet that injects 5% loss and a 4-slot pool (many
collisions) into INA and PS-only runs — every round exact, every drop reason recorded."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from controller.cli.main import build_parser
from controller.dataplane.drop_counters import (
    counter_delta,
    drops_markdown,
    mean_counts,
    read_snapshot,
    run_counters,
    short_names,
)
from controller.errors import ExperimentError
from controller.experiment.campaign import (
    CampaignSettings,
    Fault,
    expand_faults,
    kill_choice,
    plan_runs,
    run_campaign,
    summarize_runs,
    table_markdown,
)
from controller.plan.types import JobPlan, Plan
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


def _plan(deployed: list[str], ps_tor: str) -> Plan:
    """The parts of a plan kill_choice reads: the deployment (and a PS ToR)."""
    job = JobPlan(ps="h0", ps_tor=ps_tor, ps_tor_id=1, workers=[], worker_ids={}, gamma=1.0,
                  deployed=list(deployed), intervals={}, fractions={})
    return Plan(topology={}, switch_ids={}, jobs={"job": job}, deployed=list(deployed))


def test_kill_picks_a_deployed_switch_without_hosts_and_a_round_with_one_after() -> None:
    g = nx.Graph(parse_topology("fattree:4"))
    plan = _plan(["edge1", "agg0"], "edge0")
    for seed in range(5):
        sw, rnd = kill_choice(plan, g, 10, seed)
        assert sw == "agg0" and 0 <= rnd <= 8
        assert kill_choice(plan, g, 10, seed) == (sw, rnd)  # reproducible
    # only a ToR deployed: fall back to a switch without hosts (it carries ECMP paths)
    g2 = nx.Graph(parse_topology("leafspine:2,1,2"))
    assert kill_choice(_plan(["leaf1"], "leaf0"), g2, 2, 0) == ("spine0", 0)
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


def test_a_switch_that_does_not_take_the_pipeline_between_runs_is_one_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The push between runs waits up to a minute per call (80 switches load side by side
    on 2 cores), and a switch that still does not answer stops the campaign with one line
    naming it, not a traceback (the runs so far are already in campaign.json)."""
    import controller.dataplane.deploy as deploy_mod
    from controller.dataplane.deploy import DeployError
    from controller.experiment.campaign import _push

    seen: dict[str, float] = {}

    def refuse(rules, addresses, p4info, config, timeout=10.0, parallel=8):
        seen["timeout"] = timeout
        raise DeployError("switch agg0 at 127.0.0.1:1 did not answer within 60 s")

    monkeypatch.setattr(deploy_mod, "deploy", refuse)

    class Net:
        rules = {"agg0": object()}
        addresses = {"agg0": ("127.0.0.1:1", 1)}

    with pytest.raises(ExperimentError, match="between runs: switch agg0 .* did not answer"):
        _push(Net(), None, None)
    assert seen["timeout"] == 60.0


def test_cli_registers_campaign_with_the_issue_defaults() -> None:
    args = build_parser().parse_args(["campaign"])
    assert (args.topo, args.workers, args.budget, args.bw, args.rounds, args.seeds) == (
        "fattree:4", "6", 2, 1.0, 10, 3)
    args = build_parser().parse_args(["campaign", "--faults", "loss,slots", "--loss-rates",
                                      "0,0.1", "--seeds", "1"])
    assert args.faults == ("loss", "slots") and args.loss_rates == (0.0, 0.1)


# ------------------------------------------------------------------ switch counters

ING, EG = "MyIngress.", "MyEgress."


def test_counter_names_lose_their_control_unless_two_controls_share_one() -> None:
    assert short_names([ING + "collision", EG + "dropped_echo", ING + "dropped_noroute"]) == {
        ING + "collision": "collision", EG + "dropped_echo": "dropped_echo",
        ING + "dropped_noroute": "dropped_noroute"}
    assert short_names([ING + "x", EG + "x"]) == {ING + "x": ING + "x", EG + "x": EG + "x"}


def test_counter_delta_per_switch_and_a_reset_counter_counts_from_zero() -> None:
    before = {"s1": {ING + "collision": 5, ING + "dropped_noroute": 2}, "s2": {ING + "a": 1}}
    after = {"s1": {ING + "collision": 9, ING + "dropped_noroute": 1}, "s3": {ING + "a": 4}}
    # s1's dropped_noroute went down: the pipeline was pushed in between, 1 since then
    assert counter_delta(before, after) == {"s1": {ING + "collision": 4,
                                                   ING + "dropped_noroute": 1}}


def test_run_counters_split_drop_reasons_from_events_and_keep_zero_reasons() -> None:
    names = [ING + "dropped_malformed", ING + "dropped_noroute", EG + "dropped_echo",
             ING + "collision", ING + "bypassed", ING + "absorbed"]
    before = {sw: dict.fromkeys(names, 10) for sw in ("edge0", "agg0", "core0")}
    after = {sw: dict(v) for sw, v in before.items()}
    after["edge0"][EG + "dropped_echo"] += 7
    after["agg0"][EG + "dropped_echo"] += 3
    after["agg0"][ING + "collision"] += 4
    after["agg0"][ING + "absorbed"] += 12
    del after["core0"]  # killed during the run
    got = run_counters(before, after, {"core0": "switch process not running"})
    assert got["drops"] == {"dropped_echo": 10, "dropped_malformed": 0, "dropped_noroute": 0}
    assert got["counters"] == {"absorbed": 12, "bypassed": 0, "collision": 4}
    assert got["counters_per_switch"] == {
        "agg0": {"absorbed": 12, "collision": 4, "dropped_echo": 3},
        "edge0": {"dropped_echo": 7}}
    assert got["counters_unread"] == {"core0": "switch process not running"}
    json.dumps(got)  # goes into campaign.json as it is


def test_summary_rows_average_the_counters_and_table_md_shows_nonzero_reasons() -> None:
    def run(seed, echo, noroute, collision):
        return {"fault": {"what": "slots", "slots": 4}, "fault_label": "slots 4", "mode": "ina",
                "seed": seed, "exact": True, "rounds_completed": 10, "time_per_round_s": 0.3,
                "retransmissions": 0,
                "drops": {"dropped_echo": echo, "dropped_noroute": noroute,
                          "dropped_malformed": 0},
                "counters": {"collision": collision, "aggregated": 100}}

    rows = summarize_runs([run(0, 100, 0, 40), run(1, 300, 2, 60)])
    assert rows[0]["drops"] == {"dropped_echo": 200, "dropped_malformed": 0,
                                "dropped_noroute": 1}
    assert rows[0]["counters"] == {"aggregated": 100, "collision": 50}
    assert mean_counts([]) == {} and mean_counts([{"a": 1}, {}]) == {"a": 0.5}
    md = drops_markdown(rows)
    assert "| fault | mode | dropped_echo | dropped_noroute | collision |" in md
    assert "| slots 4 | ina | 200 | 1 | 50 |" in md
    assert "always 0: dropped_malformed" in md
    # runs from before counters were recorded: the same table, no second one
    old = summarize_runs([{k: v for k, v in run(0, 1, 1, 1).items()
                           if k not in ("drops", "counters")}])
    assert old[0]["drops"] == {} and drops_markdown(old) == ""


def test_counters_are_read_from_a_running_pyswitch_and_a_dead_switch_is_named(
        tmp_path) -> None:
    """Every counter of ina.p4 comes back by name in one wildcard Read per switch."""
    from ina_harness import pyswitch_unavailable
    from switch_harness import start_switch

    from controller.experiment.network import compile_program

    why = pyswitch_unavailable()
    if why:
        pytest.skip(why)
    p4info, config = compile_program("pyswitch", tmp_path / "build")
    sw = start_switch("pyswitch", {}, tmp_path)
    try:
        c = sw.client(election_id=1)
        c.set_pipeline(p4info, config)
        c.write_counter(ING + "collision", 0, packets=3, nbytes=300)
        c.write_counter(EG + "dropped_echo", 0, packets=7, nbytes=700)
        before, errors = read_snapshot({"s1": (sw.address, sw.device_id),
                                        "dead": ("127.0.0.1:1", 9)}, p4info, timeout=1.0)
        assert set(before) == {"s1"} and set(errors) == {"dead"}
        got = before["s1"]
        assert got[ING + "collision"] == 3 and got[EG + "dropped_echo"] == 7
        # the drop reasons of docs/protocol.md §4 are all there, untouched ones at 0
        for name in ("dropped_malformed", "dropped_not_ipv4", "dropped_nonmember",
                     "dropped_noroute", "dropped_ipv4_noroute", "dropped_duplicate"):
            assert got[ING + name] == 0, name
        c.write_counter(ING + "collision", 0, packets=5, nbytes=500)
        after, _ = read_snapshot({"s1": (sw.address, sw.device_id)}, p4info)
        assert run_counters(before, after)["counters"]["collision"] == 2
        c.close()
    finally:
        sw.stop()


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
    # the switch counters each run moved: every drop reason present, read from every switch
    for r in runs:
        assert "dropped_malformed" in r["drops"] and r["counters_unread"] == {}, r
        assert not r["drops"]["dropped_malformed"] and not r["drops"]["dropped_nonmember"]
    assert slots_ina["counters"]["collision"] > 0
    assert "Switch counters" in (tmp_path / "camp" / "table.md").read_text()
