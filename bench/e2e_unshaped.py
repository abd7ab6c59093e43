"""End to end on unshaped links: ``make run ARGS="--bw 0"``, INA seconds per round and
gradient values aggregated per second (issue 26 item 4).

With ``--bw 0`` no link is shaped, so the round time is set by what the hosts and the
pyswitch processes cost, not by the network: this is the figure that a faster data path must
move.  The bench runs ``python -m controller run --bw 0`` (the make-run network: fat-tree k=4,
PS h0, 6 workers, budget 2, the digits MLP) as a user would, reads the run's
``results.json`` and prints, per mode:

- the median and mean seconds per round,
- **aggregated values/s** = P / median s/round, where P is the gradient's length in values
  (``grad_bytes`` / 4: int32 after quantization) — the aggregated vector delivered per second;
- **summed values/s** = P × W / median s/round — the worker values folded into sums per
  second (W workers each send P values a round).

With ``--path both`` the switches' two execution paths run side by side, alternating, each
``--pairs`` times: ``native`` (PYSWITCH_NATIVE=on: the pipeline compiled to C) and
``python`` (PYSWITCH_NATIVE=off), and the INA ratio python / native of each pair is printed.

Every round must be exact (the run checks each sum against the exact int32 sum); exit status
1 otherwise.  Needs root and Mininet; take the Mininet lock as ``make bench`` does:

    flock /tmp/insync-mininet.lock .venv/bin/python bench/e2e_unshaped.py [--rounds 30]
        [--modes ina,ps_only] [--hidden 32] [--path native|python|both] [--pairs 1]
        [--out results/e2e_unshaped]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VALUE_BYTES = 4  # results.json grad_bytes = 4 × values (int32, methods/ina/core.py)


def mode_figures(mode: dict[str, Any], workers: int) -> dict[str, float]:
    """The bench's figures for one mode of a results.json (pure: unit-tested)."""
    times = [r["time_s"] for r in mode["rounds"]]
    values = mode["grad_bytes"] // VALUE_BYTES
    med = statistics.median(times)
    return {"rounds": len(times), "median_s": med, "mean_s": statistics.fmean(times),
            "values": values, "aggregated_per_s": values / med,
            "summed_per_s": values * workers / med,
            "exact": all(r["exact"] for r in mode["rounds"])}


def report(results: dict[str, Any], wall_s: float) -> tuple[str, bool]:
    """The printed table and whether every round of every mode was exact."""
    s = results["settings"]
    workers = int(s["workers"])
    lines = [f"end to end, unshaped links (--bw 0): {s['topo']}, PS {s['ps']}, "
             f"{workers} workers, budget {s['budget']}, {s['rounds']} rounds, "
             f"target {s['target']}; wall {wall_s:.0f} s; Python {platform.python_version()}, "
             f"load average {os.getloadavg()[0]:.2f}",
             f"{'mode':8} {'rounds':>6} {'median s/round':>15} {'mean s/round':>13} "
             f"{'values':>7} {'aggregated values/s':>20} {'summed values/s':>16} exact"]
    ok = True
    for name, mode in results["modes"].items():
        f = mode_figures(mode, workers)
        ok = ok and bool(f["exact"])
        lines.append(f"{name:8} {f['rounds']:>6} {f['median_s']:>15.4f} {f['mean_s']:>13.4f} "
                     f"{f['values']:>7,} {f['aggregated_per_s']:>20,.0f} "
                     f"{f['summed_per_s']:>16,.0f} {'yes' if f['exact'] else 'NO'}")
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30, help="rounds per mode (default 30)")
    ap.add_argument("--modes", default="ina,ps_only",
                    help="modes to run, comma-separated (default ina,ps_only)")
    ap.add_argument("--hidden", type=int, default=None,
                    help="MLP hidden units (sets the gradient size; default run's)")
    ap.add_argument("--out", default="results/e2e_unshaped", help="results folder")
    ap.add_argument("--path", choices=["native", "python", "both"], default="native",
                    help="the switches' execution path (PYSWITCH_NATIVE); both = side by side")
    ap.add_argument("--pairs", type=int, default=1, help="runs per path (alternating)")
    args = ap.parse_args(argv)
    paths = ["python", "native"] if args.path == "both" else [args.path]
    ok_all = True
    ina: dict[str, list[float]] = {p: [] for p in paths}
    for pair in range(args.pairs):
        for path in paths:
            res = run_once(args, path)
            if res is None:
                return 1
            text, ok = res[0], res[1]
            print(f"-- {path} path (PYSWITCH_NATIVE={'on' if path == 'native' else 'off'}), "
                  f"run {pair + 1} of {args.pairs}")
            print(text)
            ok_all = ok_all and ok
            if "ina" in res[2]:
                ina[path].append(res[2]["ina"])
        if len(paths) == 2 and len(ina["python"]) == len(ina["native"]) == pair + 1:
            print(f"pair {pair + 1}: INA s/round python / native = "
                  f"{ina['python'][-1] / ina['native'][-1]:.2f}")
    return 0 if ok_all else 1


def run_once(args: argparse.Namespace, path: str) -> tuple[str, bool, dict] | None:
    """One ``controller run --bw 0`` with the switches on `path`: (table, exact, INA and
    PS-only median s/round), or None when the run failed."""
    name = time.strftime("%Y%m%d-%H%M%S") + f"-{path}"
    cmd = [sys.executable, "-m", "controller", "run", "--bw", "0", "--rounds",
           str(args.rounds), "--out", args.out, "--name", name]
    if args.hidden is not None:
        cmd += ["--hidden", str(args.hidden)]
    if args.modes != "ina,ps_only":
        cmd += ["--modes", args.modes]
    env = dict(os.environ, PYSWITCH_NATIVE="on" if path == "native" else "off")
    t0 = time.monotonic()
    rc = subprocess.run(cmd, cwd=ROOT, check=False, env=env).returncode
    wall = time.monotonic() - t0
    out = ROOT / args.out / name / "results.json"
    if rc != 0 or not out.is_file():
        print(f"e2e_unshaped: the run failed (exit {rc}); see {out.parent}", file=sys.stderr)
        return None
    results = json.loads(out.read_text())
    text, ok = report(results, wall)
    workers = int(results["settings"]["workers"])
    meds = {m: mode_figures(v, workers)["median_s"] for m, v in results["modes"].items()}
    return text, ok, meds


if __name__ == "__main__":
    sys.exit(main())
