"""The typed plan (docs/design.md §3.5): :class:`Plan` and :class:`JobPlan`, one JSON form.

:meth:`Plan.build` is the one constructor of a plan that planning (one job or several) and
re-planning make; a plan is frozen (re-planning builds a new one, it patches no field).

A plan is one document whatever the number of jobs: ``Plan.jobs`` maps a job's name to its
:class:`JobPlan`; the plan of one job (``plan``, ``run`` without ``--jobs``) holds a single
job named ``"job"`` and no ``objective``.  :meth:`Plan.to_json` writes version
:data:`PLAN_VERSION`; :meth:`Plan.from_json` reads it, and also version-1 documents of both
shapes (the single-job dict and the several-jobs dict) so that old plan files still deploy.
Any problem is one :class:`PlanError` line; a plan read back is checked for meaning against its
topology (:meth:`Plan.check`, :mod:`controller.plan.check`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

import networkx as nx

from controller.plan.check import check_plan
from controller.plan.lp import Job, Link, LPResult, PlanError
from topo.models import TopologyError, from_dict, natural_key, to_dict
from topo.models import switch_ids as default_switch_ids

__all__ = ["PLAN_VERSION", "SOLO", "JobPlan", "JobPart", "Plan"]

PLAN_VERSION = 2
SOLO = "job"  # the name of the only job of a single-job plan


@dataclass(frozen=True)
class JobPart:
    """What :meth:`Plan.build` makes one :class:`JobPlan` of: the job, the LP solution of its
    deployment, and the fields that do not follow from them (``weight``, ``gamma_alone``,
    ``model``, ``removed_workers``, ...)."""

    name: str
    job: Job
    result: LPResult
    extra: Mapping[str, Any] = field(default_factory=dict)


def _layout(job: Job, res: LPResult) -> dict[str, Any]:
    """Intervals and fractions of one job (docs/design.md §3.5): ``intervals`` consecutive from
    0 in S's order, each a_s/γ long; ``fractions`` x_{w,s}/γ; a job with γ = 0 gets none."""
    gamma = res.gamma
    intervals: dict[str, dict[str, float]] = {}
    fractions: dict[str, dict[str, float]] = {w: {} for w in job.workers}
    if gamma > 0:
        offset = 0.0
        for s in res.deployed:
            length = min(max(res.a[s] / gamma, 0.0), max(0.0, 1.0 - offset))
            intervals[s] = {"offset": offset, "length": length}
            offset += length
        fractions = {w: {s: min(res.x.get((w, s), 0.0) / gamma, intervals[s]["length"])
                         for s in res.deployed} for w in job.workers}
    return {
        "deployed": list(res.deployed) if gamma > 0 else [],
        "intervals": intervals,
        "fractions": fractions,
        "rates": {
            "x": {w: {s: res.x.get((w, s), 0.0) for s in res.deployed} for w in job.workers},
            "a": dict(res.a),
            "u": dict(res.u),
        },
    }


@dataclass(frozen=True)
class JobPlan:
    """One job's part of a plan: where its gradient is aggregated and how it is split."""

    ps: str
    ps_tor: str
    ps_tor_id: int
    workers: list[str]  # name order; a worker's index is its bit in the bitmap
    worker_ids: dict[str, int]
    gamma: float
    deployed: list[str]  # S_j in interval order
    intervals: dict[str, dict[str, float]]  # s → {"offset", "length"}
    fractions: dict[str, dict[str, float]]  # w → s → x_{w,s}/γ
    rates: dict[str, Any] = field(default_factory=dict)  # raw LP values x, a, u
    ps_link_load: float = 0.0
    weight: float = 1.0
    gamma_per_weight: float | None = None  # several jobs
    gamma_alone: float | None = None  # several jobs: the job planned alone
    gamma_without_result_load: float | None = None  # one job, result_load: §3.3's model
    model: str | None = None  # from the jobs file
    model_size: int | None = None
    rounds: int | None = None
    removed_workers: list[str] = field(default_factory=list)  # workers that left (§9)


@dataclass(frozen=True)
class Plan:
    """The plan document: the network it was made for, the shared deployment, the jobs."""

    topology: dict[str, Any]  # {"spec", "name", "graph": topology file format}
    switch_ids: dict[str, int]  # name → id (1..n in name order; 0 is the PS)
    jobs: dict[str, JobPlan]
    version: int = PLAN_VERSION
    routing: str = "ecmp-per-hop-even"
    budget: int | None = None
    capacity: float | dict[str, float] | None = None
    result_load: bool = False
    planner: str | None = None
    objective: str | None = None  # several jobs: "maxmin" or "sum"; None for one job
    deployed: list[str] = field(default_factory=list)  # S
    programmable: list[str] = field(default_factory=list)  # several jobs: S then the PS ToRs
    tor_sharing: bool | None = None
    loads: list[dict[str, Any]] = field(default_factory=list)  # {"from", "to", "load", "bw"}
    baselines: dict[str, float | None] = field(default_factory=dict)
    baseline_details: dict[str, dict[str, Any]] = field(default_factory=dict)
    solver: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    greedy: list[dict[str, Any]] = field(default_factory=list)  # choices, γ or score after each
    fairness: float | None = None
    min_gamma_per_weight: float | None = None
    sum_gamma: float | None = None
    failed: list[str] = field(default_factory=list)  # switches that died (§9)
    retired_ids: list[int] = field(default_factory=list)  # their ids
    # a baseline beat the planner, or the budget was left unused below the bound
    # (controller.plan.baselines.honesty_warning); None when neither
    warning: str | None = None
    # the default planner below a baseline of its table, improved by local search from it
    # (controller.plan.pipeline.polish): from, gamma_start, gamma_greedy, moves, ...
    local_search: dict[str, Any] | None = None

    @classmethod
    def build(
        cls,
        graph: nx.Graph,
        parts: Sequence[JobPart],
        loads: Mapping[Link, float],
        *,
        spec: str | None = None,
        switch_ids: Mapping[str, int] | None = None,
        **rest: Any,
    ) -> Plan:
        """The one constructor of a plan made by planning or re-planning.

        ``graph``: the network (kept as ``topology``, unless ``rest`` gives one, and the
        bandwidth of every link in ``loads``); ``parts``: one :class:`JobPart` per job;
        ``loads``: directed link → load, summed over the jobs; ``switch_ids``: name → id
        (default 1..n in name order; a re-plan keeps the original's); ``rest``: the other
        fields of :class:`Plan` (``budget``, ``planner``, ``objective``, ``baselines``, ...)."""
        ids = dict(switch_ids) if switch_ids is not None else default_switch_ids(graph)
        jobs = {}
        for part in parts:
            job, res = part.job, part.result
            jobs[part.name] = JobPlan(
                ps=job.ps, ps_tor=job.ps_tor, ps_tor_id=int(ids[job.ps_tor]),
                workers=list(job.workers),
                worker_ids={w: i for i, w in enumerate(job.workers)}, gamma=res.gamma,
                **_layout(job, res), ps_link_load=res.loads.get((job.ps_tor, job.ps), 0.0),
                **dict(part.extra))
        bw: dict[Link, float] = {}
        for u, v, b in graph.edges(data="bw", default=1.0):
            bw[u, v] = bw[v, u] = float(b)
        rows = [{"from": u, "to": v, "load": x, "bw": bw[u, v]}
                for (u, v), x in sorted(loads.items(), key=lambda kv: (natural_key(kv[0][0]),
                                                                       natural_key(kv[0][1])))
                if x > 1e-12]
        rest.setdefault("topology", {"spec": spec, "name": graph.graph.get("name"),
                                     "graph": to_dict(graph)})
        return cls(switch_ids=ids, jobs=jobs, loads=rows, **rest)

    @property
    def several(self) -> bool:
        """True for a plan of several jobs (the joint LP of §3.10), even with one entry."""
        return self.objective is not None

    @property
    def job(self) -> JobPlan:
        """The only job of the plan; :class:`PlanError` when it has several."""
        if len(self.jobs) != 1:
            raise PlanError(f"the plan has {len(self.jobs)} jobs; name one")
        return next(iter(self.jobs.values()))

    @property
    def gamma(self) -> float:
        """One job's γ; for several jobs the smallest γ_j / w_j."""
        if self.several:
            return float(self.min_gamma_per_weight or 0.0)
        return float(self.job.gamma)

    def only(self, name: str) -> Plan:
        """Job ``name`` alone, as a one-job plan sharing this plan's switch ids and retired
        ids (what :func:`controller.plan.document.chunk_schedule` and the rule installer
        read for one job of several)."""
        if name not in self.jobs:
            raise PlanError(f"the plan has no job {name!r}")
        job = self.jobs[name]
        return replace(self, jobs={name: job}, deployed=list(job.deployed),
                       retired_ids=list(self.retired_ids))

    def to_json(self) -> dict[str, Any]:
        """The version-2 JSON object (docs/design.md §3.5)."""
        out = asdict(self)
        out["version"] = PLAN_VERSION
        return out

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        """A plan from its JSON object (version 2, or 1 converted); :class:`PlanError`."""
        if not isinstance(data, dict):
            raise PlanError("a plan must be a JSON object")
        version = data.get("version", 1)
        if version == 1:
            data = _from_v1(data)
        elif version != PLAN_VERSION:
            raise PlanError(f"plan version {version!r} is not supported "
                            f"(this controller reads 1 and {PLAN_VERSION})")
        jobs_raw = data.get("jobs")
        if not isinstance(jobs_raw, dict) or not jobs_raw:
            raise PlanError("plan lacks 'jobs' (an object of at least one job)")
        jobs = {str(name): _build(JobPlan, entry, f"job {name!r}")
                for name, entry in jobs_raw.items()}
        plan = _build(cls, {**data, "jobs": jobs}, "plan")
        plan.check()
        return plan

    def own_graph(self) -> nx.Graph | None:
        """The network embedded in ``topology`` (None when the plan has none)."""
        data = self.topology.get("graph") if isinstance(self.topology, dict) else None
        if data is None:
            return None
        try:
            return from_dict(data, "topology.graph")
        except TopologyError as exc:
            raise PlanError(str(exc)) from None

    def check(self, graph: nx.Graph | None = None) -> None:
        """The plan's meaning against ``graph`` (default: its own topology), one
        :class:`PlanError` naming the field (:func:`controller.plan.check.check_plan`)."""
        if not isinstance(self.topology, dict):
            raise PlanError("topology must be an object")
        check_plan(self, graph if graph is not None else self.own_graph())


def _build(cls: Any, data: Any, what: str) -> Any:
    """``cls(**data)`` on the known fields; a missing required field is a PlanError."""
    if not isinstance(data, dict):
        raise PlanError(f"{what} must be a JSON object")
    known = {f.name for f in fields(cls)}
    required = [f.name for f in fields(cls)
                if f.default is MISSING and f.default_factory is MISSING]
    for key in required:
        if key not in data:
            raise PlanError(f"{what} lacks {key!r}")
    return cls(**{k: v for k, v in data.items() if k in known})


_JOB_KEYS = {f.name for f in fields(JobPlan)}
_PLAN_KEYS = {f.name for f in fields(Plan)} - {"jobs"}


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 document (either shape) in the version-2 form."""
    out: dict[str, Any] = {k: v for k, v in data.items() if k in _PLAN_KEYS}
    out["version"] = PLAN_VERSION
    out.setdefault("topology", {"spec": None, "name": None, "graph": None})
    if "jobs" in data:  # several jobs: entries are already per job
        out["jobs"] = data["jobs"]
        return out
    # one job: its fields sat at the top of the document
    out["jobs"] = {SOLO: {k: v for k, v in data.items() if k in _JOB_KEYS}}
    out["result_load"] = bool(data.get("result_load", False))
    return out
