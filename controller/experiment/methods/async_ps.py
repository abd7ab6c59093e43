"""``python -m controller run --method async``: the staleness-aware asynchronous PS
(docs/design.md §5).

One Mininet network (``--topo``; every switch runs ``p4src/ina.p4`` as a plain IPv4 router,
:func:`controller.dataplane.deploy.routing_rules`) carries, one after the other, a run of every policy
(``--policies``: ``async`` = eta for every gradient, ``sigma`` = eta/sigma, Zhang et al. 2016,
``kappa`` = eta/kappa, the sliding-window context of docs/design.md §5) for every seed (``--seed``,
``--seed + 1``, ... ``--async-repeats`` (or ``--repeats``) of them; runs are interleaved seed by seed so that slow
drifts of the machine's load hit every policy alike).  A run is one PS process
(:mod:`workers.async_ps.ps_node`) on the ``--ps`` host and one worker process
(:mod:`workers.async_ps.worker_node`) on each ``--workers`` host, talking TCP
(:mod:`workers.async_ps.wire`), started together by a start file.

Meaning of the shared options here
    ``--rounds R``: the PS accepts ``R x learners`` pushes in total (the gradient count of R
    synchronous rounds), then stops every learner; with ``--soft-sync C`` that is
    ``R x learners // C`` updates.  ``--model/--hidden/--seed``: the model and data
    (:mod:`workers.common.model`; the seed also sets the shards, batches and jitter).  ``--bw``: link
    rate in Mbit/s (0 = unshaped).  ``--target``: pyswitch or BMv2 switches.

Heterogeneous learners: ``--async-slow`` gives per-learner slow-down factors applied by
sleeping (see :mod:`workers.async_ps.worker_node` for why sleeps and not CPU limits), on top of a
nominal compute time ``--async-step-ms`` per gradient.

Reported per policy and seed (``results/<run>/results.json``, ``method: "async"``): test
accuracy and loss of the PS's parameters vs wall time and vs updates, staleness histogram and
mean kappa per learner, the variance of the learners' batch losses and of the test loss over
the last quarter of the run, the final accuracy, the time and updates to reach
``--async-target-acc``, and bytes into the PS host; then mean and standard deviation over the
seeds.  PNG plots: accuracy and loss vs time and vs updates (one colour per policy, one line
per seed), staleness histograms per learner.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from controller.errors import ExperimentError, parse_name_list
from controller.experiment.methods.common import parse_slow, staleness_histogram
from controller.experiment.network import check_environment, start_routed_network
from controller.experiment.records import format_stats, seed_stats
from controller.experiment.report import print_table, print_written
from controller.experiment.runner import Launch, Method, Node, Run
from controller.plan.document import resolve_workers
from workers.async_ps.core import KAPPA_MODES, POLICIES
from workers.async_ps.job import AsyncJob
from workers.async_ps.wire import ASYNC_TCP_PORT
from workers.common.model import Replica, TrainConfig

__all__ = ["AsyncMethod", "parse_slow", "parse_policies", "summarize_run", "aggregate",
           "staleness_histogram"]

DEFAULTS = {"policies": "async,sigma,kappa", "window": 4, "soft_sync": 1, "lr": 0.2,
            "slow": "2x4", "step_ms": 50.0, "jitter": 0.2, "repeats": 1, "eval_every": 10,
            "target_acc": 0.9, "kappa_mode": "ps"}
LAST_FRACTION = 0.25  # "the last rounds": the last quarter of the pushes / evaluations


def add_arguments(p: argparse.ArgumentParser) -> None:
    """This method's own options (the shared ones belong to ``run``)."""
    d = DEFAULTS
    g = p.add_argument_group("--method async (staleness-aware asynchronous PS, docs/design.md §5)")
    g.add_argument("--policies", default=d["policies"],
                   help=f"comma list of {', '.join(POLICIES)} (default all three)")
    g.add_argument("--staleness-window", type=int, default=d["window"], metavar="N",
                   help=f"N: kappa = mean of this push's sigma and the previous N-1 "
                        f"(default {d['window']})")
    g.add_argument("--soft-sync", type=int, default=d["soft_sync"], metavar="C",
                   help="C: pushes per PS update (default 1; also for --method ndn "
                        "--ndn-mode async)")
    g.add_argument("--async-lr", type=float, default=d["lr"], metavar="ETA",
                   help=f"PS learning rate eta (plain SGD; default {d['lr']:g})")
    g.add_argument("--async-slow", default=d["slow"], metavar="SPEC",
                   help="slow learners: HOST:FACTOR,... or KxFACTOR = the last K learners "
                        f"FACTOR times slower (default {d['slow']}; '' = none)")
    g.add_argument("--async-step-ms", type=float, default=d["step_ms"], metavar="MS",
                   help=f"nominal compute time of one gradient (default {d['step_ms']:g})")
    g.add_argument("--async-jitter", type=float, default=d["jitter"], metavar="J",
                   help=f"step times vary uniformly by +-J (default {d['jitter']:g})")
    g.add_argument("--async-repeats", type=int, default=d["repeats"], metavar="R",
                   help="seeds per policy: --seed, --seed+1, ... (default 1)")
    g.add_argument("--async-eval-every", type=int, default=d["eval_every"], metavar="U",
                   help=f"PS updates between test evaluations (default {d['eval_every']})")
    g.add_argument("--async-target-acc", type=float, default=d["target_acc"], metavar="A",
                   help=f"report time/updates to reach this accuracy (default "
                        f"{d['target_acc']:g})")
    g.add_argument("--kappa-mode", choices=KAPPA_MODES, default=d["kappa_mode"],
                   help="ps: exact kappa computed at the PS from the learner's window (default); "
                        "learner: the learner sends its lagged kappa")


# ------------------------------------------------------------------ pure helpers


def parse_policies(text: str) -> tuple[str, ...]:
    return parse_name_list(text, "--policies", POLICIES, "policy")


def _variance_last(values: list[float]) -> float | None:
    if not values:
        return None
    n = max(2, int(round(len(values) * LAST_FRACTION)))
    return float(np.var(values[-n:]))


def summarize_run(ps_report: dict, worker_reports: list[dict], t_start: float,
                  target_acc: float) -> dict:
    """One run's figures from the PS's and the workers' logs (times relative to t_start)."""
    evals = ps_report["evaluations"]
    curve = [{"time_s": max(0.0, e["time"] - t_start), "updates": e["t_ps"],
              "pushes": e["pushes"], "accuracy": e["accuracy"], "loss": e["loss"]}
             for e in evals]
    reached = next((c for c in curve if c["accuracy"] >= target_acc), None)
    pushes = ps_report["pushes"]
    losses = sorted((p["time"], p["loss"]) for r in worker_reports for p in r["pushes"])
    per_learner = []
    for r in worker_reports:
        sig = [p["sigma"] for p in r["pushes"]]
        kap = [p["kappa"] for p in r["pushes"]]
        per_learner.append({
            "learner": r["worker"], "slowdown": r["slowdown"], "pushes": len(sig),
            "staleness_histogram": staleness_histogram(sig),
            "mean_sigma": float(np.mean(sig)) if sig else None,
            "max_sigma": int(max(sig)) if sig else None,
            "mean_kappa": float(np.mean(kap)) if kap else None,
            "mean_rtt_ms": float(np.mean([p["rtt"] for p in r["pushes"]]) * 1e3)
            if r["pushes"] else None,
        })
    all_sigma = [p["sigma"] for p in pushes]
    return {
        "final_accuracy": curve[-1]["accuracy"],
        "final_loss": curve[-1]["loss"],
        "updates": ps_report["updates"],
        "pushes": ps_report["accepted"],
        "duration_s": curve[-1]["time_s"],
        "time_to_target_s": reached["time_s"] if reached else None,
        "updates_to_target": reached["updates"] if reached else None,
        "train_loss_variance_last": _variance_last([x for _, x in losses]),
        "test_loss_variance_last": _variance_last([c["loss"] for c in curve]),
        "mean_sigma": float(np.mean(all_sigma)) if all_sigma else None,
        "staleness_histogram": staleness_histogram(all_sigma),
        "learners": per_learner,
        "curve": curve,
    }


SUMMARY_KEYS = ("final_accuracy", "final_loss", "time_to_target_s", "updates_to_target",
                "train_loss_variance_last", "test_loss_variance_last", "duration_s",
                "mean_sigma")


def aggregate(runs: list[dict]) -> dict[str, dict]:
    """Mean / std over the seeds of every summary figure (``n`` = runs where it exists)."""
    return {k: seed_stats([r[k] for r in runs]) for k in SUMMARY_KEYS}


def expected_duration(budget: int, step_s: float, slowdown: list[float]) -> float:
    """Seconds the push budget takes if compute sets the pace: budget / sum_i 1/(step f_i)."""
    rate = sum(1.0 / (step_s * f) for f in slowdown)
    return budget / rate


def ps_link_seconds(budget: int, n_params: int, bw_mbps: float | None) -> float:
    """Seconds the PS's link needs for the budget if it sets the pace: every push brings a
    gradient in and takes a model out, 4 bytes per value; the link is full duplex, so each
    direction carries budget x 4 x n_params bytes (headers ignored)."""
    if not bw_mbps:
        return 0.0
    return budget * 4 * n_params * 8 / (bw_mbps * 1e6)


# ------------------------------------------------------------------ I/O


def run_once(run: Run, mininet: Any, job: AsyncJob, ps: str, workers: list[str],
             label: str) -> tuple[dict, list[dict], float, dict]:
    """One PS + workers run on the live network; returns the PS report, the worker
    reports, the start time and bytes moved per directed link."""
    out_dir = Path(job.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    job_file = out_dir / "job.json"
    job.save(job_file)
    task = run.progress.add_task(f"{label}: pushes", total=job.budget)

    def on_line(host: str, line: str) -> None:
        if host == ps and line.startswith("pushes "):
            run.progress.update(task, completed=int(line.split()[1].split("/")[0]))

    done = run.launch(mininet, Launch(
        label=label, out_dir=out_dir,
        servers=[Node(ps, "workers.async_ps.ps_node", (str(job_file),))],
        nodes=[Node(h, "workers.async_ps.worker_node", (str(job_file), "--worker", str(i)))
               for i, h in enumerate(workers)],
        start_file=Path(job.start_file) if job.start_file else None,
        timeout_s=job.timeout_s, on_line=on_line,
        server_exit="wait"))  # the PS stops by itself after the last push it accepts
    ps_report = json.loads((out_dir / "ps.json").read_text())
    reports = [json.loads((out_dir / f"worker{i}.json").read_text())
               for i in range(len(workers))]
    return ps_report, reports, done.t_start, done.moved


def _settings(args: argparse.Namespace, learners: list[str], factors: list[float],
              policies: tuple[str, ...]) -> dict:
    return {"topo": args.topo, "ps": args.ps, "learners": learners,
            "slowdown": dict(zip(learners, factors, strict=True)), "policies": list(policies),
            "rounds": args.rounds, "budget_pushes": args.rounds * len(learners),
            "staleness_window": args.staleness_window, "soft_sync": args.soft_sync,
            "lr": args.async_lr, "model": args.model, "hidden": args.hidden,
            "batch_size": TrainConfig().batch_size, "bw_mbps": args.bw or None,
            "step_ms": args.async_step_ms, "jitter": args.async_jitter,
            "seeds": [args.seed + r for r in range(args.async_repeats)],
            "eval_every": args.async_eval_every, "target_acc": args.async_target_acc,
            "kappa_mode": args.kappa_mode, "target": args.target}


def validate(args: argparse.Namespace) -> tuple[str, ...]:
    policies = parse_policies(args.policies)
    for what, v in (("--rounds", args.rounds), ("--staleness-window", args.staleness_window),
                    ("--soft-sync", args.soft_sync), ("--async-repeats", args.async_repeats),
                    ("--async-eval-every", args.async_eval_every)):
        if v < 1:
            raise ExperimentError(f"{what} must be >= 1, got {v}")
    if not (np.isfinite(args.async_lr) and args.async_lr > 0):
        raise ExperimentError(f"--async-lr must be > 0, got {args.async_lr}")
    if not (np.isfinite(args.async_step_ms) and args.async_step_ms >= 0):
        raise ExperimentError(f"--async-step-ms must be >= 0, got {args.async_step_ms}")
    if not 0 <= args.async_jitter < 1:
        raise ExperimentError(f"--async-jitter must be in [0, 1), got {args.async_jitter}")
    if args.bw is not None and args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    return policies


class AsyncMethod(Method):
    """The staleness-aware asynchronous PS (module docstring)."""

    name = "async"
    help = "async: staleness-aware async PS"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def repeats(self) -> int:
        # --async-repeats predates --repeats; either sets the seeds
        return max(self.args.async_repeats, super().repeats())

    def prepare(self, run: Run) -> None:
        import networkx as nx

        from topo.models import hosts, parse_topology

        args = self.args
        self.policies = policies = validate(args)
        graph = nx.Graph(parse_topology(args.topo))
        if args.ps not in hosts(graph):
            raise ExperimentError(f"--ps {args.ps}: not a host of {args.topo}")
        self.learners = learners = resolve_workers(graph, args.ps, args.workers)
        bad = [h for h in learners if h not in hosts(graph) or h == args.ps]
        if bad:
            raise ExperimentError(f"--workers: {bad[0]} is not a host of {args.topo} other "
                                  "than the PS")
        self.factors = parse_slow(args.async_slow, learners)
        check_environment(args.target)
        if args.bw:
            nx.set_edge_attributes(graph, float(args.bw), "bw")
        self.graph = nx.freeze(graph)
        run.settings = _settings(args, learners, self.factors, policies)
        run.settings["seeds"] = run.seeds
        run.stats_in = "policies"
        run.partial_document = lambda: self.results(run)

    def runs(self, run: Run) -> dict[str, list[dict]]:
        """Finished runs per policy, in seed order."""
        out: dict[str, list[dict]] = {p: [] for p in self.policies}
        for rep in run.repeats:
            for rec in rep.values():  # the key a run is filed under names its policy
                out[rec["policy"]].append({k: v for k, v in rec.items() if k != "policy"})
        return out

    def execute(self, run: Run) -> None:
        args, console, learners, factors = self.args, run.console, self.learners, self.factors
        named = [h if f == 1 else f"{h}×{f:g}" for h, f in zip(learners, factors, strict=True)]
        console.print(f"[bold]async PS[/] on {args.topo}: PS {args.ps}, learners "
                      f"{', '.join(named)}; policies {', '.join(self.policies)}, seeds "
                      f"{run.seeds}")
        budget = args.rounds * len(learners)
        step_s = args.async_step_ms / 1e3
        n_params = Replica(TrainConfig(model=args.model, hidden=args.hidden,
                                       n_workers=len(learners)), 0).params.size
        compute_s = expected_duration(budget, max(step_s, 1e-3), factors)
        link_s = ps_link_seconds(budget, n_params, args.bw)
        if link_s > compute_s:
            console.print(f"[yellow]note[/]: at {args.bw:g} Mbit/s the PS link needs "
                          f"≈{link_s:.0f} s for {budget} pushes of {n_params} values (compute "
                          f"≈{compute_s:.0f} s): the network sets the pace (--bw 0 = unshaped "
                          "links)")
        timeout = max(120.0, 10 * max(compute_s, link_s))
        out_dir = run.out_dir
        mininet, addrs = start_routed_network(
            self.graph, args.target, out_dir / "build", console, 1.0 if args.bw else None,
            f"{args.bw:g} Mbit/s links" if args.bw else "unshaped links")
        with run.network(mininet):
            tor = mininet.plan.hosts[args.ps].neighbours[0]
            for rep, seed in enumerate(run.seeds):
                train = TrainConfig(model=args.model, hidden=args.hidden,
                                    n_workers=len(learners), rounds=args.rounds,
                                    lr=args.async_lr, seed=seed)
                for policy in self.policies:
                    label = f"{policy} seed {seed}"
                    job = AsyncJob(policy=policy, train=train, n_workers=len(learners),
                                   budget=budget, lr=args.async_lr, soft_sync=args.soft_sync,
                                   window=args.staleness_window, kappa_mode=args.kappa_mode,
                                   ps_addr=(addrs[args.ps][0], ASYNC_TCP_PORT),
                                   slowdown=factors, step_s=step_s, jitter=args.async_jitter,
                                   eval_every=args.async_eval_every,
                                   out_dir=str(out_dir / f"{policy}-seed{seed}"),
                                   start_file=str(out_dir / f"{policy}-seed{seed}" / "start"),
                                   timeout_s=timeout)
                    ps_rep, reps, t0, moved = run_once(run, mininet, job, args.ps, learners,
                                                       label)
                    rec = summarize_run(ps_rep, reps, t0, args.async_target_acc)
                    rec["seed"] = seed
                    rec["ps_link_bytes"] = moved[(tor, args.ps)] + moved[(args.ps, tor)]
                    run.record(label, {**rec, "policy": policy}, rep)

    def results(self, run: Run) -> dict[str, Any]:
        runs = self.runs(run)
        return {"run": run.name, "method": "async", "settings": run.settings,
                "policies": {p: {"summary": aggregate(runs[p]), "runs": runs[p]}
                             for p in self.policies if runs[p]}}

    def report(self, run: Run, results: dict[str, Any]) -> None:
        plots = plot_results(results, run.out_dir)
        print_table(run.console, summary_table(results), 120)
        print_written(run.console, run.out_dir, plots)


# ------------------------------------------------------------------ report

COLOURS = {"async": "tab:red", "sigma": "tab:blue", "kappa": "tab:green"}


def summary_table(results: dict) -> Any:
    from rich.table import Table

    s = results["settings"]
    pol = results["policies"]
    sig = seed_stats([r["mean_sigma"] for d in pol.values() for r in d["runs"]])
    dur = seed_stats([r["duration_s"] for d in pol.values() for r in d["runs"]])
    table = Table(title=f"async PS {results['run']}: {len(s['learners'])} learners, "
                        f"η={s['lr']:g}, N={s['staleness_window']}, C={s['soft_sync']}, "
                        f"seeds {s['seeds']} (mean±std)")
    target = f"{s['target_acc']:g}"
    table.caption = (f"t/upd→{target}: wall time / PS updates until the test accuracy first "
                     f"reaches {target}; var: variance over the last quarter of the run. "
                     f"Mean staleness σ {format_stats(sig, 2)}, run {format_stats(dur, 1)} s.")
    for col in ("policy", "final acc", "test loss", f"t→{target} s", f"upd→{target}",
                "var test loss", "var train loss"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for p, d in pol.items():
        m = d["summary"]
        table.add_row(p, format_stats(m["final_accuracy"], 4), format_stats(m["final_loss"]),
                      format_stats(m["time_to_target_s"], 2), format_stats(m["updates_to_target"], 0),
                      format_stats(m["test_loss_variance_last"], sci=True),
                      format_stats(m["train_loss_variance_last"], sci=True))
    return table


def plot_results(results: dict, out_dir: Path) -> list[Path]:
    """accuracy/loss vs time/updates (one line per seed) and staleness histograms."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for metric in ("accuracy", "loss"):
        for xkey, xlabel in (("time_s", "wall time (s)"), ("updates", "PS updates")):
            fig, ax = plt.subplots(figsize=(6.4, 3.8))
            for p, d in results["policies"].items():
                for k, run in enumerate(d["runs"]):
                    c = run["curve"]
                    ax.plot([e[xkey] for e in c], [e[metric] for e in c],
                            color=COLOURS.get(p), alpha=0.8, lw=1.2,
                            label=p if k == 0 else None)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"test {metric}")
            if metric == "loss":
                ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
            ax.legend()
            ax.set_title(f"test {metric} vs {xlabel.split(' (')[0]} (one line per seed)",
                         fontsize=10)
            fig.tight_layout()
            path = out_dir / f"{metric}_vs_{'time' if xkey == 'time_s' else 'updates'}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    policies = list(results["policies"])
    hosts = results["settings"]["learners"]
    fig, axes = plt.subplots(1, len(policies), figsize=(4.2 * len(policies), 3.6),
                             sharey=True, squeeze=False)
    for ax, p in zip(axes[0], policies, strict=True):
        run = results["policies"][p]["runs"][0]
        for ln in run["learners"]:
            h = {int(x): c for x, c in ln["staleness_histogram"].items()}
            if not h:
                continue
            top = max(h)
            ax.stairs([h.get(x, 0) for x in range(1, top + 1)], np.arange(0.5, top + 1),
                      lw=1.3, label=f"{hosts[ln['learner']]} ×{ln['slowdown']:g}")
        ax.set_title(f"{p} (seed {run['seed']})", fontsize=10)
        ax.set_xlabel("staleness σ")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("pushes")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "staleness_histograms.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
