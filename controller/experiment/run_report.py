"""One page per run: ``results/<run>/report.md``, written with ``results.json``.

:func:`report_markdown` is pure: from the results document (the one ``results.json`` holds
at that moment) and the names of the pictures in the run folder it writes the settings, the
results table (one row per mode, as ``compare`` reads it: :func:`summarize_mode`), the
headline figures the method recorded (γ, PS bytes, accuracy), the plan's picture, every plot
and the provenance.  :func:`write_report` lists the folder's PNG files and writes the page
atomically; the runner calls it after every mode (``"complete": false`` until the end) and
once more after the plots are drawn, so the page always names every picture of the folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from controller.experiment.cross_traffic import FAIRNESS_HEADER, JAIN_NOTE, fairness_rows
from controller.experiment.prediction import link_table_rows, prediction_lines
from controller.experiment.records import format_stats, pace_lines, summarize_mode

__all__ = ["REPORT_NAME", "report_markdown", "write_report", "pictures"]

REPORT_NAME = "report.md"
PLAN_PICTURE = "plan.png"


def _cell(value: Any) -> str:
    """A table cell: numbers with a few digits, everything else as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 120 else text[:117] + "…"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return out


def _mode_rows(results: dict[str, Any]) -> list[list[Any]]:
    rows = []
    gamma = results.get("gamma") if isinstance(results.get("gamma"), dict) else None
    for name, mode in (results.get("modes") or {}).items():
        if not isinstance(mode, dict):
            continue
        s = summarize_mode(str(results.get("run", "")), str(results.get("method", "")), name,
                           mode, gamma if name == "ina" else None)
        rows.append([name, s.rounds, s.s_per_round, s.ps_bytes_per_round,
                     s.busiest_bytes_per_round, s.retransmissions, s.accuracy, s.exact])
    return rows


def _group_lines(results: dict[str, Any]) -> list[str]:
    """Methods that lay their results out per kind (async policies, cluster rules): one row
    per kind, mean ± std over seeds of every figure of its summary."""
    for key in ("policies", "rules"):
        groups = results.get(key)
        if not isinstance(groups, dict) or not groups:
            continue
        figures = list(dict.fromkeys(f for g in groups.values()
                                     for f in (g.get("summary") or {})))
        rows = [[kind, *(format_stats(g["summary"][f]) if f in (g.get("summary") or {})
                         else None for f in figures)] for kind, g in groups.items()]
        return [f"Per {key[:-1]}, mean ± std over seeds:", "", *_table([key[:-1], *figures], rows)]
    return []


def _job_lines(results: dict[str, Any]) -> list[str]:
    """One row per job and sync mode (the per-mode figures of ``jobs``), then Jain's
    fairness index."""
    jobs = results.get("jobs")
    if not isinstance(jobs, dict) or not jobs:
        return []
    rows = []

    def per_mode(job: dict[str, Any], key: str, mode: str) -> Any:
        v = job.get(key)
        return v.get(mode) if isinstance(v, dict) else None
    for name, job in jobs.items():
        if not isinstance(job, dict):
            continue
        gamma = job.get("gamma") or {}
        done = job.get("rounds_completed")
        for mode in (done if isinstance(done, dict) else {}):
            ina = mode == "ina"
            rows.append([name, mode, per_mode(job, "rounds_completed", mode),
                         job.get("exact_all_rounds"), per_mode(job, "time_per_round_s", mode),
                         per_mode(job, "ps_bytes", mode),
                         gamma.get("predicted") if ina else None,
                         gamma.get("measured") if ina else None,
                         gamma.get("ratio") if ina else None,
                         per_mode(job, "retransmissions", mode)])
    out = ["Per job and mode:", "",
           *_table(["job", "mode", "rounds", "exact", "s/round", "PS bytes/round",
                    "γ predicted", "γ measured", "measured/predicted", "retransmissions"],
                   rows)]
    if results.get("fairness") is not None:
        out += ["", f"Fairness (Jain's index of measured γ_j / w_j): "
                    f"{_cell(results.get('fairness'))}; planned "
                    f"{_cell(results.get('fairness_planned'))}"]
    return out


def _cross_lines(results: dict[str, Any]) -> list[str]:
    """``--cross-traffic``: each one's throughput, alone, and Jain's index per launch."""
    rows = fairness_rows(results)
    if not rows:
        return []
    return ["Beside other traffic:", "", *_table(FAIRNESS_HEADER, rows), "", JAIN_NOTE + "."]


def _headline(results: dict[str, Any]) -> list[str]:
    lines = []
    gamma = results.get("gamma")
    if isinstance(gamma, dict) and gamma.get("predicted") is not None:
        lines.append(f"- γ predicted {_cell(gamma.get('predicted'))}, measured "
                     f"{_cell(gamma.get('measured'))} {gamma.get('unit', '')} (ratio "
                     f"{_cell(gamma.get('ratio'))})")
    ps = results.get("ps_bytes")
    if isinstance(ps, dict) and ps.get("ina") and ps.get("ps_only"):
        lines.append(f"- bytes into the PS per round: INA {_cell(ps['ina'])}, PS-only "
                     f"{_cell(ps['ps_only'])} (×{ps['ps_only'] / ps['ina']:.2f})")
    acc = results.get("accuracy")
    if isinstance(acc, dict) and acc.get("final") is not None:
        lines.append(f"- final accuracy {_cell(acc.get('final'))}, single-process reference "
                     f"{_cell(acc.get('reference'))}")
    coll = {m: d["collisions"] for m, d in (results.get("modes") or {}).items()
            if isinstance(d, dict) and isinstance(d.get("collisions"), int)}
    if coll:
        lines.append("- contributions that reached the PS unaggregated (slot collisions, "
                     "fall-backs): " + ", ".join(f"{m} {n:,}" for m, n in coll.items()))
    if "exact_all_rounds" in results:
        lines.append(f"- exact sums in every round: {_cell(results['exact_all_rounds'])}")
    lines += [f"- {line}" for line in pace_lines(results)]
    lines += [f"- {line}" for line in prediction_lines(results)]
    return lines


def _provenance_lines(prov: dict[str, Any]) -> list[str]:
    if not isinstance(prov, dict) or not prov:
        return ["(none recorded)"]
    host = prov.get("host") or {}
    lines = [f"- command: `{' '.join(map(str, prov.get('command_line') or []))}`",
             f"- git commit {prov.get('git_commit') or '—'}"
             + (" (uncommitted changes)" if prov.get("git_dirty") else ""),
             f"- started {prov.get('started', '—')} on {host.get('name', '—')} "
             f"({host.get('cpus', '—')} CPUs, load {host.get('load_avg', '—')}), "
             f"Python {prov.get('python', '—')}"]
    if prov.get("wall_s") is not None:
        lines.append(f"- {_cell(prov['wall_s'])} s from start to results (load at the end "
                     f"{prov.get('load_avg_end', '—')})")
    packages = prov.get("packages") or {}
    if packages:
        lines.append("- packages: " + ", ".join(f"{k} {v}" for k, v in packages.items()))
    return lines


def report_markdown(results: dict[str, Any], pictures: list[str]) -> str:
    """The report page of ``results`` (a ``results.json`` document) whose folder holds the
    PNG files ``pictures`` (paths relative to the folder)."""
    name, method = results.get("run", "run"), results.get("method", "")
    done = bool(results.get("complete"))
    modes = list((results.get("modes") or {}).keys())
    out = [f"# Run {name}" + (f" ({method})" if method else ""), "",
           ("Complete." if done else "In progress: the modes that finished so far"
            + (f" ({', '.join(modes)})" if modes else "") + "."),
           "Every figure below is in [`results.json`](results.json).", ""]
    settings = results.get("settings") or {}
    out += ["## Settings", ""]
    if settings:
        out += _table(["setting", "value"], [[k, v] for k, v in settings.items()])
    else:
        out.append("(none recorded)")
    out += ["", "## Results", ""]
    rows = _mode_rows(results)
    if rows:
        out += _table(["mode", "rounds", "s/round", "PS bytes/round", "busiest link bytes/round",
                       "retransmissions", "final accuracy", "exact"], rows)
        out.append("")
    for part in (_group_lines(results), _job_lines(results), _cross_lines(results),
                 _headline(results)):
        if part:
            out += [*part, ""]
    if not rows and not any((_group_lines(results), _job_lines(results))):
        out += ["(no mode finished yet)", ""]
    links = link_table_rows(results)
    if links:
        out += ["## Links: the plan's load against the measured one", "",
                "The busiest directed links (measured), per round: the LP's load (share of "
                "the link), the bytes it puts there (load / γ × the gradient's frame bytes), "
                "the bytes measured, their ratio, and the measured share of the round the "
                "link was busy. Several jobs: the launch's links, once (its first job's row), "
                "over the whole launch: the LP's bytes are its joint load over the launch's "
                "time.", "",
                *_table(["mode", "link", "LP load", "LP bytes", "measured bytes",
                         "measured/LP", "utilisation"], links), ""]
    if PLAN_PICTURE in pictures:
        plan = results.get("plan") if isinstance(results.get("plan"), dict) else {}
        deployed = plan.get("deployed")
        out += ["## Plan", "",
                "Topology by layer; orange squares aggregate, dashed arrows go from a worker "
                "to where its gradient is summed, link width and colour are planned load "
                "(full plan: [`plan.json`](plan.json))."
                + (f" Deployed: {', '.join(deployed)}." if deployed else ""), "",
                f"![the plan]({PLAN_PICTURE})", ""]
    plots = [p for p in pictures if p != PLAN_PICTURE]
    out += ["## Plots", ""]
    if plots:
        for p in plots:
            out += [f"### {p}", "", f"![{p}]({p})", ""]
    else:
        out += ["(drawn when the run ends)", ""]
    out += ["## Provenance", "", *_provenance_lines(results.get("provenance") or {}), ""]
    return "\n".join(out)


def pictures(out_dir: Path) -> list[str]:
    """The PNG files under ``out_dir``, relative to it, the plan's first, then by name."""
    found = sorted(p.relative_to(out_dir).as_posix() for p in Path(out_dir).rglob("*.png"))
    return sorted(found, key=lambda p: (p != PLAN_PICTURE, p))


def write_report(out_dir: Path, results: dict[str, Any]) -> Path:
    """Write ``out_dir/report.md`` for ``results`` and the folder's pictures; returns it."""
    path = Path(out_dir) / REPORT_NAME
    text = report_markdown(results, pictures(Path(out_dir)))
    fd, tmp = tempfile.mkstemp(prefix=f".{REPORT_NAME}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; this is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
