"""The host-driven designs' Mininet runners (controller/experiment/methods/ring/mininet.py,
switchml/mininet.py) over loopback: the Mininet network is replaced by a stand-in whose
hosts start their processes on this machine with addresses 127.0.0.x, and everything else
-- the job files, the runner's launch sequence (ready barrier, start file, deadline, logs),
the processes, the results read back and the exactness check -- is what runs on Mininet."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from controller.experiment.runner import RoutedNetwork
from topo.models import parse_topology
from workers.ring.ring_node import seeded_vector

ROOT = Path(__file__).resolve().parents[1]


class _LocalHost:
    def popen(self, cmd: list[str], **kw: Any) -> subprocess.Popen:
        kw["env"] = dict(os.environ, PYTHONPATH=str(ROOT))
        return subprocess.Popen(cmd, **kw)


class _LocalNet:
    """What the runner touches of a Mininet network: its hosts' popen, its plan (no
    switches here: no link counters), stop."""

    def __init__(self) -> None:
        self.net = SimpleNamespace(get=lambda host: _LocalHost(), switches=[])
        self.plan = SimpleNamespace(switches=[], ports={})
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def _loopback(hosts: list[str]) -> Any:
    """A stand-in for ``routed_mininet``: host i at 127.0.0.(i + 2)."""
    made = []

    @contextlib.contextmanager
    def fake(run: Any, ms: Any):
        net = _LocalNet()
        made.append(net)
        with run.network(net):
            yield RoutedNetwork(net, {h: (f"127.0.0.{i + 2}", "00:00:00:00:00:00")
                                      for i, h in enumerate(hosts)})
    fake.made = made  # type: ignore[attr-defined]
    return fake


def test_ring_on_mininet_over_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rings (3 and 2 positions) at once, 2 rounds: every position's sum of every round
    exact, the vectors the suite's (worker rank among n_workers), records per round, logs
    written, the network stopped."""
    import controller.experiment.methods.ring.mininet as rm
    from controller.experiment.methods.host_driven import MininetSettings

    rings = [["h1", "h2", "h3"], ["h4", "h5"]]
    fake = _loopback([h for r in rings for h in r])
    monkeypatch.setattr(rm, "routed_mininet", fake)
    ms = MininetSettings(parse_topology("fattree:4"), seed=3)
    res = rm.ring_on_mininet(ms, rings, 2, 200, tmp_path / "ring", n_workers=5,
                             window=4, timeout=0.2, max_timeout=0.4, deadline_s=120)
    assert fake.made[0].stopped
    assert [j.exact for j in res.jobs] == [[True, True], [True, True]]
    assert all(j.complete for j in res.jobs) and res.virtual_s > 0
    # the rounds' span leaves out the positions' linger (2 × max_timeout) after their rounds
    assert res.virtual_s < res.wall_s - 0.5
    assert [len(j.records) for j in res.jobs] == [3, 2]
    assert res.jobs[1].records[0][0]["data_sent"] > 0
    with np.load(tmp_path / "ring" / "job2" / "ring1.npz") as d:
        assert np.array_equal(d["q"][1], seeded_vector(3, 1, 1, 5, 200))
    logs = (tmp_path / "ring" / "logs.txt").read_text()
    assert "--- h5\nring 1 ready" in logs
    # a wrong sum is caught by the check, not trusted
    f = tmp_path / "ring" / "job1" / "ring2.npz"
    with np.load(f) as d:
        q, sums = d["q"], d["sums"].copy()
    sums[1][7] += 1
    np.savez(f, q=q, sums=sums)
    assert rm.ring_results(tmp_path / "ring" / "job1", 1, rings[0], 2).exact == [True, False]


def test_switchml_switch_configured_over_p4runtime(tmp_path: Path) -> None:
    """What SwitchML's Mininet runner writes into its one switch, against a real pyswitch
    process (no ports: no root): switchml.p4 compiled for pyswitch and pushed, per job its
    job entry, its workers admitted on every port of the switch, a result address per
    worker, one multicast group with a replica per worker (rid = worker + 1); the counters
    read back."""
    from switch_harness import start_switch

    import controller.experiment.methods.switchml.mininet as smm
    from controller.experiment.methods.switchml.sim import COUNTERS
    from topo.mininet_net import plan_network
    from workers.switchml.job import JobConfig

    g = parse_topology("fattree:4")
    plan = plan_network(g)
    hosts = {h: (i.ip, i.mac) for h, i in plan.hosts.items()}
    jobs = [(JobConfig(1, (0, 1, 2), 4, pool_base=0), ["h1", "h2", "h5"]),
            (JobConfig(2, (0, 1), 4, pool_base=8), ["h3", "h9"])]
    rules = smm.switch_rules(g, plan.ports, hosts, "edge0", jobs)
    n_ports = len(plan.ports["edge0"])  # 2 hosts and 2 aggregation switches
    assert [r.group for r in rules] == [1, 2]
    assert [sum(e.table == "MyIngress.sm_member" for e in r.entries) for r in rules] == [
        3 * n_ports, 2 * n_ports]
    # h1 hangs off edge0; h2, h5 (another rack, another pod) arrive over an uplink
    assert rules[0].replicas == tuple(sorted([(plan.ports["edge0"]["h1"], 1),
                                              (plan.ports["edge0"]["agg0"], 2),
                                              (plan.ports["edge0"]["agg0"], 3)]))
    p4info, config = smm._compile("pyswitch", tmp_path / "build")
    sp = start_switch("pyswitch", {}, tmp_path)
    try:
        net = SimpleNamespace(grpc_address=lambda sw: sp.address, device_id=lambda sw: 0)
        conn = smm._install(net, "edge0", p4info, config, rules)
        try:
            assert len(conn.read_table_entries("MyIngress.sm_member")) == 5 * n_ports
            assert len(conn.read_table_entries("MyIngress.job_table")) == 2
            assert len(conn.read_table_entries("MyEgress.result_dst")) == 5
            groups = conn.read_multicast_groups()
            assert sorted(groups[2]) == sorted(rules[1].replicas)
            assert all(sum(p for p, _ in conn.read_counter(f"MyIngress.{n}").values()) == 0
                       for n in COUNTERS)
        finally:
            conn.close()
    finally:
        sp.stop()


def test_switchml_results_check_the_sums(tmp_path: Path) -> None:
    """The runner's reading of its workers' files: exact when every worker got the wrapped
    sum of every worker's vectors, not when one value is off."""
    import json

    from controller.experiment.methods.ring.sim import wrapped_sum
    from controller.experiment.methods.switchml.mininet import switchml_results

    q = [np.stack([seeded_vector(1, w, r, 3, 50) for r in range(2)]) for w in range(3)]
    total = np.stack([wrapped_sum([v[r] for v in q]) for r in range(2)])
    for w in range(3):
        sums = total.copy()
        if w == 2:
            sums[1][0] += 1
        np.savez(tmp_path / f"switchml{w}.npz", q=q[w], sums=sums)
        (tmp_path / f"switchml{w}.json").write_text(json.dumps(
            {"rounds": [{"round": r, "time_s": 0.1, "sent": 2, "retransmitted": w}
                        for r in range(2)], "stats": {"retransmitted": 2 * w}}))
    res = switchml_results(tmp_path, 1, 3, 2)
    assert res.exact == [True, False] and res.retransmissions == 6 and res.complete
