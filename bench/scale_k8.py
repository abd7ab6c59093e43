#!/usr/bin/env python3
"""Fat-tree k=8 on one machine (docs/scale.md): the target runs and their table.

    python bench/scale_k8.py --run            # the runs of docs/scale.md §2 (root, Mininet;
                                              #   about 20 min), then their table
    python bench/scale_k8.py RUN_FOLDER...    # the table of finished runs
    python bench/scale_k8.py --smoke          # the table of a hand-made results document

The runs: k=8 with 64 workers (INA and PS-only, ``run``'s default comparison) and k=8 with
4 jobs of 16 workers each, on links of ``--bw`` Mbit/s.  Each row of the table says, from
the run's own results: wall time from start to results, median s/round, bytes into the PS
per round, γ predicted / measured (median round, and from the last worker's start), whether
every round was exact, Jain's fairness (several jobs), and what paced it (cores or links).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.experiment.records import pace_by_kind  # noqa: E402

HEADER = ("| run | mode | wall to results | s/round (median) | PS bytes/round | γ predicted "
          "| γ measured (ratio) | from last start (ratio) | exact | fairness | pace |")


def _f(v: Any, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _median(rounds: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def table_rows(name: str, doc: dict[str, Any]) -> list[str]:
    """Markdown rows of one results document: one per mode (one job), or per sync mode over
    every job (several jobs), never per worker."""
    wall = (doc.get("provenance") or {}).get("wall_s")
    paces = pace_by_kind(doc.get("modes") or {})
    rows = []
    jobs = doc.get("jobs")
    if isinstance(jobs, dict) and jobs:
        kinds: dict[str, list[str]] = {}
        for label in doc["modes"]:
            kinds.setdefault(label.split("/", 1)[1] if "/" in label and
                             not label.startswith("alone/") else "alone", []).append(label)
        for kind, labels in kinds.items():
            rounds = [r for lb in labels for r in doc["modes"][lb]["rounds"]]
            ps = [doc["modes"][lb]["rounds"][0]["ps_rx_bytes"] for lb in labels
                  if doc["modes"][lb]["rounds"]]
            g = [j["gamma"] for j in jobs.values()] if kind == "ina" else []
            pred = statistics.median([x["predicted"] for x in g]) if g else None
            meas = [x["measured"] for x in g if x.get("measured") is not None]
            ratio = [x["ratio"] for x in g if x.get("ratio") is not None]
            p = paces.get(kind, {})
            rows.append(
                f"| {name} | {kind} ({len(labels)} jobs) | {_f(wall, '.0f')} s | "
                f"{_f(_median(rounds, 'time_s'), '.2f')} | "
                f"{_f(statistics.median(ps) if ps else None, ',.0f')} per job | "
                f"{_f(pred, '.4f')} (median job) | "
                f"{_f(statistics.median(meas) if meas else None, '.4f')} "
                f"({_f(statistics.median(ratio) if ratio else None, '.2f')}) | — | "
                f"{'yes' if all(r['exact'] for r in rounds) else 'NO'} | "
                f"{_f(doc.get('fairness'), '.3f') if kind == 'ina' else '—'} | "
                f"{p.get('binding') or '—'} |")
        return rows
    gamma = doc.get("gamma") or {}
    for mode, rec in (doc.get("modes") or {}).items():
        rounds = rec.get("rounds") or []
        ina = mode == "ina"
        p = paces.get(mode, {})
        rows.append(
            f"| {name} | {mode} | {_f(wall, '.0f')} s | {_f(_median(rounds, 'time_s'), '.2f')} | "
            f"{_f(rounds[0]['ps_rx_bytes'] if rounds else None, ',.0f')} | "
            f"{_f(gamma.get('predicted') if ina else None, '.4f')} | "
            f"{_f(gamma.get('measured') if ina else None, '.4f')} "
            f"({_f(gamma.get('ratio') if ina else None, '.2f')}) | "
            f"{_f(gamma.get('measured_from_last_start') if ina else None, '.4f')} "
            f"({_f(gamma.get('ratio_from_last_start') if ina else None, '.2f')}) | "
            f"{'yes' if rounds and all(r['exact'] for r in rounds) else 'NO'} | — | "
            f"{p.get('binding') or '—'} |")
    return rows


def _smoke_doc() -> dict[str, Any]:
    r = {"time_s": 2.0, "start_skew_s": 0.1, "ps_rx_bytes": 1000.0, "retransmissions": 0,
         "exact": True}
    cores = {"rounds_busy_cores": 1.0, "rounds_machine_busy_cores": 1.2, "cpus": 2}
    return {"provenance": {"wall_s": 300.0},
            "gamma": {"predicted": 0.1, "measured": 0.08, "ratio": 0.8,
                      "measured_from_last_start": 0.09, "ratio_from_last_start": 0.9},
            "modes": {"ina": {"rounds": [r, r], "cores": cores},
                      "ps_only": {"rounds": [r], "cores": cores}}}


RUNS = (
    ("k8-w64", ["--workers", "64"]),
    ("k8-jobs4x16", ["--jobs", "JOBS_FILE"]),
)


def _jobs_file(out: Path) -> Path:
    """4 jobs of 16 workers, hosts dealt in turn as ``--jobs N`` deals them (job k: PS
    h<k>, workers h<k+4>, h<k+8>, …, h<k+64>)."""
    path = out / "jobs4x16.json"
    jobs = [{"name": f"job{k + 1}", "ps": f"h{k}",
             "workers": [f"h{k + 4 * i}" for i in range(1, 17)]} for k in range(4)]
    path.write_text(json.dumps(jobs) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", help="finished run folders")
    ap.add_argument("--run", action="store_true", help="make the runs first (root, Mininet)")
    ap.add_argument("--smoke", action="store_true", help="table of a hand-made document")
    ap.add_argument("--out", default="results", help="results folder for --run")
    ap.add_argument("--bw", default="0.1", help="link rate, Mbit/s (default 0.1)")
    ap.add_argument("--rounds", default="3")
    a = ap.parse_args(argv)
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    if a.smoke:
        for row in table_rows("smoke", _smoke_doc()):
            print(row)
        return 0
    folders = [Path(r) for r in a.runs]
    if a.run:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, extra in RUNS:
            extra = [str(_jobs_file(out)) if x == "JOBS_FILE" else x for x in extra]
            cmd = [sys.executable, "-m", "controller", "run", "--topo", "fattree:8",
                   "--budget", "4", "--rounds", a.rounds, "--bw", a.bw, "--timeout", "20",
                   "--worker-timeout", "120", "--round-timeout", "300", *extra,
                   "--out", str(out), "--name", name]
            print(" ".join(cmd[1:]), file=sys.stderr)
            subprocess.run(cmd, cwd=ROOT, check=False)
            folders.append(out / name)
    for folder in folders:
        doc = json.loads((folder / "results.json").read_text())
        for row in table_rows(folder.name, doc):
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
