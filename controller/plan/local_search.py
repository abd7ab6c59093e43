"""Local search over deployment sets (issue 41 item 4): swap, add and drop moves from a start.

From a start S₀ (the best of the planners the ``best`` planner runs), repeat: try the moves
of S in a fixed order — replace S[i] by a candidate c ∉ S (i in interval order, c in name
order), add a candidate (if |S| < M), drop one switch (with the RESULT term a smaller set
can be better) — and take the first that the job set's comparison calls better
(:meth:`controller.plan.placement.Jobs.better`: one job, γ larger by more than 1e-9
relative; several, the joint score); stop when a full pass finds none (S is then a local
optimum for these moves) or the LP or time budget is spent.

Every accepted move is strictly better, so the search never returns a worse set than its
start: the result's γ (or joint score) is ≥ S₀'s, whatever the budget cuts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.plan.placement import Jobs

__all__ = ["SearchResult", "local_search", "moves"]


@dataclass
class SearchResult:
    """The set reached, its LP, the moves taken (``("swap", out, in)``, ``("add", s)``,
    ``("drop", s)``), the LPs solved and whether a full pass found no better move."""

    deployed: tuple[str, ...]
    result: Any
    moves: list[tuple[str, ...]] = field(default_factory=list)
    lp_solves: int = 0
    local_optimum: bool = False


def moves(S: Sequence[str], cands: Sequence[str], budget: int
          ) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """The neighbours of S in the order of the module doc: (move, new S in interval order)."""
    inside = set(S)
    outside = [c for c in cands if c not in inside]
    for i, s in enumerate(S):
        for c in outside:
            yield ("swap", s, c), [*S[:i], c, *S[i + 1:]]
    if len(S) < budget:
        for c in outside:
            yield ("add", c), [*S, c]
    for i, s in enumerate(S):
        yield ("drop", s), [*S[:i], *S[i + 1:]]


def local_search(p: Jobs, start: Sequence[str], budget: int, *, start_result: Any = None,
                 max_lps: int = 400, seconds: float = 30.0) -> SearchResult:
    """First-improvement local search from ``start`` (module doc), at most ``max_lps`` LPs
    and about ``seconds`` of wall time (checked between LPs)."""
    t0 = time.perf_counter()
    S = list(start)
    best = start_result if start_result is not None else p.solve(S)
    out = SearchResult(tuple(S), best, lp_solves=0 if start_result is not None else 1)
    cands = p.candidates()
    while True:
        improved = False
        for move, S2 in moves(S, cands, budget):
            if out.lp_solves >= max_lps or time.perf_counter() - t0 > seconds:
                return out
            res = p.solve(S2)
            out.lp_solves += getattr(res, "lp_solves", 1)
            if p.better(res, best):
                S, best = S2, res
                out.deployed, out.result = tuple(S), res
                out.moves.append(move)
                improved = True
                break
        if not improved:
            out.local_optimum = True
            return out
