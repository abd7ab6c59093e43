"""Ring all-reduce: the pure schedule of the baseline of docs/design.md §4 (reduce-scatter +
all-gather).

I/O free; it uses the generic :class:`~workers.collective.schedule.Schedule` representation, so
:func:`~workers.collective.schedule.simulate` and :func:`~workers.collective.schedule.values_sent`
work on it unchanged (one thread, ``level = None`` on every transfer).

Ring
    P workers in ring order ``workers[0] -> workers[1] -> ... -> workers[P-1] -> workers[0]``;
    position r sends only to position ``r + 1 (mod P)``.  The n indices are split into P contiguous
    chunks, as even as possible (:func:`~workers.collective.schedule.split_range`), chunk c =
    ``chunks[c]``.

Reduce-scatter (steps 0 .. P-2, op ``"reduce"``)
    At step s position r sends chunk ``(r - s) mod P`` to position r+1, which adds it.  By
    induction, after step s position r+1 holds chunk ``(r - s) mod P`` summed over positions
    ``r-s .. r+1`` (s+2 workers), so after P-1 steps position r holds the full sum of chunk
    ``(r + 1) mod P``.

All-gather (steps P-1 .. 2P-3, op ``"gather"``)
    At gather step g = 0 .. P-2 position r sends chunk ``(r + 1 - g) mod P`` (the fully reduced
    chunk it owns at g = 0, the one it just received otherwise) to position r+1, which
    overwrites.  After P-1 steps every worker holds every chunk, fully reduced.

Traffic
    Each phase a worker sends P-1 of the P chunks: in the reduce phase every chunk except
    ``(r + 1) mod P``, in the gather phase every chunk except ``(r + 2) mod P``.  So a worker sends
    exactly ``n - |chunk (r+1)|`` + ``n - |chunk (r+2)|`` values, which is ``2·(P-1)/P·n`` when P
    divides n (and within one value per phase of it otherwise).  It receives the same amount.
    Time with per-link bandwidth B: about ``2·n·(P-1)/(P·B)`` plus 2(P-1) step latencies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from workers.collective.schedule import GATHER, REDUCE, Schedule, Transfer, split_range

__all__ = ["build_ring_schedule", "predicted_values_per_worker", "ring_chunk_sent"]


def _workers(workers: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(workers, int):
        if workers < 1:
            raise ValueError(f"ring schedule: need at least 1 worker, got {workers}")
        return tuple(range(workers))
    out = tuple(int(x) for x in workers)
    if not out:
        raise ValueError("ring schedule: need at least 1 worker, got an empty ring")
    if len(set(out)) != len(out):
        raise ValueError(f"ring schedule: worker ids repeat in ring order {list(out)}")
    return out


def ring_chunk_sent(P: int, position: int, step: int) -> int:
    """Chunk index position ``position`` sends at ``step`` of the 2(P-1)-step ring schedule."""
    if step < P - 1:
        return (position - step) % P
    return (position + 1 - (step - (P - 1))) % P


def build_ring_schedule(workers: int | Sequence[int], n: int) -> Schedule:
    """Ring all-reduce schedule of n values over ``workers`` (a count P, or worker ids in ring
    order).

    One thread, ``2·(P-1)`` steps (none for P = 1); see the module docstring.
    """
    ring = _workers(workers)
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"ring schedule: n (number of values) must be an integer >= 0, got {n}")
    P = len(ring)
    chunks = split_range(0, n, P)
    num_steps = 2 * (P - 1)
    steps: list[Mapping[int, tuple[Transfer, ...]]] = []
    for step in range(num_steps):
        op = REDUCE if step < P - 1 else GATHER
        per_worker: dict[int, tuple[Transfer, ...]] = {}
        for r, worker in enumerate(ring):
            lo, hi = chunks[ring_chunk_sent(P, r, step)]
            per_worker[worker] = (Transfer(0, step, worker, ring[(r + 1) % P], None, lo, hi, op),)
        steps.append(per_worker)
    return Schedule(
        n=n,
        workers=ring,
        num_threads=1,
        num_steps=num_steps,
        ops=tuple([REDUCE] * (P - 1) + [GATHER] * (P - 1)),
        levels=(tuple([None] * num_steps),),
        table=(tuple(steps),),
    )


def predicted_values_per_worker(P: int, n: int) -> Fraction:
    """Values each worker sends per all-reduce: ``2·(P-1)/P·n`` (exact when P divides n)."""
    if P < 1:
        raise ValueError(f"ring: need at least 1 worker, got {P}")
    return 2 * Fraction(P - 1, P) * n
