"""The results row of ``run --method ddp`` (:mod:`controller.experiment.rows`): one per mode
(``ina``, ``ps_only``, ``gloo``), its training steps as rounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.experiment.rows import MethodRow, RunSettings, workers_text

__all__ = ["DdpRow"]


@dataclass(frozen=True)
class DdpRow(MethodRow):
    """One mode of a DDP run; ``seed`` its training seed."""

    seed: int | None = None

    @classmethod
    def rows(cls, run: str, doc: dict[str, Any]) -> list[MethodRow]:
        method = str(doc.get("method") or "ddp")
        out: list[MethodRow] = []
        for name, mode in (doc.get("modes") or {}).items():
            seed = mode.get("seed")
            out.append(cls.of_mode(run, method, name, mode,
                                   seed=seed if isinstance(seed, int) else None))
        return out

    @classmethod
    def run_settings(cls, doc: dict[str, Any]) -> RunSettings:
        base = super().run_settings(doc)
        s = doc.get("settings") or {}

        def text(v: Any) -> str | None:
            return None if v is None else f"{v:g}" if isinstance(v, float) else str(v)
        return RunSettings(
            topo=base.topo, bw=base.bw,
            workers=workers_text(s["ranks"]) if isinstance(s.get("ranks"), list)
            else base.workers, rounds=text(s.get("steps")),
            model=base.model, loss=base.loss, budget=text(s.get("budget")),
            window=text(s.get("window")), timeout=text(s.get("timeout")),
            network=base.network)
