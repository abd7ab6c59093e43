"""Job files for DDP ranks: the INA job file (``workers/ina/job.py``) with DDP's chunk capacity.

A DDP job is an ordinary INA job whose ``n_values`` is ``capacity * K`` (``codec.chunk_capacity``
of the model's parameters: one step = one round of that many chunks) and whose ``rounds`` is the
number of training steps; ``python -m workers.ina.ps_node`` serves it unchanged.  ``train`` is
not used by DDP ranks (the training script owns model and data) and only filled in.

The schedules come from the plan (``controller.plan.document.chunk_schedule(plan, capacity)``, or
``workers.ina.worker.ps_only_schedule`` for the PS-only mode): the caller passes them in, since
code under ``workers/`` never imports the controller (docs/design.md §1.1).
"""

from __future__ import annotations

from workers.common.model import TrainConfig
from workers.ina.constants import INA_UDP_PORT, K
from workers.ina.job import JobConfig, make_job_config
from workers.ina.worker import ps_only_schedule

Addr = tuple[str, int]


def ddp_job(*, job_id: int, mode: str, steps: int, worker_addrs: list[Addr], ps_addr: Addr,
            schedules: dict[str, list[tuple[int, int, int]]], capacity: int, frac_bits: int,
            out_dir: str, results_to: str = "network", window: int = 16,
            timeout: float = 0.05, round_timeout_s: float = 120.0) -> JobConfig:
    """Rank r is worker r (bit r of the INA bitmap) at ``worker_addrs[r]``; ``results_to``
    as :func:`workers.ina.job.make_job_config` (``"every_worker"`` on loopback)."""
    n = len(worker_addrs)
    for w in range(n):
        sched = schedules.get(str(w))
        if sched is None or sorted(c for c, _, _ in sched) != list(range(capacity)):
            raise ValueError(f"worker {w}: schedule must list chunks 0..{capacity - 1} once each")
    return make_job_config(job_id=job_id, mode=mode, rounds=steps,
                           train=TrainConfig(n_workers=n, rounds=steps),
                           worker_addrs=list(worker_addrs), ps_addr=ps_addr,
                           schedules=schedules, frac_bits=frac_bits, n_values=capacity * K,
                           out_dir=out_dir, results_to=results_to, window=window,
                           timeout=timeout, round_timeout_s=round_timeout_s,
                           extra={"method": "ddp", "capacity": capacity})


def loopback_job(*, n_ranks: int, steps: int, capacity: int, frac_bits: int, out_dir: str,
                 job_id: int = 1, base_port: int = INA_UDP_PORT) -> JobConfig:
    """Everything on 127.0.0.1 (PS on ``base_port``, rank r on ``base_port + 1 + r``), PS-only
    schedule, the PS sending each RESULT to every rank: for trying the hook on one machine."""
    ranks = [("127.0.0.1", base_port + 1 + r) for r in range(n_ranks)]
    sched = ps_only_schedule(capacity)
    return ddp_job(job_id=job_id, mode="ps_only", steps=steps, worker_addrs=ranks,
                   ps_addr=("127.0.0.1", base_port), results_to="every_worker",
                   schedules={str(r): sched for r in range(n_ranks)}, capacity=capacity,
                   frac_bits=frac_bits, out_dir=out_dir)
