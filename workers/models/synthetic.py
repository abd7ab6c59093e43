"""The gradients a worker of a real model's scaled emulation sends: synthetic, seeded, the
size of the scaled model (:mod:`workers.models.scaling`), after waiting the emulated
compute time.

``SyntheticReplica`` stands where :class:`workers.common.model.Replica` stands in a worker
(:func:`make_replica` picks one by the job's model): ``gradient(r)`` waits
``TrainConfig.compute_s`` seconds, then returns worker ``w``'s round-``r`` gradient, float32
values drawn from N(0, 0.01²) by a generator seeded with ``(seed, w, r)`` -- the same on
every run, different per worker and round; ``apply`` keeps the parameters' SGD step (so a
worker does the work a real one does with the sum); there is no loss or accuracy (NaN).
Exactness is checked as for every INA run: each applied sum against the exact sum of the
workers' quantized gradients.
"""

from __future__ import annotations

import time

import numpy as np

from workers.common.model import Replica, TrainConfig
from workers.models.shapes import WORKLOADS

__all__ = ["SyntheticReplica", "make_replica", "synthetic_gradient", "is_workload"]

GRAD_STD = 0.01


def is_workload(model: str) -> bool:
    """Is ``model`` a real model emulated with synthetic gradients?"""
    return model in WORKLOADS


def synthetic_gradient(n_values: int, seed: int, worker: int, round_: int) -> np.ndarray:
    """Worker ``worker``'s float32 gradient of round ``round_`` (module docstring)."""
    rng = np.random.default_rng([seed, worker, round_])
    return (rng.standard_normal(n_values, dtype=np.float32) * np.float32(GRAD_STD))


class SyntheticReplica:
    """A real model's worker in the scaled emulation (module docstring)."""

    def __init__(self, cfg: TrainConfig, worker_id: int) -> None:
        from workers.models.scaling import scale_workload

        if not 0 <= worker_id < cfg.n_workers:
            raise ValueError(f"worker id {worker_id} not in [0, {cfg.n_workers})")
        self.cfg, self.worker_id = cfg, worker_id
        # the link rate does not change the sizes; the compute time is the job file's
        self.n_values = scale_workload(cfg.model, cfg.scale, compute_s=0.0).n_values
        self.params = np.zeros(self.n_values, dtype=np.float32)

    def gradient(self, round_: int) -> tuple[float, np.ndarray]:
        if self.cfg.compute_s > 0:
            time.sleep(self.cfg.compute_s)
        return float("nan"), synthetic_gradient(self.n_values, self.cfg.seed, self.worker_id,
                                                round_)

    def apply(self, grad: np.ndarray) -> None:
        self.params -= np.float32(self.cfg.lr) * grad.astype(np.float32, copy=False)

    def test_accuracy(self) -> float:
        return float("nan")


def make_replica(cfg: TrainConfig, worker_id: int) -> Replica | SyntheticReplica:
    """The replica a worker of ``cfg`` holds: a real model's synthetic one, or the trained
    numpy model (:class:`workers.common.model.Replica`)."""
    if is_workload(cfg.model):
        return SyntheticReplica(cfg, worker_id)
    return Replica(cfg, worker_id)
