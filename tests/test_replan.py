"""Re-planning after a switch dies (docs/design.md §9): LP values by hand, cut-off hosts, failover rules."""

from __future__ import annotations

import re

import pytest

from controller.dataplane.deploy import SwitchJob, rule_changes, switch_rules
from controller.plan.document import build_plan, chunk_schedule
from controller.plan.lp import make_job, solve_lp
from controller.plan.replan import SwitchFailureError, cut_off, replan_without, without_switch
from topo.mininet_net import plan_network
from topo.models import hosts, parse_topology

ING = "MyIngress."


def fat_tree_plan(deployed, workers=None):
    g = parse_topology("fattree:4")
    ws = workers or [h for h in hosts(g) if h != "h0"]
    job = make_job(g, "h0", ws)
    return g, build_plan(job, solve_lp(job, deployed), budget=len(deployed))


def test_dead_aggregator_falls_back_to_the_ps_tor_by_hand():
    # Budget 1 on fat-tree k=4, 15 workers: S = {agg2}, γ = 1/3 (tests/test_planner.py).
    g, plan = fat_tree_plan(["agg2"])
    assert plan.job.gamma == pytest.approx(1 / 3)
    g2, new = replan_without(g, plan, "agg2")
    assert "agg2" not in g2 and "agg2" in g
    assert new.deployed == [] and new.failed == ["agg2"]
    # Without agg2, pod 1 (h4..h7) goes up through agg3 only, whose cores (core2, core3)
    # reach pod 0 through agg1 alone: agg1->edge0 carries pod 1's 4 streams, half of h2/h3's
    # (1) and half of pods 2-3 (4) = 9γ; agg0->edge0 carries 1 + 4 = 5γ.  So γ = 1/9.
    assert new.job.gamma == pytest.approx(1 / 9)
    loads = {(x["from"], x["to"]): x["load"] for x in new.loads}
    assert loads[("agg1", "edge0")] == pytest.approx(1.0)
    assert loads[("agg0", "edge0")] == pytest.approx(5 / 9)
    assert not any("agg2" in k for k in loads)
    # ids are the original ones; the dead switch's id is retired, never reused
    assert new.switch_ids == {s: i for s, i in plan.switch_ids.items() if s != "agg2"}
    assert new.retired_ids == [plan.switch_ids["agg2"]]
    assert new.job.ps_tor == "edge0" and new.job.ps_tor_id == plan.switch_ids["edge0"]
    # every chunk now goes to s_d with the full fan-in
    tor_id = plan.switch_ids["edge0"]
    sched = chunk_schedule(new, 8)
    assert all(e == (c, tor_id, 15) for s in sched.values() for c, e in enumerate(s))


def test_surviving_aggregators_are_kept():
    g, plan = fat_tree_plan(["agg2", "agg4"])
    _, new = replan_without(g, plan, "agg4")
    assert new.deployed == ["agg2"]
    # a second failure accumulates
    _, again = replan_without(without_switch(g, "agg4"), new, "agg2")
    assert again.failed == ["agg4", "agg2"]
    assert again.retired_ids == [plan.switch_ids["agg4"], plan.switch_ids["agg2"]]
    assert again.job.gamma > 0


def test_a_dead_core_switch_only_reroutes():
    g, plan = fat_tree_plan(["agg2"])
    _, new = replan_without(g, plan, "core0")
    assert new.deployed == ["agg2"] and new.failed == ["core0"]
    assert not any("core0" in (x["from"], x["to"]) for x in new.loads)
    assert 0 < new.job.gamma <= plan.job.gamma + 1e-9


@pytest.mark.parametrize("dead, needle", [
    ("edge1", "worker(s) h2, h3 cut off from the PS h0"),
    ("edge0", "the PS h0 is cut off"),
])
def test_cut_off_hosts_stop_the_job(dead, needle):
    g, plan = fat_tree_plan(["agg2"])
    with pytest.raises(SwitchFailureError, match=re.escape(needle)):
        replan_without(g, plan, dead)


def test_cut_off_is_through_switches_only():
    g = parse_topology("fattree:4")
    assert cut_off(without_switch(g, "edge2"), "h0", ["h1", "h4", "h5", "h6"]) == ["h4", "h5"]
    with pytest.raises(ValueError, match="not a switch"):
        without_switch(g, "h3")


def test_failover_rules_route_the_retired_id_like_the_ps():
    # leafspine:2,3,2 -- leaf0: h0 (PS), h1; leaf1: h2, h3; spines 0-2.  S = {leaf1, spine1}.
    g = parse_topology("leafspine:2,3,2")
    job = make_job(g, "h0", ["h1", "h2", "h3"])
    plan = build_plan(job, solve_lp(job, ["leaf1", "spine1"]), budget=2)
    net = plan_network(g)  # the live network keeps the dead switch's ports
    addrs = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    g2, new = replan_without(g, plan, "spine0")
    assert new.deployed == ["leaf1", "spine1"]
    g3, new = replan_without(g2, new, "spine1")
    assert new.deployed == ["leaf1"]
    assert new.retired_ids == [plan.switch_ids["spine0"], plan.switch_ids["spine1"]]
    rules = switch_rules(g3, new, net.ports, addrs, [SwitchJob(1, ("h1", "h2", "h3"))])
    assert sorted(rules) == ["leaf0", "leaf1", "spine2"]  # no rules for the dead
    for s, r in rules.items():
        routes = {e.match["hdr.ina.agg_id"]: e.action for e in r.entries
                  if e.table == ING + "ina_route"}
        for dead in new.retired_ids:  # to the job's PS, whose group ps_route holds
            assert routes[dead] == ING + "route_to_ps", s
        assert [e.match for e in r.entries if e.table == ING + "ps_route"] == \
            [{"hdr.ina.job_id": 1}], s
        out_ports = {e.params["port"] for e in r.entries if "port" in e.params}
        dead_ports = {net.ports[s][d] for d in ("spine0", "spine1") if d in net.ports[s]}
        assert not out_ports & dead_ports, s
        fabric = {e.match["standard_metadata.ingress_port"] for e in r.entries
                  if e.table == ING + "port_config"}
        assert not fabric & dead_ports, s


def as_installed(rules):
    """A switch's state as the data plane sees it: (table, match, priority) -> action."""
    return ({(e.table, repr(sorted(e.match.items())), e.priority): (e.action, e.params)
             for e in rules.entries}, rules.default.params, rules.mcast_groups)


def test_rule_changes_turn_the_old_rules_into_the_new():
    g, plan = fat_tree_plan(["edge1", "agg0"], workers=["h1", "h2", "h3", "h4", "h5", "h6"])
    net = plan_network(g)
    addrs = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    jobs = [SwitchJob(1, tuple(plan.job.workers))]
    old = switch_rules(g, plan, net.ports, addrs, jobs)
    g2, new_plan = replan_without(g, plan, "agg0")
    new = switch_rules(g2, new_plan, net.ports, addrs, jobs)
    assert new_plan.deployed == ["edge1"]
    touched = 0
    for s in new:
        ch = rule_changes(old[s], new[s])
        state, default, groups = as_installed(old[s])
        for e in ch.delete:
            del state[(e.table, repr(sorted(e.match.items())), e.priority)]
        for e in ch.modify:
            key = (e.table, repr(sorted(e.match.items())), e.priority)
            assert key in state
            state[key] = (e.action, e.params)
        for e in ch.insert:
            key = (e.table, repr(sorted(e.match.items())), e.priority)
            assert key not in state
            state[key] = (e.action, e.params)
        if ch.default is not None:
            default = ch.default.params
        groups = {**{g_: m for g_, m in groups.items() if g_ not in ch.groups["delete"]},
                  **ch.groups["insert"], **ch.groups["modify"]}
        assert (state, default, groups) == as_installed(new[s]), s
        touched += ch.writes > 0
    assert touched > 0 and rule_changes(old["edge0"], new["edge0"]).writes > 0
    # no change at all: nothing to write
    assert rule_changes(old["edge0"], old["edge0"]).writes == 0
