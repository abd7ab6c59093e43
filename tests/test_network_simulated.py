"""``run --network simulated`` (docs/running.md, "Networks"): the one INA engine
(controller/experiment/methods/ina/engine.py) over the simulated network -- the same plan,
rules, job files, records and results.json as ``run`` on Mininet, in virtual time, no root --
and what each network refuses in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli.main import main
from controller.experiment.compare import load_results, rows_of
from controller.experiment.methods.ina.core import Settings
from controller.experiment.simulate.network import SimOptions
from controller.experiment.simulate.run import simulate

ARGS = ["--hidden", "4", "--rounds", "2"]


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("run")
    assert main(["run", "--network", "simulated", *ARGS, "--out", str(out),
                 "--name", "r"]) == 0
    return out / "r", load_results(out / "r")


def test_a_simulated_run_writes_what_a_mininet_run_writes(sim_run: tuple[Path, dict]) -> None:
    folder, doc = sim_run
    assert doc["complete"] and doc["settings"]["network"] == "simulated"
    assert doc["exact_all_rounds"] and doc["deploy"]["simulated"] is True
    for name in ("plan.json", "plan.png", "report.md", "ina/job.json", "ina/control.json",
                 "ina/ps.json", "ina/worker0.json", "ina/worker0.npz", "ps_only/job.json"):
        assert (folder / name).exists(), name
    job = json.loads((folder / "ina" / "job.json").read_text())
    assert job["mode"] == "ina" and len(job["schedules"]) == 6
    rec = doc["modes"]["ina"]
    # job_record's keys (the one record of a job that ran), plus the network's own
    assert {"start_skew_s", "retransmissions_per_worker", "ps_rx_bytes",
            "busiest_link_bytes", "schedule_version"} <= set(rec["rounds"][0])
    assert rec["simulated"] is True and rec["sim"]["events"] > 0
    ps = json.loads((folder / "ina" / "ps.json").read_text())
    assert ps["rounds_completed"] == 2 and ps["malformed_datagrams"] == 0
    w = json.loads((folder / "ina" / "worker3.json").read_text())
    assert [r["round"] for r in w["rounds"]] == [0, 1] and w["rounds"][0]["members"] == list(
        range(6))
    assert doc["accuracy"]["final"] == doc["accuracy"]["reference"]  # exact sums
    assert [r.method for r in rows_of("r", doc)][0].startswith("ina")


def test_it_measures_what_simulate_measures(sim_run: tuple[Path, dict],
                                            tmp_path: Path) -> None:
    """The same settings through ``simulate`` (its own launch of the same drivers on the
    same simulated network): the same γ, bytes and retransmissions."""
    _, doc = sim_run
    s = Settings(hidden=4, rounds=2)
    ref, _ = simulate(s, SimOptions(), tmp_path, "s")
    assert doc["gamma"]["measured"] == pytest.approx(ref["gamma"]["measured"], rel=1e-9)
    for mode in ("ina", "ps_only"):
        a, b = doc["modes"][mode], ref["modes"][mode]
        assert a["ps_link_bytes_total"] == b["ps_link_bytes_total"]
        assert a["busiest_link_bytes_total"] == b["busiest_link_bytes_total"]
        assert ([r["retransmissions"] for r in a["rounds"]]
                == [r["retransmissions"] for r in b["rounds"]])
        assert ([r["time_s"] for r in a["rounds"]]
                == pytest.approx([r["time_s"] for r in b["rounds"]], rel=1e-9))


@pytest.mark.parametrize("argv, words", [
    (["--network", "simulated", "--target", "bmv2"], "--target"),
    (["--network", "simulated", "--bw", "0"], "--bw 0"),
    (["--network", "simulated", "--servers", "a,b"], "--servers"),
    (["--network", "servers"], "--network servers needs --servers"),
    (["--method", "bcube", "--network", "simulated"], "only --method ina"),
    (["--method", "ring", "--network", "servers"], "Mininet only"),
])
def test_what_a_network_cannot_do_is_one_line(argv: list[str], words: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    assert main(["run", *argv, "--out", str(tmp_path)]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines()
           if not ln.startswith("warning: ")]  # the planner's honest warning line
    assert len(err) == 1 and err[0].startswith("error:") and words in err[0], err


def test_a_dead_aggregator_is_replanned_around_in_virtual_time(tmp_path: Path) -> None:
    """--fail-switch in the simulated network, as tests/test_experiment_e2e.py on Mininet:
    the deployed agg0 dies after round 1, the plan is made again without it, the new rules
    are written into the running switches, the PS takes the new schedules from the round
    the monitor asked, and every round stays exact."""
    assert main(["run", "--network", "simulated", "--hidden", "4", "--rounds", "5",
                 "--fail-switch", "agg0@1", "--out", str(tmp_path), "--name", "f"]) == 0
    doc = load_results(tmp_path / "f")
    assert doc["exact_all_rounds"] and doc["plan"]["deployed"] == ["agg0", "agg1"]
    (ev,) = doc["failover"]
    assert (ev["switch"], ev["after_round"], ev["deployed_after"]) == ("agg0", 1, ["agg1"])
    assert ev["writes"] > 0 and ev["gamma_after"] < ev["gamma_before"]
    rounds = doc["modes"]["ina"]["rounds"]
    start = ev["schedules_from_round"]
    assert [r["schedule_version"] for r in rounds] == [0] * start + [1] * (5 - start)
    control = json.loads((tmp_path / "f" / "ina" / "control.json").read_text())
    assert control["version"] == 1 and control["changes"][0]["kind"] == "schedules"
    assert control["changes"][0]["from_round"] == start
    after = doc["gamma"]["after_failover"][0]
    assert after["rounds"] == 5 - start and after["measured"] > 0
    # the later mode starts on the network without agg0 (its rules route around it; no
    # frame crosses a link into or out of it), and is exact too
    ps_only = doc["modes"]["ps_only"]
    assert all(r["exact"] for r in ps_only["rounds"])
    agg0 = {k: v for k, v in ps_only["link_bytes_total"].items() if "agg0" in k}
    assert agg0 and not any(agg0.values())


def test_a_killed_worker_leaves_and_the_survivors_stay_exact(tmp_path: Path) -> None:
    """--kill-worker h2@1 --on-worker-failure continue in virtual time: h2's host ends after
    its round 1 (no report, only its .q), the runner notices, the monitor asks the PS to
    drop it, the PS picks the round, the survivors start that round again over the new
    mask, the switches get the job's new rules; every round exact over its members."""
    assert main(["run", "--network", "simulated", "--hidden", "4", "--rounds", "4",
                 "--modes", "ina", "--kill-worker", "h2@1", "--on-worker-failure",
                 "continue", "--out", str(tmp_path), "--name", "k"]) == 0
    doc = load_results(tmp_path / "k")
    assert doc["exact_all_rounds"]
    (ev,) = doc["worker_failure"]
    assert (ev["worker"], ev["cause"], ev["exit_code"]) == ("h2", "exit", -9)
    assert ev["round_effective"] == 2 and ev["exact_before"] and ev["exact_after"]
    assert ev["writes"] > 0
    rounds = doc["modes"]["ina"]["rounds"]
    everyone = [f"h{i}" for i in range(1, 7)]
    assert [r["members"] for r in rounds] == [everyone] * 2 + [
        [h for h in everyone if h != "h2"]] * 2
    folder = tmp_path / "k" / "ina"
    assert (folder / "worker1.q").exists() and not (folder / "worker1.json").exists()
    w0 = json.loads((folder / "worker0.json").read_text())["rounds"]
    assert w0[2]["members"] == [0, 2, 3, 4, 5]
    ps = json.loads((folder / "ps.json").read_text())
    assert ps["rounds_completed"] == 4 and ps["member_changes"][0]["from_round"] == 2


def test_a_killed_worker_with_stop_ends_the_run_in_one_line(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture
                                                           ) -> None:
    assert main(["run", "--network", "simulated", "--hidden", "4", "--rounds", "4",
                 "--modes", "ina", "--kill-worker", "h2@1", "--out", str(tmp_path),
                 "--name", "k"]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines()
           if not ln.startswith("warning: ")]  # the planner's honest warning line
    assert err == ["error: worker h2 died (exit code -9) in round 2; the job stops"]
    doc = json.loads((tmp_path / "k" / "results.json").read_text())
    assert doc["complete"] is False  # the rounds before are kept, exact
    assert [r["exact"] for r in doc["modes"]["ina"]["rounds"]] == [True, True]


def test_a_killed_ps_stops_its_job_alone(tmp_path: Path) -> None:
    """--jobs 2 --kill-ps h1@1 in virtual time: job2's PS host ends after its round 1, the
    engine stops job2 alone (one line in its record), job1 runs to the end; both exact."""
    assert main(["run", "--network", "simulated", "--hidden", "4", "--rounds", "4",
                 "--modes", "ina", "--jobs", "2", "--no-alone", "--kill-ps", "h1@1",
                 "--out", str(tmp_path), "--name", "p"]) == 0
    doc = load_results(tmp_path / "p")
    job1, job2 = doc["modes"]["job1/ina"], doc["modes"]["job2/ina"]
    assert "stopped" not in job1 and len(job1["rounds"]) == 4
    assert "its PS on h1 exited (code -9)" in job2["stopped"]
    assert 1 <= len(job2["rounds"]) < 4
    assert all(r["exact"] for r in job1["rounds"] + job2["rounds"])
    assert not (tmp_path / "p" / "ina" / "job2" / "ps.json").exists()
