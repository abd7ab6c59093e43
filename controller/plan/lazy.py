"""The lazy greedy step (issue 41): solve a candidate's LP only when it could still win.

The greedy of docs/design.md §3.4 scores every candidate s of a step by γ(S ∪ {s}), one LP each.
Here each candidate first gets a cheap upper bound β(s) ≥ γ(S ∪ {s}) read off the LP(S) just
solved, and the candidates are solved in decreasing β order until the rest cannot matter.

The bound (Lagrangian relaxation of LP(S ∪ {s}) at the multipliers of LP(S))
    Write LP(S') (S' = S ∪ {s}, the matrix of :class:`controller.plan.lp_fast.FastLP`) as
    max c·z subject to A'z ≤ b' (rows with lower bound −∞) and A'_E z = 0 (the rows
    u_g + Σ y_{g,s} − γ = 0), z ≥ 0.  Every column is at most Γ on the feasible set, where
    Γ = min_w Σ_v B_{w,v} (a worker sends γ in all over its own links, and every variable is
    ≤ γ: y_{g,s} ≤ a_s ≤ γ, u_g ≤ γ).  For any multipliers y with y_r ≥ 0 on the ≤ rows
    (free on the equalities) and every feasible z,

        c·z ≤ c·z + y·(b' − A'z) = y·b' + Σ_j rc_j z_j,     rc_j = c_j − (A'ᵀy)_j,

    so γ(S') ≤ y·b' + max{Σ_j rc_j z_j : z ∈ Z} for any set Z containing the feasible set.
    Take y = LP(S)'s row duals (clipped at 0 on ≤ rows, so the bound holds whatever the
    solver's round-off) on the rows LP(S) and LP(S') share, and y = 0 on the rows only LP(S')
    has (s's cover rows y_{g,s} − a_s ≤ 0, its capacity row, the intervals row when S = ∅);
    take Z = {0 ≤ z ≤ Γ, y_{g,s} ≤ a_s}.  The shared rows have the same right-hand sides,
    and an old column has the same coefficients in them except γ, whose load coefficients
    change by the RESULT tree's difference Δ (``job.result_load``).  Hence

        β(s) = y·b + Γ·Σ_{old j≠γ} max(0, rc_j) + Γ·max(0, rc_γ − π·Δ)
               + Γ·max(0, rc_{a_s} + Σ_{g reaches s} max(0, rc_{y_{g,s}}))

    with rc_{a_s} = −(π·P_{s,s_d} + y_intervals + y_{C_{s_d}}) and
    rc_{y_{g,s}} = −(π·|g|P_{g,s} + μ_g) (π: the load rows' multipliers, μ_g: the equality
    rows').  At LP(S)'s optimum y·b = γ(S) and the old reduced costs are ≤ 0 (up to
    round-off, kept in the bound), so β(s) = γ(S) unless s's new columns price out
    positively: a switch that relieves no priced link by more than its own output costs is
    never solved.

    Two refinements, each valid on the same feasible set, and β is the smaller:
    (1) Z also keeps Σ_g |g| y_{g,s} ≤ Σ_v B_{v,s} (every worker's share enters s over s's
    own links; loads are sums of nonnegative flows), which makes the new block a fractional
    knapsack per a_s, maximised at a break point (:func:`_best_block`), and y_{g,s} ≤ U_g =
    min_e B_e / A'_{e, y_{g,s}} over the links of g's paths to s (every load coefficient is
    ≥ 0 in this matrix, so one term cannot exceed its link's capacity);  (2) every column is
    at most γ' = c·z itself, so γ' ≤ y·b + k·γ' with k = Σ_{old j≠γ} max(0, rc_j) + rc'_γ +
    max(0, rc_{a_s} + Σ_g max(0, rc_{y_{g,s}})), hence γ' ≤ y·b / (1 − k) when k < 1.
    β is an upper bound of the *exact* LP optimum; the solver returns that
    optimum within its tolerances (HiGHS: 1e-7), so :data:`MARGIN`·max(Γ, 1) is added.

Why the lazy step chooses what the exhaustive step chooses
    The exhaustive step picks, among the candidates whose γ is within ``REL_TOL`` (relative)
    of the largest γ*, the first by name, and stops the greedy if that γ does not improve on
    γ(S).  The lazy step (:func:`lazy_scores`) solves candidates in decreasing β order (ties
    by name) and stops before the first whose β is below the tie window of the best γ seen,
    t·(1 − REL_TOL).  As t only grows and t ≤ γ*, every candidate left unsolved has
    γ ≤ β < t(1 − REL_TOL) ≤ γ*(1 − REL_TOL): it is neither the maximum nor tied with it, so
    the best γ seen is γ*, and the tied set among the solved candidates is the whole tied set:
    ``pick`` returns the same switch.  If no β exceeds γ(S)(1 + REL_TOL), no candidate can
    improve, and the exhaustive step would stop too; the lazy step stops without solving.
    So the two are equal whenever every β bounds the LP value the solver returns; they can
    differ only if the solver's answer overshoots the exact optimum by more than the margin
    (tested on random networks: ``tests/test_plan_lazy.py``).

With symmetry classes and warm starts (issue 41)
    The greedy hands this step one representative per class of candidates proven to have
    equal γ (:mod:`controller.plan.orbits`); a class's γ is its representative's, so β of
    the representative bounds every member and the argument above holds class by class.
    The multipliers may come from a warm-started LP(S) (:func:`controller.plan.lp_fast.set_basis`):
    any y ≥ 0 on the ≤ rows gives a bound, optimal or not, so β stays a bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from controller.plan.lp import LPResult, result_tree_coeffs
from controller.plan.lp_fast import Duals, FastLP
from topo.models import natural_key

__all__ = ["gain_bound", "group_gains", "bounds", "lazy_scores", "bound_order", "solve_in_bound_order",
           "MARGIN"]

R = TypeVar("R")

MARGIN = 1e-6  # relative to max(Γ, 1): the solver's tolerance on the LP value


def _up_path(fast: FastLP, s: str) -> list[tuple[str, str]]:
    """The RESULT tree's links (parent, child) from s_d down to s: the tree of S ∪ {s} is
    the tree of S plus this path (:func:`controller.plan.mcast_tree.result_tree` gives every
    node one parent whatever the targets, so trees of sets are unions of paths)."""
    cache = fast.__dict__.setdefault("_up_paths", {})
    if s not in cache:
        from controller.plan.mcast_tree import root_path

        # sorted: the order result_tree gave them (the dual sum is then unchanged)
        cache[s] = sorted(root_path(fast.job.graph, fast.job.ps_tor, s))
    return cache[s]


def gain_bound(fast: FastLP, d: Duals, s: str, tree: set[tuple[str, str]] | None = None) -> float:
    """β(s) ≥ γ(S ∪ {s}) from LP(S)'s multipliers ``d`` (module doc); ``tree``: the RESULT
    tree links of S (computed if not given)."""
    job, sd = fast.job, fast.job.ps_tor
    pi = d.prices()
    rc_gamma = d.rc_gamma
    if job.result_load:
        if tree is None:
            tree = {e for e, _ in result_tree_coeffs(job, d.S)}
        # Δ = the links of s's path not yet in the tree, one RESULT stream each
        rc_gamma -= sum(pi[fast.link_idx[e]] for e in _up_path(fast, s) if e not in tree)
    idx, val = fast._node_vec(s, sd)
    rc_a = -(float(pi[idx] @ val) + d.y_int + d.y_tc)
    gains = group_gains(fast, pi, d.mu, s, d.cap)
    cap, margin = d.cap, MARGIN * max(d.cap, 1.0)
    # (1) at most Γ of every column, and s's input Σ_g |g| y_{g,s} at most Σ_v B_{v,s}
    new = _best_block(rc_a, gains, cap, fast.in_capacity(s))
    absolute = d.base + cap * max(0.0, rc_gamma) + new
    # (2) every column at most γ' itself: γ' ≤ y·b + k γ', so γ' ≤ y·b / (1 − k) if k < 1
    k = d.excess + rc_gamma + max(0.0, rc_a + sum(r for r, _, _ in gains))
    ratio = d.yb / (1.0 - k) if k < 1.0 else float("inf")
    return min(absolute, ratio) + margin


def group_gains(fast: FastLP, pi, mu, s: str, cap: float) -> list[tuple[float, float, float]]:
    """(r_g, |g|, U_g) for every group g that reaches s and whose column y_{g,s} prices out
    positively, r_g = −(π·|g|P_{g,s} + μ_g) > 0, in group order; U_g = min_e B_e / A_{e,g}
    over the links of g's paths to s (y_{g,s} ≤ U_g: loads are sums of nonnegative terms;
    Γ = ``cap`` if g has no link).  All groups at once from :meth:`FastLP.group_matrix`."""
    np = fast.np
    M, reach = fast.group_matrix(s)
    r = -(M @ pi + np.asarray(mu, dtype=float))
    sel = np.nonzero(reach & (r > 0))[0]
    if not len(sel):
        return []
    u = group_caps(fast, s)[sel]
    u = np.where(np.isfinite(u), u, cap)
    return [(float(r[gi]), float(fast.sizes[gi]), float(ui))
            for gi, ui in zip(sel.tolist(), u.tolist(), strict=True)]


def group_caps(fast: FastLP, s: str):
    """min_e B_e / A_{e,g} over the links of each group's load vector towards s (+∞ for a
    group without a link): independent of the multipliers, so cached per destination."""
    cache = fast.__dict__.setdefault("_group_caps", {})
    hit = cache.get(s)
    if hit is None:
        np = fast.np
        M = fast.group_matrix(s)[0]
        hit = np.full(M.shape[0], np.inf)
        pos = M.data > 0
        ratio = np.where(pos, fast.bw[M.indices] / np.where(pos, M.data, 1.0), np.inf)
        nz = np.diff(M.indptr) > 0
        if nz.any():
            hit[nz] = np.minimum.reduceat(ratio, M.indptr[:-1][nz])
        cache[s] = hit
    return hit


def _best_block(rc_a: float, gains: list[tuple[float, float, float]], cap: float,
                inflow: float) -> float:
    """max rc_a·a + Σ_g r_g y_g over 0 ≤ y_g ≤ min(a, U_g), a ≤ Γ, Σ_g |g| y_g ≤ ``inflow``
    (``gains``: (r_g, |g|, U_g)).  For fixed a the y part is a fractional knapsack (by
    r_g / |g|); the whole is concave and piecewise linear in a (an LP's value in its right-hand
    side), with breaks at the U_g and where the k best groups alone fill the knapsack, for
    each k: the maximum is at a break, at 0 or at Γ."""
    if not gains:
        return max(0.0, rc_a * cap)
    import numpy as np

    gains = _merge_alike(gains)
    order = sorted(gains, key=lambda t: -t[0] / t[1])
    r = np.array([t[0] for t in order])
    n = np.array([t[1] for t in order])
    u = np.minimum(np.array([t[2] for t in order]), cap)
    pts = [cap, *u.tolist()]
    # where the knapsack fills with the k best-ratio groups alone, for every k:
    # Σ_{g ≤ k} |g| min(a, U_g) = inflow (increasing in a).  With a_hi the smallest U_j
    # (j ≤ k) at which the k groups fill it, a = (inflow − Σ_{U_g < a_hi} |g| U_g) /
    # Σ_{U_g ≥ a_hi} |g| (sums over g ≤ k): all k and j at once, as m × m cumulative sums
    # (row j: the candidate a_hi = U_j; column k − 1: the first k groups)
    m = len(order)
    below = u[None, :] < u[:, None]  # [j, g]: U_g < U_j
    fill = np.cumsum(n[None, :] * np.minimum(u[:, None], u[None, :]), axis=1)
    part = np.cumsum(np.where(below, (n * u)[None, :], 0.0), axis=1)
    rest = np.cumsum(np.where(below, 0.0, n[None, :]), axis=1)
    j_le_k = np.arange(m)[:, None] <= np.arange(m)[None, :]  # j among the first k = col + 1
    ok = j_le_k & (fill >= inflow)
    hi = np.where(ok, u[:, None], np.inf)
    j_star = np.argmin(hi, axis=0)  # per k: the smallest U_j that fills
    cols = np.nonzero(np.isfinite(hi[j_star, np.arange(m)]))[0]
    if len(cols):
        js = j_star[cols]
        pts += ((inflow - part[js, cols]) / rest[js, cols]).tolist()
    a = np.clip(np.array(pts), 0.0, cap)[:, None]  # points × groups
    y = np.minimum(a, u[None, :])
    w = n[None, :] * y
    before = np.cumsum(w, axis=1) - w  # knapsack room used by better-ratio groups
    take = np.clip((inflow - before) / n[None, :], 0.0, y)
    value = rc_a * a[:, 0] + (take * r[None, :]).sum(axis=1)
    return max(0.0, float(value.max()))


def _merge_alike(gains: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Items of the knapsack of :func:`_best_block` with the same |g| and (to 1e-12) the same
    r_g and U_g merged: c such items are one item (c·r, c·|g|, U) — an optimum gives them
    equal y (their average is feasible with the same value) — with r and U the largest of
    the merged ones, so the value is not lowered.  Symmetric groups (a fat-tree's pods) give
    hundreds of alike items; the maximum is then over a handful."""
    import numpy as np

    if len(gains) < 8:
        return gains
    arr = np.array(gains, dtype=float)
    key = np.column_stack([np.round(arr[:, 0], 12), arr[:, 1], np.round(arr[:, 2], 12)])
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    if len(uniq) == len(gains):
        return gains
    k = len(uniq)
    count = np.bincount(inv, minlength=k).astype(float)
    r = np.full(k, -np.inf)
    np.maximum.at(r, inv, arr[:, 0])
    u = np.full(k, -np.inf)
    np.maximum.at(u, inv, arr[:, 2])
    first = np.full(k, len(gains))
    np.minimum.at(first, inv, np.arange(len(gains)))
    return [(float(count[i] * r[i]), float(count[i] * uniq[i, 1]), float(u[i]))
            for i in np.argsort(first).tolist()]  # in the order of first appearance


def bounds(fast: FastLP, res: LPResult, cands: Sequence[str]) -> dict[str, float]:
    """β(s) for every candidate, from ``res`` = LP(S) solved by ``fast`` with duals kept."""
    if res.duals is None:
        raise ValueError("LP(S) was solved without its duals (FastLP.keep_duals)")
    tree = {e for e, _ in result_tree_coeffs(fast.job, res.duals.S)} \
        if fast.job.result_load else None
    return {s: gain_bound(fast, res.duals, s, tree) for s in cands}


def lazy_scores(
    beta: Mapping[str, float],
    solve: Callable[[str], LPResult],
    best: float,
    rel_tol: float,
) -> dict[str, LPResult]:
    """The lazy step of the module doc: the candidates solved (name → LP(S ∪ {name})), in
    decreasing β order, stopping when the next β cannot reach the tie window of the best γ
    seen; empty when no β can improve on ``best`` (the greedy stops)."""
    order = bound_order(beta)
    if not order or beta[order[0]] <= best * (1 + rel_tol):
        return {}
    return solve_in_bound_order(order, beta, solve, lambda res: res.gamma, rel_tol, 1e-300)


def bound_order(beta: Mapping[str, float]) -> list[str]:
    """The candidates by decreasing bound β, ties by name."""
    return sorted(beta, key=lambda s: (-beta[s], natural_key(s)))


def solve_in_bound_order(order: Sequence[str], beta: Mapping[str, float],
                         solve: Callable[[str], R], value: Callable[[R], float],
                         rel: float, floor: float) -> dict[str, R]:
    """Solve the candidates of ``order`` in turn until the next one's β is below the
    largest ``value`` solved so far by more than ``rel`` of it (at least ``floor``): no later
    candidate can then reach that value's tie window.  Both lazy greedies' step."""
    out: dict[str, R] = {}
    top = float("-inf")
    for s in order:
        if top > float("-inf") and beta[s] < top - rel * max(abs(top), floor):
            break
        res = out[s] = solve(s)
        top = max(top, value(res))
    return out
