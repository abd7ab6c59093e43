"""BCube(N, k) hierarchical parameter synchronization: the pure schedule (docs/design.md §4).

This module is I/O free. It answers one question -- *who sends which index range to whom, over
which level, at which step* -- and executes that answer in-process
(:func:`~workers.collective.schedule.simulate`) so that the socket/Mininet layer is a thin shell
that replays :class:`Transfer` objects.

The generic part (:class:`~workers.collective.schedule.Transfer`,
:class:`~workers.collective.schedule.Schedule`, :func:`~workers.collective.schedule.simulate`,
:func:`~workers.collective.schedule.values_sent`) is :mod:`workers.collective.schedule`.

Addressing
    BCube(N, k) has P = N**k workers, ids ``0 .. P-1``.  Worker ``s`` has k base-N digits,
    ``digit(s, l) = (s // N**l) % N`` for levels ``l = 0 .. k-1``.  The level-l switch joins the N
    workers that differ only in digit l (the *level-l group* of ``s``), so every transfer of the
    schedule is one hop: src and dst are in the same level group and use their level-l NICs.

Parameters and threads
    The n parameter indices ``[0, n)`` are split into k contiguous sets, as even as possible
    (:func:`~workers.collective.schedule.split_range`: the first ``n mod k`` sets get one index
    more).  Thread t synchronizes set t.  In reduce step i (i = 0 .. k-1) thread t uses level
    ``(t + i) mod k`` -- the rotation of docs/design.md §4 -- so at every step the k threads use k
    different levels (different NICs and switches: "no crossing in hardware use").

Reduce-scatter (steps 0 .. k-1, op ``"reduce"``)
    Let ``R_{-1}(s)`` be thread t's set.  At step i with level l, all members of the level-l
    group of ``s`` hold the same range ``R_{i-1}`` (they differ only in digit l, which no earlier
    step of this thread has used).  That range is split into N contiguous parts; the member
    with digit l = j owns part j, so ``R_i(s) = part[digit(s, l)]``.  Each worker sends the other
    N-1 parts to their owners and adds what it receives into its own part.  After step i,
    ``R_i(s)`` holds the sum over the ``N**(i+1)`` workers that agree with ``s`` on the digits not
    yet visited; after step k-1 it is the full sum, and the final parts ``R_{k-1}(s)`` of the P
    workers partition the set.

All-gather (steps k .. 2k-1, op ``"gather"``)
    Gather step ``k + j`` revisits the level of reduce step ``i = k-1-j`` (reverse order).  Each
    worker holds the fully reduced ``R_i(s)`` and sends it to the N-1 other members of the group,
    after which every member holds the union of the group's parts, which is ``R_{i-1}(s)``.
    After the last gather step every worker holds the whole set, fully reduced.

Ranges when N**k does not divide n
    Splits are contiguous and as even as possible, so part sizes differ by at most one.  A range
    of fewer than N indices yields *empty* parts (``lo == hi``); n < k yields empty sets.  Empty
    transfers are kept in the schedule (every worker sends exactly N-1 transfers per step and
    thread, a fixed pattern the transport can use as a step barrier); they carry zero values and
    count zero bytes.  A transport may skip them if it does not need the barrier.

Traffic (values; multiply by the value size, e.g. 4 bytes for int32 fixed point)
    Reduce step i: a worker sends the N-1 parts it does not own, i.e. (N-1)/N of its current
    range ``R_{i-1}`` (exactly ``|R_{i-1}(s)| - |R_i(s)|``).  Summed over the steps this telescopes:
    per thread a worker sends ``|set_t| - |R_{k-1}(s)|`` values in the reduce phase and receives
    exactly as many in the gather phase (it sends ``(N-1)·|R_i(s)|`` in the gather step that
    revisits reduce step i).  When ``k·N**k`` divides n (every range splits evenly,
    ``|R_i| = n/(k·N**(i+1))``), a worker sends at level l, summed over the k threads (thread t
    is at step ``i = (l - t) mod k``, and i runs over 0 .. k-1)::

        reduce:  sum_i (N-1)·n/(k·N**(i+1)) = (n/k)·(1 - N**-k)
        gather:  the same,                    (n/k)·(1 - N**-k)
        per level (NIC):  2·(n/k)·(1 - N**-k)        total:  2·n·(1 - 1/P) = 2·(P-1)/P·n

    The total equals ring all-reduce over the same P workers (bandwidth optimal), but it is
    spread evenly over k NICs, so with per-NIC bandwidth B the transfer time is about
    ``2·n·(1 - 1/P)/(k·B)``: 1/k of a ring on one NIC, and far below a single PS whose link
    carries P·n values each way.  :func:`predicted_values_per_level` gives this figure exactly
    (as a Fraction); :func:`~workers.collective.schedule.values_sent` counts what a schedule
    actually sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from workers.collective.schedule import GATHER, REDUCE, Schedule, Transfer, split_range

__all__ = [
    "build_schedule",
    "digit",
    "digits",
    "level_group",
    "num_workers",
    "owned_range",
    "predicted_values_per_level",
    "worker_from_digits",
    "thread_levels",
]


# --------------------------------------------------------------------------------------------
# BCube addressing
# --------------------------------------------------------------------------------------------


def _check_nk(N: int, k: int) -> None:
    if not isinstance(N, int) or N < 2:
        raise ValueError(f"BCube(N={N}, k={k}): N (workers per switch) must be an integer >= 2")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"BCube(N={N}, k={k}): k (levels) must be an integer >= 1")


def num_workers(N: int, k: int) -> int:
    """P = N**k workers."""
    _check_nk(N, k)
    return N**k


def digit(worker: int, level: int, N: int) -> int:
    """Digit ``level`` of ``worker`` in base N: ``(worker // N**level) % N``."""
    return (worker // N**level) % N


def digits(worker: int, N: int, k: int) -> tuple[int, ...]:
    """All k digits of ``worker``, index = level (``digits(s)[l] == digit(s, l)``)."""
    _check_nk(N, k)
    if not 0 <= worker < N**k:
        raise ValueError(f"BCube(N={N}, k={k}): worker {worker} out of range 0..{N**k - 1}")
    return tuple(digit(worker, lv, N) for lv in range(k))


def worker_from_digits(ds: tuple[int, ...] | list[int], N: int) -> int:
    """Inverse of :func:`digits`: ``sum(ds[l] * N**l)``."""
    if any(not 0 <= d < N for d in ds):
        raise ValueError(f"worker_from_digits: digits {tuple(ds)} not all in 0..{N - 1}")
    return sum(d * N**lv for lv, d in enumerate(ds))


def level_group(worker: int, level: int, N: int, k: int) -> tuple[int, ...]:
    """The N workers of ``worker``'s level-``level`` group, ordered by their digit ``level``.

    Member j (index j of the tuple) is the worker whose digit ``level`` is j; they all hang off
    the same level-``level`` switch.
    """
    ds = list(digits(worker, N, k))
    if not 0 <= level < k:
        raise ValueError(f"BCube(N={N}, k={k}): level {level} out of range 0..{k - 1}")
    out = []
    for j in range(N):
        ds[level] = j
        out.append(worker_from_digits(ds, N))
    return tuple(out)


def thread_levels(thread: int, k: int) -> tuple[int, ...]:
    """Levels thread ``thread`` visits in reduce steps 0..k-1: ``(thread + i) mod k``.

    The gather phase visits them in reverse order.
    """
    return tuple((thread + i) % k for i in range(k))


# --------------------------------------------------------------------------------------------
# the BCube schedule
# --------------------------------------------------------------------------------------------


def _ownership(N: int, k: int, n: int) -> list[list[dict[int, tuple[int, int]]]]:
    """``own[t][i + 1][s]`` = R_i(s) for i = -1 .. k-1 (index 0 is thread t's whole set)."""
    P = N**k
    sets = split_range(0, n, k)
    own: list[list[dict[int, tuple[int, int]]]] = []
    for t in range(k):
        rows = [dict.fromkeys(range(P), sets[t])]
        for lv in thread_levels(t, k):
            prev = rows[-1]
            rows.append({s: split_range(*prev[s], N)[digit(s, lv, N)] for s in range(P)})
        own.append(rows)
    return own


def owned_range(N: int, k: int, n: int, thread: int, step: int, worker: int) -> tuple[int, int]:
    """R_step(worker) of ``thread``: the range the worker is responsible for after reduce step
    ``step`` (``step = -1``: the thread's whole set).  Recomputes the ownership table; for bulk
    use take :func:`build_schedule` and its transfers."""
    _check_nk(N, k)
    if not -1 <= step < k:
        raise ValueError(f"owned_range: step must be in -1..{k - 1}, got {step}")
    return _ownership(N, k, n)[thread][step + 1][worker]


def build_schedule(N: int, k: int, n: int) -> Schedule:
    """The BCube(N, k) all-reduce schedule for n values: k threads, 2k steps.

    Steps ``0 .. k-1`` reduce-scatter (thread t at level ``(t + i) mod k``), steps ``k .. 2k-1``
    all-gather (thread t at level ``(t + 2k - 1 - step) mod k``, the reduce levels reversed).
    See the module docstring for the maths.
    """
    _check_nk(N, k)
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"BCube schedule: n (number of values) must be an integer >= 0, got {n}")
    P = N**k
    own = _ownership(N, k, n)
    ops = tuple([REDUCE] * k + [GATHER] * k)
    table: list[tuple[Mapping[int, tuple[Transfer, ...]], ...]] = []
    levels: list[tuple[int, ...]] = []
    for t in range(k):
        red_levels = thread_levels(t, k)
        lv_row = red_levels + tuple(reversed(red_levels))
        levels.append(lv_row)
        steps: list[Mapping[int, tuple[Transfer, ...]]] = []
        for step in range(2 * k):
            lv = lv_row[step]
            per_worker: dict[int, tuple[Transfer, ...]] = {}
            for s in range(P):
                group = level_group(s, lv, N, k)
                mine = digit(s, lv, N)
                if step < k:  # reduce: send the parts of R_{step-1}(s) owned by the others
                    parts = split_range(*own[t][step][s], N)
                    per_worker[s] = tuple(
                        Transfer(t, step, s, group[j], lv, *parts[j], REDUCE)
                        for j in range(N) if j != mine
                    )
                else:  # gather: send the reduced R_i(s), i = 2k-1-step, to the other members
                    lo, hi = own[t][2 * k - step][s]
                    per_worker[s] = tuple(
                        Transfer(t, step, s, group[j], lv, lo, hi, GATHER)
                        for j in range(N) if j != mine
                    )
            steps.append(per_worker)
        table.append(tuple(steps))
    return Schedule(
        n=n,
        workers=tuple(range(P)),
        num_threads=k,
        num_steps=2 * k,
        ops=ops,
        levels=tuple(levels),
        table=tuple(table),
    )


def predicted_values_per_level(N: int, k: int, n: int) -> Fraction:
    """Values one worker sends on each level's NIC per all-reduce, per direction of the phase:
    ``(n/k)·(1 - N**-k)`` in the reduce phase and the same again in the gather phase.

    Exact (an integer) when ``k·N**k`` divides n; otherwise the schedule's counts differ from it
    by rounding of the uneven splits.  Total per worker over both phases and k levels:
    ``2·n·(1 - N**-k) = 2·(P-1)/P·n``.
    """
    _check_nk(N, k)
    return Fraction(n, k) * (1 - Fraction(1, N**k))
