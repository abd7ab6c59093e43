"""The typed results row every method declares, and the settings ``compare`` shows with it.

``compare`` puts finished runs of any method side by side.  It does not guess a method's
results from their shape: each method declares, beside its runner, a row class -- a frozen
dataclass extending :class:`MethodRow` (itself a :class:`~controller.experiment.records.
ModeSummary`, the figures every row has) with the fields of that method's own rows (an async
policy, a cluster rule, an NDN worker count, a BCube schedule and size, an INA job) -- and the
name -> row class table is :data:`controller.experiment.registry.ROWS`.  A row class reads its
method's ``results.json`` in two class methods:

* :meth:`MethodRow.rows`: one row per mode (policy, rule) of the document;
* :meth:`MethodRow.run_settings`: the :class:`RunSettings` the figures depend on.

Both are pure; the document's types were checked before (:func:`controller.experiment.compare.
check_results`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from controller.experiment.records import ModeSummary, summarize_mode

__all__ = ["RunSettings", "MethodRow", "SETTING_COLUMNS", "SHOWN_NAMES", "mean", "seeds_text",
           "workers_text"]

SHOWN_NAMES = 8
"""A settings text names at most this many workers; more are shown as a count."""


@dataclass(frozen=True)
class RunSettings:
    """What a run's figures depend on, as text ready to show (None: not a setting of this
    run or this method).  ``model`` is None for a run that trained no model (``simulate
    --no-train``: seeded random gradients); ``network`` says what carried the packets
    (``mininet``, ``servers``, ``simulated``)."""

    topo: str | None = None
    bw: str | None = None
    workers: str | None = None
    jobs: str | None = None
    rounds: str | None = None
    model: str | None = None
    loss: str | None = None
    budget: str | None = None
    planner: str | None = None
    window: str | None = None
    timeout: str | None = None
    network: str | None = None

    def text(self) -> str:
        """One line: every setting that has a value (the network only when it is not
        Mininet, the default)."""
        parts = [self.topo or "", self.bw or ""]
        if self.workers is not None:  # "64 workers (h1 … h64)" already says what it counts
            parts.append(self.workers if " workers " in self.workers
                         else f"workers {self.workers}")
        for name in ("jobs", "rounds", "model", "loss", "budget", "planner", "window",
                     "timeout"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name} {value}")
        if self.network not in (None, "mininet"):
            parts.append(f"network {self.network}")
        return ", ".join(p for p in parts if p)


SETTING_COLUMNS = tuple(f.name for f in fields(RunSettings) if f.name not in ("topo", "rounds"))
"""The settings ``compare`` turns into columns when they differ between the runs shown (the
topology is named under the table; every row has its rounds)."""


def mean(xs: list[float]) -> float | None:
    """The mean of ``xs`` (None when empty)."""
    return sum(xs) / len(xs) if xs else None


def seeds_text(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def workers_text(workers: Any) -> str | None:
    """``--workers`` as recorded (a count, a spec, or host names) as text: names, or past
    :data:`SHOWN_NAMES` of them a count with the first and last."""
    if isinstance(workers, list):
        if len(workers) > SHOWN_NAMES:
            return f"{len(workers)} workers ({workers[0]} … {workers[-1]})"
        return ",".join(str(w) for w in workers)
    return None if workers is None else str(workers)


def _number(v: Any) -> str | None:
    return None if v is None else f"{v:g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class MethodRow(ModeSummary):
    """One row of a method's results (a mode of one run).  A method's row class extends it
    with its own fields and reads its own document (:meth:`rows`, :meth:`run_settings`)."""

    NETWORK: ClassVar[str] = "mininet"  # what the method's runs always run on

    @classmethod
    def rows(cls, run: str, doc: dict[str, Any]) -> list[MethodRow]:
        """One row per mode of ``doc["modes"]`` (per-round records, the shared keys)."""
        method = str(doc.get("method") or "")
        return [cls.of_mode(run, method, name, mode)
                for name, mode in (doc.get("modes") or {}).items()]

    @classmethod
    def of_mode(cls, run: str, method: str, name: str, mode: dict[str, Any],
                gamma: dict[str, Any] | None = None, **extra: Any) -> MethodRow:
        """A mode record with per-round records as a row of this class (``extra``: its own
        fields)."""
        s = summarize_mode(run, method, name, mode, gamma)
        return cls(**{f.name: getattr(s, f.name) for f in fields(ModeSummary)}, **extra)

    @classmethod
    def run_settings(cls, doc: dict[str, Any]) -> RunSettings:
        """The settings every method records under the same keys (``settings``)."""
        s = doc.get("settings") or {}
        topo = (f"BCube({s['bcube'][0]},{s['bcube'][1]})" if s.get("bcube")
                else None if s.get("topo") is None else str(s["topo"]))
        bw = s.get("bw_mbps", s.get("bw"))
        workers = next((s[k] for k in ("learners", "workers", "servers", "nodes")
                        if s.get(k) is not None), None)
        return RunSettings(
            topo=topo, bw=f"{bw:g} Mbit/s" if bw else "unshaped links",
            workers=workers_text(workers), rounds=_number(s.get("rounds") or None),
            model=None if not s.get("model") else str(s["model"]),
            loss=_number(s.get("loss") or None), network=cls.NETWORK)
