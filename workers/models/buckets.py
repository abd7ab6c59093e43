"""DDP's gradient buckets, computed as PyTorch's reducer computes them (pure).

``torch.nn.parallel.DistributedDataParallel`` hands gradients to the all-reduce (or to a
communication hook, :mod:`workers.ddp.hook`) bucket by bucket.  From its second iteration on
(after ``rebuild_buckets``) the tensors are taken in the order their gradients became ready
-- for a model run front to back, the reverse of registration order -- and packed greedily:
a tensor joins the open bucket; when the bucket then holds at least the current limit it is
closed and the next limit applies.  The limits are ``[first, cap, cap, ...]``: the first
bucket closes at 1 MiB (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``), every other at
``bucket_cap_mb`` = 25 MiB by default.  A tensor is never split, so a bucket can exceed its
limit by up to one tensor.  (A test compares this with torch's own
``_compute_bucket_assignment_by_size`` on the three models.)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MIB", "FIRST_BUCKET_BYTES", "BUCKET_CAP_BYTES", "ddp_buckets", "bucket_numels"]

MIB = 1 << 20
FIRST_BUCKET_BYTES = 1 * MIB  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
BUCKET_CAP_BYTES = 25 * MIB  # DDP's bucket_cap_mb default (25)


def ddp_buckets(numels: Sequence[int], *, elem_bytes: int = 4,
                first_bytes: float = FIRST_BUCKET_BYTES,
                cap_bytes: float = BUCKET_CAP_BYTES,
                ready_order: Sequence[int] | None = None) -> list[list[int]]:
    """The buckets (lists of tensor indices, in the order DDP reduces them) for tensors of
    ``numels`` elements of ``elem_bytes`` each, their gradients ready in ``ready_order``
    (default: reverse registration order).  ``first_bytes``/``cap_bytes`` may be fractional
    (a scaled emulation divides both by its scale)."""
    if first_bytes <= 0 or cap_bytes <= 0:
        raise ValueError("bucket limits must be > 0 bytes")
    order = list(reversed(range(len(numels)))) if ready_order is None else list(ready_order)
    if sorted(order) != list(range(len(numels))):
        raise ValueError("ready_order must list every tensor index once")
    buckets: list[list[int]] = []
    current: list[int] = []
    size, limit = 0, first_bytes
    for i in order:
        current.append(i)
        size += numels[i] * elem_bytes
        if size >= limit:
            buckets.append(current)
            current, size, limit = [], 0, cap_bytes
    if current:
        buckets.append(current)
    return buckets


def bucket_numels(numels: Sequence[int], buckets: Sequence[Sequence[int]]) -> list[int]:
    """Elements per bucket."""
    return [sum(numels[i] for i in b) for b in buckets]
