"""What the host-driven designs of the suite share on Mininet (the ring,
:mod:`controller.experiment.methods.ring.mininet`, and SwitchML,
:mod:`controller.experiment.methods.switchml.mininet`): a run folder with its
:class:`~controller.experiment.runner.Run`, the routed network (every switch ``ina.p4`` with
the IPv4 routes of the ECMP paths, pyswitch's impairment on every port as INA's runs have
it), and one process per worker host started together through the runner's launch sequence
(ready barrier, start file, deadline, logs, bytes per link)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from controller.experiment.network import start_routed_network
from controller.experiment.runner import Launch, Launched, Node, RoutedNetwork, Run

__all__ = ["MininetSettings", "host_run", "routed_mininet", "launch_nodes", "rounds_span"]


@dataclass(frozen=True)
class MininetSettings:
    """The network a host-driven design runs on: topology, switch target, link rate
    (Mbit/s, 0: unshaped) and the impairment on every switch port."""

    graph: nx.Graph
    target: str = "pyswitch"
    bw: float = 0.0
    loss: float = 0.0
    seed: int = 0


def host_run(method: str, out: Path, quiet: bool = True) -> Run:
    """The :class:`Run` whose folder is ``out`` (what :meth:`Run.launch` needs)."""
    from rich.console import Console

    return Run(method, str(out.parent), out.name, console=Console(quiet=quiet))


@contextlib.contextmanager
def routed_mininet(run: Run, ms: MininetSettings) -> Iterator[RoutedNetwork]:
    """The routed network of ``ms`` (module docstring), stopped when the block ends."""
    impair = ([f"all:loss={ms.loss},seed={ms.seed}"] if ms.loss else [])
    links = f"{ms.bw:g} Mbit/s links" if ms.bw else "unshaped links"
    mininet, addrs = start_routed_network(ms.graph, ms.target, run.out_dir / "build",
                                          run.console, 1.0 if ms.bw else None, links,
                                          switch_opts={"impair": impair} if impair else None)
    with run.network(mininet):
        yield RoutedNetwork(mininet, addrs)


def launch_nodes(run: Run, net: RoutedNetwork, label: str, out: Path,
                 nodes: list[tuple[str, str, tuple[str, ...]]], timeout_s: float,
                 what: str) -> Launched:
    """Start ``(host, module, args)`` on every host together: each prints ``... ready`` and
    waits for ``out/start``, which is touched once all are up; returns when all exited."""
    return run.launch(net.mininet, Launch(
        label=label, out_dir=out, nodes=[Node(h, m, a) for h, m, a in nodes],
        nodes_what=what, failed_what=f"{label} worker", start_file=out / "start",
        timeout_s=timeout_s, count_from="start"))


def rounds_span(out: Path, prefix: str, done: Launched) -> float:
    """Seconds from the start file to the last worker's last round (each worker's
    ``<prefix><i>.json`` under ``out`` says when, ``finished_at``; the hosts share this
    machine's clock): the rounds' span, without what a process does after them."""
    ends = [json.loads(f.read_text()).get("finished_at")
            for f in out.rglob(f"{prefix}[0-9]*.json")]
    ends = [t for t in ends if t is not None]
    return max(0.0, max(ends) - done.t_start) if ends else done.wall_s
