"""Packet-test harness for both targets: pyswitch (``python -m pyswitch run``) and BMv2
(``simple_switch_grpc`` + ``p4c``).

Choose the target with ``--target pyswitch|bmv2`` (when the root conftest registers the
option via :func:`pytest_addoption`) or the environment variable ``INSYNC_TARGET``; the
default is pyswitch. BMv2 tests skip cleanly when ``simple_switch_grpc`` or ``p4c`` is
missing.

Typical use::

    def test_x(target, tmp_path):
        with switch_on_veths(target, 3, tmp_path, program=P4) as env:
            env.client.insert_table_entry(...)
            with env.hosts[0].port() as h1, env.hosts[1].port() as h2:
                h1.send(frame); assert expect_frames(h2, match) == [...]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from netns import HostNs, free_tcp_port, veth_hosts
from p4.config.v1 import p4info_pb2

from controller.dataplane.p4runtime_client import (
    P4RuntimeError,
    SwitchConnection,
    SwitchTimeout,
    WriteError,
)
from pyswitch.p4runtime.p4info_index import load_p4info

TARGETS = ("pyswitch", "bmv2")
REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--target`` (call from the root conftest.py)."""
    parser.addoption("--target", choices=TARGETS,
                     default=os.environ.get("INSYNC_TARGET", "pyswitch"),
                     help="P4 target for packet tests (default: pyswitch)")


def selected_target(config: pytest.Config | None = None) -> str:
    value = None
    if config is not None:
        value = config.getoption("--target", default=None)
    value = value or os.environ.get("INSYNC_TARGET", "pyswitch")
    if value not in TARGETS:
        raise pytest.UsageError(f"unknown target {value!r} (choose from {', '.join(TARGETS)})")
    return value


def require_target(target: str) -> None:
    """Skip the test when the target's tools are not installed."""
    if target == "bmv2":
        missing = [t for t in ("simple_switch_grpc", "p4c") if shutil.which(t) is None]
        if missing:
            pytest.skip(f"BMv2 target: {', '.join(missing)} not on PATH")


@pytest.fixture
def target(request: pytest.FixtureRequest) -> str:
    t = selected_target(request.config)
    require_target(t)
    return t


# ---------------------------------------------------------------- compiling

@dataclass
class Compiled:
    p4info_path: Path
    config_path: Path
    p4info: p4info_pb2.P4Info


_compiled: dict[tuple[str, str, str], Compiled] = {}


def compile_for(target: str, p4_path: str | Path, outdir: Path) -> Compiled:
    """Compile ``p4_path`` for ``target`` into ``outdir`` (cached per process)."""
    p4_path = Path(p4_path)
    key = (target, str(p4_path.resolve()), str(outdir))
    if key in _compiled:
        return _compiled[key]
    outdir.mkdir(parents=True, exist_ok=True)
    stem = p4_path.stem
    p4info_path, config_path = outdir / f"{stem}.p4info.txt", outdir / f"{stem}.json"
    if target == "pyswitch":
        from pyswitch import compile_p4

        prog = compile_p4(str(p4_path))
        prog.save(str(config_path))
        p4info_path.write_text(text_format.MessageToString(prog.p4info))
    else:
        subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model",
                        "--p4runtime-files", str(p4info_path), "-o", str(outdir),
                        str(p4_path)], check=True, capture_output=True, timeout=300)
    result = Compiled(p4info_path, config_path, load_p4info(p4info_path))
    _compiled[key] = result
    return result


# ---------------------------------------------------------------- resetting a switch

def clear_replication(client: SwitchConnection, groups: Iterable[int] = (),
                      sessions: Iterable[int] = ()) -> None:
    """Delete the switch's multicast groups and clone sessions: every one it reads back,
    and ``groups`` / ``sessions`` (the ids a test created) in case it does not list them.

    A pipeline push is not enough on BMv2: it keeps a group's replicas in its data plane
    although P4Runtime reads show no group afterwards (issue 17; behavioral-model issue
    891 reports the same), so later tests see extra copies. Deleting them through
    P4Runtime before the push removes them on every target.
    """
    want_groups, want_sessions = set(groups), set(sessions)
    for read, want in ((client.read_multicast_groups, want_groups),
                       (client.read_clone_sessions, want_sessions)):
        try:
            want.update(read())
        except SwitchTimeout:
            raise
        except P4RuntimeError:  # a server without wildcard reads: the ids given must do
            pass
    for ident, delete in [*((g, client.delete_multicast_group) for g in sorted(want_groups)),
                          *((s, client.delete_clone_session) for s in sorted(want_sessions))]:
        try:
            delete(ident)
        except WriteError as exc:  # already gone (e.g. a test deleted it itself)
            if any(e.code_name != "NOT_FOUND" for e in exc.errors):
                raise


def reset_switch(client: SwitchConnection, compiled: Compiled, groups: Iterable[int] = (),
                 sessions: Iterable[int] = ()) -> None:
    """Fresh switch state for the next test: delete the replication entries
    (:func:`clear_replication`), then push the pipeline again (empty tables, zero
    registers and counters)."""
    clear_replication(client, groups, sessions)
    client.set_pipeline(compiled.p4info_path, compiled.config_path)


# ---------------------------------------------------------------- switch process

@dataclass
class SwitchProcess:
    proc: subprocess.Popen
    address: str
    device_id: int
    log_path: Path
    control_socket: str | None = None
    clients: list[SwitchConnection] = field(default_factory=list)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def client(self, election_id: int = 1, connect: bool = True) -> SwitchConnection:
        c = SwitchConnection(self.address, self.device_id, election_id, name="sw", timeout=10)
        self.clients.append(c)
        return c.connect() if connect else c

    def stop(self) -> int | None:
        for c in self.clients:
            with contextlib.suppress(Exception):
                c.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def switch_command(target: str, ports: dict[int, str], address: str, device_id: int = 0,
                   config: Path | None = None, cpu_port: int | None = None,
                   impair: tuple[str, ...] = (), control_socket: str | None = None) -> list[str]:
    if target == "pyswitch":
        cmd = [sys.executable, "-m", "pyswitch", "run", "--device-id", str(device_id),
               "--grpc-server-addr", address, "--log-console"]
        for n, ifname in sorted(ports.items()):
            cmd += ["-i", f"{n}@{ifname}"]
        if cpu_port is not None:
            cmd += ["--cpu-port", str(cpu_port)]
        for spec in impair:
            cmd += ["--impair", spec]
        if control_socket:
            cmd += ["--control-socket", control_socket]
        return cmd + ([str(config)] if config else ["--no-p4"])
    cmd = ["simple_switch_grpc", "--device-id", str(device_id), "--log-console",
           "--thrift-port", str(free_tcp_port())]
    for n, ifname in sorted(ports.items()):
        cmd += ["-i", f"{n}@{ifname}"]
    cmd += [str(config)] if config else ["--no-p4"]
    cmd += ["--", "--grpc-server-addr", address]
    if cpu_port is not None:
        cmd += ["--cpu-port", str(cpu_port)]
    return cmd


def start_switch(target: str, ports: dict[int, str], log_dir: Path, *, device_id: int = 0,
                 config: Path | None = None, cpu_port: int | None = None,
                 impair: tuple[str, ...] = (), control_socket: str | None = None,
                 timeout: float = 20.0) -> SwitchProcess:
    """Start the switch process and wait until its gRPC server answers."""
    address = f"127.0.0.1:{free_tcp_port()}"
    log_path = log_dir / f"switch-{address.split(':')[1]}.log"
    cmd = switch_command(target, ports, address, device_id, config, cpu_port, impair,
                         control_socket)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True)
    sp = SwitchProcess(proc, address, device_id, log_path, control_socket)
    channel = grpc.insecure_channel(address)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"switch exited ({proc.returncode}): {sp.log()[-2000:]}")
            if time.monotonic() > deadline:
                sp.stop()
                raise RuntimeError(f"switch did not answer on {address} within {timeout} s")
            try:
                grpc.channel_ready_future(channel).result(timeout=0.25)
                return sp
            except grpc.FutureTimeoutError:
                continue
    finally:
        channel.close()


@dataclass
class Env:
    hosts: list[HostNs]
    switch: SwitchProcess
    client: SwitchConnection | None
    compiled: Compiled | None


@contextlib.contextmanager
def switch_on_veths(target: str, n_hosts: int, workdir: Path, program: str | Path | None = None,
                    cpu_port: int | None = None, impair: tuple[str, ...] = (),
                    control_socket: bool = False) -> Iterator[Env]:
    """Namespaces h1..hN wired to switch ports 1..N; the switch runs; if ``program`` is given
    it is compiled for the target and pushed with the project's client (election id 1)."""
    with veth_hosts(n_hosts) as hosts:
        sock = str(workdir / "ctl.sock") if control_socket else None
        sw = start_switch(target, {i + 1: h.switch_if for i, h in enumerate(hosts)}, workdir,
                          cpu_port=cpu_port, impair=impair, control_socket=sock)
        try:
            client = None
            compiled = None
            if program is not None:
                compiled = compile_for(target, program, workdir / "build")
                client = sw.client(election_id=1)
                client.set_pipeline(compiled.p4info_path, compiled.config_path)
            yield Env(hosts, sw, client, compiled)
        finally:
            code = sw.stop()
            if code not in (0, -signal.SIGTERM):
                print(sw.log()[-3000:])
