"""Ring all-reduce schedule: exact sums, ring structure and the 2(P-1)/P·n bytes per worker."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.collective.ring import (
    build_ring_schedule,
    predicted_values_per_worker,
    ring_chunk_sent,
)
from workers.collective.schedule import GATHER, REDUCE, simulate, split_range, values_sent


def _inputs(workers: list[int], n: int, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v: rng.integers(-(2**40), 2**40, size=n, dtype=np.int64) for v in workers}


@pytest.mark.parametrize("P", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("n", [0, 1, 5, 33, 257])
def test_every_worker_ends_with_exact_sum(P: int, n: int) -> None:
    workers = list(range(P))
    inputs = _inputs(workers, n, seed=P * 1000 + n)
    total = np.sum(np.stack(list(inputs.values())), axis=0)
    out = simulate(build_ring_schedule(P, n), inputs)
    for v in workers:
        np.testing.assert_array_equal(out[v], total)


@settings(max_examples=40, deadline=None)
@given(
    workers=st.lists(st.integers(0, 999), min_size=1, max_size=9, unique=True),
    n=st.integers(0, 80),
    seed=st.integers(0, 99),
)
def test_exact_sum_any_ring_order(workers: list[int], n: int, seed: int) -> None:
    inputs = _inputs(workers, n, seed)
    total = np.sum(np.stack(list(inputs.values())), axis=0)
    out = simulate(build_ring_schedule(workers, n), inputs)
    for v in workers:
        np.testing.assert_array_equal(out[v], total)


def test_ring_structure() -> None:
    workers = [5, 2, 9, 4]
    sched = build_ring_schedule(workers, 10)
    assert sched.num_steps == 6 and sched.num_threads == 1
    assert sched.ops == (REDUCE,) * 3 + (GATHER,) * 3
    chunks = split_range(0, 10, 4)
    for step in range(sched.num_steps):
        for r, v in enumerate(workers):
            (tr,) = sched.sends(0, step, v)
            assert tr.dst == workers[(r + 1) % 4]  # only to the successor
            assert tr.level is None
            assert (tr.lo, tr.hi) == chunks[ring_chunk_sent(4, r, step)]
            assert tr.op == sched.ops[step]
    # hand-checked: position 0 sends chunks 0, 3, 2 in reduce-scatter, then 1, 0, 3 in gather
    assert [ring_chunk_sent(4, 0, s) for s in range(6)] == [0, 3, 2, 1, 0, 3]


@pytest.mark.parametrize("P", [2, 3, 4, 16])
def test_bytes_per_worker_formula_when_divisible(P: int) -> None:
    n = 7 * P
    sched = build_ring_schedule(P, n)
    pred = predicted_values_per_worker(P, n)
    assert pred.denominator == 1
    sent = values_sent(sched)
    for v in range(P):
        assert sent[v] == {None: pred}
        assert values_sent(sched, REDUCE)[v][None] == (P - 1) * n // P
    # received equals sent for every worker
    recv = dict.fromkeys(range(P), 0)
    for tr in sched.transfers():
        recv[tr.dst] += tr.size
    assert all(recv[v] == pred for v in range(P))


@pytest.mark.parametrize("P,n", [(3, 10), (4, 5), (7, 100), (5, 2)])
def test_bytes_exact_for_uneven_n(P: int, n: int) -> None:
    """A worker at position r sends every chunk but (r+1) in reduce and every chunk but (r+2) in
    gather: n - |c_{r+1}| + n - |c_{r+2}| values."""
    chunks = split_range(0, n, P)
    size = [hi - lo for lo, hi in chunks]
    sent = values_sent(build_ring_schedule(P, n))
    for r in range(P):
        assert sent[r][None] == 2 * n - size[(r + 1) % P] - size[(r + 2) % P]
        assert abs(sent[r][None] - 2 * (P - 1) * n / P) < 2


def test_single_node_and_errors() -> None:
    sched = build_ring_schedule(1, 4)
    assert sched.num_steps == 0
    out = simulate(sched, {0: np.arange(4)})
    np.testing.assert_array_equal(out[0], np.arange(4))
    with pytest.raises(ValueError, match="at least 1 worker"):
        build_ring_schedule(0, 4)
    with pytest.raises(ValueError, match="repeat"):
        build_ring_schedule([1, 2, 1], 4)
    with pytest.raises(ValueError, match="n "):
        build_ring_schedule(3, -2)
