"""Integer arithmetic of INA packets, shared by the state machines, the simulator and tests.

The record of one decoded packet, :class:`workers.ina.wire.InaPacket`, lives beside the header
layout it mirrors (``workers/ina/wire.py``, with what each field means per message type);
this module holds what the PS and the switches compute with a packet's worker set and
values: the int32 wrap-around sum, and bitmaps of worker ids.
"""

from __future__ import annotations

import numpy as np

from workers.ina.constants import MAX_WORKERS


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


def fold_mask(mask: int) -> int:
    """A worker set as a RESULT's bitmap carries it: worker i <-> bit i mod MAX_WORKERS (the
    set itself when every id is below MAX_WORKERS, as in a flat job)."""
    out = 0
    while mask:
        out |= mask & ((1 << MAX_WORKERS) - 1)
        mask >>= MAX_WORKERS
    return out


def mask_of(worker_ids: list[int] | range) -> int:
    """Bitmap with bit i set for each worker id i."""
    m = 0
    for w in worker_ids:
        m |= 1 << int(w)
    return m


def prober(members: list[int] | range, chunk: int, round_: int) -> int:
    """The member that probes chunk ``chunk`` of round ``round_`` (docs/protocol.md §6,
    "NACKs"): it retransmits a stuck chunk first, the others wait for the PS's NACK.  One
    per chunk, spread over the members and rotated by round; workers and PS agree on it."""
    ms = sorted(members)
    return ms[(chunk + round_) % len(ms)]
