"""Collective schedules: who sends which index range to whom, at which step -- the generic
representation every collective method of :mod:`workers.collective` builds (BCube in
:mod:`~workers.collective.bcube`, the ring in :mod:`~workers.collective.ring`, the PS baselines in
:mod:`~workers.collective.baselines`), and its in-process executor (I/O free).

A :class:`Schedule` is a table of :class:`Transfer` objects per thread, step and worker;
:func:`simulate` executes one on numpy vectors (the reference the transport in
:mod:`workers.collective.worker_node` must match bit for bit), :func:`values_sent` counts what it
sends, and :func:`split_range` is the contiguous, as-even-as-possible split every schedule uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

REDUCE = "reduce"
GATHER = "gather"

__all__ = [
    "GATHER",
    "REDUCE",
    "Schedule",
    "Transfer",
    "simulate",
    "split_range",
    "values_sent",
]


@dataclass(frozen=True)
class Transfer:
    """One message: ``src`` sends indices ``[lo, hi)`` to ``dst``.

    ``op == "reduce"``: dst adds the values into its buffer; ``op == "gather"``: dst overwrites
    its buffer with them.  ``level`` is the BCube level (NIC/switch) the message uses, ``None``
    for schedules without levels (the ring).  ``thread`` and ``step`` locate it in the schedule.
    """

    thread: int
    step: int
    src: int
    dst: int
    level: int | None
    lo: int
    hi: int
    op: str

    @property
    def size(self) -> int:
        """Number of values carried (0 for an empty range)."""
        return self.hi - self.lo


@dataclass(frozen=True)
class Schedule:
    """An explicit collective schedule.

    ``table[thread][step][worker]`` is the tuple of transfers ``worker`` sends in that thread and
    step (every worker of ``workers`` is a key, possibly with an empty tuple).  ``levels[thread]
    [step]`` is the level that thread uses at that step and ``ops[step]`` the operation of the
    step.  Semantics (implemented by :func:`simulate`): steps run in order; inside a step all
    transfers of all threads read their source values as they were at the start of the step.
    Threads touch disjoint index sets, so a transport may run them without any barrier between
    threads; inside a thread, step s+1 of a worker may start once it has received everything
    addressed to it at step s.
    """

    n: int
    workers: tuple[int, ...]
    num_threads: int
    num_steps: int
    ops: tuple[str, ...]
    levels: tuple[tuple[int | None, ...], ...]
    table: tuple[tuple[Mapping[int, tuple[Transfer, ...]], ...], ...]

    def sends(self, thread: int, step: int, worker: int) -> tuple[Transfer, ...]:
        """Transfers ``worker`` sends in ``thread`` at ``step``."""
        return self.table[thread][step][worker]

    def receives(self, thread: int, step: int, worker: int) -> tuple[Transfer, ...]:
        """Transfers addressed to ``worker`` in ``thread`` at ``step`` (ordered by source)."""
        return tuple(
            tr
            for src in self.workers
            for tr in self.table[thread][step][src]
            if tr.dst == worker
        )

    def step_transfers(self, step: int) -> Iterator[Transfer]:
        """All transfers of one step, every thread."""
        for thread in range(self.num_threads):
            for worker in self.workers:
                yield from self.table[thread][step][worker]

    def transfers(self) -> Iterator[Transfer]:
        """All transfers, in step order."""
        for step in range(self.num_steps):
            yield from self.step_transfers(step)


def simulate(schedule: Schedule, inputs: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Execute ``schedule`` in-process on one vector per worker; return every worker's result.

    Each step reads a snapshot of all buffers taken at the start of the step, then applies the
    step's transfers (``reduce``: ``dst[lo:hi] += src[lo:hi]``, ``gather``: ``dst[lo:hi] =
    src[lo:hi]``).  The inputs are not modified.  For an all-reduce schedule every output equals
    ``sum(inputs.values())`` -- exactly, for integer dtypes.
    """
    expected = set(schedule.workers)
    if set(inputs) != expected:
        missing = sorted(expected - set(inputs))
        extra = sorted(set(inputs) - expected)
        raise ValueError(f"simulate: inputs must have one vector per worker; missing {missing}, "
                         f"unexpected {extra}")
    bufs: dict[int, np.ndarray] = {}
    for worker in schedule.workers:
        vec = np.asarray(inputs[worker])
        if vec.ndim != 1 or vec.shape[0] != schedule.n:
            raise ValueError(f"simulate: input of worker {worker} has shape {vec.shape}, "
                             f"expected ({schedule.n},)")
        bufs[worker] = vec.copy()
    for step in range(schedule.num_steps):
        snap = {s: b.copy() for s, b in bufs.items()}
        for tr in schedule.step_transfers(step):
            if tr.op == REDUCE:
                bufs[tr.dst][tr.lo:tr.hi] += snap[tr.src][tr.lo:tr.hi]
            elif tr.op == GATHER:
                bufs[tr.dst][tr.lo:tr.hi] = snap[tr.src][tr.lo:tr.hi]
            else:  # pragma: no cover - schedules are built by this package
                raise ValueError(f"simulate: unknown op {tr.op!r} in {tr}")
    return bufs


def values_sent(schedule: Schedule, op: str | None = None) -> dict[int, dict[int | None, int]]:
    """Values each worker sends, per level: ``result[worker][level]``.

    ``op`` restricts the count to ``"reduce"`` or ``"gather"`` transfers.  Multiply by the value
    size to get bytes on the worker's level-``level`` NIC (payload only, no headers).
    """
    if op not in (None, REDUCE, GATHER):
        raise ValueError(f"values_sent: op must be 'reduce', 'gather' or None, not {op!r}")
    levels = sorted({lv for row in schedule.levels for lv in row}, key=lambda x: (x is None, x))
    out: dict[int, dict[int | None, int]] = {s: dict.fromkeys(levels, 0) for s in schedule.workers}
    for tr in schedule.transfers():
        if op is None or tr.op == op:
            out[tr.src][tr.level] += tr.size
    return out


def split_range(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Split ``[lo, hi)`` into ``parts`` contiguous ranges, as even as possible.

    The first ``(hi - lo) mod parts`` ranges get one index more (numpy.array_split's rule);
    when ``hi - lo < parts`` the trailing ranges are empty (``(x, x)``).
    """
    if parts < 1:
        raise ValueError(f"split_range: parts must be >= 1, got {parts}")
    if hi < lo:
        raise ValueError(f"split_range: empty-negative range [{lo}, {hi})")
    q, r = divmod(hi - lo, parts)
    out = []
    start = lo
    for j in range(parts):
        end = start + q + (1 if j < r else 0)
        out.append((start, end))
        start = end
    return out
