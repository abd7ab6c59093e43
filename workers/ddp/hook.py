"""The DDP communication hook: gradient buckets summed by INSync's in-network aggregation.

    from workers.ddp.hook import InaHookState, ina_hook
    state = InaHookState.from_job(JobConfig.load(path), rank)
    ddp_model.register_comm_hook(state, ina_hook)

For every bucket DDP hands over (``torch.distributed.GradBucket``), :func:`ina_hook` takes the
flat gradient, places it in the step's chunk ids (``workers/ddp/codec.py``), quantizes it with
the job's scale, gives it to the transport (``workers/ddp/transport.py``: INA packets, RESULTs,
retransmissions in a background thread) and returns at once with a ``torch.futures.Future``;
the transport's thread completes it with the dequantized average, which DDP copies into the
parameters' ``.grad``.  Rank r is the job's worker ``worker_ids[r]`` (docs/ddp.md §2).

``record=True`` keeps every bucket's quantized values and int32 sum so that exactness (the sum
equals the exact sum of all ranks' quantized buckets) can be checked afterwards from files
(:meth:`InaHookState.save`), as the runner does for the numpy workers.
"""

# No ``from __future__ import annotations`` here: DDP's register_comm_hook inspects the hook's
# annotations at run time and rejects the string "dist.GradBucket".
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from workers.ddp.codec import StepLayout, bucket_schedule, decode_mean, encode_bucket
from workers.ddp.exchange import SenderParams
from workers.ddp.transport import Transport, udp_transport
from workers.ina.constants import K as DEFAULT_K
from workers.ina.control_io import ControlReader
from workers.ina.job import JobConfig
from workers.ina.worker import n_chunks_for

ScheduleFor = Callable[[int], Sequence[tuple[int, int, int]]]


@dataclass
class BucketRecord:
    step: int
    index: int
    q: np.ndarray  # this rank's quantized bucket (padding trimmed)
    total: np.ndarray | None = None  # int32 sum over all ranks (set when the RESULTs are in)
    clipped: int = 0


@dataclass
class InaHookState:
    """What the hook needs across calls.  ``schedule_for(step)`` gives this worker's
    ``(chunk_id, agg_id, fan_in)`` list covering ``0 .. capacity-1`` (the job's schedule)."""

    transport: Transport
    worker_id: int
    n_workers: int
    frac_bits: int
    capacity: int
    schedule_for: ScheduleFor
    k: int = DEFAULT_K
    record: bool = False
    step: int = 0
    clipped: int = 0
    records: list[BucketRecord] = field(default_factory=list)
    _layout: StepLayout = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._layout = StepLayout(self.capacity, self.k)

    @classmethod
    def from_job(cls, cfg: JobConfig, rank: int, *, record: bool = False,
                 transport: Transport | None = None) -> "InaHookState":
        """Rank ``rank`` as worker ``cfg.worker_ids[rank]``; by default a UDP transport bound
        to that worker's address in the job file, sending to the job's PS address."""
        if not 0 <= rank < len(cfg.worker_ids):
            raise ValueError(f"rank {rank}: the job has {len(cfg.worker_ids)} workers")
        worker_id = cfg.worker_ids[rank]
        if transport is None:
            params = SenderParams(cfg.job_id, worker_id, DEFAULT_K, cfg.window, cfg.timeout,
                                  cfg.max_timeout, cfg.direct_after)
            transport = udp_transport(params, tuple(cfg.worker_addrs[rank]), tuple(cfg.ps_addr),
                                      stall_timeout_s=cfg.round_timeout_s)
        control = ControlReader(cfg)

        def schedule_for(step: int) -> list[tuple[int, int, int]]:
            control.refresh()  # a re-planned schedule takes effect from a step's start
            return control.at(step).schedule(worker_id)
        return cls(transport=transport, worker_id=worker_id, n_workers=len(cfg.worker_ids),
                   frac_bits=cfg.frac_bits, capacity=n_chunks_for(cfg.n_values, DEFAULT_K),
                   schedule_for=schedule_for, record=record)

    def close(self) -> None:
        self.transport.close()

    def save(self, path: str | Path) -> None:
        """Recorded buckets as ``.npz``: ``s<step>_b<index>_q`` and ``..._sum`` arrays."""
        arrays = {}
        for r in self.records:
            arrays[f"s{r.step}_b{r.index}_q"] = r.q
            if r.total is not None:
                arrays[f"s{r.step}_b{r.index}_sum"] = r.total
        np.savez(Path(path), **arrays)


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    # float16/bfloat16 have no exact numpy twin on every build: widen first (exact)
    t = t.detach()
    if t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float32)
    return t.cpu().numpy().reshape(-1)


def ina_hook(state: InaHookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """``register_comm_hook`` hook: average the bucket over all ranks through INA."""
    buf = bucket.buffer()
    flat = _as_numpy(buf)
    with state._lock:  # DDP calls hooks one at a time, but keep step/layout consistent anyway
        step = state.step
        rng = state._layout.place(bucket.index(), flat.size, bucket.is_last())
        if bucket.is_last():
            state.step += 1
    enc = encode_bucket(flat, rng, state.frac_bits, state.n_workers, state.k)
    state.clipped += enc.clipped
    rec = None
    if state.record:
        rec = BucketRecord(step, bucket.index(), enc.values[: rng.n_values].copy(),
                           clipped=enc.clipped)
        state.records.append(rec)
    sched = bucket_schedule(state.schedule_for(step), rng)
    sent = state.transport.exchange(step, rng, enc.values, sched)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    dtype, device, shape = buf.dtype, buf.device, buf.shape

    def finish(done: Future[np.ndarray]) -> None:
        try:
            total = done.result()
            if rec is not None:
                rec.total = total[: rng.n_values].copy()
            mean = decode_mean(total, rng.n_values, state.frac_bits, state.n_workers)
            fut.set_result(torch.from_numpy(mean).to(device=device, dtype=dtype).view(shape))
        except BaseException as exc:  # DDP re-raises it from backward()
            fut.set_exception(exc)

    sent.add_done_callback(finish)
    return fut


def register(model: torch.nn.parallel.DistributedDataParallel, state: InaHookState) -> None:
    """``model.register_comm_hook(state, ina_hook)``, with a check that the process group has
    as many ranks as the job has workers (a mismatch would hang at the first bucket)."""
    world = dist.get_world_size()
    if world != state.n_workers:
        raise ValueError(f"world size {world} but the INA job has {state.n_workers} workers")
    model.register_comm_hook(state, ina_hook)


def start_rank(model: torch.nn.parallel.DistributedDataParallel, cfg: JobConfig | None,
               rank: int, record: str | None = None,
               start_file: str | None = None) -> InaHookState | None:
    """What a rank does once its model is wrapped, before its first step: with an INA job
    (``cfg``) register :func:`ina_hook`; print ``rank R ready`` (a launcher that starts
    several hosts' ranks together waits for that line from every rank, then creates
    ``start_file`` so that all begin at once); wait for ``start_file``.  Returns the hook's
    state (None without a job: plain gloo)."""
    state = None
    if cfg is not None:
        state = InaHookState.from_job(cfg, rank, record=record)
        try:
            register(model, state)
        except BaseException:
            state.close()  # the caller never sees this state, so it cannot close it
            raise
    print(f"rank {rank} ready", flush=True)
    if start_file:
        while not Path(start_file).exists():
            time.sleep(0.01)
    return state
