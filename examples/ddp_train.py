#!/usr/bin/env python3
"""Train a small CNN on scikit-learn's digits with PyTorch DDP, gradients summed in the network.

    torchrun --nnodes N --nproc-per-node 1 --node-rank R --master-addr A --master-port P \\
        examples/ddp_train.py --ina-job job.json --out results/ddp     # INA hook
    torchrun ... examples/ddp_train.py --out results/ddp-gloo           # DDP's gloo all-reduce

Rank r is worker r of the INA job (it binds the job's ``worker_addrs[r]``); the ranks
rendezvous through torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) with the
gloo backend, which carries everything but the hooked gradient all-reduce.  Without
``--ina-job`` DDP sums the gradients with gloo (the baseline).  docs/ddp.md has the whole
procedure (plan, deploy, PS, one torchrun per host) and a loopback try on one machine.

Helpers that need no torchrun:
    ddp_train.py --print-capacity                        chunks per step the job must have
    ddp_train.py --write-job job.json --loopback 2       a job on 127.0.0.1 (PS-only)
    ddp_train.py --write-job job.json --plan PLAN --network NET [--mode ina|ps_only]

Output (``--out DIR``): ``rank<r>.json`` per rank (per-step loss and time, test accuracy,
retransmissions) and with ``--record`` ``rank<r>.npz`` (every bucket's quantized values and
int32 sum, to check exactness: the sums equal the exact sum of all ranks' buckets).
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

BOUND = 8.0  # |gradient| bound the fixed-point scale is chosen for (as the INA method's)


def build_model():
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 4x4 -> 2x2
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10))


def param_numels() -> list[int]:
    return [p.numel() for p in build_model().parameters()]


def load_data(seed: int):
    """Digits (bundled with scikit-learn: no download), pixels scaled to [0, 1], the same
    stratified 80/20 split on every rank."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None, :, :]
    return train_test_split(x, d.target.astype(np.int64), test_size=0.2, random_state=seed,
                            stratify=d.target)


# -- job files (no torch.distributed) ------------------------------------------------------

def capacity() -> int:
    from workers.ddp.codec import chunk_capacity

    return chunk_capacity(param_numels())


def write_job(args: argparse.Namespace) -> int:
    from workers.common.quantize import choose_frac_bits
    from workers.ddp.job import ddp_job, loopback_job
    from workers.ina.constants import INA_UDP_PORT

    cap = capacity()
    out_dir = str(Path(args.out or "results/ddp").resolve())
    if args.loopback:
        cfg = loopback_job(n_ranks=args.loopback, steps=args.steps, capacity=cap,
                           frac_bits=choose_frac_bits(BOUND, args.loopback), out_dir=out_dir,
                           base_port=args.port)
    else:
        if not (args.plan and args.network):
            print("error: --write-job needs --loopback N, or --plan and --network",
                  file=sys.stderr)
            return 2
        from controller.cli.network import load_network
        from controller.plan.document import chunk_schedule, load_plan
        from workers.ina.worker import ps_only_schedule

        plan, net = load_plan(args.plan), load_network(Path(args.network))
        workers = list(plan.job.workers)
        ip = {h: d["ip"] for h, d in net["hosts"].items()}
        if args.mode == "ina":
            by_name = chunk_schedule(plan, cap)
            schedules = {str(i): by_name[w] for i, w in enumerate(workers)}
        else:
            schedules = {str(i): ps_only_schedule(cap) for i in range(len(workers))}
        cfg = ddp_job(job_id=args.job_id, mode=args.mode, steps=args.steps,
                      worker_addrs=[(ip[w], INA_UDP_PORT) for w in workers],
                      ps_addr=(ip[plan.job.ps], INA_UDP_PORT),
                      schedules=schedules,
                      capacity=cap, frac_bits=choose_frac_bits(BOUND, len(workers)),
                      out_dir=out_dir)
        print("rank -> host: " + ", ".join(f"{i}={w}" for i, w in enumerate(workers)))
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    cfg.save(Path(args.write_job))
    print(f"wrote {args.write_job}: job {cfg.job_id}, {len(cfg.worker_ids)} ranks, "
          f"{cap} chunks per step, {cfg.rounds} steps, PS {cfg.ps_addr[0]}:{cfg.ps_addr[1]}")
    return 0


# -- training ------------------------------------------------------------------------------

def die_with_parent() -> None:
    """Under torchrun, end this rank when its agent dies (Linux ``PR_SET_PDEATHSIG``).

    A launcher that gives up kills the agent (SIGKILL: not forwarded); without this its rank
    would keep waiting in gloo (30 min by default) and keep the rank's UDP port bound."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):  # no libc prctl: the launcher cleans up instead
        pass


def train(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from workers.ddp.hook import start_rank

    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cfg = state = None
    steps = args.steps
    if args.ina_job:
        from workers.ina.job import JobConfig

        cfg = JobConfig.load(Path(args.ina_job))
        steps = cfg.rounds  # the PS expects exactly the job's rounds
        if len(cfg.worker_ids) != world:
            print(f"error: WORLD_SIZE {world} but {args.ina_job} has "
                  f"{len(cfg.worker_ids)} workers", file=sys.stderr)
            return 2
        if cfg.n_values < capacity() * K:
            print(f"error: {args.ina_job} has {cfg.n_values} values per round; this model "
                  f"needs {capacity()} chunks (see --print-capacity)", file=sys.stderr)
            return 2
    if args.gloo_ifname:  # before gloo creates its device: the interface it binds
        os.environ["GLOO_SOCKET_IFNAME"] = args.gloo_ifname
    die_with_parent()
    dist.init_process_group("gloo")  # env:// from torchrun
    try:
        torch.manual_seed(args.seed)
        model = build_model()
        ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)  # broadcasts rank 0's parameters
        # the INA hook when there is a job, "rank R ready", then wait for --start-file
        state = start_rank(ddp, cfg, rank, args.record, args.start_file)
        mode = cfg.mode if cfg is not None else "gloo"
        x_tr, x_te, y_tr, y_te = load_data(args.seed)
        x_te_t, y_te_t = torch.from_numpy(x_te), torch.from_numpy(y_te)
        shard = np.random.default_rng(args.seed).permutation(len(y_tr))[rank::world]
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
        log: list[dict] = []

        def accuracy() -> float:
            with torch.no_grad():
                return float((model(x_te_t).argmax(1) == y_te_t).float().mean())

        for step in range(steps):
            rng = np.random.default_rng([args.seed, step, rank])
            idx = rng.choice(shard, size=min(args.batch_size, len(shard)), replace=False)
            x, y = torch.from_numpy(x_tr[idx]), torch.from_numpy(y_tr[idx])
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()  # the hook (or gloo) averages the buckets in here
            opt.step()
            rec = {"step": step, "loss": loss.item(), "time_s": time.perf_counter() - t0}
            if (step + 1) % args.eval_every == 0 or step == steps - 1:
                rec["accuracy"] = accuracy()
            log.append(rec)
            if rank == 0:
                acc = f" acc {rec['accuracy']:.3f}" if "accuracy" in rec else ""
                print(f"step {step + 1}/{steps} loss {rec['loss']:.4f} "
                      f"{rec['time_s'] * 1e3:.1f} ms{acc}", flush=True)
        report = {"rank": rank, "world_size": world, "mode": mode, "steps": log,
                  "final_accuracy": log[-1]["accuracy"] if log else None,
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
        if rank == 0:
            print(f"final accuracy {report['final_accuracy']:.4f}, "
                  f"{report['time_per_step_s'] * 1e3:.1f} ms/step ({mode})", flush=True)
        dist.barrier()  # every rank done before any tears gloo down (and see __main__)
    finally:
        if state is not None:
            state.close()
        dist.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ina-job", help="INA job file: sum gradients in the network (else gloo)")
    p.add_argument("--steps", type=int, default=200,
                   help="training steps (with --ina-job: the job's rounds)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=20, help="steps between test accuracies")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket size")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--record", action="store_true",
                   help="save every bucket's quantized values and sum (exactness check)")
    p.add_argument("--out", help="folder for rank<r>.json (and .npz); job: its out_dir")
    p.add_argument("--start-file", metavar="PATH",
                   help="after 'rank R ready', wait until PATH exists (a launcher's barrier)")
    p.add_argument("--gloo-ifname", metavar="IFACE",
                   help="network interface gloo binds (sets GLOO_SOCKET_IFNAME; for hosts "
                        "whose hostname does not resolve to the interface facing the others)")
    g = p.add_argument_group("job files")
    g.add_argument("--print-capacity", action="store_true",
                   help="print the chunks per step an INA job for this model needs")
    g.add_argument("--write-job", metavar="FILE", help="write an INA job file and exit")
    g.add_argument("--loopback", type=int, metavar="N", help="... with N ranks on 127.0.0.1")
    g.add_argument("--port", type=int, default=18000, help="loopback: PS port (ranks above)")
    g.add_argument("--plan", help="... from a plan (python -m controller plan)")
    g.add_argument("--network", help="... and a network file (python -m controller net)")
    g.add_argument("--mode", choices=["ina", "ps_only"], default="ina")
    g.add_argument("--job-id", type=int, default=1, help="as given to `controller deploy`")
    args = p.parse_args(argv)
    if args.print_capacity:
        cap = capacity()
        print(f"{cap} chunks per step ({cap * K} values; parameters {sum(param_numels())})")
        return 0
    if args.write_job:
        return write_job(args)
    return train(args)


if __name__ == "__main__":
    # no interpreter teardown: objects still holding gloo (DDP's reducer) destroyed there
    # can abort the rank (SIGABRT, "terminate called without an active exception")
    exit_now(main())
