"""The results row of ``run --method ina`` (and of ``simulate``, which writes INA's document):
what ``compare`` reads of an INA run (:mod:`controller.experiment.rows`).

A run of one job has a row per mode (``ina``, ``ps_only``, ``tor_only``), the ``ina`` row with
the run's γ predicted by the LP and measured; a run of several jobs (``--jobs``) has a row per
job and mode (``<job>/<mode>``) and per job run alone (``alone/<job>``), each INA row with its
own job's γ.  A simulated run's rows say so in their method (``ina (simulated)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.experiment.rows import MethodRow, RunSettings, workers_text

__all__ = ["InaRow"]


@dataclass(frozen=True)
class InaRow(MethodRow):
    """One mode of an INA run; ``job``: the job of a ``--jobs`` run (None: one job)."""

    job: str | None = None
    simulated: bool = False

    @classmethod
    def rows(cls, run: str, doc: dict[str, Any]) -> list[MethodRow]:
        simulated = doc.get("simulated") is True  # python -m controller simulate
        method = "ina (simulated)" if simulated else "ina"
        jobs = doc.get("jobs") if isinstance(doc.get("jobs"), dict) else None
        out: list[MethodRow] = []
        for name, mode in (doc.get("modes") or {}).items():
            job, _, job_mode = name.partition("/")  # several jobs: "<job>/<mode>" (§3.10)
            if jobs is not None and job_mode:
                gamma = (jobs.get(job) or {}).get("gamma") if job_mode == "ina" else None
                out.append(cls.of_mode(run, method, name, mode,
                                       gamma if isinstance(gamma, dict) else None,
                                       job=job_mode if job == "alone" else job,
                                       simulated=simulated))
            else:
                out.append(cls.of_mode(run, method, name, mode,
                                       doc.get("gamma") if name == "ina" else None,
                                       simulated=simulated))
        return out

    @classmethod
    def run_settings(cls, doc: dict[str, Any]) -> RunSettings:
        base = super().run_settings(doc)
        s = doc.get("settings") or {}
        jobs = doc.get("jobs") if isinstance(doc.get("jobs"), dict) else None
        workers = base.workers
        if jobs:  # --jobs: every job's workers, not --workers (unused then)
            names = list(dict.fromkeys(w for j in jobs.values() if isinstance(j, dict)
                                       for w in (j.get("workers") or [])))
            workers = workers_text(names) if names else workers
        elif isinstance((doc.get("plan") or {}).get("workers"), list):
            workers = workers_text(doc["plan"]["workers"])  # the hosts --workers resolved to
        options = (doc.get("simulation") or {}).get("options") or {}
        trained = options.get("train", True) is not False  # simulate --no-train: no model
        network = ("simulated" if doc.get("simulated") is True
                   else "servers" if s.get("servers") else "mininet")
        planner = s.get("planner")
        if jobs and s.get("objective"):
            planner = f"{planner or 'joint'} ({s['objective']})"

        def text(v: Any) -> str | None:
            return None if v is None else f"{v:g}" if isinstance(v, float) else str(v)
        return RunSettings(
            topo=base.topo, bw=base.bw, workers=workers,
            jobs=text(s.get("jobs")), rounds=base.rounds,
            model=base.model if trained else None, loss=base.loss,
            budget=text(s.get("budget")), planner=text(planner), window=text(s.get("window")),
            timeout=text(s.get("timeout")), network=network)
