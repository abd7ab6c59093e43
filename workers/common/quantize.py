"""float32 <-> int32 fixed point for in-network aggregation, overflow-free by construction.

Switches add int32 values with wrap-around arithmetic, so the sum of N workers'
quantized gradients is exact iff it never leaves the int32 range. With a per-job scale
2^f every worker sends ``q = clip(rint(x * 2^f), -L, L)`` where

    L = floor((2^31 - 1) / N)

so that ``|sum of N values| <= N * L <= 2^31 - 1``: no partial or full sum can overflow,
in any aggregation order. Values whose scaled magnitude exceeds L are clipped to +-L and
counted (NaN is sent as 0 and counted too), so the caller can report or adapt f.

Choosing f: given a bound B on |x| (e.g. the gradient-clipping norm agreed for the job),
`choose_frac_bits` returns the largest f with ``B * 2^f <= L``, i.e. the finest
resolution (2^-f) at which no value within the bound is clipped. Multiplying by a power
of two is exact in binary floating point, so quantization error is only the rounding,
at most 2^-(f+1) per value, and the dequantized N-worker sum is within N * 2^-(f+1) of
the true float sum.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

INT32_MAX = 2**31 - 1


class Quantized(NamedTuple):
    """Quantized values and how many inputs were clipped (|x*2^f| > L, +-inf or NaN)."""

    values: np.ndarray
    clipped: int


def sum_limit(n_workers: int) -> int:
    """L = floor((2^31-1)/N): the largest |q| that keeps any N-worker sum inside int32."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    return INT32_MAX // n_workers


def choose_frac_bits(bound: float, n_workers: int) -> int:
    """Largest f (may be negative) with ``bound * 2^f <= floor((2^31-1)/n_workers)``."""
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"bound must be a positive finite number, got {bound}")
    limit = sum_limit(n_workers)
    f = math.floor(math.log2(limit / bound))
    # log2 is rounded; settle the exact boundary with exact power-of-two scaling.
    while math.ldexp(bound, f) > limit:
        f -= 1
    while math.ldexp(bound, f + 1) <= limit:
        f += 1
    return f


def quantize(x: np.ndarray, frac_bits: int, n_workers: int) -> Quantized:
    """``clip(rint(x * 2^f), -L, L)`` as int32 (round half to even), plus the clip count."""
    limit = sum_limit(n_workers)
    scaled = np.ldexp(np.asarray(x, dtype=np.float64), frac_bits)
    nan = np.isnan(scaled)
    scaled = np.rint(np.where(nan, 0.0, scaled))
    over = np.abs(scaled) > limit
    clipped = int(np.count_nonzero(over)) + int(np.count_nonzero(nan))
    q = np.clip(scaled, -limit, limit).astype(np.int32)
    return Quantized(q, clipped)


def dequantize(q: np.ndarray, frac_bits: int) -> np.ndarray:
    """float32 value of fixed-point integers (e.g. an aggregated sum): q * 2^-f."""
    return np.ldexp(np.asarray(q, dtype=np.float64), -frac_bits).astype(np.float32)


__all__ = ["INT32_MAX", "Quantized", "choose_frac_bits", "dequantize", "quantize", "sum_limit"]
