"""One worker of a collective-schedule run (BCube, ring, PS): ``python -m
workers.collective.worker_node JOB.json --worker S``.

Per round r: compute the real model gradient (:class:`workers.common.model.Replica`), tile it to the
job's vector length (``n_values``; the timing runs ask for 1/4/16 MB, the model is much smaller,
so the synchronized vector is the real gradient repeated -- real training, requested size),
quantize to int32 fixed point (:mod:`workers.common.quantize`, the INA experiment's format), run the
schedule's threads over TCP, then apply ``dequantize(sum)[:n_model] / P``.

Why int32 fixed point: integer addition is associative, so the sum every worker ends with is
*bit-exact* whatever order the schedule adds in -- the exactness check is equality, no
tolerance -- and all replicas stay identical.  The quantization error (2^-f per value) is the
INA experiment's, so the methods train identically.

Why TCP with length-prefixed frames (not UDP + chunking + acks)
    * Every transfer is one hop, on a link shaped by TCLink (htb).  A UDP sender would have to
      pace itself to the link rate or lose packets in the htb queue and retransmit; TCP's
      congestion control does exactly that and keeps the link full, which is what a
      link-bound comparison of sync time needs.  The PS baseline is an N-to-1 incast, where a
      naive UDP sender collapses; TCP shares the PS link fairly.
    * The schedule carries no loss-recovery state, so the transport stays a thin shell.
    * Cost: TCP/IP headers (about 4.6 % of payload at MTU 1500), which the experiment adds to
      the schedule's prediction when it compares bytes on interfaces.
    Frames: a 24-byte header ``!IHHQQ`` (round, thread, step, lo, hi) then ``(hi-lo)`` int32
    values in little-endian order.  A transfer is cut into frames of at most ``frame_values``
    so that threads sharing a NIC interleave.  Every ordered pair (src, dst) of the schedule
    has its own connection, from src's NIC address to dst's address on the same NIC (subnet),
    so the bytes of level l leave on NIC l; a connection starts with the 4-byte src id.

Threads: one Python thread per schedule thread (k for BCube).  Inside a thread, a step sends
its transfers, then waits for every frame addressed to it in that step (collected by one
reader thread per incoming connection) and applies them: the :class:`Schedule` semantics.
Threads own disjoint index sets, so they never touch the same values.

Output (in the job's ``out_dir``): ``worker{S}.json`` (per round: sync time, compute time,
bytes sent per NIC, loss, accuracy, sha256 of the synchronized int32 vector) and
``worker{S}.npz`` (``q``: the quantized model gradient per round, ``sums``: the synchronized
sum over the model part per round), from which the controller checks exactness.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from workers.collective.baselines import make_schedule
from workers.collective.schedule import GATHER, REDUCE, Schedule, Transfer
from workers.common.connect import connect_retry
from workers.common.model import Replica, TrainConfig
from workers.common.quantize import dequantize, quantize

HEADER = struct.Struct("!IHHQQ")
HELLO = struct.Struct("!I")


# ------------------------------------------------------------------ pure helpers


def tile_to(vec: np.ndarray, n: int) -> np.ndarray:
    """``vec`` repeated (and cut) to length n (n >= len(vec))."""
    return np.resize(vec, n)


def frames_of(tr: Transfer, frame_values: int) -> list[tuple[int, int]]:
    """The ``[lo, hi)`` ranges of the frames carrying ``tr`` (none for an empty transfer)."""
    return [(lo, min(lo + frame_values, tr.hi)) for lo in range(tr.lo, tr.hi, frame_values)]


def send_order(sends: tuple[Transfer, ...], P: int) -> list[Transfer]:
    """A step's sends ordered by ``(dst - src) mod P``: the shift order of an all-to-all.

    In a BCube group (and in the sharded PS) every worker sends to all others; in the
    schedule's own order (by the receiver's digit) all senders would start on the same
    receiver, an incast that idles the other downlinks.  Sorting by the shift makes the j-th
    send of every worker go to a different receiver (the shift is ``(d_dst - d_src) mod N`` in
    the level digit, the same j for all), so each downlink is fed by one sender at a time.
    The order inside a step does not change the result (the step's ranges are disjoint)."""
    return sorted(sends, key=lambda tr: ((tr.dst - tr.src) % P, tr.lo))


def expected_values(schedule: Schedule, worker: int) -> list[list[int]]:
    """``[thread][step]``: values addressed to ``worker`` (what a step waits for)."""
    return [[sum(tr.size for tr in schedule.receives(t, s, worker))
             for s in range(schedule.num_steps)] for t in range(schedule.num_threads)]


def apply_frame(buf: np.ndarray, op: str, lo: int, hi: int, data: np.ndarray) -> None:
    """``reduce``: wrap-around int32 add; ``gather``: overwrite."""
    if op == REDUCE:
        buf[lo:hi] += data
    elif op == GATHER:
        buf[lo:hi] = data
    else:
        raise ValueError(f"unknown op {op!r}")


# ------------------------------------------------------------------ transport


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    while len(view):
        got = sock.recv_into(view)
        if got == 0:
            raise ConnectionError("peer closed the connection")
        view = view[got:]


class Inbox:
    """Frames received, keyed by (round, thread, step), with a wait for a value count."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._frames: dict[tuple[int, int, int], list[tuple[int, int, np.ndarray]]] = {}
        self._count: dict[tuple[int, int, int], int] = {}
        self.error: BaseException | None = None

    def put(self, key: tuple[int, int, int], lo: int, hi: int, data: np.ndarray) -> None:
        with self._cv:
            self._frames.setdefault(key, []).append((lo, hi, data))
            self._count[key] = self._count.get(key, 0) + (hi - lo)
            self._cv.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self._cv:
            self.error = exc
            self._cv.notify_all()

    def take(self, key: tuple[int, int, int], values: int, timeout: float
             ) -> list[tuple[int, int, np.ndarray]]:
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._count.get(key, 0) < values:
                if self.error is not None:
                    raise ConnectionError(f"receiving failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"round {key[0]} thread {key[1]} step {key[2]}: got "
                                       f"{self._count.get(key, 0)} of {values} values")
                self._cv.wait(left)
            if self._count[key] != values:
                raise ValueError(f"{key}: received {self._count[key]} values, expected {values}")
            self._count.pop(key)
            return self._frames.pop(key)


def reader(sock: socket.socket, inbox: Inbox) -> None:
    """Read frames from one incoming connection until it closes."""
    head = bytearray(HEADER.size)
    try:
        while True:
            try:
                _recv_exact(sock, memoryview(head))
            except ConnectionError:
                return  # orderly close between frames
            rnd, thread, step, lo, hi = HEADER.unpack(head)
            data = np.empty(hi - lo, dtype="<i4")
            _recv_exact(sock, memoryview(data).cast("B"))
            inbox.put((rnd, thread, step), lo, hi, data)
    except BaseException as exc:  # noqa: BLE001 - reported to the waiting schedule threads
        inbox.fail(exc)


class Sender:
    """One outgoing connection (this worker → dst on one NIC), shared by threads under a lock."""

    def __init__(self, sock: socket.socket, nic: int) -> None:
        self.sock = sock
        self.nic = nic
        self.lock = threading.Lock()

    def send(self, rnd: int, thread: int, step: int, lo: int, hi: int, data: np.ndarray) -> int:
        payload = np.ascontiguousarray(data, dtype="<i4")
        with self.lock:
            self.sock.sendall(HEADER.pack(rnd, thread, step, lo, hi))
            self.sock.sendall(memoryview(payload).cast("B"))
        return HEADER.size + payload.nbytes


# ------------------------------------------------------------------ the process


class Worker:
    def __init__(self, job: dict[str, Any], worker: int) -> None:
        self.job = job
        self.me = worker
        self.P = int(job["n_workers"])
        self.n = int(job["n_values"])
        self.schedule = make_schedule(job["schedule"], self.n)
        self.frame_values = int(job["frame_values"])
        self.timeout = float(job["timeout_s"])
        self.nic_of = {(int(a), int(b)): int(c) for a, b, c in job["links"]}
        self.ips = [list(x) for x in job["ips"]]
        self.port = int(job["port"])
        self.expected = expected_values(self.schedule, worker)
        self.inbox = Inbox()
        self.senders: dict[int, Sender] = {}
        self.n_in = sum(1 for (a, b) in self.nic_of if b == worker)
        self.listeners: dict[int, socket.socket] = {}

    def listen(self) -> None:
        """One listening socket per own NIC address that has incoming links."""
        for nic in sorted({c for (_a, b), c in self.nic_of.items() if b == self.me}):
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((self.ips[self.me][nic], self.port))
            ls.listen(64)
            self.listeners[nic] = ls

    def connect(self) -> None:
        """Open every outgoing connection (src NIC address → dst address on the same NIC),
        and accept every incoming one."""
        accepted: list[socket.socket] = []
        lock = threading.Lock()

        def accept_all(nic: int, count: int) -> None:
            for _ in range(count):
                conn, _ = self.listeners[nic].accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                head = bytearray(HELLO.size)
                _recv_exact(conn, memoryview(head))
                with lock:
                    accepted.append(conn)
                threading.Thread(target=reader, args=(conn, self.inbox), daemon=True).start()

        acceptors = []
        for nic in self.listeners:
            count = sum(1 for (_a, b), c in self.nic_of.items() if b == self.me and c == nic)
            th = threading.Thread(target=accept_all, args=(nic, count), daemon=True)
            th.start()
            acceptors.append(th)
        for (src, dst), nic in sorted(self.nic_of.items()):
            if src != self.me:
                continue
            s = connect_retry((self.ips[dst][nic], self.port), 30, bind=self.ips[src][nic])
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(HELLO.pack(self.me))
            self.senders[dst] = Sender(s, nic)
        for th in acceptors:
            th.join(timeout=30)
        if len(accepted) != self.n_in:
            raise TimeoutError(f"worker {self.me}: {len(accepted)} of {self.n_in} peers connected")

    def run_thread(self, rnd: int, t: int, buf: np.ndarray, sent: dict[int, int]) -> None:
        sched = self.schedule
        for step in range(sched.num_steps):
            for tr in send_order(sched.sends(t, step, self.me), self.P):
                snd = self.senders.get(tr.dst) if tr.size else None
                for lo, hi in frames_of(tr, self.frame_values):
                    assert snd is not None
                    nbytes = snd.send(rnd, t, step, lo, hi, buf[lo:hi])
                    sent[snd.nic] = sent.get(snd.nic, 0) + nbytes
            want = self.expected[t][step]
            if want:
                for lo, hi, data in self.inbox.take((rnd, t, step), want, self.timeout):
                    apply_frame(buf, sched.ops[step], lo, hi, data)

    def allreduce(self, rnd: int, buf: np.ndarray) -> dict[int, int]:
        """Run every thread of the schedule on ``buf`` in place; bytes sent per NIC."""
        sent_per_thread: list[dict[int, int]] = [{} for _ in range(self.schedule.num_threads)]
        errors: list[BaseException] = []

        def body(t: int) -> None:
            try:
                self.run_thread(rnd, t, buf, sent_per_thread[t])
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        threads = [threading.Thread(target=body, args=(t,))
                   for t in range(self.schedule.num_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if errors:
            raise errors[0]
        total: dict[int, int] = {}
        for d in sent_per_thread:
            for nic, b in d.items():
                total[nic] = total.get(nic, 0) + b
        return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job")
    ap.add_argument("--worker", type=int, required=True)
    a = ap.parse_args(argv)
    job = json.loads(Path(a.job).read_text())
    out_dir = Path(job["out_dir"])
    train = TrainConfig(**job["train"])
    worker = Worker(job, a.worker)
    replica = Replica(train, a.worker)
    n_model = replica.params.size
    if worker.n < n_model:
        raise SystemExit(f"worker {a.worker}: n_values {worker.n} < model size {n_model}")
    frac_bits = int(job["frac_bits"])
    worker.listen()
    print(f"worker {a.worker} ready", flush=True)
    start = Path(job["start_file"])
    deadline = time.monotonic() + 120
    while not start.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"worker {a.worker}: no start signal")
        time.sleep(0.02)
    worker.connect()
    rounds, qs, sums = [], [], []
    for r in range(int(job["rounds"])):
        t0 = time.perf_counter()
        loss, g = replica.gradient(r)
        q = quantize(g, frac_bits, worker.P)
        buf = tile_to(q.values, worker.n).astype(np.int32)
        t1 = time.perf_counter()
        sent = worker.allreduce(r, buf)
        t2 = time.perf_counter()
        replica.apply(dequantize(buf[:n_model], frac_bits) / np.float32(worker.P))
        acc = replica.test_accuracy()
        qs.append(q.values)
        sums.append(buf[:n_model].copy())
        rounds.append({"round": r, "sync_s": t2 - t1, "compute_s": t1 - t0, "loss": loss,
                       "accuracy": acc, "clipped": q.clipped,
                       "bytes_sent_per_nic": {str(k): v for k, v in sorted(sent.items())},
                       "sum_sha256": hashlib.sha256(buf.tobytes()).hexdigest()})
        print(f"round {r} sync_s {t2 - t1:.4f}", flush=True)
    np.savez(out_dir / f"worker{a.worker}.npz", q=np.stack(qs), sums=np.stack(sums))
    (out_dir / f"worker{a.worker}.json").write_text(json.dumps(
        {"worker": a.worker, "n_model": n_model, "rounds": rounds}))
    for snd in worker.senders.values():
        snd.sock.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, TimeoutError, ValueError) as exc:
        print(f"error: {exc}", flush=True)
        sys.exit(1)
