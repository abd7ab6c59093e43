"""Messages of the clustered temporary-PS protocol (docs/design.md §7) and their bytes.

Pure: message objects <-> bodies.  Framing on TCP is the length prefix of
:mod:`workers.common.framing` (:func:`~workers.common.framing.frame`,
:class:`~workers.common.framing.FrameDecoder`) and arrays use its layout
(:func:`~workers.common.framing.encode_array`), as the async PS's messages do, so one
reassembler and one array format serve both protocols.

Body: ``magic "CL" (2 bytes) ++ version (uint8) ++ type (uint8) ++ fields``, numbers big endian.

=========  ====  ==============================================================================
message    type  fields (sender -> receiver)
=========  ====  ==============================================================================
Features   1     worker u32, period u32, values (float64 array)    worker -> coordinator
Assign     2     period u32, epoch u32, flags u8 (bit0 new epoch, bit1 reset), silhouette f64
                 (NaN = none), n u16, labels n x u16, k u16, ps k x u32
                                                                   coordinator -> every worker
Grad       3     period u32, batch u32, worker u32, gradient (float32 array)  member -> PS
Update     4     period u32, batch u32, gradient (float32 array)   PS -> every member
PeerAvg    5     period u32, cluster u16, average (float32 array)  PS -> every other PS
Handover   6     period u32, cluster u16, periods u32, contributions (float64 array, K x K
                 row-major)                                        old PS -> newly elected PS
Params     7     period u32, params (float32 array), velocity (float32 array, the optimizer's
                 momentum)                    PS -> every member, when a re-clustering resets
=========  ====  ==============================================================================
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from workers.common.framing import (
    HEAD,
    TransportError,
    decode_array,
    encode_array,
    expect_end,
    read_fixed,
    read_head,
)

__all__ = ["Assign", "ClusterMessage", "Features", "Grad", "Handover", "Params", "PeerAvg",
           "Update", "decode", "encode"]

MAGIC = b"CL"
VERSION = 1
_FEATURES = struct.Struct("!II")
_ASSIGN = struct.Struct("!IIBdH")
_GRAD = struct.Struct("!III")
_UPDATE = struct.Struct("!II")
_PEER = struct.Struct("!IH")
_HANDOVER = struct.Struct("!IHI")
_PARAMS = struct.Struct("!I")
T_FEATURES, T_ASSIGN, T_GRAD, T_UPDATE, T_PEER, T_HANDOVER, T_PARAMS = range(1, 8)


@dataclass(frozen=True)
class Features:
    worker: int
    period: int
    values: np.ndarray  # float64, the profile's feature order


@dataclass(frozen=True)
class Assign:
    """The clustering in force for ``period``: worker i is in cluster ``labels[i]`` whose
    temporary PS is worker ``ps[labels[i]]``."""

    period: int
    epoch: int
    labels: tuple[int, ...]
    ps: tuple[int, ...]
    new_epoch: bool = False  # first period of an election epoch
    reset: bool = False  # the partition changed: contributions start from zero
    silhouette: float | None = None


@dataclass(frozen=True)
class Grad:
    period: int
    batch: int
    worker: int
    grad: np.ndarray


@dataclass(frozen=True)
class Update:
    period: int
    batch: int
    grad: np.ndarray


@dataclass(frozen=True)
class PeerAvg:
    period: int
    cluster: int
    avg: np.ndarray


@dataclass(frozen=True)
class Handover:
    """The accumulated contributions (ContributionTracker ``c`` and ``periods``) of a cluster,
    from the PS of the previous epoch to the PS elected for ``period``."""

    period: int
    cluster: int
    periods: int
    contributions: np.ndarray  # (K, K) float64


@dataclass(frozen=True)
class Params:
    """The PS's model (parameters and momentum) for the members of a re-formed cluster."""

    period: int
    params: np.ndarray
    velocity: np.ndarray


ClusterMessage = Features | Assign | Grad | Update | PeerAvg | Handover | Params


def _head(kind: int) -> bytes:
    return HEAD.pack(MAGIC, VERSION, kind)


def encode(msg: ClusterMessage) -> bytes:
    """The body of ``msg`` (without the length prefix)."""
    if isinstance(msg, Features):
        return (_head(T_FEATURES) + _FEATURES.pack(msg.worker, msg.period)
                + encode_array(np.asarray(msg.values, dtype=np.float64)))
    if isinstance(msg, Assign):
        flags = (1 if msg.new_epoch else 0) | (2 if msg.reset else 0)
        sil = math.nan if msg.silhouette is None else float(msg.silhouette)
        n, k = len(msg.labels), len(msg.ps)
        return (_head(T_ASSIGN) + _ASSIGN.pack(msg.period, msg.epoch, flags, sil, n)
                + struct.pack(f"!{n}H", *msg.labels) + struct.pack("!H", k)
                + struct.pack(f"!{k}I", *msg.ps))
    if isinstance(msg, Grad):
        return (_head(T_GRAD) + _GRAD.pack(msg.period, msg.batch, msg.worker)
                + encode_array(np.asarray(msg.grad, dtype=np.float32)))
    if isinstance(msg, Update):
        return (_head(T_UPDATE) + _UPDATE.pack(msg.period, msg.batch)
                + encode_array(np.asarray(msg.grad, dtype=np.float32)))
    if isinstance(msg, PeerAvg):
        return (_head(T_PEER) + _PEER.pack(msg.period, msg.cluster)
                + encode_array(np.asarray(msg.avg, dtype=np.float32)))
    if isinstance(msg, Handover):
        c = np.asarray(msg.contributions, dtype=np.float64)
        return (_head(T_HANDOVER) + _HANDOVER.pack(msg.period, msg.cluster, msg.periods)
                + encode_array(c.ravel()))
    if isinstance(msg, Params):
        return (_head(T_PARAMS) + _PARAMS.pack(msg.period)
                + encode_array(np.asarray(msg.params, dtype=np.float32))
                + encode_array(np.asarray(msg.velocity, dtype=np.float32)))
    raise TypeError(f"not a cluster message: {type(msg).__name__}")


def _array_to_end(body: bytes, off: int, what: str) -> np.ndarray:
    arr, end = decode_array(body, off)
    expect_end(body, end, what)
    return arr


def decode(body: bytes) -> ClusterMessage:
    """The message in ``body``; :class:`TransportError` for anything malformed."""
    kind, off = read_head(body, MAGIC, VERSION, "a clustered-PS")
    if kind == T_FEATURES:
        worker, period = read_fixed(body, off, _FEATURES, "Features")
        return Features(worker, period, _array_to_end(body, off + _FEATURES.size, "Features"))
    if kind == T_ASSIGN:
        period, epoch, flags, sil, n = read_fixed(body, off, _ASSIGN, "Assign")
        off += _ASSIGN.size
        if len(body) < off + 2 * n + 2:
            raise TransportError("truncated Assign message (labels)")
        labels = struct.unpack_from(f"!{n}H", body, off)
        off += 2 * n
        (k,) = struct.unpack_from("!H", body, off)
        off += 2
        if len(body) != off + 4 * k:
            raise TransportError("Assign message: PS list does not match its length")
        ps = struct.unpack_from(f"!{k}I", body, off)
        if any(lab >= k for lab in labels):
            raise TransportError(f"Assign message: a label is >= k = {k}")
        return Assign(period, epoch, tuple(labels), tuple(ps), bool(flags & 1), bool(flags & 2),
                      None if math.isnan(sil) else sil)
    if kind == T_GRAD:
        period, batch, worker = read_fixed(body, off, _GRAD, "Grad")
        return Grad(period, batch, worker, _array_to_end(body, off + _GRAD.size, "Grad"))
    if kind == T_UPDATE:
        period, batch = read_fixed(body, off, _UPDATE, "Update")
        return Update(period, batch, _array_to_end(body, off + _UPDATE.size, "Update"))
    if kind == T_PEER:
        period, cluster = read_fixed(body, off, _PEER, "PeerAvg")
        return PeerAvg(period, cluster, _array_to_end(body, off + _PEER.size, "PeerAvg"))
    if kind == T_HANDOVER:
        period, cluster, periods = read_fixed(body, off, _HANDOVER, "Handover")
        flat = _array_to_end(body, off + _HANDOVER.size, "Handover")
        k = math.isqrt(flat.size)
        if k * k != flat.size:
            raise TransportError(f"Handover message: {flat.size} values is not a K x K matrix")
        return Handover(period, cluster, periods, flat.reshape(k, k))
    if kind == T_PARAMS:
        (period,) = read_fixed(body, off, _PARAMS, "Params")
        params, end = decode_array(body, off + _PARAMS.size)
        return Params(period, params, _array_to_end(body, end, "Params"))
    raise TransportError(f"unknown message type {kind}")
