"""``python -m controller run --method ndn``: the NDN transport with persistent-PIT routers
(docs/design.md §6) end to end over Mininet, against a TCP PS that sends N unicast copies.

What runs, for each worker count N (``--workers``, or every count of ``--ndn-sweep``)
    * ``ndn``: every switch of ``--topo`` is an NDN router (:class:`workers.ndn.switch.NdnRouterSwitch`
      running :mod:`workers.ndn.router_node`: FIB, PIT, persistent PIT, optional CS), with the
      FIB the controller computes from shortest paths (:func:`workers.ndn.link.fib_routes`,
      prefix ``/<host>`` per PS and GPU) and ``--loss/--dup/--reorder`` injected on every router
      port by :mod:`pyswitch.impairment` (both directions, as the INA experiment's ``--loss``
      on pyswitch ports: a frame crossing a router-router link meets the probability twice,
      a host link once; on a fat-tree the PS-to-GPU path has 10 such draws).  The PS (``--ps``) and one GPU per worker host run
      :mod:`workers.ndn.node` (docs/design.md §6 steps 1-9 from :mod:`workers.ndn.protocol`), training the
      real model for ``--rounds`` synchronous rounds.
    * ``tcp-ps`` (``--ndn-baseline tcp``): the same hosts on the same graph and link speeds,
      switches as Linux bridges with static forwarding (:func:`controller.experiment.methods.bridged.
      start_bridges`), running the BCube experiment's single-PS schedule
      (:func:`workers.collective.baselines.ps_schedule` in
      :mod:`workers.collective.worker_node`): every worker pushes its gradient to the PS over TCP, the PS sends the sum back to each of the N
      workers -- N unicast copies per round.  In that schedule the PS host also computes a
      gradient (it is server 0 of N+1); that changes nothing on its downlink, which carries
      exactly the N copies.

Async mode (``--ndn-mode async``; :mod:`workers.ndn.protocol`'s module docstring has the design)
    The PS applies every gradient on arrival with ``--ndn-policy`` (async: eta, sigma:
    eta/sigma, kappa: eta/kappa; eta ``--async-lr``, window ``--staleness-window``; the docs/design.md §5
    PS of :mod:`workers.async_ps.core`, plain SGD; soft-sync size ``--soft-sync C``) and publishes
    one version per C pushes on ``/distribute/<ps>/<train>/v=<version>`` until ``--rounds`` x
    GPUs pushes (a multiple of C; C <= GPUs); collection
    Interests name each GPU's push sequence number.  ``--ndn-slow``/``--ndn-step-ms`` make
    GPUs heterogeneous (both modes).  Reported: every push (GPU, version trained from, version
    made, sigma, staleness = versions missed, kappa, scale), per-GPU staleness histograms, test
    accuracy after every update vs updates and time, GPUs' parameters checked against the
    PS's (sha256); no TCP baseline (it is synchronous) and no bit-exact reference (the
    interleaving depends on timing).

Measured on the PS's link (the switch-side end, root namespace)
    A tap (:class:`workers.ndn.link.LinkTap`) classifies every frame the PS host sends:
    distribution Data per version, fetch Data (active-fetch answers), Interests, other Data;
    TCP segments with payload and pure ACKs.  ``dist_bytes`` per round is the distribution
    (NDN: the ``/distribute/.../v=r+1`` frames; TCP: the PS's payload-carrying segments, which in
    the PS schedule are only the N copies of the sum); the bytes ratio TCP/NDN is the must-show
    (≈ N).  The kernel's counters of every link (:func:`controller.experiment.network.
    interface_counters`) give ``ps_rx_bytes``, ``ps_tx_bytes`` and the busiest link, and check
    the tap (its total must equal the kernel's count of the same interface).

Checked
    Every GPU's parameters of every version equal the PS's (sha256), and the PS's parameters
    equal those of the one-process reference with the same quantized sync, bit for bit
    (``exact``); under loss, every round completes and ``recoveries`` counts the distributions a
    GPU completed by active fetch after its probe timer fired.  Router counters of every table
    (and the persistent PIT at exit: empty once every GPU unsubscribed) come from the routers'
    exit reports.

Outputs: ``results/<run>/results.json`` (``method: "ndn"``; ``modes`` ``ndn@N`` and
``tcp-ps@N`` with per-round records in the INA experiment's keys plus ``dist_bytes``,
``fetch_bytes``, ``recovered``; ``comparison`` per N; ``routers``), PNG plots
(:func:`controller.experiment.report.plot_modes` plus distribution bytes per round and the ratio vs N).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from controller.errors import ExperimentError
from controller.experiment.methods.common import add_async_sgd_options, check_async_sgd
from controller.experiment.methods.ndn.plots import (
    plot_distribution,
    report_async,
    sync_table,
)
from controller.experiment.methods.ndn.records import (
    async_summary,
    comparison,
    gpu_slowdowns,
    impair_text,
    ndn_rounds,
    parse_sweep,
    router_configs,
    router_fields,
    sum_counters,
)
from controller.experiment.methods.ndn.runs import TRAIN_NAME, run_ndn, run_tcp
from controller.experiment.report import plot_modes, summary_table
from controller.experiment.run_options import add_impairment_options, add_round_timeout
from controller.experiment.runner import Method, Run, Trial
from workers.async_ps.core import POLICIES
from workers.ndn.packets import DEFAULT_SEG_SIZE
from workers.ndn.protocol import MODES

__all__ = ["NdnMethod", "parse_sweep", "router_configs", "ndn_rounds", "comparison",
           "sum_counters", "router_fields", "async_summary", "gpu_slowdowns", "impair_text"]

BASELINES = ("tcp", "none")
DEFAULTS = {"rto": 0.2, "lifetime": 2.0, "probe_initial": 1.0}


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """This method's own options besides the topology, the impairments and the timeout."""
    d = DEFAULTS
    g.add_argument("--ndn-baseline", choices=BASELINES, default=None,
                   help="tcp: also run a TCP PS sending N unicast copies on the same network "
                        "(default in sync mode); none: NDN only (default in async mode)")
    g.add_argument("--ndn-mode", choices=MODES, default="sync",
                   help="sync: the PS waits for every GPU each round (default); async: every "
                        "gradient is applied on arrival with --ndn-policy and makes a version "
                        "(docs/design.md §5 PS; --rounds x GPUs pushes in all)")
    g.add_argument("--ndn-policy", choices=POLICIES, default="kappa",
                   help="async: eta for every gradient (async), eta/sigma or eta/kappa "
                        "(default kappa); eta is --async-lr, the window --staleness-window")
    add_async_sgd_options(g, where="async mode: ")
    g.add_argument("--ndn-slow", default="", metavar="SPEC",
                   help="GPU slow-downs, both modes: HOST:FACTOR,... or KxFACTOR = the last K "
                        "GPUs FACTOR times slower (default none)")
    g.add_argument("--ndn-step-ms", type=float, default=0.0, metavar="MS",
                   help="nominal compute time of one gradient, before the slow-down (default 0 "
                        "= the real compute time)")
    g.add_argument("--ndn-sweep", default="", metavar="N,N,...",
                   help="worker counts to run one after the other (e.g. 4,8,12: the first N "
                        "hosts besides the PS); default: --workers")
    g.add_argument("--ndn-seg-size", type=int, default=DEFAULT_SEG_SIZE, metavar="BYTES",
                   help=f"content bytes per NDN segment (default {DEFAULT_SEG_SIZE})")
    g.add_argument("--ndn-cs", type=int, default=0, metavar="N",
                   help="content store entries per router (default 0 = no CS)")
    g.add_argument("--ndn-rto", type=float, default=d["rto"], metavar="S",
                   help=f"re-expression timeout of missing segments (default {d['rto']:g} s)")
    g.add_argument("--ndn-lifetime", type=float, default=d["lifetime"], metavar="S",
                   help=f"Interest lifetime of collection Interests (default {d['lifetime']:g} s)")
    g.add_argument("--ndn-probe-initial", type=float, default=d["probe_initial"], metavar="S",
                   help="probe timeout before the GPU has 2 samples of its history "
                        f"(default {d['probe_initial']:g} s)")


class NdnMethod(Method):
    """NDN with persistent-PIT routers vs a TCP PS (module docstring): a network per trial,
    NDN routers or Linux bridges, for every worker count."""

    name = "ndn"
    help = "ndn: NDN with a persistent PIT"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        super().add_arguments(parser)
        g = parser.add_argument_group("--method ndn (NDN transport with persistent-PIT "
                                      "routers, docs/design.md §6)")
        add_impairment_options(g)
        add_round_timeout(g)  # the TCP baseline's per round; NDN's run: --rounds x this
        add_arguments(g)

    def validate(self) -> None:
        args = self.args
        if not 64 <= args.ndn_seg_size <= 1300:
            raise ExperimentError(f"--ndn-seg-size must be in [64, 1300] bytes (a segment and "
                                  f"its name must fit a 1500-byte frame), got "
                                  f"{args.ndn_seg_size}")
        if args.ndn_cs < 0:
            raise ExperimentError(f"--ndn-cs must be >= 0, got {args.ndn_cs}")
        for what, v in (("--ndn-rto", args.ndn_rto), ("--ndn-lifetime", args.ndn_lifetime),
                        ("--ndn-probe-initial", args.ndn_probe_initial)):
            if not (np.isfinite(v) and v > 0):
                raise ExperimentError(f"{what} must be > 0 s, got {v}")
        if not (np.isfinite(args.ndn_step_ms) and args.ndn_step_ms >= 0):
            raise ExperimentError(f"--ndn-step-ms must be >= 0, got {args.ndn_step_ms}")
        if args.ndn_baseline is None:
            args.ndn_baseline = "tcp" if args.ndn_mode == "sync" else "none"
        if args.ndn_mode == "sync" and args.soft_sync != 1:
            raise ExperimentError("--soft-sync applies to --ndn-mode async (sync mode waits for "
                                  "every GPU)")
        if args.ndn_mode == "async":
            if args.ndn_baseline == "tcp":
                raise ExperimentError("--ndn-baseline tcp is a synchronous PS; with --ndn-mode "
                                      "async use --ndn-baseline none (run --ndn-mode sync to "
                                      "compare)")
            check_async_sgd(args)
        self.sweep = parse_sweep(args.ndn_sweep)

    def check_hosts(self, graph: Any) -> None:
        """The PS, every worker count's GPUs, and hosts that NDN can name and reach."""
        from topo.models import hosts
        from workers.ndn import names as nn

        args = self.args
        super().check_hosts(graph)
        self.groups = ([self.worker_hosts(graph, str(n)) for n in self.sweep] if self.sweep
                       else [self.worker_hosts(graph, args.workers)])
        for ws in self.groups:
            gpu_slowdowns(args.ndn_slow, ws)  # a bad spec fails before any network is built
            if args.ndn_mode == "async" and args.soft_sync > len(ws):
                raise ExperimentError(f"--soft-sync {args.soft_sync}: a soft-sync batch needs "
                                      f"at least C GPUs, the run has {len(ws)}")
            if args.ndn_mode == "async" and (args.rounds * len(ws)) % args.soft_sync:
                raise ExperimentError(f"--soft-sync {args.soft_sync} must divide the push "
                                      f"budget --rounds x GPUs = {args.rounds * len(ws)}")
        for h in hosts(graph):
            try:
                nn.check_id(h, "host")
            except nn.NdnNameError as exc:
                raise ExperimentError(f"--topo {args.topo}: {exc}") from None
        multi = [h for h in hosts(graph) if graph.degree(h) != 1]
        if multi:
            raise ExperimentError(f"--topo {args.topo}: host {multi[0]} has "
                                  f"{graph.degree(multi[0])} links; the NDN nodes use one "
                                  "face (one link per host)")

    def target(self) -> str:
        return "pyswitch"  # NDN routers (and Linux bridges for the TCP baseline)

    def settings(self, run: Run) -> dict[str, Any]:
        args, sync = self.args, self.args.ndn_mode != "async"
        settings = {
            "topo": args.topo, "ps": args.ps, "workers": [len(g) for g in self.groups],
            "rounds": args.rounds, "model": args.model, "hidden": args.hidden,
            "bw_mbps": args.bw or None, "loss": args.loss, "dup": args.dup,
            "reorder": args.reorder, "seed": args.seed, "baseline": args.ndn_baseline,
            "seg_size": args.ndn_seg_size, "cs_capacity": args.ndn_cs,
            "rto_s": args.ndn_rto, "lifetime_s": args.ndn_lifetime,
            "probe_initial_s": args.ndn_probe_initial, "train_name": TRAIN_NAME,
            "ndn_mode": args.ndn_mode, "slow": args.ndn_slow or None,
            "step_ms": args.ndn_step_ms, "policy": None if sync else args.ndn_policy,
            "async_lr": None if sync else args.async_lr,
            "staleness_window": None if sync else args.staleness_window,
            "soft_sync": None if sync else args.soft_sync,
            "routers": "workers.ndn.router_node on every switch (NdnRouterSwitch)",
            "impairment": impair_text(args) or None}
        if len(run.seeds) > 1:
            settings["seeds"] = run.seeds
        return settings

    def headline(self, run: Run) -> str:
        args = self.args
        note = ("note: --method ndn runs NDN routers (and Linux bridges for the TCP baseline); "
                "--target ignored\n" if args.target != "pyswitch" else "")
        return (note + f"[bold]NDN PS transport[/] ({args.ndn_mode}) on {args.topo}: PS "
                f"{args.ps}, worker counts {run.settings['workers']}, {args.rounds} rounds"
                + (" x GPUs pushes" if args.ndn_mode == "async" else "")
                + f", baseline {args.ndn_baseline}"
                + (f", {args.bw:g} Mbit/s links" if args.bw else ", unshaped links"))

    def trials(self, run: Run) -> Iterator[Trial]:
        """NDN with every worker count (and the TCP baseline after each), seed by seed; the
        first repeat keeps the folders it always had, later ones add the seed."""
        kinds = ("ndn", "tcp-ps") if self.args.ndn_baseline == "tcp" else ("ndn",)
        for rep, seed in enumerate(run.seeds):
            for ws in self.groups:
                for kind in kinds:
                    label = f"{kind}@{len(ws)}"
                    folder = label if rep == 0 else f"{label}-seed{seed}"
                    yield Trial(label, kind, seed, rep, run.out_dir / folder, spec=ws)

    @contextlib.contextmanager
    def network(self, run: Run, name: str = "") -> Iterator[None]:
        yield None  # every trial starts its own (routers for NDN, bridges for TCP)

    def run_trial(self, run: Run, trial: Trial, net: Any) -> dict[str, Any]:
        one = run_ndn if trial.kind == "ndn" else run_tcp
        return one(run, self.args, self.graph, trial.spec, trial.seed, trial.folder.name)

    def results(self, run: Run) -> dict[str, Any]:
        args, modes, settings = self.args, run.modes, run.settings
        if args.ndn_mode == "async":
            return async_results(run.name, settings, modes)
        ndn_modes = [m for m in modes.values() if m["kind"] == "ndn"]
        return {
            "run": run.name, "method": "ndn", "ndn_mode": "sync", "settings": settings,
            "modes": modes, "comparison": comparison(modes),
            "exact_all_rounds": all(r["exact"] for m in modes.values() for r in m["rounds"]),
            "all_rounds_completed": all(len(m["rounds"]) == args.rounds
                                        for m in modes.values()),
            "recoveries": {f"ndn@{m['n_workers']}": m["recoveries"] for m in ndn_modes},
            "accuracy": {k: m["rounds"][-1]["accuracy"] for k, m in modes.items()},
        }

    def plots(self, run: Run, results: dict[str, Any]) -> list[Path]:
        return plot_modes(run.modes, run.out_dir) + plot_distribution(results, run.out_dir)

    def report(self, run: Run, results: dict[str, Any]) -> None:
        console, out_dir = run.console, run.out_dir
        if self.args.ndn_mode == "async":
            report_async(results, out_dir, console)
            return
        plots = self.plots(run, results)
        console.print(summary_table(results))
        console.print(sync_table(results))
        console.print(f"exact in every round: {'yes' if results['exact_all_rounds'] else 'NO'}; "
                      f"results: {out_dir / 'results.json'}; plots: "
                      f"{', '.join(p.name for p in plots)}")


def async_results(name: str, settings: dict, modes: dict[str, dict]) -> dict[str, Any]:
    """The results of an async run (no rounds: pushes, staleness, accuracy)."""
    return {
        "run": name, "method": "ndn", "ndn_mode": "async", "settings": settings,
        "modes": modes,
        "all_pushes_applied": all(m["pushes"] == m["budget"]
                                  and m["updates"] == m["budget"] // m.get("soft_sync", 1)
                                  for m in modes.values()),
        "params_equal": all(m["params_equal"] for m in modes.values()),
        "recoveries": {k: m["recoveries"] for k, m in modes.items()},
        "accuracy": {k: m["final_accuracy"] for k, m in modes.items()},
        "duration_s": {k: m["duration_s"] for k, m in modes.items()},
    }
