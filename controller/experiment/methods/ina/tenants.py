"""The tenants of an INA run (:mod:`controller.experiment.methods.ina.engine`): each job with
its PS, workers, model, rounds, weight, its part of the plan, and one job id per sync mode
(``JOB_IDS[mode] + 4 k`` for the k-th job, so every (job, mode) has its own id, membership,
masks and multicast group); what the switches hold for them; ``--kill-ps``.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.dataplane.deploy import SwitchJob
from controller.errors import ExperimentError
from controller.experiment.methods.ina.core import JOB_IDS, Settings, tree_for
from controller.plan.jobs import JobEntry
from controller.plan.joint import job_plan
from controller.plan.types import Plan
from workers.common.model import Replica, TrainConfig, load_data
from workers.ina.constants import K
from workers.ina.worker import n_chunks_for

__all__ = ["Tenant", "JOB_ID_STRIDE", "MODELS", "make_tenants", "solo_tenant",
           "deploy_specs", "parse_kill_ps"]

JOB_ID_STRIDE = 4  # (job k, mode m) -> JOB_IDS[m] + 4 k: ids never shared across jobs
MODELS = ("mlp", "logreg")  # a job of a jobs file; a single job may also be a real model


@dataclass
class Tenant:
    """One training job of a run and its part of the plan."""

    index: int
    name: str
    ps: str
    workers: list[str]
    weight: float
    plan: Plan  # this job alone (controller.plan.types.Plan.only)
    rounds: int
    model: str
    hidden: int
    n_values: int
    n_chunks: int
    train_samples: int = 0  # the numpy models' training set (0: a real model's gradients)
    mode: str | None = None  # the jobs file's ``mode``: kept in every launch (None: the run's)

    def mode_in(self, launch_mode: str) -> str:
        """The sync mode this job runs in a launch of ``launch_mode``."""
        return self.mode or launch_mode

    def job_id(self, mode: str) -> int:
        return JOB_IDS[mode] + JOB_ID_STRIDE * self.index

    def train(self, s: Settings, seed: int) -> TrainConfig:
        sw = s.workload
        return TrainConfig(model=self.model, hidden=self.hidden, n_workers=len(self.workers),
                           rounds=self.rounds, batch_size=s.batch_size, lr=s.lr, seed=seed,
                           **({"scale": sw.scale, "compute_s": sw.emulated_compute_s}
                              if sw is not None and self.model == sw.model else {}))

    def check_batch(self, s: Settings) -> None:
        """:func:`check_batch` for this job."""
        check_batch(s, self.name, len(self.workers), self.model, self.train_samples)

    @property
    def hosts(self) -> list[str]:
        return [self.ps, *self.workers]


def check_batch(s: Settings, job: str, n_workers: int, model: str, samples: int) -> None:
    """Refuse, in one line, a job whose workers' shards of the numpy models' training set
    (``samples``; 0: a real model's gradients) would be smaller than a batch: each would die
    in round 0 (``workers.common.data.batch_indices``)."""
    smallest = samples // n_workers  # shards differ by one at most
    if samples and smallest < s.batch_size:
        raise ExperimentError(
            f"job {job!r}: {n_workers} workers leave {smallest} training samples to some of "
            f"them, fewer than the batch of {s.batch_size} ({model} trains on {samples} "
            f"digits): use fewer workers, a real model's gradients (--model resnet50, "
            f"docs/models.md) or, in the simulated network, --no-train")


def train_samples(model: str) -> int:
    """The size of a numpy model's training set (the digits it trains on)."""
    return len(load_data(TrainConfig(model=model)).y_train)


def _tenant(s: Settings, k: int, name: str, ps: str, plan: Plan, weight: float,
            rounds: int | None, model: str | None, hidden: int | None,
            mode: str | None = None) -> Tenant:
    model = model or s.model
    hidden = hidden or s.hidden
    workers = list(plan.job.workers)
    samples = 0  # a real model's gradients are synthetic (docs/models.md): no data set
    if s.workload is not None and model == s.workload.model:  # a real model (docs/models.md)
        n_values = s.workload.n_values
    elif model not in MODELS:
        raise ExperimentError(f"--jobs: job {name!r}: model {model!r} (expected "
                              f"{' or '.join(MODELS)})")
    else:
        n_values = Replica(TrainConfig(model=model, hidden=hidden, n_workers=len(workers)),
                           0).params.size
        samples = train_samples(model)
    return Tenant(index=k, name=name, ps=ps, workers=workers, weight=float(weight), plan=plan,
                  rounds=rounds or s.rounds, model=model, hidden=hidden, n_values=n_values,
                  n_chunks=n_chunks_for(n_values, K), train_samples=samples, mode=mode)


def make_tenants(s: Settings, plan: Plan, specs: list[JobEntry]) -> list[Tenant]:
    """The tenants of a joint plan, with the model each job file entry asks for
    (``model_size`` = the MLP's hidden units; defaults: the run's options)."""
    return [_tenant(s, k, spec.name, spec.ps, job_plan(plan, spec.name), spec.weight,
                    spec.rounds, spec.model, spec.model_size, spec.mode)
            for k, spec in enumerate(specs)]


def solo_tenant(s: Settings, plan: Plan) -> Tenant:
    """The one tenant of a single-job run: the run's PS, workers, model and rounds."""
    return _tenant(s, 0, "job", plan.job.ps, plan, 1.0, s.rounds, s.model, s.hidden)


def deploy_specs(tenants: list[Tenant], modes: tuple[str, ...],
                 solo: bool = False) -> list[SwitchJob]:
    """What the switches hold: every (job, mode), each with the job's plan; the modes of
    one job share its slot range (``tenant``).  ``solo``: the plan is the network's own."""
    if solo:
        t = tenants[0]
        return [SwitchJob(t.job_id(m), tuple(t.workers), tree=tree_for(m, t.plan, t.workers))
                for m in modes]
    return [SwitchJob(t.job_id(m), tuple(t.workers), plan=t.plan, tenant=t.name,
                      tree=tree_for(m, t.plan, t.workers))
            for t in tenants for m in ((t.mode,) if t.mode else modes)]


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
