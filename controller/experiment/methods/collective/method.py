"""``python -m controller run --method bcube``: BCube hierarchical synchronization
(docs/design.md §4) and its baselines end to end over Mininet.

What runs
    * ``bcube``: BCube(N, k) -- N**k servers, k levels of N**(k-1) switches, server NIC l on
      level l's subnet 10.l.0.0/16 (:func:`topo.mininet_net.plan_network` numbers a host's
      interfaces by neighbour name, and ``bc{l}_*`` sorts by level, so eth l ↔ level l; checked
      at start-up) -- running :func:`workers.collective.bcube.build_schedule`.
    * baselines (``--baselines``) on the same number of servers, same link speed, same
      transport, same training (:mod:`workers.collective.baselines` explains why one process,
      :mod:`workers.collective.worker_node`, runs all of them): ``ps`` (a single PS co-located
      on the first host of a fat-tree), ``ps-sharded`` (every host the PS of 1/P of the parameters: BML's PS
      baseline), ``ring-fattree`` and ``ring-bcube`` (ring all-reduce; on BCube in Gray-code
      order so that every hop is one switch).  ``ring`` means both rings.

Level switches and fat-tree switches: Linux bridges, not pyswitch
    pyswitch interprets P4 in Python at ~10^4 packets/s per core; a 16 MB all-reduce among 16
    servers puts ~0.5 GB on the wire per round, so with pyswitch the switches' CPU, not the
    links, would decide the timing on our 2 cores -- and the comparison is about link usage.
    Kernel bridges forward at no measurable CPU cost.  The methods compared here need no
    in-network computation (BCube's aggregation happens in the servers), so "every switch is
    a P4 switch" buys nothing for them.  Bridges run with learning, flooding and broadcast
    flooding OFF and a static forwarding entry per host MAC: a loop-free, deterministic
    forwarding state even on the fat-tree (whose loops would otherwise need STP, which would
    cut it down to a tree).  On the fat-tree a switch forwards towards host i through
    ``next_hops[(i // L**tier) % L]`` (L = number of shortest-path next hops, tier = 0 at an
    edge switch, 1 at an aggregation switch), i.e. Al-Fares' destination-suffix routing, which
    spreads destinations over all uplinks and all cores.  On BCube a bridge only knows the N
    servers it links: any two-hop exchange would be dropped, and every pair the schedule uses
    is also asserted one hop apart before the run (:func:`server_links`).  The bridges and the
    schedule runs are :mod:`controller.experiment.methods.bridged`'s (the NDN runner's TCP baseline uses
    them too).

Gradient size
    Training is real (:mod:`workers.common.model`, same code as the INA experiment).  ``--grad-mb``
    sets the synchronized vector length: the real int32 gradient tiled to that many bytes
    (:func:`workers.collective.worker_node.tile_to`); without it the vector is the model's gradient.

Exactness
    Gradients are int32 fixed point (the INA format), so every server's synchronized vector
    must *equal* the wrap-around int32 sum of all servers' quantized gradients: checked on the
    model part directly and on the whole tiled vector by sha256.  No tolerance.

Outputs
    ``results/<run>/results.json`` with ``modes`` (one per method and size; per-round
    ``time_s`` = slowest server's sync time, ``ps_rx_bytes`` = bytes into server 0's host,
    ``busiest_link_bytes``, ``accuracy``, ``exact``), per-NIC bytes measured on the interfaces
    vs the schedule's prediction, and a ``comparison`` of median sync times with the link-bound
    prediction (:func:`workers.collective.baselines.predicted_sync_s`) and BML's 1/k; PNG plots as
    the INA experiment (:func:`controller.experiment.report.plot_modes`).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from controller.errors import ExperimentError
from controller.experiment.methods.bridged import (
    exact_rounds,
    fdb_entries,
    run_schedule,
    start_bridges,
    summarize_run,
)
from controller.experiment.methods.collective.report import comparison, sync_time_table
from controller.experiment.network import shaped_graph
from controller.experiment.report import print_written, summary_table
from controller.experiment.runner import Method, Run, Trial, execute
from workers.collective.baselines import (
    VALUE_BYTES,
    bcube_nic,
    check_same_schedule_levels,
    gray_ring,
    make_schedule,
    pairs,
    predicted_sync_s,
)
from workers.common.model import Replica, TrainConfig, train_synchronous
from workers.common.quantize import choose_frac_bits

BASELINES = ("ps", "ps-sharded", "ring-fattree", "ring-bcube")
PORT = 47100
MB = 2**20

__all__ = ["CollectiveMethod", "run_method", "parse_bcube", "parse_sizes", "parse_baselines",
           "server_links", "fdb_entries", "exact_rounds"]


# ------------------------------------------------------------------ options


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--method bcube (BCube hierarchical synchronization, docs/design.md §4)")
    g.add_argument("--bcube", default="2,2", metavar="N,K",
                   help="BCube(N,K): N**K servers, K levels (default 2,2)")
    g.add_argument("--grad-mb", default="", metavar="MB,...",
                   help="synchronized vector sizes in MiB (the real gradient tiled); "
                        "default: the model's gradient")
    g.add_argument("--baselines", default="ps,ring", metavar="LIST",
                   help=f"comma list of {', '.join(BASELINES)}, ring (= both rings) or none "
                        "(default ps,ring)")
    g.add_argument("--fattree-k", type=int, default=4, metavar="K",
                   help="fat-tree of the ps/ring-fattree baselines (default 4)")
    g.add_argument("--frame-kb", type=int, default=256, metavar="KB",
                   help="TCP frame size of the schedule transport (default 256 KiB)")


def parse_bcube(text: str) -> tuple[int, int]:
    try:
        n, k = (int(x) for x in text.split(","))
    except ValueError:
        raise ExperimentError(f"--bcube {text!r}: expected N,K (two integers)") from None
    if n < 2 or k < 1:
        raise ExperimentError(f"--bcube {text!r}: need N >= 2 and K >= 1")
    return n, k


def parse_sizes(text: str) -> list[float | None]:
    if not text.strip():
        return [None]
    out: list[float | None] = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            raise ExperimentError(f"--grad-mb {text!r}: {part!r} is not a number") from None
        if not v > 0:
            raise ExperimentError(f"--grad-mb {text!r}: sizes must be > 0")
        out.append(v)
    return out


def parse_baselines(text: str) -> list[str]:
    out: list[str] = []
    for part in (x.strip() for x in text.split(",")):
        if part in ("", "none"):
            continue
        names = ["ring-fattree", "ring-bcube"] if part == "ring" else [part]
        for name in names:
            if name not in BASELINES:
                raise ExperimentError(f"--baselines: unknown baseline {part!r} (expected "
                                      f"{', '.join(BASELINES)}, ring or none)")
            if name not in out:
                out.append(name)
    return out


# ``run --method ps`` and ``--method ring`` are this runner without BCube: the baselines alone,
# with the same options, transport and results keys.
ALONE = {"ps": ["ps"], "ring": ["ring-fattree", "ring-bcube"]}


def selected_methods(method: str, baselines: str) -> list[str]:
    """What one run executes, in order: ``bcube`` and its ``--baselines``, or a baseline alone."""
    if method in ALONE:
        return list(ALONE[method])
    return ["bcube"] + parse_baselines(baselines)


# ------------------------------------------------------------------ pure helpers


def server_links(kind: str, schedule: Any, net_plan: Any, hosts: list[str],
                 N: int = 0, k: int = 0) -> dict[tuple[int, int], int]:
    """``(src, dst) -> NIC`` for every pair the schedule uses.

    BCube: the NIC is the one digit in which src and dst differ (ValueError if they are not
    one hop apart), and both servers' interface on that NIC must lead to the same switch
    (the one-hop assertion against the built topology); the schedule's own level must agree.
    Fat-tree: NIC 0 (one NIC per host)."""
    out: dict[tuple[int, int], int] = {}
    for src, dst in pairs(schedule):
        if kind == "bcube":
            nic = bcube_nic(src, dst, N, k)
            a, b = net_plan.hosts[hosts[src]], net_plan.hosts[hosts[dst]]
            if a.neighbours[nic] != b.neighbours[nic]:
                raise ValueError(f"{hosts[src]} and {hosts[dst]}: NIC {nic} leads to "
                                 f"{a.neighbours[nic]} and {b.neighbours[nic]}: not one hop")
            out[(src, dst)] = nic
        else:
            out[(src, dst)] = 0
    if kind == "bcube":
        check_same_schedule_levels(schedule, out)
    return out


# ------------------------------------------------------------------ the method


@dataclass
class BridgedNetwork:
    """A started network of Linux bridges (:meth:`CollectiveMethod.network`): which one
    (``bcube`` or ``fattree``), the Mininet wrapper and the servers, in rank order."""

    kind: str
    mininet: Any
    hosts: list[str]


def size_label(s: float | None) -> str:
    return "model" if s is None else f"{s:g}MB"


class CollectiveMethod(Method):
    """BCube and its PS / ring baselines (``--method bcube``, ``ps``, ``ring``)."""

    name = "bcube"
    help = ("bcube: BCube hierarchical sync (with --baselines); ps, ring: its TCP PS / ring "
            "all-reduce baselines alone")

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)  # no --topo: it builds BCube(N, K) and the baselines' fat-tree

    def validate(self) -> None:
        from topo.models import fat_tree
        from topo.models import hosts as host_names

        args = self.args
        self.N, self.k = N, k = parse_bcube(args.bcube)
        self.sizes = parse_sizes(args.grad_mb)
        self.selected = selected_methods(args.method, args.baselines)
        self.baselines = [m for m in self.selected if m != "bcube"]
        if args.frame_kb < 1:
            raise ExperimentError(f"--frame-kb must be >= 1, got {args.frame_kb}")
        self.P = P = N**k
        self.fat_needed = [b for b in self.baselines
                           if b in ("ps", "ps-sharded", "ring-fattree")]
        if self.fat_needed:
            try:
                ft = fat_tree(args.fattree_k)
            except Exception as exc:  # TopologyError: one line
                raise ExperimentError(f"--fattree-k: {exc}") from None
            if len(host_names(ft)) < P:
                raise ExperimentError(f"--fattree-k {args.fattree_k}: {len(host_names(ft))} "
                                      f"hosts, need {P} for BCube({N},{k})")
        self.bw = args.bw or None
        self.train = TrainConfig(model=args.model, hidden=args.hidden, n_workers=P,
                                 rounds=args.rounds, seed=args.seed)
        self.n_model = Replica(self.train, 0).params.size
        self.frac_bits = choose_frac_bits(8.0, P)
        self.n_of = {s: (self.n_model if s is None else max(self.n_model,
                                                              round(s * MB / VALUE_BYTES)))
                     for s in self.sizes}

    def topology(self) -> Any:
        return None  # its networks: execute() builds them from --bcube and --fattree-k

    def target(self) -> str:
        return "pyswitch"  # Linux bridges; pyswitch's check is the machine's (root, Mininet)

    def settings(self, run: Run) -> dict[str, Any]:
        args, N, k = self.args, self.N, self.k
        settings = {
            "bcube": [N, k], "servers": self.P, "grad_mb": self.sizes,
            "n_values": list(self.n_of.values()), "methods": self.selected,
            "baselines": self.baselines,
            "fattree_k": args.fattree_k if self.fat_needed else None,
            "bw_mbps": self.bw, "rounds": args.rounds, "model": args.model,
            "hidden": args.hidden, "n_model": self.n_model, "seed": args.seed,
            "frac_bits": self.frac_bits, "frame_kb": args.frame_kb, "transport": "tcp",
            "switches": "linux-bridge (static fdb)"}
        if len(run.seeds) > 1:
            settings["seeds"] = run.seeds
        return settings

    def headline(self, run: Run) -> str:
        args, N, k, bw = self.args, self.N, self.k, self.bw
        note = ("note: --method bcube uses Linux bridges as switches; --target ignored\n"
                if args.target != "pyswitch" else "")
        return (note + f"[bold]BCube({N},{k})[/] sizing: {self.P} servers, model gradient "
                f"{self.n_model} values, sizes {', '.join(size_label(s) for s in self.sizes)}, "
                f"methods {', '.join(self.selected)}" + (f", {bw:g} Mbit/s links" if bw else ""))

    def trials(self, run: Run) -> Iterator[Trial]:
        """Per network (BCube, then the baselines' fat-tree), seed by seed, every method on
        it and every size; the first repeat keeps the folders it always had."""
        on_bcube = [m for m in self.selected if m in ("bcube", "ring-bcube")]
        for net_kind, methods in (("bcube", on_bcube), ("fattree", self.fat_needed)):
            for rep, seed in enumerate(run.seeds):
                for method in methods:
                    for size in self.sizes:
                        label = f"{method}@{size_label(size)}"
                        folder = label if rep == 0 else f"{label}-seed{seed}"
                        yield Trial(label, method, seed, rep, run.out_dir / folder,
                                    network=net_kind, spec=size)

    @contextlib.contextmanager
    def network(self, run: Run, name: str = "") -> Iterator[BridgedNetwork]:
        """``name``'s network (``bcube``: BCube(N, K); ``fattree``: the baselines'), Linux
        bridges with static forwarding; its first P hosts are the servers."""
        from mininet.nodelib import LinuxBridge

        from topo.mininet_net import build_net
        from topo.models import bcube, fat_tree
        from topo.models import hosts as host_names

        k, bw = self.k, self.bw
        graph = shaped_graph(bcube(self.N, k) if name == "bcube"
                             else fat_tree(self.args.fattree_k), bw)
        hosts = host_names(graph)[:self.P]
        run.console.print(f"[bold]starting Mininet[/] ({name}): "
                          f"{graph.number_of_nodes()} nodes, Linux bridges")
        with run.network(build_net(graph, LinuxBridge,
                                   bw_unit_mbps=1.0 if bw else None)) as mininet:
            if name == "bcube":
                for lv in range(k):  # NIC l of every server is on level l's switch
                    for h in hosts:
                        nb = mininet.plan.hosts[h].neighbours[lv]
                        if graph.nodes[nb].get("level") != lv:
                            raise ExperimentError(f"{h}: NIC {lv} leads to {nb}, not a "
                                                  f"level-{lv} switch")
            start_bridges(mininet, graph)
            yield BridgedNetwork(name, mininet, hosts)

    def run_trial(self, run: Run, trial: Trial, net: BridgedNetwork) -> dict[str, Any]:
        N, k, P, bw, args = self.N, self.k, self.P, self.bw, self.args
        method, size, mininet, hosts = trial.kind, trial.spec, net.mininet, net.hosts
        spec: dict[str, Any]
        if method == "bcube":
            spec = {"kind": "bcube", "N": N, "k": k}
        elif method == "ring-bcube":
            spec = {"kind": "ring", "order": gray_ring(N, k)}
        elif method == "ring-fattree":
            spec = {"kind": "ring", "order": list(range(P))}
        elif method == "ps":
            spec = {"kind": "ps", "P": P, "ps": 0}
        else:
            spec = {"kind": "ps-sharded", "P": P}
        n = self.n_of[size]
        schedule = make_schedule(spec, n)
        try:
            nic_of = server_links(net.kind, schedule, mininet.plan, hosts, N, k)
        except ValueError as exc:
            raise ExperimentError(f"{method}: {exc}") from None
        pred = predicted_sync_s(schedule, nic_of, bw) if bw else None
        label, folder = trial.label, trial.folder
        train = self.train if trial.repeat == 0 else TrainConfig(
            model=args.model, hidden=args.hidden, n_workers=P, rounds=args.rounds,
            seed=trial.seed)
        job = {"schedule": spec, "n_workers": P, "n_values": n,
               "frame_values": args.frame_kb * 1024 // VALUE_BYTES,
               "timeout_s": max(60.0, 20 * (pred or 0)),
               "links": [[a, b, c] for (a, b), c in sorted(nic_of.items())],
               "ips": [mininet.plan.hosts[h].ips for h in hosts], "port": PORT,
               "train": {f: getattr(train, f) for f in train.__dataclass_fields__},
               "frac_bits": self.frac_bits, "rounds": args.rounds,
               "out_dir": str(folder), "start_file": str(folder / "start")}
        reports, moved, _wall = run_schedule(run, mininet, label, job, hosts)
        rec = summarize_run(label, method, job, schedule, nic_of, hosts, mininet.plan,
                            reports, moved, bw)
        rec["method"] = method
        rec["size"] = size_label(size)
        return rec

    def results(self, run: Run) -> dict[str, Any]:
        modes = run.modes
        reference = train_synchronous(self.train)
        first = f"{self.selected[0]}@{size_label(self.sizes[0])}"
        return {
            "run": run.name, "method": self.args.method, "settings": run.settings,
            "modes": modes, "comparison": comparison(modes, [size_label(s) for s in self.sizes]),
            "bml_theory_bcube_over_ps": 1 / self.k,
            "exact_all_rounds": all(r["exact"] for m in modes.values() for r in m["rounds"]),
            "accuracy": {"final": modes[first]["rounds"][-1]["accuracy"],
                         "reference": reference.final_accuracy},
        }

    def report(self, run: Run, results: dict[str, Any]) -> None:
        console, k = run.console, self.k
        plots = self.plots(run, results)
        console.print(summary_table(results))
        console.print(sync_time_table(results, self.selected, self.P, self.bw))
        if "bcube" in self.selected:
            console.print(f"BML theory: BCube sync time ≈ 1/k = {1 / k:.3f} of (sharded) PS on "
                          "a fat-tree")
        console.print(f"exact in every round: {'yes' if results['exact_all_rounds'] else 'NO'}")
        print_written(console, run.out_dir, plots)


def run_method(args: argparse.Namespace) -> dict:
    """The BCube experiment from the parsed ``run`` options; returns the results dict."""
    return execute(CollectiveMethod(args))
