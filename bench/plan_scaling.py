#!/usr/bin/env python3
"""Planner scaling: greedy placement time and γ on fat-trees (docs/design.md §3.4 benchmark target).

Every host but the PS (h0) is a worker.  For each (k, budget) the full greedy runs from
scratch (FastLP: twin-merged workers, pruned candidates, verified-symmetry orbits, HiGHS on a
numpy-assembled matrix) and the table shows γ, the ToR-only and PS-only γ, the time, and the
number of LPs solved.  The process is pinned to one CPU core (``os.sched_setaffinity``).

    python bench/plan_scaling.py                      # k = 4 8 12 16, budgets 4 8 16
    python bench/plan_scaling.py --k 16 --budget 16
    python bench/plan_scaling.py --k 4 8 --budget 4 --compare-plain   # vs the plain greedy

``--compare-plain`` also runs the unoptimised greedy (PuLP, one variable per worker, every
candidate solved) and checks it picks the same switches with the same γ.

``--side-by-side`` (issue 41) runs the previous greedy (exhaustive: every candidate's LP,
``greedy(lazy=False)``) and the lazy one (controller/plan/lazy.py) on the same job and
prints both times, LP counts and γ, and whether S and γ agree (γ within 1e-6).
``--workers N`` takes the first N hosts besides the PS; ``--result-load`` counts the RESULT
tree as ``plan`` does by default.

    python bench/plan_scaling.py --k 8 --workers 32 --budget 4 --result-load --side-by-side

``--previous`` (issue 41, second part) runs the planner as it was before the RESULT-aware
symmetry classes and warm starts (lazy, classes only without the RESULT term, every LP cold:
``greedy(symmetry=not result_load, warm=False)``) beside today's, and ``--baselines`` adds
the time of ``plan``'s default baselines table (:func:`controller.plan.baselines.all_baselines`
with the same LP) to today's run.  Seconds are wall and CPU of this process.

    python bench/plan_scaling.py --k 16 --budget 16 --result-load --baselines
    python bench/plan_scaling.py --k 12 --workers 128 --budget 8 --result-load --previous

``--previous-src DIR`` (issue 41, k = 32) runs the same greedy with the planner code of DIR
(an export of an earlier commit, e.g. ``git archive 1358c8e controller topo workers pyswitch
| tar -x -C DIR``) in a child process, one after the other with this tree's run, and prints
both CPU seconds, LP counts, γ and whether S and γ agree (γ within 1e-6).

    python bench/plan_scaling.py --k 32 --budget 4 --result-load --previous-src /tmp/prev
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from controller.plan.baselines import all_baselines  # noqa: E402
from controller.plan.greedy import greedy  # noqa: E402
from controller.plan.lp import candidates, make_job, ps_only, worker_groups  # noqa: E402
from controller.plan.lp_fast import FastLP  # noqa: E402
from topo.models import fat_tree, hosts, switches  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8, 12, 16])
    ap.add_argument("--budget", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--ps", default="h0")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per LP")
    ap.add_argument("--compare-plain", action="store_true",
                    help="also run the plain greedy (slow: use small k)")
    ap.add_argument("--smoke", action="store_true", help="k=4, budget 4 only (seconds)")
    ap.add_argument("--workers", type=int, default=None, help="first N hosts besides the PS")
    ap.add_argument("--result-load", action="store_true", help="count the RESULT tree")
    ap.add_argument("--side-by-side", action="store_true",
                    help="also run the exhaustive greedy (lazy=False) and compare")
    ap.add_argument("--previous", action="store_true",
                    help="also run the previous planner (no RESULT-aware classes, cold LPs)")
    ap.add_argument("--baselines", action="store_true",
                    help="also time plan's default baselines table")
    ap.add_argument("--previous-src", type=Path, default=None, metavar="DIR",
                    help="also run the greedy with the planner code in DIR (child process)")
    args = ap.parse_args(argv)
    if args.previous_src is not None and not (args.previous_src / "controller").is_dir():
        print(f"plan_scaling: --previous-src {args.previous_src}: no controller/ package there",
              file=sys.stderr)
        return 2
    if args.smoke:
        args.k, args.budget = [4], [4]
        if args.previous or args.baselines:
            args.result_load = True
    try:
        cpu = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {cpu})
        pinned = f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        pinned = "not pinned"
    con = Console(width=200)
    from importlib.metadata import version

    cpu_name = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    con.print(f"settings: Python {platform.python_version()}, {cpu_name}, "
              f"{pinned}; HiGHS via highspy {version('highspy')}, "
              f"PuLP {version('pulp')}; PS {args.ps}, all other hosts are workers; "
              f"LP time limit {args.time_limit}s")
    t = Table(title="greedy placement on fat-tree(k)")
    for col in ("k", "hosts", "switches", "workers", "groups", "cands", "M", "γ greedy",
                "γ ToR-only", "γ PS-only", "seconds", "CPU s", "LPs", "deployed"):
        t.add_column(col, justify="right" if col != "deployed" else "left")
    if args.compare_plain:
        t.add_column("plain s", justify="right")
        t.add_column("plain = fast", justify="center")
    if args.side_by_side:
        for col in ("exhaustive s", "exhaustive LPs", "γ exhaustive", "same S, γ"):
            t.add_column(col, justify="right")
    if args.baselines:
        for col in ("baselines s", "baselines CPU s", "with baselines s"):
            t.add_column(col, justify="right")
    if args.previous:
        for col in ("previous s", "previous CPU s", "previous LPs", "same S, γ (prev.)"):
            t.add_column(col, justify="right")
    if args.previous_src is not None:
        for col in ("src CPU s", "src LPs", "γ src", "same S, γ (src)"):
            t.add_column(col, justify="right")
    for k in args.k:
        g = fat_tree(k)
        ws = [h for h in hosts(g) if h != args.ps]
        job = make_job(g, args.ps, ws[:args.workers] if args.workers else ws,
                       result_load=args.result_load)
        n_groups = len(worker_groups(job))
        n_cand = len(candidates(job))
        g_ps, _ = ps_only(job)
        for m in args.budget:
            t0, c0 = time.perf_counter(), time.process_time()
            fast = FastLP(job, time_limit=args.time_limit)
            res = greedy(job, m, lp=fast, time_limit=args.time_limit)
            secs, cpu = time.perf_counter() - t0, time.process_time() - c0
            tor = fast(job, []).gamma
            dep = ", ".join(res.deployed[:3]) + (" …" if len(res.deployed) > 3 else "")
            row = [str(k), str(len(hosts(g))), str(len(switches(g))), str(len(job.workers)),
                   str(n_groups), str(n_cand), str(m), f"{res.gamma:.5f}", f"{tor:.5f}",
                   f"{g_ps:.5f}", f"{secs:.1f}", f"{cpu:.1f}", str(res.lp_solves), dep]
            if args.compare_plain:
                t1 = time.perf_counter()
                plain = greedy(job, m, merge=False, symmetry=False, time_limit=args.time_limit)
                same = plain.deployed == res.deployed and abs(plain.gamma - res.gamma) <= (
                    1e-7 * res.gamma)
                row += [f"{time.perf_counter() - t1:.1f}", "yes" if same else "NO"]
            con.print(f"  k={k} M={m}: γ={res.gamma:.5f} in {secs:.1f}s ({cpu:.1f}s CPU, "
                      f"{res.lp_solves} LPs)", highlight=False)
            if args.side_by_side:
                t1 = time.perf_counter()
                old = greedy(job, m, lp=FastLP(job, time_limit=args.time_limit),
                             time_limit=args.time_limit, lazy=False)
                s_old = time.perf_counter() - t1
                same = old.deployed == res.deployed and abs(old.gamma - res.gamma) <= 1e-6
                row += [f"{s_old:.1f}", str(old.lp_solves), f"{old.gamma:.6f}",
                        "yes" if same else f"NO: {old.deployed} vs {res.deployed}"]
                con.print(f"  k={k} M={m} exhaustive: γ={old.gamma:.5f} in {s_old:.1f}s "
                          f"({old.lp_solves} LPs); same: {same}")
            if args.baselines:
                t1, c1 = time.perf_counter(), time.process_time()
                base = all_baselines(job, m, lp=fast, time_limit=args.time_limit)
                s_b, c_b = time.perf_counter() - t1, time.process_time() - c1
                row += [f"{s_b:.1f}", f"{c_b:.1f}", f"{secs + s_b:.1f}"]
                beaten = [f"{n} {b['gamma']:.5f}" for n, b in base.items()
                          if n not in ("ps_only", "all_programmable") and b["gamma"] is not None
                          and b["gamma"] > res.gamma * (1 + 1e-6)]
                con.print(f"  k={k} M={m} baselines: {s_b:.1f}s ({c_b:.1f}s CPU); "
                          + ", ".join(f"{n} {b['gamma'] if b['gamma'] is None else round(b['gamma'], 5)}"
                                      for n, b in base.items())
                          + (f"; above the greedy: {', '.join(beaten)}" if beaten else ""))
            if args.previous:
                t1, c1 = time.perf_counter(), time.process_time()
                old = greedy(job, m, lp=FastLP(job, time_limit=args.time_limit),
                             time_limit=args.time_limit, symmetry=not job.result_load,
                             warm=False)
                s_old, c_old = time.perf_counter() - t1, time.process_time() - c1
                same = old.deployed == res.deployed and abs(old.gamma - res.gamma) <= 1e-6
                row += [f"{s_old:.1f}", f"{c_old:.1f}", str(old.lp_solves),
                        "yes" if same else f"NO: {old.deployed} vs {res.deployed}"]
                con.print(f"  k={k} M={m} previous: γ={old.gamma:.5f} in {s_old:.1f}s "
                          f"({c_old:.1f}s CPU, {old.lp_solves} LPs); same: {same}")
            if args.previous_src is not None:
                other = _run_elsewhere(args.previous_src, k, args.ps, args.workers,
                                       args.result_load, m, args.time_limit)
                same = tuple(other["deployed"]) == res.deployed and abs(
                    other["gamma"] - res.gamma) <= 1e-6
                row += [f"{other['cpu']:.1f}", str(other["lp_solves"]), f"{other['gamma']:.6f}",
                        "yes" if same else f"NO: {other['deployed']} vs {list(res.deployed)}"]
                con.print(f"  k={k} M={m} {args.previous_src}: γ={other['gamma']:.5f} in "
                          f"{other['wall']:.1f}s ({other['cpu']:.1f}s CPU, "
                          f"{other['lp_solves']} LPs); same S and γ: {same}", highlight=False)
            t.add_row(*row)
    con.print(t)
    return 0


_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from controller.plan.greedy import greedy
from controller.plan.lp import make_job
from controller.plan.lp_fast import FastLP
from topo.models import fat_tree, hosts
k, ps, n, rl, m, tl = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1", \
    int(sys.argv[6]), float(sys.argv[7])
g = fat_tree(k)
ws = [h for h in hosts(g) if h != ps]
job = make_job(g, ps, ws[:int(n)] if n != "all" else ws, result_load=rl)
t0, c0 = time.perf_counter(), time.process_time()
res = greedy(job, m, lp=FastLP(job, time_limit=tl), time_limit=tl)
print(json.dumps({"deployed": list(res.deployed), "gamma": res.gamma,
                  "lp_solves": res.lp_solves, "wall": time.perf_counter() - t0,
                  "cpu": time.process_time() - c0}))
"""


def _run_elsewhere(src: Path, k: int, ps: str, workers: int | None, result_load: bool,
                   budget: int, time_limit: float) -> dict:
    """The greedy of this bench's row with the planner code under ``src`` (a child process
    whose import path starts there); its result and CPU seconds."""
    import json
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(src.resolve()), str(k), ps,
         str(workers) if workers else "all", "1" if result_load else "0", str(budget),
         str(time_limit)],
        capture_output=True, text=True, check=True, cwd=str(src.resolve()),
        env={**os.environ, "PYTHONPATH": str(src.resolve())})
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
