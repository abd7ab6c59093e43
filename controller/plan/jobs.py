"""Several training jobs: the jobs file and the short form ``--jobs N`` (docs/design.md §3.10).

Jobs file: a JSON list, one object per job::

    [{"name": "a", "ps": "h0", "workers": ["h1", "h2"], "weight": 2},
     {"name": "b", "ps": "h3", "workers": 2, "rounds": 20, "model_size": 4096}]

Keys: ``name`` (non-empty string, unique), ``ps`` (a host), ``workers`` (a list of hosts, or
a COUNT ≥ 1), and optionally ``weight`` (a number from 0.001 to 1000, default 1: the w_j of
max-min fairness),
``model`` (string), ``model_size`` (integer ≥ 1), ``rounds`` (integer ≥ 1) and ``mode`` (a sync
mode the job keeps in every launch, e.g. ``"ps_only"`` beside an INA job: issue 39's fairness
with other traffic), which the planner ignores and passes on to the runner.  Unknown keys are errors: a typo such as
``"wieght"`` would otherwise silently plan with weight 1.

A COUNT takes the first COUNT hosts in name order that are not named by any job (as PS or
worker) and not taken by an earlier COUNT job in file order, so explicit lists always win and
the result does not depend on where a COUNT job sits relative to explicit ones.

Short form ``N``: the hosts of the topology in name order are dealt out in turn (host i goes
to job i mod N) and each job's first host is its PS; jobs are named ``job1`` … ``jobN``.

Every problem is a :class:`controller.plan.lp.PlanError` with one line saying what and where
(``FILE: job 2 ('b'): ...``).  :func:`parse_jobs` checks structure only (pure, no graph);
:func:`resolve_jobs` checks the hosts against a topology and resolves COUNTs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import networkx as nx

from controller.files import InputFileError, read_input_text
from controller.plan.lp import PlanError
from topo.models import hosts

__all__ = ["JobEntry", "parse_jobs", "load_jobs", "jobs_from_count", "resolve_jobs",
           "jobs_argument"]

_KEYS = ("name", "ps", "workers", "weight", "model", "model_size", "rounds", "mode")
MAX_JOBS_FILE_BYTES = 16 * 2**20
MIN_WEIGHT, MAX_WEIGHT = 1e-3, 1e3
"""Bounds of a job's weight: weights are relative (max-min fairness divides by them), and a
ratio beyond 10^6 only makes the LP numerically unsound (1e300 or 1e-300 broke its solve)."""


@dataclass(frozen=True)
class JobEntry:
    """One job as the user gave it; ``workers`` is a tuple of hosts, or a COUNT before
    :func:`resolve_jobs`."""

    name: str
    ps: str
    workers: tuple[str, ...] | int
    weight: float = 1.0
    model: str | None = None
    model_size: int | None = None
    rounds: int | None = None
    mode: str | None = None  # the sync mode this job keeps in every launch (None: the run's)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _finite(v: int | float) -> bool:
    try:  # an int of 400 digits does not convert to float
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_jobs(data: Any, where: str = "<jobs>") -> list[JobEntry]:
    """Check the structure of a decoded jobs file (module doc) and return its jobs in order.

    Parameters
    ----------
    data : the decoded JSON value.
    where : the file name, used in every error message.

    Returns
    -------
    list of :class:`JobEntry`; ``workers`` is a tuple of names or an int COUNT.
    """
    if not isinstance(data, list):
        raise PlanError(f"{where}: a jobs file must be a JSON list of jobs, got "
                        f"{type(data).__name__}")
    if not data:
        raise PlanError(f"{where}: the jobs list is empty")
    out: list[JobEntry] = []
    names: set[str] = set()
    for i, item in enumerate(data, 1):
        at = f"{where}: job {i}"
        if not isinstance(item, dict):
            raise PlanError(f"{at}: must be an object, got {_short(item)}")
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise PlanError(f"{at}: 'name' must be a non-empty string, got {_short(name)}")
        at = f"{at} ({name!r})"
        if name in names:
            raise PlanError(f"{at}: duplicate job name {name!r}")
        names.add(name)
        unknown = sorted(set(item) - set(_KEYS))
        if unknown:
            raise PlanError(f"{at}: unknown key {unknown[0]!r} (allowed: {', '.join(_KEYS)})")
        ps = item.get("ps")
        if not isinstance(ps, str) or not ps:
            raise PlanError(f"{at}: 'ps' must be a host name, got {_short(ps)}")
        if "workers" not in item:
            raise PlanError(f"{at}: missing 'workers' (a list of hosts or a count)")
        raw = item["workers"]
        workers: tuple[str, ...] | int
        if _is_int(raw):
            if raw < 1:
                raise PlanError(f"{at}: 'workers' count must be >= 1, got {raw}")
            workers = raw
        elif isinstance(raw, list):
            if not raw:
                raise PlanError(f"{at}: 'workers' is empty")
            for w in raw:
                if not isinstance(w, str) or not w:
                    raise PlanError(f"{at}: 'workers' must hold host names, got {_short(w)}")
            dup = next((w for k, w in enumerate(raw) if w in raw[:k]), None)
            if dup is not None:
                raise PlanError(f"{at}: worker {dup!r} listed twice")
            if ps in raw:
                raise PlanError(f"{at}: PS {ps!r} is also listed as a worker")
            workers = tuple(raw)
        else:
            raise PlanError(f"{at}: 'workers' must be a list of hosts or a count, got "
                            f"{_short(raw)}")
        weight = item.get("weight", 1.0)
        if (isinstance(weight, bool) or not isinstance(weight, int | float)
                or not _finite(weight) or not MIN_WEIGHT <= weight <= MAX_WEIGHT):
            raise PlanError(f"{at}: 'weight' must be a number from {MIN_WEIGHT:g} to "
                            f"{MAX_WEIGHT:g}, got {_short(weight)}")
        model = item.get("model")
        if model is not None and (not isinstance(model, str) or not model):
            raise PlanError(f"{at}: 'model' must be a non-empty string, got {_short(model)}")
        mode = item.get("mode")
        if mode is not None and (not isinstance(mode, str) or not mode):
            raise PlanError(f"{at}: 'mode' must be a non-empty string, got {_short(mode)}")
        ints: dict[str, int | None] = {}
        for key in ("model_size", "rounds"):
            v = item.get(key)
            if v is not None and (not _is_int(v) or v < 1):
                raise PlanError(f"{at}: {key!r} must be an integer >= 1, got {_short(v)}")
            ints[key] = v
        out.append(JobEntry(name, ps, workers, float(weight), model, ints["model_size"],
                           ints["rounds"], mode))
    return out


def load_jobs(path: str | Path) -> list[JobEntry]:
    """Read and parse a jobs file; unreadable files and bad JSON name the file (and the line
    and column)."""
    path = Path(path)
    try:  # a regular file of bounded size: a FIFO or /dev/zero gives one line, not a hang
        text = read_input_text(path, MAX_JOBS_FILE_BYTES, "jobs file")
    except InputFileError as exc:
        raise PlanError(str(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path}:{exc.lineno}:{exc.colno}: bad JSON ({exc.msg})") from None
    except RecursionError:
        raise PlanError(f"{path}: JSON nested too deeply to be a jobs file") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise PlanError(f"{path}: bad JSON ({str(exc).split('; use')[0]})") from None
    return parse_jobs(data, str(path))


def jobs_from_count(graph: nx.Graph, n: int) -> list[JobEntry]:
    """The short form: deal the topology's hosts (name order) out to ``n`` jobs in turn;
    each job's first host is its PS (module doc)."""
    if not _is_int(n) or n < 1:
        raise PlanError(f"--jobs: the number of jobs must be >= 1, got {n!r}")
    pool = hosts(graph)
    if 2 * n > len(pool):
        raise PlanError(f"--jobs {n}: each job needs a PS and a worker, but the topology has "
                        f"only {len(pool)} hosts")
    dealt: list[list[str]] = [[] for _ in range(n)]
    for i, h in enumerate(pool):
        dealt[i % n].append(h)
    return [JobEntry(f"job{k + 1}", hs[0], tuple(hs[1:])) for k, hs in enumerate(dealt)]


def resolve_jobs(specs: Sequence[JobEntry], graph: nx.Graph,
                 where: str = "<jobs>") -> list[JobEntry]:
    """Check every named host against ``graph`` (exists, is a host, in one job only) and turn
    COUNTs into host tuples (module doc)."""

    def at(i: int, spec: JobEntry) -> str:
        return f"{where}: job {i} ({spec.name!r})"

    owner: dict[str, str] = {}
    for i, spec in enumerate(specs, 1):
        named = [spec.ps] + (list(spec.workers) if isinstance(spec.workers, tuple) else [])
        for h in named:
            if h not in graph:
                raise PlanError(f"{at(i, spec)}: unknown host {h!r}")
            if graph.nodes[h].get("kind") != "host":
                raise PlanError(f"{at(i, spec)}: {h!r} is a switch; PS and workers are hosts")
            if h in owner and owner[h] != spec.name:
                raise PlanError(f"{at(i, spec)}: host {h!r} is already in job {owner[h]!r}")
            owner[h] = spec.name
    free = [h for h in hosts(graph) if h not in owner]
    out: list[JobEntry] = []
    for i, spec in enumerate(specs, 1):
        if isinstance(spec.workers, int):
            k = spec.workers
            if k > len(free):
                raise PlanError(f"{at(i, spec)}: 'workers': {k} hosts wanted, only "
                                f"{len(free)} not in another job")
            spec = replace(spec, workers=tuple(free[:k]))
            free = free[k:]
        out.append(spec)
    return out


def jobs_argument(value: str, graph: nx.Graph) -> list[JobEntry]:
    """``--jobs N`` (digits: the short form) or ``--jobs FILE``, resolved on ``graph``."""
    text = value.strip()
    if text.isdigit():
        if not text.isascii() or len(text) > 9:  # "²" is a digit int() refuses
            raise PlanError(f"--jobs {text[:20]!r}: a count is a whole number of at most 9 digits")
        return jobs_from_count(graph, int(text))
    return resolve_jobs(load_jobs(text), graph, text)
