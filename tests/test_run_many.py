"""Several pyswitch switches in one process (``pyswitch run-many``, pyswitch.loop.MultiLoop)
and their grouping in Mininet (topo.switch_groups, topo.mininet_switch.PySwitch).

Root tests put two switches on veths in namespaces: each forwards with its own program and
tables, its counters equal what its own loop gives alone, its impairments stay on its ports,
its P4Runtime server answers for its own device id only, and SIGTERM stops the process."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import networkx as nx
import pytest
from netns import expect_frames, free_tcp_port, is_root, unique_tag, veth_hosts
from test_daemon_loop import _expected, _frames

from pyswitch import compile_p4
from pyswitch.errors import UsageError
from pyswitch.ports import Port
from tests.test_native import HERE, _pre
from topo.switch_groups import DEFAULT, counted_once, parse_per_process, per_process, plan_groups

root = pytest.mark.skipif(not is_root(), reason="needs root (namespaces, raw sockets)")
DST, SRC = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")


# ---------------------------------------------------------------- pure: groups and specs

def test_groups_are_consecutive_and_as_even_as_possible():
    names = [f"s{i}" for i in range(80)]
    assert [len(g) for g in plan_groups(names, 30)] == [27, 27, 26]
    assert [len(g) for g in plan_groups(names, 40)] == [40, 40]
    assert sum(plan_groups(names, 7), []) == names  # order kept, every switch once
    assert plan_groups(names[:3], 1) == [["s0"], ["s1"], ["s2"]]
    assert plan_groups([], 4) == []
    with pytest.raises(ValueError):
        plan_groups(names, 0)


def test_per_process_setting_and_auto():
    assert parse_per_process("auto") == "auto" and parse_per_process(" 20 ") == 20
    for bad in ("0", "-1", "x", ""):
        with pytest.raises(ValueError, match="count >= 1"):
            parse_per_process(bad)
    assert per_process(20, 80, 2) == 20
    assert per_process("auto", 80, 2) == 40  # as many processes as cores
    assert per_process("auto", 5, 2) == 1  # a small network: one process per switch
    assert per_process("auto", 20, 4) == 1  # make run's 20 switches: one process each
    assert per_process("auto", 33, 4) == 9  # past AUTO_MIN_SWITCHES: one process per core
    assert DEFAULT == "auto" and parse_per_process(DEFAULT) == "auto"


def test_a_shared_process_is_counted_once_under_its_first_switch():
    pids = [("agg0", 10), ("agg1", 10), ("core0", 11), ("edge0", 10), ("edge1", 12)]
    assert counted_once(pids) == {"agg0": 10, "core0": 11, "edge1": 12}


def test_group_spec_holds_each_switch_run_arguments():
    from topo.mininet_switch import group_spec

    py = sys.executable
    spec = group_spec([[py, "-m", "pyswitch", "run", "--device-id", "1", "--no-p4"],
                       [py, "-m", "pyswitch", "run", "--device-id", "2", "x.json"]])
    assert spec == {"switches": [["--device-id", "1", "--no-p4"],
                                 ["--device-id", "2", "x.json"]]}


def test_batch_shutdown_signals_a_shared_process_once():
    from topo.mininet_switch import P4RuntimeSwitch

    class Proc:
        def __init__(self) -> None:
            self.signals: list[int] = []

        def poll(self) -> None:
            return None

        def send_signal(self, sig: int) -> None:
            self.signals.append(sig)

    shared, alone = Proc(), Proc()
    sws = [SimpleNamespace(proc=p) for p in (shared, shared, shared, alone)]
    P4RuntimeSwitch.batchShutdown(tuple(sws))
    assert shared.signals == [signal.SIGTERM] and alone.signals == [signal.SIGTERM]


def test_spec_mistakes_are_one_line_each(tmp_path):
    from pyswitch.run_many import parse_spec_text, parse_switch_args

    for text, msg in (("{", "not JSON"), ("[]", "expected an object"),
                      ('{"switches": []}', "non-empty"),
                      ('{"switches": [["-i", 1]]}', "switch 1: expected a list of strings")):
        with pytest.raises(UsageError, match=msg):
            parse_spec_text(text)
    a = ["--grpc-server-addr", "127.0.0.1:1", "-i", "1@va"]
    b = ["--grpc-server-addr", "127.0.0.1:2", "-i", "1@vb"]
    assert len(parse_switch_args([a, b])) == 2
    for argvs, msg in (([a, [*b, "-i", "2@va"]], "switch 2: interface va is switch 1's"),
                       ([a, ["--grpc-server-addr", "127.0.0.1:1"]],
                        "switch 2: --grpc-server-addr 127.0.0.1:1 is switch 1's"),
                       ([[*a, "--control-socket", "/x"], [*b, "--control-socket", "/x"]],
                        "--control-socket /x is switch 1's"),
                       ([a, ["-i", "1@vc"]], "switch 2: --grpc-server-addr is required"),
                       ([a, [*b, "--impair", "3:loss=1"]], "switch 2: --impair"),
                       ([[*a, "--version"]], "not switch options")):
        with pytest.raises(UsageError, match=msg):
            parse_switch_args(argvs)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"switches": [a, [*b, "-i", "2@va"]]}))
    r = subprocess.run([sys.executable, "-m", "pyswitch", "run-many", str(spec)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"pyswitch run-many: {spec}: switch 2: interface va is switch 1's too"]


def test_the_run_option_sets_the_switches_environment(monkeypatch):
    from controller.errors import ExperimentError
    from controller.experiment.run_options import apply_switch_processes
    from topo.switch_groups import ENV

    monkeypatch.delenv(ENV, raising=False)
    apply_switch_processes(SimpleNamespace(switches_per_process=None))
    assert ENV not in os.environ  # not given: PYSWITCH_PER_PROCESS or the default
    apply_switch_processes(SimpleNamespace(switches_per_process="auto"))
    assert os.environ[ENV] == "auto"
    apply_switch_processes(SimpleNamespace(switches_per_process="auto", fail_switch="s1@2"))
    assert os.environ[ENV] == "1"  # a killed switch must not take its group with it
    with pytest.raises(ExperimentError, match="--fail-switch"):
        apply_switch_processes(SimpleNamespace(switches_per_process="4", fail_switch="s1@2"))
    with pytest.raises(ExperimentError, match="--switches-per-process"):
        apply_switch_processes(SimpleNamespace(switches_per_process="0"))


# ---------------------------------------------------------------- root: one loop, two switches

def _devices(monkeypatch):
    """Switch A: tests/p4/pyswitch_pre.p4 (multicast, clones, drops, a frame that raises);
    switch B: tests/p4/rt_forward.p4 with one l2 entry (dstAddr 0xbb -> port 2)."""
    from pyswitch.p4runtime.pipeline import Device

    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    pre = compile_p4(HERE / "p4" / "pyswitch_pre.p4")
    fwd = compile_p4(HERE / "p4" / "rt_forward.p4")
    a, b = Device(device_id=1), Device(device_id=2)
    a.switch = a.make_switch(pre)
    _pre(a.switch)
    a.switch.mcast[2] = [(6, 7), "not a replica"]
    b.switch = b.make_switch(fwd)
    b.switch.insert_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": 0xBB},
                          "MyIngress.set_port", {"port": 2})
    return pre, a, b


@contextlib.contextmanager
def _running(loops: list, grouped: bool):
    """The loops forwarding: in one MultiLoop thread (``grouped``) or each in its own."""
    from pyswitch.loop import MultiLoop

    runners = [MultiLoop(loops)] if grouped else loops
    threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        for r in runners:
            r.stop()
        for t in threads:
            t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert all(lp.loop_errors == 0 for lp in loops)


def _forward_both(monkeypatch, grouped: bool) -> dict:
    """Frames through switch A (ports 1-4) and B (ports 1-3) on seven veths, interleaved;
    what each host port got and each switch's counters."""
    from pyswitch.impairment import parse_spec
    from pyswitch.loop import ForwardingLoop

    _, a, b = _devices(monkeypatch)
    frames = _frames()
    to_b = [DST + SRC + b"\x88\xb5" + b"TO-B" + bytes([k]) + bytes(40) for k in range(24)]
    with veth_hosts(7, ips=False) as hosts:
        ports_a = {i: Port(hosts[i - 1].switch_if) for i in range(1, 5)}
        ports_b = {i: Port(hosts[i + 3].switch_if) for i in range(1, 4)}
        hp = {i: h.port() for i, h in enumerate(hosts, 1)}
        la = ForwardingLoop(a, ports_a, native_loop=False)
        lb = ForwardingLoop(b, ports_b, native_loop=False)
        la.imp.set(2, parse_spec("delay_ms=1,dir=out"))  # A's port 2 through the timers
        with _running([la, lb], grouped):
            for f, g in zip(frames, to_b, strict=True):
                assert hp[3].send(f) and hp[5].send(g)
                time.sleep(0.002)
            got = {i: expect_frames(hp[i], lambda f: b"PAYLOAD" in f or b"TO-B" in f,
                                    n, timeout=3.0)
                   for i, n in ((1, 30), (2, 30), (4, 30), (6, 24), (7, 1))}
        for p in [*ports_a.values(), *ports_b.values(), *hp.values()]:
            p.close()
    counters = {}
    for name, lp in (("a", la), ("b", lb)):
        c = lp.counters()
        c["switch"].pop("loop")
        for port in c["ports"].values():
            port.pop("ifname")
        counters[name] = c
    return {"got": got, "counters": counters, "loops": (la, lb), "to_b": to_b}


@pytest.mark.root
@root
def test_two_switches_in_one_loop_forward_and_count_as_each_alone(monkeypatch):
    pre, _, _ = _devices(monkeypatch)
    want, bad = _expected(pre)
    alone = _forward_both(monkeypatch, grouped=False)
    grouped = _forward_both(monkeypatch, grouped=True)
    for run in (alone, grouped):
        got = run["got"]
        for i in (1, 2, 4):  # switch A: its own program's outputs, frame for frame
            assert got[i] == want.get(i, []), i
        assert got[6] == run["to_b"] and got[7] == []  # switch B: its own table
        la, lb = run["loops"]
        assert la.process_errors == bad and lb.process_errors == 0
        assert lb.processed == len(run["to_b"])
        assert run["counters"]["b"]["impairments"] == {}  # A's delay is on A's port only
        assert list(run["counters"]["a"]["impairments"]) == ["2"]
    assert grouped["counters"] == alone["counters"]
    la, lb = grouped["loops"]
    assert la.loop_path.startswith("python (the Python loop of run-many")


@pytest.mark.root
@root
def test_an_impairment_on_one_switch_leaves_the_other_alone(monkeypatch):
    from pyswitch.loop import ForwardingLoop

    _, a, b = _devices(monkeypatch)
    with veth_hosts(5, ips=False) as hosts:
        pa = {1: Port(hosts[0].switch_if), 2: Port(hosts[1].switch_if)}
        pb = {1: Port(hosts[2].switch_if), 2: Port(hosts[3].switch_if),
              3: Port(hosts[4].switch_if)}
        hp = {i: h.port() for i, h in enumerate(hosts, 1)}
        la, lb = ForwardingLoop(a, pa), ForwardingLoop(b, pb)
        with _running([la, lb], grouped=True):
            la.set_impairment(None, "loss=1,seed=1")  # every port of A drops

            def burst(tag: bytes) -> tuple[int, int]:
                for k in range(20):  # A: EtherType 0x1001 -> port 2; B: l2 -> port 2
                    assert hp[1].send(DST + SRC + b"\x10\x01" + tag + bytes([k]) + bytes(50))
                    assert hp[3].send(DST + SRC + b"\x88\xb5" + tag + bytes([k]) + bytes(50))
                return (len(expect_frames(hp[2], lambda f: tag in f, 20, timeout=1.0)),
                        len(expect_frames(hp[4], lambda f: tag in f, 20, timeout=1.5)))

            assert burst(b"LOSSY") == (0, 20)
            la.set_impairment(None, "none")
            assert burst(b"CLEAR") == (20, 20)
        assert lb.counters()["impairments"] == {}
        assert la.counters()["impairments"]["1"]["rx"]["dropped"] == 20
        for p in [*pa.values(), *pb.values(), *hp.values()]:
            p.close()


# ---------------------------------------------------------------- root: the process

def _p4rt_device_answer(address: str, device_id: int) -> str:
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    with grpc.insecure_channel(address) as ch:
        grpc.channel_ready_future(ch).result(timeout=20)
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=device_id)
        try:
            p4runtime_pb2_grpc.P4RuntimeStub(ch).GetForwardingPipelineConfig(req, timeout=5)
        except grpc.RpcError as exc:
            return exc.code().name
        return "OK"


@pytest.mark.root
@root
def test_run_many_serves_each_switch_and_stops_on_sigterm(tmp_path):
    from pyswitch.daemon import control_request

    config = tmp_path / "fwd.json"
    subprocess.run([sys.executable, "-m", "pyswitch", "compile",
                    str(HERE / "p4" / "rt_forward.p4"), "-o", str(config)],
                   check=True, capture_output=True, timeout=120)
    with veth_hosts(3, ips=False) as hosts:
        addr = {1: f"127.0.0.1:{free_tcp_port()}", 7: f"127.0.0.1:{free_tcp_port()}"}
        sock = {1: str(tmp_path / "a.sock"), 7: str(tmp_path / "b.sock")}
        spec = {"switches": [
            ["--device-id", "1", "--grpc-server-addr", addr[1], "-i", f"1@{hosts[0].switch_if}",
             "--control-socket", sock[1], "--log-console", str(config)],
            ["--device-id", "7", "--grpc-server-addr", addr[7], "-i", f"1@{hosts[1].switch_if}",
             "-i", f"2@{hosts[2].switch_if}", "--control-socket", sock[7], "--impair",
             "2:loss=0.5,seed=3", "--no-p4"]]}
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        proc = subprocess.Popen([sys.executable, "-m", "pyswitch", "run-many",
                                 str(tmp_path / "spec.json")], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            assert _p4rt_device_answer(addr[1], 1) == "OK"
            assert _p4rt_device_answer(addr[1], 7) == "NOT_FOUND"
            assert _p4rt_device_answer(addr[7], 7) == "FAILED_PRECONDITION"  # --no-p4
            assert _p4rt_device_answer(addr[7], 1) == "NOT_FOUND"
            ca, cb = (control_request(sock[i], {"op": "counters"}) for i in (1, 7))
            assert [p["ifname"] for p in ca["ports"].values()] == [hosts[0].switch_if]
            assert [p["ifname"] for p in cb["ports"].values()] == [hosts[1].switch_if,
                                                                   hosts[2].switch_if]
            assert ca["switch"]["path"] is not None and cb["switch"]["path"] is None
            assert "loss" in json.dumps(cb["impairments"]["2"])
            assert ca["impairments"] == {}
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            out = proc.communicate()[0]
    assert "device 1: P4Runtime on" in out and "device 7: P4Runtime on" in out
    assert not os.path.exists(sock[1]) and not os.path.exists(sock[7])


# ---------------------------------------------------------------- root: Mininet groups

@pytest.mark.root
@pytest.mark.mininet
@root
@pytest.mark.skipif(importlib.util.find_spec("mininet") is None, reason="Mininet not installed")
def test_mininet_switches_in_groups_forward_answer_and_stop(tmp_path, monkeypatch):
    """a - s1 - s2 - s3 - b with two switches per process: s1 and s2 share a process, s3
    has its own; each switch takes its own pipeline and rules over its own P4Runtime
    server, a ping crosses all three, the shared process is counted once and ends with
    the network."""
    from switch_harness import REPO, compile_for

    from controller.dataplane.p4runtime_client import SwitchConnection
    from topo.mininet_net import build_net
    from topo.mininet_switch import PySwitch

    monkeypatch.delenv("PYSWITCH_PER_PROCESS", raising=False)
    tag = unique_tag("g")
    a, b = f"{tag}a", f"{tag}b"
    s = [f"{tag}s{i}" for i in (1, 2, 3)]
    g = nx.Graph()
    for h in (a, b):
        g.add_node(h, kind="host")
    for sw in s:
        g.add_node(sw, kind="switch")
    path = [a, *s, b]
    nx.add_path(g, path, bw=100)
    compiled = compile_for("pyswitch", REPO / "tests" / "p4" / "rt_forward.p4",
                           tmp_path / "build")
    mn = build_net(g, switch_cls=PySwitch,
                   switch_opts={"log_dir": str(tmp_path), "per_process": 2})
    try:
        nodes = [mn.net.get(sw) for sw in s]
        assert nodes[0].proc is nodes[1].proc and nodes[2].proc is not nodes[0].proc
        assert nodes[0].group == (s[0], s[1]) and nodes[2].group == (s[2],)
        assert "run-many" in nodes[0].proc.args and "run" in nodes[2].proc.args
        assert counted_once([(n.name, n.proc.pid) for n in nodes]) == {
            s[0]: nodes[0].proc.pid, s[2]: nodes[2].proc.pid}
        plan = mn.plan
        for sw in s:
            with SwitchConnection(mn.grpc_address(sw), device_id=mn.device_id(sw),
                                  election_id=1, name=sw) as c:
                c.connect()
                c.set_pipeline(compiled.p4info_path, compiled.config_path)
                i = path.index(sw)
                for h, toward in ((plan.hosts[a], path[i - 1]), (plan.hosts[b], path[i + 1])):
                    c.insert_table_entry("MyIngress.ipv4_lpm",
                                         {"hdr.ipv4.dstAddr": f"{h.ip}/32"},
                                         "MyIngress.ipv4_forward",
                                         {"dstAddr": h.mac, "port": plan.ports[sw][toward]})
        out = mn.net.get(a).cmd(f"ping -c 3 -i 0.2 -W 2 {plan.hosts[b].ip}")
        assert " 0% packet loss" in out, out
        procs = {id(n.proc): n.proc for n in nodes}.values()
    finally:
        mn.stop()
    assert all(p.poll() is not None for p in procs)
