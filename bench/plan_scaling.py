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
    args = ap.parse_args(argv)
    if args.smoke:
        args.k, args.budget = [4], [4]
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
                "γ ToR-only", "γ PS-only", "seconds", "LPs", "deployed"):
        t.add_column(col, justify="right" if col != "deployed" else "left")
    if args.compare_plain:
        t.add_column("plain s", justify="right")
        t.add_column("plain = fast", justify="center")
    if args.side_by_side:
        for col in ("exhaustive s", "exhaustive LPs", "γ exhaustive", "same S, γ"):
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
            t0 = time.perf_counter()
            fast = FastLP(job, time_limit=args.time_limit)
            res = greedy(job, m, lp=fast, time_limit=args.time_limit)
            secs = time.perf_counter() - t0
            tor = fast(job, []).gamma
            dep = ", ".join(res.deployed[:3]) + (" …" if len(res.deployed) > 3 else "")
            row = [str(k), str(len(hosts(g))), str(len(switches(g))), str(len(job.workers)),
                   str(n_groups), str(n_cand), str(m), f"{res.gamma:.5f}", f"{tor:.5f}",
                   f"{g_ps:.5f}", f"{secs:.1f}", str(res.lp_solves), dep]
            if args.compare_plain:
                t1 = time.perf_counter()
                plain = greedy(job, m, merge=False, symmetry=False, time_limit=args.time_limit)
                same = plain.deployed == res.deployed and abs(plain.gamma - res.gamma) <= (
                    1e-7 * res.gamma)
                row += [f"{time.perf_counter() - t1:.1f}", "yes" if same else "NO"]
            con.print(f"  k={k} M={m}: γ={res.gamma:.5f} in {secs:.1f}s ({res.lp_solves} LPs)")
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
            t.add_row(*row)
    con.print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
