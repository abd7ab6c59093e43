"""A real model's scaled emulation in a run's results (docs/models.md): the projection of the
measured modes onto the real cluster (:func:`workers.models.scaling.projection`) and its
table.  INA (:mod:`controller.experiment.methods.ina`) and DDP
(:mod:`controller.experiment.methods.ddp`) both report through it."""

from __future__ import annotations

from typing import Any

import numpy as np

from workers.models.scaling import ScaledWorkload, projection

__all__ = ["sync_times", "workload_results", "projection_table", "print_projection"]


def sync_times(modes: dict[str, dict]) -> dict[str, float]:
    """Each mode's measured synchronization time per round τ_m: the median over its rounds
    of the slowest worker's time (``time_s``; an INA worker's excludes its compute)."""
    return {m: float(np.median([r["time_s"] for r in d["rounds"]]))
            for m, d in modes.items() if d.get("rounds")}


def workload_results(sw: ScaledWorkload, n_workers: int, sync_s: dict[str, float] | None = None,
                     step_s: dict[str, float] | None = None) -> dict[str, Any]:
    """results.json's ``workload``: the scaled model and the projection (pure)."""
    return projection(sw, n_workers, sync_s or {}, step_s)


def projection_table(proj: dict[str, Any]) -> Any:
    """The projected real cluster, one row per mode and ring all-reduce."""
    from rich.table import Table

    t = Table(title=f"{proj['model']} on {proj['workers']} workers, {proj['link_gbps']:g} "
                    f"Gbit/s links (projected from scale {proj['scale']:,})")
    for col in ("mode", "measured s/round (scaled)", "real s/step (projected)",
                "INA speed-up over it"):
        t.add_column(col, justify="left" if col == "mode" else "right")
    steps = proj["projected_step_s"]
    ina = steps.get("ina")
    measured = {**proj["measured_sync_s"], **proj["measured_step_s"]}
    for m, v in steps.items():
        got = measured.get(m)
        t.add_row(m if m != "ring_allreduce" else "ring all-reduce (analytic)",
                  "—" if got is None else f"{got:.3f}", f"{v:.4f}",
                  "—" if ina is None or m == "ina" else f"x{v / ina:.2f}")
    return t


def print_projection(proj: dict[str, Any], console: Any) -> None:
    """The projection table and the settings it stands on."""
    console.print(projection_table(proj))
    console.print(
        f"scaled: {proj['emulated_values']:,} of {proj['n_params']:,} values, links "
        f"{proj['emulated_mbps']:.4g} Mbit/s, time factor {proj['time_factor']:.4f}; compute "
        f"{proj['compute_s'] * 1e3:.1f} ms/step real, {proj['emulated_compute_s'] * 1e3:.1f} "
        f"ms emulated ({proj['compute_source']})")
    console.print("projection: T_m = t_c + τ_m/f; ring = t_c + 2(W-1)/W·32N/B, bandwidth "
                  "bound, so INA's speed-up over it is a lower bound (docs/models.md §3)")
