"""``simulate``: a whole run in virtual time -- ``run --network simulated`` (docs/simulate.md).

:func:`simulate` runs the one INA engine (:class:`~controller.experiment.methods.ina.
InaMethod` through :func:`controller.experiment.runner.execute`: the same plan, rules, job
files, records, ``results.json``, ``report.md`` and plots as ``run``) over the simulated
network (:class:`~controller.experiment.methods.ina.networks.SimulatedNetwork` with these
:class:`SimOptions`), and adds what a simulation costs on this machine (``simulation``: wall
time, events, frames, peak memory) and ``"simulated": true``.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.experiment.methods.ina.core import Settings
from controller.experiment.methods.ina.method import InaMethod
from controller.experiment.methods.ina.networks import SimulatedNetwork
from controller.experiment.runner import execute
from controller.experiment.simulate.network import SimOptions, active_graph, program
from controller.plan.types import Plan

__all__ = ["SimOptions", "SimStats", "active_graph", "simulate", "program"]


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
             console: Any = None) -> tuple[dict[str, Any], SimStats]:
    """``run --network simulated`` of ``s`` into the run folder ``out_dir`` (module
    docstring); returns ``results.json``'s document (also written, with ``report.md`` and the
    plots) and the run's cost.  ``graph``, ``plan``: made by the caller (a sweep's, a
    bench's); ``gradient_of(worker, round)``: the int32 vectors the workers send instead of
    a model's (tests); ``sums``, if given, receives per mode (``<job>/<mode>`` with several
    jobs) the sums every worker applied, read from their files.  Several jobs are not run
    each alone as well (``no_alone``), as ``simulate`` never did."""
    from rich.console import Console

    t_all = time.perf_counter()
    s = replace(s, out=str(out_dir.parent), name=out_dir.name, network="simulated",
                # the jobs alone are the fairness's reference beside cross traffic
                no_alone=s.no_alone if s.cross_traffic else True, extra=dict(s.extra))
    net = SimulatedNetwork(opt, gradient_of)
    method = InaMethod(settings=s, network=net, graph=graph, plan=plan,
                       reference=opt.reference and opt.train)
    doc = execute(method, console=console if console is not None else Console(quiet=True))
    stats = SimStats()
    deployed = net.deployed
    stats.plan_s = deployed.built_at - t_all if deployed is not None else 0.0
    for label, rec in doc["modes"].items():
        sim = rec.get("sim", {})
        stats.per_mode[label] = {k: sim.get(k, 0.0) for k in ("events", "wall_s", "cpu_s")}
        stats.events += sim.get("events", 0)
        stats.switch_frames += sim.get("switch_frames", 0)
        stats.fast_frames += sim.get("fast_frames", 0)
        if sums is not None:
            sums[label] = _applied(out_dir, label, s.jobs is None)
    stats.wall_s = time.perf_counter() - t_all
    stats.peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # process peak
    doc.update({"run": name, "method": "ina", "simulated": True,
                "simulation": {"options": asdict(opt), "wall_s": stats.wall_s,
                               "plan_s": stats.plan_s, "events": stats.events,
                               "events_per_s": stats.events_per_s,
                               "events_per_cpu_s": stats.events_per_cpu_s,
                               "switch_frames": stats.switch_frames,
                               "fast_frames": stats.fast_frames,
                               "peak_mib": stats.peak_mib, "per_mode": stats.per_mode}})
    return doc, stats


def _applied(out_dir: Path, label: str, solo: bool) -> dict[int, list[np.ndarray]]:
    """The sums each worker of the mode ``label`` applied, per round (their ``.npz``)."""
    job, _, mode = label.rpartition("/")
    folder = out_dir / mode if solo else out_dir / mode / job
    if job == "alone":  # a job run alone: its own folder (ina.engine's "alone-<job>")
        folder = out_dir / label.replace("/", "-")
    out: dict[int, list[np.ndarray]] = {}
    for path in sorted(folder.glob("worker*.npz"), key=lambda p: int(p.stem[6:])):
        with np.load(path) as d:
            for r, row in enumerate(d["sums"]):
                out.setdefault(r, []).append(row)
    return out
