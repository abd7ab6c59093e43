"""The joint LP on a matrix (FastJointLP) against the PuLP reference (solve_jobs_lp).

Same γ_j for every S on several networks, objectives, weights, capacities and the RESULT
term; a feasible solution (every link within its bandwidth, every capacity kept); the
joint greedy choosing the same switches either way.
"""

import pytest

from controller.plan.jobs import JobEntry, jobs_from_count
from controller.plan.joint import greedy_jobs
from controller.plan.lp import PlanError
from controller.plan.lp_jobs import FastJointLP, joint_candidates, make_jobset, solve_jobs_lp
from topo.models import parse_topology


def _spread(graph, n_jobs, per_job, stride):
    """Job j's PS is host j, its workers hosts n_jobs + j + stride·i (i < per_job)."""
    hs = sorted((n for n, k in graph.nodes(data="kind") if k == "host"),
                key=lambda h: int(h[1:]))
    return [JobEntry(f"j{j}", hs[j], tuple(hs[n_jobs + j + stride * i] for i in range(per_job)))
            for j in range(n_jobs)]


CASES = {
    "fattree4 3 jobs dealt": lambda g: (jobs_from_count(g, 3), {}),
    "fattree4 2 jobs weights": lambda g: (
        [JobEntry("a", "h0", ("h4", "h5", "h8", "h13"), 1.0),
         JobEntry("b", "h1", ("h6", "h9", "h12", "h15"), 3.0)], {}),
    "fattree4 capacity": lambda g: (jobs_from_count(g, 2), {"capacity": 2.5}),
    "fattree4 result load": lambda g: (_spread(g, 2, 5, 3), {"result_load": True}),
    "fattree4 no tor sharing": lambda g: (jobs_from_count(g, 4), {"tor_sharing": False}),
}


def _check_feasible(js, res):
    g = js.graph
    for (u, v), x in res.loads.items():
        assert x <= float(g.edges[u, v].get("bw", 1.0)) * (1 + 1e-7) + 1e-6, (u, v, x)
    for r in res.results:
        assert sum(r.a.values()) <= r.gamma * (1 + 1e-7) + 1e-6
        for (_w, s), x in r.x.items():
            assert x <= r.a[s] * (1 + 1e-7) + 1e-6


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("objective", ["maxmin", "sum"])
def test_fast_joint_lp_equals_pulp(case, objective):
    g = parse_topology("fattree:4")
    specs, kw = CASES[case](g)
    js = make_jobset(g, specs, **kw)
    fast = FastJointLP(js)
    cands = joint_candidates(js)
    for S in ([], cands[:1], cands[2:5], cands[::3], cands):
        ref = solve_jobs_lp(js, S, objective=objective)
        got = fast(S, objective=objective)
        for n in js.names:
            assert got.gammas[n] == pytest.approx(ref.gammas[n], rel=1e-6, abs=1e-6), (S, n)
        assert got.deployed == ref.deployed
        assert got.solver.startswith("HiGHS (highspy")
        assert got.lp_solves >= 2
        _check_feasible(js, got)


def test_fast_joint_lp_hand_value():
    """Two jobs on leaf-spine 2,1,2 (4 hosts): job a = PS h0, worker h1 (both on leaf0),
    job b = PS h2, worker h3 (both on leaf1).  Nothing is shared: each job's worker reaches
    its PS over its own two host links (bandwidth 1), so γ_a = γ_b = 1 for any S."""
    g = parse_topology("leafspine:2,1,2")
    js = make_jobset(g, [JobEntry("a", "h0", ("h1",)), JobEntry("b", "h2", ("h3",))])
    res = FastJointLP(js)([], objective="maxmin")
    assert res.gammas == pytest.approx({"a": 1.0, "b": 1.0})


@pytest.mark.parametrize(("objective", "jobs"), [("maxmin", (3, 4, 3)), ("maxmin", (2, 6, 2)),
                                                ("sum", (2, 5, 3)), ("sum", (2, 6, 2))])
def test_joint_greedy_fast_picks_what_pulp_picks(objective, jobs):
    g = parse_topology("fattree:4")
    js = make_jobset(g, _spread(g, *jobs))
    # the LP engines compared on the exhaustive greedy (lazy=False): the lazy one's ties may
    # break another way (tests/test_plan_lazy_joint.py compares the two greedies)
    ref = greedy_jobs(js, 3, objective=objective, fast=False, lazy=False)
    got = greedy_jobs(js, 3, objective=objective, lazy=False)
    assert got.deployed == ref.deployed
    assert [s for s, _ in got.history] == [s for s, _ in ref.history]
    for a, b in zip(got.result.gammas.values(), ref.result.gammas.values(), strict=True):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-6)


def test_fast_joint_lp_bad_input_is_one_line():
    g = parse_topology("fattree:4")
    js = make_jobset(g, jobs_from_count(g, 2))
    lp = FastJointLP(js)
    with pytest.raises(PlanError, match="unknown objective"):
        lp([], objective="median")
    with pytest.raises(PlanError, match="PS's ToR"):
        lp([js.tors[0]])
    with pytest.raises(PlanError, match="unknown solver"):
        FastJointLP(js, solver="glpk")([])
