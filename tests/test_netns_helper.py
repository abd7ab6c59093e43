"""workers/common/netns.py: sockets opened in another network namespace stay there (root:
two namespaces made here, joined by a veth, always removed)."""

from __future__ import annotations

import errno
import os
import socket
import subprocess

import pytest
from netns import have_netns_support, sh, unique_tag

from workers.common.netns import NetnsError, in_netns, same_netns

pytestmark = pytest.mark.root


@pytest.fixture
def two_namespaces():
    if not have_netns_support():
        pytest.skip("needs root and iproute2")
    tag = unique_tag("pn")
    names = [f"{tag}a", f"{tag}b"]
    try:
        for ns in names:
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", f"{tag}x", "netns", names[0], "type", "veth",
           "peer", "name", f"{tag}y", "netns", names[1])
        for ns, dev, ip in ((names[0], f"{tag}x", "10.97.0.1"), (names[1], f"{tag}y",
                                                                  "10.97.0.2")):
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield [f"/run/netns/{ns}" for ns in names]
    finally:
        for ns in names:
            sh("ip", "netns", "del", ns, check=False)


def _udp(ip: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 0))
    return s


def test_each_socket_lives_in_the_namespace_it_was_opened_in(two_namespaces):
    a, b = two_namespaces
    with in_netns(a):
        sa = _udp("10.97.0.1")  # an address only namespace a has
        assert same_netns(a)
    with in_netns(b):
        sb = _udp("10.97.0.2")
        with pytest.raises(OSError) as exc:  # a's address is not b's
            _udp("10.97.0.1")
        assert exc.value.errno == errno.EADDRNOTAVAIL
    assert not same_netns(a) and not same_netns(b)  # back home
    with pytest.raises(OSError):  # neither address exists here
        _udp("10.97.0.1")
    try:  # over the veth, from a's socket to b's: each used from this namespace
        sb.settimeout(5)
        sa.sendto(b"hello", sb.getsockname())
        data, src = sb.recvfrom(100)
        assert (data, src[0]) == (b"hello", "10.97.0.1")
    finally:
        sa.close()
        sb.close()


def test_a_vanished_process_is_one_clear_error():
    p = subprocess.Popen(["true"])
    p.wait()
    with pytest.raises(NetnsError, match=rf"/proc/{p.pid}/ns/net: cannot open it"):
        with in_netns(f"/proc/{p.pid}/ns/net"):
            pass


def test_the_own_namespace_needs_no_privilege():
    with in_netns(f"/proc/{os.getpid()}/ns/net"):
        s = _udp("127.0.0.1")
    s.close()
