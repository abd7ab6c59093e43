#!/usr/bin/env python3
"""The joint LP of several jobs (docs/design.md §3.10), two ways side by side: PuLP
(:func:`controller.plan.lp_jobs.solve_jobs_lp`, the reference) and the matrix for highspy
(:class:`controller.plan.lp_jobs.FastJointLP`, what the joint greedy uses).

    python bench/plan_jobs_lp.py                       # fat-tree k=16, 4 jobs x 64 workers
    python bench/plan_jobs_lp.py --k 8 --jobs 2 --workers 16

Jobs as ``bench/sim_scale.py --jobs J --ps-spread`` places them (PS of job j on host
j·hosts/J, worker i of job j on host stride·i + stride/2 + j), with the RESULT term (as
``run`` plans).  For S = ∅ and for ``--sets`` deployment sets of one to four candidates
drawn with a fixed seed, both solve the LP, interleaved; the bench prints CPU seconds of
this process per joint LP (every stage included; both solve in-process through highspy, so
other load on the machine does not inflate them) and their ratio, and fails unless every job's γ agrees to 1e-6.
The time of one joint greedy step is about (number of candidates) × the matrix path's time.

``--greedy M`` (issue 41) times the joint greedy instead: the planner (symmetry classes with
the RESULT trees, warm starts, lazy scoring by stale gains:
:func:`controller.plan.greedy.greedy_jobs`) runs once for budget M and gives every budget
0..M as its prefix (the sweep's rule); ``--previous`` also runs the previous planner on the
same jobs (every class's candidate solved: ``lazy=False``, the exhaustive greedy) and lists
every budget whose S or γ differ (γ within 1e-6); ``--cold`` adds the planner before the
symmetry classes and warm starts (``symmetry=False, warm=False, lazy=False``).  Seconds are
wall and CPU of this process (HiGHS threads included), with the load average before and
after (the machine is shared).

    python bench/plan_jobs_lp.py --greedy 16                     # k=16, 4 x 64, budgets 0..16
    python bench/plan_jobs_lp.py --k 8 --jobs 2 --workers 16 --greedy 4 --previous

At fat-tree k = 32, 8 jobs × 128 workers (issue 41's target, ``--k 32 --jobs 8 --workers 128
--greedy 32``) the joint LP merges each job's symmetric worker groups into one column per
orbit (:mod:`controller.plan.lp_orbits`; ``--no-symmetric`` turns it off) and keeps equal
load rows once.  HiGHS's ``--time-limit`` is wall-clock: on a loaded machine raise it.

``--write-jobs FILE`` writes the jobs as a ``plan --jobs`` file (docs/planner.md's sweep).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.plan.greedy import greedy_jobs, prefix  # noqa: E402
from controller.plan.jobs import JobEntry  # noqa: E402
from controller.plan.lp_jobs import (  # noqa: E402
    FastJointLP,
    joint_candidates,
    make_jobset,
    solve_jobs_lp,
)
from topo.models import hosts, parse_topology  # noqa: E402


def spread_jobs(graph, n_jobs: int, per_job: int) -> list[JobEntry]:
    """``bench/sim_scale.py --jobs J --ps-spread``'s jobs."""
    n = len(hosts(graph))
    stride = n // per_job
    return [JobEntry(f"job{j + 1}", f"h{j * (n // n_jobs)}",
                     tuple(f"h{stride * i + stride // 2 + j}" for i in range(per_job)))
            for j in range(n_jobs)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--workers", type=int, default=64, help="workers per job")
    ap.add_argument("--sets", type=int, default=6, help="random deployment sets besides ∅")
    ap.add_argument("--smoke", action="store_true", help="k=4, 2 jobs x 4 workers, 3 sets "
                    "(with --greedy: budget 2, --previous and --cold)")
    ap.add_argument("--greedy", type=int, default=None, metavar="M",
                    help="time the joint greedy for budgets 0..M instead")
    ap.add_argument("--previous", action="store_true",
                    help="with --greedy: also the previous (exhaustive) planner, compared "
                    "per budget")
    ap.add_argument("--cold", action="store_true",
                    help="with --greedy: also the planner before symmetry and warm starts")
    ap.add_argument("--time-limit", type=float, default=60.0, metavar="S",
                    help="HiGHS's limit per LP, wall seconds (on a loaded machine a larger one "
                    "keeps a slow wall clock from stopping the greedy)")
    ap.add_argument("--no-symmetric", action="store_true",
                    help="with --greedy: the joint LP without merged group orbits")
    ap.add_argument("--write-jobs", metavar="FILE", default=None,
                    help="write the jobs as a plan --jobs file and stop")
    a = ap.parse_args(argv)
    if a.smoke:
        a.k, a.jobs, a.workers, a.sets = 4, 2, 4, 3
        if a.greedy is not None:
            a.greedy, a.previous, a.cold = 2, True, True
    graph = parse_topology(f"fattree:{a.k}")
    specs = spread_jobs(graph, a.jobs, a.workers)
    if a.write_jobs:
        import json

        Path(a.write_jobs).write_text(json.dumps(
            [{"name": j.name, "ps": j.ps, "workers": list(j.workers)} for j in specs]))
        print(f"jobs written to {a.write_jobs}")
        return 0
    js = make_jobset(graph, specs, result_load=True)
    if a.greedy is not None:
        return greedy_sweep(js, a)
    cands = joint_candidates(js)
    rnd = random.Random(0)
    sets = [[]] + [rnd.sample(cands, rnd.randint(1, min(4, len(cands))))
                   for _ in range(a.sets)]
    print(f"settings: fat-tree k={a.k}, {a.jobs} jobs x {a.workers} workers (PSs spread), "
          f"RESULT term on, max-min, {len(cands)} candidates, {len(sets)} sets (seed 0), "
          f"load average {os.getloadavg()[0]:.1f}")
    fast = FastJointLP(js)
    fast([])  # per-path vectors cached once, as in a greedy
    t_pulp, t_fast = [], []
    print(f"CPU seconds per joint LP\n{'S':<34} {'PuLP':>8} {'matrix':>9} {'ratio':>6} "
          f"{'LPs':>4}  γ per job")
    for S in sets:
        t0 = time.process_time()
        ref = solve_jobs_lp(js, S)
        t1 = time.process_time()
        got = fast(S)
        t2 = time.process_time()
        for n in js.names:
            if abs(got.gammas[n] - ref.gammas[n]) > 1e-6 * max(1.0, abs(ref.gammas[n])):
                print(f"error: S = {S}: job {n}: γ {got.gammas[n]} (matrix) against "
                      f"{ref.gammas[n]} (PuLP)", file=sys.stderr)
                return 1
        t_pulp.append(t1 - t0)
        t_fast.append(t2 - t1)
        label = "{" + ", ".join(S) + "}"
        print(f"{label:<34} {t1 - t0:8.3f} {t2 - t1:9.3f} {(t1 - t0) / (t2 - t1):6.1f} "
              f"{got.lp_solves:4d}  " + " ".join(f"{g:.4f}" for g in got.gammas.values()),
              flush=True)
    mp, mf = statistics.median(t_pulp), statistics.median(t_fast)
    print(f"median CPU seconds per joint LP: PuLP {mp:.3f}, matrix {mf:.3f} ({mp / mf:.1f}x); "
          f"one greedy step of {len(cands)} candidates ≈ {len(cands) * mf:.0f} s "
          f"(PuLP {len(cands) * mp:.0f} s); every γ agreed")
    return 0


def _timed(fn, *args, **kw):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0, time.process_time() - c0


def greedy_sweep(js, a) -> int:
    """``--greedy M``: the joint greedy's plans for budgets 0..M, new (and previous)."""
    print(f"settings: fat-tree k={a.k}, {a.jobs} jobs x {a.workers} workers (PSs spread), "
          f"RESULT term on, max-min, {len(joint_candidates(js))} candidates, budgets "
          f"0..{a.greedy}, LP time limit {a.time_limit} s, group orbits "
          f"{'not ' if a.no_symmetric else ''}merged, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    runs: dict[str, dict] = {"new": {}}
    if a.previous:
        runs["previous"] = {"lazy": False}
    if a.cold:
        runs["cold"] = {"symmetry": False, "warm": False, "lazy": False}
    plans = {}
    for label, kw in runs.items():
        lp = FastJointLP(js, time_limit=a.time_limit, symmetric=not a.no_symmetric)
        res, wall, cpu = _timed(greedy_jobs, js, a.greedy, lp=lp, **kw)
        plans[label] = [prefix(res, m, lp) for m in range(a.greedy + 1)]
        print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU, {res.lp_solves} LP solves, "
              f"S = {{{', '.join(res.deployed)}}}, load average after "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'M':>3} " + " ".join(f"{'γ min ' + k:>16}" for k in plans) + "  S (new)")
    differ = []
    for m in range(a.greedy + 1):
        row = {k: p[m] for k, p in plans.items()}
        new = row["new"]
        print(f"{m:>3} " + " ".join(f"{min(r.result.gammas.values()):16.6f}"
                                    for r in row.values())
              + "  {" + ", ".join(new.deployed) + "}")
        for old in (r for k, r in row.items() if k != "new"):
            if old.deployed != new.deployed or any(
                    abs(old.result.gammas[n] - new.result.gammas[n]) > 1e-6 for n in js.names):
                differ.append((m, old.deployed, new.deployed))
    if len(plans) > 1:
        print("every budget: same S, every γ within 1e-6" if not differ else
              "differences: " + "; ".join(f"M={m}: {o} vs {n}" for m, o, n in differ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
