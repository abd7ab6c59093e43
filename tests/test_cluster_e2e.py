"""Clustered temporary PSs as a method of the testbed (docs/design.md §7), end to end.

* option and profile mistakes are one error line, nothing written;
* pure helpers of ``controller.experiment.methods.cluster`` (message-pattern bytes);
* a reduced ``run --method cluster`` over Mininet (root): leaf-spine, the 8 nodes of the
  example profile on h1..h8 with their uplinks (100 / 10 Mbit/s), the central PS on h0, all
  three rules.  Checked from the run's own files: every node's final parameters equal the
  in-process simulation's bit for bit, the clustering found the profile's two groups, the
  temporary PSs were re-elected exactly at the scheduled periods (and are the seeded schedule's),
  the measured uplinks are the profile's, and the busiest link carried fewer bytes per round
  than with the central PS.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from controller.cli.main import main as cli_main
from controller.errors import ExperimentError
from controller.experiment.methods.cluster.method import parse_rules, predicted_link_bytes
from topo.models import leaf_spine
from workers.cluster.clustering import ps_schedule
from workers.cluster.job import ClusterJob
from workers.cluster.sync import simulate

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "profiles" / "hetero8.json"
TOPO = "leafspine:2,1,5"  # h0..h4 on leaf0, h5..h9 on leaf1


def test_parse_rules():
    assert parse_rules("central, contribution") == ("central", "contribution")
    with pytest.raises(ExperimentError, match="unknown rule 'mean'"):
        parse_rules("average,mean")
    with pytest.raises(ExperimentError, match="twice"):
        parse_rules("average,average")


def test_cli_mistakes_are_one_line(tmp_path, capsys):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"nodes": {"h1": {"cpu_freq": 2}, "h2": {"cpu_freq": -1}}}')
    far = tmp_path / "far.json"
    far.write_text('{"nodes": {"h1": {"cpu_freq": 2}, "h22": {"cpu_freq": 1}}}')
    out = tmp_path / "out"
    for extra, msg in ((["--cluster-rules", "fast"], "unknown rule 'fast'"),
                       (["--rounds", "7", "--cluster-period", "2"], "not a multiple"),
                       (["--cluster-reelect", "0"], "--cluster-reelect must be >= 1"),
                       (["--cluster-profile", str(tmp_path / "none.json")],
                        "cannot read node profile"),
                       (["--cluster-profile", str(bad_json)],
                        f"{bad_json}: node 'h2': feature 'cpu_freq' must be a positive"),
                       (["--cluster-profile", str(far)], "node 'h22' is not a host"),
                       (["--ps", "h3"], "must not be one of the profile's nodes"),
                       (["--cluster-k", "9"], "--cluster-k must be in 1..8"),
                       (["--topo", "ring:3"], "expected fattree")):
        code = cli_main(["run", "--method", "cluster", "--topo", TOPO, "--ps", "h0",
                         "--rounds", "10", "--cluster-period", "5", "--out", str(out), *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and msg in err, (extra, err)
        assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_predicted_bytes_of_one_period_by_hand():
    """Clusters {h1..h4} (PS h2) and {h5..h8} (PS h7) on leaf-spine, B = 2, S = 100 bytes."""
    g = leaf_spine(2, 1, 5)
    hosts = [f"h{i}" for i in range(1, 9)]
    rec = {"labels": [0, 0, 0, 0, 1, 1, 1, 1], "all_ps": [1, 6]}
    loads = predicted_link_bytes(g, "contribution", hosts, [rec], 2, 100.0, "h0")
    assert loads[("leaf0", "h2")] == 3 * 2 * 100 + 100  # 3 members x B + the peer's average
    assert loads[("leaf0", "spine0")] == 100  # only the exchanged average crosses the spine
    central = predicted_link_bytes(g, "central", hosts, [rec], 2, 100.0, "h0")
    assert central[("leaf0", "h0")] == 8 * 2 * 100
    assert central[("spine0", "leaf0")] == 4 * 2 * 100  # the 4 nodes of leaf1


@pytest.mark.root
@pytest.mark.mininet
def test_reduced_cluster_experiment_over_mininet(tmp_path):
    P, B, R = 4, 2, 2
    code = cli_main(["run", "--method", "cluster", "--topo", TOPO, "--ps", "h0", "--bw", "100",
                     "--rounds", str(P * B), "--cluster-period", str(B), "--cluster-reelect",
                     str(R), "--model", "logreg", "--cluster-step-ms", "1", "--seed", "3",
                     "--out", str(tmp_path), "--name", "reduced"])
    assert code == 0
    out = tmp_path / "reduced"
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "cluster" and list(res["rules"]) == ["contribution", "average",
                                                                 "central"]
    groups = [0, 0, 0, 0, 1, 1, 1, 1]  # hetero8: h1..h4 fast, h5..h8 slow
    want_ps = ps_schedule([[0, 1, 2, 3], [4, 5, 6, 7]], P, R, seed=3)
    for rule, d in res["rules"].items():
        (run,) = d["runs"]
        job = ClusterJob.load(out / f"{rule}-seed3" / "job.json")
        # every node's final parameters: exactly the in-process simulation's
        sim = simulate(job.train, groups, rule, P, B, R, seed=3)
        for i in range(8):
            with np.load(out / f"{rule}-seed3" / f"node{i}.npz") as f:
                np.testing.assert_array_equal(f["params"], sim.params[i])
        assert run["matches_simulation"] is True and run["members_identical"] is True
        # ... and the runner re-rated the switch's end of the pattern nodes' links
        # (h4 [100, 90] and h8 [10, 12] as each period began; the two nodes' order may vary)
        rates = sorted((x["period"], x["node"], x["mbps"]) for x in run["downlink_rates"])
        assert rates == [(p, h, pattern[p % 2]) for p in range(P)
                         for h, pattern in (("h4", (100, 90)), ("h8", (10, 12)))]
        assert len(run["curve"]) == P and run["curve"][-1]["accuracy"] > 0.3
        if rule == "central":
            assert run["busiest_link"] in (["h0", "leaf0"], ["leaf0", "h0"])
            continue
        a = run["assignments"]
        assert all(x["labels"] == groups for x in a)
        assert [tuple(x["ps"]) for x in a] == [tuple(x) for x in want_ps]
        assert [x["new_epoch"] for x in a] == [p % R == 0 for p in range(P)]
        assert a[R]["ps"][0] != a[R - 1]["ps"][0] and a[R]["ps"][1] != a[R - 1]["ps"][1]
        assert [e["period"] for e in run["epochs"]] == [0, R]
        # the nodes measured their uplinks on their interfaces: the profile's rates
        f = res["settings"]["features"].index("uplink_bw")
        assert [row[f] for row in run["feature_history"][0]] == [100] * 4 + [10] * 4
        # h4's uplink pattern is [100, 90], h8's [10, 12]: their nodes re-rated their links
        # as periods started (and back in period 0 after the previous rule's run)
        assert [p[3][f] for p in run["feature_history"]] == [100, 90, 100, 90]
        assert [p[7][f] for p in run["feature_history"]] == [10, 12, 10, 12]
        alpha = run["contributions"][-1]["alpha"]
        if rule == "average":
            assert alpha == [[0.0, 1.0], [1.0, 0.0]]
        else:
            assert 0 < alpha[0][1] < 1 and alpha[0][1] == pytest.approx(alpha[1][0])
        assert run["sent_bytes_by_message"]["Handover"] > 0  # one re-election
        central = res["rules"]["central"]["runs"][0]["busiest_link_bytes_per_round"]
        assert run["busiest_link_bytes_per_round"] < 0.6 * central
        # measured = payload + TCP/IP headers and ACKs: a little more than predicted
        ratio = run["busiest_link_bytes_per_round"] / run["predicted_busiest_link_bytes_per_round"]
        assert 1.0 < ratio < 1.6, ratio
    for png in ("accuracy_vs_time.png", "accuracy_vs_round.png", "busiest_link_bytes.png"):
        assert (out / png).stat().st_size > 0
