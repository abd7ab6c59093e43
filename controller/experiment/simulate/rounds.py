"""A job's rounds as a method driven in virtual time records them (the design suite's ring
and SwitchML): per worker its finished rounds' records, per round whether every worker
applied the exact sum, and the packets sent again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["JobRounds"]


@dataclass
class JobRounds:
    """One job's finished rounds (``records[worker][round]``, each with ``time_s``)."""

    job: int
    records: list[list[dict[str, Any]]]  # [worker][round]
    exact: list[bool]  # per round
    resent: int = 0  # packets sent again, finished rounds or not

    @property
    def complete(self) -> bool:
        """Every worker finished every round."""
        return all(len(w) == len(self.exact) for w in self.records)

    @property
    def time_per_round_s(self) -> list[float]:
        """Per round, the slowest worker's time (as INA's rounds are read)."""
        n = min(len(r) for r in self.records)
        return [max(w[r]["time_s"] for w in self.records) for r in range(n)]

    @property
    def retransmissions(self) -> int:
        return self.resent
