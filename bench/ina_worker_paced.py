"""A real worker process's CPU per round when its RESULTs come one at a time, as over a
shaped link (issue 42 item 5): every turn of its loop handles one datagram.

The worker is ``python -m workers.ina.worker_node`` on a job of ``--members`` workers (so it
probes its share of the chunks and holds off on the rest, as in Mininet k=8) of which only
this one runs; this process plays the network: it answers each GRAD with the RESULT of its
chunk over every member (the echo names the GRAD, as a switch's would), one RESULT every
``--gap`` seconds, in the order the GRADs came.  Round 0 (imports, first calls) is left out:
the worker's CPU time (``/proc/PID/schedstat``, nanoseconds; user and system, the kernel's
socket work included) is read when the first GRAD of round 1 comes and when the last
round's last RESULT has been taken (the worker exits), and divided by the rounds between.

``--trees A,B,...`` runs the worker from each tree's ``workers`` package in turn, ``--runs``
times (A B A B ...: a drift in the machine's speed falls on both), and prints each tree's
median, its ratio to the first tree's, and the median of the ratios run by run: a change
measured side by side in one run.

    python bench/ina_worker_paced.py [--rounds 40] [--gap 0.0004] [--members 64]
        [--trees /work/main,.] [--runs 3] [--smoke]
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from workers.common.model import Replica, TrainConfig  # noqa: E402
from workers.common.quantize import choose_frac_bits  # noqa: E402
from workers.ina.constants import K  # noqa: E402
from workers.ina.job import make_job_config  # noqa: E402
from workers.ina.udp import free_udp_ports  # noqa: E402
from workers.ina.wire import Echo, InaPacket, decode_payload, encode_payload  # noqa: E402
from workers.ina.worker import n_chunks_for, ps_only_schedule  # noqa: E402


def make_job(out: Path, members: int, rounds: int, hidden: int, window: int,
             net: socket.socket) -> Path:
    """A job of ``members`` workers whose worker 0 runs here; ``net`` is its PS address."""
    train = TrainConfig(model="mlp", hidden=hidden, n_workers=members, rounds=rounds)
    n_values = Replica(train, 0).params.size
    ports = free_udp_ports(2)
    n_chunks = n_chunks_for(n_values, K)
    addrs = [("127.0.0.1", ports[0])] + [("127.0.0.2", 40000 + i) for i in range(1, members)]
    cfg = make_job_config(
        job_id=1, mode="ps_only", rounds=rounds, train=train, worker_addrs=addrs,
        ps_addr=net.getsockname(),
        schedules={str(w): ps_only_schedule(n_chunks) for w in range(members)},
        frac_bits=choose_frac_bits(8.0, members), n_values=n_values, out_dir=str(out),
        results_to="network", reply_port=ports[1], window=window, timeout=0.3,
        round_timeout_s=60.0, start_file=str(out / "start"))
    path = out / "job.json"
    cfg.save(path)
    return path


_PROFILED = """
import cProfile
import sys
from workers.ina import worker_node
import time
pr = cProfile.Profile(time.thread_time)  # CPU, not the time asleep in poll
pr.enable()
try:
    worker_node.main(sys.argv[1:])
finally:
    pr.disable()
    pr.dump_stats(PATH)
"""


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def _sys_share(pid: int) -> tuple[int, int]:
    """(user, system) clock ticks of ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def one_run(tree: Path, a: argparse.Namespace) -> tuple[float, float]:
    """The worker's CPU per round (ms) with ``tree``'s workers package, and the system's
    share of it (clock ticks: coarse)."""
    net = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    net.bind(("127.0.0.1", 0))
    with tempfile.TemporaryDirectory(prefix="ina-paced-") as tmp:
        out = Path(tmp)
        job = make_job(out, a.members, a.rounds, a.hidden, a.window, net)
        env = dict(os.environ, PYTHONPATH=str(tree))
        prof = os.environ.get("PACED_PROFILE")  # a profile of the worker (not for figures)
        run = (["-c", _PROFILED.replace("PATH", repr(prof))] if prof
               else ["-m", "workers.ina.worker_node"])
        p = subprocess.Popen([sys.executable, *run, str(job),
                              "--worker", "0"], cwd=tree, env=env, stdout=subprocess.PIPE,
                             text=True)
        assert p.stdout is not None
        while not p.stdout.readline().endswith("ready\n"):
            pass
        mask = (1 << a.members) - 1
        pending: collections.deque[InaPacket] = collections.deque()
        dest = None
        t_next = 0.0
        cpu0 = None
        (out / "start").write_text("")
        answered: set[tuple[int, int]] = set()  # (round, chunk): a retransmission's answer
        last = a.rounds * n_chunks_for(
            Replica(TrainConfig(model="mlp", hidden=a.hidden, n_workers=a.members,
                                rounds=a.rounds), 0).params.size, K)
        try:
            while len(answered) < last:
                wait = max(0.0, t_next - time.monotonic()) if pending else 1.0
                if select.select([net], [], [], wait)[0]:
                    data, src = net.recvfrom(4096)
                    g = decode_payload(data)
                    dest = src
                    if cpu0 is None and g.round == 1:
                        cpu0, us0 = _cpu_ns(p.pid), _sys_share(p.pid)
                    pending.append(g)
                    continue
                now = time.monotonic()
                if pending and now >= t_next:
                    for _ in range(min(a.burst, len(pending))):
                        g = pending.popleft()
                        net.sendto(encode_payload(InaPacket.result(
                            g.job_id, g.round, g.chunk_id, mask, g.values, echo=Echo.of(g))),
                            dest)
                        answered.add((g.round, g.chunk_id))
                    t_next = now + a.gap * a.burst
            # the worker's last turn: wait for it to write its files and exit
            cpu1, us1 = _cpu_ns(p.pid), _sys_share(p.pid)
            while p.poll() is None:
                cpu1, us1 = _cpu_ns(p.pid), _sys_share(p.pid)
                time.sleep(0.001)
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()
            net.close()
        rounds = a.rounds - 1
        assert cpu0 is not None
        user, system = us1[0] - us0[0], us1[1] - us0[1]
        return (cpu1 - cpu0) / 1e6 / rounds, system / max(1, user + system)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--gap", type=float, default=0.0004, help="seconds between RESULTs")
    ap.add_argument("--burst", type=int, default=1,
                    help="RESULTs sent back to back, every BURST x GAP seconds")
    ap.add_argument("--members", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--trees", default=str(ROOT), help="comma-separated source trees")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="5 rounds, 1 run")
    a = ap.parse_args()
    if a.smoke:
        a.rounds, a.runs = 5, 1
    trees = [Path(t).resolve() for t in a.trees.split(",")]
    print(f"a worker process, RESULTs paced {a.burst} every {a.gap * a.burst * 1e3:.2f} ms: "
          f"{a.members} "
          f"members, MLP hidden {a.hidden}, window {a.window}, {a.rounds} rounds (round 0 "
          f"left out), {a.runs} runs per tree alternated; python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    got: dict[Path, list[float]] = {t: [] for t in trees}
    sys_share: dict[Path, list[float]] = {t: [] for t in trees}
    for _ in range(a.runs):
        for t in trees:
            ms, share = one_run(t, a)
            got[t].append(ms)
            sys_share[t].append(share)
    chunks = n_chunks_for(Replica(TrainConfig(model="mlp", hidden=a.hidden, n_workers=a.members,
                                              rounds=a.rounds), 0).params.size, K)
    base = statistics.median(got[trees[0]])
    for t in trees:
        med = statistics.median(got[t])
        runs = " ".join(f"{x:.2f}" for x in got[t])
        pairs = statistics.median(x / y for x, y in zip(got[t], got[trees[0]], strict=True))
        print(f"  {str(t):34s} worker CPU per round {med:6.2f} ms (runs: {runs}), "
              f"{med * 1e3 / chunks:5.1f} µs per chunk, x{med / base:.2f} (run by run: "
              f"x{pairs:.2f}); system {statistics.median(sys_share[t]):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
