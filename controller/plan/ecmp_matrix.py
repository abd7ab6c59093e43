"""ECMP fractions of many sources towards one destination, as one sparse matrix (issue 41).

The LP of :mod:`controller.plan.lp_fast` needs, for every worker group g and destination
t (s_d, or a deployed switch s), the per-link fractions of g's flow to t under per-hop even
ECMP (:func:`topo.paths.ecmp_link_fractions`).  Computed one source at a time they were the
largest Python cost of the greedy at fat-tree k = 32 (512 groups × every candidate's
destination, each a walk over a few hundred links); here all the sources of one
destination are computed at once with a few sparse products.

The maths
    Fix the destination d.  Let dist(u) be u's host-free hop distance to d
    (:func:`topo.paths.switch_distances`: d and the switches that reach it), NH(u) = {v ∈
    adj(u) : dist(v) = dist(u) − 1} for u ≠ d (the ECMP next hops), and Q the matrix with
    Q[u, v] = 1/|NH(u)| for v ∈ NH(u) (d's row empty: the flow stops there).  A unit flow
    that starts at t has mass X[t, u] = Σ_{k ≥ 0} (Q^k)[t, u] at u — every walk t → u along
    next hops has length dist(t) − dist(u), so u is reached in one layer only and the sum
    is finite — and sends X[t, u]·Q[u, v] over the link (u, v).  With E[u, (u, v)] =
    Q[u, v] that is

        F = Σ_{k=0}^{D−1} X_k E,     X_0 = the sources' indicator rows,  X_{k+1} = X_k Q,

    D the largest dist of a source: exactly the layer-by-layer sums of
    :func:`topo.paths._fractions` (the same products, summed in another order: equal up to
    floating-point round-off, about 1e-16 relative).  A source that does not reach d gets an
    empty row.

The per-destination structure (Q and E) is one pass over the switches that reach d, instead
of one walk per source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import networkx as nx

from topo.paths import switch_distances

__all__ = ["ecmp_rows"]

Link = tuple[str, str]


def ecmp_rows(graph: nx.Graph, sources: Sequence[str], dst: str,
              link_idx: Mapping[Link, int]):
    """F (module doc) as a ``scipy.sparse.csr_matrix`` of shape (len(sources), len(link_idx)):
    row i holds the ECMP fractions of a unit flow from the switch ``sources[i]`` to ``dst``
    over the directed links, indexed by ``link_idx``; rows of sources equal to ``dst`` or not
    reaching it are empty.  Every link of a next hop must be in ``link_idx``."""
    import numpy as np
    import scipy.sparse as sp

    dist = switch_distances(graph, dst)
    nodes = list(dist)
    pos = {n: i for i, n in enumerate(nodes)}
    adj = graph.adj
    q_row: list[int] = []
    q_col: list[int] = []
    q_val: list[float] = []
    e_link: list[int] = []
    for u, du in dist.items():
        if du == 0:
            continue
        hops = [v for v in adj[u] if dist.get(v) == du - 1]
        share = 1.0 / len(hops)
        iu = pos[u]
        for v in hops:
            q_row.append(iu)
            q_col.append(pos[v])
            q_val.append(share)
            e_link.append(link_idx[(u, v)])
    n, n_links = len(nodes), len(link_idx)
    qv = np.asarray(q_val, dtype=float)
    Q = sp.csr_matrix((qv, (q_row, q_col)), shape=(n, n))
    E = sp.csr_matrix((qv, (q_row, e_link)), shape=(n, n_links))
    src = [(i, pos[t]) for i, t in enumerate(sources) if t in pos and t != dst]
    X = sp.csr_matrix((np.ones(len(src)), ([i for i, _ in src], [j for _, j in src])),
                      shape=(len(sources), n))
    F = sp.csr_matrix((len(sources), n_links))
    while X.nnz:
        F = F + X @ E
        X = X @ Q
    F.sum_duplicates()
    F.sort_indices()
    return F
