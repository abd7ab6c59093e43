"""The INA method's own options (``run --method ina --help``) and its settings from them,
checked before any network or file (one :class:`ExperimentError` per mistake)."""

from __future__ import annotations

import argparse

from controller.dataplane.deploy import SLOT_POLICIES
from controller.errors import ExperimentError
from controller.experiment.cross_traffic import add_cross_traffic_option, parse_cross_traffic
from controller.experiment.failover import WORKER_POLICIES, parse_fail_switch
from controller.experiment.methods.ina.core import Settings
from controller.experiment.methods.ina.pools import (
    AUTO_FROM,
    AUTO_SIZE,
    parse_hosts_per_process,
)
from controller.experiment.run_options import (
    MAX_WINDOW,
    SHARED_DEFAULTS,
    add_impairment_options,
    add_round_timeout,
    add_topology_options,
    add_transport_options,
)
from controller.experiment.servers import check_servers_option
from controller.options import finite_float, int_option, read_topology
from controller.plan.document import resolve_workers
from controller.plan.lp import PlanError
from controller.plan.options import add_plan_options, request_from_args
from controller.plan.planners import get_planner
from topo.models import TopologyError
from workers.ina.cc import BDP_HEADROOM, DEFAULT_WINDOW, FIRST_TIMEOUT_MULT, POLICIES
from workers.ina.cc import MAX_WINDOW as CC_MAX_WINDOW
from workers.ina.job import MODES
from workers.models.scaling import DEFAULT_LINK_GBPS, DEFAULT_SCALE
from workers.models.shapes import WORKLOADS

__all__ = ["add_network_options", "add_ina_arguments", "add_workload_options",
           "settings_from_args", "check_workload"]


def add_network_options(parser: argparse.ArgumentParser, title: str,
                        workers: str | None = None) -> argparse._ArgumentGroup:
    """The options of a planned INA network, with INA's defaults (``workers``: another
    default count): topology, PS and workers, budget and transport, round timeout,
    impairments.  Returns the method's option group (INA's and DDP's, which run on it)."""
    d = Settings()
    add_topology_options(parser, topo=d.topo, ps=d.ps, workers=workers or d.workers)
    g = parser.add_argument_group(title)
    add_transport_options(
        g, budget=d.budget, window=d.base_window, timeout=d.timeout,
        window_help=f"{DEFAULT_WINDOW}; INA with --cc fixed: {BDP_HEADROOM:g} bandwidth-delay "
                    f"products, the plan's rate per worker times the path's unloaded round "
                    f"trip, when more, at most {CC_MAX_WINDOW}; docs/protocol.md §6",
        timeout_help=f"INA: until a worker has measured, {FIRST_TIMEOUT_MULT:g} x (its first "
                     "window at the plan's rate + the unloaded round trip) when longer; "
                     "docs/protocol.md §6")
    g.add_argument("--cc", choices=list(POLICIES), default=d.cc,
                   help="INA workers' congestion control: "
                        + "; ".join(f"{n}: {h}" for n, (h, _) in POLICIES.items())
                        + f" (default {d.cc}; docs/protocol.md §6)")
    add_round_timeout(g, d.round_timeout)
    add_impairment_options(g)
    return g


def add_workload_options(g: argparse._ArgumentGroup) -> None:
    """A real model's scaled emulation (``--model resnet50|vgg16|bert-base``,
    docs/models.md): ``--scale``, ``--link-gbps``, ``--compute-ms`` (INA and DDP)."""
    g.add_argument(
        "--scale", type=int_option(1, 10**9), default=None, metavar="S",
        help=f"with --model {'|'.join(WORKLOADS)}: emulate the real model with 1/S of its "
             f"gradient on links of --link-gbps/S, compute time kept in proportion "
             f"(default {DEFAULT_SCALE}; docs/models.md)")
    g.add_argument(
        "--link-gbps", type=finite_float, default=DEFAULT_LINK_GBPS, metavar="B",
        help=f"with a real --model: the real cluster's link rate, Gbit/s (default "
             f"{DEFAULT_LINK_GBPS:g}; the emulated links run at B*1000/S Mbit/s)")
    g.add_argument(
        "--compute-ms", type=finite_float, default=None, metavar="MS",
        help="with a real --model: compute time per step of the real cluster instead of "
             "the model's published profile (docs/models.md §2)")


def check_workload(args: argparse.Namespace) -> tuple[int | None, float, float | None]:
    """``--scale``, ``--link-gbps``, ``--compute-ms`` checked against ``--model`` (one
    ExperimentError per mistake); returns them.  With a real model the links' rate follows
    from them, so ``--bw`` must stay at its default."""
    scale = getattr(args, "scale", None)
    gbps = getattr(args, "link_gbps", DEFAULT_LINK_GBPS)
    compute_ms = getattr(args, "compute_ms", None)
    if args.model not in WORKLOADS:
        given = [o for o, v in (("--scale", scale), ("--compute-ms", compute_ms),
                                ("--link-gbps", None if gbps == DEFAULT_LINK_GBPS else gbps))
                 if v is not None]
        if given:
            raise ExperimentError(f"{given[0]} applies to a real model (--model "
                                  f"{'|'.join(WORKLOADS)}), not --model {args.model}")
        return None, gbps, None
    if not gbps > 0:
        raise ExperimentError(f"--link-gbps must be > 0, got {gbps}")
    if compute_ms is not None and not compute_ms >= 0:
        raise ExperimentError(f"--compute-ms must be >= 0, got {compute_ms}")
    if args.bw != SHARED_DEFAULTS["bw"]:
        raise ExperimentError(f"--bw: with --model {args.model} the links run at "
                              "--link-gbps*1000/--scale Mbit/s (drop --bw)")
    return scale, gbps, compute_ms


def add_ina_arguments(parser: argparse.ArgumentParser) -> None:
    """INA's options: its network, plan and transport, faults, several jobs, a real
    model's scaled emulation."""
    d = Settings()
    g = add_network_options(parser, "--method ina (P4 in-network aggregation, "
                                    "docs/design.md §3)")
    add_workload_options(g)
    # plan's options and defaults (--budget and --seed are among the shared ones)
    add_plan_options(g, with_budget=False, with_seed=False)
    g.add_argument("--modes", default=",".join(d.modes),
                   help=f"comma list of {', '.join(MODES)} (default {','.join(d.modes)})")
    g.add_argument("--agg-window", type=int_option(1, MAX_WINDOW), default=None, metavar="N",
                   help="chunks in flight per worker in the aggregating modes (ina, tor_only); "
                        "PS-only keeps --window (default: --window, or its default; "
                        "docs/scale.md §3)")
    g.add_argument(
        "--fail-switch", metavar="SWITCH@ROUND", default=None,
        help="fault injection: kill SWITCH once a worker finished ROUND; the controller "
             "notices, re-plans without it and redeploys (docs/design.md §9)")
    g.add_argument(
        "--on-worker-failure", choices=WORKER_POLICIES, default=d.on_worker_failure,
        help="INA: when a worker dies, stop the job (one line naming it; finished rounds "
             "kept) or continue without it from the next round the PS has not completed "
             "(docs/design.md §9; default stop)")
    g.add_argument(
        "--kill-worker", metavar="HOST@ROUND", default=None,
        help="INA fault injection: kill worker HOST once it finished ROUND")
    g.add_argument(
        "--hosts-per-process", metavar="N|auto", default=d.hosts_per_process,
        help=f"INA on Mininet: worker hosts one process serves, each host's sockets in its "
             f"own namespace (auto: one per host below {AUTO_FROM} workers, else "
             f"{AUTO_SIZE}; always one with --kill-worker, --on-worker-failure continue or "
             f"--servers; docs/scale.md)")
    g.add_argument(
        "--worker-timeout", type=finite_float, default=d.worker_timeout, metavar="S",
        help="INA: the PS reports a worker it has not heard from for S seconds while a "
             f"round waits for it (default {d.worker_timeout:g}; 0 = never)")
    g.add_argument(
        "--jobs", metavar="FILE|N", default=None,
        help="INA: several training jobs at once instead of --ps/--workers: a jobs file "
             "(JSON list) or N (the hosts dealt out to N jobs; docs/design.md §3.10)")
    g.add_argument(
        "--slot-policy", choices=SLOT_POLICIES, default=d.slot_policy,
        help="with --jobs: every job hashes into the whole slot pool (shared, default; "
             "a slot held by another job falls back) or into its own part (partitioned, "
             "sized by the plan)")
    g.add_argument(
        "--kill-ps", metavar="HOST@ROUND", default=None,
        help="with --jobs, fault injection: kill the PS on HOST once its job finished "
             "ROUND (that job stops, the others go on)")
    g.add_argument(
        "--no-alone", action="store_true",
        help="with --jobs: do not run each job alone afterwards for reference")
    add_cross_traffic_option(g)
    g.add_argument(
        "--servers", metavar="A,B,...", default=None,
        help="spread the network over these servers with Mininet's cluster mode, this "
             "machine first: pods in blocks, the top tier here, links between servers as "
             "SSH tunnels (docs/servers.md)")
    g.add_argument(
        "--ssh-config", metavar="FILE", default=None,
        help="with --servers: the ssh client configuration (ssh -F) for every ssh to them "
             "(default: ssh's own)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings of the ``run`` options, checked (one ExperimentError per mistake; the shared
    options were checked when the method was built): the topology, PS, workers, modes and
    fault spec as prepare() reads them, before any network or file."""
    d = Settings()
    # simulate leaves --budget, --ps and --workers unset (None) to see whether they were
    # given: the defaults then, as run's parser has them
    unset = {k: getattr(d, k) for k in ("budget", "ps", "workers")
             if getattr(args, k, "") is None}
    if unset:
        args = argparse.Namespace(**{**vars(args), **unset})
    scale, gbps, compute_ms = check_workload(args)
    req = request_from_args(args, spec=args.topo)
    try:
        req.check()
    except PlanError as exc:
        raise ExperimentError(str(exc)) from None
    s = Settings(topo=args.topo, ps=args.ps, workers=args.workers, budget=req.budget,
                 planner=req.planner, objective=req.objective, capacity=req.capacity,
                 solver=req.solver, time_limit=req.time_limit, result_load=req.result_load,
                 max_combinations=req.max_combinations, polish=req.polish,
                 rounds=args.rounds, model=args.model, hidden=args.hidden,
                 bw=args.bw or None,
                 loss=args.loss, dup=args.dup, reorder=args.reorder, seed=args.seed,
                 target=args.target,
                 modes=tuple(m.strip() for m in getattr(args, "modes", ",".join(d.modes))
                             .split(",")),
                 window=args.window, cc=getattr(args, "cc", d.cc), agg_window=getattr(args, "agg_window", None),
                 timeout=args.timeout, round_timeout=args.round_timeout,
                 fail_switch=getattr(args, "fail_switch", None), out=args.out, name=args.name,
                 on_worker_failure=getattr(args, "on_worker_failure", d.on_worker_failure),
                 kill_worker=getattr(args, "kill_worker", None),
                 worker_timeout=getattr(args, "worker_timeout", d.worker_timeout),
                 jobs=getattr(args, "jobs", None),
                 slot_policy=getattr(args, "slot_policy", d.slot_policy),
                 kill_ps=getattr(args, "kill_ps", None),
                 no_alone=getattr(args, "no_alone", False),
                 cross_traffic=getattr(args, "cross_traffic", None),
                 repeats=args.repeats, scale=scale, link_gbps=gbps, compute_ms=compute_ms,
                 servers=getattr(args, "servers", None),
                 ssh_config=getattr(args, "ssh_config", None),
                 hosts_per_process=parse_hosts_per_process(
                     getattr(args, "hosts_per_process", d.hosts_per_process)))
    check_servers_option(s.servers, s.target)
    if s.ssh_config is not None and s.servers is None:
        raise ExperimentError("--ssh-config applies to --servers")
    if s.workload is not None:
        if s.jobs is not None:
            raise ExperimentError(f"--jobs: --model {s.model} (a real model's scaled "
                                  "emulation) runs as one job; drop --jobs")
        s.bw = s.workload.emulated_mbps
    if s.cross_traffic is not None:
        parse_cross_traffic(s.cross_traffic)  # the hosts are checked once the jobs are known
    if not s.worker_timeout >= 0:
        raise ExperimentError(f"--worker-timeout must be >= 0 seconds, got {s.worker_timeout}")
    modes = [m for m in s.modes if m]
    bad = [m for m in modes if m not in MODES]
    if not modes or bad:
        raise ExperimentError(f"--modes: unknown mode {(bad or [''])[0][:40]!r} "
                              f"(expected {', '.join(MODES)})")
    twice = sorted({m for m in modes if modes.count(m) > 1})
    if twice:  # each mode is one record of the run (simulate failed with EntryExists)
        raise ExperimentError(f"--modes: {', '.join(twice)} given twice")
    try:
        graph = read_topology(s.topo)
        if s.jobs is None:  # --jobs names every job's hosts instead
            if s.ps not in graph or graph.nodes[s.ps].get("kind") != "host":
                raise ExperimentError(f"--ps {s.ps[:40]!r} is not a host of the topology")
            resolve_workers(graph, s.ps, s.workers)
    except (TopologyError, PlanError) as exc:
        raise ExperimentError(str(exc)) from None
    if s.jobs is not None:  # the planner's own declaration (controller.plan.placement)
        try:
            get_planner(s.planner, several=True)
        except PlanError as exc:
            raise ExperimentError(str(exc)) from None
    if s.fail_switch:
        rnd = s.fail_switch.partition("@")[2].strip()
        if not (rnd.isascii() and rnd.isdigit() and len(rnd) <= 9):
            raise ExperimentError(f"--fail-switch: expected SWITCH@ROUND, got "
                                  f"{s.fail_switch[:40]!r}")
        parse_fail_switch(s.fail_switch, graph, s.rounds)
    return s
