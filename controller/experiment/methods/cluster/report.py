"""The table and plots of ``run --method cluster`` (:mod:`controller.experiment.methods.cluster`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.experiment.records import format_stats
from controller.experiment.report import group_table, plot_seed_curves

__all__ = ["COLOURS", "summary_table", "plot_results"]

COLOURS = {"contribution": "tab:green", "average": "tab:blue", "central": "tab:red"}


def summary_table(results: dict) -> Any:
    """Mean ± std over the seeds per rule: accuracy, times, busiest link measured and
    predicted, the ratio to the central PS and the check against the simulation."""
    s = results["settings"]
    ratio = results.get("busiest_link_vs_central", {})

    def stat(key: str, digits: int) -> Any:
        return lambda _rule, d: format_stats(d["summary"][key], digits)

    def matches(_rule: str, d: dict) -> str:
        match = [r["matches_simulation"] for r in d["runs"]]
        return "yes" if all(match) else ("no" if False in match else "—")
    return group_table(
        f"clustered PS {results['run']}: {len(s['nodes'])} nodes, {s['periods']} periods x "
        f"{s['batches_per_period']} batches, re-elect every {s['reelect_every']}, seeds "
        f"{s['seeds']} (mean±std)",
        "busiest link: measured bytes on the most loaded directed link per round (interface "
        "counters); predicted: payload of the message pattern.",
        "rule",
        [("final acc", stat("final_accuracy", 4)), ("run s", stat("duration_s", 2)),
         ("round s (median)", stat("round_time_s_median", 3)),
         ("busiest link B/round", stat("busiest_link_bytes_per_round", 0)),
         ("predicted B/round", stat("predicted_busiest_link_bytes_per_round", 0)),
         ("vs central", lambda rule, _d: f"{ratio[rule]:.2f}" if rule in ratio else "—"),
         ("= simulation", matches)],
        results["rules"])


def plot_results(results: dict, out_dir: Path) -> list[Path]:
    """Accuracy vs time and vs round (one line per seed, one colour per rule) and the
    busiest link's bytes per round (mean ± std over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = [plot_seed_curves(results["rules"], COLOURS, xkey, "accuracy", out_dir / fname,
                                xlabel=xlabel, ylabel="test accuracy (mean over nodes)",
                                title=f"accuracy vs {xlabel.split(' (')[0]} (one line per "
                                      "seed)", from_origin=True, marker="o")
               for xkey, xlabel, fname in (("time_s", "wall time (s)", "accuracy_vs_time.png"),
                                           ("round", "round (batches)", "accuracy_vs_round.png"))]
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    rules = list(results["rules"])
    for x, rule in enumerate(rules):
        m = results["rules"][rule]["summary"]
        ax.bar(x - 0.2, m["busiest_link_bytes_per_round"]["mean"], 0.4,
               yerr=m["busiest_link_bytes_per_round"]["std"], color=COLOURS.get(rule),
               label="measured" if x == 0 else None)
        ax.bar(x + 0.2, m["predicted_busiest_link_bytes_per_round"]["mean"], 0.4,
               color=COLOURS.get(rule), alpha=0.4, label="payload (predicted)" if x == 0 else None)
    ax.set_xticks(range(len(rules)), rules)
    ax.set_ylabel("bytes on the busiest link per round")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "busiest_link_bytes.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
