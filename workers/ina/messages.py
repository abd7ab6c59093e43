"""Transport-neutral record of one decoded INA packet (docs/design.md §3.6).

:class:`InaPacket` is what the PS and worker state machines (``workers/ina/ps.py``,
``workers/ina/worker.py``) consume and produce.  They never see bytes: the protocol codec
(``workers/ina/wire.py``) turns an :class:`InaPacket` into an Ethernet/IPv4/UDP/INA frame and
back: its ``InaHeader`` has the same fields in the same order (``type`` is ``msg_type``
there); :meth:`InaPacket.header_tuple` and :meth:`InaPacket.from_header` convert.

Field meanings
    ``type``      TYPE_GRAD (worker -> aggregation point), TYPE_PARTIAL (aggregation point ->
                  next point / PS) or TYPE_RESULT (PS -> switches -> workers).
    ``flags``     bit set of FLAG_RETRANSMIT, FLAG_FALLBACK, FLAG_INCOMPLETE.
    ``job_id``    training job.
    ``round``     synchronization round (one full gradient per round).
    ``chunk_id``  which K-value slice of the gradient.
    ``agg_id``    target aggregation switch; 0 (AGG_ID_PS) = the PS itself.
    ``fan_in``    contributions the target switch waits for before emitting a PARTIAL.
    ``count``     contributions summed into ``values`` (= popcount(bitmap) for a valid packet).
    ``worker_id`` sender worker (GRAD); informational on PARTIAL/RESULT.
    ``bitmap``    set of workers whose gradients are summed in ``values``; bit i <-> worker i.
    ``values``    K int32 fixed-point values: sum over ``bitmap`` of the workers' quantized
                  gradient slice, with int32 wrap-around (two's complement, as the switches add).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from workers.ina.constants import FLAG_RETRANSMIT, TYPE_GRAD, TYPE_PARTIAL, TYPE_RESULT

TYPE_NAMES = {TYPE_GRAD: "GRAD", TYPE_PARTIAL: "PARTIAL", TYPE_RESULT: "RESULT"}


@dataclass(frozen=True, slots=True)
class InaPacket:
    """One INA packet, decoded.  ``values`` is a 1-D ``np.int32`` array of length K."""

    type: int
    flags: int
    job_id: int
    round: int
    chunk_id: int
    agg_id: int
    fan_in: int
    count: int
    worker_id: int
    bitmap: int
    values: np.ndarray

    def with_flags(self, extra: int) -> InaPacket:
        """A copy with the flag bits ``extra`` set in addition to the current ones."""
        return replace(self, flags=self.flags | extra)

    def header_tuple(self) -> tuple[int, ...]:
        """Header fields in wire order (``workers.ina.wire.InaHeader``'s order and names,
        where ``type`` is called ``msg_type``): ``InaHeader(*pkt.header_tuple())``."""
        return (self.type, self.flags, self.job_id, self.round, self.chunk_id, self.agg_id,
                self.fan_in, self.count, self.worker_id, self.bitmap)

    @classmethod
    def from_header(cls, header: Any, values: np.ndarray) -> InaPacket:
        """From a decoded ``workers.ina.wire.InaHeader`` (any object with its field names)."""
        h = header
        return cls(h.msg_type, h.flags, h.job_id, h.round, h.chunk_id, h.agg_id, h.fan_in,
                   h.count, h.worker_id, h.bitmap, values)

    @property
    def retransmitted(self) -> bool:
        return bool(self.flags & FLAG_RETRANSMIT)

    def __repr__(self) -> str:  # short, for test failure messages
        kind = TYPE_NAMES.get(self.type, str(self.type))
        return (
            f"InaPacket({kind} flags={self.flags} job={self.job_id} r={self.round} "
            f"c={self.chunk_id} agg={self.agg_id} fan_in={self.fan_in} count={self.count} "
            f"w={self.worker_id} bitmap={self.bitmap:#x})"
        )


def wrap_sum(arrays: list[np.ndarray]) -> np.ndarray:
    """Element-wise sum of int32 arrays with int32 wrap-around (what a switch computes).

    Summed in int64 (exact for up to 2^32 addends) and reduced mod 2^32 to int32 by a
    two's-complement cast, so the result is bit-identical to any order of int32 adds.
    """
    if not arrays:
        raise ValueError("wrap_sum of no arrays")
    if len(arrays) == 1:
        return arrays[0].astype(np.int32)
    total = np.sum(np.stack(arrays).astype(np.int64), axis=0)
    return total.astype(np.int32)


def popcount(x: int) -> int:
    """Number of set bits (workers) in a bitmap."""
    return int(x).bit_count()


def mask_of(worker_ids: list[int] | range) -> int:
    """Bitmap with bit i set for each worker id i."""
    m = 0
    for w in worker_ids:
        m |= 1 << int(w)
    return m
