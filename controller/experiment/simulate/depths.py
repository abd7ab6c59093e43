"""The depths the simulated links' queues reached (docs/simulate.md, "Queue depths"): pure
logic over a histogram the network fills (:class:`~controller.experiment.simulate.network.
SimNetwork` ``depth_hist``), no I/O.

A frame offered to a link direction finds ``d`` frames in its queue, the one on the wire
included: what BMv2's ``enq_qdepth`` reports for it and what ``--ecn-packets`` compares with
the threshold.  A frame the full queue drops found ``queue`` frames.  The histogram counts,
for every ``d``, the frames of one launch that found ``d``; its percentiles are those of the
queueing the launch's frames met (idle links add nothing: no frame found them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["QueueDepths", "depth_percentile", "queue_depths"]


@dataclass(frozen=True)
class QueueDepths:
    """Frames found in a link's queue by the frames offered to it (module docstring)."""

    frames: int  # frames offered to a link queue (dropped ones included)
    p50: int
    p99: int
    max: int
    deepest: str | None  # "a->b": a link direction whose queue reached ``max`` (None: no frame)

    def record(self) -> dict[str, Any]:
        """As ``results.json``'s ``sim.queue_depth``."""
        return asdict(self)


def depth_percentile(hist: Sequence[int], q: float) -> int:
    """The nearest-rank ``q``-th percentile (0 < q ≤ 100) of the depths counted in ``hist``
    (``hist[d]`` frames found ``d``): the smallest ``d`` with at least ``ceil(q/100 × N)`` of
    the ``N`` frames at or below it; 0 for an empty histogram."""
    if not 0 < q <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {q}")
    n = sum(hist)
    if n == 0:
        return 0
    rank = -(-q * n // 100)  # ceil without float rounding for integral q
    seen = 0
    for d, c in enumerate(hist):
        seen += c
        if seen >= rank:
            return d
    raise AssertionError("unreachable: the ranks end at n")


def queue_depths(hist: Sequence[int], deepest: str | None = None) -> QueueDepths:
    """The record of one launch's histogram; ``deepest`` names the link that reached the
    largest depth (the network knows which)."""
    n = sum(hist)
    top = max((d for d, c in enumerate(hist) if c), default=0)
    return QueueDepths(frames=n, p50=depth_percentile(hist, 50),
                       p99=depth_percentile(hist, 99), max=top,
                       deepest=deepest if n else None)
