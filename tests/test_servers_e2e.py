"""Mininet's cluster mode across two "servers" on one machine (docs/servers.md §2): the
second server is a network namespace with its own sshd, made here (addresses only inside
it and on a veth this test creates; keys and ssh configuration in a temporary folder).

What this shows: ``MininetCluster`` reaches the server over SSH (its precheck, the remote
host's shell via ``RemoteMixin``) and a link between the two servers is an SSH tunnel
(``ssh -w`` with tap devices) that carries traffic both ways.  The shipped
``RemoteSSHLink.makeTunnel`` runs ``ssh`` without the cluster's ssh options (it fails here
with "Host key verification failed."), so :class:`_Tunnel` makes the same tunnel with them.
:func:`test_ina_run_split_over_two_servers` runs ``python -m controller run --servers`` over
the same two servers: leaf-spine 2,1,2 with leaf1 and its hosts on the second server, pyswitch
started there, the controller deploying to its P4Runtime port on the server's address, and the
leaf1--spine0 link an SSH tunnel that carries the gradients of h0 and h1 to the PS on h3
(h2's stay on the second server).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netns import have_netns_support, unique_tag

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]


def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


@pytest.fixture
def second_server():
    """A namespace with sshd at 10.251.N.2, reachable from 10.251.N.1; yields (ip, ssh -F
    config, local ip)."""
    if not have_netns_support() or not Path("/usr/sbin/sshd").exists() \
            or shutil.which("sudo") is None:
        pytest.skip("needs root, ip, sshd and sudo (scripts/ensure_system.sh)")
    with second_server_namespace() as found:
        yield found


@contextlib.contextmanager
def second_server_namespace() -> Iterator[tuple[str, Path, str]]:
    """The second server of :func:`second_server` (also for trying runs by hand:
    ``with second_server_namespace() as (ip, config, local): ...``), removed on leaving."""
    tag = unique_tag("sv")
    ns, va, vb = tag, f"{tag}a", f"{tag}b"
    taps_before = _taps()
    n = os.getpid() % 200 + 20
    a, b = f"10.251.{n}.1", f"10.251.{n}.2"
    tmp = Path(tempfile.mkdtemp(prefix="insync-servers-"))
    sshd = None
    try:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb)
        _sh("ip", "link", "set", vb, "netns", ns)
        _sh("ip", "addr", "add", f"{a}/30", "dev", va)
        _sh("ip", "link", "set", va, "up")
        for cmd in (("ip", "addr", "add", f"{b}/30", "dev", vb), ("ip", "link", "set", vb, "up"),
                    ("ip", "link", "set", "lo", "up")):
            _sh("ip", "netns", "exec", ns, *cmd)
        for key in ("host", "user"):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / key))
        (tmp / "authorized_keys").write_text((tmp / "user.pub").read_text())
        (tmp / "sshd_config").write_text(
            f"ListenAddress {b}\nHostKey {tmp}/host\nAuthorizedKeysFile {tmp}/authorized_keys\n"
            "PermitRootLogin prohibit-password\nPermitTunnel yes\nStrictModes no\nUsePAM no\n"
            f"PidFile {tmp}/sshd.pid\n")
        (tmp / "ssh_config").write_text(
            f"Host {b}\n  IdentityFile {tmp}/user\n  IdentitiesOnly yes\n"
            "  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n")
        Path("/run/sshd").mkdir(exist_ok=True)
        sshd = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f",
                                 str(tmp / "sshd_config")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        for _ in range(50):
            if _sh("ssh", "-F", str(tmp / "ssh_config"), "-o", "BatchMode=yes", b, "true",
                   check=False).returncode == 0:
                break
            time.sleep(0.2)
        yield b, tmp / "ssh_config", a
    finally:
        if sshd is not None:
            sshd.terminate()
            sshd.wait(timeout=10)
        # whatever a failed or killed run left: the sessions in the namespace (and with them
        # the remote shells and processes), the ssh clients naming the server, the tap devices
        pids = _sh("ip", "netns", "pids", ns, check=False).stdout.split()
        pids += [pid for pid, _ in _processes_naming(b)]
        for pid in {int(p) for p in pids} - {os.getpid()}:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for tap in _taps() - taps_before:
            _sh("ip", "link", "del", tap, check=False)
        _sh("ip", "link", "del", va, check=False)
        _sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def test_host_on_a_second_server_over_an_ssh_tunnel(second_server):
    from mininet.examples import cluster
    from mininet.topo import Topo

    server, config, _ = second_server
    opts = ["-F", str(config)]

    class Host(cluster.RemoteHost):
        sshbase = ["ssh", *opts, "-q", "-o", "BatchMode=yes", "-o", "ForwardAgent=yes", "-tt"]

    class Net(cluster.MininetCluster):
        sshcmd = ["ssh", *opts, "-o", "BatchMode=yes", "-o", "ForwardAgent=yes"]

    class _Tunnel(cluster.RemoteSSHLink):
        """The SSH tunnel of ``RemoteSSHLink`` with the cluster's ssh options: a tap device
        on each server, ``ssh -w`` joining them, each moved into its node and renamed."""

        def makeTunnel(self, node1, node2, intfname1, intfname2,  # noqa: N802 -- Mininet's
                       addr1=None, addr2=None):
            if node2.server == "localhost":  # ssh from the local server to the remote one
                return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1)
            for node in (node1, node2):
                out = node.rcmd(f"ip tuntap add dev tap9 mode tap user {node.user}")
                assert not out, f"tap on {node.server}: {out}"
            tunnel = node1.rpopen(["ssh", *opts, "-n", "-o", "Tunnel=Ethernet", "-w", "9:9",
                                   f"{node2.user}@{node2.serverIP}", "echo @"], sudo=False)
            first = tunnel.stdout.read(1).decode()
            assert first == "@", first + tunnel.stdout.read().decode()
            for node, name, addr in ((node1, intfname1, addr1), (node2, intfname2, addr2)):
                self.moveIntf("tap9", node)
                out = node.cmd("ip link set tap9 name", name, *(["address", addr] if addr else []))
                assert not out, out
            return tunnel

    tag = unique_tag("s")

    class Two(Topo):
        def build(self) -> None:
            self.addLink(self.addHost(f"{tag}x", server="localhost"),
                         self.addHost(f"{tag}y", server=server))

    net = Net(topo=Two(), servers=["localhost", server], host=Host, link=_Tunnel,
              controller=None, switch=cluster.RemoteOVSSwitch,
              placement=cluster.RoundRobinPlacer)  # the nodes name their servers
    try:
        net.start()
        x, y = net.hosts
        assert y.isRemote and not x.isRemote and y.server == server
        assert net.pingAll() == 0.0
    finally:
        _stop_bounded(net)
        _sh("ip", "link", "del", "tap9", check=False)  # left behind by a failed tunnel


def _stop_bounded(net, timeout_s: float = 60.0) -> None:
    """``net.stop()``, which can wait forever for a remote host's shell: the shipped
    ``RemoteHost`` runs ``sudo -u root ssh``, and the SIGHUP Mininet sends may leave ssh
    running under sudo (docs/servers.md §4; seen once in a fresh-clone run).  After
    ``timeout_s`` the ssh under each remote shell is killed, which ends the wait."""
    import threading

    t = threading.Thread(target=net.stop, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        for h in net.hosts:
            shell = getattr(h, "shell", None)
            if getattr(h, "isRemote", False) and shell is not None and shell.poll() is None:
                subprocess.run(["pkill", "-KILL", "-P", str(shell.pid)], check=False)
                shell.kill()
        t.join(timeout_s)
    assert not t.is_alive(), "net.stop() did not return after its remote shells were killed"


def _taps() -> set[str]:
    out = _sh("ip", "-o", "link", "show", "type", "tun", check=False).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def _processes_naming(text: str) -> list[tuple[str, str]]:
    """(pid, command line) of the processes that name ``text``."""
    found = []
    for p in Path("/proc").iterdir():
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if p.name.isdigit() and text in cmd and int(p.name) != os.getpid():
            found.append((p.name, cmd))
    return found


def test_ina_run_split_over_two_servers(second_server, tmp_path):
    """An INA run over two servers ends exact, and the tunnel carried the gradients."""
    server, config, local = second_server
    taps_before = _taps()
    cmd = [sys.executable, "-m", "controller", "run", "--topo", "leafspine:2,1,2", "--ps", "h3",
           "--workers", "h0,h1,h2", "--budget", "3", "--rounds", "3", "--bw", "10",
           "--modes", "ina", "--servers", f"{local},{server}", "--ssh-config", str(config),
           "--out", str(tmp_path), "--name", "two"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    took = time.monotonic() - t0
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    res = json.loads((tmp_path / "two" / "results.json").read_text())
    placement = res["settings"]["extra"]["placement"]
    assert placement["servers"][server] == ["h2", "h3", "leaf1"]
    assert placement["tunnels"] == [["leaf1", "spine0"]]
    rec = res["modes"]["ina"]
    assert len(rec["rounds"]) == 3 and all(r["exact"] for r in rec["rounds"])
    # every round at least the gradient's bytes: from h0 into leaf0 (counted here), from
    # spine0 over the tunnel to leaf1 and the results back, into the PS (counted on the
    # second server; the PS there ended by SIGTERM reports its own exit status)
    links = rec["link_bytes_total"]
    for link in ("h0->leaf0", "spine0->leaf1", "leaf1->spine0", "leaf1->h3"):
        assert links[link] >= 3 * rec["grad_bytes"], (link, links[link], rec["grad_bytes"])
    assert _taps() <= taps_before  # the tunnels' tap devices are gone
    # nor a process: ssh clients and tunnels, pyswitch (its gRPC address), workers and PS
    assert not _processes_naming(f"{server}") and not _processes_naming(str(tmp_path))
    assert took < 120, took


def test_remote_processes_report_and_end(second_server):
    """A process on a host of the second server reports its own exit status, gets SIGTERM
    from ``terminate()`` and ends when its local ssh is killed
    (topo.mininet_cluster.remote_script); so does a local one."""
    from topo.cluster_placement import place
    from topo.mininet_cluster import ClusterSpec, build_cluster_net
    from topo.models import parse_topology

    server, config, local = second_server
    graph = parse_topology("leafspine:2,1,1")
    spec = ClusterSpec(place(graph, (local, server)), {local: local, server: server},
                       str(config))
    net = build_cluster_net(graph, spec, bw_unit_mbps=None)
    try:
        for name in ("h0", "h1"):
            host = net.net.get(name)
            assert host.isRemote == (name == "h1")
            t0 = time.monotonic()
            proc = host.popen(["sh", "-c", "sleep 0.5; exit 3"])
            assert proc.wait(10) == 3 and time.monotonic() - t0 >= 0.5
            proc = host.popen([sys.executable, "-c", "import signal, sys, time; signal.signal("
                               "signal.SIGTERM, lambda *a: sys.exit(7)); print('up', flush="
                               "True); time.sleep(30)"], text=True)
            assert proc.stdout.readline().strip() == "up"
            proc.terminate()  # SIGTERM to the command itself, whose own status comes back
            assert proc.wait(10) == 7, name
            mark = f"30.{os.getpid()}{len(name)}{name[-1]}"  # a sleep only this test makes
            proc = host.popen(["sleep", mark])
            time.sleep(0.5)
            assert _processes_naming(mark)
            proc.kill()
            proc.wait(5)
            for _ in range(50):
                if not _processes_naming(mark):
                    break
                time.sleep(0.1)
            assert not _processes_naming(mark), name
        assert net.net.get("leaf1").grpc_address.startswith(f"{server}:")
        assert net.interface_bytes("leaf1", ["leaf1-eth1"])["leaf1-eth1"][0] >= 0
    finally:
        net.stop()
