"""The job file: everything a PS or worker process of one synchronization run needs.

The experiment runner writes one JSON job file per run; every process reads the same file,
so all replicas agree on model, data, quantization scale, schedules and addresses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.common.model import TrainConfig

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
    # Schedule changes while the job runs (the controller re-planned after a switch died):
    # a JSON list of {"from_round": R, "schedules": {...}} read by :class:`ScheduleBook`.
    schedule_file: str | None = None
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


class ScheduleBook:
    """A worker's schedule for each round: the job file's, until the controller publishes a
    new one in ``cfg.schedule_file`` (written atomically; a list of ``{"from_round": R,
    "schedules": {worker: [...]}}``, in order).  Round r uses the last entry with
    ``from_round <= r``.  The file is read again only when its mtime changes, so looking
    once per round costs one stat."""

    def __init__(self, cfg: JobConfig, worker_id: int) -> None:
        self.key = str(worker_id)
        self.base = cfg.schedules[self.key]
        self.path = Path(cfg.schedule_file) if cfg.schedule_file else None
        self.updates: list[tuple[int, list[tuple[int, int, int]]]] = []
        self._mtime: int | None = None

    def for_round(self, round_: int) -> tuple[list[tuple[int, int, int]], int]:
        """``(schedule, version)`` for ``round_``; version 0 is the job file's."""
        self._refresh()
        version, sched = 0, self.base
        for i, (start, s) in enumerate(self.updates, 1):
            if start <= round_:
                version, sched = i, s
        return sched, version

    def _refresh(self) -> None:
        if self.path is None:
            return
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self._mtime:
            return
        data = json.loads(self.path.read_text())
        self.updates = [(int(u["from_round"]), [tuple(e) for e in u["schedules"][self.key]])
                        for u in data]
        self._mtime = mtime
