"""``run --servers A,B,...``: the network spread over several servers with Mininet's cluster
mode (docs/servers.md).  The option's checks, in order, each one ExperimentError line:

1. the form of the list (:func:`topo.cluster_placement.parse_servers`: two or more names, no
   repeats), before anything else;
2. the placement on the topology (pods in blocks, the top tier with the first server;
   :func:`topo.cluster_placement.place`): not more servers than pods;
3. every name resolves to an IPv4 address, the first one is this machine's, and every other
   one answers over ssh without a password with ``sudo`` and the project at this machine's
   path (:func:`topo.mininet_cluster.check_server`).

The network itself is built by :func:`topo.mininet_cluster.build_cluster_net`
(:func:`cluster_builder` hands it to :func:`~controller.experiment.methods.ina.core.
deployed_network`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import networkx as nx

from controller.errors import ExperimentError
from topo.cluster_placement import Placement, PlacementError, parse_servers, place

__all__ = ["check_servers_option", "cluster_spec", "cluster_builder", "placement_summary"]


def check_servers_option(spec: str | None, target: str) -> tuple[str, ...] | None:
    """Check 1 (form only, no I/O): the server names, or None without ``--servers``."""
    if spec is None:
        return None
    if target != "pyswitch":
        raise ExperimentError("--servers runs pyswitch switches only (--target pyswitch)")
    try:
        return parse_servers(spec)
    except PlacementError as exc:
        raise ExperimentError(str(exc)) from None


def cluster_spec(graph: nx.Graph, spec: str, ssh_config: str | None,
                 check: bool = True) -> Any:
    """Checks 1-3 (``check=False``: no ssh probe) -> a :class:`topo.mininet_cluster.
    ClusterSpec` for ``graph``."""
    from pathlib import Path

    from topo.mininet_cluster import (
        ClusterError,
        ClusterSpec,
        check_server,
        is_local_address,
        resolve_server,
    )

    servers = check_servers_option(spec, "pyswitch")
    assert servers is not None
    try:
        placement = place(graph, servers)
    except PlacementError as exc:
        raise ExperimentError(str(exc)) from None
    if ssh_config is not None and not Path(ssh_config).is_file():
        raise ExperimentError(f"--ssh-config {ssh_config}: no such file")
    try:
        addresses = {name: resolve_server(name) for name in servers}
        if not is_local_address(addresses[servers[0]]):
            raise ExperimentError(f"--servers: the first server is the local one, but "
                                  f"{servers[0]} ({addresses[servers[0]]}) is not an address "
                                  "of this machine")
        cluster = ClusterSpec(placement, addresses, ssh_config)
        if check:
            for name in servers[1:]:
                check_server(name, addresses[name], cluster.ssh_options())
    except ClusterError as exc:
        raise ExperimentError(str(exc)) from None
    return cluster


def placement_summary(placement: Placement) -> dict[str, Any]:
    """What ``results.json`` keeps of a placement: nodes per server and the tunnels."""
    return {"servers": {s: placement.nodes_on(s) for s in placement.servers},
            "tunnels": [list(t) for t in placement.tunnels]}


def cluster_builder(graph: nx.Graph, spec: str, ssh_config: str | None) -> Callable[..., Any]:
    """A ``build_net``-like function building ``graph`` over the servers of ``spec``
    (checked again for form and placement, not probed); errors of the cluster build become
    one ExperimentError line."""
    cluster = cluster_spec(graph, spec, ssh_config, check=False)

    def build(graph: nx.Graph, switch_cls: type, **kwargs: Any) -> Any:
        from topo.mininet_cluster import build_cluster_net

        try:
            return build_cluster_net(graph, cluster, switch_cls, **kwargs)
        except ExperimentError:
            raise
        except Exception as exc:  # the cluster module raises bare Exceptions
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ExperimentError(f"building the network over {', '.join(cluster.placement.servers)}: "
                                  f"{line}") from None
    return build
