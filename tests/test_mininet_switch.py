"""Mininet: h1 — pyswitch — h2 built from a networkx model, IPv4 rules installed through the
project's P4Runtime client; ping and a UDP stream pass. Plus the pure numbering plan."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap

import networkx as nx
import pytest
from netns import unique_tag
from switch_harness import REPO, compile_for

P4 = REPO / "tests" / "p4" / "rt_forward.p4"


def test_plan_numbering_is_stable_and_exposed():
    from topo.mininet_net import host_address, plan_network

    g = nx.Graph()
    for n in ("h10", "h2", "h1"):
        g.add_node(n, kind="host")
    g.add_node("s2", kind="switch")
    g.add_node("s10", kind="switch")
    g.add_edges_from([("s10", "h10"), ("s2", "h2"), ("s2", "h1"), ("s2", "s10")], bw=100)
    plan = plan_network(g)
    assert plan.switches == ["s2", "s10"]
    assert plan.device_ids == {"s2": 1, "s10": 2}
    assert plan.ports["s2"] == {"h1": 1, "h2": 2, "s10": 3}
    assert plan.port_peer("s10") == {1: "h10", 2: "s2"}
    assert [plan.hosts[h].ip for h in ("h1", "h2", "h10")] == ["10.0.0.1", "10.0.0.2",
                                                                "10.0.0.3"]
    assert plan.hosts["h1"].mac == "00:00:0a:00:00:01"
    assert ("s2", "s10", 3, 2, {"bw": 100.0}) in plan.links
    assert host_address(253) == ("10.0.0.254", "00:00:0a:00:00:fe")
    assert host_address(254) == ("10.0.1.1", "00:00:0a:00:01:01")
    assert plan_network(g, bw_unit_mbps=10).links[-1][4] == {"bw": 1000.0}
    assert plan_network(g, bw_unit_mbps=None).links[-1][4] == {}
    bad = nx.Graph()
    bad.add_node("x")
    with pytest.raises(ValueError, match="kind"):
        plan_network(bad)


def test_plan_follows_topology_models():
    from topo import models
    from topo.mininet_net import plan_network

    g = models.fat_tree(4)
    plan = plan_network(g)
    assert plan.device_ids == models.switch_ids(g)
    # every link appears once with matching port numbers on both ends
    assert len(plan.links) == g.number_of_edges()
    for u, v, pu, pv, _ in plan.links:
        assert plan.ports[u][v] == pu and plan.ports[v][u] == pv
        if u in plan.device_ids:
            assert plan.port_peer(u)[pu] == v
    for s in plan.switches:  # switch ports are 1..degree
        assert sorted(plan.ports[s].values()) == list(range(1, g.degree(s) + 1))
    b = models.bcube(2, 2)
    bp = plan_network(b)
    h = bp.hosts["h0"]
    assert len(h.ips) == 2 and h.ips[1].startswith("10.1.")  # one address per NIC
    assert [b.nodes[n]["level"] for n in h.neighbours] == [0, 1]  # NIC j = level j


RECEIVER = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE: hold the whole stream
    s.bind(("0.0.0.0", 5001))
    s.settimeout(3)
    seen = set()
    print("ready", flush=True)
    try:
        while len(seen) < int(sys.argv[1]):
            seen.add(int(s.recv(2048).split(b":")[0]))
    except socket.timeout:
        pass
    print(len(seen), flush=True)
""")

SENDER = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(int(sys.argv[2])):
        s.sendto(b"%d:" % i + b"x" * 1000, (sys.argv[1], 5001))
        if i % 50 == 49:
            time.sleep(0.005)
""")


@pytest.mark.root
@pytest.mark.mininet
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.skipif(importlib.util.find_spec("mininet") is None, reason="Mininet not installed")
def test_two_hosts_ping_and_udp_through_pyswitch(tmp_path):
    from controller.dataplane.p4runtime_client import SwitchConnection
    from topo.mininet_net import build_net
    from topo.mininet_switch import PySwitch

    tag = unique_tag("m")
    a, b, s = f"{tag}a", f"{tag}b", f"{tag}s"
    g = nx.Graph()
    g.add_node(a, kind="host")
    g.add_node(b, kind="host")
    g.add_node(s, kind="switch")
    g.add_edge(a, s, bw=100)
    g.add_edge(s, b, bw=100)
    compiled = compile_for("pyswitch", P4, tmp_path / "build")
    mn = build_net(g, switch_cls=PySwitch, switch_opts={"log_dir": str(tmp_path)})
    try:
        plan = mn.plan
        ha, hb = plan.hosts[a], plan.hosts[b]
        with SwitchConnection(mn.grpc_address(s), device_id=mn.device_id(s), election_id=1,
                              name=s) as c:
            c.connect()
            c.set_pipeline(compiled.p4info_path, compiled.config_path)
            for h in (ha, hb):
                c.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": f"{h.ip}/32"},
                                     "MyIngress.ipv4_forward",
                                     {"dstAddr": h.mac, "port": plan.ports[s][h.name]})
            assert len(c.read_table_entries("MyIngress.ipv4_lpm")) == 2
            net_a, net_b = mn.net.get(a), mn.net.get(b)
            out = net_a.cmd(f"ping -c 3 -i 0.2 -W 2 {hb.ip}")
            assert " 0% packet loss" in out, out
            n = 2000
            recv = net_b.popen([sys.executable, "-c", RECEIVER, str(n)], text=True)
            assert recv.stdout.readline().strip() == "ready"
            net_a.cmd(f"{sys.executable} -c '{SENDER}' {hb.ip} {n}")
            got = int(recv.communicate(timeout=20)[0].strip().splitlines()[-1])
            assert got == n
            # the ingress-port counter of the switch saw the stream (+ pings, no ARP)
            packets = c.read_counter("MyIngress.rx_port_counter", plan.ports[s][a])
            assert packets[plan.ports[s][a]][0] >= n + 3
    finally:
        mn.stop()


def test_targets_table_carries_what_differs(tmp_path, monkeypatch):
    """``--target`` names a class of topo.mininet_switch.TARGETS; the class says how a program
    is compiled for it, what the machine needs and which options it takes (no caller asks
    which target it has)."""
    import argparse

    from controller.errors import ExperimentError
    from controller.experiment import network
    from topo.mininet_switch import TARGETS, BMv2Switch, PySwitch

    assert TARGETS == {"pyswitch": PySwitch, "bmv2": BMv2Switch}
    prog, cfg, info = tmp_path / "ina.p4", tmp_path / "b" / "ina.json", tmp_path / "i.txtpb"
    assert PySwitch.compile_command(prog, cfg, info, ["-DX=1"]) == [
        sys.executable, "-m", "pyswitch", "compile", str(prog), "-o", str(cfg), "-DX=1",
        "--p4runtime-files", str(info)]
    assert BMv2Switch.compile_command(prog, cfg, info, ["-DX=1"]) == [
        "p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path / "b"), "-DX=1",
        "--p4runtime-files", str(info), str(prog)]
    assert PySwitch.missing_tools() == []
    monkeypatch.setenv("PATH", str(tmp_path))  # neither p4c nor simple_switch_grpc there
    assert BMv2Switch.missing_tools() == ["p4c", "simple_switch_grpc"]
    assert (PySwitch.impairments, PySwitch.control_sockets) == (True, True)
    assert (BMv2Switch.impairments, BMv2Switch.control_sockets) == (False, False)
    assert network.switch_class("bmv2") is BMv2Switch
    with pytest.raises(ExperimentError, match="--target tofino: expected one of pyswitch, bmv2"):
        network.switch_class("tofino")
    if os.geteuid() == 0 and importlib.util.find_spec("mininet") is not None:
        with pytest.raises(ExperimentError, match=r"^--target bmv2 needs p4c and "
                                                  r"simple_switch_grpc on PATH \(see docker"):
            network.check_environment("bmv2")
        network.check_environment("pyswitch")
    # argparse reads the table's names through TARGET_CHOICES
    p = argparse.ArgumentParser(exit_on_error=False)
    network.add_target_option(p)
    assert p.parse_args(["--target", "bmv2"]).target == "bmv2"
    assert "switch target: pyswitch, bmv2 (default pyswitch)" in p.format_help()
    with pytest.raises(argparse.ArgumentError, match="'pyswitch', 'bmv2'"):
        p.parse_args(["--target", "tofino"])


def test_target_choices_do_not_import_mininet():
    """Parsing a command that never starts a switch does not pay Mininet's import."""
    import subprocess

    code = ("import sys, argparse\n"
            "from controller.experiment.network import add_target_option\n"
            "p = argparse.ArgumentParser()\n"
            "add_target_option(p)\n"
            "assert p.parse_args([]).target == 'pyswitch'\n"
            "print('mininet' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout
    assert out.strip() == "False"
