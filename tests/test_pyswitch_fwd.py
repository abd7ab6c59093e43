"""pyswitch forwarding conformance on tests/p4/pyswitch_fwd.p4: exact / lpm / ternary tables
with priorities, default actions, const entries, action_run switch, counters, direct
counters, registers, checksum update (checked by scapy), parser and checksum errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.all import IP, TCP, UDP, Ether, raw

from pyswitch import EntryExists, EntryNotFound, InvalidArgument, Switch, compile_p4
from pyswitch.values import ipv4, mac

HERE = Path(__file__).parent
T_LPM, T_MAC, T_ACL = "MyIngress.ipv4_lpm", "MyIngress.mac_exact", "MyIngress.acl"
FWD = "MyIngress.ipv4_forward"


@pytest.fixture(scope="module")
def prog():  # noqa: ANN201
    return compile_p4(HERE / "p4/pyswitch_fwd.p4")


@pytest.fixture()
def sw(prog) -> Switch:  # noqa: ANN001
    s = Switch(prog)
    s.insert_entry(T_LPM, {"hdr.ipv4.dstAddr": (ipv4("10.0.0.0"), 8)}, FWD,
                   {"dstAddr": mac("00:00:00:00:00:08"), "port": 8})
    s.insert_entry(T_LPM, {"hdr.ipv4.dstAddr": (ipv4("10.1.0.0"), 16)}, FWD,
                   {"dstAddr": mac("00:00:00:00:00:16"), "port": 16})
    s.insert_entry(T_LPM, {"hdr.ipv4.dstAddr": (ipv4("10.1.2.3"), 32)}, FWD,
                   {"dstAddr": mac("00:00:00:00:00:32"), "port": 32})
    return s


def ip_pkt(dst: str, src: str = "192.168.0.1", proto: str = "udp", ttl: int = 64) -> bytes:
    l4 = UDP(sport=1, dport=2) if proto == "udp" else TCP(sport=1, dport=2)
    return raw(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02")
               / IP(src=src, dst=dst, ttl=ttl) / l4 / b"payload")


def test_lpm_longest_prefix_wins_and_rewrites(sw: Switch) -> None:
    for dst, port in [("10.9.9.9", 8), ("10.1.9.9", 16), ("10.1.2.3", 32), ("10.1.2.4", 16)]:
        out = sw.process(1, ip_pkt(dst))
        assert [p for p, _ in out] == [port], dst
        e = Ether(out[0][1])
        assert e.dst == f"00:00:00:00:00:{port:02d}"
        assert e.src == "00:00:00:00:00:01"  # old dst
        assert e[IP].ttl == 63
        assert e[IP].tos == 30  # classify const entry for UDP, written in ipv4_forward case
        # checksum update gives a valid header: recompute with scapy and compare
        got = e[IP].chksum
        del e[IP].chksum
        assert Ether(raw(e))[IP].chksum == got
        assert raw(e[UDP].payload) == b"payload"


def test_lpm_default_drop_and_action_run_switch(sw: Switch) -> None:
    assert sw.process(1, ip_pkt("11.0.0.1")) == []
    assert sw.counter_read("MyIngress.errors_seen", 2) == (1, len(ip_pkt("11.0.0.1")))
    sw.set_default_action(T_LPM, FWD, {"dstAddr": 5, "port": 5})
    out = sw.process(1, ip_pkt("11.0.0.1"))
    assert [p for p, _ in out] == [5]
    assert sw.counter_read("MyIngress.errors_seen", 2)[0] == 1


def test_exact_table_hit_miss_and_default_multicast(sw: Switch) -> None:
    frame = raw(Ether(dst="00:00:00:00:aa:bb", src="00:00:00:00:00:02", type=0x9999) / (b"x" * 3))
    # miss -> default flood() -> mcast group 1
    sw.set_multicast_group(1, [(2, 0), (3, 0)])
    assert sorted(p for p, _ in sw.process(1, frame)) == [2, 3]
    sw.insert_entry(T_MAC, {"hdr.ethernet.dstAddr": mac("00:00:00:00:aa:bb")},
                    "MyIngress.set_port", {"port": 7})
    out = sw.process(1, frame)
    assert out == [(7, frame)]
    assert sw.counter_read("MyIngress.errors_seen", 3)[0] == 1  # .hit branch
    sw.modify_entry(T_MAC, {"hdr.ethernet.dstAddr": mac("00:00:00:00:aa:bb")},
                    "MyIngress.set_port", {"port": 9})
    assert [p for p, _ in sw.process(1, frame)] == [9]
    sw.delete_entry(T_MAC, {"hdr.ethernet.dstAddr": mac("00:00:00:00:aa:bb")})
    assert sorted(p for p, _ in sw.process(1, frame)) == [2, 3]


def test_ternary_priorities_and_direct_counter(sw: Switch) -> None:
    deny, allow = "MyIngress.deny", "MyIngress.allow"
    # deny 192.168.0.0/16 for everything (prio 10), but allow UDP from 192.168.0.1 (prio 20)
    sw.insert_entry(T_ACL, {"hdr.ipv4.srcAddr": (ipv4("192.168.0.0"), 0xFFFF0000)}, deny, {},
                    priority=10)
    sw.insert_entry(T_ACL, {"hdr.ipv4.srcAddr": (ipv4("192.168.0.1"), 0xFFFFFFFF),
                            "hdr.ipv4.protocol": (17, 0xFF)}, allow, {}, priority=20)
    assert [p for p, _ in sw.process(1, ip_pkt("10.0.0.1", proto="udp"))] == [8]
    assert sw.process(1, ip_pkt("10.0.0.1", proto="tcp")) == []
    assert sw.process(1, ip_pkt("10.0.0.1", src="192.168.7.7")) == []
    assert [p for p, _ in sw.process(1, ip_pkt("10.0.0.1", src="172.16.0.1"))] == [8]
    n_udp = len(ip_pkt("10.0.0.1", proto="udp"))
    assert sw.direct_counter_read(T_ACL, {"hdr.ipv4.srcAddr": (ipv4("192.168.0.1"), 0xFFFFFFFF),
                                          "hdr.ipv4.protocol": (17, 0xFF)}, 20) == (1, n_udp)
    assert sw.direct_counter_read(T_ACL, {"hdr.ipv4.srcAddr": (ipv4("192.168.0.0"),
                                                               0xFFFF0000)}, 10)[0] == 2
    # swapping priorities flips the decision for the UDP packet
    sw.modify_entry(T_ACL, {"hdr.ipv4.srcAddr": (ipv4("192.168.0.0"), 0xFFFF0000)}, deny, {},
                    priority=10)
    sw.delete_entry(T_ACL, {"hdr.ipv4.srcAddr": (ipv4("192.168.0.1"), 0xFFFFFFFF),
                            "hdr.ipv4.protocol": (17, 0xFF)}, 20)
    sw.insert_entry(T_ACL, {"hdr.ipv4.srcAddr": (ipv4("192.168.0.1"), 0xFFFFFFFF),
                            "hdr.ipv4.protocol": (17, 0xFF)}, allow, {}, priority=5)
    assert sw.process(1, ip_pkt("10.0.0.1", proto="udp")) == []


def test_counters_and_registers(sw: Switch) -> None:
    f = ip_pkt("10.0.0.1", ttl=0x25)
    for port in (3, 3, 4):
        sw.process(port, f)
    assert sw.counter_read("MyIngress.port_rx", 3) == (2, 2 * len(f))
    assert sw.counter_read("MyIngress.port_rx", 4) == (1, len(f))
    assert sw.register_read("MyIngress.last_len", 5) == len(f) - 14  # index = ttl[3:0]
    sw.register_write("MyIngress.last_len", 5, 7)
    assert sw.register_read("MyIngress.last_len", 5) == 7
    with pytest.raises(InvalidArgument):
        sw.register_write("MyIngress.last_len", 16, 1)
    with pytest.raises(InvalidArgument):
        sw.register_write("MyIngress.last_len", 0, 1 << 32)


def test_parser_error_enters_ingress_and_is_counted(sw: Switch) -> None:
    """BMv2 v1model does not drop on parser errors: ingress sees parser_error."""
    truncated = ip_pkt("10.0.0.1")[:14 + 10]
    assert sw.process(1, truncated) == []
    assert sw.counter_read("MyIngress.errors_seen", 0) == (1, 24)
    assert sw.counter_read("MyIngress.port_rx", 1) == (1, 24)


def test_bad_ipv4_checksum_sets_checksum_error(sw: Switch) -> None:
    e = Ether(ip_pkt("10.0.0.1"))
    e[IP].chksum ^= 0x1234
    assert sw.process(1, raw(e)) == []
    assert sw.counter_read("MyIngress.errors_seen", 1)[0] == 1


def test_const_entries_and_const_default(sw: Switch) -> None:
    with pytest.raises(InvalidArgument):
        sw.insert_entry("MyIngress.classify", {"hdr.ipv4.protocol": 2}, "MyIngress.set_class",
                        {"k": 1})
    with pytest.raises(InvalidArgument):
        sw.set_default_action("MyIngress.classify", "MyIngress.set_class", {"k": 1})
    views = sw.read_entries("MyIngress.classify")
    assert {v.match["hdr.ipv4.protocol"]: v.params["k"] for v in views} == {1: 10, 6: 20,
                                                                           17: 30}
    out = sw.process(1, ip_pkt("10.0.0.1", proto="tcp"))
    assert Ether(out[0][1])[IP].tos == 20


def test_api_errors(sw: Switch) -> None:
    m = {"hdr.ipv4.dstAddr": (ipv4("10.0.0.0"), 8)}
    with pytest.raises(EntryExists):
        sw.insert_entry(T_LPM, m, FWD, {"dstAddr": 1, "port": 1})
    with pytest.raises(EntryNotFound):
        sw.delete_entry(T_LPM, {"hdr.ipv4.dstAddr": (ipv4("12.0.0.0"), 8)})
    with pytest.raises(InvalidArgument):
        sw.insert_entry(T_LPM, {"hdr.ipv4.dstAddr": (0, 33)}, FWD, {"dstAddr": 1, "port": 1})
    with pytest.raises(InvalidArgument):
        sw.insert_entry(T_LPM, {"hdr.ipv4.dstAddr": (1, 8)}, FWD, {"dstAddr": 1, "port": 1})
    with pytest.raises(InvalidArgument):  # port is 9 bits
        sw.insert_entry(T_LPM, {"hdr.ipv4.dstAddr": (0, 0)}, FWD, {"dstAddr": 1, "port": 512})
    with pytest.raises(InvalidArgument):
        sw.insert_entry(T_LPM, {"hdr.ipv4.dstAddr": (0, 0)}, "MyIngress.nope", {})
    with pytest.raises(InvalidArgument):
        sw.insert_entry("MyIngress.nope", {}, FWD, {})
    with pytest.raises(InvalidArgument):  # ternary needs a priority
        sw.insert_entry(T_ACL, {"hdr.ipv4.protocol": (6, 0xFF)}, "MyIngress.deny", {})
    with pytest.raises(InvalidArgument):  # @defaultonly action as an entry
        sw.insert_entry(T_MAC, {"hdr.ethernet.dstAddr": 1}, "NoAction", {})
    assert [v.params["port"] for v in sw.read_entries(T_LPM)] == [8, 16, 32]
    sw.clear_table(T_LPM)
    assert sw.read_entries(T_LPM) == []
