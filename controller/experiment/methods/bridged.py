"""Linux-bridge networks and collective schedules on them: what the BCube runner and the NDN
runner's TCP PS baseline share (docs/design.md §4).

Bridges run with learning, flooding and broadcast flooding off and a static forwarding entry
per host MAC (:func:`fdb_entries`; :mod:`controller.experiment.methods.collective` argues why), and one
:mod:`workers.collective.worker_node` process per server runs a schedule
(:func:`run_schedule`); :func:`summarize_run` turns its reports into a mode record with the
INA experiment's per-round keys plus per-NIC bytes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.experiment.report import mean
from controller.experiment.runner import Launch, Node, Run
from workers.collective.baselines import VALUE_BYTES, predicted_sync_s, values_per_nic

__all__ = ["fdb_entries", "exact_rounds", "start_bridges", "run_schedule", "summarize_run"]


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


def run_schedule(run: Run, mininet: Any, label: str, job: dict, hosts: list[str]
                 ) -> tuple[list[dict], dict, float]:
    """Launch one process per server, barrier, wait; returns (reports, link bytes, wall s)."""
    out_dir = Path(job["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    job_file = out_dir / "job.json"
    job_file.write_text(json.dumps(job))
    task = run.progress.add_task(f"{label}: rounds", total=job["rounds"])

    def on_line(host: str, line: str) -> None:
        if host == hosts[0] and line.startswith("round "):
            run.progress.advance(task)

    done = run.launch(mininet, Launch(
        label=label, out_dir=out_dir,
        nodes=[Node(h, "workers.collective.worker_node", (str(job_file), "--worker", str(i)))
               for i, h in enumerate(hosts)],
        start_file=Path(job["start_file"]),
        timeout_s=job["timeout_s"] * (job["rounds"] + 1), count_from="start",
        on_line=on_line))
    reports = [json.loads((out_dir / f"worker{i}.json").read_text()) for i in range(len(hosts))]
    return reports, done.moved, done.wall_s


def summarize_run(label: str, kind: str, job: dict, schedule: Any, nic_of: dict, hosts: list[str],
                  net_plan: Any, reports: list[dict], moved: dict, bw: float | None) -> dict:
    """One mode's record (INA results keys where they apply) plus per-NIC bytes."""
    out_dir = Path(job["out_dir"])
    P = len(hosts)
    datas = [dict(np.load(out_dir / f"worker{i}.npz")) for i in range(P)]
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


