"""The PS and worker processes of the NDN transport (docs/design.md §6) on Mininet hosts:
``python -m workers.ndn.node JOB.json --role ps`` / ``--role worker --index I``.

Each process drives one state machine (:class:`workers.ndn.ps.PsState` /
:class:`workers.ndn.worker.WorkerState`: naming, segmentation, reassembly, retransmission, probe
timer and active fetch all come from there) over one raw Ethernet socket on the host's interface
(:class:`pyswitch.ports.Port`; frames of ethertype 0x8624 to NFD's multicast MAC), with a monotonic
clock: wires the machine returns are framed and sent, :meth:`next_deadline` sets the poll timeout,
:meth:`tick` fires timers.

Training (:mod:`workers.common.model`, the model and data of every method)
    Worker i holds a :class:`~workers.common.model.Replica` (its shard and batches) but not its own
    parameters: on ``Train(v, params)`` it computes the gradient of round v at the received
    parameters, quantizes it to int32 fixed point (:mod:`workers.common.quantize`, the INA format)
    and hands the bytes to ``gradient_ready``.  The PS sums the int32 gradients exactly, applies
    ``dequantize(sum) / N`` with the job's SGD (momentum state lives at the PS) and publishes
    the new parameters.  That is ``train_synchronous`` with the quantized-sum sync function,
    so the controller can check the PS's final parameters bit for bit against a one-process
    reference, and every worker's received parameters against the PS's (sha256 per version).

Async mode (``job["mode"] == "async"``, :mod:`workers.ndn.protocol`'s async mode)
    The PS applies every complete gradient at once with :class:`~workers.ndn.protocol.
    AsyncUpdater` (``workers.async_ps.core``: policy, learning rate ``async.lr``, staleness window;
    plain SGD, no momentum; soft-sync size ``async.soft_sync``, default 1) and publishes a
    version per soft-sync batch until ``async.budget`` pushes.
    Gradients travel as float32 (there is no sum to keep exact, so no quantization).  The PS
    logs every push (worker, sequence number, version trained from, sigma, staleness, kappa,
    scale) and the test accuracy of every version.

Heterogeneous speed (both modes)
    A step of worker i takes ``max(compute, step_s) x slowdown[i]`` seconds: the gradient is
    computed at once and handed to the protocol when the step is over, while the process keeps
    serving its face (the same sleeping-not-CPU-limits choice as
    :mod:`workers.async_ps.worker_node`).  ``step_s = 0`` and slow-downs of 1 hand it over at once
    (as before).

Reports (``out_dir``): ``ps.json`` (written when the last version is published; the PS then
keeps answering active fetches until SIGTERM) and ``worker{i}.json``.  Times are wall-clock
(``time.time``) so the controller can put the processes on one axis.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pyswitch.ports import Port, PortError
from workers.common.files import write_json_atomic
from workers.common.model import Replica, Sgd, TrainConfig
from workers.common.quantize import dequantize, quantize
from workers.ndn.link import mac_of
from workers.ndn.packets import (
    NDN_ETHERTYPE,
    NDN_MULTICAST_MAC,
    PacketError,
    eth_frame,
    eth_unframe,
)
from workers.ndn.protocol import Applied, Finished, Published, Train
from workers.ndn.ps import AsyncUpdater, PsConfig, PsState
from workers.ndn.worker import WorkerConfig, WorkerState


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def quantized_mean(grads: list[bytes], frac_bits: int) -> np.ndarray:
    """``dequantize(wrap-around int32 sum) / N`` of int32 gradients given as bytes."""
    total = np.sum([np.frombuffer(g, dtype="<i4").astype(np.int64) for g in grads], axis=0)
    wrapped = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    return dequantize(wrapped, frac_bits) / np.float32(len(grads))


class Link:
    """The host's NDN face: one raw socket, frames in and out."""

    def __init__(self, ifname: str) -> None:
        self.port = Port(ifname)
        self.mac = mac_of(ifname)
        self.non_ndn = 0
        self.bad = 0

    def send(self, wires: list[bytes]) -> None:
        for w in wires:
            self.port.send(eth_frame(NDN_MULTICAST_MAC, self.mac, w))

    def receive(self, timeout: float) -> list[bytes]:
        r, _w, _x = select.select([self.port], [], [], max(0.0, timeout))
        if not r:
            return []
        out = []
        for frame in self.port.recv_batch(64):
            if int.from_bytes(frame[12:14], "big") != NDN_ETHERTYPE:
                self.non_ndn += 1
                continue
            try:
                out.append(eth_unframe(frame)[2])
            except PacketError:
                self.bad += 1
        return out


def _wait(machine: Any, link: Link, until: float | None = None) -> list[bytes]:
    """Poll until the machine's next timer (at most 0.2 s, or ``until``); fire it if due."""
    now = time.monotonic()
    t = machine.next_deadline()
    stop = min(x for x in (t, until, now + 0.2) if x is not None)
    wires = link.receive(stop - now)
    now = time.monotonic()
    out: list[bytes] = []
    for w in wires:
        out += machine.on_packet(w, now)
    t = machine.next_deadline()
    if t is not None and t <= now:
        out += machine.tick(now)
    return out


def run_ps(job: dict[str, Any]) -> int:
    out_dir = Path(job["out_dir"])
    train = TrainConfig(**job["train"])
    workers = list(job["workers"])
    frac_bits = int(job["frac_bits"])
    ref = Replica(train, 0)  # the model, the test set and the initial parameters
    params = ref.params.copy()
    opt = Sgd(train.lr, train.momentum)
    mode = job.get("mode", "sync")

    def update(_r: int, _prev: bytes, grads: dict[str, bytes]) -> bytes:
        opt.step(params, quantized_mean([grads[g] for g in sorted(grads)], frac_bits))
        return params.tobytes()

    asy = job.get("async") or {}
    cfg = PsConfig(job["ps"], job["train_name"], workers, int(job["rounds"]),
                   grad_bytes=4 * params.size, seg_size=int(job["seg_size"]),
                   lifetime_s=float(job["lifetime_s"]), rto_s=float(job["rto_s"]),
                   seed=int(job["seed"]), mode=mode,
                   # async: up to a version per push, so keep enough for an active fetch
                   keep_versions=4 if mode == "sync" else max(4, 2 * len(workers)),
                   budget=int(asy["budget"]) if mode == "async" else None)
    machine = PsState(cfg, params.tobytes(),
                      AsyncUpdater(params.copy(), workers, float(asy["lr"]), asy["policy"],
                                   int(asy["window"]), soft_sync=int(asy.get("soft_sync", 1)))
                      if mode == "async" else update)
    link = Link(job["ifnames"][job["ps"]])
    stop = False

    def on_signal(_s: int, _f: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    print("ps ready", flush=True)
    start = Path(job["start_file"])
    deadline = time.monotonic() + 120
    while not start.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("ps: no start signal")
        time.sleep(0.01)
    t0 = time.time()
    versions: list[dict[str, Any]] = [{"version": 0, "time": t0, "sha256": sha(params.tobytes()),
                                       "accuracy": ref.test_accuracy(), "retx_total": 0}]
    pushes: list[dict[str, Any]] = []
    link.send(machine.start(time.monotonic()))
    give_up = time.monotonic() + float(job["timeout_s"])
    written = False
    while not stop:
        link.send(_wait(machine, link))
        for ev in machine.pop_events():
            if isinstance(ev, Applied):
                pushes.append({"time": time.time(), "worker": ev.worker, "seq": ev.seq,
                               "t_w": ev.t_w, "version": ev.version, "sigma": ev.sigma,
                               "staleness": ev.staleness, "kappa": ev.kappa, "scale": ev.scale,
                               "applied": ev.applied})
                print(f"push {len(pushes)} from {ev.worker} staleness {ev.staleness} "
                      f"v={ev.version}", flush=True)
            elif isinstance(ev, Published):
                ref.params = np.frombuffer(ev.params, dtype=np.float32).copy()
                versions.append({"version": ev.version, "time": time.time(),
                                 "sha256": sha(ev.params), "accuracy": ref.test_accuracy(),
                                 "retx_total": machine.stats.retransmissions})
                if mode == "sync":
                    print(f"round {ev.version - 1} published v={ev.version}", flush=True)
        if machine.done and not written:
            write_json_atomic(out_dir / "ps.json", _ps_report(machine, versions, t0, pushes))
            written = True
            print("ps done", flush=True)
        if not machine.done and time.monotonic() > give_up:
            write_json_atomic(out_dir / "ps.json", _ps_report(machine, versions, t0, pushes))
            what = (f"round {machine.round}" if mode == "sync"
                    else f"{machine.pushes} of {cfg.push_budget} pushes")
            raise TimeoutError(f"ps: {what} not complete after {job['timeout_s']} s")
    if written:  # the final report, with the fetches served after the last version
        write_json_atomic(out_dir / "ps.json", _ps_report(machine, versions, t0, pushes))
    return 0


def _ps_report(machine: PsState, versions: list[dict], t0: float,
               pushes: list[dict]) -> dict[str, Any]:
    s = machine.stats
    return {"start_time": t0, "versions": versions, "done": machine.done,
            "mode": machine.cfg.mode, "pushes": pushes, "rejected": machine.rejected,
            "accepted": sorted(g for g, v in machine.workers.items() if v.state == "accepted"),
            "declined": sorted(g for g, v in machine.workers.items() if v.state == "declined"),
            "estimates_s": {g: v.estimate for g, v in machine.workers.items()},
            "confirms_sent": machine.confirms_sent, "deletes_seen": machine.deletes_seen,
            "stats": {"sent_interests": s.sent_interests, "sent_data": s.sent_data,
                      "received": s.received, "dropped": s.dropped,
                      "retransmissions": s.retransmissions}}


def run_worker(job: dict[str, Any], index: int) -> int:
    out_dir = Path(job["out_dir"])
    train = TrainConfig(**job["train"])
    me = job["workers"][index]
    frac_bits = int(job["frac_bits"])
    replica = Replica(train, index)
    p = job["probe"]
    mode = job.get("mode", "sync")
    # the last version: async, one per soft-sync batch of C pushes
    last = (int(job["async"]["budget"]) // int(job["async"].get("soft_sync", 1))
            if mode == "async" else int(job["rounds"]))
    slow = float(job.get("slowdown", [1.0] * len(job["workers"]))[index])
    step_s = float(job.get("step_s", 0.0))
    cfg = WorkerConfig(me, job["ps"], job["train_name"], last, mode=mode,
                       seg_size=int(job["seg_size"]), lifetime_s=float(job["lifetime_s"]),
                       rto_s=float(job["rto_s"]), probe_k=float(p["k"]),
                       probe_min_s=float(p["min_s"]), probe_max_s=float(p["max_s"]),
                       probe_initial_s=float(p["initial_s"]), seed=int(job["seed"]) * 1000 + index)
    machine = WorkerState(cfg)
    link = Link(job["ifnames"][me])
    print(f"worker {me} ready", flush=True)
    received: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    sent_at: float | None = None
    give_up = time.monotonic() + float(job["timeout_s"])
    finished_at: float | None = None
    pending: tuple[int, bytes, float] | None = None  # (version, gradient, hand over at)
    while finished_at is None or time.monotonic() < finished_at:
        until = min((x for x in (finished_at, pending[2] if pending else None)
                     if x is not None), default=None)
        link.send(_wait(machine, link, until))
        for ev in machine.pop_events():
            if isinstance(ev, Train | Finished):
                now = time.time()
                if ev.version > 0 or isinstance(ev, Finished):
                    received.append({"version": ev.version, "time": now, "sha256": sha(ev.params),
                                     "recovered": ev.version in machine.recovered_versions,
                                     "wait_s": None if sent_at is None else now - sent_at,
                                     "retx_total": machine.stats.retransmissions})
            if isinstance(ev, Train):
                t = time.perf_counter()
                begin = time.monotonic()
                replica.params = np.frombuffer(ev.params, dtype=np.float32).copy()
                # async: batch k of the shard for the k-th push; sync: batch of the round
                loss, g = replica.gradient(machine.seq if mode == "async" else ev.version)
                if mode == "async":
                    wire, clipped = g.astype("<f4").tobytes(), 0
                else:
                    q = quantize(g, frac_bits, len(job["workers"]))
                    wire, clipped = q.values.astype("<i4").tobytes(), q.clipped
                compute = time.perf_counter() - t
                pending = (ev.version, wire, begin + max(compute, step_s) * slow)
                rounds.append({"round": len(rounds), "version": ev.version, "loss": loss,
                               "clipped": clipped, "compute_s": compute,
                               "step_s": max(compute, step_s) * slow})
            elif isinstance(ev, Finished):
                pending = None  # async: the run ended during this step
                # linger briefly: the deletes are out, late duplicates are answered or dropped
                finished_at = time.monotonic() + 0.2
        if pending is not None and time.monotonic() >= pending[2]:
            version, grad, _at = pending
            pending = None
            if machine.state == "training" and machine.version == version:  # not finished meanwhile
                link.send(machine.gradient_ready(version, grad, time.monotonic()))
                sent_at = time.time()
        if finished_at is None and time.monotonic() > give_up:
            raise TimeoutError(f"worker {me}: version {machine.version + 1} not received after "
                               f"{job['timeout_s']} s (state {machine.state})")
    s = machine.stats
    write_json_atomic(out_dir / f"worker{index}.json", {
        "worker": me, "index": index, "mode": mode, "slowdown": slow, "pushes": machine.seq,
        "received": received, "rounds": rounds,
        "recoveries": machine.recoveries, "recovered_versions": sorted(machine.recovered_versions),
        "probe_expiries": machine.probe_expiries, "confirmations": machine.confirmations,
        "probe_history_s": machine.history,
        "stats": {"sent_interests": s.sent_interests, "sent_data": s.sent_data,
                  "received": s.received, "dropped": s.dropped,
                  "retransmissions": s.retransmissions}})
    print(f"worker {me} done", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job")
    ap.add_argument("--role", choices=["ps", "worker"], required=True)
    ap.add_argument("--index", type=int, default=0)
    a = ap.parse_args(argv)
    job = json.loads(Path(a.job).read_text())
    return run_ps(job) if a.role == "ps" else run_worker(job, a.index)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, PortError, TimeoutError, ValueError) as exc:
        print(f"error: {exc}", flush=True)
        sys.exit(1)
