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
from controller.experiment.methods.async_ps.report import plot_results, summary_table
from controller.experiment.methods.common import (
    add_async_sgd_options,
    check_async_sgd,
    parse_slow,
    staleness_histogram,
)
from controller.experiment.records import seed_summary
from controller.experiment.runner import Launch, Launched, Method, Node, Run, Trial
from workers.async_ps.core import KAPPA_MODES, POLICIES
from workers.async_ps.job import AsyncJob
from workers.async_ps.wire import ASYNC_TCP_PORT
from workers.common.model import Replica, TrainConfig

__all__ = ["AsyncMethod", "parse_slow", "parse_policies", "summarize_run", "aggregate",
           "staleness_histogram", "expected_duration", "ps_link_seconds"]

DEFAULTS = {"policies": "async,sigma,kappa", "slow": "2x4", "step_ms": 50.0, "jitter": 0.2,
            "repeats": 1, "eval_every": 10, "target_acc": 0.9, "kappa_mode": "ps"}
LAST_FRACTION = 0.25  # "the last rounds": the last quarter of the pushes / evaluations


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """This method's own options besides the topology."""
    d = DEFAULTS
    g.add_argument("--policies", default=d["policies"],
                   help=f"comma list of {', '.join(POLICIES)} (default all three)")
    add_async_sgd_options(g)
    g.add_argument("--async-slow", default=d["slow"], metavar="SPEC",
                   help="slow learners: HOST:FACTOR,... or KxFACTOR = the last K learners "
                        f"FACTOR times slower (default {d['slow']}; '' = none)")
    g.add_argument("--async-step-ms", type=float, default=d["step_ms"], metavar="MS",
                   help=f"nominal compute time of one gradient (default {d['step_ms']:g})")
    g.add_argument("--async-jitter", type=float, default=d["jitter"], metavar="J",
                   help=f"step times vary uniformly by +-J (default {d['jitter']:g})")
    g.add_argument("--async-repeats", type=int, default=d["repeats"], metavar="R",
                   help="seeds per policy: --seed, --seed+1, ... (default 1; or --repeats)")
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
    """``--policies``: names of :data:`workers.async_ps.core.POLICIES`, in order."""
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
    return seed_summary(runs, SUMMARY_KEYS)


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


# ------------------------------------------------------------------ the method


class AsyncMethod(Method):
    """The staleness-aware asynchronous PS (module docstring): one trial per policy and
    seed on one routed network."""

    name = "async"
    help = "async: staleness-aware async PS"
    GROUPS = "policies"
    SUMMARY_KEYS = SUMMARY_KEYS

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        super().add_arguments(parser)
        add_arguments(parser.add_argument_group(
            "--method async (staleness-aware asynchronous PS, docs/design.md §5)"))

    def repeats(self) -> int:
        # --async-repeats predates --repeats; either sets the seeds
        return max(self.args.async_repeats, super().repeats())

    def validate(self) -> None:
        args = self.args
        self.kinds = parse_policies(args.policies)
        check_async_sgd(args)
        for what, v in (("--async-repeats", args.async_repeats),
                        ("--async-eval-every", args.async_eval_every)):
            if v < 1:
                raise ExperimentError(f"{what} must be >= 1, got {v}")
        if not (np.isfinite(args.async_step_ms) and args.async_step_ms >= 0):
            raise ExperimentError(f"--async-step-ms must be >= 0, got {args.async_step_ms}")
        if not 0 <= args.async_jitter < 1:
            raise ExperimentError(f"--async-jitter must be in [0, 1), got {args.async_jitter}")

    def check_hosts(self, graph: Any) -> None:
        super().check_hosts(graph)
        self.learners = self.worker_hosts(graph, self.args.workers)
        self.factors = parse_slow(self.args.async_slow, self.learners)

    def settings(self, run: Run) -> dict[str, Any]:
        args, learners = self.args, self.learners
        return {"topo": args.topo, "ps": args.ps, "learners": learners,
                "slowdown": dict(zip(learners, self.factors, strict=True)),
                "policies": list(self.kinds), "rounds": args.rounds,
                "budget_pushes": args.rounds * len(learners),
                "staleness_window": args.staleness_window, "soft_sync": args.soft_sync,
                "lr": args.async_lr, "model": args.model, "hidden": args.hidden,
                "batch_size": TrainConfig().batch_size, "bw_mbps": args.bw or None,
                "step_ms": args.async_step_ms, "jitter": args.async_jitter,
                "seeds": run.seeds, "eval_every": args.async_eval_every,
                "target_acc": args.async_target_acc, "kappa_mode": args.kappa_mode,
                "target": args.target}

    def prepare(self, run: Run) -> None:
        super().prepare(run)
        args, learners = self.args, self.learners
        # the push budget, and a timeout from what should take longest: compute or the PS link
        self.budget = budget = args.rounds * len(learners)
        self.n_params = Replica(TrainConfig(model=args.model, hidden=args.hidden,
                                            n_workers=len(learners)), 0).params.size
        self.compute_s = expected_duration(budget, max(args.async_step_ms / 1e3, 1e-3),
                                           self.factors)
        self.link_s = ps_link_seconds(budget, self.n_params, args.bw)
        self.timeout = max(120.0, 10 * max(self.compute_s, self.link_s))

    def headline(self, run: Run) -> str:
        args, learners, factors = self.args, self.learners, self.factors
        named = [h if f == 1 else f"{h}×{f:g}" for h, f in zip(learners, factors, strict=True)]
        line = (f"[bold]async PS[/] on {args.topo}: PS {args.ps}, learners "
                f"{', '.join(named)}; policies {', '.join(self.kinds)}, seeds {run.seeds}")
        if self.link_s > self.compute_s:
            line += (f"\n[yellow]note[/]: at {args.bw:g} Mbit/s the PS link needs "
                     f"≈{self.link_s:.0f} s for {self.budget} pushes of {self.n_params} values "
                     f"(compute ≈{self.compute_s:.0f} s): the network sets the pace (--bw 0 = "
                     "unshaped links)")
        return line

    def job(self, run: Run, trial: Trial, net: Any) -> AsyncJob:
        args, n = self.args, len(self.learners)
        train = TrainConfig(model=args.model, hidden=args.hidden, n_workers=n,
                            rounds=args.rounds, lr=args.async_lr, seed=trial.seed)
        job = AsyncJob(policy=trial.kind, train=train, n_workers=n, budget=self.budget,
                       lr=args.async_lr, soft_sync=args.soft_sync,
                       window=args.staleness_window, kappa_mode=args.kappa_mode,
                       ps_addr=(net.hosts[args.ps][0], ASYNC_TCP_PORT),
                       slowdown=self.factors, step_s=args.async_step_ms / 1e3,
                       jitter=args.async_jitter, eval_every=args.async_eval_every,
                       out_dir=str(trial.folder), start_file=str(trial.folder / "start"),
                       timeout_s=self.timeout)
        trial.folder.mkdir(parents=True, exist_ok=True)
        job.save(trial.folder / "job.json")
        return job

    def nodes(self, run: Run, trial: Trial, job: AsyncJob, net: Any) -> Launch:
        ps, job_file = self.args.ps, str(trial.folder / "job.json")
        task = run.progress.add_task(f"{trial.label}: pushes", total=job.budget)

        def on_line(host: str, line: str) -> None:
            if host == ps and line.startswith("pushes "):
                run.progress.update(task, completed=int(line.split()[1].split("/")[0]))

        return Launch(
            label=trial.label, out_dir=trial.folder,
            servers=[Node(ps, "workers.async_ps.ps_node", (job_file,))],
            nodes=[Node(h, "workers.async_ps.worker_node", (job_file, "--worker", str(i)))
                   for i, h in enumerate(self.learners)],
            start_file=Path(job.start_file) if job.start_file else None,
            timeout_s=job.timeout_s, on_line=on_line,
            server_exit="wait")  # the PS stops by itself after the last push it accepts

    def record(self, run: Run, trial: Trial, job: AsyncJob, net: Any,
               done: Launched) -> dict[str, Any]:
        ps, out = self.args.ps, trial.folder
        ps_report = json.loads((out / "ps.json").read_text())
        reports = [json.loads((out / f"worker{i}.json").read_text())
                   for i in range(len(self.learners))]
        rec = summarize_run(ps_report, reports, done.t_start, self.args.async_target_acc)
        rec["seed"] = trial.seed
        tor = net.mininet.plan.hosts[ps].neighbours[0]
        rec["ps_link_bytes"] = done.moved[(tor, ps)] + done.moved[(ps, tor)]
        return rec

    def plots(self, run: Run, results: dict[str, Any]) -> list[Path]:
        return plot_results(results, run.out_dir)

    def tables(self, run: Run, results: dict[str, Any]) -> list[Any]:
        return [summary_table(results)]
