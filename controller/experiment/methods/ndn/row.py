"""The results row of ``run --method ndn`` (:mod:`controller.experiment.rows`): one per mode
(``ndn@N``, ``tcp-ps@N``).

A synchronous run's modes keep per-round records; an asynchronous one (``--ndn-mode async``)
has pushes instead of rounds, so its row divides the run's duration and the PS link's bytes
by ``rounds`` (the same amount of gradient work as R synchronous rounds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.experiment.rows import MethodRow

__all__ = ["NdnRow"]


@dataclass(frozen=True)
class NdnRow(MethodRow):
    """One mode of an NDN run: ``kind`` (``ndn`` or ``tcp-ps``), its worker count and
    ``ndn_mode`` (``sync`` or ``async``)."""

    kind: str = ""
    n_workers: int | None = None
    ndn_mode: str = "sync"

    @classmethod
    def rows(cls, run: str, doc: dict[str, Any]) -> list[MethodRow]:
        method = str(doc.get("method") or "ndn")
        R = (doc.get("settings") or {}).get("rounds")
        out: list[MethodRow] = []
        for name, mode in (doc.get("modes") or {}).items():
            kind = str(mode.get("kind") or name.partition("@")[0])
            n = mode.get("n_workers")
            n = n if isinstance(n, int) and not isinstance(n, bool) else None
            if (mode.get("ndn_mode") or doc.get("ndn_mode")) == "async":
                out.append(cls._async(run, method, name, mode, R, kind, n))
            else:
                out.append(cls.of_mode(run, method, name, mode, kind=kind, n_workers=n))
        return out

    @classmethod
    def _async(cls, run: str, method: str, name: str, mode: dict[str, Any], R: int | None,
               kind: str, n: int | None) -> NdnRow:
        duration, ps_total = mode.get("duration_s"), mode.get("ps_link_bytes_total")
        return cls(
            run=run, method=method,
            mode=f"{name} async {mode.get('policy', '?')} C={mode.get('soft_sync', 1)}",
            rounds=R or 0, s_per_round=duration / R if duration is not None and R else None,
            goodput_Bps=None,
            ps_bytes_per_round=ps_total / R if ps_total is not None and R else None,
            busiest_bytes_per_round=None, retransmissions=mode.get("retransmissions"),
            accuracy=mode.get("final_accuracy"), exact=None, kind=kind, n_workers=n,
            ndn_mode="async")
