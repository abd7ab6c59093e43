"""The job file of an asynchronous-PS run (``job.json``): what the PS and the workers agree on.

Written by the runner, read by :mod:`workers.async_ps.ps_node` and
:mod:`workers.async_ps.worker_node`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.async_ps.wire import ASYNC_TCP_PORT
from workers.common.files import write_json_atomic
from workers.common.model import TrainConfig

__all__ = ["AsyncJob"]


@dataclass
class AsyncJob:
    """Everything the PS and the workers of one async run agree on (``job.json``)."""

    policy: str
    train: TrainConfig
    n_workers: int
    budget: int  # pushes accepted in total
    lr: float
    soft_sync: int = 1
    window: int = 1
    kappa_mode: str = "ps"
    ps_addr: tuple[str, int] = ("127.0.0.1", ASYNC_TCP_PORT)
    slowdown: list[float] = field(default_factory=list)  # per worker, >= 1
    step_s: float = 0.05  # nominal compute time of one gradient (before the slowdown)
    jitter: float = 0.0  # relative, uniform +-jitter on every step time
    eval_every: int = 20  # updates between evaluations
    out_dir: str = "."
    start_file: str | None = None
    timeout_s: float = 300.0

    def save(self, path: Path) -> None:
        write_json_atomic(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> AsyncJob:
        d = json.loads(Path(path).read_text())
        d["train"] = TrainConfig(**d["train"])
        d["ps_addr"] = tuple(d["ps_addr"])
        return cls(**d)
