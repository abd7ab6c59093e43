"""The lazy greedy (controller/plan/lazy.py, issue 41): the dual bound is a bound, and the
lazy greedy chooses exactly what the exhaustive greedy chooses."""

import random

import pytest

from controller.plan.greedy import greedy
from controller.plan.lazy import MARGIN, bounds
from controller.plan.lp import candidates, make_job
from controller.plan.lp_fast import FastLP
from topo.models import from_dict, hosts, parse_topology


def random_job(seed: int):
    """A connected random network: 3–7 switches (a random tree plus extra links), 3–8 hosts
    on random switches (some dual-homed), random link capacities; random capacity C_s and
    RESULT load."""
    rng = random.Random(seed)
    n_sw = rng.randint(3, 7)
    sws = [f"s{i}" for i in range(n_sw)]
    links = [{"a": sws[i], "b": sws[rng.randrange(i)], "bw": rng.choice([1.0, 2.0, 0.5, 3.0])}
             for i in range(1, n_sw)]
    for _ in range(rng.randint(0, 3)):
        a, b = rng.sample(sws, 2)
        if not any({lk["a"], lk["b"]} == {a, b} for lk in links):
            links.append({"a": a, "b": b, "bw": rng.choice([1.0, 2.0])})
    n_h = rng.randint(3, 8)
    hs = [f"h{i}" for i in range(n_h)]
    for h in hs:
        for s in rng.sample(sws, 2 if rng.random() < 0.15 else 1):
            links.append({"a": h, "b": s, "bw": rng.choice([1.0, 1.0, 2.0])})
    g = from_dict({"hosts": hs, "switches": sws, "links": links}, f"random{seed}.json")
    cap = rng.choice([None, None, 2.0, 3.5])
    return make_job(g, "h0", hs[1:], capacity=cap, result_load=rng.random() < 0.5)


def greedy_both(job, budget):
    lazy = greedy(job, budget, lp=FastLP(job), lazy=True)
    full = greedy(job, budget, lp=FastLP(job), lazy=False)
    return lazy, full


@pytest.mark.parametrize("seed", range(60))
def test_lazy_equals_exhaustive_on_random_networks(seed):
    job = random_job(seed)
    lazy, full = greedy_both(job, 3)
    assert lazy.deployed == full.deployed
    assert lazy.gamma == pytest.approx(full.gamma, rel=1e-9, abs=1e-12)
    assert [s for s, _ in lazy.history] == [s for s, _ in full.history]
    # + 1: the lazy greedy re-solves its final S cold (warm starts may pick another optimum)
    assert lazy.lp_solves <= full.lp_solves + 1


@pytest.mark.parametrize("seed", range(40))
def test_the_bound_is_a_bound(seed):
    """β(s) ≥ γ(S ∪ {s}) for every candidate, at S = ∅ and at S = the greedy's first choice,
    and β(s) is not above γ(S) + Γ + margin (nothing gained from round-off)."""
    job = random_job(seed)
    fast = FastLP(job)
    fast.keep_duals = True
    cands = candidates(job)
    starts = [[]] + ([[greedy(job, 1, lp=FastLP(job)).deployed[0]]]
                     if greedy(job, 1, lp=FastLP(job)).deployed else [])
    for S in starts:
        base = fast(job, S)
        beta = bounds(fast, base, [s for s in cands if s not in S])
        for s, b in beta.items():
            assert b >= fast(job, [*S, s]).gamma - 1e-9, (seed, S, s)
            assert b >= base.gamma  # a bound of LP(S ∪ {s}) at y = LP(S)'s duals
            assert b <= base.gamma + 2 * fast.gamma_cap() + MARGIN * 10


def star_job():
    """R = s_d with the PS p; A (w1, w2) and B (w3, w4) hang off R; every capacity 1."""
    links = [{"a": "p", "b": "R"}, {"a": "A", "b": "R"}, {"a": "B", "b": "R"}]
    links += [{"a": w, "b": "A"} for w in ("w1", "w2")]
    links += [{"a": w, "b": "B"} for w in ("w3", "w4")]
    g = from_dict({"hosts": ["p", "w1", "w2", "w3", "w4"], "switches": ["A", "B", "R"],
                   "links": links}, "star.json")
    return make_job(g, "p", ["w1", "w2", "w3", "w4"])


def test_star_by_hand():
    """γ(∅) = γ({A}) = γ({B}) = 1/2 (the other branch's link carries 2γ), γ({A, B}) = 1: the
    greedy sees no improving switch and stops at S = ∅; so does the lazy one."""
    job = star_job()
    lazy, full = greedy_both(job, 2)
    assert lazy.deployed == full.deployed == ()
    assert lazy.gamma == full.gamma == pytest.approx(0.5)
    fast = FastLP(job)
    fast.keep_duals = True
    beta = bounds(fast, fast(job, []), ["A", "B"])
    assert all(b >= 0.5 for b in beta.values())


def test_leafspine_by_hand():
    """leafspine:3,2,2, PS h0, 5 workers, RESULT load: γ(∅) = 1/2, the greedy takes leaf1
    (γ 4/5) then leaf2 (6/7) (docs/planner.md); the lazy greedy the same, with fewer LPs."""
    g = parse_topology("leafspine:3,2,2")
    job = make_job(g, "h0", [h for h in hosts(g) if h != "h0"][:5], result_load=True)
    lazy, full = greedy_both(job, 2)
    assert lazy.deployed == full.deployed == ("leaf1", "leaf2")
    assert lazy.gamma == pytest.approx(6 / 7)
    assert lazy.history[0][1] == pytest.approx(4 / 5)


@pytest.mark.parametrize("result_load", [True, False])
def test_fattree_k4_lazy_equals_exhaustive(result_load):
    g = parse_topology("fattree:4")
    job = make_job(g, "h0", [h for h in hosts(g) if h != "h0"][:8], result_load=result_load)
    lazy, full = greedy_both(job, 3)
    assert (lazy.deployed, lazy.gamma) == (full.deployed, pytest.approx(full.gamma))


def test_exhaustive_without_fastlp():
    """The lazy step needs LP(S)'s duals (FastLP); with the PuLP reference it is exhaustive."""
    job = star_job()
    from controller.plan.lp import solve_lp

    assert greedy(job, 2, lp=solve_lp).deployed == greedy(job, 2, lp=FastLP(job)).deployed


@pytest.mark.parametrize("seed", range(200))
def test_best_block_is_the_small_lps_maximum(seed):
    """_best_block (the new columns' part of β) equals the LP it solves in closed form:
    max rc_a a + Σ r_g y_g, 0 ≤ y_g ≤ min(a, U_g), a ≤ Γ, Σ |g| y_g ≤ inflow."""
    from scipy.optimize import linprog

    from controller.plan.lazy import _best_block

    rng = random.Random(seed)
    G = rng.randint(1, 6)
    gains = [(rng.uniform(0.01, 2), float(rng.randint(1, 8)), rng.uniform(0.05, 1.5))
             for _ in range(G)]
    rc_a, cap, inflow = -rng.uniform(0, 3), rng.uniform(0.2, 2), rng.uniform(0.1, 10)
    # variables: a, y_1..y_G; linprog minimises
    c = [-rc_a] + [-r for r, _, _ in gains]
    A, b = [], []
    for i in range(G):
        row = [0.0] * (G + 1)
        row[0], row[i + 1] = -1.0, 1.0
        A.append(row)
        b.append(0.0)
    A.append([0.0] + [n for _, n, _ in gains])
    b.append(inflow)
    bounds = [(0, cap)] + [(0, u) for _, _, u in gains]
    lp = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    assert _best_block(rc_a, gains, cap, inflow) == pytest.approx(max(0.0, -lp.fun), abs=1e-9)


@pytest.mark.parametrize("seed", range(40))
def test_best_block_with_alike_groups(seed):
    """Many groups alike (a fat-tree's pods): _best_block merges them and its value is still
    the LP's (as without merging: the same items once each, scaled)."""
    from scipy.optimize import linprog

    from controller.plan.lazy import _best_block

    rng = random.Random(seed)
    kinds = [(rng.uniform(0.01, 2), float(rng.randint(1, 8)), rng.uniform(0.05, 1.5))
             for _ in range(rng.randint(1, 3))]
    gains = [kinds[rng.randrange(len(kinds))] for _ in range(rng.randint(8, 20))]
    G = len(gains)
    rc_a, cap, inflow = -rng.uniform(0, 3), rng.uniform(0.2, 2), rng.uniform(0.1, 30)
    c = [-rc_a] + [-r for r, _, _ in gains]
    A = [[-1.0] + [1.0 if j == i else 0.0 for j in range(G)] for i in range(G)]
    A.append([0.0] + [n for _, n, _ in gains])
    lp = linprog(c, A_ub=A, b_ub=[0.0] * G + [inflow],
                 bounds=[(0, cap)] + [(0, u) for _, _, u in gains], method="highs")
    assert _best_block(rc_a, gains, cap, inflow) == pytest.approx(max(0.0, -lp.fun), abs=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_duals_read_late_are_their_own_lps(seed):
    """FastLP reads an LP's duals and basis off its solved model on first use: read after
    other LPs were solved, they are still that LP's (y·b = its γ, same S; its basis
    restarts it at once) and equal to the duals read at once."""
    job = random_job(seed)
    cands = candidates(job)
    fast = FastLP(job)
    fast.keep_duals = fast.warm_start = True
    first = fast(job, cands[:1])
    later = [fast(job, [c]) for c in cands[1:]]
    now = FastLP(job)
    now.keep_duals = True
    eager = now(job, cands[:1]).duals  # read at once
    d = first.duals
    assert list(d.S) == cands[:1]
    assert d.yb == pytest.approx(first.gamma, rel=1e-7, abs=1e-9)
    assert d.yb == pytest.approx(eager.yb, rel=1e-9, abs=1e-12)
    assert list(d.mu) == pytest.approx(list(eager.mu), abs=1e-9)
    assert first.basis is not None
    fast.warm = first
    again = fast(job, cands[:1])
    assert again.gamma == pytest.approx(first.gamma, rel=1e-9)
    assert all(r.duals is not None for r in later)
