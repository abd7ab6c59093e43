"""Results stay readable at scale (issue 25 item 4): 64 workers and 4 jobs are shown per job
and per sync mode, never per worker.  Hand-made results documents, figures checked against
hand-computed ones; plus the pure pieces of the fast k=8 start-up.  Runs in about a second."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from controller.experiment.compare import rows_of, settings_text
from controller.experiment.records import (
    mode_kind,
    pace,
    pace_by_kind,
    pace_lines,
    pace_text,
    spread,
)
from controller.experiment.report import MAX_LINES, plot_series, summary_table
from controller.experiment.run_report import report_markdown
from topo.mininet_net import host_setup_commands, plan_network
from topo.models import fat_tree

ROOT = Path(__file__).resolve().parents[1]
WORKERS = [f"h{i}" for i in range(1, 65)]


def _round(t: float, skew: float, retx: int, exact: bool = True) -> dict:
    return {"time_s": t, "sync_time_s": t - skew, "start_skew_s": skew, "ps_rx_bytes": 1000.0,
            "busiest_link_bytes": 2000.0, "retransmissions": retx, "accuracy": 0.5,
            "exact": exact}


def _mode(times: list[float], skew: float, retx: int, busy: float | None) -> dict:
    rec = {"grad_bytes": 9640, "rounds": [_round(t, skew, retx) for t in times]}
    if busy is not None:
        rec["cores"] = {"busy_cores": busy + 0.3, "rounds_busy_cores": busy,
                        "rounds_wall_s": sum(times), "wall_s": sum(times) + 20, "cpus": 2}
    return rec


def _four_jobs() -> dict:
    """A --jobs 4 run of 16 workers each: ina and ps_only per job, and each job alone."""
    modes, jobs = {}, {}
    for k, name in enumerate(("j1", "j2", "j3", "j4")):
        modes[f"{name}/ina"] = _mode([1.0 + k, 2.0 + k], 0.1 * (k + 1), k, 1.0)
        modes[f"{name}/ps_only"] = _mode([4.0, 4.0], 0.2, 10, 1.9)
        modes[f"alone/{name}"] = _mode([0.5, 0.5], 0.0, 0, 0.6)
        jobs[name] = {
            "ps": f"h{100 + k}", "workers": WORKERS[16 * k:16 * (k + 1)], "weight": 1.0,
            "exact_all_rounds": True, "rounds_completed": {"ina": 2, "ps_only": 2},
            "stopped": {}, "ps_bytes": {"ina": 1000.0, "ps_only": 16000.0},
            "time_per_round_s": {"ina": 1.5 + k, "ps_only": 4.0},
            "retransmissions": {"ina": 2 * k, "ps_only": 20},
            "gamma": {"predicted": 0.2, "measured": 0.1, "ratio": 0.5}}
    return {"run": "jobs4", "method": "ina",
            "settings": {"topo": "fattree:8", "bw": 0.5, "workers": WORKERS, "rounds": 2,
                         "jobs": 4, "slot_policy": "shared"},
            "modes": modes, "jobs": jobs, "fairness": 0.9876, "fairness_planned": 1.0}


def test_spread_of_per_worker_figures():
    assert spread([3, 1, 2, 10]) == {"min": 1.0, "median": 2.5, "max": 10.0}
    assert spread([]) == {"min": None, "median": None, "max": None}


def test_pace_says_cores_or_links_from_the_record():
    links = pace(_mode([1.0, 3.0, 2.0], 0.25, 4, 1.2))
    assert links == {"busy_cores": 1.2, "machine_busy_cores": None, "cpus": 2,
                     "binding": "links", "start_skew_s": 0.25, "s_per_round": 2.0,
                     "retransmissions_per_round": 4.0,
                     "cpu_s_per_round": pytest.approx(1.2 * 6.0 / 3)}  # cores x wall / rounds
    assert pace(_mode([1.0], 0.0, 0, 1.7))["binding"] == "cores"  # 1.7 >= 0.85 x 2
    assert pace(_mode([1.0], 0.0, 0, None))["binding"] is None  # not measured
    # our processes left cores idle, but other users' took them: either may have bound
    shared = _mode([1.0], 0.0, 0, 1.2)
    shared["cores"]["rounds_machine_busy_cores"] = 1.9
    assert pace(shared)["binding"] == "shared cores"
    assert pace_text("ina", pace(shared)).endswith(
        "(1.90 with the machine's other processes), start skew 0.000 s of 1.000 s/round "
        "(medians), 1.20 CPU-s a round, 0.0 retransmissions/round: the machine's cores were "
        "all busy (other "
        "processes too): links or cores bind")
    text = pace_text("ina", links)
    assert text == ("ina: 1.20 of 2 cores busy during the rounds, start skew 0.250 s of "
                    "2.000 s/round (medians), 2.40 CPU-s a round, 4.0 retransmissions/round: "
                    "links bind")


def test_pace_of_four_jobs_is_one_line_per_sync_mode():
    doc = _four_jobs()
    assert [mode_kind(m) for m in ("ina", "j3/ps_only", "alone/j2")] == ["ina", "ps_only",
                                                                           "alone"]
    kinds = pace_by_kind(doc["modes"])
    assert list(kinds) == ["ina", "ps_only", "alone"]
    ina = kinds["ina"]
    # rounds of all four jobs: times 1,2 2,3 3,4 4,5 -> median 3.0; skews .1 .1 .2 .2 ...
    assert ina["s_per_round"] == 3.0
    assert ina["start_skew_s"] == pytest.approx(0.25)
    assert ina["retransmissions_per_round"] == pytest.approx((0 + 1 + 2 + 3) / 4)
    assert (ina["busy_cores"], ina["binding"]) == (1.0, "links")
    assert kinds["ps_only"]["binding"] == "cores"
    assert len(pace_lines(doc)) == 3
    # several jobs share a launch's wall time: no CPU a round per job is made up
    assert not any("CPU-s a round" in line for line in pace_lines(doc))
    one = pace_lines({"modes": {"ina": _mode([1.0, 3.0, 2.0], 0.25, 4, 1.2)}})
    assert one == ["ina: 1.20 of 2 cores busy during the rounds, start skew 0.250 s of "
                   "2.000 s/round (medians), 2.40 CPU-s a round, 4.0 retransmissions/round: "
                   "links bind"]


def test_plots_of_four_jobs_draw_one_band_per_sync_mode():
    doc = _four_jobs()
    series = plot_series(doc["modes"], "time_s")
    assert len(series) == 3 <= MAX_LINES  # not 12 lines
    ina = series[0]
    assert ina["label"] == "ina (4 jobs: median, min–max)"
    assert ina["ys"] == [2.5, 3.5] and ina["low"] == [1.0, 2.0] and ina["high"] == [4.0, 5.0]
    # a run of one job keeps one line per mode
    one = plot_series({"ina": doc["modes"]["j1/ina"], "ps_only": doc["modes"]["j1/ps_only"]},
                      "time_s")
    assert [s["label"] for s in one] == ["ina", "ps_only"] and "low" not in one[0]


def test_report_of_four_jobs_has_rows_per_job_and_mode_and_no_worker_names():
    doc = _four_jobs()
    page = report_markdown(doc, ["time_per_round.png"])
    job_rows = [ln for ln in page.splitlines() if re.match(r"\| j\d \| ", ln)]
    assert len(job_rows) == 8  # 4 jobs x (ina, ps_only) in the per-job table
    assert "| j3 | ps_only | 2 | yes | 4 | 16,000 | — | — | — | 20 |" in page
    assert "| j2 | ina | 2 | yes | 2.5 | 1,000 | 0.2 | 0.1 | 0.5 | 2 |" in page
    assert "Fairness (Jain's index of measured γ_j / w_j): 0.9876; planned 1" in page
    assert "h37" not in page  # the settings cell of 64 names is cut short
    assert page.count("cores busy during the rounds") == 3


def test_compare_of_four_jobs_and_64_workers():
    doc = _four_jobs()
    rows = rows_of("jobs4", doc)
    assert len(rows) == 12 and {r.mode for r in rows} >= {"j1/ina", "alone/j4"}
    text = settings_text(doc)
    assert text == "fattree:8, 0.5 Mbit/s, 64 workers (h1 … h64), jobs 4, rounds 2"
    assert len(summary_table({"run": "x", "modes": {"ina": doc["modes"]["j1/ina"]}}).rows) == 1


def test_host_setup_is_a_few_lines_holding_every_neighbour():
    plan = plan_network(fat_tree(8))
    lines = host_setup_commands(plan, "h5", "/py", max_line=3000)
    assert lines[0] == ("sysctl -qw net.ipv6.conf.all.disable_ipv6=1; "
                        "/py -m pyswitch.ports tx-off h5-eth0")
    assert all(len(ln) <= 3000 for ln in lines) and len(lines) == 5
    entries = [e for ln in lines[1:] for e in re.findall(r"'(neigh replace [^']*)'", ln)]
    assert len(entries) == 127  # every other host of the 128, once
    assert "neigh replace 10.0.0.128 lladdr 00:00:0a:00:00:80 dev h5-eth0 nud permanent" in \
        lines[-1]
    assert all(ln.startswith("printf '%s\\n' '") and ln.endswith("' | ip -batch -")
               for ln in lines[1:])


def test_host_processes_import_neither_scapy_nor_sklearn_nor_the_compiler():
    code = ("import sys, workers.ina.worker_node, workers.ina.ps_node, pyswitch.ports; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'scapy', 'sklearn', 'lark', 'torch'}), 'pyswitch.compiler' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.split() == ["[]", "False"]
