"""One trial of ``run --method ndn`` (:mod:`controller.experiment.methods.ndn`) on its own
network: the NDN routers with the PS and the GPUs (:func:`run_ndn`), or the TCP PS baseline on
Linux bridges (:func:`run_tcp`); each returns its mode record."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.errors import ExperimentError
from controller.experiment.methods.bridged import run_schedule, start_bridges, summarize_run
from controller.experiment.methods.ndn.records import (
    async_summary,
    gpu_slowdowns,
    impair_text,
    ndn_rounds,
    router_configs,
    router_fields,
)
from controller.experiment.report import mean
from controller.experiment.runner import Launch, Node, Run
from workers.ndn.packets import n_segments

__all__ = ["TRAIN_NAME", "TCP_PORT", "PROBE", "run_ndn", "run_tcp"]

TRAIN_NAME = "train"
TCP_PORT = 47200
PROBE = {"k": 4.0, "min_s": 0.05, "max_s": 5.0}  # the probe timer's fixed parameters


def _tap_ifname(mininet: Any, ps: str) -> tuple[str, str]:
    tor = mininet.plan.hosts[ps].neighbours[0]
    return tor, f"{tor}-eth{mininet.plan.ports[tor][ps]}"


def run_ndn(run: Run, args: argparse.Namespace, graph: nx.Graph, workers: list[str],
            seed: int, folder: str) -> dict:
    """One NDN run with ``workers`` as GPUs; returns its mode record."""
    from topo.mininet_net import build_net, plan_network
    from topo.mininet_switch import SwitchStartError
    from workers.common.model import Replica, TrainConfig
    from workers.common.quantize import choose_frac_bits
    from workers.ndn.link import LinkTap
    from workers.ndn.switch import NdnRouterSwitch

    N = len(workers)
    label = f"ndn@{N}"
    run_dir = run.out_dir / folder
    run_dir.mkdir(parents=True, exist_ok=True)
    bw_unit = 1.0 if args.bw else None
    plan = plan_network(graph, bw_unit)
    hosts = [args.ps, *workers]
    cfgs = router_configs(graph, plan, hosts, args.ndn_cs, impair_text(args), run_dir)
    per_switch = {s: {"ndn_config": c, "config_path": str(run_dir / f"router-{s}.conf.json"),
                      "log_dir": str(run_dir)} for s, c in cfgs.items()}
    train = TrainConfig(model=args.model, hidden=args.hidden, n_workers=N, rounds=args.rounds,
                        seed=seed)
    n_params = Replica(train, 0).params.size
    grad_segs = n_segments(4 * n_params, args.ndn_seg_size)
    # generous: a lossy round may need a probe expiry, fetches and re-expressions
    timeout = max(60.0, args.round_timeout) * args.rounds
    job = {"ps": args.ps, "workers": workers, "train_name": TRAIN_NAME, "rounds": args.rounds,
           "train": {f: getattr(train, f) for f in train.__dataclass_fields__},
           "frac_bits": choose_frac_bits(8.0, N), "seg_size": args.ndn_seg_size,
           "lifetime_s": args.ndn_lifetime, "rto_s": args.ndn_rto,
           "probe": {**PROBE, "initial_s": args.ndn_probe_initial},
           "seed": seed, "timeout_s": timeout, "mode": args.ndn_mode,
           "slowdown": gpu_slowdowns(args.ndn_slow, workers), "step_s": args.ndn_step_ms / 1e3,
           "async": {"lr": args.async_lr, "policy": args.ndn_policy,
                     "window": args.staleness_window, "budget": args.rounds * N,
                     "soft_sync": args.soft_sync}
           if args.ndn_mode == "async" else None,
           "ifnames": {h: plan.hosts[h].interfaces[0] for h in hosts},
           "out_dir": str(run_dir), "start_file": str(run_dir / "start")}
    job_file = run_dir / "job.json"
    job_file.write_text(json.dumps(job, indent=1))
    run.console.print(f"[bold]{label}[/]: {len(plan.switches)} NDN routers, PS {args.ps}, "
                  f"{N} GPUs, gradient {n_params} values = {grad_segs} segments"
                  + (f", router ports impaired ({impair_text(args)})" if impair_text(args)
                     else ""))
    try:
        mininet = build_net(graph, NdnRouterSwitch, per_switch_opts=per_switch,
                            bw_unit_mbps=bw_unit)
    except SwitchStartError as exc:  # one line, the router's last log line included
        raise ExperimentError(f"{label}: {exc}") from None
    with run.network(mininet):  # stopping it makes the routers write their counters
        tor, tap_if = _tap_ifname(mininet, args.ps)
        tap = LinkTap(tap_if).start()
        try:
            total = args.rounds * N if args.ndn_mode == "async" else args.rounds
            reports, moved = _run_processes(run, mininet, job_file, run_dir, args.ps, workers,
                                            label, total, timeout)
        finally:
            tap_stats = tap.stop()
        tap_stats["kernel_bytes"] = moved[(args.ps, tor)]
    routers = {}
    for s in plan.switches:
        path = run_dir / f"router-{s}.json"
        if not path.exists():
            raise ExperimentError(f"{label}: router {s} wrote no counters "
                                  f"(see {run_dir}/{s}-ndn-router.log)")
        routers[s] = json.loads(path.read_text())
    ps_rep, worker_reps = reports
    if args.ndn_mode == "async":
        summary = async_summary(ps_rep, worker_reps, workers)
        return {
            "kind": "ndn", "ndn_mode": "async", "n_workers": N, "workers": workers,
            "rounds": [], "grad_values": n_params, "grad_segments": grad_segs,
            "policy": args.ndn_policy, "lr": args.async_lr, "window": args.staleness_window,
            "budget": job["async"]["budget"], "soft_sync": args.soft_sync, **summary,
            "recoveries": sum(g["recoveries"] for g in worker_reps),
            "probe_expiries": sum(g["probe_expiries"] for g in worker_reps),
            "retransmissions": sum(g["stats"]["retransmissions"] for g in worker_reps)
            + ps_rep["stats"]["retransmissions"],
            "ps": {k: ps_rep[k] for k in ("accepted", "declined", "estimates_s",
                                          "confirms_sent", "deletes_seen", "stats")},
            "tap": tap_stats, **router_fields(routers),
            "ps_link_bytes_total": moved[(tor, args.ps)] + moved[(args.ps, tor)],
        }
    from workers.common.model import train_synchronous
    from workers.common.quantize import quantize
    from workers.ndn.node import quantized_mean

    frac = job["frac_bits"]

    def qsync(grads: list[np.ndarray]) -> np.ndarray:
        return quantized_mean([quantize(g, frac, N).values.astype("<i4").tobytes()
                               for g in grads], frac)

    reference = train_synchronous(train, sync=qsync)
    rounds = ndn_rounds(ps_rep, worker_reps, reference.accuracy, tap_stats, moved, args.ps,
                        tor)
    import hashlib

    ref_sha = hashlib.sha256(reference.params.tobytes()).hexdigest()
    times = [r["time_s"] for r in rounds]
    return {
        "kind": "ndn", "ndn_mode": "sync", "n_workers": N, "workers": workers, "rounds": rounds,
        "grad_values": n_params, "grad_segments": grad_segs,
        "round_s_median": float(np.median(times)),
        "round_s_median_after_first": float(np.median(times[1:])) if len(times) > 1 else None,
        "dist_bytes_per_round": mean([r["dist_bytes"] for r in rounds]),
        "matches_reference": ps_rep["versions"][-1]["sha256"] == ref_sha,
        "reference_final_accuracy": reference.final_accuracy,
        "recoveries": sum(g["recoveries"] for g in worker_reps),
        "probe_expiries": sum(g["probe_expiries"] for g in worker_reps),
        "retransmissions": sum(g["stats"]["retransmissions"] for g in worker_reps)
        + ps_rep["stats"]["retransmissions"],
        "ps": {k: ps_rep[k] for k in ("accepted", "declined", "estimates_s", "confirms_sent",
                                      "deletes_seen", "stats")},
        "gpus": [{"gpu": g["worker"], **{k: g[k] for k in (
            "recoveries", "recovered_versions", "probe_expiries", "confirmations", "stats")}}
                 for g in worker_reps],
        "tap": tap_stats,
        **router_fields(routers),
        "ps_link_bytes_total": moved[(tor, args.ps)] + moved[(args.ps, tor)],
    }


def _run_processes(run: Run, mininet: Any, job_file: Path, run_dir: Path, ps: str,
                   workers: list[str], label: str, rounds: int, timeout: float
                   ) -> tuple[tuple[dict, list[dict]], dict[tuple[str, str], int]]:
    """PS + GPUs on the live network with a start barrier; returns their reports and the bytes
    moved per directed link."""
    task = run.progress.add_task(f"{label}: rounds/pushes", total=rounds)

    def on_line(host: str, line: str) -> None:
        if host == ps and line.startswith(("round ", "push ")):
            run.progress.advance(task)

    done = run.launch(mininet, Launch(
        label=label, out_dir=run_dir,
        servers=[Node(ps, "workers.ndn.node", (str(job_file), "--role", "ps"))],
        nodes=[Node(h, "workers.ndn.node", (str(job_file), "--role", "worker", "--index", str(i)))
               for i, h in enumerate(workers)],
        start_file=run_dir / "start",
        timeout_s=timeout, on_line=on_line,
        server_exit="stop", stop_timeout_s=10))  # it serves active fetches until the end
    if done.server_codes[ps] != 0 or not (run_dir / "ps.json").exists():
        raise ExperimentError(f"{label}: the PS failed: {done.procs.last_line(ps)} "
                              f"(see {done.procs.log_file})")
    ps_rep = json.loads((run_dir / "ps.json").read_text())
    worker_reps = [json.loads((run_dir / f"worker{i}.json").read_text())
                   for i in range(len(workers))]
    return (ps_rep, worker_reps), done.moved


def run_tcp(run: Run, args: argparse.Namespace, graph: nx.Graph, workers: list[str],
            seed: int, folder: str) -> dict:
    """The TCP PS baseline with ``workers`` (N unicast copies per round); its mode record."""
    from mininet.nodelib import LinuxBridge

    from topo.mininet_net import build_net
    from workers.collective.baselines import make_schedule
    from workers.common.model import Replica, TrainConfig
    from workers.common.quantize import choose_frac_bits
    from workers.ndn.link import LinkTap

    N = len(workers)
    P = N + 1
    label = f"tcp-ps@{N}"
    hosts = [args.ps, *workers]
    train = TrainConfig(model=args.model, hidden=args.hidden, n_workers=P, rounds=args.rounds,
                        seed=seed)
    n = Replica(train, 0).params.size
    spec = {"kind": "ps", "P": P, "ps": 0}
    schedule = make_schedule(spec, n)
    run.console.print(f"[bold]{label}[/]: Linux bridges, PS {args.ps} sends the sum to {N} "
                  "workers over TCP")
    bw_unit = 1.0 if args.bw else None
    with run.network(build_net(graph, LinuxBridge, bw_unit_mbps=bw_unit)) as mininet:
        start_bridges(mininet, graph)
        ips = [mininet.plan.hosts[h].ips for h in hosts]
        job = {"schedule": spec, "n_workers": P, "n_values": n, "frame_values": 65536,
               "timeout_s": max(60.0, args.round_timeout),
               "links": [[a, b, 0] for a, b in sorted({(t.src, t.dst)
                                                       for t in schedule.transfers()})],
               "ips": ips, "port": TCP_PORT,
               "train": {f: getattr(train, f) for f in train.__dataclass_fields__},
               "frac_bits": choose_frac_bits(8.0, P), "rounds": args.rounds,
               "out_dir": str(run.out_dir / folder),
               "start_file": str(run.out_dir / folder / "start")}
        tor, tap_if = _tap_ifname(mininet, args.ps)
        tap = LinkTap(tap_if).start()
        try:
            reports, moved, _wall = run_schedule(run, mininet, label, job, hosts)
        finally:
            tap_stats = tap.stop()
        nic_of = {(a, b): c for a, b, c in job["links"]}
        rec = summarize_run(label, "tcp-ps", job, schedule, nic_of, hosts, mininet.plan,
                            reports, moved, args.bw or None)
    R = args.rounds
    dist = tap_stats["bytes"].get("tcp-data", 0) / R
    for r in rec["rounds"]:
        r["dist_bytes"] = dist  # the tap does not split TCP bytes by round: the run's mean
        r["fetch_bytes"] = 0
        r["recovered"] = 0
        r["ps_tx_bytes"] = moved[(args.ps, tor)] / R
        r["params_equal"] = r["exact"]
    tap_stats["kernel_bytes"] = moved[(args.ps, tor)]
    times = [r["time_s"] for r in rec["rounds"]]
    return {"kind": "tcp-ps", "n_workers": N, "workers": workers, "servers": hosts,
            "rounds": rec["rounds"], "grad_values": n,
            "round_s_median": float(np.median(times)),
            "round_s_median_after_first": float(np.median(times[1:])) if len(times) > 1
            else None,
            "dist_bytes_per_round": dist, "tap": tap_stats,
            "ps_link_bytes_total": moved[(tor, args.ps)] + moved[(args.ps, tor)],
            "note": "the PS host is also server 0 of the schedule (computes a gradient); its "
                    "downlink carries the N unicast copies of the sum"}
