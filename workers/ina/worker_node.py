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

The rounds are driven by :class:`workers.ina.driver.WorkerDriver` -- the same driver the
simulated network runs -- over the process's socket (:class:`workers.ina.socket_io.SocketIO`);
this module is the host around it: the replica, the files, the control record, the events.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from workers.common.exit import exit_now
from workers.common.files import wait_for_file
from workers.common.quantize import dequantize, quantize
from workers.common.threads import one_blas_thread
from workers.ina.control_io import ControlReader
from workers.ina.driver import RoundFailed, RoundPlan, WorkerDriver, job_rtt
from workers.ina.events import RoundEvent, emit
from workers.ina.job import JobConfig
from workers.ina.messages import mask_of
from workers.ina.socket_io import SocketIO
from workers.ina.udp import open_socket
from workers.models.synthetic import make_replica

__all__ = ["RoundFailed", "Stopped", "NodeApp", "run", "main", "results_paced",
           "wait_for_start", "wait_for_start_file", "open_sockets", "follow_control",
           "on_sigterm"]


class Stopped(Exception):
    """SIGTERM: the controller stops the job (docs/design.md §9)."""


def wait_for_start(cfg: JobConfig, worker_id: int) -> None:
    """Announce readiness, then wait for the runner's start file (if the job has one)."""
    print(f"worker {worker_id} ready", flush=True)
    wait_for_start_file(cfg, f"worker {worker_id}")


def wait_for_start_file(cfg: JobConfig, who: str) -> None:
    """Wait for the runner's start file, if the job has one (:class:`RoundFailed` naming
    ``who`` after ``round_timeout_s``)."""
    if cfg.start_file is None:
        return
    if not wait_for_file(Path(cfg.start_file), cfg.round_timeout_s):
        raise RoundFailed(f"{who}: no start signal ({cfg.start_file}) "
                          f"after {cfg.round_timeout_s:.0f} s")


def _rows(path: Path, n_values: int, n: int) -> np.ndarray:
    """The first ``n`` int32 rows of ``n_values`` appended to ``path``."""
    return np.fromfile(path, np.int32).reshape(-1, n_values)[:n]


class RoundLog:
    """A worker's finished-round records, one JSON line each in ``path``, read back by
    :meth:`NodeApp.close`: kept in a list they grew the worker by 1.4 KiB a round
    (bench/soak.py: +6 % over 1,000 rounds), and a worker that dies leaves them behind."""

    def __init__(self, path: Path) -> None:
        self.path, self._n = path, 0
        path.write_bytes(b"")  # a folder used again starts empty

    def append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)


class NodeApp:
    """The worker process's :class:`workers.ina.driver.WorkerApp`: its replica, the files the
    exactness check reads, the control record, the ``round`` events.

    The simulated network runs the same app with two economies (docs/simulate.md):
    ``vectors(round)`` gives the int32 gradient instead of the replica (seeded vectors or a
    test's; ``train`` False: no replica at all), and ``accuracy`` False leaves the test
    accuracy to one worker (every replica is the same when the sums are exact)."""

    def __init__(self, cfg: JobConfig, worker_id: int, out: Path,
                 events: Callable[[RoundEvent], None] = emit, *, train: bool = True,
                 accuracy: bool = True,
                 vectors: Callable[[int], np.ndarray] | None = None) -> None:
        self.cfg, self.worker_id, self.out, self.events = cfg, worker_id, out, events
        self.replica = (make_replica(cfg.train, cfg.worker_ids.index(worker_id)) if train
                        else None)
        self.accuracy, self.vectors = accuracy, vectors
        self.n_workers = len(cfg.worker_ids)  # the clip bound: fewer members stay inside it
        self.control = ControlReader(cfg)
        # what the exactness check reads goes to disk each round, not into lists that would
        # grow for the whole job (bench/soak.py measured 19 KiB per round); a worker that
        # dies leaves its gradients behind too (docs/design.md §9)
        self.q_path = out / f"worker{worker_id}.q"
        self.sums_path = out / f"worker{worker_id}.sums"
        for p in (self.q_path, self.sums_path):
            p.write_bytes(b"")  # a folder used again starts empty
        self.log = RoundLog(out / f"worker{worker_id}.rounds.jsonl")  # the driver's records

    def gradient(self, round_: int) -> tuple[float, np.ndarray, int]:
        if self.vectors is not None:
            loss, q, clipped = 0.0, np.asarray(self.vectors(round_), dtype=np.int32), 0
        else:
            assert self.replica is not None
            loss_, grad = self.replica.gradient(round_)
            q, c = quantize(grad, self.cfg.frac_bits, self.n_workers)
            loss, clipped = float(loss_), int(c)
        with open(self.q_path, "ab") as f:
            f.write(q.astype(np.int32).tobytes())
        return loss, q, clipped

    def plan(self, round_: int) -> RoundPlan:
        self.control.refresh()  # every round: a change may start with it
        ctl = self.control.at(round_)
        # with members that may change, a RESULT must be over exactly the members this
        # worker knows: one over the PS's newer set may come before the record is read
        # (then the round starts again)
        return RoundPlan(members=list(ctl.members), schedule=ctl.schedule(self.worker_id),
                         expect_mask=mask_of(ctl.members) if self.control.live else None,
                         version=ctl.replans)

    def members_changed(self, round_: int, members: list[int], now: float) -> bool:
        """The record (looked at every 50 ms) removed a member from ``round_``."""
        return (self.control.live and self.control.refresh(now)
                and self.control.at(round_).members != members)

    def applied(self, round_: int, total: np.ndarray, record: dict[str, Any]) -> None:
        record["accuracy"] = None  # no replica, or another worker's to measure
        if self.replica is not None:
            self.replica.apply(dequantize(total, self.cfg.frac_bits)
                               / np.float32(len(record["members"])))
            if self.accuracy:
                record["accuracy"] = self.replica.test_accuracy()
        with open(self.sums_path, "ab") as f:
            f.write(total.astype(np.int32).tobytes())
        self.events(RoundEvent(job=self.cfg.job_id, worker=self.worker_id, round=round_,
                               time_s=round(record["time_s"], 4),
                               retransmits=record["retransmits"]))

    def close(self, rounds: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """Write ``worker<I>.npz`` (the gradients and sums of the rounds finished) and the
        report ``worker<I>.json``; returns the report."""
        rounds = list(rounds)
        cfg, out, n = self.cfg, self.out, len(rounds)
        np.savez(out / f"worker{self.worker_id}.npz", q=_rows(self.q_path, cfg.n_values, n),
                 sums=_rows(self.sums_path, cfg.n_values, n))
        self.sums_path.unlink()  # in the .npz now; the .q stays for a worker that dies (§9)
        report = {"worker_id": self.worker_id, "rounds": rounds}
        (out / f"worker{self.worker_id}.json").write_text(json.dumps(report, indent=1) + "\n")
        self.log.path.unlink(missing_ok=True)  # in the report now
        return report


def results_paced(cfg: JobConfig, worker_id: int) -> bool:
    """Whether the worker's RESULTs come one at a time (``SocketIO(paced=...)``,
    :data:`workers.ina.socket_io.LONE_GAP`): through switches, yes; not on loopback, where
    the PS sends every worker its copy itself, a burst per batch it merged (the rule of
    ``PsDriver.reply_dest``)."""
    own = cfg.worker_addrs[cfg.worker_ids.index(worker_id)]
    return not (len(cfg.result_dests) > 1 and own in cfg.result_dests)


def open_sockets(cfg: JobConfig, worker_id: int
                 ) -> tuple[socket.socket, socket.socket | None]:
    """Worker ``worker_id``'s sockets, non-blocking, in the calling thread's network
    namespace: its INA port and, when the job has one, its ``reply_port`` (the PS's answers
    to this worker alone, docs/protocol.md §6)."""
    sock = open_socket(("0.0.0.0", cfg.worker_addrs[cfg.worker_ids.index(worker_id)][1]))
    sock.setblocking(False)
    reply = None
    if cfg.reply_port is not None:
        reply = open_socket(("0.0.0.0", cfg.reply_port))
        reply.setblocking(False)
    return sock, reply


def follow_control(driver: WorkerDriver, app: NodeApp) -> Callable[[float], None]:
    """The worker's regular look (``poll(now)``): a member change in the control record
    restarts the round in flight; a round past ``round_timeout_s`` raises
    :class:`RoundFailed`."""
    def poll(now: float) -> None:
        wr, plan = driver.active, driver.plan
        if wr is not None and plan is not None and app.members_changed(wr.round,
                                                                      plan.members, now):
            driver.restart()
        driver.check(now)
    return poll


def run(cfg: JobConfig, worker_id: int) -> dict:
    """Train and synchronize every round (module docstring); returns the report."""
    one_blas_thread()  # BLAS threads spinning on shared cores doubled the round (its doc)
    out = Path(cfg.out_dir)
    app = NodeApp(cfg, worker_id, out)  # a real model's replica: synthetic (docs/models.md)
    sock, reply = open_sockets(cfg, worker_id)
    io = SocketIO(sock, reply, paced=results_paced(cfg, worker_id))
    wait_for_start(cfg, worker_id)

    driver = WorkerDriver(io, cfg, worker_id, app, rtt=job_rtt(cfg), rounds=app.log)
    poll = follow_control(driver, app)
    driver.start()
    try:
        io.serve(driver, until=lambda: driver.finished, poll=poll)
    finally:  # also on SIGTERM (Stopped): the rounds finished so far are kept
        sock.close()
        if reply is not None:
            reply.close()
        report = app.close(driver.rounds)
    return report


def on_sigterm() -> None:
    """SIGTERM raises :class:`Stopped` in the main thread (the rounds finished are kept by
    the ``finally`` that closes the files)."""
    def on_term(signum: int, frame: object) -> None:
        raise Stopped()

    signal.signal(signal.SIGTERM, on_term)


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
    on_sigterm()
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
    exit_now(main())
