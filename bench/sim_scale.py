"""The INA experiment at datacenter scale in virtual time (docs/simulate.md, "At scale").

``python bench/sim_scale.py --topo fattree:16 --workers 256 --budgets 0,2,4,8 --rounds 3``

For each planner and budget: plan as ``run`` does (:func:`~controller.experiment.methods.
ina.core.plan_request`, without the baselines table, which the network does not use), then
simulate the job (:func:`controller.experiment.simulate.run.simulate`: ina.p4 on in-process
pyswitch for every switch, the real worker and PS state machines) and print, with the
settings: γ predicted by the LP, γ measured (gradient frames per second over the median
round, as ``run`` computes it) and their ratio, exactness of every sum, seconds per round,
PS bytes per round, retransmissions, and the simulator's cost on this machine (run time,
events per second, peak RSS).  Writes ``summary.json`` and ``gamma_vs_budget.png`` into
``--out`` and every run's ``results.json`` under it.

With ``--jobs`` the joint greedy runs once over the sweep, printing each choice: the budgets
in increasing order, each continuing the run of the previous one (``start``), each plan the
first choices of that run (:func:`controller.plan.joint.prefix`: the greedy is the same loop
up to there), so a sweep costs one greedy and its small budgets are simulated first.
``--greedy-start A,B,...`` continues the choices an earlier run of the same settings
printed.

``--cc fixed,aimd,delay,two-window`` runs every budget's plan once per congestion-control
policy (``run``'s ``--cc``), side by side; each row then also has the RESULTs with a
congestion mark the workers received (``--ecn-packets N`` makes the switches mark), the
depths the frames found in the links' queues (p50/p99/max, ``sim.queue_depth``), the
retransmissions as a share of the first copies, and, with several jobs, Jain's index of
their measured γ_j / w_j.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller.experiment.methods.ina.core import Settings, plan_request  # noqa: E402
from controller.experiment.network import shaped_graph  # noqa: E402
from controller.experiment.simulate.run import SimOptions, simulate  # noqa: E402
from controller.files import write_json_atomic  # noqa: E402
from controller.plan.document import load_plan, resolve_workers, write_plan  # noqa: E402
from controller.plan.jobs import jobs_argument  # noqa: E402
from controller.plan.joint import greedy_jobs  # noqa: E402
from controller.plan.lp_jobs import make_jobset  # noqa: E402
from controller.plan.pipeline import make_plan, plan_several_jobs  # noqa: E402
from topo.models import parse_topology  # noqa: E402
from workers.ina.cc import POLICIES  # noqa: E402
from workers.ina.worker import n_chunks_for  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _greedy_once(graph, specs, req, budget: int, start=()):
    """The joint greedy for ``budget`` from the choices ``start``, each choice printed as it
    is made."""
    js = make_jobset(graph, specs, capacity=req.capacity, result_load=req.result_load)
    t0 = time.perf_counter()

    def show(k: int, name: str, score: tuple[float, ...]) -> None:
        print(f"  joint greedy: choice {k} {name}, levels {', '.join(f'{x:.4f}' for x in score)}"
              f" ({time.perf_counter() - t0:.0f} s)", flush=True)

    res = greedy_jobs(js, budget, objective=req.objective, solver=req.solver,
                      time_limit=req.time_limit, progress=show, start=tuple(start))
    print(f"  joint greedy for budget {budget}: {time.perf_counter() - t0:.1f} s, "
          f"{res.lp_solves} LP solves", flush=True)
    return res


def run_row(doc: dict, st, s: Settings, n_workers: int) -> dict:
    """One summary row of a simulated run's ``results.json`` ``doc`` (module doc): with
    several jobs their sums of γ, their slowest round and the PSs' bytes; the launch's
    queue depths and marks (every job's record holds the same launch's)."""
    if s.jobs:
        js = doc["jobs"].values()
        g = {"predicted": sum(j["gamma"]["predicted"] for j in js),
             "measured": sum(j["gamma"]["measured"] for j in js)}
        g["ratio"] = g["measured"] / g["predicted"]
        recs = [d for m, d in doc["modes"].items() if m.endswith("/ina")]
        rs = [{"time_s": max(d["rounds"][r]["time_s"] for d in recs),
               "ps_rx_bytes": sum(d["rounds"][0]["ps_rx_bytes"] for d in recs),
               "retransmissions": sum(d["rounds"][r]["retransmissions"] for d in recs)}
              for r in range(len(recs[0]["rounds"]))]
    else:
        g = doc["gamma"]
        recs = [doc["modes"]["ina" if "ina" in doc["modes"] else s.modes[0]]]
        rs = recs[0]["rounds"]
    sim = recs[0]["sim"]
    first = n_workers * n_chunks_for(recs[0]["grad_bytes"] // 4) * len(rs)
    retx = sum(r["retransmissions"] for r in rs)
    return {"gamma_predicted": g["predicted"], "gamma_measured": g["measured"],
            "ratio": g["ratio"], "exact": doc["exact_all_rounds"],
            "s_per_round": statistics.mean(r["time_s"] for r in rs),
            "ps_bytes_per_round": rs[0]["ps_rx_bytes"],
            "retransmissions": retx, "first_copies": first,
            "retx_share": retx / first if first else math.nan,
            "marks": sim.get("marks", 0),
            "queue_depth": sim.get("queue_depth") or {"p50": 0, "p99": 0, "max": 0},
            "jain": doc.get("fairness") if s.jobs else None,
            "sim_s": st.wall_s, "events": st.events,
            "events_per_s": st.events_per_s, "peak_rss_mib": st.peak_mib,
            "events_per_cpu_s": st.events_per_cpu_s,
            "switch_frames": st.switch_frames, "fast_frames": st.fast_frames,
            "queue_drops": sum(d["sim"]["queue_drops"] for d in doc["modes"].values())
            // max(1, len(doc["jobs"]) if s.jobs else 1),
            "virtual_s": max(d["sim"]["virtual_s"] for d in doc["modes"].values()),
            "jobs": {n: j["gamma"] for n, j in doc.get("jobs", {}).items()},
            "modes": {m: {"s_per_round": statistics.mean(r["time_s"] for r in d["rounds"]),
                          "ps_bytes_per_round": d["rounds"][0]["ps_rx_bytes"],
                          "retransmissions": sum(r["retransmissions"] for r in d["rounds"])}
                      for m, d in doc["modes"].items()}}


def plot(summary: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def curve(r: dict) -> str:  # a planner, and a policy other than the default
        cc = r.get("cc", Settings.cc)
        return r["planner"] if cc == Settings.cc else f"{r['planner']}, {cc}"

    many = len({curve(r) for r in summary}) > 2
    fig, ax = plt.subplots(figsize=(9, 4.2) if many else (6, 4))
    for i, planner in enumerate(dict.fromkeys(curve(r) for r in summary)):
        rs = [r for r in summary if curve(r) == planner]
        b = [r["budget"] for r in rs]
        c = f"C{i}"
        ax.plot(b, [r["gamma_predicted"] for r in rs], "--o", color=c, alpha=0.6,
                label=f"{planner}: LP")
        ax.plot(b, [r["gamma_measured"] for r in rs], "-s", color=c,
                label=f"{planner}: simulated")
    ax.set_xlabel("budget M (programmable switches besides the PS's ToR)")
    ax.set_ylabel("γ (Mbit/s of gradient frames; sum over jobs)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if many:  # beside the axes, where it hides no curve
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def replot(dirs: list[Path], path: Path) -> None:
    """One ``gamma_vs_budget.png`` at ``path`` from the ``summary.json`` of sweeps ``dirs``
    (also partial ones) of one network: each (planner, timeout) a curve."""
    runs, a = [], {}
    for d in dirs:
        doc = json.loads((d / "summary.json").read_text())
        a = doc["settings"]
        t = a.get("timeout", Settings.timeout)
        runs += [{**r, "planner": f"{r['planner']}, timeout {t:g} s"} for r in doc["runs"]]
    runs.sort(key=lambda r: (r["planner"], r["budget"]))
    n = len(runs[0]["jobs"]) if runs[0].get("jobs") else 1
    plot(runs, path, f"{a['topo']}, {n} job(s), {a['rounds']} rounds, loss {a['loss']:g} "
                     "(simulated)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topo", default="fattree:16")
    p.add_argument("--ps", default="h0")
    p.add_argument("--workers", default="256")
    p.add_argument("--budgets", type=_ints, default=[0, 2, 4, 8])
    p.add_argument("--planners", default="greedy")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default="ina")
    p.add_argument("--loss", type=float, default=0.0)
    p.add_argument("--timeout", type=float, default=Settings.timeout,
                   help="run's --timeout: the first RTO, and max_timeout when above 1 s")
    p.add_argument("--cc", default=Settings.cc,
                   help=f"congestion-control policies, comma-separated, each run on every "
                        f"budget's plan ({', '.join(POLICIES)}; default {Settings.cc})")
    p.add_argument("--ecn-packets", type=int, default=0, metavar="N",
                   help="switches mark INA packets that find N frames in their link's queue "
                        "(simulate's --ecn-packets; 0: no marks)")
    p.add_argument("--burst-bytes", type=float, default=SimOptions.burst_bytes,
                   help="simulate's --burst-bytes: htb's bucket per link direction (default "
                        f"{SimOptions.burst_bytes:g}; 0: every frame takes its transmission "
                        "time, a datacenter's link)")
    p.add_argument("--wake-ms", type=float, default=SimOptions.wake_ms,
                   help=f"simulate's --wake-ms (default {SimOptions.wake_ms:g})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--train", action="store_true", help="train the model (default: seeded "
                   "random int32 gradients; sums are checked exactly either way)")
    p.add_argument("--jobs", type=int, default=0, help="J jobs at once, each with its own PS "
                   "and --workers workers spread over the pods (J x W workers in all; ina.p4's "
                   "bitmap carries at most 64 workers per job)")
    p.add_argument("--ps-spread", action="store_true",
                   help="with --jobs: job j's PS is h(j x hosts/J), one per part of the tree, "
                        "instead of h(j-1) (all on the first edge switch)")
    p.add_argument("--out", default="/tmp/sim_scale")
    p.add_argument("--greedy-start", type=lambda t: tuple(x for x in t.split(",") if x),
                   default=(), help="--jobs: continue the joint greedy from these choices "
                   "(printed by an earlier run of the same settings)")
    p.add_argument("--reuse-plans", action="store_true",
                   help="take a run's plan.json from --out if an earlier sweep wrote it "
                        "(the joint plan of several jobs takes minutes at k=16)")
    p.add_argument("--full-p4", action="store_true",
                   help="every switch executes ina.p4 (default: forwarding-only switches take "
                        "simulate's tested shortcut)")
    p.add_argument("--replot", nargs="+", type=Path, metavar="DIR",
                   help="only draw --out/gamma_vs_budget.png from these sweeps' summary.json")
    p.add_argument("--smoke", action="store_true",
                   help="a reduced run (fat-tree k=4, 4 workers, budgets 0 and 1, 1 round) "
                        "that only shows it works")
    a = p.parse_args(argv)
    ccs = [c for c in a.cc.split(",") if c]
    bad = [c for c in ccs if c not in POLICIES]
    if bad or not ccs:
        print(f"error: --cc: unknown policy {', '.join(bad) or '(none)'}; choose from "
              f"{', '.join(POLICIES)}", file=sys.stderr)
        return 2
    if not (0 <= a.burst_bytes <= 1 << 30 and 0 <= a.wake_ms <= 60_000):
        print(f"error: --burst-bytes must be in [0, 2^30] and --wake-ms in [0, 60000], got "
              f"{a.burst_bytes:g} and {a.wake_ms:g}", file=sys.stderr)
        return 2
    if a.smoke:
        a.topo, a.workers, a.budgets, a.rounds = "fattree:4", "4", [0, 1], 1
    out = Path(a.out)
    if a.replot:
        out.mkdir(parents=True, exist_ok=True)
        replot(a.replot, out / "gamma_vs_budget.png")
        print(f"written: {out / 'gamma_vs_budget.png'}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    graph = shaped_graph(parse_topology(a.topo), 1.0)
    workers = resolve_workers(graph, a.ps, a.workers)
    jobs_file = None
    if a.jobs:
        n_hosts = sum(1 for _, k in graph.nodes(data="kind") if k == "host")
        w = len(workers)
        stride = n_hosts // w
        jobs = [{"name": f"job{j + 1}",
                 "ps": f"h{j * (n_hosts // a.jobs) if a.ps_spread else j}",
                 "workers": [f"h{stride * i + stride // 2 + j}" for i in range(w)]}
                for j in range(a.jobs)]
        jobs_file = out / "jobs.json"
        jobs_file.write_text(json.dumps(jobs, indent=1))
        workers = [h for j in jobs for h in j["workers"]]
    opt = SimOptions(train=a.train, reference=False, full_p4=a.full_p4,
                     ecn_packets=a.ecn_packets, burst_bytes=a.burst_bytes, wake_ms=a.wake_ms)
    print(f"settings: {a.topo}, PS {a.ps}, {len(workers)} workers, 1 Mbit/s links, MLP "
          f"hidden {a.hidden}, {a.rounds} rounds, modes {a.modes}, loss {a.loss:g}, window "
          f"{Settings.window or 'the default (a bandwidth-delay product, at least 16)'}, timeout {a.timeout:g} s, sim options {opt}")
    print(f"{'planner':>10} {'M':>3} {'cc':>10} {'γ LP':>7} {'γ sim':>7} {'ratio':>6} "
          f"{'exact':>5} {'s/round':>8} {'PS B/rd':>9} {'retx':>6} {'retx %':>6} "
          f"{'marks':>6} {'q p50/p99/max':>14} {'Jain':>6} {'plan s':>7} {'sim s':>7} "
          f"{'events':>9} {'ev/s':>7} {'RSS MiB':>7}")
    summary = []
    planned = None  # the joint greedy so far (module doc)
    for planner in a.planners.split(","):
        for b in a.budgets:
            s = Settings(topo=a.topo, ps=a.ps, workers=a.workers, budget=b, planner=planner,
                         rounds=a.rounds, hidden=a.hidden, loss=a.loss, timeout=a.timeout,
                         seed=a.seed,
                         modes=tuple(a.modes.split(",")),
                         jobs=str(jobs_file) if jobs_file else None)
            name = f"{planner}-b{b}" + (f"-loss{a.loss:g}" if a.loss else "")
            t0 = time.perf_counter()
            (out / name).mkdir(exist_ok=True)
            cached = out / name / "plan.json"
            if a.reuse_plans and cached.exists():
                plan = load_plan(cached)
                plan_s = float((plan.timings or {}).get("bench_plan_s", 0.0))
            else:
                req = replace(plan_request(s), baselines=False)
                if s.jobs and planner == "greedy":
                    specs = jobs_argument(s.jobs, graph)
                    if planned is None or not planned.covers(b):
                        start = planned.deployed if planned else a.greedy_start
                        planned = _greedy_once(graph, specs, req, max(b, len(start)), start)
                    plan = plan_several_jobs(graph, specs, req, planned=planned)
                else:
                    plan = (make_plan(graph, req, jobs=jobs_argument(s.jobs, graph)) if s.jobs
                            else make_plan(graph, req, ps=a.ps, workers=workers))
                plan_s = time.perf_counter() - t0
                plan = replace(plan, timings={**(plan.timings or {}), "bench_plan_s": plan_s})
                write_plan(plan, cached)
            for cc in ccs:
                run_name = name if len(ccs) == 1 and cc == Settings.cc else f"{name}-{cc}"
                doc, st = simulate(replace(s, cc=cc), opt, out / run_name, run_name,
                                   graph=graph, plan=plan)
                doc["complete"] = True
                write_json_atomic(out / run_name / "results.json", doc)
                row = {"planner": planner, "budget": b, "cc": cc, "deployed": plan.deployed,
                       "plan_s": plan_s, **run_row(doc, st, s, len(workers))}
                summary.append(row)
                q = row["queue_depth"]
                jain = f"{row['jain']:6.3f}" if row["jain"] is not None else f"{'—':>6}"
                print(f"{planner:>10} {b:>3} {cc:>10} {row['gamma_predicted']:7.4f} "
                      f"{row['gamma_measured']:7.4f} {row['ratio']:6.3f} "
                      f"{'yes' if row['exact'] else 'NO':>5} {row['s_per_round']:8.3f} "
                      f"{row['ps_bytes_per_round']:9,.0f} {row['retransmissions']:6d} "
                      f"{100 * row['retx_share']:6.2f} {row['marks']:6d} "
                      f"{q['p50']:>4}/{q['p99']:>4}/{q['max']:>4} {jain} "
                      f"{plan_s:7.1f} {st.wall_s:7.1f} {st.events:9,d} {st.events_per_s:7,.0f} "
                      f"{st.peak_mib:7.0f}", flush=True)
                write_json_atomic(out / "summary.json", {"settings": vars(a), "runs": summary})
    plot(summary, out / "gamma_vs_budget.png",
         f"{a.topo}, {len(workers)} workers, {a.rounds} rounds, loss {a.loss:g} (simulated)")
    print(f"written: {out / 'summary.json'}, {out / 'gamma_vs_budget.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
