"""Greedy placement (docs/design.md §3.4).

S ← ∅; U ← candidates (all switches but s_d that can carry traffic, :func:`lp.candidates`).
While |S| < M: solve LP(S ∪ {s}) for every s ∈ U; move the s with the largest γ from U to S,
ties (γ within 1e-9 relative) broken by name; stop early when the best candidate does not
improve γ by more than 1e-9 relative.  The result carries the last LP's routing (x, a, u).

Speed-ups that do not change the answer:

* the LP merges twin workers (:mod:`controller.plan.lp`, exact);
* candidates that cannot carry traffic are pruned (exact: γ(S ∪ {s}) = γ(S) for them);
* symmetry: if an automorphism σ of the capacitated graph fixes d, s_d, the worker set, the
  switch capacities and S (setwise), then LP(S ∪ {s}) and LP(S ∪ {σ(s)}) are the same LP up to
  renaming, so γ is equal.  :func:`topo.symmetry.candidate_orbits` returns classes of
  candidates proven equivalent by such automorphisms (verified permutations, so a class is
  never merged by mistake); we solve one LP per class and give every member its γ.  The
  name tie-break is then applied over *all* candidates exactly as in the plain loop, so the
  chosen switch is the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from controller.plan.lp import Job, LPResult, PlanError, candidates, solve_lp
from topo.models import natural_key

__all__ = ["GreedyResult", "greedy", "pick_best"]

REL_TOL = 1e-9


@dataclass
class GreedyResult:
    deployed: tuple[str, ...]
    gamma: float
    lp: LPResult
    history: list[tuple[str, float]] = field(default_factory=list)  # (chosen, γ after)
    lp_solves: int = 0
    seconds: float = 0.0


def pick_best(scores: dict[str, float]) -> tuple[str, float]:
    """argmax γ; candidates within REL_TOL of the best are ties, broken by name order."""
    top = max(scores.values())
    tied = [s for s, v in scores.items() if v >= top - REL_TOL * max(abs(top), 1e-300)]
    name = min(tied, key=natural_key)
    return name, scores[name]


def greedy(
    job: Job,
    budget: int,
    *,
    solver: str = "auto",
    time_limit: float | None = 60.0,
    merge: bool = True,
    symmetry: bool = True,
    lp: Callable[..., LPResult] = solve_lp,
    progress: Callable[[int, str, float], None] | None = None,
) -> GreedyResult:
    """Greedy deployment of at most ``budget`` switches besides s_d."""
    if budget < 0:
        raise PlanError(f"budget must be >= 0, got {budget}")
    t0 = time.perf_counter()
    solves = 0

    def solve(S: Sequence[str]) -> LPResult:
        nonlocal solves
        solves += 1
        return lp(job, S, solver=solver, time_limit=time_limit, merge=merge)

    S: list[str] = []
    best = solve(S)
    history: list[tuple[str, float]] = []
    U = candidates(job)
    while len(S) < budget and U:
        if symmetry and not job.result_load:  # the RESULT tree breaks ties by name
            from topo.symmetry import candidate_orbits

            classes = candidate_orbits(job.graph, job.ps, job.ps_tor, job.workers,
                                       job.capacity, S, U)
        else:
            classes = [[s] for s in U]
        scores: dict[str, float] = {}
        results: dict[str, LPResult] = {}
        for cls in classes:
            rep = min(cls, key=natural_key)
            res = solve([*S, rep])
            results[rep] = res
            for s in cls:
                scores[s] = res.gamma
        name, gam = pick_best(scores)
        if gam <= best.gamma * (1 + REL_TOL):
            break
        if name not in results:  # an orbit member: solve it to get its own routing
            results[name] = solve([*S, name])
        S.append(name)
        U.remove(name)
        best = results[name]
        history.append((name, best.gamma))
        if progress is not None:
            progress(len(S), name, best.gamma)
    return GreedyResult(tuple(S), best.gamma, best, history, solves, time.perf_counter() - t0)
