"""Placing several jobs: the table's planners on a job set, the greedy's prefixes, the
pipeline."""

import random

import pytest

from controller.plan.jobs import JobEntry
from controller.plan.joint import greedy_jobs, joint_plan, prefix
from controller.plan.lp import PlanError
from controller.plan.lp_jobs import FastJointLP, make_jobset
from controller.plan.pipeline import PlanRequest, make_plan, plan_several_jobs
from controller.plan.placement import as_jobs
from controller.plan.planners import PLANNERS, several_planners
from topo.models import parse_topology

# fat-tree k=4: job a's PS h0 (edge0), workers in pods 1-3; job b's PS h4 (edge2)
SPECS = [JobEntry("a", "h0", ("h5", "h9", "h13")), JobEntry("b", "h4", ("h1", "h8", "h12"))]


@pytest.fixture(scope="module")
def js():
    return make_jobset(parse_topology("fattree:4"), SPECS, result_load=True)


def test_the_simple_planners_place_a_job_set_by_hand(js):
    """The table's planners take the job set: every switch of fat-tree k=4 has degree 4, so
    top_degree is name order without the PSs' ToRs edge0 and edge2: agg0 … agg7, then
    core0 …; random is Random(7)'s draw; the joint LP scores the set."""
    assert js.tors == ["edge0", "edge2"]
    lp = FastJointLP(js)
    jobs = as_jobs(js, lp=lp)
    top = PLANNERS["top_degree"](jobs, 3)
    assert top.deployed == ("agg0", "agg1", "agg2")
    assert top.gamma == pytest.approx(lp(["agg0", "agg1", "agg2"]).score[0])
    assert PLANNERS["tor_only"](jobs, 5).deployed == ()
    pool = [s for s in ("agg0 agg1 agg2 agg3 agg4 agg5 agg6 agg7 core0 core1 core2 core3 "
                        "edge1 edge3 edge4 edge5 edge6 edge7").split()]
    drawn = random.Random(7).sample(pool, 4)
    got = PLANNERS["random"](jobs, 4, seed=7).deployed
    assert sorted(got) == sorted(drawn) and len(got) == 4
    with pytest.raises(PlanError, match="rounding places one job; several jobs .* one of "
                                        "greedy, exact, top_degree, random, tor_only"):
        make_plan(js.graph, PlanRequest(budget=2, planner="rounding"), jobs=SPECS)
    with pytest.raises(PlanError):
        PLANNERS["top_degree"](jobs, -1)


def test_every_planner_places_several_jobs_or_says_it_cannot(js):
    """``--jobs`` works with every planner of the table, or the planner declared it places
    one job: no planner silently plans something else."""
    assert several_planners() == ["greedy", "exact", "top_degree", "random", "tor_only", "best",
                                  "tor_all"]
    jobs = as_jobs(js)
    for name in several_planners():
        p = PLANNERS[name](jobs, 2, seed=1)
        assert len(p.deployed) <= 2 and p.gamma > 0
        assert p.gamma == pytest.approx(jobs.solve(p.deployed).score[0], rel=1e-6)
    with pytest.raises(PlanError, match="places one job"):
        PLANNERS["rounding"](jobs, 2)


def test_exact_on_a_job_set_is_the_best_pair(js):
    """exact for two jobs: no pair of candidates has a better joint score than its choice,
    and the greedy is no better than it."""
    jobs = as_jobs(js)
    best = PLANNERS["exact"](jobs, 1)
    for s in jobs.candidates():
        assert not jobs.better(jobs.solve([s]), best.lp)
    assert PLANNERS["greedy"](jobs, 1).gamma <= best.gamma * (1 + 1e-6)


def test_greedy_prefix_is_the_smaller_budgets_greedy(js):
    big = greedy_jobs(js, 3)
    lp = FastJointLP(js)
    for b in (0, 1, 2):
        small = greedy_jobs(js, b)
        cut = prefix(big, b, lp)
        assert cut.deployed == small.deployed
        assert cut.history == small.history
        assert cut.result.gammas == pytest.approx(small.result.gammas, rel=1e-6, abs=1e-9)


def test_greedy_continues_from_a_smaller_budgets_choices():
    """Two jobs of 6 workers each (PSs h0, h1; workers every other host from h2, h3): the
    greedy chooses 5 switches, then nothing improves."""
    g = parse_topology("fattree:4")
    specs = [JobEntry(f"j{j}", f"h{j}", tuple(f"h{2 + j + 2 * i}" for i in range(6)))
             for j in range(2)]
    js = make_jobset(g, specs)
    lp = FastJointLP(js)
    full = greedy_jobs(js, 3)
    one = greedy_jobs(js, 1)
    more = greedy_jobs(js, 3, start=one.deployed)
    assert len(full.deployed) == 3 and more.deployed == full.deployed and more.budget == 3
    assert [s for s, _ in more.history] == [s for s, _ in full.history]
    assert more.result.gammas == pytest.approx(full.result.gammas, rel=1e-6, abs=1e-9)
    assert full.covers(3) and not full.covers(4)
    with pytest.raises(PlanError, match="a greedy run for budget 1 has no plan for 2"):
        prefix(one, 2, lp)
    # a run that stopped before its budget (nothing improved) is the plan of every larger one
    stopped = greedy_jobs(js, 8)
    assert len(stopped.deployed) == 5 and stopped.covers(1000)
    assert prefix(stopped, 1000, lp).deployed == stopped.deployed
    assert stopped.deployed[:3] == full.deployed
    with pytest.raises(PlanError, match="greedy start"):
        greedy_jobs(js, 1, start=("agg0", "agg1"))
    with pytest.raises(PlanError, match="greedy start"):
        greedy_jobs(js, 2, start=("edge0",))  # a PS's ToR is no candidate


def test_pipeline_places_several_jobs_with_any_joint_planner():
    g = parse_topology("fattree:4")
    top = make_plan(g, PlanRequest(budget=2, planner="top_degree", baselines=False),
                    jobs=SPECS)
    assert top.deployed == ["agg0", "agg1"] and top.planner == "top_degree"
    assert top.greedy == []
    greedy = make_plan(g, PlanRequest(budget=2, baselines=False), jobs=SPECS)
    planned = greedy_jobs(make_jobset(g, SPECS, result_load=True), 3)
    cut = plan_several_jobs(g, SPECS, PlanRequest(budget=2, baselines=False), planned=planned)
    assert cut.deployed == greedy.deployed == list(planned.deployed[:2])
    assert cut.min_gamma_per_weight == pytest.approx(greedy.min_gamma_per_weight)
    js = make_jobset(g, SPECS, result_load=True)
    assert top.sum_gamma == pytest.approx(sum(FastJointLP(js)(["agg0", "agg1"]).gammas.values()))
    with pytest.raises(PlanError, match="one of greedy, exact, top_degree, random, tor_only"):
        make_plan(g, PlanRequest(budget=2, planner="rounding"), jobs=SPECS)
    none = joint_plan(g, SPECS, 2, planner="tor_only", alone=False)
    assert none.deployed == [] and none.programmable == ["edge0", "edge2"]


def test_each_job_keeps_only_the_switches_it_aggregates_on(monkeypatch):
    """fat-tree k=4, budget 0, RESULT load counted, job a (PS h0 on edge0; workers h8, h12,
    h14 in pods 2 and 3) and b (PS h4 on edge2; h10, h11, h15).  With ToR sharing each
    job's S_j holds the other's PS ToR with an empty interval, and its RESULT tree still
    goes there: a's RESULTs (γ) join b's GRADs on agg2→edge2, where ECMP puts half of b's
    3γ, so 1.5γ + γ ≤ 1 and γ = 0.4 for both.  Allowed only where it aggregates (nowhere
    but its own ToR), each tree keeps to its workers; the binding links are then core0→agg4
    and core0→agg6, carrying both jobs' RESULTs (γ_a + γ_b ≤ 1), under the 2/3 of 3γ into a
    PS ToR over two links: γ = 0.5."""
    import controller.plan.joint as joint
    from controller.plan.mcast_tree import result_tree

    g = parse_topology("fattree:4")
    specs = [JobEntry("a", "h0", ("h8", "h12", "h14")), JobEntry("b", "h4", ("h10", "h11", "h15"))]
    with monkeypatch.context() as m:
        m.setattr(joint, "used_only", lambda js, res, lp, objective="maxmin": res)
        before = joint_plan(g, specs, 0, alone=False, result_load=True)
    after = joint_plan(g, specs, 0, alone=False, result_load=True)
    assert before.jobs["a"].deployed == ["edge2"] and before.jobs["b"].deployed == ["edge0"]
    assert before.jobs["a"].intervals["edge2"]["length"] < joint.USED
    assert after.jobs["a"].deployed == [] and after.jobs["b"].deployed == []
    for name, other in (("a", "edge2"), ("b", "edge0")):
        assert before.jobs[name].gamma == pytest.approx(0.4, abs=1e-6)
        assert after.jobs[name].gamma == pytest.approx(0.5, abs=1e-6)
        j = after.jobs[name]
        tree = result_tree(g, j.ps_tor, j.workers, j.deployed)
        was = result_tree(g, j.ps_tor, j.workers, before.jobs[name].deployed)
        assert other in was and other not in tree and set(tree) < set(was)


def test_a_used_only_resolve_past_its_limit_keeps_the_solved_plan():
    """When the re-solve restricted to the used switches fails (the solver's time limit),
    :func:`used_only` keeps the joint LP's solution it was given instead of refusing the
    plan; the same case as above, where there is something to trim."""
    from controller.plan.joint import used_only

    g = parse_topology("fattree:4")
    specs = [JobEntry("a", "h0", ("h8", "h12", "h14")), JobEntry("b", "h4", ("h10", "h11", "h15"))]
    js = make_jobset(g, specs, result_load=True)
    lp = FastJointLP(js)
    res = lp([])  # budget 0: each job's S_j is the other's PS ToR, with an empty interval
    calls: list[dict] = []

    def failing(deployed, **kw):
        calls.append(kw)
        raise PlanError("LP for S = {...} not solved (time limit reached or solver error)")

    assert used_only(js, res, failing) is res
    assert calls and calls[0]["allow"]  # it did try: something was to trim
    assert used_only(js, res, lp) is not res


def test_a_bound_lp_past_its_limit_leaves_the_plan_without_the_check(monkeypatch):
    """The greedy stops before its budget, so the plan solves the joint LP with every
    candidate programmable to check the bound; when that LP fails (at k=32 it hits its time
    limit: no symmetry is left to merge), the plan is made without the check, not refused."""
    from controller.plan import lp_jobs
    from controller.plan.lp import PlanError

    g = parse_topology("fattree:4")
    calls: list[int] = []
    real = lp_jobs.FastJointLP.__call__

    def call(self, deployed, **kw):
        if len(deployed) > 10:  # the bound's S: every candidate
            calls.append(len(deployed))
            raise PlanError("LP for S = {...} not solved (time limit reached or solver error)")
        return real(self, deployed, **kw)

    monkeypatch.setattr(lp_jobs.FastJointLP, "__call__", call)
    plan = joint_plan(g, SPECS, 12, alone=False, result_load=True)
    assert calls and len(plan.deployed) < 12 and plan.warning is None
    assert plan.min_gamma_per_weight > 0


def test_the_bound_check_is_skipped_past_its_size(monkeypatch):
    """Past BOUND_MAX_CANDIDATES candidates the all-programmable LP is not even tried."""
    import controller.plan.joint as joint
    from controller.plan import lp_jobs

    g = parse_topology("fattree:4")
    sizes: list[int] = []
    real = lp_jobs.FastJointLP.__call__

    def call(self, deployed, **kw):
        sizes.append(len(deployed))
        return real(self, deployed, **kw)

    monkeypatch.setattr(lp_jobs.FastJointLP, "__call__", call)
    monkeypatch.setattr(joint, "BOUND_MAX_CANDIDATES", 5)
    plan = joint_plan(g, SPECS, 12, alone=False, result_load=True)
    assert len(plan.deployed) < 12 and max(sizes) < 12 and plan.warning is None
