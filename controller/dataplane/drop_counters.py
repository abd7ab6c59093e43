"""The counters of ``ina.p4`` on every switch, read over P4Runtime, and what one run moved
(issue 20 item 7; docs/protocol.md §4 names every counter and the reason it stands for).

Every frame the program drops moves exactly one ``dropped_*`` counter naming why
(``dropped_malformed``, ``dropped_not_ipv4``, ``dropped_nonmember``, ``dropped_noroute``,
``dropped_ipv4_noroute``, ``dropped_duplicate``, ``MyEgress.dropped_echo``); the others
(``aggregated``, ``collision``, ``bypassed``, ``flushed``, ``evicted``, ``absorbed``, …)
count what happened to frames that were not lost.  The campaign reads all of them on every
switch before and after each run (:func:`read_snapshot`) and keeps the differences
(:func:`run_counters`): ``drops`` {reason: packets} and ``counters`` {name: packets}, summed
over the switches, and ``counters_per_switch`` (non-zero ones only).  The names come from the
switch's P4Info, so a counter added to the program is recorded without a change here.

Packets only: a reason is a count of frames; bytes add nothing to "why".
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["DROP_PREFIX", "Snapshot", "short_names", "read_snapshot", "counter_delta",
           "run_counters", "mean_counts", "drops_markdown"]

DROP_PREFIX = "dropped_"  # docs/protocol.md §4: the counters of frames that end in a switch
Snapshot = dict[str, dict[str, int]]  # switch -> counter (full P4Info name) -> packets


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Full name -> name without its control (``MyIngress.collision`` -> ``collision``), kept
    whole where two controls would share the short name."""
    names = sorted(set(names))
    tails = [n.rsplit(".", 1)[-1] for n in names]
    return {n: t if tails.count(t) == 1 else n for n, t in zip(names, tails, strict=True)}


def _read_one(address: str, device_id: int, p4info: Path, timeout: float) -> dict[str, int]:
    from controller.dataplane.p4runtime_client import SwitchConnection

    # no arbitration: a Read needs no mastership, and the controller's own sessions (deploy,
    # fail-over) must stay primary
    conn = SwitchConnection(address, device_id, timeout=timeout)
    try:
        conn.connect(arbitrate=False)
        conn.use_p4info(p4info)
        return {name: sum(p for p, _ in cells.values())
                for name, cells in conn.read_counters().items()}
    finally:
        conn.close()


def read_snapshot(addresses: Mapping[str, tuple[str, int]], p4info: Path,
                  timeout: float = 5.0) -> tuple[Snapshot, dict[str, str]]:
    """Packets of every counter on every switch (``addresses``: switch -> (gRPC address,
    device id)), read in parallel; returns the snapshot and {switch: error} for the switches
    that did not answer (a killed one), which the run records instead of failing."""
    from controller.dataplane.p4runtime_client import P4RuntimeError

    snap: Snapshot = {}
    errors: dict[str, str] = {}
    if not addresses:
        return snap, errors
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(addresses))) as pool:
        futures = {sw: pool.submit(_read_one, addr, dev, p4info, timeout)
                   for sw, (addr, dev) in addresses.items()}
        for sw, fut in futures.items():
            try:
                snap[sw] = fut.result()
            except (P4RuntimeError, OSError) as exc:
                errors[sw] = str(exc) or type(exc).__name__
    return snap, errors


def counter_delta(before: Snapshot, after: Snapshot) -> Snapshot:
    """Per switch read both times: what each counter moved.  A counter that went down was
    reset in between (a pipeline push zeroes every counter), so its value since the reset
    is what moved."""
    out: Snapshot = {}
    for sw in sorted(set(before) & set(after)):
        b, a = before[sw], after[sw]
        out[sw] = {n: (a[n] - b.get(n, 0)) if a[n] >= b.get(n, 0) else a[n] for n in a}
    return out


def run_counters(before: Snapshot, after: Snapshot,
                 unread: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The run object's counter fields: ``drops`` (every ``dropped_*`` reason, zeros kept so
    that "none dropped" is stated), ``counters`` (every other counter), both summed over the
    switches, ``counters_per_switch`` (non-zero only) and ``counters_unread`` (switches
    without both readings, with why)."""
    delta = counter_delta(before, after)
    names = short_names(n for per in delta.values() for n in per)
    totals = {names[n]: 0 for n in sorted(names)}
    per_switch: dict[str, dict[str, int]] = {}
    for sw, per in delta.items():
        for n, v in per.items():
            totals[names[n]] += v
        nonzero = {names[n]: v for n, v in sorted(per.items()) if v}
        if nonzero:
            per_switch[sw] = nonzero
    missing = {sw: "not read before the run" for sw in set(after) - set(before)}
    missing |= {sw: "not read after the run" for sw in set(before) - set(after)}
    missing |= dict(unread or {})
    is_drop = {n: n.rsplit(".", 1)[-1].startswith(DROP_PREFIX) for n in totals}
    return {"drops": {n: v for n, v in totals.items() if is_drop[n]},
            "counters": {n: v for n, v in totals.items() if not is_drop[n]},
            "counters_per_switch": per_switch,
            "counters_unread": dict(sorted(missing.items()))}


def mean_counts(counts: list[Mapping[str, int]]) -> dict[str, float]:
    """Mean per name over runs (a name a run lacks counts 0 there); {} without runs."""
    if not counts:
        return {}
    names = sorted({n for c in counts for n in c})
    return {n: sum(c.get(n, 0) for c in counts) / len(counts) for n in names}


def drops_markdown(rows: list[dict]) -> str:
    """table.md's second table: per fault and mode, packets per run of every drop reason and
    of the slot events that cost time (collision, bypassed, flushed, asked, evicted), mean
    over the seeds; a column only where some row is non-zero, so that the table stays
    readable."""
    events = ("collision", "bypassed", "flushed", "asked", "evicted")
    with_counts = [r for r in rows if r.get("drops") or r.get("counters")]
    if not with_counts:
        return ""
    cols: list[tuple[str, str]] = []
    drop_names = sorted({n for r in with_counts for n in r.get("drops", {})})
    cols += [("drops", n) for n in drop_names
             if any(r.get("drops", {}).get(n) for r in with_counts)]
    cols += [("counters", n) for n in events
             if any(r.get("counters", {}).get(n) for r in with_counts)]
    silent = [n for n in drop_names if ("drops", n) not in cols]
    head = "| " + " | ".join(["fault", "mode", *(n for _, n in cols)]) + " |"
    lines = ["Switch counters (ina.p4, over P4Runtime): packets per run, summed over the "
             "switches, mean over seeds (docs/protocol.md §4)" +
             (f"; always 0: {', '.join(silent)}" if silent else "") + ".", "",
             head,
             "|---|---|" + "---|" * len(cols)]
    for r in with_counts:
        cells = [f"{r.get(kind, {}).get(n, 0):,.0f}" for kind, n in cols]
        lines.append("| " + " | ".join([r["fault"], r["mode"], *cells]) + " |")
    return "\n".join(lines) + "\n"
