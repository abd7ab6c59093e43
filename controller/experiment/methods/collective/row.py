"""The results row of ``run --method bcube`` / ``ps`` / ``ring``
(:mod:`controller.experiment.rows`): one per schedule and gradient size (``bcube@1MB``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.experiment.rows import MethodRow

__all__ = ["CollectiveRow"]


@dataclass(frozen=True)
class CollectiveRow(MethodRow):
    """One schedule (``bcube``, ``ps``, ``ps-sharded``, ``ring-bcube``, ``ring-fattree``) at
    one gradient size (``model`` or ``NMB``)."""

    schedule: str = ""
    size: str = ""

    @classmethod
    def rows(cls, run: str, doc: dict[str, Any]) -> list[MethodRow]:
        method = str(doc.get("method") or "bcube")
        out: list[MethodRow] = []
        for name, mode in (doc.get("modes") or {}).items():
            schedule, _, size = name.partition("@")
            out.append(cls.of_mode(run, method, name, mode,
                                   schedule=str(mode.get("method") or schedule),
                                   size=str(mode.get("size") or size)))
        return out
