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
    # A worker that died (docs/design.md §9): the controller appends removal requests to
    # ``removal_file`` ({"removed": [ids], "schedules": {...}}); the PS, which alone knows the
    # lowest round it has not completed, picks that round as the one the change takes
    # effect in and publishes it in ``members_file`` (:class:`MemberBook`), which the PS and
    # the workers share.  None: the member set never changes.
    removal_file: str | None = None
    members_file: str | None = None
    # The PS reports a member it has not heard from for this long while the lowest
    # incomplete round still lacks that member's contribution (0: never).
    worker_timeout_s: float = 10.0
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


RESULTS_TO = ("network", "every_worker")


def make_job_config(*, job_id: int, mode: str, rounds: int, train: TrainConfig,
                    worker_addrs: list[tuple[str, int]], ps_addr: tuple[str, int],
                    schedules: dict[str, list[tuple[int, int, int]]], frac_bits: int,
                    n_values: int, out_dir: str, results_to: str = "network",
                    **options: object) -> JobConfig:
    """The one constructor of an INA job file: worker ``i`` is ``worker_addrs[i]`` (bit ``i``
    of the bitmap), and the RESULT addressing follows from where the job runs.

    ``results_to="network"``: the PS sends each RESULT once, addressed to worker 0; the
    switches multicast it down the job's RESULT tree to every member and rewrite the
    addresses per port (docs/protocol.md §3), so one copy leaves the PS whatever the job's
    size.  ``"every_worker"``: no switch multicasts (loopback), so the PS sends one copy to
    every worker's address.  ``options``: the other :class:`JobConfig` fields (window,
    timeouts, start/schedule/removal/members files, ``extra``)."""
    if results_to not in RESULTS_TO:
        raise ValueError(f"results_to must be one of {RESULTS_TO}, got {results_to!r}")
    if not worker_addrs:
        raise ValueError("a job needs at least one worker")
    dests = [worker_addrs[0]] if results_to == "network" else list(worker_addrs)
    return JobConfig(job_id=job_id, mode=mode, rounds=rounds, train=train,
                     worker_ids=list(range(len(worker_addrs))),
                     worker_addrs=list(worker_addrs), ps_addr=ps_addr, result_dests=dests,
                     schedules=schedules, frac_bits=frac_bits, n_values=n_values,
                     out_dir=out_dir, **options)  # type: ignore[arg-type]


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


def read_json_list(path: Path | None, mtime: int | None) -> tuple[list | None, int | None]:
    """The JSON list in ``path`` if its mtime differs from ``mtime`` (else None), and the
    mtime; a missing file is an empty list."""
    if path is None:
        return None, mtime
    try:
        now = path.stat().st_mtime_ns
    except FileNotFoundError:
        return ([] if mtime is not None else None), None
    if now == mtime:
        return None, mtime
    return json.loads(path.read_text()), now


class MemberBook:
    """The job's member set for each round (docs/design.md §9, a worker that died): the job
    file's ``worker_ids`` until the PS publishes a change in ``cfg.members_file`` (a list of
    ``{"from_round": E, "workers": [ids], "schedules": {worker: [...]}}``, in order, written
    atomically).  Round r uses the last entry with ``from_round <= r``.  Like
    :class:`ScheduleBook` it re-reads the file only when its mtime changes."""

    def __init__(self, cfg: JobConfig) -> None:
        self.base = list(cfg.worker_ids)
        self.path = Path(cfg.members_file) if cfg.members_file else None
        self.entries: list[dict] = []
        self._mtime: int | None = None

    def refresh(self) -> bool:
        """Re-read the file if it changed; True if it did."""
        data, self._mtime = read_json_list(self.path, self._mtime)
        if data is None:
            return False
        self.entries = data
        return True

    def entry_for(self, round_: int) -> dict | None:
        """The change in force in ``round_`` (None: the job file's member set)."""
        found = None
        for e in self.entries:
            if int(e["from_round"]) <= round_:
                found = e
        return found

    def members(self, round_: int) -> list[int]:
        e = self.entry_for(round_)
        return sorted(int(w) for w in e["workers"]) if e is not None else self.base

    def schedule(self, round_: int, worker_id: int) -> list[tuple[int, int, int]] | None:
        """The schedule the change gives ``worker_id`` (None: no change in force, or none
        given)."""
        e = self.entry_for(round_)
        if e is None or str(worker_id) not in e.get("schedules", {}):
            return None
        return [tuple(x) for x in e["schedules"][str(worker_id)]]
