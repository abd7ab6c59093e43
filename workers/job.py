"""The job file: everything a PS or worker process of one synchronization run needs.

The experiment runner writes one JSON job file per run; every process reads the same file,
so all replicas agree on model, data, quantization scale, schedules and addresses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.model import TrainConfig

MODES = ("ina", "tor_only", "ps_only")


@dataclass
class JobConfig:
    """One synchronous training job.

    ``schedules[str(worker_id)]`` is that worker's ``[(chunk_id, agg_id, fan_in), ...]``.
    ``result_dests``: where the PS sends each RESULT -- one address toward its ToR in a
    network (the switches multicast it), or every worker's address on loopback.
    """

    job_id: int
    mode: str
    rounds: int
    train: TrainConfig
    worker_ids: list[int]
    worker_addrs: list[tuple[str, int]]
    ps_addr: tuple[str, int]
    result_dests: list[tuple[str, int]]
    schedules: dict[str, list[tuple[int, int, int]]]
    frac_bits: int
    n_values: int
    out_dir: str
    window: int = 16
    timeout: float = 0.05
    max_timeout: float = 1.0
    direct_after: int | None = 3
    round_timeout_s: float = 120.0
    # Start barrier: workers print 'ready' and wait for this file before round 0, so that
    # start-up skew (imports, data loading) never looks like loss.  None: start at once.
    start_file: str | None = None
    extra: dict = field(default_factory=dict)

    def save(self, path: Path) -> None:
        data = asdict(self)
        path.write_text(json.dumps(data, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> JobConfig:
        data = json.loads(Path(path).read_text())
        data["train"] = TrainConfig(**data["train"])
        data["worker_addrs"] = [tuple(a) for a in data["worker_addrs"]]
        data["ps_addr"] = tuple(data["ps_addr"])
        data["result_dests"] = [tuple(a) for a in data["result_dests"]]
        data["schedules"] = {w: [tuple(e) for e in s] for w, s in data["schedules"].items()}
        return cls(**data)
