"""The lazy joint greedy (controller/plan/lazy_joint.py, issue 41): the dual bound is a bound
of the first stage it bounds, the bound-ordered lazy greedy chooses what the exhaustive joint
greedy chooses, and the stale-gain one (the default) differs on the random networks exactly
where measured (the module doc states when it can)."""

import random

import pytest

from controller.plan.greedy import greedy_jobs
from controller.plan.jobs import JobEntry
from controller.plan.lazy_joint import StaleGains, joint_bounds, joint_duals, lazy_joint_scores
from controller.plan.lp import PlanError
from controller.plan.lp_jobs import FastJointLP, better_score, joint_candidates, make_jobset
from topo.models import from_dict, hosts, parse_topology


def random_jobset(seed: int):
    """A connected random network (4–8 switches: a random tree plus extra links, random
    capacities) with 2–3 jobs of 2–4 workers on random hosts (some dual-homed), random
    weights, random C_s and RESULT load; or (one seed in four) fat-tree k=4 with random jobs."""
    rng = random.Random(seed)
    n_jobs = rng.randint(2, 3)
    if seed % 4 == 3:
        g = parse_topology("fattree:4")
        hs = rng.sample(hosts(g), n_jobs * 5)
    else:
        n_sw = rng.randint(4, 8)
        sws = [f"s{i}" for i in range(n_sw)]
        links = [{"a": sws[i], "b": sws[rng.randrange(i)],
                  "bw": rng.choice([1.0, 2.0, 0.5, 3.0])} for i in range(1, n_sw)]
        for _ in range(rng.randint(0, 3)):
            a, b = rng.sample(sws, 2)
            if not any({lk["a"], lk["b"]} == {a, b} for lk in links):
                links.append({"a": a, "b": b, "bw": rng.choice([1.0, 2.0])})
        hs = [f"h{i}" for i in range(n_jobs * 5)]
        for h in hs:
            for s in rng.sample(sws, 2 if rng.random() < 0.15 else 1):
                links.append({"a": h, "b": s, "bw": rng.choice([1.0, 1.0, 2.0])})
        g = from_dict({"hosts": hs, "switches": sws, "links": links}, f"random{seed}.json")
    specs = []
    for j in range(n_jobs):
        mine = hs[5 * j:5 * j + 5]
        specs.append(JobEntry(f"j{j}", mine[0], tuple(mine[1:1 + rng.randint(2, 4)]),
                              weight=rng.choice([1.0, 1.0, 2.0, 0.5])))
    return make_jobset(g, specs, capacity=rng.choice([None, None, 2.0, 3.5]),
                       result_load=rng.random() < 0.5)


def same_run(a, b) -> bool:
    return a.deployed == b.deployed and all(
        abs(x - y) <= 1e-6 * max(1.0, abs(y))
        for x, y in zip(a.result.gammas.values(), b.result.gammas.values(), strict=True))


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("objective", ["maxmin", "sum"])
def test_the_joint_bound_is_a_bound(seed, objective):
    """β(s) ≥ the first score entry of the joint LP(S ∪ {s}) for every candidate, at S = ∅
    and at a random S of two candidates."""
    js = random_jobset(seed)
    lp = FastJointLP(js)
    lp.dual_hook = joint_duals
    cands = joint_candidates(js)
    rng = random.Random(seed)
    for S in ([], rng.sample(cands, min(2, len(cands)))):
        base = lp(S, objective=objective)
        rest = [s for s in cands if s not in S]
        for s, b in joint_bounds(lp, base, rest).items():
            assert b >= lp([*S, s], objective=objective).score[0] - 1e-9, (seed, S, s)


@pytest.mark.parametrize("seed", range(40))
def test_bound_ordered_lazy_joint_greedy_equals_the_exhaustive_one(seed):
    js = random_jobset(seed)
    full = greedy_jobs(js, 3, lazy=False)
    lazy = greedy_jobs(js, 3, lazy="bound")
    assert same_run(lazy, full), (lazy.deployed, full.deployed)
    assert lazy.lp_solves <= full.lp_solves + 8  # + the final S re-solved cold


# Measured (2026-11-29) over seeds 0..299 × both objectives at budget 4 (600 runs): the
# bound-ordered greedy chose what the exhaustive one chose every time; the stale-gain one
# differed in 15 runs, 13 of them a different S with the same score (a tie broken otherwise:
# the candidate first by name was left unsolved because its gain grew), 2 of them (seed 175,
# both objectives) a lower score.  Among the seeds below, the ties:
STALE_TIES = {(3, "sum"), (29, "maxmin"), (29, "sum"), (30, "sum"), (39, "sum"),
              (51, "maxmin")}


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("objective", ["maxmin", "sum"])
def test_stale_lazy_joint_greedy_against_the_exhaustive_one(seed, objective):
    """Same S and γ, except the measured ties (same score, another S)."""
    js = random_jobset(seed)
    full = greedy_jobs(js, 4, lazy=False, objective=objective)
    lazy = greedy_jobs(js, 4, objective=objective)  # the default: lazy="stale"
    if (seed, objective) not in STALE_TIES:
        assert same_run(lazy, full), (seed, lazy.deployed, full.deployed)
    else:
        assert lazy.deployed != full.deployed
        assert not better_score(full.result.score, lazy.result.score)
        assert not better_score(lazy.result.score, full.result.score)


@pytest.mark.parametrize("objective", ["maxmin", "sum"])
def test_stale_lazy_joint_greedy_where_it_loses(objective):
    """Seed 175: the one measured case where the stale estimate left the better candidate
    unsolved (its first-entry gain grew from one step to the next); ``lazy="bound"``
    finds the exhaustive greedy's plan."""
    js = random_jobset(175)
    full = greedy_jobs(js, 4, lazy=False, objective=objective)
    lazy = greedy_jobs(js, 4, objective=objective)
    assert better_score(full.result.score, lazy.result.score)
    assert same_run(greedy_jobs(js, 4, lazy="bound", objective=objective), full)


def test_lazy_step_by_hand():
    """Estimates 5, 4, 1 (c, a, b): c solved (first entry 3), a solved (4 ≥ 3·(1 − WINDOW)),
    b left (1 < 4); nothing solved when no estimate reaches best's first entry."""
    got = {"a": 4.0, "b": 0.5, "c": 3.0}
    solved = []

    class R:
        def __init__(self, v):
            self.score = (v,)

    def solve(s):
        solved.append(s)
        return R(got[s])

    out = lazy_joint_scores({"a": 4.0, "b": 1.0, "c": 5.0}, solve, (0.5,))
    assert solved == ["c", "a"] and set(out) == {"a", "c"}
    solved.clear()
    assert lazy_joint_scores({"a": 0.4, "b": 0.3}, solve, (0.5,)) == {} and solved == []


def test_stale_gains_estimate():
    st = StaleGains()
    st.record(["a", "a2"], 1.0, 1.5)  # a's class: gain 0.5
    est = st.estimate({"a": 9.0, "a2": 1.2, "b": 3.0}, 2.0)
    assert est == {"a": 2.5, "a2": 1.2, "b": 3.0}


def test_unknown_lazy_mode_is_refused():
    js = random_jobset(0)
    with pytest.raises(PlanError, match="lazy"):
        greedy_jobs(js, 1, lazy="sometimes")
