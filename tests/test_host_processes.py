"""controller.experiment.host_processes on plain local processes (a stand-in for Mininet's ``net``)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from controller.errors import ExperimentError
from controller.experiment.host_processes import HostProcesses


class _Host:
    """Runs ``script`` (with the launch's arguments as sys.argv[1:]) instead of the module."""

    def __init__(self, script: str) -> None:
        self.script = script

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        assert cmd[:2] == [sys.executable, "-m"]
        return subprocess.Popen([sys.executable, "-c", self.script, *cmd[3:]], **kw)


class _Net:
    def __init__(self, scripts: dict[str, str]) -> None:
        self.hosts = {h: _Host(s) for h, s in scripts.items()}

    def get(self, name: str) -> _Host:
        return self.hosts[name]


NODE = """
import sys, time
print("node", sys.argv[1], "ready", flush=True)
for r in range(3):
    print("round", r, flush=True)
print("bye from", sys.argv[1], flush=True)
sys.exit(int(sys.argv[2]))
"""
SERVER = """
import time
print("server ready", flush=True)
while True:
    time.sleep(0.05)
"""


def test_barrier_progress_codes_and_logs(tmp_path):
    seen: list[tuple[str, str]] = []
    net = _Net({"h1": NODE, "h2": NODE, "h0": SERVER})
    with HostProcesses(net, "demo", tmp_path, lambda h, line: seen.append((h, line))) as nodes:
        nodes.launch("h0", "workers.any")
        nodes.wait_ready(1, "the server")
        nodes.launch("h1", "workers.any", "h1", "0")
        nodes.launch("h2", "workers.any", "h2", "0")
        nodes.wait_ready(2, "the nodes")
        codes = nodes.wait(["h1", "h2"], time.monotonic() + 30)
        server_code = nodes.stop("h0", 5)
    assert codes == {"h1": 0, "h2": 0}
    assert server_code == -15  # SIGTERM
    # ready lines go to the barrier, every other line to on_line
    assert sorted(x for x in seen if x[0] == "h1") == [
        ("h1", "bye from h1\n"), ("h1", "round 0\n"), ("h1", "round 1\n"), ("h1", "round 2\n")]
    log = (tmp_path / "logs.txt").read_text()
    assert "--- h2\nnode h2 ready\n" in log and "bye from h2" in log
    with pytest.raises(ExperimentError, match=r"^demo: worker on h2 failed \(exit 3\); last output: bye from h2 "):
        nodes.check({"h1": 0, "h2": 3}, "worker")
    nodes.check(codes, "worker")  # nothing failed: no error


def test_start_timeout_kills_and_keeps_logs(tmp_path):
    net = _Net({"h1": "import time; print('starting', flush=True); time.sleep(60)"})
    with pytest.raises(ExperimentError, match="the nodes did not start within 0.5 s"):
        with HostProcesses(net, "demo", tmp_path) as nodes:
            proc = nodes.launch("h1", "workers.any")
            nodes.wait_ready(1, "the nodes", timeout_s=0.5)
    assert proc.poll() is not None  # killed on the way out
    assert "starting" in (tmp_path / "logs.txt").read_text()


def test_run_deadline(tmp_path):
    net = _Net({"h1": SERVER})
    with pytest.raises(ExperimentError, match="demo: the run did not finish in time"):
        with HostProcesses(net, "demo", tmp_path) as nodes:
            nodes.launch("h1", "workers.any")
            nodes.wait(["h1"], time.monotonic() + 0.2)


def test_first_failure_ends_the_wait(tmp_path):
    """A node that dies must not leave the run waiting for the deadline."""
    net = _Net({"h1": SERVER, "h2": "import sys; print('boom', flush=True); sys.exit(4)"})
    t = time.monotonic()
    with pytest.raises(ExperimentError, match=r"demo: worker on h2 failed \(exit 4\); last output: boom"):
        with HostProcesses(net, "demo", tmp_path) as nodes:
            server = nodes.launch("h1", "workers.any")
            nodes.launch("h2", "workers.any")
            codes = nodes.wait(["h1", "h2"], time.monotonic() + 60)
            assert codes == {"h2": 4}  # h1 still runs: no code
            nodes.check(codes, "worker")
    assert time.monotonic() - t < 30
    assert server.poll() is not None  # killed on the way out
