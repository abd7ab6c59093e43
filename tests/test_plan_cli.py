"""``python -m controller plan``: a real plan end to end, and every error class exits 2
with one ``error:`` line and no plan file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.plan.document import chunk_schedule, load_plan
from topo.models import load_json

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "controller", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def leaf_spine_file(tmp_path, **extra):
    ws = ["w1", "w2", "w3", "w4"]
    d = {"hosts": ws + ["ps"], "switches": ["leaf1", "leaf2", "spine"],
         "links": [{"a": w, "b": "leaf1"} for w in ws]
         + [{"a": "ps", "b": "leaf2"}, {"a": "leaf1", "b": "spine"},
            {"a": "leaf2", "b": "spine"}]}
    d.update(extra)
    p = tmp_path / "ls.json"
    p.write_text(json.dumps(d))
    return p


def test_plan_leaf_spine_file(tmp_path):
    topo = leaf_spine_file(tmp_path)
    out = tmp_path / "sub" / "plan.json"
    r = run("plan", "--topo", str(topo), "--ps", "ps", "--workers", "w1,w2,w3,w4",
            "--budget", "1", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "greedy (plan)" in r.stdout and "ps_only" in r.stdout
    plan = load_plan(out)
    assert plan.deployed == ["leaf1"] and plan.job.gamma == pytest.approx(1.0)
    assert plan.baselines["ps_only"] == pytest.approx(0.25)
    assert plan.baselines["tor_only"] == pytest.approx(0.25)
    assert plan.baselines["exact"] == pytest.approx(1.0)
    assert plan.switch_ids == {"leaf1": 1, "leaf2": 2, "spine": 3}
    assert plan.job.ps_tor == "leaf2" and plan.job.ps_link_load == pytest.approx(1.0)
    assert plan.job.intervals["leaf1"] == {"offset": 0.0, "length": pytest.approx(1.0)}
    assert all(plan.job.fractions[w]["leaf1"] == pytest.approx(1.0) for w in plan.job.workers)
    loads = {(e["from"], e["to"]): e["load"] for e in plan.loads}
    assert loads[("leaf1", "spine")] == pytest.approx(1.0)
    # the plan is self-contained: its embedded topology reloads, and schedules follow
    assert load_json(out).number_of_edges() == 7
    sch = chunk_schedule(plan, 4)
    assert sch["w1"] == [(c, 1, 4) for c in range(4)]


def test_plan_generated_topology_with_count(tmp_path):
    out = tmp_path / "plan.json"
    # hand-checked in the model of docs/design.md §3.3, which leaves the RESULT tree out
    r = run("plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "15", "--budget", "1",
            "--capacity", "100", "--solver", "highs", "--seed", "3", "--no-result-load",
            "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = load_plan(out)
    assert plan.job.workers == [f"h{i}" for i in range(1, 16)]
    assert plan.job.gamma == pytest.approx(1 / 3) and plan.deployed == ["agg2"]
    assert plan.topology["spec"] == "fattree:4"
    assert set(plan.baselines) == {"ps_only", "tor_only", "all_programmable", "random",
                                      "top_degree", "exact", "rounding", "tor_all"}  # best: no baseline
    assert not list(tmp_path.glob(".plan.json.*"))  # no temp file left behind
    assert out.stat().st_mode & 0o444 == 0o444  # readable plan, not mkstemp's 0600


def disconnected(tmp_path):
    p = tmp_path / "disc.json"
    p.write_text(json.dumps({"hosts": ["ps", "w1", "w2"], "switches": ["s1", "s2"],
                             "links": [{"a": "ps", "b": "s1"}, {"a": "w1", "b": "s1"},
                                       {"a": "w2", "b": "s2"}]}))
    return str(p)


def bad_json(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"hosts": ["a",]}')
    return str(p)


def unknown_link(tmp_path):
    p = tmp_path / "unk.json"
    p.write_text(json.dumps({"hosts": ["a"], "switches": ["s"],
                             "links": [{"a": "a", "b": "t"}]}))
    return str(p)


@pytest.mark.parametrize("topo,extra,needle", [
    ("fattree:4", ["--ps", "h99", "--workers", "3", "--budget", "1"], "unknown PS node 'h99'"),
    ("fattree:4", ["--ps", "h0", "--workers", "h1,hx", "--budget", "1"], "unknown worker"),
    ("fattree:4", ["--ps", "h0", "--workers", "h0,h1", "--budget", "1"], "also listed"),
    ("fattree:4", ["--ps", "h0", "--workers", "3", "--budget", "-1"], "budget must be >= 0"),
    ("fattree:4", ["--ps", "h0", "--workers", "16", "--budget", "1"], "only 15 hosts"),
    ("fattree:4", ["--ps", "h0", "--workers", "3", "--budget", "1", "--capacity", "0"],
     "capacity must be > 0"),
    ("fattree:5", ["--ps", "h0", "--workers", "3", "--budget", "1"], "even integer"),
    (disconnected, ["--ps", "ps", "--workers", "w1,w2", "--budget", "1"], "disconnected"),
    (bad_json, ["--ps", "a", "--workers", "1", "--budget", "1"], "bad JSON"),
    (unknown_link, ["--ps", "a", "--workers", "1", "--budget", "1"], "unknown node 't'"),
    ("fattree:4", ["--ps", "h0", "--workers", "3", "--budget", "x"], "invalid int value"),
    ("fattree:4", ["--ps", "h0", "--workers", "3"], "give --budget M"),
    ("fattree:8", ["--ps", "h0", "--workers", "127", "--budget", "1", "--time-limit", "1e-9"],
     "not solved (time limit reached"),
])
def test_errors_exit_2_one_line_no_file(tmp_path, topo, extra, needle):
    topo = topo(tmp_path) if callable(topo) else topo
    out = tmp_path / "plan.json"
    r = run("plan", "--topo", topo, *extra, "--out", str(out), cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert needle in lines[0]
    assert "Traceback" not in r.stderr
    assert not out.exists()
    assert list(tmp_path.glob("*plan*")) == []


def test_unwritable_out_is_found_before_the_lp(tmp_path, capsys):
    """--out is checked first: a plan that would take the LP a while fails at once, and a
    bad topology is not even read (the --out line is the one shown)."""
    import time

    from controller.cli.main import main

    (tmp_path / "file").write_text("x")
    for out in (tmp_path, tmp_path / "file" / "plan.json", "/proc/insync-nope/plan.json"):
        t0 = time.perf_counter()
        code = main(["plan", "--topo", "fattree:8", "--ps", "h0", "--workers", "127",
                     "--budget", "4", "--out", str(out)])
        assert code == 2 and time.perf_counter() - t0 < 2.0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: --out {out}")
    assert main(["plan", "--topo", "fattree:3", "--ps", "h0", "--workers", "1", "--budget",
                 "1", "--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _two_jobs_files(tmp_path):
    """T1 of tests/test_lp_jobs.py: a1, a2 (job A) and b1, b2 (job B) under leaf1, pa under
    leaf2, pb under leaf3, every leaf on one spine; every link capacity 1."""
    ws = ["a1", "a2", "b1", "b2"]
    links = [{"a": w, "b": "leaf1"} for w in ws]
    links += [{"a": "pa", "b": "leaf2"}, {"a": "pb", "b": "leaf3"}]
    links += [{"a": leaf, "b": "spine"} for leaf in ("leaf1", "leaf2", "leaf3")]
    topo = tmp_path / "t1.json"
    topo.write_text(json.dumps({"hosts": ws + ["pa", "pb"],
                                "switches": ["leaf1", "leaf2", "leaf3", "spine"],
                                "links": links}))
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"name": "A", "ps": "pa", "workers": ["a1", "a2"]},
                                {"name": "B", "ps": "pb", "workers": ["b1", "b2"]}]))
    return topo, jobs


def test_plan_jobs_file_shares_the_leaf(tmp_path):
    """Budget 2: greedy buys leaf1 (shared, 1/2 each: leaf1→spine carries one stream per job,
    γ_A + γ_B ≤ 1) and stops, the spine adding nothing; alone each job gets γ = 1."""
    topo, jobs = _two_jobs_files(tmp_path)
    out = tmp_path / "plan.json"
    r = run("plan", "--topo", str(topo), "--jobs", str(jobs), "--budget", "2",
            "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = load_plan(out)
    assert plan.deployed == ["leaf1"]
    assert {n: round(j.gamma, 6) for n, j in plan.jobs.items()} == {"A": 0.5, "B": 0.5}
    assert plan.fairness == pytest.approx(1.0)
    assert "fairness (Jain's index of γ/w) 1.0000" in r.stdout
    assert "A  γ 0.5000 (alone 1.0000)" in r.stdout


@pytest.mark.parametrize("extra,needle", [
    (["--jobs", "2", "--ps", "h0"], "drop --ps and --workers"),
    ([], "give --ps and --workers"),
    (["--jobs", "9"], "only 16 hosts"),
    (["--jobs", "²"], "at most 9 digits"),
])
def test_plan_jobs_errors_one_line(tmp_path, extra, needle):
    out = tmp_path / "plan.json"
    r = run("plan", "--topo", "fattree:4", "--budget", "1", *extra, "--out", str(out),
            cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_plan_shows_what_run_deploys(tmp_path):
    """One pipeline, one set of defaults: ``plan`` with make-run's settings prints the γ
    and deployment that ``run`` plans (and writes to its plan.json) for them."""
    import networkx as nx

    from controller.experiment.methods.ina.core import Settings, plan_job
    from topo.models import parse_topology

    s = Settings()
    out = tmp_path / "plan.json"
    r = run("plan", "--topo", s.topo, "--ps", s.ps, "--workers", s.workers, "--budget",
            str(s.budget), "--bw", str(s.bw), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    by_plan = load_plan(out)
    graph = nx.Graph(parse_topology(s.topo))
    nx.set_edge_attributes(graph, float(s.bw), "bw")  # as the run shapes every link
    (tmp_path / "run").mkdir()
    by_run = plan_job(s, nx.freeze(graph), tmp_path / "run")
    # the greedy's {edge1, agg0} (γ 0.75), polished from top_degree's set (the default)
    assert by_plan.deployed == by_run.deployed == ["agg0", "agg1"]
    assert by_plan.job.gamma == pytest.approx(by_run.job.gamma) and by_run.job.gamma == \
        pytest.approx(1)
    assert by_plan.result_load is by_run.result_load is True
    assert load_plan(tmp_path / "run" / "plan.json").job.gamma == \
        pytest.approx(by_plan.job.gamma)


def test_polish_takes_the_baseline_that_beats_the_greedy_and_run_asks_the_same(tmp_path):
    """make run's job: the greedy's {edge1, agg0} (γ 0.75) below top_degree's γ 1; by
    default the plan starts from top_degree's set and deploys it (recorded in
    ``local_search``), ``--no-polish`` keeps the greedy's, and ``run``'s settings make the
    same request."""
    from controller.cli.main import main
    from controller.experiment.methods.ina.core import Settings, plan_request

    args = ["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "6", "--budget", "2"]
    assert main([*args, "--no-polish", "--out", str(tmp_path / "g.json")]) == 0
    assert main([*args, "--out", str(tmp_path / "p.json")]) == 0
    greedy, polished = (load_plan(tmp_path / f) for f in ("g.json", "p.json"))
    assert sorted(greedy.deployed) == ["agg0", "edge1"] and greedy.local_search is None
    assert greedy.job.gamma == pytest.approx(0.75) and polished.job.gamma == pytest.approx(1)
    assert sorted(polished.deployed) == ["agg0", "agg1"]
    assert polished.local_search["from"] == "top_degree"
    assert plan_request(Settings(topo="fattree:4")).polish
    assert not plan_request(Settings(topo="fattree:4", polish=False)).polish
