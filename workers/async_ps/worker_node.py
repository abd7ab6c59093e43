"""An asynchronous worker: ``python -m workers.async_ps.worker_node JOB.json --worker I``.

A thin shell around :class:`workers.async_ps.core.Worker` (clock T_w, staleness window) and
:class:`workers.common.model.Replica` (data shard I, model): join the PS (Hello -> Welcome),
announce readiness, wait for the runner's start file, then repeat until the PS says stop:

1. compute the gradient of batch k of shard I at the parameters it holds (``Replica.gradient``);
2. wait out the rest of its step time (below);
3. push (gradient, T_w, previous N-1 staleness samples -- or its own kappa in
   ``kappa_mode="learner"``), and adopt the parameters and clock of the PS's immediate answer.

Heterogeneous speed: sleeping, not CPU limits  [decision]
    Worker I's step takes ``max(compute, step_s) x slowdown[I] x u`` seconds, ``u`` uniform
    in ``[1 - jitter, 1 + jitter]`` (seeded by (seed, I)): the process computes the gradient
    and then sleeps for the remainder.  ``step_s`` is a nominal compute time standing for a
    real model (the digits MLP computes a batch in well under a millisecond, which would make
    the network, not compute, set the pace).  Mininet's CPULimitedHost (cgroup CPU quotas)
    was considered and rejected: on our 2 shared cores a quota only caps a share of a CPU that
    the switches, the PS and other engineers' jobs also contend for, so the achieved slowdown
    varies from run to run and with the machine's load, and a quota is enforced in 100 ms
    periods, which is coarser than a step.  A sleep gives each worker exactly the intended
    relative speed, reproducibly, while the work it stands for adds no CPU load that would
    slow the switches.

Writes ``worker<I>.json``: per push the wall time it was sent, the batch loss, and the
sigma/kappa/T_ps the PS answered with.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

import numpy as np

from workers.async_ps.core import Worker
from workers.async_ps.job import AsyncJob
from workers.async_ps.wire import (
    Answer,
    Error,
    Hello,
    Stop,
    Welcome,
    recv_message,
    send_message,
)
from workers.common.files import write_json_atomic
from workers.common.framing import FrameDecoder
from workers.common.model import Replica


class WorkerFailed(RuntimeError):
    pass


def connect(addr: tuple[str, int], deadline: float) -> socket.socket:
    """Connect to the PS, retrying until ``deadline`` (monotonic seconds)."""
    while True:
        try:
            s = socket.create_connection(addr, timeout=5.0)
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError as e:
            if time.monotonic() > deadline:
                raise WorkerFailed(f"cannot reach the PS at {addr[0]}:{addr[1]}: {e}") from None
            time.sleep(0.1)


def step_time(compute_s: float, nominal_s: float, slowdown: float, u: float) -> float:
    """Seconds one step takes: max(compute, nominal) x slowdown x u (see module docstring)."""
    return max(compute_s, nominal_s) * slowdown * u


def run(job: AsyncJob, worker_id: int) -> dict:
    replica = Replica(job.train, worker_id)
    state = Worker(worker_id, job.window, job.kappa_mode)
    slowdown = job.slowdown[worker_id] if job.slowdown else 1.0
    rng = np.random.default_rng((job.train.seed, worker_id, 8))
    deadline = time.monotonic() + job.timeout_s
    sock = connect(job.ps_addr, deadline)
    dec: FrameDecoder = FrameDecoder()
    pending: list[bytes] = []
    pushes: list[dict] = []
    try:
        send_message(sock, Hello(worker_id))
        msg = recv_message(sock, dec, pending)
        if not isinstance(msg, Welcome):
            raise WorkerFailed(f"worker {worker_id}: expected Welcome, got {msg}")
        params = state.adopt(msg.params, msg.t_ps)
        print(f"worker {worker_id} ready", flush=True)
        if job.start_file is not None:
            while not Path(job.start_file).exists():
                if time.monotonic() > deadline:
                    raise WorkerFailed(f"worker {worker_id}: no start signal")
                time.sleep(0.005)
        k = 0
        while True:
            if time.monotonic() > deadline:
                raise WorkerFailed(f"worker {worker_id}: not done after {job.timeout_s:.0f} s")
            t0 = time.monotonic()
            replica.params = params
            loss, grad = replica.gradient(k)
            compute = time.monotonic() - t0
            u = 1.0 + job.jitter * (2.0 * rng.random() - 1.0)
            step = step_time(compute, job.step_s, slowdown, u)
            time.sleep(max(0.0, step - (time.monotonic() - t0)))
            sent = time.time()
            send_message(sock, state.make_push(grad))
            msg = recv_message(sock, dec, pending)
            k += 1
            if isinstance(msg, Answer):
                params = state.on_reply(msg.reply)
                pushes.append({"time": sent, "rtt": time.time() - sent, "loss": loss,
                               "sigma": msg.reply.sigma, "kappa": msg.reply.kappa,
                               "t_ps": msg.reply.t_ps, "step_s": step})
                if msg.stop:
                    break
            elif isinstance(msg, Stop):
                state.cancel_push()
                break
            elif isinstance(msg, Error):
                raise WorkerFailed(f"worker {worker_id}: the PS refused push {k}: {msg.text}")
            else:
                raise WorkerFailed(f"worker {worker_id}: unexpected answer {msg}")
    finally:
        sock.close()
    return {"worker": worker_id, "slowdown": slowdown, "pushes": pushes,
            "staleness": state.staleness_log}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workers.async_ps.worker_node")
    ap.add_argument("job", type=Path)
    ap.add_argument("--worker", type=int, required=True)
    args = ap.parse_args(argv)
    job = AsyncJob.load(args.job)
    try:
        report = run(job, args.worker)
    except (WorkerFailed, ConnectionError, OSError) as e:
        print(f"error: {e}", flush=True)
        return 1
    write_json_atomic(Path(job.out_dir) / f"worker{args.worker}.json", report)
    print(f"worker {args.worker} done: {len(report['pushes'])} pushes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
