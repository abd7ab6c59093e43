"""The networks one INA engine runs over (docs/running.md, "Networks"): a small table of
names, as Mininet passes its switch and link classes in.

=============  =======================================================================
``mininet``    today's ``run``: a Mininet network of ``--target`` switches on this machine
               (root), TCLink shaping (htb, with its burst).
``servers``    the same network spread over ``--servers`` with Mininet's cluster mode
               (docs/servers.md): a real second server.
``simulated``  virtual time, no root: in-process pyswitch running ``ina.p4``, links served
               at their rate (``--delay-ms``, ``--queue``, ``--burst-bytes`` ...,
               docs/simulate.md), the hosts' drivers (:mod:`workers.ina.driver`) on
               virtual-time I/O instead of processes.
=============  =======================================================================

The engine (:func:`controller.experiment.methods.ina.engine.execute`) plans, writes the rules
and the job files, follows the tenants and builds the records the same way on each; a
network only *deploys* (``deploy``: the rules installed, the hosts' addresses) and *launches*
one mode's hosts (``Deployed.launch``).  What only one network can do is its own check, one
line elsewhere (:meth:`Network.check`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import networkx as nx

from controller.dataplane.deploy import SwitchJob
from controller.errors import ExperimentError
from controller.experiment.methods.ina.core import Settings, deployed_network
from controller.experiment.network import check_environment
from controller.experiment.runner import Run
from controller.plan.types import Plan

__all__ = ["NETWORKS", "DEFAULT_NETWORK", "Network", "MininetNetwork", "ServersNetwork",
           "SimulatedNetwork", "network_for", "refuse_network"]

DEFAULT_NETWORK = "mininet"


class Network:
    """A network an INA run deploys its plan on and launches its hosts in."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    # the largest topology (nodes) this network holds; None: no limit of its own
    max_nodes: ClassVar[int | None] = None
    max_nodes_why: ClassVar[str] = ""

    @property
    def trains(self) -> bool:
        """Whether the workers train replicas of a numpy model (then each job's shards must
        hold a batch: :meth:`~controller.experiment.methods.ina.tenants.Tenant.check_batch`)."""
        return True

    def check(self, s: Settings) -> None:
        """One :class:`ExperimentError` for a setting this network cannot run."""

    def check_graph(self, graph: nx.Graph, spec: str) -> None:
        """One :class:`ExperimentError` for a topology past :attr:`max_nodes`."""
        n = graph.number_of_nodes()
        if self.max_nodes is not None and n > self.max_nodes:
            raise ExperimentError(f"--topo {spec}: {n:,} nodes; the {self.name} network holds "
                                  f"at most {self.max_nodes:,} ({self.max_nodes_why})")

    def deploy(self, run: Run, s: Settings, graph: nx.Graph, plan: Plan,
               jobs: list[SwitchJob]) -> contextlib.AbstractContextManager[Any]:
        """The network with ``plan`` installed for ``jobs``: a context manager whose value
        has ``hosts``, ``rules``, ``p4info``, ``info``, ``mininet`` (what the switch and
        worker monitors act on) and ``launch(run, spec)``."""
        raise NotImplementedError


class MininetNetwork(Network):
    """Today's ``run``: Mininet on this machine."""

    name = "mininet"
    help = "Mininet on this machine (root; default)"

    def check(self, s: Settings) -> None:
        if s.servers is not None:
            raise ExperimentError("--servers spreads the network over servers: "
                                  "use --network servers (or leave --network out)")
        check_environment(s.target)

    def deploy(self, run: Run, s: Settings, graph: nx.Graph, plan: Plan,
               jobs: list[SwitchJob]) -> contextlib.AbstractContextManager[Any]:
        return deployed_network(run, s, graph, plan, jobs)


class ServersNetwork(MininetNetwork):
    """Mininet's cluster mode over ``--servers`` (docs/servers.md)."""

    name = "servers"
    help = "Mininet over --servers A,B,... (cluster mode, docs/servers.md)"

    def check(self, s: Settings) -> None:
        if s.servers is None:
            raise ExperimentError("--network servers needs --servers A,B,...")
        check_environment(s.target)


class SimulatedNetwork(Network):
    """Virtual time (docs/simulate.md): ``opt`` is its :class:`~controller.experiment.
    simulate.run.SimOptions` (default: ``simulate``'s defaults)."""

    name = "simulated"
    help = "virtual time, in-process pyswitch, no root (docs/simulate.md)"
    # fat-tree k=32 (9,472 nodes) is the largest measured: minutes per run and 1.6 GiB; past
    # it one run's rules and switches outgrow a run of minutes (docs/simulate.md)
    max_nodes = 10_000
    max_nodes_why = "fat-tree k=32, 9,472 nodes, is the largest measured in minutes"

    def __init__(self, opt: Any = None, gradient_of: Any = None) -> None:
        from controller.experiment.simulate.network import SimOptions

        self.opt = opt if opt is not None else SimOptions()
        self.gradient_of = gradient_of  # (worker, round) -> int32 vector: tests' sums
        self.deployed: Any = None  # the last deployment (its totals: simulate's figures)

    @property
    def trains(self) -> bool:
        return bool(self.opt.train) and self.gradient_of is None  # --no-train, tests' sums

    def check(self, s: Settings) -> None:
        if s.servers is not None:
            raise ExperimentError("--servers: a second server is the servers network's "
                                  "(--network servers), not the simulated one's")
        if s.target != "pyswitch":
            raise ExperimentError("--target: the simulated network runs ina.p4 on in-process "
                                  "pyswitch only")
        if not s.bw:
            raise ExperimentError("--bw 0 (unshaped links): virtual time needs a link rate")
        if s.workload is not None and self.opt.train:
            raise ExperimentError(f"--model {s.model}: a real model's scaled emulation "
                                  "waits its compute in real time; the simulated network "
                                  "runs the numpy models")

    @contextlib.contextmanager
    def deploy(self, run: Run, s: Settings, graph: nx.Graph, plan: Plan,
               jobs: list[SwitchJob]) -> Iterator[Any]:
        from controller.experiment.simulate.engine import deploy_simulated

        self.deployed = deploy_simulated(run, s, graph, plan, jobs, self.opt, self.gradient_of)
        yield self.deployed


NETWORKS: dict[str, type[Network]] = {n.name: n for n in (MininetNetwork, ServersNetwork,
                                                          SimulatedNetwork)}


def network_for(name: str | None, s: Settings) -> Network:
    """The network named ``name`` (None: ``servers`` with ``--servers``, else ``mininet``),
    checked against ``s``."""
    if name is None:
        name = "servers" if s.servers is not None else DEFAULT_NETWORK
    if name not in NETWORKS:
        raise ExperimentError(f"--network: expected one of {', '.join(NETWORKS)}, got "
                              f"{name!r}")
    net = NETWORKS[name]()
    net.check(s)
    return net


def refuse_network(method: str, network: str | None) -> None:
    """One line for a method whose hosts are not driven through :mod:`workers.ina.driver`
    (only those run in virtual time) or that has no cluster mode."""
    if network in (None, DEFAULT_NETWORK):
        return
    if network == "simulated":
        raise ExperimentError(f"--network simulated: method {method!r} runs processes not "
                              "driven through workers/ina/driver.py; only --method ina runs "
                              "in virtual time")
    raise ExperimentError(f"--network {network}: method {method!r} runs on Mininet only")
