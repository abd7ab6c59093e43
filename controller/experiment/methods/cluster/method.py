"""``python -m controller run --method cluster``: clustered temporary parameter servers with
periodic re-election (docs/design.md §7) end to end over Mininet.

The network
    ``--topo`` (every switch runs ``p4src/ina.p4`` as a plain IPv4 router,
    :func:`controller.dataplane.deploy.routing_rules`, as for ``--method async``).  The node profile
    (``--cluster-profile``, :mod:`workers.cluster.features`) names the node hosts; each one's access
    link is shaped to its ``uplink_bw`` (period 0's value when the profile gives a pattern;
    as later periods start the node re-rates its own egress, :mod:`workers.cluster.node`, and
    the runner the switch's end when the node reports the previous period done), every other
    link -- the fabric and the central
    PS's access link -- to ``--bw`` (0 = unshaped) (:func:`topo.models.with_link_bw`).  CPU
    shares are emulated by compute delays (:mod:`workers.cluster.protocol` argues why, with a
    measurement of Mininet's CPULimitedHost on this machine).

What runs
    For every seed (``--seed`` … ``--seed + --cluster-repeats − 1``, or ``--repeats``) and every rule of
    ``--cluster-rules`` (interleaved seed by seed, so slow drifts of the shared machine's load hit
    every rule alike): one process per node on its host plus endpoint N on the ``--ps`` host
    (:mod:`workers.cluster.node`): the coordinator for ``contribution``/``average``, the
    central PS for ``central`` (the same host, so both runs put their extra endpoint on the same
    link and every host runs one process, as :class:`controller.experiment.host_processes.HostProcesses`
    expects).  ``--rounds`` is
    the number of batches (global rounds, the central-PS reference's rounds), cut into
    ``--rounds / --cluster-period`` exchange periods; temporary PSs are re-elected (and the
    nodes re-clustered) every ``--cluster-reelect`` periods.

Measured per rule and seed (``results/<run>/results.json``, ``method: "cluster"``)
    accuracy vs time (per period: wall time since the start barrier, mean test accuracy of the
    nodes and per cluster), per-round time (the slowest node's), bytes per directed link from the
    switch-side interface counters and the busiest link's bytes per round, next to the bytes
    the message pattern predicts (payload only: :func:`workers.cluster.sync.link_bytes`);
    the assignment of every period (clusters, temporary PSs, epoch, re-clustering), the
    coordinator's feature history, node vectors and silhouette per epoch, α and the
    accumulated contributions of every exchange; and whether every node's final parameters
    equal :func:`workers.cluster.sync.simulate`'s for the same clustering and seed, bit for bit.
    Then mean ± std over the seeds, and PNG plots (accuracy vs time and vs round per rule,
    busiest-link bytes per round).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controller.errors import ExperimentError, parse_name_list
from controller.experiment.methods.cluster.records import (
    SUMMARY_KEYS,
    predicted_link_bytes,
    summarize_run,
)
from controller.experiment.methods.cluster.report import plot_results, summary_table
from controller.experiment.network import ROOT
from controller.experiment.records import seed_summary
from controller.experiment.run_options import add_round_timeout
from controller.experiment.runner import Launch, Launched, Method, Node, Run, Trial
from topo.mininet_net import set_htb_rate
from workers.cluster.features import ProfileError, load_profile, mininet_limits
from workers.cluster.job import CLUSTER_TCP_PORT, ClusterJob, save_job_data
from workers.cluster.protocol import RULES, uplink_change
from workers.common.model import Replica, TrainConfig

__all__ = ["ClusterMethod", "parse_rules", "summarize_run", "aggregate", "predicted_link_bytes"]

DEFAULT_PROFILE = ROOT / "examples" / "profiles" / "hetero8.json"
DEFAULTS = {"rules": ",".join(RULES), "period": 5, "reelect": 2, "repeats": 1, "step_ms": 2.0,
            "normalization": "mean"}
MAX_TCLINK_MBPS = 1000.0  # Mininet's TCIntf refuses (and silently drops) larger htb rates


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """This method's own options besides the topology."""
    d = DEFAULTS
    g.add_argument("--cluster-profile", default=str(DEFAULT_PROFILE), metavar="FILE",
                   help="node profile (JSON): the node hosts, their features and weights "
                        "(default examples/profiles/hetero8.json)")
    g.add_argument("--cluster-k", type=int, default=None, metavar="K",
                   help="number of clusters (default: the best silhouette over 2..min(8, N-1))")
    g.add_argument("--cluster-period", type=int, default=d["period"], metavar="B",
                   help=f"batches per exchange period (default {d['period']})")
    g.add_argument("--cluster-reelect", type=int, default=d["reelect"], metavar="R",
                   help=f"re-cluster and re-elect the temporary PSs every R periods "
                        f"(default {d['reelect']})")
    g.add_argument("--cluster-rules", default=d["rules"], metavar="LIST",
                   help="comma list of contribution, average, central (default all three)")
    g.add_argument("--cluster-repeats", type=int, default=d["repeats"], metavar="N",
                   help="seeds per rule: --seed, --seed+1, ... (default 1; or --repeats)")
    g.add_argument("--cluster-step-ms", type=float, default=d["step_ms"], metavar="MS",
                   help="compute time of one batch with the whole machine; a node takes "
                        f"MS / cpu_share (default {d['step_ms']:g})")
    g.add_argument("--cluster-normalization", choices=("mean", "sum"),
                   default=d["normalization"],
                   help="alpha = mean positive cosine (default) or share of the row sum")


def parse_rules(text: str) -> tuple[str, ...]:
    """``--cluster-rules``: names of :data:`workers.cluster.protocol.RULES`, in order."""
    return parse_name_list(text, "--cluster-rules", RULES, "rule")


def aggregate(runs: list[dict]) -> dict[str, dict]:
    """Mean / std over the seeds of every summary figure."""
    return seed_summary(runs, SUMMARY_KEYS)


@dataclass
class ClusterTrial:
    """A trial's job and the downlinks the runner re-rated while it ran."""

    job: ClusterJob
    rerated: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ClusterMethod(Method):
    """Clustered temporary PSs with periodic re-election (module docstring): one trial per
    rule and seed on one routed network."""

    name = "cluster"
    help = "cluster: clustered temporary PSs"
    DEFAULT_WORKERS = None  # the profile names the nodes
    GROUPS = "rules"
    SUMMARY_KEYS = SUMMARY_KEYS
    TABLE_WIDTH = 130

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        super().add_arguments(parser)
        g = parser.add_argument_group(
            "--method cluster (clustered temporary PSs, docs/design.md §7)")
        add_round_timeout(g)  # a run may take --rounds x this
        add_arguments(g)

    def repeats(self) -> int:
        # --cluster-repeats predates --repeats; either sets the seeds
        return max(self.args.cluster_repeats, super().repeats())

    def validate(self) -> None:
        """The options and the profile, apart from the topology's hosts."""
        args = self.args
        self.kinds = parse_rules(args.cluster_rules)
        for what, v in (("--cluster-period", args.cluster_period),
                        ("--cluster-reelect", args.cluster_reelect),
                        ("--cluster-repeats", args.cluster_repeats)):
            if v < 1:
                raise ExperimentError(f"{what} must be >= 1, got {v}")
        if args.rounds % args.cluster_period:
            raise ExperimentError(f"--rounds {args.rounds} is not a multiple of "
                                  f"--cluster-period {args.cluster_period} (rounds = periods x "
                                  "batches per period)")
        if not (np.isfinite(args.cluster_step_ms) and args.cluster_step_ms >= 0):
            raise ExperimentError(f"--cluster-step-ms must be >= 0, got {args.cluster_step_ms}")
        if args.bw and args.bw > MAX_TCLINK_MBPS:
            raise ExperimentError(f"--bw {args.bw:g}: Mininet shapes links up to "
                                  f"{MAX_TCLINK_MBPS:g} Mbit/s (0 = unshaped)")
        try:
            self.profile = profile = load_profile(args.cluster_profile)
        except ProfileError as exc:
            raise ExperimentError(str(exc)) from None
        where, n = args.cluster_profile, len(profile.nodes)
        if n < 2:
            raise ExperimentError(f"{where}: the profile has {n} node; clustering needs >= 2")
        for node, opts in mininet_limits(profile).items():
            if opts.get("bw", 0) > MAX_TCLINK_MBPS:
                raise ExperimentError(f"{where}: node {node!r}: uplink_bw {opts['bw']:g} Mbit/s "
                                      f"exceeds what Mininet shapes ({MAX_TCLINK_MBPS:g})")
        if args.cluster_k is not None and not 1 <= args.cluster_k <= n:
            raise ExperimentError(f"--cluster-k must be in 1..{n} for {n} nodes, got "
                                  f"{args.cluster_k}")
        self.periods = args.rounds // args.cluster_period
        self.node_hosts = list(profile.nodes)

    def check_hosts(self, graph: Any) -> None:
        from topo.models import hosts

        where = self.args.cluster_profile
        missing = [h for h in self.profile.nodes if h not in hosts(graph)]
        if missing:
            raise ExperimentError(f"{where}: node {missing[0]!r} is not a host of "
                                  f"{self.args.topo}")
        super().check_hosts(graph)
        if self.args.ps in self.profile.nodes:
            raise ExperimentError(f"--ps {self.args.ps}: the central PS must not be one of the "
                                  f"profile's nodes ({where})")

    def host_links(self) -> dict[str, float]:
        """Every node's access link at the profile's uplink_bw (period 0's value)."""
        return {h: o["bw"] for h, o in mininet_limits(self.profile).items() if "bw" in o}

    def links_text(self) -> str:
        bw = self.args.bw
        return ("node uplinks from the profile, other links "
                + (f"{bw:g} Mbit/s" if bw else "unshaped"))

    def settings(self, run: Run) -> dict[str, Any]:
        args, profile = self.args, self.profile
        n_params = Replica(TrainConfig(model=args.model, hidden=args.hidden,
                                       n_workers=len(self.node_hosts)), 0).params.size
        limits = mininet_limits(profile)
        return {"topo": args.topo, "central_ps": args.ps, "profile": str(args.cluster_profile),
                "profile_name": profile.name, "nodes": list(profile.nodes),
                "features": list(profile.features), "weights": profile.weight_vector().tolist(),
                "uplink_mbps": {h: o.get("bw") for h, o in limits.items()},
                "cpu_share": {h: o.get("cpu") for h, o in limits.items()},
                "rules": list(self.kinds), "rounds": args.rounds, "periods": self.periods,
                "batches_per_period": args.cluster_period,
                "reelect_every": args.cluster_reelect, "k": args.cluster_k,
                "normalization": args.cluster_normalization, "step_ms": args.cluster_step_ms,
                "model": args.model, "hidden": args.hidden, "n_params": n_params,
                "grad_bytes": 4 * n_params, "batch_size": TrainConfig().batch_size,
                "lr": TrainConfig().lr, "bw_mbps": args.bw or None, "target": args.target,
                "seeds": run.seeds}

    def headline(self, run: Run) -> str:
        args = self.args
        return (f"[bold]clustered PS[/] on {args.topo}: nodes "
                f"{', '.join(self.node_hosts)} (profile {self.profile.name}), central PS "
                f"{args.ps}; {self.periods} periods x {args.cluster_period} batches, "
                f"re-election every {args.cluster_reelect}; rules "
                f"{', '.join(self.kinds)}, seeds {run.seeds}")

    def job(self, run: Run, trial: Trial, net: Any) -> ClusterTrial:
        args, nodes, n = self.args, self.node_hosts, len(self.node_hosts)
        trial.folder.mkdir(parents=True, exist_ok=True)
        hub_host = args.ps  # the central PS, or the coordinator (see module doc)
        train = TrainConfig(model=args.model, hidden=args.hidden, n_workers=n,
                            rounds=args.rounds, seed=trial.seed)
        job = ClusterJob(
            rule=trial.kind, train=train, workers=nodes, periods=self.periods,
            batches=args.cluster_period, reelect=args.cluster_reelect,
            profile=str(Path(args.cluster_profile).resolve()), seed=trial.seed,
            k=args.cluster_k, k_range=list(range(2, min(8, n - 1) + 1)),
            normalization=args.cluster_normalization, step_s=args.cluster_step_ms / 1e3,
            addrs=[(net.hosts[h][0], CLUSTER_TCP_PORT) for h in nodes]
            + [(net.hosts[hub_host][0], CLUSTER_TCP_PORT + 1)],
            interfaces=[net.mininet.plan.hosts[h].interfaces[0] for h in nodes],
            out_dir=str(trial.folder), start_file=str(trial.folder / "start"),
            timeout_s=args.round_timeout * args.rounds)
        save_job_data(job, trial.folder / "data.npz")
        job.save(trial.folder / "job.json")
        state = ClusterTrial(job)
        for h in job.workers:
            self._rerate(net, state, h, 0)  # a previous run may have left a pattern's other value
        return state

    def _rerate(self, net: Any, state: ClusterTrial, host: str, period: int) -> None:
        # the node re-rates its own egress as the period starts (workers.cluster.node); the
        # switch's end of its link is ours
        rate = uplink_change(self.profile, host, period)
        if rate is None or period >= state.job.periods:
            return
        plan = net.mininet.plan
        sw = plan.hosts[host].neighbours[0]
        try:
            set_htb_rate(f"{sw}-eth{plan.ports[sw][host]}", rate)
            state.rerated.append({"node": host, "period": period, "mbps": rate})
        except RuntimeError as exc:
            state.errors.append(f"{host}'s downlink: {exc}")

    def nodes(self, run: Run, trial: Trial, state: ClusterTrial, net: Any) -> Launch:
        job = state.job
        task = run.progress.add_task(f"{trial.label}: periods", total=job.periods)
        first = job.workers[0]

        def on_line(host: str, line: str) -> None:
            if not line.startswith("period "):
                return
            done = int(line.split()[1].split("/")[0])  # periods done = the one it just began
            self._rerate(net, state, host, done)
            if host == first:
                run.progress.update(task, completed=done)

        hub_role = "the central PS" if job.rule == "central" else "the coordinator"
        args = (str(trial.folder / "job.json"), "--index")
        return Launch(
            label=trial.label, out_dir=trial.folder,
            nodes=[Node(self.args.ps, "workers.cluster.node", (*args, str(job.n)))]
            + [Node(h, "workers.cluster.node", (*args, str(i)))
               for i, h in enumerate(job.workers)],
            nodes_what="the nodes", failed_what=f"a node or {hub_role}",
            start_file=Path(job.start_file) if job.start_file else None,
            timeout_s=job.timeout_s, count_from="start", on_line=on_line)

    def record(self, run: Run, trial: Trial, state: ClusterTrial, net: Any,
               done: Launched) -> dict[str, Any]:
        job, out = state.job, trial.folder
        if state.errors:
            raise ExperimentError(f"{trial.label}: re-rating {state.errors[0]}")
        reports = [json.loads((out / f"node{i}.json").read_text()) for i in range(job.n)]
        hub = json.loads((out / "hub.json").read_text())
        params = []
        for i in range(job.n):
            with np.load(out / f"node{i}.npz") as f:
                params.append(f["params"])
        rec = summarize_run(trial.kind, trial.seed, job, reports, hub, done.t_start, done.moved,
                            self.graph, self.args.ps, params)
        rec["downlink_rates"] = state.rerated
        return rec

    def results(self, run: Run) -> dict[str, Any]:
        results = super().results(run)
        rules = results["rules"]
        if "central" in rules:
            central = rules["central"]["summary"]["busiest_link_bytes_per_round"]["mean"]
            results["busiest_link_vs_central"] = {
                r: rules[r]["summary"]["busiest_link_bytes_per_round"]["mean"] / central
                for r in rules}
        return results

    def plots(self, run: Run, results: dict[str, Any]) -> list[Path]:
        return plot_results(results, run.out_dir)

    def tables(self, run: Run, results: dict[str, Any]) -> list[Any]:
        return [summary_table(results)]
