"""``plan --budgets ... --planners ...`` (controller/plan/sweep.py, issue 41 item 5): the
greedy's rows are prefixes of one run and equal a run per budget; one table, JSON and
figure; bad input is one line."""

import json

import pytest

from controller.cli.main import main
from controller.plan.jobs import jobs_argument
from controller.plan.lp import make_job
from controller.plan.lp_fast import FastLP
from controller.plan.lp_jobs import FastJointLP, make_jobset
from controller.plan.placement import as_jobs
from controller.plan.planners import PLANNERS
from controller.plan.sweep import sweep
from topo.models import hosts, parse_topology

BUDGETS = [0, 1, 2, 3, 5]


@pytest.mark.parametrize("spec,n,result_load", [("fattree:4", 8, True),
                                                ("leafspine:3,2,2", 5, True),
                                                ("fattree:4", 15, False)])
def test_greedy_prefix_equals_a_run_per_budget(spec, n, result_load):
    g = parse_topology(spec)
    job = make_job(g, "h0", [h for h in hosts(g) if h != "h0"][:n], result_load=result_load)
    p = as_jobs(job, lp=FastLP(job))
    rows = sweep(p, BUDGETS, ["greedy", "top_degree"])
    assert [(r.planner, r.budget) for r in rows] == \
        [("greedy", b) for b in BUDGETS] + [("top_degree", b) for b in BUDGETS]
    for r in rows:
        alone = PLANNERS[r.planner](job, r.budget, lp=FastLP(job))
        assert r.deployed == list(alone.deployed)
        assert r.gamma == pytest.approx(alone.gamma, rel=1e-9)


def test_joint_greedy_prefix_equals_a_run_per_budget():
    g = parse_topology("fattree:4")
    js = make_jobset(g, jobs_argument("2", g), result_load=True)
    p = as_jobs(js, lp=FastJointLP(js))
    rows = sweep(p, [0, 1, 2, 3], ["greedy"])
    for r in rows:
        alone = PLANNERS["greedy"](js, r.budget)
        assert r.deployed == list(alone.deployed)
        assert r.gamma == pytest.approx(alone.gamma, rel=1e-9)


def test_a_joint_sweep_scores_what_plan_jobs_deploys():
    """Two jobs whose joint LP leaves each an empty interval on the other's PS ToR
    (tests/test_joint_planners.py): budget 0 scores 0.4 before each job keeps to its own
    switches and 0.5 after, as the plan ``plan --jobs`` writes; so do the other rows."""
    from controller.plan.jobs import JobEntry
    from controller.plan.joint import joint_plan

    g = parse_topology("fattree:4")
    specs = [JobEntry("a", "h0", ("h8", "h12", "h14")), JobEntry("b", "h4", ("h10", "h11", "h15"))]
    js = make_jobset(g, specs, result_load=True)
    p = as_jobs(js, lp=FastJointLP(js))
    rows = sweep(p, [0, 1, 2], ["greedy", "top_degree"])
    assert rows[0].budget == 0 and rows[0].gamma == pytest.approx(0.5, abs=1e-6)
    for r in rows:
        plan = joint_plan(g, specs, r.budget, alone=False, result_load=True,
                          planner=r.planner)
        assert r.gamma == pytest.approx(plan.min_gamma_per_weight, abs=1e-7), r


def test_plan_sweep_writes_table_json_and_figure(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    assert main(["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "8",
                 "--budgets", "2,0,1", "--planners", "greedy,top_degree", "--out",
                 str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["budgets"] == [0, 1, 2] and doc["planners"] == ["greedy", "top_degree"]
    got = {(r["planner"], r["budget"]): r["gamma"] for r in doc["rows"]}
    assert got[("greedy", 0)] == got[("top_degree", 0)] == pytest.approx(2 / 7)
    assert got[("greedy", 2)] == pytest.approx(14 / 17)  # {agg2, agg1}, docs' fat-tree k=4
    assert (tmp_path / "sweep.png").stat().st_size > 1000
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["planner", "budget", "gamma"] and len(lines) == 8


@pytest.mark.parametrize("argv,message", [
    (["--budgets", "1,x"], "error: --budgets: expected integers like 0,1,2,4, got '1,x'"),
    (["--budgets", "0,-1"], "error: --budgets must be >= 0, got '0,-1'"),
    (["--budgets", "1", "--budget", "1"], "error: --budget and --budgets: give one"),
    ([], "error: give --budget M (or --budgets B,B,... for a sweep)"),
    (["--budget", "1", "--planners", "greedy"],
     "error: --planners goes with --budgets (a sweep); one plan takes --planner"),
    (["--budgets", "1", "--planners", "greedy,nope"], "error: unknown planner 'nope'"),
])
def test_sweep_bad_input_is_one_line(tmp_path, capsys, argv, message):
    assert main(["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "4", *argv,
                 "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err
