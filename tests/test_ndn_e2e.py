"""``run --method ndn`` end to end over Mininet (root), and its one-line errors.

Reduced experiments on leaf-spine(2,1,2) (three NDN routers; PS h0 on leaf0, GPUs h1 on leaf0
and h2, h3 behind the spine), the real model, from the CLI:

* clean, with the TCP baseline: every round completes, every GPU's parameters of every version
  equal the PS's and the PS's equal the one-process reference bit for bit; the tap on the PS
  link agrees with the kernel's counter; one distribution copy per version leaves the PS (the
  routers' persistent PIT makes the other copies), so the TCP PS's distribution bytes are about
  N times NDN's; every GPU unsubscribed (persistent PIT empty at exit).
* 5 % loss on every router port: every round still completes and stays exact, the routers
  dropped frames, and active fetch after the probe timer recovered distributions.
* async mode (``--ndn-mode async``), h3 four times slower: the whole push budget is applied,
  one version per push, with the policy's scale; the slow GPU's gradients are stale; every
  GPU's parameters are the PS's; accuracy rises above chance; every GPU unsubscribed.
"""

from __future__ import annotations

import json
import math

import pytest

from controller.cli.main import main as cli_main

BASE = ["run", "--method", "ndn", "--topo", "leafspine:2,1,2", "--ps", "h0", "--workers", "3",
        "--model", "logreg", "--bw", "0"]


def test_cli_mistakes_are_one_line(tmp_path, capsys):
    for extra, msg in ((["--ndn-sweep", "4,x"], "'x' is not a worker count"),
                       (["--ndn-seg-size", "5000"], "--ndn-seg-size must be in"),
                       (["--loss", "1.5"], "--loss must be in [0, 1)"),
                       (["--ndn-rto", "0"], "--ndn-rto must be > 0"),
                       (["--ps", "h99"], "--ps h99: not a host"),
                       (["--ndn-sweep", "9"], "the topology has only 3 hosts"),
                       (["--topo", "bcube:2,2"], "one link per host")):
        code = cli_main([*BASE, "--out", str(tmp_path), *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and msg in err, err
        assert err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.root
@pytest.mark.mininet
def test_reduced_ndn_experiment_vs_tcp_ps(tmp_path):
    code = cli_main([*BASE, "--rounds", "3", "--out", str(tmp_path), "--name", "clean"])
    assert code == 0
    res = json.loads((tmp_path / "clean" / "results.json").read_text())
    assert res["method"] == "ndn" and set(res["modes"]) == {"ndn@3", "tcp-ps@3"}
    ndn, tcp = res["modes"]["ndn@3"], res["modes"]["tcp-ps@3"]
    assert len(ndn["rounds"]) == 3 and all(r["exact"] for r in ndn["rounds"])
    assert ndn["matches_reference"] and res["exact_all_rounds"]
    assert ndn["ps"]["accepted"] == ["h1", "h2", "h3"] and ndn["ps"]["confirms_sent"] >= 3
    # one copy of each version on the PS link, from the tap; the tap saw what the kernel saw
    assert all(r["dist_bytes"] > 4 * ndn["grad_values"] for r in ndn["rounds"])
    assert len({r["dist_bytes"] for r in ndn["rounds"]}) == 1
    for m in (ndn, tcp):
        assert m["tap"]["socket_drops"] == 0
        assert m["tap"]["total_bytes"] == m["tap"]["kernel_bytes"]
    ratio = res["comparison"]["3"]["dist_ratio_tcp_over_ndn"]
    assert 0.8 * 3 < ratio < 1.2 * 3, ratio
    # the multicast happened in the routers: copies = subscribers reached per version
    c = ndn["router_counters"]
    assert c["ppit_copies"] >= 3 * ndn["grad_segments"] * 3
    assert ndn["ppit_faces_at_exit"] == 0 and c["ppit_deletes"] >= 3
    assert ndn["recoveries"] == 0 and ndn["impairment_dropped"] == 0
    for png in ("distribution_bytes.png", "distribution_ratio.png", "time_per_round.png"):
        assert (tmp_path / "clean" / png).stat().st_size > 0
    # provenance of every method (controller.experiment.runner): CPU per mode, command line as typed
    assert res["complete"] is True and res["provenance"]["command_line"][3:5] == ["run",
                                                                                  "--method"]
    assert set(res["provenance"]["cpu"]) == {"ndn@3", "tcp-ps@3"}
    # every NDN router process measured (3 rounds can stay under one 10 ms clock tick)
    routers = res["provenance"]["cpu"]["ndn@3"]["switches_cpu_s"]
    assert set(routers) == {"leaf0", "leaf1", "spine0"} and min(routers.values()) >= 0


@pytest.mark.root
@pytest.mark.mininet
def test_reduced_ndn_experiment_recovers_under_loss(tmp_path):
    code = cli_main([*BASE, "--rounds", "4", "--loss", "0.1", "--seed", "1",
                     "--ndn-baseline", "none", "--out", str(tmp_path), "--name", "lossy"])
    assert code == 0
    res = json.loads((tmp_path / "lossy" / "results.json").read_text())
    (ndn,) = res["modes"].values()
    # 10% per port and direction: a distribution crossing 2-3 routers loses a segment to a
    # GPU with high probability, so some must be recovered by active fetch (5% left runs
    # where, by the luck of timing, only Interests and gradients were hit)
    assert res["all_rounds_completed"] and len(ndn["rounds"]) == 4
    assert all(r["exact"] for r in ndn["rounds"]) and ndn["matches_reference"]
    assert ndn["impairment_dropped"] > 0
    assert ndn["recoveries"] > 0 and ndn["probe_expiries"] >= ndn["recoveries"]
    assert sum(r["recovered"] for r in ndn["rounds"]) == ndn["recoveries"]
    assert sum(r["fetch_bytes"] for r in ndn["rounds"]) > 0


@pytest.mark.root
@pytest.mark.mininet
def test_reduced_async_ndn_experiment_with_a_slow_gpu(tmp_path):
    code = cli_main([*BASE, "--rounds", "10", "--ndn-mode", "async", "--ndn-slow", "h3:4",
                     "--ndn-step-ms", "20", "--ndn-policy", "kappa", "--async-lr", "0.5",
                     "--staleness-window", "2", "--out", str(tmp_path), "--name", "async"])
    assert code == 0
    res = json.loads((tmp_path / "async" / "results.json").read_text())
    assert res["method"] == "ndn" and res["ndn_mode"] == "async" and list(res["modes"]) == ["ndn@3"]
    m = res["modes"]["ndn@3"]
    # the budget (rounds x GPUs) of pushes, each applied at once as its own version
    assert m["budget"] == 30 and m["pushes"] == 30 and m["updates"] == 30
    assert res["all_pushes_applied"] and m["rejected"] == 0
    assert [c["updates"] for c in m["curve"]] == list(range(31))
    pushes = m["per_push"]
    assert [p["version"] for p in pushes] == list(range(1, 31))
    for p in pushes:
        # staleness = versions missed = (version made - 1) - version trained from
        assert p["staleness"] == p["version"] - 1 - p["t_w"] >= 0
        assert p["sigma"] == p["staleness"] + 1 and p["scale"] == 0.5 / p["kappa"]
    # collection Interests name each GPU's push sequence number: 0, 1, 2, ... per GPU
    for g in ("h1", "h2", "h3"):
        assert [p["seq"] for p in pushes if p["gpu"] == g] == \
            list(range(sum(p["gpu"] == g for p in pushes)))
    per = {g["gpu"]: g for g in m["per_gpu"]}
    assert per["h3"]["slowdown"] == 4 and per["h1"]["slowdown"] == 1
    assert per["h3"]["pushes"] >= 1 and per["h1"]["pushes"] > per["h3"]["pushes"]
    slow = [p["staleness"] for p in pushes if p["gpu"] == "h3"]
    assert min(slow) > 0  # others pushed while h3 computed
    assert per["h3"]["mean_staleness"] > max(per["h1"]["mean_staleness"],
                                              per["h2"]["mean_staleness"])
    assert m["params_equal"] and res["params_equal"]
    acc = m["final_accuracy"]
    assert math.isfinite(acc) and acc > 0.2 and acc > m["curve"][0]["accuracy"] + 0.1
    # one distribution per version went out, multicast by the persistent PIT; all unsubscribed
    assert m["router_counters"]["ppit_copies"] >= 30 * m["grad_segments"]
    assert m["ppit_faces_at_exit"] == 0 and m["router_counters"]["ppit_deletes"] >= 3
    assert (tmp_path / "async" / "async_accuracy.png").stat().st_size > 0


@pytest.mark.root
@pytest.mark.mininet
def test_reduced_async_ndn_experiment_with_soft_sync(tmp_path):
    """--soft-sync 3 with 3 GPUs: a version per 3 pushes; every batch holds one push of each
    GPU (each waits for the batch its push is in), so soft sync over all GPUs is synchronous
    SGD: every push is fresh."""
    code = cli_main([*BASE, "--rounds", "4", "--ndn-mode", "async", "--soft-sync", "3",
                     "--ndn-policy", "kappa", "--async-lr", "0.5", "--out", str(tmp_path),
                     "--name", "soft"])
    assert code == 0
    res = json.loads((tmp_path / "soft" / "results.json").read_text())
    m = res["modes"]["ndn@3"]
    assert m["soft_sync"] == 3 and m["budget"] == 12 and m["pushes"] == 12 and m["updates"] == 4
    assert res["all_pushes_applied"] and m["params_equal"]
    assert [c["updates"] for c in m["curve"]] == [0, 1, 2, 3, 4]
    pushes = m["per_push"]
    assert [p["version"] for p in pushes] == [v for v in (1, 2, 3, 4) for _ in range(3)]
    assert [p["applied"] for p in pushes] == [False, False, True] * 4
    for v in (1, 2, 3, 4):
        assert sorted(p["gpu"] for p in pushes if p["version"] == v) == ["h1", "h2", "h3"]
    assert all(p["staleness"] == 0 and p["t_w"] == p["version"] - 1 for p in pushes)
    assert m["final_accuracy"] > m["curve"][0]["accuracy"]


def test_soft_sync_larger_than_the_gpus_is_one_error_line(tmp_path, capsys):
    code = cli_main([*BASE, "--ndn-mode", "async", "--soft-sync", "4", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--soft-sync 4: a soft-sync batch needs at least C GPUs, the run has 3" in err
    code = cli_main([*BASE, "--soft-sync", "2", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--soft-sync applies to --ndn-mode async" in err
    assert not any(tmp_path.iterdir())  # nothing written
