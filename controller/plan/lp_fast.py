"""LP(S) assembled as a sparse matrix with numpy and solved by HiGHS directly (highspy).

The same LP as :func:`controller.plan.lp.solve_lp` (the PuLP reference, docs/design.md §3.3)
and, through :class:`MatrixLP` and :meth:`FastLP.block`, the same per-job block as the joint
LP of several jobs (:class:`controller.plan.lp_jobs.FastJointLP`, docs/design.md §3.10).  A
greedy solves thousands of LPs; building them as PuLP expressions and passing them through
PuLP's solver interface cost about 0.9 s each at fat-tree k = 16, building the matrix from
cached per-path vectors costs milliseconds.

Columns of one job: γ | a_s (s ∈ S) | u_g (one per twin class g) | y_{g,s} (g reaches s),
with the explicit u_g = γ − Σ_s y_{g,s} (one equality row each: a substitution, so the
optimum is unchanged; it keeps the matrix sparse because the paths to s_d are stored once
per class instead of once per (g, s)).  Rows: load(e) ≤ B_e per directed link that carries
a term; cover y_{g,s} − a_s ≤ 0; u_g + Σ_s y_{g,s} − γ = 0; Σ_s a_s − γ ≤ 0 (if S ≠ ∅); the
capacities C_s are the caller's (one job's, or shared by several).

Two exact reductions at scale (issue 41, fat-tree k = 32): each destination's vectors for
every group at once (:meth:`FastLP.group_matrix`, :mod:`controller.plan.ecmp_matrix`), and,
for one job, one column per orbit of symmetric groups (:mod:`controller.plan.lp_orbits`;
``FastLP(symmetric=False)`` keeps one per group): at k = 32 with S of a few cores the LP has
a handful of group columns instead of 512.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.plan.lp import (
    Job,
    LPResult,
    PlanError,
    _bw,
    _group_coeffs,
    _kind,
    _status_error,
    result_tree_coeffs,
    solve_lp,
    worker_groups,
)
from topo.paths import _fractions, hop_distance, reachable, switch_distances

__all__ = ["FastLP", "MatrixLP", "JobCols", "Duals", "have_highs", "run_highs", "SOLVER_NAME",
           "get_basis", "set_basis"]

SOLVER_NAME = "HiGHS (highspy, matrix)"


def have_highs() -> bool:
    """Whether highspy imports (a pinned dependency; the PuLP path is the fallback)."""
    try:
        import highspy  # noqa: F401
    except ImportError:  # pragma: no cover - highspy is a pinned dependency
        return False
    return True


class MatrixLP:
    """An LP built as sparse triplets.  Load rows are keyed by directed-link index and
    summed over every term given for the link (several jobs share them); the other rows are
    numbered as they are added.  :meth:`highs` lays the load rows first, then the others.

    ``dedupe``: load rows equal to another in every coefficient and in B_e are left out, one
    of each kind kept (the feasible set is the same).  With symmetric groups merged
    (:mod:`controller.plan.lp_orbits`) every link of an orbit has the same row, so at
    fat-tree k = 32 most of the 49,152 load rows go.  ``used`` then lists the kept rows'
    links and ``load_map`` = (every loaded link, its kept row, 1 / the copies of that row):
    a kept row's multiplier shared evenly among its copies is a multiplier of the LP with
    every row (identical rows can share one any way that keeps the sum)."""

    def __init__(self, bw, dedupe: bool = False) -> None:
        import numpy as np

        self.np = np
        self.dedupe = dedupe
        self.load_map: tuple | None = None
        self.bw = bw  # B_e per link index
        self.n_col = 0
        self.col_lo: list = []
        self.col_hi: list = []
        self._load: list[tuple[Any, Any, Any]] = []
        self._rows: list[tuple[Any, Any, Any]] = []
        self._lo: list = []
        self._hi: list = []
        self.n_row = 0
        # names of columns and rows (for laying one LP's basis onto another: warm starts)
        self.col_names: list = []
        self.row_names: list = []

    def cols(self, n: int, lo: float = 0.0, hi: float = float("inf"),
             names: list | None = None) -> int:
        """Add ``n`` columns with bounds [lo, hi] (and their ``names``, hashable, unique in
        the LP, if given); returns the first one's index."""
        first = self.n_col
        self.n_col += n
        self.col_names += names if names is not None else [None] * n
        self.col_lo.append(self.np.full(n, lo))
        self.col_hi.append(self.np.full(n, hi))
        return first

    def load(self, links, col: int, vals) -> None:
        """Add vals·column ``col`` to the load rows of ``links`` (link indices)."""
        np = self.np
        self._load.append((links, np.full(len(links), col, dtype=np.int64), vals))

    def load_rows(self, M, sel, cols) -> None:
        """Add row ``sel[i]`` of the CSR matrix ``M`` (vectors over link indices) to the
        load rows as column ``cols[i]``'s coefficients, for every i (one call instead of a
        :meth:`load` per vector)."""
        np = self.np
        sub = M[np.asarray(sel, dtype=np.int64)]
        counts = np.diff(sub.indptr)
        self._load.append((sub.indices.astype(np.int64),
                           np.repeat(np.asarray(cols, dtype=np.int64), counts), sub.data))

    def rows(self, n: int, lo, hi, names: list | None = None):
        """Add ``n`` rows with bounds [lo, hi] (scalars or arrays) and their ``names``;
        returns their indices."""
        np = self.np
        self.row_names += names if names is not None else [None] * n
        idx = np.arange(self.n_row, self.n_row + n, dtype=np.int64)
        self.n_row += n
        self._lo.append(np.broadcast_to(np.asarray(lo, dtype=float), (n,)))
        self._hi.append(np.broadcast_to(np.asarray(hi, dtype=float), (n,)))
        return idx

    def put(self, rows, cols, vals) -> None:
        """Coefficients at (rows[i], cols[i]) += vals[i] (arrays of one length)."""
        np = self.np
        self._rows.append((np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64),
                           np.asarray(vals, dtype=float)))

    def _dedupe(self, used, lr, lc, lv):
        """The load rows without the copies of equal rows
        (:func:`controller.plan.lp_orbits.equal_rows`); sets ``load_map``."""
        from controller.plan.lp_orbits import equal_rows

        used, lr, lc, lv, self.load_map = equal_rows(used, lr, lc, lv, self.n_col,
                                                     self.bw[used])
        return used, lr, lc, lv

    def load_prices(self, y_load, n_links: int):
        """π per link index (0 where no row) from the load rows' multipliers ``y_load``
        (``load_map``: a kept row's multiplier shared by its copies)."""
        np = self.np
        pi = np.zeros(n_links)
        if self.load_map is None:
            pi[self.used] = y_load
        else:
            links, row, share = self.load_map
            pi[links] = y_load[row] * share
        return pi

    def highs(self, cost, time_limit: float | None):
        """A ``highspy.Highs`` holding the maximization of cost·x over these rows."""
        import highspy
        import scipy.sparse as sp

        np = self.np
        inf = highspy.kHighsInf
        empty = np.zeros(0, dtype=np.int64)
        lr = np.concatenate([r for r, _, _ in self._load]) if self._load else empty
        used, lr = np.unique(lr, return_inverse=True)
        lc = np.concatenate([c for _, c, _ in self._load]) if self._load else empty
        lv = np.concatenate([v for _, _, v in self._load]) if self._load else np.zeros(0)
        if self.dedupe and len(used) > 1:
            used, lr, lc, lv = self._dedupe(used, lr, lc, lv)
        n_load = len(used)
        rows = [lr] + [r + n_load for r, _, _ in self._rows]
        cols = [lc] + [c for _, c, _ in self._rows]
        vals = [lv] + [v for _, _, v in self._rows]
        n_row = n_load + self.n_row
        A = sp.csc_matrix((np.concatenate(vals) if vals else np.zeros(0),
                           (np.concatenate(rows), np.concatenate(cols) if cols else empty)),
                          shape=(n_row, self.n_col))
        A.sum_duplicates()
        lo = np.concatenate([np.full(n_load, -np.inf), *self._lo])
        hi = np.concatenate([self.bw[used], *self._hi])
        self.used, self.A, self.row_lo, self.row_hi = used, A, lo, hi  # for the duals
        lp = highspy.HighsLp()
        lp.num_col_ = self.n_col
        lp.num_row_ = n_row
        lp.col_cost_ = np.asarray(cost, dtype=float)
        lp.col_lower_ = np.concatenate(self.col_lo)
        lp.col_upper_ = np.minimum(np.concatenate(self.col_hi), inf)
        lp.row_lower_ = np.where(np.isinf(lo), -inf, lo)
        lp.row_upper_ = np.where(np.isinf(hi), inf, hi)
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        if time_limit is not None:
            h.setOptionValue("time_limit", float(time_limit))
        h.passModel(lp)
        return h


def run_highs(h, S: Sequence[str]):
    """Solve; any status but optimal is a :class:`PlanError` naming S.  Returns the column
    values, clipped at 0 (round-off below a zero bound)."""
    import highspy
    import numpy as np

    h.run()
    st = h.getModelStatus()
    if st != highspy.HighsModelStatus.kOptimal:
        text = h.modelStatusToString(st)
        status = {"Infeasible": "Infeasible", "Unbounded": "Unbounded"}.get(text, "Not Solved")
        raise _status_error(status, S)
    return np.maximum(np.asarray(h.getSolution().col_value), 0.0)


def get_basis(h, mat: MatrixLP) -> tuple | None:
    """The solved basis of ``h``: column statuses by name, load-row statuses by link index
    (``mat.used``, sorted) and the other rows' by name (``None`` if HiGHS has none).  Kept
    as the lookups :func:`set_basis` reads (a dict per name, an array per link), built once
    per basis rather than once per candidate that starts from it."""
    b = h.getBasis()
    if not b.valid:
        return None
    rs = list(b.row_status)
    n_load = len(mat.used)
    load = mat.np.empty(n_load, dtype=object)
    load[:] = rs[:n_load]
    return (dict(zip(mat.col_names, b.col_status, strict=True)), mat.used, load,
            dict(zip(mat.row_names, rs[n_load:], strict=True)))


def set_basis(h, mat: MatrixLP, basis: tuple | None) -> bool:
    """Start ``h`` (built from ``mat``) from another LP's basis (:func:`get_basis`): columns
    and rows of the same name keep their status, new columns start nonbasic at 0 and new
    rows basic (their slack), so the count of basic variables stays right when the new LP
    only adds columns and rows; the primal simplex then repairs what changed (a γ column's
    RESULT tree links).  The optimum is the LP's whatever the start; where the LP has several
    optimal solutions, the one found may differ from a cold solve's.  Measured at fat-tree
    k = 16, 1,023 workers (issue 41): about 0.12 s per candidate LP against 0.9 s cold.
    Returns whether HiGHS took the basis (if not, the solve is a cold one)."""
    import highspy

    if basis is None:
        return False
    St = highspy.HighsBasisStatus
    np = mat.np
    cs, used, load_st, rs = basis
    nb = highspy.HighsBasis()
    nb.col_status = [cs.get(k, St.kLower) if k is not None else St.kLower
                     for k in mat.col_names]
    # load rows matched by link index (both sorted), vectorised: they are most of the rows
    load = np.full(len(mat.used), St.kBasic, dtype=object)
    if len(used):
        pos = np.minimum(np.searchsorted(used, mat.used), len(used) - 1)
        hit = used[pos] == mat.used
        load[hit] = load_st[pos[hit]]
    nb.row_status = load.tolist() + [rs.get(k, St.kBasic) if k is not None else St.kBasic
                                     for k in mat.row_names]
    nb.valid = True
    if h.setBasis(nb) != highspy.HighsStatus.kOk:
        return False
    h.setOptionValue("simplex_strategy", 4)
    return True


def _read_late(name: str) -> property:
    """A field of :class:`_Result` kept in ``__dict__["_" + name]``, read off the solved
    model (``_finish``) before it is first read or set."""
    key = "_" + name

    def get(self: _Result) -> Any:
        self._finish()
        return self.__dict__.get(key)

    def put(self: _Result, value: Any) -> None:
        self._finish()
        self.__dict__[key] = value

    return property(get, put)


class _Result(LPResult):
    """An :class:`LPResult` whose ``duals`` and ``basis`` (FastLP.keep_duals, warm_start) are
    read off the solved HiGHS model on first use (``_pending``, which holds the model until
    then): about 25 ms per LP at fat-tree k = 32, paid only where they are read (a greedy step's winner)."""

    def _finish(self) -> None:
        pending = self.__dict__.pop("_pending", None)
        if pending is not None:
            self.__dict__["_duals"], self.__dict__["_basis"] = pending()

    duals = _read_late("duals")  # type: ignore[assignment]
    basis = _read_late("basis")  # type: ignore[assignment]


class _OnFirstUse(Mapping):
    """A read-only mapping built on its first use.  A candidate's LP result is mostly read for
    γ alone; expanding x to every worker and every s ∈ S was 500,000 entries per LP at
    fat-tree k = 32 with |S| = 64."""

    def __init__(self, build: Callable[[], dict]) -> None:
        self._build: Callable[[], dict] | None = build
        self._data: dict | None = None

    def _d(self) -> dict:
        if self._data is None:
            assert self._build is not None
            self._data = self._build()
            self._build = None
        return self._data

    def __getitem__(self, key):
        return self._d()[key]

    def __iter__(self):
        return iter(self._d())

    def __len__(self) -> int:
        return len(self._d())

    def __repr__(self) -> str:
        return repr(self._d())


@dataclass
class Duals:
    """Multipliers of a solved LP(S) (one job, :class:`FastLP`) for the lazy greedy's bound
    on LP(S ∪ {s}) (:func:`controller.plan.lazy.gain_bound`): π_e ≥ 0 per directed link
    (index of ``FastLP.links``), μ_g (free) per row u_g + Σ_s y_{g,s} − γ = 0, the
    multipliers of the intervals row and of s_d's capacity row (0 if absent), ``base`` =
    Σ_r y_r b_r + Γ·Σ_{old j ≠ γ} max(0, rc_j), rc_γ = 1 − Σ_r y_r A_{r,γ}, Γ, and the two
    parts of ``base``."""

    S: list[str]
    pi: Any
    mu: Any
    y_int: float
    y_tc: float
    base: float
    rc_gamma: float
    cap: float
    yb: float = 0.0  # Σ_r y_r b_r
    excess: float = 0.0  # Σ_{old j ≠ γ} max(0, rc_j)
    # with orbits merged: ``pi`` is the merged LP's and is averaged over the links' orbits
    # (``orbit_links(pi)``: their labels, or None when π is constant on them) at the first
    # :meth:`prices` (only the chosen LP(S)'s duals are ever used, not every
    # candidate's: the averaging is a connected-components pass over every moved link)
    orbit_links: Any = field(default=None, repr=False)

    def prices(self):
        """π of LP(S) itself (:mod:`controller.plan.lp_orbits`: averaged over each orbit of
        links when the LP merged orbits of groups)."""
        if self.orbit_links is not None:
            np = __import__("numpy")
            labels = self.orbit_links(self.pi)
            if labels is not None:  # None: π is already constant on every orbit
                lab, k = labels
                self.pi = (np.bincount(lab, self.pi, k) / np.bincount(lab, minlength=k))[lab]
            self.orbit_links = None
        return self.pi


@dataclass
class JobCols:
    """Where one job's variables sit in a :class:`MatrixLP`: γ, a_s (s = S[j] at a0 + j),
    u_g (at u0 + g), and y_{g,s} for each (g, j) of ``ycols`` (at y0 + k); with orbits
    merged, g numbers the orbits (``labels``: each group's orbit)."""

    S: list[str]
    gamma: int
    a0: int
    u0: int
    y0: int
    ycols: list[tuple[int, int]]
    urow: Any = None  # the rows u_g + Σ_s y_{g,s} − γ = 0 (indices among the non-load rows)
    irow: int | None = None  # the row Σ_s a_s − γ ≤ 0 (S ≠ ∅)
    labels: Any = None  # orbit of each group when merged (controller.plan.lp_orbits)
    sizes: Any = None  # Σ_{g∈O} |g| per orbit when merged (else FastLP.sizes)


class FastLP:
    """LP(S) of docs/design.md §3.3 as a matrix solved by highspy, for the greedy's thousands of
    solves; same LP as :func:`controller.plan.lp.solve_lp` (module doc).  Per-(class,
    destination) coefficient vectors are computed once and reused across solves.  Calls with
    ``solver="cbc"`` (or without highspy) go to :func:`controller.plan.lp.solve_lp`.

    Usable wherever :func:`solve_lp` is: ``FastLP(job)(job, S, solver=..., time_limit=...)``.
    """

    def __init__(self, job: Job, *, solver: str = "auto", time_limit: float | None = 60.0,
                 merge: bool = True, links: list[tuple[str, str]] | None = None,
                 symmetric: bool = True) -> None:
        import numpy as np

        default_links = links is None

        self.np = np
        self.job = job
        self.merge = merge
        self.solver = solver
        self.time_limit = time_limit
        self.groups = worker_groups(job, merge)
        self.sizes = np.array([len(g) for g in self.groups], dtype=float)
        g = job.graph
        if links is None:
            links = sorted({(u, v) for u, v in g.edges} | {(v, u) for u, v in g.edges})
        self.links = links
        self.link_idx = {e: i for i, e in enumerate(links)}
        self.bw = np.array([_bw(g, *e) for e in links])
        self._coef: dict[tuple[int, str], tuple] = {}
        # per destination: every group's load vector as one CSR row, and which groups reach it
        self._mats: dict[str, tuple] = {}
        self._reach: dict[tuple[int, str], bool] = {}
        self.have_highs = have_highs()
        self.keep_duals = False  # set by the lazy greedy (controller.plan.lazy)
        # merge symmetric groups inside each LP (controller.plan.lp_orbits; only with the
        # FastLP's own link list, whose orbits are cached per graph and job)
        self.symmetric = symmetric and default_links
        self._sym = None
        self._gamma_cap: float | None = None
        self._tree0 = None  # T(∅)'s link indices (tree_index)
        self._umat_key: bytes | None = None  # orbit labels of the cached orbit vectors
        self._umats: dict[str, tuple] = {}
        # warm starts (set by the lazy greedy): keep each solve's basis in its result and
        # start the next solve from ``warm``'s basis (see :meth:`_solve`)
        self.warm_start = False
        self.warm: LPResult | None = None

    def _vec(self, key: tuple[int, str], items_of) -> tuple:
        hit = self._coef.get(key)
        if hit is None:
            np = self.np
            items = items_of()
            idx = np.fromiter((self.link_idx[e] for e, _ in items), dtype=np.int64,
                              count=len(items))
            val = np.fromiter((c for _, c in items), dtype=float, count=len(items))
            hit = self._coef[key] = (idx, val)
        return hit

    def _group_vec(self, gi: int, dst: str):
        """(link indices, coefficients) of group gi's load towards ``dst``: a row of
        :meth:`group_matrix` (views, not copies)."""
        M = self.group_matrix(dst)[0]
        a, b = M.indptr[gi], M.indptr[gi + 1]
        return M.indices[a:b], M.data[a:b]

    def group_matrix(self, dst: str) -> tuple:
        """(M, reach): row gi of the CSR matrix M (groups × links) is group gi's load vector
        towards ``dst`` (:meth:`_group_items`; empty if gi does not reach ``dst``), and
        ``reach[gi]`` whether it reaches ``dst``.  Single-homed groups come from one
        :func:`controller.plan.ecmp_matrix.ecmp_rows` per destination, cached."""
        hit = self._mats.get(dst)
        if hit is None:
            hit = self._mats[dst] = self._group_matrix(dst)
        return hit

    def _group_matrix(self, dst: str) -> tuple:
        import scipy.sparse as sp

        from controller.plan.ecmp_matrix import ecmp_rows

        np, g = self.np, self.job.graph
        n_g = len(self.groups)
        # reachable(rep, dst) for every group from one distance table (topo.paths: a node
        # reaches dst if it is dst, a switch with a distance, or next to one)
        dist = switch_distances(g, dst)
        adj = g.adj
        reach = np.array([grp[0] == dst or grp[0] in dist or any(v in dist for v in adj[grp[0]])
                          for grp in self.groups], dtype=bool)
        single: list[int] = []
        via: list[str] = []
        rows: list = []
        cols: list = []
        vals: list = []
        for gi in np.nonzero(reach)[0].tolist():
            rep = self.groups[gi][0]
            nbrs = list(g.adj[rep])
            if len(nbrs) == 1 and nbrs[0] != dst and dst != rep \
                    and _kind(g, nbrs[0]) == "switch":
                single.append(gi)
                via.append(nbrs[0])
            else:  # multi-homed (or next to dst): one source at a time
                items = _group_coeffs(g, self.groups[gi], dst)
                rows.append(np.full(len(items), gi, dtype=np.int64))
                cols.append(np.array([self.link_idx[e] for e, _ in items], dtype=np.int64))
                vals.append(np.array([c for _, c in items], dtype=float))
        if single:
            # P_{r,dst} = 1 on (r, t) plus |g|·P_{t,dst} (:meth:`_group_items`)
            sel = np.array(single, dtype=np.int64)
            F = sp.diags(self.sizes[sel]) @ ecmp_rows(g, via, dst, self.link_idx)
            F = F.tocoo()
            rows += [sel[F.row], sel]
            cols += [F.col.astype(np.int64),
                     np.array([self.link_idx[(self.groups[gi][0], t)]
                               for gi, t in zip(single, via, strict=True)], dtype=np.int64)]
            vals += [F.data, np.ones(len(sel))]
        M = sp.csr_matrix((np.concatenate(vals) if vals else np.zeros(0),
                           (np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
                            np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64))),
                          shape=(n_g, len(self.links)))
        M.sum_duplicates()
        M.sort_indices()
        return M, reach

    def _group_items(self, gi: int, dst: str) -> list[tuple[tuple[str, str], float]]:
        """:func:`controller.plan.lp._group_coeffs`, composed for a single-homed
        representative r on switch t ≠ dst: per-hop ECMP sends all of r's traffic to t and
        then splits it as a flow that starts at t (the same layers, the same shares), so
        P_{r,dst} = 1 on (r, t) plus P_{t,dst}, whose cache (per graph) the jobs of a joint
        LP share when their workers sit under the same switches."""
        g, grp = self.job.graph, self.groups[gi]
        rep = grp[0]
        nbrs = list(g.adj[rep])
        if len(nbrs) != 1 or nbrs[0] == dst or dst == rep or _kind(g, nbrs[0]) != "switch":
            return _group_coeffs(g, grp, dst)
        n = len(grp)
        return [((rep, nbrs[0]), 1.0)] + [(e, f * n) for e, f in _fractions(g, nbrs[0], dst)]

    def _node_vec(self, src: str, dst: str):
        return self._vec((-1, src + "\x00" + dst), lambda: _fractions(self.job.graph, src, dst))

    def _reaches(self, gi: int, s: str) -> bool:
        key = (gi, s)
        r = self._reach.get(key)
        if r is None:
            r = self._reach[key] = reachable(self.job.graph, self.groups[gi][0], s)
        return r

    def __call__(self, job: Job, deployed: Sequence[str], *, solver: str | None = None,
                 time_limit: float | None = None, merge: bool | None = None) -> LPResult:
        solver = self.solver if solver is None else solver
        time_limit = self.time_limit if time_limit is None else time_limit
        merge = self.merge if merge is None else merge
        if job is not self.job or merge != self.merge or solver == "cbc" or not self.have_highs:
            return solve_lp(job, deployed, solver=solver, time_limit=time_limit, merge=merge)
        if solver not in ("auto", "highs"):
            raise PlanError(f"unknown solver {solver!r} (use highs or cbc)")
        return self._solve(list(deployed), time_limit)

    def block(self, mat: MatrixLP, S: list[str], tag: int = 0,
              orbits: tuple | None = None) -> JobCols:
        """Add this job's columns, load terms and own rows for S (module doc) to ``mat``;
        S must already be valid for the job (a switch ≠ s_d that reaches s_d).  ``tag``
        (the job's index among several) keeps the names of its columns and rows apart.
        ``orbits`` = (label per group, number of orbits): one column u_O, y_{O,s} per orbit
        of groups (:mod:`controller.plan.lp_orbits`, whose conditions the caller checked);
        default every group alone."""
        import scipy.sparse as sp

        np = self.np
        job, sd = self.job, self.job.ps_tor
        m, n_g = len(S), len(self.groups)
        if orbits is None:
            labels, n_u = np.arange(n_g), n_g
            ind = None
        else:
            labels, n_u = orbits
            ind = sp.csr_matrix((np.ones(n_g), (labels, np.arange(n_g))), shape=(n_u, n_g))
        first = np.full(n_u, n_g, dtype=np.int64)  # each unit's first group (its name)
        np.minimum.at(first, labels, np.arange(n_g))
        usizes = self.sizes if ind is None else ind @ self.sizes

        part_key = None if ind is None else labels.tobytes()
        if part_key is not None and part_key != self._umat_key:
            self._umat_key, self._umats = part_key, {}  # candidates mostly share S's orbits

        def umat(dst: str):  # (load vectors, reach) per unit
            M, reach = self.group_matrix(dst)
            if ind is None:
                return M, reach
            hit = self._umats.get(dst)
            if hit is None:
                hit = self._umats[dst] = (ind @ M, reach[first])
            return hit

        # (unit, j) for every unit that reaches S[j], unit-major
        mats = [umat(s) for s in S]
        reach = np.array([r for _, r in mats], dtype=bool).reshape(m, n_u)
        ygi, yji = np.nonzero(reach.T)
        ycols = list(zip(ygi.tolist(), yji.tolist(), strict=True))
        names = first.tolist()
        gamma = mat.cols(1, names=[(tag, "g")])
        a0 = mat.cols(m, names=[(tag, "a", s) for s in S])
        u0 = mat.cols(n_u, names=[(tag, "u", names[gi]) for gi in range(n_u)])
        y0 = mat.cols(len(ycols), names=[(tag, "y", names[gi], S[j]) for gi, j in ycols])
        mat.load_rows(umat(sd)[0], np.arange(n_u), u0 + np.arange(n_u))
        for j in range(m):
            ks = np.nonzero(yji == j)[0]
            mat.load_rows(mats[j][0], ygi[ks], y0 + ks)
        for j, s in enumerate(S):
            mat.load(*self._ld(self._node_vec(s, sd), a0 + j))
        mat.load(*self._ld(self._node_vec(sd, job.ps), gamma))
        if job.result_load:  # one RESULT stream on every link of T(S) (result_tree_coeffs)
            tree = self.tree_index(S)
            mat.load(tree, gamma, np.ones(len(tree)))
        ny = len(ycols)
        ycol = np.arange(ny, dtype=np.int64) + y0
        if ny:  # cover: y_{g,s} − a_s ≤ 0
            cov = mat.rows(ny, -np.inf, 0.0, [(tag, "c", names[gi], S[j]) for gi, j in ycols])
            mat.put(np.concatenate([cov, cov]), np.concatenate([ycol, a0 + yji]),
                    np.concatenate([np.ones(ny), -np.ones(ny)]))
        urow = mat.rows(n_u, 0.0, 0.0, [(tag, "r", names[gi]) for gi in range(n_u)])
        # u_g + Σ_s y_{g,s} − γ = 0
        mat.put(np.concatenate([urow, urow, urow[ygi]]),
                np.concatenate([np.arange(n_u) + u0, np.full(n_u, gamma), ycol]),
                np.concatenate([np.ones(n_u), -np.ones(n_u), np.ones(ny)]))
        irow = None
        if m:  # Σ a_s − γ ≤ 0
            r = mat.rows(1, -np.inf, 0.0, [(tag, "i")])
            irow = int(r[0])
            mat.put(np.full(m + 1, r[0]), np.concatenate([[gamma], np.arange(m) + a0]),
                    np.concatenate([[-1.0], np.ones(m)]))
        return JobCols(S, gamma, a0, u0, y0, ycols, urow, irow,
                       None if orbits is None else labels, usizes)

    def tree_index(self, S: Sequence[str]):
        """The link indices of :func:`controller.plan.lp.result_tree_coeffs` (job, S), each
        once (every coefficient is 1): T(∅)'s, with d → s_d, once per FastLP, plus each s's
        root path (the tree of a set is the union of root paths)."""
        np = self.np
        if self._tree0 is None:
            self._tree0 = np.array(sorted({self.link_idx[e] for e, _ in
                                           result_tree_coeffs(self.job, [])}), dtype=np.int64)
        if not S:
            return self._tree0
        from controller.plan.mcast_tree import root_path

        g, root = self.job.graph, self.job.ps_tor
        extra = [self.link_idx[e] for s in S for e in root_path(g, root, s)]
        return np.union1d(self._tree0, np.array(extra, dtype=np.int64))

    def _ld(self, vec: tuple, col: int) -> tuple:
        return vec[0], col, vec[1]

    def switch_input(self, c: JobCols, s: str) -> tuple:
        """(columns, coefficients) of the job's input rate at s ∈ S: Σ_g |g|·y_{g,s}."""
        np = self.np
        j = c.S.index(s)
        ks = [k for k, (_, jj) in enumerate(c.ycols) if jj == j]
        sizes = self.sizes if c.sizes is None else c.sizes
        return (np.array(ks, dtype=np.int64) + c.y0,
                sizes[[c.ycols[k][0] for k in ks]] if ks else np.zeros(0))

    def tor_input(self, c: JobCols) -> tuple:
        """(columns, coefficients) of the job's input rate at s_d: Σ_g |g|·u_g + Σ_s a_s."""
        np = self.np
        m = len(c.S)
        sizes = self.sizes if c.sizes is None else c.sizes
        return (np.concatenate([np.arange(len(sizes)) + c.u0, np.arange(m) + c.a0]),
                np.concatenate([sizes, np.ones(m)]))

    def read(self, col, c: JobCols, solver: str, seconds: float) -> LPResult:
        """The job's :class:`LPResult` from a solution's column values (twins and orbits
        expanded: every group takes its orbit's values)."""
        S = c.S
        gam = float(col[c.gamma])
        yval = {(gi, S[j]): float(col[c.y0 + k]) for k, (gi, j) in enumerate(c.ycols)}
        unit = c.labels.tolist() if c.labels is not None else list(range(len(self.groups)))
        groups = self.groups

        def expand_x() -> dict[tuple[str, str], float]:
            x_out: dict[tuple[str, str], float] = {}
            for grp, gi in zip(groups, unit, strict=True):
                for s in S:
                    xv = yval.get((gi, s), 0.0)
                    for w in grp:
                        x_out[w, s] = xv
            return x_out

        def expand_u() -> dict[str, float]:
            u_out: dict[str, float] = {}
            for grp, gi in zip(groups, unit, strict=True):
                tot = 0.0
                for s in S:
                    tot += yval.get((gi, s), 0.0)
                for w in grp:
                    u_out[w] = max(0.0, gam - tot)
            return u_out

        a_out = {s: float(col[c.a0 + j]) for j, s in enumerate(S)}
        return _Result(tuple(S), gam, _OnFirstUse(expand_x), a_out, _OnFirstUse(expand_u),
                       solver, seconds, self.job)

    def _solve(self, S: list[str], time_limit: float | None) -> LPResult:
        np = self.np
        t0 = time.perf_counter()
        g, sd, job = self.job.graph, self.job.ps_tor, self.job
        if len(set(S)) != len(S):
            raise PlanError("deployment set lists a switch twice")
        for s in S:
            if s not in g or _kind(g, s) != "switch" or s == sd:
                raise PlanError(f"deployed node {s!r} is not a candidate switch")
            if hop_distance(g, s, sd) is None:
                raise PlanError(f"deployed switch {s!r} cannot reach the PS's switch {sd!r}")
        orbits, ok = self._orbits(S)
        mat = MatrixLP(self.bw, dedupe=orbits is not None)
        c = self.block(mat, S, orbits=orbits)
        for s in S:
            if s in job.capacity:
                cols, vals = self.switch_input(c, s)
                r = mat.rows(1, -np.inf, job.capacity[s], [("C", s)])
                mat.put(np.full(len(cols), r[0]), cols, vals)
        tc_row = None
        if sd in job.capacity:  # Σ_w u_w + Σ_s a_s ≤ C_{s_d}
            cols, vals = self.tor_input(c)
            r = mat.rows(1, -np.inf, job.capacity[sd], [("T",)])
            tc_row = int(r[0])
            mat.put(np.full(len(cols), r[0]), cols, vals)
        cost = np.zeros(mat.n_col)
        cost[c.gamma] = 1.0
        h = mat.highs(cost, time_limit)
        if self.warm_start and self.warm is not None and self.warm.basis is not None:
            set_basis(h, mat, self.warm.basis)
        col = run_highs(h, S)
        res = self.read(col, c, SOLVER_NAME, time.perf_counter() - t0)
        keep, warm = self.keep_duals, self.warm_start
        if keep or warm:
            # read off h on first use: of a greedy step's candidate LPs only the winner's
            # duals and basis are ever read (LP(S) of the next step)
            res.__dict__["_pending"] = lambda: (
                self._duals(h, mat, c, cost, tc_row, ok) if keep else None,
                get_basis(h, mat) if warm else None)
        return res

    def _orbits(self, S: list[str]) -> tuple:
        """((label per group, number of orbits), usable generators) for LP(S)'s merged
        columns (:mod:`controller.plan.lp_orbits`), or (None, None) when nothing merges
        (``symmetric`` off, no generators, or every orbit a single group)."""
        if not self.symmetric:
            return None, None
        if self._sym is None:
            from controller.plan.lp_orbits import group_orbits

            self._sym = group_orbits(self.job, self.groups, self.links)
        sym = self._sym
        if sym.n_gens == 0:
            return None, None
        # σ must fix S and map T(S) onto itself (the γ column's RESULT links)
        ok = sym.usable_for(S)
        labels, k = sym.group_labels(ok)
        if k == len(self.groups):
            return None, None
        return (labels, k), ok

    def _duals(self, h, mat: MatrixLP, c: JobCols, cost, tc_row: int | None,
               ok=None) -> Duals:
        """The row multipliers of a solved LP(S) and the parts of the Lagrangian bound that
        do not depend on the candidate (:mod:`controller.plan.lazy`).  With orbits merged
        (``ok``: the generators used), the multipliers of LP(S) itself: π averaged over the
        links' orbits and μ_g = μ_O / |O| (:mod:`controller.plan.lp_orbits`)."""
        np = self.np
        y = np.asarray(h.getSolution().row_dual, dtype=float)  # HiGHS, max: y ≥ 0 on ≤ rows
        ineq = np.isinf(mat.row_lo)
        y = np.where(ineq, np.maximum(y, 0.0), y)  # any y ≥ 0 gives a bound (module doc)
        n_load = len(mat.used)
        pi = mat.load_prices(y[:n_load], len(self.links))
        rc = cost - mat.A.T @ y
        gam = self.gamma_cap()
        excess = np.maximum(rc, 0.0)
        excess[c.gamma] = 0.0
        yb = float(y @ np.where(np.isfinite(mat.row_hi), mat.row_hi, 0.0))
        base = yb + gam * float(excess.sum())
        urow = c.urow if c.urow is not None else np.zeros(0, dtype=np.int64)
        mu = y[n_load + np.asarray(urow, dtype=np.int64)]
        orbit_links = None
        if c.labels is not None:
            sym = self._sym
            # with equal load rows kept once (MatrixLP.dedupe) π is mostly constant on the
            # links' orbits already: checked per generator, cheaper than the orbits
            orbit_links = lambda pi: None if sym.invariant(pi, ok) else sym.link_labels(ok)  # noqa: E731
            mu = (mu / np.bincount(c.labels, minlength=len(mu)))[c.labels]
        return Duals(list(c.S), pi, mu,
                     float(y[n_load + c.irow]) if c.irow is not None else 0.0,
                     float(y[n_load + tc_row]) if tc_row is not None else 0.0,
                     base, float(rc[c.gamma]), gam, yb, float(excess.sum()),
                     orbit_links)

    def in_capacity(self, s: str) -> float:
        """Σ_v B_{v,s}: every worker's share x_{w,s} enters s over its own links."""
        g = self.job.graph
        return sum(_bw(g, v, s) for v in g.adj[s])

    def gamma_cap(self) -> float:
        """Γ, an upper bound on γ of every LP(S): a worker sends γ in all out of its own
        links (hosts do not forward and a worker is no aggregation point), so γ ≤ Σ_v B_{w,v}
        for every worker w.  Computed once (it was a tenth of the greedy's time at k = 32)."""
        if self._gamma_cap is None:
            g = self.job.graph
            self._gamma_cap = min(sum(_bw(g, w, v) for v in g.adj[w]) for w in self.job.workers)
        return self._gamma_cap
