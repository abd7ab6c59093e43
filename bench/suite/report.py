"""The suite's report: ``suite.json`` (every figure), ``report.md`` (settings, one table per
cell, the one-page summary "which design wins where, and why") and the figures (pure but for
the files it writes; matplotlib's Agg backend)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.suite.cell import NETWORKS, CellResult
from bench.suite.designs import DESIGNS

__all__ = ["write_report", "winner", "summary_rows"]

COLUMNS = ("design", "exact", "s/round", "elements/s (scaled)", "elements/s (real, proj.)",
           "step s (proj.)", "× ring", "× PS-only", "γ meas/pred", "slots", "retx",
           "ECN marks", "fairness", "bound by")


def _f(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def winner(c: CellResult) -> str | None:
    """The design with the most aggregated elements per second whose sums were all exact."""
    ok = [d for d in c.designs.values() if d.ran and d.exact and d.elements_per_s]
    return max(ok, key=lambda d: d.elements_per_s or 0.0).design if ok else None


def _why_loses(c: CellResult, name: str) -> str:
    d = c.designs[name]
    if not d.ran:  # failed, incomplete (what bound it, when known), or not asked for
        head = d.note.split(":")[0] if d.note.startswith(("failed", "incomplete")) else "not run"
        return f"{head} ({d.bound})" if d.bound else head
    if not d.exact:
        return "a sum was not exact"
    parts = [d.bound or "?"]
    w = winner(c)
    best = c.designs[w].gamma_predicted if w else None
    if d.bound in ("pipeline", "unattributed") and d.gamma_predicted and best and \
            d.gamma_predicted < best * (1 - 1e-6):
        # it ran about as its plan predicts: the plan is what loses, bound by its link
        parts[0] += (f": its plan's γ {d.gamma_predicted:.3g} against {w}'s {best:.3g}"
                     + (f", the plan loads {d.plan_link}" if d.plan_link else ""))
    if d.retransmissions:
        parts.append(f"{d.retransmissions} retransmissions")
    return ", ".join(parts)


def summary_rows(cells: list[CellResult]) -> list[dict[str, str]]:
    """One row per cell: the winner, its margin over the runner-up, and for every design that
    lost, what bound it (the prediction's binding resource: link, pipeline, the PS ...)."""
    rows = []
    for c in cells:
        w = winner(c)
        ran = sorted((d for d in c.designs.values() if d.ran and d.elements_per_s),
                     key=lambda d: -(d.elements_per_s or 0.0))
        margin = (f"×{ran[0].elements_per_s / ran[1].elements_per_s:.2f} over {ran[1].design}"
                  if len(ran) > 1 and ran[1].elements_per_s else "—")
        why = "; ".join(f"{n}: {_why_loses(c, n)}" for n, d in c.designs.items()
                        if n != w and (d.ran or d.note.startswith(("failed", "incomplete"))))
        rows.append({"cell": c.cell.name, "winner": w or "—", "margin": margin,
                     "winner bound by": c.designs[w].bound if w else "—", "losers bound by": why})
    return rows


def _cell_table(c: CellResult) -> list[str]:
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for d in c.designs.values():
        if not d.ran:
            out.append(f"| {d.design} | not run: {d.note} |" + " |" * (len(COLUMNS) - 2))
            continue
        out.append("| " + " | ".join((
            d.design, "yes" if d.exact else "**NO**", _f(d.s_per_round, ".4f"),
            _f(d.elements_per_s, ",.0f"), _f(d.real_elements_per_s, ".3g"),
            _f(d.projected_step_s, ".4f"), _f(d.speedup_vs_ring, ".2f"),
            _f(d.speedup_vs_ps_only, ".2f"), _f(d.gamma_ratio, ".3f"), f"{d.slots:,}",
            f"{d.retransmissions:,}", f"{d.marks:,}", _f(d.fairness, ".3f"),
            d.bound or "—")) + " |")
    return out


def _figures(cells: list[CellResult], out: Path) -> list[str]:
    """Per figure of the issue, one grouped bar chart over the cells; returns file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in DESIGNS if any(c.designs.get(n) and c.designs[n].ran for c in cells)]
    figs = []
    for key, label, fname, log in (
            ("elements_per_s", "aggregated tensor elements / s (scaled run)",
             "elements_per_s.png", True),
            ("speedup_vs_ring", "projected speed-up per step over ring", "speedup_ring.png",
             False),
            ("speedup_vs_ps_only", "projected speed-up per step over PS-only",
             "speedup_ps.png", False),
            ("gamma_ratio", "γ measured / predicted", "gamma_ratio.png", False),
            ("slots", "switch memory: aggregator slots reserved", "slots.png", False),
            ("retransmissions", "retransmissions (all rounds, all jobs)", "retx.png", False)):
        fig, ax = plt.subplots(figsize=(min(16.0, max(6.0, 0.55 * len(cells) + 2)), 4.0))
        width = 0.8 / max(1, len(names))
        for i, n in enumerate(names):
            ys = [getattr(c.designs[n], key) or 0 if n in c.designs else 0 for c in cells]
            ax.bar([x + i * width for x in range(len(cells))], ys, width, label=n)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(cells))])
        ax.set_xticklabels([c.cell.name for c in cells], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(label, fontsize=8)
        if log:
            ax.set_yscale("log")
        if key.startswith("speedup") or key == "gamma_ratio":
            ax.axhline(1.0, color="grey", lw=0.8)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        figs.append(fname)
    return figs


def write_report(cells: list[CellResult], out: Path, command: str,
                 figures: bool = True) -> Path:
    """``suite.json``, ``report.md`` and the figures into ``out``; returns report.md."""
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"command": command, "cells": [asdict(c) for c in cells],
                           "summary": summary_rows(cells)}
    (out / "suite.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    figs = _figures(cells, out) if figures and cells else []
    md = ["# INA design suite", "", f"Command: `{command}`", "",
          "Designs (bench/suite/designs.py): " + "; ".join(
              f"**{d.name}** {d.what}" for d in DESIGNS.values()), "",
          "Networks: " + "; ".join(f"**{n.name}** {n.what}, budget {n.budget}"
                                   for n in NETWORKS.values()), "",
          "## Which design wins where, and why", "",
          "| cell | winner | margin | winner bound by | the others: bound by |",
          "|---|---|---|---|---|"]
    md += [f"| {r['cell']} | {r['winner']} | {r['margin']} | {r['winner bound by']} | "
           f"{r['losers bound by']} |" for r in summary_rows(cells)]
    md += ["", "The winner is the design with the most aggregated elements per second and "
           "every sum exact; \"bound by\" is the binding resource the prediction names "
           "(controller/experiment/prediction.py: a link, the pipeline's fill and drain, the "
           "PS) and the retransmissions when there were any; the ring's is its workers' "
           "uplinks (2(P-1)/P of the vector each way).", ""]
    for c in cells:
        md += [f"## {c.cell.name}", "",
               f"{c.workers} workers per job × {c.cell.jobs} job(s), {c.n_values:,} of "
               f"{c.n_params:,} values ({c.cell.model}, scale {c.cell.scale:,}), links "
               f"{c.bw_mbps:g} Mbit/s, loss {c.cell.loss:g}, {c.cell.rounds} rounds; "
               f"compute {c.compute_s * 1e3:.1f} ms/step; analytic ring step "
               f"{c.analytic_ring_step_s:.4f} s; {c.wall_s:.1f} s on this machine", ""]
        md += _cell_table(c) + [""]
    md += [f"![{f}]({f})" for f in figs]
    path = out / "report.md"
    path.write_text("\n".join(md) + "\n")
    return path
