"""make run's job without any switch: the INA PS and workers over loopback UDP, with a
timeline of where a round's time goes (issue 26: what sets the unshaped round's pace).

The job is make run's (the digits MLP with 32 hidden units: 2,410 values, 76 chunks of 32;
6 workers; window 16; timeout 0.3 s; a start file), in PS-only mode (no switch: every GRAD
goes raw to the PS, which sends every RESULT to every worker).  Each process runs the real
``workers.ina.worker_node.run`` / ``workers.ina.ps_node.run``; with ``--trace`` the I/O
calls they make (``poll``, ``receive_many`` / ``receive_one``, ``send_many`` / ``send``)
and the worker's compute between rounds are wrapped with clocks (``time.perf_counter``), nothing else changes.

Prints, with the settings and the load average: the median seconds per round (the
slowest worker's, as results.json counts it), each process's CPU time (user + system,
from ``wait4``), and with ``--trace`` per round and process: time blocked in ``poll``,
time in receive / send system calls and packets moved, time in the state machines
(the rest of a round's synchronization, ``workers.ina.driver``), and the worker's compute between rounds; the per-packet cost
follows from them.

With ``--costs`` it first prints the host side's per-packet CPU measured in process
(:func:`host_costs`).

    python bench/ina_loopback.py [--workers 6] [--rounds 30] [--trace] [--costs] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from workers.common.model import Replica, TrainConfig  # noqa: E402
from workers.common.quantize import choose_frac_bits  # noqa: E402
from workers.ina.constants import K  # noqa: E402
from workers.ina.job import make_job_config  # noqa: E402
from workers.ina.udp import free_udp_ports  # noqa: E402
from workers.ina.worker import n_chunks_for, ps_only_schedule  # noqa: E402


def make_job(out: Path, workers: int, rounds: int, hidden: int, window: int) -> Path:
    """The loopback job file (module docstring)."""
    train = TrainConfig(model="mlp", hidden=hidden, n_workers=workers, rounds=rounds)
    n_values = Replica(train, 0).params.size
    ports = free_udp_ports(workers + 1)
    addrs = [("127.0.0.1", p) for p in ports[1:]]
    n_chunks = n_chunks_for(n_values, K)
    cfg = make_job_config(
        job_id=1, mode="ps_only", rounds=rounds, train=train, worker_addrs=addrs,
        ps_addr=("127.0.0.1", ports[0]),
        schedules={str(w): ps_only_schedule(n_chunks) for w in range(workers)},
        frac_bits=choose_frac_bits(8.0, workers), n_values=n_values, out_dir=str(out),
        results_to="every_worker", window=window, timeout=0.3, round_timeout_s=60.0,
        start_file=str(out / "start"))
    path = out / "job.json"
    cfg.save(path)
    return path


# ---------------------------------------------------------------- the traced child


class _Trace:
    """Time spent in wrapped calls, per round (the worker sets ``round``)."""

    def __init__(self) -> None:
        self.round = -1
        self.rows: dict[int, dict[str, float]] = {}

    def add(self, key: str, dt: float, n: int = 0, cpu: float = 0.0) -> None:
        row = self.rows.setdefault(self.round, {})
        row[key] = row.get(key, 0.0) + dt
        row[key + "_cpu"] = row.get(key + "_cpu", 0.0) + cpu
        row[key + "_calls"] = row.get(key + "_calls", 0) + 1
        if n:
            row[key + "_pkts"] = row.get(key + "_pkts", 0) + n

    def wrap(self, key: str, fn: Any, count: Any = None) -> Any:
        clock, cpu = time.perf_counter, time.thread_time

        def wrapped(*a: Any, **kw: Any) -> Any:
            t, c = clock(), cpu()
            res = fn(*a, **kw)
            self.add(key, clock() - t, count(a, res) if count else 0, cpu() - c)
            return res
        return wrapped


def _child(role: str, job: Path, worker: int | None, trace_path: Path | None) -> int:
    from workers.ina import ps_node, socket_io, worker_node
    from workers.ina.job import JobConfig
    cfg = JobConfig.load(job)
    tr = _Trace()
    mod: Any = socket_io  # the one loop of both processes (workers.ina.socket_io)
    if trace_path is not None:
        import select as _select

        class _Poll:  # the loop's poll object, its wait timed
            def __init__(self) -> None:
                self.real = _select.poll()
                self.register = self.real.register
                self.poll = tr.wrap("poll", self.real.poll)

        class _Sel:
            POLLIN = _select.POLLIN
            poll = _Poll
        mod.select = _Sel
        mod.receive_many = tr.wrap("recv", mod.receive_many, lambda a, r: len(r))
        mod.receive_one = tr.wrap("recv", mod.receive_one, lambda a, r: len(r))
        mod.send_many = tr.wrap("send", mod.send_many, lambda a, r: len(a[1]))
        mod.send = tr.wrap("send", mod.send, lambda a, r: 1)
        if role == "worker":
            from workers.ina.driver import WorkerDriver
            real_sync, real_finish = WorkerDriver._sync, WorkerDriver._finish
            real_make = worker_node.make_replica
            began: dict[str, float] = {}

            def sync(self: Any) -> None:  # a round's synchronization starts (or again)
                tr.round = self.next_round
                began.setdefault("t", time.perf_counter())
                began.setdefault("c", time.thread_time())
                real_sync(self)

            def finish(self: Any, wr: Any) -> None:  # ... and ends: before apply
                tr.add("sync", time.perf_counter() - began.pop("t"), 0,
                       time.thread_time() - began.pop("c"))
                real_finish(self, wr)

            def make(*a: Any, **kw: Any) -> Any:
                rep = real_make(*a, **kw)
                for name in ("gradient", "apply", "test_accuracy"):
                    setattr(rep, name, tr.wrap(name, getattr(rep, name)))
                return rep
            WorkerDriver._sync, WorkerDriver._finish = sync, finish
            worker_node.make_replica = make
        else:
            from workers.ina.ps import PsState
            PsState.on_packet = tr.wrap("merge", PsState.on_packet)
    try:
        if role == "ps":
            import signal
            stop = {"now": False}
            signal.signal(signal.SIGTERM, lambda *a: stop.update(now=True))
            ps_node.run(cfg)
        else:
            worker_node.run(cfg, worker)
    finally:
        if trace_path is not None:
            trace_path.write_text(json.dumps({str(k): v for k, v in tr.rows.items()}))
    return 0


# ---------------------------------------------------------------- the parent


def _rusage_wait(p: subprocess.Popen, timeout: float) -> float:
    """Wait for ``p``; its CPU seconds (user + system)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            p.kill()
            raise RuntimeError(f"process {p.args} did not finish")
        time.sleep(0.01)


def run(workers: int, rounds: int, hidden: int, window: int, trace: bool,
        out: Path) -> dict[str, Any]:
    """One loopback run; its figures."""
    job = make_job(out, workers, rounds, hidden, window)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    me = [sys.executable, str(Path(__file__).resolve()), "--_child"]

    def cmd(role: str, w: int | None) -> list[str]:
        c = me + [role, str(job)] + (["--worker", str(w)] if w is not None else [])
        if trace:
            c += ["--trace-to", str(out / f"trace-{role}{'' if w is None else w}.json")]
        return c
    ps = subprocess.Popen(cmd("ps", None), env=env, stdout=subprocess.PIPE, text=True)
    ps.stdout.readline()  # "ps ready"
    procs = [subprocess.Popen(cmd("worker", w), env=env, stdout=subprocess.PIPE, text=True)
             for w in range(workers)]
    for p in procs:
        while not p.stdout.readline().endswith("ready\n"):
            pass
    t0 = time.monotonic()
    (out / "start").write_text("")
    cpu: dict[str, float] = {}
    for w, p in enumerate(procs):
        p.stdout.read()
        cpu[f"worker{w}"] = _rusage_wait(p, 120)
    wall = time.monotonic() - t0
    ps.terminate()
    ps.stdout.read()
    cpu["ps"] = _rusage_wait(ps, 30)
    reps = [json.loads((out / f"worker{w}.json").read_text())["rounds"]
            for w in range(workers)]
    import numpy as np
    data = [np.load(out / f"worker{w}.npz") for w in range(workers)]
    exact = np.sum([d["q"].astype(np.int64) for d in data], axis=0).astype(np.int32)
    times = [max(r[i]["time_s"] for r in reps) for i in range(rounds)]
    res: dict[str, Any] = {"times": times, "cpu": cpu, "wall": wall,
                           "retransmits": sum(x["retransmits"] for r in reps for x in r),
                           "accuracy": reps[0][-1]["accuracy"],
                           "exact": all(len(r) == rounds for r in reps) and all(
                               np.array_equal(d["sums"], exact) for d in data)}
    if trace:
        res["trace"] = {p.name[6:-5]: json.loads(p.read_text())
                        for p in sorted(out.glob("trace-*.json"))}
    return res


def _per_round(trace: dict[str, dict[str, dict[str, float]]], rounds: int) -> list[str]:
    """Lines: each process's mean per round (rounds 1.. to skip start-up), wall ms and
    CPU ms (thread time) of each part."""
    cols = ("poll", "recv", "send", "state", "gradient", "apply", "test_accuracy")
    lines = [f"{'process':8} {'recv pkts/calls':>15} {'send pkts/calls':>15}  "
             + " ".join(f"{c + ' ms':>17}" for c in cols) + "   (wall/CPU)"]
    for name, rows in trace.items():
        keep = [rows[str(r)] for r in range(1, rounds) if str(r) in rows]
        if name == "ps":  # the PS has no rounds of its own: everything in row -1
            keep = [{k: v / rounds for k, v in rows.get("-1", {}).items()}]
        if not keep:
            continue

        def m(key: str, keep: list = keep) -> float:
            return statistics.fmean(r.get(key, 0.0) for r in keep)
        part = {c: (m(c), m(c + "_cpu")) for c in cols if c != "state"}
        io = [sum(part[c][i] for c in ("poll", "recv", "send")) for i in (0, 1)]
        part["state"] = ((m("sync") - io[0], m("sync_cpu") - io[1]) if name != "ps"
                         else (m("merge"), m("merge_cpu")))
        lines.append(f"{name:8} {m('recv_pkts'):>8.0f}/{m('recv_calls'):<6.0f} "
                     f"{m('send_pkts'):>8.0f}/{m('send_calls'):<6.0f} "
                     + " ".join(f"{part[c][0] * 1e3:>8.2f}/{part[c][1] * 1e3:<8.2f}"
                                for c in cols))
    return lines


def host_costs(reps: int = 300) -> list[str]:
    """Per-packet CPU of the host side, in process (``time.thread_time``, median of
    ``reps``): the codec and the state machines as ``bench/ina_host_pps.py`` measures them
    (its functions, for this job's 76 chunks and 6 workers), and the batched UDP calls over
    loopback beside one ``sendto``/``recv`` per datagram (the kernel's loopback delivery,
    which a send pays for its receiver, included)."""
    import numpy as np
    from ina_host_pps import codec_costs, per, ps_merge_cost, worker_round_cost

    from workers.ina import udp
    from workers.ina.wire import InaPacket, decode_payload, encode_payload

    enc, dec = codec_costs(reps)
    n_chunks, workers = 76, 6
    lines = [f"encode {enc:.1f} µs, decode {dec:.1f} µs per packet",
             f"worker state machine {worker_round_cost(n_chunks, workers, 16, reps):.1f} µs "
             f"per chunk (a GRAD out, its RESULT in); PS merge "
             f"{ps_merge_cost(n_chunks, workers, max(3, reps // 20)):.1f} µs per GRAD "
             f"(PS-only, {workers} workers)"]
    vals = np.arange(K, dtype=np.int32)
    a, b = udp.open_socket(("127.0.0.1", 0)), udp.open_socket(("127.0.0.1", 0))
    a.setblocking(False)
    b.setblocking(False)
    dest = b.getsockname()
    try:
        for k in (1, 4, 16, 64):
            pk = [InaPacket.grad(1, 0, c, 0, 1, 2, vals) for c in range(k)]

            def batched(pk: list = pk, k: int = k) -> None:
                udp.send_many(a, pk, dest)
                got = 0
                while got < k:
                    got += len(udp.receive_many(b))

            def single(pk: list = pk) -> None:
                for p in pk:
                    a.sendto(encode_payload(p), dest)
                for _ in pk:
                    decode_payload(b.recv(4096))
            lines.append(f"{k:>2} datagrams: send_many + receive_many "
                         f"{per(batched, k, reps):.1f} µs per datagram, sendto + recv each "
                         f"{per(single, k, reps):.1f}")
    finally:
        a.close()
        b.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--trace", action="store_true", help="time the I/O calls (module doc)")
    ap.add_argument("--smoke", action="store_true", help="2 workers, 3 rounds")
    ap.add_argument("--costs", action="store_true",
                    help="also the per-packet CPU of the host side, in process")
    ap.add_argument("--_child", nargs=2, metavar=("ROLE", "JOB"), help=argparse.SUPPRESS)
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--trace-to", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a._child:
        return _child(a._child[0], Path(a._child[1]), a.worker, a.trace_to)
    if a.smoke:
        a.workers, a.rounds = 2, 3
    if a.costs:
        print("host per-packet CPU (in process, one thread):")
        print("\n".join("  " + x for x in host_costs(20 if a.smoke else 300)))
    with tempfile.TemporaryDirectory(prefix="ina-loopback-") as tmp:
        res = run(a.workers, a.rounds, a.hidden, a.window, a.trace, Path(tmp))
    times = res["times"]
    print(f"INA PS-only over loopback, no switch: {a.workers} workers, {a.rounds} rounds, "
          f"MLP hidden {a.hidden}, window {a.window}, trace {'on' if a.trace else 'off'}; "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"median s/round {statistics.median(times):.4f} (rounds 1.. "
          f"{statistics.median(times[1:] or times):.4f}), mean {statistics.fmean(times):.4f}; "
          f"wall {res['wall']:.2f} s; retransmissions {res['retransmits']}; "
          f"final accuracy {res['accuracy']:.4f}; exact sums in every round: "
          f"{'yes' if res['exact'] else 'NO'}")
    print("CPU s: " + ", ".join(f"{k} {v:.2f}" for k, v in res["cpu"].items()))
    if a.trace:
        print("per round (mean over rounds 1..; the PS's over all rounds):")
        print("\n".join(_per_round(res["trace"], a.rounds)))
    return 0 if res["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
