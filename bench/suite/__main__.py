"""``python -m bench.suite``: the INA design suite, one command (docs/suite.md).

Runs every design of ``--designs`` on every cell of ``--networks`` × ``--models`` ×
``--loss`` × ``--jobs`` in the simulated network (``--network mininet``: on Mininet, root),
every sum checked, and writes
``suite.json``, ``report.md`` and the figures into ``--out``.  ``--smoke``: one small cell,
one round (seconds; tests/test_suite.py runs it)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from bench.suite.cell import NETWORKS, Cell, load_cells, merge, run_cell
from bench.suite.designs import DESIGNS, design_names
from bench.suite.report import summary_rows, write_report
from workers.models.shapes import WORKLOADS


def _floats(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, got {text!r}") from None
    if not out or any(not 0 <= x < 1 for x in out):
        raise argparse.ArgumentTypeError(f"loss rates must be in [0, 1), got {text!r}")
    return out


def _names(table: dict | tuple, what: str):  # noqa: ANN202 -- an argparse type
    def parse(text: str) -> list[str]:
        out = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in out if x not in table]
        if bad or not out:
            raise argparse.ArgumentTypeError(f"{what}: expected names from "
                                              f"{','.join(table)}, got {text!r}")
        return out
    return parse


def _ints(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers, got {text!r}") from None
    if not out or any(x < 1 for x in out):
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, got {text!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--networks", type=_names(NETWORKS, "--networks"), default=["makerun"],
                   help=f"from {','.join(NETWORKS)} (default makerun)")
    p.add_argument("--models", type=_names(WORKLOADS, "--models"), default=["resnet50"],
                   help="real models' gradients, scaled (default resnet50)")
    p.add_argument("--scale", type=int, default=10_000, help="model scale (default 10000)")
    p.add_argument("--loss", type=_floats, default=[0.0], help="loss rates, e.g. 0,0.001,0.01")
    p.add_argument("--jobs", type=_ints, default=[1], help="job counts, e.g. 1,4")
    p.add_argument("--designs", default=",".join(DESIGNS),
                   help=f"from {','.join(DESIGNS)} (default all)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per design (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/suite", help="results folder")
    p.add_argument("--network", choices=("simulated", "mininet"), default="simulated",
                   help="simulated (default) or mininet: every design on Mininet, the ring "
                        "and SwitchML as processes (root; run under the Mininet lock)")
    p.add_argument("--smoke", action="store_true", help="one small cell, one round (seconds)")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--reuse", action="store_true",
                   help="keep every design of --out/suite.json that ran with exact sums; run "
                        "only the others (failed, incomplete, inexact, added) and merge")
    a = p.parse_args(argv)
    try:
        designs = design_names(a.designs)
    except ValueError as e:
        p.error(str(e))
    if a.rounds < 1 or a.scale < 1:
        p.error("--rounds and --scale must be >= 1")
    if a.smoke:
        a.networks, a.models, a.loss, a.jobs, a.rounds = ["makerun"], ["resnet50"], [0.0], [1], 1
        a.scale = max(a.scale, 40_000)
    if a.network == "mininet":
        from controller.errors import ExperimentError
        from controller.experiment.network import check_environment

        try:
            check_environment("pyswitch")
        except ExperimentError as e:
            p.error(f"--network mininet: {e}")
    out = Path(a.out)
    command = "python -m bench.suite " + shlex.join(argv if argv is not None else sys.argv[1:])
    cells = []
    earlier = load_cells(out / "suite.json") if a.reuse else {}
    if earlier:  # the runs kept were made by the earlier command
        command = json.loads((out / "suite.json").read_text())["command"].split(" ; ")[0] + \
            " ; " + command
    t0 = time.perf_counter()
    for net in a.networks:
        for model in a.models:
            for jobs in a.jobs:
                for loss in a.loss:
                    cell = Cell(net, model, loss, jobs, a.scale, a.rounds)
                    old = earlier.get(cell.name)
                    todo = tuple(d for d in designs
                                 if old is None or d not in old.designs
                                 or not (old.designs[d].ran and old.designs[d].exact))
                    res = (old if not todo else
                           run_cell(cell, out / "cells" / cell.name, seed=a.seed, designs=todo,
                                    network=a.network))
                    if old is not None and todo:
                        res = merge(old, res, designs)
                    cells.append(res)
                    line = ", ".join(
                        f"{d.design} {d.s_per_round:.3f} s/round exact "
                        f"{'yes' if d.exact else 'NO'}" for d in res.designs.values() if d.ran)
                    print(f"{cell.name}: {line} ({res.wall_s:.1f} s)", flush=True)
                    write_report(cells, out, command, figures=False)
    report = write_report(cells, out, command, figures=not a.no_figures)
    for r in summary_rows(cells):
        print(f"  {r['cell']}: winner {r['winner']} ({r['margin']})")
    exact = all(d.exact for c in cells for d in c.designs.values() if d.ran)
    failed = [f"{c.cell.name}/{d.design}" for c in cells for d in c.designs.values()
              if d.note.startswith(("failed", "incomplete"))]
    print(f"every sum exact: {'yes' if exact else 'NO'}; "
          f"{'failed or incomplete: ' + ', '.join(failed) if failed else 'every design ran'}; "
          f"{report} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0 if exact and not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
