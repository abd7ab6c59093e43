"""Candidate classes with the RESULT tree counted (controller/plan/orbits.py, issue 41): every
member of a class has the same γ (one job) or joint score (several jobs), and the greedies
that score one member per class choose what the greedy without classes chooses."""

import random

import pytest

from controller.plan.greedy import greedy, greedy_jobs
from controller.plan.jobs import JobEntry
from controller.plan.lp import candidates, make_job
from controller.plan.lp_fast import FastLP
from controller.plan.lp_jobs import FastJointLP, make_jobset, per_job_sets
from controller.plan.orbits import result_orbits, tree_links, up_path
from topo.models import fat_tree, hosts, parse_topology, switches


def _job(k: int, seed: int, result_load: bool = True):
    g = fat_tree(k)
    rng = random.Random(seed)
    hs = [h for h in hosts(g) if h != "h0"]
    ws = rng.sample(hs, rng.randint(3, len(hs)))
    return make_job(g, "h0", ws, result_load=result_load), rng


def test_tree_of_a_set_is_the_union_of_root_paths():
    """T(S ∪ {v}) = T(S) ∪ P(v), the identity the pair check rests on."""
    job, rng = _job(8, 3)
    cands = candidates(job)
    for _ in range(10):
        S = rng.sample(cands, 3)
        v = rng.choice([c for c in cands if c not in S])
        assert tree_links(job, [*S, v]) == tree_links(job, S) | up_path(job.graph, job.ps_tor, v)


@pytest.mark.parametrize("seed", range(12))
def test_members_of_a_class_have_equal_gamma(seed):
    job, rng = _job(4 if seed % 3 else 8, seed)
    fast = FastLP(job)
    cands = candidates(job)
    S = rng.sample(cands, rng.randint(0, 2))
    U = [c for c in cands if c not in S]
    classes = result_orbits(job.graph, [job], [S], job.capacity, S, U)
    assert sorted(c for cl in classes for c in cl) == sorted(U)
    for cl in classes:
        gam = [fast(job, [*S, m]).gamma for m in cl]
        assert max(gam) - min(gam) <= 1e-9 * max(1.0, max(gam)), (S, cl, gam)


def test_the_tree_leaves_most_symmetry():
    """Fat-tree k=8, every host a worker, RESULT load: few classes (the speed-up exists),
    but more than without the tree (pairs whose tree does not map are not merged)."""
    from topo.symmetry import candidate_orbits

    g = fat_tree(8)
    job = make_job(g, "h0", [h for h in hosts(g) if h != "h0"], result_load=True)
    U = candidates(job)
    S = ["core0"]
    U = [c for c in U if c not in S]
    new = result_orbits(g, [job], [S], job.capacity, S, U)
    old = candidate_orbits(g, job.ps, job.ps_tor, job.workers, job.capacity, S, U)
    assert len(old) < len(new) <= len(U) // 4


@pytest.mark.parametrize("seed", range(20))
def test_greedy_with_classes_equals_greedy_without(seed):
    """The default greedy (lazy, classes, warm starts) against the exhaustive greedy with no
    classes, RESULT load counted: same S in the same order, same γ."""
    job, _ = _job(4, 100 + seed)
    new = greedy(job, 4, lp=FastLP(job))
    old = greedy(job, 4, lp=FastLP(job), lazy=False, symmetry=False, warm=False)
    assert new.deployed == old.deployed
    assert new.gamma == pytest.approx(old.gamma, rel=1e-9)
    assert new.lp_solves <= old.lp_solves


def _jobset(seed: int, k: int = 4):
    g = parse_topology(f"fattree:{k}")
    rng = random.Random(seed)
    hs = hosts(g)
    rng.shuffle(hs)
    n_jobs = rng.randint(2, 3)
    per = (len(hs) - n_jobs) // n_jobs
    specs = []
    for j in range(n_jobs):
        part = hs[j * (per + 1):(j + 1) * (per + 1)]
        specs.append(JobEntry(f"j{j}", part[0], tuple(part[1:1 + rng.randint(2, per)])))
    return make_jobset(g, specs, result_load=rng.random() < 0.7)


@pytest.mark.parametrize("seed", range(8))
def test_joint_classes_have_equal_scores(seed):
    js = _jobset(seed)
    lp = FastJointLP(js)
    cands = [c for c in sorted({c for j in js.jobs for c in candidates(j)}) if c not in js.tors]
    S = random.Random(seed).sample(cands, 1)
    U = [c for c in cands if c not in S]
    usable = [set(candidates(j)) for j in js.jobs]
    classes = result_orbits(js.graph, js.jobs, per_job_sets(js, S), js.capacity, S, U, usable)
    for cl in classes:
        scores = [lp([*S, m]).score for m in cl]
        for sc in scores[1:]:
            assert sc == pytest.approx(scores[0], rel=1e-7, abs=1e-9), (S, cl)


@pytest.mark.parametrize("seed", range(12))
def test_joint_greedy_with_classes_equals_without(seed):
    js = _jobset(seed)
    new = greedy_jobs(js, 3)
    old = greedy_jobs(js, 3, symmetry=False, warm=False)
    assert new.deployed == old.deployed
    assert new.result.score == pytest.approx(old.result.score, rel=1e-6, abs=1e-9)
    assert new.lp_solves <= old.lp_solves


@pytest.mark.parametrize("seed", range(6))
def test_warm_starts_change_no_score(seed):
    """Every candidate's joint LP solved warm (from the parent's first-stage basis) has the
    cold solve's score, and the greedy chooses the same S."""
    js = _jobset(50 + seed)
    cold = FastJointLP(js)
    warm = FastJointLP(js)
    warm.warm_start = True
    parent = warm([])
    warm.warm = parent
    for s in [c for c in sorted({c for j in js.jobs for c in candidates(j)}) if c not in js.tors]:
        assert warm([s]).score == pytest.approx(cold([s]).score, rel=1e-7, abs=1e-9), s
    a = greedy_jobs(js, 3, symmetry=False, warm=True)
    b = greedy_jobs(js, 3, symmetry=False, warm=False)
    assert a.deployed == b.deployed
    assert a.result.gammas == b.result.gammas  # the final S is re-solved cold: same routing


def test_hand_solved_classes_on_fat_tree_4():
    """Fat-tree k=4, PS h0 (ToR edge0), the other 15 hosts workers, S = ∅, RESULT load.
    The tree (parents by smallest name) runs edge0 → agg0 → core0 → agg2/agg4/agg6 → the
    other pods' edges, and edge0 → agg0 → edge1.  Pod swaps among pods 1–3 and edge swaps
    inside them map it onto itself: {edge2..edge7}, {agg2, agg4, agg6}, {agg3, agg5, agg7}.
    Swapping cores 2 and 3 leaves it alone: {core2, core3}.  Swapping agg indices (agg0 ↔
    agg1 with the core groups) or cores 0 and 1 moves it: agg0, agg1, core0, core1 stay
    apart, where the classes without the tree merge them."""
    from topo.symmetry import candidate_orbits

    g = fat_tree(4)
    job = make_job(g, "h0", [h for h in hosts(g) if h != "h0"], result_load=True)
    U = candidates(job)
    assert result_orbits(g, [job], [[]], job.capacity, [], U) == [
        ["agg0"], ["agg1"], ["agg2", "agg4", "agg6"], ["agg3", "agg5", "agg7"], ["core0"],
        ["core1"], ["core2", "core3"], ["edge1"], [f"edge{i}" for i in range(2, 8)]]
    assert candidate_orbits(g, "h0", "edge0", job.workers, {}, [], U) == [
        ["agg0", "agg1"], [f"agg{i}" for i in range(2, 8)], [f"core{i}" for i in range(4)],
        ["edge1"], [f"edge{i}" for i in range(2, 8)]]


def test_group_paths_composed_at_the_switch_equal_the_hosts():
    """FastLP's per-class path vectors, composed as (r, t) then P_{t,dst} for a single-homed
    representative, equal :func:`controller.plan.lp._group_coeffs` exactly, on fat-trees and
    on a random network with dual-homed hosts."""
    from controller.plan.lp import _group_coeffs
    from tests.test_plan_lazy import random_job

    jobs = [_job(4, 1)[0], _job(8, 2)[0], *(random_job(seed) for seed in range(12))]
    for job in jobs:
        fast = FastLP(job)
        g = job.graph
        dsts = [n for n, k in g.nodes(data="kind") if k == "switch"]
        for gi, grp in enumerate(fast.groups):
            for dst in dsts:
                if not fast._reaches(gi, dst):
                    continue
                assert dict(fast._group_items(gi, dst)) == dict(_group_coeffs(g, grp, dst))


def _reference_classes(job, S, U):
    """The classes by the module's definition, nothing skipped or cached: union v, σ(v) for
    every generator σ fixing d, s_d, W (setwise), the capacities and S, with
    σ(T(S) ∪ P(v)) = T(S) ∪ P(σ(v)) compared as whole link sets."""
    from networkx.utils import UnionFind

    from topo.models import natural_key
    from topo.symmetry import generators

    uf = UnionFind(U)
    T = tree_links(job, S)
    W = set(job.workers)
    for p in generators(job.graph):
        def img(n, p=p):
            return p.get(n, n)

        if img(job.ps) != job.ps or img(job.ps_tor) != job.ps_tor:
            continue
        if {img(w) for w in W} != W or {img(s) for s in S} != set(S):
            continue
        if any(job.capacity.get(v) != job.capacity.get(img(v)) for v in p):
            continue
        for v in U:
            w = img(v)
            if w == v or w not in uf.parents:
                continue
            left = {(img(a), img(b)) for a, b in T | up_path(job.graph, job.ps_tor, v)}
            if left == T | up_path(job.graph, job.ps_tor, w):
                uf.union(v, w)
    out = [sorted(m, key=natural_key) for m in uf.to_sets()]
    return sorted(out, key=lambda m: natural_key(m[0]))


@pytest.mark.parametrize("seed", range(8))
def test_classes_equal_the_definition(seed):
    """result_orbits (σ skipped once its candidate pairs are merged, tree images only for
    the σ still needed) gives exactly the classes of the definition, on random worker sets,
    random S and random capacities, fat-trees and a leaf-spine."""
    rng = random.Random(500 + seed)
    g = parse_topology("leafspine:4,4,3" if seed % 4 == 3 else f"fattree:{4 if seed % 2 else 6}")
    hs = hosts(g)
    ps = hs[0]
    ws = rng.sample(hs[1:], rng.randint(3, len(hs) - 1))
    caps = None
    if seed % 3 == 0:  # unequal capacities break some symmetry
        caps = {s: float(rng.choice([1, 2])) for s in switches(g)}
    job = make_job(g, ps, ws, result_load=True, capacity=caps)
    cands = candidates(job)
    for _ in range(3):
        S = rng.sample(cands, rng.randint(0, min(3, len(cands) - 1)))
        U = [c for c in cands if c not in S]
        got = result_orbits(g, [job], [S], job.capacity, S, U)
        assert got == _reference_classes(job, S, U), (S, ws)
