"""Where a result came from: the provenance block every ``results.json`` carries.

A measured time means little without the code, the libraries and the machine that produced
it, and whether the run was bound by its links or by its cores (docs/design.md §8).  So every
run records the git commit (and whether the tree had uncommitted changes), the versions of
the dependencies ``pyproject.toml`` pins, the command line, the host, and the CPU time of the
processes it started (:class:`CpuClock`).  Everything here is best effort: a value that cannot
be read is ``None``, never an error, since provenance must not stop a run.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROVENANCE_KEYS = ("git_commit", "git_dirty", "packages", "python", "command_line", "host",
                   "started", "cpu")

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def pinned_packages(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str | None]:
    """Installed version of every dependency ``pyproject.toml`` names (``None``: missing)."""
    try:
        project = tomllib.loads(pyproject.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return {}
    names = [re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0] for spec in project.get(
        "dependencies", [])]
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def collect(argv: list[str] | None = None) -> dict[str, Any]:
    """The provenance block of a run starting now (``cpu`` is filled in as processes end)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "packages": pinned_packages(),
        "python": sys.version.split()[0],
        "command_line": list(sys.argv if argv is None else argv),
        "host": {"name": platform.node(), "platform": platform.platform(),
                 "cpus": os.cpu_count(), "load_avg": load_avg()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu": {},
    }


def machine_busy_s() -> float | None:
    """CPU seconds every core of the machine spent busy since boot (``/proc/stat``: all
    but idle and iowait), or None where unreadable."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)
        return busy / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def load_avg() -> list[float] | None:
    """The 1, 5 and 15 min load averages (None where unknown)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and its reaped children, from ``/proc/PID/stat``
    (``None`` if the process is gone or /proc is absent).  A zombie still has its entry, so
    reading before the parent reaps it gives the final figure."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name may contain spaces
    # fields[11..14] = utime, stime, cutime, cstime (proc(5) fields 14-17)
    return sum(int(x) for x in fields[11:15]) / _CLK_TCK


class CpuClock:
    """CPU seconds per host process of one mode, sampled from /proc while they run.

    :meth:`sample` is called before every poll of a process (so the last sample of a process
    that has exited is its zombie's final figure); :meth:`report` adds the exact total of all
    reaped children from ``getrusage`` and the CPU time the network's switch processes spent
    in the same interval, so a mode's record shows whether cores or links set its pace."""

    def __init__(self, switch_pids: dict[str, int] | None = None) -> None:
        import resource

        self._resource = resource
        self._t0 = time.monotonic()
        self._children0 = self._children_s()
        self.per_host: dict[str, float] = {}
        # a process serving several hosts (workers.ina.pool_node): host -> hosts it serves
        self.serves: dict[str, list[str]] = {}
        self._switch_pids = dict(switch_pids or {})
        self._switch0 = {s: process_cpu_s(p) for s, p in self._switch_pids.items()}
        self._rounds0: tuple[float, dict[str, float], dict[str, float | None]] | None = None
        self._machine0: float | None = None

    def _children_s(self) -> float:
        ru = self._resource.getrusage(self._resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def sample(self, host: str, pid: int) -> None:
        cpu = process_cpu_s(pid)
        if cpu is not None:
            self.per_host[host] = cpu

    def mark_rounds(self, pids: dict[str, int]) -> None:
        """The moment the rounds start (every node up, the start signal given): the report
        then also tells how busy the cores were from here on, without the start-up."""
        self._rounds0 = (time.monotonic(),
                         {h: process_cpu_s(p) or 0.0 for h, p in pids.items()},
                         {s: process_cpu_s(p) for s, p in self._switch_pids.items()})
        self._machine0 = machine_busy_s()

    def report(self) -> dict[str, Any]:
        switches = {}
        for s, pid in self._switch_pids.items():
            a, b = self._switch0.get(s), process_cpu_s(pid)
            if a is not None and b is not None:
                switches[s] = round(b - a, 3)
        wall = time.monotonic() - self._t0
        nodes_total = sum(self.per_host.values())
        return {
            "wall_s": round(wall, 3),
            "nodes_cpu_s": {h: round(v, 3) for h, v in sorted(self.per_host.items())},
            "nodes_cpu_total_s": round(nodes_total, 3),
            # every child reaped meanwhile (the node processes): exact, where /proc lagged
            "reaped_children_cpu_s": round(self._children_s() - self._children0, 3),
            "switches_cpu_s": switches,
            "switches_cpu_total_s": round(sum(switches.values()), 3),
            # cores busy on average: near os.cpu_count() means the run was CPU-bound
            "busy_cores": round((nodes_total + sum(switches.values())) / wall, 2)
            if wall > 0 else None,
            "cpus": os.cpu_count(),
            # a pool's CPU is in nodes_cpu_s under its first host; here the hosts it served
            **({"nodes_serve": {h: list(v) for h, v in sorted(self.serves.items())}}
               if self.serves else {}),
            **self._rounds_report(),
        }

    def _rounds_report(self) -> dict[str, Any]:
        """``rounds_wall_s`` and ``rounds_busy_cores``: from :meth:`mark_rounds` to now."""
        mark = self._rounds0
        if mark is None:
            return {}
        t0, nodes0, switches0 = mark
        wall = time.monotonic() - t0
        nodes = sum(max(0.0, v - nodes0.get(h, 0.0)) for h, v in self.per_host.items())
        sw = 0.0
        for s, pid in self._switch_pids.items():
            a, b = switches0.get(s), process_cpu_s(pid)
            if a is not None and b is not None:
                sw += b - a
        machine0, machine = self._machine0, machine_busy_s()
        return {"rounds_wall_s": round(wall, 3),
                "rounds_busy_cores": round((nodes + sw) / wall, 2) if wall > 0 else None,
                # the rounds' CPU seconds by role: the node processes' (workers, pools, PS)
                # and the switches', without the start-up (imports, replicas, sockets)
                "rounds_nodes_cpu_s": round(nodes, 3),
                "rounds_switches_cpu_s": round(sw, 3),
                # every process of the machine (other users' too): cores can bind a run
                # whose own processes leave some idle
                "rounds_machine_busy_cores": (round((machine - machine0) / wall, 2)
                                              if wall > 0 and None not in (machine0, machine)
                                              else None)}
