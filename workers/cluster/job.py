"""The job file of a clustered-PS run (``job.json``): what every process of the run agrees on.

Written by the runner (:mod:`controller.experiment.methods.cluster`), read by :mod:`workers.cluster.node`;
:mod:`workers.cluster.protocol`'s state machines take it as their configuration.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from workers.common.data import Dataset
from workers.common.files import write_json_atomic
from workers.common.model import TrainConfig, load_data

__all__ = ["CLUSTER_TCP_PORT", "ClusterJob", "load_job_data", "save_job_data"]

CLUSTER_TCP_PORT = 50200  # worker endpoints; the coordinator / central PS listens on +1


@dataclass
class ClusterJob:
    """Everything the processes of one run agree on (``job.json``)."""

    rule: str
    train: TrainConfig
    workers: list[str]  # host of worker i, in profile order
    periods: int
    batches: int  # B: batches per exchange period
    reelect: int  # R: periods per election epoch
    profile: str  # node profile file
    seed: int = 0  # k-means and elections
    k: int | None = None  # None: by silhouette over k_range
    k_range: list[int] = field(default_factory=lambda: list(range(2, 9)))
    normalization: str = "mean"
    include_current: bool = True
    history_window: int | None = None
    step_s: float = 0.0  # nominal compute time of one batch with the whole machine
    addrs: list[tuple[str, int]] = field(default_factory=list)  # endpoints 0..N
    interfaces: list[str | None] = field(default_factory=list)  # uplink of worker i (measured)
    data_file: str | None = None  # the data set saved by the runner (see load_job_data)
    out_dir: str = "."
    start_file: str | None = None
    timeout_s: float = 300.0

    @property
    def n(self) -> int:
        return len(self.workers)

    def save(self, path: Path) -> None:
        write_json_atomic(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> ClusterJob:
        d = json.loads(Path(path).read_text())
        d["train"] = TrainConfig(**d["train"])
        d["addrs"] = [tuple(a) for a in d["addrs"]]
        return cls(**d)


def save_job_data(job: ClusterJob, path: Path) -> None:
    """Save the job's data set once, so that its N+1 processes start without importing
    scikit-learn (≈1.5 s of CPU each on our 2 shared cores); same arrays as load_data."""
    d = load_data(job.train)
    np.savez(path, x_train=d.x_train, y_train=d.y_train, x_test=d.x_test, y_test=d.y_test)
    job.data_file = str(path)


def load_job_data(job: ClusterJob) -> Dataset:
    """The job's data set: the runner's saved copy, or :func:`workers.common.model.load_data`."""
    if job.data_file is None:
        return load_data(job.train)
    with np.load(job.data_file) as f:
        return Dataset(f["x_train"], f["y_train"], f["x_test"], f["y_test"])
