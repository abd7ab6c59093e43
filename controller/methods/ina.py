"""``python -m controller run``: the INA experiment end to end over Mininet (docs/design.md §3,
§8).

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

The run folder, the network's lifetime, the launch sequence, results after every mode,
``--repeats`` and provenance are :mod:`controller.runner`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.baselines import all_baselines
from controller.deploy import JobSpec, deploy, switch_rules
from controller.errors import ExperimentError
from controller.failover import (
    WORKER_POLICIES,
    SwitchMonitor,
    WorkerMonitor,
    WorkerStopped,
    parse_fail_switch,
    parse_kill_worker,
)
from controller.greedy import greedy
from controller.lp import FastLP, make_job, solve_lp
from controller.network import P4_PROGRAM, ROOT, check_environment, compile_program
from controller.plan import build_plan, chunk_schedule, resolve_workers, write_plan
from controller.records import seed_stats
from controller.replan import replan_members
from controller.report import mean, plot_modes, print_summary, print_written
from controller.runner import Launch, Method, Node, Run, execute
from topo.models import parse_topology
from workers.common.model import Replica, TrainConfig, train_synchronous
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import INA_UDP_PORT, K, num_slots
from workers.ina.job import MODES, JobConfig
from workers.ina.wire import FRAME_BYTES
from workers.ina.worker import n_chunks_for, ps_only_schedule

__all__ = ["InaMethod", "Settings", "run_experiment", "summarize", "schedules_for",
           "exact_sums_ok", "plan_job", "Deployed", "deployed_network", "JOB_IDS"]

JOB_IDS = {"ina": 1, "tor_only": 2, "ps_only": 3}


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
    fail_switch: str | None = None  # "SWITCH@ROUND": kill it after that round (docs/design.md §9)
    # a worker that dies (docs/design.md §9): stop the job, or go on without it
    on_worker_failure: str = "stop"
    kill_worker: str | None = None  # "HOST@ROUND": kill that worker after that round
    worker_timeout: float = 10.0  # the PS reports a member silent this long (s)
    out: str = "results"
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1  # --repeats: seeds seed .. seed + repeats - 1 (controller.runner)


# ------------------------------------------------------------------ pure helpers


def schedules_for(mode: str, plan: dict, workers: list[str], n_chunks: int) -> dict[str, list]:
    """Each worker's ``[(chunk, agg_id, fan_in)]`` in ``mode`` (keys: worker bit as str)."""
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


def member_schedules(mode: str, plan: dict, workers: list[str], survivors: list[str],
                     n_chunks: int, graph: nx.Graph) -> dict[str, list] | None:
    """The survivors' schedules after workers left the job (keys: their original bits; None
    when the mode's schedules do not depend on the members, i.e. ``ps_only``)."""
    if mode == "ina":
        by_name = chunk_schedule(replan_members(graph, plan, survivors), n_chunks)
        return {str(workers.index(w)): [tuple(e) for e in by_name[w]] for w in survivors}
    if mode == "tor_only":
        tor_id = int(plan["switch_ids"][plan["ps_tor"]])
        return {str(workers.index(w)): [(c, tor_id, len(survivors)) for c in range(n_chunks)]
                for w in survivors}
    return None


def exact_sums_by_round(out_dir: Path, n_workers: int, n_values: int,
                        members: list[list[int]]) -> list[bool]:
    """Per round r < len(members): did every worker that finished r apply exactly the int32
    sum of the quantized gradients of ``members[r]`` (that round's member set)?  A worker
    that died has no ``.npz``; its gradients come from the ``.q`` file it appends to before
    sending each round."""
    q: dict[int, np.ndarray] = {}
    sums: dict[int, np.ndarray] = {}
    for w in range(n_workers):
        raw, npz = out_dir / f"worker{w}.q", out_dir / f"worker{w}.npz"
        if npz.exists():
            with np.load(npz) as d:
                q[w], sums[w] = d["q"], d["sums"]
        elif raw.exists():
            q[w] = np.fromfile(raw, dtype=np.int32).reshape(-1, n_values)
    out = []
    for r, ids in enumerate(members):
        have = [w for w in sums if len(sums[w]) > r]
        if not have or any(w not in q or len(q[w]) <= r for w in ids):
            out.append(False)
            continue
        total = np.sum([q[w][r].astype(np.int64) for w in ids], axis=0)
        wrapped = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
        out.append(all(np.array_equal(sums[w][r], wrapped) for w in have))
    return out


def exact_sums_ok(out_dir: Path, n_workers: int) -> list[bool]:
    """Per round: did every worker apply exactly the int32 sum of all quantized gradients?"""
    data = [np.load(out_dir / f"worker{w}.npz") for w in range(n_workers)]
    exact = np.sum([d["q"].astype(np.int64) for d in data], axis=0)
    wrapped = ((exact + 2**31) % 2**32 - 2**31).astype(np.int32)
    return [all(np.array_equal(d["sums"][r], wrapped[r]) for d in data)
            for r in range(wrapped.shape[0])]


def _impairments(s: Settings) -> list[str]:
    if not (s.loss or s.dup or s.reorder):
        return []
    return [f"all:loss={s.loss},dup={s.dup},reorder={s.reorder},seed={s.seed}"]


def plan_job(s: Settings, graph: nx.Graph, out_dir: Path, console: Any = None) -> dict:
    """Plan the job (greedy + LP, with baselines) and write ``plan.json``; says what it does on
    ``console`` if given."""
    if console is not None:
        console.print(f"[bold]planning[/] {s.topo}, PS {s.ps}, workers {s.workers}, "
                      f"budget {s.budget}")
    workers = resolve_workers(graph, s.ps, s.workers)
    # The data plane multicasts every RESULT down a tree, so plan with that load counted
    # (controller.lp.result_tree_coeffs); the docs/design.md §3.3 γ of the same deployment is kept too.
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
    if console is not None:
        console.print(f"plan: γ = {plan['gamma']:.4g}, deployed "
                      f"{plan['deployed'] or '(none)'}, PS ToR {plan['ps_tor']}")
    return plan


@dataclass
class Deployed:
    """A live Mininet network with a plan installed (:func:`deployed_network`)."""

    mininet: Any
    hosts: dict[str, tuple[str, str]]  # host -> (IPv4, MAC)
    rules: dict[str, Any]  # switch -> controller.deploy.SwitchRules
    p4info: Path
    info: dict[str, Any]  # deploy seconds and table writes, for results.json


@contextlib.contextmanager
def deployed_network(run: Run, s: Settings, graph: nx.Graph, plan: dict,
                     jobs: list[JobSpec]) -> Iterator[Deployed]:
    """Compile ina.p4, start the Mininet network of ``s.target`` switches (links at ``s.bw``,
    pyswitch impairments) and install ``plan`` for every job over P4Runtime; the network is
    stopped when the block ends (:meth:`Run.network`).  Every method that runs INA jobs on a
    planned network (ina, ddp) starts it this way."""
    from topo.mininet_net import build_net
    from topo.mininet_switch import BMv2Switch, PySwitch

    console = run.console
    console.print(f"[bold]compiling[/] {P4_PROGRAM.relative_to(ROOT)} for {s.target}")
    p4info, device_config = compile_program(s.target, run.out_dir / "build")
    switch_cls = BMv2Switch if s.target == "bmv2" else PySwitch
    opts = {"impair": _impairments(s)} if s.target == "pyswitch" else {}
    console.print(f"[bold]starting Mininet[/]: {graph.number_of_nodes()} nodes, "
                  f"{s.target} switches" + (f", {s.bw:g} Mbit/s links" if s.bw else ""))
    with run.network(build_net(graph, switch_cls, switch_opts=opts,
                               bw_unit_mbps=1.0 if s.bw else None)) as mininet:
        hosts = {h: (info.ip, info.mac) for h, info in mininet.plan.hosts.items()}
        rules = switch_rules(graph, plan, mininet.plan.ports, hosts, jobs)
        addresses = {sw: (mininet.grpc_address(sw), mininet.device_id(sw)) for sw in rules}
        console.print(f"[bold]deploying[/] over P4Runtime to {len(rules)} switches")
        t0 = time.perf_counter()
        writes = deploy(rules, addresses, p4info, device_config)
        yield Deployed(mininet, hosts, rules, p4info,
                       {"deploy_s": time.perf_counter() - t0, "writes": sum(writes.values())})


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
    alive = [i for i, w in enumerate(workers) if w not in gone]
    reports = [json.loads((out_dir / f"worker{i}.json").read_text()) for i in alive
               if (out_dir / f"worker{i}.json").exists()]
    ps_path = out_dir / "ps.json"
    ps_report = json.loads(ps_path.read_text()) if ps_path.exists() else {"stats": {}}
    n_done = min(len(rep["rounds"]) for rep in reports) if reports else 0
    members = [reports[0]["rounds"][r].get("members", cfg.worker_ids) for r in range(n_done)]
    exact = (exact_sums_ok(out_dir, len(workers)) if not gone and stopped is None
             else exact_sums_by_round(out_dir, len(workers), cfg.n_values, members))
    tor = mininet.plan.hosts[ps].neighbours[0]
    if not moved:  # stopped before the runner read the counters: no per-round bytes
        moved = {(tor, ps): 0}
    rounds = []
    for r in range(n_done):
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
            **({"members": [workers[i] for i in members[r]]} if gone else {}),
        })
    busiest = max(moved, key=moved.get)
    record = {"job_id": cfg.job_id, "rounds": rounds, "ps": ps_report["stats"],
            "grad_bytes": 4 * cfg.n_values,  # int32 values synchronized per round
            "ps_link_bytes_total": moved[(tor, ps)], "busiest_link": list(busiest),
            "busiest_link_bytes_total": moved[busiest],
            "failover": [asdict(e) for e in monitor.events[n_events:]],
            "plan_gamma": plan_gamma,  # of the plan this mode started on
            "link_bytes_total": {f"{a}->{b}": v for (a, b), v in sorted(moved.items())}}
    if deaths is not None and deaths.job_events:
        record["worker_failure"] = worker_failure_record(deaths, rounds, ps_report)
    if stopped is not None:
        record["stopped"] = str(stopped)
        stopped.record = record  # the caller records it under its label, then stops
        raise stopped
    return record


def worker_failure_record(deaths: WorkerMonitor, rounds: list[dict],
                          ps_report: dict) -> list[dict]:
    """results.json's record of each worker that died in one job (docs/design.md §9): the
    event, the round the PS made it take effect (its own report is the authority), and
    exactness of the rounds before and after."""
    changes = ps_report.get("member_changes", [])
    out = []
    for i, e in enumerate(deaths.job_events):
        d = asdict(e)
        if i < len(changes):
            d["round_effective"] = changes[i]["from_round"]
        cut = d["round_effective"] if d["round_effective"] is not None else len(rounds)
        d["rounds_completed"] = len(rounds)
        d["exact_before"] = all(r["exact"] for r in rounds[:cut])
        d["exact_after"] = (all(r["exact"] for r in rounds[cut:])
                            if d["round_effective"] is not None else None)
        d["accuracy_after"] = rounds[-1]["accuracy"] if rounds else None
        out.append(d)
    return out


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
        d = Settings()
        parser.add_argument(
            "--on-worker-failure", choices=WORKER_POLICIES, default=d.on_worker_failure,
            help="INA: when a worker dies, stop the job (one line naming it; finished rounds "
                 "kept) or continue without it from the next round the PS has not completed "
                 "(docs/design.md §9; default stop)")
        parser.add_argument(
            "--kill-worker", metavar="HOST@ROUND", default=None,
            help="INA fault injection: kill worker HOST once a worker finished ROUND")

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
        self.kill = (parse_kill_worker(s.kill_worker, resolve_workers(graph, s.ps, s.workers),
                                       s.rounds) if s.kill_worker else None)
        # the slot count the program is compiled with (--slots, docs/protocol.md §2)
        s.extra["num_slots"] = num_slots()
        run.settings = asdict(s)

    def execute(self, run: Run) -> None:
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
        print_summary(results, run.console)
        print_written(run.console, run.out_dir, plots)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings of the ``run`` options, checked (one ExperimentError per mistake)."""
    if args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    s = Settings(topo=args.topo, ps=args.ps, workers=args.workers, budget=args.budget,
                 rounds=args.rounds, model=args.model, hidden=args.hidden,
                 bw=args.bw or None,
                 loss=args.loss, dup=args.dup, reorder=args.reorder, seed=args.seed,
                 target=args.target, modes=tuple(m.strip() for m in args.modes.split(",")),
                 window=args.window, timeout=args.timeout, round_timeout=args.round_timeout,
                 fail_switch=args.fail_switch, out=args.out, name=args.name,
                 on_worker_failure=getattr(args, "on_worker_failure", "stop"),
                 kill_worker=getattr(args, "kill_worker", None),
                 repeats=args.repeats)
    for what, v in (("--rounds", s.rounds), ("--window", s.window), ("--repeats", s.repeats)):
        if v < 1:
            raise ExperimentError(f"{what} must be >= 1, got {v}")
    for what, v in (("--loss", s.loss), ("--dup", s.dup), ("--reorder", s.reorder)):
        if not 0 <= v < 1:
            raise ExperimentError(f"{what} must be in [0, 1), got {v}")
    return s


def run_experiment(s: Settings) -> dict:
    """The whole experiment; returns the results dict (also written to disk)."""
    return execute(InaMethod(settings=s))
