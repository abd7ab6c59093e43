"""Several INA training jobs at once (``run --jobs FILE|N``, docs/design.md §3.10): their
results.  The run itself is the one INA engine's (:mod:`controller.experiment.methods.ina.engine`),
with one tenant per job of the jobs file; what is added here, pure but for the plot:

* ``results.json``: ``jobs`` (per job: ``exact_all_rounds``, ``ps_bytes``, ``gamma``
  {predicted, measured, alone}, ``time_per_round_s``, ``collisions``, ``accuracy``, …) and
  ``fairness``, Jain's index of the measured γ_j / w_j (:func:`jobs_summary`);
* the table of one row per job and mode, and ``jobs_gamma.png``.

Mode records are kept under ``modes`` as ``<job>/<mode>`` (and ``alone/<job>``), so
``compare`` and ``--repeats`` show one row per job and mode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from controller.experiment.cross_traffic import goodput_Mbps
from controller.experiment.methods.ina.core import Settings
from controller.experiment.methods.ina.engine import ALONE
from controller.experiment.methods.ina.tenants import Tenant
from controller.experiment.prediction import prediction_lines
from controller.experiment.records import pace_lines
from controller.plan.lp_jobs import jain
from controller.plan.types import Plan
from workers.common.model import train_synchronous
from workers.ina.wire import FRAME_BYTES

__all__ = ["jobs_summary", "references", "print_jobs", "plot_jobs_gamma"]



# ------------------------------------------------------------------ results (pure)


def _gamma_measured(rounds: list[dict], n_chunks: int) -> float | None:
    """Gradient frames synchronized per second, Mbit/s, median round (as one job's γ)."""
    if not rounds:
        return None
    return float(np.median([n_chunks * FRAME_BYTES * 8 / r["time_s"] / 1e6 for r in rounds]))


def jobs_summary(plan: Plan, tenants: list[Tenant], modes: dict[str, dict],
                 references: dict[str, float], bw: float | None) -> dict[str, Any]:
    """``jobs`` and ``fairness`` of results.json (pure): per job and mode, from the mode
    records ``modes["<job>/<mode>"]`` (and ``alone/<job>``)."""
    jobs: dict[str, Any] = {}
    measured_per_weight = []
    for t in tenants:
        mine = {label.split("/", 1)[1]: rec for label, rec in modes.items()
                if label.startswith(f"{t.name}/")}
        alone = modes.get(f"{ALONE}/{t.name}")

        def per_mode(f: Any, mine: dict = mine) -> dict[str, Any]:
            return {m: f(rec) for m, rec in mine.items()}

        ina = mine.get("ina")
        measured = _gamma_measured(ina["rounds"], t.n_chunks) if ina else None
        alone_measured = _gamma_measured(alone["rounds"], t.n_chunks) if alone else None
        predicted = ina["plan_gamma"] if ina and "plan_gamma" in ina else t.plan.job.gamma
        unit = bw is not None  # with --bw the LP's γ is in Mbit/s, as measured
        jobs[t.name] = {
            "ps": t.ps, "workers": t.workers, "weight": t.weight, "job_ids": {
                m: t.job_id(m) for m in mine},
            "exact_all_rounds": all(r["exact"] for rec in [*mine.values(), alone or {}]
                                    for r in rec.get("rounds", [])),
            "rounds_completed": per_mode(lambda rec: len(rec["rounds"])),
            "stopped": {m: rec["stopped"] for m, rec in mine.items() if "stopped" in rec},
            "ps_bytes": per_mode(lambda rec: (rec["rounds"][0]["ps_rx_bytes"]
                                              if rec["rounds"] else None)),
            "time_per_round_s": per_mode(lambda rec: (float(np.mean(
                [r["time_s"] for r in rec["rounds"]])) if rec["rounds"] else None)),
            # gradient bytes the job synchronized per second, Mbit/s (mean round)
            "goodput_Mbps": per_mode(goodput_Mbps),
            "retransmissions": per_mode(lambda rec: sum(r["retransmissions"]
                                                        for r in rec["rounds"])),
            "collisions": per_mode(lambda rec: rec.get("collisions")),
            "gamma": {
                "predicted": predicted, "measured": measured,
                "ratio": measured / predicted if unit and measured and predicted else None,
                "predicted_alone": t.plan.job.gamma_alone,
                "measured_alone": alone_measured,
                "unit": "Mbit/s of gradient frames" if unit else "link-capacity units",
            },
            "accuracy": {"final": (ina or next(iter(mine.values()), {})).get(
                "rounds", [{}])[-1].get("accuracy") if mine else None,
                "reference": references.get(t.name)},
        }
        if measured is not None:
            measured_per_weight.append(measured / t.weight)
    return {
        "jobs": jobs,
        # Jain's index of the measured γ_j / w_j over the jobs that ran the ina mode
        "fairness": jain(measured_per_weight) if measured_per_weight else None,
        "fairness_planned": plan.fairness,
    }


# ------------------------------------------------------------------ the whole run


def references(tenants: list[Tenant], s: Settings, seed: int) -> dict[str, float]:
    """Each job's accuracy trained in one process (the exactness reference)."""
    return {t.name: train_synchronous(t.train(s, seed)).final_accuracy for t in tenants}


def print_jobs(results: dict[str, Any], console: Any) -> None:
    """The table of a multi-job run: one row per job and mode, then the fairness."""
    from rich.table import Table

    from controller.experiment.report import print_table

    table = Table(title=f"{len(results['jobs'])} jobs at once "
                        f"(slot policy {results['settings']['slot_policy']})")
    for col in ("job", "mode", "rounds", "s/round", "PS B/round", "γ plan", "γ meas",
                "γ alone", "fallbacks", "retx", "accuracy", "exact"):
        table.add_column(col, justify="left" if col in ("job", "mode") else "right")

    def f(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)
    for name, j in results["jobs"].items():
        g = j["gamma"]
        for m, n in j["rounds_completed"].items():
            table.add_row(name, m, str(n), f(j["time_per_round_s"][m], ".3f"),
                          f(j["ps_bytes"][m], ",.0f"),
                          f(g["predicted"], ".3f") if m == "ina" else "",
                          f(g["measured"], ".3f") if m == "ina" else "",
                          f(g["measured_alone"], ".3f") if m == "ina" else "",
                          f(j["collisions"][m], "d"), str(j["retransmissions"][m]),
                          f(j["accuracy"]["final"], ".4f") if m == "ina" else "",
                          "stopped" if m in j["stopped"] else
                          ("yes" if j["exact_all_rounds"] else "NO"))
    print_table(console, table, 120)
    fair = results.get("fairness")
    console.print(f"fairness (Jain's index of measured γ_j / w_j): "
                  f"{'-' if fair is None else format(fair, '.3f')}; planned "
                  f"{f(results.get('fairness_planned'), '.3f')}")
    for line in pace_lines(results):  # one per sync mode, over every job
        console.print(line)
    for line in prediction_lines(results):  # per job: its round predicted, what bound it
        console.print(line)


def plot_jobs_gamma(results: dict[str, Any], out_dir: Path) -> Path | None:
    """``jobs_gamma.png``: per job, γ planned, measured with the others, and measured alone
    (bars), with the settings in the title."""
    import matplotlib.pyplot as plt

    jobs = results.get("jobs") or {}
    if not jobs:
        return None
    names = list(jobs)
    series = [("planned", [jobs[n]["gamma"]["predicted"] for n in names]),
              ("measured, all jobs", [jobs[n]["gamma"]["measured"] for n in names]),
              ("measured, alone", [jobs[n]["gamma"]["measured_alone"] for n in names])]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / len(series)
    for i, (label, ys) in enumerate(series):
        xs = [k + (i - 1) * width for k in range(len(names))]
        ax.bar(xs, [y or 0.0 for y in ys], width, label=label)
    st = results["settings"]
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(f"γ ({next(iter(jobs.values()))['gamma']['unit']})", fontsize=8)
    ax.set_title(f"{st['topo']}, {len(names)} jobs, budget {st['budget']}, "
                 f"{st['slot_policy']} slots, loss {st['loss']:g}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(out_dir) / "jobs_gamma.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
