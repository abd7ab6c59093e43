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
from functools import cache
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.dataplane.deploy import switch_rules
from controller.experiment.methods.ina import summarize
from controller.experiment.methods.ina_core import Settings, job_config, plan_job
from controller.experiment.methods.ina_tenants import deploy_specs, solo_tenant
from controller.experiment.network import P4_PROGRAM, shaped_graph
from controller.experiment.simulate.engine import run_mode
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork, load_switch
from controller.plan.types import Plan
from pyswitch.impairment import ImpairmentSpec
from topo.mininet_net import plan_network
from topo.models import parse_topology
from workers.common.model import train_synchronous

__all__ = ["SimOptions", "simulate", "program"]


@dataclass
class SimOptions:
    """What the network in virtual time adds to ``run``'s settings."""

    delay_ms: float = 0.0  # propagation delay per link direction (Mininet's default: none)
    queue: int = 1000  # frames per link direction (htb's leaf pfifo: txqueuelen)
    compute_ms: float = 8.0  # a worker's virtual time between two rounds (apply, accuracy,
    # next gradient: 8 ms measured for the make-run MLP, docs/simulate.md)
    jitter_ms: float = 10.0  # + uniform [0, jitter) per worker and round (start-file poll)
    switch_proc_ms: float = 0.0  # a switch's time per frame (pyswitch: ~0.5 ms on our machine)
    train: bool = True  # a real model's gradients (False: seeded random int32 vectors)
    reference: bool = True  # train the single-process reference (results' accuracy)


@dataclass
class SimStats:
    """Cost of one simulated run on this machine (not a result of the experiment)."""

    wall_s: float = 0.0
    plan_s: float = 0.0
    events: int = 0
    switch_frames: int = 0
    peak_mib: float = 0.0  # the process's peak RSS so far (MiB)
    per_mode: dict[str, Any] = field(default_factory=dict)

    @property
    def events_per_s(self) -> float:
        """Events per second of the event loops (setup -- compiling ina.p4, planning,
        loading the rules, the reference training -- left out)."""
        loops = sum(m["wall_s"] for m in self.per_mode.values())
        return self.events / loops if loops else 0.0


@cache
def program(slots: int) -> Any:
    """ina.p4 compiled by pyswitch with ``slots`` slots (the ``--slots`` define)."""
    import pyswitch
    from workers.ina.constants import compile_defines

    del slots  # part of the cache key; compile_defines() reads the same setting
    return pyswitch.compile_p4(str(P4_PROGRAM), defines=compile_defines())


def _impairment(s: Settings) -> ImpairmentSpec | None:
    if not (s.loss or s.dup or s.reorder):
        return None
    return ImpairmentSpec(loss=s.loss, dup=s.dup, reorder=s.reorder, seed=s.seed)


def simulate(s: Settings, opt: SimOptions, out_dir: Path, name: str,
             graph: nx.Graph | None = None, plan: Plan | None = None,
             gradient_of: Callable[[int, int], np.ndarray] | None = None,
             sums: dict[str, dict[int, list[np.ndarray]]] | None = None,
             ) -> tuple[dict[str, Any], SimStats]:
    """Plan (unless ``plan`` is given), build the network and run every mode of ``s`` in
    virtual time; returns ``results.json``'s document and the run's cost.  Writes
    ``plan.json`` into ``out_dir`` (as ``run`` does); the caller writes the results.
    ``gradient_of(worker, round)``: the int32 vectors the workers send instead of a model's
    (tests); ``sums``, if given, receives per mode the sums every worker applied."""
    from workers.ina.constants import num_slots

    stats = SimStats()
    t_all = time.perf_counter()
    if graph is None:
        graph = shaped_graph(parse_topology(s.topo), s.bw)
    out_dir.mkdir(parents=True, exist_ok=True)
    if plan is None:
        t0 = time.perf_counter()
        plan = plan_job(s, graph, out_dir)
        stats.plan_s = time.perf_counter() - t0
    bw_unit = 1.0 if s.bw else None
    netplan = plan_network(graph, bw_unit)
    hosts = {h: (info.ips[0], info.macs[0]) for h, info in netplan.hosts.items()}
    tenant = solo_tenant(s, plan)
    specs = deploy_specs([tenant], s.modes, True)
    rules = switch_rules(graph, plan, netplan.ports, hosts, specs, s.slot_policy)
    prog = program(num_slots())
    s.extra["num_slots"] = num_slots()
    modes: dict[str, Any] = {}
    for mode in s.modes:
        loop = EventLoop()
        t_setup = time.perf_counter()
        # a fresh network per mode: run launches every mode on the same switches, whose
        # slots are empty again once the previous mode's RESULTs released them
        switches = {sw: load_switch(prog, r) for sw, r in rules.items()}
        net = SimNetwork(loop, graph, netplan.ports, switches, bw_unit,
                         opt.delay_ms / 1000.0, opt.queue, _impairment(s),
                         on_host=lambda h, f: None, proc_s=opt.switch_proc_ms / 1000.0)
        cfg = job_config(s, job_id=tenant.job_id(mode), mode=mode, plan=plan,
                         workers=tenant.workers, ps=tenant.ps, hosts=hosts,
                         train=tenant.train(s, s.seed), n_values=tenant.n_values,
                         out_dir=out_dir / mode)
        t0 = time.perf_counter()
        setup = t0 - t_setup
        done = run_mode(loop, net, cfg, tenant.workers, tenant.ps, hosts,
                        compute_s=opt.compute_ms / 1000.0, jitter_s=opt.jitter_ms / 1000.0,
                        train=opt.train, gradient_of=gradient_of)
        if sums is not None:
            sums[mode] = done.sums
        loop.run(until=loop.now + 5 * cfg.max_timeout)  # frames still in flight, as the
        # PS serves on until run stops it
        wall = time.perf_counter() - t0
        rec = done.record
        moved = net.moved()
        tor = netplan.hosts[tenant.ps].neighbours[0]
        busiest = max(moved, key=moved.get)
        for r in rec["rounds"]:
            r["ps_rx_bytes"] = moved[(tor, tenant.ps)] / cfg.rounds
            r["busiest_link_bytes"] = moved[busiest] / cfg.rounds
        rec.update({"ps_link_bytes_total": moved[(tor, tenant.ps)],
                    "busiest_link": list(busiest), "busiest_link_bytes_total": moved[busiest],
                    "link_bytes_total": {f"{a}->{b}": v for (a, b), v in sorted(moved.items())
                                         if v},
                    "failover": [], "plan_gamma": plan.job.gamma, "simulated": True,
                    "sim": {"events": loop.events, "wall_s": wall,
                            "virtual_s": loop.now, "switch_frames": net.switch_frames,
                            "queue_drops": net.queue_drops(),
                            "impairment": net.impairment_counters(),
                            "exact": done.exact, "rounds_done": done.rounds_done}})
        modes[mode] = rec
        stats.events += loop.events
        stats.switch_frames += net.switch_frames
        stats.per_mode[mode] = {"events": loop.events, "wall_s": wall, "setup_s": setup}
    if opt.reference and opt.train:
        reference = train_synchronous(tenant.train(s, s.seed)).final_accuracy
    else:
        reference = None
    if not all(m["rounds"] for m in modes.values()):
        missing = [m for m, d in modes.items() if not d["rounds"]]
        raise RuntimeError(f"no round completed in mode(s) {', '.join(missing)}")
    doc = summarize(s, name, plan, modes, reference, tenant.n_chunks, {"simulated": True})
    stats.wall_s = time.perf_counter() - t_all
    stats.peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # process peak
    doc.update({"method": "ina", "simulated": True,
                "simulation": {"options": asdict(opt), "wall_s": stats.wall_s,
                               "plan_s": stats.plan_s, "events": stats.events,
                               "events_per_s": stats.events_per_s,
                               "switch_frames": stats.switch_frames,
                               "peak_mib": stats.peak_mib, "per_mode": stats.per_mode}})
    return doc, stats
