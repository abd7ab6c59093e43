"""The rule installer: entries computed from a plan (pure, by hand) and `controller deploy`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from controller.dataplane.deploy import ASK_GROUP_BASE, SwitchJob, switch_rules
from controller.plan.document import build_plan, write_plan
from controller.plan.lp import make_job, solve_lp
from topo.mininet_net import plan_network
from topo.models import parse_topology
from workers.ina.constants import num_slots

ING = "MyIngress."


@pytest.fixture(scope="module")
def setup():
    """leafspine:2,1,2 — leaf0: h0 (PS), h1; leaf1: h2, h3; spine0.  S = {leaf1}."""
    g = parse_topology("leafspine:2,1,2")
    job = make_job(g, "h0", ["h1", "h2", "h3"])
    plan = build_plan(job, solve_lp(job, ["leaf1"]), budget=1)
    net = plan_network(g)
    hosts = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    rules = switch_rules(g, plan, net.ports, hosts, [SwitchJob(1, ("h1", "h2", "h3"))])
    return g, plan, net, rules


def entries(rules, switch, table):
    return [e for e in rules[switch].entries if e.table == ING + table]


def test_aggregation_enabled_only_on_deployed_switches_and_the_ps_tor(setup):
    _, plan, _, rules = setup
    ids = plan.switch_ids
    cfg = {s: r.default.params for s, r in rules.items()}
    assert cfg == {"leaf0": {"switch_id": ids["leaf0"], "agg_enabled": 1},
                   "leaf1": {"switch_id": ids["leaf1"], "agg_enabled": 1},
                   "spine0": {"switch_id": ids["spine0"], "agg_enabled": 0}}


def test_ina_routes_follow_the_ecmp_next_hops(setup):
    _, plan, net, rules = setup
    p = net.ports
    ids = plan.switch_ids
    # spine0: toward leaf0 (the PS's ToR), toward leaf1, and toward the PS (agg_id 0)
    routes = {e.match["hdr.ina.agg_id"]: e.params for e in entries(rules, "spine0", "ina_route")}
    hops = {e.match["meta.member_index"]: e.params["port"]
            for e in entries(rules, "spine0", "ina_nexthop")}
    ports_of = {agg: [hops[routes[agg]["base"] + i] for i in range(routes[agg]["size"])]
                for agg in routes}
    assert ports_of == {ids["leaf0"]: [p["spine0"]["leaf0"]],
                        ids["leaf1"]: [p["spine0"]["leaf1"]]}
    # agg_id 0: the job's own PS, by job id (ps_route)
    ps = {e.match["hdr.ina.job_id"]: e.params for e in entries(rules, "spine0", "ps_route")}
    assert [hops[ps[1]["base"] + i] for i in range(ps[1]["size"])] == [p["spine0"]["leaf0"]]
    # at the PS's ToR, the PS's own port
    r0 = {e.match["hdr.ina.job_id"]: e.params for e in entries(rules, "leaf0", "ps_route")}
    h0 = {e.match["meta.member_index"]: e.params["port"]
          for e in entries(rules, "leaf0", "ina_nexthop")}
    assert h0[r0[1]["base"]] == p["leaf0"]["h0"] and r0[1]["size"] == 1


def test_membership_job_table_and_result_tree(setup):
    _, plan, net, rules = setup
    p = net.ports
    members = {(e.match["hdr.ina.worker_id"], e.match["standard_metadata.ingress_port"])
               for s in rules for e in entries(rules, s, "ina_member")}
    assert members == {(0, p["leaf0"]["h1"]), (1, p["leaf1"]["h2"]), (2, p["leaf1"]["h3"])}
    job0 = entries(rules, "leaf0", "job_table")[0].params
    assert job0 == {"full_mask": 0b111, "is_ps_tor": 1, "tor_id": plan.switch_ids["leaf0"],
                    "ps_port": p["leaf0"]["h0"], "mcast_grp": 1, "slot_base": 0,
                    "slot_size": num_slots(), "hier": 0, "fan_in": 0}
    assert entries(rules, "leaf1", "job_table")[0].params["is_ps_tor"] == 0
    groups = {s: r.mcast_groups for s, r in rules.items()}
    # the job's RESULT tree (group 1), and leaf1's NACK tree to its workers (ask_trees)
    assert groups == {"leaf0": {1: [p["leaf0"]["h1"], p["leaf0"]["spine0"]]},
                      "spine0": {1: [p["spine0"]["leaf1"]]},
                      "leaf1": {1: [p["leaf1"]["h2"], p["leaf1"]["h3"]],
                                ASK_GROUP_BASE: [p["leaf1"]["h2"], p["leaf1"]["h3"]]}}
    assert [(e.match, e.params) for s in rules for e in entries(rules, s, "ask_group")] == [
        ({"hdr.ina.job_id": 1, "hdr.ina.agg_id": plan.switch_ids["leaf1"]},
         {"grp": ASK_GROUP_BASE})]
    rewrites = {(s, e.match["standard_metadata.egress_port"]): e.params["ip"]
                for s, r in rules.items() for e in r.entries if e.table.endswith("result_rewrite")}
    assert rewrites == {("leaf0", p["leaf0"]["h1"]): net.hosts["h1"].ip,
                        ("leaf1", p["leaf1"]["h2"]): net.hosts["h2"].ip,
                        ("leaf1", p["leaf1"]["h3"]): net.hosts["h3"].ip}


def _ask_reach(g, rules, ports, ids, job_id: int, point: str) -> set[str]:
    """The hosts a NACK of ``point`` reaches, following ask_group and its groups hop by hop
    (routing.p4: a RESULT flagged INCOMPLETE takes ask_group at every switch)."""
    by_port = {s: {port: nb for nb, port in ports[s].items()} for s in rules}
    reached, todo = set(), [point]
    while todo:
        s = todo.pop()
        grp = [e.params["grp"] for e in entries(rules, s, "ask_group")
               if e.match == {"hdr.ina.job_id": job_id, "hdr.ina.agg_id": ids[point]}]
        for port in (rules[s].mcast_groups[grp[0]] if grp else []):
            nb = by_port[s][port]
            (reached.add if g.nodes[nb].get("kind") == "host" else todo.append)(nb)
    return reached


def test_a_points_nack_tree_reaches_every_worker_it_aggregates():
    """fattree:4, PS h0, workers h1-h7, S = {agg0, agg1} (the PS's pod): the job's RESULT
    tree from edge0 goes down agg0 alone, so agg1's NACKs need a tree of their own; each
    point's reaches exactly the members the plan sends through it, once each."""
    g = parse_topology("fattree:4")
    workers = [f"h{i}" for i in range(1, 8)]
    job = make_job(g, "h0", workers)
    plan = build_plan(job, solve_lp(job, ["agg0", "agg1"]), budget=2)
    net = plan_network(g)
    hosts = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    rules = switch_rules(g, plan, net.ports, hosts, [SwitchJob(1, tuple(workers))])
    assert rules["agg1"].mcast_groups.get(1, []) == []  # not on the RESULT tree's way down
    for point in ("agg0", "agg1"):
        kids = {w for w in workers if plan.job.fractions[w].get(point, 0) > 0}
        assert kids and _ask_reach(g, rules, net.ports, plan.switch_ids, 1, point) == kids
    for s, r in rules.items():  # the trees' host ports get the hosts' own addresses
        rewritten = {e.match["standard_metadata.egress_port"] for e in r.entries
                     if e.table.endswith("result_rewrite")}
        asked = {p for gid, ps in r.mcast_groups.items() if gid >= ASK_GROUP_BASE for p in ps}
        assert {p for p in asked if g.nodes[{v: k for k, v in net.ports[s].items()}[p]]
                .get("kind") == "host"} <= rewritten


def _network_file(tmp_path, net, grpc):
    data = {"switches": {s: {"grpc": grpc(s), "device_id": net.device_ids[s],
                             "ports": net.ports[s]} for s in net.switches},
            "hosts": {h: {"ip": i.ip, "mac": i.mac, "ports": net.ports[h]}
                      for h, i in net.hosts.items()}}
    path = tmp_path / "network.json"
    path.write_text(json.dumps(data))
    return path


def _deploy(tmp_path, plan_file, net_file, *extra):
    return subprocess.run([sys.executable, "-m", "controller", "deploy", "--plan", str(plan_file),
                           "--network", str(net_file), "--build", str(tmp_path / "build"),
                           *extra], capture_output=True, text=True, timeout=120)


def test_deploy_cli_errors_are_one_line(tmp_path, setup):
    _, plan, net, _ = setup
    plan_file = tmp_path / "plan.json"
    write_plan(plan, plan_file)
    dead = _network_file(tmp_path, net, lambda s: "127.0.0.1:1")
    out = _deploy(tmp_path, plan_file, dead, "--timeout", "0.5")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "leaf0" in out.stderr and "did not answer" in out.stderr
    other = parse_topology("leafspine:2,1,3")
    wrong = _network_file(tmp_path, plan_network(other), lambda s: "127.0.0.1:1")
    out = _deploy(tmp_path, plan_file, wrong)
    assert out.returncode == 2 and "differs" in out.stderr


@pytest.mark.root
@pytest.mark.mininet
def test_deploy_into_a_running_network_is_idempotent(tmp_path, setup):
    from controller.dataplane.p4runtime_client import SwitchConnection
    from topo.mininet_net import build_net

    g, plan, _, rules = setup
    plan_file = tmp_path / "plan.json"
    write_plan(plan, plan_file)
    mininet = build_net(g, bw_unit_mbps=None)
    try:
        net_file = _network_file(tmp_path, mininet.plan, mininet.grpc_address)
        for _ in range(2):
            out = _deploy(tmp_path, plan_file, net_file)
            assert out.returncode == 0, out.stderr
        conn = SwitchConnection(mininet.grpc_address("leaf1"), mininet.device_id("leaf1"),
                                election_id=5, name="leaf1")
        conn.connect()
        try:
            conn.use_p4info(tmp_path / "build" / "ina.p4info.txtpb")
            got = conn.read_table_entries(ING + "ina_route")
            assert len(got) == len(entries(rules, "leaf1", "ina_route"))  # not doubled
            assert conn.read_multicast_groups() == {  # the RESULT and NACK trees, once
                gid: [(p, 0) for p in ports] for gid, ports in rules["leaf1"].mcast_groups.items()}
            assert len(rules["leaf1"].mcast_groups) == 2
        finally:
            conn.close()
        # plain IPv4 crosses leaf0 -> spine0 -> leaf1 by the installed LPM routes
        h1 = mininet.net.get("h1")
        assert ", 0% packet loss" in h1.cmd(f"ping -c 2 -W 2 {mininet.plan.hosts['h2'].ip}")
    finally:
        mininet.stop()
