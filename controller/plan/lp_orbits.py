"""Symmetric worker groups merged inside one LP(S) (issue 41): columns per orbit, not per group.

:class:`controller.plan.lp_fast.FastLP` already merges twin workers (one group per edge
switch on a fat-tree: 512 groups at k = 32, each with a column u_g and a column y_{g,s} per
s ∈ S).  When S touches few pods most of those groups are interchangeable; this module finds
which, and the LP then has one column per orbit of groups.

Setting
    Let H be a group of automorphisms σ of the capacitated graph, each fixing d, s_d, the
    worker set and the switch capacities (:func:`controller.plan.orbits._fixing`), every
    s ∈ S (pointwise), the RESULT tree's link set T(S) when the job counts it (e ∈ T ⟺
    σ(e) ∈ T), and mapping the representative of every twin class to a representative.  σ
    then permutes the groups, and their load vectors with them (ECMP fractions depend on
    the graph only: P_{σg,t}(σe) = P_{g,t}(e) for every fixed destination t ∈ S ∪ {s_d}).

Claim: LP(S) and the *merged* LP — one column u_O and y_{O,s} per H-orbit O of groups, with
load vector Σ_{g∈O} P_{g,·}, one cover row y_{O,s} − a_s ≤ 0 and one equality row
u_O + Σ_s y_{O,s} − γ = 0, capacity coefficient Σ_{g∈O} |g| — have the same optimum γ.
    (≤) a solution of the merged LP gives every g ∈ O its orbit's values: a solution of
    LP(S) with the same loads, capacities' inputs and γ.  (≥) for an optimal z of LP(S),
    z̄ = (1/|H|) Σ_{σ∈H} σ·z (σ·z: y_{g,s} ↦ y_{σg,s}, u_g ↦ u_{σg}; γ, a fixed) is feasible
    — each σ·z is (σ maps every row of LP(S) onto a row with the same bound) and the feasible
    set is convex — with the same γ, and it is constant on every orbit, so one value per
    orbit is a solution of the merged LP with γ(S).  (Symmetry and convexity: averaging an
    optimal solution over the group's permutations stays feasible and optimal.)

Multipliers for the lazy bound (:mod:`controller.plan.lazy`)
    The bound of LP(S ∪ {s}) needs multipliers of the rows of LP(S) itself.  From the merged
    LP's (π on the load rows, μ_O, the others unchanged): π̄ = π averaged over each H-orbit
    of links, μ_g = μ_O / |O| (|O| the number of groups).  Every column vector v of the
    merged LP is H-invariant, and for such v, π̄·v = π·v (π̄ is π's average over H); π̄ is
    H-invariant, so π̄·P_g is the same for every g ∈ O and the reduced cost of every old
    column of LP(S) is its orbit column's divided by |O| (≤ 0 at an optimum), and y·b is
    the merged LP's (B is H-invariant).  Hence the bound's parts (``Duals.base``, ``rc_γ``,
    the excess) are the merged LP's numbers and π̄, μ_g the vectors it prices new columns
    with: the bound stays a bound.

Several jobs (the joint LP of :class:`controller.plan.lp_jobs.FastJointLP`, docs/design.md
§3.10): H's generators fix every job's d_k, s_k and W_k (each job's setwise), the shared
capacities, every s ∈ S and every job's T_k(S_k) (:func:`joint_group_orbits`), and map
representatives to representatives; they map W_k onto W_k, so an orbit never mixes jobs.
Every row of the joint LP (shared loads, shared capacities of S ∪ D, each job's own rows,
t ≤ γ_k / w_k) is mapped onto a row with the same bounds, and γ_k, t and the reliefs are
fixed, so the argument above holds for every stage of the lexicographic solve (each stage
only moves bounds and costs of fixed columns): each stage's optimum, hence every level of
the score, is the unmerged joint LP's.  (The stage solution's γ_k only decides whether a
blocking test is needed; the test's outcome is the same.)

Equal rows: in the merged LP every link of an H-orbit of links has the same load row (its
coefficients are H-invariant sums) and the same B_e, so :class:`controller.plan.lp_fast.MatrixLP`
(``dedupe``) keeps one row of each kind — the feasible set is the same; the kept row's
multiplier shared evenly among its copies is a multiplier of the LP with all of them.

Generators: the verified generators of :func:`topo.symmetry.generators` that move some worker
and pass the conditions above for S (checked exactly, per generator, on every link it moves);
H is the group they generate, a subgroup of the full symmetry group, so the orbits may be
finer than the true ones, never coarser.  No generators (other topologies): every group is
its own orbit, the LP is unchanged.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import networkx as nx

__all__ = ["GroupOrbits", "group_orbits", "joint_group_orbits", "equal_rows"]

_CACHE: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


class GroupOrbits:
    """The generators usable for the LP of one job or of several jobs sharing the links
    (module doc), as flat arrays: per generator, the groups it moves (g → σg; the groups of
    every job numbered one after the other, job k's from ``offsets[k]``) and the directed
    links it moves (e → σe)."""

    def __init__(self, jobs, groups: Sequence[Sequence[tuple[str, ...]]],
                 links: Sequence[tuple[str, str]], capacity=None) -> None:
        import numpy as np

        from controller.plan.orbits import _fixing

        self.np = np
        self.jobs = list(jobs)
        sizes = [len(gs) for gs in groups]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_groups = int(self.offsets[-1])
        self.n_links = len(links)
        g = self.jobs[0].graph
        rep_group = {grp[0]: int(self.offsets[k]) + gi for k, gs in enumerate(groups)
                     for gi, grp in enumerate(gs)}
        workers = {w for job in self.jobs for w in job.workers}
        nodes = list(g.nodes)
        nid = {n: i for i, n in enumerate(nodes)}
        N = len(nodes)
        lu = np.array([nid[u] for u, _ in links], dtype=np.int64)
        lv = np.array([nid[v] for _, v in links], dtype=np.int64)
        code = lu * N + lv
        order = np.argsort(code)
        sorted_code = code[order]
        # incident links per node (as tail or head), CSR
        inc_node = np.concatenate([lu, lv])
        inc_link = np.concatenate([np.arange(len(links)), np.arange(len(links))])
        o = np.argsort(inc_node, kind="stable")
        inc_link = inc_link[o]
        inc_ptr = np.searchsorted(inc_node[o], np.arange(N + 1))
        gs, gd, gg, ls, ld, lg = [], [], [], [], [], []
        moving: dict[str, list[int]] = {}
        perm = np.arange(N)
        kept = 0
        cap = self.jobs[0].capacity if capacity is None else capacity
        for p, _, _ in _fixing(g, self.jobs, cap):
            if not any(v in workers for v in p):
                continue  # moves no group: adds nothing to the groups' orbits
            pairs = []
            ok = True
            for v, w in p.items():
                if v in rep_group:
                    if w not in rep_group:
                        ok = False
                        break
                    pairs.append((rep_group[v], rep_group[w]))
            if not ok:
                continue
            i = kept
            kept += 1
            for v in p:
                moving.setdefault(v, []).append(i)
            src = np.array([nid[v] for v in p], dtype=np.int64)
            perm[src] = [nid[w] for w in p.values()]
            touched = np.unique(np.concatenate(
                [inc_link[inc_ptr[a]:inc_ptr[a + 1]] for a in src.tolist()]))
            img = perm[lu[touched]] * N + perm[lv[touched]]
            pos = np.searchsorted(sorted_code, img)
            perm[src] = src  # back to the identity
            gs.append(np.array([a for a, _ in pairs], dtype=np.int64))
            gd.append(np.array([b for _, b in pairs], dtype=np.int64))
            gg.append(np.full(len(pairs), i, dtype=np.int64))
            ls.append(touched)
            ld.append(order[pos])
            lg.append(np.full(len(touched), i, dtype=np.int64))
        empty = np.zeros(0, dtype=np.int64)
        cat = (lambda xs: np.concatenate(xs) if xs else empty)  # noqa: E731
        self.n_gens = kept
        self.g_src, self.g_dst, self.g_gen = cat(gs), cat(gd), cat(gg)
        self.l_src, self.l_dst, self.l_gen = cat(ls), cat(ld), cat(lg)
        self.moving = {v: np.array(ix, dtype=np.int64) for v, ix in moving.items()}
        # generator i's moved links are l_src[gen_ptr[i]:gen_ptr[i + 1]] (built in order);
        # the generators moving link e: l_gen[by_link[link_ptr[e]:link_ptr[e + 1]]]
        self.gen_ptr = np.searchsorted(self.l_gen, np.arange(kept + 1))
        self.by_link = np.argsort(self.l_src, kind="stable")
        self.link_ptr = np.searchsorted(self.l_src[self.by_link], np.arange(len(links) + 1))
        self.job = self.jobs[0]
        self.link_idx = {e: i for i, e in enumerate(links)}
        self._memo: dict[tuple, tuple] = {}  # S → (tree masks, fixes S, maps every T_k)
        self._base_trees: list | None = None

    def _tree_of(self, S: Sequence[str], sets: Sequence[Sequence[str]] | None = None) -> list:
        """Every job's T_k(S_k) as a link mask (None for a job without the RESULT term): T(∅)
        (with d → s_d) plus each s's root path (:func:`controller.plan.orbits.tree_links`);
        ``sets``: each job's S_k (default S for every job)."""
        from controller.plan.orbits import tree_links, up_path

        np = self.np
        if self._base_trees is None:
            self._base_trees = []
            for job in self.jobs:
                base = None
                if job.result_load:
                    base = np.zeros(self.n_links, dtype=bool)
                    base[[self.link_idx[e] for e in tree_links(job, [])]] = True
                self._base_trees.append(base)
        out = []
        for k, (job, base) in enumerate(zip(self.jobs, self._base_trees, strict=True)):
            if base is None:
                out.append(None)
                continue
            tree = base.copy()
            for s in (S if sets is None else sets[k]):
                tree[[self.link_idx[e] for e in up_path(job.graph, job.ps_tor, s)]] = True
            out.append(tree)
        return out

    def _tree_ok(self, trees: list, gens=None):
        """Whether each generator (of ``gens``, default all) maps every job's link set
        ``trees[k]`` onto itself: e ∈ T_k ⟺ σ(e) ∈ T_k for every link it moves."""
        np = self.np
        trees = [t for t in trees if t is not None]
        if gens is None:
            bad = np.zeros(len(self.l_src), dtype=bool)
            for tree in trees:
                bad |= tree[self.l_src] != tree[self.l_dst]
            return np.bincount(self.l_gen[bad], minlength=self.n_gens) == 0
        out = np.ones(len(gens), dtype=bool)
        for k, i in enumerate(gens.tolist()):
            a, b = self.gen_ptr[i], self.gen_ptr[i + 1]
            src, dst = self.l_src[a:b], self.l_dst[a:b]
            out[k] = all(bool(np.all(t[src] == t[dst])) for t in trees)
        return out

    def usable_for(self, S: Sequence[str], sets: Sequence[Sequence[str]] | None = None):
        """:meth:`usable` for S and each job's own S_k (``sets``, default S; with their
        RESULT trees where the job counts them), incremental from S minus its last switch
        when that was asked before (the greedy's LP(S) before its candidates' LP(S ∪ {s})):
        only the generators that move a link a new root path adds to a tree are checked
        again.  S_k(S ∪ {s}) must be S_k(S), plus s for the jobs that use it
        (:func:`controller.plan.lp_jobs.per_job_sets`)."""
        np = self.np
        S = list(S)
        per_job = [tuple(x) for x in sets] if sets is not None else [tuple(S)] * len(self.jobs)
        # keyed by S and every S_k (one cached GroupOrbits may serve callers whose S_k differ)
        key = (tuple(S), tuple(per_job))
        hit = self._memo.get(key)
        if hit is None:
            from controller.plan.orbits import up_path

            parent = None
            if S:  # S minus its last switch, each S_k without it (per_job_sets' order)
                last = S[-1]
                parent = self._memo.get((tuple(S[:-1]), tuple(tuple(x for x in Sk if x != last)
                                                              for Sk in per_job)))
            if not any(job.result_load for job in self.jobs):
                trees = None
                fix = self.usable(S, None)
                tok = None
            elif parent is None or parent[0] is None:
                trees = self._tree_of(S, sets)
                fix = self.usable(S, None)
                tok = self._tree_ok(trees)
            else:
                s = S[-1]
                trees = []
                new_links = []
                for k, (job, old) in enumerate(zip(self.jobs, parent[0], strict=True)):
                    if old is None or (sets is not None and s not in sets[k]):
                        trees.append(old)
                        continue
                    path = np.array([self.link_idx[e]
                                     for e in up_path(job.graph, job.ps_tor, s)],
                                    dtype=np.int64)
                    new = path[~old[path]]
                    tree = old
                    if len(new):
                        tree = old.copy()
                        tree[new] = True
                        new_links.append(new)
                    trees.append(tree)
                fix = parent[1].copy()
                ix = self.moving.get(s)
                if ix is not None:
                    fix[ix] = False
                tok = parent[2].copy()
                if new_links:
                    new = np.unique(np.concatenate(new_links))
                    aff = np.unique(np.concatenate(
                        [self.l_gen[self.by_link[self.link_ptr[e]:self.link_ptr[e + 1]]]
                         for e in new.tolist()]))
                    tok[aff] = self._tree_ok(trees, aff)
            if len(self._memo) > 256:
                self._memo.clear()
            hit = self._memo[key] = (trees, fix, tok)
        trees, fix, tok = hit
        return fix if tok is None else fix & tok

    def usable(self, S: Sequence[str], trees) -> Any:
        """Which generators fix every s ∈ S and every job's link set ``trees[k]`` (boolean
        masks over the links, None for a job without the RESULT term; ``trees`` None: no
        tree at all): boolean mask over the generators."""
        np = self.np
        ok = np.ones(self.n_gens, dtype=bool)
        for s in S:
            ix = self.moving.get(s)
            if ix is not None:
                ok[ix] = False
        if trees is not None and len(self.l_src):
            ok &= self._tree_ok(trees)
        return ok

    def group_labels(self, ok) -> tuple[Any, int]:
        """(orbit label per group, number of orbits) under the generators ``ok``; labels
        numbered by each orbit's first group (so orbit i's first group < orbit i+1's)."""
        return _components(self.np, self.n_groups, self.g_src, self.g_dst, ok[self.g_gen])

    def invariant(self, values, ok) -> bool:
        """Whether ``values`` (per link index) is invariant under every generator of ``ok``
        (v[σe] = v[e] on every link it moves), hence under the group they generate."""
        keep = ok[self.l_gen]
        return bool(self.np.array_equal(values[self.l_src[keep]], values[self.l_dst[keep]]))

    def link_labels(self, ok) -> tuple[Any, int]:
        """(orbit label per directed link, number of orbits) under the generators ``ok``."""
        return _components(self.np, self.n_links, self.l_src, self.l_dst, ok[self.l_gen])


def _components(np, n: int, src, dst, keep) -> tuple[Any, int]:
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    a, b = src[keep], dst[keep]
    G = sp.csr_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    k, lab = connected_components(G, directed=False)
    # renumber by first member, so labels are in group order
    first = np.full(k, n, dtype=np.int64)
    np.minimum.at(first, lab, np.arange(n))
    rank = np.empty(k, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(k)
    return rank[lab], int(k)


def equal_rows(used, lr, lc, lv, n_col: int, rhs) -> tuple:
    """Load rows (row lr[i] has column lc[i], value lv[i]; row r is link used[r], bound
    rhs[r]) without every row that equals an earlier one — same columns, same coefficients,
    same bound, compared exactly: (kept links, rows, columns, values, load_map) with
    load_map = (every link, its kept row, 1 / copies of that row).  Candidates for equality
    are found by a hash (two fixed random projections), then compared entry by entry (a
    collision keeps its row)."""
    import numpy as np
    import scipy.sparse as sp

    n = len(used)
    L = sp.csr_matrix((lv, (lr, lc)), shape=(n, n_col))
    L.sum_duplicates()
    L.sort_indices()
    nnz = np.diff(L.indptr)
    rng = np.random.default_rng(0)
    h1 = L @ rng.random(n_col)
    h2 = L @ rng.random(n_col)
    key = np.lexsort((np.arange(n), h2, h1, rhs, nnz))
    ks = key[1:]
    same = (nnz[key[:-1]] == nnz[ks]) & (h1[key[:-1]] == h1[ks]) & \
        (h2[key[:-1]] == h2[ks]) & (rhs[key[:-1]] == rhs[ks])
    # candidate representative: the first row of its run of equal keys (smallest index)
    start = np.concatenate([[True], ~same])
    run = np.cumsum(start) - 1
    first = key[start][run]
    rep = np.empty(n, dtype=np.int64)
    rep[key] = first
    # verify exactly: every entry of row r equals the same entry of rep[r]
    cand = np.nonzero(rep != np.arange(n))[0]
    if len(cand):
        cnt = nnz[cand]
        off = np.repeat(np.cumsum(cnt) - cnt, cnt)
        pos = np.arange(int(cnt.sum())) - off
        a = np.repeat(L.indptr[cand], cnt) + pos
        b = np.repeat(L.indptr[rep[cand]], cnt) + pos
        bad = (L.indices[a] != L.indices[b]) | (L.data[a] != L.data[b])
        wrong = np.bincount(np.repeat(np.arange(len(cand)), cnt)[bad],
                            minlength=len(cand)) > 0
        rep[cand[wrong]] = cand[wrong]  # a hash collision: kept as its own row
    keep = np.nonzero(rep == np.arange(n))[0]
    new_of = np.full(n, -1, dtype=np.int64)
    new_of[keep] = np.arange(len(keep))
    row = new_of[rep]
    copies = np.bincount(row, minlength=len(keep)).astype(float)
    K = L[keep].tocoo()
    return (used[keep], K.row.astype(np.int64), K.col.astype(np.int64), K.data,
            (used, row, 1.0 / copies[row]))


def group_orbits(job, groups: Sequence[tuple[str, ...]], links: Sequence[tuple[str, str]]
                 ) -> GroupOrbits:
    """:class:`GroupOrbits` for the job, cached per frozen graph, PS and workers."""
    return joint_group_orbits([job], [groups], links, job.capacity)


def joint_group_orbits(jobs, groups: Sequence[Sequence[tuple[str, ...]]],
                       links: Sequence[tuple[str, str]], capacity) -> GroupOrbits:
    """:class:`GroupOrbits` for several jobs sharing the links and the capacities (each
    job's groups in ``groups``), cached per frozen graph, jobs and capacities."""
    g = jobs[0].graph
    key = (tuple((job.ps, job.ps_tor, tuple(job.workers), job.result_load) for job in jobs),
           tuple(sorted(capacity.items())), tuple(len(gs) for gs in groups), len(links))
    if not nx.is_frozen(g):
        return GroupOrbits(jobs, groups, links, capacity)
    cache = _CACHE.setdefault(g, {})
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = GroupOrbits(jobs, groups, links, capacity)
    return hit
