"""The results row of ``run --method cluster`` (:mod:`controller.experiment.rows`): one per
rule, over its seeds.

The per-round records are averaged over rounds and seeds; the PS column is the central PS
host's incoming link (for the cluster rules it carries only the coordinator's messages), and
"exact" means every node's parameters equalled the in-process simulation's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.experiment.records import round_mean
from controller.experiment.rows import MethodRow, mean, seeds_text

__all__ = ["ClusterRow"]


@dataclass(frozen=True)
class ClusterRow(MethodRow):
    """One rule of a cluster run: ``rule`` and how many ``seeds`` it ran."""

    rule: str = ""
    seeds: int = 0

    @classmethod
    def rows(cls, run: str, doc: dict[str, Any]) -> list[MethodRow]:
        settings = doc.get("settings") or {}
        method = str(doc.get("method") or "cluster")
        R = settings.get("rounds") or 0
        g, ps = settings.get("grad_bytes"), settings.get("central_ps")
        out: list[MethodRow] = []
        for rule, data in (doc.get("rules") or {}).items():
            runs = data.get("runs") or []
            times = [t for r in runs
                     if (t := round_mean(r.get("rounds") or [], "time_s")) is not None]
            t = mean(times)
            into_ps = [float(v) for r in runs for k, v in (r.get("link_bytes") or {}).items()
                       if ps and k.endswith(f"->{ps}")]
            busiest = [float(r["busiest_link_bytes_per_round"]) for r in runs
                       if r.get("busiest_link_bytes_per_round") is not None]
            acc = [float(r["final_accuracy"]) for r in runs
                   if r.get("final_accuracy") is not None]
            same = [bool(r["matches_simulation"]) for r in runs if "matches_simulation" in r]
            into = mean(into_ps)
            out.append(cls(
                run=run, method=method, mode=f"{rule} ({seeds_text(len(runs))})", rounds=R,
                s_per_round=t, goodput_Bps=g / t if g and t else None,
                ps_bytes_per_round=into / R if into is not None and R else None,
                busiest_bytes_per_round=mean(busiest), retransmissions=None,
                accuracy=mean(acc), exact=all(same) if same else None, rule=str(rule),
                seeds=len(runs)))
        return out
