"""BCube(N, k) schedule: exact sums in the in-process simulator and the structural claims of
docs/design.md §4 (rotation, one hop, no duplicate sends, byte counts)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.collective.bcube import (
    build_schedule,
    digits,
    level_group,
    owned_range,
    predicted_values_per_level,
    thread_levels,
    worker_from_digits,
)
from workers.collective.schedule import GATHER, REDUCE, simulate, split_range, values_sent

CONFIGS = [(2, 1), (2, 2), (3, 2), (4, 2), (2, 3)]


def _inputs(P: int, n: int, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    # large magnitudes: an exact int64 sum, any lost or doubled contribution shows
    return {s: rng.integers(-(2**40), 2**40, size=n, dtype=np.int64) for s in range(P)}


# ---------------------------------------------------------------- helpers and addressing


def test_split_range_even_and_uneven() -> None:
    assert split_range(0, 10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split_range(5, 7, 4) == [(5, 6), (6, 7), (7, 7), (7, 7)]
    assert split_range(3, 3, 2) == [(3, 3), (3, 3)]
    with pytest.raises(ValueError):
        split_range(0, 4, 0)


def test_digits_roundtrip_and_groups() -> None:
    # BCube(3, 2): worker 7 = 1 + 2*3 -> digits (1, 2)
    assert digits(7, 3, 2) == (1, 2)
    assert worker_from_digits((1, 2), 3) == 7
    assert level_group(7, 0, 3, 2) == (6, 7, 8)  # digit 0 varies
    assert level_group(7, 1, 3, 2) == (1, 4, 7)  # digit 1 varies
    assert thread_levels(1, 3) == (1, 2, 0)
    with pytest.raises(ValueError, match="N .* must be an integer >= 2"):
        build_schedule(1, 2, 10)
    with pytest.raises(ValueError, match="k .* must be an integer >= 1"):
        build_schedule(2, 0, 10)
    with pytest.raises(ValueError, match="n "):
        build_schedule(2, 2, -1)


# ---------------------------------------------------------------- exact sums


@pytest.mark.parametrize("N,k", CONFIGS)
@pytest.mark.parametrize("n", [1, 7, 101, 257])
def test_every_worker_ends_with_exact_sum(N: int, k: int, n: int) -> None:
    P = N**k
    sched = build_schedule(N, k, n)
    inputs = _inputs(P, n, seed=1000 * N + 10 * k + n)
    total = np.sum(np.stack(list(inputs.values())), axis=0)
    before = {s: v.copy() for s, v in inputs.items()}
    out = simulate(sched, inputs)
    assert set(out) == set(range(P))
    for s in range(P):
        assert out[s].dtype == np.int64
        np.testing.assert_array_equal(out[s], total)
    for s in range(P):  # the simulator does not modify its inputs
        np.testing.assert_array_equal(inputs[s], before[s])


@settings(max_examples=40, deadline=None)
@given(N=st.integers(2, 4), k=st.integers(1, 3), n=st.integers(0, 90), seed=st.integers(0, 99))
def test_exact_sum_property(N: int, k: int, n: int, seed: int) -> None:
    P = N**k
    inputs = _inputs(P, n, seed)
    total = np.sum(np.stack(list(inputs.values())), axis=0)
    out = simulate(build_schedule(N, k, n), inputs)
    for s in range(P):
        np.testing.assert_array_equal(out[s], total)


def test_reduce_scatter_leaves_each_worker_its_reduced_part() -> None:
    """After the k reduce steps, worker s holds the full sum exactly on R_{k-1}(s), and those
    final parts partition [0, n) across (thread, worker)."""
    N, k, n = 3, 2, 50
    sched = build_schedule(N, k, n)
    inputs = _inputs(N**k, n, seed=3)
    total = np.sum(np.stack(list(inputs.values())), axis=0)
    half = type(sched)(
        n=sched.n, workers=sched.workers, num_threads=sched.num_threads, num_steps=k,
        ops=sched.ops[:k], levels=tuple(r[:k] for r in sched.levels),
        table=tuple(r[:k] for r in sched.table),
    )
    out = simulate(half, inputs)
    covered = np.zeros(n, dtype=int)
    for t in range(k):
        for s in range(N**k):
            lo, hi = owned_range(N, k, n, t, k - 1, s)
            np.testing.assert_array_equal(out[s][lo:hi], total[lo:hi])
            covered[lo:hi] += 1
    assert (covered == 1).all()


def test_simulate_rejects_bad_inputs() -> None:
    sched = build_schedule(2, 2, 5)
    good = _inputs(4, 5, 0)
    with pytest.raises(ValueError, match="missing \\[3\\]"):
        simulate(sched, {s: good[s] for s in range(3)})
    with pytest.raises(ValueError, match="worker 2 has shape \\(4,\\)"):
        simulate(sched, {**good, 2: good[2][:4]})


# ---------------------------------------------------------------- structure


@pytest.mark.parametrize("N,k", CONFIGS)
def test_threads_use_distinct_levels_each_step(N: int, k: int) -> None:
    sched = build_schedule(N, k, 37)
    assert sched.num_threads == k and sched.num_steps == 2 * k
    assert sched.ops == tuple([REDUCE] * k + [GATHER] * k)
    for step in range(sched.num_steps):
        used = [sched.levels[t][step] for t in range(k)]
        assert sorted(used) == list(range(k)), (step, used)
        # and the transfers really are on the declared level
        for t in range(k):
            for s in sched.workers:
                assert all(tr.level == used[t] for tr in sched.sends(t, step, s))
    for t in range(k):  # rotation t, t+1, ... then reversed
        assert sched.levels[t][:k] == tuple((t + i) % k for i in range(k))
        assert sched.levels[t][k:] == tuple(reversed(sched.levels[t][:k]))


@pytest.mark.parametrize("N,k", CONFIGS)
def test_every_transfer_is_one_hop_in_its_level_group(N: int, k: int) -> None:
    sched = build_schedule(N, k, 41)
    count = 0
    for tr in sched.transfers():
        a, b = digits(tr.src, N, k), digits(tr.dst, N, k)
        differing = [lv for lv in range(k) if a[lv] != b[lv]]
        assert differing == [tr.level], tr
        assert tr.dst in level_group(tr.src, tr.level, N, k)
        count += 1
    # every worker sends to each of its N-1 group peers, per thread and step
    assert count == sched.num_steps * k * N**k * (N - 1)


@pytest.mark.parametrize("N,k", CONFIGS)
@pytest.mark.parametrize("n", [29, 64])
def test_no_index_sent_twice_in_a_reduce_step(N: int, k: int, n: int) -> None:
    sched = build_schedule(N, k, n)
    for step in range(k):
        for s in sched.workers:
            sent: Counter[int] = Counter()
            for t in range(k):
                for tr in sched.sends(t, step, s):
                    assert tr.op == REDUCE
                    sent.update(range(tr.lo, tr.hi))
            assert not sent or max(sent.values()) == 1, (step, s)
            # and it never sends (part of) what it keeps: own part is disjoint from what it sent
            for t in range(k):
                lo, hi = owned_range(N, k, n, t, step, s)
                assert all(i not in sent for i in range(lo, hi))


def test_reduce_ranges_shrink_by_N_each_step() -> None:
    """The range a worker is responsible for shrinks by the factor N at each reduce step, and the
    group members own disjoint parts of the common parent range."""
    N, k, n = 4, 2, 2 * 16 * 3  # divisible by k*N**k: exact sizes
    sched = build_schedule(N, k, n)
    for t in range(k):
        for step in range(k):
            for s in sched.workers:
                lo, hi = owned_range(N, k, n, t, step, s)
                assert hi - lo == n // k // N ** (step + 1)
                sends = sched.sends(t, step, s)
                plo, phi = owned_range(N, k, n, t, step - 1, s)
                assert sum(tr.size for tr in sends) == (N - 1) * (phi - plo) // N


# ---------------------------------------------------------------- byte counts


@pytest.mark.parametrize("N,k", CONFIGS)
def test_byte_counts_match_formula_when_divisible(N: int, k: int) -> None:
    n = k * N**k * 5
    sched = build_schedule(N, k, n)
    per_level = predicted_values_per_level(N, k, n)
    assert per_level.denominator == 1
    red = values_sent(sched, REDUCE)
    gat = values_sent(sched, GATHER)
    tot = values_sent(sched)
    P = N**k
    for s in sched.workers:
        assert set(tot[s]) == set(range(k))
        for lv in range(k):
            assert red[s][lv] == per_level
            assert gat[s][lv] == per_level
            assert tot[s][lv] == 2 * per_level
        # total = 2 (P-1)/P n, the ring all-reduce figure
        assert sum(tot[s].values()) * P == 2 * (P - 1) * n
    # int32 payload bytes per NIC, for the record: BCube(4,2), n=160 -> 2*80*(15/16)*4
    if (N, k) == (4, 2):
        assert 4 * tot[0][0] == 600


@pytest.mark.parametrize("N,k", CONFIGS)
@pytest.mark.parametrize("n", [1, 13, 101])
def test_byte_counts_telescope_for_uneven_n(N: int, k: int, n: int) -> None:
    """For any n: per thread, a worker sends |set_t| - |R_{k-1}(s)| values in the reduce phase
    and receives exactly as many in the gather phase."""
    sched = build_schedule(N, k, n)
    sets = split_range(0, n, k)
    for t in range(k):
        for s in sched.workers:
            lo, hi = owned_range(N, k, n, t, k - 1, s)
            expect = (sets[t][1] - sets[t][0]) - (hi - lo)
            sent = sum(tr.size for step in range(k) for tr in sched.sends(t, step, s))
            got = sum(tr.size for step in range(k, 2 * k) for tr in sched.receives(t, step, s))
            assert sent == expect
            assert got == expect
    # and the totals stay within rounding of the formula n(1 - 1/P) per phase.  Nested
    # as-even-as-possible splits keep every |R_i| within one value of |set_t|/N**(i+1), and
    # |set_t| within one of n/k, so: reduce (n - sum_t |R_{k-1}|) deviates by < k values, gather
    # ((N-1) sum_t sum_i |R_i|) by < (N-1)*k*k values.
    P = N**k
    red, gat = values_sent(sched, REDUCE), values_sent(sched, GATHER)
    for s in sched.workers:
        assert abs(sum(red[s].values()) - n * (P - 1) / P) < k
        assert abs(sum(gat[s].values()) - n * (P - 1) / P) < (N - 1) * k * k


def test_empty_ranges_are_kept_as_zero_size_transfers() -> None:
    # n = 3 over BCube(2,2): sets of 2 and 1 values, 4 final parts each -> many empty parts
    sched = build_schedule(2, 2, 3)
    sizes = [tr.size for tr in sched.transfers()]
    assert 0 in sizes and min(sizes) == 0
    assert all(tr.lo <= tr.hi for tr in sched.transfers())
    out = simulate(sched, {s: np.array([s, 10 * s, 100 * s], dtype=np.int64) for s in range(4)})
    for s in range(4):
        np.testing.assert_array_equal(out[s], [6, 60, 600])
