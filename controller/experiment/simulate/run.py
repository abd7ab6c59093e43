"""A whole simulated run: the plan, rules, job files and results of ``run``, the network in
virtual time (docs/simulate.md).

What is ``run``'s own code: the settings (:class:`~controller.experiment.methods.ina_core.
Settings`), the plan (:func:`~controller.experiment.methods.ina_core.plan_job`), the
addresses and ports (:func:`topo.mininet_net.plan_network`, what Mininet is built from), the
rules (:func:`controller.dataplane.deploy.switch_rules` for the jobs of
:func:`~controller.experiment.methods.ina_tenants.deploy_specs`), the job files
(:func:`~controller.experiment.methods.ina_core.job_config`), ``ina.p4`` (in-process
pyswitch, every switch), the worker and PS state machines, and the results document
(:func:`controller.experiment.methods.ina.summarize`), marked ``"simulated": true``.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.dataplane.deploy import switch_rules
from controller.errors import ExperimentError
from controller.experiment.methods.ina import summarize
from controller.experiment.methods.ina_core import Settings, job_config, plan_job, plan_request
from controller.experiment.methods.ina_jobs import jobs_summary, references
from controller.experiment.methods.ina_tenants import deploy_specs, make_tenants, solo_tenant
from controller.experiment.network import shaped_graph
from controller.experiment.simulate.engine import SimJob, run_jobs
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.fastpath import forwarder
from controller.experiment.simulate.network import (
    SimNetwork,
    SimOptions,
    active_graph,
    impairment,
    load_switch,
    program,
)
from controller.plan.document import resolve_workers, write_plan
from controller.plan.jobs import jobs_argument
from controller.plan.pipeline import make_plan
from controller.plan.types import Plan
from topo.mininet_net import plan_network
from topo.models import parse_topology
from workers.common.model import train_synchronous
from workers.ina.constants import MAX_WORKERS

__all__ = ["SimOptions", "active_graph", "simulate", "program"]


@dataclass
class SimStats:
    """Cost of one simulated run on this machine (not a result of the experiment)."""

    wall_s: float = 0.0
    plan_s: float = 0.0
    events: int = 0
    switch_frames: int = 0
    fast_frames: int = 0  # of switch_frames, forwarded by simulate/fastpath.py
    peak_mib: float = 0.0  # the process's peak RSS so far (MiB)
    per_mode: dict[str, Any] = field(default_factory=dict)

    @property
    def events_per_s(self) -> float:
        """Events per second of the event loops (setup -- compiling ina.p4, planning,
        loading the rules, the reference training -- left out)."""
        loops = sum(m["wall_s"] for m in self.per_mode.values())
        return self.events / loops if loops else 0.0

    @property
    def events_per_cpu_s(self) -> float:
        """Events per second of this process's CPU time in the event loops: what a machine
        shared with other work still measures fairly (wall time counts the others' share)."""
        cpu = sum(m.get("cpu_s", 0.0) for m in self.per_mode.values())
        return self.events / cpu if cpu else 0.0


def simulate(s: Settings, opt: SimOptions, out_dir: Path, name: str,
             graph: nx.Graph | None = None, plan: Plan | None = None,
             gradient_of: Callable[[int, int], np.ndarray] | None = None,
             sums: dict[str, dict[int, list[np.ndarray]]] | None = None,
             ) -> tuple[dict[str, Any], SimStats]:
    """Plan (unless ``plan`` is given), build the network and run every mode of ``s`` in
    virtual time; returns ``results.json``'s document and the run's cost.  Writes
    ``plan.json`` into ``out_dir`` (as ``run`` does); the caller writes the results.
    ``gradient_of(worker, round)``: the int32 vectors the workers send instead of a model's
    (tests); ``sums``, if given, receives per mode (``<job>/<mode>`` with several jobs) the
    sums every worker applied."""
    from workers.ina.constants import num_slots

    stats = SimStats()
    t_all = time.perf_counter()
    if graph is None:
        graph = shaped_graph(parse_topology(s.topo), s.bw)
    out_dir.mkdir(parents=True, exist_ok=True)
    solo = s.jobs is None
    t0 = time.perf_counter()
    job_specs = [] if solo else jobs_argument(s.jobs, graph)
    for name_, members in ([("the job", resolve_workers(graph, s.ps, s.workers))] if solo
                           else [(f"job {j.name!r}", j.workers) for j in job_specs]):
        if len(members) > MAX_WORKERS:
            raise ExperimentError(f"{name_} has {len(members)} workers: ina.p4 carries at most "
                                  f"{MAX_WORKERS} per job (its bitmap); split them with --jobs")
    if solo:
        plan = plan if plan is not None else plan_job(s, graph, out_dir)
        tenants = [solo_tenant(s, plan)]
    else:  # several jobs at once, planned jointly (run --jobs, docs/design.md §3.10)
        if plan is None:
            plan = make_plan(graph, plan_request(s), jobs=job_specs)
            write_plan(plan, out_dir / "plan.json")
        tenants = make_tenants(s, plan, job_specs)
    stats.plan_s = time.perf_counter() - t0
    bw_unit = 1.0 if s.bw else None
    netplan = plan_network(graph, bw_unit)
    hosts = {h: (info.ips[0], info.macs[0]) for h, info in netplan.hosts.items()}
    specs = deploy_specs(tenants, s.modes, solo)
    rules = switch_rules(active_graph(graph, {h for t in tenants for h in (t.ps, *t.workers)}),
                         plan, netplan.ports, hosts, specs, s.slot_policy)
    prog = program(num_slots())
    s.extra["num_slots"] = num_slots()
    modes: dict[str, Any] = {}
    for mode in s.modes:
        loop = EventLoop()
        t_setup = time.perf_counter()
        # a fresh network per mode: run launches every mode on the same switches, whose
        # slots are empty again once the previous mode's RESULTs released them
        switches = {sw: (load_switch(prog, r) if opt.full_p4
                         else forwarder(load_switch(prog, r), r)) for sw, r in rules.items()}
        net = SimNetwork(loop, graph, netplan.ports, switches, bw_unit,
                         opt.delay_ms / 1000.0, opt.queue, impairment(s),
                         on_host=lambda h, f: None, proc_s=opt.switch_proc_ms / 1000.0,
                         burst=opt.burst_bytes)
        jobs = [SimJob(job_config(s, job_id=t.job_id(mode), mode=mode, plan=t.plan,
                                  workers=t.workers, ps=t.ps, hosts=hosts,
                                  train=t.train(s, s.seed), n_values=t.n_values,
                                  out_dir=out_dir / mode / ("" if solo else t.name)),
                       t.workers, t.ps, opt.train, gradient_of) for t in tenants]
        t0, c0 = time.perf_counter(), time.process_time()
        setup = t0 - t_setup
        done = run_jobs(loop, net, jobs, hosts, compute_s=opt.compute_ms / 1000.0,
                        jitter_s=opt.jitter_ms / 1000.0)
        # frames still in flight, as the PS serves on until run stops it
        loop.run(until=loop.now + 5 * max(j.cfg.max_timeout for j in jobs))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        moved = net.moved()
        busiest = max(moved, key=moved.get)
        for t, job, d in zip(tenants, jobs, done, strict=True):
            rec = d.record
            tor = netplan.hosts[t.ps].neighbours[0]
            for r in rec["rounds"]:
                r["ps_rx_bytes"] = moved[(tor, t.ps)] / job.cfg.rounds
                r["busiest_link_bytes"] = moved[busiest] / job.cfg.rounds
            rec.update({"ps_link_bytes_total": moved[(tor, t.ps)],
                        "busiest_link": list(busiest),
                        "busiest_link_bytes_total": moved[busiest],
                        "link_bytes_total": {f"{a}->{b}": v
                                             for (a, b), v in sorted(moved.items()) if v},
                        "failover": [], "plan_gamma": t.plan.job.gamma, "simulated": True,
                        "sim": {"events": loop.events, "wall_s": wall,
                                "virtual_s": loop.now, "switch_frames": net.switch_frames,
                                "queue_drops": net.queue_drops(),
                                "impairment": net.impairment_counters(),
                                "exact": d.exact, "rounds_done": d.rounds_done}})
            if not solo:
                rec["job"] = t.name
                rec["collisions"] = int(d.ps_stats.get("fallbacks", 0))
            label = mode if solo else f"{t.name}/{mode}"
            modes[label] = rec
            if sums is not None:
                sums[label] = d.sums
        stats.events += loop.events
        stats.switch_frames += net.switch_frames
        stats.fast_frames += sum(getattr(sw, "fast", 0) for sw in switches.values())
        stats.per_mode[mode] = {"events": loop.events, "wall_s": wall, "cpu_s": cpu,
                                "setup_s": setup}
    if not all(m["rounds"] for m in modes.values()):
        missing = [m for m, d in modes.items() if not d["rounds"]]
        raise RuntimeError(f"no round completed in mode(s) {', '.join(missing)}")
    train_refs = opt.reference and opt.train
    if not solo:
        refs = references(tenants, s, s.seed) if train_refs else {}
        doc = {"run": name, "method": "ina", "settings": asdict(s),
               "plan": {"objective": plan.objective, "deployed": plan.deployed,
                        "programmable": plan.programmable, "fairness": plan.fairness},
               "deploy": {"simulated": True}, "modes": modes, "failover": [],
               "exact_all_rounds": all(r["exact"] for m in modes.values()
                                       for r in m["rounds"]),
               **jobs_summary(plan, tenants, modes, refs, s.bw)}
    else:
        reference = (train_synchronous(tenants[0].train(s, s.seed)).final_accuracy
                     if train_refs else None)
        doc = summarize(s, name, plan, modes, reference, tenants[0].n_chunks,
                        {"simulated": True})
    stats.wall_s = time.perf_counter() - t_all
    stats.peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # process peak
    doc.update({"method": "ina", "simulated": True,
                "simulation": {"options": asdict(opt), "wall_s": stats.wall_s,
                               "plan_s": stats.plan_s, "events": stats.events,
                               "events_per_s": stats.events_per_s,
                               "events_per_cpu_s": stats.events_per_cpu_s,
                               "switch_frames": stats.switch_frames,
                               "fast_frames": stats.fast_frames,
                               "peak_mib": stats.peak_mib, "per_mode": stats.per_mode}})
    return doc, stats
