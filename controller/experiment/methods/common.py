"""Option parsing and statistics that several methods' runners share (async and NDN)."""

from __future__ import annotations

import numpy as np

from controller.errors import ExperimentError

__all__ = ["parse_slow", "staleness_histogram"]


def parse_slow(spec: str, learners: list[str], option: str = "--async-slow") -> list[float]:
    """Slow-down factor per learner from ``HOST:F,...`` or ``KxF`` (the last K learners);
    mistakes name ``option``."""
    factors = [1.0] * len(learners)
    spec = spec.strip()
    if not spec:
        return factors

    def factor(text: str) -> float:
        try:
            f = float(text)
        except ValueError:
            raise ExperimentError(f"{option} {spec!r}: {text!r} is not a number") from None
        if not (np.isfinite(f) and f >= 1.0):
            raise ExperimentError(f"{option} {spec!r}: factors must be >= 1, got {text}")
        return f

    if ":" not in spec and "x" in spec:
        k_text, _, f_text = spec.partition("x")
        if not k_text.strip().isdigit():
            raise ExperimentError(f"{option} {spec!r}: expected KxFACTOR or HOST:FACTOR,...")
        k = int(k_text)
        if k > len(learners):
            raise ExperimentError(f"{option} {spec!r}: only {len(learners)} learners")
        f = factor(f_text)
        for i in range(len(learners) - k, len(learners)):
            factors[i] = f
        return factors
    for item in spec.split(","):
        host, sep, f_text = item.strip().partition(":")
        if not sep:
            raise ExperimentError(f"{option} {spec!r}: expected KxFACTOR or HOST:FACTOR,...")
        if host not in learners:
            raise ExperimentError(f"{option} {spec!r}: {host} is not a learner "
                                  f"({', '.join(learners)})")
        factors[learners.index(host)] = factor(f_text)
    return factors


def staleness_histogram(sigmas: list[int]) -> dict[str, int]:
    """{sigma: count} with string keys (JSON), in increasing sigma."""
    values, counts = np.unique(np.asarray(sigmas, dtype=int), return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)}
