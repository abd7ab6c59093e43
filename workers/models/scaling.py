"""The scaled emulation of a real model on a real cluster, and its projection back (pure;
docs/models.md §3 has the formulas with a worked example).

Scaling (``run --model M --scale S --link-gbps B``)
    The real cluster synchronizes ``N`` float32 gradients per step over links of ``B``
    Gbit/s and computes for ``t_c`` seconds per step (:mod:`workers.models.profiles`).  The
    emulation synchronizes ``n = ceil(N / S)`` values -- the tensors keep their order, each
    gets its share of ``n`` by largest remainders (:func:`scaled_numels`; one smaller than
    ``S/2`` elements may get none and is left out) -- over links of ``B·1000/S`` Mbit/s.
    A transfer of the scaled gradient on the scaled links takes ``f`` times as long as the
    real one on the real links, the *time factor*::

        f = (n / (B/S)) / (N / B) = n·S / N            (1 up to the rounding of n)

    and the emulated compute per step is ``t_c·f``, so compute : communication is the real
    cluster's.

Projection
    A mode ``m`` measured on the emulation synchronizes in ``τ_m`` seconds per round (the
    median over rounds of the slowest worker's synchronization time).  The real cluster's
    time per step and the speed-ups are then::

        T_m    = t_c + τ_m / f                         (no overlap of compute and sync)
        T_ring = t_c + 2(W-1)/W · 32·N / (B·10^9)      (ring all-reduce, W workers: every
                                                        worker sends and receives 2(W-1)/W
                                                        of the gradient at line rate)
        speed-up over PS-only = T_ps_only / T_ina,   over ring = T_ring / T_ina

    ``T_ring`` is the bandwidth bound of a ring (no latency, no header bytes): INA's measured
    time carries its own headers and retransmissions, so the speed-up over ring is a lower
    bound.  A DDP run projects the same way from its measured time per step ``τ`` (compute
    included): ``T = t_c + (τ - t_c·f) / f``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workers.models.buckets import BUCKET_CAP_BYTES, FIRST_BUCKET_BYTES, ddp_buckets
from workers.models.profiles import profile
from workers.models.shapes import workload

__all__ = ["ScaledWorkload", "scaled_numels", "scale_workload", "ring_comm_s", "projection",
           "DEFAULT_LINK_GBPS", "DEFAULT_SCALE"]

DEFAULT_LINK_GBPS = 10.0  # the real cluster's links (Gbit/s) unless --link-gbps says
DEFAULT_SCALE = 10_000  # with 10 Gbit/s: 1 Mbit/s emulated links, the testbed's default


def scaled_numels(numels: Sequence[int], scale: int) -> list[int]:
    """Each tensor's share of ``ceil(sum/scale)`` elements, by largest remainders (ties:
    the earlier tensor); the shares sum to exactly that total."""
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    total = sum(numels)
    target = -(-total // scale)
    base = [x * target // total for x in numels]
    rems = [x * target % total for x in numels]
    extra = target - sum(base)
    for i in sorted(range(len(numels)), key=lambda i: (-rems[i], i))[:extra]:
        base[i] += 1
    return base


@dataclass(frozen=True)
class ScaledWorkload:
    """One model scaled by ``scale`` for a real cluster with ``link_gbps`` links (module
    docstring).  ``numels``: the scaled tensors kept (non-empty), in registration order."""

    model: str
    scale: int
    n_params: int  # N, the real model's
    numels: tuple[int, ...]
    link_gbps: float  # B, the real cluster's
    compute_s: float  # t_c, the real step's compute
    compute_source: str  # the profile's kind and source, or "--compute-ms"

    @property
    def n_values(self) -> int:
        return sum(self.numels)

    @property
    def emulated_mbps(self) -> float:
        return self.link_gbps * 1000.0 / self.scale

    @property
    def time_factor(self) -> float:
        return self.n_values * self.scale / self.n_params

    @property
    def emulated_compute_s(self) -> float:
        return self.compute_s * self.time_factor

    def buckets(self) -> list[list[int]]:
        """DDP's buckets of the scaled tensors, its limits divided by the scale
        (:func:`workers.models.buckets.ddp_buckets`)."""
        return ddp_buckets(self.numels, first_bytes=FIRST_BUCKET_BYTES / self.scale,
                           cap_bytes=BUCKET_CAP_BYTES / self.scale)


def scale_workload(model: str, scale: int, link_gbps: float = DEFAULT_LINK_GBPS,
                   compute_s: float | None = None) -> ScaledWorkload:
    """``model`` scaled by ``scale`` (ValueError for a bad model, scale or rate);
    ``compute_s`` None: the model's published profile."""
    w = workload(model)
    if not link_gbps > 0:
        raise ValueError(f"the real links' rate must be > 0 Gbit/s, got {link_gbps}")
    if compute_s is None:
        p = profile(model)
        compute_s, source = p.step_s, f"{p.kind}: {p.gpu}, {p.precision} precision, batch " \
                                      f"{p.batch} ({p.source})"
    else:
        if not compute_s >= 0:
            raise ValueError(f"compute time must be >= 0 s, got {compute_s}")
        source = "given (--compute-ms)"
    numels = tuple(x for x in scaled_numels(w.numels, scale) if x > 0)
    return ScaledWorkload(model, scale, w.n_params, numels, float(link_gbps), float(compute_s),
                          source)


def ring_comm_s(n_params: int, n_workers: int, link_gbps: float) -> float:
    """Bandwidth-bound ring all-reduce of ``n_params`` float32 values among ``n_workers``."""
    if n_workers < 2:
        return 0.0
    return 2 * (n_workers - 1) / n_workers * 32 * n_params / (link_gbps * 1e9)


def projection(sw: ScaledWorkload, n_workers: int, sync_s: Mapping[str, float],
               step_s: Mapping[str, float] | None = None) -> dict:
    """The real cluster's time per step for each measured mode and ring all-reduce, and
    INA's speed-ups (module docstring).  ``sync_s``: each mode's measured synchronization
    time per round τ_m (INA workers: compute not included); ``step_s``: a DDP mode's
    measured time per step (compute included)."""
    f = sw.time_factor
    modes = {m: sw.compute_s + t / f for m, t in sync_s.items()}
    for m, t in (step_s or {}).items():
        modes[m] = sw.compute_s + max(0.0, t - sw.emulated_compute_s) / f
    ring = sw.compute_s + ring_comm_s(sw.n_params, n_workers, sw.link_gbps)
    ina = modes.get("ina")
    return {
        "model": sw.model, "scale": sw.scale, "workers": n_workers,
        "n_params": sw.n_params, "emulated_values": sw.n_values,
        "link_gbps": sw.link_gbps, "emulated_mbps": sw.emulated_mbps,
        "time_factor": f, "compute_s": sw.compute_s,
        "emulated_compute_s": sw.emulated_compute_s, "compute_source": sw.compute_source,
        "measured_sync_s": dict(sync_s), "measured_step_s": dict(step_s or {}),
        "projected_step_s": {**modes, "ring_allreduce": ring},
        "speedup_vs_ps_only": (modes["ps_only"] / ina if ina and "ps_only" in modes
                               else None),
        "speedup_vs_ring": ring / ina if ina else None,
    }
