"""`python -m pyswitch run` on veths between namespaces, driven over P4Runtime by the
project's client and by p4runtime-shell: real frames forwarded, rewritten and replicated."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from netns import expect_frames, is_root, quiet_for
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from switch_harness import REPO, compile_for, switch_on_veths, target  # noqa: F401

P4 = REPO / "tests" / "p4" / "rt_forward.p4"
L2, DST = "MyIngress.l2", "hdr.ethernet.dstAddr"
LPM, IPDST = "MyIngress.ipv4_lpm", "hdr.ipv4.dstAddr"
ROUTER_MAC = "02:00:00:00:00:fe"

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not is_root(), reason="needs root (namespaces, raw sockets)")]


def l2frame(dst: str, src: str, marker: str) -> bytes:
    return bytes(Ether(dst=dst, src=src, type=0x88B5) / Raw(marker.encode().ljust(50, b".")))


def has(marker: str):
    m = marker.encode()
    return lambda f: m in f


def test_forward_modify_delete_read_and_multicast(target, tmp_path):  # noqa: F811
    with switch_on_veths(target, 3, tmp_path, program=P4) as env:
        c = env.client
        h1, h2, h3 = env.hosts
        with h1.port() as p1, h2.port() as p2, h3.port() as p3:
            c.insert_table_entry(L2, {DST: h2.mac}, "MyIngress.set_port", {"port": 2})
            sent = []

            def send(frame: bytes) -> None:
                sent.append(frame)
                assert p1.send(frame)

            f = l2frame(h2.mac, h1.mac, "UNICAST-1")
            send(f)
            assert expect_frames(p2, has("UNICAST-1")) == [f]
            assert quiet_for(p3, has("UNICAST-1"), 0.2)

            c.modify_table_entry(L2, {DST: h2.mac}, "MyIngress.set_port", {"port": 3})
            f = l2frame(h2.mac, h1.mac, "UNICAST-2")
            send(f)
            assert expect_frames(p3, has("UNICAST-2")) == [f]
            assert quiet_for(p2, has("UNICAST-2"), 0.2)

            # multicast: broadcast MAC -> group 1 -> ports 2 and 3
            c.insert_table_entry(L2, {DST: "ff:ff:ff:ff:ff:ff"}, "MyIngress.set_mcast",
                                 {"grp": 1})
            c.insert_multicast_group(1, [2, 3])
            assert c.read_multicast_groups() == {1: [(2, 0), (3, 0)]}
            f = l2frame("ff:ff:ff:ff:ff:ff", h1.mac, "BCAST-1")
            send(f)
            assert expect_frames(p2, has("BCAST-1")) == [f]
            assert expect_frames(p3, has("BCAST-1")) == [f]
            assert quiet_for(p1, has("BCAST-1"), 0.2)

            entries = {e.match[DST]: (e.action, e.params)
                       for e in c.read_table_entries(L2)}
            assert entries == {0x020000000002: ("MyIngress.set_port", {"port": 3}),
                               0xFFFFFFFFFFFF: ("MyIngress.set_mcast", {"grp": 1})}
            one = c.read_table_entries(L2, {DST: "ff:ff:ff:ff:ff:ff"})
            assert [(e.action, e.params) for e in one] == [("MyIngress.set_mcast", {"grp": 1})]

            c.delete_table_entry(L2, {DST: h2.mac})
            f = l2frame(h2.mac, h1.mac, "UNICAST-3")
            send(f)
            assert quiet_for(p2, has("UNICAST-3"), 0.2) and quiet_for(p3, has("UNICAST-3"), 0.1)
            assert [e.match[DST] for e in c.read_table_entries(L2)] == [0xFFFFFFFFFFFF]

            # default action of l2 changed: unknown destinations go to port 3
            c.set_default_action(L2, "MyIngress.set_port", {"port": 3})
            d = c.read_default_action(L2)
            assert (d.action, d.params, d.is_default) == ("MyIngress.set_port", {"port": 3},
                                                           True)
            f = l2frame("02:00:00:00:12:34", h1.mac, "DEFAULT-1")
            send(f)
            assert expect_frames(p3, has("DEFAULT-1")) == [f]

            # IPv4 LPM routing: MACs rewritten, TTL decremented, checksum recomputed
            assert c.read_default_action(LPM).action == "MyIngress.drop"
            c.insert_table_entry(LPM, {IPDST: "10.99.0.0/24"}, "MyIngress.ipv4_forward",
                                 {"dstAddr": h2.mac, "port": 2})
            pkt = Ether(dst=ROUTER_MAC, src=h1.mac) / IP(src="10.99.0.1", dst="10.99.0.2",
                                                         ttl=64) / UDP(sport=1, dport=9) / \
                Raw(b"ROUTED-1")
            send(bytes(pkt))
            (got,) = expect_frames(p2, has("ROUTED-1"))
            expect = pkt.copy()
            expect[Ether].dst, expect[Ether].src = h2.mac, ROUTER_MAC
            expect[IP].ttl = 63
            del expect[IP].chksum
            assert got == bytes(Ether(bytes(expect)))
            assert Ether(got)[IP].chksum == Ether(bytes(expect))[IP].chksum

            # the ingress-port counter saw exactly what h1 sent
            packets, nbytes = c.read_counter("MyIngress.rx_port_counter", 1)[1]
            assert packets == len(sent) and nbytes == sum(len(s) for s in sent)
        assert env.switch.alive()


SHELL_SCRIPT = textwrap.dedent("""
    import sys
    import p4runtime_sh.shell as sh
    addr, p4info, config = sys.argv[1:4]
    sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 1),
             config=sh.FwdPipeConfig(p4info, config), verbose=False)
    te = sh.TableEntry("MyIngress.l2")(action="MyIngress.set_port")
    te.match["hdr.ethernet.dstAddr"] = "02:00:00:00:00:02"
    te.action["port"] = "2"
    te.insert()
    te = sh.TableEntry("MyIngress.l2")(action="MyIngress.set_mcast")
    te.match["hdr.ethernet.dstAddr"] = "ff:ff:ff:ff:ff:ff"
    te.action["grp"] = "7"
    te.insert()
    mcg = sh.MulticastGroupEntry(7)
    mcg.add(1, 1).add(3, 1)
    mcg.insert()
    n = sum(1 for _ in sh.TableEntry("MyIngress.l2").read())
    print("entries", n)
    sh.teardown()
""")


def test_p4runtime_shell_configures_pyswitch(target, tmp_path):  # noqa: F811
    with switch_on_veths(target, 3, tmp_path) as env:
        compiled = compile_for(target, P4, tmp_path / "build")
        run = subprocess.run([sys.executable, "-c", SHELL_SCRIPT, env.switch.address,
                              str(compiled.p4info_path), str(compiled.config_path)],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "entries 2" in run.stdout
        h1, h2, h3 = env.hosts
        with h1.port() as p1, h2.port() as p2, h3.port() as p3:
            f = l2frame(h2.mac, h3.mac, "SHELL-UNI")
            p3.send(f)
            assert expect_frames(p2, has("SHELL-UNI")) == [f]
            f = l2frame("ff:ff:ff:ff:ff:ff", h2.mac, "SHELL-BCAST")
            p2.send(f)
            assert expect_frames(p1, has("SHELL-BCAST")) == [f]
            assert expect_frames(p3, has("SHELL-BCAST")) == [f]
        # the project's client reads back what p4runtime-shell wrote
        c = env.switch.client(election_id=5)
        c.use_p4info(compiled.p4info_path)
        assert c.read_multicast_groups() == {7: [(1, 1), (3, 1)]}
        assert len(c.read_table_entries("MyIngress.l2")) == 2
