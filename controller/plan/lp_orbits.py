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

__all__ = ["GroupOrbits", "group_orbits"]

_CACHE: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


class GroupOrbits:
    """The generators usable for one job's LP (module doc), as flat arrays: per generator,
    the groups it moves (g → σg) and the directed links it moves (e → σe)."""

    def __init__(self, job, groups: Sequence[tuple[str, ...]], links: Sequence[tuple[str, str]]
                 ) -> None:
        import numpy as np

        from controller.plan.orbits import _fixing

        self.np = np
        self.n_groups = len(groups)
        self.n_links = len(links)
        g = job.graph
        rep_group = {grp[0]: gi for gi, grp in enumerate(groups)}
        workers = set(job.workers)
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
        for p, _, _ in _fixing(g, [job], job.capacity):
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
        self.job = job
        self.link_idx = {e: i for i, e in enumerate(links)}
        self._memo: dict[tuple, tuple] = {}  # S → (tree mask, fixes S, maps T(S))
        self._base_tree = None

    def _tree_of(self, S: Sequence[str]):
        """T(S) as a link mask: T(∅) (with d → s_d) plus each s's root path
        (:func:`controller.plan.orbits.tree_links`)."""
        from controller.plan.orbits import tree_links, up_path

        np, job = self.np, self.job
        if self._base_tree is None:
            self._base_tree = np.zeros(self.n_links, dtype=bool)
            self._base_tree[[self.link_idx[e] for e in tree_links(job, [])]] = True
        tree = self._base_tree.copy()
        for s in S:
            tree[[self.link_idx[e] for e in up_path(job.graph, job.ps_tor, s)]] = True
        return tree

    def _tree_ok(self, tree, gens=None):
        """Whether each generator (of ``gens``, default all) maps the link set ``tree`` onto
        itself: e ∈ T ⟺ σ(e) ∈ T for every link it moves."""
        np = self.np
        if gens is None:
            bad = tree[self.l_src] != tree[self.l_dst]
            return np.bincount(self.l_gen[bad], minlength=self.n_gens) == 0
        out = np.ones(len(gens), dtype=bool)
        for k, i in enumerate(gens.tolist()):
            a, b = self.gen_ptr[i], self.gen_ptr[i + 1]
            out[k] = bool(np.all(tree[self.l_src[a:b]] == tree[self.l_dst[a:b]]))
        return out

    def usable_for(self, S: Sequence[str]):
        """:meth:`usable` for the job's own S (with its RESULT tree if it counts it),
        incremental from S minus its last switch when that was asked before (the greedy's
        LP(S) before its candidates' LP(S ∪ {s})): only the generators that move a link the
        new root path adds to the tree are checked again."""
        np, job = self.np, self.job
        key = tuple(S)
        hit = self._memo.get(key)
        if hit is None:
            parent = self._memo.get(key[:-1]) if key else None
            if not job.result_load:
                tree = None
                fix = self.usable(S, None)
                tok = None
            elif parent is None or parent[0] is None:
                tree = self._tree_of(S)
                fix = self.usable(S, None)
                tok = self._tree_ok(tree)
            else:
                from controller.plan.orbits import up_path

                tree = parent[0].copy()
                s = key[-1]
                path = np.array([self.link_idx[e] for e in up_path(job.graph, job.ps_tor, s)],
                                dtype=np.int64)
                new = path[~tree[path]]
                tree[new] = True
                fix = parent[1].copy()
                ix = self.moving.get(s)
                if ix is not None:
                    fix[ix] = False
                tok = parent[2].copy()
                if len(new):
                    aff = np.unique(np.concatenate(
                        [self.l_gen[self.by_link[self.link_ptr[e]:self.link_ptr[e + 1]]]
                         for e in new.tolist()]))
                    tok[aff] = self._tree_ok(tree, aff)
            if len(self._memo) > 256:
                self._memo.clear()
            hit = self._memo[key] = (tree, fix, tok)
        tree, fix, tok = hit
        return fix if tok is None else fix & tok

    def usable(self, S: Sequence[str], tree) -> Any:
        """Which generators fix every s ∈ S and the link set ``tree`` (a boolean mask over
        the links, or None without the RESULT term): boolean mask over the generators."""
        np = self.np
        ok = np.ones(self.n_gens, dtype=bool)
        for s in S:
            ix = self.moving.get(s)
            if ix is not None:
                ok[ix] = False
        if tree is not None and len(self.l_src):
            bad = tree[self.l_src] != tree[self.l_dst]
            ok[self.l_gen[bad]] = False
        return ok

    def group_labels(self, ok) -> tuple[Any, int]:
        """(orbit label per group, number of orbits) under the generators ``ok``; labels
        numbered by each orbit's first group (so orbit i's first group < orbit i+1's)."""
        return _components(self.np, self.n_groups, self.g_src, self.g_dst, ok[self.g_gen])

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


def group_orbits(job, groups: Sequence[tuple[str, ...]], links: Sequence[tuple[str, str]]
                 ) -> GroupOrbits:
    """:class:`GroupOrbits` for the job, cached per frozen graph, PS and workers."""
    g = job.graph
    key = (job.ps, job.ps_tor, tuple(job.workers), tuple(sorted(job.capacity.items())),
           len(groups), len(links))
    if not nx.is_frozen(g):
        return GroupOrbits(job, groups, links)
    cache = _CACHE.setdefault(g, {})
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = GroupOrbits(job, groups, links)
    return hit
