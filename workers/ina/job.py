"""The job file: everything a PS or worker process of one synchronization run needs.

The experiment runner writes one JSON job file per run; every process reads the same file,
so all replicas agree on model, data, quantization scale, schedules and addresses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.common.model import TrainConfig
from workers.ina.cc import DEFAULT_CC, DEFAULT_WINDOW
from workers.ina.constants import INA_REPLY_PORT
from workers.ina.tree import Tree

MODES = ("ina", "tor_only", "ps_only")


@dataclass
class JobConfig:
    """One synchronous training job.

    ``schedules[str(worker_id)]`` is that worker's ``[(chunk_id, agg_id, fan_in), ...]``.
    ``result_dests``: where the PS sends each RESULT -- one address toward its ToR in a
    network (the switches multicast it), or every worker's address on loopback.

    ``control_file``: the job's control record (docs/design.md §9, :mod:`workers.ina.control`)
    while the job runs::

        {"version": N, "job_id": J,
         "changes": [{"version": 1, "kind": "schedules" | "members", "from_round": R,
                      "members": [ids] (kind "members" only),
                      "schedules": {worker: [[chunk, agg_id, fan_in], ...]},
                      "cause": {...}}, ...]}

    Round r applies, in version order, every change with ``from_round <= r`` to the members
    and schedules above.  The PS is its only writer; the controller asks for changes on the
    FIFO ``control.requests`` beside it.
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
    # chunks in flight per worker (``fixed``'s window; the adaptive policies' ``window``): the
    # controller's choice, the user's --window/--agg-window or workers.ina.cc.default_window
    window: int = DEFAULT_WINDOW
    timeout: float = 0.05
    # the cap of a worker's timeouts; the measured round trip lifts it (never a cap below
    # srtt), the PS's worker_timeout_s lowers it (workers.ina.driver.timeout_cap).  1 s:
    # under loss a larger cap let the variance term hold lost chunks for seconds (k=8, 32
    # workers, 1 % loss: ratio 0.127 with 1 s, 0.036 with 5 s; docs/results.md)
    max_timeout: float = 1.0
    # congestion control (workers.ina.cc.POLICIES); the adaptive policies' first window is
    # rate_fps (the plan's predicted frames per second of one worker) times base_rtt_s (the
    # unloaded round trip of the longest worker-PS path); None: ``window``
    cc: str = DEFAULT_CC
    # the UDP port each worker also receives on: the PS's answers to one worker's late GRAD
    # (workers.ina.driver.PsDriver.reply_dest); not INA's port, so switches route them as
    # plain IPv4.  None: no such path (the answers are multicast with the RESULTs)
    reply_port: int | None = None
    rate_fps: float | None = None
    base_rtt_s: float | None = None
    # a worker's timeouts until it has measured one (workers.ina.worker.RttEstimator's
    # ``start``): the plan's time for a first window (workers.ina.cc.first_timeout), at least
    # ``timeout``; None: ``timeout``
    first_timeout: float | None = None
    direct_after: int | None = 3
    round_timeout_s: float = 120.0
    # Start barrier: workers print 'ready' and wait for this file before round 0, so that
    # start-up skew (imports, data loading) never looks like loss.  None: start at once.
    start_file: str | None = None
    # Run-time control (docs/design.md §9, workers.ina.control): the job's control record,
    # one versioned JSON file of changes to the members and schedules, each from the round it
    # takes effect in.  The PS alone writes it (it alone knows the lowest round it has not
    # completed, where a member change must take effect); the workers read it when it
    # changes (workers.ina.control_io.ControlReader); the controller sends its requests to
    # the PS over the FIFO beside it (control_io.request_path).  None: the job file's
    # members and schedules hold in every round.
    control_file: str | None = None
    # The PS reports a member it has not heard from for this long while the lowest
    # incomplete round still lacks that member's contribution (0: never).
    worker_timeout_s: float = 10.0
    # A hierarchical job (docs/protocol.md §5.1): its aggregation tree, the numbering of
    # every switch's children the controller wrote into the switches' ina_child tables
    # (workers.ina.tree.Tree.to_json).  None: a flat job (bit i = worker i, at most 64).
    tree: dict | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the cap of a retransmission timeout is never below the first one (a --timeout of
        # 2 s for a 64-worker round whose workers start up to a second apart)
        self.max_timeout = max(self.max_timeout, self.timeout, self.first_timeout or 0.0)

    def aggregation_tree(self) -> Tree | None:
        """The job's :class:`Tree` (None: a flat job)."""
        return None if self.tree is None else Tree.from_json(self.tree)

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
    timeouts, start and control files, ``extra``)."""
    if results_to not in RESULTS_TO:
        raise ValueError(f"results_to must be one of {RESULTS_TO}, got {results_to!r}")
    if not worker_addrs:
        raise ValueError("a job needs at least one worker")
    dests = [worker_addrs[0]] if results_to == "network" else list(worker_addrs)
    if results_to == "network":  # one worker per address: its own reply port
        options.setdefault("reply_port", INA_REPLY_PORT)
    return JobConfig(job_id=job_id, mode=mode, rounds=rounds, train=train,
                     worker_ids=list(range(len(worker_addrs))),
                     worker_addrs=list(worker_addrs), ps_addr=ps_addr, result_dests=dests,
                     schedules=schedules, frac_bits=frac_bits, n_values=n_values,
                     out_dir=out_dir, **options)  # type: ignore[arg-type]
