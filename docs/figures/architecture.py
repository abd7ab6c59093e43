"""Draws docs/figures/architecture.png, the README's picture of INSync.

Run ``python docs/figures/architecture.py [OUT.png]`` (default: next to this file).  The
picture: the controller (planner → data plane → experiment runner → CLI) plans and installs
rules over P4Runtime into the switches, of which a few are programmable and sum gradients;
workers send gradient chunks up, the PS receives the sums' remainder and multicasts the
result back down.  Only matplotlib is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).resolve().parent
ORANGE, GREY, BLUE, GREEN = "#ff9f1c", "#e6e6e6", "#1f77b4", "#2ca02c"


def box(ax, x: float, y: float, w: float, h: float, text: str, colour: str,
        size: int = 9, weight: str = "normal") -> None:
    """A rounded box centred at (x, y) with ``text``."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                fc=colour, ec="black", lw=1.0))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, weight=weight)


def arrow(ax, a: tuple[float, float], b: tuple[float, float], colour: str = "black",
          style: str = "-|>", ls: str = "-", rad: float = 0.0, lw: float = 1.4) -> None:
    """An arrow from ``a`` to ``b``."""
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=12, color=colour,
                                 lw=lw, ls=ls, connectionstyle=f"arc3,rad={rad}"))


def draw(out: Path) -> Path:
    """Draw the architecture and write it to ``out``."""
    fig, ax = plt.subplots(figsize=(10, 6.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 6.4)
    ax.axis("off")

    # the controller, its four floors
    box(ax, 1.6, 3.6, 2.7, 4.6, "", "#f7f7f7")
    ax.text(1.6, 5.65, "controller (python -m controller)", ha="center", fontsize=9,
            weight="bold")
    floors = [("cli: plan, run, compare,\ncampaign, net, deploy", 5.0),
              ("experiment: runner, methods,\nreport.md, plan.png", 4.05),
              ("dataplane: rules,\nP4Runtime client", 3.1),
              ("plan: greedy + LP,\nplanners, γ", 2.15)]
    for text, y in floors:
        box(ax, 1.6, y, 2.4, 0.75, text, "white", size=8)
    for (_, y1), (_, y2) in zip(floors, floors[1:], strict=False):
        arrow(ax, (1.6, y1 - 0.38), (1.6, y2 + 0.38), lw=1.0)
    ax.text(1.6, 1.45, "imports point down only", ha="center", fontsize=7, style="italic")

    # the network: core, aggregation (one programmable), edge (PS ToR programmable)
    core = [(5.6, 5.4), (7.6, 5.4)]
    agg = [(4.6, 4.1), (6.1, 4.1), (7.1, 4.1), (8.6, 4.1)]
    edge = [(4.6, 2.8), (6.1, 2.8), (7.1, 2.8), (8.6, 2.8)]
    prog = {agg[1], edge[0]}
    for a in agg:
        for c in core:
            ax.plot([a[0], c[0]], [a[1], c[1]], color="#bbbbbb", lw=1, zorder=0)
    for i, e in enumerate(edge):
        for a in agg[(i // 2) * 2:(i // 2) * 2 + 2]:
            ax.plot([a[0], e[0]], [a[1], e[1]], color="#bbbbbb", lw=1, zorder=0)
    for p in core + agg + edge:
        ax.scatter(*p, s=420, marker="s", color=ORANGE if p in prog else GREY,
                   edgecolors="black", linewidths=1.4 if p in prog else 0.8, zorder=3)
    ax.text(9.45, 5.4, "core", fontsize=8, style="italic", va="center")
    ax.text(9.45, 4.1, "aggregation", fontsize=8, style="italic", va="center")
    ax.text(9.45, 2.8, "edge", fontsize=8, style="italic", va="center")
    ax.text(6.6, 6.05, "switches: pyswitch (or BMv2) running p4src/ina.p4 in Mininet",
            ha="center", fontsize=9, weight="bold")

    # hosts: PS under edge0, workers under the others
    ps = (4.3, 1.3)
    workers = [(4.9, 1.3), (5.8, 1.3), (6.4, 1.3), (6.8, 1.3), (7.4, 1.3), (8.3, 1.3),
               (8.9, 1.3)]
    hosts_at = [edge[0], edge[0], edge[1], edge[1], edge[2], edge[2], edge[3], edge[3]]
    for h, e in zip([ps, *workers], hosts_at, strict=True):
        ax.plot([h[0], e[0]], [h[1], e[1]], color="#bbbbbb", lw=1, zorder=0)
    ax.scatter(*ps, s=380, marker="D", color=BLUE, edgecolors="black", zorder=3)
    ax.text(ps[0], ps[1] - 0.38, "PS", ha="center", fontsize=9, weight="bold")
    for w in workers:
        ax.scatter(*w, s=150, marker="o", color=BLUE, zorder=3)
    ax.text(6.85, 0.72, "workers (python -m workers.ina.worker_node, one per host)",
            ha="center", fontsize=8)

    # gradients up to the programmable switches, RESULT down
    arrow(ax, (workers[2][0], 1.5), (agg[1][0] - 0.05, 3.9), colour=GREEN, ls="--", rad=-0.15)
    arrow(ax, (workers[4][0], 1.5), (agg[1][0] + 0.1, 3.9), colour=GREEN, ls="--", rad=0.15)
    arrow(ax, (workers[0][0], 1.5), (edge[0][0] + 0.05, 2.6), colour=GREEN, ls="--")
    arrow(ax, (edge[0][0] - 0.1, 2.6), (ps[0], 1.55), colour=GREEN, ls="--")
    ax.text(5.0, 3.45, "gradient chunks,\nsummed in slots", fontsize=7.5, color=GREEN,
            ha="center")
    arrow(ax, (ps[0] - 0.25, 1.55), (3.95, 2.6), colour="#d62728", rad=-0.3)
    ax.text(3.55, 2.05, "RESULT\nmulticast", fontsize=7.5, color="#d62728", ha="center")

    # the controller installs rules over P4Runtime
    arrow(ax, (2.85, 3.1), (4.35, 3.95), colour="black", rad=0.1)
    arrow(ax, (2.85, 3.1), (4.35, 2.85), colour="black", rad=-0.05)
    ax.text(3.45, 3.7, "P4Runtime:\npipeline, rules", fontsize=7.5, ha="center")
    arrow(ax, (2.85, 4.05), (4.15, 1.45), colour="#777777", ls=":", rad=0.35)
    ax.text(2.95, 1.05, "starts the PS and workers,\ncollects results.json", fontsize=7.5,
            color="#555555", ha="center")

    ax.scatter([], [], s=120, marker="s", color=ORANGE, edgecolors="black",
               label="programmable: aggregates")
    ax.scatter([], [], s=120, marker="s", color=GREY, edgecolors="black", label="forwards only")
    ax.legend(loc="lower right", fontsize=8, frameon=False, bbox_to_anchor=(1.0, 0.0))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "architecture.png"
    print(draw(target))
