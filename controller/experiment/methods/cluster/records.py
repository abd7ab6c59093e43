"""The figures of one ``run --method cluster`` trial (:mod:`controller.experiment.methods.cluster`):
accuracy and round times from the nodes' reports, the assignment of every period, the bytes
the message pattern predicts per link next to the measured ones, and the check against the
in-process simulation (docs/design.md §7)."""

from __future__ import annotations

from typing import Any

import numpy as np

from controller.errors import ExperimentError
from workers.cluster.job import ClusterJob

__all__ = ["SUMMARY_KEYS", "predicted_link_bytes", "summarize_run"]


def predicted_link_bytes(graph: Any, rule: str, hosts: list[str], periods: list[dict],
                         batches: int, grad_bytes: float, central_ps: str
                         ) -> dict[tuple[str, str], float]:
    """Payload bytes per directed link of the run's message pattern (gradients, updates and
    exchanged averages; not headers, features, assignments or handovers)."""
    from workers.cluster.sync import (
        central_period_messages,
        cluster_period_messages,
    )
    from workers.cluster.sync import (
        link_bytes as pattern_bytes,
    )

    msgs: list[tuple[str, str, float]] = []
    for rec in periods:
        if rule == "central":
            msgs += central_period_messages(hosts, central_ps, batches, grad_bytes)
            continue
        labels, ps = rec["labels"], rec["all_ps"]
        members = [[hosts[i] for i, lab in enumerate(labels) if lab == c]
                   for c in range(len(ps))]
        msgs += cluster_period_messages(members, [hosts[s] for s in ps], batches, grad_bytes)
    return pattern_bytes(graph, msgs)


def _busiest(loads: dict[tuple[str, str], float]) -> tuple[tuple[str, str], float]:
    from workers.cluster.sync import busiest_link

    return busiest_link(loads)


def summarize_run(rule: str, seed: int, job: ClusterJob, reports: list[dict], hub: dict,
                  t_start: float, moved: dict[tuple[str, str], int], graph: Any,
                  central_ps: str, params: list[np.ndarray]) -> dict[str, Any]:
    """One run's figures from its processes' reports (times relative to ``t_start``)."""
    from workers.cluster.sync import simulate

    P, B, N = job.periods, job.batches, job.n
    rounds_total = P * B
    curve = []
    for p in range(P):
        recs = [r["periods"][p] for r in reports]
        k = max(x["cluster"] for x in recs) + 1
        per_cluster = [float(np.mean([x["accuracy"] for x in recs if x["cluster"] == c]))
                       for c in range(k)]
        curve.append({"period": p, "round": (p + 1) * B,
                      "time_s": max(x["time"] for x in recs) - t_start,
                      "accuracy": float(np.mean([x["accuracy"] for x in recs])),
                      "cluster_accuracy": per_cluster})
    ends = [max(r["rounds"][i]["time"] for r in reports) for i in range(rounds_total)]
    round_times = [e - s for s, e in zip([t_start, *ends[:-1]], ends, strict=True)]
    assignments = []
    for p in range(P):
        recs = [r["periods"][p] for r in reports]
        first = recs[0]
        if any((x["labels"], x["all_ps"]) != (first["labels"], first["all_ps"]) for x in recs):
            raise ExperimentError(f"{rule} seed {seed}: nodes disagree on the clustering of "
                                  f"period {p}")
        assignments.append({"period": p, "epoch": first["epoch"], "labels": first["labels"],
                            "ps": first["all_ps"] if rule != "central" else [central_ps],
                            "ps_hosts": [job.workers[s] for s in first["all_ps"]]
                            if rule != "central" else [central_ps],
                            "new_epoch": first["new_epoch"], "reset": first["reset"]})
    contributions = []
    if rule != "central":
        logs = {(e["period"], e["cluster"]): e for r in reports for e in r["ps_log"]}
        for a in assignments:
            k = len(a["ps"])
            rows = [logs.get((a["period"], c)) for c in range(k)]
            contributions.append({
                "period": a["period"],
                "alpha": [x["alpha"] if x else None for x in rows],
                "accumulated": [x["contributions"] if x else None for x in rows]})
    total = sum(moved.values())
    busiest = max(moved, key=lambda lk: moved[lk])
    pred = predicted_link_bytes(graph, rule, job.workers, reports[0]["periods"],
                                B, 4.0 * params[0].size, central_ps)
    pred_link, pred_bytes = _busiest(pred)
    # Re-election moves the PS load between hosts, so the whole-run busiest link is lighter than
    # the busiest link of one period: the latter (payload) is reported too.
    peak = max(_busiest(predicted_link_bytes(graph, rule, job.workers, [rec], B,
                                             4.0 * params[0].size, central_ps))[1]
               for rec in reports[0]["periods"]) / B
    # Bit-exactness against the in-process simulation (same partition in every period).
    sim_match = None
    labels = assignments[0]["labels"]
    if all(a["labels"] == labels for a in assignments):
        sim = simulate(job.train, labels, rule, P, B, job.reelect,  # type: ignore[arg-type]
                       seed=job.seed, normalization=job.normalization,  # type: ignore[arg-type]
                       include_current=job.include_current)
        sim_match = all(np.array_equal(a, b) for a, b in zip(params, sim.params, strict=True))
        if rule != "central":
            sim_match = sim_match and [list(x) for x in sim.ps] == [a["ps"] for a in assignments]
    members_identical = all(
        np.array_equal(params[i], params[j])
        for a in assignments[-1:] for i in range(N) for j in range(N)
        if a["labels"][i] == a["labels"][j])
    return {
        "seed": seed,
        "final_accuracy": curve[-1]["accuracy"],
        "duration_s": curve[-1]["time_s"],
        "round_time_s_median": float(np.median(round_times)),
        "busiest_link": list(busiest),
        "busiest_link_bytes_per_round": moved[busiest] / rounds_total,
        "predicted_busiest_link": list(pred_link),
        "predicted_busiest_link_bytes_per_round": pred_bytes / rounds_total,
        "predicted_peak_period_busiest_bytes_per_round": peak,
        "bytes_per_round_all_links": total / rounds_total,
        "matches_simulation": sim_match,
        "members_identical": members_identical,
        "curve": curve,
        "rounds": [{"round": i, "time_s": t, "loss": float(np.mean([r["rounds"][i]["loss"]
                                                                    for r in reports]))}
                   for i, t in enumerate(round_times)],
        "assignments": assignments,
        "epochs": hub.get("epochs", []),
        "feature_history": hub.get("history"),
        "contributions": contributions,
        "sent_bytes_by_message": _sum_dicts([r["sent_bytes"] for r in [*reports, hub]]),
        "link_bytes": {f"{a}->{b}": v for (a, b), v in sorted(moved.items()) if v},
    }


def _sum_dicts(ds: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in ds:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


SUMMARY_KEYS = ("final_accuracy", "duration_s", "round_time_s_median",
                "busiest_link_bytes_per_round", "predicted_busiest_link_bytes_per_round",
                "predicted_peak_period_busiest_bytes_per_round", "bytes_per_round_all_links")
