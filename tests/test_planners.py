"""The PLANNERS table (docs/design.md §3.4a): one signature, feasible placements, and the
``rounding`` planner's relaxation against hand-solved cases."""

from itertools import combinations

import pytest

from controller.plan.baselines import all_baselines
from controller.plan.greedy import greedy, greedy_loop
from controller.plan.lp import (
    LPResult,
    PlanError,
    candidates,
    make_job,
    result_tree_coeffs,
    solve_lp,
)
from controller.plan.lp_fast import FastLP
from controller.plan.placement import Placement
from controller.plan.planners import DEFAULT_PLANNER, PLANNERS, get_planner, random_set
from controller.plan.rounding import (
    ROUNDINGS,
    access_bound,
    relaxation,
    result_branches,
    rounding,
)
from topo.models import from_dict, hosts, parse_topology

NAMES = ["greedy", "exact", "top_degree", "random", "tor_only", "rounding", "best"]


def leaf_spine_job():
    """tests/test_planner.py's leaf-spine: w1..w4 under leaf1, ps under leaf2, one spine."""
    ws = ["w1", "w2", "w3", "w4"]
    links = [{"a": w, "b": "leaf1"} for w in ws]
    links += [{"a": "ps", "b": "leaf2"}, {"a": "leaf1", "b": "spine"},
              {"a": "leaf2", "b": "spine"}]
    g = from_dict({"hosts": ws + ["ps"], "switches": ["leaf1", "leaf2", "spine"],
                   "links": links}, "ls.json")
    return make_job(g, "ps", ws)


def star_job():
    """R = s_d with the PS p; A (w1, w2) and B (w3, w4) hang off R; every link capacity 1."""
    links = [{"a": "p", "b": "R"}, {"a": "A", "b": "R"}, {"a": "B", "b": "R"}]
    links += [{"a": w, "b": "A"} for w in ("w1", "w2")]
    links += [{"a": w, "b": "B"} for w in ("w3", "w4")]
    g = from_dict({"hosts": ["p", "w1", "w2", "w3", "w4"], "switches": ["A", "B", "R"],
                   "links": links}, "star.json")
    return make_job(g, "p", ["w1", "w2", "w3", "w4"])


def topo_job(spec, ps, n_workers=None, **kw):
    g = parse_topology(spec)
    ws = [h for h in hosts(g) if h != ps]
    return make_job(g, ps, ws[:n_workers] if n_workers else ws, **kw)


SMALL = [
    ("fattree:4", "h0", None, 2, {}),
    ("fattree:4", "h0", 6, 2, {"result_load": True}),
    ("leafspine:4,2,3", "h5", None, 2, {}),
    ("leafspine:3,2,2", "h0", None, 3, {"capacity": 1.5}),
]


def test_table_holds_the_six_planners():
    assert list(PLANNERS)[:len(NAMES)] == NAMES  # a researcher's new entry goes after them
    assert DEFAULT_PLANNER == "greedy" and get_planner(DEFAULT_PLANNER) is greedy
    assert get_planner("rounding") is rounding


def test_unknown_planner_is_one_line():
    with pytest.raises(PlanError, match=r"^unknown planner 'x' \(expected one of greedy, exact, "
                                        r"top_degree, random, tor_only, rounding[^\n]*\)$"):
        get_planner("x")


class Counting:
    """An ``lp`` that counts its calls: every integral LP must go through it."""

    def __init__(self, job):
        self.fast, self.calls = FastLP(job), 0

    def __call__(self, *args, **kw) -> LPResult:
        self.calls += 1
        return self.fast(*args, **kw)


@pytest.mark.parametrize("name", list(PLANNERS))  # a new entry is checked too
@pytest.mark.parametrize("spec,ps,nw,budget,kw", SMALL)
def test_every_planner_returns_a_feasible_placement(name, spec, ps, nw, budget, kw):
    job = topo_job(spec, ps, nw, **kw)
    lp = Counting(job)
    p = get_planner(name)(job, budget, lp=lp, seed=3)
    assert isinstance(p, Placement)
    assert len(p.deployed) <= budget and len(set(p.deployed)) == len(p.deployed)
    assert set(p.deployed) <= set(candidates(job)) and job.ps_tor not in p.deployed
    assert p.lp.deployed == p.deployed and p.gamma == p.lp.gamma > 0
    # γ is LP(S) of its own set, checked against the PuLP reference
    assert p.gamma == pytest.approx(solve_lp(job, p.deployed).gamma, rel=1e-7)
    relaxed_lps = 2 if name in ("rounding", "best") else 0  # the relaxation is PuLP, not ``lp``
    assert lp.calls == p.lp_solves - relaxed_lps >= 1
    g, sol = job.graph, p.lp
    for w in job.workers:
        assert sum(sol.x[w, s] for s in sol.deployed) <= sol.gamma + 1e-9
        assert all(sol.x[w, s] <= sol.a[s] + 1e-9 for s in sol.deployed)
    assert all(load <= g.edges[e]["bw"] + 1e-7 for e, load in sol.loads.items())


def test_tor_only_is_lp_of_the_empty_set():
    job = topo_job("fattree:4", "h0")
    for m in (0, 3):
        p = PLANNERS["tor_only"](job, m)
        assert p.deployed == () and p.gamma == pytest.approx(1 / 7)  # test_planner's hand value


@pytest.mark.parametrize("spec,ps,nw,budget,kw",
                         [c for c in SMALL if not c[4].get("result_load")])
def test_exact_is_at_least_every_other_planner(spec, ps, nw, budget, kw):
    """Without the RESULT term γ is monotone in S, so ``exact`` is the optimum over |S| ≤ M."""
    job = topo_job(spec, ps, nw, **kw)
    fast = FastLP(job)
    for m in range(budget + 1):
        best = PLANNERS["exact"](job, m, lp=fast).gamma
        for name, planner in PLANNERS.items():
            assert planner(job, m, lp=fast, seed=7).gamma <= best * (1 + 1e-9), name


@pytest.mark.parametrize("name", list(PLANNERS))
def test_budget_zero_deploys_nothing(name):
    job = topo_job("leafspine:4,2,3", "h5")
    p = PLANNERS[name](job, 0, lp=FastLP(job))
    assert p.deployed == () and p.gamma == pytest.approx(solve_lp(job, []).gamma)
    # BCube: no switch but s_d can carry traffic (tests/test_planner.py), so nothing to
    # deploy whatever the budget; ToR-only γ = 1 there
    bc = make_job(parse_topology("bcube:4,2"), "h0", ["h1", "h2", "h3"])
    p = PLANNERS[name](bc, 2, lp=FastLP(bc))
    assert p.deployed == () and p.gamma == pytest.approx(1.0)
    with pytest.raises(PlanError, match="budget must be >= 0, got -1"):
        PLANNERS[name](job, -1)


def test_rounding_finds_the_optimum_when_the_relaxation_is_integral():
    """Leaf-spine, M = 1, Γ₀ = 1 (access links).  leaf1→spine carries a + Σ_w (γ − x_w)
    ≥ 4γ − 3a (x_w ≤ a), and aggregating at the spine, behind that link, saves nothing on it;
    so γ* = 1 needs a_leaf1 = 1, hence y_leaf1 ≥ a/Γ₀ = 1, and the spine gets y = 0 at the
    least Σ y.  Every rounding draws {leaf1}: γ = 1 = the exact optimum
    (tests/test_planner.py)."""
    job = leaf_spine_job()
    rel = relaxation(job, 1)
    assert rel.gamma == pytest.approx(1.0)
    assert rel.y == pytest.approx({"leaf1": 1.0, "spine": 0.0}, abs=1e-7)
    p = rounding(job, 1, seed=11)
    assert p.deployed == ("leaf1",) and p.gamma == pytest.approx(1.0)
    assert p.gamma == pytest.approx(PLANNERS["exact"](job, 1).gamma)
    assert p.lp_solves == 2 + 1  # every draw is the same set: one LP


def test_capacity_share_row_forces_an_integral_relaxation():
    """tests/test_planner.py's leaf-spine with C_s = 2, M = 1: LP({leaf1}) = 5/8 with
    Σ_w x_w = 2 = C_leaf1 (4γ − Σx + a ≤ 1 on leaf1→spine with a ≥ Σx/4 gives Σx ≥ 2 at
    γ = 5/8), and the spine, behind leaf1→spine, adds nothing, so γ* = 5/8 = exact.  The
    share row In(leaf1) = 2 ≤ min(K, C)·y = 2·y forces y_leaf1 = 1, where a ≤ Γ₀·y alone would
    allow y = a = 1/2."""
    ws = ["w1", "w2", "w3", "w4"]
    job = make_job(leaf_spine_job().graph, "ps", ws, capacity=2.0)
    rel = relaxation(job, 1)
    assert rel.gamma == pytest.approx(5 / 8)
    assert rel.y == pytest.approx({"leaf1": 1.0, "spine": 0.0}, abs=1e-7)
    p = rounding(job, 1, lp=FastLP(job))
    assert p.deployed == ("leaf1",) and p.gamma == pytest.approx(5 / 8)
    assert p.gamma == pytest.approx(PLANNERS["exact"](job, 1).gamma)


def test_star_relaxation_by_hand_bounds_exact():
    """Star (:func:`star_job`), all capacities 1.  LP({A}): B→R carries w3's and w4's
    whole streams (even what they send to A crosses it), so 2γ ≤ 1: γ = 1/2, and LP(∅) = 1/2
    too; by symmetry exact(M = 1) = 1/2.  LP({A, B}): A→R carries a_A + 2(γ − x_{w1,A})
    ≥ 2γ − a_A ≤ 1 (what w1, w2 send to B crosses it too), likewise 2γ − a_B ≤ 1, and
    a_A + a_B ≤ γ; adding, 3γ ≤ 2: γ = 2/3 with a = γ/2.

    Relaxation, M = 1 (Γ₀ = 1, K_A = K_B = 3 links): its link rows are LP({A, B})'s, so
    γ* ≤ 2/3, and they force a_A = a_B = 1/3 there; a_s ≤ Γ₀·y_s then needs y_s ≥ 1/3, and
    the share row In(A) ≤ 3·y_A = 1 leaves room for the 2/3 that w1, w2 must send to A
    (x_{w,A} ≥ 1/3 from A→R).  So the relaxation reaches 2/3 with y = (1/3, 1/3), the least
    Σ y = 2/3 ≤ M, interval lengths 1/2: it claims 2/3 where one switch gives 1/2, an upper
    bound on exact.  Both rounded sets ({A} or {B}) reach 1/2."""
    job = star_job()
    fast = FastLP(job)
    assert fast(job, []).gamma == pytest.approx(0.5)
    assert fast(job, ["A"]).gamma == pytest.approx(0.5)
    assert fast(job, ["A", "B"]).gamma == pytest.approx(2 / 3)
    exact1 = PLANNERS["exact"](job, 1, lp=fast).gamma
    rel = relaxation(job, 1)
    assert rel.gamma == pytest.approx(2 / 3) and exact1 == pytest.approx(0.5)
    assert rel.gamma > exact1 + 0.1
    assert rel.y == pytest.approx({"A": 1 / 3, "B": 1 / 3}, abs=1e-7)
    assert rel.length == pytest.approx({"A": 0.5, "B": 0.5}, abs=1e-7)
    p = rounding(job, 1, lp=fast, seed=0)
    assert len(p.deployed) == 1 and p.gamma == pytest.approx(0.5)
    # M = 0 is LP(∅) exactly; M = 2 the relaxation is tight and rounding takes both
    assert relaxation(job, 0).gamma == pytest.approx(0.5)
    assert relaxation(job, 2).gamma == pytest.approx(2 / 3)
    two = rounding(job, 2, lp=fast)
    assert two.deployed == ("A", "B") and two.gamma == pytest.approx(2 / 3)


@pytest.mark.parametrize("spec,ps,nw,kw", [
    ("leafspine:3,2,2", "h0", None, {"result_load": True, "capacity": 1.5}),
    ("leafspine:4,2,3", "h5", None, {"result_load": True}),
    ("fattree:4", "h0", 5, {"result_load": True}),
])
def test_relaxation_bounds_every_deployment(spec, ps, nw, kw):
    """γ_relax(M) ≥ LP(S) for every S ⊆ candidates with |S| ≤ M, by enumeration, with the
    RESULT term (where γ is not monotone in S) and switch capacities."""
    job = topo_job(spec, ps, nw, **kw)
    fast = FastLP(job)
    cands = candidates(job)
    best = 0.0
    for m in range(3):
        best = max([best] + [fast(job, list(S)).gamma for S in combinations(cands, m)])
        rel = relaxation(job, m)
        assert rel.gamma >= best * (1 - 1e-7), m
        assert sum(rel.y.values()) <= m + 1e-7
        # a_s = length·γ* ≤ Γ₀·y_s: no aggregation on a closed switch
        assert all(rel.length[s] * rel.gamma <= access_bound(job) * rel.y[s] + 1e-7
                   for s in cands)
        assert rounding(job, m, lp=fast).gamma <= rel.gamma * (1 + 1e-7)


def test_result_branches_add_up_to_the_result_tree():
    """T_S = T_∅ ∪ ⋃_{s ∈ S} branch(s), the identity the relaxation's RESULT rows rest on."""
    job = topo_job("fattree:4", "h0", 3)  # h1..h3: the tree of S = ∅ stays in pod 0
    cands = candidates(job)
    branches = result_branches(job, cands)
    base = {e for e, _ in result_tree_coeffs(job, [])}
    assert branches["edge1"] == [] and branches["agg0"] == []  # already on the tree
    # parents are the smallest-named switch one hop closer to edge0: agg6, core0, agg0
    assert branches["edge7"] == [("agg6", "edge7"), ("core0", "agg6"), ("agg0", "core0")]
    assert branches["core3"] == [("agg1", "core3"), ("edge0", "agg1")]  # agg1 is off the tree
    for S in (["core3"], ["edge7"], ["agg2", "edge5", "core1"], cands):
        tree = {e for e, _ in result_tree_coeffs(job, S)}
        assert tree == base.union(*(branches[s] for s in S)), S


def test_seeded_planners_are_deterministic():
    job = topo_job("fattree:4", "h0", None)
    fast = FastLP(job)
    for name in ("random", "rounding"):
        a = PLANNERS[name](job, 2, lp=fast, seed=4)
        b = PLANNERS[name](job, 2, lp=fast, seed=4)
        assert (a.deployed, a.gamma) == (b.deployed, b.gamma)
    assert PLANNERS["random"](job, 3, seed=5).deployed == tuple(random_set(job, 3, seed=5))
    with pytest.raises(PlanError, match="roundings must be >= 1"):
        rounding(job, 2, roundings=0)


def test_baselines_table_has_rounding():
    """The baselines iterate over the table: the two reference rows, then every planner but
    the plan's own, in the table's order."""
    job = topo_job("fattree:4", "h0")
    fast = FastLP(job)
    base = all_baselines(job, 2, seed=1, lp=fast)
    assert list(base) == ["ps_only", "all_programmable", "exact", "top_degree", "random",
                          "tor_only", "rounding", "tor_all"]
    other = all_baselines(job, 2, seed=1, lp=fast, skip=("exact",))
    assert "exact" not in other
    assert other["greedy"]["gamma"] == pytest.approx(PLANNERS["greedy"](job, 2, lp=fast).gamma)
    r = base["rounding"]
    p = PLANNERS["rounding"](job, 2, lp=fast, seed=1)
    assert r == {"gamma": p.gamma, "deployed": list(p.deployed),
                 "note": f"best of {ROUNDINGS} roundings, seed 1"}
    assert base["tor_only"]["gamma"] <= r["gamma"] <= base["exact"]["gamma"] * (1 + 1e-9)


def test_greedy_loop_with_any_objective():
    """The one loop with a toy objective: value(S) = Σ weights, capped at 5; name ties go to
    the first name; a class is solved once; the loop stops when nothing improves."""
    weight = {"a": 1.0, "b": 3.0, "c": 3.0, "d": 2.0}
    calls = []

    def solve(S):
        calls.append(tuple(S))
        return min(5.0, sum(weight[s] for s in S))

    def pick(scored):
        top = max(scored.values())
        return min(s for s, v in scored.items() if v == top)

    S, best, hist = greedy_loop(solve, list(weight), 4, pick=pick,
                                improves=lambda new, old: new > old)
    assert S == ["b", "c"] and best == 5.0 and hist == [("b", 3.0), ("c", 5.0)]
    # step 3: every candidate stays at the cap 5: stop with a budget slot left
    assert len(calls) == 1 + 4 + 3 + 2
    calls.clear()
    S, _, _ = greedy_loop(solve, list(weight), 1, pick=pick, improves=lambda n, o: n > o,
                          classes=lambda S, U: [["b", "c"], ["a"], ["d"]])
    assert S == ["b"] and calls == [(), ("b",), ("a",), ("d",)]


def test_rounding_refuses_a_large_relaxation_in_one_line():
    job = topo_job("fattree:4", "h0", 6)
    with pytest.raises(PlanError, match=r"^the relaxation would have 114 worker-switch "
                                        r"variables \(> limit 100\): as large as the "
                                        r"all-programmable LP, too slow to solve here$"):
        rounding(job, 2, max_variables=100)


def test_rounding_refuses_a_relaxation_too_slow_to_solve_in_one_line():
    """Counted in twin classes × candidates (issue 41): fat-tree k=4, 6 workers in 4
    classes, 19 candidates."""
    job = topo_job("fattree:4", "h0", 6)
    with pytest.raises(PlanError, match=r"^the relaxation would have 76 class-switch "
                                        r"variables \(> limit 50\): it does not solve "
                                        r"within a minute at this size$"):
        rounding(job, 2, max_class_variables=50)
    assert rounding(job, 2, max_class_variables=76).gamma > 0


def test_exact_refuses_what_the_time_left_cannot_pay_in_one_line():
    """issue 41: the baselines table hands ``exact`` its time left; the first LP's time
    × the number of subsets above it is refused in one line, before the other LPs."""
    exact = PLANNERS["exact"]
    job = topo_job("fattree:4", "h0", 6)
    calls = []

    def lp(job, S, **kw):
        calls.append(tuple(S))
        return solve_lp(job, S, **kw)

    with pytest.raises(PlanError, match=r"^exact optimum needs 171 LPs, about \d+ s at the "
                                        r"first one's [\d.]+ s \(> 0 s of time budget left\)$"):
        exact(job, 2, lp=lp, max_seconds=1e-9)
    assert len(calls) == 1
    assert exact(job, 1, max_seconds=None).gamma > 0
    rows = all_baselines(job, 2, seconds=1e-9)
    assert rows["exact"]["gamma"] is None and "time budget" in rows["exact"]["note"]
