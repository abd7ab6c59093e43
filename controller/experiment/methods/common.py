"""Options, option parsing and statistics that several methods' runners share (async and NDN)."""

from __future__ import annotations

import argparse

import numpy as np

from controller.errors import ExperimentError

__all__ = ["ASYNC_SGD_DEFAULTS", "add_async_sgd_options", "check_async_sgd", "parse_slow",
           "staleness_histogram"]

# The asynchronous PS's update rule (docs/design.md §5): the same options and defaults for
# --method async and --method ndn --ndn-mode async.
ASYNC_SGD_DEFAULTS = {"lr": 0.2, "window": 4, "soft_sync": 1}


def add_async_sgd_options(g: argparse._ArgumentGroup, where: str = "") -> None:
    """``--async-lr``, ``--staleness-window``, ``--soft-sync``: the asynchronous PS's step;
    ``where`` says when they apply (e.g. ``"async mode: "``)."""
    d = ASYNC_SGD_DEFAULTS
    g.add_argument("--staleness-window", type=int, default=d["window"], metavar="N",
                   help=f"{where}N: kappa = mean of this push's sigma and the previous N-1 "
                        f"(default {d['window']})")
    g.add_argument("--soft-sync", type=int, default=d["soft_sync"], metavar="C",
                   help=f"{where}C: pushes per PS update (default {d['soft_sync']})")
    g.add_argument("--async-lr", type=float, default=d["lr"], metavar="ETA",
                   help=f"{where}PS learning rate eta (plain SGD; default {d['lr']:g})")


def check_async_sgd(args: argparse.Namespace) -> None:
    """The asynchronous PS's step options, one ExperimentError naming the option."""
    if not (np.isfinite(args.async_lr) and args.async_lr > 0):
        raise ExperimentError(f"--async-lr must be > 0, got {args.async_lr}")
    for what, v in (("--staleness-window", args.staleness_window),
                    ("--soft-sync", args.soft_sync)):
        if v < 1:
            raise ExperimentError(f"{what} must be >= 1, got {v}")


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
