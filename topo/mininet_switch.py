"""Mininet switch classes that run a P4 target with a P4Runtime server on loopback.

* :class:`PySwitch` starts ``python -m pyswitch run`` (with the venv's interpreter).
* :class:`BMv2Switch` starts BMv2's ``simple_switch_grpc`` (when installed).

Both: one switch process per Mininet switch, in the root namespace (Mininet switches are not
in a namespace), ports ``-i N@<switch>-ethN`` from Mininet's port numbers, a per-switch gRPC
port on 127.0.0.1.  ``start`` launches the process; Mininet's ``net.start()`` then calls
:meth:`P4RuntimeSwitch.batchStartup`, which returns once every switch's P4Runtime server
answers (gRPC channel ready), so that the 80 switches of a k=8 fat-tree start side by side
instead of one after the other (code that calls ``start`` itself calls ``wait_ready``
after it).  ``stop`` terminates the process (SIGTERM, then SIGKILL after a grace period);
:meth:`P4RuntimeSwitch.batchShutdown` signals every switch first and then waits.
The controller then pushes the pipeline over P4Runtime (or a compiled program is given).

:class:`PySwitch` can also run several switches per process (``pyswitch run-many``,
:mod:`topo.switch_groups`): its ``start`` then only prepares the switch, and
``batchStartup`` launches one process per group; every switch of a group has the group's
process as ``proc`` (a shared process is signalled once: ``stop`` of the first switch ends
it, the others find it ended), and the CPU accounting counts it once, under the group's
first switch (:func:`topo.switch_groups.counted_once`).  Stopping one switch of a group
stops the group: ``--fail-switch`` runs one switch per process.

:data:`TARGETS` names the classes (``--target``), as Mininet's ``SWITCHES`` does: what
differs between targets is a property of the class -- how a P4 program is compiled for it
(:meth:`P4RuntimeSwitch.compile_command`), which tools the machine needs
(:meth:`P4RuntimeSwitch.missing_tools`) and which run-time options it takes
(:attr:`P4RuntimeSwitch.impairments`, :attr:`P4RuntimeSwitch.control_sockets`) -- so a new
target is a class and a line, and no caller asks which target it has.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import grpc
from mininet.node import Switch

from pyswitch.queues import rate_pps
from topo.switch_groups import DEFAULT, ENV, parse_per_process, per_process, plan_groups

_device_ids = itertools.count(1)


_given_ports: set[int] = set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, never one this process handed out before: the
    switches of a network take theirs only when they start, so the kernel may offer a freed
    port twice meanwhile (two switches on one port: the second one's deploy reaches the
    first one, "unknown device id")."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port


class SwitchStartError(RuntimeError):
    """The switch process exited or did not answer on its gRPC port in time."""


class P4RuntimeSwitch(Switch):
    """Common part: process management and readiness wait. Subclasses build the command."""

    binary_name = "switch"
    # what the machine must have on PATH to compile for and run this target, and where to
    # read how to install it
    required_tools: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""
    # run-time options only some targets take: link impairments (``impair``), a control
    # socket per switch (``control_socket``)
    impairments: ClassVar[bool] = False
    control_sockets: ClassVar[bool] = False
    # several switches in one process (``per_process``, topo.switch_groups)
    process_groups: ClassVar[bool] = False

    @classmethod
    def missing_tools(cls) -> list[str]:
        """The tools of :attr:`required_tools` not on PATH (empty: the machine can run it)."""
        return [t for t in cls.required_tools if shutil.which(t) is None]

    @classmethod
    def compile_command(cls, program: Path, config: Path, p4info: Path,
                        defines: Sequence[str] = ()) -> list[str]:  # pragma: no cover
        """The command that compiles ``program`` into the device config ``config`` (named
        ``<program stem>.json``) and the P4Info text file ``p4info``; ``defines`` are
        ``-DNAME=VALUE`` preprocessor options."""
        raise NotImplementedError

    @classmethod
    def warm_up(cls, config: Path) -> str | None:
        """Prepare what every switch of this target would otherwise do at its start (once, in
        the controller's process) and say in one line which execution path they will run;
        None: nothing to prepare or to say."""
        del config
        return None

    def __init__(self, name: str, grpc_port: int | None = None, device_id: int | None = None,
                 config: str | None = None, cpu_port: int | None = None,
                 log_dir: str | None = None, start_timeout: float = 20.0,
                 extra_args: list[str] | None = None, dpid: str | None = None,
                 **params: Any) -> None:
        self.device_id = next(_device_ids) if device_id is None else device_id
        dpid = dpid or f"{self.device_id:016x}"
        super().__init__(name, dpid=dpid, **params)
        self.grpc_port = grpc_port or free_port()
        self.config = config
        self.cpu_port = cpu_port
        self.log_dir = log_dir
        self.start_timeout = start_timeout
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen | None = None
        self.log_path: str | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def port_interfaces(self) -> dict[int, str]:
        """Switch port number → interface name (Mininet's numbering, loopback excluded)."""
        return {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}

    def command(self) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _disable_ipv6(self) -> None:
        for ifname in self.port_interfaces().values():
            try:  # no IPv6 chatter from the switch's own interfaces
                with open(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6", "w") as f:
                    f.write("1")
            except OSError:
                pass

    def start(self, controllers: list[Any]) -> None:
        self._disable_ipv6()
        log_dir = self.log_dir or "/tmp"
        os.makedirs(log_dir, exist_ok=True)
        self.log_path = os.path.join(log_dir, f"{self.name}-{self.binary_name}.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    @classmethod
    def batchStartup(cls, switches: tuple[P4RuntimeSwitch, ...]) -> tuple[P4RuntimeSwitch, ...]:  # noqa: N802
        """Mininet's hook after every ``start``: wait until every switch answers.  The
        processes start together, so each gets ``start_timeout`` plus 0.5 s per switch
        started with it (on 2 cores, 80 interpreters importing at once take a while)."""
        extra = 0.5 * len(switches)
        for sw in switches:
            sw.wait_ready(sw.start_timeout + extra)
        return switches

    @classmethod
    def batchShutdown(cls, switches: tuple[P4RuntimeSwitch, ...]) -> tuple[P4RuntimeSwitch, ...]:  # noqa: N802
        """Mininet's hook before the switches' ``stop``: SIGTERM every process first, so
        that they exit side by side; ``stop`` then only reaps them.  A process that runs
        several switches (``PySwitch`` groups) is signalled once."""
        signalled: set[int] = set()
        for sw in switches:
            if sw.proc is not None and sw.proc.poll() is None and id(sw.proc) not in signalled:
                signalled.add(id(sw.proc))
                sw.proc.send_signal(signal.SIGTERM)
        return ()  # Mininet still calls every switch's stop (interfaces, reaping)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the gRPC server accepts connections (at most ``timeout`` seconds,
        default ``start_timeout``); raise with the log tail if the process died or the
        timeout passed."""
        limit = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        channel = grpc.insecure_channel(self.grpc_address)
        # One future for the whole wait, cancelled before the channel closes: a future left
        # polling a closed channel dies with "Channel closed!" in its thread.
        ready = grpc.channel_ready_future(channel)
        try:
            while True:
                if self.proc is not None and self.proc.poll() is not None:
                    raise SwitchStartError(f"{self.name}: {self.binary_name} exited with "
                                           f"status {self.proc.returncode}: {self._log_tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    self._terminate()
                    raise SwitchStartError(f"{self.name}: no P4Runtime answer on "
                                           f"{self.grpc_address} within {limit:g} s")
                try:
                    ready.result(timeout=min(0.25, left))
                    return
                except grpc.FutureTimeoutError:
                    continue
        finally:
            ready.cancel()
            channel.close()

    def _log_tail(self) -> str:
        try:
            with open(self.log_path or "", errors="replace") as f:
                lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
            return lines[-1] if lines else "(no output)"
        except OSError:
            return "(no log)"

    def _terminate(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's name)
        self._terminate()
        super().stop(deleteIntfs)

    def connected(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def group_spec(commands: list[list[str]]) -> dict[str, Any]:
    """``pyswitch run-many``'s SPEC.json from the switches' ``pyswitch run`` command lines
    (each ``[python, -m, pyswitch, run, ARG...]``): their arguments (pure)."""
    out = []
    for cmd in commands:
        i = cmd.index("run")
        out.append(cmd[i + 1:])
    return {"switches": out}


def queue_rate_flags(port_mbps: dict[int, float], frame_bytes: int = 1500) -> list[str]:
    """``pyswitch run`` flags that set each port's egress queue rate from its link's rate
    (Mbit/s, e.g. a TCLink's ``bw``): ``--queue-rate PORT:PPS`` per port, the packets per
    second that fill the link with `frame_bytes`-byte frames (`pyswitch.queues.rate_pps`,
    at least 1).  BMv2 has no such flag: its runtime CLI's ``set_queue_rate`` does it."""
    out: list[str] = []
    for port, mbps in sorted(port_mbps.items()):
        out += ["--queue-rate", f"{port}:{max(1, round(rate_pps(mbps, frame_bytes)))}"]
    return out


class PySwitch(P4RuntimeSwitch):
    """``python -m pyswitch run`` as a Mininet switch.

    Extra options: ``impair`` (list of ``PORT|all:spec`` strings, see ``pyswitch run
    --impair``), ``control_socket`` (path of the run-time control socket),
    ``python`` (interpreter; default: this process's, i.e. the project venv),
    ``port_mbps`` (port -> its link's rate in Mbit/s: the egress queue rates,
    `queue_rate_flags`; default none, no queueing in the switch)."""

    binary_name = "pyswitch"
    impairments = True
    control_sockets = True
    process_groups = True

    @classmethod
    def compile_command(cls, program: Path, config: Path, p4info: Path,
                        defines: Sequence[str] = ()) -> list[str]:
        return [sys.executable, "-m", "pyswitch", "compile", str(program), "-o", str(config),
                *defines, "--p4runtime-files", str(p4info)]

    @classmethod
    def warm_up(cls, config: Path) -> str | None:
        """Build the native module of ``config`` once (PYSWITCH_NATIVE is the switches' too),
        sparing every switch the wait; returns :attr:`pyswitch.Switch.path`'s account."""
        import time

        from pyswitch import Switch, load_compiled

        t0 = time.perf_counter()
        sw = Switch(load_compiled(config))
        return (f"the native path (the pipeline compiled to C, {time.perf_counter() - t0:.1f} s)"
                if not sw.native_why else f"the Python path ({sw.native_why})")

    def __init__(self, name: str, impair: list[str] | None = None,
                 control_socket: str | None = None, python: str | None = None,
                 port_mbps: dict[int, float] | None = None,
                 per_process: int | str | None = None, **params: Any) -> None:
        super().__init__(name, **params)
        self.impair = list(impair or [])
        self.port_mbps = dict(port_mbps or {})
        self.control_socket = control_socket
        self.python = python or sys.executable
        # switches per process: the option, else PYSWITCH_PER_PROCESS, else the default
        # (topo.switch_groups); the group this switch ran in once started
        self.per_process = (per_process if per_process is not None
                            else parse_per_process(os.environ.get(ENV, DEFAULT)))
        self.group: tuple[str, ...] = (name,)
        self._deferred = False

    def start(self, controllers: list[Any]) -> None:
        """As :meth:`P4RuntimeSwitch.start`; with more than one switch per process the
        launch waits for :meth:`batchStartup`, which sees the whole network."""
        if self.per_process == 1:
            self._deferred = False
            return super().start(controllers)
        self._disable_ipv6()
        self._deferred = True

    @classmethod
    def batchStartup(cls, switches: tuple[P4RuntimeSwitch, ...]) -> tuple[P4RuntimeSwitch, ...]:  # noqa: N802
        """Launch the switches whose ``start`` waited, one ``pyswitch run-many`` per group
        (:func:`topo.switch_groups.plan_groups`, the group size from the first one's
        ``per_process`` and the network's switch count), then wait for every switch."""
        waiting = [sw for sw in switches if isinstance(sw, PySwitch) and sw._deferred]
        if waiting:
            size = per_process(waiting[0].per_process, len(waiting), os.cpu_count() or 1)
            by_name = {sw.name: sw for sw in waiting}
            for names in plan_groups([sw.name for sw in waiting], size):
                PySwitch._launch_group([by_name[n] for n in names])
        return super().batchStartup(switches)

    def wait_ready(self, timeout: float | None = None) -> None:
        """As :meth:`P4RuntimeSwitch.wait_ready`; a switch whose ``start`` waited for a
        ``batchStartup`` that never came (code that starts a switch itself) is launched
        alone first."""
        if self._deferred:
            PySwitch._launch_group([self])
        super().wait_ready(timeout)

    @staticmethod
    def _launch_group(group: list[PySwitch]) -> None:
        """One process for ``group`` (a single switch: ``pyswitch run`` as today), its spec
        and log beside the switches' logs, named after its first switch."""
        first = group[0]
        first._deferred = False
        if len(group) == 1:
            return P4RuntimeSwitch.start(first, [])
        log_dir = first.log_dir or "/tmp"
        os.makedirs(log_dir, exist_ok=True)
        spec = os.path.join(log_dir, f"{first.name}-group.json")
        with open(spec, "w") as f:
            json.dump(group_spec([sw.command() for sw in group]), f)
        log_path = os.path.join(log_dir, f"{first.name}-{first.binary_name}-group.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([first.python, "-m", "pyswitch", "run-many", spec],
                                    stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        names = tuple(sw.name for sw in group)
        for sw in group:
            sw._deferred = False
            sw.proc, sw.log_path, sw.group = proc, log_path, names

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "pyswitch", "run", "--device-id", str(self.device_id),
               "--grpc-server-addr", self.grpc_address, "--log-console"]
        for port, ifname in sorted(self.port_interfaces().items()):
            cmd += ["-i", f"{port}@{ifname}"]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        for spec in self.impair:
            cmd += ["--impair", spec]
        if self.control_socket:
            cmd += ["--control-socket", self.control_socket]
        cmd += queue_rate_flags(self.port_mbps)
        cmd += self.extra_args
        cmd += [self.config] if self.config else ["--no-p4"]
        return cmd


class BMv2Switch(P4RuntimeSwitch):
    """BMv2 ``simple_switch_grpc`` as a Mininet switch (needs it on PATH)."""

    binary_name = "simple_switch_grpc"
    required_tools = ("p4c", "simple_switch_grpc")
    install_hint = "see docker/Dockerfile"

    @staticmethod
    def available() -> bool:
        return shutil.which("simple_switch_grpc") is not None

    @classmethod
    def compile_command(cls, program: Path, config: Path, p4info: Path,
                        defines: Sequence[str] = ()) -> list[str]:
        # p4c names its JSON after the program inside the -o folder
        return ["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(config.parent),
                *defines, "--p4runtime-files", str(p4info), str(program)]

    def command(self) -> list[str]:
        exe = shutil.which(self.binary_name)
        if exe is None:
            raise SwitchStartError("simple_switch_grpc is not installed (not on PATH)")
        cmd = [exe, "--device-id", str(self.device_id), "--log-console",
               "--thrift-port", str(free_port())]
        for port, ifname in sorted(self.port_interfaces().items()):
            cmd += ["-i", f"{port}@{ifname}"]
        cmd += self.extra_args
        cmd += [self.config] if self.config else ["--no-p4"]
        cmd += ["--", "--grpc-server-addr", self.grpc_address]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        return cmd


TARGETS: dict[str, type[P4RuntimeSwitch]] = {
    "pyswitch": PySwitch,
    "bmv2": BMv2Switch,
}
"""``--target`` name -> switch class (the first is the default)."""
