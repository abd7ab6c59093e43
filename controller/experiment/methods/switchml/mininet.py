"""The SwitchML-style design on Mininet: the routed network of
:mod:`controller.experiment.methods.host_driven` with one switch -- the first job's PS's
ToR, as in the simulated network (:mod:`controller.experiment.methods.switchml.sim`) --
given ``switchml.p4`` and every job's entries over P4Runtime, and one
:mod:`workers.switchml.switchml_node` process per worker host.  Every worker sends its
UPDATEs to the first job's PS's address; the switch answers in its place (no PS process).

The switch admits each worker on every port (``sm_member`` per port), as in the simulated
network: the routes, not the worker, pick the port its UPDATEs arrive on.  Every job takes
its own ``2 * pool_size`` cells and multicast group.  Worker w of a job draws the suite's
seeded vector of worker w among ``n_workers`` (what :mod:`bench.suite.cell` gives the
simulated design); the sums are checked here against the wrapped int32 sum of every
worker's vectors, and the switch's counters are read back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.errors import ExperimentError
from controller.experiment.methods.host_driven import (
    MininetSettings,
    host_run,
    launch_nodes,
    rounds_span,
    routed_mininet,
)
from controller.experiment.methods.ring.sim import wrapped_sum
from controller.experiment.methods.switchml.sim import (
    COUNTERS,
    SWITCHML_P4,
    SmJobResult,
    SmSimResult,
    toward,
)
from controller.experiment.network import switch_class
from workers.switchml.constants import CELLS
from workers.switchml.job import JobConfig
from workers.switchml.rules import Entry, Host, JobRules, job_rules

__all__ = ["switchml_on_mininet", "switchml_results", "switch_rules"]


def switch_rules(graph: nx.Graph, ports: dict[str, dict[str, int]],
                 hosts: dict[str, tuple[str, str]], sw: str,
                 jobs: list[tuple[JobConfig, list[str]]]) -> list[JobRules]:
    """Every job's entries on ``sw`` (:func:`workers.switchml.rules.job_rules`, group j + 1)
    and its workers admitted on every other port of ``sw`` too."""
    out = []
    for j, (cfg, workers) in enumerate(jobs):
        where = {w: Host(toward(graph, sw, h, ports), hosts[h][1], hosts[h][0])
                 for w, h in zip(cfg.workers, workers, strict=True)}
        rules = job_rules(cfg, where, group=j + 1)
        extra = tuple(Entry("MyIngress.sm_member", {"hdr.sm.job_id": cfg.job_id,
                                                    "hdr.sm.worker_id": w,
                                                    "standard_metadata.ingress_port": port},
                            "MyIngress.member_ok", {})
                      for w in cfg.workers
                      for port in sorted(set(ports[sw].values()) - {where[w].port}))
        out.append(JobRules(rules.entries + extra, rules.group, rules.replicas))
    return out


def _compile(target: str, build: Path) -> tuple[Path, Path]:
    """``switchml.p4`` compiled for ``target``: (P4Info, device config)."""
    build.mkdir(parents=True, exist_ok=True)
    p4info, config = build / "switchml.p4info.txtpb", build / "switchml.json"
    proc = subprocess.run(switch_class(target).compile_command(SWITCHML_P4, config, p4info),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ExperimentError(f"compiling {SWITCHML_P4.name} failed: "
                              f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return p4info, config


def _install(mininet: Any, sw: str, p4info: Path, config: Path,
             rules: list[JobRules]) -> Any:
    """Give ``sw`` the SwitchML pipeline and ``rules``; returns its open connection (the
    counters are read through it at the end; the caller closes it)."""
    from controller.dataplane.p4runtime_client import SwitchConnection

    conn = SwitchConnection(mininet.grpc_address(sw), mininet.device_id(sw), election_id=1,
                            name=sw, timeout=30.0)
    conn.connect()
    conn.set_pipeline(p4info, config)
    conn.write([SwitchConnection.update("INSERT", "table_entry",
                                        conn.table_entry(e.table, e.match, e.action, e.params))
                for r in rules for e in r.entries])
    for r in rules:
        conn.insert_multicast_group(r.group, list(r.replicas))
    return conn


def switchml_on_mininet(ms: MininetSettings, jobs: list[tuple[str, list[str]]], rounds: int,
                        n_values: int, out: Path, *, n_workers: int | None = None,
                        pool_size: int = 16, timeout: float = 0.3,
                        deadline_s: float = 600.0) -> SmSimResult:
    """Run ``jobs`` ((PS host, worker hosts) each) for ``rounds`` rounds on the Mininet
    network of ``ms`` (root) with the first job's PS's ToR running ``switchml.p4`` (module
    docstring); ``out`` is the run folder."""
    if 2 * pool_size * len(jobs) > CELLS:
        raise ExperimentError(f"{len(jobs)} jobs × 2 × pool {pool_size} cells exceed the "
                              f"switch's {CELLS}")
    run = host_run("switchml", out)
    out = run.out_dir
    graph = ms.graph
    sw = next(iter(graph.neighbors(jobs[0][0])))  # the simulated design's choice
    n_all = n_workers or max(len(ws) for _, ws in jobs)
    cfgs = [(JobConfig(j + 1, tuple(range(len(ws))), pool_size,
                       pool_base=2 * pool_size * j, timeout=timeout), ws)
            for j, (_, ws) in enumerate(jobs)]
    p4info, config = _compile(ms.target, out / "build")
    with routed_mininet(run, ms) as net:
        rules = switch_rules(graph, net.mininet.plan.ports, net.hosts, sw, cfgs)
        conn = _install(net.mininet, sw, p4info, config, rules)
        try:
            nodes = []
            for cfg, ws in cfgs:
                folder = out / f"job{cfg.job_id}"
                folder.mkdir(parents=True, exist_ok=True)
                doc = {"job": cfg.to_dict(), "hosts": [net.hosts[h][0] for h in ws],
                       "switch": net.hosts[jobs[0][0]][0], "rounds": rounds,
                       "n_values": n_values, "seed": ms.seed, "n_workers": n_all,
                       "out_dir": str(folder), "start_file": str(out / "start"),
                       "max_round_s": deadline_s}
                (folder / "job.json").write_text(json.dumps(doc, indent=1) + "\n")
                nodes += [(h, "workers.switchml.switchml_node",
                           (str(folder / "job.json"), str(w))) for w, h in enumerate(ws)]
            done = launch_nodes(run, net, "switchml", out, nodes, deadline_s,
                                "the SwitchML workers")
            counters = {n: sum(p for p, _ in conn.read_counter(f"MyIngress.{n}").values())
                        for n in COUNTERS}
        finally:
            conn.close()
    results = [switchml_results(out / f"job{cfg.job_id}", cfg.job_id, len(ws), rounds)
               for cfg, ws in cfgs]
    return SmSimResult(sw, 2 * pool_size * len(jobs), results,
                       rounds_span(out, "switchml", done), done.wall_s, counters, done.moved)


def switchml_results(folder: Path, job: int, n: int, rounds: int) -> SmJobResult:
    """One job's result from its ``n`` workers' files: per round, whether every worker got
    exactly the wrapped sum of every worker's vector, and every record."""
    q, sums, records, resent = [], [], [], 0
    for w in range(n):
        with np.load(folder / f"switchml{w}.npz") as d:
            q.append(d["q"])
            sums.append(d["sums"])
        rep = json.loads((folder / f"switchml{w}.json").read_text())
        records.append(rep["rounds"])
        resent += rep["stats"]["retransmitted"]
    exact = [all(len(s) > r for s in sums)
             and all(np.array_equal(s[r], wrapped_sum([v[r] for v in q])) for s in sums)
             for r in range(rounds)]
    return SmJobResult(job, records, exact, resent)
