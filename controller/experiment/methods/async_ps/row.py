"""The results row of ``run --method async`` (:mod:`controller.experiment.rows`): one per
policy, over its seeds.

The asynchronous PS has no rounds: each policy runs over seeds with a push budget of
``rounds x learners``, so its row divides the run's duration and the PS link's bytes by
``rounds`` (the same amount of gradient work as R synchronous rounds) and averages over the
seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.experiment.rows import MethodRow, mean, seeds_text

__all__ = ["AsyncRow"]


@dataclass(frozen=True)
class AsyncRow(MethodRow):
    """One policy of an async run: ``policy`` and how many ``seeds`` it ran."""

    policy: str = ""
    seeds: int = 0

    @classmethod
    def rows(cls, run: str, doc: dict[str, Any]) -> list[MethodRow]:
        R = (doc.get("settings") or {}).get("rounds")
        method = str(doc.get("method") or "async")
        out: list[MethodRow] = []
        for policy, data in (doc.get("policies") or {}).items():
            runs = data.get("runs") or []
            durations = [float(r["duration_s"]) for r in runs if r.get("duration_s") is not None]
            ps_bytes = [float(r["ps_link_bytes"]) for r in runs
                        if r.get("ps_link_bytes") is not None]
            acc = [float(r["final_accuracy"]) for r in runs
                   if r.get("final_accuracy") is not None]
            t, ps = mean(durations), mean(ps_bytes)
            out.append(cls(
                run=run, method=method, mode=f"{policy} ({seeds_text(len(runs))})",
                rounds=R or 0, s_per_round=t / R if t is not None and R else None,
                goodput_Bps=None, ps_bytes_per_round=ps / R if ps is not None and R else None,
                busiest_bytes_per_round=None, retransmissions=None, accuracy=mean(acc),
                exact=None, policy=str(policy), seeds=len(runs)))
        return out
