"""The one INA experiment engine (docs/design.md §3, §3.10, §9): one job or several, on one
planned network.

A run is a list of :class:`Tenant` s -- the jobs, each with its PS, workers, model, rounds,
weight, its part of the plan and one job id per sync mode (``JOB_IDS[mode] + 4 k`` for the
k-th job, so every (job, mode) has its own id, membership, masks and multicast group).  A
single-job run is a run of one tenant (``solo``): the same planning pipeline, rule
installer, job files (:func:`~controller.experiment.methods.ina.core.job_config`), launch
and records; only its labels and folders are the mode's name alone (``ina``, ``ps_only``),
and a worker that dies under ``--on-worker-failure stop`` ends the whole run
(:class:`~controller.experiment.failover.WorkerStopped`) rather than its job.

:func:`run_launch` starts every tenant's PS and workers behind one start barrier, so the jobs
compete for the switches and links, and follows each job on its own: a worker that dies stops
its job alone (``stop``, one line) or leaves it (``continue``), a PS that exits early stops its
job alone, and the other jobs run to the end.  :func:`execute` runs every mode (and, with
several jobs, each job alone for reference, label ``alone/<job>``) for every seed.  The fault
campaign and the benches launch through :func:`run_mode`, the same function for one job file.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.dataplane.deploy import SwitchJob
from controller.errors import ExperimentError
from controller.experiment.cross_traffic import PAIRS_KEY, cross_pairs, pairs_of
from controller.experiment.failover import SwitchMonitor, WorkerMonitor, WorkerStopped
from controller.experiment.methods.ina.core import (
    Settings,
    job_config,
    job_record,
    member_schedules,
    plan_job,
    plan_request,
    planned_gamma,
    planned_loads,
    schedules_for,
    worker_failure_record,
)
from controller.experiment.methods.ina.networks import MininetNetwork, Network
from controller.experiment.methods.ina.pools import group_workers, hosts_per_process
from controller.experiment.methods.ina.tenants import (
    Tenant,
    deploy_specs,
    make_tenants,
    parse_kill_ps,
    solo_tenant,
)
from controller.experiment.plan_figure import draw_plan
from controller.experiment.runner import Launch, Node, Run
from controller.plan.document import write_plan
from controller.plan.jobs import JobEntry
from controller.plan.joint import job_plan, jobs_summary_lines
from controller.plan.pipeline import make_plan
from controller.plan.replan import replan_jobs_without
from controller.plan.types import Plan
from workers.ina.events import ControlEvent, RoundEvent, parse_event
from workers.ina.job import JobConfig

__all__ = ["EngineRun", "ALONE", "run_launch", "run_mode", "execute"]

ALONE = "alone"  # label prefix of each job run alone on the same network
_POOL_FAILED = re.compile(r"pool member worker (\d+):")  # workers.ina.pool_node's last line


# ------------------------------------------------------------------ one launch


@dataclass
class _Job:
    """One job of a launch: who runs it and its job file."""

    name: str
    ps: str
    workers: list[str]
    cfg: JobConfig
    planned_gamma: float  # of the plan this launch starts on
    planned_loads: list[dict] | None = None  # a hierarchical job's tree loads (core)

    @property
    def hosts(self) -> list[str]:
        return [self.ps, *self.workers]


class _Watch:
    """Follows the jobs of one launch: routes the events its processes print
    (:mod:`workers.ina.events`) to each job's WorkerMonitor and progress bar and to the
    switch monitor, ends a job whose PS exits early, injects ``--kill-ps``."""

    def __init__(self, run: Run, mode: str, jobs: list[_Job],
                 monitors: dict[str, WorkerMonitor | None], switches: SwitchMonitor,
                 kill_ps: tuple[str, int] | None, solo: bool) -> None:
        self.run, self.jobs, self.monitors, self.kill_ps = run, jobs, monitors, kill_ps
        self.switches = switches
        self.owner = {h: j for j in jobs for h in j.hosts}
        self.tasks = {j.name: run.progress.add_task(
            f"{mode}: rounds" if solo else f"{mode} {j.name}: rounds", total=j.cfg.rounds)
            for j in jobs}
        self.newest = {j.name: -1 for j in jobs}
        self.procs: Any = None
        self.serves: dict[str, list[str]] = {}  # a pool's host -> the hosts it serves
        self._killed = False

    def on_procs(self, procs: Any) -> None:
        self.procs = procs
        for m in self.monitors.values():
            if m is not None:
                m.on_procs(procs)

    def on_line(self, host: str, line: str) -> None:
        """One output line of ``host``: an event is followed, any other line only logged."""
        j = self.owner.get(host)
        event = parse_event(line) if j is not None else None
        if j is None or event is None:
            return
        if isinstance(event, RoundEvent) and 0 <= event.worker < len(j.workers):
            host = j.workers[event.worker]  # a pool's line: the member that printed it
        mon = self.monitors.get(j.name)
        if mon is not None:
            mon.on_event(host, event)
        if isinstance(event, RoundEvent):
            r = event.round
            self.switches.on_worker_round(r)
            if r > self.newest[j.name]:
                self.newest[j.name] = r
                self.run.progress.update(self.tasks[j.name], completed=r + 1)
        elif isinstance(event, ControlEvent):
            self.switches.on_control(event)

    def on_failure(self, host: str, code: int) -> bool:
        j = self.owner.get(host)
        if j is not None and host in self.serves and self.procs is not None:
            # a pool's process: its last line names the member whose round failed
            # (workers.ina.pool_node); else the pool is taken for its first host
            m = _POOL_FAILED.search(self.procs.last_line(host))
            if m and int(m.group(1)) < len(j.workers):
                host = j.workers[int(m.group(1))]
        mon = self.monitors.get(j.name) if j is not None else None
        return mon is not None and mon.on_failure(host, code)

    def watch(self) -> None:
        self.switches.poll()  # a dead switch: every job planned again (jointly)
        for j in self.jobs:
            mon = self.monitors.get(j.name)
            if mon is None:
                continue
            mon.poll()
            if (self.procs is None or mon.stopped is not None or mon.scope is None
                    or j.ps not in self.procs.procs):
                continue
            if (self.kill_ps and not self._killed and self.kill_ps[0] == j.ps
                    and self.newest[j.name] >= self.kill_ps[1]):
                self._killed = True
                self.run.console.print(f"[fault injection] killing the PS of job {j.name} "
                                       f"({j.ps}) after round {self.newest[j.name]}")
                self.procs.procs[j.ps].kill()
            code = self.procs.procs[j.ps].poll()
            running = [w for w in j.workers if w in self.procs.procs
                       and self.procs.procs[w].poll() is None]
            if code is not None and running:
                mon.stop_job(f"its PS on {j.ps} exited (code {code}) in round "
                             f"{self.newest[j.name] + 1}; the job stops")


def run_launch(run: Run, network: Any, mode: str, label: str, jobs: list[_Job],
               monitors: dict[str, WorkerMonitor | None], switches: SwitchMonitor,
               out_dir: Path, kill_ps: tuple[str, int] | None = None,
               solo: bool = False,
               per_process: Callable[[int], int] | None = None) -> dict[str, dict]:
    """One launch of every job in ``jobs`` at once (module docstring); returns each job's
    record (:func:`~controller.experiment.methods.ina.core.job_record`, plus the plan's γ it
    started on, the switch fail-overs and worker failures during it, ``collisions``: the
    contributions flagged FALLBACK at the PS; with several jobs also ``job`` and
    ``stopped``).  ``solo``: one job whose PS failing is an
    :class:`ExperimentError` and whose stopped worker ends the run (:class:`WorkerStopped`,
    raised with the finished rounds' record attached).  ``network``: the deployed network
    (``launch(run, spec)`` and ``mininet``, :mod:`~controller.experiment.methods.
    ina.networks`), or a Mininet network itself.  ``per_process(n)``: hosts per worker
    process for a job of ``n`` workers (:mod:`~controller.experiment.methods.ina.pools`;
    None: one per host); a network that cannot pool says so (``pools_hosts``)."""
    if not getattr(network, "pools_hosts", False):
        per_process = None
    if not hasattr(network, "launch"):
        network = _OnMininet(network)
    mininet = network.mininet
    jw = _Watch(run, mode, jobs, monitors, switches, kill_ps, solo)
    n_events = len(switches.events)
    servers, nodes = [], []
    serves: dict[str, list[str]] = {}  # a pool's host -> the worker hosts it serves
    for j in jobs:
        job_file = Path(j.cfg.out_dir) / "job.json"
        job_file.parent.mkdir(parents=True, exist_ok=True)
        j.cfg.save(job_file)
        servers.append(Node(j.ps, "workers.ina.ps_node", (str(job_file),)))
        size = per_process(len(j.workers)) if per_process is not None else 1
        edge_of = {w: mininet.plan.hosts[w].neighbours[0] for w in j.workers} if size > 1 else {}
        for group in group_workers(j.workers, size, edge_of):
            lead = j.workers[group[0]]
            if len(group) == 1:
                nodes.append(Node(lead, "workers.ina.worker_node",
                                  (str(job_file), "--worker", str(group[0]))))
                continue
            # one process on the first member's host, each member's sockets in its own
            # host's namespace (workers.ina.pool_node); its CPU is counted under ``lead``
            members = [a for i in group
                       for a in ("--member", f"{i}={network.netns(j.workers[i])}")]
            nodes.append(Node(lead, "workers.ina.pool_node", (str(job_file), *members)))
            serves[lead] = [j.workers[i] for i in group]
    jw.serves = serves
    start = jobs[0].cfg.start_file
    stopped_run: WorkerStopped | None = None
    try:
        done = network.launch(run, Launch(
            label=label, out_dir=out_dir, servers=servers, nodes=nodes,
            servers_what="the PS" if solo else "the PSs",
            start_file=Path(start) if start else None,
            timeout_s=max(j.cfg.round_timeout_s * j.cfg.rounds for j in jobs),
            watch=jw.watch, on_line=jw.on_line, on_failure=jw.on_failure,
            on_procs=jw.on_procs, serves=serves,
            server_exit="stop", stop_timeout_s=30))  # the PS serves retransmissions to the end
        moved, codes, cpu = done.moved, done.server_codes, done.cpu
        extra = getattr(done, "extra", {})  # what the network adds (simulated: "sim")
    except WorkerStopped as exc:  # solo: the finished rounds are kept, then the run stops
        stopped_run, moved, codes, cpu, extra = exc, {}, {}, None, {}
    records = {}
    for j in jobs:
        mon = monitors.get(j.name)
        stopped = mon.stopped if mon is not None else None
        if stopped is None and codes.get(j.ps, 0) != 0:
            if solo:
                raise ExperimentError(f"{mode}: the PS did not complete every round "
                                      f"(see {out_dir}/logs.txt)")
            stopped = (f"{j.name}: its PS did not complete every round "
                       f"(see {out_dir}/logs.txt)")
            run.console.print(stopped)
        gone = (set(mon.removed_hosts()) | {e.worker for e in mon.job_events}
                if mon is not None else set())
        tor = mininet.plan.hosts[j.ps].neighbours[0]
        rec, ps_report = job_record(j.cfg, j.workers, j.ps, tor, moved, gone,
                                    complete=stopped is None and stopped_run is None)
        rec.update(extra)
        if not solo:
            rec["job"] = j.name
        rec["failover"] = [asdict(e) for e in switches.events[n_events:]]
        rec["plan_gamma"] = j.planned_gamma
        if j.planned_loads is not None:
            rec["plan_loads"] = j.planned_loads
        # contributions that reached the PS unaggregated: a slot held by another key (of
        # this job or another), no slot for the job at a switch, or no aggregator
        rec["collisions"] = int(ps_report.get("stats", {}).get("fallbacks", 0))
        if cpu:  # what paced the launch: busy cores (all its jobs together), its length
            rec["cores"] = {k: cpu.get(k) for k in ("busy_cores", "rounds_busy_cores",
                                                     "rounds_machine_busy_cores",
                                                     "rounds_wall_s", "wall_s", "cpus")}
        if mon is not None and mon.job_events:
            rec["worker_failure"] = worker_failure_record(mon, rec["rounds"], ps_report)
        if stopped is not None:
            rec["stopped"] = stopped
        records[j.name] = rec
    if stopped_run is not None:
        rec = records[jobs[0].name]
        rec["stopped"] = str(stopped_run)
        stopped_run.record = rec  # the caller records it under its label, then stops
        raise stopped_run
    return records


@dataclass
class _OnMininet:
    """A Mininet network as :func:`run_launch` launches in (the campaign's and benches')."""

    mininet: Any

    def launch(self, run: Run, spec: Launch) -> Any:
        return run.launch(self.mininet, spec)


def run_mode(run: Run, mininet: Any, mode: str, cfg: JobConfig, workers: list[str], ps: str,
             monitor: SwitchMonitor, deaths: WorkerMonitor | None = None) -> dict:
    """One job file run on the live network (:func:`run_launch` of one solo job): the fault
    campaign's and the benches' way in; returns its per-round record.  ``deaths`` handles a
    worker that dies (docs/design.md §9)."""
    job = _Job("job", ps, list(workers), cfg, monitor.plan.job.gamma)
    return run_launch(run, mininet, mode, mode, [job], {"job": deaths}, monitor,
                      Path(cfg.out_dir), solo=True)["job"]


# ------------------------------------------------------------------ the whole run


@dataclass
class EngineRun:
    """What a run leaves for its results (:func:`execute`)."""

    plan: Plan  # the plan (plan.json)
    tenants: list[Tenant]
    solo: bool
    deploy_info: dict[str, Any] = field(default_factory=dict)
    switch_events: list[Any] = field(default_factory=list)  # SwitchMonitor.events


def _plan(run: Run, s: Settings, graph: Any, job_specs: list[JobEntry] | None,
          given: Plan | None = None) -> tuple[Plan, list[Tenant]]:
    """Plan one job (:func:`plan_job`) or several jointly; write ``plan.json`` and
    ``plan.png``.  ``given``: the plan, made by the caller (a sweep's, a bench's): only
    written."""
    console, out_dir = run.console, run.out_dir
    if given is not None:
        write_plan(given, out_dir / "plan.json")
        return given, ([solo_tenant(s, given)] if job_specs is None
                       else make_tenants(s, given, job_specs))
    if job_specs is None:
        plan = plan_job(s, graph, out_dir, console)
        return plan, [solo_tenant(s, plan)]
    console.print(f"[bold]planning[/] {len(job_specs)} jobs on {s.topo}, budget "
                  f"{s.budget}, objective {s.objective}")
    plan = make_plan(graph, plan_request(s), jobs=job_specs)
    write_plan(plan, out_dir / "plan.json")
    draw_plan(plan, out_dir / "plan.png", graph)
    for line in jobs_summary_lines(plan):
        console.print(line)
    if plan.warning:  # the budget went unused below the bound (controller.plan.baselines)
        print(plan.warning, file=sys.stderr)
    return plan, make_tenants(s, plan, job_specs)


def execute(run: Run, s: Settings, graph: Any, job_specs: list[JobEntry] | None = None,
            fail: tuple[str, int] | None = None,
            kill: tuple[str, int] | None = None, network: Network | None = None,
            plan: Plan | None = None) -> EngineRun:
    """``InaMethod.execute``: plan (one job, or ``job_specs`` jointly), deploy on ``network``
    (default: Mininet; :mod:`~controller.experiment.methods.ina.networks`), run each mode
    with every job at once (then each job alone, with several), for every seed of ``run``;
    return what the results need.  ``fail``: ``--fail-switch``; ``kill``: ``--kill-worker``;
    ``plan``: the plan, made by the caller (else planned here)."""
    network = network if network is not None else MininetNetwork()
    console, out_dir = run.console, run.out_dir
    solo = job_specs is None
    plan, tenants = _plan(run, s, graph, job_specs, plan)
    if s.cross_traffic:  # the flows' hosts, resolved once: every network reads them here
        s.extra[PAIRS_KEY] = cross_pairs(s.cross_traffic, graph, tenants)
    if network.trains:
        for t in tenants:
            t.check_batch(s)
    out = EngineRun(plan, tenants, solo)
    specs = deploy_specs(tenants, s.modes, solo)
    kill_ps = parse_kill_ps(s.kill_ps, tenants) if s.kill_ps else None
    with network.deploy(run, s, graph, plan, specs) as net:
        out.deploy_info = net.info
        if s.cross_traffic:  # the flows run beside every mode's launch, not the alone runs
            net.cross = {m: pairs_of(s.extra) for m in s.modes}
        by_name = {t.name: t for t in tenants}

        def per_process(n_workers: int) -> int:  # --hosts-per-process (pools.py)
            return hosts_per_process(s.hosts_per_process, n_workers,
                                     local_mininet=getattr(net, "pools_hosts", False),
                                     kill_worker=s.kill_worker is not None,
                                     on_worker_failure=s.on_worker_failure)

        def replan(g: Any, doc: Plan, dead: str,
                   jobs: list[SwitchJob]) -> tuple[Any, Plan, list[SwitchJob]]:
            g2, new = replan_jobs_without(g, doc, dead, job_specs or [])
            for t in tenants:
                t.plan = job_plan(new, t.name)
            return g2, new, [replace(j, plan=by_name[j.tenant].plan) for j in jobs]

        switches = SwitchMonitor(net.mininet, graph, plan, net.rules, specs, net.hosts,
                                 net.p4info, say=console.print, fail=fail,
                                 slot_policy=s.slot_policy, replan=None if solo else replan)
        out.switch_events = switches.events
        monitors: dict[str, WorkerMonitor | None] = {t.name: WorkerMonitor(
            switches, s.on_worker_failure, console.print,
            kill if kill and kill[0] in t.workers else None,
            scope=None if solo else t.hosts, label="" if solo else t.name) for t in tenants}

        def plan_of(doc: Plan, t: Tenant) -> Plan:
            return doc if solo else job_plan(doc, t.name)

        # (mode, label, jobs, alone): every job at once per mode, then each job alone
        runs: list[tuple[str, str | None, list[Tenant]]] = [(m, None, tenants)
                                                             for m in s.modes]
        if not (solo or s.no_alone):
            runs += [("ina", f"{ALONE}/{t.name}", [t]) for t in tenants]
        for rep, seed in enumerate(run.seeds):
            for mode, alone, group in runs:
                label = alone or mode
                name = label.replace("/", "-")
                # the first repeat keeps the folders it always had; later ones add the seed
                folder = out_dir / (name if rep == 0 else f"{name}-seed{seed}")
                launch = []
                for i, t in enumerate(group):
                    m = t.mode_in(mode)  # a job the jobs file pins keeps its own mode
                    jdir = folder if solo or alone else folder / t.name
                    cfg = job_config(s, job_id=t.job_id(m), mode=m,
                                     plan=plan_of(switches.plan, t), workers=t.workers,
                                     ps=t.ps, hosts=net.hosts, train=t.train(s, seed),
                                     n_values=t.n_values, out_dir=jdir,
                                     start=folder / "start")
                    # a hierarchical job: the switches hold its file's tree (fail-over)
                    switches.sync_tree(t.job_id(m), cfg.aggregation_tree())
                    mon = monitors[t.name]

                    def after_switch(doc: dict, t: Tenant = t,
                                     mon: WorkerMonitor = mon) -> dict:
                        # a switch that dies after a worker did: plan for the survivors
                        left = [w for w in t.workers if w not in mon.removed_hosts()]
                        if len(left) == len(t.workers):
                            return schedules_for("ina", plan_of(doc, t), t.workers,
                                                 t.n_chunks)
                        return member_schedules("ina", plan_of(doc, t), t.workers, left,
                                                t.n_chunks, switches.graph) or {}

                    control = Path(cfg.control_file) if cfg.control_file else None
                    # a switch that died in an earlier mode stays dead: plan from the current
                    switches.follow(control if m == "ina" else None, after_switch,
                                    more=i > 0, job_id=t.job_id(m))

                    def after_worker(left: list[str], t: Tenant = t,
                                     mode: str = m) -> dict | None:
                        return member_schedules(mode, plan_of(switches.plan, t), t.workers,
                                                left, t.n_chunks, switches.graph)
                    job = next(j for j in switches.jobs if j.job_id == t.job_id(m))
                    mon.begin(m, job, t.ps, Path(cfg.control_file), after_worker)
                    now = plan_of(switches.plan, t)
                    launch.append(_Job(t.name, t.ps, t.workers, cfg,
                                       planned_gamma(m, now, t.workers),
                                       planned_loads(m, now, t.workers)))
                t0 = time.perf_counter()
                try:
                    records = run_launch(run, net, mode, label, launch, monitors,
                                         switches, folder, None if alone else kill_ps, solo,
                                         per_process=per_process)
                except WorkerStopped as exc:
                    run.record(mode, exc.record, rep)
                    raise
                for n, rec in records.items():
                    if by_name[n].mode:  # its label is the launch's; its mode its own
                        rec["pinned_mode"] = by_name[n].mode
                    run.record(mode if solo else alone or f"{n}/{mode}", rec, rep)
                if not solo:
                    exact = ", ".join(f"{n} {'yes' if _exact(rec) else 'NO'}"
                                      for n, rec in records.items())
                    console.print(f"{label}: {len(group)} job(s) in "
                                  f"{time.perf_counter() - t0:.1f} s; exact: {exact}")
    return out


def _exact(rec: dict) -> bool:
    return bool(rec["rounds"]) and all(r["exact"] for r in rec["rounds"])
