"""examples/ and the README's quick start run as the pages give them.

Every ``--jobs FILE.json`` in README.md and docs/*.md must name a file of the repository (a
newcomer copies the command as it is), and each shipped file must resolve on the topologies
the docs use it with; the planner's example runs as the docs give it. The README's quick start
(no root, no Mininet) runs command by command, ``make plan`` aside (its command is the
Makefile's; the simulation is cut to 2 rounds and writes into a temporary folder).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from controller.plan.jobs import load_jobs, resolve_jobs
from topo.models import parse_topology

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
JOBS_ARG = re.compile(r"--jobs\s+([^\s`|]+\.json)")


def test_every_jobs_file_the_docs_name_is_shipped():
    named = {(page.name, m.group(1)) for page in PAGES
             for m in JOBS_ARG.finditer(page.read_text())}
    assert {f for _, f in named} >= {"examples/jobs.json", "examples/jobs4x16.json"}
    missing = [f"{page}: --jobs {f}" for page, f in sorted(named) if not (ROOT / f).is_file()]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("path,topo,sizes", [
    ("examples/jobs.json", "fattree:4", {"a": 4, "b": 3}),     # docs/running.md, planner.md
    ("examples/jobs.json", "fattree:16", {"a": 4, "b": 3}),    # docs/simulate.md
    ("examples/jobs4x16.json", "fattree:8", {f"job{k}": 16 for k in range(1, 5)}),  # scale.md
    ("examples/jobs_fairness.json", "fattree:4", {"ina": 6, "ps_only": 3}),  # running.md
])
def test_shipped_jobs_files_resolve(path, topo, sizes):
    jobs = resolve_jobs(load_jobs(ROOT / path), parse_topology(topo), path)
    assert {j.name: len(j.workers) for j in jobs} == sizes
    hosts = [h for j in jobs for h in (j.ps, *j.workers)]
    assert len(hosts) == len(set(hosts))


def test_jobs4x16_is_what_scale_k8_writes(tmp_path):
    """bench/scale_k8.py writes the same file for its runs: the two must not drift."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import scale_k8
    finally:
        sys.path.remove(str(ROOT / "bench"))
    written = scale_k8._jobs_file(tmp_path)
    assert json.loads(written.read_text()) == json.loads(
        (ROOT / "examples/jobs4x16.json").read_text())


def test_the_planner_example_is_in_the_quick_start():
    """docs/planner.md's ``plan --topo fattree:4 --jobs examples/jobs.json --budget 2`` is
    the README quick start's, which runs below."""
    text = (ROOT / "docs/planner.md").read_text()
    (cmd,) = re.findall(r"`(plan --topo \S+ --jobs examples/jobs\.json[^`]*)`", text)
    assert any(argv[3:3 + len(cmd.split())] == cmd.split() for argv in quick_start())


def quick_start() -> list[list[str]]:
    """The commands of the README's quick-start block (comments dropped)."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"## Quick start: no root, no Mininet\n\n```bash\n(.*?)```", text, re.S)
    assert m, "README.md: no quick-start block"
    return [shlex.split(line.split("#")[0]) for line in m.group(1).splitlines()
            if line.split("#")[0].strip()]


def _option(argv: list[str], name: str, value: str) -> list[str]:
    argv = list(argv)
    if name in argv:
        argv[argv.index(name) + 1] = value
    else:
        argv += [name, value]
    return argv


@pytest.mark.slow  # ~20 s alone, ~50 s on 2 busy cores
def test_the_readme_quick_start_runs_without_root(tmp_path):
    cmds = quick_start()
    assert [c[:2] for c in cmds] == [["make", "plan"]] + [[".venv/bin/python", "-m"]] * 3 + [
        [".venv/bin/python", "examples/pyswitch_quickstart.py"]]
    assert [c[3] for c in cmds[1:4]] == ["simulate", "compare", "plan"]
    simulate, compare, plan, example = cmds[1:]
    simulate = _option(_option(simulate, "--rounds", "2"), "--out", str(tmp_path))
    compare = [str(tmp_path / Path(a).name) if a.startswith("results/") else a
               for a in compare]
    plan = _option(plan, "--out", str(tmp_path / "jobs-plan.json"))
    outs = []
    for argv in (simulate, compare, plan, example):
        r = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, f"{shlex.join(argv)}: {r.stderr[-2000:]}"
        outs.append(r.stdout)
    per_mode = [ln for ln in outs[0].splitlines() if ln.endswith(("exact yes", "exact NO"))
                and ln.startswith(("  ina ", "  ps_only "))]
    assert len(per_mode) == 4 and all(ln.endswith("exact yes") for ln in per_mode)  # 2 x 2
    assert "sweep over budgets 0,2:" in outs[0]
    assert "quick-b0" in outs[1] and "quick-b2" in outs[1]
    assert "fairness (Jain's index of γ/w)" in outs[2]
    assert outs[3].splitlines() == [
        "frame to 00:00:00:00:00:02 on port 1 -> [2]",
        "frame to 00:00:00:00:00:09 on port 1 -> dropped",
        "rx counter of port 1: 2 packets",
        "entries of MyIngress.l2: 1"]
