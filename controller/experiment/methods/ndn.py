"""``python -m controller run --method ndn``: the NDN transport with persistent-PIT routers
(docs/design.md §6) end to end over Mininet, against a TCP PS that sends N unicast copies.

What runs, for each worker count N (``--workers``, or every count of ``--ndn-sweep``)
    * ``ndn``: every switch of ``--topo`` is an NDN router (:class:`workers.ndn.switch.NdnRouterSwitch`
      running :mod:`workers.ndn.router_node`: FIB, PIT, persistent PIT, optional CS), with the
      FIB the controller computes from shortest paths (:func:`workers.ndn.link.fib_routes`,
      prefix ``/<host>`` per PS and GPU) and ``--loss/--dup/--reorder`` injected on every router
      port by :mod:`pyswitch.impairment` (both directions, as the INA experiment's ``--loss``
      on pyswitch ports: a frame crossing a router-router link meets the probability twice,
      a host link once; on a fat-tree the PS-to-GPU path has 10 such draws).  The PS (``--ps``) and one GPU per worker host run
      :mod:`workers.ndn.node` (docs/design.md §6 steps 1-9 from :mod:`workers.ndn.protocol`), training the
      real model for ``--rounds`` synchronous rounds.
    * ``tcp-ps`` (``--ndn-baseline tcp``): the same hosts on the same graph and link speeds,
      switches as Linux bridges with static forwarding (:func:`controller.experiment.methods.bridged.
      start_bridges`), running the BCube experiment's single-PS schedule
      (:func:`workers.collective.baselines.ps_schedule` in
      :mod:`workers.collective.worker_node`): every worker pushes its gradient to the PS over TCP, the PS sends the sum back to each of the N
      workers -- N unicast copies per round.  In that schedule the PS host also computes a
      gradient (it is server 0 of N+1); that changes nothing on its downlink, which carries
      exactly the N copies.

Async mode (``--ndn-mode async``; :mod:`workers.ndn.protocol`'s module docstring has the design)
    The PS applies every gradient on arrival with ``--ndn-policy`` (async: eta, sigma:
    eta/sigma, kappa: eta/kappa; eta ``--async-lr``, window ``--staleness-window``; the docs/design.md §5
    PS of :mod:`workers.async_ps.core`, plain SGD; soft-sync size ``--soft-sync C``) and publishes
    one version per C pushes on ``/distribute/<ps>/<train>/v=<version>`` until ``--rounds`` x
    GPUs pushes (a multiple of C; C <= GPUs); collection
    Interests name each GPU's push sequence number.  ``--ndn-slow``/``--ndn-step-ms`` make
    GPUs heterogeneous (both modes).  Reported: every push (GPU, version trained from, version
    made, sigma, staleness = versions missed, kappa, scale), per-GPU staleness histograms, test
    accuracy after every update vs updates and time, GPUs' parameters checked against the
    PS's (sha256); no TCP baseline (it is synchronous) and no bit-exact reference (the
    interleaving depends on timing).

Measured on the PS's link (the switch-side end, root namespace)
    A tap (:class:`workers.ndn.link.LinkTap`) classifies every frame the PS host sends:
    distribution Data per version, fetch Data (active-fetch answers), Interests, other Data;
    TCP segments with payload and pure ACKs.  ``dist_bytes`` per round is the distribution
    (NDN: the ``/distribute/.../v=r+1`` frames; TCP: the PS's payload-carrying segments, which in
    the PS schedule are only the N copies of the sum); the bytes ratio TCP/NDN is the must-show
    (≈ N).  The kernel's counters of every link (:func:`controller.experiment.network.
    interface_counters`) give ``ps_rx_bytes``, ``ps_tx_bytes`` and the busiest link, and check
    the tap (its total must equal the kernel's count of the same interface).

Checked
    Every GPU's parameters of every version equal the PS's (sha256), and the PS's parameters
    equal those of the one-process reference with the same quantized sync, bit for bit
    (``exact``); under loss, every round completes and ``recoveries`` counts the distributions a
    GPU completed by active fetch after its probe timer fired.  Router counters of every table
    (and the persistent PIT at exit: empty once every GPU unsubscribed) come from the routers'
    exit reports.

Outputs: ``results/<run>/results.json`` (``method: "ndn"``; ``modes`` ``ndn@N`` and
``tcp-ps@N`` with per-round records in the INA experiment's keys plus ``dist_bytes``,
``fetch_bytes``, ``recovered``; ``comparison`` per N; ``routers``), PNG plots
(:func:`controller.experiment.report.plot_modes` plus distribution bytes per round and the ratio vs N).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.errors import ExperimentError
from controller.experiment.methods.bridged import run_schedule, start_bridges, summarize_run
from controller.experiment.methods.common import parse_slow, staleness_histogram
from controller.experiment.methods.ndn_plots import plot_distribution, report_async
from controller.experiment.network import check_environment
from controller.experiment.report import mean, plot_modes, summary_table
from controller.experiment.runner import Launch, Method, Node, Run
from controller.plan.document import resolve_workers
from workers.async_ps.core import POLICIES
from workers.ndn.packets import DEFAULT_SEG_SIZE, n_segments
from workers.ndn.protocol import MODES

__all__ = ["NdnMethod", "parse_sweep", "router_configs", "ndn_rounds",
           "comparison", "sum_counters", "router_fields", "async_summary", "gpu_slowdowns"]

BASELINES = ("tcp", "none")
TRAIN_NAME = "train"
TCP_PORT = 47200
DEFAULTS = {"rto": 0.2, "lifetime": 2.0, "probe_initial": 1.0, "probe_k": 4.0,
            "probe_min": 0.05, "probe_max": 5.0}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """This method's own options (the shared ones belong to ``run``)."""
    d = DEFAULTS
    g = p.add_argument_group("--method ndn (NDN transport with persistent-PIT routers, "
                             "docs/design.md §6)")
    g.add_argument("--ndn-baseline", choices=BASELINES, default=None,
                   help="tcp: also run a TCP PS sending N unicast copies on the same network "
                        "(default in sync mode); none: NDN only (default in async mode)")
    g.add_argument("--ndn-mode", choices=MODES, default="sync",
                   help="sync: the PS waits for every GPU each round (default); async: every "
                        "gradient is applied on arrival with --ndn-policy and makes a version "
                        "(docs/design.md §5 PS; --rounds x GPUs pushes in all)")
    g.add_argument("--ndn-policy", choices=POLICIES, default="kappa",
                   help="async: eta for every gradient (async), eta/sigma or eta/kappa "
                        "(default kappa); eta is --async-lr, the window --staleness-window")
    g.add_argument("--ndn-slow", default="", metavar="SPEC",
                   help="GPU slow-downs, both modes: HOST:FACTOR,... or KxFACTOR = the last K "
                        "GPUs FACTOR times slower (default none)")
    g.add_argument("--ndn-step-ms", type=float, default=0.0, metavar="MS",
                   help="nominal compute time of one gradient, before the slow-down (default 0 "
                        "= the real compute time)")
    g.add_argument("--ndn-sweep", default="", metavar="N,N,...",
                   help="worker counts to run one after the other (e.g. 4,8,12: the first N "
                        "hosts besides the PS); default: --workers")
    g.add_argument("--ndn-seg-size", type=int, default=DEFAULT_SEG_SIZE, metavar="BYTES",
                   help=f"content bytes per NDN segment (default {DEFAULT_SEG_SIZE})")
    g.add_argument("--ndn-cs", type=int, default=0, metavar="N",
                   help="content store entries per router (default 0 = no CS)")
    g.add_argument("--ndn-rto", type=float, default=d["rto"], metavar="S",
                   help=f"re-expression timeout of missing segments (default {d['rto']:g} s)")
    g.add_argument("--ndn-lifetime", type=float, default=d["lifetime"], metavar="S",
                   help=f"Interest lifetime of collection Interests (default {d['lifetime']:g} s)")
    g.add_argument("--ndn-probe-initial", type=float, default=d["probe_initial"], metavar="S",
                   help="probe timeout before the GPU has 2 samples of its history "
                        f"(default {d['probe_initial']:g} s)")


# ------------------------------------------------------------------ pure helpers


def parse_sweep(text: str) -> list[int]:
    """``"4,8,12"`` -> [4, 8, 12]; empty -> []."""
    out: list[int] = []
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise ExperimentError(f"--ndn-sweep {text!r}: {part!r} is not a worker count >= 1")
        if int(part) in out:
            raise ExperimentError(f"--ndn-sweep {text!r}: {part} appears twice")
        out.append(int(part))
    return out


def router_configs(graph: nx.Graph, net_plan: Any, producers: list[str], cs_capacity: int,
                   impair: str, out_dir: Path) -> dict[str, dict[str, Any]]:
    """Per switch: the router config (FIB toward every producer, CS size, impairment, where to
    write its counters) -- everything but the ports, which the switch node fills in."""
    from workers.ndn.link import fib_routes

    out = {}
    for s in net_plan.switches:
        try:
            fib = fib_routes(graph, s, net_plan.ports[s], producers)
        except ValueError as exc:
            raise ExperimentError(str(exc)) from None
        out[s] = {"name": s, "fib": fib, "cs_capacity": cs_capacity, "impair": impair,
                  "counters_file": str(out_dir / f"router-{s}.json")}
    return out


def gpu_slowdowns(spec: str, workers: list[str]) -> list[float]:
    """``--ndn-slow`` per GPU, parsed as the async method's ``--async-slow``."""
    return parse_slow(spec, workers, option="--ndn-slow")


def impair_text(args: argparse.Namespace) -> str:
    """The ``--loss/--dup/--reorder`` impairment of every router port ('' = none)."""
    if not (args.loss or args.dup or args.reorder):
        return ""
    return f"loss={args.loss},dup={args.dup},reorder={args.reorder},seed={args.seed}"


def sum_counters(reports: dict[str, dict]) -> dict[str, int]:
    """Router counters summed over routers."""
    total: dict[str, int] = {}
    for rep in reports.values():
        for k, v in rep["counters"].items():
            total[k] = total.get(k, 0) + v
    return total


def ndn_rounds(ps: dict, gpus: list[dict], reference_acc: list[float], tap: dict,
               moved: dict[tuple[str, str], int], ps_host: str, tor: str) -> list[dict]:
    """Per-round records of an NDN run from the PS's and GPUs' reports and the tap."""
    versions = ps["versions"]
    R = len(versions) - 1
    dist = tap["bytes_by_version"].get("ndn-distribute", {})
    fetch = tap["bytes_by_version"].get("ndn-fetch", {})
    by_gpu = [{r["version"]: r for r in g["received"]} for g in gpus]
    rounds = []
    for r in range(R):
        v = versions[r + 1]
        got = [b.get(v["version"]) for b in by_gpu]
        # re-expressions during round r: cumulative counts at the end of round r minus at its
        # start (PS: when it published v=r+1 / v=r; GPU: when it received them)
        prev = [b.get(v["version"] - 1, {}).get("retx_total", 0) for b in by_gpu]
        retx = (v["retx_total"] - versions[r]["retx_total"]
                + sum(x["retx_total"] - p for x, p in zip(got, prev, strict=True)
                      if x is not None))
        rounds.append({
            "time_s": v["time"] - versions[r]["time"],
            "accuracy": v["accuracy"],
            "loss": mean([g["rounds"][r]["loss"] for g in gpus if len(g["rounds"]) > r]),
            "exact": (all(x is not None and x["sha256"] == v["sha256"] for x in got)
                      and v["accuracy"] == reference_acc[r]),
            "params_equal": all(x is not None and x["sha256"] == v["sha256"] for x in got),
            "recovered": sum(1 for x in got if x is not None and x["recovered"]),
            "dist_bytes": dist.get(str(v["version"]), 0),
            "fetch_bytes": fetch.get(str(v["version"]), 0),
            "ps_rx_bytes": moved[(tor, ps_host)] / R,
            "ps_tx_bytes": moved[(ps_host, tor)] / R,
            "busiest_link_bytes": max(moved.values()) / R,
            "retransmissions": retx,
            "clipped": sum(g["rounds"][r]["clipped"] for g in gpus if len(g["rounds"]) > r),
        })
    return rounds


def comparison(modes: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Per N: distribution bytes per round on the PS link, NDN vs TCP PS, and the ratio."""
    out: dict[str, dict[str, Any]] = {}
    for m in modes.values():
        row = out.setdefault(str(m["n_workers"]), {"n_workers": m["n_workers"]})
        row[f"{m['kind']}_dist_bytes_per_round"] = m["dist_bytes_per_round"]
        row[f"{m['kind']}_ps_tx_bytes_per_round"] = mean([r["ps_tx_bytes"] for r in m["rounds"]])
        row[f"{m['kind']}_round_s_median"] = m["round_s_median"]
    for row in out.values():
        t, n = row.get("tcp-ps_dist_bytes_per_round"), row.get("ndn_dist_bytes_per_round")
        row["dist_ratio_tcp_over_ndn"] = t / n if t and n else None
        row["ratio_over_n"] = (row["dist_ratio_tcp_over_ndn"] / row["n_workers"]
                               if row["dist_ratio_tcp_over_ndn"] else None)
    return out


# ------------------------------------------------------------------ I/O


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
           "probe": {"k": DEFAULTS["probe_k"], "min_s": DEFAULTS["probe_min"],
                     "max_s": DEFAULTS["probe_max"], "initial_s": args.ndn_probe_initial},
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


def router_fields(routers: dict[str, dict]) -> dict[str, Any]:
    """The routers' exit reports, summed and per router (both modes)."""
    return {
        "router_counters": sum_counters(routers),
        "routers": {s: {k: r[k] for k in ("counters", "tables", "ppit", "non_ndn_frames",
                                          "bad_frames", "impairments")}
                    for s, r in routers.items()},
        "ppit_faces_at_exit": sum(r["tables"]["ppit_faces"] for r in routers.values()),
        "impairment_dropped": sum(d[x]["dropped"] for r in routers.values()
                                  for d in r["impairments"].values()
                                  for x in ("rx", "tx") if d.get(x)),
    }


def async_summary(ps: dict, gpus: list[dict], workers: list[str]) -> dict[str, Any]:
    """An async run's figures from the PS's and GPUs' reports (times from the PS's start).

    ``staleness`` = versions a gradient missed = current version - the version it was trained
    from (docs/design.md §5's sigma - 1); accuracy is the PS's test accuracy after every update.
    """
    t0 = ps["start_time"]
    sha_of = {v["version"]: v["sha256"] for v in ps["versions"]}
    curve = [{"updates": v["version"], "time_s": v["time"] - t0, "accuracy": v["accuracy"]}
             for v in ps["versions"]]
    # ps.json names the worker "worker"; results.json keeps its "gpu" key
    pushes = [{**{"gpu" if k == "worker" else k: v for k, v in p.items()},
               "time_s": p["time"] - t0} for p in ps["pushes"]]
    per_gpu = []
    for name, g in zip(workers, gpus, strict=True):
        st = [p["staleness"] for p in pushes if p["gpu"] == name]
        per_gpu.append({
            "gpu": name, "slowdown": g["slowdown"], "pushes": len(st),
            "handed_over": g["pushes"], "staleness_histogram": staleness_histogram(st),
            "mean_staleness": float(np.mean(st)) if st else None,
            "max_staleness": int(max(st)) if st else None,
            "mean_kappa": mean([p["kappa"] for p in pushes if p["gpu"] == name]) if st
            else None,
            "recoveries": g["recoveries"], "probe_expiries": g["probe_expiries"]})
    return {
        "pushes": len(pushes), "updates": ps["versions"][-1]["version"],
        "rejected": ps["rejected"],
        "final_accuracy": curve[-1]["accuracy"], "duration_s": curve[-1]["time_s"],
        "mean_staleness": mean([p["staleness"] for p in pushes]) if pushes else None,
        "staleness_histogram": staleness_histogram([p["staleness"] for p in pushes]),
        # every version a GPU trained from / finished with is the one the PS published
        "params_equal": all(r["sha256"] == sha_of.get(r["version"])
                            for g in gpus for r in g["received"]),
        "curve": curve, "per_push": pushes, "per_gpu": per_gpu,
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


def validate(args: argparse.Namespace) -> None:
    if args.rounds < 1:
        raise ExperimentError(f"--rounds must be >= 1, got {args.rounds}")
    if args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    for what, v in (("--loss", args.loss), ("--dup", args.dup), ("--reorder", args.reorder)):
        if not 0 <= v < 1:
            raise ExperimentError(f"{what} must be in [0, 1), got {v}")
    if not 64 <= args.ndn_seg_size <= 1300:
        raise ExperimentError(f"--ndn-seg-size must be in [64, 1300] bytes (a segment and its "
                              f"name must fit a 1500-byte frame), got {args.ndn_seg_size}")
    if args.ndn_cs < 0:
        raise ExperimentError(f"--ndn-cs must be >= 0, got {args.ndn_cs}")
    for what, v in (("--ndn-rto", args.ndn_rto), ("--ndn-lifetime", args.ndn_lifetime),
                    ("--ndn-probe-initial", args.ndn_probe_initial)):
        if not (np.isfinite(v) and v > 0):
            raise ExperimentError(f"{what} must be > 0 s, got {v}")
    if not (np.isfinite(args.ndn_step_ms) and args.ndn_step_ms >= 0):
        raise ExperimentError(f"--ndn-step-ms must be >= 0, got {args.ndn_step_ms}")
    if args.ndn_baseline is None:
        args.ndn_baseline = "tcp" if args.ndn_mode == "sync" else "none"
    if args.ndn_mode == "sync" and args.soft_sync != 1:
        raise ExperimentError("--soft-sync applies to --ndn-mode async (sync mode waits for "
                              "every GPU)")
    if args.ndn_mode == "async":
        if args.ndn_baseline == "tcp":
            raise ExperimentError("--ndn-baseline tcp is a synchronous PS; with --ndn-mode "
                                  "async use --ndn-baseline none (run --ndn-mode sync to compare)")
        if not (np.isfinite(args.async_lr) and args.async_lr > 0):
            raise ExperimentError(f"--async-lr must be > 0, got {args.async_lr}")
        if args.staleness_window < 1:
            raise ExperimentError(f"--staleness-window must be >= 1, got {args.staleness_window}")
        if args.soft_sync < 1:
            raise ExperimentError(f"--soft-sync must be >= 1, got {args.soft_sync}")


class NdnMethod(Method):
    """NDN with persistent-PIT routers vs a TCP PS (module docstring)."""

    name = "ndn"
    help = "ndn: NDN with a persistent PIT"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def prepare(self, run: Run) -> None:
        from topo.models import hosts as host_names
        from topo.models import parse_topology
        from workers.ndn import names as nn

        args, console = self.args, run.console
        validate(args)
        sweep = parse_sweep(args.ndn_sweep)
        graph = nx.Graph(parse_topology(args.topo))
        if args.ps not in host_names(graph):
            raise ExperimentError(f"--ps {args.ps}: not a host of {args.topo}")
        groups = ([resolve_workers(graph, args.ps, str(n)) for n in sweep] if sweep
                  else [resolve_workers(graph, args.ps, args.workers)])
        for ws in groups:
            bad = [h for h in ws if h not in host_names(graph) or h == args.ps]
            if bad:
                raise ExperimentError(f"--workers: {bad[0]} is not a host of {args.topo} other "
                                      "than the PS")
            gpu_slowdowns(args.ndn_slow, ws)  # a bad spec fails before any network is built
            if args.ndn_mode == "async" and args.soft_sync > len(ws):
                raise ExperimentError(f"--soft-sync {args.soft_sync}: a soft-sync batch needs at "
                                      f"least C GPUs, the run has {len(ws)}")
            if args.ndn_mode == "async" and (args.rounds * len(ws)) % args.soft_sync:
                raise ExperimentError(f"--soft-sync {args.soft_sync} must divide the push budget "
                                      f"--rounds x GPUs = {args.rounds * len(ws)}")
        for h in host_names(graph):
            try:
                nn.check_id(h, "host")
            except nn.NdnNameError as exc:
                raise ExperimentError(f"--topo {args.topo}: {exc}") from None
        multi = [h for h in host_names(graph) if graph.degree(h) != 1]
        if multi:
            raise ExperimentError(f"--topo {args.topo}: host {multi[0]} has "
                                  f"{graph.degree(multi[0])} links; the NDN nodes use one "
                                  "face (one link per host)")
        check_environment("pyswitch")
        if args.target != "pyswitch":
            console.print("note: --method ndn runs NDN routers (and Linux bridges for the TCP "
                          "baseline); --target ignored")
        if args.bw:
            nx.set_edge_attributes(graph, float(args.bw), "bw")
        self.graph = nx.freeze(graph)
        self.groups = groups
        run.settings = settings = {
            "topo": args.topo, "ps": args.ps, "workers": [len(g) for g in groups],
            "rounds": args.rounds, "model": args.model, "hidden": args.hidden,
            "bw_mbps": args.bw or None, "loss": args.loss, "dup": args.dup,
            "reorder": args.reorder, "seed": args.seed, "baseline": args.ndn_baseline,
            "seg_size": args.ndn_seg_size, "cs_capacity": args.ndn_cs,
            "rto_s": args.ndn_rto, "lifetime_s": args.ndn_lifetime,
            "probe_initial_s": args.ndn_probe_initial, "train_name": TRAIN_NAME,
            "ndn_mode": args.ndn_mode, "slow": args.ndn_slow or None,
            "step_ms": args.ndn_step_ms,
            "policy": args.ndn_policy if args.ndn_mode == "async" else None,
            "async_lr": args.async_lr if args.ndn_mode == "async" else None,
            "staleness_window": args.staleness_window if args.ndn_mode == "async"
            else None,
            "soft_sync": args.soft_sync if args.ndn_mode == "async" else None,
            "routers": "workers.ndn.router_node on every switch (NdnRouterSwitch)",
            "impairment": impair_text(args) or None}
        if len(run.seeds) > 1:
            settings["seeds"] = run.seeds

    def execute(self, run: Run) -> None:
        args, settings = self.args, run.settings
        run.console.print(
            f"[bold]NDN PS transport[/] ({args.ndn_mode}) on {args.topo}: PS {args.ps}, "
            f"worker counts {settings['workers']}, {args.rounds} rounds"
            + (" x GPUs pushes" if args.ndn_mode == "async" else "")
            + f", baseline {args.ndn_baseline}"
            + (f", {args.bw:g} Mbit/s links" if args.bw else ", unshaped links"))
        for rep, seed in enumerate(run.seeds):
            for ws in self.groups:
                # the first repeat keeps the folders it always had; later ones add the seed
                def folder(label: str, seed: int = seed, rep: int = rep) -> str:
                    return label if rep == 0 else f"{label}-seed{seed}"
                label = f"ndn@{len(ws)}"
                run.record(label, run_ndn(run, args, self.graph, ws, seed, folder(label)), rep)
                if args.ndn_baseline == "tcp":
                    label = f"tcp-ps@{len(ws)}"
                    run.record(label, run_tcp(run, args, self.graph, ws, seed, folder(label)),
                               rep)

    def results(self, run: Run) -> dict[str, Any]:
        args, modes, settings = self.args, run.modes, run.settings
        if args.ndn_mode == "async":
            return async_results(run.name, settings, modes)
        ndn_modes = [m for m in modes.values() if m["kind"] == "ndn"]
        return {
            "run": run.name, "method": "ndn", "ndn_mode": "sync", "settings": settings,
            "modes": modes, "comparison": comparison(modes),
            "exact_all_rounds": all(r["exact"] for m in modes.values() for r in m["rounds"]),
            "all_rounds_completed": all(len(m["rounds"]) == args.rounds
                                        for m in modes.values()),
            "recoveries": {f"ndn@{m['n_workers']}": m["recoveries"] for m in ndn_modes},
            "accuracy": {k: m["rounds"][-1]["accuracy"] for k, m in modes.items()},
        }

    def report(self, run: Run, results: dict[str, Any]) -> None:
        from rich.table import Table

        console, out_dir, modes = run.console, run.out_dir, run.modes
        if self.args.ndn_mode == "async":
            report_async(results, out_dir, console)
            return
        plots = plot_modes(modes, out_dir) + plot_distribution(results, out_dir)
        console.print(summary_table(results))
        table = Table(title="parameter distribution bytes on the PS link per round "
                            "(frames the PS host sends, measured on its link)")
        for col in ("N", "NDN B/round", "TCP PS B/round", "TCP/NDN", "÷N", "NDN s/round",
                    "TCP s/round", "recoveries"):
            table.add_column(col, justify="right")
        for row in results["comparison"].values():
            n = row["n_workers"]

            def f(x: float | None, spec: str = ",.0f") -> str:
                return "-" if x is None else format(x, spec)
            table.add_row(str(n), f(row.get("ndn_dist_bytes_per_round")),
                          f(row.get("tcp-ps_dist_bytes_per_round")),
                          f(row.get("dist_ratio_tcp_over_ndn"), ".2f"),
                          f(row.get("ratio_over_n"), ".2f"),
                          f(row.get("ndn_round_s_median"), ".3f"),
                          f(row.get("tcp-ps_round_s_median"), ".3f"),
                          str(modes[f"ndn@{n}"]["recoveries"]) if f"ndn@{n}" in modes else "-")
        console.print(table)
        console.print(f"exact in every round: {'yes' if results['exact_all_rounds'] else 'NO'}; "
                      f"results: {out_dir / 'results.json'}; plots: "
                      f"{', '.join(p.name for p in plots)}")


def async_results(name: str, settings: dict, modes: dict[str, dict]) -> dict[str, Any]:
    """The results of an async run (no rounds: pushes, staleness, accuracy)."""
    return {
        "run": name, "method": "ndn", "ndn_mode": "async", "settings": settings,
        "modes": modes,
        "all_pushes_applied": all(m["pushes"] == m["budget"]
                                  and m["updates"] == m["budget"] // m.get("soft_sync", 1)
                                  for m in modes.values()),
        "params_equal": all(m["params_equal"] for m in modes.values()),
        "recoveries": {k: m["recoveries"] for k, m in modes.items()},
        "accuracy": {k: m["final_accuracy"] for k, m in modes.items()},
        "duration_s": {k: m["duration_s"] for k, m in modes.items()},
    }
