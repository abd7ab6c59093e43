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
    """Pass-through executables named as the launchers' users would name them."""
    where.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, command in (("pyswitch-p4c-bm2-ss", "compile"),
                          ("pyswitch-simple-switch-grpc", "run")):
        p = where / name
        p.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" '
                     f'exec "{sys.executable}" -m pyswitch {command} "$@"\n')
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
