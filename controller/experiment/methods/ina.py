"""``python -m controller run``: the INA experiment end to end over Mininet (docs/design.md §3,
§8).

1. Build the topology model and plan the job (greedy + LP, with baselines).
2. Compile ``p4src/ina.p4`` for the target (pyswitch, or p4c for BMv2).
3. Start a Mininet network of P4 switches (TCLink bandwidth; loss/duplication/reordering by
   pyswitch's impairment options, since our kernel has no netem).
4. Install the plan over P4Runtime (:mod:`controller.dataplane.deploy`): one job per sync mode.
5. For each mode (``ina``, ``ps_only``, optionally ``tor_only``) run the PS and one worker
   process per host (:mod:`workers.ina.ps_node`, :mod:`workers.ina.worker_node`), training a real
   model; measure bytes on every link from the switch-side interface counters.
6. Check exactness (every applied sum equals the exact int32 sum of the workers' quantized
   gradients), compare accuracy with a single-process reference, compare measured γ with the
   LP's, and write ``results/<run>/results.json`` plus PNG plots.

The run folder, the network's lifetime, the launch sequence, results after every mode,
``--repeats`` and provenance are :mod:`controller.experiment.runner`'s.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.dataplane.deploy import SLOT_POLICIES, JobSpec
from controller.errors import ExperimentError
from controller.experiment.failover import (
    WORKER_POLICIES,
    SwitchMonitor,
    WorkerMonitor,
    WorkerStopped,
    parse_fail_switch,
    parse_kill_worker,
)
from controller.experiment.methods.ina_core import (
    JOB_IDS,
    Deployed,
    Settings,
    deployed_network,
    exact_sums_by_round,
    exact_sums_ok,
    job_record,
    member_schedules,
    plan_job,
    schedules_for,
    worker_failure_record,
)
from controller.experiment.methods.ina_jobs import (
    MODELS,
    execute_jobs,
    jobs_summary,
    plot_jobs_gamma,
    print_jobs,
    references,
)
from controller.experiment.network import check_environment
from controller.experiment.records import seed_stats
from controller.experiment.report import plot_modes, print_summary, print_written
from controller.experiment.run_options import (
    add_impairment_options,
    add_round_timeout,
    add_topology_options,
    add_transport_options,
)
from controller.experiment.runner import Launch, Method, Node, Run, execute
from controller.options import finite_float, read_topology
from controller.plan.document import resolve_workers
from controller.plan.jobs import jobs_argument
from controller.plan.lp import PlanError
from controller.plan.lp_jobs import OBJECTIVES
from topo.models import TopologyError, parse_topology
from workers.common.model import Replica, TrainConfig, train_synchronous
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import INA_UDP_PORT, K, num_slots
from workers.ina.job import MODES, JobConfig
from workers.ina.wire import FRAME_BYTES
from workers.ina.worker import n_chunks_for

# the shared pieces stay importable from here, where one-job callers look for them
__all__ = ["InaMethod", "Settings", "run_experiment", "summarize", "schedules_for",
           "member_schedules", "exact_sums_ok", "exact_sums_by_round", "plan_job", "Deployed",
           "deployed_network", "JOB_IDS", "run_mode", "settings_from_args"]


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
        # a worker that died (docs/design.md §9): who, when noticed, from which round the
        # job went on without it, and whether the rounds before and after were exact
        "worker_failure": [{**e, "mode": e["policy"]} for d in modes.values()
                           for e in d.get("worker_failure", [])],
    }


# ------------------------------------------------------------------ one mode


def run_mode(run: Run, mininet: Any, mode: str, cfg: JobConfig, workers: list[str], ps: str,
             monitor: SwitchMonitor, deaths: WorkerMonitor | None = None) -> dict:
    """Run one mode's job on the live network; returns its per-round records.  ``deaths``
    handles a worker that dies (docs/design.md §9); with ``stop`` the rounds every survivor
    finished are recorded before :class:`WorkerStopped` goes on up."""
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    job_file = out_dir / "job.json"
    cfg.save(job_file)
    task = run.progress.add_task(f"{mode}: rounds", total=cfg.rounds)

    def on_line(host: str, line: str) -> None:
        if deaths is not None:
            deaths.on_line(host, line)
        words = line.split()  # "worker I round R ..."
        if len(words) > 3 and words[0] == "worker" and words[2] == "round":
            monitor.on_worker_round(int(words[3]))
            if host == min(run_hosts, key=workers.index):  # the first worker still running
                run.progress.advance(task)

    def watch() -> None:
        monitor.poll()
        if deaths is not None:
            deaths.poll()

    def on_failure(host: str, code: int) -> bool:
        if deaths is None or not deaths.on_failure(host, code):
            return False
        run_hosts.discard(host)
        return True

    run_hosts = set(workers)
    n_events, plan_gamma = len(monitor.events), monitor.plan["gamma"]
    stopped: WorkerStopped | None = None
    try:
        done = run.launch(mininet, Launch(
            label=mode, out_dir=out_dir,
            servers=[Node(ps, "workers.ina.ps_node", (str(job_file),))],
            nodes=[Node(w, "workers.ina.worker_node", (str(job_file), "--worker", str(i)))
                   for i, w in enumerate(workers)],
            start_file=Path(cfg.start_file) if cfg.start_file else None,
            timeout_s=cfg.round_timeout_s * cfg.rounds, watch=watch, on_line=on_line,
            on_failure=on_failure, on_procs=deaths.on_procs if deaths else None,
            server_exit="stop", stop_timeout_s=30))  # the PS serves retransmissions to the end
        moved, ps_code = done.moved, done.server_codes[ps]
    except WorkerStopped as exc:  # the finished rounds are kept (results.json), then stop
        stopped, moved, ps_code = exc, {}, 0
    if ps_code != 0:
        raise ExperimentError(f"{mode}: the PS did not complete every round "
                              f"(see {out_dir}/logs.txt)")
    gone = (set(deaths.removed_hosts()) | {e.worker for e in deaths.job_events} if deaths
            else set())
    tor = mininet.plan.hosts[ps].neighbours[0]
    record, ps_report = job_record(cfg, workers, ps, tor, moved, gone,
                                   complete=stopped is None)
    record["failover"] = [asdict(e) for e in monitor.events[n_events:]]
    record["plan_gamma"] = plan_gamma  # of the plan this mode started on
    rounds = record["rounds"]
    if deaths is not None and deaths.job_events:
        record["worker_failure"] = worker_failure_record(deaths, rounds, ps_report)
    if stopped is not None:
        record["stopped"] = str(stopped)
        stopped.record = record  # the caller records it under its label, then stops
        raise stopped
    return record


# ------------------------------------------------------------------ the method


class InaMethod(Method):
    """P4 in-network aggregation, with its PS-only and ToR-only modes (module docstring)."""

    name = "ina"
    help = "ina (default): P4 in-network aggregation"

    def __init__(self, args: argparse.Namespace | None = None,
                 settings: Settings | None = None) -> None:
        super().__init__(args if args is not None else argparse.Namespace())
        self.s = settings if settings is not None else settings_from_args(args)
        self.args.out, self.args.name, self.args.seed = self.s.out, self.s.name, self.s.seed

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """INA's options: its network, plan and transport, faults, several jobs."""
        d = Settings()
        add_topology_options(parser, topo=d.topo, ps=d.ps, workers=d.workers)
        g = parser.add_argument_group("--method ina (P4 in-network aggregation, "
                                      "docs/design.md §3)")
        add_transport_options(g, budget=d.budget, window=d.window, timeout=d.timeout)
        add_round_timeout(g, d.round_timeout)
        add_impairment_options(g)
        g.add_argument("--modes", default=",".join(d.modes),
                       help=f"comma list of {', '.join(MODES)} (default {','.join(d.modes)})")
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
            help="INA fault injection: kill worker HOST once a worker finished ROUND")
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
            "--objective", choices=OBJECTIVES, default=d.objective,
            help="with --jobs: maximise min_j γ_j/w_j (default) or the sum of γ_j")
        g.add_argument(
            "--kill-ps", metavar="HOST@ROUND", default=None,
            help="with --jobs, fault injection: kill the PS on HOST once its job finished "
                 "ROUND (that job stops, the others go on)")
        g.add_argument(
            "--no-alone", action="store_true",
            help="with --jobs: do not run each job alone afterwards for reference")

    def repeats(self) -> int:
        return self.s.repeats

    def prepare(self, run: Run) -> None:
        s = self.s
        for m in s.modes:
            if m not in MODES:
                raise ExperimentError(f"--modes: unknown mode {m!r} (expected {', '.join(MODES)})")
        check_environment(s.target)
        graph = nx.Graph(parse_topology(s.topo))
        if s.bw is not None:
            nx.set_edge_attributes(graph, float(s.bw), "bw")
        self.graph = nx.freeze(graph)
        self.fail = parse_fail_switch(s.fail_switch, graph, s.rounds) if s.fail_switch else None
        if s.on_worker_failure not in WORKER_POLICIES:
            raise ExperimentError(f"--on-worker-failure: expected stop or continue, got "
                                  f"{s.on_worker_failure!r}")
        if s.jobs is not None:
            self._prepare_jobs(graph)
        else:
            for what, v in (("--kill-ps", s.kill_ps), ("--slot-policy partitioned",
                                                       s.slot_policy != "shared" or None)):
                if v:
                    raise ExperimentError(f"{what} applies to several jobs (--jobs)")
            self.kill = (parse_kill_worker(s.kill_worker,
                                           resolve_workers(graph, s.ps, s.workers), s.rounds)
                         if s.kill_worker else None)
        # the slot count the program is compiled with (--slots, docs/protocol.md §2)
        s.extra["num_slots"] = num_slots()
        run.settings = asdict(s)

    def _prepare_jobs(self, graph: nx.Graph) -> None:
        s = self.s
        if s.slot_policy not in SLOT_POLICIES:
            raise ExperimentError(f"--slot-policy: expected one of {', '.join(SLOT_POLICIES)}")
        try:
            self.job_specs = jobs_argument(s.jobs, graph)
        except PlanError as exc:
            raise ExperimentError(str(exc)) from None
        for j in self.job_specs:  # before any network or file (also checked when built)
            if (j.model or s.model) not in MODELS:
                raise ExperimentError(f"--jobs: job {j.name!r}: model {j.model!r} (expected "
                                      f"{' or '.join(MODELS)})")
        everyone = [w for j in self.job_specs for w in j.workers]
        rounds = min(j.rounds or s.rounds for j in self.job_specs)
        self.kill = parse_kill_worker(s.kill_worker, everyone, rounds) if s.kill_worker else None
        if s.kill_ps and s.kill_ps.partition("@")[0].strip() not in [j.ps for j in
                                                                        self.job_specs]:
            raise ExperimentError(f"--kill-ps: {s.kill_ps.partition('@')[0].strip()!r} is "
                                  "not the PS of a job")

    def execute(self, run: Run) -> None:
        if self.s.jobs is not None:
            execute_jobs(self, run)
            return
        s, graph, console, out_dir = self.s, self.graph, run.console, run.out_dir
        plan = self.plan = plan_job(s, graph, out_dir, console)
        workers = list(plan["workers"])
        trains = [TrainConfig(model=s.model, hidden=s.hidden, n_workers=len(workers),
                              rounds=s.rounds, batch_size=s.batch_size, lr=s.lr, seed=seed)
                  for seed in run.seeds]
        self.train = trains[0]
        n_values = Replica(self.train, 0).params.size
        self.n_chunks = n_chunks = n_chunks_for(n_values, K)
        frac_bits = choose_frac_bits(8.0, len(workers))
        jobs = [JobSpec(JOB_IDS[m], tuple(workers)) for m in s.modes]
        with deployed_network(run, s, graph, plan, jobs) as net:
            mininet, hosts = net.mininet, net.hosts
            self.deploy_info = net.info
            monitor = SwitchMonitor(mininet, graph, plan, net.rules, jobs, hosts, net.p4info,
                                    say=console.print, fail=self.fail)
            deaths = WorkerMonitor(monitor, s.on_worker_failure, console.print, self.kill)
            for rep, train in enumerate(trains):
                for m in s.modes:
                    # the first repeat keeps the folders it always had; later ones add the seed
                    mode_dir = out_dir / (m if rep == 0 else f"{m}-seed{train.seed}")
                    # a switch that died in an earlier mode stays dead: plan from the current
                    schedule_file = mode_dir / "schedules.json" if m == "ina" else None

                    def after_switch(p: dict) -> dict:
                        # a switch that dies after a worker did: plan for the survivors
                        left = [w for w in workers if w not in deaths.removed_hosts()]
                        if len(left) == len(workers):
                            return schedules_for("ina", p, workers, n_chunks)
                        return member_schedules("ina", p, workers, left, n_chunks,
                                                monitor.graph) or {}

                    def after_worker(left: list[str], m: str = m) -> dict | None:
                        return member_schedules(m, monitor.plan, workers, left, n_chunks,
                                                monitor.graph)
                    monitor.follow(schedule_file, after_switch)
                    deaths.begin(m, next(j for j in jobs if j.job_id == JOB_IDS[m]), s.ps,
                                 mode_dir / "removals.json", after_worker)
                    cfg = JobConfig(
                        job_id=JOB_IDS[m], mode=m, rounds=s.rounds, train=train,
                        worker_ids=list(range(len(workers))),
                        worker_addrs=[(hosts[w][0], INA_UDP_PORT) for w in workers],
                        ps_addr=(hosts[s.ps][0], INA_UDP_PORT),
                        result_dests=[(hosts[workers[0]][0], INA_UDP_PORT)],
                        schedules=schedules_for(m, monitor.plan, workers, n_chunks),
                        schedule_file=str(schedule_file) if schedule_file else None,
                        frac_bits=frac_bits,
                        n_values=n_values, out_dir=str(mode_dir), window=s.window,
                        timeout=s.timeout, round_timeout_s=s.round_timeout,
                        start_file=str(mode_dir / "start"),
                        removal_file=str(mode_dir / "removals.json"),
                        members_file=str(mode_dir / "members.json"),
                        worker_timeout_s=s.worker_timeout)
                    try:
                        record = run_mode(run, mininet, m, cfg, workers, s.ps, monitor, deaths)
                    except WorkerStopped as exc:
                        run.record(m, exc.record, rep)
                        raise
                    run.record(m, record, rep)

    def results(self, run: Run) -> dict[str, Any]:
        if self.s.jobs is not None:
            refs = references(self.tenants, self.s, run.seeds[0])
            return {"run": run.name, "method": "ina", "settings": asdict(self.s),
                    "plan": {k: self.plan[k] for k in ("objective", "deployed",
                                                       "programmable", "fairness")},
                    "deploy": self.deploy_info, "modes": run.modes,
                    "failover": [asdict(e) for e in self.switch_events],
                    **jobs_summary(self.plan, self.tenants, run.modes, refs, self.s.bw)}
        reference = train_synchronous(self.train)
        res = summarize(self.s, run.name, self.plan, run.modes, reference.final_accuracy,
                        self.n_chunks, self.deploy_info)
        if len(run.seeds) > 1:  # the figures of summarize, per repeat, mean ± std
            per = [summarize(self.s, run.name, self.plan, rep, reference.final_accuracy,
                             self.n_chunks, self.deploy_info) for rep in run.repeats]
            res["gamma"]["measured_over_repeats"] = seed_stats(
                [p["gamma"]["measured"] for p in per])
        return res

    def report(self, run: Run, results: dict[str, Any]) -> None:
        plots = plot_modes(run.modes, run.out_dir)
        if self.s.jobs is not None:
            plots += [p for p in (plot_jobs_gamma(results, run.out_dir),) if p is not None]
            print_jobs(results, run.console)
            print_written(run.console, run.out_dir, plots)
            return
        print_summary(results, run.console)
        print_written(run.console, run.out_dir, plots)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings of the ``run`` options, checked (one ExperimentError per mistake; the shared
    options were checked when the method was built): the topology, PS, workers, modes and
    fault spec as prepare() reads them, before any network or file."""
    d = Settings()
    s = Settings(topo=args.topo, ps=args.ps, workers=args.workers, budget=args.budget,
                 rounds=args.rounds, model=args.model, hidden=args.hidden,
                 bw=args.bw or None,
                 loss=args.loss, dup=args.dup, reorder=args.reorder, seed=args.seed,
                 target=args.target,
                 modes=tuple(m.strip() for m in getattr(args, "modes", ",".join(d.modes))
                             .split(",")),
                 window=args.window, timeout=args.timeout, round_timeout=args.round_timeout,
                 fail_switch=getattr(args, "fail_switch", None), out=args.out, name=args.name,
                 on_worker_failure=getattr(args, "on_worker_failure", d.on_worker_failure),
                 kill_worker=getattr(args, "kill_worker", None),
                 worker_timeout=getattr(args, "worker_timeout", d.worker_timeout),
                 jobs=getattr(args, "jobs", None),
                 slot_policy=getattr(args, "slot_policy", d.slot_policy),
                 objective=getattr(args, "objective", d.objective),
                 kill_ps=getattr(args, "kill_ps", None),
                 no_alone=getattr(args, "no_alone", False),
                 repeats=args.repeats)
    if not s.worker_timeout >= 0:
        raise ExperimentError(f"--worker-timeout must be >= 0 seconds, got {s.worker_timeout}")
    modes = [m for m in s.modes if m]
    bad = [m for m in modes if m not in MODES]
    if not modes or bad:
        raise ExperimentError(f"--modes: unknown mode {(bad or [''])[0][:40]!r} "
                              f"(expected {', '.join(MODES)})")
    try:
        graph = read_topology(s.topo)
        if s.jobs is None:  # --jobs names every job's hosts instead
            if s.ps not in graph or graph.nodes[s.ps].get("kind") != "host":
                raise ExperimentError(f"--ps {s.ps[:40]!r} is not a host of the topology")
            resolve_workers(graph, s.ps, s.workers)
    except (TopologyError, PlanError) as exc:
        raise ExperimentError(str(exc)) from None
    if s.fail_switch:
        rnd = s.fail_switch.partition("@")[2].strip()
        if not (rnd.isascii() and rnd.isdigit() and len(rnd) <= 9):
            raise ExperimentError(f"--fail-switch: expected SWITCH@ROUND, got "
                                  f"{s.fail_switch[:40]!r}")
        parse_fail_switch(s.fail_switch, graph, s.rounds)
    return s


def run_experiment(s: Settings) -> dict:
    """The whole experiment; returns the results dict (also written to disk)."""
    return execute(InaMethod(settings=s))
