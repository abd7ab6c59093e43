"""What every INA run shares (docs/design.md §3, §8): the settings, the job ids of the sync
modes, the one constructor of a network job's file (:func:`job_config`), the workers'
schedules, the exactness check, the plan request of a run, starting a planned network, and the
record of one job that ran.  The engine (:mod:`controller.experiment.methods.ina.engine`, one
job or several), ``ddp``, the fault campaign and the benches are built on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import networkx as nx
import numpy as np

from controller.dataplane.deploy import DeployError, SwitchJob, deploy, switch_rules
from controller.errors import ExperimentError
from controller.experiment.failover import WorkerMonitor
from controller.experiment.network import P4_PROGRAM, ROOT, compile_program
from controller.experiment.plan_figure import draw_plan
from controller.experiment.records import spread
from controller.experiment.report import mean
from controller.experiment.runner import Run
from controller.plan.document import chunk_schedule, resolve_workers, write_plan
from controller.plan.hierarchy import aggregation_tree, tree_gamma, tree_loads
from controller.plan.lp import PlanError
from controller.plan.options import DEFAULTS as PLAN_DEFAULTS
from controller.plan.pipeline import PlanRequest, make_plan
from controller.plan.planners import DEFAULT_PLANNER
from controller.plan.replan import replan_members
from controller.plan.types import JobPlan, Plan
from workers.common.model import TrainConfig
from workers.common.quantize import choose_frac_bits
from workers.ina.cc import DEFAULT_CC, DEFAULT_WINDOW, default_window, first_timeout
from workers.ina.constants import INA_UDP_PORT, MAX_WORKERS, K
from workers.ina.job import MODES, JobConfig, make_job_config
from workers.ina.tree import WORKER, Child, Tree
from workers.ina.wire import FRAME_BYTES
from workers.ina.worker import n_chunks_for, ps_only_schedule
from workers.models.scaling import (
    DEFAULT_LINK_GBPS,
    DEFAULT_SCALE,
    ScaledWorkload,
    scale_workload,
)
from workers.models.synthetic import is_workload

__all__ = ["JOB_IDS", "Settings", "TransportSettings", "job_config", "schedules_for", "send_order",
           "member_schedules", "exact_sums_by_round", "exact_sums_ok", "plan_request", "plan_job",
           "Deployed", "deployed_network", "job_record", "worker_failure_record"]

JOB_IDS = {"ina": 1, "tor_only": 2, "ps_only": 3}


@dataclass
class Settings:
    topo: str = "fattree:4"
    ps: str = "h0"
    workers: str = "6"
    budget: int = 2
    planner: str = DEFAULT_PLANNER  # controller.plan.planners.PLANNERS
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
    # chunks in flight per worker (--window); None: not given, the default (mode_window:
    # with --cc fixed the plan's bandwidth-delay product, at least DEFAULT_WINDOW)
    window: int | None = None
    cc: str = DEFAULT_CC  # congestion control (workers.ina.cc.POLICIES, --cc)
    # chunks in flight per worker in the modes that aggregate (ina, tor_only); None = window.
    # PS-only's link queue overflows with a window INA needs at 64 workers (docs/scale.md §3)
    agg_window: int | None = None
    timeout: float = 0.3  # pyswitch hops are ~0.5 ms each; bursts queue for tens of ms
    round_timeout: float = 120.0
    fail_switch: str | None = None  # "SWITCH@ROUND": kill it after that round (docs/design.md §9)
    # a worker that dies (docs/design.md §9): stop the job, or go on without it
    on_worker_failure: str = "stop"
    kill_worker: str | None = None  # "HOST@ROUND": kill that worker after that round
    worker_timeout: float = 10.0  # the PS reports a member silent this long (s)
    # several jobs at once (docs/design.md §3.10): a jobs file or a count; None = one job
    jobs: str | None = None
    slot_policy: str = "shared"  # how jobs share each switch's slots (controller.dataplane.deploy)
    objective: str = "maxmin"  # the joint LP's objective with --jobs
    # the rest of the plan request, plan's defaults (controller.plan.options)
    capacity: float | None = PLAN_DEFAULTS.capacity
    solver: str = PLAN_DEFAULTS.solver
    time_limit: float | None = PLAN_DEFAULTS.time_limit
    result_load: bool = PLAN_DEFAULTS.result_load
    max_combinations: int = PLAN_DEFAULTS.max_combinations
    polish: bool = PLAN_DEFAULTS.polish
    kill_ps: str | None = None  # "HOST@ROUND": kill that PS (fault injection, --jobs)
    no_alone: bool = False  # --jobs: skip running each job alone for reference
    # other traffic beside the jobs (issue 39): "tcp[:SRC-DST],..." (controller.experiment.
    # cross_traffic); the pairs it resolves to are in extra["cross_traffic_pairs"]
    cross_traffic: str | None = None
    out: str = "results"
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1  # --repeats: seeds seed .. seed + repeats - 1 (controller.experiment.runner)
    # a real model's scaled emulation (--model resnet50|vgg16|bert-base, docs/models.md):
    # its scale (None: DEFAULT_SCALE), the real cluster's link rate, and the compute time per
    # step instead of the model's published profile (None: the profile)
    scale: int | None = None
    link_gbps: float = DEFAULT_LINK_GBPS
    compute_ms: float | None = None
    # worker hosts per process on one machine's Mininet (--hosts-per-process, methods/ina/
    # pools.py): "auto" or a whole number
    hosts_per_process: str = "auto"
    # several servers (run --servers A,B,..., docs/servers.md): the list, the local one first,
    # and the ssh client configuration every ssh to them uses (None: ssh's own)
    servers: str | None = None
    ssh_config: str | None = None
    # the network the run deploys on and launches in (ina.networks.NETWORKS: mininet,
    # servers, simulated); None: servers with --servers, else mininet
    network: str | None = None

    @property
    def base_window(self) -> int:
        """``--window``, or DEFAULT_WINDOW when not given (what a transport without a plan's
        rate uses: DDP, PS-only's floor)."""
        return DEFAULT_WINDOW if self.window is None else self.window

    @property
    def workload(self) -> ScaledWorkload | None:
        """The real model this run emulates, scaled (None: a numpy model that trains)."""
        if not is_workload(self.model):
            return None
        return scale_workload(self.model, self.scale or DEFAULT_SCALE, self.link_gbps,
                              None if self.compute_ms is None else self.compute_ms / 1000)


# ------------------------------------------------------------------ pure helpers


class TransportSettings(Protocol):
    """What :func:`job_config` reads of a run's settings (:class:`Settings`, the campaign's
    and the benches')."""

    window: int | None  # None: not given (mode_window's default)
    timeout: float
    round_timeout: float


def mode_window(s: TransportSettings, mode: str, rate_fps: float | None = None,
                base_rtt_s: float | None = None) -> int:
    """Chunks in flight per worker in ``mode`` (pure): what the user gave wins --
    ``agg_window`` (``--agg-window``) in the modes that aggregate in switches, else
    ``window`` (``--window``; PS-only never takes ``agg_window``).  Neither given: with the
    ``fixed`` policy (``--cc``), :func:`workers.ina.cc.default_window` of the mode's
    predicted rate and unloaded round trip (:func:`path_rate`): the larger of DEFAULT_WINDOW
    and BDP_HEADROOM bandwidth-delay products, one rule for every mode (PS-only's rate is
    1/N of the link, so its product stays below DEFAULT_WINDOW and it keeps that window);
    DEFAULT_WINDOW with the adaptive policies (their ``ssthresh``; they start from the
    product themselves, :func:`workers.ina.cc.make_cc`) or an unknown rate."""
    agg = getattr(s, "agg_window", None)
    if agg is not None and mode != "ps_only":
        return agg
    if s.window is not None:
        return s.window
    if getattr(s, "cc", DEFAULT_CC) != "fixed":
        return DEFAULT_WINDOW
    return default_window(rate_fps, base_rtt_s)


def job_config(s: TransportSettings, *, job_id: int, mode: str, plan: Plan, workers: list[str],
               ps: str, hosts: dict[str, tuple[str, str]], train: TrainConfig, n_values: int,
               out_dir: Path, start: Path | None = None, members: bool = True) -> JobConfig:
    """The job file of one INA job in one mode on a deployed network -- the only place the
    runner, the several-jobs runner, the campaign and the benches make one: worker ``i`` is
    ``workers[i]``, RESULTs go into the network (:func:`workers.ina.job.make_job_config`),
    the schedules are the plan's for ``mode`` (:func:`schedules_for`).  The job has a control
    record, ``control.json`` (docs/design.md §9), when its schedules can change (the ``ina``
    mode follows re-plans) or, with ``members``, its members (a worker's removal).  Every
    job of one launch shares ``start`` (default: ``out_dir/start``).  A job of more than
    MAX_WORKERS workers is hierarchical: its file holds the tree (:func:`tree_for`)."""
    n_chunks = n_chunks_for(n_values, K)
    tree = tree_for(mode, plan, workers)
    rate = path_rate(plan, mode, ps, workers, getattr(s, "bw", None))
    window = mode_window(s, mode, rate["rate_fps"], rate["base_rtt_s"])
    out = dict(
        window=window,
        timeout=s.timeout,
        # until a worker has measured: the plan's time for a first window when longer
        first_timeout=first_timeout(s.timeout, window, rate["rate_fps"], rate["base_rtt_s"]),
        round_timeout_s=s.round_timeout, cc=getattr(s, "cc", Settings.cc), **rate,
        start_file=str(start or out_dir / "start"),
        control_file=str(out_dir / "control.json") if mode == "ina" or members else None)
    if members:
        out.update(worker_timeout_s=getattr(s, "worker_timeout", Settings.worker_timeout))
    return make_job_config(
        job_id=job_id, mode=mode, rounds=train.rounds, train=train,
        worker_addrs=[(hosts[w][0], INA_UDP_PORT) for w in workers],
        ps_addr=(hosts[ps][0], INA_UDP_PORT),
        schedules=schedules_for(mode, plan, workers, n_chunks),
        frac_bits=choose_frac_bits(8.0, len(workers)), n_values=n_values,
        out_dir=str(out_dir), tree=None if tree is None else tree.to_json(), **out)


GOLDEN = (5 ** 0.5 - 1) / 2


def send_order(job: JobPlan, n_chunks: int) -> list[int]:
    """The order in which every worker of ``job`` sends its chunks (pure; the same for all
    workers, so the contributions to one slot arrive together): the plan's intervals
    interleaved, the ``i``-th chunk of an interval at ``frac(i x φ)`` (φ = 0.618..., the
    golden ratio's low-discrepancy sequence; the chunks that no interval holds, sent to the
    PS's ToR, form one more interval).

    Why (docs/simulate.md, "Where prediction and data plane part"): the LP's rates
    ``x_{w,s}`` flow at the same time, all round long, but ``chunk_schedule`` lays the
    intervals one after another over the chunk ids, and gives a worker whose share of an
    interval is smaller the interval's first chunks.  Sent in chunk order, every worker first
    sent all of its chunks for the first switch, then for the second: at any time one
    switch's links carried the whole job at a multiple of their planned rate while the
    others idled (make-run's network at budget 4: γ at 0.51 of the LP's).  Each interval at
    its relative position fixed that (0.81) but still sent a worker's share of an interval in
    the first part of the round; the golden-ratio order spreads every prefix of an interval
    evenly over the round, so each worker sends to each switch at a steady rate (budget 2:
    0.72, then 0.75, now 0.86)."""
    spans = [(iv["offset"], iv["length"]) for s, iv in
             ((s, job.intervals.get(s, {})) for s in job.deployed) if iv.get("length", 0) > 0]
    if not spans:  # every chunk to the PS's ToR: nothing to interleave
        return list(range(n_chunks))
    end = max((o + ln for o, ln in spans), default=0.0)
    if end < 1.0:
        spans.append((end, 1.0 - end))

    first: dict[int, int] = {}  # span -> its first chunk
    span_of = []
    for c in range(n_chunks):
        p = (c + 0.5) / n_chunks
        i = next((k for k, (o, ln) in enumerate(spans) if o <= p < o + ln), len(spans) - 1)
        first.setdefault(i, c)
        span_of.append(i)

    def key(c: int) -> tuple[float, int]:
        return (((c - first[span_of[c]]) * GOLDEN) % 1.0, c)
    return sorted(range(n_chunks), key=key)


def path_rate(plan: Plan, mode: str, ps: str, workers: list[str],
              bw_mbps: float | None) -> dict[str, float | None]:
    """What a worker's window is made from (workers.ina.cc.bdp_window, default_window):
    ``rate_fps``, the frames per second one worker sends at the plan's prediction (γ in
    ``ina``, the tor_only baseline's γ in ``tor_only``: Mbit/s, the plan's links being at
    ``bw_mbps``; ``bw_mbps`` / N in ``ps_only``), and ``base_rtt_s``, the unloaded round
    trip of the longest worker-PS path (a frame's transmission time per link, both ways);
    None where unknown (unshaped links)."""
    job = next((j for j in plan.jobs.values() if j.ps == ps), None)
    graph = plan.own_graph()
    if not bw_mbps or job is None or graph is None or ps not in graph:
        return {"rate_fps": None, "base_rtt_s": None}
    gamma_mbps = {"ina": job.gamma, "ps_only": bw_mbps / max(1, len(workers)),
                  "tor_only": plan.baselines.get("tor_only")}.get(mode)
    frame_bits = FRAME_BYTES * 8
    frame_s = frame_bits / (bw_mbps * 1e6)
    hops = nx.single_source_shortest_path_length(graph, ps)
    longest = max((hops.get(w, 0) for w in workers), default=0)
    return {"rate_fps": gamma_mbps * 1e6 / frame_bits if gamma_mbps else None,
            "base_rtt_s": 2 * longest * frame_s if longest else None}


def tree_for(mode: str, plan: Plan, workers: list[str]) -> Tree | None:
    """The aggregation tree of a hierarchical job (docs/protocol.md §5.1) in ``mode``, or
    None for a flat one: a job is hierarchical when it has more workers than the bitmap is
    wide.  ``ina``: the tree over the plan's deployment (:mod:`controller.plan.hierarchy`);
    ``tor_only``: the tree whose one aggregation point is the PS's ToR; ``ps_only``: no
    switch, every worker a child of the PS.  A tree a switch cannot hold: one line naming
    it (:class:`ExperimentError`)."""
    if len(workers) <= MAX_WORKERS:
        return None
    job = plan.job
    if mode == "ps_only":
        return Tree.assign(int(plan.switch_ids[job.ps_tor]),
                           {Child(WORKER, i): 0 for i in range(len(workers))})
    graph = plan.own_graph()
    if graph is None:
        raise ExperimentError(f"a job of more than {MAX_WORKERS} workers needs the plan's "
                              "topology (its aggregation tree follows the routing)")
    if mode == "tor_only":
        job = JobPlan(**{**job.__dict__, "deployed": []})
    try:
        return aggregation_tree(graph, job, plan.switch_ids)
    except PlanError as exc:
        raise ExperimentError(f"mode {mode}: {exc}") from None


def planned_gamma(mode: str, plan: Plan, workers: list[str]) -> float:
    """The γ a launch in ``mode`` is predicted at: the plan's (the LP's) for a flat job; for
    a hierarchical one in ``ina``, its tree's (:func:`controller.plan.hierarchy.tree_gamma`:
    the tree, not the LP's interval split, is what the workers and switches follow)."""
    tree = tree_for(mode, plan, workers) if mode == "ina" else None
    graph = plan.own_graph() if tree is not None else None
    if tree is None or graph is None:
        return plan.job.gamma
    return tree_gamma(graph, plan.job, tree, result_load=plan.result_load)


def planned_loads(mode: str, plan: Plan, workers: list[str]) -> list[dict] | None:
    """A hierarchical job's link loads in ``ina`` at its tree's γ (the plan's ``loads``
    form, :func:`controller.plan.hierarchy.tree_loads`); None for a flat job (the plan's
    own ``loads`` are its prediction)."""
    tree = tree_for(mode, plan, workers) if mode == "ina" else None
    graph = plan.own_graph() if tree is not None else None
    if tree is None or graph is None:
        return None
    return tree_loads(graph, plan.job, tree, result_load=plan.result_load)


def schedules_for(mode: str, plan: Plan, workers: list[str], n_chunks: int) -> dict[str, list]:
    """Each worker's ``[(chunk, agg_id, fan_in)]`` in ``mode`` (keys: worker bit as str).  In
    a hierarchical job every chunk goes to the worker's first aggregation point of the tree
    (``fan_in``: that point's children; the PS: 1)."""
    tree = tree_for(mode, plan, workers)
    if tree is not None:
        out = {}
        for i in range(len(workers)):
            first = tree.first[i]
            fan = tree.fan_in(first) if first else 1
            out[str(i)] = [(c, first, fan) for c in range(n_chunks)]
        return out
    if mode == "ina":
        by_name = chunk_schedule(plan, n_chunks)
        order = send_order(plan.job, n_chunks)
        return {str(i): [tuple(by_name[w][c]) for c in order] for i, w in enumerate(workers)}
    if mode == "tor_only":
        tor_id = int(plan.switch_ids[plan.job.ps_tor])
        return {str(i): [(c, tor_id, len(workers)) for c in range(n_chunks)]
                for i in range(len(workers))}
    if mode == "ps_only":
        return {str(i): ps_only_schedule(n_chunks) for i in range(len(workers))}
    raise ValueError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")


def member_schedules(mode: str, plan: Plan, workers: list[str], survivors: list[str],
                     n_chunks: int, graph: nx.Graph) -> dict[str, list] | None:
    """The survivors' schedules after workers left the job (keys: their original bits; None
    when the mode's schedules do not depend on the members, i.e. ``ps_only``).  A
    hierarchical job keeps its tree: a removed worker's parent no longer completes, and its
    workers' retransmissions flush what it holds to the PS (slow, exact)."""
    if tree_for(mode, plan, workers) is not None:
        full = schedules_for(mode, plan, workers, n_chunks)
        return {str(workers.index(w)): full[str(workers.index(w))] for w in survivors}
    if mode == "ina":
        new = replan_members(graph, plan, survivors)
        by_name = chunk_schedule(new, n_chunks)
        order = send_order(new.job, n_chunks)
        return {str(workers.index(w)): [tuple(by_name[w][c]) for c in order]
                for w in survivors}
    if mode == "tor_only":
        tor_id = int(plan.switch_ids[plan.job.ps_tor])
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


def plan_request(s: Settings) -> PlanRequest:
    """The plan request of a run's settings: the options of ``plan`` with ``plan``'s
    defaults (:mod:`controller.plan.options`, one pipeline :mod:`controller.plan.pipeline`)."""
    return PlanRequest(budget=s.budget, planner=s.planner, objective=s.objective,
                       seed=s.seed, capacity=s.capacity, solver=s.solver,
                       time_limit=s.time_limit, result_load=s.result_load,
                       max_combinations=s.max_combinations, polish=s.polish, spec=s.topo)


def plan_job(s: Settings, graph: nx.Graph, out_dir: Path, console: Any = None) -> Plan:
    """Plan the job (``s.planner``, with baselines) and write ``plan.json`` and its picture
    ``plan.png`` (:mod:`controller.experiment.plan_figure`); says what it
    does on ``console`` if given."""
    if console is not None:
        console.print(f"[bold]planning[/] {s.topo}, PS {s.ps}, workers {s.workers}, "
                      f"budget {s.budget}, planner {s.planner}")
    plan = make_plan(graph, plan_request(s), ps=s.ps,
                     workers=resolve_workers(graph, s.ps, s.workers))
    write_plan(plan, out_dir / "plan.json")
    draw_plan(plan, out_dir / "plan.png", graph)
    if console is not None:
        console.print(f"plan: γ = {plan.job.gamma:.4g}, deployed "
                      f"{plan.deployed or '(none)'}, PS ToR {plan.job.ps_tor}")
    if plan.warning:  # a baseline beat the planner, or the budget went unused (one line)
        print(plan.warning, file=sys.stderr)
    return plan


@dataclass
class Deployed:
    """A live Mininet network with a plan installed (:func:`deployed_network`)."""

    mininet: Any
    hosts: dict[str, tuple[str, str]]  # host -> (IPv4, MAC)
    rules: dict[str, Any]  # switch -> controller.dataplane.deploy.SwitchRules
    p4info: Path
    info: dict[str, Any]  # deploy seconds and table writes, for results.json
    device_config: Path | None = None  # the compiled program (to push it again)
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)  # gRPC, device id
    sockets: dict[str, str] = field(default_factory=dict)  # switch -> control socket

    # --cross-traffic: the TcpPairs per launch label that runs them (the engine sets it)
    cross: dict[str, Any] = field(default_factory=dict)
    # one process may serve several hosts (methods/ina/pools.py): on one machine's Mininet,
    # not over servers (a host's namespace is on its own server)
    pools_hosts: bool = True

    def netns(self, host: str) -> str:
        """``host``'s network namespace, as a process on this machine enters it."""
        return f"/proc/{self.mininet.net.get(host).pid}/ns/net"

    def launch(self, run: Run, spec: Any) -> Any:
        """One mode's processes on the hosts (:meth:`Run.launch`), with the TCP flows of
        ``--cross-traffic`` beside them (:mod:`controller.experiment.cross_mininet`)."""
        pairs = self.cross.get(spec.label)
        if pairs:
            from controller.experiment.cross_mininet import launch_with_flows

            return launch_with_flows(self, run, spec, pairs)
        return run.launch(self.mininet, spec)


def _control_sockets(switches: list[str]) -> dict[str, str]:
    # UNIX socket paths: the switch processes run in the root namespace, like this one
    return {sw: f"/tmp/insync-{os.getpid()}-{sw}.sock" for sw in switches}


@contextlib.contextmanager
def deployed_network(run: Run, s: Any, graph: nx.Graph, plan: Plan, jobs: list[SwitchJob], *,
                     control_sockets: bool = False, build: Path | None = None,
                     impair: bool = True, kills: bool = False) -> Iterator[Deployed]:
    """Compile ina.p4, start the Mininet network of ``s.target`` switches (links at ``s.bw``,
    pyswitch impairments from ``s`` when ``impair``) and install ``plan`` for every job over
    P4Runtime; the network is stopped when the block ends (:meth:`Run.network`).  Every user
    of a planned INA network starts it this way: the runner (one job or several), DDP, the
    fault campaign and the benches.  ``control_sockets``: every pyswitch gets a control
    socket (``Deployed.sockets``), through which the campaign changes impairments and reads
    counters between runs; ``build``: where the program is compiled (default
    ``run.out_dir/build``); ``kills``: a switch of it will be killed (as ``s.fail_switch``
    says), so every switch runs in its own process.  ``s``: :class:`Settings` or any
    settings with ``target``,
    ``bw`` (and ``loss``, ``dup``, ``reorder``, ``seed`` when ``impair``; ``slot_policy``
    when several jobs share the switches)."""
    from topo.mininet_net import build_net
    from topo.mininet_switch import TARGETS

    console = run.console
    switch_cls = TARGETS[s.target]
    if control_sockets and not switch_cls.control_sockets:
        raise ExperimentError(f"control sockets (the campaign's impairments) need a target "
                              f"that takes them; {s.target} does not")
    console.print(f"[bold]compiling[/] {P4_PROGRAM.relative_to(ROOT)} for {s.target}")
    p4info, device_config = compile_program(s.target, build or run.out_dir / "build")
    path = switch_cls.warm_up(device_config)  # e.g. pyswitch's native module, built once
    if path is not None:
        run.provenance[f"{s.target}_path"] = path
        console.print(f"{s.target}: {path}")
    opts = {"impair": _impairments(s)} if switch_cls.impairments and impair else {}
    if (kills or getattr(s, "fail_switch", None)) and switch_cls.process_groups:
        opts["per_process"] = 1  # the fault kills one switch's process, not its group's
    socks = _control_sockets([n for n, k in graph.nodes(data="kind") if k == "switch"]) \
        if control_sockets else {}
    console.print(f"[bold]starting Mininet[/]: {graph.number_of_nodes()} nodes, "
                  f"{s.target} switches" + (f", {s.bw:g} Mbit/s links" if s.bw else "")
                  + (f", over servers {s.servers}" if getattr(s, "servers", None) else ""))
    builder: Any = build_net
    if getattr(s, "servers", None):  # several servers (docs/servers.md)
        from controller.experiment.servers import cluster_builder
        builder = cluster_builder(graph, s.servers, getattr(s, "ssh_config", None))
    with run.network(builder(graph, switch_cls, switch_opts=opts,
                               per_switch_opts={sw: {"control_socket": p}
                                                for sw, p in socks.items()} or None,
                               bw_unit_mbps=1.0 if s.bw else None)) as mininet:
        hosts = {h: (info.ip, info.mac) for h, info in mininet.plan.hosts.items()}
        rules = switch_rules(graph, plan, mininet.plan.ports, hosts, jobs,
                             getattr(s, "slot_policy", "shared"))
        addresses = {sw: (mininet.grpc_address(sw), mininet.device_id(sw)) for sw in rules}
        console.print(f"[bold]deploying[/] over P4Runtime to {len(rules)} switches")
        t0 = time.perf_counter()
        try:
            writes = deploy(rules, addresses, p4info, device_config)
        except DeployError as exc:
            raise ExperimentError(f"deploying the plan: {exc}") from None
        deploy_s = time.perf_counter() - t0
        built = getattr(mininet, "timings", {})
        console.print(f"network up: links {built.get('links', '?')} s, hosts "
                      f"{built.get('hosts', '?')} s, switches {built.get('switches', '?')} s, "
                      f"deploy {deploy_s:.1f} s")
        yield Deployed(mininet, hosts, rules, p4info,
                       {"deploy_s": deploy_s, "writes": sum(writes.values()),
                        **{f"{k}_s": v for k, v in built.items()}},
                       device_config, addresses, socks,
                       pools_hosts=not getattr(s, "servers", None))


def job_record(cfg: JobConfig, workers: list[str], ps: str, tor: str,
               moved: dict[tuple[str, str], int], gone: set[str],
               complete: bool = True) -> tuple[dict, dict]:
    """The per-round record of one job that ran (its folder ``cfg.out_dir`` holds the
    workers' and the PS's reports): time, accuracy, retransmissions, exactness against the
    workers' quantized gradients, bytes on the PS's link (``tor`` → ``ps``) and on the
    busiest link from ``moved``.  ``gone``: workers that left the job; ``complete`` False
    when the job was stopped (exactness is then checked round by round over the rounds
    every survivor finished).  Returns the record and the PS's report."""
    out_dir = Path(cfg.out_dir)
    alive = [i for i, w in enumerate(workers) if w not in gone]
    reports = [json.loads((out_dir / f"worker{i}.json").read_text()) for i in alive
               if (out_dir / f"worker{i}.json").exists()]
    ps_path = out_dir / "ps.json"
    ps_report = json.loads(ps_path.read_text()) if ps_path.exists() else {"stats": {}}
    n_done = min(len(rep["rounds"]) for rep in reports) if reports else 0
    members = [reports[0]["rounds"][r].get("members", cfg.worker_ids) for r in range(n_done)]
    exact = (exact_sums_ok(out_dir, len(workers)) if not gone and complete
             else exact_sums_by_round(out_dir, len(workers), cfg.n_values, members))
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
            # how much later than the first the last worker started the round (its
            # compute or its process scheduled later): the round's start skew
            "start_skew_s": (max(x["time_s"] for x in per_worker)
                             - min(x["time_s"] for x in per_worker)),
            # retransmissions per worker, collapsed (64 workers make no readable list)
            "retransmissions_per_worker": spread([x["retransmits"] for x in per_worker]),
            "accuracy": per_worker[0]["accuracy"],
            "loss": mean([x["loss"] for x in per_worker]),
            "retransmissions": sum(x["retransmits"] for x in per_worker),
            "clipped": sum(x["clipped"] for x in per_worker),
            "exact": exact[r],
            "schedule_version": per_worker[0].get("schedule_version", 0),
            "ps_rx_bytes": moved.get((tor, ps), 0) / cfg.rounds,
            "busiest_link_bytes": max(moved.values()) / cfg.rounds,
            **({"members": [workers[i] for i in members[r]]} if gone else {}),
        })
    busiest = max(moved, key=moved.get)
    return {"job_id": cfg.job_id, "rounds": rounds, "ps": ps_report["stats"],
            "window": cfg.window,  # the job's (mode_window: the user's or the default rule)
            "grad_bytes": 4 * cfg.n_values,  # int32 values synchronized per round
            "ps_link_bytes_total": moved.get((tor, ps), 0), "busiest_link": list(busiest),
            "busiest_link_bytes_total": moved[busiest],
            "link_bytes_total": {f"{a}->{b}": v for (a, b), v in sorted(moved.items())},
            }, ps_report


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
