"""``run --jobs FILE|N``: several INA training jobs at once on one network (docs/design.md
§3.10).

Jobs are a concept of the INA method, not a runner of their own: the same planner (the joint
LP of :mod:`controller.plan.lp_jobs`), the same rule installer (:func:`controller.dataplane.deploy.switch_rules`
with one :class:`~controller.dataplane.deploy.JobSpec` per job and mode, each with its own plan, PS,
RESULT tree and slot range), the same node processes and the same per-job record
(:func:`controller.experiment.methods.ina_core.job_record`).  What is added here:

1. the tenants: each job of the jobs file with its PS, workers, model, rounds and weight, its
   part of the joint plan, and one job id per sync mode (``JOB_IDS[mode] + 4 k`` for the
   k-th job, so every (job, mode) has its own id, membership, masks and multicast group);
2. one launch per mode that starts every job's PS and workers together (one start barrier),
   so that the jobs compete for the switches and links, and follows each job on its own:
   a worker that dies stops its job alone (``--on-worker-failure stop``, one line) or leaves
   it (``continue``), a PS that exits early stops its job alone, and the other jobs run to the
   end;
3. each job alone on the same network (label ``alone/<job>``, unless ``--no-alone``): the
   reference its shared γ is compared with;
4. ``results.json``: ``jobs`` (per job: ``exact_all_rounds``, ``ps_bytes``, ``gamma``
   {predicted, measured, alone}, ``time_per_round_s``, ``collisions``, ``accuracy``, …) and
   ``fairness``, Jain's index of the measured γ_j / w_j (:func:`jobs_summary`).

Mode records are kept under ``modes`` as ``<job>/<mode>``, so ``compare`` and ``--repeats``
show one row per job and mode.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from controller.dataplane.deploy import JobSpec
from controller.errors import ExperimentError
from controller.experiment.failover import SwitchMonitor, WorkerMonitor
from controller.experiment.methods.ina_core import (
    JOB_IDS,
    Settings,
    deployed_network,
    job_record,
    member_schedules,
    schedules_for,
    worker_failure_record,
)
from controller.experiment.runner import Launch, Node, Run
from controller.plan.document import write_plan
from controller.plan.jobs import JobSpec as JobEntry
from controller.plan.lp_jobs import jain, job_plan, jobs_summary_lines, joint_plan
from controller.plan.replan import replan_jobs_without
from workers.common.model import Replica, TrainConfig, train_synchronous
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import INA_UDP_PORT, K
from workers.ina.job import JobConfig
from workers.ina.wire import FRAME_BYTES
from workers.ina.worker import n_chunks_for

__all__ = ["Tenant", "JOB_ID_STRIDE", "make_tenants", "deploy_specs", "jobs_summary",
           "execute_jobs", "parse_kill_ps"]

JOB_ID_STRIDE = 4  # (job k, mode m) -> JOB_IDS[m] + 4 k: ids never shared across jobs
ALONE = "alone"  # label prefix of each job run alone on the same network
MODELS = ("mlp", "logreg")


@dataclass
class Tenant:
    """One training job of a multi-job run and its part of the joint plan."""

    index: int
    name: str
    ps: str
    workers: list[str]
    weight: float
    plan: dict[str, Any]  # single-job-shaped (controller.plan.lp_jobs.job_plan)
    rounds: int
    model: str
    hidden: int
    n_values: int
    n_chunks: int
    frac_bits: int

    def job_id(self, mode: str) -> int:
        return JOB_IDS[mode] + JOB_ID_STRIDE * self.index

    def train(self, s: Settings, seed: int) -> TrainConfig:
        return TrainConfig(model=self.model, hidden=self.hidden, n_workers=len(self.workers),
                           rounds=self.rounds, batch_size=s.batch_size, lr=s.lr, seed=seed)

    @property
    def hosts(self) -> list[str]:
        return [self.ps, *self.workers]


def make_tenants(s: Settings, plan: dict[str, Any], specs: list[JobEntry]) -> list[Tenant]:
    """The tenants of a joint plan, with the model each job file entry asks for
    (``model_size`` = the MLP's hidden units; defaults: the run's options)."""
    out = []
    for k, spec in enumerate(specs):
        model = spec.model or s.model
        if model not in MODELS:
            raise ExperimentError(f"--jobs: job {spec.name!r}: model {model!r} (expected "
                                  f"{' or '.join(MODELS)})")
        hidden = spec.model_size or s.hidden
        p = job_plan(plan, spec.name)
        probe = TrainConfig(model=model, hidden=hidden, n_workers=len(p["workers"]))
        n_values = Replica(probe, 0).params.size
        out.append(Tenant(
            index=k, name=spec.name, ps=spec.ps, workers=list(p["workers"]),
            weight=float(spec.weight), plan=p, rounds=spec.rounds or s.rounds, model=model,
            hidden=hidden, n_values=n_values, n_chunks=n_chunks_for(n_values, K),
            frac_bits=choose_frac_bits(8.0, len(p["workers"]))))
    return out


def deploy_specs(tenants: list[Tenant], modes: tuple[str, ...]) -> list[JobSpec]:
    """What the switches hold: every (job, mode), each with the job's plan; the modes of
    one job share its slot range (``tenant``)."""
    return [JobSpec(t.job_id(m), tuple(t.workers), plan=t.plan, tenant=t.name)
            for t in tenants for m in modes]


def parse_kill_ps(text: str, tenants: list[Tenant]) -> tuple[str, int]:
    """``HOST@ROUND`` of ``--kill-ps``: a job's PS, killed once its workers reported ROUND."""
    name, sep, rnd = text.partition("@")
    if not sep or not rnd.strip().isdigit():
        raise ExperimentError(f"--kill-ps: expected HOST@ROUND, got {text!r}")
    pss = [t.ps for t in tenants]
    if name.strip() not in pss:
        raise ExperimentError(f"--kill-ps: {name.strip()!r} is not the PS of a job "
                              f"({', '.join(pss)})")
    return name.strip(), int(rnd)


# ------------------------------------------------------------------ one launch, many jobs


class _JobWatch:
    """Follows the jobs of one launch: routes output lines to each job's WorkerMonitor and
    progress bar, ends a job whose PS exits early, injects ``--kill-ps``."""

    def __init__(self, run: Run, mode: str, tenants: list[Tenant],
                 monitors: dict[str, WorkerMonitor], switches: SwitchMonitor,
                 kill_ps: tuple[str, int] | None) -> None:
        self.run, self.tenants, self.monitors, self.kill_ps = run, tenants, monitors, kill_ps
        self.switches = switches
        self.owner = {h: t for t in tenants for h in t.hosts}
        self.tasks = {t.name: run.progress.add_task(f"{mode} {t.name}: rounds", total=t.rounds)
                      for t in tenants}
        self.newest = {t.name: -1 for t in tenants}
        self.procs: Any = None
        self._killed = False

    def on_procs(self, procs: Any) -> None:
        self.procs = procs
        for m in self.monitors.values():
            m.on_procs(procs)

    def on_line(self, host: str, line: str) -> None:
        t = self.owner.get(host)
        if t is None:
            return
        self.monitors[t.name].on_line(host, line)
        words = line.split()  # "worker I round R ..."
        if len(words) > 3 and words[0] == "worker" and words[2] == "round":
            r = int(words[3])
            self.switches.on_worker_round(r)
            if r > self.newest[t.name]:
                self.newest[t.name] = r
                self.run.progress.update(self.tasks[t.name], completed=r + 1)

    def on_failure(self, host: str, code: int) -> bool:
        t = self.owner.get(host)
        return t is not None and self.monitors[t.name].on_failure(host, code)

    def watch(self) -> None:
        self.switches.poll()  # a dead switch: every job planned again, jointly
        for t in self.tenants:
            mon = self.monitors[t.name]
            mon.poll()
            if self.procs is None or mon.stopped is not None or t.ps not in self.procs.procs:
                continue
            if (self.kill_ps and not self._killed and self.kill_ps[0] == t.ps
                    and self.newest[t.name] >= self.kill_ps[1]):
                self._killed = True
                self.run.console.print(f"[fault injection] killing the PS of job {t.name} "
                                       f"({t.ps}) after round {self.newest[t.name]}")
                self.procs.procs[t.ps].kill()
            code = self.procs.procs[t.ps].poll()
            running = [w for w in t.workers if w in self.procs.procs
                       and self.procs.procs[w].poll() is None]
            if code is not None and running:
                mon.stop_job(f"its PS on {t.ps} exited (code {code}) in round "
                             f"{self.newest[t.name] + 1}; the job stops")


def run_jobs_mode(run: Run, mininet: Any, mode: str, label: str, tenants: list[Tenant],
                  cfgs: dict[str, JobConfig], monitors: dict[str, WorkerMonitor],
                  switches: SwitchMonitor, out_dir: Path,
                  kill_ps: tuple[str, int] | None = None) -> dict[str, dict]:
    """One launch of every job in ``tenants`` at once (module docstring); returns each job's
    record (:func:`controller.experiment.methods.ina_core.job_record`, plus ``collisions`` and ``stopped``)."""
    jw = _JobWatch(run, mode, tenants, monitors, switches, kill_ps)
    planned = {t.name: t.plan["gamma"] for t in tenants}  # the plans this launch starts on
    n_events = len(switches.events)
    servers, nodes = [], []
    for t in tenants:
        job_file = Path(cfgs[t.name].out_dir) / "job.json"
        job_file.parent.mkdir(parents=True, exist_ok=True)
        cfgs[t.name].save(job_file)
        servers.append(Node(t.ps, "workers.ina.ps_node", (str(job_file),)))
        nodes += [Node(w, "workers.ina.worker_node", (str(job_file), "--worker", str(i)))
                  for i, w in enumerate(t.workers)]
    start = cfgs[tenants[0].name].start_file
    done = run.launch(mininet, Launch(
        label=label, out_dir=out_dir, servers=servers, nodes=nodes,
        servers_what="the PSs", start_file=Path(start) if start else None,
        timeout_s=max(c.round_timeout_s * c.rounds for c in cfgs.values()),
        watch=jw.watch, on_line=jw.on_line, on_failure=jw.on_failure, on_procs=jw.on_procs,
        server_exit="stop", stop_timeout_s=30))
    records = {}
    for t in tenants:
        mon, cfg = monitors[t.name], cfgs[t.name]
        stopped = mon.stopped
        if stopped is None and done.server_codes.get(t.ps, 0) != 0:
            stopped = (f"{t.name}: its PS did not complete every round "
                       f"(see {out_dir}/logs.txt)")
            run.console.print(stopped)
        gone = set(mon.removed_hosts()) | {e.worker for e in mon.job_events}
        tor = mininet.plan.hosts[t.ps].neighbours[0]
        rec, ps_report = job_record(cfg, t.workers, t.ps, tor, done.moved, gone,
                                    complete=stopped is None)
        rec["job"] = t.name
        rec["plan_gamma"] = planned[t.name]
        rec["failover"] = [asdict(e) for e in switches.events[n_events:]]
        # contributions that reached the PS unaggregated: a slot held by another key (of
        # this job or another), no slot for the job at a switch, or no aggregator
        rec["collisions"] = int(ps_report.get("stats", {}).get("fallbacks", 0))
        if mon.job_events:
            rec["worker_failure"] = worker_failure_record(mon, rec["rounds"], ps_report)
        if stopped is not None:
            rec["stopped"] = stopped
        records[t.name] = rec
    return records


# ------------------------------------------------------------------ results (pure)


def _gamma_measured(rounds: list[dict], n_chunks: int) -> float | None:
    """Gradient frames synchronized per second, Mbit/s, median round (as one job's γ)."""
    if not rounds:
        return None
    return float(np.median([n_chunks * FRAME_BYTES * 8 / r["time_s"] / 1e6 for r in rounds]))


def jobs_summary(plan: dict[str, Any], tenants: list[Tenant], modes: dict[str, dict],
                 references: dict[str, float], bw: float | None) -> dict[str, Any]:
    """``jobs`` and ``fairness`` of results.json (pure): per job and mode, from the mode
    records ``modes["<job>/<mode>"]`` (and ``alone/<job>``)."""
    jobs: dict[str, Any] = {}
    measured_per_weight = []
    for t in tenants:
        mine = {label.split("/", 1)[1]: rec for label, rec in modes.items()
                if label.startswith(f"{t.name}/")}
        alone = modes.get(f"{ALONE}/{t.name}")

        def per_mode(f: Any, mine: dict = mine) -> dict[str, Any]:
            return {m: f(rec) for m, rec in mine.items()}

        ina = mine.get("ina")
        measured = _gamma_measured(ina["rounds"], t.n_chunks) if ina else None
        alone_measured = _gamma_measured(alone["rounds"], t.n_chunks) if alone else None
        predicted = ina["plan_gamma"] if ina and "plan_gamma" in ina else t.plan["gamma"]
        unit = bw is not None  # with --bw the LP's γ is in Mbit/s, as measured
        jobs[t.name] = {
            "ps": t.ps, "workers": t.workers, "weight": t.weight, "job_ids": {
                m: t.job_id(m) for m in mine},
            "exact_all_rounds": all(r["exact"] for rec in [*mine.values(), alone or {}]
                                    for r in rec.get("rounds", [])),
            "rounds_completed": per_mode(lambda rec: len(rec["rounds"])),
            "stopped": {m: rec["stopped"] for m, rec in mine.items() if "stopped" in rec},
            "ps_bytes": per_mode(lambda rec: (rec["rounds"][0]["ps_rx_bytes"]
                                              if rec["rounds"] else None)),
            "time_per_round_s": per_mode(lambda rec: (float(np.mean(
                [r["time_s"] for r in rec["rounds"]])) if rec["rounds"] else None)),
            # gradient bytes the job synchronized per second, Mbit/s (mean round)
            "goodput_Mbps": per_mode(lambda rec: (rec["grad_bytes"] * 8 / 1e6 / float(np.mean(
                [r["time_s"] for r in rec["rounds"]])) if rec["rounds"] else None)),
            "retransmissions": per_mode(lambda rec: sum(r["retransmissions"]
                                                        for r in rec["rounds"])),
            "collisions": per_mode(lambda rec: rec.get("collisions")),
            "gamma": {
                "predicted": predicted, "measured": measured,
                "ratio": measured / predicted if unit and measured and predicted else None,
                "predicted_alone": t.plan.get("gamma_alone"),
                "measured_alone": alone_measured,
                "unit": "Mbit/s of gradient frames" if unit else "link-capacity units",
            },
            "accuracy": {"final": (ina or next(iter(mine.values()), {})).get(
                "rounds", [{}])[-1].get("accuracy") if mine else None,
                "reference": references.get(t.name)},
        }
        if measured is not None:
            measured_per_weight.append(measured / t.weight)
    return {
        "jobs": jobs,
        # Jain's index of the measured γ_j / w_j over the jobs that ran the ina mode
        "fairness": jain(measured_per_weight) if measured_per_weight else None,
        "fairness_planned": plan.get("fairness"),
    }


# ------------------------------------------------------------------ the whole run


def execute_jobs(method: Any, run: Run) -> None:
    """``InaMethod.execute`` with ``--jobs`` (module docstring)."""
    s, graph, console, out_dir = method.s, method.graph, run.console, run.out_dir
    console.print(f"[bold]planning[/] {len(method.job_specs)} jobs on {s.topo}, budget "
                  f"{s.budget}, objective {s.objective}")
    plan = joint_plan(graph, method.job_specs, s.budget, objective=s.objective,
                      result_load=True, spec=s.topo)
    write_plan(plan, out_dir / "plan.json")
    for line in jobs_summary_lines(plan):
        console.print(line)
    tenants = method.tenants = make_tenants(s, plan, method.job_specs)
    method.plan = plan
    specs = deploy_specs(tenants, s.modes)
    kill_ps = parse_kill_ps(s.kill_ps, tenants) if s.kill_ps else None
    with deployed_network(run, s, graph, plan, specs) as net:
        mininet, hosts = net.mininet, net.hosts
        method.deploy_info = net.info
        by_name = {t.name: t for t in tenants}

        def replan(g: Any, doc: dict, dead: str,
                   jobs: list[JobSpec]) -> tuple[Any, dict, list[JobSpec]]:
            g2, new = replan_jobs_without(g, doc, dead, method.job_specs)
            for t in tenants:
                t.plan = job_plan(new, t.name)
            return g2, new, [replace(j, plan=by_name[j.tenant].plan) for j in jobs]

        switches = SwitchMonitor(mininet, graph, plan, net.rules, specs, hosts, net.p4info,
                                 say=console.print, fail=method.fail,
                                 slot_policy=s.slot_policy, replan=replan)
        method.switch_events = switches.events
        monitors = {t.name: WorkerMonitor(
            switches, s.on_worker_failure, console.print,
            method.kill if method.kill and method.kill[0] in t.workers else None,
            scope=t.hosts, label=t.name) for t in tenants}
        # (mode, label, jobs, alone): every job at once per mode, then each job alone
        runs = [(m, None, tenants) for m in s.modes]
        if not s.no_alone:
            runs += [("ina", f"{ALONE}/{t.name}", [t]) for t in tenants]
        for rep, seed in enumerate(run.seeds):
            for mode, alone, group in runs:
                label = alone or mode
                name = label.replace("/", "-")
                folder = out_dir / (name if rep == 0 else f"{name}-seed{seed}")
                cfgs = {t.name: _job_config(s, t, mode, seed, hosts, folder if alone
                                            else folder / t.name, folder / "start")
                        for t in group}
                for i, t in enumerate(group):
                    def after_switch(doc: dict, t: Tenant = t) -> dict:
                        left = [w for w in t.workers
                                if w not in monitors[t.name].removed_hosts()]
                        return member_schedules("ina", job_plan(doc, t.name), t.workers, left,
                                                t.n_chunks, switches.graph) or {}
                    sched = cfgs[t.name].schedule_file
                    switches.follow(Path(sched) if sched else None, after_switch, more=i > 0)
                    job = next(j for j in switches.jobs if j.job_id == t.job_id(mode))

                    def after_worker(left: list[str], t: Tenant = t,
                                     mode: str = mode) -> dict | None:
                        return member_schedules(mode, t.plan, t.workers, left, t.n_chunks,
                                                switches.graph)
                    monitors[t.name].begin(mode, job, t.ps, Path(cfgs[t.name].removal_file),
                                           after_worker)
                t0 = time.perf_counter()
                records = run_jobs_mode(run, mininet, mode, label, group, cfgs, monitors,
                                        switches, folder, None if alone else kill_ps)
                for n, rec in records.items():
                    run.record(alone or f"{n}/{mode}", rec, rep)
                exact = ", ".join(f"{n} {'yes' if _exact(rec) else 'NO'}"
                                  for n, rec in records.items())
                console.print(f"{label}: {len(group)} job(s) in "
                              f"{time.perf_counter() - t0:.1f} s; exact: {exact}")


def _exact(rec: dict) -> bool:
    return bool(rec["rounds"]) and all(r["exact"] for r in rec["rounds"])


def _job_config(s: Settings, t: Tenant, mode: str, seed: int,
                hosts: dict[str, tuple[str, str]], jdir: Path, start: Path) -> JobConfig:
    """The job file of one job in one mode (every job of a launch shares ``start``)."""
    return JobConfig(
        job_id=t.job_id(mode), mode=mode, rounds=t.rounds, train=t.train(s, seed),
        worker_ids=list(range(len(t.workers))),
        worker_addrs=[(hosts[w][0], INA_UDP_PORT) for w in t.workers],
        ps_addr=(hosts[t.ps][0], INA_UDP_PORT),
        result_dests=[(hosts[t.workers[0]][0], INA_UDP_PORT)],
        schedules=schedules_for(mode, t.plan, t.workers, t.n_chunks),
        frac_bits=t.frac_bits, n_values=t.n_values, out_dir=str(jdir), window=s.window,
        timeout=s.timeout, round_timeout_s=s.round_timeout, start_file=str(start),
        removal_file=str(jdir / "removals.json"), members_file=str(jdir / "members.json"),
        schedule_file=str(jdir / "schedules.json") if mode == "ina" else None,
        worker_timeout_s=s.worker_timeout)


def references(tenants: list[Tenant], s: Settings, seed: int) -> dict[str, float]:
    """Each job's accuracy trained in one process (the exactness reference)."""
    return {t.name: train_synchronous(t.train(s, seed)).final_accuracy for t in tenants}


def print_jobs(results: dict[str, Any], console: Any) -> None:
    """The table of a multi-job run: one row per job and mode, then the fairness."""
    from rich.table import Table

    from controller.experiment.report import print_table

    table = Table(title=f"{len(results['jobs'])} jobs at once "
                        f"(slot policy {results['settings']['slot_policy']})")
    for col in ("job", "mode", "rounds", "s/round", "PS B/round", "γ plan", "γ meas",
                "γ alone", "fallbacks", "retx", "accuracy", "exact"):
        table.add_column(col, justify="left" if col in ("job", "mode") else "right")

    def f(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)
    for name, j in results["jobs"].items():
        g = j["gamma"]
        for m, n in j["rounds_completed"].items():
            table.add_row(name, m, str(n), f(j["time_per_round_s"][m], ".3f"),
                          f(j["ps_bytes"][m], ",.0f"),
                          f(g["predicted"], ".3f") if m == "ina" else "",
                          f(g["measured"], ".3f") if m == "ina" else "",
                          f(g["measured_alone"], ".3f") if m == "ina" else "",
                          f(j["collisions"][m], "d"), str(j["retransmissions"][m]),
                          f(j["accuracy"]["final"], ".4f") if m == "ina" else "",
                          "stopped" if m in j["stopped"] else
                          ("yes" if j["exact_all_rounds"] else "NO"))
    print_table(console, table, 120)
    fair = results.get("fairness")
    console.print(f"fairness (Jain's index of measured γ_j / w_j): "
                  f"{'-' if fair is None else format(fair, '.3f')}; planned "
                  f"{f(results.get('fairness_planned'), '.3f')}")


def plot_jobs_gamma(results: dict[str, Any], out_dir: Path) -> Path | None:
    """``jobs_gamma.png``: per job, γ planned, measured with the others, and measured alone
    (bars), with the settings in the title."""
    import matplotlib.pyplot as plt

    jobs = results.get("jobs") or {}
    if not jobs:
        return None
    names = list(jobs)
    series = [("planned", [jobs[n]["gamma"]["predicted"] for n in names]),
              ("measured, all jobs", [jobs[n]["gamma"]["measured"] for n in names]),
              ("measured, alone", [jobs[n]["gamma"]["measured_alone"] for n in names])]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / len(series)
    for i, (label, ys) in enumerate(series):
        xs = [k + (i - 1) * width for k in range(len(names))]
        ax.bar(xs, [y or 0.0 for y in ys], width, label=label)
    st = results["settings"]
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(f"γ ({next(iter(jobs.values()))['gamma']['unit']})", fontsize=8)
    ax.set_title(f"{st['topo']}, {len(names)} jobs, budget {st['budget']}, "
                 f"{st['slot_policy']} slots, loss {st['loss']:g}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(out_dir) / "jobs_gamma.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
