"""Bucket codec for the DDP hook, pure (no I/O, no torch): docs/ddp.md §2.

A DDP step synchronizes several gradient buckets (flat float tensors of any size).  INSync's
protocol synchronizes *rounds* of a fixed number of K-value chunks: the PS
(``workers/ina/ps.py``) completes a round when every chunk id ``0 .. n_chunks-1`` has its
RESULT, and the job's chunk schedule (docs/design.md §3.5) names an aggregation switch for each
of those ids.  The codec maps one onto the other:

* one DDP step = one INA round (``round`` = the step counter);
* the job's ``n_chunks`` (its *capacity*) is fixed for the whole run; each bucket of a step
  takes the next free range of chunk ids in bucket-index order (DDP launches buckets in index
  order, and every rank has the same bucket layout -- DDP broadcasts rank 0's rebuilt order);
* a bucket of n values takes ceil(n/K) chunks, its last chunk zero-padded;
* the step's last bucket also takes every remaining id up to the capacity, zero-filled, so the
  PS sees the whole round even when the layout changed (DDP rebuilds its buckets after the
  first step, which changes how many padded chunks the buckets need).

:func:`chunk_capacity` gives a capacity that fits any bucketing of the model's parameters.
Quantization is ``workers/common/quantize.py`` with the job's ``frac_bits``: every rank uses
the same scale, so the switches' int32 sums are exact (docs/protocol.md §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.common.quantize import dequantize, quantize
from workers.ina.constants import K as DEFAULT_K


class LayoutError(ValueError):
    """Buckets that do not fit the job's chunk capacity or arrive out of order."""


@dataclass(frozen=True)
class ChunkRange:
    """Chunk ids ``base .. base + n_chunks - 1`` of one bucket within its step."""

    base: int
    n_chunks: int
    n_values: int  # the bucket's real values; the rest of the range is zero padding

    @property
    def stop(self) -> int:
        return self.base + self.n_chunks

    def __contains__(self, chunk_id: object) -> bool:
        return isinstance(chunk_id, int) and self.base <= chunk_id < self.stop


def chunks_for(n_values: int, k: int = DEFAULT_K) -> int:
    """Chunks of k values that hold n_values (at least one: an empty bucket still has a slot)."""
    return max(1, -(-n_values // k))


def chunk_capacity(param_numels: Sequence[int], k: int = DEFAULT_K) -> int:
    """Chunk ids per step that fit ANY bucketing of parameters with these sizes.

    DDP never splits a parameter across buckets, so there are at most ``len(param_numels)``
    buckets, each wasting less than one chunk on padding: ``ceil(total/k) + len(...)``.
    """
    if not param_numels:
        raise ValueError("a model without parameters has nothing to synchronize")
    return chunks_for(int(sum(param_numels)), k) + len(param_numels)


class StepLayout:
    """Assigns each bucket of the current step its chunk range (see the module docstring).

    Call :meth:`place` for every bucket in index order; after the step's last bucket the
    layout starts over for the next step.
    """

    def __init__(self, capacity: int, k: int = DEFAULT_K) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1 chunk, got {capacity}")
        self.capacity, self.k = capacity, k
        self._next_index = 0
        self._next_chunk = 0

    def place(self, index: int, n_values: int, is_last: bool) -> ChunkRange:
        if index != self._next_index:
            raise LayoutError(f"bucket {index} arrived, expected bucket {self._next_index} "
                              "(DDP launches buckets in index order)")
        need = chunks_for(n_values, self.k)
        base = self._next_chunk
        if base + need > self.capacity:
            raise LayoutError(
                f"bucket {index} ({n_values} values) needs chunks {base}..{base + need - 1} "
                f"but the job has {self.capacity} per step; plan the job with "
                f"workers.ddp.codec.chunk_capacity(...) of the model's parameters")
        n = self.capacity - base if is_last else need
        if is_last:
            self._next_index = self._next_chunk = 0
        else:
            self._next_index += 1
            self._next_chunk += need
        return ChunkRange(base, n, n_values)


@dataclass(frozen=True)
class EncodedBucket:
    values: np.ndarray  # int32, rng.n_chunks * k values (zero padded)
    clipped: int  # values clipped to +-L (or NaN sent as 0): workers/common/quantize.py


def encode_bucket(flat: np.ndarray, rng: ChunkRange, frac_bits: int, n_workers: int,
                  k: int = DEFAULT_K) -> EncodedBucket:
    """Quantize a flat float bucket with the job's scale and zero-pad it to its chunk range."""
    x = np.asarray(flat).reshape(-1)
    if x.size != rng.n_values:
        raise ValueError(f"bucket has {x.size} values, its range was placed for {rng.n_values}")
    q = quantize(x, frac_bits, n_workers)
    out = np.zeros(rng.n_chunks * k, dtype=np.int32)
    out[: x.size] = q.values
    return EncodedBucket(out, q.clipped)


def split_chunks(values: np.ndarray, rng: ChunkRange, k: int = DEFAULT_K
                 ) -> list[tuple[int, np.ndarray]]:
    """``(chunk_id, K int32 values)`` per packet of an encoded bucket (what its GRADs carry)."""
    if values.shape != (rng.n_chunks * k,):
        raise ValueError(f"expected {rng.n_chunks * k} values, got shape {values.shape}")
    return [(rng.base + i, values[i * k:(i + 1) * k]) for i in range(rng.n_chunks)]


def reassemble(results: dict[int, np.ndarray], rng: ChunkRange, k: int = DEFAULT_K) -> np.ndarray:
    """The bucket's int32 sum, trimmed to its real values, from RESULT payloads by chunk id."""
    missing = [c for c in range(rng.base, rng.stop) if c not in results]
    if missing:
        raise KeyError(f"no RESULT for chunks {missing[:8]}{'...' if len(missing) > 8 else ''}")
    out = np.concatenate([np.asarray(results[c], dtype=np.int32) for c in range(rng.base, rng.stop)])
    return out[: rng.n_values]


def decode_mean(total: np.ndarray, n_values: int, frac_bits: int, n_workers: int) -> np.ndarray:
    """Average gradient (float32) of a bucket from its int32 sum (padding trimmed).

    Same arithmetic as the numpy workers (``workers/ina/worker_node.py``): every rank gets the
    same int32 sum, hence bit-identical floats, so replicas stay identical.
    """
    return dequantize(np.asarray(total)[:n_values], frac_bits) / np.float32(n_workers)


def bucket_schedule(schedule: Sequence[tuple[int, int, int]], rng: ChunkRange
                    ) -> list[tuple[int, int, int]]:
    """The job schedule's ``(chunk_id, agg_id, fan_in)`` entries of this bucket's range, in
    schedule order (global chunk ids)."""
    out = [(int(c), int(a), int(f)) for c, a, f in schedule if rng.base <= int(c) < rng.stop]
    if len(out) != rng.n_chunks or len({c for c, _, _ in out}) != rng.n_chunks:
        raise LayoutError(f"the schedule does not list chunks {rng.base}..{rng.stop - 1} "
                          "once each (is the job's n_values the DDP capacity?)")
    return out
