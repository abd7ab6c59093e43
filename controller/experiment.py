"""``python -m controller run``: the INA experiment end to end over Mininet (SPEC §3, §8).

1. Build the topology model and plan the job (greedy + LP, with baselines).
2. Compile ``p4src/ina.p4`` for the target (pyswitch, or p4c for BMv2).
3. Start a Mininet network of P4 switches (TCLink bandwidth; loss/duplication/reordering by
   pyswitch's impairment options, since our kernel has no netem).
4. Install the plan over P4Runtime (:mod:`controller.deploy`): one job per sync mode.
5. For each mode (``ina``, ``ps_only``, optionally ``tor_only``) run the PS and one worker
   process per host (:mod:`workers.ina.ps_node`, :mod:`workers.ina.worker_node`), training a real
   model; measure bytes on every link from the switch-side interface counters.
6. Check exactness (every applied sum equals the exact int32 sum of the workers' quantized
   gradients), compare accuracy with a single-process reference, compare measured γ with the
   LP's, and write ``results/<run>/results.json`` plus PNG plots.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.deploy import JobSpec, deploy, switch_rules
from controller.errors import ExperimentError
from controller.failover import SwitchMonitor, parse_fail_switch
from controller.files import write_json_atomic
from controller.host_processes import HostProcesses
from controller.report import mean, plot_modes, print_summary, print_written
from workers.common.model import Replica, TrainConfig, train_synchronous
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import INA_UDP_PORT, K
from workers.ina.job import MODES, JobConfig
from workers.ina.wire import FRAME_BYTES
from workers.ina.worker import n_chunks_for, ps_only_schedule

ROOT = Path(__file__).resolve().parent.parent
P4_PROGRAM = ROOT / "p4src" / "ina.p4"
JOB_IDS = {"ina": 1, "tor_only": 2, "ps_only": 3}

# Synchronization methods of ``run --method``: module name -> it provides
# ``add_arguments(parser)`` (its own options) and ``run_method(args) -> dict`` (results).
# The INA experiment (this module) is the default.
METHODS: dict[str, str] = {
    "ina": __name__,
    "async": "controller.async_experiment",
    "bcube": "controller.bcube_experiment",
    "ps": "controller.bcube_experiment",  # the BCube runner's TCP PS baseline alone
    "ring": "controller.bcube_experiment",  # its ring all-reduce baselines alone
    "cluster": "controller.cluster_experiment",
    "ndn": "controller.ndn_experiment",
}



@dataclass
class Settings:
    topo: str = "fattree:4"
    ps: str = "h0"
    workers: str = "6"
    budget: int = 2
    rounds: int = 30
    model: str = "mlp"
    hidden: int = 32
    batch_size: int = 16
    lr: float = 0.2
    bw: float | None = 1.0  # Mbit/s on every link (TCLink); None = unshaped (link-bound by default
    # so that the LP's γ is what limits the run, not pyswitch's CPU)
    loss: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    seed: int = 0
    target: str = "pyswitch"
    modes: tuple[str, ...] = ("ina", "ps_only")
    window: int = 16
    timeout: float = 0.3  # pyswitch hops are ~0.5 ms each; bursts queue for tens of ms
    round_timeout: float = 120.0
    fail_switch: str | None = None  # "SWITCH@ROUND": kill it after that round (SPEC §9)
    out: str = "results"
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------ pure helpers


def schedules_for(mode: str, plan: dict, workers: list[str], n_chunks: int) -> dict[str, list]:
    """Each worker's ``[(chunk, agg_id, fan_in)]`` in ``mode`` (keys: worker bit as str)."""
    from controller.plan import chunk_schedule

    if mode == "ina":
        by_name = chunk_schedule(plan, n_chunks)
        return {str(i): [tuple(e) for e in by_name[w]] for i, w in enumerate(workers)}
    if mode == "tor_only":
        tor_id = int(plan["switch_ids"][plan["ps_tor"]])
        return {str(i): [(c, tor_id, len(workers)) for c in range(n_chunks)]
                for i in range(len(workers))}
    if mode == "ps_only":
        return {str(i): ps_only_schedule(n_chunks) for i in range(len(workers))}
    raise ValueError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")


def exact_sums_ok(out_dir: Path, n_workers: int) -> list[bool]:
    """Per round: did every worker apply exactly the int32 sum of all quantized gradients?"""
    data = [np.load(out_dir / f"worker{w}.npz") for w in range(n_workers)]
    exact = np.sum([d["q"].astype(np.int64) for d in data], axis=0)
    wrapped = ((exact + 2**31) % 2**32 - 2**31).astype(np.int32)
    return [all(np.array_equal(d["sums"][r], wrapped[r]) for d in data)
            for r in range(wrapped.shape[0])]


def link_bytes(counters_before: dict, counters_after: dict) -> dict[tuple[str, str], int]:
    return {k: counters_after[k] - counters_before.get(k, 0) for k in counters_after}


# ------------------------------------------------------------------ I/O


def compile_program(target: str, build: Path) -> tuple[Path, Path]:
    """Compile ina.p4 like p4c's BMv2 backend; returns (p4info, device config)."""
    build.mkdir(parents=True, exist_ok=True)
    p4info, config = build / "ina.p4info.txtpb", build / "ina.json"
    if target == "bmv2":
        cmd = ["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(build),
               "--p4runtime-files", str(p4info), str(P4_PROGRAM)]
    else:
        cmd = [sys.executable, "-m", "pyswitch", "compile", str(P4_PROGRAM), "-o", str(config),
               "--p4runtime-files", str(p4info)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ExperimentError(f"compiling {P4_PROGRAM.name} failed: "
                              f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return p4info, config


def interface_counters(net_plan: Any) -> dict[tuple[str, str], int]:
    """Bytes per directed link, from the switch-side interface counters (root namespace)."""
    out = {}
    for s in net_plan.switches:
        for nb, port in net_plan.ports[s].items():
            base = Path(f"/sys/class/net/{s}-eth{port}/statistics")
            out[(s, nb)] = int((base / "tx_bytes").read_text())
            out[(nb, s)] = int((base / "rx_bytes").read_text())
    return out


def _impairments(s: Settings) -> list[str]:
    if not (s.loss or s.dup or s.reorder):
        return []
    return [f"all:loss={s.loss},dup={s.dup},reorder={s.reorder},seed={s.seed}"]


def run_mode(mininet: Any, mode: str, cfg: JobConfig, workers: list[str], ps: str,
             progress: Any, monitor: SwitchMonitor) -> dict:
    """Run one mode's job on the live network; returns its per-round records."""
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    job_file = out_dir / "job.json"
    cfg.save(job_file)
    before = interface_counters(mininet.plan)
    task = progress.add_task(f"{mode}: rounds", total=cfg.rounds)
    start_file = Path(cfg.start_file) if cfg.start_file else None
    if start_file is not None:
        start_file.unlink(missing_ok=True)

    def on_line(host: str, line: str) -> None:
        words = line.split()  # "worker I round R ..."
        if len(words) > 3 and words[0] == "worker" and words[2] == "round":
            monitor.on_worker_round(int(words[3]))
            if host == workers[0]:
                progress.advance(task)

    with HostProcesses(mininet.net, mode, out_dir, on_line) as nodes:
        nodes.launch(ps, "workers.ina.ps_node", str(job_file))
        nodes.wait_ready(1, f"the PS on {ps}")
        for i, w in enumerate(workers):
            nodes.launch(w, "workers.ina.worker_node", str(job_file), "--worker", str(i))
        nodes.wait_ready(len(workers), "the workers")
        if start_file is not None:
            start_file.touch()  # every process is up: start round 0 together
        n_events, plan_gamma = len(monitor.events), monitor.plan["gamma"]
        nodes.check(nodes.wait(workers, time.monotonic() + cfg.round_timeout_s * cfg.rounds
                               + 30, watch=monitor.poll), "worker")
        ps_code = nodes.stop(ps, 30)  # it serves retransmissions until every worker is done
    if ps_code != 0:
        raise ExperimentError(f"{mode}: the PS did not complete every round "
                              f"(see {out_dir}/logs.txt)")
    moved = link_bytes(before, interface_counters(mininet.plan))
    reports = [json.loads((out_dir / f"worker{i}.json").read_text()) for i in range(len(workers))]
    ps_report = json.loads((out_dir / "ps.json").read_text())
    exact = exact_sums_ok(out_dir, len(workers))
    tor = mininet_plan_tor(mininet, ps)
    rounds = []
    for r in range(cfg.rounds):
        per_worker = [rep["rounds"][r] for rep in reports]
        rounds.append({
            "time_s": max(x["time_s"] for x in per_worker),
            # the last worker to start the round waits for nobody's compute: its time is the
            # network's share of the round
            "sync_time_s": min(x["time_s"] for x in per_worker),
            "accuracy": per_worker[0]["accuracy"],
            "loss": mean([x["loss"] for x in per_worker]),
            "retransmissions": sum(x["retransmits"] for x in per_worker),
            "clipped": sum(x["clipped"] for x in per_worker),
            "exact": exact[r],
            "schedule_version": per_worker[0].get("schedule_version", 0),
            "ps_rx_bytes": moved[(tor, ps)] / cfg.rounds,
            "busiest_link_bytes": max(moved.values()) / cfg.rounds,
        })
    busiest = max(moved, key=moved.get)
    return {"job_id": cfg.job_id, "rounds": rounds, "ps": ps_report["stats"],
            "grad_bytes": 4 * cfg.n_values,  # int32 values synchronized per round
            "ps_link_bytes_total": moved[(tor, ps)], "busiest_link": list(busiest),
            "busiest_link_bytes_total": moved[busiest],
            "failover": [asdict(e) for e in monitor.events[n_events:]],
            "plan_gamma": plan_gamma,  # of the plan this mode started on
            "link_bytes_total": {f"{a}->{b}": v for (a, b), v in sorted(moved.items())}}


def mininet_plan_tor(mininet: Any, ps: str) -> str:
    return mininet.plan.hosts[ps].neighbours[0]


def check_environment(target: str) -> None:
    if os.geteuid() != 0:
        raise ExperimentError("the experiment builds a Mininet network: run it as root")
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        raise ExperimentError("Mininet is not importable: run `make run` (it installs Debian's "
                              "mininet) or apt-get install mininet") from None
    if target == "bmv2":
        import shutil

        missing = [t for t in ("p4c", "simple_switch_grpc") if shutil.which(t) is None]
        if missing:
            raise ExperimentError(f"--target bmv2 needs {' and '.join(missing)} on PATH "
                                  "(see docker/Dockerfile)")


def plan_job(s: Settings, graph: nx.Graph, out_dir: Path) -> dict:
    from controller.baselines import all_baselines
    from controller.cli import resolve_workers
    from controller.greedy import greedy
    from controller.lp import FastLP, make_job, solve_lp
    from controller.plan import build_plan, write_plan

    workers = resolve_workers(graph, s.ps, s.workers)
    # The data plane multicasts every RESULT down a tree, so plan with that load counted
    # (controller.lp.result_tree_coeffs); the SPEC §3.3 γ of the same deployment is kept too.
    job = make_job(graph, s.ps, workers, result_load=True)
    t0 = time.perf_counter()
    fast = FastLP(job)
    res = greedy(job, s.budget, lp=fast)
    t_greedy = time.perf_counter() - t0
    base = all_baselines(job, s.budget, seed=s.seed, lp=fast, max_combinations=500)
    plan = build_plan(job, res.lp, budget=s.budget, baselines=base, spec=s.topo,
                      greedy_history=res.history,
                      timings={"greedy": t_greedy, "lp_solves": res.lp_solves})
    plan["result_load"] = True
    plan["gamma_without_result_load"] = solve_lp(make_job(graph, s.ps, workers),
                                                 list(res.deployed)).gamma
    write_plan(plan, out_dir / "plan.json")
    return plan


def run_experiment(s: Settings) -> dict:
    """The whole experiment; returns the results dict (also written to disk)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from topo.mininet_net import build_net
    from topo.mininet_switch import BMv2Switch, PySwitch
    from topo.models import parse_topology

    console = Console()
    for m in s.modes:
        if m not in MODES:
            raise ExperimentError(f"--modes: unknown mode {m!r} (expected {', '.join(MODES)})")
    check_environment(s.target)
    graph = nx.Graph(parse_topology(s.topo))
    if s.bw is not None:
        nx.set_edge_attributes(graph, float(s.bw), "bw")
    graph = nx.freeze(graph)
    fail = parse_fail_switch(s.fail_switch, graph, s.rounds) if s.fail_switch else None
    name = s.name or time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(s.out) / name  # created by the first file written: the plan
    console.print(f"[bold]planning[/] {s.topo}, PS {s.ps}, workers {s.workers}, budget {s.budget}")
    plan = plan_job(s, graph, out_dir)
    workers = list(plan["workers"])
    console.print(f"plan: γ = {plan['gamma']:.4g}, deployed {plan['deployed'] or '(none)'}, "
                  f"PS ToR {plan['ps_tor']}")
    console.print(f"[bold]compiling[/] {P4_PROGRAM.relative_to(ROOT)} for {s.target}")
    p4info, device_config = compile_program(s.target, out_dir / "build")

    train = TrainConfig(model=s.model, hidden=s.hidden, n_workers=len(workers), rounds=s.rounds,
                        batch_size=s.batch_size, lr=s.lr, seed=s.seed)
    n_values = Replica(train, 0).params.size
    n_chunks = n_chunks_for(n_values, K)
    frac_bits = choose_frac_bits(8.0, len(workers))

    switch_cls = BMv2Switch if s.target == "bmv2" else PySwitch
    opts = {"impair": _impairments(s)} if s.target == "pyswitch" else {}
    console.print(f"[bold]starting Mininet[/]: {graph.number_of_nodes()} nodes, "
                  f"{s.target} switches" + (f", {s.bw:g} Mbit/s links" if s.bw else ""))
    mininet = build_net(graph, switch_cls, switch_opts=opts,
                        bw_unit_mbps=1.0 if s.bw else None)
    results: dict[str, Any] = {}
    try:
        hosts = {h: (info.ip, info.mac) for h, info in mininet.plan.hosts.items()}
        jobs = [JobSpec(JOB_IDS[m], tuple(workers)) for m in s.modes]
        rules = switch_rules(graph, plan, mininet.plan.ports, hosts, jobs)
        addresses = {sw: (mininet.grpc_address(sw), mininet.device_id(sw)) for sw in rules}
        console.print(f"[bold]deploying[/] over P4Runtime to {len(rules)} switches")
        t0 = time.perf_counter()
        writes = deploy(rules, addresses, p4info, device_config)
        deploy_s = time.perf_counter() - t0
        monitor = SwitchMonitor(mininet, graph, plan, rules, jobs, hosts, p4info,
                                say=console.print, fail=fail)
        modes: dict[str, Any] = {}
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console) as progress:
            for m in s.modes:
                # a switch that died in an earlier mode stays dead: plan from the current one
                schedule_file = out_dir / m / "schedules.json" if m == "ina" else None
                monitor.follow(schedule_file,
                               lambda p: schedules_for("ina", p, workers, n_chunks))
                cfg = JobConfig(
                    job_id=JOB_IDS[m], mode=m, rounds=s.rounds, train=train,
                    worker_ids=list(range(len(workers))),
                    worker_addrs=[(hosts[w][0], INA_UDP_PORT) for w in workers],
                    ps_addr=(hosts[s.ps][0], INA_UDP_PORT),
                    result_dests=[(hosts[workers[0]][0], INA_UDP_PORT)],
                    schedules=schedules_for(m, monitor.plan, workers, n_chunks),
                    schedule_file=str(schedule_file) if schedule_file else None,
                    frac_bits=frac_bits,
                    n_values=n_values, out_dir=str(out_dir / m), window=s.window,
                    timeout=s.timeout, round_timeout_s=s.round_timeout,
                    start_file=str(out_dir / m / "start"))
                modes[m] = run_mode(mininet, m, cfg, workers, s.ps, progress, monitor)
    finally:
        mininet.stop()

    reference = train_synchronous(train)
    results = summarize(s, name, plan, modes, reference.final_accuracy, n_chunks,
                        {"deploy_s": deploy_s, "writes": sum(writes.values())})
    write_json_atomic(out_dir / "results.json", results)
    plots = plot_modes(modes, out_dir)
    print_summary(results, console)
    print_written(console, out_dir, plots)
    return results


def summarize(s: Settings, name: str, plan: dict, modes: dict, reference_acc: float,
              n_chunks: int, deploy_info: dict) -> dict:
    """The results.json document (pure)."""
    main_mode = "ina" if "ina" in modes else next(iter(modes))
    rounds = modes[main_mode]["rounds"]
    events = modes[main_mode].get("failover", [])

    def measured(rs: list[dict], key: str = "time_s") -> float | None:
        # gradient data (frames on the wire) synchronized per second, Mbit/s; median round
        if not rs:
            return None
        return float(np.median([n_chunks * FRAME_BYTES * 8 / r[key] / 1e6 for r in rs]))

    def ratio(m: float | None, predicted: float) -> float | None:
        return m / predicted if s.bw and m is not None else None

    # γ compares a plan with the rounds that ran it: after a failover, the rounds up to the
    # failure for the original plan, and those on each new schedule for the re-planned one
    # (a mode after a failure in an earlier mode starts on the re-planned network)
    before = rounds[:events[0]["after_round"] + 1] if events else rounds
    predicted = modes[main_mode].get("plan_gamma", plan["gamma"])
    gamma = {"predicted": predicted, "measured": measured(before),
             "predicted_without_result_load": plan.get("gamma_without_result_load"),
             "unit": "Mbit/s of gradient frames" if s.bw else "link-capacity units (no --bw)"}
    gamma["ratio"] = ratio(gamma["measured"], predicted)
    # the same from the last worker's start: without the workers' compute skew
    if all("sync_time_s" in r for r in before):
        gamma["measured_from_last_start"] = measured(before, "sync_time_s")
        gamma["ratio_from_last_start"] = ratio(gamma["measured_from_last_start"], predicted)
    if events:
        gamma["after_failover"] = []
        for version, e in enumerate(events, 1):
            rs = [r for r in rounds if r.get("schedule_version") == version]
            m = measured(rs)
            gamma["after_failover"].append({
                "switch": e["switch"], "predicted": e["gamma_after"], "measured": m,
                "ratio": ratio(m, e["gamma_after"]), "rounds": len(rs)})
    return {
        "run": name,
        "settings": asdict(s),
        "plan": {k: plan[k] for k in ("gamma", "deployed", "ps", "ps_tor", "workers",
                                      "baselines")},
        "deploy": deploy_info,
        "modes": modes,
        "exact_all_rounds": all(r["exact"] for m in modes.values() for r in m["rounds"]),
        "ps_bytes": {m: d["rounds"][0]["ps_rx_bytes"] for m, d in modes.items()},
        "busiest_link_bytes": {m: d["rounds"][0]["busiest_link_bytes"] for m, d in modes.items()},
        "gamma": gamma,
        "accuracy": {"final": rounds[-1]["accuracy"], "reference": reference_acc},
        "retransmissions": {m: sum(r["retransmissions"] for r in d["rounds"])
                            for m, d in modes.items()},
        "failover": [e for d in modes.values() for e in d.get("failover", [])],
    }


def add_run_parser(sub: Any, add_subcommand: Any) -> None:
    import importlib

    d = Settings()
    p = add_subcommand(sub, "run", cmd_run,
                       "run a synchronization experiment over Mininet (root; default: INA)")
    p.add_argument("--method", choices=sorted(METHODS), default="ina",
                   help="ina (default): P4 in-network aggregation; bcube: BCube hierarchical "
                        "sync (with --baselines); ps, ring: its TCP PS / ring all-reduce "
                        "baselines alone; async: staleness-aware async PS; ndn: NDN with a "
                        "persistent PIT; cluster: clustered temporary PSs")
    for module in sorted(set(METHODS.values()) - {__name__}):  # a module may serve several
        importlib.import_module(module).add_arguments(p)
    p.add_argument("--topo", default=d.topo, help=f"topology spec (default {d.topo})")
    p.add_argument("--ps", default=d.ps, help="parameter server host")
    p.add_argument("--workers", default=d.workers, help="NAME,NAME,... or a COUNT")
    p.add_argument("--budget", type=int, default=d.budget, help="programmable switches (M)")
    p.add_argument("--rounds", type=int, default=d.rounds, help="training rounds per mode")
    p.add_argument("--model", choices=["mlp", "logreg"], default=d.model)
    p.add_argument("--hidden", type=int, default=d.hidden,
                   help="MLP hidden units (sets the gradient size)")
    p.add_argument("--bw", type=float, default=d.bw,
                   help=f"link bandwidth in Mbit/s (TCLink; default {d.bw:g}; 0 = unshaped)")
    p.add_argument("--loss", type=float, default=0.0, help="drop probability on every port")
    p.add_argument("--dup", type=float, default=0.0, help="duplication probability")
    p.add_argument("--reorder", type=float, default=0.0, help="reordering probability")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", choices=["pyswitch", "bmv2"], default=d.target)
    p.add_argument("--modes", default=",".join(d.modes),
                   help="comma list of ina, tor_only, ps_only")
    p.add_argument("--window", type=int, default=d.window, help="chunks in flight per worker")
    p.add_argument("--timeout", type=float, default=d.timeout, help="first retransmission timeout (s)")
    p.add_argument("--round-timeout", type=float, default=d.round_timeout)
    p.add_argument("--fail-switch", metavar="SWITCH@ROUND", default=None,
                   help="fault injection: kill SWITCH once a worker finished ROUND; the "
                        "controller notices, re-plans without it and redeploys (SPEC §9)")
    p.add_argument("--out", default=d.out, help="results folder")
    p.add_argument("--name", default="", help="run name (default: a timestamp)")


def cmd_run(args: argparse.Namespace) -> int:
    if args.method != "ina" and args.fail_switch:
        raise ExperimentError("--fail-switch applies to --method ina (the INA experiment)")
    if args.method != "ina":
        import importlib

        importlib.import_module(METHODS[args.method]).run_method(args)
        return 0
    if args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    s = Settings(topo=args.topo, ps=args.ps, workers=args.workers, budget=args.budget,
                 rounds=args.rounds, model=args.model, hidden=args.hidden,
                 bw=args.bw or None,
                 loss=args.loss, dup=args.dup, reorder=args.reorder, seed=args.seed,
                 target=args.target, modes=tuple(m.strip() for m in args.modes.split(",")),
                 window=args.window, timeout=args.timeout, round_timeout=args.round_timeout,
                 fail_switch=args.fail_switch, out=args.out, name=args.name)
    for what, v in (("--rounds", s.rounds), ("--window", s.window)):
        if v < 1:
            raise ExperimentError(f"{what} must be >= 1, got {v}")
    for what, v in (("--loss", s.loss), ("--dup", s.dup), ("--reorder", s.reorder)):
        if not 0 <= v < 1:
            raise ExperimentError(f"{what} must be in [0, 1), got {v}")
    run_experiment(s)
    return 0
