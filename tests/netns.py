"""Network-namespace and veth helpers for root tests (always clean up; unique names).

Layout used by the switch tests: for each switch port *i* a namespace ``<tag>h<i>`` holding
``eth0``, whose veth peer ``<tag>p<i>`` stays in the root namespace for the switch to use.
Test code talks to a namespace's ``eth0`` through a :class:`pyswitch.ports.Port` opened
*inside* the namespace (``setns`` on a helper thread; a socket stays in the namespace it
was created in), so no subprocess is needed per packet.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pyswitch.ports import Port, set_tx_checksum_offload
from workers.ina.udp import free_udp_ports  # noqa: F401 -- the tests import it from here

CLONE_NEWNET = 0x40000000
T = TypeVar("T")
_counter = itertools.count()


def is_root() -> bool:
    return os.geteuid() == 0


def have_netns_support() -> bool:
    return is_root() and shutil.which("ip") is not None


def unique_tag(prefix: str = "t") -> str:
    """A short tag unique to this process and call (names must fit IFNAMSIZ = 15)."""
    return f"{prefix}{os.getpid() % 100000}{next(_counter)}"


def sh(*cmd: str, check: bool = True, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout)


def in_netns(ns: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on a fresh thread that has joined network namespace ``ns``."""
    result: dict[str, Any] = {}

    def body() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns({ns}): {os.strerror(err)}")
        finally:
            os.close(fd)
        try:
            result["value"] = fn(*args)
        except BaseException as exc:  # re-raised in the caller
            result["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(30)
    if "error" in result:
        raise result["error"]
    return result["value"]


def _disable_ipv6(ifname: str) -> None:
    with open(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6", "w") as f:
        f.write("1")


@dataclass
class HostNs:
    """One namespace with ``eth0`` (peer ``switch_if`` in the root namespace)."""

    ns: str
    switch_if: str
    ip: str | None = None
    mac: str | None = None

    def port(self) -> Port:
        """A raw port on the namespace's eth0 (for sending/expecting frames)."""
        return in_netns(self.ns, Port, "eth0")

    def exec(self, *cmd: str, timeout: float = 20, check: bool = True) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", self.ns, *cmd, timeout=timeout, check=check)

    def popen(self, *cmd: str, **kw: Any) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.ns, *cmd], **kw)


@contextlib.contextmanager
def veth_hosts(n: int, tag: str | None = None, *, ips: bool = True) -> Iterator[list[HostNs]]:
    """Create ``n`` namespaces each wired by a veth to the root namespace; always removed.

    With ``ips``, host *i* (1-based) gets 10.99.0.i/24 and MAC 02:00:00:00:00:i on eth0.
    IPv6 is disabled on both ends so that no stray router solicitations appear.
    """
    tag = tag or unique_tag()
    hosts: list[HostNs] = []
    try:
        for i in range(1, n + 1):
            ns, sw_if = f"{tag}h{i}", f"{tag}p{i}"
            sh("ip", "netns", "add", ns)
            hosts.append(HostNs(ns, sw_if))
            sh("ip", "link", "add", sw_if, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _disable_ipv6(sw_if)
            in_netns(ns, _disable_ipv6, "eth0")
            in_netns(ns, set_tx_checksum_offload, "eth0", False)
            mac = f"02:00:00:00:00:{i:02x}"
            sh("ip", "-n", ns, "link", "set", "eth0", "address", mac)
            hosts[-1].mac = mac
            if ips:
                hosts[-1].ip = f"10.99.0.{i}"
                sh("ip", "-n", ns, "addr", "add", f"10.99.0.{i}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "link", "set", sw_if, "up")
        for h in hosts:
            wait_link_ready(h.switch_if)
            wait_link_ready("eth0", h.ns)
        yield hosts
    finally:
        for h in hosts:
            sh("ip", "link", "del", h.switch_if, check=False)
            sh("ip", "netns", "del", h.ns, check=False)


def wait_link_ready(ifname: str, ns: str | None = None, timeout: float = 5.0) -> None:
    """Wait until ``ifname`` is UP with its real qdisc attached. The kernel attaches it
    asynchronously (linkwatch) after ``ip link set up``; until then frames sent on the
    interface are silently dropped by the placeholder ``noop`` qdisc."""
    cmd = ["ip"] + (["-n", ns] if ns else []) + ["-o", "link", "show", ifname]
    deadline = time.monotonic() + timeout
    while True:
        out = sh(*cmd).stdout
        if "state UP" in out and "qdisc noop" not in out:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ifname} ({ns or 'root'} namespace) not up: {out.strip()}")
        time.sleep(0.02)


def static_arp(hosts: list[HostNs]) -> None:
    """Every host learns every other host's IP→MAC (no ARP needed through the switch)."""
    for h in hosts:
        for o in hosts:
            if o is not h and o.ip and o.mac:
                sh("ip", "-n", h.ns, "neigh", "replace", o.ip, "lladdr", o.mac,
                   "dev", "eth0", "nud", "permanent")


def expect_frames(port: Port, match: Callable[[bytes], bool], count: int = 1,
                  timeout: float = 2.0) -> list[bytes]:
    """Frames seen on ``port`` that satisfy ``match``, waiting until ``count`` arrived or the
    timeout passed (returns what arrived; the caller asserts)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    import select

    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([port], [], [], left)
        if ready:
            for f in port.recv_batch(256):
                if match(f):
                    got.append(f)
    return got


def quiet_for(port: Port, match: Callable[[bytes], bool], seconds: float = 0.3) -> bool:
    """True if no frame matching ``match`` arrives on ``port`` within ``seconds``."""
    return not expect_frames(port, match, 1, seconds)


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


