"""A SwitchML worker process: ``python -m workers.switchml.switchml_node JOB.json WORKER``.

The job file (JSON): ``job`` (a :class:`workers.switchml.job.JobConfig` as ``to_dict``
writes it), ``hosts`` ([ip, ...]: worker w's address, w indexing ``job.workers``),
``switch`` (the IPv4 address the UPDATEs are sent to: a host behind the switch running
``switchml.p4``, which answers in its place), ``rounds``, ``n_values``, ``seed``, and
optionally ``first`` and ``n_workers`` (the seeded vectors' index and bound, as
:mod:`workers.ring.ring_node`), ``out_dir``, ``start_file``, ``start_timeout``, ``port``
(default the SwitchML UDP port: the switch answers from the port it was sent to, to the
same port) and ``max_round_s`` (a round that takes longer fails the process).

Worker ``WORKER`` binds (its address, ``port``), prints ``switchml WORKER ready``, waits for
``start_file`` if named, then all-reduces one seeded int32 vector per round
(:func:`workers.ring.ring_node.seeded_vector` of worker ``first + WORKER`` among
``n_workers``) with the pure :class:`workers.switchml.worker.SwitchMLWorker` over its UDP
socket and the monotonic clock, and writes ``switchml<WORKER>.npz`` (``q``: its vectors,
``sums``: what it got) and ``switchml<WORKER>.json`` (each round's time and UPDATEs sent
and resent, the worker's counters, ``finished_at``: the wall-clock time its last round
ended).  No linger after the last round: the switch answers a
late worker's retransmission from its shadow copy, not the other workers.  A bad job file:
one line, exit 2.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workers.common.files import ready_then_wait
from workers.ring.ring_node import seeded_vector
from workers.switchml.constants import UDP_PORT
from workers.switchml.job import JobConfig, JobError
from workers.switchml.wire import SmDecodeError, SmPacket, decode_payload, encode_payload
from workers.switchml.worker import SwitchMLWorker

__all__ = ["SmNodeJob", "run_rounds", "main"]


@dataclass(frozen=True)
class SmNodeJob:
    """The job file (module docstring)."""

    job: JobConfig
    hosts: tuple[str, ...]
    switch: str
    rounds: int
    n_values: int
    seed: int = 0
    first: int = 0
    n_workers: int | None = None
    out_dir: str = "."
    start_file: str | None = None
    start_timeout: float = 120.0
    port: int = UDP_PORT
    max_round_s: float = 600.0

    @classmethod
    def load(cls, path: Path) -> SmNodeJob:
        d = json.loads(path.read_text())
        job = JobConfig.from_dict(d.pop("job"))
        hosts = tuple(str(h) for h in d.pop("hosts"))
        out = cls(job=job, hosts=hosts, **d)
        if len(hosts) != job.num_workers:
            raise ValueError(f"{len(hosts)} hosts for the job's {job.num_workers} workers")
        if out.rounds < 1 or out.n_values < 0:
            raise ValueError("rounds >= 1 and n_values >= 0 are needed")
        if out.first < 0 or (out.n_workers is not None
                             and out.n_workers < out.first + len(hosts)):
            raise ValueError(f"n_workers {out.n_workers} cannot hold workers {out.first}.."
                             f"{out.first + len(hosts) - 1}")
        return out


def run_rounds(sock: socket.socket, switch: tuple[str, int], sm: SwitchMLWorker,
               vectors: list[np.ndarray], max_round_s: float) -> tuple[list[np.ndarray],
                                                                        list[dict[str, Any]]]:
    """Every round of ``vectors`` through ``sm`` over ``sock`` (UPDATEs to ``switch``):
    the sums and one record per round; RuntimeError when a round exceeds ``max_round_s``."""
    sums, records = [], []
    malformed = 0

    def send(pkts: list[SmPacket]) -> None:
        for p in pkts:
            try:
                sock.sendto(encode_payload(p), switch)
            except BlockingIOError:  # a full send buffer is a lost packet: resent later
                pass
    for r, vec in enumerate(vectors):
        before = (sm.stats.sent, sm.stats.retransmitted)
        t0 = time.monotonic()
        send(sm.start(r, vec, t0))
        while not sm.done:
            now = time.monotonic()
            if now - t0 > max_round_s:
                raise RuntimeError(f"round {r} did not finish in {max_round_s:g} s")
            deadline = sm.next_deadline()
            wait = 0.05 if deadline is None else min(0.05, max(0.0, deadline - now))
            ready, _, _ = select.select([sock], [], [], wait)
            if ready:
                while not sm.done:
                    try:
                        data = sock.recv(65535, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    try:
                        pkt = decode_payload(data)
                    except SmDecodeError:
                        malformed += 1
                        continue
                    send(sm.receive(pkt, time.monotonic()))
            if not sm.done:
                send(sm.poll(time.monotonic()))
        sums.append(sm.result())
        records.append({"round": r, "time_s": time.monotonic() - t0,
                        "sent": sm.stats.sent - before[0],
                        "retransmitted": sm.stats.retransmitted - before[1],
                        "malformed": malformed})
    return sums, records


def main(argv: list[str] | None = None) -> int:
    """The process (module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 2:
            raise ValueError("usage: python -m workers.switchml.switchml_node JOB.json WORKER")
        job = SmNodeJob.load(Path(args[0]))
        w = int(args[1])
        if not 0 <= w < job.job.num_workers:
            raise ValueError(f"worker {w} outside the job's {job.job.num_workers}")
    except (OSError, ValueError, TypeError, KeyError, JobError) as e:
        print(f"error: switchml_node: {e}", file=sys.stderr)
        return 2
    worker_id = job.job.workers[w]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((job.hosts[w], job.port))
    n_workers = job.n_workers or job.job.num_workers
    q = [seeded_vector(job.seed, job.first + w, r, n_workers, job.n_values)
         for r in range(job.rounds)]
    if not ready_then_wait("switchml_node", f"switchml {w} ready", job.start_file,
                           job.start_timeout):
        return 1
    sm = SwitchMLWorker(job.job, worker_id)
    try:
        sums, records = run_rounds(sock, (job.switch, job.port), sm, q, job.max_round_s)
    except RuntimeError as e:
        print(f"error: switchml_node: worker {w}: {e}", file=sys.stderr)
        return 1
    finished_at = time.time()  # the last round's end (wall clock: the runner's t_start's)
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / f"switchml{w}.npz", q=np.array(q), sums=np.array(sums))
    (out / f"switchml{w}.json").write_text(json.dumps(
        {"worker": w, "worker_id": worker_id, "rounds": records,
         "stats": asdict(sm.stats), "finished_at": finished_at}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
