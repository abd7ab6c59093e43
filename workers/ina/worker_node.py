"""A worker process: ``python -m workers.ina.worker_node JOB.json --worker I``.

Trains its replica for ``rounds`` synchronous rounds.  Each round: compute the gradient on
its shard, quantize it with the job's scale, send it chunk by chunk following its schedule
(:class:`workers.ina.worker.WorkerRound`: bounded window, retransmission), wait for every
RESULT, apply the mean gradient.  Writes ``worker<I>.json`` (per-round time, retransmissions,
clips, loss, accuracy) and ``worker<I>.npz`` (its quantized gradients and the sums it
applied, so the runner can check exactness independently).

Run-time control (docs/design.md §9): each round's members and schedule come from the job's
control record, which the PS writes (:class:`workers.ina.control_io.ControlReader`, looked at
when a round starts and every 50 ms while it waits).  When a version removes a worker from the
round this worker is synchronizing, the worker starts that round's synchronization again with
the same quantized gradient, the new schedule, and RESULTs accepted only over the new mask
(older ones counted the removed worker); the mean divides by the round's member count.  Each
finished round is printed as a ``round`` event (:mod:`workers.ina.events`).  SIGTERM (the
controller stopping the job) ends the worker after writing the rounds it finished.
"""

from __future__ import annotations

import argparse
import json
import select
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from workers.common.quantize import dequantize, quantize
from workers.common.threads import one_blas_thread
from workers.ina.constants import K
from workers.ina.control_io import ControlReader
from workers.ina.events import RoundEvent, emit
from workers.ina.job import JobConfig
from workers.ina.messages import mask_of
from workers.ina.udp import BATCH, open_socket, receive_many, send_many
from workers.ina.worker import RttEstimator, WorkerRound
from workers.models.synthetic import make_replica


class RoundFailed(RuntimeError):
    pass


class MembersChanged(Exception):
    """The PS changed the member set from the round being synchronized (module docstring)."""


class Stopped(Exception):
    """SIGTERM: the controller stops the job (docs/design.md §9)."""


def sync_round(sock, cfg: JobConfig, worker_id: int, round_: int, q: np.ndarray,
               schedule: list[tuple[int, int, int]], expect_mask: int | None = None,
               members_changed: Callable[[], bool] | None = None,
               rtt: RttEstimator | None = None) -> tuple[np.ndarray, dict]:
    """Send one round's quantized gradient; return the int32 sum and the round's stats.
    ``members_changed()`` (checked every poll) raises :class:`MembersChanged` when true.
    ``rtt``: the job's timeout estimator, kept from round to round."""
    wr = WorkerRound(job_id=cfg.job_id, worker_id=worker_id, round_=round_, values=q,
                     schedule=schedule, k=K, window=cfg.window,
                     timeout=cfg.timeout, max_timeout=cfg.max_timeout,
                     direct_after=cfg.direct_after, expect_mask=expect_mask, rtt=rtt)
    start = time.monotonic()
    send_many(sock, list(wr.start(start)), cfg.ps_addr)
    while not wr.done:
        now = time.monotonic()
        if members_changed is not None and members_changed():
            raise MembersChanged(asdict(wr.stats))
        if now - start > cfg.round_timeout_s:
            raise RoundFailed(f"worker {worker_id}: round {round_} not complete after "
                              f"{cfg.round_timeout_s:.0f} s ({wr.stats})")
        deadline = wr.next_deadline()
        wait = 0.05 if deadline is None else max(0.0, min(0.05, deadline - now))
        ready, _, _ = select.select([sock], [], [], wait)
        out = []
        if ready:
            while True:
                got = receive_many(sock)  # every waiting datagram, one system call
                now = time.monotonic()
                for pkt in got:
                    if pkt is None:  # not an INA payload: discarded, counted (design §9)
                        wr.stats.malformed += 1
                    else:
                        out += wr.on_packet(pkt, now)
                if len(got) < BATCH:  # none was left waiting: the next select sees newer
                    break
        out += wr.tick(now if ready else time.monotonic())
        if out:
            send_many(sock, out, cfg.ps_addr)
    elapsed = time.monotonic() - start
    return wr.result_values(), {"time_s": elapsed, **asdict(wr.stats),
                                "rto_s": wr.rtt.rto, "first_rto_s": wr.rtt.first_rto}


def wait_for_start(cfg: JobConfig, worker_id: int) -> None:
    """Announce readiness, then wait for the runner's start file (if the job has one)."""
    print(f"worker {worker_id} ready", flush=True)
    if cfg.start_file is None:
        return
    deadline = time.monotonic() + cfg.round_timeout_s
    while not Path(cfg.start_file).exists():
        if time.monotonic() > deadline:
            raise RoundFailed(f"worker {worker_id}: no start signal ({cfg.start_file}) "
                              f"after {cfg.round_timeout_s:.0f} s")
        time.sleep(0.01)


def _rows(path: Path, n_values: int, n: int) -> np.ndarray:
    """The first ``n`` int32 rows of ``n_values`` appended to ``path``."""
    return np.fromfile(path, np.int32).reshape(-1, n_values)[:n]


def run(cfg: JobConfig, worker_id: int) -> dict:
    one_blas_thread()  # BLAS threads spinning on shared cores doubled the round (its doc)
    index = cfg.worker_ids.index(worker_id)
    replica = make_replica(cfg.train, index)  # a real model's: synthetic (docs/models.md)
    sock = open_socket(("0.0.0.0", cfg.worker_addrs[index][1]))
    sock.setblocking(False)
    n_workers = len(cfg.worker_ids)  # the clip bound: fewer members later stay inside it
    control = ControlReader(cfg)
    # measured timeouts carry over from round to round (workers.ina.worker, "Timeouts")
    rtt = RttEstimator(cfg.timeout, min(0.01, cfg.timeout), cfg.max_timeout)
    wait_for_start(cfg, worker_id)
    # what the exactness check reads goes to disk each round, not into lists that would
    # grow for the whole job (bench/soak.py measured 19 KiB per round); a worker that dies
    # leaves its gradients behind too (docs/design.md §9)
    out = Path(cfg.out_dir)
    q_path, sums_path = out / f"worker{worker_id}.q", out / f"worker{worker_id}.sums"
    for p in (q_path, sums_path):
        p.write_bytes(b"")  # a folder used again starts empty
    rounds = []
    try:
        for r in range(cfg.rounds):
            loss, grad = replica.gradient(r)
            q, clipped = quantize(grad, cfg.frac_bits, n_workers)
            with open(q_path, "ab") as f:
                f.write(q.astype(np.int32).tobytes())
            restarts, extra_retx, t0 = 0, 0, time.monotonic()
            while True:
                control.refresh()  # every round: a change may start with it
                ctl = control.at(r)
                ids = ctl.members
                if worker_id not in ids:
                    raise RoundFailed(f"worker {worker_id}: removed from the job in round {r}")

                def changed(ids: list[int] = ids, r: int = r) -> bool:
                    return (control.refresh(time.monotonic())
                            and control.at(r).members != ids)
                try:
                    total, stats = sync_round(
                        sock, cfg, worker_id, r, q, ctl.schedule(worker_id),
                        # with members that may change, a RESULT must be over exactly the
                        # members this worker knows: one over the PS's newer set may come
                        # before the record is read (then the round starts again)
                        expect_mask=mask_of(ids) if control.live else None,
                        members_changed=changed if control.live else None, rtt=rtt)
                    break
                except MembersChanged as exc:
                    restarts += 1
                    extra_retx += exc.args[0]["retransmits"]
            stats["retransmits"] += extra_retx
            if restarts:
                stats["time_s"] = time.monotonic() - t0
            replica.apply(dequantize(total, cfg.frac_bits) / np.float32(len(ids)))
            with open(sums_path, "ab") as f:
                f.write(total.astype(np.int32).tobytes())
            rounds.append({"round": r, "loss": float(loss), "clipped": clipped,
                           "schedule_version": ctl.replans, "members": ids,
                           "restarts": restarts,
                           "accuracy": replica.test_accuracy(), **stats})
            emit(RoundEvent(job=cfg.job_id, worker=worker_id, round=r,
                            time_s=round(stats["time_s"], 4),
                            retransmits=stats["retransmits"]))
    finally:  # also on SIGTERM (Stopped): the rounds finished so far are kept
        sock.close()
        n = len(rounds)
        np.savez(out / f"worker{worker_id}.npz", q=_rows(q_path, cfg.n_values, n),
                 sums=_rows(sums_path, cfg.n_values, n))
        sums_path.unlink()  # in the .npz now; the .q stays for a worker that dies (§9)
        report = {"worker_id": worker_id, "rounds": rounds}
        (out / f"worker{worker_id}.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.ina.worker_node", description=__doc__)
    parser.add_argument("job", type=Path, help="job file written by the experiment runner")
    parser.add_argument("--worker", type=int, required=True, help="worker id (bit position)")
    args = parser.parse_args(argv)
    cfg = JobConfig.load(args.job)
    if args.worker not in cfg.worker_ids:
        print(f"error: worker {args.worker} is not in job {cfg.job_id} "
              f"(workers {cfg.worker_ids})", file=sys.stderr)
        return 2
    def on_term(signum: int, frame: object) -> None:
        raise Stopped()

    signal.signal(signal.SIGTERM, on_term)
    try:
        run(cfg, args.worker)
    except Stopped:
        print(f"worker {args.worker} stopped", flush=True)
        return 3
    except RoundFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
