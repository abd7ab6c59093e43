"""pyswitch in the launchers P4 users already have (issue 30), run as they are:

- p4lang/tutorials' ``basic`` exercise (its solution) on the pod topology: ``make build
  P4C=<wrapper>`` and ``utils/run_exercise.py -b <wrapper>``, pings between every pair of
  hosts. Set ``P4_TUTORIALS`` to a copy of p4lang/tutorials (never committed; skipped
  otherwise).

The wrappers only exec ``python -m pyswitch compile|run "$@"``: no flag is rewritten. The
tutorials' client library imports BMv2's ``p4.tmp.p4config_pb2`` (installed with BMv2, not
on PyPI); the test supplies that one module from pyswitch's own declaration of the message
(``pyswitch.p4runtime.pipeline.P4DeviceConfig``), beside the real ``p4`` package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TUTORIALS = os.environ.get("P4_TUTORIALS")


def wrappers(where: Path) -> dict[str, Path]:
    """Pass-through executables named as the launchers' users would name them: each runs
    the entry point of pyproject.toml's [project.scripts] of that name, from this tree."""
    where.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, fn in (("pyswitch-p4c-bm2-ss", "p4c_bm2_ss"), ("pyswitch-p4c", "p4c_driver"),
                     ("pyswitch-simple-switch-grpc", "simple_switch_grpc"),
                     ("pyswitch-simple-switch", "simple_switch")):
        p = where / name
        p.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" exec '
                     f'"{sys.executable}" -c "import sys; from pyswitch.__main__ import {fn}; '
                     f'sys.exit({fn}())" "$@"\n')
        p.chmod(0o755)
        out[name] = p
    return out


def p4tmp_shim(where: Path) -> Path:
    """A directory to put first on PYTHONPATH: package ``p4`` extended to the installed
    one, plus ``p4.tmp.p4config_pb2`` (BMv2's P4DeviceConfig)."""
    pkg = where / "p4"
    (pkg / "tmp").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(
        "import pkgutil\n__path__ = pkgutil.extend_path(__path__, __name__)\n")
    (pkg / "tmp" / "__init__.py").write_text("")
    (pkg / "tmp" / "p4config_pb2.py").write_text(
        "from pyswitch.p4runtime.pipeline import P4DeviceConfig  # noqa: F401\n")
    return where


@pytest.mark.mininet
@pytest.mark.slow
@pytest.mark.skipif(not TUTORIALS, reason="P4_TUTORIALS (a copy of p4lang/tutorials) not set")
def test_tutorials_basic_exercise_on_pyswitch(tmp_path):
    pytest.importorskip("psutil")  # the tutorials' utils/netstat.py
    src = Path(TUTORIALS)
    work = tmp_path / "tutorials"
    shutil.copytree(src / "utils", work / "utils")
    shutil.copytree(src / "exercises" / "basic", work / "exercises" / "basic")
    ex = work / "exercises" / "basic"
    shutil.copy(ex / "solution" / "basic.p4", ex / "basic.p4")
    w = wrappers(tmp_path / "bin")
    env = {**os.environ, "PYTHONPATH": f"{p4tmp_shim(tmp_path / 'shim')}:{REPO}"}
    r = subprocess.run(["make", "build", f"P4C={w['pyswitch-p4c-bm2-ss']}"], cwd=ex, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (ex / "build" / "basic.json").is_file()
    assert (ex / "build" / "basic.p4.p4info.txtpb").is_file()
    # run_exercise.py as the Makefile's `run` target calls it, the BMv2 executable ours
    r = subprocess.run([sys.executable, str(work / "utils" / "run_exercise.py"),
                        "-t", "pod-topo/topology.json", "-j", "build/basic.json",
                        "-b", str(w["pyswitch-simple-switch-grpc"])],
                       cwd=ex, env=env, input="pingall\npingall\n", capture_output=True,
                       text=True, timeout=600)
    out = r.stdout + r.stderr
    logs = "".join(p.read_text(errors="replace")[-1500:] for p in (ex / "logs").glob("s*.log"))
    assert "Results: 0% dropped (12/12 received)" in out, out[-4000:] + logs
    # BMv2's --pcap: one file per switch port and direction, as BMv2 names them
    pcaps = sorted(p.name for p in (ex / "pcaps").iterdir())
    assert "s1-eth1_in.pcap" in pcaps and "s1-eth1_out.pcap" in pcaps


P4_UTILS = os.environ.get("P4_UTILS")

NETWORK = '''"""A p4-utils network of two switches and two hosts, switches programmed by
simple_switch_CLI command files over Thrift (written by tests/test_bmv2_launchers.py)."""
import sys

from p4utils.mininetlib.network_API import NetworkAPI


class Net(NetworkAPI):
    def cleanup(self):
        """p4-utils runs Mininet's cleanup (`mn -c`) here; on a machine shared with other
        Mininet users that kills their networks, so this test network skips it."""


net = Net()
net.setLogLevel("info")
net.disableCli()
net.setCompiler(p4c_bin=sys.argv[1])
for s in ("s1", "s2"):
    net.addP4Switch(s, sw_bin=sys.argv[2])
    net.setP4CliInput(s, f"{s}-commands.txt")
net.setP4SourceAll("rt_forward.p4")
net.addHost("h1")
net.addHost("h2")
net.addLink("h1", "s1")
net.addLink("h2", "s2")
net.addLink("s1", "s2")
net.setIntfPort("s1", "h1", 1)
net.setIntfPort("s1", "s2", 2)
net.setIntfPort("s2", "h2", 1)
net.setIntfPort("s2", "s1", 2)
net.setIntfIp("h1", "s1", "10.0.0.1/24")
net.setIntfIp("h2", "s2", "10.0.0.2/24")
net.setIntfMac("h1", "s1", "00:00:0a:00:00:01")
net.setIntfMac("h2", "s2", "00:00:0a:00:00:02")
net.enablePcapDumpAll()
net.enableLogAll()
net.startNetwork()
loss = net.net.pingAll()
print(f"PINGALL-LOSS {loss}")
net.stopNetwork()
'''

COMMANDS = {
    "s1": "table_add ipv4_lpm ipv4_forward 10.0.0.1/32 => 00:00:0a:00:00:01 1\n"
          "table_add ipv4_lpm ipv4_forward 10.0.0.2/32 => 00:00:0a:00:00:02 2\n",
    "s2": "table_add ipv4_lpm ipv4_forward 10.0.0.2/32 => 00:00:0a:00:00:02 1\n"
          "table_add ipv4_lpm ipv4_forward 10.0.0.1/32 => 00:00:0a:00:00:01 2\n",
}


@pytest.mark.mininet
@pytest.mark.slow
@pytest.mark.skipif(not P4_UTILS, reason="P4_UTILS (a copy of nsg-ethz/p4-utils) not set")
def test_p4utils_network_on_pyswitch(tmp_path):
    pytest.importorskip("psutil")
    work = tmp_path / "net"
    work.mkdir()
    shutil.copy(REPO / "tests" / "p4" / "rt_forward.p4", work / "rt_forward.p4")
    for s, text in COMMANDS.items():
        (work / f"{s}-commands.txt").write_text(text)
    (work / "network.py").write_text(NETWORK)
    w = wrappers(tmp_path / "bin")
    env = {**os.environ, "PYTHONPATH": f"{P4_UTILS}:{REPO}",
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    # p4-utils' P4Switch is BMv2's simple_switch (Thrift only); its compiler the p4c driver
    r = subprocess.run([sys.executable, "network.py", str(w["pyswitch-p4c"]),
                        str(w["pyswitch-simple-switch"])], cwd=work, env=env,
                       capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    logs = "".join(p.read_text(errors="replace")[-1500:] for p in (work / "log").glob("*"))
    assert "PINGALL-LOSS 0.0" in out, out[-4000:] + logs
    assert (work / "pcap" / "s1-eth1_in.pcap").is_file()
    # simple_switch has no P4Runtime server: the two switches do not share port 9559
    assert "P4Runtime on none" in (work / "log" / "p4s.s2.log").read_text()
    assert "Entry has been added with handle 1" in (work / "log" / "s2_cli_output.log").read_text()
