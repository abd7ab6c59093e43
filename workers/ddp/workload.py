#!/usr/bin/env python3
"""A real model's scaled gradient through PyTorch DDP (docs/models.md §4): what
``run --method ddp --model resnet50|vgg16|bert-base --scale S`` runs under torchrun in place
of ``examples/ddp_train.py``, with the same protocol (``--print-capacity``, ``--steps``,
``--seed``, ``--out``, ``--record``, ``--start-file``, ``--gloo-ifname``, ``--ina-job``,
``rank R ready``, rank 0's ``step I/N loss L T ms`` lines, ``rank<r>.json``/``.npz``).

The module holds one parameter per tensor of the scaled model (:mod:`workers.models.scaling`:
the real model's tensors in registration order, each with its share of ``ceil(N/S)``
elements), so DDP builds its buckets from them as from the real model, with
``bucket_cap_mb`` and the first bucket's 1 MiB divided by S.  Each step waits the emulated
compute time, then its "loss" is ``sum_i <p_i, g_i>`` with ``g`` this rank's synthetic,
seeded gradient of that step (:func:`workers.models.synthetic.synthetic_gradient`), so
backward leaves exactly ``g_i`` in every ``p_i.grad`` -- later tensors first, as a real
backward pass -- and DDP reduces them bucket by bucket (with ``--ina-job``: through the
network, :mod:`workers.ddp.hook`; without: gloo's all-reduce).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from workers.common.exit import exit_now
from workers.ina.constants import K
from workers.models.buckets import BUCKET_CAP_BYTES, FIRST_BUCKET_BYTES, MIB
from workers.models.scaling import DEFAULT_SCALE, scale_workload
from workers.models.shapes import WORKLOADS
from workers.models.synthetic import synthetic_gradient

__all__ = ["capacity", "main"]


def capacity(model: str, scale: int) -> tuple[int, int]:
    """``(chunk ids per step, values)``: the scaled gradient's chunks, plus one per bucket
    for the padding of each bucket's last chunk (a step before DDP rebuilds its buckets
    sends one bucket, every later step the scaled model's buckets)."""
    sw = scale_workload(model, scale, compute_s=0.0)
    return -(-sw.n_values // K) + len(sw.buckets()), sw.n_values


def _die_with_parent() -> None:
    """End this rank when its torchrun agent dies (as ``examples/ddp_train.py``)."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def train(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from workers.ddp.hook import start_rank

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    sw = scale_workload(args.model, args.scale, compute_s=0.0)
    cfg = state = None
    steps = args.steps
    if args.ina_job:
        from workers.ina.job import JobConfig

        cfg = JobConfig.load(Path(args.ina_job))
        steps = cfg.rounds
        if len(cfg.worker_ids) != world:
            print(f"error: WORLD_SIZE {world} but {args.ina_job} has {len(cfg.worker_ids)} "
                  "workers", file=sys.stderr)
            return 2
    if args.gloo_ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = args.gloo_ifname
    _die_with_parent()
    dist.init_process_group("gloo")
    try:
        class Scaled(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.tensors = nn.ParameterList(nn.Parameter(torch.zeros(n)) for n in sw.numels)

            def forward(self, grads: list[torch.Tensor]) -> torch.Tensor:
                loss = torch.zeros(())
                for p, g in zip(self.tensors, grads, strict=True):
                    loss = loss + (p * g).sum()
                return loss

        model = Scaled()
        ddp = DDP(model, bucket_cap_mb=BUCKET_CAP_BYTES / sw.scale / MIB,
                  bucket_cap_mb_list=[FIRST_BUCKET_BYTES / sw.scale / MIB,
                                      BUCKET_CAP_BYTES / sw.scale / MIB])
        state = start_rank(ddp, cfg, rank, args.record, args.start_file)
        mode = cfg.mode if cfg is not None else "gloo"
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        cuts = np.cumsum(sw.numels)[:-1]
        log: list[dict] = []
        for step in range(steps):
            g = synthetic_gradient(sw.n_values, args.seed, rank, step)
            grads = [torch.from_numpy(x) for x in np.split(g, cuts)]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = ddp(grads)
            if args.compute_s > 0:  # the real step's compute, emulated (docs/models.md)
                time.sleep(args.compute_s)
            loss.backward()  # the buckets are reduced in here
            opt.step()
            rec = {"step": step, "loss": float("nan"), "time_s": time.perf_counter() - t0}
            log.append(rec)
            if rank == 0:
                print(f"step {step + 1}/{steps} loss nan {rec['time_s'] * 1e3:.1f} ms",
                      flush=True)
        report = {"rank": rank, "world_size": world, "mode": mode, "steps": log,
                  "final_accuracy": None, "model": sw.model, "scale": sw.scale,
                  "values": sw.n_values,
                  "time_per_step_s": float(np.mean([r["time_s"] for r in log])) if log else None}
        if state is not None:
            st = state.transport.stats
            report.update(worker_id=state.worker_id, clipped=state.clipped,
                          retransmits=st.retransmits, direct=st.direct, buckets=st.buckets)
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"rank{rank}.json").write_text(json.dumps(report, indent=1) + "\n")
            if state is not None and args.record:
                state.save(out / f"rank{rank}.npz")
        # every rank done before any tears gloo down: a rank that exits while another is
        # still in a collective can abort in gloo's threads (SIGABRT, "terminate called
        # without an active exception"); only on success, a failed rank would block here
        dist.barrier()
    finally:
        if state is not None:
            state.close()
        dist.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(WORKLOADS), required=True)
    p.add_argument("--scale", type=int, default=DEFAULT_SCALE)
    p.add_argument("--compute-s", type=float, default=0.0,
                   help="seconds each step computes (the emulated compute time)")
    p.add_argument("--ina-job", help="INA job file: sum gradients in the network (else gloo)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=0, help="accepted; nothing to evaluate")
    p.add_argument("--record", action="store_true")
    p.add_argument("--out")
    p.add_argument("--start-file", metavar="PATH")
    p.add_argument("--gloo-ifname", metavar="IFACE")
    p.add_argument("--print-capacity", action="store_true")
    args = p.parse_args(argv)
    if args.scale < 1:
        print(f"error: --scale must be >= 1, got {args.scale}", file=sys.stderr)
        return 2
    if args.print_capacity:
        cap, n = capacity(args.model, args.scale)
        print(f"{cap} chunks per step ({cap * K} values; parameters {n})")
        return 0
    return train(args)


if __name__ == "__main__":
    # no interpreter teardown: objects still holding gloo (DDP's reducer) destroyed there
    # can abort the rank (SIGABRT, "terminate called without an active exception")
    exit_now(main())
