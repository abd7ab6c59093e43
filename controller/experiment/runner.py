"""The runner every method shares: one :class:`Run` per ``python -m controller run``.

The methods (``controller/experiment/methods/``) differ in what they start and what they report; around
that, every run does the same things (docs/design.md §8), and they live here once:

* console, run folder (``<--out>/<--name or timestamp>``), one progress display;
* the network's lifetime (:meth:`Run.network`: stopped whatever happens);
* the launch sequence of one mode (:meth:`Run.launch`): start the server processes and wait
  until they are ready, start the node processes and wait, touch the start file, wait for
  the nodes (with a deadline and a watch hook), end the servers, and count the bytes every
  link carried meanwhile; CPU time of every process on the way;
* per-mode records (:meth:`Run.record`), with ``results.json`` rewritten atomically after
  every mode, so a failure or Ctrl-C keeps every mode that finished (``"complete": false``);
* ``--repeats N``: seeds ``--seed`` … ``--seed + N - 1`` (:attr:`Run.seeds`), and mean ± std
  over them of every mode's figures (:mod:`controller.experiment.records`), in the table and in
  ``results.json`` under ``repeats``;
* provenance (:mod:`controller.experiment.provenance`) in every ``results.json``.

A method is a subclass of :class:`Method` overriding a few hooks, Mininet-style (a class per
behaviour, a small name -> class table in :mod:`controller.experiment.registry`):
``add_arguments`` (its options), ``prepare`` (check options, settings; before any network),
``execute`` (its trials, calling :meth:`Run.record` after each), ``results`` (the final
document) and ``report`` (plots and tables).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from controller.errors import ExperimentError
from controller.experiment import provenance
from controller.experiment.host_processes import HostProcesses
from controller.experiment.network import interface_counters, link_bytes
from controller.experiment.records import format_stats, repeat_stats, summarize_mode
from controller.experiment.report import print_table
from controller.files import write_json_atomic

__all__ = ["Method", "Run", "Node", "Launch", "Launched", "execute"]


# ------------------------------------------------------------------ the launch sequence


@dataclass(frozen=True)
class Node:
    """One process to start: ``python -m module *args`` on ``host``."""

    host: str
    module: str
    args: tuple[str, ...] = ()


@dataclass
class Launch:
    """One mode's processes and how they start and end (see :meth:`Run.launch`).

    ``servers`` start first and must say ready before ``nodes`` start (empty: all start
    together).  The run lasts until every node exits (``timeout_s`` after the start, plus 30
    s of grace); then the servers end by ``server_exit``: ``"stop"`` (SIGTERM: they serve late
    requests until every node is done), ``"wait"`` (they stop by themselves) or ``"nodes"``
    (they are waited for together with the nodes).  ``count_from`` is when the link counters
    are read first: at ``"launch"`` or once every process is ready (``"start"``)."""

    label: str
    out_dir: Path
    nodes: list[Node]
    servers: list[Node] = field(default_factory=list)
    servers_what: str = "the PS"
    nodes_what: str = "the workers"
    failed_what: str = "worker"
    start_file: Path | None = None
    timeout_s: float = 120.0
    server_exit: str = "stop"
    stop_timeout_s: float = 30.0
    count_from: str = "launch"
    watch: Callable[[], None] | None = None
    on_line: Callable[[str, str], None] | None = None
    on_ready: Callable[[], None] | None = None  # after the barrier, before the start file
    # a node failed: True = handled (the host left the job), False = the run ends as always
    # (HostProcesses.wait); on_procs sees the processes once every one is launched
    on_failure: Callable[[str, int], bool] | None = None
    on_procs: Callable[[HostProcesses], None] | None = None


@dataclass
class Launched:
    """What :meth:`Run.launch` measured: wall-clock start (``time.time``), seconds from the
    start to the last node's exit, bytes per directed link, the servers' exit codes, and the
    processes (for their logs)."""

    t_start: float
    wall_s: float
    moved: dict[tuple[str, str], int]
    server_codes: dict[str, int]
    procs: HostProcesses


# ------------------------------------------------------------------ the run


class Run:
    """One ``run``: console, folder, progress, records, provenance (module docstring)."""

    def __init__(self, method: str, out: str, name: str, seed: int = 0, repeats: int = 1,
                 console: Any = None, argv: Sequence[str] | None = None) -> None:
        from rich.console import Console

        if repeats < 1:
            raise ExperimentError(f"--repeats must be >= 1, got {repeats}")
        self.method = method
        self.console = console or Console()
        self.name = name or time.strftime("%Y%m%d-%H%M%S")
        self.out_dir = Path(out) / self.name  # created by the first file written
        self.seeds = [seed + r for r in range(repeats)]
        self.settings: dict[str, Any] = {}
        self.provenance = provenance.collect(None if argv is None else list(argv))
        self.repeats: list[dict[str, Any]] = [{} for _ in self.seeds]  # label -> record
        self.progress: Any = None
        self._networks: list[Any] = []
        # a method that keeps its own per-seed statistics (async: ``policies``, cluster:
        # ``rules``) names that key; the repeats block then points there instead of copying
        self.stats_in: str | None = None

    @property
    def modes(self) -> dict[str, Any]:
        """The first repeat's records (``results.json``'s ``modes``, as without --repeats)."""
        return self.repeats[0]

    # -- the display -------------------------------------------------------------------

    @contextlib.contextmanager
    def progress_bars(self) -> Iterator[Any]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=self.console) as progress:
            self.progress = progress
            try:
                yield progress
            finally:
                self.progress = None

    # -- the network -------------------------------------------------------------------

    @contextlib.contextmanager
    def network(self, mininet: Any) -> Iterator[Any]:
        """``with run.network(build_net(...)) as net:``: stopped whatever happens inside."""
        self._networks.append(mininet)
        try:
            yield mininet
        finally:
            self._networks.remove(mininet)
            mininet.stop()

    def _switch_pids(self, mininet: Any) -> dict[str, int]:
        out = {}
        for sw in getattr(mininet.net, "switches", []):
            proc = getattr(sw, "proc", None)
            if proc is not None and getattr(proc, "pid", None):
                out[sw.name] = proc.pid
        return out

    def processes(self, mininet: Any, label: str, log_dir: Path,
                  on_line: Callable[[str, str], None] | None = None) -> HostProcesses:
        """Host processes whose CPU time goes into the provenance under ``label``."""
        clock = provenance.CpuClock(self._switch_pids(mininet))
        run = self
        key, n = label, 1
        while key in self.provenance["cpu"]:  # the same mode again (--repeats)
            n += 1
            key = f"{label} #{n}"
        self.provenance["cpu"][key] = None  # reserved in launch order

        class _Tracked(HostProcesses):
            def close(self) -> None:
                super().close()
                run.provenance["cpu"][key] = clock.report()
        return _Tracked(mininet.net, label, log_dir, on_line, cpu=clock)

    def launch(self, mininet: Any, spec: Launch) -> Launched:
        """The launch sequence of one mode (module docstring); raises ExperimentError naming
        the process that failed (servers' exit codes are returned for ``"stop"``)."""
        def counters() -> dict[tuple[str, str], int]:
            return interface_counters(mininet.plan)

        if spec.start_file is not None:
            spec.start_file.unlink(missing_ok=True)
        before = counters() if spec.count_from == "launch" else None
        with self.processes(mininet, spec.label, spec.out_dir, spec.on_line) as procs:
            for n in spec.servers:
                procs.launch(n.host, n.module, *n.args)
            if spec.servers and spec.nodes:
                procs.wait_ready(len(spec.servers), f"{spec.servers_what} on "
                                 f"{', '.join(n.host for n in spec.servers)}")
            for n in spec.nodes:
                procs.launch(n.host, n.module, *n.args)
            if spec.servers and spec.nodes:
                procs.wait_ready(len(spec.nodes), spec.nodes_what)
            else:
                procs.wait_ready(len(spec.servers) + len(spec.nodes), spec.nodes_what)
            if before is None:
                before = counters()
            if spec.on_procs is not None:
                spec.on_procs(procs)
            if spec.on_ready is not None:
                spec.on_ready()
            t_start, t0 = time.time(), time.perf_counter()
            if spec.start_file is not None:
                spec.start_file.touch()  # every process is up: start together
            deadline = time.monotonic() + spec.timeout_s + 30
            waited = [n.host for n in spec.nodes]
            if spec.server_exit == "nodes":
                waited = [n.host for n in spec.servers] + waited
            procs.check(procs.wait(waited, deadline, watch=spec.watch,
                                   on_failure=spec.on_failure), spec.failed_what)
            wall = time.perf_counter() - t0
            codes: dict[str, int] = {}
            if spec.server_exit == "stop":
                codes = {n.host: procs.stop(n.host, spec.stop_timeout_s) for n in spec.servers}
            elif spec.server_exit == "wait" and spec.servers:
                hosts = [n.host for n in spec.servers]
                procs.check(procs.wait(hosts, max(deadline, time.monotonic() + 5.0)),
                            spec.servers_what)
            moved = link_bytes(before, counters())
        return Launched(t_start=t_start, wall_s=wall, moved=moved, server_codes=codes,
                        procs=procs)

    # -- records and results -----------------------------------------------------------

    def record(self, label: str, data: dict[str, Any], repeat: int = 0) -> None:
        """Keep one finished mode and rewrite ``results.json`` with every finished one."""
        self.repeats[repeat][label] = data
        self.write(self._partial())

    def _partial(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"run": self.name, "method": self.method,
                               "settings": self.settings, "modes": self.modes}
        return self._with_repeats(doc)

    partial_document: Callable[[], dict[str, Any]] | None = None  # a method's own layout

    def write(self, doc: dict[str, Any], complete: bool = False) -> None:
        if not complete and self.partial_document is not None:
            doc = self.partial_document()
        doc = {**doc, "complete": complete, "provenance": self.provenance}
        write_json_atomic(self.out_dir / "results.json", doc)

    def _with_repeats(self, doc: dict[str, Any]) -> dict[str, Any]:
        if len(self.seeds) > 1:
            doc = {**doc, "repeats": self.repeat_summary()}
        return doc

    def repeat_summary(self) -> dict[str, Any]:
        """Seeds, the later repeats' mode records and mean ± std per mode over all of them."""
        if self.stats_in is not None:
            return {"n": len(self.seeds), "seeds": self.seeds, "stats_in": self.stats_in}
        labels = list(dict.fromkeys(k for rep in self.repeats for k in rep))
        stats = {}
        for label in labels:
            found = [rep[label] for rep in self.repeats if label in rep]
            if any("rounds" in m and m["rounds"] for m in found):
                stats[label] = repeat_stats([summarize_mode(self.name, self.method, label, m)
                                             for m in found])
        return {"n": len(self.seeds), "seeds": self.seeds,
                "runs": [{"seed": s, "modes": rep} for s, rep in
                         zip(self.seeds[1:], self.repeats[1:], strict=True)],
                "stats": stats}

    def print_repeats(self) -> None:
        """The mean ± std table of ``--repeats`` (nothing with one repeat)."""
        if len(self.seeds) < 2 or self.stats_in is not None:
            return  # one run, or the method's own table already shows mean±std
        from rich.table import Table

        stats = self.repeat_summary()["stats"]
        if not stats:
            return
        table = Table(title=f"{self.method} over {len(self.seeds)} repeats, seeds "
                            f"{self.seeds} (mean±std)")
        for col in ("mode", "s/round", "PS B/round", "max link B/round", "retx", "accuracy",
                    "exact"):
            table.add_column(col, justify="left" if col == "mode" else "right")
        for label, st in stats.items():
            table.add_row(label, format_stats(st["s_per_round"]),
                          format_stats(st["ps_bytes_per_round"], 0),
                          format_stats(st["busiest_bytes_per_round"], 0),
                          format_stats(st["retransmissions"], 1),
                          format_stats(st["accuracy"], 4),
                          f"{st['exact']['n']}/{st['exact']['of']}")
        print_table(self.console, table, 120)


# ------------------------------------------------------------------ the method base


class Method:
    """One synchronization method's runner: override the hooks (module docstring)."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """This method's own options (the shared ones belong to ``run``)."""

    def repeats(self) -> int:
        """How many seeds the run takes (``--repeats``; methods with their own option merge
        it here)."""
        return int(getattr(self.args, "repeats", 1) or 1)

    def prepare(self, run: Run) -> None:
        """Check the options and fill ``run.settings``; no network yet, nothing written."""

    def execute(self, run: Run) -> None:
        """Run every trial of every seed in ``run.seeds``, :meth:`Run.record` after each."""
        raise NotImplementedError

    def results(self, run: Run) -> dict[str, Any]:
        """The final ``results.json`` document (provenance and repeats are added)."""
        return {"run": run.name, "method": run.method, "settings": run.settings,
                "modes": run.modes}

    def report(self, run: Run, results: dict[str, Any]) -> None:
        """Plots and tables of the finished run."""


def execute(method: Method, argv: Sequence[str] | None = None,
            console: Any = None) -> dict[str, Any]:
    """Run ``method`` start to end; returns the results document (also on disk)."""
    a = method.args
    run = Run(method.name, a.out, a.name, seed=getattr(a, "seed", 0), repeats=method.repeats(),
              console=console, argv=argv)
    method.prepare(run)
    with run.progress_bars():
        method.execute(run)
    results = run._with_repeats(method.results(run))
    results["provenance"] = run.provenance
    results["complete"] = True
    run.write(results, complete=True)
    method.report(run, results)
    run.print_repeats()
    return results
