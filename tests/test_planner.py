"""Planner: LP values against hand-computed ones, greedy vs baselines, fast path == plain."""

import pytest

from controller.plan.baselines import all_baselines, exact_optimum, random_set, top_degree_set
from controller.plan.greedy import greedy
from controller.plan.lp import PlanError, candidates, make_job, ps_only, solve_lp
from controller.plan.lp_fast import FastLP
from topo.models import from_dict, hosts, parse_topology


def leaf_spine_job(w1_bw=1.0, capacity=None):
    """leaf1: w1..w4; leaf2: ps; one spine; all capacities 1 (w1's access link w1_bw)."""
    ws = ["w1", "w2", "w3", "w4"]
    links = [{"a": w, "b": "leaf1", "bw": w1_bw if w == "w1" else 1.0} for w in ws]
    links += [{"a": "ps", "b": "leaf2"}, {"a": "leaf1", "b": "spine"},
              {"a": "leaf2", "b": "spine"}]
    g = from_dict({"hosts": ws + ["ps"], "switches": ["leaf1", "leaf2", "spine"],
                   "links": links}, "ls.json")
    return make_job(g, "ps", ws, capacity=capacity)


def test_leaf_spine_by_hand():
    job = leaf_spine_job()
    assert job.ps_tor == "leaf2"
    # PS-only: leaf2->ps carries 4γ (and leaf1->spine too) -> γ = 1/4
    assert ps_only(job)[0] == pytest.approx(0.25)
    # ToR-only: leaf1->spine carries all 4 raw streams -> 1/4
    assert solve_lp(job, []).gamma == pytest.approx(0.25)
    # the spine is behind the bottleneck: still 1/4
    assert solve_lp(job, ["spine"]).gamma == pytest.approx(0.25)
    res = greedy(job, 1)
    assert res.deployed == ("leaf1",)
    assert res.gamma == pytest.approx(1.0)
    # every worker sends everything to leaf1, which sends one stream: each link carries γ
    assert all(res.lp.x[w, "leaf1"] == pytest.approx(1.0) for w in job.workers)
    assert res.lp.a["leaf1"] == pytest.approx(1.0)
    loads = res.lp.loads
    for e in [("w1", "leaf1"), ("w4", "leaf1"), ("leaf1", "spine"), ("spine", "leaf2"),
              ("leaf2", "ps")]:
        assert loads[e] == pytest.approx(1.0)
    assert ("leaf2", "spine") not in loads
    # budget 2: nothing improves on 1.0 (the access links bind) -> early stop
    assert greedy(job, 2).deployed == ("leaf1",)


def test_worker_access_link_bound_is_reached():
    # w1's uplink carries Σ_s x + u = γ whatever the routing, so γ <= 0.5, and leaf1
    # removes every other bottleneck: γ must equal the bound exactly.
    job = leaf_spine_job(w1_bw=0.5)
    res = greedy(job, 3)
    assert res.gamma == pytest.approx(0.5, abs=1e-9)
    assert res.lp.loads[("w1", "leaf1")] == pytest.approx(0.5)
    assert all_baselines(job, 3)["all_programmable"]["gamma"] == pytest.approx(0.5)


def test_switch_capacity_by_hand():
    # C_s = 2 everywhere, S = {leaf1}: Σ_w x ≤ 2, x ≤ a, leaf1->spine: Σu + a ≤ 1.
    # γ ≤ 0.5 with a = γ is capacity-bound; beyond, Σx = 2 needs a ≥ 1/2 and then
    # 4γ − 2 + 1/2 ≤ 1 gives γ = 5/8 (x = a = 1/2, u = 1/8).
    job = leaf_spine_job(capacity=2.0)
    for lp in (solve_lp, FastLP(job)):
        res = lp(job, ["leaf1"])
        assert res.gamma == pytest.approx(5 / 8)
        assert res.a["leaf1"] == pytest.approx(0.5)
    # ToR capacity 0.1, S = ∅: Σ_w u_w = 4γ ≤ 0.1
    job = leaf_spine_job(capacity=0.1)
    assert solve_lp(job, []).gamma == pytest.approx(0.025)


def fat_tree_job(workers=None):
    g = parse_topology("fattree:4")
    return make_job(g, "h0", workers or hosts(g)[1:])


def test_fat_tree_k4_by_hand():
    job = fat_tree_job()
    # PS-only: edge0->h0 carries all 15 streams.
    assert ps_only(job)[0] == pytest.approx(1 / 15)
    # ToR-only: the 14 workers outside edge0 reach edge0 only over agg0->edge0 and
    # agg1->edge0, split evenly by ECMP: 7γ each -> γ = 1/7.
    tor = solve_lp(job, [])
    assert tor.gamma == pytest.approx(1 / 7)
    assert tor.loads[("agg0", "edge0")] == pytest.approx(1.0)
    # Budget 1: agg2 (pod 1, index 0).  Bound: a_agg2 reaches edge0 only through
    # core0/core1 -> agg0 -> edge0, and agg0->edge0 also carries half of the raw streams of
    # the 14 remote workers: a + ½(14γ − Σ_pod1 x − Σ_other x) ≤ 1 with Σ_pod1 x ≤ 4a and
    # Σ_other x ≤ 2 (core0/core1 -> agg2 links), so 7γ − a ≤ 2, and a ≤ γ gives γ ≤ 1/3,
    # reached with a = γ.  It is also the exact optimum over single switches.
    res = greedy(job, 1)
    assert res.deployed == ("agg2",)
    assert res.gamma == pytest.approx(1 / 3)
    assert exact_optimum(job, 1).gamma == pytest.approx(1 / 3)
    assert res.lp.loads[("agg0", "edge0")] == pytest.approx(1.0)
    # only the two workers h2, h3 under edge1: ToR-only each agg->edge0 link carries γ
    two = fat_tree_job(["h2", "h3"])
    assert ps_only(two)[0] == pytest.approx(0.5)
    assert solve_lp(two, []).gamma == pytest.approx(1.0)


def test_bcube_by_hand():
    g = parse_topology("bcube:4,2")
    job = make_job(g, "h0", ["h1", "h2", "h3"])
    assert job.ps_tor == "bc0_0"
    # PS-only: bc0_0->h0 carries 3γ; ToR-only: every link carries γ -> 1.
    assert ps_only(job)[0] == pytest.approx(1 / 3)
    assert solve_lp(job, []).gamma == pytest.approx(1.0)
    # No other switch can carry traffic without relaying through a server: no candidates.
    assert candidates(job) == []
    assert greedy(job, 2).deployed == ()
    with pytest.raises(PlanError, match="'h6' cannot reach the PS's switch 'bc0_0'"):
        make_job(g, "h0", ["h1", "h6"])


def test_dumbbell_by_hand():
    g = parse_topology("dumbbell:3,1")
    job = make_job(g, "h3", ["h0", "h1", "h2"])
    assert ps_only(job)[0] == pytest.approx(1 / 3)  # the bottleneck carries 3γ
    assert solve_lp(job, []).gamma == pytest.approx(1 / 3)
    res = greedy(job, 1)
    assert res.deployed == ("left",) and res.gamma == pytest.approx(1.0)


def test_cbc_agrees_with_highs():
    job = fat_tree_job()
    assert solve_lp(job, ["agg2", "core2"], solver="cbc").gamma == pytest.approx(
        solve_lp(job, ["agg2", "core2"], solver="highs").gamma, rel=1e-6)


@pytest.mark.parametrize("kwargs,needle", [
    ({"ps": "nope"}, "unknown PS node 'nope'"),
    ({"ps": "edge0"}, "is a switch"),
    ({"workers": ["h0", "h1"]}, "PS 'h0' is also listed as a worker"),
    ({"workers": ["h1", "zz"]}, "unknown worker node 'zz'"),
    ({"workers": ["h1", "h1"]}, "listed twice"),
    ({"workers": []}, "no workers"),
    ({"capacity": 0.0}, "capacity must be > 0"),
])
def test_job_errors(kwargs, needle):
    g = parse_topology("fattree:4")
    args = {"ps": "h0", "workers": ["h1", "h2"], **kwargs}
    with pytest.raises(PlanError, match=needle.replace("(", r"\(")):
        make_job(g, args["ps"], args["workers"], capacity=args.get("capacity"))


def test_negative_budget_and_bad_deployment():
    job = fat_tree_job()
    with pytest.raises(PlanError, match="budget must be >= 0"):
        greedy(job, -1)
    with pytest.raises(PlanError, match="PS's ToR"):
        solve_lp(job, ["edge0"])
    with pytest.raises(PlanError, match="not a switch"):
        solve_lp(job, ["h3"])


def test_disconnected_worker():
    g = from_dict({"hosts": ["ps", "w1", "w2"], "switches": ["s1", "s2"],
                   "links": [{"a": "ps", "b": "s1"}, {"a": "w1", "b": "s1"},
                             {"a": "w2", "b": "s2"}]})
    with pytest.raises(PlanError, match="disconnected: worker 'w2'"):
        make_job(g, "ps", ["w1", "w2"])


SMALL = [
    ("fattree:4", "h0", None, [1, 2, 3]),
    ("leafspine:3,2,2", "h0", None, [1, 2]),
    ("leafspine:4,2,3", "h5", None, [1, 2]),
    ("fattree:4", "h0", ["h1", "h4", "h5", "h9", "h14"], [1, 2]),
]


@pytest.mark.parametrize("spec,ps,workers,budgets", SMALL)
def test_greedy_between_baselines_and_exact(spec, ps, workers, budgets, capsys):
    g = parse_topology(spec)
    job = make_job(g, ps, workers or [h for h in hosts(g) if h != ps])
    fast = FastLP(job)
    for m in budgets:
        res = greedy(job, m, lp=fast)
        base = all_baselines(job, m, seed=1, lp=fast)
        tol = 1e-9
        assert base["ps_only"]["gamma"] <= base["tor_only"]["gamma"] + tol
        assert base["tor_only"]["gamma"] <= res.gamma + tol
        assert res.gamma >= base["random"]["gamma"] - tol
        assert res.gamma >= base["top_degree"]["gamma"] - tol
        assert res.gamma <= base["exact"]["gamma"] + tol
        assert base["exact"]["gamma"] <= base["all_programmable"]["gamma"] + tol
        with capsys.disabled():
            print(f"\n{spec} ps={ps} |W|={len(job.workers)} M={m}: greedy {res.gamma:.4f} "
                  f"exact {base['exact']['gamma']:.4f} "
                  f"({res.gamma / base['exact']['gamma']:.1%} of optimum), "
                  f"random {base['random']['gamma']:.4f}, "
                  f"top-degree {base['top_degree']['gamma']:.4f}")


def test_baseline_sets():
    job = fat_tree_job()
    assert top_degree_set(job, 3) == ["agg0", "agg1", "agg2"]  # all degree 4: by name
    assert random_set(job, 3, seed=5) == random_set(job, 3, seed=5)
    assert "edge0" not in random_set(job, 19, seed=1)  # never s_d
    with pytest.raises(PlanError, match="exact optimum needs"):
        exact_optimum(job, 3, max_combinations=10)


@pytest.mark.parametrize("spec,ps,budget,capacity", [
    ("fattree:4", "h0", 4, None),
    ("fattree:4", "h6", 3, 3.0),
    ("leafspine:4,2,3", "h5", 3, None),
])
def test_fast_path_equals_plain_formulation(spec, ps, budget, capacity):
    """Twin merging + symmetry + matrix HiGHS give the plain PuLP greedy's answer."""
    g = parse_topology(spec)
    job = make_job(g, ps, [h for h in hosts(g) if h != ps], capacity=capacity)
    plain = greedy(job, budget, merge=False, symmetry=False)  # PuLP, one var per worker
    fast = greedy(job, budget, lp=FastLP(job))
    assert fast.deployed == plain.deployed
    assert fast.gamma == pytest.approx(plain.gamma, rel=1e-7)
    assert [s for s, _ in fast.history] == [s for s, _ in plain.history]
    assert fast.lp_solves < plain.lp_solves  # symmetry saved solves
    # and the per-worker routing satisfies the LP constraints in full (unmerged) form
    lp = fast.lp
    for w in job.workers:
        assert sum(lp.x[w, s] for s in lp.deployed) <= lp.gamma + 1e-9
        for s in lp.deployed:
            assert lp.x[w, s] <= lp.a[s] + 1e-9
    bw = {(u, v): d["bw"] for u, v, d in g.edges(data=True)}
    bw.update({(v, u): b for (u, v), b in bw.items()})
    assert all(load <= bw[e] + 1e-7 for e, load in lp.loads.items())


def test_time_limit_is_a_plan_error_for_both_backends():
    g = parse_topology("fattree:8")
    job = make_job(g, "h0", hosts(g)[1:])
    for lp in (solve_lp, FastLP(job)):
        with pytest.raises(PlanError, match=r"S = \{core0, agg9\} not solved"):
            lp(job, ["core0", "agg9"], time_limit=1e-9)
