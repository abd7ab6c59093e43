"""A SwitchML job: who takes part and how the pool is used.  Pure: no I/O.

Every worker of a job and the switch's rules (workers/switchml/rules.py) are built from the
same `JobConfig`, so that they agree on the pool size S (the window: one outstanding chunk
per slot), the cells the job takes at the switch and the number of contributions that
complete a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workers.switchml.constants import CELLS, MAX_WORKERS


class JobError(ValueError):
    """A job description that cannot run (one line: what is wrong)."""


@dataclass(frozen=True)
class JobConfig:
    """One SwitchML job.

    ``workers``: the worker ids (each below MAX_WORKERS, no repeats); ``pool_size``: S, the
    pool slots the job uses at the switch, which is also every worker's window;
    ``pool_base``: the first of the job's 2 * S cells at the switch; ``timeout``: seconds a
    worker waits for a chunk's RESULT before it sends the chunk again."""

    job_id: int
    workers: tuple[int, ...]
    pool_size: int
    pool_base: int = 0
    timeout: float = 0.01

    def __post_init__(self) -> None:
        if not 0 <= self.job_id < 1 << 16:
            raise JobError(f"job_id {self.job_id} outside 0..65535")
        if not self.workers:
            raise JobError("a job needs at least one worker")
        if len(set(self.workers)) != len(self.workers):
            raise JobError(f"worker ids repeat: {list(self.workers)}")
        bad = [w for w in self.workers if not 0 <= w < MAX_WORKERS]
        if bad:
            raise JobError(f"worker ids {bad} outside 0..{MAX_WORKERS - 1}")
        if not 1 <= self.pool_size <= CELLS // 2:
            raise JobError(f"pool_size {self.pool_size} outside 1..{CELLS // 2} "
                           f"(two copies of each slot in {CELLS} cells)")
        if not 0 <= self.pool_base <= CELLS - 2 * self.pool_size:
            raise JobError(f"pool_base {self.pool_base}: the job's {2 * self.pool_size} "
                           f"cells do not fit the switch's {CELLS}")
        if not self.timeout > 0:
            raise JobError(f"timeout must be > 0 seconds, got {self.timeout}")

    @property
    def num_workers(self) -> int:
        """Contributions that complete a chunk."""
        return len(self.workers)

    def to_dict(self) -> dict[str, Any]:
        """The job as JSON-ready data (what `from_dict` reads)."""
        return {"job_id": self.job_id, "workers": list(self.workers),
                "pool_size": self.pool_size, "pool_base": self.pool_base,
                "timeout": self.timeout}

    @classmethod
    def from_dict(cls, data: Any) -> JobConfig:
        """A job from parsed JSON; JobError names what is missing or wrong."""
        if not isinstance(data, dict):
            raise JobError(f"a job is an object, got {type(data).__name__}")
        unknown = set(data) - {"job_id", "workers", "pool_size", "pool_base", "timeout"}
        if unknown:
            raise JobError(f"unknown job keys: {sorted(unknown)}")
        try:
            workers = tuple(int(w) for w in data["workers"])
            return cls(int(data["job_id"]), workers, int(data["pool_size"]),
                       int(data.get("pool_base", 0)), float(data.get("timeout", 0.01)))
        except KeyError as exc:
            raise JobError(f"job key {exc.args[0]!r} missing") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, JobError):
                raise
            raise JobError(f"bad job value: {exc}") from None


__all__ = ["JobConfig", "JobError"]
