"""The clustered temporary-PS protocol (docs/design.md §7) as message-driven machines: codec, coordinator,
re-election with contribution handover, re-clustering with reset, and the whole protocol in
memory (shuffled delivery) and over loopback TCP, against the in-process simulation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from topo.mininet_net import htb_rate_change
from topo.models import TopologyError, leaf_spine, with_link_bw
from workers.cluster.clustering import ps_schedule
from workers.cluster.features import load_profile, profile_from_dict
from workers.cluster.job import ClusterJob, save_job_data
from workers.cluster.protocol import (
    Coordinator,
    parse_tc_rate,
    run_in_process,
    step_seconds,
    uplink_change,
    worker_features,
)
from workers.cluster.sync import simulate
from workers.cluster.wire import (
    Assign,
    Features,
    Grad,
    Handover,
    Params,
    PeerAvg,
    Update,
    decode,
    encode,
)
from workers.common.framing import TransportError
from workers.common.model import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "profiles" / "hetero8.json"
PROFILE = load_profile(EXAMPLE)
HOSTS = list(PROFILE.nodes)


def _job(rule: str, periods: int = 4, batches: int = 2, reelect: int = 2, seed: int = 1,
         **kw) -> ClusterJob:
    cfg = TrainConfig(model="logreg", n_workers=len(kw.get("workers", HOSTS)), seed=seed)
    return ClusterJob(rule=rule, train=cfg, workers=kw.pop("workers", HOSTS), periods=periods,
                      batches=batches, reelect=reelect, profile=str(EXAMPLE), seed=seed, **kw)


def test_messages_round_trip_and_malformed_bodies():
    g = np.arange(5, dtype=np.float32)
    msgs = [Features(3, 7, np.array([1.5, 2.0])),
            Assign(4, 2, (0, 1, 1, 0), (3, 1), new_epoch=True, reset=True, silhouette=0.5),
            Assign(5, 2, (0, 0), (1,)),
            Grad(1, 2, 3, g), Update(1, 2, g), PeerAvg(6, 1, g),
            Handover(4, 1, 3, np.arange(4.0).reshape(2, 2)), Params(2, g, -g)]
    for m in msgs:
        back = decode(encode(m))
        assert type(back) is type(m)
        for name, v in vars(m).items():
            w = getattr(back, name)
            if isinstance(v, np.ndarray):
                np.testing.assert_array_equal(w, v)
                assert w.dtype == v.dtype
            else:
                assert w == v, name
    body = encode(msgs[3])
    for bad, text in ((body[:-1], "truncated"), (body + b"x", "trailing"),
                      (b"XX" + body[2:], "bad magic"), (body[:3] + b"\x09" + body[4:], "type 9"),
                      (encode(Handover(0, 0, 1, np.zeros(3))), "K x K"),
                      (encode(Assign(0, 0, (0, 2), (1, 2))), "label is >= k")):
        with pytest.raises(TransportError, match=text):
            decode(bad)


def test_tc_rate_features_and_compute_time():
    out = "class htb 5:1 root prio 0 rate 10Mbit ceil 10Mbit burst 15Kb cburst 1600b \n"
    assert parse_tc_rate(out) == 10.0
    assert parse_tc_rate("class htb 5:1 root rate 1500Kbit ceil") == 1.5
    assert parse_tc_rate("class htb 5:1 root rate 1Gbit ceil") == 1000.0
    assert parse_tc_rate("") is None
    # h4's profile uplink is [100, 90]: the measured rate replaces the period's value
    f = PROFILE.features.index("uplink_bw")
    assert worker_features(PROFILE, "h4", 1)[f] == 90
    assert worker_features(PROFILE, "h4", 1, {"uplink_bw": 100.0})[f] == 100
    # h4's uplink [100, 90] is set as period 0 starts (a previous run may have left it at
    # 90) and changes as periods 1, 2, 3 ... start; constant uplinks are never touched
    assert [uplink_change(PROFILE, "h4", p) for p in range(4)] == [100, 90, 100, 90]
    assert [uplink_change(PROFILE, "h1", p) for p in range(4)] == [None] * 4
    assert htb_rate_change("h4-eth0", out, 90.0) == [
        "tc", "class", "change", "dev", "h4-eth0", "parent", "5:0", "classid", "5:1", "htb",
        "rate", "90Mbit", "burst", "15k"]
    nested = "class htb 1:10 parent 1:1 prio 0 rate 2Mbit ceil 2Mbit burst 1600b cburst 1600b"
    assert htb_rate_change("x", nested, 2.5)[5:9] == ["parent", "1:1", "classid", "1:10"]
    with pytest.raises(ValueError, match="no htb class to re-rate"):
        htb_rate_change("h4-eth0", "", 90.0)
    # step = nominal / cpu_share; h6's share is [0.05, 0.04]
    assert step_seconds(PROFILE, "h6", 0, 0.002) == pytest.approx(0.04)
    assert step_seconds(PROFILE, "h6", 1, 0.002) == pytest.approx(0.05)


def test_with_link_bw_shapes_access_links_only():
    g = with_link_bw(leaf_spine(2, 1, 2), 100.0, {"h1": 10.0})
    assert g.edges["h1", "leaf0"]["bw"] == 10.0
    assert g.edges["h0", "leaf0"]["bw"] == 100.0 and g.edges["leaf0", "spine0"]["bw"] == 100.0
    assert with_link_bw(leaf_spine(2, 1, 2), None, {})["leaf0"]["spine0"]["bw"] is None
    with pytest.raises(TopologyError, match="'leaf0' is not a host"):
        with_link_bw(leaf_spine(2, 1, 2), None, {"leaf0": 1.0})


def test_coordinator_waits_at_epoch_starts_and_answers_inside_an_epoch():
    job = _job("contribution", periods=4, reelect=2)
    co = Coordinator(job, PROFILE)
    outs = [co.handle(Features(i, 0, worker_features(PROFILE, h, 0))) for i, h in enumerate(HOSTS)]
    assert all(o == [] for o in outs[:-1])  # the election needs every worker's features
    assign = [o.msg for o in outs[-1]]
    assert [o.dest for o in outs[-1]] == list(range(8)) and len(set(assign)) == 1
    a = assign[0]
    assert a.labels == (0, 0, 0, 0, 1, 1, 1, 1) and a.new_epoch and not a.reset
    assert a.ps == ps_schedule([[0, 1, 2, 3], [4, 5, 6, 7]], 1, 2, seed=1)[0]
    # period 1 is inside the epoch: each worker is answered at once, same clustering
    (o,) = co.handle(Features(5, 1, worker_features(PROFILE, "h6", 1)))
    assert o.dest == 5 and (o.msg.period, o.msg.labels, o.msg.ps) == (1, a.labels, a.ps)
    assert not o.msg.new_epoch
    with pytest.raises(ValueError, match="twice"):
        co.handle(Features(5, 1, worker_features(PROFILE, "h6", 1)))
    with pytest.raises(ValueError, match="out of range"):
        co.handle(Features(9, 1, worker_features(PROFILE, "h6", 1)))
    with pytest.raises(ValueError, match="does not accept"):
        co.handle(Update(0, 0, np.zeros(1, dtype=np.float32)))


@pytest.mark.parametrize("rule", ["contribution", "average", "central"])
def test_protocol_in_memory_equals_the_simulation_bit_for_bit(rule):
    """Any delivery order (per-channel FIFO, like TCP) gives simulate()'s parameters."""
    P, B, R = 5, 3, 2
    job = _job(rule, periods=P, batches=B, reelect=R)
    labels = (0, 0, 0, 0, 1, 1, 1, 1)
    sim = simulate(job.train, labels, rule, P, B, R, seed=1)
    for shuffle in (None, 1, 2):
        workers, hub = run_in_process(job, PROFILE, shuffle_seed=shuffle)
        for nd, want in zip(workers, sim.params, strict=True):
            np.testing.assert_array_equal(nd.replica.params, want)
        if rule == "central":
            continue
        log = workers[0].periods_log
        assert [tuple(x["all_ps"]) for x in log] == [tuple(x) for x in sim.ps]
        # re-election exactly at the epoch starts, never the same PS twice in a row
        assert [x["new_epoch"] for x in log] == [p % R == 0 for p in range(P)]
        for p in range(R, P, R):
            assert all(a != b for a, b in zip(log[p]["all_ps"], log[p - 1]["all_ps"],
                                              strict=True))
        # α of every exchange as the simulation computes it, from whichever PS served it
        served = {(e["period"], e["cluster"]): e["alpha"] for nd in workers for e in nd.ps_log}
        for p in range(P):
            for c in range(2):
                np.testing.assert_allclose(served[(p, c)], sim.alpha[p][c])
        assert [e["period"] for e in hub.epochs] == list(range(0, P, R))


def test_reclustering_resets_the_contributions(tmp_path):
    """A load pattern that moves h3 between groups: the partition changes at the second epoch,
    so the new PSs start from zero contributions (no handover) and send their model to their
    members, whose parameters are then identical again."""
    prof = {"nodes": {"h1": {"cpu_freq": 3.0}, "h2": {"cpu_freq": 3.0},
                      "h3": {"cpu_freq": [3.0, 1.0, 1.0]}, "h4": {"cpu_freq": 1.0},
                      "h5": {"cpu_freq": 1.0}}}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof))
    profile = profile_from_dict(prof, str(path))
    job = _job("contribution", periods=3, batches=2, reelect=1, workers=list(profile.nodes), k=2)
    job.profile = str(path)
    workers, hub = run_in_process(job, profile, shuffle_seed=3)
    log = workers[0].periods_log
    assert log[0]["labels"] == [0, 0, 0, 1, 1] and log[1]["labels"] == [0, 0, 1, 1, 1]
    assert [x["reset"] for x in log] == [False, True, False]
    by_period = {e["period"]: e for nd in workers for e in nd.ps_log if e["cluster"] == 0}
    # after the reset the accumulated contribution covers one exchange only (≤ 1); the next
    # epoch keeps the partition, so the new PS continues from the handed-over sum
    assert by_period[1]["contributions"][1] <= 1.0
    assert by_period[2]["contributions"][1] >= by_period[1]["contributions"][1]
    assert by_period[2]["alpha"][1] == pytest.approx(by_period[2]["contributions"][1] / 2)
    final = log[-1]["labels"]
    for i in range(5):
        for j in range(5):
            if final[i] == final[j]:
                np.testing.assert_array_equal(workers[i].replica.params, workers[j].replica.params)


def test_processes_over_loopback_tcp_equal_the_simulation(tmp_path):
    """Nine processes (8 workers + coordinator) on 127.0.0.1: the real shell, bit-exact."""
    base = 52000 + os.getpid() % 5000
    job = _job("contribution", periods=4, batches=2, reelect=2, step_s=0.001,
               addrs=[("127.0.0.1", base + i) for i in range(9)], interfaces=[None] * 8,
               out_dir=str(tmp_path), start_file=str(tmp_path / "start"), timeout_s=60)
    save_job_data(job, tmp_path / "data.npz")
    job.save(tmp_path / "job.json")
    procs = [subprocess.Popen([sys.executable, "-m", "workers.cluster.node",
                               str(tmp_path / "job.json"), "--index", str(i)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True) for i in range(9)]
    try:
        for i, p in enumerate(procs):
            assert p.stdout.readline().strip() == f"endpoint {i} ready"
        (tmp_path / "start").touch()
        assert [p.wait(timeout=90) for p in procs] == [0] * 9
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    sim = simulate(job.train, (0, 0, 0, 0, 1, 1, 1, 1), "contribution", 4, 2, 2, seed=1)
    for i in range(8):
        with np.load(tmp_path / f"node{i}.npz") as f:
            np.testing.assert_array_equal(f["params"], sim.params[i])
    rep = json.loads((tmp_path / "node0.json").read_text())
    assert [p["all_ps"] for p in rep["periods"]] == [list(x) for x in sim.ps]
    hub = json.loads((tmp_path / "hub.json").read_text())
    assert hub["sent_bytes"]["Assign"] > 0 and len(hub["history"]) == 4
    handovers = sum(json.loads((tmp_path / f"node{i}.json").read_text())["sent_bytes"]
                    .get("Handover", 0) for i in range(8))
    assert handovers > 0  # one re-election: each old PS handed its contributions over
