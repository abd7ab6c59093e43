"""A ring all-reduce host process: ``python -m workers.ring.ring_node JOB.json RANK``.

The job file (JSON) names the ring: ``job``, ``hosts`` ([[ip, port], ...] in ring order),
``rounds``, ``n_values``, ``seed``, and optionally ``window``, ``timeout``, ``max_timeout``,
``out_dir``, ``start_file``, ``first`` and ``n_workers``.  Position ``RANK`` binds its
(ip, port), prints ``ring RANK ready``, waits for ``start_file`` if the job names one (the
runner touches it once every position is up: :meth:`controller.experiment.runner.Run.launch`),
then all-reduces one seeded int32 vector per round (:func:`seeded_vector` of worker
``first + RANK`` among ``n_workers``, default the ring's size: the suite's draw) with
:class:`workers.ring.driver.RingDriver`
over UDP sockets and the monotonic clock, answers late resends for ``2 × max_timeout`` after
its last round, and writes ``ring<RANK>.npz`` (``q``: its vectors, ``sums``: what it applied)
and ``ring<RANK>.json`` (each round's record, ``finished_at``: the wall-clock time its last
round ended) into ``out_dir``.  A bad job file: one line,
exit 2.
"""

from __future__ import annotations

import heapq
import json
import select
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workers.common.files import ready_then_wait
from workers.ring.driver import RingDriver
from workers.ring.wire import RingDecodeError, RingPacket, decode, encode
from workers.ring.worker import NEXT

__all__ = ["RingNodeJob", "SocketRingIO", "seeded_vector", "main"]


@dataclass(frozen=True)
class RingNodeJob:
    """The job file (module docstring)."""

    job: int
    hosts: tuple[tuple[str, int], ...]
    rounds: int
    n_values: int
    seed: int = 0
    window: int = 16
    timeout: float = 0.3
    max_timeout: float = 2.0
    out_dir: str = "."
    start_file: str | None = None
    first: int = 0  # this ring's first worker among every job's (the seeded vectors' index)
    n_workers: int | None = None  # workers the vectors' bound is for (None: the ring's size)
    start_timeout: float = 120.0  # seconds to wait for start_file

    @classmethod
    def load(cls, path: Path) -> RingNodeJob:
        d = json.loads(path.read_text())
        hosts = tuple((str(h), int(p)) for h, p in d.pop("hosts"))
        job = cls(hosts=hosts, **d)
        if len(hosts) < 1 or job.rounds < 1 or job.n_values < 0 or job.window < 1:
            raise ValueError("hosts, rounds >= 1, n_values >= 0 and window >= 1 are needed")
        if job.first < 0 or (job.n_workers is not None
                             and job.n_workers < job.first + len(hosts)):
            raise ValueError(f"n_workers {job.n_workers} cannot hold workers {job.first}.."
                             f"{job.first + len(hosts) - 1}")
        return job


def seeded_vector(seed: int, rank: int, rnd: int, n_workers: int, n: int) -> np.ndarray:
    """Position ``rank``'s int32 vector of round ``rnd`` (bounded so that the sum of
    ``n_workers`` fits int32; bench/suite/cell.py draws the same)."""
    bound = 2**31 // max(1, n_workers)
    rng = np.random.default_rng([seed, rank, rnd])
    return rng.integers(-bound, bound, n, dtype=np.int64).astype(np.int32)


class SocketRingIO:
    """:class:`workers.ring.driver.RingIO` over one UDP socket and the monotonic clock."""

    def __init__(self, sock: socket.socket, nxt: tuple[str, int], prev: tuple[str, int]) -> None:
        self.sock, self.peer = sock, {NEXT: nxt, "prev": prev}
        self.deadline: float | None = None
        self._calls: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self.malformed = 0

    def now(self) -> float:
        return time.monotonic()

    def send(self, pkts: Sequence[RingPacket], to: str) -> None:
        for p in pkts:
            self.sock.sendto(encode(p), self.peer[to])

    def wake_at(self, t: float | None) -> None:
        self.deadline = t

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._calls, (self.now() + delay, self._seq, fn))

    def serve(self, driver: RingDriver, stop: Callable[[], bool]) -> None:
        """Deliver datagrams, timers and deferred calls until ``stop()``."""
        while not stop():
            now = self.now()
            while self._calls and self._calls[0][0] <= now:
                heapq.heappop(self._calls)[2]()
            if self.deadline is not None and self.deadline <= now:
                self.deadline = None
                driver.on_timer()
            nxt = [t for t in (self.deadline, self._calls[0][0] if self._calls else None)
                   if t is not None]
            wait = max(0.0, min(nxt) - self.now()) if nxt else 0.05
            ready, _, _ = select.select([self.sock], [], [], min(wait, 0.05))
            if ready:
                pkts = []
                while True:
                    try:
                        data = self.sock.recv(65535, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    try:
                        pkts.append(decode(data))
                    except RingDecodeError:
                        self.malformed += 1
                driver.on_packets(pkts)


def main(argv: list[str] | None = None) -> int:
    """The process (module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 2:
            raise ValueError("usage: python -m workers.ring.ring_node JOB.json RANK")
        job = RingNodeJob.load(Path(args[0]))
        rank = int(args[1])
        if not 0 <= rank < len(job.hosts):
            raise ValueError(f"rank {rank} outside the ring of {len(job.hosts)}")
    except (OSError, ValueError, TypeError, KeyError) as e:
        print(f"error: ring_node: {e}", file=sys.stderr)
        return 2
    P = len(job.hosts)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(job.hosts[rank])
    io = SocketRingIO(sock, job.hosts[(rank + 1) % P], job.hosts[(rank - 1) % P])
    n_workers = job.n_workers or P
    q = [seeded_vector(job.seed, job.first + rank, r, n_workers, job.n_values)
         for r in range(job.rounds)]
    if not ready_then_wait("ring_node", f"ring {rank} ready", job.start_file, job.start_timeout):
        return 1
    sums: list[np.ndarray] = []

    def applied(r: int, total: np.ndarray, rec: dict[str, Any]) -> None:
        sums.append(total)
    driver = RingDriver(io, job.job, rank, P, job.rounds, lambda r: q[r], applied,
                        window=job.window, timeout=job.timeout, max_timeout=job.max_timeout)
    driver.start()
    io.serve(driver, lambda: driver.finished)
    finished_at = time.time()  # the last round's end (wall clock: the runner's t_start's)
    linger = time.monotonic() + 2 * job.max_timeout  # late resends of our last ACKs
    io.serve(driver, lambda: time.monotonic() > linger)
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / f"ring{rank}.npz", q=np.array(q), sums=np.array(sums))
    (out / f"ring{rank}.json").write_text(json.dumps(
        {"rank": rank, "rounds": driver.records, "held": driver.held,
         "finished_at": finished_at,
         "malformed": io.malformed}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
