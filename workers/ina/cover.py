"""Exact cover of a worker set by disjoint pieces: the PS's completion test (workers/ina/ps.py).

Given the distinct worker sets (bitmaps) received for a chunk, find pairwise disjoint ones whose
union is the job's full mask F.  Any such cover sums to the same S (ps.py's merge rule), so the
search only has to find one: depth-first, always extending the cover at the lowest worker not
yet covered (every cover must contain exactly one set holding it), larger sets first so that
the usual case -- one complete PARTIAL, or a few -- is found in as many steps as pieces.
"""

from __future__ import annotations

from collections.abc import Iterable


class CoverBudgetExceeded(RuntimeError):
    """The exact-cover search took more than its step budget."""


def find_exact_cover(bitmaps: Iterable[int], full: int, budget: int = 100_000) -> list[int] | None:
    """A list of pairwise disjoint bitmaps from ``bitmaps`` whose union is ``full``, or None.

    Deterministic depth-first search, larger sets first (see module docstring).  Bitmaps with
    bits outside ``full`` are ignored.  Raises :class:`CoverBudgetExceeded` after ``budget``
    candidate tries.
    """
    order = sorted({b for b in bitmaps if b and not b & ~full},
                   key=lambda b: (-b.bit_count(), b))
    chosen: list[int] = []
    steps = 0

    def search(covered: int) -> bool:
        nonlocal steps
        if covered == full:
            return True
        rest = full & ~covered
        low = rest & -rest
        for b in order:
            if b & low and not b & covered:
                steps += 1
                if steps > budget:
                    raise CoverBudgetExceeded(f"exact cover search exceeded {budget} steps")
                chosen.append(b)
                if search(covered | b):
                    return True
                chosen.pop()
        return False

    return chosen if search(0) else None
