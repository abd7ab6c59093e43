"""Packet-in/out through the CPU port over the P4Runtime stream, and per-port link
impairment (set at start and over the control socket) on real veths."""

from __future__ import annotations

import time

import pytest
from netns import expect_frames, is_root, quiet_for
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from switch_harness import REPO, switch_on_veths, target  # noqa: F401

from pyswitch.daemon import control_request

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not is_root(), reason="needs root (namespaces, raw sockets)")]


def frame(dst: str, src: str, marker: str, etype: int = 0x88B5) -> bytes:
    return bytes(Ether(dst=dst, src=src, type=etype) / Raw(marker.encode().ljust(50, b".")))


def has(marker: str):
    m = marker.encode()
    return lambda f: m in f


def test_packet_in_and_out_via_cpu_port(target, tmp_path):  # noqa: F811
    with switch_on_veths(target, 2, tmp_path, program=REPO / "tests/p4/rt_cpu.p4",
                         cpu_port=255) as env:
        c = env.client
        h1, h2 = env.hosts
        with h1.port() as p1, h2.port() as p2:
            out = frame(h2.mac, "02:00:00:00:00:ee", "PKT-OUT")
            c.packet_out(out, egress_port=2)
            assert expect_frames(p2, has("PKT-OUT")) == [out]
            assert quiet_for(p1, has("PKT-OUT"), 0.2)
            f = frame("02:00:00:00:99:99", h1.mac, "PKT-IN")
            p1.send(f)
            got = c.get_packet_in(timeout=3)
            assert got is not None
            payload, meta = got
            assert payload == f and meta["ingress_port"] == 1
            # non-0x88b5 frames are dropped: no packet-in
            p1.send(frame("02:00:00:00:99:99", h1.mac, "NOT-CPU", etype=0x88B6))
            assert c.get_packet_in(timeout=0.3) is None


def test_impairment_at_start_and_over_control_socket(tmp_path):
    with switch_on_veths("pyswitch", 2, tmp_path, program=REPO / "tests/p4/rt_forward.p4",
                         impair=("2:loss=1.0,dir=out,seed=1",), control_socket=True) as env:
        c = env.client
        ctl = env.switch.control_socket
        h1, h2 = env.hosts
        c.insert_table_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": h2.mac},
                             "MyIngress.set_port", {"port": 2})
        with h1.port() as p1, h2.port() as p2:
            for i in range(5):
                p1.send(frame(h2.mac, h1.mac, f"LOST-{i}"))
            assert quiet_for(p2, has("LOST-"), 0.4)
            imp = control_request(ctl, {"op": "counters"})["impairments"]["2"]
            assert imp["tx"]["offered"] == 5 and imp["tx"]["dropped"] == 5
            assert imp["rx"] is None  # dir=out only

            ans = control_request(ctl, {"op": "set_impairment", "port": 2,
                                        "spec": "loss=0,dup=1"})
            assert ans["ok"], ans
            f = frame(h2.mac, h1.mac, "DUP-1")
            p1.send(f)
            assert expect_frames(p2, has("DUP-1"), count=3, timeout=0.8) == [f, f]

            assert control_request(ctl, {"op": "set_impairment", "port": 2,
                                         "spec": "dup=0,delay_ms=150"})["ok"]
            f = frame(h2.mac, h1.mac, "LATE-1")
            t0 = time.monotonic()
            p1.send(f)
            assert expect_frames(p2, has("LATE-1"), timeout=2) == [f]
            assert time.monotonic() - t0 >= 0.14

            bad = control_request(ctl, {"op": "set_impairment", "port": 2, "spec": "loss=7"})
            assert not bad["ok"] and "probability" in bad["error"]
            bad = control_request(ctl, {"op": "set_impairment", "port": 9, "spec": "loss=0"})
            assert not bad["ok"] and "port 9" in bad["error"]
            counters = control_request(ctl, {"op": "counters"})
            assert counters["ports"]["1"]["rx_frames"] >= 7
            assert counters["impairments"]["2"]["tx"]["duplicated"] == 1
            assert counters["impairments"]["2"]["tx"]["delayed"] == 1

            # receive-side reordering on port 1: A, B leave as B, A; a lone frame is held
            # for reorder_hold_ms and then released
            assert control_request(ctl, {"op": "set_impairment", "port": 2,
                                         "spec": "none"})["ok"]
            assert control_request(ctl, {"op": "set_impairment", "port": 1,
                                         "spec": "reorder=1,dir=in,reorder_hold_ms=200"})["ok"]
            a, b = frame(h2.mac, h1.mac, "ORDER-A"), frame(h2.mac, h1.mac, "ORDER-B")
            p1.send(a)
            p1.send(b)
            assert expect_frames(p2, has("ORDER-"), count=2) == [b, a]
            lone = frame(h2.mac, h1.mac, "ALONE-1")
            t0 = time.monotonic()
            p1.send(lone)
            assert expect_frames(p2, has("ALONE-1"), timeout=2) == [lone]
            assert time.monotonic() - t0 >= 0.19
            rx = control_request(ctl, {"op": "counters"})["impairments"]["1"]["rx"]
            assert rx["reordered"] == 2 and rx["emitted"] == 3
        assert env.switch.alive()
