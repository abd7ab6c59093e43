"""One option group for the plan request of ``plan``, ``run`` and ``simulate``
(controller.plan.options), and the planner that is honest (issue 38 item 6): a plan says in
one line when a baseline beats its planner or its budget went unused below the bound."""

from __future__ import annotations

import pytest

from controller.cli.main import build_parser, main
from controller.experiment.methods.ina.core import Settings, plan_request
from controller.experiment.methods.ina.options import settings_from_args
from controller.plan.baselines import honesty_warning
from controller.plan.document import load_plan
from controller.plan.jobs import jobs_argument
from controller.plan.options import DEFAULTS, request_from_args
from controller.plan.pipeline import PlanRequest, make_plan
from topo.models import parse_topology

PLAN_OPTS = ["--planner", "exact", "--seed", "3", "--max-combinations", "77",
             "--capacity", "2.5", "--solver", "highs", "--time-limit", "9",
             "--no-result-load", "--objective", "sum", "--budget", "1"]


def test_plan_run_and_simulate_build_the_same_request():
    """The same options give the same PlanRequest whichever command reads them."""
    parser = build_parser()
    plan = request_from_args(parser.parse_args(["plan", "--topo", "fattree:4", "--ps", "h0",
                                                "--workers", "3", "--out", "p.json",
                                                *PLAN_OPTS]), spec="fattree:4")
    run = plan_request(settings_from_args(parser.parse_args(["run", *PLAN_OPTS])))
    sim = plan_request(settings_from_args(parser.parse_args(["simulate", *PLAN_OPTS])))
    assert plan == run == sim
    assert plan == PlanRequest(budget=1, planner="exact", result_load=False, capacity=2.5,
                               objective="sum", solver="highs", time_limit=9.0, seed=3,
                               max_combinations=77, spec="fattree:4")


def test_run_plans_with_plans_defaults():
    """No second set of defaults: a run's request is plan's (max_combinations 2000, not 500)."""
    s = Settings()
    assert plan_request(s) == PlanRequest(budget=s.budget, spec=s.topo)
    assert plan_request(s).max_combinations == DEFAULTS.max_combinations == 2000


def test_run_refuses_a_bad_plan_option_in_one_line(capsys):
    assert main(["run", "--capacity", "0", "--out", "/nonexistent/x"]) == 2
    assert capsys.readouterr().err.strip() == "error: --capacity must be > 0, got 0.0"


@pytest.mark.parametrize("kw,expected", [
    ({}, None),  # the best of the table, budget used: nothing to say
    ({"baselines": {"exact": 1.0, "random": 0.9, "ps_only": 2.0, "all_programmable": 3.0}},
     "warning: baseline exact reaches γ 1 (also random), above greedy's 0.8571"),
    ({"deployed": ["a"], "bound": 1.0},
     "warning: greedy used 1 of budget 2 switches with 2 candidates left, and γ 0.8571 is "
     "below the all-programmable 1"),
    ({"deployed": ["a"], "bound": 0.8571428571428571}, None),  # stopped at the bound
    ({"deployed": ["a", "b", "c"], "budget": 5, "bound": 1.0}, None),  # no candidate left
])
def test_honesty_warning_by_hand(kw, expected):
    args = {"budget": 2, "deployed": ["a", "b"], "candidates": ["a", "b", "c"],
            "baselines": {"exact": 6 / 7, "tor_only": 0.4}, "bound": None, **kw}
    assert honesty_warning("greedy", 6 / 7, **args) == expected


def test_plan_warns_when_its_own_baseline_beats_the_greedy(tmp_path, capsys):
    """leafspine:3,2,2, PS h0, 5 workers, budget 2, RESULT load counted: the greedy takes
    leaf1 then leaf2 (γ 6/7) while {spine0, spine1} reaches 1.0 (exact's and rounding's
    rows).  With --no-polish the greedy's plan is kept and one line says so; by default the
    plan is polished from rounding's set (γ 1) and there is nothing to warn about."""
    out = tmp_path / "p.json"
    args = ["plan", "--topo", "leafspine:3,2,2", "--ps", "h0", "--workers", "5", "--budget", "2"]
    assert main([*args, "--no-polish", "--out", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["warning: baseline exact reaches γ 1 (also rounding), above greedy's 0.8571"]
    plan = load_plan(out)
    assert plan.deployed == ["leaf1", "leaf2"] and plan.job.gamma == pytest.approx(6 / 7)
    assert plan.warning == err[0]
    assert main([*args, "--out", str(out)]) == 0
    assert capsys.readouterr().err.strip() == ""
    plan = load_plan(out)
    assert plan.job.gamma == pytest.approx(1) and plan.warning is None
    assert plan.local_search["from"] == "rounding"


def test_plan_warns_when_the_budget_goes_unused(tmp_path, capsys):
    """tor_only with budget 2 on make run's job: nothing deployed, γ 0.4, below both the
    all-programmable bound and the baselines; one line names both."""
    out = tmp_path / "p.json"
    assert main(["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "6",
                 "--budget", "2", "--planner", "tor_only", "--out", str(out)]) == 0
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("warning: baseline exact reaches γ 1 (also ")
    assert "greedy" in line and "above tor_only's 0.4;" in line
    assert line.endswith("tor_only used 0 of budget 2 switches with 19 candidates left, and "
                         "γ 0.4 is below the all-programmable 1")


def test_several_jobs_warn_when_the_budget_goes_unused():
    g = parse_topology("fattree:4")
    quiet = make_plan(g, PlanRequest(budget=2, baselines=False), jobs=jobs_argument("2", g))
    assert quiet.warning is None
    idle = make_plan(g, PlanRequest(budget=2, planner="tor_only", baselines=False), jobs=jobs_argument("2", g))
    assert idle.warning is not None and "tor_only used 0 of budget 2" in idle.warning


def test_run_warns_through_its_plan_step(tmp_path, capsys):
    """run's planning step (ina.core.plan_job, no network started) prints the same line
    when asked for the greedy's own plan (``polish=False``)."""
    from controller.experiment.methods.ina.core import plan_job
    from controller.options import read_topology

    s = Settings(topo="leafspine:3,2,2", ps="h0", workers="5", budget=2, polish=False)
    plan = plan_job(s, read_topology(s.topo), tmp_path)
    assert capsys.readouterr().err.strip() == plan.warning == (
        "warning: baseline exact reaches γ 1 (also rounding), above greedy's 0.8571")
    assert load_plan(tmp_path / "plan.json").warning == plan.warning
