"""The two walk-throughs in docs/, run from their own text: the code and commands on each page
are what these tests execute, so a page that drifts from the code fails here.

* docs/walkthrough-planner.md: the ``most_workers`` module from the page, registered in
  ``PLANNERS``, then the page's ``plan`` commands: S, γ, the warning and the picture it
  draws for one job, S and the joint γ with ``--jobs``;
* docs/walkthrough-p4.md: the page's ``pyswitch compile`` command with a smaller slot pool
  (the P4Info's registers shrink), and -- under Mininet -- the page's two ``run`` commands:
  the small pool makes chunks collide and fall back to the PS, every sum stays exact.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli.main import build_parser, main
from controller.experiment.plan_figure import plan_drawing
from controller.plan import planners
from controller.plan.document import load_plan

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def block(page: str, marker: str) -> str:
    """The fenced code block right after ``<!-- walkthrough-...: marker -->`` on ``page``."""
    text = (DOCS / page).read_text()
    m = re.search(rf"<!-- walkthrough-[a-z0-9]+: {re.escape(marker)} -->\n```[a-z]*\n(.*?)```",
                  text, re.S)
    assert m, f"{page}: no code block marked {marker!r}"
    return m.group(1)


def commands(page: str, marker: str) -> list[list[str]]:
    """The shell commands of a marked block (comments dropped, ``\\`` lines joined)."""
    text = block(page, marker).replace("\\\n", " ")
    return [shlex.split(line.split("  #")[0]) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def with_out(argv: list[str], option: str, value: str) -> list[str]:
    """``argv`` with ``option``'s value replaced (or appended)."""
    argv = list(argv)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return argv


# ------------------------------------------------------------ adding a placement algorithm


@pytest.fixture
def most_workers(tmp_path, monkeypatch):
    """The page's module, saved and imported, and its line added to ``PLANNERS``."""
    src = tmp_path / "most_workers.py"
    src.write_text(block("walkthrough-planner.md", "module"))
    spec = importlib.util.spec_from_file_location("most_workers", src)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(planners.PLANNERS, "most_workers", module.most_workers)
    return module.most_workers


def test_the_new_planner_plans_and_draws(most_workers, tmp_path, capsys):
    (argv,) = commands("walkthrough-planner.md", "plan")
    assert argv[:3] == ["python", "-m", "controller"]
    out = tmp_path / "most_workers.json"
    assert main(with_out(argv[3:], "--out", str(out))) == 0
    plan = load_plan(out)
    assert plan.planner == "most_workers"
    assert plan.deployed == ["edge1", "edge2"] and plan.job.gamma == pytest.approx(0.75)
    captured = capsys.readouterr()
    printed = captured.out
    assert re.search(r"most_workers \(plan\)\s*│\s*0\.75 ", printed)
    warning = block("walkthrough-planner.md", "warning").strip()
    assert captured.err.strip() == warning == plan.warning
    d = plan_drawing(plan)
    assert sorted(d.programmable) == ["edge0", "edge1", "edge2"]
    assert "  edge1 ← h2–h6" in d.legend_lines and "  edge2 ← h2–h5" in d.legend_lines
    assert (tmp_path / "most_workers.png").read_bytes()[:4] == b"\x89PNG"
    # the page's other claim: budget 1 takes edge1 (a tie with edge2, broken by name)
    argv1 = with_out(with_out(argv[3:], "--out", str(tmp_path / "b1.json")), "--budget", "1")
    assert main(argv1) == 0
    one = load_plan(tmp_path / "b1.json")
    assert one.deployed == ["edge1"] and one.job.gamma == pytest.approx(2 / 3)


def test_the_new_planner_places_several_jobs(most_workers, tmp_path, capsys):
    """The page's ``--jobs`` command: the same function places two jobs, scored by the joint
    LP (min γ_j/w_j = 3/11 on S = {edge1, edge2}); the lines it prints are the page's."""
    (argv,) = commands("walkthrough-planner.md", "plan-jobs")
    out = tmp_path / "jobs.json"
    assert main(with_out(argv[3:], "--out", str(out))) == 0
    plan = load_plan(out)
    assert plan.several and plan.planner == "most_workers"
    assert plan.deployed == ["edge1", "edge2"]
    assert plan.min_gamma_per_weight == pytest.approx(3 / 11)
    printed = capsys.readouterr().out.splitlines()
    for line in block("walkthrough-planner.md", "jobs-output").strip().splitlines():
        assert line in printed


def test_run_takes_the_new_name_too(most_workers):
    args = build_parser().parse_args(["run", "--planner", "most_workers"])
    assert args.planner == "most_workers"


# ------------------------------------------------------------ changing the P4 program


def test_the_compile_command_shrinks_the_slot_pool(tmp_path):
    (argv,) = commands("walkthrough-p4.md", "compile")
    assert argv[:3] == ["python", "-m", "pyswitch"] and "-D" in argv
    slots = int(argv[argv.index("-D") + 1].split("=")[1])
    argv = with_out(argv, "-o", str(tmp_path / "ina.json"))
    argv = with_out(argv, "--p4runtime-files", str(tmp_path / "ina.p4info.txtpb"))
    done = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "ina.p4info.txtpb").read_text()
    sizes = {name: int(size) for name, size in re.findall(
        r'registers \{.*?name: "MyIngress\.(\w+)".*?size: (\d+)', text, re.S)}
    assert sizes["slot_count"] == slots and sizes["agg_v0"] == slots
    assert slots < 1024  # constants.p4's default, which the page says it overrides


def _run(argv: list[str], out: Path) -> dict:
    assert argv[:3] == ["python", "-m", "controller"]
    argv = with_out(with_out(argv[3:], "--out", str(out)), "--name", "r")
    assert main(argv) == 0
    return json.loads((out / "r" / "results.json").read_text())


@pytest.mark.root
@pytest.mark.mininet
@pytest.mark.slow
def test_a_smaller_slot_pool_shows_in_a_run(tmp_path):
    default, small = commands("walkthrough-p4.md", "run")
    assert "--slots" not in default and "--slots" in small
    base = _run(default, tmp_path / "default")
    few = _run(small, tmp_path / "small")
    assert base["exact_all_rounds"] is True and few["exact_all_rounds"] is True
    assert base["modes"]["ina"]["collisions"] == 0
    assert few["modes"]["ina"]["collisions"] > 0
    report = (tmp_path / "small" / "r" / "report.md").read_text()
    assert "slot collisions" in report and "![the plan](plan.png)" in report
