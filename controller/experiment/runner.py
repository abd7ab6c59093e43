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
* provenance (:mod:`controller.experiment.provenance`) in every ``results.json``;
* one page per run, ``report.md`` (:mod:`controller.experiment.run_report`), rewritten with
  ``results.json`` and once more after the plots.

A method is a subclass of :class:`Method` filling a declared skeleton, Mininet-style (a class
per behaviour, a small name -> class table in :mod:`controller.experiment.registry`):

* options: ``add_arguments`` (its own; ``run`` holds only the shared ones,
  :mod:`controller.experiment.run_options`); the shared ones are checked once when the method
  is built;
* before any network (``prepare``): ``validate`` (its options), ``topology`` (the graph, built
  once from ``--topo``/``--bw``; ``check_hosts`` and ``host_links`` refine it), ``target`` (the
  switches the machine must run) and ``settings`` (``results.json``'s ``settings``);
* the trials (:meth:`Method.execute`, the base's alone): ``headline`` (one line printed first),
  ``trials`` (every kind for every seed, each naming the network it runs on), ``network``
  (started once per network, shared by the consecutive trials that name it) and per trial the
  one hook ``run_trial`` -- by default ``job`` (its files), ``nodes`` (its processes, a
  :class:`Launch`, started by :meth:`Run.launch`) and ``record`` (its figures) -- whose record
  is kept with :meth:`Run.record`;
* the end: ``results`` (the document; ``GROUPS``/``SUMMARY_KEYS`` lay it out per kind with
  mean ± std over the seeds) and ``report`` (``plots`` and ``tables``).

A method whose trials are not one launch on one routed network fills ``run_trial`` (and
``network``, ``trials``) instead of ``job``/``nodes``/``record``: BCube (two networks of Linux
bridges), NDN (a network per trial), DDP (several launches per trial).  Only INA still overrides
``execute`` (its engine drives its modes; it moves onto ``run_trial`` next).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from controller.errors import ExperimentError
from controller.experiment import provenance
from controller.experiment.host_processes import HostProcesses
from controller.experiment.network import (
    check_environment,
    interface_counters,
    link_bytes,
    shaped_graph,
    start_routed_network,
)
from controller.experiment.records import (
    format_stats,
    repeat_stats,
    seed_summary,
    summarize_mode,
)
from controller.experiment.report import plot_modes, print_table, print_written
from controller.experiment.run_name import claim_name, released_on_failure
from controller.experiment.run_options import add_topology_options, check_options
from controller.experiment.run_report import write_report
from controller.files import write_json_atomic
from controller.options import read_topology
from controller.plan.document import resolve_workers

__all__ = ["Method", "Run", "Node", "Launch", "Launched", "Trial", "RoutedNetwork", "execute"]


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
    # a node process that serves several hosts (workers.ina.pool_node): its host -> the
    # hosts it serves, for the provenance (its CPU time is counted under its own host)
    serves: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Launched:
    """What :meth:`Run.launch` measured: wall-clock start (``time.time``), seconds from the
    start to the last node's exit, bytes per directed link, the servers' exit codes, and the
    processes (for their logs), and their CPU report (:class:`provenance.CpuClock`: busy
    cores over the launch and over the rounds alone)."""

    t_start: float
    wall_s: float
    moved: dict[tuple[str, str], int]
    server_codes: dict[str, int]
    procs: HostProcesses
    cpu: dict[str, Any] | None = None


# ------------------------------------------------------------------ the run


class Run:
    """One ``run``: console, folder, progress, records, provenance (module docstring)."""

    def __init__(self, method: str, out: str, name: str, seed: int = 0, repeats: int = 1,
                 console: Any = None, argv: Sequence[str] | None = None, *,
                 document: Callable[[Run], dict[str, Any]] | None = None,
                 stats_in: str | None = None) -> None:
        """``document``: the in-progress ``results.json`` of a method that lays it out itself
        (default: run, method, settings and ``modes``); ``stats_in``: the key where such a
        method keeps its own mean ± std over the seeds (async: ``policies``, cluster:
        ``rules``) -- the repeats block then points there instead of repeating them."""
        from rich.console import Console

        if repeats < 1:
            raise ExperimentError(f"--repeats must be >= 1, got {repeats}")
        self.method = method
        self.console = console or Console()
        # a default name (the time to the second) is claimed at once: two runs started in
        # the same second get two folders; a given name is the user's to reuse
        self.claim = None if name else claim_name(Path(out), time.strftime("%Y%m%d-%H%M%S"))
        self.name = self.claim.name if self.claim is not None else name
        self.out_dir = Path(out) / self.name
        self.seeds = [seed + r for r in range(repeats)]
        self.settings: dict[str, Any] = {}
        self.provenance = provenance.collect(None if argv is None else list(argv))
        self.repeats: list[dict[str, Any]] = [{} for _ in self.seeds]  # label -> record
        self.progress: Any = None
        self._networks: list[Any] = []
        self.document = document
        self.stats_in = stats_in

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
        """Switch name -> its process, each process once: one that runs a group of
        switches (``pyswitch run-many``) under the group's first switch."""
        from topo.switch_groups import counted_once

        pids = []
        for sw in getattr(mininet.net, "switches", []):
            proc = getattr(sw, "proc", None)
            if proc is not None and getattr(proc, "pid", None):
                pids.append((sw.name, proc.pid))
        return counted_once(pids)

    def processes(self, mininet: Any, label: str, log_dir: Path,
                  on_line: Callable[[str, str], None] | None = None) -> HostProcesses:
        """Host processes whose CPU time goes into the provenance under ``label``."""
        switch_pids = self._switch_pids(mininet)
        switches = len(getattr(mininet.net, "switches", []))
        if switch_pids and len(switch_pids) < switches:  # grouped (topo.switch_groups)
            self.provenance["switch_processes"] = {"switches": switches,
                                                   "processes": len(switch_pids)}
        clock = provenance.CpuClock(switch_pids)
        run = self
        key, n = label, 1
        while key in self.provenance["cpu"]:  # the same mode again (--repeats)
            n += 1
            key = f"{label} #{n}"
        self.provenance["cpu"][key] = None  # reserved in launch order

        class _Tracked(HostProcesses):
            cpu_report: dict[str, Any] | None = None

            def close(self) -> None:
                super().close()
                self.cpu_report = run.provenance["cpu"][key] = clock.report()
        return _Tracked(mininet.net, label, log_dir, on_line, cpu=clock)

    def launch(self, mininet: Any, spec: Launch) -> Launched:
        """The launch sequence of one mode (module docstring); raises ExperimentError naming
        the process that failed (servers' exit codes are returned for ``"stop"``)."""
        def counters() -> dict[tuple[str, str], int]:
            # a network over several servers reads them there (topo.mininet_cluster)
            return interface_counters(mininet.plan, getattr(mininet, "interface_bytes", None))

        if spec.start_file is not None:
            spec.start_file.unlink(missing_ok=True)
        before = counters() if spec.count_from == "launch" else None
        with self.processes(mininet, spec.label, spec.out_dir, spec.on_line) as procs:
            if procs.cpu is not None:
                procs.cpu.serves = dict(spec.serves)
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
            if procs.cpu is not None:  # busy cores from here on, without the start-up
                procs.cpu.mark_rounds({h: p.pid for h, p in procs.procs.items()})
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
                        procs=procs, cpu=getattr(procs, "cpu_report", None))

    # -- records and results -----------------------------------------------------------

    def record(self, label: str, data: dict[str, Any], repeat: int = 0) -> None:
        """Keep one finished mode and rewrite ``results.json`` with every finished one."""
        self.repeats[repeat][label] = data
        self.write(self._partial())

    def _partial(self) -> dict[str, Any]:
        doc: dict[str, Any]
        if self.document is not None:
            doc = self.document(self)
        else:
            doc = {"run": self.name, "method": self.method, "settings": self.settings,
                   "modes": self.modes}
        return self._with_repeats(doc)

    def write(self, doc: dict[str, Any], complete: bool = False) -> None:
        """Write ``results.json`` atomically, with ``complete`` and the provenance, and the
        run's page ``report.md`` from it (:mod:`controller.experiment.run_report`)."""
        doc = {**doc, "complete": complete, "provenance": self.provenance}
        write_json_atomic(self.out_dir / "results.json", doc)
        write_report(self.out_dir, doc)

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


@dataclass(frozen=True)
class Trial:
    """One run of a method's processes: ``kind`` (a policy, a rule, a mode) with ``seed``, in
    repeat ``repeat``; ``label`` names its record and progress bar, ``folder`` holds its
    files; ``network`` names the network it runs on (consecutive trials naming the same one
    share it, :meth:`Method.execute`) and ``spec`` is whatever else the method's
    ``run_trial`` needs (a worker group, a message size)."""

    label: str
    kind: str
    seed: int
    repeat: int
    folder: Path
    network: str = ""
    spec: Any = None


@dataclass
class RoutedNetwork:
    """A started network whose P4 switches route IPv4 (:meth:`Method.network`): the Mininet
    wrapper and every host's ``(ip, mac)``."""

    mininet: Any
    hosts: dict[str, tuple[str, str]]


class Method:
    """One synchronization method's runner: the skeleton every method fills (module
    docstring).  Each hook has a default that most methods keep."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    # the topology options' defaults (DEFAULT_WORKERS None: the method takes no --workers)
    DEFAULT_TOPO: ClassVar[str] = "fattree:4"
    DEFAULT_PS: ClassVar[str] = "h0"
    DEFAULT_WORKERS: ClassVar[str | None] = "6"
    # A method whose trials are kinds of its own (async: policies, cluster: rules) names them:
    # results.json then holds ``{GROUPS: {kind: {"summary", "runs"}}}`` -- rewritten so after
    # every trial -- with mean ± std over the seeds of SUMMARY_KEYS; None: ``modes``.
    GROUPS: ClassVar[str | None] = None
    SUMMARY_KEYS: ClassVar[tuple[str, ...]] = ()
    TABLE_WIDTH: ClassVar[int] = 120  # columns the report's tables get in a file or pipe

    def __init__(self, args: argparse.Namespace) -> None:
        """Keep the options and check the shared ones (before anything else happens)."""
        check_options(args)
        self.args = args
        self.graph: Any = None
        self.kinds: tuple[str, ...] = ()  # what ``trials`` runs for every seed
        self._kind_of: dict[str, str] = {}  # trial label -> kind, for ``groups``

    # -- options -----------------------------------------------------------------------

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """This method's own options (``run`` holds the shared ones).  The base declares the
        topology (``--topo``, ``--ps``, ``--workers``) with the class's defaults; a method
        without ``--topo`` does not call it."""
        add_topology_options(parser, topo=cls.DEFAULT_TOPO, ps=cls.DEFAULT_PS,
                             workers=cls.DEFAULT_WORKERS)

    def repeats(self) -> int:
        """How many seeds the run takes (``--repeats``; methods with their own option merge
        it here)."""
        return int(getattr(self.args, "repeats", 1) or 1)

    # -- before any network --------------------------------------------------------------

    def prepare(self, run: Run) -> None:
        """Check the options, build the graph once, check the machine, fill ``run.settings``;
        no network yet, nothing written."""
        self.validate()
        self.graph = self.topology()
        check_environment(self.target())
        run.settings = self.settings(run)

    def validate(self) -> None:
        """Check this method's own options (the shared ones were checked when it was built)."""

    def topology(self) -> Any:
        """The frozen graph the method runs on, from ``--topo`` with ``--bw`` on every link
        (``host_links`` on those hosts' access links); None for a method that builds its own
        networks."""
        graph = read_topology(self.args.topo)
        self.check_hosts(graph)
        return shaped_graph(graph, self.args.bw, self.host_links())

    def check_hosts(self, graph: Any) -> None:
        """Check the hosts the options name against the topology: here, ``--ps``."""
        from topo.models import hosts

        if self.args.ps not in hosts(graph):
            raise ExperimentError(f"--ps {self.args.ps}: not a host of {self.args.topo}")

    def worker_hosts(self, graph: Any, spec: str) -> list[str]:
        """``--workers`` (NAMES or a COUNT) on ``graph``: hosts other than the PS."""
        from topo.models import hosts

        workers = resolve_workers(graph, self.args.ps, spec)
        bad = [h for h in workers if h not in hosts(graph) or h == self.args.ps]
        if bad:
            raise ExperimentError(f"--workers: {bad[0]} is not a host of {self.args.topo} "
                                  "other than the PS")
        return workers

    def host_links(self) -> dict[str, float]:
        """Access-link rates (Mbit/s) of hosts that differ from ``--bw`` (none here)."""
        return {}

    def target(self) -> str:
        """The switches this method starts, which the machine must be able to run."""
        return str(self.args.target)

    def settings(self, run: Run) -> dict[str, Any]:
        """``results.json``'s ``settings``."""
        return {}

    # -- the trials ----------------------------------------------------------------------

    def execute(self, run: Run) -> None:
        """Every trial, on its network, through :meth:`run_trial`; each record is kept (and
        ``results.json`` rewritten) as soon as the trial ends.  The skeleton of every method:
        a method fills the hooks, never this."""
        line = self.headline(run)
        if line:
            run.console.print(line)
        for name, trials in itertools.groupby(self.trials(run), key=lambda t: t.network):
            with self.network(run, name) as net:
                for trial in trials:
                    record = self.run_trial(run, trial, net)
                    self._kind_of[trial.label] = trial.kind
                    run.record(trial.label, record, trial.repeat)

    def headline(self, run: Run) -> str:
        """What the run is about to do, printed before the first trial (empty: nothing)."""
        return ""

    def run_trial(self, run: Run, trial: Trial, net: Any) -> dict[str, Any]:
        """One trial on ``net`` (what :meth:`network` yielded for ``trial.network``); returns
        its record.  Here: write its job, launch its processes, read its figures."""
        job = self.job(run, trial, net)
        done = run.launch(net.mininet, self.nodes(run, trial, job, net))
        return self.record(run, trial, job, net, done)

    @contextlib.contextmanager
    def network(self, run: Run, name: str = "") -> Iterator[Any]:
        """The network the trials naming ``name`` use, stopped whatever happens.  Here (one
        network, ``name`` unused): ``self.graph`` with ``--target`` switches running
        ``ina.p4`` as IPv4 routers along the ECMP paths, a :class:`RoutedNetwork`."""
        shaped = bool(self.args.bw or self.host_links())
        mininet, addrs = start_routed_network(self.graph, self.args.target,
                                              run.out_dir / "build", run.console,
                                              1.0 if shaped else None, self.links_text())
        with run.network(mininet):
            yield RoutedNetwork(mininet, addrs)

    def links_text(self) -> str:
        """The link rates, for the line that starts the network."""
        return f"{self.args.bw:g} Mbit/s links" if self.args.bw else "unshaped links"

    def trials(self, run: Run) -> Iterator[Trial]:
        """Every kind for every seed, seed by seed (so that slow drifts of the shared
        machine's load hit every kind alike)."""
        for rep, seed in enumerate(run.seeds):
            for kind in self.kinds:
                yield Trial(f"{kind} seed {seed}", kind, seed, rep,
                            run.out_dir / f"{kind}-seed{seed}")

    def job(self, run: Run, trial: Trial, net: Any) -> Any:
        """Write what the trial's processes read (its job file); returns the job."""
        raise NotImplementedError

    def nodes(self, run: Run, trial: Trial, job: Any, net: Any) -> Launch:
        """The trial's processes and how they start and end."""
        raise NotImplementedError

    def record(self, run: Run, trial: Trial, job: Any, net: Any,
               done: Launched) -> dict[str, Any]:
        """The trial's figures from what its processes wrote and the bytes they moved."""
        raise NotImplementedError

    # -- the end -------------------------------------------------------------------------

    def groups(self, run: Run) -> dict[str, dict[str, Any]]:
        """Per kind that ran: its runs in seed order and their mean ± std (``GROUPS``)."""
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in self.kinds}
        for rep in run.repeats:
            for label, rec in rep.items():
                runs[self._kind_of[label]].append(rec)
        return {k: {"summary": self.aggregate(runs[k]), "runs": runs[k]}
                for k in self.kinds if runs[k]}

    @classmethod
    def aggregate(cls, runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Mean / std over the seeds of every ``SUMMARY_KEYS`` figure."""
        return seed_summary(runs, cls.SUMMARY_KEYS)

    def results(self, run: Run) -> dict[str, Any]:
        """The final ``results.json`` document (provenance and repeats are added)."""
        doc: dict[str, Any] = {"run": run.name, "method": run.method,
                               "settings": run.settings}
        if self.GROUPS is None:
            doc["modes"] = run.modes
        else:
            doc[self.GROUPS] = self.groups(run)
        return doc

    def plots(self, run: Run, results: dict[str, Any]) -> list[Path]:
        """The PNG files of the finished run (here: one per per-round figure and mode)."""
        return plot_modes(run.modes, run.out_dir)

    def tables(self, run: Run, results: dict[str, Any]) -> list[Any]:
        """The tables printed at the end (rich Tables)."""
        return []

    def report(self, run: Run, results: dict[str, Any]) -> None:
        """Plots, tables, and where everything is."""
        plots = self.plots(run, results)
        for table in self.tables(run, results):
            print_table(run.console, table, self.TABLE_WIDTH)
        print_written(run.console, run.out_dir, plots)


def execute(method: Method, argv: Sequence[str] | None = None,
            console: Any = None) -> dict[str, Any]:
    """Run ``method`` start to end; returns the results document (also on disk)."""
    t0 = time.monotonic()
    a = method.args
    # the name run under (``--method ps`` is the BCube runner's, named ps)
    run = Run(getattr(a, "method", None) or method.name, a.out, a.name,
              seed=getattr(a, "seed", 0), repeats=method.repeats(), console=console, argv=argv,
              document=method.results if method.GROUPS else None, stats_in=method.GROUPS)
    with released_on_failure(run.claim):  # a run that failed before writing: no folder
        method.prepare(run)
        with run.progress_bars():
            method.execute(run)
    results = run._with_repeats(method.results(run))
    # seconds from the start of the run (after parsing the command) to its results: what a
    # scale target like "k=8 with 64 workers in 10 minutes" is measured by
    run.provenance["wall_s"] = round(time.monotonic() - t0, 1)
    run.provenance["load_avg_end"] = provenance.load_avg()
    results["provenance"] = run.provenance
    results["complete"] = True
    run.write(results, complete=True)
    method.report(run, results)
    write_report(run.out_dir, results)  # again: it now names the plots report() drew
    run.print_repeats()
    return results
