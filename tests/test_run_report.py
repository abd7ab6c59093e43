"""``report.md``: one page per run, written with ``results.json`` after every mode and again
with the plots; it links every picture of the run folder."""

from __future__ import annotations

import argparse
import io
import re

import pytest
from rich.console import Console

from controller.experiment.report import plot_modes
from controller.experiment.run_report import pictures, report_markdown
from controller.experiment.runner import Method, Run, execute


def _mode(t: float) -> dict:
    return {"rounds": [{"time_s": t, "ps_rx_bytes": 1000.0 * t, "busiest_link_bytes": 3000.0,
                        "retransmissions": 2, "accuracy": 0.5 + 0.1 * i, "exact": True}
                       for i in range(3)], "grad_bytes": 40}


class TwoModes(Method):
    """Two modes; draws the standard plots and a plan picture; may stop after the first."""

    name = "fake"

    def __init__(self, args: argparse.Namespace, stop: bool = False) -> None:
        super().__init__(args)
        self.stop = stop

    def prepare(self, run: Run) -> None:
        run.settings = {"rounds": 3, "topo": "fattree:4"}
        run.out_dir.mkdir(parents=True, exist_ok=True)
        (run.out_dir / "plan.png").write_bytes(b"\x89PNG\r\n\x1a\n")

    def execute(self, run: Run) -> None:
        run.record("ina", _mode(0.2))
        self.after_first = (run.out_dir / "report.md").read_text()
        if self.stop:
            raise KeyboardInterrupt
        run.record("ps_only", _mode(0.7))

    def results(self, run: Run) -> dict:
        return {**super().results(run), "gamma": {"predicted": 0.75, "measured": 0.5,
                                                  "ratio": 0.667, "unit": "Mbit/s"}}


def _args(tmp_path) -> argparse.Namespace:
    return argparse.Namespace(out=str(tmp_path), name="r", seed=0, repeats=1)


def _links(text: str) -> set[str]:
    return set(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text))


def test_the_report_names_every_picture_of_the_run_folder(tmp_path):
    method = TwoModes(_args(tmp_path))
    execute(method, console=Console(file=io.StringIO()), argv=["python", "-m", "controller",
                                                               "run"])
    folder = tmp_path / "r"
    text = (folder / "report.md").read_text()
    pngs = {p.relative_to(folder).as_posix() for p in folder.rglob("*.png")}
    assert {"plan.png", "time_per_round.png", "accuracy.png"} <= pngs
    assert _links(text) == pngs
    assert text.startswith("# Run r (fake)") and "Complete." in text
    # the table: one row per mode, with the figures of its rounds
    assert re.search(r"\| ina \| 3 \| 0\.2 \| 200 \| 3,000 \| 6 \| 0\.7 \| yes \|", text)
    assert re.search(r"\| ps_only \| 3 \| 0\.7 \| 700 \|", text)
    assert "| topo | fattree:4 |" in text
    assert "γ predicted 0.75, measured 0.5 Mbit/s" in text
    assert "command: `python -m controller run`" in text
    # after the first mode, already a page: that mode, no plots yet, marked unfinished
    first = method.after_first
    assert "In progress" in first and "| ina |" in first and "| ps_only |" not in first
    assert _links(first) == {"plan.png"}


def test_a_stopped_run_keeps_a_report_of_what_finished(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        execute(TwoModes(_args(tmp_path), stop=True), console=Console(file=io.StringIO()))
    text = (tmp_path / "r" / "report.md").read_text()
    assert "In progress: the modes that finished so far (ina)." in text
    assert not list((tmp_path / "r").glob(".report.md.*"))  # no temporary file left


def test_pictures_in_subfolders_are_named_plan_first(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("z.png", "plan.png", "sub/a.png"):
        (tmp_path / name).write_bytes(b"")
    assert pictures(tmp_path) == ["plan.png", "sub/a.png", "z.png"]
    text = report_markdown({"run": "x", "method": "m", "modes": {}}, pictures(tmp_path))
    assert _links(text) == {"plan.png", "sub/a.png", "z.png"}
    assert "(no mode finished yet)" in text


def test_grouped_results_get_a_row_per_kind(tmp_path):
    stat = {"mean": 0.9, "std": 0.01, "n": 3, "of": 3}
    doc = {"run": "x", "method": "async", "policies": {
        "sigma": {"summary": {"final_accuracy": stat}, "runs": []}}}
    text = report_markdown(doc, [])
    assert "| sigma | 0.900±0.010 |" in text


def test_plot_modes_pictures_are_what_the_report_links(tmp_path):
    written = plot_modes({"ina": _mode(0.2)}, tmp_path)
    assert {p.name for p in written} == set(pictures(tmp_path))


def test_fallbacks_at_the_ps_are_named():
    doc = {"run": "x", "method": "ina", "modes": {"ina": {**_mode(0.2), "collisions": 1234}}}
    assert "(slot collisions, fall-backs): ina 1,234" in report_markdown(doc, [])
