"""Plots and tables of ``run --method ndn`` (:mod:`controller.experiment.methods.ndn`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.experiment.report import print_written

__all__ = ["plot_distribution", "report_async", "plot_async", "sync_table"]


def sync_table(results: dict) -> Any:
    """Distribution bytes on the PS link per round, NDN vs the TCP PS, per worker count."""
    from rich.table import Table

    modes = results["modes"]
    table = Table(title="parameter distribution bytes on the PS link per round "
                        "(frames the PS host sends, measured on its link)")
    for col in ("N", "NDN B/round", "TCP PS B/round", "TCP/NDN", "÷N", "NDN s/round",
                "TCP s/round", "recoveries"):
        table.add_column(col, justify="right")

    def f(x: float | None, spec: str = ",.0f") -> str:
        return "-" if x is None else format(x, spec)
    for row in results["comparison"].values():
        n = row["n_workers"]
        table.add_row(str(n), f(row.get("ndn_dist_bytes_per_round")),
                      f(row.get("tcp-ps_dist_bytes_per_round")),
                      f(row.get("dist_ratio_tcp_over_ndn"), ".2f"),
                      f(row.get("ratio_over_n"), ".2f"),
                      f(row.get("ndn_round_s_median"), ".3f"),
                      f(row.get("tcp-ps_round_s_median"), ".3f"),
                      str(modes[f"ndn@{n}"]["recoveries"]) if f"ndn@{n}" in modes else "-")
    return table


def plot_distribution(results: dict, out_dir: Path) -> list[Path]:
    """Distribution bytes per round (one line per mode) and the TCP/NDN ratio vs N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for label, m in results["modes"].items():
        ys = [r["dist_bytes"] for r in m["rounds"]]
        ax.plot(range(1, len(ys) + 1), ys, marker="o" if m["kind"] == "ndn" else "s",
                ls="-" if m["kind"] == "ndn" else "--", label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("distribution bytes on the PS link")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "distribution_bytes.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    rows = [r for r in results["comparison"].values() if r.get("dist_ratio_tcp_over_ndn")]
    if rows:
        fig, ax = plt.subplots(figsize=(5.2, 3.6))
        ns = [r["n_workers"] for r in rows]
        ax.plot(ns, [r["dist_ratio_tcp_over_ndn"] for r in rows], marker="o",
                label="measured TCP PS / NDN")
        ax.plot(ns, ns, ls=":", color="grey", label="N")
        ax.set_xlabel("workers N")
        ax.set_ylabel("distribution bytes ratio")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / "distribution_ratio.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def report_async(results: dict, out_dir: Path, console: Any) -> None:
    """Table and plots of an async run."""
    from rich.table import Table

    settings, modes = results["settings"], results["modes"]
    plots = plot_async(results, out_dir)
    table = Table(title=f"async NDN PS (policy {settings['policy']}, eta {settings['async_lr']:g},"
                        f" window {settings['staleness_window']}, "
                        f"C {settings.get('soft_sync') or 1})")
    for col in ("mode", "GPU", "slow-down", "pushes", "mean staleness", "max", "recoveries"):
        table.add_column(col, justify="right")
    for label, m in modes.items():
        for g in m["per_gpu"]:
            table.add_row(label, g["gpu"], f"{g['slowdown']:g}", str(g["pushes"]),
                          "-" if g["mean_staleness"] is None else f"{g['mean_staleness']:.2f}",
                          "-" if g["max_staleness"] is None else str(g["max_staleness"]),
                          str(g["recoveries"]))
    console.print(table)
    for label, m in modes.items():
        console.print(f"{label}: {m['pushes']}/{m['budget']} pushes applied in "
                      f"{m['duration_s']:.2f} s, final accuracy {m['final_accuracy']:.4f}, "
                      f"parameters equal at the GPUs: {'yes' if m['params_equal'] else 'NO'}, "
                      f"persistent-PIT faces at exit {m['ppit_faces_at_exit']}")
    print_written(console, out_dir, plots)


def plot_async(results: dict, out_dir: Path) -> list[Path]:
    """Test accuracy vs updates and vs time, one line per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, m in results["modes"].items():
        c = m["curve"]
        axes[0].plot([p["updates"] for p in c], [p["accuracy"] for p in c], label=label)
        axes[1].plot([p["time_s"] for p in c], [p["accuracy"] for p in c], label=label)
    for ax, x in zip(axes, ("updates (versions)", "time (s)"), strict=True):
        ax.set_xlabel(x)
        ax.set_ylabel("test accuracy")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "async_accuracy.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
