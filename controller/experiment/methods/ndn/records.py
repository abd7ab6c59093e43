"""The figures of ``run --method ndn`` (:mod:`controller.experiment.methods.ndn`), pure: option
parsing, the routers' configurations, per-round records of a sync run, an async run's pushes and
staleness, the routers' counters and the NDN-vs-TCP comparison per worker count."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from controller.errors import ExperimentError
from controller.experiment.methods.common import parse_slow, staleness_histogram
from controller.experiment.report import mean

__all__ = ["parse_sweep", "router_configs", "gpu_slowdowns", "impair_text", "sum_counters",
           "ndn_rounds", "comparison", "router_fields", "async_summary"]


def parse_sweep(text: str) -> list[int]:
    """``"4,8,12"`` -> [4, 8, 12]; empty -> []."""
    out: list[int] = []
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise ExperimentError(f"--ndn-sweep {text!r}: {part!r} is not a worker count >= 1")
        if int(part) in out:
            raise ExperimentError(f"--ndn-sweep {text!r}: {part} appears twice")
        out.append(int(part))
    return out


def router_configs(graph: nx.Graph, net_plan: Any, producers: list[str], cs_capacity: int,
                   impair: str, out_dir: Path) -> dict[str, dict[str, Any]]:
    """Per switch: the router config (FIB toward every producer, CS size, impairment, where to
    write its counters) -- everything but the ports, which the switch node fills in."""
    from workers.ndn.link import fib_routes

    out = {}
    for s in net_plan.switches:
        try:
            fib = fib_routes(graph, s, net_plan.ports[s], producers)
        except ValueError as exc:
            raise ExperimentError(str(exc)) from None
        out[s] = {"name": s, "fib": fib, "cs_capacity": cs_capacity, "impair": impair,
                  "counters_file": str(out_dir / f"router-{s}.json")}
    return out


def gpu_slowdowns(spec: str, workers: list[str]) -> list[float]:
    """``--ndn-slow`` per GPU, parsed as the async method's ``--async-slow``."""
    return parse_slow(spec, workers, option="--ndn-slow")


def impair_text(args: argparse.Namespace) -> str:
    """The ``--loss/--dup/--reorder`` impairment of every router port ('' = none)."""
    if not (args.loss or args.dup or args.reorder):
        return ""
    return f"loss={args.loss},dup={args.dup},reorder={args.reorder},seed={args.seed}"


def sum_counters(reports: dict[str, dict]) -> dict[str, int]:
    """Router counters summed over routers."""
    total: dict[str, int] = {}
    for rep in reports.values():
        for k, v in rep["counters"].items():
            total[k] = total.get(k, 0) + v
    return total


def ndn_rounds(ps: dict, gpus: list[dict], reference_acc: list[float], tap: dict,
               moved: dict[tuple[str, str], int], ps_host: str, tor: str) -> list[dict]:
    """Per-round records of an NDN run from the PS's and GPUs' reports and the tap."""
    versions = ps["versions"]
    R = len(versions) - 1
    dist = tap["bytes_by_version"].get("ndn-distribute", {})
    fetch = tap["bytes_by_version"].get("ndn-fetch", {})
    by_gpu = [{r["version"]: r for r in g["received"]} for g in gpus]
    rounds = []
    for r in range(R):
        v = versions[r + 1]
        got = [b.get(v["version"]) for b in by_gpu]
        # re-expressions during round r: cumulative counts at the end of round r minus at its
        # start (PS: when it published v=r+1 / v=r; GPU: when it received them)
        prev = [b.get(v["version"] - 1, {}).get("retx_total", 0) for b in by_gpu]
        retx = (v["retx_total"] - versions[r]["retx_total"]
                + sum(x["retx_total"] - p for x, p in zip(got, prev, strict=True)
                      if x is not None))
        rounds.append({
            "time_s": v["time"] - versions[r]["time"],
            "accuracy": v["accuracy"],
            "loss": mean([g["rounds"][r]["loss"] for g in gpus if len(g["rounds"]) > r]),
            "exact": (all(x is not None and x["sha256"] == v["sha256"] for x in got)
                      and v["accuracy"] == reference_acc[r]),
            "params_equal": all(x is not None and x["sha256"] == v["sha256"] for x in got),
            "recovered": sum(1 for x in got if x is not None and x["recovered"]),
            "dist_bytes": dist.get(str(v["version"]), 0),
            "fetch_bytes": fetch.get(str(v["version"]), 0),
            "ps_rx_bytes": moved[(tor, ps_host)] / R,
            "ps_tx_bytes": moved[(ps_host, tor)] / R,
            "busiest_link_bytes": max(moved.values()) / R,
            "retransmissions": retx,
            "clipped": sum(g["rounds"][r]["clipped"] for g in gpus if len(g["rounds"]) > r),
        })
    return rounds


def comparison(modes: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Per N: distribution bytes per round on the PS link, NDN vs TCP PS, and the ratio."""
    out: dict[str, dict[str, Any]] = {}
    for m in modes.values():
        row = out.setdefault(str(m["n_workers"]), {"n_workers": m["n_workers"]})
        row[f"{m['kind']}_dist_bytes_per_round"] = m["dist_bytes_per_round"]
        row[f"{m['kind']}_ps_tx_bytes_per_round"] = mean([r["ps_tx_bytes"] for r in m["rounds"]])
        row[f"{m['kind']}_round_s_median"] = m["round_s_median"]
    for row in out.values():
        t, n = row.get("tcp-ps_dist_bytes_per_round"), row.get("ndn_dist_bytes_per_round")
        row["dist_ratio_tcp_over_ndn"] = t / n if t and n else None
        row["ratio_over_n"] = (row["dist_ratio_tcp_over_ndn"] / row["n_workers"]
                               if row["dist_ratio_tcp_over_ndn"] else None)
    return out


def router_fields(routers: dict[str, dict]) -> dict[str, Any]:
    """The routers' exit reports, summed and per router (both modes)."""
    return {
        "router_counters": sum_counters(routers),
        "routers": {s: {k: r[k] for k in ("counters", "tables", "ppit", "non_ndn_frames",
                                          "bad_frames", "impairments")}
                    for s, r in routers.items()},
        "ppit_faces_at_exit": sum(r["tables"]["ppit_faces"] for r in routers.values()),
        "impairment_dropped": sum(d[x]["dropped"] for r in routers.values()
                                  for d in r["impairments"].values()
                                  for x in ("rx", "tx") if d.get(x)),
    }


def async_summary(ps: dict, gpus: list[dict], workers: list[str]) -> dict[str, Any]:
    """An async run's figures from the PS's and GPUs' reports (times from the PS's start).

    ``staleness`` = versions a gradient missed = current version - the version it was trained
    from (docs/design.md §5's sigma - 1); accuracy is the PS's test accuracy after every update.
    """
    t0 = ps["start_time"]
    sha_of = {v["version"]: v["sha256"] for v in ps["versions"]}
    curve = [{"updates": v["version"], "time_s": v["time"] - t0, "accuracy": v["accuracy"]}
             for v in ps["versions"]]
    # ps.json names the worker "worker"; results.json keeps its "gpu" key
    pushes = [{**{"gpu" if k == "worker" else k: v for k, v in p.items()},
               "time_s": p["time"] - t0} for p in ps["pushes"]]
    per_gpu = []
    for name, g in zip(workers, gpus, strict=True):
        st = [p["staleness"] for p in pushes if p["gpu"] == name]
        per_gpu.append({
            "gpu": name, "slowdown": g["slowdown"], "pushes": len(st),
            "handed_over": g["pushes"], "staleness_histogram": staleness_histogram(st),
            "mean_staleness": float(np.mean(st)) if st else None,
            "max_staleness": int(max(st)) if st else None,
            "mean_kappa": mean([p["kappa"] for p in pushes if p["gpu"] == name]) if st
            else None,
            "recoveries": g["recoveries"], "probe_expiries": g["probe_expiries"]})
    return {
        "pushes": len(pushes), "updates": ps["versions"][-1]["version"],
        "rejected": ps["rejected"],
        "final_accuracy": curve[-1]["accuracy"], "duration_s": curve[-1]["time_s"],
        "mean_staleness": mean([p["staleness"] for p in pushes]) if pushes else None,
        "staleness_histogram": staleness_histogram([p["staleness"] for p in pushes]),
        # every version a GPU trained from / finished with is the one the PS published
        "params_equal": all(r["sha256"] == sha_of.get(r["version"])
                            for g in gpus for r in g["received"]),
        "curve": curve, "per_push": pushes, "per_gpu": per_gpu,
    }
