"""One cell of the suite: a network, a workload, a loss rate and a number of jobs; every
design run on it in the simulated network or on Mininet (docs/suite.md).  Returns typed
results; writes each INA run's folder (``results.json``, ``report.md``, plots) under the
cell's folder."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.suite.designs import DESIGNS
from controller.experiment.methods.ina.core import Settings
from controller.experiment.methods.ina.method import InaMethod
from controller.experiment.methods.ina.networks import SimulatedNetwork
from controller.experiment.methods.ring.mininet import ring_on_mininet
from controller.experiment.methods.ring.sim import RingJob, simulate_ring
from controller.experiment.methods.switchml.mininet import switchml_on_mininet
from controller.experiment.methods.switchml.sim import SmJob, simulate_switchml
from controller.experiment.network import shaped_graph
from controller.experiment.prediction import RETX_BIND, LinkLoad, attribute
from controller.experiment.runner import execute
from controller.experiment.simulate.network import SimOptions
from topo.models import parse_topology
from workers.common.model import Replica, TrainConfig
from workers.ina.constants import K, num_slots
from workers.ina.wire import FRAME_BYTES
from workers.ina.worker import n_chunks_for
from workers.models.scaling import ring_comm_s, scale_workload
from workers.ring.ring_node import seeded_vector
from workers.ring.wire import HEADER
from workers.ring.worker import ring_packets

__all__ = ["NETWORKS", "NetworkSpec", "Cell", "DesignResult", "CellResult", "run_cell", "project",
           "load_cells", "merge"]


@dataclass(frozen=True)
class NetworkSpec:
    """A network of the suite: topology, workers per job, programmable switches (budget)."""

    name: str
    topo: str
    workers: int
    budget: int
    what: str
    # several jobs: the joint greedy's choices, known (docs/simulate.md, "The budget sweep at
    # 256 workers": at k=16 it takes half an hour to find them and stops at four)
    start: tuple[str, ...] = ()
    timeout: float | None = None  # the first RTO (None: the suite's); k=16 needs 5 s


NETWORKS: dict[str, NetworkSpec] = {n.name: n for n in (
    NetworkSpec("makerun", "fattree:4", 6, 2, "make run's: fat-tree k=4, PS h0, 6 workers"),
    NetworkSpec("k8", "fattree:8", 16, 4, "fat-tree k=8, 16 workers per job"),
    NetworkSpec("k16", "fattree:16", 64, 4, "fat-tree k=16, 64 workers per job, timeout 5 s",
                start=("core8", "core9", "core10", "core0"), timeout=5.0),
)}


@dataclass(frozen=True)
class Cell:
    """What a cell varies."""

    network: str
    model: str
    loss: float
    jobs: int
    scale: int = 10_000
    rounds: int = 3

    @property
    def name(self) -> str:
        return f"{self.network}-{self.model}-loss{self.loss:g}-j{self.jobs}"


@dataclass
class DesignResult:
    """One design in one cell (None: not measured)."""

    design: str
    ran: bool
    exact: bool = False
    s_per_round: float | None = None  # median over rounds of the slowest job's slowest worker
    elements_per_s: float | None = None  # all jobs' values all-reduced per second (scaled)
    real_elements_per_s: float | None = None  # projected to the real cluster (n_params/τ_real)
    projected_step_s: float | None = None  # t_c + τ/f on the real cluster
    speedup_vs_ring: float | None = None  # measured ring's projected step / this one's
    speedup_vs_ps_only: float | None = None
    gamma_ratio: float | None = None  # measured / predicted (γ, or the predicted round time)
    slots: int = 0  # aggregator slots reserved on the switches the design aggregates on
    retransmissions: int = 0
    bound: str = ""  # the binding resource (prediction.py; the ring's: its uplink)
    bound_text: str = ""
    note: str = ""
    fairness: float | None = None  # Jain's index of the jobs' elements per second (jobs > 1)
    marks: int = 0  # RESULTs with a congestion (ECN) mark the workers saw (atp)
    gamma_predicted: float | None = None  # the plan's γ (the smallest job's), INA designs
    plan_link: str = ""  # a link the plan loads to 100 % (what bounds the plan's γ)


def jain(xs: list[float]) -> float | None:
    """Jain's fairness index of ``xs`` (1: all equal; None for fewer than two)."""
    if len(xs) < 2 or not any(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


@dataclass
class CellResult:
    cell: Cell
    designs: dict[str, DesignResult]
    workers: int
    n_values: int
    n_params: int
    bw_mbps: float
    analytic_ring_step_s: float
    compute_s: float
    wall_s: float
    settings: dict[str, Any] = field(default_factory=dict)


def project(results: dict[str, DesignResult], cell: Cell) -> None:
    """Each measured design's projection onto the real cluster (T = t_c + τ/f, its real
    elements per second) and its speed-ups over the measured ring and PS-only (in place)."""
    sw = scale_workload(cell.model, cell.scale)
    f = sw.time_factor
    for r in results.values():
        if r.s_per_round:
            r.projected_step_s = sw.compute_s + r.s_per_round / f
            r.real_elements_per_s = sw.n_params / (r.s_per_round / f) * cell.jobs
    ring, ps = results.get("ring"), results.get("ps_only")
    for r in results.values():
        if r.projected_step_s:
            if ring is not None and ring.projected_step_s:
                r.speedup_vs_ring = ring.projected_step_s / r.projected_step_s
            if ps is not None and ps.projected_step_s:
                r.speedup_vs_ps_only = ps.projected_step_s / r.projected_step_s


def _jobs_file(graph: Any, spec: NetworkSpec, jobs: int, out: Path) -> str | None:
    """Several jobs: PSs spread over the hosts (PS of job j at host j·H/J), each job's
    workers strided over the pods (bench/sim_scale.py's ``--ps-spread``)."""
    if jobs == 1:
        return None
    n_hosts = sum(1 for _, k in graph.nodes(data="kind") if k == "host")
    w = min(spec.workers, n_hosts // jobs - 1)
    stride = n_hosts // w
    doc = [{"name": f"job{j + 1}", "ps": f"h{j * (n_hosts // jobs)}",
            "workers": [f"h{stride * i + stride // 2 + j}" for i in range(w)]}
           for j in range(jobs)]
    taken = {d["ps"] for d in doc}
    if any(h in taken for d in doc for h in d["workers"]):  # small networks: deal instead
        return str(jobs)
    path = out / "jobs.json"
    path.write_text(json.dumps(doc, indent=1))
    return str(path)


def _vectors(seed: int, n_workers: int, n: int) -> Callable[[int, int], np.ndarray]:
    """``gradient_of(worker, round)``: every design's seeded int32 vectors (cached; the ring
    process draws the same, :func:`workers.ring.ring_node.seeded_vector`)."""
    cache: dict[tuple[int, int], np.ndarray] = {}

    def gradient_of(w: int, r: int) -> np.ndarray:
        v = cache.get((w, r))
        if v is None:
            v = cache[(w, r)] = seeded_vector(seed, w, r, n_workers, n)
        return v
    return gradient_of


def _ina_run(s: Settings, opt: SimOptions, out: Path, gradient_of: Any, graph: Any = None,
             plan: Any = None, network: str = "simulated") -> tuple[dict, Any]:
    """One INA-engine run (what ``simulate`` does, or ``run`` on Mininet), keeping the
    simulated network for the ring and SwitchML (None on Mininet)."""
    from rich.console import Console

    if network == "mininet":  # the workers' own vectors (the model's), not gradient_of
        from controller.experiment.methods.ina.networks import MininetNetwork

        mn = replace(s, out=str(out.parent), name=out.name, network="mininet", no_alone=True,
                     extra=dict(s.extra))
        return execute(InaMethod(settings=mn, network=MininetNetwork(), reference=False,
                                 graph=graph, plan=plan), console=Console(quiet=True)), None
    net = SimulatedNetwork(opt, gradient_of)
    s = replace(s, out=str(out.parent), name=out.name, network="simulated", no_alone=True,
                extra=dict(s.extra))
    doc = execute(InaMethod(settings=s, network=net, reference=False, graph=graph, plan=plan),
                  console=Console(quiet=True))
    return doc, net.deployed


def _known_plan(graph: Any, s: Settings, start: tuple[str, ...]) -> Any:
    """The joint plan of ``s.jobs`` from the joint greedy's known choices ``start``
    (bench/sim_scale.py's ``--greedy-start``): one LP instead of hundreds."""
    from controller.experiment.methods.ina.core import plan_request
    from controller.plan.jobs import jobs_argument
    from controller.plan.joint import greedy_jobs
    from controller.plan.lp_jobs import make_jobset
    from controller.plan.pipeline import plan_several_jobs

    specs = jobs_argument(s.jobs or "", graph)
    req = replace(plan_request(s), baselines=False)
    js = make_jobset(graph, specs, capacity=req.capacity, result_load=req.result_load)
    planned = greedy_jobs(js, s.budget, objective=req.objective, solver=req.solver,
                          time_limit=req.time_limit, start=start[:s.budget])
    return plan_several_jobs(graph, specs, req, planned=planned)


def _placed_plan(graph: Any, s: Settings) -> Any:
    """The joint plan of ``s.jobs`` on the set ``s.planner`` places, without the baselines
    (each job alone, the all-programmable bound: LPs that do not solve in time at k=16)."""
    from controller.experiment.methods.ina.core import plan_request
    from controller.plan.jobs import jobs_argument
    from controller.plan.pipeline import plan_several_jobs

    return plan_several_jobs(graph, jobs_argument(s.jobs or "", graph),
                             replace(plan_request(s), baselines=False))


def _rack_count(graph: Any, s: Settings) -> int:
    """The racks holding workers outside the PSs' racks: the ``atp`` design's budget, S =
    every such ToR (:mod:`controller.plan.tor_all`).  Not every switch: a budget the
    planner leaves unused makes the joint plan solve its all-programmable bound, an LP that
    does not solve in time at k=16."""
    from controller.plan.document import resolve_workers
    from controller.plan.jobs import jobs_argument
    from controller.plan.tor_all import tor_of

    pairs = ([(j.ps, j.workers) for j in jobs_argument(s.jobs, graph)] if s.jobs is not None
             else [(s.ps, resolve_workers(graph, s.ps, s.workers))])
    ps_tors = {tor_of(graph, ps) for ps, _ in pairs}
    return len({tor_of(graph, w) for _, ws in pairs for w in ws} - ps_tors)


def _marks(run_dir: Path) -> int:
    """RESULTs with a congestion mark the workers of an INA run saw (every job and round,
    their ``worker*.json``; docs/protocol.md §6, "Congestion marks")."""
    return sum(r.get("marks", 0) for f in run_dir.rglob("worker[0-9]*.json")
               for r in json.loads(f.read_text()).get("rounds", []))


def _mode_view(doc: dict, mode: str) -> list[tuple[str, dict, dict | None]]:
    """Per job: (job, the mode's record, the job's summary: ``gamma``, ``workers``) -- one
    job or several."""
    if "jobs" in doc:
        return [(job, doc["modes"][f"{job}/{mode}"], j)
                for job, j in doc["jobs"].items() if f"{job}/{mode}" in doc["modes"]]
    one = {"gamma": doc.get("gamma"), "workers": doc["plan"]["workers"]}
    return [("job", doc["modes"][mode], one)] if mode in doc["modes"] else []


def _ina_design(name: str, doc: dict, mode: str, n_values: int, slots: int,
                bw: float) -> DesignResult:
    per = _mode_view(doc, mode)
    if not per:
        return DesignResult(name, False, note="mode missing from the run")
    med = [float(np.median([r["time_s"] for r in rec["rounds"]])) for _, rec, _ in per]
    exact = all(r["exact"] for _, rec, _ in per for r in rec["rounds"])
    retx = sum(r["retransmissions"] for _, rec, _ in per for r in rec["rounds"])
    res = DesignResult(name, True, exact=exact, s_per_round=max(med),
                       elements_per_s=sum(n_values / m for m in med if m > 0),
                       retransmissions=retx, slots=slots,
                       fairness=jain([n_values / m for m in med if m > 0]))
    # several jobs: the slowest job's prediction (the engine predicts every job's round)
    slowest = max(zip(per, med, strict=True), key=lambda x: x[1])[0][0]
    preds = doc.get("prediction") or {}
    pred = preds.get(mode) or preds.get(f"{slowest}/{mode}")
    if mode == "ina" and per[0][2].get("gamma") is not None:
        ratios = [j["gamma"]["ratio"] for _, _, j in per
                  if j.get("gamma") and j["gamma"].get("ratio") is not None]
        res.gamma_ratio = float(np.mean(ratios)) if ratios else None
        planned = [j["gamma"]["predicted"] for _, _, j in per
                   if j.get("gamma") and j["gamma"].get("predicted") is not None]
        res.gamma_predicted = min(planned) if planned else None
    elif pred and pred["round"].get("measured_s"):
        res.gamma_ratio = pred["round"]["predicted_s"] / pred["round"]["measured_s"]
    if pred:
        res.bound, res.bound_text = pred["bound"]["resource"], pred["bound"]["text"]
        if "jobs" in doc:
            res.bound_text = f"{slowest}: {res.bound_text}"
        # the per-link records sit on one job's prediction (the network is shared)
        res.plan_link = plan_link(next(
            (p["links"] for k, p in preds.items()
             if (k == mode or k.endswith(f"/{mode}")) and p.get("links")), []))
    elif "jobs" in doc:
        res.bound, res.bound_text = _jobs_bound(per, bw, n_values)
    return res


def plan_link(links: list[dict]) -> str:
    """The link the plan loads most and its LP load (100 % where a link binds the plan's γ),
    e.g. ``"agg48->edge55 at 100%"``, from a prediction's per-link records; "" when none
    carries an LP load."""
    loaded = [x for x in links if x.get("lp_load")]
    if not loaded:
        return ""
    top = max(loaded, key=lambda x: x["lp_load"])
    return f"{top['link']} at {top['lp_load']:.0%}"


def _jobs_bound(per: list[tuple[str, dict, dict | None]], bw: float,
                n_values: int) -> tuple[str, str]:
    """Several jobs (the engine predicts one job's round only): the binding resource of the
    slowest job by :func:`controller.experiment.prediction.attribute` from what its record
    holds -- GRADs sent, retransmissions, slot collisions (fall-backs to the PS), its busiest
    link's utilisation -- without the LP's per-link loads or a round prediction."""
    job, rec, summary = max(per, key=lambda x: np.median([r["time_s"] for r in x[1]["rounds"]]))
    rounds = rec["rounds"]
    t = float(np.median([r["time_s"] for r in rounds]))
    util = float(np.median([r["busiest_link_bytes"] for r in rounds])) * 8 / (bw * 1e6 * t)
    name = rec.get("busiest_link") or "?"
    link = LinkLoad("->".join(name) if isinstance(name, list) else str(name), 0.0, 0.0,
                    float(np.median([r["busiest_link_bytes"] for r in rounds])), util)
    n_workers = len(summary["workers"])
    grads = n_chunks_for(n_values, K) * n_workers * len(rounds)
    b = attribute(links=[link], grads_sent=grads,
                  retransmissions=sum(r["retransmissions"] for r in rounds),
                  fallbacks=float(rec.get("collisions") or 0), cores_bound=False,
                  frame_bytes=FRAME_BYTES, bw_mbit=bw,
                  gamma=(summary.get("gamma") or {}).get("predicted") or 0.0)
    return b.resource, f"{job}: {b.text}"


def run_cell(cell: Cell, out: Path, seed: int = 0, designs: tuple[str, ...] = tuple(DESIGNS),
             window: int = 16, timeout: float = 0.3, network: str = "simulated") -> CellResult:
    """Every design of ``designs`` on ``cell`` (module docstring); ``network`` "mininet":
    every design on Mininet (root): the INA engine's with the workers' own vectors, the
    ring and SwitchML as processes (``ring_node``, ``switchml_node``) with the suite's."""
    t0 = time.perf_counter()
    spec = NETWORKS[cell.network]
    timeout = spec.timeout or timeout
    out.mkdir(parents=True, exist_ok=True)
    sw = scale_workload(cell.model, cell.scale)
    bw = sw.emulated_mbps
    graph = shaped_graph(parse_topology(spec.topo), bw)
    jobs = _jobs_file(graph, spec, cell.jobs, out)
    n_values = sw.n_values
    model: dict[str, Any] = {"model": cell.model, "scale": cell.scale}
    if jobs is not None:
        # several jobs take a numpy model's size (the engine's jobs check refuses a real
        # model): the MLP whose vector is nearest the scaled model's, the same link rate
        hidden = max(1, round((sw.n_values - 10) / 75))
        model = {"model": "mlp", "hidden": hidden, "scale": None}
        n_values = Replica(TrainConfig(model="mlp", hidden=hidden, n_workers=spec.workers),
                           0).params.size
    base = Settings(topo=spec.topo, ps="h0", workers=str(spec.workers), budget=spec.budget,
                    rounds=cell.rounds, bw=bw, loss=cell.loss, window=window,
                    timeout=timeout, seed=seed, jobs=jobs, modes=("ina", "ps_only"), **model)
    opt = SimOptions(train=False, reference=False)
    n_workers_all = spec.workers * cell.jobs
    gradient_of = _vectors(seed, n_workers_all, n_values)
    results: dict[str, DesignResult] = {}
    main_doc: dict | None = None
    deployed = None
    want_main = any(d in designs for d in ("insync", "ps_only", "ring", "switchml"))
    if want_main:
        modes = tuple(m for d, m in (("insync", "ina"), ("ps_only", "ps_only")) if d in designs)
        try:
            plan = (_known_plan(graph, base, spec.start) if jobs is not None and spec.start
                    else None)
            main_doc, deployed = _ina_run(replace(base, modes=modes or ("ps_only",)), opt,
                                          out / "main", gradient_of, graph, plan, network)
        except Exception as e:  # noqa: BLE001 -- one design's failure is a result, not the end
            failed = f"failed: {type(e).__name__}: {e}"
            for d in ("insync", "ps_only", "ring", "switchml"):
                results[d] = DesignResult(d, False, note=failed)
    if main_doc is not None:
        agg = len(main_doc.get("plan", {}).get("deployed") or []) + cell.jobs  # + PS ToRs
        if "insync" in designs:
            results["insync"] = _ina_design("insync", main_doc, "ina", n_values,
                                            agg * num_slots(), bw)
        if "ps_only" in designs:
            results["ps_only"] = _ina_design("ps_only", main_doc, "ps_only", n_values, 0, bw)
    if "atp" in designs:
        d = DESIGNS["atp"]
        try:
            sa = replace(base, modes=("ina",), planner=d.planner, cc=d.cc,
                         budget=_rack_count(graph, base) if d.every_switch else base.budget)
            # the planner's set without the baselines (make_plan's all-programmable bound
            # is an LP that does not solve in time at k=16)
            plan = (_placed_plan(graph, sa) if jobs is not None and spec.start else None)
            atp_doc, _ = _ina_run(sa, replace(opt, ecn_packets=d.ecn_packets), out / "atp",
                                  gradient_of, graph, plan, network)
            racks = len(atp_doc.get("plan", {}).get("deployed") or [])
            results["atp"] = _ina_design("atp", atp_doc, "ina", n_values,
                                         (racks + cell.jobs) * num_slots(), bw)
            results["atp"].marks = _marks(out / "atp")
        except Exception as e:  # noqa: BLE001
            results["atp"] = DesignResult("atp", False, note=f"failed: {type(e).__name__}: {e}")
    workers_of: list[list[str]] = []
    if main_doc is not None:
        workers_of = ([j["workers"] for j in main_doc["jobs"].values()] if "jobs" in main_doc
                      else [main_doc["plan"]["workers"]])
    if "ring" in designs and (deployed is not None or (network == "mininet" and workers_of)):
        try:
            if deployed is not None:
                rs = simulate_ring(deployed, [RingJob(j + 1, ws, gradient_of)
                                              for j, ws in enumerate(workers_of)], cell.rounds,
                                   k=K, window=window, timeout=timeout,
                                   compute_s=opt.compute_ms / 1e3,
                                   jitter_s=opt.jitter_ms / 1e3, seed=seed)
            else:
                rs = ring_on_mininet(_mininet_settings(graph, base), workers_of, cell.rounds,
                                     n_values, out / "ring", n_workers=n_workers_all,
                                     window=window, timeout=timeout)
            results["ring"] = _ring(rs, workers_of, cell, n_values, bw)
        except Exception as e:  # noqa: BLE001
            results["ring"] = DesignResult("ring", False, note=f"failed: {type(e).__name__}: {e}")
    if "switchml" in designs and main_doc is not None and (deployed is not None
                                                           or network == "mininet"):
        ps_of = ([j["ps"] for j in main_doc["jobs"].values()] if "jobs" in main_doc
                 else [main_doc["plan"]["ps"]])
        try:
            if deployed is not None:
                rs = simulate_switchml(
                    deployed, [SmJob(j + 1, ps, ws, gradient_of) for j, (ps, ws)
                               in enumerate(zip(ps_of, workers_of, strict=True))],
                    cell.rounds, pool_size=window, timeout=timeout,
                    compute_s=opt.compute_ms / 1e3, jitter_s=opt.jitter_ms / 1e3, seed=seed)
            else:
                rs = switchml_on_mininet(_mininet_settings(graph, base),
                                         list(zip(ps_of, workers_of, strict=True)),
                                         cell.rounds, n_values, out / "switchml",
                                         n_workers=n_workers_all, pool_size=window,
                                         timeout=timeout)
            results["switchml"] = _switchml(rs, cell, n_values, bw)
        except Exception as e:  # noqa: BLE001
            results["switchml"] = DesignResult("switchml", False,
                                               note=f"failed: {type(e).__name__}: {e}")
    for name in designs:
        if name not in results:
            results[name] = DesignResult(name, False, note=DESIGNS[name].what)
    project(results, cell)
    n_w = len(workers_of[0]) if workers_of else spec.workers
    return CellResult(cell, results, n_w, n_values, sw.n_params, bw,
                      sw.compute_s + ring_comm_s(sw.n_params, n_w, sw.link_gbps),
                      sw.compute_s, time.perf_counter() - t0,
                      {"topo": spec.topo, "budget": spec.budget, "window": window,
                       "timeout": timeout, "seed": seed, "frame_bytes": FRAME_BYTES,
                       "jobs_file": jobs, "sim_options": vars(opt)})


def _mininet_settings(graph: Any, s: Settings) -> Any:
    """The Mininet network of a host-driven design: the INA runs' graph, target, link rate,
    loss and seed."""
    from controller.experiment.methods.host_driven import MininetSettings

    return MininetSettings(graph, s.target, s.bw or 0.0, s.loss, s.seed)


def _ring(rs: Any, workers_of: list[list[str]], cell: Cell, n_values: int,
          bw: float) -> DesignResult:
    """The ring design from its run (simulated or on Mininet): every job's workers one
    ring."""
    if not all(j.complete for j in rs.jobs):
        return _incomplete("ring", rs, cell)
    med = [float(np.median(j.time_per_round_s)) for j in rs.jobs]
    P = len(workers_of[0])
    frames = ring_packets(n_values, P, K)
    data_bytes = 14 + 20 + 8 + HEADER.size + 4 * K
    pred_s = frames * data_bytes * 8 / (bw * 1e6)
    retx = sum(j.retransmissions for j in rs.jobs)
    sent = frames * P * len(rs.jobs) * cell.rounds
    text = (f"each worker's uplink carries {frames} DATA frames per round (2(P-1)/P of the "
            f"vector, P = {P}): {pred_s:.3f} s predicted")
    top, name = max(((b, f"{a}->{z}") for (a, z), b in rs.moved.items()), default=(0, "?"))
    util = top * 8 / (bw * 1e6 * rs.virtual_s) if rs.virtual_s else 0.0
    text += f"; the busiest link, {name}, busy {util:.0%} of the run"
    bound = "retransmissions" if sent and retx / sent >= RETX_BIND else "link"
    if bound == "retransmissions":
        text = f"retransmissions: {retx / sent:.1%} of DATA sent again; {text}"
    return DesignResult(
        "ring", True, exact=all(all(j.exact) for j in rs.jobs), s_per_round=max(med),
        elements_per_s=sum(n_values / m for m in med if m > 0), retransmissions=retx,
        fairness=jain([n_values / m for m in med if m > 0]),
        gamma_ratio=pred_s / max(med) if max(med) > 0 else None, bound=bound,
        bound_text=f"{bound}: {text}" if bound == "link" else text)


def _switchml(rs: Any, cell: Cell, n_values: int, bw: float) -> DesignResult:
    """The SwitchML-style design from its run (simulated or on Mininet): ``switchml.p4`` on
    the first job's PS's ToR, a pool of ``window`` slots per job (SwitchML's window is its
    pool)."""
    if not all(j.complete for j in rs.jobs):
        return _incomplete("switchml", rs, cell)
    med = [float(np.median(j.time_per_round_s)) for j in rs.jobs]
    retx = sum(j.retransmissions for j in rs.jobs)
    sent = sum(x["sent"] for j in rs.jobs for w in j.records for x in w)
    t = max(med)
    touching = [(b, f"{a}->{z}") for (a, z), b in rs.moved.items() if rs.switch in (a, z)]
    top, name = max(touching) if touching else (0, "?")
    util = top * 8 / (bw * 1e6 * rs.virtual_s) if rs.virtual_s else 0.0
    bound = "retransmissions" if sent and retx / sent >= RETX_BIND else "link"
    text = (f"{bound}: one switch ({rs.switch}): every UPDATE crosses its links in and every "
            f"RESULT its links out; the busiest, {name}, busy {util:.0%} of the run; {retx} "
            f"UPDATEs sent "
            f"again, {rs.counters.get('shadow_reply', 0)} answered from a shadow copy")
    return DesignResult("switchml", True, exact=all(all(j.exact) for j in rs.jobs),
                        s_per_round=t, elements_per_s=sum(n_values / m for m in med if m > 0),
                        retransmissions=retx, slots=rs.cells, bound=bound, bound_text=text,
                        fairness=jain([n_values / m for m in med if m > 0]))



def load_cells(path: Path) -> dict[str, CellResult]:
    """The cells of an earlier ``suite.json`` by name (``--reuse``; none if it is absent)."""
    if not path.exists():
        return {}
    out = {}
    for c in json.loads(path.read_text())["cells"]:
        cell = Cell(**c["cell"])
        designs = {n: DesignResult(**d) for n, d in c["designs"].items()}
        out[cell.name] = CellResult(**{**c, "cell": cell, "designs": designs})
    return out


def merge(old: CellResult, new: CellResult, order: tuple[str, ...]) -> CellResult:
    """``old``'s designs with ``new``'s in place of those it ran again, projected again."""
    designs = {n: new.designs[n] if n in new.designs else old.designs[n]
               for n in DESIGNS if n in new.designs or n in old.designs or n in order}
    project(designs, old.cell)
    return replace(old, designs=designs, wall_s=old.wall_s + new.wall_s)


def _incomplete(name: str, rs: Any, cell: Cell) -> DesignResult:
    """A host-driven design whose workers did not all finish their rounds in the virtual
    time allowed: not a measurement; the rounds that did finish say whether they were exact."""
    done = sum(len(w) for j in rs.jobs for w in j.records)
    total = sum(len(j.records) for j in rs.jobs) * cell.rounds
    finished = [ok for j in rs.jobs for r, ok in enumerate(j.exact)
                if all(len(w) > r for w in j.records)]
    retx = sum(j.retransmissions for j in rs.jobs)
    return DesignResult(name, False, retransmissions=retx, bound="retransmissions",
                        note=f"incomplete: {done} of {total} worker-rounds finished in "
                             f"{rs.virtual_s:.0f} s of virtual time, {retx:,} packets resent; "
                             f"rounds every worker finished exact: "
                             f"{'yes' if all(finished) else 'NO'} ({len(finished)})")
