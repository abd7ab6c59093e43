"""The ``best`` planner (controller/plan/planners.py, issue 41 item 4): never below any
baseline of its own table (``exact`` aside), on the known cases where the greedy loses and
on random networks; and the local search never worsens its start."""

import pytest
from test_plan_lazy import random_job

from controller.plan.baselines import all_baselines, beaten_by
from controller.plan.local_search import local_search, moves
from controller.plan.lp import candidates, make_job, solve_lp
from controller.plan.lp_fast import FastLP
from controller.plan.placement import as_jobs
from controller.plan.planners import best
from topo.models import hosts, parse_topology


def first_job(spec, n, **kw):
    g = parse_topology(spec)
    return make_job(g, "h0", [h for h in hosts(g) if h != "h0"][:n], **kw)


def never_beaten(job, budget, seed=0):
    """best's γ against the baselines table computed independently (no reuse)."""
    fast = FastLP(job)
    placed = best(job, budget, lp=fast, seed=seed)
    table = all_baselines(job, budget, lp=FastLP(job), seed=seed, skip=())
    gammas = {k: v["gamma"] for k, v in table.items() if k != "exact"}
    assert beaten_by(placed.gamma, gammas, rel_tol=1e-9) == []
    assert placed.gamma == pytest.approx(solve_lp(job, placed.deployed).gamma, rel=1e-7)
    return placed, table


def test_leafspine_where_the_greedy_loses():
    """leafspine:3,2,2, PS h0, 5 workers, budget 2, RESULT load: greedy 6/7 ({leaf1, leaf2}),
    rounding and exact 1 ({spine0, spine1}); best reaches 1 too."""
    job = first_job("leafspine:3,2,2", 5, result_load=True)
    placed, table = never_beaten(job, 2)
    assert table["greedy"]["gamma"] == pytest.approx(6 / 7)
    assert placed.gamma == pytest.approx(1.0) == table["exact"]["gamma"]
    assert set(placed.deployed) == {"spine0", "spine1"}


def test_make_runs_network():
    """fattree:4, h1–h6, budget 2 (make run's): greedy 0.75 on {edge1, agg0}, best 1 on
    {agg0, agg1} (docs/results.md's table: exact's)."""
    job = first_job("fattree:4", 6, result_load=True)
    placed, table = never_beaten(job, 2)
    assert table["greedy"]["gamma"] == pytest.approx(0.75)
    assert placed.gamma == pytest.approx(1.0) and placed.deployed == ("agg0", "agg1")


def test_fattree8_where_top_degree_wins():
    """fat-tree k=8, 32 workers, budget 4: greedy 0.858, top_degree 0.941 (issue 41)."""
    job = first_job("fattree:8", 32, result_load=True)
    placed = best(job, 4, lp=FastLP(job), max_lps=60)
    assert placed.starts["greedy"].gamma == pytest.approx(0.8582375478927203)
    assert placed.starts["top_degree"].gamma == pytest.approx(0.9411764705882354)
    assert placed.gamma >= 0.9411764705882354 - 1e-9


@pytest.mark.parametrize("seed", range(25))
def test_never_beaten_on_random_networks(seed):
    job = random_job(seed)
    never_beaten(job, 2, seed=seed)


def test_local_search_never_worsens_and_reaches_a_local_optimum():
    job = first_job("fattree:4", 6, result_load=True)
    p = as_jobs(job, lp=FastLP(job))
    found = local_search(p, ["edge1", "agg0"], 2)
    assert found.local_optimum and found.result.gamma == pytest.approx(1.0)
    assert found.moves[0][0] in ("swap", "add", "drop")
    # no move from the result is better
    for _, S in moves(list(found.deployed), candidates(job), 2):
        assert not p.better(p.solve(S), found.result)
    # a zero LP budget returns the start unchanged
    same = local_search(p, ["edge1", "agg0"], 2, max_lps=0)
    assert same.deployed == ("edge1", "agg0") and same.moves == []


def test_moves_by_hand():
    got = [m for m, _ in moves(["b"], ["a", "b", "c"], 2)]
    assert got == [("swap", "b", "a"), ("swap", "b", "c"), ("add", "a"), ("add", "c"),
                   ("drop", "b")]
    assert [S for _, S in moves(["b", "c"], ["a", "b", "c"], 2)][:2] == [["a", "c"], ["b", "a"]]


def test_baselines_table_has_a_time_budget():
    """Once the table's time budget is spent, the remaining planner rows are skipped with a
    note saying so (plan never stalls on its baselines); rows already known are kept."""
    job = first_job("fattree:4", 6, result_load=True)
    fast = FastLP(job)
    table = all_baselines(job, 2, lp=fast, seconds=0.0)
    assert table["ps_only"]["gamma"] > 0 and table["all_programmable"]["gamma"] == 1.0
    for name in ("exact", "top_degree", "random", "tor_only", "rounding"):
        assert table[name]["gamma"] is None
        assert table[name]["note"] == "skipped: the baselines' time budget (0 s) is spent"
    placed = best(job, 2, lp=fast)
    kept = all_baselines(job, 2, lp=fast, seconds=0.0, skip=("best",), known=placed.starts)
    assert kept["greedy"]["gamma"] == pytest.approx(0.75) and kept["exact"]["gamma"] is None


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_best_of_several_jobs_is_never_below_a_joint_planner(budget):
    """With --jobs, best compares joint scores (min_j γ_j / w_j first): ≥ each planner's."""
    from controller.plan.jobs import jobs_argument
    from controller.plan.lp_jobs import better_score, make_jobset
    from controller.plan.planners import PLANNERS, several_planners

    g = parse_topology("fattree:4")
    js = make_jobset(g, jobs_argument("2", g), result_load=True)
    placed = best(js, budget, seed=1)
    assert "rounding" not in placed.starts  # one job only: not run
    for name in several_planners():
        if name in ("best", "exact"):
            continue
        other = PLANNERS[name](js, budget, seed=1)
        assert not better_score(other.lp.score, placed.lp.score), name


# ---------------------------------------------------------------- the default, polished


def polished_never_beaten(graph, ps, workers, budget):
    """plan_one_job with ``polish``: γ ≥ every baseline of its table but exact, and the γ
    of its own deployment (an honest LP value)."""
    from controller.plan.pipeline import PlanRequest, plan_one_job

    plan = plan_one_job(graph, ps, workers, PlanRequest(budget=budget, polish=True))
    gammas = {k: v["gamma"] for k, v in plan.baseline_details.items() if k != "exact"}
    assert beaten_by(plan.job.gamma, gammas, rel_tol=1e-9) == []
    job = make_job(graph, ps, list(workers), result_load=True)
    assert plan.job.gamma == pytest.approx(solve_lp(job, plan.deployed).gamma, rel=1e-7)
    return plan


@pytest.mark.parametrize("spec,n,budget,greedy_gamma,polished", [
    ("fattree:4", 6, 2, 0.75, 1.0),  # make run's job: top_degree's {agg0, agg1}
    ("leafspine:3,2,2", 5, 2, 6 / 7, 1.0),  # rounding's {spine0, spine1}
    ("fattree:8", 32, 4, 0.858238, 0.941176),  # top_degree's
])
def test_polish_lifts_the_default_where_a_baseline_beats_it(spec, n, budget, greedy_gamma,
                                                            polished):
    g = parse_topology(spec)
    workers = [h for h in hosts(g) if h != "h0"][:n]
    plan = polished_never_beaten(g, "h0", workers, budget)
    assert plan.local_search["gamma_greedy"] == pytest.approx(greedy_gamma, rel=1e-5)
    assert plan.job.gamma == pytest.approx(polished, rel=1e-5)
    assert plan.warning is None


def test_polish_leaves_a_plan_no_baseline_beats():
    """make plan's job (fattree:4, 8 workers, budget 2): greedy 0.8235 = exact, no search."""
    g = parse_topology("fattree:4")
    plan = polished_never_beaten(g, "h0", [h for h in hosts(g) if h != "h0"][:8], 2)
    assert plan.local_search is None and plan.job.gamma == pytest.approx(14 / 17)


@pytest.mark.parametrize("seed", range(30))
def test_polished_default_never_below_a_baseline_on_random_networks(seed):
    job = random_job(seed)
    polished_never_beaten(job.graph, job.ps, job.workers, 2)
