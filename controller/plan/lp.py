"""The placement LP of docs/design.md §3.3 (interval model) for a fixed deployment set S, in PuLP.

Job: workers W, PS d (a host) and its ToR s_d, topology G with directed capacities B_e.
For S (switches other than s_d), variables γ, x_{w,s}, a_s ≥ 0; u_w = γ − Σ_s x_{w,s}::

    maximize γ
    x_{w,s} ≤ a_s                    ∀ w, s      (s's output covers each input)
    Σ_s a_s ≤ γ                                  (disjoint intervals)
    Σ_s x_{w,s} ≤ γ                  ∀ w         (u_w ≥ 0)
    Σ_w x_{w,s} ≤ C_s                ∀ s         (if given)
    Σ_w u_w + Σ_s a_s ≤ C_{s_d}                  (if given)
    load(e) ≤ B_e                    ∀ directed e
    load(e) = Σ_{w,s} x_{w,s} P_{w,s}(e) + Σ_w u_w P_{w,s_d}(e) + Σ_s a_s P_{s,s_d}(e)
              + γ P_{s_d,d}(e)

P_{u,t}(e) is the fraction of u→t traffic on e under per-hop even ECMP
(:func:`topo.paths.ecmp_link_fractions`).  Note that a worker's access link carries
Σ_s x_{w,s} + u_w = γ, so γ ≤ the smallest worker uplink always.

Merging interchangeable workers (exact; ``merge=True``)
    Call workers w, w' *twins* when they have the same neighbours with the same link
    capacities (e.g. all hosts under one edge switch).  The transposition (w w') is an
    automorphism of the capacitated graph that fixes d, s_d and every switch, so it maps
    P_{w,t} onto P_{w',t} (per-hop ECMP depends only on the graph; hosts never forward, so a
    path from w uses w's access links and then switches only) and maps the LP onto itself
    (it only permutes the x_{w,·} and the access-link rows).  The feasible set is convex, so
    averaging an optimal solution over all permutations of each twin class is feasible with the
    same γ and has x_{w,s} = y_{g,s} constant on each class g.  Hence the LP restricted to
    x_{w,s} = y_{g,s} has the same optimum γ; in it every shared link gets coefficient
    |g|·P_{r,t}(e) (r: the class representative), and the access-link rows of the members are
    identical, so only the representative's are kept.  This turns 1023 workers of a k=16
    fat-tree into 128 groups.  Loads of the other members' access links are reported equal to
    the representative's.

Candidates (exact pruning)
    A switch that no worker reaches, or that cannot reach s_d without crossing a host, cannot
    carry any x_{w,s} (resp. a_s): adding it never changes γ.  :func:`candidates` omits them.

Building blocks
    :func:`solve_lp` is assembled from per-job pieces (:func:`add_job_vars`,
    :func:`add_job_load`, :func:`add_job_rows`, :func:`switch_input_terms`,
    :func:`tor_input_terms`, :func:`job_solution`) so that the joint model of several jobs
    (:mod:`controller.plan.lp_jobs`, docs/design.md §3.10) is the same LP per job with shared rows.

Errors: every user-facing problem is a :class:`PlanError` with one clear line.
"""

from __future__ import annotations

import time
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import networkx as nx
import pulp

from topo.models import natural_key
from topo.paths import _fractions, hop_distance, reachable

__all__ = [
    "PlanError",
    "Job",
    "LPResult",
    "make_job",
    "candidates",
    "solve_lp",
    "ps_only",
    "worker_groups",
    "pick_solver",
    "compute_loads",
    "result_tree_coeffs",
    "result_tree_links",
    "JobVars",
    "add_job_vars",
    "add_job_load",
    "add_load_rows",
    "add_job_rows",
    "switch_input_terms",
    "tor_input_terms",
    "solve_problem",
    "job_solution",
]

Link = tuple[str, str]


class PlanError(ValueError):
    """The job or LP cannot be planned; the message is one user-facing line."""


@dataclass(frozen=True)
class Job:
    """A validated job: graph, PS, its ToR, workers (name order), switch capacities."""

    graph: nx.Graph
    ps: str
    ps_tor: str
    workers: tuple[str, ...]
    capacity: Mapping[str, float] = field(default_factory=dict)
    result_load: bool = False  # count the RESULT multicast tree in link loads (see below)


def _kind(graph: nx.Graph, n: str) -> str | None:
    return graph.nodes[n].get("kind")


def make_job(
    graph: nx.Graph,
    ps: str,
    workers: Iterable[str],
    ps_tor: str | None = None,
    capacity: float | Mapping[str, float] | None = None,
    result_load: bool = False,
) -> Job:
    """Validate a job.  ``ps_tor`` defaults to the PS's first switch neighbour in name order
    (the only one for single-homed PSs; BCube's level-0 switch for a BCube server).
    ``capacity`` is C_s for every switch (a number) or per switch (a mapping)."""
    if ps not in graph:
        raise PlanError(f"unknown PS node {ps!r}")
    if _kind(graph, ps) != "host":
        raise PlanError(f"PS {ps!r} is a switch; the PS must be a host")
    workers = list(workers)
    if not workers:
        raise PlanError("no workers")
    seen = set()
    for w in workers:
        if w not in graph:
            raise PlanError(f"unknown worker node {w!r}")
        if w == ps:
            raise PlanError(f"PS {ps!r} is also listed as a worker")
        if _kind(graph, w) != "host":
            raise PlanError(f"worker {w!r} is a switch; workers must be hosts")
        if w in seen:
            raise PlanError(f"worker {w!r} listed twice")
        seen.add(w)
    tors = sorted((v for v in graph.adj[ps] if _kind(graph, v) == "switch"), key=natural_key)
    if ps_tor is None:
        if not tors:
            raise PlanError(f"PS {ps!r} is not attached to any switch")
        ps_tor = tors[0]
    elif ps_tor not in tors:
        raise PlanError(f"{ps_tor!r} is not a switch attached to the PS {ps!r}")
    for w in workers:
        if not reachable(graph, w, ps_tor):
            raise PlanError(
                f"topology is disconnected: worker {w!r} cannot reach the PS's switch "
                f"{ps_tor!r} without crossing a host"
            )
    caps: dict[str, float] = {}
    if capacity is not None:
        if isinstance(capacity, Mapping):
            caps = {str(s): float(c) for s, c in capacity.items()}
        else:
            caps = {s: float(capacity) for s, k in graph.nodes(data="kind") if k == "switch"}
        for s, c in caps.items():
            if s not in graph or _kind(graph, s) != "switch":
                raise PlanError(f"capacity given for unknown switch {s!r}")
            if not c > 0:
                raise PlanError(f"switch capacity must be > 0, got {c!r} for {s!r}")
    return Job(graph, ps, ps_tor, tuple(sorted(workers, key=natural_key)), caps, result_load)


def result_tree_coeffs(job: Job, deployed: Sequence[str]) -> list[tuple[Link, float]]:
    """Per-unit-γ load of the RESULT distribution (``job.result_load``).

    The PS answers every chunk once, to s_d (link d→s_d), and the switches multicast it
    down one tree (:func:`controller.plan.mcast_tree.result_tree`: to every worker and every
    deployed switch), so each tree link carries one RESULT stream of rate γ in the downward
    direction.  docs/design.md §3.3's LP leaves this out; on a fat-tree it shares the links into a
    deployed switch with gradients flowing toward it, so a data plane that sends RESULTs
    runs at the γ of the LP *with* this term.  The tree breaks ties by name, so it is not
    invariant under topology automorphisms: the greedy does not use symmetry with it.
    """
    coeffs = [((job.ps, job.ps_tor), 1.0)]
    coeffs += [(e, 1.0) for e in sorted(result_tree_links(job, deployed))]
    return coeffs


_TREES: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def result_tree_links(job: Job, deployed: Sequence[str]) -> set[Link]:
    """The RESULT tree's links (parent, child) for S = ``deployed``
    (:func:`controller.plan.mcast_tree.result_tree`).  Every node has one parent whatever the
    targets, so the tree is the union of its targets' root paths: the workers' part is
    computed once per frozen graph, PS ToR and worker set, and each switch's path once."""
    from controller.plan.mcast_tree import result_tree, root_path

    g, root = job.graph, job.ps_tor
    if not nx.is_frozen(g):
        tree = result_tree(g, root, job.workers, deployed)
        return {(p, c) for p, kids in tree.items() for c in kids}
    cache = _TREES.setdefault(g, {})
    key = (root, job.workers)
    base = cache.get(key)
    if base is None:
        tree = result_tree(g, root, job.workers, ())
        base = cache[key] = frozenset((p, c) for p, kids in tree.items() for c in kids)
    out = set(base)
    for s in deployed:
        out |= root_path(g, root, s)
    return out


def candidates(job: Job) -> list[str]:
    """Switches other than s_d that some worker reaches and that reach s_d (name order)."""
    g = job.graph
    comp = _switch_components(g)
    # a host reaches switch s over a host-free path iff one of its switch neighbours lies in
    # s's component of the switch-only graph (topo.paths: hosts never forward); one pass
    # instead of a BFS from every switch (12 s at fat-tree k = 32)
    reached = set()
    for w in job.workers:
        if w in comp:
            reached.add(comp[w])
        reached.update(comp[v] for v in g.adj[w] if v in comp)
    home = comp.get(job.ps_tor)
    return [s for s in sorted(comp, key=natural_key)
            if s != job.ps_tor and comp[s] == home and comp[s] in reached]


def _switch_components(g: nx.Graph) -> dict[str, int]:
    """Switch → the index of its connected component in the graph of switches alone."""
    nodes = g.nodes
    comp: dict[str, int] = {}
    n = 0
    for root, kind in nodes(data="kind"):
        if kind != "switch" or root in comp:
            continue
        c = comp[root] = n
        n += 1
        stack = [root]
        while stack:
            u = stack.pop()
            for v in g.adj[u]:
                if v not in comp and nodes[v].get("kind") == "switch":
                    comp[v] = c
                    stack.append(v)
    return comp


def worker_groups(job: Job, merge: bool = True) -> list[tuple[str, ...]]:
    """Twin classes of workers (see module doc), each in name order; singletons if not
    ``merge``.  Representative = first member."""
    if not merge:
        return [(w,) for w in job.workers]
    g = job.graph
    classes: dict[tuple, list[str]] = {}
    for w in job.workers:
        key = tuple(sorted((v, float(g.edges[w, v].get("bw", 1.0))) for v in g.adj[w]))
        classes.setdefault(key, []).append(w)
    return sorted((tuple(m) for m in classes.values()), key=lambda m: natural_key(m[0]))


@dataclass
class LPResult:
    """Solution of LP(S).  ``x[(w, s)]``, ``u[w]`` per worker (expanded from groups);
    ``loads`` (directed link → load, by the docs/design.md §3.3 formula) is computed on first use."""

    deployed: tuple[str, ...]
    gamma: float
    x: dict[tuple[str, str], float]
    a: dict[str, float]
    u: dict[str, float]
    solver: str
    seconds: float
    job: Job = field(repr=False)
    duals: Any = field(default=None, repr=False, compare=False)  # FastLP.keep_duals
    basis: Any = field(default=None, repr=False, compare=False)  # FastLP.warm_start

    @cached_property
    def loads(self) -> dict[Link, float]:
        return compute_loads(self.job, self.deployed, self.gamma, self.x, self.a)


def pick_solver(name: str = "auto", time_limit: float | None = 60.0) -> pulp.LpSolver:
    """HiGHS (through highspy) when available, else CBC; ``name`` in auto|highs|cbc."""
    if name not in ("auto", "highs", "cbc"):
        raise PlanError(f"unknown solver {name!r} (use highs or cbc)")
    if name in ("auto", "highs"):
        highs = pulp.HiGHS(msg=False, timeLimit=time_limit)
        if highs.available():
            return highs
        if name == "highs":
            raise PlanError("solver highs requested but highspy is not available")
    with warnings.catch_warnings():  # PuLP 3.3 flags its bundled CBC as deprecated for 4.0
        warnings.simplefilter("ignore", DeprecationWarning)
        cbc = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit)
    if not cbc.available():
        raise PlanError("solver cbc requested but CBC is not available")
    return cbc


def _bw(graph: nx.Graph, u: str, v: str) -> float:
    return float(graph.edges[u, v].get("bw", 1.0))


def _group_coeffs(graph: nx.Graph, group: Sequence[str], dst: str) -> list[tuple[Link, float]]:
    """Aggregate P-coefficients of a twin class towards ``dst`` (representative's access
    links at weight 1, shared links at weight |group|)."""
    rep, n = group[0], len(group)
    return [(e, f if e[0] == rep else f * n) for e, f in _fractions(graph, rep, dst)]


def _status_error(status: str, deployed: Sequence[str]) -> PlanError:
    where = f"S = {{{', '.join(deployed)}}}" if deployed else "S = {}"
    if status == "Not Solved":
        return PlanError(f"LP for {where} not solved (time limit reached or solver error)")
    return PlanError(f"LP for {where} is {status.lower()}")


def _check_deployed(g: nx.Graph, sd: str, S: Sequence[str]) -> None:
    """Reject a deployment set LP(S) cannot use (one :class:`PlanError` line)."""
    if len(set(S)) != len(S):
        raise PlanError("deployment set lists a switch twice")
    for s in S:
        if s not in g or _kind(g, s) != "switch":
            raise PlanError(f"deployed node {s!r} is not a switch")
        if s == sd:
            raise PlanError(f"{s!r} is the PS's ToR; it always aggregates and is not in S")
        if hop_distance(g, s, sd) is None:
            raise PlanError(f"deployed switch {s!r} cannot reach the PS's switch {sd!r}")


LoadRows = dict[Link, dict[pulp.LpVariable, float]]


@dataclass
class JobVars:
    """One job's variables in a PuLP model: γ, a_s (s ∈ S), y_{g,s} (twin class g reaches s).

    Built by :func:`add_job_vars`; shared by :func:`solve_lp` and the joint model of
    :mod:`controller.plan.lp_jobs` (docs/design.md §3.10), which adds one ``JobVars`` per job to one problem.
    """

    job: Job
    S: list[str]
    groups: list[tuple[str, ...]]
    gamma: pulp.LpVariable
    a: dict[str, pulp.LpVariable]
    y: dict[tuple[int, str], pulp.LpVariable]


def add_job_vars(prob: pulp.LpProblem, job: Job, S: Sequence[str],
                 groups: list[tuple[str, ...]], prefix: str = "") -> JobVars:
    """Create γ, a_s and y_{g,s} (only where g's representative reaches s) in ``prob``;
    ``prefix`` keeps names unique when several jobs share one problem."""
    g = job.graph
    gamma = prob.add_variable(f"{prefix}gamma", lowBound=0)
    a = {s: prob.add_variable(f"{prefix}a_{i}", lowBound=0) for i, s in enumerate(S)}
    y: dict[tuple[int, str], pulp.LpVariable] = {}
    for gi, grp in enumerate(groups):
        for i, s in enumerate(S):
            if reachable(g, grp[0], s):
                y[gi, s] = prob.add_variable(f"{prefix}x_{gi}_{i}", lowBound=0)
    return JobVars(job, list(S), groups, gamma, a, y)


def add_job_load(load: LoadRows, v: JobVars) -> None:
    """Add the job's load(e) of docs/design.md §3.3 (u_w = γ − Σ_s x_{w,s} substituted) to ``load``,
    row by directed link; several jobs add into one ``load`` for shared link rows."""
    job, S, groups, gamma, y = v.job, v.S, v.groups, v.gamma, v.y
    g, sd = job.graph, job.ps_tor

    def add(coeffs: Iterable[tuple[Link, float]], var: pulp.LpVariable, sign: float = 1.0):
        for e, c in coeffs:
            row = load.setdefault(e, {})
            row[var] = row.get(var, 0.0) + sign * c

    for gi, grp in enumerate(groups):
        to_sd = _group_coeffs(g, grp, sd)
        add(to_sd, gamma)  # u_w = γ − Σ_s x_{w,s}
        for s in S:
            if (gi, s) in y:
                add(_group_coeffs(g, grp, s), y[gi, s])
                add(to_sd, y[gi, s], -1.0)
    for s in S:
        add(_fractions(g, s, sd), v.a[s])
    add(_fractions(g, sd, job.ps), gamma)
    if job.result_load:
        add(result_tree_coeffs(job, S), gamma)


def add_load_rows(prob: pulp.LpProblem, graph: nx.Graph, load: LoadRows) -> None:
    """load(e) ≤ B_e for every directed link with a nonzero term."""
    for e, row in load.items():
        terms = [(v, c) for v, c in row.items() if abs(c) > 1e-12]
        if terms:
            prob += pulp.LpAffineExpression(terms) <= _bw(graph, *e), f"load_{e[0]}_{e[1]}"


def add_job_rows(prob: pulp.LpProblem, v: JobVars, prefix: str = "") -> None:
    """The job's own rows: cover x_{w,s} ≤ a_s, intervals Σ_s a_s ≤ γ, u_w ≥ 0."""
    for (gi, s), var in v.y.items():
        prob += var - v.a[s] <= 0, f"{prefix}cover_{gi}_{s}"
    if v.S:
        prob += pulp.lpSum(v.a.values()) - v.gamma <= 0, f"{prefix}intervals"
    for gi in range(len(v.groups)):
        mine = [v.y[gi, s] for s in v.S if (gi, s) in v.y]
        if mine:
            prob += pulp.lpSum(mine) - v.gamma <= 0, f"{prefix}u_{gi}"


def switch_input_terms(v: JobVars, s: str) -> list[tuple[pulp.LpVariable, float]]:
    """The job's aggregation input rate at s ∈ S: Σ_w x_{w,s} (|g| per class variable)."""
    return [(v.y[gi, s], float(len(grp))) for gi, grp in enumerate(v.groups) if (gi, s) in v.y]


def tor_input_terms(v: JobVars) -> list[tuple[pulp.LpVariable, float]]:
    """The job's input rate at s_d: Σ_w u_w + Σ_s a_s, with u_w = γ − Σ_s x_{w,s}."""
    terms = [(v.gamma, float(len(v.job.workers)))]
    terms += [(var, -float(len(v.groups[gi]))) for (gi, _s), var in v.y.items()]
    terms += [(var, 1.0) for var in v.a.values()]
    return terms


def solve_problem(prob: pulp.LpProblem, solver: str | pulp.LpSolver,
                  time_limit: float | None, S: Sequence[str]) -> str:
    """Solve; any status but optimal is a :class:`PlanError` naming S.  Returns the solver's
    name for the result."""
    slv = pick_solver(solver, time_limit) if isinstance(solver, str) else solver
    try:
        prob.solve(slv)
    except pulp.PulpSolverError as exc:
        raise PlanError(f"LP solver failed: {exc}") from None
    status = pulp.LpStatus[prob.status]
    if status == "Optimal" and prob.sol_status != pulp.LpSolutionOptimal:
        status = "Not Solved"  # PuLP reports a time-limited stop as "Optimal"
    if status != "Optimal":
        raise _status_error(status, S)
    return f"{type(slv).__name__} (PuLP)"


def _val(v: pulp.LpVariable) -> float:
    x = v.value()
    return max(0.0, float(x)) if x is not None else 0.0


def job_solution(v: JobVars, solver: str, seconds: float) -> LPResult:
    """Read the job's solved variables back, per worker (twin classes expanded)."""
    gam = _val(v.gamma)
    x_out: dict[tuple[str, str], float] = {}
    u_out: dict[str, float] = {}
    for gi, grp in enumerate(v.groups):
        tot = 0.0
        for s in v.S:
            xv = _val(v.y[gi, s]) if (gi, s) in v.y else 0.0
            tot += xv
            for w in grp:
                x_out[w, s] = xv
        for w in grp:
            u_out[w] = max(0.0, gam - tot)
    a_out = {s: _val(v.a[s]) for s in v.S}
    return LPResult(tuple(v.S), gam, x_out, a_out, u_out, solver, seconds, v.job)


def solve_lp(
    job: Job,
    deployed: Sequence[str],
    *,
    solver: str | pulp.LpSolver = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
) -> LPResult:
    """Solve LP(S) for ``deployed`` = S (s_d excluded, order kept for the interval layout)."""
    t0 = time.perf_counter()
    g, sd = job.graph, job.ps_tor
    S = list(deployed)
    _check_deployed(g, sd, S)
    groups = worker_groups(job, merge)
    prob = pulp.LpProblem("ina_placement", pulp.LpMaximize)
    v = add_job_vars(prob, job, S, groups)
    prob += v.gamma

    load: LoadRows = {}
    add_job_load(load, v)
    add_load_rows(prob, g, load)
    add_job_rows(prob, v)
    for s in S:
        if s in job.capacity:
            terms = switch_input_terms(v, s)
            if terms:
                prob += pulp.LpAffineExpression(terms) <= job.capacity[s], f"cap_{s}"
    if sd in job.capacity:
        prob += pulp.LpAffineExpression(tor_input_terms(v)) <= job.capacity[sd], "cap_tor"

    name = solve_problem(prob, solver, time_limit, S)
    return job_solution(v, name, time.perf_counter() - t0)


def compute_loads(
    job: Job,
    deployed: Sequence[str],
    gamma: float,
    x: Mapping[tuple[str, str], float],
    a: Mapping[str, float],
) -> dict[Link, float]:
    """Directed link loads of a solution, by the formula of docs/design.md §3.3 (all workers)."""
    g, sd = job.graph, job.ps_tor
    out: dict[Link, float] = {}

    def add(src: str, dst: str, rate: float) -> None:
        if rate <= 0:
            return
        for e, f in _fractions(g, src, dst):
            out[e] = out.get(e, 0.0) + rate * f

    for w in job.workers:
        sent = 0.0
        for s in deployed:
            r = x.get((w, s), 0.0)
            add(w, s, r)
            sent += r
        add(w, sd, max(0.0, gamma - sent))
    for s in deployed:
        add(s, sd, a.get(s, 0.0))
    add(sd, job.ps, gamma)
    if job.result_load:
        for e, c in result_tree_coeffs(job, deployed):
            out[e] = out.get(e, 0.0) + gamma * c
    return out


def ps_only(job: Job) -> tuple[float, dict[Link, float]]:
    """PS-only baseline: no aggregation anywhere; each worker sends γ along its ECMP paths to
    d, so load(e) = γ·Σ_w P_{w,d}(e) and γ = min_e B_e / Σ_w P_{w,d}(e) (closed form of the
    one-variable LP).  Returns (γ, loads)."""
    g = job.graph
    per_unit: dict[Link, float] = {}
    for w in job.workers:
        if not reachable(g, w, job.ps):
            raise PlanError(f"topology is disconnected: worker {w!r} cannot reach the PS")
        for e, f in _fractions(g, w, job.ps):
            per_unit[e] = per_unit.get(e, 0.0) + f
    if job.result_load:
        for e, c in result_tree_coeffs(job, ()):
            per_unit[e] = per_unit.get(e, 0.0) + c
    gamma = min(_bw(g, *e) / c for e, c in per_unit.items() if c > 0)
    return gamma, {e: gamma * c for e, c in per_unit.items()}
