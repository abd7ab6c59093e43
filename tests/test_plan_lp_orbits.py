"""k = 32 planning speed-ups (issue 41), each exact: every group's ECMP vectors towards a
destination as one sparse matrix (controller/plan/ecmp_matrix.py) and symmetric worker
groups merged inside each LP (controller/plan/lp_orbits.py).  The merged LP's γ equals the
unmerged LP's and the PuLP reference's; the bound from the merged LP's duals is a bound; the
greedy with both chooses what the exhaustive greedy without them chooses."""

import random

import numpy as np
import pytest

from controller.plan.ecmp_matrix import ecmp_rows
from controller.plan.greedy import greedy
from controller.plan.lazy import bounds
from controller.plan.lp import _group_coeffs, candidates, make_job, solve_lp
from controller.plan.lp_fast import FastLP
from tests.test_plan_lazy import random_job
from topo.models import hosts, parse_topology, switches
from topo.paths import _fractions


def _dense(items, link_idx):
    out = np.zeros(len(link_idx))
    for e, f in items:
        out[link_idx[e]] += f
    return out


@pytest.mark.parametrize("topo", ["fattree:4", "fattree:6", "leafspine:3,2,2"])
def test_ecmp_rows_equal_the_per_source_walk(topo):
    g = parse_topology(topo)
    fast = FastLP(make_job(g, "h0", [h for h in hosts(g) if h != "h0"]))
    sw = switches(g)
    for dst in [*sw, "h0"]:
        F = ecmp_rows(g, sw, dst, fast.link_idx).toarray()
        for i, t in enumerate(sw):
            ref = _dense(_fractions(g, t, dst), fast.link_idx) if t != dst else 0.0
            assert np.abs(F[i] - ref).max() < 1e-12, (dst, t)


@pytest.mark.parametrize("seed", range(30))
def test_group_matrix_equals_the_group_coefficients(seed):
    """Random networks (some workers dual-homed): every row of FastLP.group_matrix is the
    group's load vector of controller.plan.lp (access link 1, shared links × |g|)."""
    job = random_job(seed)
    fast = FastLP(job)
    for dst in [job.ps_tor, *candidates(job)]:
        M, reach = fast.group_matrix(dst)
        for gi, grp in enumerate(fast.groups):
            assert reach[gi] == fast._reaches(gi, dst)
            ref = _dense(_group_coeffs(job.graph, grp, dst), fast.link_idx) if reach[gi] \
                else np.zeros(len(fast.links))
            assert np.abs(M[gi].toarray()[0] - ref).max() < 1e-12


@pytest.mark.parametrize("result_load", [False, True])
def test_fattree_k4_orbits_by_hand(result_load):
    """fat-tree k = 4, PS h0 (edge0), every other host a worker, S = ∅: the groups are the 8
    edge switches' hosts; edge0's h1 and edge1 (the PS's pod) stay alone, the 6 edges of
    pods 1–3 are one orbit (pod swaps, edge swaps; the RESULT tree is the same in every
    pod).  γ(∅) = 1/7: the 14 workers off edge0 send γ each over the two links into edge0.
    With core0 deployed the pods 1–3 stay one orbit; with agg2 (pod 1) pod 1 splits off."""
    g = parse_topology("fattree:4")
    job = make_job(g, "h0", [h for h in hosts(g) if h != "h0"], result_load=result_load)
    merged, plain = FastLP(job), FastLP(job, symmetric=False)
    orbits, _ = merged._orbits([])
    assert orbits[1] == 3
    assert merged(job, []).gamma == pytest.approx(1 / 7, rel=1e-9)
    assert merged._orbits(["core0"])[0][1] == 3
    # pod 1's two edges (edge swaps fix agg2), pods 2–3's four edges
    assert merged._orbits(["agg2"])[0][1] == 4
    for S in ([], ["core0"], ["agg2"], ["agg2", "core3"]):
        ref = solve_lp(job, S).gamma
        assert merged(job, S).gamma == pytest.approx(ref, rel=1e-7)
        assert plain(job, S).gamma == pytest.approx(ref, rel=1e-7)


def _random_fat_job(seed: int):
    rng = random.Random(seed)
    g = parse_topology(rng.choice(["fattree:4", "fattree:6", "leafspine:4,3,3"]))
    ws = [h for h in hosts(g) if h != "h0"]
    if rng.random() < 0.5:
        ws = sorted(rng.sample(ws, rng.randint(3, len(ws))), key=lambda h: int(h[1:]))
    cap = rng.choice([None, None, 3.0, 6.5])
    return make_job(g, "h0", ws, capacity=cap, result_load=rng.random() < 0.6), rng


@pytest.mark.parametrize("seed", range(40))
def test_merged_lp_equals_the_full_lp(seed):
    """Random worker sets, capacities, S on fat-trees and a leaf-spine: γ with orbits merged
    = γ without = the PuLP reference (every third case), and the expanded solution is
    feasible for the full LP (its loads within capacity)."""
    job, rng = _random_fat_job(seed)
    merged, plain = FastLP(job), FastLP(job, symmetric=False)
    cands = candidates(job)
    for m in (0, 1, 2, 3):
        S = rng.sample(cands, min(m, len(cands)))
        a, b = merged(job, S), plain(job, S)
        assert a.gamma == pytest.approx(b.gamma, rel=1e-9, abs=1e-12), (seed, S)
        if m == seed % 3:
            assert a.gamma == pytest.approx(solve_lp(job, S).gamma, rel=1e-7)
        bw = dict(zip(merged.links, merged.bw.tolist(), strict=True))
        for e, load in a.loads.items():
            assert load <= bw[e] * (1 + 1e-7) + 1e-9, (seed, S, e)


@pytest.mark.parametrize("seed", range(20))
def test_bound_from_merged_duals_is_a_bound(seed):
    """β(s) from the merged LP(S)'s duals (π averaged over the links' orbits, μ_O / |O|)
    is ≥ γ(S ∪ {s}) for every candidate, at S = ∅ and after one greedy choice."""
    job, _ = _random_fat_job(seed)
    fast = FastLP(job)
    fast.keep_duals = True
    cands = candidates(job)
    first = greedy(job, 1, lp=FastLP(job)).deployed
    for S in ([], list(first)):
        base = fast(job, S)
        beta = bounds(fast, base, [s for s in cands if s not in S])
        for s, b in beta.items():
            assert b >= fast(job, [*S, s]).gamma - 1e-9, (seed, S, s)


@pytest.mark.parametrize("seed", range(16))
def test_greedy_with_orbits_equals_exhaustive_without(seed):
    """The lazy greedy on merged LPs picks the exhaustive, unmerged greedy's S and γ."""
    job, _ = _random_fat_job(seed)
    new = greedy(job, 3, lp=FastLP(job))
    old = greedy(job, 3, lp=FastLP(job, symmetric=False), lazy=False)
    assert new.deployed == old.deployed, seed
    assert new.gamma == pytest.approx(old.gamma, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_incremental_generator_check_equals_from_scratch(seed):
    """GroupOrbits.usable_for (incremental along a growing S) = the check from scratch."""
    job, rng = _random_fat_job(seed)
    fast = FastLP(job)
    fast._orbits([])
    sym = fast._sym
    if sym is None:
        return
    cands = candidates(job)
    S: list[str] = []
    for s in rng.sample(cands, min(5, len(cands))):
        S.append(s)
        inc = sym.usable_for(S)
        tree = sym._tree_of(S) if job.result_load else None
        assert np.array_equal(inc, sym.usable(S, tree)), (seed, S)


@pytest.mark.parametrize("seed", range(20))
def test_tree_index_is_the_result_tree(seed):
    """FastLP.tree_index(S) (T(∅) plus root paths) = the links of result_tree_coeffs(job, S),
    each with coefficient 1, on random networks and fat-trees."""
    from controller.plan.lp import result_tree_coeffs

    job, rng = _random_fat_job(seed) if seed % 2 else (random_job(seed), random.Random(seed))
    fast = FastLP(job)
    cands = candidates(job)
    for m in (0, 1, 3):
        S = rng.sample(cands, min(m, len(cands)))
        coeffs = result_tree_coeffs(job, S)
        assert all(c == 1.0 for _, c in coeffs)
        assert sorted(fast.tree_index(S).tolist()) == sorted(fast.link_idx[e] for e, _ in coeffs)
