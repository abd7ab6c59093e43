"""A Mininet network spread over several servers with Mininet's cluster mode
(``mininet.examples.cluster``; ``run --servers A,B,...``, docs/servers.md).

What the cluster module carries as shipped: a node on another server is a
:class:`~mininet.examples.cluster.RemoteMixin` node (its shell and every command through
``ssh`` to that server), a link between two nodes on one server is a veth pair made there,
and a link between servers is a :class:`~mininet.examples.cluster.RemoteLink` tunnel.  What
this module adds, each for a place where the shipped code does not fit an INSync run:

* :class:`ClusterSpec` -- the servers, their addresses and the ssh options (``-F CONFIG``
  and time-outs) that every ssh the cluster starts must carry; the shipped classes keep
  their ssh command in class attributes, so the classes are made per network
  (:func:`cluster_classes`);
* the tunnel (:func:`cluster_classes`' link) is ``RemoteLink``'s SSH tunnel (tap devices
  joined by ``ssh -w``) with those options, a tap number of its own instead of the hard-wired
  ``tap9`` (removed again if the tunnel fails), and ``TCIntf`` interfaces so that a tunnel is
  shaped like any other link (the shipped ``RemoteLink`` is a plain ``Link``);
* a remote host's processes (``popen``) start in the project folder, end when their local
  ``ssh`` ends (the shipped ``popen`` leaves them running on the server), and
  ``terminate()`` sends them SIGTERM, so that their own exit status comes back;
* on the local server processes start as plain Mininet starts them (the shipped
  ``RemoteMixin._popen`` makes each a process-group leader, whereupon ``mnexec -d`` forks
  and the ``Popen`` ends at once while the command runs on), and ssh is started directly,
  not as ``sudo -u USER ssh`` for the user already running (SIGKILL to sudo leaves ssh);
* :class:`ClusterPySwitch` -- pyswitch started on the switch's server, listening for
  P4Runtime on that server's address (the controller reaches ``SERVER:PORT``);
* :class:`ClusterNet` -- reads a remote switch's interface counters on its server.

The placement itself is pure logic (:mod:`topo.cluster_placement`).  Every server must hold
the project and its interpreter at the same paths as this one, and see the run folder at the
same path (docs/servers.md §4).
"""

from __future__ import annotations

import getpass
import os
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from topo.cluster_placement import Placement
from topo.mininet_net import MininetNet, build_net, quiet_tc_intf

__all__ = ["ClusterError", "ClusterSpec", "ClusterNet", "ROOT", "resolve_server",
           "is_local_address", "check_server", "cluster_classes", "remote_script",
           "build_cluster_net"]

ROOT = Path(__file__).resolve().parents[1]
LOCAL = "localhost"  # Mininet's name of the server the network is built on


class ClusterError(RuntimeError):
    """A server that cannot be used (one line: which server and why)."""


@dataclass(frozen=True)
class ClusterSpec:
    """The servers of one network: the placement, every server's IPv4 address and the ssh
    options every ssh to them carries (``ssh_config``: a client configuration for ``-F``;
    None: ssh's own, ``~/.ssh/config``)."""

    placement: Placement
    addresses: dict[str, str]
    ssh_config: str | None = None
    user: str = field(default_factory=lambda: os.environ.get("USER") or "root")

    def ssh_options(self) -> list[str]:
        """``-F CONFIG`` (if any), batch mode, a connect time-out."""
        opts = ["-F", self.ssh_config] if self.ssh_config else []
        return [*opts, "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]

    def mininet_server(self, node: str) -> str:
        """The server name Mininet gets for ``node``: "localhost" for the first server."""
        server = self.placement.server_of[node]
        return LOCAL if server == self.placement.servers[0] else server


def resolve_server(name: str) -> str:
    """The IPv4 address of server ``name`` (ClusterError if it has none)."""
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET)
    except (socket.gaierror, UnicodeError):
        raise ClusterError(f"--servers: unknown host {name!r} (no IPv4 address)") from None
    return str(infos[0][4][0])


def is_local_address(ip: str) -> bool:
    """True if ``ip`` is an address of this machine (a socket can bind to it)."""
    with socket.socket() as s:
        try:
            s.bind((ip, 0))
        except OSError:
            return False
    return True


def check_server(name: str, ip: str, ssh_options: list[str], timeout_s: float = 15.0) -> None:
    """ClusterError unless ``ssh`` reaches ``name`` without a password, ``sudo`` works there
    and the project and interpreter sit at this machine's paths."""
    probe = (f"sudo -n true && test -d {shlex.quote(str(ROOT))} && "
             f"test -x {shlex.quote(sys.executable)} && echo insync-ok")
    try:
        proc = subprocess.run(["ssh", *ssh_options, "-n", ip, probe], capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"--servers: {name} ({ip}) did not answer over ssh within "
                           f"{timeout_s:g} s") from None
    if proc.returncode == 255:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise ClusterError(f"--servers: cannot reach {name} ({ip}) over ssh: {last}")
    if "insync-ok" not in proc.stdout:
        raise ClusterError(f"--servers: {name} ({ip}) needs passwordless sudo, the project at "
                           f"{ROOT} and {sys.executable} (docs/servers.md §4)")


def remote_script(cmd: list[str], cwd: Path = ROOT) -> str:
    """A ``sh`` script running ``cmd`` in ``cwd`` on a server and ending it when the ssh
    session's input closes (the local ``ssh`` ended or was killed); exits with its status."""
    run = " ".join(shlex.quote(a) for a in cmd)
    return (f"exec 3<&0; cd {shlex.quote(str(cwd))} || exit 127; {run} & pid=$!; "
            "( cat <&3 >/dev/null 2>&1; kill $pid 2>/dev/null ) >/dev/null 2>&1 & w=$!; "
            "exec 3<&-; wait $pid; rc=$?; kill $w 2>/dev/null; exit $rc")


_tap_numbers = iter(range(100_000 + (os.getpid() % 100_000) * 1000, 2**31 - 2))


def cluster_classes(spec: ClusterSpec, switch_cls: type | None = None
                    ) -> tuple[type, type, type]:
    """(host, switch, link) classes whose ssh carries ``spec``'s options (module
    docstring); ``switch_cls``: pyswitch only (BMv2 is not started remotely)."""
    from mininet.examples import cluster
    from mininet.node import Node
    from mininet.util import decode

    from topo.mininet_switch import PySwitch

    switch_cls = switch_cls or PySwitch

    opts = spec.ssh_options()
    sshbase = ["ssh", *opts, "-q", "-o", "ForwardAgent=yes", "-tt"]
    tc_intf = quiet_tc_intf()
    if switch_cls is not PySwitch:
        raise ClusterError("--servers runs pyswitch switches only (--target pyswitch)")

    class LocalAsMininet:
        """On the local server, processes start as plain Mininet starts them: the shipped
        ``RemoteMixin._popen`` makes every process a group leader, whereupon ``mnexec -d``
        forks and its ``Popen`` ends at once (exit 0) while the command runs on, unwatched
        and never stopped."""

        isRemote: bool

        def _popen(self, cmd: Any, sudo: bool = True, tt: bool = True,
                   **params: Any) -> subprocess.Popen:
            if self.isRemote:
                return super()._popen(cmd, sudo=sudo, tt=tt, **params)  # type: ignore[misc]
            cmd = cmd.split() if isinstance(cmd, str) else cmd  # rcmd's strings, as there
            return Node._popen(self, cmd, **params)  # type: ignore[arg-type]

        def startShell(self, *args: Any, **kwargs: Any) -> None:  # noqa: N802 -- Mininet's
            self.direct_ssh()
            super().startShell(*args, **kwargs)  # type: ignore[misc]

        def terminate(self) -> None:
            """Mininet ends a node's shell with SIGHUP to its process group, which a process
            started under ``nohup`` ignores: a remote shell's ssh then never exits and
            ``stop()`` waits for it forever (seen in a ``nohup make test``).  SIGTERM first."""
            shell = getattr(self, "shell", None)
            if self.isRemote and shell is not None and shell.poll() is None:
                shell.terminate()
                try:
                    shell.wait(10)
                except subprocess.TimeoutExpired:
                    shell.kill()
            super().terminate()  # type: ignore[misc]

        def direct_ssh(self) -> None:
            """ssh itself as the local process of a remote command, not ``sudo -u USER ssh``
            when USER is who runs this: killing sudo (SIGKILL) would leave its ssh, and with
            it the remote command, running."""
            sudo = ["sudo", "-E", "-u", str(getattr(self, "user", ""))]
            if self.sshcmd[:4] == sudo and getpass.getuser() == sudo[3]:  # type: ignore[attr-defined]
                self.sshcmd = self.sshcmd[4:]  # type: ignore[attr-defined]

    class ClusterHost(LocalAsMininet, cluster.RemoteHost):
        """A host on its server; processes start in the project folder."""

        def __init__(self, name: str, **params: Any) -> None:
            self.sshbase = sshbase
            # one process per switch: a remote one is started over ssh, alone
            params.setdefault("per_process", 1)
            super().__init__(name, **params)

        def finishInit(self) -> None:  # noqa: N802 -- Mininet's name
            super().finishInit()
            if self.isRemote:
                self.cmd("cd", shlex.quote(str(ROOT)))

        def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
            if not self.isRemote:
                return super().popen(*args, **kwargs)
            cmd = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
            kwargs.pop("cwd", None)
            kwargs["stdin"] = subprocess.PIPE  # held open: its end ends the remote process
            proc = super().popen(["sh", "-c", shlex.quote(remote_script(cmd))], **kwargs)

            def terminate() -> None:
                """SIGTERM for the remote process (``remote_script``), whose own exit
                status then comes back through ssh (SIGTERM to ssh would be ssh's)."""
                if proc.stdin is not None and not proc.stdin.closed:
                    proc.stdin.close()
            proc.terminate = terminate  # type: ignore[method-assign]
            return proc

    class ClusterSwitch(LocalAsMininet, cluster.RemoteMixin, PySwitch):
        """pyswitch on its server, P4Runtime on the server's address."""

        def __init__(self, name: str, **params: Any) -> None:
            self.sshbase = sshbase
            # one process per switch: a remote one is started over ssh, alone
            params.setdefault("per_process", 1)
            super().__init__(name, **params)

        @property
        def grpc_address(self) -> str:
            host = self.serverIP if self.isRemote else "127.0.0.1"
            return f"{host}:{self.grpc_port}"

        def start(self, controllers: list[Any]) -> None:
            if not self.isRemote:
                return PySwitch.start(self, controllers)
            ifs = sorted(self.port_interfaces().values())
            if ifs:
                self.cmd(" ; ".join(f"sysctl -qw net.ipv6.conf.{i}.disable_ipv6=1"
                                    for i in ifs))
            log_dir = self.log_dir or "/tmp"
            os.makedirs(log_dir, exist_ok=True)
            self.log_path = os.path.join(log_dir, f"{self.name}-{self.binary_name}.log")
            with open(self.log_path, "wb") as log:
                self.proc = self._popen(["sh", "-c", shlex.quote(remote_script(self.command()))],
                                        sudo=True, tt=False, stdin=subprocess.PIPE,
                                        stdout=log, stderr=subprocess.STDOUT)
            self.wait_ready()

        def _terminate(self) -> None:
            proc = self.proc
            if proc is not None and proc.poll() is None and self.isRemote:
                # closing ssh's input ends the remote pyswitch (remote_script); then ssh ends
                proc.stdin.close()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGTERM)
            PySwitch._terminate(self)

    class ClusterLink(cluster.RemoteLink):
        """A shaped link; between servers an SSH tunnel with the cluster's ssh options."""

        def __init__(self, node1: Any, node2: Any, **kwargs: Any) -> None:
            kwargs.setdefault("cls1", tc_intf)
            kwargs.setdefault("cls2", tc_intf)
            super().__init__(node1, node2, **kwargs)

        def makeTunnel(self, node1: Any, node2: Any, intfname1: str,  # noqa: N802
                       intfname2: str, addr1: str | None = None,
                       addr2: str | None = None) -> subprocess.Popen:
            if node2.server == LOCAL:  # the tunnel's ssh runs from the local server
                return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1)
            n = next(_tap_numbers)
            tap = f"tap{n}"
            made: list[Any] = []
            try:
                for node in (node1, node2):
                    out = node.rcmd(f"ip tuntap add dev {tap} mode tap user {node.user}")
                    if out.strip():
                        raise ClusterError(f"tunnel {intfname1}--{intfname2}: {tap} on "
                                           f"{node.server}: {out.strip()}")
                    made.append(node)
                tunnel = node1.rpopen(["ssh", *opts, "-n", "-o", "Tunnel=Ethernet", "-w",
                                       f"{n}:{n}", f"{node2.user}@{node2.serverIP}",
                                       "echo @"], sudo=False)
                first = decode(tunnel.stdout.read(1))
                if first != "@":
                    rest = decode(tunnel.stdout.read()).strip()
                    raise ClusterError(f"tunnel {intfname1}--{intfname2} to {node2.server}: "
                                       f"ssh -w failed: {(first + rest)[-200:] or 'no output'}")
                for node, name, addr in ((node1, intfname1, addr1), (node2, intfname2, addr2)):
                    self.moveIntf(tap, node)
                    out = node.cmd(f"ip link set {tap} name {name}"
                                   + (f" address {addr}" if addr else ""))
                    if out.strip():
                        raise ClusterError(f"renaming {tap} to {name}: {out.strip()}")
                return tunnel
            except BaseException:
                for node in made:
                    node.rcmd(f"ip link del {tap}")
                raise

    return ClusterHost, ClusterSwitch, ClusterLink


@dataclass
class ClusterNet(MininetNet):
    """A started network over several servers (:func:`build_cluster_net`)."""

    spec: ClusterSpec | None = None

    def interface_bytes(self, switch: str, interfaces: list[str]) -> dict[str, tuple[int, int]]:
        """``interface -> (tx_bytes, rx_bytes)`` of a switch's interfaces, read on its
        server (one command through its shell for a remote switch)."""
        node = self.net.get(switch)
        paths = [f"/sys/class/net/{i}/statistics/{d}_bytes" for i in interfaces
                 for d in ("tx", "rx")]
        if getattr(node, "isRemote", False):
            values = node.cmd("cat", *paths).split()
        else:
            values = [Path(p).read_text() for p in paths]
        if len(values) != len(paths):
            raise ClusterError(f"{switch}: reading its interface counters on "
                               f"{node.server} failed: {' '.join(values)[:200]}")
        nums = [int(v) for v in values]
        return {i: (nums[2 * k], nums[2 * k + 1]) for k, i in enumerate(interfaces)}


def build_cluster_net(graph: nx.Graph, spec: ClusterSpec, switch_cls: type | None = None,
                      switch_opts: dict[str, Any] | None = None,
                      per_switch_opts: dict[str, dict[str, Any]] | None = None,
                      start: bool = True, bw_unit_mbps: float | None = 1.0) -> ClusterNet:
    """:func:`topo.mininet_net.build_net` with every node on its server (``spec``); the
    first server is this one.  A failed build stops what was started (the remote shells,
    the tunnels and their tap devices) before the error propagates."""
    host_cls, sw_cls, link_cls = cluster_classes(spec, switch_cls)
    node_opts: dict[str, dict[str, Any]] = {}
    for node in graph.nodes:
        server = spec.mininet_server(str(node))
        opts: dict[str, Any] = {"server": server, "user": spec.user,
                                "serverIP": spec.addresses[spec.placement.server_of[node]]}
        if graph.nodes[node].get("kind") == "switch":
            opts["cls"] = sw_cls
        node_opts[str(node)] = opts
    mn = build_net(graph, sw_cls, switch_opts, per_switch_opts, start, bw_unit_mbps,
                   node_opts=node_opts, net_opts={"host": host_cls, "link": link_cls})
    return ClusterNet(mn.net, mn.plan, timings=mn.timings, spec=spec)
