"""The typed plan (docs/design.md §3.5): Plan / JobPlan, the version-2 JSON form, version-1
files of both shapes still read, one PlanError line per bad file, and the `plan` command's
file read back by `deploy --plan` (rules only: no network is started)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli.network import plan_rules
from controller.dataplane.deploy import SwitchJob, switch_rules
from controller.plan.document import build_plan, chunk_schedule, load_plan, write_plan
from controller.plan.jobs import JobEntry
from controller.plan.joint import joint_plan
from controller.plan.lp import PlanError, make_job, solve_lp
from controller.plan.types import PLAN_VERSION, SOLO, JobPlan, Plan
from topo.mininet_net import plan_network
from topo.models import parse_topology

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def one():
    """leafspine:2,1,2 — leaf0: h0 (PS), h1; leaf1: h2, h3.  S = {leaf1}."""
    g = parse_topology("leafspine:2,1,2")
    job = make_job(g, "h0", ["h1", "h2", "h3"])
    return g, build_plan(job, solve_lp(job, ["leaf1"]), budget=1, spec="leafspine:2,1,2")


@pytest.fixture(scope="module")
def several():
    g = parse_topology("fattree:4")
    specs = [JobEntry("a", "h0", ("h1", "h2")), JobEntry("b", "h8", ("h9", "h10"), weight=2.0)]
    return g, joint_plan(g, specs, 1, alone=False, spec="fattree:4")


def _v1_single(plan: Plan) -> dict:
    """The version-1 single-job document: the job's fields at the top level."""
    doc = {k: v for k, v in plan.to_json().items() if k != "jobs"}
    job = json.loads(json.dumps(plan.to_json()["jobs"][SOLO]))
    for key in ("weight", "gamma_per_weight", "gamma_alone", "model", "model_size", "rounds",
                "removed_workers", "gamma_without_result_load"):
        job.pop(key)  # version 1 had none of these for one job
    return {**doc, **job, "version": 1}


def _v1_jobs(plan: Plan) -> dict:
    """The version-1 several-jobs document: the same keys, "jobs" of per-job objects."""
    return {**plan.to_json(), "version": 1}


def test_one_job_plan_has_one_shape(one) -> None:
    _, plan = one
    assert list(plan.jobs) == [SOLO] and not plan.several
    assert plan.job is plan.jobs[SOLO] and isinstance(plan.job, JobPlan)
    assert plan.deployed == plan.job.deployed == ["leaf1"]
    assert plan.gamma == plan.job.gamma > 0


def test_round_trip_to_json_from_json(one, several) -> None:
    for _, plan in (one, several):
        doc = plan.to_json()
        assert doc["version"] == PLAN_VERSION == 2
        again = Plan.from_json(json.loads(json.dumps(doc)))  # through JSON text
        assert again == plan
        assert again.to_json() == doc


def test_several_jobs_accessors(several) -> None:
    _, plan = several
    assert plan.several and set(plan.jobs) == {"a", "b"}
    assert plan.gamma == plan.min_gamma_per_weight
    with pytest.raises(PlanError, match="2 jobs"):
        _ = plan.job
    alone = plan.only("b")
    assert list(alone.jobs) == ["b"] and alone.job is plan.jobs["b"]
    assert alone.switch_ids == plan.switch_ids and alone.deployed == plan.jobs["b"].deployed
    with pytest.raises(PlanError, match="no job 'c'"):
        plan.only("c")


def test_write_plan_writes_version_2_and_load_plan_reads_it(tmp_path, one) -> None:
    _, plan = one
    path = tmp_path / "plan.json"
    write_plan(plan, path)
    raw = json.loads(path.read_text())
    assert raw["version"] == 2 and set(raw["jobs"]) == {SOLO}
    assert raw["jobs"][SOLO]["gamma"] == plan.job.gamma and raw["deployed"] == ["leaf1"]
    assert load_plan(path) == plan


def test_version_1_files_of_both_shapes_still_load(tmp_path, one, several) -> None:
    g, plan = one
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(_v1_single(plan)))
    old = load_plan(path)
    assert old.version == 2 and list(old.jobs) == [SOLO]
    assert old.job.gamma == plan.job.gamma and old.job.workers == plan.job.workers
    assert old.deployed == plan.deployed and old.switch_ids == plan.switch_ids
    assert chunk_schedule(old, 16) == chunk_schedule(plan, 16)
    net = plan_network(g)
    hosts = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    jobs = [SwitchJob(1, tuple(plan.job.workers))]
    assert switch_rules(g, old, net.ports, hosts, jobs) == \
        switch_rules(g, plan, net.ports, hosts, jobs)
    _, joint = several
    path.write_text(json.dumps(_v1_jobs(joint)))
    old = load_plan(path)
    assert old == joint


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.update(version=3), "plan version 3 is not supported"),
    (lambda d: d.pop("switch_ids"), "plan lacks 'switch_ids'"),
    (lambda d: d.pop("jobs"), "plan lacks 'jobs'"),
    (lambda d: d["jobs"][SOLO].pop("fractions"), "job 'job' lacks 'fractions'"),
    (lambda d: d["jobs"][SOLO].update(deployed=["nowhere"]),
     "jobs['job'].deployed: 'nowhere' has no switch id"),
    (lambda d: d.update(jobs=[1]), "plan lacks 'jobs'"),
    (lambda d: d["jobs"].update(job=3), "job 'job' must be a JSON object"),
])
def test_bad_plan_files_are_one_plan_error_line_naming_the_file(tmp_path, one, edit,
                                                                 needle) -> None:
    _, plan = one
    doc = json.loads(json.dumps(plan.to_json()))
    edit(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and needle in msg and "\n" not in msg


def _job(d: dict) -> dict:
    return d["jobs"][SOLO]


# issue 43 item 4: each class of corruption of a plan file read back, on the leafspine:2,1,2
# plan (leaf0: h0 = PS, h1; leaf1: h2, h3; spine0; ids leaf0 1, leaf1 2, spine0 3; S = {leaf1})
CORRUPT = [
    ("unknown PS", lambda d: _job(d).update(ps="h9"),
     "jobs['job'].ps 'h9' is not a host of the topology"),
    ("a switch as the PS", lambda d: _job(d).update(ps="spine0"),
     "jobs['job'].ps 'spine0' is not a host"),
    ("wrong ps_tor", lambda d: _job(d).update(ps_tor="leaf1", ps_tor_id=2),
     "jobs['job'].ps_tor 'leaf1' is not the switch of the PS 'h0'"),
    ("ps_tor_id not its id", lambda d: _job(d).update(ps_tor_id=3),
     "jobs['job'].ps_tor_id 3 is not switch_ids['leaf0'] = 1"),
    ("non-integer retired_ids", lambda d: d.update(retired_ids=["x"]),
     "retired_ids must be a list of integers"),
    ("retired id still in use", lambda d: d.update(retired_ids=[2]),
     "retired_ids: 2 is out of range or still the id of 'leaf1'"),
    ("duplicate switch ids", lambda d: d["switch_ids"].update(spine0=2),
     "switch_ids: 'leaf1' and 'spine0' have the same id 2"),
    ("negative switch id", lambda d: d["switch_ids"].update(spine0=-1),
     "switch_ids['spine0'] must be an integer in 1..3, got -1"),
    ("switch id 2**40", lambda d: d["switch_ids"].update(spine0=2**40),
     "switch_ids['spine0'] must be an integer in 1..3"),
    ("boolean switch id", lambda d: d["switch_ids"].update(spine0=True),
     "switch_ids['spine0'] must be an integer"),
    ("a host with a switch id", lambda d: d["switch_ids"].update(h1=4),
     "switch_ids: 'h1' is not a switch of the topology"),
    ("duplicate workers", lambda d: _job(d).update(workers=["h1", "h1", "h2"]),
     "jobs['job'].workers lists 'h1' twice"),
    ("the PS as a worker", lambda d: _job(d).update(workers=["h1", "h2", "h0"]),
     "jobs['job']: host 'h0' is also in job 'job'"),
    ("a worker not a host", lambda d: _job(d).update(workers=["h1", "h2", "leaf1"]),
     "jobs['job'].workers: 'leaf1' is not a host"),
    ("duplicate worker ids", lambda d: _job(d)["worker_ids"].update(h2=0),
     "jobs['job'].worker_ids must number every worker 0..2 once"),
    ("negative gamma", lambda d: _job(d).update(gamma=-0.5),
     "jobs['job'].gamma must be a finite number >= 0, got -0.5"),
    ("NaN gamma", lambda d: _job(d).update(gamma=float("nan")),
     "jobs['job'].gamma must be a finite number >= 0, got nan"),
    ("deployed [] with intervals", lambda d: _job(d).update(deployed=[]),
     "jobs['job'].intervals must name exactly the deployed switches ('leaf1' is not"),
    ("deployed switch without interval", lambda d: _job(d).update(intervals={}),
     "jobs['job'].intervals must name exactly the deployed switches"),
    ("deployed the PS's ToR", lambda d: _job(d).update(deployed=["leaf0"]),
     "jobs['job'].deployed: 'leaf0' has no switch id or is the PS's ToR"),
    ("interval past 1", lambda d: _job(d)["intervals"]["leaf1"].update(length=1.5),
     "jobs['job'].intervals end at 1.5, past 1"),
    ("interval not from 0", lambda d: _job(d)["intervals"]["leaf1"].update(offset=0.25),
     "jobs['job'].intervals['leaf1'] starts at 0.25, not at 0"),
    ("negative length", lambda d: _job(d)["intervals"]["leaf1"].update(length=-0.1),
     "jobs['job'].intervals['leaf1'] needs a finite offset and a length >= 0"),
    ("NaN offset", lambda d: _job(d)["intervals"]["leaf1"].update(offset=float("nan")),
     "jobs['job'].intervals['leaf1'] needs a finite offset"),
    ("fraction over its interval", lambda d: _job(d)["fractions"]["h2"].update(leaf1=1.5),
     "jobs['job'].fractions['h2']['leaf1'] must be in [0, "),
    ("negative fraction", lambda d: _job(d)["fractions"]["h2"].update(leaf1=-0.5),
     "jobs['job'].fractions['h2']['leaf1'] must be in [0, "),
    ("fraction on an undeployed switch", lambda d: _job(d)["fractions"]["h2"].update(spine0=0),
     "jobs['job'].fractions['h2'] names 'spine0', which is not deployed"),
    ("worker without fractions", lambda d: _job(d)["fractions"].pop("h2"),
     "jobs['job'].fractions must have one entry per worker"),
    ("plan deployed not the job's", lambda d: d.update(deployed=["spine0"]),
     "deployed ['spine0'] is not the job's deployed ['leaf1']"),
    ("failed switch with an id", lambda d: d.update(failed=["spine0"]),
     "failed switch 'spine0' still has an id"),
    ("negative budget", lambda d: d.update(budget=-1), "budget must be an integer >= 0"),
]


@pytest.mark.parametrize("what, edit, needle", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_plan_files_are_checked_for_meaning(tmp_path, one, what, edit, needle) -> None:
    """Every class of corruption is one PlanError line naming the file and the field
    (issue 43 item 4), before any rule could be installed from it."""
    _, plan = one
    doc = json.loads(json.dumps(plan.to_json()))
    edit(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and needle in msg and "\n" not in msg, msg


def test_a_several_jobs_plan_is_checked_too(several) -> None:
    _, plan = several
    plan.check()  # as written
    doc = json.loads(json.dumps(plan.to_json()))
    doc["jobs"]["b"]["workers"] = ["h9", "h1"]  # h1 is job a's
    doc["jobs"]["b"]["worker_ids"] = {"h9": 0, "h1": 1}
    doc["jobs"]["b"]["fractions"] = {"h9": {}, "h1": {}}
    doc["jobs"]["b"]["deployed"] = []
    doc["jobs"]["b"]["intervals"] = {}
    with pytest.raises(PlanError, match=r"jobs\['b'\]: host 'h1' is also in job 'a'"):
        Plan.from_json(doc)


def test_check_against_another_network(one) -> None:
    """Plan.check(graph): the network a deploy uses instead of the plan's own."""
    g, plan = one
    plan.check(g)
    with pytest.raises(PlanError, match="switch_ids: 'leaf0' is not a switch of the topology"):
        plan.check(parse_topology("fattree:4"))


def test_unreadable_and_non_object_files(tmp_path) -> None:
    path = tmp_path / "x.json"
    for text, needle in (("[1, 2]", "a plan must be a JSON object"), ("{", "bad JSON")):
        path.write_text(text)
        with pytest.raises(PlanError, match=needle) as info:
            load_plan(path)
        assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan(tmp_path / "missing.json")


def test_plan_command_writes_v2_and_deploy_reads_it(tmp_path) -> None:
    """`plan` writes version 2; `deploy --plan` computes its rules from that file (and from
    a version-1 file of the same plan, identically) without touching a network."""
    out = tmp_path / "plan.json"
    r = subprocess.run([sys.executable, "-m", "controller", "plan", "--topo", "leafspine:2,1,2",
                        "--ps", "h0", "--workers", "3", "--budget", "1", "--no-baselines",
                        "--out", str(out)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    raw = json.loads(out.read_text())
    assert raw["version"] == 2 and list(raw["jobs"]) == [SOLO]
    net = plan_network(parse_topology("leafspine:2,1,2"))
    net_file = tmp_path / "network.json"
    net_file.write_text(json.dumps({
        "switches": {s: {"grpc": "127.0.0.1:1", "device_id": net.device_ids[s],
                         "ports": net.ports[s]} for s in net.switches},
        "hosts": {h: {"ip": i.ip, "mac": i.mac, "ports": net.ports[h]}
                  for h, i in net.hosts.items()}}))
    plan, _, rules = plan_rules(out, net_file, 7)
    assert plan == load_plan(out) and sorted(rules) == sorted(net.switches)
    tors = {s for s, r in rules.items() for e in r.entries
            if e.table.endswith("job_table") and e.params["is_ps_tor"]}
    assert tors == {plan.job.ps_tor}
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(_v1_single(plan)))
    assert plan_rules(v1, net_file, 7)[2] == rules
