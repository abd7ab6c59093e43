"""Node processes on Mininet hosts: launch, follow, start barrier, wait, logs.

Every ``run --method`` starts one Python process per host (``python -m workers.<node> ...``)
and needs the same handling around them: their merged stdout/stderr followed line by line (for
progress bars and for the error message if one fails), a start barrier on the ``... ready`` line
each node prints once its sockets are up, one deadline for the whole run, every process
killed whatever happens, and all output kept in ``<log_dir>/logs.txt``.  The methods differ only
in which lines advance their progress bar, so that is the ``on_line`` hook.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from controller.errors import ExperimentError
from controller.experiment.provenance import CpuClock

ROOT = Path(__file__).resolve().parents[2]
READY_SUFFIX = " ready"  # the last word of the line a node prints when it can be started


class HostProcesses:
    """The processes of one run, at most one per Mininet host; a context manager.

    ``on_line(host, line)`` sees every output line (after it is logged).  Leaving the ``with``
    block kills what still runs and writes ``logs.txt``.  ``cpu`` (optional) samples every
    process's CPU time before each poll, so the provenance can say what each one used."""

    def __init__(self, net: Any, label: str, log_dir: Path,
                 on_line: Callable[[str, str], None] | None = None,
                 cpu: CpuClock | None = None) -> None:
        self.net = net
        self.cpu = cpu
        self.label = label
        self.log_file = Path(log_dir) / "logs.txt"
        self.on_line = on_line
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, list[str]] = {}
        self._ready = threading.Semaphore(0)
        self._pumps: list[threading.Thread] = []

    def __enter__(self) -> HostProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def launch(self, host: str, module: str, *args: str) -> subprocess.Popen:
        """Start ``python -m module args...`` on ``host`` (from the project root)."""
        proc = self.net.get(host).popen([sys.executable, "-m", module, *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, cwd=str(ROOT))
        self.procs[host] = proc
        self.logs[host] = []

        def pump() -> None:
            for line in iter(proc.stdout.readline, ""):
                self.logs[host].append(line)
                if line.rstrip().endswith(READY_SUFFIX):
                    self._ready.release()
                elif self.on_line is not None:
                    self.on_line(host, line)
        t = threading.Thread(target=pump, daemon=True)
        t.start()
        self._pumps.append(t)
        return proc

    def wait_ready(self, count: int, what: str, timeout_s: float = 60.0) -> None:
        """Block until ``count`` more nodes said they are ready (ExperimentError after
        ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        for _ in range(count):
            if not self._ready.acquire(timeout=max(0.1, deadline - time.monotonic())):
                raise ExperimentError(f"{self.label}: {what} did not start within "
                                      f"{timeout_s:g} s (see {self.log_file})")

    def wait(self, hosts: Iterable[str], deadline: float,
             watch: Callable[[], None] | None = None,
             on_failure: Callable[[str, int], bool] | None = None) -> dict[str, int]:
        """Exit codes of ``hosts``' processes, waiting until ``deadline`` (time.monotonic).

        The first process that fails ends the wait (the others would only wait for its
        messages until the deadline): then the codes of those still running are absent, and
        :meth:`check` names the failed one.  ``watch()`` runs every poll (e.g. the switch
        failure monitor); what it raises ends the wait.  ``on_failure(host, code)`` sees a
        failed process first: True means the method took the host out of the job (a worker
        removed, docs/design.md §9), which is then no longer waited for."""
        hosts = list(hosts)
        while True:
            if watch is not None:
                watch()
            codes = {h: self._poll(h) for h in hosts}
            done = {h: c for h, c in codes.items() if c is not None}
            if on_failure is not None:
                for h, c in list(done.items()):
                    if c != 0 and on_failure(h, c):
                        hosts.remove(h)
                        del done[h]
            if len(done) == len(hosts) or any(c != 0 for c in done.values()):
                return done
            if time.monotonic() > deadline:
                raise ExperimentError(f"{self.label}: the run did not finish in time "
                                      f"(see {self.log_file})")
            time.sleep(0.05)

    def stop(self, host: str, timeout_s: float) -> int:
        """Ask ``host``'s process to finish (SIGTERM: servers that answer late requests until
        every client is done) and return its exit code."""
        proc = self.procs[host]
        proc.terminate()
        deadline = time.monotonic() + timeout_s
        while (code := self._poll(host)) is None:
            if time.monotonic() > deadline:
                raise ExperimentError(f"{self.label}: the process on {host} did not stop "
                                      f"within {timeout_s:g} s (see {self.log_file})")
            time.sleep(0.02)
        return code

    def _poll(self, host: str) -> int | None:
        """``Popen.poll`` after a CPU sample: an exited process is a zombie until polled, and
        a zombie's /proc entry holds its final CPU time."""
        proc = self.procs[host]
        if self.cpu is not None and proc.returncode is None:
            self.cpu.sample(host, proc.pid)
        return proc.poll()

    def last_line(self, host: str) -> str:
        return "".join(self.logs.get(host, [])[-1:]).strip() or "(no output)"

    def check(self, codes: dict[str, int], what: str) -> None:
        """ExperimentError naming the hosts whose process failed, with the first one's last
        output line."""
        failed = [h for h, c in codes.items() if c != 0]
        if failed:
            c = codes[failed[0]]
            how = f"killed by signal {-c}" if c < 0 else f"exit {c}"
            raise ExperimentError(f"{self.label}: {what} on {', '.join(failed)} failed "
                                  f"({how}); last output: {self.last_line(failed[0])} "
                                  f"(see {self.log_file})")

    def close(self) -> None:
        """Kill what still runs, then write every host's output to ``logs.txt``."""
        for host, proc in self.procs.items():
            if self._poll(host) is None:
                proc.kill()
                proc.wait()
        for t in self._pumps:
            t.join(timeout=2.0)  # the last lines of a killed process
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.write_text("".join(f"--- {h}\n{''.join(lines)}"
                                         for h, lines in self.logs.items()))
