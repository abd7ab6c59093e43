"""BCube synchronization (docs/design.md §4) as a method of the testbed, end to end.

* pure parts: the baseline schedules (PS, sharded PS, Gray-code ring on BCube) all-reduce
  exactly in simulation; the one-hop check rejects a two-hop pair; the bridge forwarding state
  of BCube only knows directly linked servers; the exactness check catches one wrong value;
* the worker process over TCP on the loopback (no root): 4 processes, BCube(2,2) schedule,
  every server ends with the exact int32 sum and sends exactly the schedule's bytes;
* a reduced ``run --method bcube`` over Mininet (root): BCube(2,2) = 4 servers with Linux
  bridges and a Gray-code ring on the same servers, 2 rounds, a tiny tiled gradient.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from controller.errors import ExperimentError
from controller.experiment.methods.collective.method import (
    exact_rounds,
    fdb_entries,
    parse_baselines,
    parse_bcube,
    parse_sizes,
    run_method,
    selected_methods,
    server_links,
)
from topo.mininet_net import plan_network
from topo.models import bcube, fat_tree
from workers.collective.baselines import (
    bcube_nic,
    gray_ring,
    make_schedule,
    predicted_sync_s,
    ps_schedule,
    sharded_ps_schedule,
    values_per_nic,
)
from workers.collective.bcube import build_schedule, digits
from workers.collective.schedule import simulate
from workers.collective.worker_node import HEADER, expected_values, frames_of

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ pure


@pytest.mark.parametrize("schedule", [
    ps_schedule(5, 37, ps=2), sharded_ps_schedule(5, 37), sharded_ps_schedule(4, 3),
    make_schedule({"kind": "ring", "order": gray_ring(3, 2)}, 50),
    make_schedule({"kind": "bcube", "N": 2, "k": 3}, 41),
], ids=["ps", "ps-sharded", "ps-sharded-tiny", "gray-ring", "bcube"])
def test_schedules_all_reduce_exactly(schedule):
    rng = np.random.default_rng(1)
    ins = {s: rng.integers(-2**20, 2**20, schedule.n).astype(np.int32) for s in schedule.workers}
    total = np.sum(list(ins.values()), axis=0, dtype=np.int32)
    for out in simulate(schedule, ins).values():
        assert np.array_equal(out, total)


@pytest.mark.parametrize(("N", "k"), [(2, 2), (3, 2), (4, 2), (2, 3), (3, 3)])
def test_gray_ring_is_one_hop(N, k):
    order = gray_ring(N, k)
    assert sorted(order) == list(range(N**k))
    for a, b in zip(order, order[1:] + order[:1], strict=True):
        diff = sum(x != y for x, y in zip(digits(a, N, k), digits(b, N, k), strict=True))
        assert diff == 1, (a, b)


def test_ps_traffic_and_prediction():
    # single PS: the PS NIC receives 3n then sends 3n -> 6n values of time; sharded: 2 * 3n/4
    n, P = 4000, 4
    nic0 = {(a, b): 0 for a in range(P) for b in range(P) if a != b}
    ps, sh = ps_schedule(P, n), sharded_ps_schedule(P, n)
    assert values_per_nic(ps, nic0)[(0, 0)] == 3 * n
    assert values_per_nic(ps, nic0)[(1, 0)] == n
    assert predicted_sync_s(ps, nic0, 8.0, wire_factor=1.0) == pytest.approx(6 * n * 4 / 1e6)
    assert predicted_sync_s(sh, nic0, 8.0, wire_factor=1.0) == pytest.approx(
        2 * 3 * n / 4 * 4 / 1e6)


def test_bcube_prediction_is_one_over_k_of_sharded_ps():
    N, k, n = 4, 2, 4 * 2 * 16 * 10
    P = N**k
    sched = build_schedule(N, k, n)
    nic_of = {(a, b): bcube_nic(a, b, N, k) for a in range(P) for b in range(P)
              if sum(x != y for x, y in zip(digits(a, N, k), digits(b, N, k), strict=True)) == 1}
    flat = {(a, b): 0 for a in range(P) for b in range(P) if a != b}
    ratio = predicted_sync_s(sched, nic_of, 10.0) / predicted_sync_s(
        sharded_ps_schedule(P, n), flat, 10.0)
    assert ratio == pytest.approx(1 / k)


def test_server_links_checks_one_hop():
    graph = bcube(2, 2)
    plan = plan_network(graph)
    hosts = [f"h{i}" for i in range(4)]
    sched = build_schedule(2, 2, 16)
    links = server_links("bcube", sched, plan, hosts, 2, 2)
    assert links == {(0, 1): 0, (1, 0): 0, (2, 3): 0, (3, 2): 0,
                     (0, 2): 1, (2, 0): 1, (1, 3): 1, (3, 1): 1}
    # a ring in plain order has the two-hop pair 1 -> 2 (digits (1,0) and (0,1))
    bad = make_schedule({"kind": "ring", "order": [0, 1, 2, 3]}, 16)
    with pytest.raises(ValueError, match="not one hop"):
        server_links("bcube", bad, plan, hosts, 2, 2)


def test_fdb_entries():
    graph = bcube(2, 2)
    plan = plan_network(graph)
    entries = fdb_entries(graph, plan)
    # each of the 4 bridges knows exactly its 2 servers, by the MAC of their NIC on its level
    assert len(entries) == 8
    assert ("bc1_0", plan.hosts["h2"].macs[1], "bc1_0-eth2") in entries
    ft = fat_tree(4)
    ftplan = plan_network(ft)
    ent = fdb_entries(ft, ftplan)
    assert len(ent) == 20 * 16  # every switch reaches every host
    # destination-suffix routing: edge0 sends h4..h7 (other pods) over both aggs
    ups = {mac: dev for s, mac, dev in ent if s == "edge0"}
    devs = {ups[ftplan.hosts[f"h{i}"].mac] for i in range(4, 8)}
    assert len(devs) == 2


def test_exact_rounds_catches_one_wrong_value():
    import hashlib

    rng = np.random.default_rng(0)
    q = [rng.integers(-1000, 1000, (2, 5)).astype(np.int32) for _ in range(3)]
    total = np.sum(q, axis=0, dtype=np.int32)
    datas = [{"q": qi, "sums": total.copy()} for qi in q]
    dig = [[hashlib.sha256(np.resize(total[r], 12).tobytes()).hexdigest() for r in range(2)]
           for _ in q]
    assert exact_rounds(datas, dig, 12) == [True, True]
    datas[2]["sums"][1, 3] += 1
    assert exact_rounds(datas, dig, 12) == [True, False]
    dig[0][0] = "0" * 64
    assert exact_rounds(datas, dig, 12) == [False, False]


def test_option_parsing_errors():
    assert parse_bcube("4,2") == (4, 2)
    assert parse_sizes("1,4,16") == [1.0, 4.0, 16.0]
    assert parse_sizes("") == [None]
    assert parse_baselines("ps,ring") == ["ps", "ring-fattree", "ring-bcube"]
    assert selected_methods("bcube", "ps") == ["bcube", "ps"]
    assert selected_methods("ps", "ring") == ["ps"]  # --method ps ignores --baselines
    assert selected_methods("ring", "none") == ["ring-fattree", "ring-bcube"]
    for bad, fn in (("4", parse_bcube), ("1,2", parse_bcube), ("1,x", parse_sizes),
                    ("0", parse_sizes), ("tree", parse_baselines)):
        with pytest.raises(ExperimentError):
            fn(bad)


def test_frames_and_expected():
    sched = build_schedule(2, 2, 10)
    tr = sched.sends(0, 0, 0)[0]
    assert frames_of(tr, 2) == [(lo, min(lo + 2, tr.hi)) for lo in range(tr.lo, tr.hi, 2)]
    assert sum(hi - lo for lo, hi in frames_of(tr, 2)) == tr.size
    exp = expected_values(sched, 0)
    assert exp[0][0] == sum(t.size for t in sched.receives(0, 0, 0))


# ------------------------------------------------------------------ processes on loopback


def test_nodes_over_loopback(tmp_path):
    """4 worker processes on 127.0.0.x addresses (one per server and NIC): exact sums, and the
    application bytes per NIC equal the schedule's values x 4 plus one header per frame."""
    N, k, P, n = 2, 2, 4, 3001
    sched = build_schedule(N, k, n)
    links = {(a, b): bcube_nic(a, b, N, k) for a in range(P) for b in range(P)
             if a != b and sum(x != y for x, y in zip(digits(a, N, k), digits(b, N, k),
                                                      strict=True)) == 1}
    ips = [[f"127.0.{nic + 1}.{s + 1}" for nic in range(k)] for s in range(P)]
    frame_values = 256
    job = {"schedule": {"kind": "bcube", "N": N, "k": k}, "n_workers": P, "n_values": n,
           "frame_values": frame_values, "timeout_s": 30, "links": [[a, b, c] for (a, b), c
                                                                   in sorted(links.items())],
           "ips": ips, "port": 47977, "train": {"model": "logreg", "n_workers": P, "rounds": 2},
           "frac_bits": 16, "rounds": 2, "out_dir": str(tmp_path),
           "start_file": str(tmp_path / "start")}
    (tmp_path / "job.json").write_text(json.dumps(job))
    procs = [subprocess.Popen([sys.executable, "-m", "workers.collective.worker_node",
                               str(tmp_path / "job.json"), "--worker", str(s)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for s in range(P)]
    try:
        for p in procs:
            assert p.stdout.readline().rstrip().endswith("ready")
        (tmp_path / "start").touch()
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs), outs
    reports = [json.loads((tmp_path / f"worker{s}.json").read_text()) for s in range(P)]
    datas = [dict(np.load(tmp_path / f"worker{s}.npz")) for s in range(P)]
    digests = [[r["sum_sha256"] for r in rep["rounds"]] for rep in reports]
    assert exact_rounds(datas, digests, n) == [True, True]
    frames: dict[tuple[int, int], int] = {}
    for tr in sched.transfers():
        key = (tr.src, links[(tr.src, tr.dst)])
        frames[key] = frames.get(key, 0) + len(frames_of(tr, frame_values))
    for (s, nic), vals in values_per_nic(sched, links).items():
        want = vals * 4 + frames[(s, nic)] * HEADER.size
        for r in reports[s]["rounds"]:
            assert r["bytes_sent_per_nic"][str(nic)] == want
    # all replicas applied the same sum: identical accuracy on every server
    assert len({rep["rounds"][-1]["accuracy"] for rep in reports}) == 1


# ------------------------------------------------------------------ Mininet


@pytest.mark.root
@pytest.mark.mininet
def test_run_method_bcube_mininet(tmp_path):
    args = argparse.Namespace(method="bcube", bcube="2,2", grad_mb="0.05", baselines="ring-bcube",
                              fattree_k=4,
                              frame_kb=64, rounds=2, model="logreg", hidden=8, bw=50.0, seed=0,
                              out=str(tmp_path), name="e2e", target="pyswitch")
    res = run_method(args)
    assert res["exact_all_rounds"] is True
    assert set(res["modes"]) == {"bcube@0.05MB", "ring-bcube@0.05MB"}
    doc = json.loads((tmp_path / "e2e" / "results.json").read_text())
    assert doc["comparison"]["0.05MB"]["bcube"]["bcube_over_this"] == 1.0
    n = res["modes"]["bcube@0.05MB"]["n_values"]
    assert n == round(0.05 * 2**20 / 4)
    bc = res["modes"]["bcube@0.05MB"]
    # every server sends on both NICs; the bytes leaving each NIC on the wire are the schedule's
    # payload plus TCP/IP/Ethernet headers and ACKs: between 1x and 1.3x of it
    for x in bc["nic_bytes"]:
        assert x["predicted_payload_bytes"] > 0
        assert x["predicted_payload_bytes"] <= x["measured_tx_bytes"]
        assert x["measured_tx_bytes"] <= 1.3 * x["predicted_payload_bytes"]
    # the ring uses one NIC per server to send (Gray order): the other NIC sends no payload
    ring = res["modes"]["ring-bcube@0.05MB"]
    assert sum(1 for x in ring["nic_bytes"] if x["predicted_payload_bytes"]) == 4
    for r in bc["rounds"]:
        assert r["time_s"] > 0 and r["exact"]
    assert (tmp_path / "e2e" / "time_per_round.png").exists()


@pytest.mark.root
@pytest.mark.mininet
def test_run_method_ps_alone_mininet(tmp_path):
    """``run --method ps``: the single TCP PS on a fat-tree, without BCube: 4 servers, the PS
    on the first; its NIC receives 3n values and sends 3n back per round."""
    args = argparse.Namespace(method="ps", bcube="2,2", grad_mb="0.05", baselines="ring",
                              fattree_k=4, frame_kb=64, rounds=2, model="logreg", hidden=8,
                              bw=50.0, seed=0, out=str(tmp_path), name="ps", target="pyswitch")
    res = run_method(args)
    assert set(res["modes"]) == {"ps@0.05MB"} and res["method"] == "ps"
    assert res["exact_all_rounds"] is True
    assert res["comparison"]["0.05MB"]["ps"]["bcube_over_this"] is None
    n = res["modes"]["ps@0.05MB"]["n_values"]
    ps_nic = [x for x in res["modes"]["ps@0.05MB"]["nic_bytes"] if x["server"] == 0]
    assert [x["predicted_payload_bytes"] for x in ps_nic] == [3 * n * 4]
    assert 3 * n * 4 <= ps_nic[0]["measured_rx_bytes"] <= 1.3 * 3 * n * 4


def test_send_order_feeds_each_receiver_once():
    from workers.collective.worker_node import send_order

    for sched, P in ((build_schedule(4, 2, 640), 16), (sharded_ps_schedule(5, 50), 5)):
        for t in range(sched.num_threads):
            for step in range(sched.num_steps):
                orders = [send_order(sched.sends(t, step, s), P) for s in range(P)]
                for j in range(len(orders[0])):
                    dsts = [o[j].dst for o in orders]
                    assert len(set(dsts)) == P, (t, step, j)
