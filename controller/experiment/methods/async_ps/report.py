"""The table and plots of ``run --method async`` (:mod:`controller.experiment.methods.async_ps`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from controller.experiment.records import format_stats, seed_stats
from controller.experiment.report import group_table, plot_seed_curves

__all__ = ["COLOURS", "summary_table", "plot_results"]

COLOURS = {"async": "tab:red", "sigma": "tab:blue", "kappa": "tab:green"}


def summary_table(results: dict) -> Any:
    """Mean ± std over the seeds per policy: accuracy, loss, time to the target, variances."""
    s = results["settings"]
    pol = results["policies"]
    sig = seed_stats([r["mean_sigma"] for d in pol.values() for r in d["runs"]])
    dur = seed_stats([r["duration_s"] for d in pol.values() for r in d["runs"]])
    target = f"{s['target_acc']:g}"

    def stat(key: str, digits: int = 3, sci: bool = False) -> Any:
        return lambda _p, d: format_stats(d["summary"][key], digits, sci=sci)
    return group_table(
        f"async PS {results['run']}: {len(s['learners'])} learners, η={s['lr']:g}, "
        f"N={s['staleness_window']}, C={s['soft_sync']}, seeds {s['seeds']} (mean±std)",
        f"t/upd→{target}: wall time / PS updates until the test accuracy first reaches "
        f"{target}; var: variance over the last quarter of the run. Mean staleness σ "
        f"{format_stats(sig, 2)}, run {format_stats(dur, 1)} s.",
        "policy",
        [("final acc", stat("final_accuracy", 4)), ("test loss", stat("final_loss")),
         (f"t→{target} s", stat("time_to_target_s", 2)),
         (f"upd→{target}", stat("updates_to_target", 0)),
         ("var test loss", stat("test_loss_variance_last", sci=True)),
         ("var train loss", stat("train_loss_variance_last", sci=True))],
        pol)


def plot_results(results: dict, out_dir: Path) -> list[Path]:
    """accuracy/loss vs time/updates (one line per seed) and staleness histograms."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for metric in ("accuracy", "loss"):
        for xkey, xlabel in (("time_s", "wall time (s)"), ("updates", "PS updates")):
            name = f"{metric}_vs_{'time' if xkey == 'time_s' else 'updates'}.png"
            written.append(plot_seed_curves(
                results["policies"], COLOURS, xkey, metric, out_dir / name, xlabel=xlabel,
                ylabel=f"test {metric}", log=metric == "loss",
                title=f"test {metric} vs {xlabel.split(' (')[0]} (one line per seed)"))
    policies = list(results["policies"])
    hosts = results["settings"]["learners"]
    fig, axes = plt.subplots(1, len(policies), figsize=(4.2 * len(policies), 3.6),
                             sharey=True, squeeze=False)
    for ax, p in zip(axes[0], policies, strict=True):
        run = results["policies"][p]["runs"][0]
        for ln in run["learners"]:
            h = {int(x): c for x, c in ln["staleness_histogram"].items()}
            if not h:
                continue
            top = max(h)
            ax.stairs([h.get(x, 0) for x in range(1, top + 1)], np.arange(0.5, top + 1),
                      lw=1.3, label=f"{hosts[ln['learner']]} ×{ln['slowdown']:g}")
        ax.set_title(f"{p} (seed {run['seed']})", fontsize=10)
        ax.set_xlabel("staleness σ")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("pushes")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "staleness_histograms.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
