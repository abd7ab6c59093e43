"""The sweep's report (controller/experiment/sweep_report.py): table, figure, bounds."""

from pathlib import Path

from controller.experiment.sweep_report import plot_sweep, sweep_markdown, sweep_row


def _doc(budget: int, measured: float) -> dict:
    return {"settings": {"planner": "greedy"}, "exact_all_rounds": True,
            "gamma": {"predicted": 0.4 + 0.1 * budget, "measured": measured,
                      "ratio": measured / (0.4 + 0.1 * budget)},
            "prediction": {"ina": {"round": {"predicted_s": 0.2, "measured_s": 0.22,
                                             "error": 0.1},
                                   "bound": {"resource": "link", "text": "link: x at 95%"},
                                   # one loaded link within 10 % of the LP, one 20 % over,
                                   # one the LP does not load
                                   "links": [{"lp_load": 1.0, "ratio": 1.05},
                                             {"lp_load": 0.5, "ratio": 1.2},
                                             {"lp_load": 0.0, "ratio": None}]}}}


def test_the_sweep_report_has_a_row_per_budget_and_the_figure(tmp_path: Path):
    rows = [sweep_row(b, f"s-b{b}", _doc(b, m)) for b, m in ((0, 0.38), (2, 0.5))]
    assert rows[1]["ratio"] == 0.5 / (0.4 + 0.2) and rows[1]["bound"] == "link"
    fig = plot_sweep(rows, tmp_path / "s-sweep.png")
    assert fig is not None and fig.stat().st_size > 1000
    page = sweep_markdown("s", rows, {"topo": "fattree:4", "window": 16}, fig.name)
    assert "Settings: topo fattree:4, window 16." in page
    assert (rows[1]["links_loaded"], rows[1]["links_within"]) == (2, 1)
    assert ("| 2 | greedy | 0.6 | 0.5 | 0.833 | 0.2000 | 0.2200 | +10.0% | link | 1/2 | yes | "
            "[s-b2](s-b2/report.md) |") in page
    assert "![γ predicted and measured per budget](s-sweep.png)" in page
    assert "- budget 0: link: x at 95%" in page
