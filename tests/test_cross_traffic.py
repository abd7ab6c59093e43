"""Cross traffic (issue 39, "Fairness with other traffic"): the TCP model over the simulated
network's links (alone it fills a link; two flows share one fairly), the option's parsing and
default pair, the fairness record, and a simulated run of an INA job beside a PS-only job and
a TCP flow through ina.p4's switches."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from controller.errors import ExperimentError
from controller.experiment.cross_traffic import (
    FlowFigures,
    TcpPair,
    fairness,
    parse_cross_traffic,
    resolve_pairs,
)
from controller.experiment.simulate.cross import MSS, SimCrossTraffic, tcp_frame
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork
from controller.plan.lp_jobs import jain

HOSTS = {f"h{i}": (f"10.0.0.{i}", f"00:00:00:00:00:0{i}") for i in range(1, 4)}


class _Forwarder:
    """A switch that forwards by destination IPv4 (the network's links are under test)."""

    def __init__(self, port_of_ip: dict[bytes, int]) -> None:
        self.port_of_ip = port_of_ip

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return [(self.port_of_ip[frame[30:34]], frame)]


def _star(n_hosts: int, queue: int = 100) -> tuple[EventLoop, SimNetwork]:
    """Hosts h1..hn on switch s at 1 Mbit/s each, 1 ms per link direction."""
    g = nx.Graph()
    ports: dict[str, dict[str, int]] = {"s": {}}
    for i in range(1, n_hosts + 1):
        g.add_edge(f"h{i}", "s", bw=1.0)
        ports["s"][f"h{i}"] = i
        ports[f"h{i}"] = {"s": 0}
    fwd = _Forwarder({bytes(int(x) for x in HOSTS[f"h{i}"][0].split(".")): i
                      for i in range(1, n_hosts + 1)})
    loop = EventLoop()
    net = SimNetwork(loop, g, ports, {"s": fwd}, 1.0, 0.001, queue, None,
                     on_host=lambda h, f: None)
    return loop, net


def test_frames_are_the_sizes_of_linux_tcp():
    data = tcp_frame(HOSTS["h1"], HOSTS["h2"], 40000, 5001, 0, 0, MSS)
    ack = tcp_frame(HOSTS["h2"], HOSTS["h1"], 5001, 40000, 0, MSS, 0)
    assert (len(data), len(ack)) == (1514, 66)
    assert data[23] == 6 and data[14] == 0x45


def test_one_flow_alone_fills_the_link():
    loop, net = _star(2)
    cross = SimCrossTraffic(loop, net, [TcpPair("h1", "h2")], HOSTS)
    cross.hook()
    cross.start()
    loop.run(until=60.0)
    (f,) = cross.stop()
    assert f.Mbps >= 0.9 * 1.0  # payload alone: at most 1448/1514 = 95.6 % of the wire
    assert f.Mbps <= 1.0 * MSS / 1514 + 1e-9
    assert f.resent > 0  # the 100-frame queue overflowed and the flow recovered


def test_two_flows_share_a_link_fairly():
    loop, net = _star(3)
    cross = SimCrossTraffic(loop, net, [TcpPair("h1", "h3"), TcpPair("h2", "h3")], HOSTS)
    cross.hook()
    cross.start()
    loop.run(until=120.0)
    a, b = cross.stop()
    assert jain([a.Mbps, b.Mbps]) >= 0.9
    assert a.Mbps + b.Mbps >= 0.9  # together they still fill the bottleneck


def test_parse_and_default_pair():
    assert parse_cross_traffic("tcp") == [TcpPair()]
    assert parse_cross_traffic("tcp:h1-h2, tcp") == [TcpPair("h1", "h2"), TcpPair()]
    hosts = [f"h{i}" for i in range(12)]
    jobs = [("h0", ["h2", "h3"]), ("h1", ["h4", "h10"])]
    assert resolve_pairs([TcpPair()], hosts, jobs) == [TcpPair("h5", "h0")]
    for bad in ("udp:h1-h2", "tcp:h1", "tcp:h1-h1", "tcp:-h2", ",".join(["tcp"] * 17)):
        with pytest.raises(ExperimentError):
            parse_cross_traffic(bad)
    with pytest.raises(ExperimentError, match="not a host"):
        resolve_pairs([TcpPair("h1", "h99")], hosts, jobs)
    with pytest.raises(ExperimentError, match="every host"):
        resolve_pairs([TcpPair()], ["h0", "h1"], [("h0", ["h1"])])


def test_fairness_normalises_by_alone():
    flow = FlowFigures("h5", "h0", window_s=2.0, bytes=100_000, alone_bytes=200_000,
                       alone_window_s=1.0)
    got = fairness("ina", {"a": {"kind": "ina", "goodput_Mbps": 0.4, "alone_Mbps": 0.8},
                           "b": {"kind": "ps_only", "goodput_Mbps": 0.1,
                                 "alone_Mbps": 0.2}}, [flow])
    assert [p.kept for p in got.participants] == [0.5, 0.5, pytest.approx(0.25)]
    # (0.5 + 0.5 + 0.25)^2 / (3 (0.25 + 0.25 + 0.0625)) = 1.5625 / 1.6875
    assert got.jain == pytest.approx(1.5625 / 1.6875)
    assert fairness("x", {"a": {"kind": "ina", "goodput_Mbps": 1.0, "alone_Mbps": None}},
                    []).jain is None


def test_ina_beside_a_ps_only_job_and_a_tcp_flow_in_the_simulated_network(tmp_path):
    """make run's network (fat-tree k=4, 1 Mbit/s): an INA job (PS h0), a job pinned to
    PS-only (jobs file ``"mode": "ps_only"``, PS h1) and the default TCP flow (the first idle
    host, h9, to h0) through ina.p4's switches: every sum exact, the flow's bytes on the PS's
    access link, every one's throughput and its alone reference in ``cross_traffic``."""
    import numpy as np

    from controller.experiment.methods.ina.core import Settings
    from controller.experiment.simulate.run import SimOptions, simulate

    def gradient(w: int, r: int) -> np.ndarray:
        return np.full(310, (w + 1) * (r + 1), dtype=np.int32)

    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([
        {"name": "a", "ps": "h0", "workers": ["h2", "h4", "h6", "h8"]},
        {"name": "b", "ps": "h1", "workers": ["h3", "h5", "h7"], "mode": "ps_only"}]))
    sums: dict = {}
    s = Settings(hidden=4, rounds=2, jobs=str(jobs), modes=("ina",), cross_traffic="tcp")
    doc, _ = simulate(s, SimOptions(reference=False), tmp_path / "run", "t",
                      gradient_of=gradient, sums=sums)
    assert sorted(sums) == ["a/ina", "alone/a", "alone/b", "b/ina"]
    for label, n in (("a/ina", 4), ("b/ina", 3), ("alone/a", 4), ("alone/b", 3)):
        for r in range(2):
            want = np.full(310, n * (n + 1) // 2 * (r + 1), dtype=np.int32)
            assert all(np.array_equal(x, want) for x in sums[label][r]), label
    modes = doc["modes"]
    assert modes["b/ina"]["pinned_mode"] == "ps_only"
    # PS-only: each of b's 3 workers' 10 GRADs reaches its PS; a's PS gets one per chunk
    assert modes["b/ina"]["rounds"][0]["ps_rx_bytes"] >= 3 * 10 * 196
    assert doc["settings"]["extra"]["cross_traffic_pairs"] == [["h9", "h0"]]
    (flow,) = modes["a/ina"]["cross_traffic"]
    assert flow["bytes"] > 0 and flow["alone_bytes"] > 0
    assert flow["window_s"] == pytest.approx(flow["alone_window_s"])
    (fair,) = doc["cross_traffic"]
    names = [p["name"] for p in fair["participants"]]
    assert names == ["a", "b", "tcp:h9-h0"]
    assert [p["kind"] for p in fair["participants"]] == ["ina", "ps_only", "tcp"]
    assert all(p["throughput_Mbps"] > 0 and p["alone_Mbps"] > 0
               for p in fair["participants"])
    assert 1 / 3 <= fair["jain"] <= 1.0
    assert "cross_traffic" not in modes["alone/a"]  # alone means alone
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Beside other traffic:" in report and "| tcp:h9-h0 | tcp |" in report


def test_bytes_between_interpolates_a_receivers_log():
    from controller.experiment.cross_mininet import bytes_between

    log = [(10.0, 0), (10.1, 1000), (10.2, 3000), (10.3, 3000)]
    assert bytes_between(log, 10.05, 10.15) == 500 + 1000
    assert bytes_between(log, 9.0, 11.0) == 3000  # clamped to the log
    assert bytes_between([], 0.0, 1.0) == 0


def test_bulk_socket_pair_counts_what_it_receives(tmp_path):
    """workers/common/bulk_tcp.py over loopback: the receiver's log grows, in order, to what
    the sender wrote (the Mininet flow's two processes, without Mininet)."""
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "tcp.log"
    py = [sys.executable, "-m", "workers.common.bulk_tcp"]
    recv = subprocess.Popen([*py, "recv", "--port", str(port), "--log", str(log)])
    send = subprocess.Popen([*py, "send", "--to", "127.0.0.1", "--port", str(port)])
    time.sleep(1.0)
    send.terminate()
    assert send.wait(5) == 0
    assert recv.wait(5) == 0  # the sender's close ends the receiver
    rows = [tuple(map(float, line.split())) for line in log.read_text().splitlines()]
    assert len(rows) >= 3
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(rows, rows[1:], strict=False))
    assert rows[-1][1] > 1e6  # loopback carries far more than a megabyte in a second


@pytest.mark.parametrize("spec,words", [
    ("udp:h1-h2", "expected tcp or tcp:SRC-DST"),
    ("tcp:h1-h99", "'h99' is not a host of the topology"),
    ("tcp:h3", "expected tcp:SRC-DST"),
])
def test_bad_cross_traffic_is_one_line(spec, words, tmp_path, capsys):
    from controller.cli.main import main

    code = main(["simulate", "--rounds", "1", "--cross-traffic", spec, "--out",
                 str(tmp_path), "--name", "x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and words in err[0]
    assert not (tmp_path / "x").exists()  # refused before any run folder


def test_wait_quiet_waits_for_the_queues_to_drain():
    from controller.experiment.cross_mininet import wait_quiet

    readings = iter([{"l": 0}, {"l": 1000}, {"l": 1800}, {"l": 1800}, {"l": 9999}])
    slept = []
    assert wait_quiet(lambda: next(readings), sleep=slept.append) == 1.5
    assert slept == [0.5, 0.5, 0.5]
    busy = iter(range(1000))
    assert wait_quiet(lambda: {"l": next(busy)}, limit_s=2.0, sleep=lambda s: None) == 2.0
