"""The INA design suite (bench/suite, docs/suite.md): its smoke form end to end (every design
that runs in the simulated network on make run's network, every sum exact, the report, the
summary and the figures), the summary's logic on hand-made cells, and its bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.suite.cell import Cell, CellResult, DesignResult
from bench.suite.designs import DESIGNS, RUNNABLE, design_names
from bench.suite.report import summary_rows, winner, write_report
from workers.ina.constants import num_slots

ROOT = Path(__file__).resolve().parents[1]


def _suite(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "bench.suite", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_smoke_every_design_exact(tmp_path: Path) -> None:
    p = _suite("--smoke", "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "every sum exact: yes; every design ran" in p.stdout
    doc = json.loads((tmp_path / "suite.json").read_text())
    (cell,) = doc["cells"]
    ran = {n: d for n, d in cell["designs"].items() if d["ran"]}
    assert set(ran) == set(RUNNABLE) == {"insync", "atp", "ps_only", "ring", "switchml"}
    for name, d in ran.items():
        assert d["exact"] and d["s_per_round"] > 0 and d["elements_per_s"] > 0, name
        assert d["bound"], name  # every design names what bound it
    assert ran["ring"]["speedup_vs_ring"] == pytest.approx(1.0)
    assert ran["ps_only"]["speedup_vs_ps_only"] == pytest.approx(1.0)
    # atp: ina.p4 on the ToRs of the workers' racks (edge1, edge2, edge3) and the PS's (edge0)
    atp = json.loads((tmp_path / "cells" / cell_name(cell) / "atp" / "results.json").read_text())
    assert atp["plan"]["deployed"] == ["edge1", "edge2", "edge3"]
    assert ran["atp"]["slots"] == 4 * num_slots() > ran["insync"]["slots"]
    assert ran["insync"]["slots"] > ran["switchml"]["slots"] > 0
    assert ran["atp"]["marks"] >= 0 and ran["insync"]["marks"] == 0
    assert ran["ring"]["slots"] == ran["ps_only"]["slots"] == 0
    # in-network aggregation moves fewer bytes into the PS than PS-only: faster here
    assert ran["insync"]["s_per_round"] < ran["ps_only"]["s_per_round"]
    md = (tmp_path / "report.md").read_text()
    assert "## Which design wins where, and why" in md and "| makerun-resnet50" in md
    for f in ("elements_per_s.png", "speedup_ring.png", "gamma_ratio.png", "slots.png"):
        assert (tmp_path / f).stat().st_size > 1000


def cell_name(cell: dict) -> str:
    return Cell(**cell["cell"]).name


def test_atp_runs_ecn_marks_aimd_and_every_rack(tmp_path: Path, monkeypatch) -> None:
    """The atp design's INA run: the tor_all planner with the workers' racks outside the
    PS's as its budget (make run's h2..h6: edge1, edge2, edge3), --cc
    aimd, and a simulated network whose switches mark ECN (ecn_packets); insync's run marks
    nothing.  The workers' marks are summed from their reports."""
    import bench.suite.cell as cellmod
    from bench.suite.designs import ATP_ECN_PACKETS

    seen = {}

    def fake_run(s, opt, out, *a, **k):
        seen[out.name] = (s, opt)
        raise RuntimeError("stop here")
    monkeypatch.setattr(cellmod, "_ina_run", fake_run)
    res = cellmod.run_cell(Cell("makerun", "resnet50", 0.0, 1, rounds=1), tmp_path,
                           designs=("insync", "atp"))
    assert res.designs["atp"].note == "failed: RuntimeError: stop here"
    s, opt = seen["atp"]
    assert (s.planner, s.cc, s.budget, s.modes) == ("tor_all", "aimd", 3, ("ina",))
    assert opt.ecn_packets == ATP_ECN_PACKETS > 0
    s, opt = seen["main"]
    assert (s.planner, s.cc, s.budget, opt.ecn_packets) == ("greedy", "fixed", 2, 0)
    run = tmp_path / "r" / "job1" / "ina"
    run.mkdir(parents=True)
    (run / "worker0.json").write_text(json.dumps({"rounds": [{"marks": 3}, {"marks": 4}]}))
    (run / "worker1.json").write_text(json.dumps({"rounds": [{"marks": 5}]}))
    (run / "workers.json").write_text("[]")  # not a worker's report
    assert cellmod._marks(tmp_path / "r") == 12


def _cell(**eps: float | None) -> CellResult:
    designs = {n: DesignResult(n, eps.get(n) is not None, exact=True, elements_per_s=eps.get(n),
                               bound="link" if n == "ps_only" else "pipeline")
               for n in DESIGNS}
    return CellResult(Cell("makerun", "resnet50", 0.0, 1), designs, 6, 100, 1000, 1.0, 0.3,
                      0.2, 1.0)


def test_summary_names_the_winner_and_what_bound_the_others(tmp_path: Path) -> None:
    c = _cell(insync=300.0, atp=200.0, ps_only=100.0, ring=250.0)
    assert winner(c) == "insync"
    (row,) = summary_rows([c])
    assert row["margin"] == "×1.20 over ring"
    assert "ps_only: link" in row["losers bound by"] and "insync" not in row["losers bound by"]
    c.designs["insync"].exact = False  # an inexact sum never wins
    assert winner(c) == "ring"
    assert "insync: a sum was not exact" in summary_rows([c])[0]["losers bound by"]
    md = write_report([c], tmp_path, "cmd", figures=False).read_text()
    assert "| makerun-resnet50-loss0-j1 | ring |" in md and "not run" in md


def test_a_design_that_runs_as_its_plan_predicts_loses_on_its_plan() -> None:
    """A loser bound by the pipeline (it ran as its plan predicts) is said to lose on its
    plan: its γ against the winner's and the link its plan loads most."""
    c = _cell(insync=17_809.0, atp=15_782.0)
    c.designs["insync"].gamma_predicted = 0.25
    c.designs["atp"].gamma_predicted, c.designs["atp"].plan_link = 0.22667, "agg48->edge55 at 100%"
    (row,) = summary_rows([c])
    assert "atp: pipeline: its plan's γ 0.227 against insync's 0.25, the plan loads " \
           "agg48->edge55 at 100%" in row["losers bound by"]
    c.designs["atp"].gamma_predicted = 0.25  # the same plan's γ: nothing to blame on it
    assert "atp: pipeline;" in summary_rows([c])[0]["losers bound by"] + ";"


def test_several_jobs_take_the_slowest_jobs_prediction() -> None:
    """With several jobs the design's bound is the slowest job's prediction (the engine
    predicts every job), its γ the smallest job's, and the link its plan loads most (the
    per-link records sit on one job's prediction only)."""
    links = [{"link": "agg0->edge1", "lp_load": 0.5}, {"link": "agg48->edge55", "lp_load": 1.0},
             {"link": "h1->edge0", "lp_load": 0.0}]
    rec = {"rounds": [{"time_s": 0.5, "exact": True, "retransmissions": 0}]}
    slow = {"rounds": [{"time_s": 0.7, "exact": True, "retransmissions": 0}]}

    def bound(text: str) -> dict:
        return {"round": {"predicted_s": 0.6, "measured_s": 0.7},
                "bound": {"resource": "pipeline", "text": text}, "links": links}

    doc = {"modes": {"job1/ina": rec, "job2/ina": slow},
           "jobs": {"job1": {"gamma": {"predicted": 0.25, "ratio": 0.9}, "workers": ["h1"]},
                    "job2": {"gamma": {"predicted": 0.2, "ratio": 0.8}, "workers": ["h2"]}},
           "prediction": {"job1/ina": bound("one"), "job2/ina": {**bound("two"), "links": []}}}
    import bench.suite.cell as cellmod

    d = cellmod._ina_design("atp", doc, "ina", 1000, 0, 1.0)
    assert (d.bound, d.bound_text) == ("pipeline", "job2: two")
    assert d.gamma_predicted == 0.2 and d.gamma_ratio == pytest.approx(0.85)
    assert d.plan_link == "agg48->edge55 at 100%"


def test_design_names() -> None:
    assert design_names("ring,insync") == ("insync", "ring")  # the table's order
    with pytest.raises(ValueError, match="--designs"):
        design_names("insync,nccl")


@pytest.mark.parametrize("args, what", [
    (["--networks", "k99"], "--networks"), (["--loss", "1.5"], "loss"),
    (["--jobs", "0"], "whole numbers"), (["--designs", "x"], "--designs"),
    (["--rounds", "0"], "--rounds"), (["--models", "gpt"], "--models")])
def test_bad_input_one_line(args: list[str], what: str, capsys: pytest.CaptureFixture) -> None:
    from bench.suite.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and what in err.strip().splitlines()[-1]


def test_jain_fairness() -> None:
    from bench.suite.cell import jain

    assert jain([3.0, 3.0, 3.0]) == 1.0
    assert jain([1.0, 0.0]) == 0.5  # one of two jobs starved
    assert jain([5.0]) is None and jain([]) is None


def test_incomplete_design_is_not_a_measurement() -> None:
    """A host-driven design whose workers did not finish every round in the virtual time
    allowed is reported as incomplete (with its resent packets), never as a slow design."""
    from types import SimpleNamespace

    from bench.suite.cell import _incomplete
    from controller.experiment.methods.switchml.sim import SmJobResult

    rec = {"time_s": 1.0, "sent": 5, "retransmitted": 0}
    job = SmJobResult(1, [[rec, rec], [rec]], [True, False], resent=1234)
    assert not job.complete and job.retransmissions == 1234
    d = _incomplete("switchml", SimpleNamespace(jobs=[job], virtual_s=600.0),
                    Cell("k8", "resnet50", 0.0, 4, rounds=2))
    assert not d.ran and d.retransmissions == 1234 and d.bound == "retransmissions"
    assert d.note.startswith("incomplete: 3 of 4 worker-rounds finished in 600 s")
    assert d.note.endswith("exact: yes (1)")  # round 0, which both workers finished
