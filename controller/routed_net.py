"""A Mininet network whose switches are plain IPv4 routers: the network of the methods that
need no in-network computation but should cross the same P4 switches as INA (async, cluster).

Every switch runs ``p4src/ina.p4`` (compiled for ``--target``) with only the IPv4 routes of
:func:`controller.deploy.routing_rules` installed over P4Runtime, i.e. the ECMP paths of
:mod:`topo.paths`, so the traffic of those methods takes the paths INA's planner assumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from controller.experiment import compile_program

__all__ = ["start_routed_network"]


def start_routed_network(graph: nx.Graph, target: str, build_dir: Path, console: Any,
                         bw_unit_mbps: float | None, links: str
                         ) -> tuple[Any, dict[str, tuple[str, str]]]:
    """Start the network and install the routes; returns it and ``host -> (ip, mac)``.

    ``links`` describes the link rates for the progress line.  On any error the network is
    stopped before the error propagates; otherwise the caller stops it."""
    from controller.deploy import deploy, routing_rules
    from topo.mininet_net import build_net
    from topo.mininet_switch import BMv2Switch, PySwitch

    p4info, device_config = compile_program(target, build_dir)
    console.print(f"[bold]starting Mininet[/]: {graph.number_of_nodes()} nodes, {target} "
                  f"switches, {links}")
    mininet = build_net(graph, BMv2Switch if target == "bmv2" else PySwitch,
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
