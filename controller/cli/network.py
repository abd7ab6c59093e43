"""``python -m controller net`` and ``python -m controller deploy``: a network that stays up,
and installing a plan into it from another shell.

``net`` builds the Mininet network of a topology with P4 switches (no pipeline yet), writes a
network file (every switch's gRPC address, device id and port map; every host's address) and
keeps it running until Ctrl-C.  ``deploy --plan PLAN --network NET`` compiles ``ina.p4``,
computes every switch's entries from the plan (:func:`controller.dataplane.deploy.switch_rules`) and
installs them over P4Runtime; running it again gives the same state (idempotent).
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
from typing import Any

from controller.dataplane.deploy import (
    DeployError,
    SwitchJob,
    SwitchRules,
    deploy,
    switch_rules,
)
from controller.errors import ExperimentError
from controller.experiment.network import (
    add_target_option,
    check_environment,
    compile_program,
    shaped_graph,
    switch_class,
)
from controller.files import InputFileError, read_input_text, write_json_atomic
from controller.plan.document import load_plan
from controller.plan.types import Plan


def network_description(mininet: Any) -> dict[str, Any]:
    """What ``deploy`` needs to reach and address a running network (JSON-ready)."""
    plan = mininet.plan
    return {
        "switches": {s: {"grpc": mininet.grpc_address(s), "device_id": plan.device_ids[s],
                         "ports": plan.ports[s]} for s in plan.switches},
        "hosts": {h: {"ip": i.ip, "mac": i.mac, "ports": plan.ports[h]}
                  for h, i in plan.hosts.items()},
    }


def load_network(path: Path) -> dict[str, Any]:
    try:  # a regular file of bounded size (a FIFO or a device: one line, no hang)
        data = json.loads(read_input_text(path, 64 * 2**20, "network file"))
        data["switches"], data["hosts"]  # noqa: B018 - shape check
    except InputFileError as exc:
        raise ExperimentError(str(exc)) from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError) as exc:
        raise ExperimentError(f"{path}: not a network file written by "
                              f"`python -m controller net` ({exc})") from None
    return data


def check_matches(graph: Any, net: dict[str, Any], where: Path) -> None:
    """The network file must hold every node of the plan's topology with a port per link."""
    for node, kind in sorted(graph.nodes(data="kind")):
        entry = net["switches" if kind == "switch" else "hosts"].get(node)
        if entry is None:
            raise ExperimentError(f"{where}: no {kind} {node!r} (the plan's topology differs "
                                  "from this network)")
        for nb in graph.neighbors(node):
            if nb not in entry.get("ports", {}):
                raise ExperimentError(f"{where}: {kind} {node!r} has no port toward {nb!r} "
                                      "(the plan's topology differs from this network)")


def cmd_net(args: argparse.Namespace) -> int:
    from rich.console import Console

    from topo.mininet_net import build_net
    from topo.models import parse_topology

    check_environment(args.target)
    graph = shaped_graph(parse_topology(args.topo), args.bw)
    console = Console()
    mininet = build_net(graph, switch_class(args.target), bw_unit_mbps=1.0 if args.bw else None)
    try:
        write_json_atomic(Path(args.out), network_description(mininet))
        console.print(f"network {args.topo} is up ({len(mininet.plan.switches)} switches); "
                      f"network file {args.out}. Ctrl-C stops it.")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    finally:
        mininet.stop()
    return 0


def plan_rules(plan_file: Path, network_file: Path, job_id: int,
               ) -> tuple[Plan, dict[str, Any], dict[str, SwitchRules]]:
    """The plan in ``plan_file`` (any version :func:`load_plan` reads; one job), the network
    file and the entries of every switch of that network for the plan, as job ``job_id``
    (no network is touched)."""
    from topo.models import load_json

    plan = load_plan(plan_file)
    job = plan.job  # a plan of several jobs is deployed by `run --jobs`, not here
    graph = load_json(plan_file)
    net = load_network(network_file)
    check_matches(graph, net, network_file)
    ports = {n: d["ports"] for n, d in {**net["switches"], **net["hosts"]}.items()}
    hosts = {h: (d["ip"], d["mac"]) for h, d in net["hosts"].items()}
    rules = switch_rules(graph, plan, ports, hosts, [SwitchJob(job_id, tuple(job.workers))])
    return plan, net, rules


def cmd_deploy(args: argparse.Namespace) -> int:
    from rich.console import Console

    plan, net, rules = plan_rules(Path(args.plan), Path(args.network), args.job_id)
    build = Path(args.build)
    if args.p4info and args.config:
        p4info, config = Path(args.p4info), Path(args.config)
    else:
        p4info, config = compile_program(args.target, build)
    addresses = {s: (net["switches"][s]["grpc"], net["switches"][s]["device_id"]) for s in rules}
    try:
        written = deploy(rules, addresses, p4info, config, timeout=args.timeout)
    except DeployError as exc:
        raise ExperimentError(str(exc)) from None
    Console().print(f"deployed plan {args.plan} (job {args.job_id}, aggregating at "
                    f"{', '.join([*plan.deployed, plan.job.ps_tor])}) to {len(written)} "
                    f"switches, {sum(written.values())} writes")
    return 0


def add_network_parsers(sub: Any, add_subcommand: Any) -> None:
    p = add_subcommand(sub, "net", cmd_net,
                       "start a Mininet network of P4 switches and keep it up (root)")
    p.add_argument("--topo", default="fattree:4", help="topology spec or file")
    p.add_argument("--bw", type=float, default=0.0, help="link bandwidth in Mbit/s (0: unshaped)")
    add_target_option(p)
    p.add_argument("--out", default="results/network.json", help="network file to write")

    p = add_subcommand(sub, "deploy", cmd_deploy,
                       "install a plan over P4Runtime into a running network")
    p.add_argument("--plan", required=True, help="plan file from `python -m controller plan`")
    p.add_argument("--network", default="results/network.json",
                   help="network file from `python -m controller net`")
    p.add_argument("--job-id", type=int, default=1, help="INA job id of the plan's job")
    add_target_option(p, what="whose compiler to use when --p4info/--config are not given")
    p.add_argument("--p4info", help="P4Info text file (default: compile p4src/ina.p4)")
    p.add_argument("--config", help="device config (pyswitch JSON or BMv2 JSON)")
    p.add_argument("--build", default="build", help="where to compile ina.p4")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for a switch")
