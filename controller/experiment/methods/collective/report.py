"""The comparison of ``run --method bcube`` (:mod:`controller.experiment.methods.collective`):
median sync time per method and size next to the link-bound prediction and BCube's ratio."""

from __future__ import annotations

from typing import Any

__all__ = ["comparison", "sync_time_table"]


def comparison(modes: dict[str, dict[str, Any]], sizes: list[str]) -> dict[str, dict[str, Any]]:
    """Per size label, per method: measured and predicted median sync time and BCube's time
    over this method's (None without a BCube run of that size: ``--method ps`` / ``ring``)."""
    out: dict[str, dict[str, Any]] = {}
    for sl in sizes:
        base = modes.get(f"bcube@{sl}")
        row = {}
        for m in modes.values():
            if m["size"] != sl:
                continue
            t = m["sync_s_median"]
            row[m["method"]] = {
                "sync_s_median": t, "predicted_sync_s": m["predicted_sync_s"],
                "bcube_over_this": base["sync_s_median"] / t if base else None,
                "predicted_bcube_over_this": (
                    base["predicted_sync_s"] / m["predicted_sync_s"]
                    if base and m["predicted_sync_s"] else None)}
        out[sl] = row
    return out


def sync_time_table(results: dict[str, Any], selected: list[str], servers: int,
                    bw: float | None) -> Any:
    """The comparison as a table."""
    from rich.table import Table

    table = Table(title=f"sync time per round (median), {', '.join(selected)} on {servers} "
                        "servers" + (f", {bw:g} Mbit/s links" if bw else ", unshaped links"))
    for col in ("size", "method", "measured s", "predicted s", "BCube/this", "predicted ratio"):
        table.add_column(col)

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"
    for sl, row in results["comparison"].items():
        for method, c in row.items():
            table.add_row(sl, method, f"{c['sync_s_median']:.3f}", f(c["predicted_sync_s"]),
                          f(c["bcube_over_this"]), f(c["predicted_bcube_over_this"]))
    return table
