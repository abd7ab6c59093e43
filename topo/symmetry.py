"""Verified automorphisms of generated topologies and the candidate classes they prove equal.

The generators of :mod:`topo.models` know their topology's symmetries; :func:`generators`
lists simple ones as node permutations (only moved nodes are stored):

* fat-tree(k): swap two pods; swap two edge switches of a pod (with their hosts); swap two
  agg indices i, j in every pod together with core groups i, j; swap two cores of a group;
* leaf-spine: swap two leaves (with their hosts); swap two spines;
* anything else (files, BCube, dumbbell): none — the planner then simply solves every
  candidate.

Each permutation is *verified* to be an automorphism of the capacitated graph (kinds and
link capacities preserved) before use, so a wrong generator can cost speed, never
correctness.

:func:`candidate_orbits` keeps the generators that also fix the PS d, its ToR s_d, the worker
set, the switch capacities and the deployed set S (each setwise), and returns the orbits of
the candidates under the group they generate (connected components of ``v — σ(v)``).  Every
element of that group maps the LP of S ∪ {s} onto the LP of S ∪ {σ(s)} (ECMP fractions depend
only on the graph, so they are carried along), hence all members of an orbit have the same γ.
The group may be smaller than the full stabiliser — then some equal candidates are solved
separately, which is slower but still exact.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import networkx as nx
from networkx.utils import UnionFind

from topo.models import natural_key

__all__ = ["generators", "candidate_orbits", "is_automorphism"]

Perm = dict[str, str]
_CACHE: weakref.WeakKeyDictionary[Any, list[Perm]] = weakref.WeakKeyDictionary()


def _swap(pairs: Iterable[tuple[str, str]]) -> Perm:
    p: Perm = {}
    for a, b in pairs:
        if a != b:
            p[a] = b
            p[b] = a
    return p


def _fat_tree_gens(k: int) -> list[Perm]:
    h = k // 2
    out: list[Perm] = []

    def hosts_of(edge: int) -> list[str]:
        return [f"h{edge * h + i}" for i in range(h)]

    for p, q in combinations(range(k), 2):  # pods
        pairs = []
        for i in range(h):
            pairs += [(f"edge{p * h + i}", f"edge{q * h + i}"), (f"agg{p * h + i}", f"agg{q * h + i}")]
            pairs += list(zip(hosts_of(p * h + i), hosts_of(q * h + i), strict=True))
        out.append(_swap(pairs))
    for p in range(k):  # edges inside a pod
        for i, j in combinations(range(h), 2):
            e1, e2 = p * h + i, p * h + j
            out.append(_swap([(f"edge{e1}", f"edge{e2}"),
                              *zip(hosts_of(e1), hosts_of(e2), strict=True)]))
    for i, j in combinations(range(h), 2):  # agg index i <-> j in every pod, core groups too
        pairs = [(f"agg{p * h + i}", f"agg{p * h + j}") for p in range(k)]
        pairs += [(f"core{i * h + m}", f"core{j * h + m}") for m in range(h)]
        out.append(_swap(pairs))
    for gidx in range(h):  # cores within a group
        for m1, m2 in combinations(range(h), 2):
            out.append(_swap([(f"core{gidx * h + m1}", f"core{gidx * h + m2}")]))
    return out


def _leaf_spine_gens(leaves: int, spines: int, hpl: int) -> list[Perm]:
    out = []
    for a, b in combinations(range(leaves), 2):
        out.append(_swap([(f"leaf{a}", f"leaf{b}"),
                          *((f"h{a * hpl + i}", f"h{b * hpl + i}") for i in range(hpl))]))
    for a, b in combinations(range(spines), 2):
        out.append(_swap([(f"spine{a}", f"spine{b}")]))
    return out


def is_automorphism(graph: nx.Graph, perm: Mapping[str, str],
                    _tables: tuple[dict, dict] | None = None) -> bool:
    """Whether ``perm`` (moved nodes only) preserves node kinds, adjacency and capacities.

    ``_tables``: (kind per node, {node: {neighbour: bw}}) of ``graph``, built once by
    :func:`generators` (plain dicts: checking the thousands of generators of a fat-tree
    k = 32 through networkx's views took about 15 s)."""
    kind, bw = _tables if _tables is not None else _adjacency(graph)

    for v, w in perm.items():
        if v not in kind or w not in kind or perm.get(w) is None:
            return False
        if kind[v] != kind[w]:
            return False
        bv, bw_w = bw[v], bw[w]
        if len(bv) != len(bw_w):
            return False
        a = perm.get(v, v)
        ba = bw[a]
        for n, cap in bv.items():
            b = perm.get(n, n)
            if ba.get(b, _MISSING) != cap:
                return False
    return True


_MISSING = object()


def _adjacency(graph: nx.Graph) -> tuple[dict, dict]:
    """(kind per node, {node: {neighbour: bw (default 1.0)}}) of ``graph``."""
    kind = {n: k for n, k in graph.nodes(data="kind")}
    bw = {n: {m: attrs.get("bw", 1.0) for m, attrs in nbrs.items()}
          for n, nbrs in graph.adj.items()}
    return kind, bw


def generators(graph: nx.Graph) -> list[Perm]:
    """Verified automorphisms of a generated fat-tree / leaf-spine (``[]`` otherwise)."""
    if nx.is_frozen(graph) and graph in _CACHE:
        return _CACHE[graph]
    spec = str(graph.graph.get("name", ""))
    name, _, args = spec.partition(":")
    gens: list[Perm] = []
    try:
        nums = [int(float(x)) for x in args.split(",")] if args else []
        if name == "fattree" and nums:
            gens = _fat_tree_gens(nums[0])
        elif name == "leafspine" and len(nums) >= 3:
            gens = _leaf_spine_gens(*nums[:3])
    except ValueError:
        gens = []
    if gens:
        tables = _adjacency(graph)
        gens = [p for p in gens if is_automorphism(graph, p, tables)]
    if nx.is_frozen(graph):
        _CACHE[graph] = gens
    return gens


def candidate_orbits(
    graph: nx.Graph,
    ps: str,
    ps_tor: str,
    workers: Iterable[str],
    capacity: Mapping[str, float],
    deployed: Sequence[str],
    cands: Sequence[str],
) -> list[list[str]]:
    """Classes of ``cands`` proven to give equal γ (module doc); each class in name order,
    classes ordered by their first member."""
    W = set(workers)
    S = set(deployed)
    classes = UnionFind(cands)
    known = set(cands)
    for p in generators(graph):
        if ps in p or ps_tor in p:
            continue
        ok = True
        for v, w in p.items():
            if (v in W) != (w in W) or (v in S) != (w in S) or capacity.get(v) != capacity.get(w):
                ok = False
                break
        if not ok:
            continue
        for v, w in p.items():
            if v in known and w in known:
                classes.union(v, w)
    out = [sorted(m, key=natural_key) for m in classes.to_sets()]
    return sorted(out, key=lambda m: natural_key(m[0]))
