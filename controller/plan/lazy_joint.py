"""The lazy step of the joint greedy (issue 41): solve a candidate's joint LP only when its
first score entry could still reach the best one.

The joint greedy (:func:`controller.plan.greedy.greedy_jobs`) scores a candidate s by the
lexicographic score of the joint LP of S ∪ {s} (:class:`controller.plan.lp_jobs.FastJointLP`:
max-min, (t, next level, …); sum, (Σ_j γ_j, levels…)), a handful of solves each.  The score's
first entry is the value of the joint LP's *first stage* (max t, resp. max Σ_j γ_j, every
relief at 0).  Here each candidate first gets a cheap upper bound β(s) ≥ that value, read off
the first stage of LP(S) just solved, and the candidates are solved in decreasing β order
until the rest cannot matter.

The bound (Lagrangian relaxation, as :mod:`controller.plan.lazy` for one job)
    Write the first stage of LP(S') (S' = S ∪ {s}) as max c·z over rows lo ≤ A'z ≤ hi and
    column bounds z ∈ [l, h].  For any row multipliers y and every feasible z,

        c·z = c·z − y·A'z + y·A'z ≤ Σ_r max(y_r lo_r, y_r hi_r) + Σ_j max(rc_j l_j, rc_j h_j),

    rc = c − A'ᵀy (a row's term is finite when y_r has the sign of its finite side: y ≥ 0
    on ≤ rows, ≤ 0 on ≥ rows, any on equalities; the multipliers are clipped so).  Every
    column of job k is at most Γ_k (:meth:`controller.plan.lp_fast.FastLP.gamma_cap`: γ_k ≤ Γ_k
    and a, u, y ≤ γ_k), t ≤ min_k Γ_k / w_k (t ≤ γ_k / w_k), reliefs are fixed at 0, so h_j
    is replaced by these caps.  Take y = the first stage of LP(S)'s row duals on the rows the
    two LPs share and 0 on the rows only LP(S') has (s's cover rows, its capacity row, job
    k's intervals row when S_k = ∅).  A shared row has the same bounds in both LPs and an old
    column the same coefficients in it, except γ_k, whose load coefficients grow by the
    RESULT tree's new links Δ_k (the path from s_k down to s) when s joins S_k.  Hence

        β(s) = base + Σ_k Γ_k·max(0, rc_{γ_k} − [s ∈ S'_k]·π·Δ_k)
                    + Σ_{k: s ∈ S'_k} block_k(s)

    with base = Σ_r max(y_r lo_r, y_r hi_r) + Σ_{old j ≠ γ_k} max(rc_j l_j, rc_j h_j) (equal to
    the first stage's value up to round-off, which it keeps) and block_k(s) the largest
    value of job k's new columns a^k_s, y^k_{g,s} priced at rc_{a^k_s} =
    −(π·P_{s,s_k} + y^k_int + y_{C,s_k}) and rc_{y^k_{g,s}} = −(π·|g|P_{g,s} + μ^k_g) under
    y ≤ a ≤ Γ_k, y^k_{g,s} ≤ U_g and Σ_g |g| y^k_{g,s} ≤ Σ_v B_{v,s}
    (:func:`controller.plan.lazy._best_block`; each job's block on its own, a relaxation of
    the jobs sharing s's links).  S'_k = S_k ∪ {s} when some worker of k reaches s and s
    reaches s_k (:func:`controller.plan.lp_jobs.per_job_sets`), else job k gains nothing.
    β bounds the exact optimum; :data:`controller.plan.lazy.MARGIN`·max(Γ, 1) is added for
    the solver's tolerance.

When the lazy step chooses what the exhaustive step chooses
    The exhaustive step scans every candidate in name order and keeps the first whose score
    no later one beats (:func:`controller.plan.lp_jobs.better_score`: lexicographic,
    entries within SCORE_TOL relative equal).  The lazy step (:func:`lazy_joint_scores`)
    solves in decreasing β order and stops before the first candidate whose β is below
    t·(1 − ``WINDOW``), t the largest first entry solved so far (t only grows; every
    candidate left has its first entry ≤ β below that line), and runs the same scan over the
    solved candidates in name order.  If no β reaches best(S)'s first entry less SCORE_TOL,
    no candidate can beat best(S) and the step stops the greedy, as the exhaustive one would.

    A candidate left unsolved is below the maximum first entry t* by more than ``WINDOW`` =
    100·SCORE_TOL (relative), so it loses to the candidate m that reaches t*, and to every
    candidate within SCORE_TOL of t*.  With a transitive comparison it could never be the
    scan's winner nor change which solved candidate wins.  ``better_score``'s tolerance is not
    transitive: the exhaustive scan's lead can slide down by up to SCORE_TOL per change of
    lead while it changes on later entries only, so an unsolved candidate could matter only
    after a chain of about 100 such leads in one step.  That is the one case where the two
    can differ; ``tests/test_plan_lazy_joint.py`` compares them on random networks.

The stale-gain estimate (``lazy="stale"``, the joint greedy's default)
    β above is a true bound but a loose one (each new column priced at its largest value
    Γ_k): on fat-tree k = 8, 2 jobs × 16 workers it left every candidate in.  The classic
    lazy greedy's estimate is far sharper: a candidate solved at an earlier step j, when the
    first entry went from t(S_j) to t(S_j ∪ {s}), is estimated at step k as

        est_k(s) = t(S_k) + t(S_j ∪ {s}) − t(S_j)

    (:class:`StaleGains`; a candidate never solved gets +∞, so every candidate is solved at
    the first step), and the lazy step above runs with est in place of β.  (Capping est by
    β changed nothing at fat-tree k = 16, 4 jobs × 64 workers, and β cost 7 % of the run:
    the stale mode does not compute it.)  This is a bound exactly when the first entry's gain along the
    greedy's chain does not grow: t(S_k ∪ {s}) − t(S_k) ≤ t(S_j ∪ {s}) − t(S_j) for every
    candidate left unsolved (diminishing returns).  The max-min level of a joint LP is not
    submodular in S, so this can fail; the stale step then differs from the exhaustive one
    only if such a candidate's true first entry reaches the step's best less ``WINDOW``.
    Measured: ``tests/test_plan_lazy_joint.py`` (random networks, many seeds) and
    ``bench/plan_jobs_lp.py --greedy 16 --previous`` list every budget where they differ.

With symmetry classes and warm starts
    The greedy hands this step one representative per class of candidates proven to have
    equal scores (:mod:`controller.plan.orbits`), so β of the representative bounds every
    member.  The multipliers may come from a warm-started first stage; any multipliers
    give a bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.plan.lazy import (
    MARGIN,
    _best_block,
    _up_path,
    bound_order,
    group_gains,
    solve_in_bound_order,
)
from controller.plan.lp import result_tree_coeffs
from controller.plan.lp_jobs import SCORE_TOL, FastJointLP, JointResult
from topo.paths import hop_distance

__all__ = ["JointDuals", "joint_duals", "joint_bound", "joint_bounds", "lazy_joint_scores",
           "StaleGains", "WINDOW", "LAZY_MODES"]

LAZY_MODES = ("stale", "bound")

WINDOW = 100 * SCORE_TOL  # relative: below the best first entry by more, a candidate is left


@dataclass
class JointDuals:
    """The first stage of a solved joint LP(S), for :func:`joint_bound`: S, S_k per job,
    π_e per directed link (index of the jobs' shared link list), per job μ^k_g (the rows
    u_g + Σ_s y_{g,s} − γ_k = 0), the intervals row's and s_k's capacity row's multipliers
    (0 if absent), rc_{γ_k}, Γ_k, and ``base`` (module doc)."""

    S: list[str]
    sets: list[list[str]]
    pi: Any
    mu: list[Any]
    y_int: list[float]
    y_tc: list[float]
    rc_gamma: list[float]
    cap: list[float]
    base: float


def joint_duals(fj: FastJointLP, h: Any, mat: Any, cols: Sequence[Any], cost: Any,
                tor_rows: Mapping[str, int], t_col: int, S: Sequence[str]) -> JointDuals:
    """``FastJointLP.dual_hook``: the multipliers of ``h``'s solved first stage (``mat`` its matrix, ``cols`` the jobs'
    :class:`controller.plan.lp_fast.JobCols`, ``cost`` the stage's objective, ``tor_rows``
    the capacity row of each PS ToR that has one, ``t_col`` t's column)."""
    import numpy as np

    y = np.asarray(h.getSolution().row_dual, dtype=float)
    lo, hi = mat.row_lo, mat.row_hi
    y = np.where(np.isinf(lo), np.maximum(y, 0.0), y)  # ≤ rows: y ≥ 0
    y = np.where(np.isinf(hi), np.minimum(y, 0.0), y)  # ≥ rows: y ≤ 0
    yb = float(np.sum(np.where(y > 0, y * np.where(np.isinf(hi), 0.0, hi),
                               y * np.where(np.isinf(lo), 0.0, lo))))
    n_load = len(mat.used)
    pi = np.zeros(len(mat.bw))
    pi[mat.used] = y[:n_load]
    rc = np.asarray(cost, dtype=float) - mat.A.T @ y
    caps = [f.gamma_cap() for f in fj.fast]
    col_lo = np.concatenate(mat.col_lo)
    col_hi = np.concatenate(mat.col_hi).copy()
    owner_cap = np.full(mat.n_col, np.inf)
    starts = sorted([c.gamma for c in cols] + [t_col])
    for k, c in enumerate(cols):  # job k's columns run from γ_k to the next block
        nxt = min((b for b in starts if b > c.gamma), default=mat.n_col)
        owner_cap[c.gamma:nxt] = caps[k]
    w = np.array(fj.js.weights)
    owner_cap[t_col] = float(np.min(np.array(caps) / w))
    hi_eff = np.minimum(col_hi, owner_cap)
    up = rc > 0  # a column at its cap if it prices positively, else at its lower bound
    term = np.where(up, rc * np.where(up, hi_eff, 0.0), rc * col_lo)
    gam = [c.gamma for c in cols]
    term[gam] = 0.0
    base = yb + float(term.sum())
    mu, y_int, y_tc = [], [], []
    for f, c in zip(fj.fast, cols, strict=True):
        urow = np.asarray(c.urow if c.urow is not None else [], dtype=np.int64)
        mu.append(y[n_load + urow])
        y_int.append(float(y[n_load + c.irow]) if c.irow is not None else 0.0)
        r = tor_rows.get(f.job.ps_tor)
        y_tc.append(float(y[n_load + r]) if r is not None else 0.0)
    return JointDuals(list(S), [list(c.S) for c in cols], pi, mu, y_int, y_tc,
                      [float(rc[g]) for g in gam], caps, base)


def joint_bound(fj: FastJointLP, d: JointDuals, s: str) -> float:
    """β(s) ≥ the first stage of the joint LP(S ∪ {s}) (module doc)."""
    g = fj.js.graph
    pi = d.pi
    total = d.base
    for k, f in enumerate(fj.fast):
        job, sd = f.job, f.job.ps_tor
        cap, rc_gamma = d.cap[k], d.rc_gamma[k]
        joins = (s != sd and s not in d.sets[k] and hop_distance(g, s, sd) is not None
                 and bool(f.group_matrix(s)[1].any()))
        if not joins:
            total += cap * max(0.0, rc_gamma)
            continue
        if job.result_load:
            tree = f.__dict__.setdefault("_tree_of", {})
            key = tuple(d.sets[k])
            if key not in tree:
                tree.clear()
                tree[key] = {e for e, _ in result_tree_coeffs(job, d.sets[k])}
            rc_gamma -= sum(pi[f.link_idx[e]] for e in _up_path(f, s) if e not in tree[key])
        idx, val = f._node_vec(s, sd)
        rc_a = -(float(pi[idx] @ val) + d.y_int[k] + d.y_tc[k])
        gains = group_gains(f, pi, d.mu[k], s, cap)
        total += cap * max(0.0, rc_gamma) + _best_block(rc_a, gains, cap, f.in_capacity(s))
    return total + MARGIN * max(max(d.cap), 1.0)


def joint_bounds(fj: FastJointLP, res: JointResult, cands: Sequence[str]) -> dict[str, float]:
    """β(s) for every candidate, from ``res`` = the joint LP(S) solved with duals kept."""
    if res.duals is None:
        raise ValueError("joint LP(S) was solved without its duals (FastJointLP.dual_hook = joint_duals)")
    return {s: joint_bound(fj, res.duals, s) for s in cands}


def lazy_joint_scores(
    beta: Mapping[str, float],
    solve: Callable[[str], JointResult],
    best: Sequence[float],
) -> dict[str, JointResult]:
    """The lazy step of the module doc: the candidates solved (name → joint LP(S ∪ {name}))
    in decreasing β order, stopping when the next β is below the largest first entry seen
    by more than ``WINDOW`` (relative); empty when no β reaches ``best``'s first entry less
    SCORE_TOL (no candidate can beat it: the greedy stops)."""
    order = bound_order(beta)
    first = best[0]
    if not order or beta[order[0]] < first - SCORE_TOL * max(abs(first), 1e-12):
        return {}
    return solve_in_bound_order(order, beta, solve, lambda res: res.score[0], WINDOW, 1e-12)


class StaleGains:
    """The stale-gain estimates of the module doc: the first-entry gain of every candidate
    when it was last solved, shared by the members of its symmetry class."""

    def __init__(self) -> None:
        self.gain: dict[str, float] = {}

    def record(self, members: Sequence[str], before: float, after: float) -> None:
        """A candidate's class solved: S's first entry ``before``, S ∪ {s}'s ``after``."""
        for s in members:
            self.gain[s] = after - before

    def estimate(self, beta: Mapping[str, float], now: float) -> dict[str, float]:
        """est(s) = min(β(s), ``now`` + the last gain) for every candidate of ``beta`` (β
        +∞: the last gain alone)."""
        return {s: min(b, now + self.gain[s]) if s in self.gain else b
                for s, b in beta.items()}
