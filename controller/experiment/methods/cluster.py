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
from pathlib import Path
from typing import Any

import numpy as np

from controller.errors import ExperimentError, parse_name_list
from controller.experiment.network import ROOT, check_environment, start_routed_network
from controller.experiment.records import format_stats, seed_stats
from controller.experiment.report import print_table, print_written
from controller.experiment.runner import Launch, Method, Node, Run
from topo.mininet_net import set_htb_rate
from workers.cluster.features import NodeProfile, ProfileError, load_profile, mininet_limits
from workers.cluster.job import CLUSTER_TCP_PORT, ClusterJob, save_job_data
from workers.cluster.protocol import RULES, uplink_change
from workers.common.model import Replica, TrainConfig

__all__ = ["ClusterMethod", "parse_rules", "validate", "summarize_run",
           "aggregate", "predicted_link_bytes"]

DEFAULT_PROFILE = ROOT / "examples" / "profiles" / "hetero8.json"
DEFAULTS = {"rules": ",".join(RULES), "period": 5, "reelect": 2, "repeats": 1, "step_ms": 2.0,
            "normalization": "mean"}
MAX_TCLINK_MBPS = 1000.0  # Mininet's TCIntf refuses (and silently drops) larger htb rates
COLOURS = {"contribution": "tab:green", "average": "tab:blue", "central": "tab:red"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """This method's own options (the shared ones belong to ``run``)."""
    d = DEFAULTS
    g = p.add_argument_group("--method cluster (clustered temporary PSs, docs/design.md §7)")
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
                   help="seeds per rule: --seed, --seed+1, ... (default 1)")
    g.add_argument("--cluster-step-ms", type=float, default=d["step_ms"], metavar="MS",
                   help="compute time of one batch with the whole machine; a node takes "
                        f"MS / cpu_share (default {d['step_ms']:g})")
    g.add_argument("--cluster-normalization", choices=("mean", "sum"),
                   default=d["normalization"],
                   help="alpha = mean positive cosine (default) or share of the row sum")


# ------------------------------------------------------------------ pure helpers


def parse_rules(text: str) -> tuple[str, ...]:
    return parse_name_list(text, "--cluster-rules", RULES, "rule")


def validate(args: argparse.Namespace, host_names: list[str]) -> tuple[tuple[str, ...],
                                                                      NodeProfile, int]:
    """Check the options against the topology's hosts; (rules, profile, periods)."""
    rules = parse_rules(args.cluster_rules)
    for what, v in (("--rounds", args.rounds), ("--cluster-period", args.cluster_period),
                    ("--cluster-reelect", args.cluster_reelect),
                    ("--cluster-repeats", args.cluster_repeats)):
        if v < 1:
            raise ExperimentError(f"{what} must be >= 1, got {v}")
    if args.rounds % args.cluster_period:
        raise ExperimentError(f"--rounds {args.rounds} is not a multiple of --cluster-period "
                              f"{args.cluster_period} (rounds = periods x batches per period)")
    if not (np.isfinite(args.cluster_step_ms) and args.cluster_step_ms >= 0):
        raise ExperimentError(f"--cluster-step-ms must be >= 0, got {args.cluster_step_ms}")
    if args.bw is not None and args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    if args.bw and args.bw > MAX_TCLINK_MBPS:
        raise ExperimentError(f"--bw {args.bw:g}: Mininet shapes links up to "
                              f"{MAX_TCLINK_MBPS:g} Mbit/s (0 = unshaped)")
    try:
        profile = load_profile(args.cluster_profile)
    except ProfileError as exc:
        raise ExperimentError(str(exc)) from None
    where = args.cluster_profile
    n = len(profile.nodes)
    if n < 2:
        raise ExperimentError(f"{where}: the profile has {n} node; clustering needs >= 2")
    missing = [h for h in profile.nodes if h not in host_names]
    if missing:
        raise ExperimentError(f"{where}: node {missing[0]!r} is not a host of {args.topo}")
    if args.ps not in host_names:
        raise ExperimentError(f"--ps {args.ps}: not a host of {args.topo}")
    if args.ps in profile.nodes:
        raise ExperimentError(f"--ps {args.ps}: the central PS must not be one of the profile's "
                              f"nodes ({where})")
    for node, opts in mininet_limits(profile).items():
        if opts.get("bw", 0) > MAX_TCLINK_MBPS:
            raise ExperimentError(f"{where}: node {node!r}: uplink_bw {opts['bw']:g} Mbit/s "
                                  f"exceeds what Mininet shapes ({MAX_TCLINK_MBPS:g})")
    if args.cluster_k is not None and not 1 <= args.cluster_k <= n:
        raise ExperimentError(f"--cluster-k must be in 1..{n} for {n} nodes, got {args.cluster_k}")
    return rules, profile, args.rounds // args.cluster_period


def predicted_link_bytes(graph: Any, rule: str, hosts: list[str], periods: list[dict],
                         batches: int, grad_bytes: float, central_ps: str
                         ) -> dict[tuple[str, str], float]:
    """Payload bytes per directed link of the run's message pattern (gradients, updates and
    exchanged averages; not headers, features, assignments or handovers)."""
    from workers.cluster.sync import (
        central_period_messages,
        cluster_period_messages,
    )
    from workers.cluster.sync import (
        link_bytes as pattern_bytes,
    )

    msgs: list[tuple[str, str, float]] = []
    for rec in periods:
        if rule == "central":
            msgs += central_period_messages(hosts, central_ps, batches, grad_bytes)
            continue
        labels, ps = rec["labels"], rec["all_ps"]
        members = [[hosts[i] for i, lab in enumerate(labels) if lab == c]
                   for c in range(len(ps))]
        msgs += cluster_period_messages(members, [hosts[s] for s in ps], batches, grad_bytes)
    return pattern_bytes(graph, msgs)


def _busiest(loads: dict[tuple[str, str], float]) -> tuple[tuple[str, str], float]:
    from workers.cluster.sync import busiest_link

    return busiest_link(loads)


def summarize_run(rule: str, seed: int, job: ClusterJob, reports: list[dict], hub: dict,
                  t_start: float, moved: dict[tuple[str, str], int], graph: Any,
                  central_ps: str, params: list[np.ndarray]) -> dict[str, Any]:
    """One run's figures from its processes' reports (times relative to ``t_start``)."""
    from workers.cluster.sync import simulate

    P, B, N = job.periods, job.batches, job.n
    rounds_total = P * B
    curve = []
    for p in range(P):
        recs = [r["periods"][p] for r in reports]
        k = max(x["cluster"] for x in recs) + 1
        per_cluster = [float(np.mean([x["accuracy"] for x in recs if x["cluster"] == c]))
                       for c in range(k)]
        curve.append({"period": p, "round": (p + 1) * B,
                      "time_s": max(x["time"] for x in recs) - t_start,
                      "accuracy": float(np.mean([x["accuracy"] for x in recs])),
                      "cluster_accuracy": per_cluster})
    ends = [max(r["rounds"][i]["time"] for r in reports) for i in range(rounds_total)]
    round_times = [e - s for s, e in zip([t_start, *ends[:-1]], ends, strict=True)]
    assignments = []
    for p in range(P):
        recs = [r["periods"][p] for r in reports]
        first = recs[0]
        if any((x["labels"], x["all_ps"]) != (first["labels"], first["all_ps"]) for x in recs):
            raise ExperimentError(f"{rule} seed {seed}: nodes disagree on the clustering of "
                                  f"period {p}")
        assignments.append({"period": p, "epoch": first["epoch"], "labels": first["labels"],
                            "ps": first["all_ps"] if rule != "central" else [central_ps],
                            "ps_hosts": [job.workers[s] for s in first["all_ps"]]
                            if rule != "central" else [central_ps],
                            "new_epoch": first["new_epoch"], "reset": first["reset"]})
    contributions = []
    if rule != "central":
        logs = {(e["period"], e["cluster"]): e for r in reports for e in r["ps_log"]}
        for a in assignments:
            k = len(a["ps"])
            rows = [logs.get((a["period"], c)) for c in range(k)]
            contributions.append({
                "period": a["period"],
                "alpha": [x["alpha"] if x else None for x in rows],
                "accumulated": [x["contributions"] if x else None for x in rows]})
    total = sum(moved.values())
    busiest = max(moved, key=lambda lk: moved[lk])
    pred = predicted_link_bytes(graph, rule, job.workers, reports[0]["periods"],
                                B, 4.0 * params[0].size, central_ps)
    pred_link, pred_bytes = _busiest(pred)
    # Re-election moves the PS load between hosts, so the whole-run busiest link is lighter than
    # the busiest link of one period: the latter (payload) is reported too.
    peak = max(_busiest(predicted_link_bytes(graph, rule, job.workers, [rec], B,
                                             4.0 * params[0].size, central_ps))[1]
               for rec in reports[0]["periods"]) / B
    # Bit-exactness against the in-process simulation (same partition in every period).
    sim_match = None
    labels = assignments[0]["labels"]
    if all(a["labels"] == labels for a in assignments):
        sim = simulate(job.train, labels, rule, P, B, job.reelect,  # type: ignore[arg-type]
                       seed=job.seed, normalization=job.normalization,  # type: ignore[arg-type]
                       include_current=job.include_current)
        sim_match = all(np.array_equal(a, b) for a, b in zip(params, sim.params, strict=True))
        if rule != "central":
            sim_match = sim_match and [list(x) for x in sim.ps] == [a["ps"] for a in assignments]
    members_identical = all(
        np.array_equal(params[i], params[j])
        for a in assignments[-1:] for i in range(N) for j in range(N)
        if a["labels"][i] == a["labels"][j])
    return {
        "seed": seed,
        "final_accuracy": curve[-1]["accuracy"],
        "duration_s": curve[-1]["time_s"],
        "round_time_s_median": float(np.median(round_times)),
        "busiest_link": list(busiest),
        "busiest_link_bytes_per_round": moved[busiest] / rounds_total,
        "predicted_busiest_link": list(pred_link),
        "predicted_busiest_link_bytes_per_round": pred_bytes / rounds_total,
        "predicted_peak_period_busiest_bytes_per_round": peak,
        "bytes_per_round_all_links": total / rounds_total,
        "matches_simulation": sim_match,
        "members_identical": members_identical,
        "curve": curve,
        "rounds": [{"round": i, "time_s": t, "loss": float(np.mean([r["rounds"][i]["loss"]
                                                                    for r in reports]))}
                   for i, t in enumerate(round_times)],
        "assignments": assignments,
        "epochs": hub.get("epochs", []),
        "feature_history": hub.get("history"),
        "contributions": contributions,
        "sent_bytes_by_message": _sum_dicts([r["sent_bytes"] for r in [*reports, hub]]),
        "link_bytes": {f"{a}->{b}": v for (a, b), v in sorted(moved.items()) if v},
    }


def _sum_dicts(ds: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in ds:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


SUMMARY_KEYS = ("final_accuracy", "duration_s", "round_time_s_median",
                "busiest_link_bytes_per_round", "predicted_busiest_link_bytes_per_round",
                "predicted_peak_period_busiest_bytes_per_round", "bytes_per_round_all_links")


def aggregate(runs: list[dict]) -> dict[str, dict]:
    """Mean / std over the seeds of every summary figure."""
    return {k: seed_stats([r[k] for r in runs]) for k in SUMMARY_KEYS}


# ------------------------------------------------------------------ I/O


def run_once(run: Run, mininet: Any, job: ClusterJob, hub_host: str, label: str
             ) -> tuple[list[dict], dict, float, dict, list[np.ndarray], list[dict]]:
    """One run on the live network: (node reports, hub report, start time, bytes moved per
    directed link, final parameters per node, downlinks re-rated by the profile's patterns)."""
    out_dir = Path(job.out_dir)
    job_file = out_dir / "job.json"
    job.save(job_file)
    task = run.progress.add_task(f"{label}: periods", total=job.periods)
    first = job.workers[0]
    profile = load_profile(job.profile)
    rerate_errors: list[str] = []
    rerated: list[dict] = []

    def rerate_downlink(host: str, period: int) -> None:
        # the node re-rates its own egress as the period starts (workers.cluster.node); the
        # switch's end of its link is ours
        rate = uplink_change(profile, host, period)
        if rate is None or period >= job.periods:
            return
        sw = mininet.plan.hosts[host].neighbours[0]
        try:
            set_htb_rate(f"{sw}-eth{mininet.plan.ports[sw][host]}", rate)
            rerated.append({"node": host, "period": period, "mbps": rate})
        except RuntimeError as exc:
            rerate_errors.append(f"{host}'s downlink: {exc}")

    def on_line(host: str, line: str) -> None:
        if not line.startswith("period "):
            return
        done = int(line.split()[1].split("/")[0])  # periods done = the one it just began
        rerate_downlink(host, done)
        if host == first:
            run.progress.update(task, completed=done)

    for h in job.workers:
        rerate_downlink(h, 0)  # a previous run may have left a pattern's other value

    hub_role = "the central PS" if job.rule == "central" else "the coordinator"
    args = (str(job_file), "--index")
    done = run.launch(mininet, Launch(
        label=label, out_dir=out_dir,
        nodes=[Node(hub_host, "workers.cluster.node", (*args, str(job.n)))]
        + [Node(h, "workers.cluster.node", (*args, str(i))) for i, h in enumerate(job.workers)],
        nodes_what="the nodes", failed_what=f"a node or {hub_role}",
        start_file=Path(job.start_file) if job.start_file else None,
        timeout_s=job.timeout_s, count_from="start", on_line=on_line))
    t_start, moved = done.t_start, done.moved
    if rerate_errors:
        raise ExperimentError(f"{label}: re-rating {rerate_errors[0]}")
    reports = [json.loads((out_dir / f"node{i}.json").read_text()) for i in range(job.n)]
    hub = json.loads((out_dir / "hub.json").read_text())
    params = []
    for i in range(job.n):
        with np.load(out_dir / f"node{i}.npz") as f:
            params.append(f["params"])
    return reports, hub, t_start, moved, params, rerated


def _settings(args: argparse.Namespace, rules: tuple[str, ...], profile: NodeProfile,
              periods: int, n_params: int) -> dict[str, Any]:
    limits = mininet_limits(profile)
    return {"topo": args.topo, "central_ps": args.ps, "profile": str(args.cluster_profile),
            "profile_name": profile.name, "nodes": list(profile.nodes),
            "features": list(profile.features), "weights": profile.weight_vector().tolist(),
            "uplink_mbps": {h: o.get("bw") for h, o in limits.items()},
            "cpu_share": {h: o.get("cpu") for h, o in limits.items()},
            "rules": list(rules), "rounds": args.rounds, "periods": periods,
            "batches_per_period": args.cluster_period, "reelect_every": args.cluster_reelect,
            "k": args.cluster_k, "normalization": args.cluster_normalization,
            "step_ms": args.cluster_step_ms, "model": args.model, "hidden": args.hidden,
            "n_params": n_params, "grad_bytes": 4 * n_params,
            "batch_size": TrainConfig().batch_size, "lr": TrainConfig().lr,
            "bw_mbps": args.bw or None, "target": args.target,
            "seeds": [args.seed + r for r in range(args.cluster_repeats)]}


class ClusterMethod(Method):
    """Clustered temporary PSs with periodic re-election (module docstring)."""

    name = "cluster"
    help = "cluster: clustered temporary PSs"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def repeats(self) -> int:
        # --cluster-repeats predates --repeats; either sets the seeds
        return max(self.args.cluster_repeats, super().repeats())

    def prepare(self, run: Run) -> None:
        from topo.models import hosts as host_names
        from topo.models import parse_topology, with_link_bw

        args = self.args
        graph0 = parse_topology(args.topo)
        self.rules, self.profile, self.periods = validate(args, host_names(graph0))
        check_environment(args.target)
        uplinks = {h: o["bw"] for h, o in mininet_limits(self.profile).items() if "bw" in o}
        self.graph = with_link_bw(graph0, args.bw or None, uplinks)
        self.nodes = list(self.profile.nodes)
        n_params = Replica(TrainConfig(model=args.model, hidden=args.hidden,
                                       n_workers=len(self.nodes)), 0).params.size
        run.settings = _settings(args, self.rules, self.profile, self.periods, n_params)
        run.settings["seeds"] = run.seeds
        run.stats_in = "rules"
        run.partial_document = lambda: self.results(run)

    def execute(self, run: Run) -> None:
        args, console, nodes, out_dir = self.args, run.console, self.nodes, run.out_dir
        n = len(nodes)
        console.print(f"[bold]clustered PS[/] on {args.topo}: nodes {', '.join(nodes)} "
                      f"(profile {self.profile.name}), central PS {args.ps}; {self.periods} "
                      f"periods x {args.cluster_period} batches, re-election every "
                      f"{args.cluster_reelect}; rules {', '.join(self.rules)}, seeds "
                      f"{run.seeds}")
        mininet, addrs = start_routed_network(
            self.graph, args.target, out_dir / "build", console, 1.0,
            "node uplinks from the profile, other links "
            + (f"{args.bw:g} Mbit/s" if args.bw else "unshaped"))
        with run.network(mininet):
            for rep, seed in enumerate(run.seeds):
                train = TrainConfig(model=args.model, hidden=args.hidden, n_workers=n,
                                    rounds=args.rounds, seed=seed)
                for rule in self.rules:
                    label = f"{rule} seed {seed}"
                    run_dir = out_dir / f"{rule}-seed{seed}"
                    run_dir.mkdir(parents=True, exist_ok=True)
                    hub_host = args.ps  # the central PS, or the coordinator (see module doc)
                    job = ClusterJob(
                        rule=rule, train=train, workers=nodes, periods=self.periods,
                        batches=args.cluster_period, reelect=args.cluster_reelect,
                        profile=str(Path(args.cluster_profile).resolve()), seed=seed,
                        k=args.cluster_k, k_range=list(range(2, min(8, n - 1) + 1)),
                        normalization=args.cluster_normalization,
                        step_s=args.cluster_step_ms / 1e3,
                        addrs=[(addrs[h][0], CLUSTER_TCP_PORT) for h in nodes]
                        + [(addrs[hub_host][0], CLUSTER_TCP_PORT + 1)],
                        interfaces=[mininet.plan.hosts[h].interfaces[0] for h in nodes],
                        out_dir=str(run_dir), start_file=str(run_dir / "start"),
                        timeout_s=args.round_timeout * args.rounds)
                    save_job_data(job, run_dir / "data.npz")
                    reports, hub, t0, moved, params, rerated = run_once(
                        run, mininet, job, hub_host, label)
                    rec = summarize_run(rule, seed, job, reports, hub, t0, moved, self.graph,
                                        args.ps, params)
                    rec["downlink_rates"] = rerated
                    run.record(label, {**rec, "rule": rule}, rep)

    def results(self, run: Run) -> dict[str, Any]:
        runs: dict[str, list[dict]] = {r: [] for r in self.rules}
        for rep in run.repeats:
            for rec in rep.values():  # the key a run is filed under names its rule
                runs[rec["rule"]].append({k: v for k, v in rec.items() if k != "rule"})
        rules = [r for r in self.rules if runs[r]]
        results: dict[str, Any] = {
            "run": run.name, "method": "cluster", "settings": run.settings,
            "rules": {r: {"summary": aggregate(runs[r]), "runs": runs[r]} for r in rules}}
        if "central" in rules:
            central = results["rules"]["central"]["summary"]["busiest_link_bytes_per_round"][
                "mean"]
            results["busiest_link_vs_central"] = {
                r: results["rules"][r]["summary"]["busiest_link_bytes_per_round"]["mean"]
                / central for r in rules}
        return results

    def report(self, run: Run, results: dict[str, Any]) -> None:
        plots = plot_results(results, run.out_dir)
        print_table(run.console, summary_table(results), 130)
        print_written(run.console, run.out_dir, plots)


# ------------------------------------------------------------------ report


def summary_table(results: dict) -> Any:
    from rich.table import Table

    s = results["settings"]
    table = Table(title=f"clustered PS {results['run']}: {len(s['nodes'])} nodes, "
                        f"{s['periods']} periods x {s['batches_per_period']} batches, "
                        f"re-elect every {s['reelect_every']}, seeds {s['seeds']} (mean±std)")
    table.caption = ("busiest link: measured bytes on the most loaded directed link per round "
                     "(interface counters); predicted: payload of the message pattern.")
    for col in ("rule", "final acc", "run s", "round s (median)", "busiest link B/round",
                "predicted B/round", "vs central", "= simulation"):
        table.add_column(col, justify="left" if col == "rule" else "right")
    ratio = results.get("busiest_link_vs_central", {})
    for rule, d in results["rules"].items():
        m = d["summary"]
        match = [r["matches_simulation"] for r in d["runs"]]
        table.add_row(rule, format_stats(m["final_accuracy"], 4), format_stats(m["duration_s"], 2),
                      format_stats(m["round_time_s_median"], 3),
                      format_stats(m["busiest_link_bytes_per_round"], 0),
                      format_stats(m["predicted_busiest_link_bytes_per_round"], 0),
                      f"{ratio[rule]:.2f}" if rule in ratio else "—",
                      "yes" if all(match) else ("no" if False in match else "—"))
    return table


def plot_results(results: dict, out_dir: Path) -> list[Path]:
    """Accuracy vs time and vs round (one line per seed, one colour per rule) and the
    busiest link's bytes per round (mean ± std over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for xkey, xlabel, fname in (("time_s", "wall time (s)", "accuracy_vs_time.png"),
                                ("round", "round (batches)", "accuracy_vs_round.png")):
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        for rule, d in results["rules"].items():
            for k, run in enumerate(d["runs"]):
                c = run["curve"]
                ax.plot([0] + [e[xkey] for e in c], [None] + [e["accuracy"] for e in c],
                        color=COLOURS.get(rule), marker="o", ms=3, alpha=0.8, lw=1.2,
                        label=rule if k == 0 else None)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (mean over nodes)")
        ax.grid(True, alpha=0.3)
        ax.legend()
        ax.set_title(f"accuracy vs {xlabel.split(' (')[0]} (one line per seed)", fontsize=10)
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    rules = list(results["rules"])
    for x, rule in enumerate(rules):
        m = results["rules"][rule]["summary"]
        ax.bar(x - 0.2, m["busiest_link_bytes_per_round"]["mean"], 0.4,
               yerr=m["busiest_link_bytes_per_round"]["std"], color=COLOURS.get(rule),
               label="measured" if x == 0 else None)
        ax.bar(x + 0.2, m["predicted_busiest_link_bytes_per_round"]["mean"], 0.4,
               color=COLOURS.get(rule), alpha=0.4, label="payload (predicted)" if x == 0 else None)
    ax.set_xticks(range(len(rules)), rules)
    ax.set_ylabel("bytes on the busiest link per round")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "busiest_link_bytes.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
