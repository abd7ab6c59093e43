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
from types import SimpleNamespace
from typing import Any

import networkx as nx
import numpy as np

from controller.dataplane.deploy import SLOT_POLICIES
from controller.errors import ExperimentError
from controller.experiment.cross_traffic import cross_pairs, cross_summary, print_fairness
from controller.experiment.failover import WORKER_POLICIES, parse_fail_switch, parse_kill_worker
from controller.experiment.methods.ina import engine
from controller.experiment.methods.ina.core import (
    JOB_IDS,
    Deployed,
    Settings,
    deployed_network,
    exact_sums_by_round,
    exact_sums_ok,
    job_config,
    member_schedules,
    plan_job,
    schedules_for,
)
from controller.experiment.methods.ina.engine import run_mode
from controller.experiment.methods.ina.jobs import (
    jobs_summary,
    plot_jobs_gamma,
    print_jobs,
    references,
)
from controller.experiment.methods.ina.networks import Network, network_for
from controller.experiment.methods.ina.options import add_ina_arguments, settings_from_args
from controller.experiment.methods.ina.tenants import MODELS, check_batch, train_samples
from controller.experiment.methods.ina.workload import (
    print_projection,
    sync_times,
    workload_results,
)
from controller.experiment.network import shaped_graph
from controller.experiment.records import seed_stats
from controller.experiment.report import plot_modes, print_summary, print_written
from controller.experiment.runner import Method, Run, execute
from controller.experiment.servers import cluster_spec, placement_summary
from controller.plan.document import resolve_workers
from controller.plan.jobs import jobs_argument
from controller.plan.lp import PlanError
from controller.plan.types import Plan
from topo.models import parse_topology
from workers.common.model import train_synchronous
from workers.ina.constants import num_slots
from workers.ina.job import MODES
from workers.ina.wire import FRAME_BYTES

# the shared pieces stay importable from here, where one-job callers look for them
__all__ = ["InaMethod", "Settings", "run_experiment", "summarize", "schedules_for", "job_config",
           "member_schedules", "exact_sums_ok", "exact_sums_by_round", "plan_job", "Deployed",
           "deployed_network", "JOB_IDS", "run_mode", "settings_from_args"]


def summarize(s: Settings, name: str, plan: Plan, modes: dict, reference_acc: float,
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
    job = plan.job
    predicted = modes[main_mode].get("plan_gamma", job.gamma)
    gamma = {"predicted": predicted, "measured": measured(before),
             "predicted_without_result_load": job.gamma_without_result_load,
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
        "prediction": _prediction(s, plan, modes, n_chunks, main_mode, predicted),
        "run": name,
        "settings": asdict(s),
        "plan": {"gamma": job.gamma, "deployed": plan.deployed, "ps": job.ps,
                 "ps_tor": job.ps_tor, "workers": job.workers, "baselines": plan.baselines},
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


def _prediction(s: Settings, plan: Plan, modes: dict, n_chunks: int, mode: str,
                gamma: float) -> dict[str, Any]:
    """Per sync mode, the round predicted and the resource that bound it
    (:mod:`controller.experiment.prediction`): ``mode`` (the INA mode) against ``gamma`` and
    the plan's link loads, ``ps_only`` and ``tor_only`` against their baselines' γ (no
    per-link LP load in the plan); empty without ``--bw``."""
    from controller.experiment.methods.ina.core import mode_window
    from controller.experiment.prediction import fill_drain_s, mode_analysis
    from controller.experiment.records import pace
    from topo.models import from_dict

    if not s.bw:
        return {}
    job = plan.job
    try:
        graph = from_dict(plan.topology["graph"])
        fd = fill_drain_s(graph, job.workers, job.ps, s.bw, FRAME_BYTES)
    except Exception:  # noqa: BLE001 -- a plan without its graph: no fill/drain term
        fd = 0.0
    out = {}
    for label, rec in modes.items():
        g = gamma if label == mode else (plan.baselines or {}).get(label)
        if not isinstance(rec, dict) or not rec.get("rounds") or not g:
            continue
        loads = rec.get("plan_loads", plan.loads)  # a hierarchical job's: its tree's
        got = mode_analysis(rec, plan_loads=loads if label == mode else [], gamma=g,
                            bw_mbit=s.bw, n_chunks=n_chunks, frame_bytes=FRAME_BYTES,
                            n_workers=len(job.workers), fill_drain_s=fd,
                            window=rec.get("window") or mode_window(s, label),
                            pace=pace(rec))
        if got is not None:
            out[label] = got
    return out


def _jobs_prediction(s: Settings, plan: Plan, tenants: list, modes: dict) -> dict[str, Any]:
    """Per job of a launch of several, its INA rounds predicted and what bound them
    (:func:`controller.experiment.prediction.jobs_analysis`); empty without ``--bw``."""
    from controller.experiment.methods.ina.core import mode_window
    from controller.experiment.prediction import JobShape, fill_drain_s, jobs_analysis
    from controller.experiment.records import pace
    from topo.models import from_dict

    if not s.bw:
        return {}
    try:
        graph = from_dict(plan.topology["graph"])
    except Exception:  # noqa: BLE001 -- a plan without its graph: no fill/drain term
        graph = None
    # the plan's γ the run recorded (after a fail-over's re-plan, that one), as jobs_summary
    shapes = [JobShape(name=t.name, gamma=(modes.get(f"{t.name}/ina") or {}).get(
                           "plan_gamma", t.plan.job.gamma), n_chunks=t.n_chunks,
                       n_workers=len(t.workers),
                       fill_drain_s=(fill_drain_s(graph, t.workers, t.ps, s.bw, FRAME_BYTES)
                                     if graph is not None else 0.0)) for t in tenants]
    return jobs_analysis(modes, shapes, plan_loads=plan.loads, bw_mbit=s.bw,
                         frame_bytes=FRAME_BYTES, window=mode_window(s, "ina"),
                         pace={label: pace(rec) for label, rec in modes.items()
                               if isinstance(rec, dict)})


# ------------------------------------------------------------------ the method


class InaMethod(Method):
    """P4 in-network aggregation, with its PS-only and ToR-only modes (module docstring)."""

    name = "ina"
    help = "ina (default): P4 in-network aggregation"

    def __init__(self, args: argparse.Namespace | None = None,
                 settings: Settings | None = None, network: Network | None = None, *,
                 graph: nx.Graph | None = None, plan: Plan | None = None,
                 reference: bool = True) -> None:
        """``network``: the network the run deploys on (None: chosen by name in
        :meth:`prepare`, :mod:`~controller.experiment.methods.ina.networks`); ``graph``,
        ``plan``: made by the caller (a sweep, a bench; default: from the settings);
        ``reference``: train the single-process reference for the accuracy."""
        super().__init__(args if args is not None else argparse.Namespace())
        self.s = settings if settings is not None else settings_from_args(args)
        if getattr(args, "network", None) is not None:
            self.s.network = args.network
        self.network, self.given_graph, self.given_plan = network, graph, plan
        self.reference = reference
        self.args.out, self.args.name, self.args.seed = self.s.out, self.s.name, self.s.seed

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """INA's options: its network, plan and transport, faults, several jobs."""
        add_ina_arguments(parser)

    def repeats(self) -> int:
        return self.s.repeats

    def prepare(self, run: Run) -> None:
        s = self.s
        for m in s.modes:
            if m not in MODES:
                raise ExperimentError(f"--modes: unknown mode {m!r} (expected {', '.join(MODES)})")
        self.graph = graph = (self.given_graph if self.given_graph is not None
                              else shaped_graph(parse_topology(s.topo), s.bw))
        if s.servers is not None and s.network in (None, "servers"):
            # every server checked before any network (docs/servers.md)
            cluster = cluster_spec(graph, s.servers, s.ssh_config)
            s.extra["placement"] = placement_summary(cluster.placement)
            run.console.print(f"[bold]servers[/]: {', '.join(cluster.placement.servers)} "
                              f"({len(cluster.placement.tunnels)} links as tunnels)")
        if self.network is None:  # by name (ina.networks.NETWORKS), checked against s
            self.network = network_for(s.network, s)
        else:
            self.network.check(s)
        s.network = self.network.name
        self.network.check_graph(graph, s.topo)
        self.fail = (parse_fail_switch(s.fail_switch, graph, s.rounds)
                     if s.fail_switch is not None else None)  # "" is refused, not skipped
        if s.on_worker_failure not in WORKER_POLICIES:
            raise ExperimentError(f"--on-worker-failure: expected stop or continue, got "
                                  f"{s.on_worker_failure!r}")
        if s.jobs is not None:
            self._prepare_jobs(graph)
        else:
            for what, v in (("--kill-ps", s.kill_ps), ("--slot-policy partitioned",
                                                       s.slot_policy != "shared" or None)):
                if v is not None:
                    raise ExperimentError(f"{what} applies to several jobs (--jobs)")
            self.kill = (parse_kill_worker(s.kill_worker,
                                           resolve_workers(graph, s.ps, s.workers), s.rounds)
                         if s.kill_worker is not None else None)
            if self.network.trains and s.workload is None and s.model in MODELS:
                check_batch(s, "job", len(resolve_workers(graph, s.ps, s.workers)), s.model,
                            train_samples(s.model))  # before the plan: nothing written
        if s.cross_traffic:  # the flows' hosts, checked before any network or file
            jobs = (self.job_specs if s.jobs is not None else
                    [SimpleNamespace(ps=s.ps, workers=resolve_workers(graph, s.ps, s.workers))])
            cross_pairs(s.cross_traffic, graph, jobs)
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
            if j.mode is not None and j.mode not in MODES:
                raise ExperimentError(f"--jobs: job {j.name!r}: mode {j.mode[:40]!r} "
                                      f"(expected one of {', '.join(MODES)})")
        everyone = [w for j in self.job_specs for w in j.workers]
        rounds = min(j.rounds or s.rounds for j in self.job_specs)
        self.kill = (parse_kill_worker(s.kill_worker, everyone, rounds)
                     if s.kill_worker is not None else None)
        if s.kill_ps is not None and s.kill_ps.partition("@")[0].strip() not in [j.ps for j in
                                                                        self.job_specs]:
            raise ExperimentError(f"--kill-ps: {s.kill_ps.partition('@')[0].strip()!r} is "
                                  "not the PS of a job")

    def execute(self, run: Run) -> None:
        # one engine: a single job is a run of one tenant (controller.experiment.methods.ina.engine)
        self.done = engine.execute(run, self.s, self.graph,
                                   self.job_specs if self.s.jobs is not None else None,
                                   self.fail, self.kill, self.network, self.given_plan)

    def results(self, run: Run) -> dict[str, Any]:
        done = self.done
        if not done.solo:
            refs = references(done.tenants, self.s, run.seeds[0]) if self.reference else {}
            return {"run": run.name, "method": "ina", "settings": asdict(self.s),
                    "plan": {"objective": done.plan.objective,
                             "deployed": done.plan.deployed,
                             "programmable": done.plan.programmable,
                             "fairness": done.plan.fairness},
                    "deploy": done.deploy_info, "modes": run.modes,
                    "exact_all_rounds": all(r["exact"] for m in run.modes.values()
                                            for r in m["rounds"]),
                    "failover": [asdict(e) for e in done.switch_events],
                    "prediction": _jobs_prediction(self.s, done.plan, done.tenants, run.modes),
                    **jobs_summary(done.plan, done.tenants, run.modes, refs, self.s.bw),
                    **self._cross(run)}
        tenant = done.tenants[0]
        sw = self.s.workload
        # a real model's gradients are synthetic: no accuracy to compare (docs/models.md)
        # no reference trained (a simulation's choice): NaN, as for a real model
        ref_acc = (float("nan") if sw is not None or not self.reference
                   else train_synchronous(tenant.train(self.s, run.seeds[0])).final_accuracy)
        res = summarize(self.s, run.name, done.plan, run.modes, ref_acc,
                        tenant.n_chunks, done.deploy_info)
        if sw is not None:
            res["accuracy"] = None
            res["workload"] = workload_results(sw, len(tenant.workers), sync_times(run.modes))
        res.update(self._cross(run))
        if len(run.seeds) > 1:  # the figures of summarize, per repeat, mean ± std
            per = [summarize(self.s, run.name, done.plan, rep, ref_acc,
                             tenant.n_chunks, done.deploy_info) for rep in run.repeats]
            res["gamma"]["measured_over_repeats"] = seed_stats(
                [p["gamma"]["measured"] for p in per])
        return res

    def _cross(self, run: Run) -> dict[str, Any]:
        """``cross_traffic`` with ``--cross-traffic`` (controller.experiment.cross_traffic)."""
        if not self.s.cross_traffic:
            return {}
        done, modes = self.done, run.modes
        if done.solo:
            jobs = [("job", "", {m: modes.get(m) for m in self.s.modes}, None)]
        else:
            jobs = [(t.name, t.mode or "", {m: modes.get(f"{t.name}/{m}") for m in self.s.modes},
                     modes.get(f"{engine.ALONE}/{t.name}")) for t in done.tenants]
        return {"cross_traffic": cross_summary(self.s.modes, jobs)}

    def report(self, run: Run, results: dict[str, Any]) -> None:
        plots = plot_modes(run.modes, run.out_dir)
        if not self.done.solo:
            plots += [p for p in (plot_jobs_gamma(results, run.out_dir),) if p is not None]
            print_jobs(results, run.console)
            print_fairness(results, run.console)
            print_written(run.console, run.out_dir, plots)
            return
        print_summary(results, run.console)
        print_fairness(results, run.console)
        if results.get("workload"):
            print_projection(results["workload"], run.console)
        print_written(run.console, run.out_dir, plots)


def run_experiment(s: Settings) -> dict:
    """The whole experiment; returns the results dict (also written to disk)."""
    return execute(InaMethod(settings=s))
