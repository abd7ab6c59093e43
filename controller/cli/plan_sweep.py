"""``plan --budgets B,B,... --planners NAME,...``: the sweep of budgets × planners
(:mod:`controller.plan.sweep`), written as one table (stdout and JSON at ``--out``) and one
figure (γ against budget, one line per planner, ``--out`` with ``.png``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from controller.plan.lp import PlanError
from controller.plan.sweep import SweepRow, parse_list, sweep, sweep_jobs

__all__ = ["run_sweep", "sweep_budgets", "write_sweep_figure"]


def sweep_budgets(text: str) -> list[int]:
    """``--budgets`` as sorted distinct integers ≥ 0 (one-line :class:`PlanError`)."""
    try:
        budgets = [int(t) for t in parse_list(text, "--budgets")]
    except ValueError:
        raise PlanError(f"--budgets: expected integers like 0,1,2,4, got {text!r}") from None
    if any(b < 0 for b in budgets):
        raise PlanError(f"--budgets must be >= 0, got {text!r}")
    return sorted(set(budgets))


def write_sweep_figure(rows: list[SweepRow], path: Path, title: str) -> None:
    """γ against budget, one line per planner (refused points left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r.planner for r in rows):
        pts = [(r.budget, r.gamma) for r in rows if r.planner == name and r.gamma is not None]
        if pts:
            ax.plot([b for b, _ in pts], [g for _, g in pts], marker="o", label=name)
    ax.set_xlabel("budget M (programmable switches besides the PS's ToR)")
    ax.set_ylabel("γ (predicted by the LP)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_sweep(args: argparse.Namespace, req, graph, *, ps=None, workers=None, jobs=None) -> int:
    """The sweep of ``args.budgets`` × ``args.planners``; prints the table, writes the JSON
    at ``args.out`` and the figure beside it."""
    budgets = sweep_budgets(args.budgets)
    planners = parse_list(args.planners or req.planner, "--planners")
    p = sweep_jobs(graph, req, ps=ps, workers=workers, jobs=jobs)
    rows = sweep(p, budgets, planners, seed=req.seed, max_combinations=req.max_combinations)
    out = Path(args.out)
    what = f"{len(jobs)} jobs" if jobs is not None else f"PS {ps}, {len(workers)} workers"
    doc = {"topology": args.topo, "jobs": what, "budgets": budgets, "planners": planners,
           "result_load": req.result_load, "objective": req.objective if jobs else None,
           "rows": [r.to_dict() for r in rows]}
    try:
        out.write_text(json.dumps(doc, indent=1))
        picture = out.with_suffix(".png")
        write_sweep_figure(rows, picture, f"{args.topo}, {what}")
    except OSError as exc:
        raise PlanError(f"--out {args.out}: cannot write the sweep ({exc.strerror or exc})") \
            from None
    print(f"{'planner':<12} {'budget':>6} {'gamma':>10} {'LPs':>6} {'s':>8}  switches")
    for r in rows:
        g = "—" if r.gamma is None else f"{r.gamma:.6g}"
        shown = ", ".join(r.deployed[:6]) + (" …" if len(r.deployed) > 6 else "")
        print(f"{r.planner:<12} {r.budget:>6} {g:>10} {r.lp_solves:>6} {r.seconds:>8.2f}  "
              f"{shown if r.gamma is not None else r.note}")
    print(f"sweep written to {out}, its figure to {picture}")
    return 0
