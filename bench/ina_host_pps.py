"""Where a host's CPU goes, per packet and per role (issue 42 item 5).

In process (no root, no network): the per-packet costs of the worker's and the PS's hot loops,
each measured with ``time.thread_time`` as the median of ``--reps`` repetitions --

* the codec: ``encode_payload`` and ``decode_payload`` of one GRAD of K values;
* a worker's state machine per chunk: a whole round of ``--chunks`` chunks through
  :class:`workers.ina.worker.WorkerRound` (start, one RESULT per chunk, the sends it
  answers with), divided by the chunks;
* the PS's merge per GRAD: ``--workers`` workers' GRADs of every chunk into
  :class:`workers.ina.ps.PsState`, divided by the GRADs;
* the worker's receive path per RESULT datagram over loopback (``udp.receive_many`` plus
  ``WorkerDriver.on_packets``), and the batched send per datagram (``udp.send_many``).

With ``--roles RUN_FOLDER`` it instead watches a Mininet run being made into ``RUN_FOLDER``
(started separately, e.g. ``python -m controller run ... --name X``) and prints the CPU each
role -- workers, PS, switch daemons, controller, everything else -- took per round during the
INA rounds (``ina/start`` written to ``ina/ps.json`` written), from ``/proc``.

``--against REV`` measures git revision REV's ``workers`` package too (in a child process),
and prints both columns and their ratio: a change measured side by side in one run.

    python bench/ina_host_pps.py [--reps 200] [--workers 64] [--chunks 76] [--against REV] [--smoke]
    python bench/ina_host_pps.py --roles results/NAME [--rounds 5]
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if os.environ.get("INA_HOST_PPS_TREE"):  # --against: that revision's workers package first
    sys.path.insert(0, os.environ["INA_HOST_PPS_TREE"])

import numpy as np  # noqa: E402

from workers.ina.constants import K  # noqa: E402
from workers.ina.ps import PsState  # noqa: E402
from workers.ina.wire import InaPacket, decode_payload, encode_payload  # noqa: E402
from workers.ina.worker import WorkerRound, ps_only_schedule  # noqa: E402


def per(fn: Callable[[], object], n: int, reps: int) -> float:
    """µs of CPU per item: ``fn`` handles ``n`` items; median of ``reps`` calls."""
    ts = []
    for _ in range(reps):
        t = time.thread_time()
        fn()
        ts.append(time.thread_time() - t)
    return statistics.median(ts) / n * 1e6


def codec_costs(reps: int) -> tuple[float, float]:
    """µs per GRAD encoded, per GRAD decoded."""
    vals = np.arange(K, dtype=np.int32)
    pkt = InaPacket.grad(1, 0, 3, 0, 1, 2, vals)
    data = encode_payload(pkt)
    enc = per(lambda: [encode_payload(pkt) for _ in range(100)], 100, reps)
    dec = per(lambda: [decode_payload(data) for _ in range(100)], 100, reps)
    return enc, dec


def _results(chunks: int, workers: int) -> list[InaPacket]:
    mask = (1 << workers) - 1
    return [InaPacket.result(1, 0, c, mask, np.full(K, c, np.int32)) for c in range(chunks)]


def worker_round_cost(chunks: int, workers: int, window: int, reps: int) -> float:
    """µs per chunk of a whole worker round through :class:`WorkerRound` (no I/O)."""
    values = np.arange(chunks * K, dtype=np.int32)
    results = _results(chunks, workers)

    def one() -> None:
        wr = WorkerRound(job_id=1, worker_id=0, round_=0, values=values,
                         schedule=ps_only_schedule(chunks), k=K, window=window,
                         members=list(range(workers)))
        now = 0.0
        wr.start(now)
        for pkt in results:
            now += 1e-4
            wr.on_packet(pkt, now)
        assert wr.done

    return per(one, chunks, reps)


def ps_merge_cost(chunks: int, workers: int, reps: int) -> float:
    """µs per GRAD merged by :class:`PsState` (``workers`` GRADs per chunk, one round)."""
    grads = [InaPacket.grad(1, 0, c, 0, 1, w, np.full(K, w + c, np.int32))
             for c in range(chunks) for w in range(workers)]

    def one() -> None:
        ps = PsState(1, list(range(workers)), chunks, K)
        n = 0
        for g in grads:
            n += len(ps.on_packet(g, 0.0).results)
        assert n == chunks

    return per(one, len(grads), reps)


def loopback_costs(chunks: int, reps: int) -> tuple[float, float, float, float]:
    """µs per datagram: ``udp.send_many`` of a round's GRADs, ``udp.receive_many`` plus
    decoding of the RESULTs a worker gets, and the same one datagram per call (``udp.send``,
    ``udp.receive_one``; over loopback, the kernel's work included)."""
    from workers.ina import udp

    rx = udp.open_socket(("127.0.0.1", 0))
    rx.setblocking(False)
    tx = udp.open_socket(("127.0.0.1", 0))
    tx.setblocking(False)
    dest = rx.getsockname()
    pkts = _results(chunks, 4)

    def send() -> None:
        udp.send_many(tx, pkts, dest)
        while len(udp.receive_many(rx)) == udp.BATCH:
            pass

    def recv_only() -> float:
        udp.send_many(tx, pkts, dest)
        t = time.thread_time()
        n = 0
        while True:
            got = udp.receive_many(rx)
            n += len(got)
            if len(got) < udp.BATCH:
                break
        return (time.thread_time() - t) / max(n, 1) * 1e6

    def one_by_one() -> tuple[float, float]:
        """µs per datagram of ``udp.send`` (encode + sendto: a worker's answer to a RESULT)
        and of ``udp.receive_one`` (recv + decode: a paced worker's read); nan in a tree
        without ``receive_one``."""
        t = time.thread_time()
        for p in pkts:
            udp.send(tx, p, dest)
        sent = time.thread_time() - t
        if not hasattr(udp, "receive_one"):
            while len(udp.receive_many(rx)) == udp.BATCH:
                pass
            return sent / len(pkts) * 1e6, float("nan")
        t = time.thread_time()
        n = 0
        while udp.receive_one(rx):
            n += 1
        return sent / len(pkts) * 1e6, (time.thread_time() - t) / max(n, 1) * 1e6

    try:
        send_us = per(send, chunks, reps)  # send plus drain: the drain is measured below
        recv_us = statistics.median(recv_only() for _ in range(reps))
        ones = [one_by_one() for _ in range(reps)]
    finally:
        rx.close()
        tx.close()
    return (max(0.0, send_us - recv_us), recv_us, statistics.median(o[0] for o in ones),
            statistics.median(o[1] for o in ones))


ROWS = (("encode", "codec: encode, µs per GRAD"),
        ("decode", "codec: decode, µs per GRAD"),
        ("worker", "worker state machine (WorkerRound), µs per chunk"),
        ("ps", "PS merge (PsState.on_packet), µs per GRAD"),
        ("send", "udp.send_many, µs per datagram"),
        ("recv", "udp.receive_many + decode, µs per datagram"),
        ("send1", "udp.send (encode + sendto), one datagram, µs"),
        ("recv1", "udp.receive_one (recv + decode), one datagram, µs"),
        ("turn", "SocketIO.serve turn, one datagram in and out, µs"),
        ("round_ms", "a worker's round, a turn and a chunk per RESULT, ms"),
        ("first_ms", "first batch + first send_many in a fresh process, ms"))


def measure(a: argparse.Namespace) -> dict[str, float]:
    """Every figure of :data:`ROWS`, measured in this process."""
    enc, dec = codec_costs(a.reps)
    w = worker_round_cost(a.chunks, a.workers, a.window, a.reps)
    p = ps_merge_cost(a.chunks, a.workers, max(3, a.reps // 20))
    s, r, s1, r1 = loopback_costs(a.chunks, a.reps)
    turn = statistics.median(serve_turn_cost(a.chunks * 10) for _ in range(max(3, a.reps // 20)))
    return {"encode": enc, "decode": dec, "worker": w, "ps": p, "send": s, "recv": r,
            "send1": s1, "recv1": r1,
            "turn": turn, "round_ms": a.chunks * (w + turn) / 1e3,
            "first_ms": statistics.median(first_calls_ms() for _ in range(3))}


def _measure_tree(tree: Path, argv: list[str]) -> dict[str, float]:
    """:func:`measure` in a child process whose ``workers`` package is ``tree``'s."""
    env = dict(os.environ, INA_HOST_PPS_TREE=str(tree))
    out = subprocess.run([sys.executable, __file__, *argv, "--json"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def serve_turn_cost(turns: int) -> float:
    """µs of CPU per turn of :meth:`SocketIO.serve` that hands one datagram to the driven
    host and sends one back (a worker's turn per RESULT that arrives alone, the state machine
    left out): ``select``, ``receive_many``, decoding, the send, the loop itself."""
    from workers.ina import udp
    from workers.ina.socket_io import SocketIO

    rx = udp.open_socket(("127.0.0.1", 0))
    rx.setblocking(False)
    dest = rx.getsockname()
    io = SocketIO(rx)
    pkt = _results(1, 4)[0]

    class Echo:
        n = 0

        def on_packets(self, pkts: list) -> None:
            self.n += len(pkts)
            io.send([pkt], dest)  # the next turn's datagram, as a worker answers a RESULT

        def on_timer(self) -> None:
            pass

    echo = Echo()
    try:
        io.send([pkt], dest)
        t = time.thread_time()
        io.serve(echo, until=lambda: echo.n >= turns, poll=lambda now: None)
        return (time.thread_time() - t) / turns * 1e6
    finally:
        rx.close()


_FIRST_CALLS = """
import socket, sys, time
import numpy as np
from workers.common.data import batch_indices
from workers.ina import udp
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
np.random.default_rng(0).permutation(10)  # a worker's start-up did this (its shard)
t = time.thread_time()
batch_indices(np.arange(100), 0, 16, 0, 0)      # a worker's first gradient's batch
udp._batch(sock, True).aim(("10.0.0.1", 5000))  # its first send_many's destination
print((time.thread_time() - t) * 1e3)
"""


def first_calls_ms() -> float:
    """ms of CPU of a worker's first batch and first batched send in a fresh process (what
    they import on first use counts: it is paid in the first round, by every worker)."""
    tree = os.environ.get("INA_HOST_PPS_TREE", str(ROOT))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", _FIRST_CALLS], env=env, check=True,
                         capture_output=True, text=True, cwd=tree).stdout  # -c: cwd first
    return float(out.strip().splitlines()[-1])


def in_process(a: argparse.Namespace, argv: list[str]) -> None:
    print(f"host hot loops in process: K={K}, {a.chunks} chunks a round, {a.workers} workers "
          f"(members: probers, fast retransmit), window {a.window}, median of {a.reps} reps "
          f"(time.thread_time); python {platform.python_version()}, numpy {np.__version__}, "
          f"load average {os.getloadavg()[0]:.1f}")
    cols: list[tuple[str, dict[str, float]]] = []
    if a.against:
        with tempfile.TemporaryDirectory(prefix="ina-host-pps-") as tmp:
            arch = subprocess.run(["git", "-C", str(ROOT), "archive", a.against, "workers", "p4src"],
                                  check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=arch, check=True)
            cols.append((f"at {a.against}", _measure_tree(Path(tmp), argv)))
    cols.append(("this tree", measure(a)))
    print(f"  {'':52s}" + "".join(f"{name:>14s}" for name, _ in cols)
          + ("   after / before" if len(cols) == 2 else ""))
    for key, label in ROWS:
        line = f"  {label:52s}" + "".join(f"{c[key]:14.2f}" for _, c in cols)
        if len(cols) == 2 and cols[0][1][key] > 0:
            line += f"   {cols[1][1][key] / cols[0][1][key]:.2f}"
        print(line)


# ------------------------------------------------------------------ roles on Mininet

_CLK = os.sysconf("SC_CLK_TCK")
ROLES = ("workers", "ps", "switches", "controller")


def _role(cmd: str) -> str | None:
    """The role of the process whose command line is ``cmd`` (None: not the run's)."""
    # a pool of worker hosts (run --hosts-per-process, the default from 16 workers) is workers
    if "workers.ina.worker_node" in cmd or "workers.ina.pool_node" in cmd:
        return "workers"
    if "workers.ina.ps_node" in cmd:
        return "ps"
    if "pyswitch run" in cmd:
        return "switches"
    if "-m controller" in cmd:
        return "controller"
    return None


def _cpu_s(pid: int) -> float | None:
    """``pid``'s CPU seconds, user + system, without its reaped children (the controller
    reaps the host processes: their whole lives would count twice); None once it is gone.
    A zombie still has its final figure."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _CLK


def _ours(run: Path) -> dict[int, str]:
    """The run's processes by role (one scan of /proc): its INA mode's host processes (their
    job file is in the run's folder), every switch and controller (one Mininet run at a
    time: the lock)."""
    out: dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        role = _role(cmd)
        if role in ("workers", "ps") and f"{run.name}/ina/" not in cmd:
            continue  # another run's (a loopback bench's, say)
        if role is not None:
            out[int(d)] = role
    return out


def _machine_busy() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / _CLK


def roles(run: Path, rounds: int, every: float = 0.02) -> None:
    """Watch ``run``'s INA rounds (module docstring) and print CPU per round by role.

    The run's processes are found once (every host process and switch is up before the
    start file), then only they are read, every ``every`` s: a full scan of /proc took
    seconds on a loaded machine, and a worker that exited between two reads lost its last
    figures (the first version of this watcher counted a fifth of the workers' CPU)."""
    start, done = run / "ina" / "start", run / "ina" / "ps.json"
    while not start.exists():
        time.sleep(0.01)
    t0, m0 = time.monotonic(), _machine_busy()
    pids = _ours(run)
    first = {p: _cpu_s(p) for p in pids}
    last = dict(first)
    loads = [os.getloadavg()[0]]
    while not done.exists():
        time.sleep(every)
        for p in pids:
            c = _cpu_s(p)
            if c is not None:
                last[p] = c  # a process that exits keeps its last figure (its zombie's)
        loads.append(os.getloadavg()[0])
    wall, machine = time.monotonic() - t0, _machine_busy() - m0
    cpu = dict.fromkeys(ROLES, 0.0)
    count = dict.fromkeys(ROLES, 0)
    for p, role in pids.items():
        a, b = first.get(p), last.get(p)
        if a is not None and b is not None and b > a:
            cpu[role] += b - a
            count[role] += 1
    own = sum(cpu.values())
    print(f"INA rounds of {run}: {wall:.2f} s wall, {rounds} rounds, machine busy "
          f"{machine / wall:.2f} cores, load average {min(loads):.1f}-{max(loads):.1f}")
    for role in ROLES:
        print(f"  {role:10s} {cpu[role] / rounds * 1e3:8.1f} ms CPU per round "
              f"({count[role]} of {sum(r == role for r in pids.values())} processes busy)")
    print(f"  {'own total':10s} {own / rounds * 1e3:8.1f} ms CPU per round "
          f"({own / wall:.2f} cores)")
    print(f"  {'others':10s} {(machine - own) / rounds * 1e3:8.1f} ms CPU per round "
          "(the machine's other processes, kernel threads included)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--chunks", type=int, default=76)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--smoke", action="store_true", help="20 reps, 8 workers")
    ap.add_argument("--roles", type=Path, metavar="RUN_FOLDER",
                    help="watch a Mininet run's INA rounds: CPU per round by role")
    ap.add_argument("--rounds", type=int, default=5, help="the watched run's rounds")
    ap.add_argument("--against", metavar="REV",
                    help="also measure git revision REV's workers package, side by side")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = ap.parse_args(argv)
    if a.roles is not None:
        roles(a.roles, a.rounds)
        return 0
    if a.smoke:
        a.reps, a.workers = 20, 8
    if a.json:
        print(json.dumps(measure(a)))
        return 0
    child = [x for i, x in enumerate(argv) if x != "--against"
             and (i == 0 or argv[i - 1] != "--against")]
    in_process(a, child)
    return 0


if __name__ == "__main__":
    sys.exit(main())
