"""Candidate classes of equal γ (or equal joint score) with the RESULT tree counted (issue 41).

:func:`topo.symmetry.candidate_orbits` merges candidates v, σ(v) for verified automorphisms σ
of the capacitated graph that fix d, s_d, the workers, the capacities and S.  With the
RESULT multicast term (``job.result_load``) that is not enough: the tree of
:func:`controller.plan.mcast_tree.result_tree` breaks ties by name, so σ need not map the
tree of S ∪ {v} onto the tree of S ∪ {σ(v)}, and the greedy used no symmetry at all — at
fat-tree k = 16 that is 4,203 LPs for 16 steps instead of about 70.

The claim checked here, per generator σ and candidate pair (v, w = σ(v)):
    LP(S ∪ {v}) is a function of the capacitated graph, d, s_d, W, the capacities, the set
    S ∪ {v} (its order only names the intervals; the optimum γ does not depend on it) and
    the RESULT tree's link set T(S ∪ {v}) (every tree link carries coefficient 1 on γ).  σ
    maps every ECMP fraction P_{a,b}(e) to P_{σa,σb}(σe) (per-hop even split depends on the
    graph only), so if σ fixes d, s_d, W, the capacities and S setwise and also

        σ(T(S ∪ {v})) = T(S ∪ {w})         (as sets of directed links)

    then σ maps LP(S ∪ {v}) onto LP(S ∪ {w}) (renaming variables and rows), and γ is equal.
    Every node has one tree parent whatever the targets (``result_tree``), so the tree of a
    target set is the union of its targets' root paths: T(S ∪ {v}) = T(S) ∪ P(v), with P(v)
    the path from s_d down to v.  The check compares these sets exactly (no tolerance).
    Equality of γ is an equivalence, so the union-find classes of checked pairs have one γ.

Several jobs (docs/design.md §3.10): σ must fix every job's d_j, s_j and W_j (setwise, each
job on its own), the shared capacities and S; job j's deployment set is S_j = S, then the
other PS ToRs, each pruned by reachability (:func:`controller.plan.lp_jobs.per_job_sets`),
which σ preserves, so σ maps S_j(S ∪ {v}) onto S_j(S ∪ {w}); the tree check is made per job
on its own T_j(S_j) ∪ P_j(v) (only for the jobs whose S_j holds v).  The joint LP is then
mapped onto itself job by job, and every γ_j — hence the score — is equal.

Generators come from :func:`topo.symmetry.generators` (verified automorphisms of generated
fat-trees and leaf-spines; none for other topologies, where every candidate is its own
class).  A pair that fails the check is simply not merged: the classes may be finer than the
true symmetry classes, never coarser.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from controller.plan.lp import Job, result_tree_links
from controller.plan.mcast_tree import root_path
from topo.models import natural_key

__all__ = ["result_orbits", "up_path", "tree_links"]

Link = tuple[str, str]


def tree_links(job: Job, deployed: Sequence[str]) -> set[Link]:
    """T(S): the RESULT tree's directed links (parent, child), the PS's link d → s_d
    included, as :func:`controller.plan.lp.result_tree_coeffs` counts them."""
    return {(job.ps, job.ps_tor)} | result_tree_links(job, deployed)


def up_path(graph: nx.Graph, root: str, s: str) -> frozenset[Link]:
    """P(s): the RESULT tree's links from ``root`` (s_d) down to the switch s
    (:func:`controller.plan.mcast_tree.root_path`, cached per frozen graph)."""
    return root_path(graph, root, s)


def _moved_diff(p: Mapping[str, str], T: set[Link], by_node: Mapping[str, list[Link]]):
    """(σ(T) − T, T − σ(T)) and a membership test for σ(T), for an involution σ (every
    generator is a product of swaps): only links with a moved end can change."""
    touched = {e for n in p for e in by_node.get(n, ())}
    extra, missing = set(), set()
    for a, b in touched:
        img = (p.get(a, a), p.get(b, b))
        if img not in T:
            extra.add(img)
            missing.add((a, b))  # σ(σ(e)) = e: e ∉ σ(T) exactly when σ(e) ∉ T
    return extra, missing


def result_orbits(
    graph: nx.Graph,
    jobs: Sequence[Job],
    sets: Sequence[Sequence[str]],
    capacity: Mapping[str, float],
    deployed: Sequence[str],
    cands: Sequence[str],
    usable: Sequence[set[str]] | None = None,
) -> list[list[str]]:
    """Classes of ``cands`` proven to have equal γ (one job) or equal joint score (module
    doc), each in name order, classes ordered by their first member.

    ``sets``: each job's deployment set for S (S_j; S itself for one job), whose tree
    T_j is checked; ``usable``: per job, the candidates it would add to its S_j (default:
    all); ``capacity``: the switch capacities (shared, or the one job's)."""

    import numpy as np

    gens = _fixing(graph, jobs, capacity)
    ids, pair_ix = _pair_arrays(graph, jobs, capacity, gens)
    # the classes as labels over every switch (a union relabels one class: 1,280 switches
    # at k = 32), so the pairs a generator could still merge are found in one array pass
    known = np.zeros(len(ids) + 1, dtype=bool)  # the last slot: a name not in ``ids``
    known[[ids.get(c, len(ids)) for c in cands]] = True
    known[len(ids)] = False
    lab = np.arange(len(ids) + 1)
    S = set(deployed)
    trees = [tree_links(j, Sj) if j.result_load else None
             for j, Sj in zip(jobs, sets, strict=True)]
    index: list[dict[str, list[Link]]] = []
    for T in trees:
        by_node: dict[str, list[Link]] = {}
        for e in T or ():
            by_node.setdefault(e[0], []).append(e)
            by_node.setdefault(e[1], []).append(e)
        index.append(by_node)
    for (p, involution, pairs), (vi, wi) in zip(gens, pair_ix, strict=True):
        # only the candidate pairs not yet in one class need the check: skip σ before
        # computing its tree images when none is left (the classes are the same)
        if not len(vi):
            continue
        todo = np.nonzero(known[vi] & known[wi] & (lab[vi] != lab[wi]))[0]
        if not len(todo):
            continue
        # σ(S) = S: for an involution, s ∈ S ⇒ σ(s) ∈ S is enough (σ(s) ∈ S, s ∉ S would
        # put σ(s) in S with its image s outside)
        if involution:
            if not all(p.get(v, v) in S for v in S):
                continue
        elif any((v in S) != (w in S) for v, w in p.items()):
            continue
        # σ(T_j) − T_j and T_j − σ(T_j), per job with the RESULT term
        diffs = []
        for T, by_node in zip(trees, index, strict=True):
            if T is None:
                diffs.append(None)
                continue
            if involution:
                extra, missing = _moved_diff(p, T, by_node)
                diffs.append((_Image(p, T), extra, missing))
            else:
                img = {(p.get(a, a), p.get(b, b)) for a, b in T}
                diffs.append((img, img - T, T - img))
        for j in todo.tolist():
            a, b = lab[vi[j]], lab[wi[j]]
            if a == b:
                continue
            v, w = pairs[j]
            if all(_tree_maps(p, job, T, d, v, w, usable[k] if usable else None)
                   for k, (job, T, d) in enumerate(zip(jobs, trees, diffs, strict=True))):
                lab[lab == b] = a
    members: dict[int, list[str]] = {}
    for c in cands:
        members.setdefault(int(lab[ids[c]]) if c in ids else -1 - len(members), []).append(c)
    out = [sorted(m, key=natural_key) for m in members.values()]
    return sorted(out, key=lambda m: natural_key(m[0]))


_PAIRS: weakref.WeakKeyDictionary[Any, dict[Any, tuple]] = weakref.WeakKeyDictionary()


def _pair_arrays(graph: nx.Graph, jobs: Sequence[Job], capacity: Mapping[str, float],
                 gens: list[_Gen]) -> tuple[dict[str, int], list[tuple[Any, Any]]]:
    """An index per node named in some generator's pairs, and each generator's pairs
    (v, w) as two index arrays (in the order of its ``pairs``), once per graph and jobs."""
    import numpy as np

    key = (tuple((j.ps, j.ps_tor, tuple(j.workers)) for j in jobs),
           tuple(sorted(capacity.items())))
    cache = _PAIRS.setdefault(graph, {}) if nx.is_frozen(graph) else {}
    hit = cache.get(key)
    if hit is None:
        ids: dict[str, int] = {}
        for _, _, pairs in gens:
            for v, w in pairs:
                ids.setdefault(v, len(ids))
                ids.setdefault(w, len(ids))
        arrays = [(np.array([ids[v] for v, _ in pairs], dtype=np.int64),
                   np.array([ids[w] for _, w in pairs], dtype=np.int64))
                  for _, _, pairs in gens]
        hit = cache[key] = (ids, arrays)
    return hit


_Gen = tuple[dict, bool, list[tuple[str, str]]]
_FIXING: weakref.WeakKeyDictionary[Any, dict[Any, list[_Gen]]] = weakref.WeakKeyDictionary()


def _fixing(graph: nx.Graph, jobs: Sequence[Job], capacity: Mapping[str, float]
            ) -> list[_Gen]:
    """The generators σ that fix every job's d_j, s_j and W_j (setwise) and the
    capacities, each with whether it is an involution and its pairs (v, σ(v)) of moved
    switches (candidates are switches; a host is never one; of an involution's pairs
    (v, w), (w, v) the first by name only): the part of the check that does not
    depend on S, made once per frozen graph, jobs and capacities (not once per step)."""
    from topo.symmetry import generators

    key = (tuple((j.ps, j.ps_tor, tuple(j.workers)) for j in jobs),
           tuple(sorted(capacity.items())))
    cache = _FIXING.setdefault(graph, {}) if nx.is_frozen(graph) else {}
    hit = cache.get(key)
    if hit is not None:
        return hit
    fixed = {n for j in jobs for n in (j.ps, j.ps_tor)}
    worker_sets = [set(j.workers) for j in jobs]
    kind = dict(graph.nodes(data="kind"))
    out = []
    for p in generators(graph):
        if any(n in p for n in fixed):
            continue
        if any(capacity.get(v) != capacity.get(w)
               or any((v in W) != (w in W) for W in worker_sets) for v, w in p.items()):
            continue
        involution = all(p.get(w) == v for v, w in p.items())
        # an involution's pair (w, v) passes the check exactly when (v, w) does (apply σ to
        # both sides of σ(T ∪ P(v)) = T ∪ P(w)): one of the two is enough
        pairs = [(v, w) for v, w in p.items() if kind.get(v) != "host" and kind.get(w) != "host"
                 and not (involution and w < v)]
        out.append((p, involution, pairs))
    cache[key] = out
    return out


class _Image:
    """σ(T) as a membership test, for an involution σ: e ∈ σ(T) ⟺ σ(e) ∈ T."""

    def __init__(self, p: Mapping[str, str], T: set[Link]) -> None:
        self.p, self.T = p, T

    def __contains__(self, e: object) -> bool:
        a, b = e  # type: ignore[misc]
        return (self.p.get(a, a), self.p.get(b, b)) in self.T


def _tree_maps(p: Mapping[str, str], job: Job, T: set[Link] | None, d, v: str, w: str,
               usable: set[str] | None) -> bool:
    """σ(T ∪ P(v)) = T ∪ P(w) (T ∪ P(v) = T when the job does not add v to its set)."""
    if T is None:
        return True
    img_T, extra, missing = d
    if usable is not None and v not in usable:
        # σ preserves usability (reachability), so w is not usable either: σ(T) = T needed
        return not extra and not missing
    pv = up_path(job.graph, job.ps_tor, v)
    pw = up_path(job.graph, job.ps_tor, w)
    img_pv = {(p.get(a, a), p.get(b, b)) for a, b in pv}
    # X = σ(T) ∪ σ(P(v)) must equal Y = T ∪ P(w)
    if any(e not in pw for e in extra):  # σ(T) − Y
        return False
    if any(e not in img_pv for e in missing):  # T − X
        return False
    if any(e not in T and e not in pw for e in img_pv):  # σ(P(v)) − Y
        return False
    return all(e in img_T or e in img_pv for e in pw)  # P(w) − X
