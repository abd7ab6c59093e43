"""Results of an experiment run: ``results.json``, PNG plots and the summary table.

A run is a dict with ``settings`` and one entry per synchronization mode in ``modes``; each
mode holds per-round records (``rounds``: list of dicts with ``time_s``, ``ps_rx_bytes``,
``busiest_link_bytes``, ``accuracy``, ``retransmissions``, ``exact``).  This module only
formats and draws; measuring is the runner's job.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")  # headless: plots are files
import matplotlib.pyplot as plt  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from controller.experiment.prediction import prediction_lines  # noqa: E402
from controller.experiment.records import mode_kind, pace_lines  # noqa: E402

PLOTS = (
    ("time_s", "time per round (s)", "time_per_round.png"),
    ("ps_rx_bytes", "bytes into the PS host per round", "ps_bytes.png"),
    ("busiest_link_bytes", "bytes on the busiest link per round", "busiest_link_bytes.png"),
    ("accuracy", "held-out accuracy", "accuracy.png"),
)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


MAX_LINES = 6
"""Most lines in one plot; beyond, the modes of several jobs are drawn per sync mode."""


def plot_series(modes: dict[str, dict[str, Any]], key: str,
                max_lines: int = MAX_LINES) -> list[dict[str, Any]]:
    """What one plot of ``key`` draws (pure): one series per mode (``label``, ``ys``), or,
    with more than ``max_lines`` modes (4 jobs x 3 modes), one per sync mode
    (:func:`records.mode_kind`) with the median of its jobs' values per round and their
    ``low``/``high`` (min, max) band, its label saying how many jobs it sums up.  Modes
    without the figure in every round are left out."""
    lines = {}
    for mode, data in modes.items():
        ys = [r.get(key) for r in data.get("rounds", [])]
        if ys and all(y is not None for y in ys):
            lines[mode] = [float(y) for y in ys]
    if len(lines) <= max_lines:
        return [{"label": m, "ys": ys} for m, ys in lines.items()]
    kinds: dict[str, list[list[float]]] = {}
    for mode, ys in lines.items():
        kinds.setdefault(mode_kind(mode), []).append(ys)
    out = []
    for kind, runs in kinds.items():
        n = min(len(ys) for ys in runs)
        cols = [[ys[i] for ys in runs] for i in range(n)]
        out.append({"label": f"{kind} ({len(runs)} jobs: median, min–max)",
                    "ys": [float(np.median(c)) for c in cols],
                    "low": [min(c) for c in cols], "high": [max(c) for c in cols]})
    return out


def plot_modes(modes: dict[str, dict[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per metric with one line per mode (per sync mode beyond :data:`MAX_LINES`
    modes: :func:`plot_series`); returns the files written."""
    written = []
    for key, label, filename in PLOTS:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        drawn = False
        for series in plot_series(modes, key):
            xs = range(1, len(series["ys"]) + 1)
            line, = ax.plot(xs, series["ys"], marker="o", label=series["label"])
            if "low" in series:
                ax.fill_between(xs, series["low"], series["high"], color=line.get_color(),
                                alpha=0.2)
            drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xlabel("round")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / filename
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def summary_table(results: dict[str, Any]) -> Table:
    """Per-mode averages side by side (the table ``make run`` prints)."""
    table = Table(title=f"INSync run {results.get('run', '')}")
    table.add_column("mode")
    table.add_column("rounds", justify="right")
    table.add_column("s/round", justify="right")
    table.add_column("PS B/round", justify="right")
    table.add_column("max link B/round", justify="right")
    table.add_column("retx", justify="right")
    table.add_column("accuracy", justify="right")
    table.add_column("exact", justify="center")
    for mode, data in results["modes"].items():
        rounds = data.get("rounds", [])
        table.add_row(
            mode,
            str(len(rounds)),
            f"{mean([r['time_s'] for r in rounds]):.3f}",
            f"{mean([r['ps_rx_bytes'] for r in rounds]):,.0f}",
            f"{mean([r['busiest_link_bytes'] for r in rounds]):,.0f}",
            str(sum(r.get("retransmissions", 0) for r in rounds)),
            f"{rounds[-1]['accuracy']:.4f}" if rounds and rounds[-1]["accuracy"] is not None
            else "-",
            "yes" if rounds and all(r["exact"] for r in rounds) else "NO",
        )
    return table


def group_table(title: str, caption: str, first: str,
                columns: list[tuple[str, Callable[[str, dict[str, Any]], str]]],
                groups: dict[str, dict[str, Any]]) -> Table:
    """One row per kind of a grouped method (``results[GROUPS]``: async policies, cluster
    rules): ``first`` names the kind, each column's function formats it from the kind's
    ``{"summary", "runs"}``."""
    table = Table(title=title)
    table.caption = caption
    table.add_column(first, justify="left")
    for header, _ in columns:
        table.add_column(header, justify="right")
    for kind, d in groups.items():
        table.add_row(kind, *(cell(kind, d) for _, cell in columns))
    return table


def plot_seed_curves(groups: dict[str, dict[str, Any]], colours: dict[str, str], xkey: str,
                     ykey: str, path: Path, *, xlabel: str, ylabel: str, title: str,
                     log: bool = False, from_origin: bool = False,
                     marker: str | None = None) -> Path:
    """``ykey`` vs ``xkey`` of every run's ``curve``, one line per seed and one colour per
    kind of a grouped method; ``from_origin`` starts the x axis at 0."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for kind, d in groups.items():
        for k, run in enumerate(d["runs"]):
            xs = [e[xkey] for e in run["curve"]]
            ys = [e[ykey] for e in run["curve"]]
            if from_origin:  # an invisible point at x = 0
                xs, ys = [0, *xs], [None, *ys]
            ax.plot(xs, ys, color=colours.get(kind), alpha=0.8, lw=1.2,
                    label=kind if k == 0 else None,
                    **({"marker": marker, "ms": 3} if marker else {}))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def print_table(console: Console, table: Table, min_width: int) -> None:
    """Print a wide table; into a file or a pipe at ``min_width`` columns or more (a terminal
    keeps its own width)."""
    wide = console if console.is_terminal else Console(width=max(console.width, min_width),
                                                       file=console.file)
    wide.print(table)


def print_written(console: Console, out_dir: Path, plots: list[Path]) -> None:
    """The closing line of every run: where its one-page report, results and plots are."""
    report = out_dir / "report.md"
    head = f"report: {report}; " if report.exists() else ""
    console.print(f"{head}results: {out_dir / 'results.json'}; plots: "
                  f"{', '.join(p.name for p in plots)}")


def print_summary(results: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    print_table(console, summary_table(results), 100)  # a pipe: no figure cut short
    extra = []
    gamma = results.get("gamma")
    if gamma:
        ratio = "n/a" if gamma.get("ratio") is None else f"{gamma['ratio']:.2f}"
        extra.append(
            f"gamma predicted {gamma['predicted']:.4g}, measured {gamma['measured']:.4g} "
            f"({gamma.get('unit', '')}; measured/predicted {ratio})"
        )
        if gamma.get("ratio_from_last_start") is not None:
            extra.append(f"gamma from the last worker's start (no compute skew): "
                         f"{gamma['measured_from_last_start']:.4g} "
                         f"(measured/predicted {gamma['ratio_from_last_start']:.2f})")
        for f in gamma.get("after_failover", []):
            got = "n/a" if f["measured"] is None else f"{f['measured']:.4g}"
            extra.append(f"after switch {f['switch']} died: gamma predicted {f['predicted']:.4g}, "
                         f"measured {got} over {f['rounds']} rounds on the new plan")
    ps = results.get("ps_bytes", {})
    if ps.get("ina") and ps.get("ps_only"):
        extra.append(
            f"PS bytes/round: INA {ps['ina']:,.0f} vs PS-only {ps['ps_only']:,.0f} "
            f"(reduction x{ps['ps_only'] / ps['ina']:.2f})"
        )
    acc = results.get("accuracy")
    if acc and acc.get("final") is not None:
        extra.append(f"accuracy: final {acc['final']:.4f}, single-process reference {acc['reference']:.4f}")
    extra += pace_lines(results)
    extra += prediction_lines(results)
    for line in extra:
        console.print(line)

