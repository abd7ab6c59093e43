"""Fixed-point quantization: overflow impossible, clipping counted, exact scaling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.common.quantize import INT32_MAX, choose_frac_bits, dequantize, quantize, sum_limit


def test_sum_limit_values() -> None:
    assert sum_limit(1) == 2**31 - 1
    assert sum_limit(2) == 1073741823
    assert sum_limit(64) == (2**31 - 1) // 64 == 33554431
    with pytest.raises(ValueError):
        sum_limit(0)


def test_choose_frac_bits_hand_computed() -> None:
    # N=8: L = 268435455 = 2^28 - 1. bound 1.0 -> 2^27 <= L < 2^28, so f = 27.
    assert choose_frac_bits(1.0, 8) == 27
    # bound exactly representable at the boundary: 0.5 * 2^28 = 2^27 <= L -> f = 28.
    assert choose_frac_bits(0.5, 8) == 28
    # huge bound -> negative f: 1e12 * 2^f <= 2^31-1 -> f = -9 (1e12/512 = 1.95e9 < 2.147e9).
    assert choose_frac_bits(1e12, 1) == -9
    with pytest.raises(ValueError):
        choose_frac_bits(0.0, 4)
    with pytest.raises(ValueError):
        choose_frac_bits(float("nan"), 4)


@settings(max_examples=200, deadline=None)
@given(
    bound=st.floats(min_value=1e-6, max_value=1e9, allow_nan=False),
    n=st.integers(min_value=1, max_value=64),
)
def test_choose_frac_bits_is_tight(bound: float, n: int) -> None:
    f = choose_frac_bits(bound, n)
    limit = sum_limit(n)
    assert math.ldexp(bound, f) <= limit < math.ldexp(bound, f + 1)


def test_quantize_rounds_and_clips_and_counts() -> None:
    n, f = 4, 2  # L = 536870911; values scaled by 4
    x = np.array([0.125, 0.375, -0.375, 1.0, 1e12, -1e12, np.inf, np.nan], dtype=np.float32)
    q, clipped = quantize(x, f, n)
    limit = sum_limit(n)
    # 0.5 -> 0 and 1.5 -> 2 (half to even), -1.5 -> -2
    assert q.dtype == np.int32
    assert q.tolist() == [0, 2, -2, 4, limit, -limit, limit, 0]
    assert clipped == 4  # +1e12, -1e12, inf, nan


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=64),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    spread=st.floats(min_value=1e-3, max_value=1e30),
)
def test_worst_case_sum_never_overflows(n: int, seed: int, spread: float) -> None:
    """Whatever the inputs, the N-worker int64 sum stays within int32 -> int32 wrap is exact."""
    rng = np.random.default_rng(seed)
    f = choose_frac_bits(1.0, n)
    grads = (rng.standard_normal((n, 32)) * spread).astype(np.float32)
    qs = np.stack([quantize(g, f, n).values for g in grads])
    exact = qs.astype(np.int64).sum(axis=0)
    assert np.all(np.abs(exact) <= INT32_MAX)
    wrapped = np.zeros(32, dtype=np.int32)
    for q in qs:  # switch arithmetic: int32 with wrap-around, any order
        wrapped = (wrapped.astype(np.int64) + q).astype(np.int32)
    assert np.array_equal(wrapped.astype(np.int64), exact)


def test_dequantized_sum_error_bound() -> None:
    rng = np.random.default_rng(7)
    n = 8
    f = choose_frac_bits(4.0, n)
    grads = np.clip(rng.standard_normal((n, 1000)), -4, 4).astype(np.float32)
    qs = [quantize(g, f, n) for g in grads]
    assert all(c == 0 for _, c in qs)
    total = dequantize(np.sum([q for q, _ in qs], axis=0, dtype=np.int64), f)
    err = np.abs(total.astype(np.float64) - grads.astype(np.float64).sum(axis=0))
    # n roundings of at most 2^-(f+1) each, plus the final float32 rounding of the sum
    assert np.all(err <= n * 2.0 ** -(f + 1) + np.abs(total) * 2.0**-23)
    assert dequantize(np.array([3, -3]), 1).tolist() == [1.5, -1.5]
