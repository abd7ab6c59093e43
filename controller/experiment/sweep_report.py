"""The summary of a budget sweep (``simulate --budgets``): one row per run, a table and a
figure of γ predicted and measured per budget (one line per planner), written beside the
run folders as ``<name>-sweep.md`` and ``<name>-sweep.png`` (docs/simulate.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.experiment.prediction import links_within

__all__ = ["sweep_row", "sweep_markdown", "plot_sweep"]


def sweep_row(budget: int, run: str, doc: dict[str, Any]) -> dict[str, Any]:
    """One run of a sweep (pure): its folder, planner, γ predicted and measured (the jobs'
    sums with several jobs), exactness, and for one job the round predicted and measured
    and what bound it (``doc["prediction"]``), and how many of the links the LP loads carry
    its bytes within 10 % (:func:`~controller.experiment.prediction.links_within`)."""
    if "jobs" in doc:
        js = doc["jobs"].values()
        predicted = sum(j["gamma"]["predicted"] for j in js)
        measured = sum(j["gamma"]["measured"] or 0 for j in js)
        ratio = measured / predicted if predicted else None
    else:
        g = doc["gamma"]
        predicted, measured, ratio = g["predicted"], g["measured"], g["ratio"]
    row = {"budget": budget, "run": run, "planner": (doc.get("settings") or {}).get("planner"),
           "predicted": predicted, "measured": measured, "ratio": ratio,
           "exact": bool(doc["exact_all_rounds"])}
    p = (doc.get("prediction") or {}).get("ina")
    if p:
        row.update({"s_per_round_predicted": p["round"]["predicted_s"],
                    "s_per_round_measured": p["round"]["measured_s"],
                    "round_error": p["round"]["error"], "bound": p["bound"]["resource"],
                    "bound_text": p["bound"]["text"]})
        row["links_loaded"], row["links_within"] = links_within(p.get("links") or [])
    return row


def _f(v: Any, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _links(r: dict[str, Any]) -> str:
    """``within/loaded`` links of a row (— without a per-link comparison)."""
    return f"{r['links_within']}/{r['links_loaded']}" if r.get("links_loaded") else "—"


def sweep_markdown(name: str, rows: list[dict[str, Any]], settings: dict[str, Any],
                   figure: str | None) -> str:
    """The sweep's report page (pure): settings, the table, the figure, each bound."""
    out = [f"# Sweep {name}", "",
           "One simulated run per budget (each folder has its own `report.md`); γ in Mbit/s "
           "of gradient frames, the round in seconds (median over rounds).", ""]
    keys = ("topo", "ps", "workers", "planner", "rounds", "bw", "window", "timeout", "loss",
            "no_train", "jobs")
    shown = [f"{k} {settings[k]}" for k in keys if settings.get(k) is not None]
    if shown:
        out += ["Settings: " + ", ".join(shown) + ".", ""]
    out += ["| budget | planner | γ predicted | γ measured | ratio | s/round predicted | "
            "s/round measured | error | bound | links within 10 % of the LP | exact | run |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['budget']} | {r.get('planner') or '—'} | {_f(r['predicted'], '.4g')} | "
                   f"{_f(r['measured'], '.4g')} | {_f(r['ratio'], '.3f')} | "
                   f"{_f(r.get('s_per_round_predicted'), '.4f')} | "
                   f"{_f(r.get('s_per_round_measured'), '.4f')} | "
                   f"{_f(r.get('round_error'), '+.1%')} | {r.get('bound') or '—'} | "
                   f"{_links(r)} | "
                   f"{'yes' if r['exact'] else 'NO'} | [{r['run']}]({r['run']}/report.md) |")
    out.append("")
    if figure:
        out += [f"![γ predicted and measured per budget]({figure})", ""]
    bounds = [r for r in rows if r.get("bound_text")]
    if bounds:
        out += ["What bound each run:", ""]
        out += [f"- budget {r['budget']}: {r['bound_text']}" for r in bounds]
        out.append("")
    return "\n".join(out)


def plot_sweep(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """γ predicted (dashed) and measured (solid) against the budget, one colour per
    planner; None when fewer than one row has a measurement."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any(r["measured"] is not None for r in rows):
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    planners = sorted({r.get("planner") or "—" for r in rows})
    for i, pl in enumerate(planners):
        rs = sorted((r for r in rows if (r.get("planner") or "—") == pl),
                    key=lambda r: r["budget"])
        c = f"C{i}"
        ax.plot([r["budget"] for r in rs], [r["predicted"] for r in rs], "--o", color=c,
                label=f"{pl}: predicted (LP)")
        ax.plot([r["budget"] for r in rs], [r["measured"] or 0 for r in rs], "-s", color=c,
                label=f"{pl}: measured")
    ax.set_xlabel("budget M (programmable switches)")
    ax.set_ylabel("γ (Mbit/s of gradient frames)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
