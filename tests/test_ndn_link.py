"""FIB computation, frame classification and the NDN router daemon over real veths.

* :func:`workers.ndn.link.fib_routes`: shortest-path next hops as ports; the first next hops
  toward the PS form a tree reaching it from every router (the multicast tree).
* :func:`workers.ndn.link.classify` on python-ndn and Scapy-built frames.
* :mod:`workers.ndn.router_node` as a process on three veths (root): persistent-PIT multicast,
  PIT unicast, delete, non-NDN frames ignored, loss injection, counters file on SIGTERM.
* :func:`workers.ndn.node.quantized_mean` and the experiment's pure helpers.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from controller.errors import ExperimentError
from controller.experiment.methods.ndn.method import (
    comparison,
    ndn_rounds,
    parse_sweep,
    router_configs,
)
from topo.mininet_net import plan_network
from topo.models import fat_tree, leaf_spine
from workers.common.quantize import dequantize, quantize
from workers.ndn import names as nn
from workers.ndn.link import classify, fib_routes
from workers.ndn.node import quantized_mean
from workers.ndn.packets import (
    NDN_ETHERTYPE,
    NDN_MULTICAST_MAC,
    encode_data,
    encode_interest,
    eth_frame,
    eth_unframe,
)

ROOT = Path(__file__).resolve().parent.parent
PS, T = "ps0", "t"


# ------------------------------------------------------------------ FIB


def test_fib_routes_follow_shortest_paths_and_form_a_tree_toward_the_ps():
    g = fat_tree(4)
    plan = plan_network(g)
    hosts = ["h0", "h5", "h9", "h15"]
    parent = {}
    for s in plan.switches:
        fib = fib_routes(g, s, plan.ports[s], hosts)
        assert set(fib) == {"/h0", "/h5", "/h9", "/h15"}
        for h in hosts:
            peers = [plan.port_peer(s)[p] for p in fib["/" + h]]
            d = nx.shortest_path_length(g, s, h)
            assert peers and all(nx.shortest_path_length(g, p, h) == d - 1 for p in peers)
        parent[s] = plan.port_peer(s)[fib["/h0"][0]]  # the one next hop a router uses
    # following first next hops from any router reaches h0 without a loop: a tree
    for s in plan.switches:
        seen, node = set(), s
        while node != "h0":
            assert node not in seen
            seen.add(node)
            node = parent[node]
    # edge0 is h0's ToR; a core switch's only route to h0 goes down toward pod 0
    assert parent["edge0"] == "h0"


def test_fib_routes_reject_unreachable_and_bad_names():
    g = nx.Graph(leaf_spine(2, 1, 2))
    g.add_node("lonely", kind="host")
    plan = plan_network(g)
    with pytest.raises(ValueError, match="no path to lonely"):
        fib_routes(g, "leaf0", plan.ports["leaf0"], ["lonely"])
    with pytest.raises(nn.NdnNameError):
        fib_routes(g, "leaf0", plan.ports["leaf0"], ["insert"])


def test_router_configs_cover_every_switch(tmp_path):
    g = leaf_spine(2, 1, 2)
    plan = plan_network(g)
    cfgs = router_configs(g, plan, ["h0", "h3"], 8, "loss=0.1,seed=1", tmp_path)
    assert set(cfgs) == set(plan.switches)
    assert cfgs["leaf0"]["fib"]["/h0"] == [plan.ports["leaf0"]["h0"]]
    assert cfgs["leaf0"]["fib"]["/h3"] == [plan.ports["leaf0"]["spine0"]]
    assert cfgs["spine0"]["cs_capacity"] == 8 and cfgs["spine0"]["impair"] == "loss=0.1,seed=1"


# ------------------------------------------------------------------ classification


def test_classify_ndn_and_tcp_frames():
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import ARP, Ether

    mac = "02:00:00:00:00:01"
    dist = encode_data(nn.with_segment(nn.distribute_name(PS, T, 7), 0), b"x" * 100)
    fetch = encode_data(nn.with_segment(nn.fetch_name(PS, T, 3), 1), b"y")
    other = encode_data(nn.distribute_name(PS, T), b"")
    interest = encode_interest(nn.insert_name(PS, T), 5)
    assert classify(eth_frame(NDN_MULTICAST_MAC, mac, dist)) == ("ndn-distribute", 7)
    assert classify(eth_frame(NDN_MULTICAST_MAC, mac, fetch)) == ("ndn-fetch", 3)
    assert classify(eth_frame(NDN_MULTICAST_MAC, mac, other)) == ("ndn-data", None)
    assert classify(eth_frame(NDN_MULTICAST_MAC, mac, interest)) == ("ndn-interest", None)
    bad = eth_frame(NDN_MULTICAST_MAC, mac, dist)[:40]
    assert classify(bad) == ("ndn-malformed", None)
    data = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(flags="PA") / (b"z" * 50))
    ack = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(flags="A"))
    assert classify(data) == ("tcp-data", None)
    assert classify(ack) == ("tcp-ack", None)
    assert classify(bytes(Ether() / ARP())) == ("other", None)
    assert classify(b"\x00" * 10) == ("other", None)


# ------------------------------------------------------------------ training helpers


def test_quantized_mean_is_the_exact_wrapped_integer_sum():
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(50).astype(np.float32) for _ in range(3)]
    qs = [quantize(g, 20, 3).values for g in grads]
    want = dequantize(np.sum(qs, axis=0, dtype=np.int64).astype(np.int32), 20) / np.float32(3)
    got = quantized_mean([q.astype("<i4").tobytes() for q in qs], 20)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    big = np.full(4, 2**31 - 1, dtype="<i4").tobytes()
    assert np.all(quantized_mean([big, big], 0) == np.float32(-1.0))  # wrap-around, as INA


def test_parse_sweep():
    assert parse_sweep("4, 8,12") == [4, 8, 12]
    assert parse_sweep("") == []
    for text, msg in (("4,x", "'x' is not a worker count"), ("0", "'0' is not"),
                      ("4,4", "appears twice")):
        with pytest.raises(ExperimentError, match=msg):
            parse_sweep(text)


def test_ndn_rounds_and_comparison_on_hand_made_reports():
    ps = {"versions": [{"version": 0, "time": 10.0, "sha256": "a", "accuracy": 0.1,
                        "retx_total": 0},
                       {"version": 1, "time": 10.5, "sha256": "b", "accuracy": 0.2,
                        "retx_total": 1},
                       {"version": 2, "time": 10.7, "sha256": "c", "accuracy": 0.3,
                        "retx_total": 2}],
          "stats": {"retransmissions": 2}}
    gpus = [{"received": [{"version": 1, "sha256": "b", "recovered": False, "retx_total": 0},
                          {"version": 2, "sha256": "c", "recovered": True, "retx_total": 3}],
             "rounds": [{"loss": 1.0, "clipped": 0}, {"loss": 0.5, "clipped": 1}],
             "stats": {"retransmissions": 3}},
            {"received": [{"version": 1, "sha256": "b", "recovered": False},
                          {"version": 2, "sha256": "WRONG", "recovered": False}],
             "rounds": [{"loss": 3.0, "clipped": 0}, {"loss": 1.5, "clipped": 0}],
             "stats": {"retransmissions": 0}}]
    gpus[1]["received"][0]["retx_total"] = 2
    gpus[1]["received"][1]["retx_total"] = 2
    tap = {"bytes_by_version": {"ndn-distribute": {"1": 1000, "2": 1000},
                                "ndn-fetch": {"2": 300}}}
    moved = {("edge0", "h0"): 4000, ("h0", "edge0"): 6000, ("a", "b"): 9000}
    rounds = ndn_rounds(ps, gpus, [0.2, 0.3], tap, moved, "h0", "edge0")
    assert [r["time_s"] for r in rounds] == pytest.approx([0.5, 0.2])
    assert [r["exact"] for r in rounds] == [True, False]
    assert [r["recovered"] for r in rounds] == [0, 1]
    assert [r["retransmissions"] for r in rounds] == [1 + 0 + 2, 1 + 3 + 0]
    assert [r["fetch_bytes"] for r in rounds] == [0, 300]
    assert rounds[0]["ps_tx_bytes"] == 3000 and rounds[0]["busiest_link_bytes"] == 4500
    assert rounds[0]["loss"] == 2.0
    modes = {"ndn@2": {"kind": "ndn", "n_workers": 2, "dist_bytes_per_round": 1000.0,
                       "round_s_median": 0.3, "rounds": rounds},
             "tcp-ps@2": {"kind": "tcp-ps", "n_workers": 2, "dist_bytes_per_round": 2100.0,
                          "round_s_median": 0.2, "rounds": rounds}}
    row = comparison(modes)["2"]
    assert row["dist_ratio_tcp_over_ndn"] == pytest.approx(2.1)
    assert row["ratio_over_n"] == pytest.approx(1.05)


# ------------------------------------------------------------------ the router daemon


def _frame_name(frame: bytes) -> str:
    from workers.ndn.packets import decode_data, decode_interest, packet_type

    wire = eth_unframe(frame)[2]
    pkt = decode_interest(wire) if packet_type(wire) == 0x05 else decode_data(wire)
    return nn.to_uri(pkt.name)


def _is_ndn(frame: bytes) -> bool:
    return int.from_bytes(frame[12:14], "big") == NDN_ETHERTYPE


@pytest.mark.root
def test_router_daemon_multicasts_on_the_persistent_pit_over_veths(tmp_path):
    netns = pytest.importorskip("netns")
    if not netns.have_netns_support():
        pytest.skip("needs ip netns")
    with netns.veth_hosts(3, ips=False) as hosts:
        # router ports 1, 2, 3: the PS and two GPUs
        cfg = {"name": "r1", "ports": {str(i + 1): h.switch_if for i, h in enumerate(hosts)},
               "fib": {"/ps0": [1], "/g1": [2], "/g2": [3]}, "cs_capacity": 0, "impair": "",
               "counters_file": str(tmp_path / "counters.json")}
        (tmp_path / "cfg.json").write_text(json.dumps(cfg))
        proc = subprocess.Popen([sys.executable, "-m", "workers.ndn.router_node",
                                 str(tmp_path / "cfg.json")], cwd=ROOT, stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline().rstrip().endswith("ready")
            p_ps, p1, p2 = (h.port() for h in hosts)

            def send(port, wire, mac):
                port.send(eth_frame(NDN_MULTICAST_MAC, mac, wire))

            for k, p in enumerate((p1, p2)):
                send(p, encode_interest(nn.insert_name(PS, T), 100 + k), "02:00:00:00:00:0a")
            got = netns.expect_frames(p_ps, _is_ndn, 2)
            assert [_frame_name(f) for f in got] == ["/insert/ps0/t"] * 2
            # distribution: multicast to both subscribers, wire unchanged
            dist = encode_data(nn.with_segment(nn.distribute_name(PS, T, 1), 0), b"params")
            send(p_ps, dist, "02:00:00:00:00:0b")
            for p in (p1, p2):
                (f,) = netns.expect_frames(p, _is_ndn, 1)
                assert eth_unframe(f)[2] == dist and f[:6] == bytes.fromhex("01005e0017aa")
            # a normal Interest/Data pair goes back to the asking face only
            name = nn.with_segment(nn.fetch_name(PS, T, 1), 0)
            send(p1, encode_interest(name, 7), "02:00:00:00:00:0a")
            assert [_frame_name(f) for f in netns.expect_frames(p_ps, _is_ndn, 1)] == \
                ["/ps0/t/v=1/seg=0"]
            send(p_ps, encode_data(name, b"params"), "02:00:00:00:00:0b")
            assert len(netns.expect_frames(p1, _is_ndn, 1)) == 1
            assert netns.quiet_for(p2, _is_ndn)
            # a non-NDN frame is ignored; a delete removes one face
            p1.send(b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\x00" * 46)
            send(p1, encode_interest(nn.delete_name(PS, T), 9), "02:00:00:00:00:0a")
            time.sleep(0.1)
            send(p_ps, encode_data(nn.with_segment(nn.distribute_name(PS, T, 2), 0), b"p2"),
                 "02:00:00:00:00:0b")
            assert len(netns.expect_frames(p2, _is_ndn, 1)) == 1
            assert netns.quiet_for(p1, _is_ndn)
            for p in (p_ps, p1, p2):
                p.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=5) == 0
    rep = json.loads((tmp_path / "counters.json").read_text())
    c = rep["counters"]
    assert (c["ppit_inserts"], c["ppit_deletes"], c["ppit_forwards"]) == (2, 1, 2)
    assert c["ppit_copies"] == 3 and c["pit_created"] == 1 and c["pit_satisfied"] == 1
    assert rep["ppit"] == {"/ps0/t": [3]} and rep["non_ndn_frames"] >= 1


@pytest.mark.root
def test_router_daemon_injects_loss_on_its_ports(tmp_path):
    netns = pytest.importorskip("netns")
    if not netns.have_netns_support():
        pytest.skip("needs ip netns")
    with netns.veth_hosts(2, ips=False) as hosts:
        cfg = {"name": "r2", "ports": {str(i + 1): h.switch_if for i, h in enumerate(hosts)},
               "fib": {"/ps0": [1]}, "impair": "loss=0.5,seed=3,dir=in",
               "counters_file": str(tmp_path / "counters.json")}
        (tmp_path / "cfg.json").write_text(json.dumps(cfg))
        proc = subprocess.Popen([sys.executable, "-m", "workers.ndn.router_node",
                                 str(tmp_path / "cfg.json")], cwd=ROOT, stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline().rstrip().endswith("ready")
            p_ps, p1 = (h.port() for h in hosts)
            for k in range(200):
                p1.send(eth_frame(NDN_MULTICAST_MAC, "02:00:00:00:00:0a",
                                  encode_interest(nn.with_segment(nn.fetch_name(PS, T, 1), k),
                                                  k)))
            got = netns.expect_frames(p_ps, _is_ndn, 200, timeout=1.0)
            p_ps.close()
            p1.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=5) == 0
    rep = json.loads((tmp_path / "counters.json").read_text())
    rx = rep["impairments"]["2"]["rx"]
    assert rx["offered"] == 200 and rx["dropped"] + len(got) == 200
    assert 60 < rx["dropped"] < 140  # about half, seeded
    assert rep["counters"]["interests_in"] == len(got)
