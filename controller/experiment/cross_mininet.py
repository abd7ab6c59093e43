"""``--cross-traffic`` on Mininet (issue 39; :mod:`controller.experiment.cross_traffic`): each
TCP flow is a bulk socket pair in the hosts' own namespaces
(:mod:`workers.common.bulk_tcp`: the kernel's TCP, Reno by default as the simulated model),
started before the jobs' processes and stopped after them.  Its receiver logs the bytes it
has every 50 ms, so the bytes of the jobs' rounds -- from the start file to the last worker's
exit, :class:`~controller.experiment.runner.Launched`'s ``t_start`` and ``wall_s`` -- are read
off by interpolation.  Then the flow runs alone as long (after as long a lead), for
reference, and the next launch waits until the network is quiet: what the flows left in the
links' queues (up to 1000 frames, 12 s at 1 Mbit/s) would otherwise delay its first round.
"""

from __future__ import annotations

import bisect
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller.experiment.cross_traffic import CROSS_KEY, FlowFigures, TcpPair
from controller.experiment.network import interface_counters

__all__ = ["MininetFlows", "launch_with_flows", "bytes_between", "wait_quiet", "TCP_PORT"]

ROOT = Path(__file__).resolve().parents[2]
TCP_PORT = 5001


def bytes_between(samples: Sequence[tuple[float, int]], t0: float, t1: float) -> int:
    """Bytes received from ``t0`` to ``t1`` of a receiver's log ``(time, total)`` (pure),
    interpolating linearly between its samples (50 ms apart)."""
    def at(t: float) -> float:
        ts = [s[0] for s in samples]
        i = bisect.bisect_right(ts, t)
        if i == 0:
            return float(samples[0][1]) if samples else 0.0
        if i == len(samples):
            return float(samples[-1][1])
        (ta, a), (tb, b) = samples[i - 1], samples[i]
        return a + (b - a) * (t - ta) / (tb - ta) if tb > ta else float(b)
    return int(round(at(t1) - at(t0))) if samples else 0


def wait_quiet(read: Callable[[], dict[Any, int]], step_s: float = 0.5,
               limit_s: float = 60.0, sleep: Callable[[float], None] = time.sleep) -> float:
    """Wait until no link moves a byte for ``step_s`` (``read()``: bytes per link so far),
    at most ``limit_s``; returns the seconds waited."""
    waited, before = 0.0, read()
    while waited < limit_s:
        sleep(step_s)
        waited += step_s
        now = read()
        if now == before:
            break
        before = now
    return waited


def _read(log: Path) -> list[tuple[float, int]]:
    out = []
    if log.exists():
        for line in log.read_text().splitlines():
            t, _, n = line.partition(" ")
            try:
                out.append((float(t), int(n)))
            except ValueError:
                continue
    return out


class MininetFlows:
    """The flows of one launch on ``net`` (a Mininet network): :meth:`start`, :meth:`stop`,
    :meth:`figures`."""

    def __init__(self, net: Any, pairs: Sequence[TcpPair], hosts: dict[str, tuple[str, str]],
                 out_dir: Path, tag: str) -> None:
        self.net, self.pairs, self.hosts = net, list(pairs), hosts
        self.logs = [Path(out_dir) / f"tcp{i}-{tag}.log" for i in range(len(self.pairs))]
        self.procs: list[subprocess.Popen] = []
        self.started = 0.0

    def start(self) -> None:
        py = [sys.executable, "-m", "workers.common.bulk_tcp"]
        for i, (p, log) in enumerate(zip(self.pairs, self.logs, strict=True)):
            log.parent.mkdir(parents=True, exist_ok=True)
            log.unlink(missing_ok=True)
            port = str(TCP_PORT + i)
            self.procs.append(self.net.get(p.dst).popen(
                [*py, "recv", "--port", port, "--log", str(log)], cwd=str(ROOT),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for i, p in enumerate(self.pairs):
            self.procs.append(self.net.get(p.src).popen(
                [*py, "send", "--to", self.hosts[p.dst][0], "--port", str(TCP_PORT + i)],
                cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.started = time.time()

    def stop(self) -> None:
        for proc in reversed(self.procs):  # senders first, then the receivers log their end
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()

    def figures(self, t0: float, t1: float) -> list[FlowFigures]:
        """What each flow delivered from ``t0`` to ``t1`` (wall clock)."""
        return [FlowFigures(p.src or "", p.dst or "", t1 - t0, bytes_between(_read(log), t0, t1))
                for p, log in zip(self.pairs, self.logs, strict=True)]


def launch_with_flows(deployed: Any, run: Any, spec: Any, pairs: Sequence[TcpPair]) -> Any:
    """:meth:`Run.launch` of ``spec`` with the flows beside it (module docstring); the
    returned :class:`Launched` carries ``extra[CROSS_KEY]``, as the simulated network's."""
    net = deployed.mininet.net
    flows = MininetFlows(net, pairs, deployed.hosts, spec.out_dir, "with")
    flows.start()
    try:
        done = run.launch(deployed.mininet, spec)
    finally:
        flows.stop()
    t0, t1 = done.t_start, done.t_start + done.wall_s
    figs = flows.figures(t0, t1)
    lead = max(t0 - flows.started, 0.0)
    alone = MininetFlows(net, pairs, deployed.hosts, spec.out_dir, "alone")
    alone.start()
    try:
        time.sleep(lead + (t1 - t0))
    finally:
        alone.stop()
    mn = deployed.mininet  # the next launch starts on empty queues
    quiet_s = wait_quiet(lambda: interface_counters(mn.plan, getattr(mn, "interface_bytes",
                                                                    None)))
    a0 = alone.started + lead
    for f, a in zip(figs, alone.figures(a0, a0 + (t1 - t0)), strict=True):
        f.alone_bytes, f.alone_window_s = a.bytes, a.window_s
    extra = dict(getattr(done, "extra", None) or {})
    extra[CROSS_KEY] = [{**asdict(f), "Mbps": f.Mbps, "alone_Mbps": f.alone_Mbps,
                         "quiet_wait_s": quiet_s} for f in figs]
    done.extra = extra
    return done
