"""What every method's runner does with a Mininet network: check it can be built, compile the
P4 program, start a routed network, and count bytes on every link (docs/design.md §8).

A network whose switches are plain IPv4 routers is what the methods that need no in-network
computation but should cross the same P4 switches as INA use (async, cluster): every switch
runs ``p4src/ina.p4`` (compiled for ``--target``) with only the IPv4 routes of
:func:`controller.dataplane.deploy.routing_rules` installed over P4Runtime, i.e. the ECMP paths of
:mod:`topo.paths`, so their traffic takes the paths INA's planner assumes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from controller.errors import ExperimentError

__all__ = ["ROOT", "P4_PROGRAM", "SlotsOption", "TARGET_CHOICES", "add_target_option",
           "check_environment",
           "compile_program", "interface_counters", "link_bytes", "shaped_graph",
           "start_routed_network", "switch_class"]

ROOT = Path(__file__).resolve().parents[2]
P4_PROGRAM = ROOT / "p4src" / "ina.p4"


def switch_class(target: str) -> Any:
    """The switch class of ``--target`` (:data:`topo.mininet_switch.TARGETS`); one
    ExperimentError for a name not in the table."""
    from topo.mininet_switch import TARGETS

    if target not in TARGETS:
        raise ExperimentError(f"--target {target}: expected one of {', '.join(TARGETS)}")
    return TARGETS[target]


class _TargetNames:
    """``--target``'s choices: the names of :data:`topo.mininet_switch.TARGETS`, read when
    argparse first checks or lists them (importing Mininet costs every command ~0.15 s,
    and most never start a switch)."""

    def _names(self) -> list[str]:
        from topo.mininet_switch import TARGETS

        return list(TARGETS)

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Any:
        return iter(self._names())


TARGET_CHOICES: Any = _TargetNames()
"""``choices=`` of every ``--target`` option (:func:`add_target_option`)."""


def add_target_option(parser: Any, default: str = "pyswitch", what: str = "switch target") -> None:
    """``--target NAME``: a name of :data:`topo.mininet_switch.TARGETS`.  The metavar is
    fixed and the help names the choices through ``%(choices)s``, so that the table is read
    only when help is shown or a value is checked."""
    parser.add_argument("--target", choices=TARGET_CHOICES, default=default, metavar="TARGET",
                        help=f"{what}: %(choices)s (default %(default)s)")


def check_environment(target: str) -> None:
    """One ExperimentError unless this process can build a Mininet network of ``target``."""
    if os.geteuid() != 0:
        raise ExperimentError("the experiment builds a Mininet network: run it as root")
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        raise ExperimentError("Mininet is not importable: run `make run` (it installs Debian's "
                              "mininet) or apt-get install mininet") from None
    cls = switch_class(target)
    missing = cls.missing_tools()
    if missing:
        raise ExperimentError(f"--target {target} needs {' and '.join(missing)} on PATH"
                              + (f" ({cls.install_hint})" if cls.install_hint else ""))


def shaped_graph(graph: nx.Graph, bw: float | None,
                 host_bw: Mapping[str, float] | None = None) -> nx.Graph:
    """A frozen copy of ``graph`` with every link at ``bw`` Mbit/s (0 or None: left as the
    topology has it; the network is then built unshaped) and, if ``host_bw`` names hosts,
    their access links at their own rates (:func:`topo.models.with_link_bw`, which leaves the
    other links unshaped when ``bw`` is 0)."""
    from topo.models import with_link_bw

    if host_bw:
        return with_link_bw(graph, bw or None, host_bw)
    g = nx.Graph(graph)
    if bw:
        nx.set_edge_attributes(g, float(bw), "bw")
    return nx.freeze(g)


class SlotsOption(argparse.Action):
    """``--slots N``: aggregator slots per switch for every ina.p4 this process compiles and
    every host process it starts (sets INSYNC_INA_NUM_SLOTS; docs/protocol.md §2).  An
    action, not a post-parse step, so that a command adds the option in one line."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from workers.ina.constants import ConstantsError, check_num_slots, set_num_slots

        try:
            n = check_num_slots(values, option_string or "--slots")
        except ConstantsError as exc:
            parser.error(str(exc))
        set_num_slots(n)
        setattr(namespace, self.dest, n)


def compile_program(target: str, build: Path) -> tuple[Path, Path]:
    """Compile ina.p4 like p4c's BMv2 backend; returns (p4info, device config).

    The slot-count override (``INSYNC_INA_NUM_SLOTS``, :func:`workers.ina.constants.
    compile_defines`) becomes ``-D INA_NUM_SLOTS=N`` here, the one place every method
    compiles the program, so the switches' registers and Python's slot index agree
    (docs/protocol.md §2).  The count is also written next to the program
    (``num_slots.txt``) so that a build folder says what it was compiled with."""
    from workers.ina.constants import ConstantsError, compile_defines, num_slots

    try:
        defines = [f"-D{k}={v}" for k, v in compile_defines().items()]
        slots = num_slots()
    except ConstantsError as exc:
        raise ExperimentError(str(exc)) from None
    build.mkdir(parents=True, exist_ok=True)
    p4info, config = build / "ina.p4info.txtpb", build / "ina.json"
    cmd = switch_class(target).compile_command(P4_PROGRAM, config, p4info, defines)
    (build / "num_slots.txt").write_text(f"{slots}\n")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ExperimentError(f"compiling {P4_PROGRAM.name} failed: "
                              f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return p4info, config


def interface_counters(net_plan: Any, read: Any = None) -> dict[tuple[str, str], int]:
    """Bytes per directed link, from the switch-side interface counters (root namespace;
    ``read(switch, interfaces) -> {interface: (tx, rx)}`` reads them instead, e.g. on a
    switch's own server, :meth:`topo.mininet_cluster.ClusterNet.interface_bytes`)."""
    out = {}
    for s in net_plan.switches:
        ports = net_plan.ports[s]
        if read is not None:
            got = read(s, [f"{s}-eth{port}" for port in ports.values()])
            for nb, port in ports.items():
                out[(s, nb)], out[(nb, s)] = got[f"{s}-eth{port}"]
            continue
        for nb, port in ports.items():
            base = Path(f"/sys/class/net/{s}-eth{port}/statistics")
            out[(s, nb)] = int((base / "tx_bytes").read_text())
            out[(nb, s)] = int((base / "rx_bytes").read_text())
    return out


def link_bytes(counters_before: dict, counters_after: dict) -> dict[tuple[str, str], int]:
    """Bytes moved per directed link between two :func:`interface_counters` readings."""
    return {k: counters_after[k] - counters_before.get(k, 0) for k in counters_after}


def start_routed_network(graph: nx.Graph, target: str, build_dir: Path, console: Any,
                         bw_unit_mbps: float | None, links: str,
                         switch_opts: dict[str, Any] | None = None
                         ) -> tuple[Any, dict[str, tuple[str, str]]]:
    """Start the network and install the routes; returns it and ``host -> (ip, mac)``.

    ``links`` describes the link rates for the progress line; ``switch_opts`` go to every
    switch (e.g. pyswitch's ``impair``, the INA runs' loss).  On any error the network is
    stopped before the error propagates; otherwise the caller stops it."""
    from controller.dataplane.deploy import deploy, routing_rules
    from topo.mininet_net import build_net

    p4info, device_config = compile_program(target, build_dir)
    console.print(f"[bold]starting Mininet[/]: {graph.number_of_nodes()} nodes, {target} "
                  f"switches, {links}")
    mininet = build_net(graph, switch_class(target), switch_opts=switch_opts or None,
                        bw_unit_mbps=bw_unit_mbps)
    try:
        addrs = {h: (info.ip, info.mac) for h, info in mininet.plan.hosts.items()}
        rules = routing_rules(graph, mininet.plan.ports, addrs, mininet.plan.device_ids)
        addresses = {sw: (mininet.grpc_address(sw), mininet.device_id(sw)) for sw in rules}
        console.print(f"[bold]deploying[/] IPv4 routes over P4Runtime to {len(rules)} switches")
        deploy(rules, addresses, p4info, device_config)
    except BaseException:
        mininet.stop()
        raise
    return mininet, addrs
