"""``python -m controller run --method bcube``: BCube hierarchical synchronization (SPEC §4) and
its baselines end to end over Mininet.

What runs
    * ``bcube``: BCube(N, k) -- N**k servers, k levels of N**(k-1) switches, server NIC l on
      level l's subnet 10.l.0.0/16 (:func:`topo.mininet_net.plan_network` numbers a host's
      interfaces by neighbour name, and ``bc{l}_*`` sorts by level, so eth l ↔ level l; checked
      at start-up) -- running :func:`workers.collective.bcube.build_schedule`.
    * baselines (``--baselines``) on the same number of servers, same link speed, same
      transport, same training (:mod:`workers.collective.baselines` explains why one process,
      :mod:`workers.collective.node`, runs all of them): ``ps`` (a single PS co-located on the first
      host of a fat-tree), ``ps-sharded`` (every host the PS of 1/P of the parameters: BML's PS
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
    is also asserted one hop apart before the run (:func:`server_links`).

Gradient size
    Training is real (:mod:`workers.common.model`, same code as the INA experiment).  ``--grad-mb``
    sets the synchronized vector length: the real int32 gradient tiled to that many bytes
    (:func:`workers.collective.node.tile_to`); without it the vector is the model's gradient.

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
    the INA experiment (:func:`controller.report.plot_modes`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.errors import ExperimentError
from controller.experiment import check_environment, interface_counters
from controller.files import write_json_atomic
from controller.host_processes import HostProcesses
from controller.report import mean, plot_modes, print_written, summary_table
from workers.collective.baselines import (
    VALUE_BYTES,
    bcube_nic,
    check_same_schedule_levels,
    gray_ring,
    make_schedule,
    pairs,
    predicted_sync_s,
    values_per_nic,
)
from workers.common.model import Replica, TrainConfig, train_synchronous
from workers.common.quantize import choose_frac_bits

BASELINES = ("ps", "ps-sharded", "ring-fattree", "ring-bcube")
PORT = 47100
MB = 2**20

__all__ = ["add_arguments", "run_method", "parse_bcube", "parse_sizes", "parse_baselines",
           "server_links", "fdb_entries", "exact_rounds"]


# ------------------------------------------------------------------ options


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--method bcube (BCube hierarchical synchronization, SPEC §4)")
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


def fdb_entries(graph: nx.Graph, net_plan: Any) -> list[tuple[str, str, str]]:
    """Static bridge forwarding: ``(switch, host MAC, switch interface)`` for every switch and
    every host it can reach without a host relaying (see the module docstring)."""
    from topo.models import hosts as host_names
    from topo.paths import ecmp_next_hops

    names = host_names(graph)
    hosts_dist = nx.multi_source_dijkstra_path_length(
        graph, set(names))
    out = []
    for s in net_plan.switches:
        tier = int(hosts_dist[s]) - 1
        for i, h in enumerate(names):
            hops = ecmp_next_hops(graph, s, h)
            if not hops:
                continue
            nh = hops[(i // len(hops) ** tier) % len(hops)]
            info = net_plan.hosts[h]
            if nh == h:
                mac = info.macs[info.neighbours.index(s)]
            elif len(info.macs) == 1:
                mac = info.macs[0]
            else:  # pragma: no cover - multi-NIC hosts are only reachable directly (BCube)
                raise ValueError(f"{s}: {h} has several NICs and is not a neighbour")
            out.append((s, mac, f"{s}-eth{net_plan.ports[s][nh]}"))
    return out


def exact_rounds(datas: list[dict[str, np.ndarray]], digests: list[list[str]], n_values: int
                 ) -> list[bool]:
    """Per round: every server's sum equals the wrap-around int32 sum of all quantized model
    gradients (model part directly; the whole tiled vector by sha256)."""
    import hashlib

    total = np.sum([d["q"].astype(np.int64) for d in datas], axis=0)
    wrapped = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    out = []
    for r in range(wrapped.shape[0]):
        digest = hashlib.sha256(np.resize(wrapped[r], n_values).astype(np.int32).tobytes())
        out.append(all(np.array_equal(d["sums"][r], wrapped[r]) for d in datas)
                   and all(dg[r] == digest.hexdigest() for dg in digests))
    return out


# ------------------------------------------------------------------ I/O


def start_bridges(mininet: Any, graph: nx.Graph) -> int:
    """Learning/flooding off on every bridge port, then the static FDB; returns entry count."""
    for s in mininet.plan.switches:
        for port in mininet.plan.ports[s].values():
            subprocess.run(["bridge", "link", "set", "dev", f"{s}-eth{port}", "learning", "off",
                            "flood", "off", "mcast_flood", "off", "bcast_flood", "off"],
                           check=True, capture_output=True)
    entries = fdb_entries(graph, mininet.plan)
    for _s, mac, dev in entries:
        subprocess.run(["bridge", "fdb", "replace", mac, "dev", dev, "master", "static"],
                       check=True, capture_output=True)
    return len(entries)


def run_schedule(mininet: Any, label: str, job: dict, hosts: list[str], progress: Any
                 ) -> tuple[list[dict], dict, float]:
    """Launch one process per server, barrier, wait; returns (reports, link bytes, wall s)."""
    out_dir = Path(job["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    job_file = out_dir / "job.json"
    job_file.write_text(json.dumps(job))
    start = Path(job["start_file"])
    start.unlink(missing_ok=True)
    task = progress.add_task(f"{label}: rounds", total=job["rounds"])

    def on_line(host: str, line: str) -> None:
        if host == hosts[0] and line.startswith("round "):
            progress.advance(task)

    with HostProcesses(mininet.net, label, out_dir, on_line) as nodes:
        for i, h in enumerate(hosts):
            nodes.launch(h, "workers.collective.node", str(job_file), "--server", str(i))
        nodes.wait_ready(len(hosts), "the servers")
        before = interface_counters(mininet.plan)
        t0 = time.perf_counter()
        start.touch()
        nodes.check(nodes.wait(hosts, time.monotonic()
                               + job["timeout_s"] * (job["rounds"] + 1) + 30), "server")
        wall = time.perf_counter() - t0
        after = interface_counters(mininet.plan)
    reports = [json.loads((out_dir / f"server{i}.json").read_text()) for i in range(len(hosts))]
    moved = {key: after[key] - before.get(key, 0) for key in after}
    return reports, moved, wall


def summarize_run(label: str, kind: str, job: dict, schedule: Any, nic_of: dict, hosts: list[str],
                  net_plan: Any, reports: list[dict], moved: dict, bw: float | None) -> dict:
    """One mode's record (INA results keys where they apply) plus per-NIC bytes."""
    out_dir = Path(job["out_dir"])
    P = len(hosts)
    datas = [dict(np.load(out_dir / f"server{i}.npz")) for i in range(P)]
    digests = [[r["sum_sha256"] for r in rep["rounds"]] for rep in reports]
    exact = exact_rounds(datas, digests, job["n_values"])
    R = job["rounds"]
    h0 = net_plan.hosts[hosts[0]]
    rounds = []
    for r in range(R):
        per = [rep["rounds"][r] for rep in reports]
        rounds.append({
            "time_s": max(x["sync_s"] for x in per),
            "compute_s": max(x["compute_s"] for x in per),
            "accuracy": per[0]["accuracy"],
            "loss": mean([x["loss"] for x in per]),
            "retransmissions": 0,
            "clipped": sum(x["clipped"] for x in per),
            "exact": exact[r],
            "ps_rx_bytes": sum(moved[(sw, hosts[0])] for sw in h0.neighbours) / R,
            "busiest_link_bytes": max(moved.values()) / R,
        })
    predicted_payload = values_per_nic(schedule, nic_of)
    nic_bytes = []
    for i, h in enumerate(hosts):
        info = net_plan.hosts[h]
        for nic, sw in enumerate(info.neighbours):
            pay = predicted_payload.get((i, nic), 0) * VALUE_BYTES
            app = mean([float(rep_r["bytes_sent_per_nic"].get(str(nic), 0))
                        for rep_r in reports[i]["rounds"]])
            nic_bytes.append({"server": i, "host": h, "nic": nic, "switch": sw,
                              "predicted_payload_bytes": pay, "app_bytes": app,
                              "measured_tx_bytes": moved[(h, sw)] / R,
                              "measured_rx_bytes": moved[(sw, h)] / R})
    used = [x for x in nic_bytes if x["predicted_payload_bytes"]]
    ratios = [x["measured_tx_bytes"] / x["predicted_payload_bytes"] for x in used]
    times = [x["time_s"] for x in rounds]
    return {
        "kind": kind, "servers": hosts, "n_values": job["n_values"],
        "grad_bytes": job["n_values"] * VALUE_BYTES, "rounds": rounds,
        "sync_s_median": float(np.median(times)),
        "sync_s_median_after_first": float(np.median(times[1:])) if len(times) > 1 else None,
        "predicted_sync_s": predicted_sync_s(schedule, nic_of, bw) if bw else None,
        "nic_bytes": nic_bytes,
        "tx_over_predicted_payload": {"min": min(ratios), "max": max(ratios)} if ratios else None,
        "busiest_link_bytes_total": max(moved.values()),
    }


def run_method(args: argparse.Namespace) -> dict:
    """The BCube experiment from the parsed ``run`` options; returns the results dict."""
    from mininet.nodelib import LinuxBridge
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from topo.mininet_net import build_net
    from topo.models import bcube, fat_tree
    from topo.models import hosts as host_names

    console = Console()
    N, k = parse_bcube(args.bcube)
    sizes = parse_sizes(args.grad_mb)
    selected = selected_methods(args.method, args.baselines)
    baselines = [m for m in selected if m != "bcube"]
    if args.rounds < 1:
        raise ExperimentError(f"--rounds must be >= 1, got {args.rounds}")
    if args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    if args.frame_kb < 1:
        raise ExperimentError(f"--frame-kb must be >= 1, got {args.frame_kb}")
    P = N**k
    fat_needed = [b for b in baselines if b in ("ps", "ps-sharded", "ring-fattree")]
    if fat_needed:
        try:
            ft = fat_tree(args.fattree_k)
        except Exception as exc:  # TopologyError: one line
            raise ExperimentError(f"--fattree-k: {exc}") from None
        if len(host_names(ft)) < P:
            raise ExperimentError(f"--fattree-k {args.fattree_k}: {len(host_names(ft))} hosts, "
                                  f"need {P} for BCube({N},{k})")
    check_environment("pyswitch")
    if args.target != "pyswitch":
        console.print("note: --method bcube uses Linux bridges as switches; --target ignored")
    bw = args.bw or None
    name = args.name or time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.out) / name
    train = TrainConfig(model=args.model, hidden=args.hidden, n_workers=P, rounds=args.rounds,
                        seed=args.seed)
    n_model = Replica(train, 0).params.size
    frac_bits = choose_frac_bits(8.0, P)
    n_of = {s: (n_model if s is None else max(n_model, round(s * MB / VALUE_BYTES)))
            for s in sizes}

    def size_label(s: float | None) -> str:
        return "model" if s is None else f"{s:g}MB"

    networks: list[tuple[str, nx.Graph, list[str]]] = []
    on_bcube = [m for m in selected if m in ("bcube", "ring-bcube")]
    if on_bcube:
        networks.append(("bcube", bcube(N, k), on_bcube))
    if fat_needed:
        networks.append(("fattree", fat_tree(args.fattree_k), fat_needed))
    modes: dict[str, Any] = {}
    settings = {"bcube": [N, k], "servers": P, "grad_mb": sizes, "n_values": list(n_of.values()),
                "methods": selected, "baselines": baselines, "fattree_k": args.fattree_k if fat_needed else None,
                "bw_mbps": bw, "rounds": args.rounds, "model": args.model,
                "hidden": args.hidden, "n_model": n_model, "seed": args.seed,
                "frac_bits": frac_bits, "frame_kb": args.frame_kb, "transport": "tcp",
                "switches": "linux-bridge (static fdb)"}
    console.print(f"[bold]BCube({N},{k})[/] sizing: {P} servers, model gradient {n_model} values, "
                  f"sizes {', '.join(size_label(s) for s in sizes)}, methods "
                  f"{', '.join(selected)}" + (f", {bw:g} Mbit/s links" if bw else ""))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        for net_kind, graph0, methods in networks:
            graph = nx.Graph(graph0)
            if bw:
                nx.set_edge_attributes(graph, float(bw), "bw")
            graph = nx.freeze(graph)
            hosts = host_names(graph)[:P]
            console.print(f"[bold]starting Mininet[/] ({net_kind}): "
                          f"{graph.number_of_nodes()} nodes, Linux bridges")
            mininet = build_net(graph, LinuxBridge, bw_unit_mbps=1.0 if bw else None)
            try:
                if net_kind == "bcube":
                    for lv in range(k):  # NIC l of every server is on level l's switch
                        for h in hosts:
                            nb = mininet.plan.hosts[h].neighbours[lv]
                            if graph.nodes[nb].get("level") != lv:
                                raise ExperimentError(f"{h}: NIC {lv} leads to {nb}, not a "
                                                      f"level-{lv} switch")
                start_bridges(mininet, graph)
                ips = [mininet.plan.hosts[h].ips for h in hosts]
                for method in methods:
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
                    for size in sizes:
                        n = n_of[size]
                        schedule = make_schedule(spec, n)
                        try:
                            nic_of = server_links(net_kind, schedule, mininet.plan, hosts, N, k)
                        except ValueError as exc:
                            raise ExperimentError(f"{method}: {exc}") from None
                        pred = predicted_sync_s(schedule, nic_of, bw) if bw else None
                        label = f"{method}@{size_label(size)}"
                        job = {"schedule": spec, "n_servers": P, "n_values": n,
                               "frame_values": args.frame_kb * 1024 // VALUE_BYTES,
                               "timeout_s": max(60.0, 20 * (pred or 0)),
                               "links": [[a, b, c] for (a, b), c in sorted(nic_of.items())],
                               "ips": ips, "port": PORT,
                               "train": {f: getattr(train, f) for f in train.__dataclass_fields__},
                               "frac_bits": frac_bits, "rounds": args.rounds,
                               "out_dir": str(out_dir / label),
                               "start_file": str(out_dir / label / "start")}
                        reports, moved, _wall = run_schedule(mininet, label, job, hosts, progress)
                        modes[label] = summarize_run(label, method, job, schedule, nic_of, hosts,
                                                     mininet.plan, reports, moved, bw)
                        modes[label]["method"] = method
                        modes[label]["size"] = size_label(size)
            finally:
                mininet.stop()
    reference = train_synchronous(train)
    comparison: dict[str, dict[str, Any]] = {}
    for size in sizes:
        sl = size_label(size)
        base = modes.get(f"bcube@{sl}")  # absent with --method ps / ring
        row = {}
        for m in modes.values():
            if m["size"] != sl:
                continue
            t = m["sync_s_median"]
            row[m["method"]] = {"sync_s_median": t, "predicted_sync_s": m["predicted_sync_s"],
                                "bcube_over_this": base["sync_s_median"] / t if base else None,
                                "predicted_bcube_over_this": (
                                    base["predicted_sync_s"] / m["predicted_sync_s"]
                                    if base and m["predicted_sync_s"] else None)}
        comparison[sl] = row
    results = {
        "run": name, "method": args.method, "settings": settings, "modes": modes,
        "comparison": comparison, "bml_theory_bcube_over_ps": 1 / k,
        "exact_all_rounds": all(r["exact"] for m in modes.values() for r in m["rounds"]),
        "accuracy": {"final": modes[f"{selected[0]}@{size_label(sizes[0])}"]["rounds"][-1]
                     ["accuracy"],
                     "reference": reference.final_accuracy},
    }
    write_json_atomic(out_dir / "results.json", results)
    plots = plot_modes(modes, out_dir)
    console.print(summary_table(results))
    table = Table(title=f"sync time per round (median), {', '.join(selected)} on {P} servers"
                  + (f", {bw:g} Mbit/s links" if bw else ", unshaped links"))
    for col in ("size", "method", "measured s", "predicted s", "BCube/this", "predicted ratio"):
        table.add_column(col)
    for sl, row in comparison.items():
        for method, c in row.items():
            table.add_row(sl, method, f"{c['sync_s_median']:.3f}",
                          "-" if c["predicted_sync_s"] is None else f"{c['predicted_sync_s']:.3f}",
                          "-" if c["bcube_over_this"] is None else f"{c['bcube_over_this']:.3f}",
                          "-" if c["predicted_bcube_over_this"] is None
                          else f"{c['predicted_bcube_over_this']:.3f}")
    console.print(table)
    if "bcube" in selected:
        console.print(f"BML theory: BCube sync time ≈ 1/k = {1 / k:.3f} of (sharded) PS on a "
                      "fat-tree")
    console.print(f"exact in every round: {'yes' if results['exact_all_rounds'] else 'NO'}")
    print_written(console, out_dir, plots)
    return results
