"""One endpoint of a clustered-PS run: ``python -m workers.cluster.node JOB.json --index I``.

A thin TCP shell around the state machines of :mod:`workers.cluster.protocol`: endpoint
``I < N`` is worker I (:class:`~workers.cluster.protocol.ClusterWorker`), endpoint ``N`` the
coordinator (:class:`~workers.cluster.protocol.Coordinator`) or, for the ``central`` rule, the
central PS (:class:`~workers.cluster.protocol.CentralPs`).

* Listens on its job address; one reader thread per incoming connection reassembles
  length-prefixed frames (:class:`workers.common.framing.FrameDecoder`), decodes them
  (:mod:`workers.cluster.wire`) and queues them; the main thread feeds the queue to the
  state machine one message at a time, so the machine needs no locks.
* Outgoing messages leave on one connection per destination (opened on first use, kept: TCP
  keeps each pair in order, which is all the machines assume).  A message to itself (the PS's own
  gradient) goes straight into its queue.  A message with a delay (a gradient after its compute
  time) waits in a timer heap; the main thread keeps serving other messages meanwhile, so a PS
  that is "computing" still averages its members' gradients.
* Features: the profile's values of its host, with ``uplink_bw`` measured from the htb class
  that Mininet's TCLink put on its interface (``tc class show``), i.e. the link's real rate.
  When the profile gives ``uplink_bw`` a pattern, the worker re-rates that class as each period
  starts (``tc class change``; every rule, the central PS's runs too), so the rate it measures
  and the rate its traffic leaves at are the period's; the runner re-rates the switch's end
  (the downlink) when the worker reports the previous period done.
  ``cpu_share`` is the profile's (it is emulated by the compute-time delay, see
  :mod:`workers.cluster.protocol`).

Writes ``node<I>.json`` (per period: time, accuracy, cluster, PS, assignment, features; per round:
time and batch loss; PS log: α and accumulated contributions of each period it served; bytes
sent per message type) and ``node<I>.npz`` (final parameters), or ``hub.json``.  Announces
``endpoint I ready`` when listening, waits for the runner's start file, prints ``period P``
lines for the progress bar; exits 1 with ``error: ...`` on any failure.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from topo.mininet_net import set_htb_rate
from workers.cluster.features import load_profile
from workers.cluster.job import ClusterJob, load_job_data
from workers.cluster.protocol import (
    CentralPs,
    ClusterWorker,
    Coordinator,
    Out,
    parse_tc_rate,
    step_seconds,
    uplink_change,
    worker_features,
)
from workers.cluster.wire import ClusterMessage, decode, encode
from workers.common.files import write_json_atomic
from workers.common.framing import FrameDecoder, TransportError, frame
from workers.common.model import Replica


class EndpointFailed(RuntimeError):
    pass


def measure_uplink(ifname: str) -> float | None:
    """Mbit/s of the htb class shaping ``ifname`` in this namespace (None: unshaped)."""
    proc = subprocess.run(["tc", "class", "show", "dev", ifname], capture_output=True, text=True)
    if proc.returncode != 0:
        raise EndpointFailed(f"tc class show dev {ifname}: {proc.stderr.strip()}")
    return parse_tc_rate(proc.stdout)


class Transport:
    """Listening socket, reader threads, lazily opened outgoing connections."""

    def __init__(self, job: ClusterJob, me: int, deadline: float) -> None:
        self.job = job
        self.me = me
        self.deadline = deadline
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.out: dict[int, socket.socket] = {}
        self.sent_bytes: dict[str, int] = {}
        self.listener = socket.create_server(("0.0.0.0", job.addrs[me][1]))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        dec = FrameDecoder()
        try:
            while True:
                data = conn.recv(1 << 16)
                if not data:
                    return
                for body in dec.feed(data):
                    self.inbox.put(decode(body))
        except (OSError, TransportError) as exc:
            self.inbox.put(EndpointFailed(f"endpoint {self.me}: receiving failed: {exc}"))
        finally:
            conn.close()

    def send(self, dest: int, msg: ClusterMessage) -> None:
        if dest == self.me:
            self.inbox.put(msg)
            return
        sock = self.out.get(dest)
        if sock is None:
            sock = self._connect(dest)
        data = frame(encode(msg))
        sock.sendall(data)
        kind = type(msg).__name__
        self.sent_bytes[kind] = self.sent_bytes.get(kind, 0) + len(data)

    def _connect(self, dest: int) -> socket.socket:
        addr = tuple(self.job.addrs[dest])
        while True:
            try:
                s = socket.create_connection(addr, timeout=5.0)  # type: ignore[arg-type]
                break
            except OSError as e:
                if time.monotonic() > self.deadline:
                    raise EndpointFailed(f"endpoint {self.me}: cannot reach endpoint {dest} at "
                                         f"{addr[0]}:{addr[1]}: {e}") from None
                time.sleep(0.05)
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.out[dest] = s
        return s

    def close(self) -> None:
        for s in self.out.values():
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            s.close()
        self.listener.close()


def make_machine(job: ClusterJob, me: int) -> Any:
    profile = load_profile(job.profile)
    if me == job.n:
        if job.rule == "central":
            return CentralPs(job)
        # Import scikit-learn's k-means now (≈1.5 s of CPU), before announcing readiness,
        # so the import does not count as the first period's clustering time.
        import sklearn.cluster  # noqa: F401
        import sklearn.metrics  # noqa: F401

        return Coordinator(job, profile)
    host = job.workers[me]
    ifname = job.interfaces[me] if job.interfaces else None

    def features(p: int) -> np.ndarray:
        measured = {}
        if ifname and "uplink_bw" in profile.features:
            rate = measure_uplink(ifname)
            if rate is not None:
                measured["uplink_bw"] = rate
        return worker_features(profile, host, p, measured)

    def enter_period(p: int) -> None:
        rate = uplink_change(profile, host, p)
        if rate is not None and ifname:
            try:
                set_htb_rate(ifname, rate)  # this host's egress: its uplink
            except RuntimeError as exc:
                raise EndpointFailed(str(exc)) from None

    return ClusterWorker(job, me, Replica(job.train, me, load_job_data(job)), features,
                         lambda p: step_seconds(profile, host, p, job.step_s),
                         enter_period=enter_period)


def run(job: ClusterJob, me: int) -> tuple[dict[str, Any], Any]:
    """Serve endpoint ``me`` until its machine is done; (report, machine)."""
    deadline = time.monotonic() + job.timeout_s
    machine = make_machine(job, me)
    net = Transport(job, me, deadline)
    print(f"endpoint {me} ready", flush=True)
    try:
        if job.start_file is not None:
            while not Path(job.start_file).exists():
                if time.monotonic() > deadline:
                    raise EndpointFailed(f"endpoint {me}: no start signal")
                time.sleep(0.005)
        timers: list[tuple[float, int, Out]] = []
        seq = itertools.count()

        def schedule(outs: list[Out], t0: float) -> None:
            for o in outs:
                heapq.heappush(timers, (t0 + o.delay, next(seq), o))

        def due() -> None:
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                o = heapq.heappop(timers)[2]
                net.send(o.dest, o.msg)

        started = time.time()
        if isinstance(machine, ClusterWorker):
            schedule(machine.start(), time.monotonic())
        reported = 0
        while not machine.done:
            due()
            now = time.monotonic()
            if now > deadline:
                raise EndpointFailed(f"endpoint {me}: not done after {job.timeout_s:.0f} s")
            wait = min(deadline - now, timers[0][0] - now if timers else 1.0)
            try:
                item = net.inbox.get(timeout=max(0.0, wait))
            except queue.Empty:
                continue
            if isinstance(item, BaseException):
                raise item
            t0 = time.monotonic()
            schedule(machine.handle(item), t0)
            if isinstance(machine, ClusterWorker) and len(machine.periods_log) > reported:
                reported = len(machine.periods_log)
                print(f"period {reported}/{job.periods}", flush=True)
        while timers:  # the last updates / assignments still have to leave
            time.sleep(max(0.0, timers[0][0] - time.monotonic()))
            due()
    finally:
        net.close()
    rep = machine.report()
    rep["started"] = started
    rep["sent_bytes"] = net.sent_bytes
    return rep, machine


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workers.cluster.node")
    ap.add_argument("job", type=Path)
    ap.add_argument("--index", type=int, required=True,
                    help="endpoint: worker 0..N-1, or N (the coordinator or central PS)")
    args = ap.parse_args(argv)
    job = ClusterJob.load(args.job)
    me = args.index
    if not 0 <= me <= job.n:
        print(f"error: endpoint {me} not in 0..{job.n}", flush=True)
        return 1
    try:
        rep, machine = run(job, me)
    except (EndpointFailed, OSError, ValueError) as e:
        print(f"error: {e}", flush=True)
        return 1
    out = Path(job.out_dir)
    if isinstance(machine, ClusterWorker):
        np.savez(out / f"node{me}.npz", params=machine.replica.params)
    write_json_atomic(out / (f"node{me}.json" if me < job.n else "hub.json"), rep)
    print(f"endpoint {me} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
