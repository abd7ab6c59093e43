"""The cross-validation table of docs/simulate.md: a Mininet run and simulated runs of the
same settings, side by side, as Markdown.

``python bench/sim_crossval.py MININET_RUN SIM_RUN [SIM_RUN ...] [MININET_RUN SIM_RUN ...]``

Each Mininet run opens a group; the simulated runs after it are compared with it (a
simulated run before any Mininet run is listed without a comparison).  A simulated row names
its link model: ``sim`` (links served at their rate, the default), ``sim, burst N B`` (htb's
token bucket, ``--burst-bytes``), ``switch N ms`` (``--switch-proc-ms``), ``jitter N ms`` (``--jitter-ms``, when not
the default 10).

Per mode: seconds per round (mean over rounds of the slowest worker, and of the fastest:
``sync_time_s``) with the simulated run's difference from Mininet's, bytes into the PS per
round, worker retransmissions over the run, those bytes less the retransmitted frames
(``ps_rx_bytes - 196 x retransmissions / rounds``: what the plan alone sends), γ measured and
measured / predicted, final accuracy, exactness.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

FRAME = 196


@dataclass(frozen=True)
class Row:
    """One sync mode of one run: what the table shows of it."""

    settings: str
    by: str
    simulated: bool
    slowest: float
    fastest: float
    cells: str  # the columns after the times


def _by(doc: dict) -> str:
    if not doc.get("simulated"):
        return "Mininet"
    o = (doc.get("simulation") or {}).get("options") or {}
    parts = ["sim"]
    if o.get("burst_bytes"):
        parts.append(f"burst {o['burst_bytes']:,.0f} B")
    if o.get("switch_proc_ms"):
        parts.append(f"switch {o['switch_proc_ms']:g} ms")
    if o.get("wake_ms"):
        parts.append(f"wake {o['wake_ms']:g} ms")
    if o.get("delay_ms"):
        parts.append(f"delay {o['delay_ms']:g} ms")
    if o.get("jitter_ms", 10.0) != 10.0:  # 10: the default, the start-file poll
        parts.append(f"jitter {o['jitter_ms']:g} ms")
    return ", ".join(parts)


def rows(path: Path) -> dict[str, Row]:
    """One row per sync mode of the run in ``path`` (a run stopped early: the modes it
    finished, without γ when it has none)."""
    doc = json.loads((path / "results.json").read_text())
    s = doc["settings"]
    n_w = len((doc.get("plan") or {}).get("workers") or []) or s.get("workers")
    out = {}
    for mode, rec in doc["modes"].items():
        rs = rec["rounds"]
        retx = sum(r["retransmissions"] for r in rs)
        ps = rs[0]["ps_rx_bytes"]
        g = (doc.get("gamma") or {}) if mode == "ina" else {}
        gm = f"{g['measured']:.3f} / {g['ratio']:.3f}" if g else "—"
        acc = rs[-1].get("accuracy")  # None when the run did not train (--no-train)
        out[mode] = Row(
            settings=f"{s['topo']}, {n_w} w, M={s['budget']}", by=_by(doc),
            simulated=bool(doc.get("simulated")),
            slowest=statistics.mean(r["time_s"] for r in rs),
            fastest=statistics.mean(r["sync_time_s"] for r in rs),
            cells=(f"{ps:,.1f} | {retx} | {ps - FRAME * retx / len(rs):,.1f} | {gm} "
                   f"| {'—' if acc is None else f'{acc:.4f}'} "
                   f"| {'yes' if all(r['exact'] for r in rs) else 'NO'}"))
    return out


def _time(x: float, ref: Row | None, attr: str) -> str:
    if ref is None:
        return f"{x:.3f}"
    base = getattr(ref, attr)
    return f"{x:.3f} ({(x - base) / base * 100:+.1f} %)" if base else f"{x:.3f}"


def table(runs: list[dict[str, Row]]) -> list[str]:
    """The Markdown lines: every mode of every group, Mininet first, then its simulated runs
    with their differences from it."""
    groups: list[tuple[dict[str, Row] | None, list[dict[str, Row]]]] = []
    for run in runs:
        if any(not r.simulated for r in run.values()) or not groups:
            sim = not any(not r.simulated for r in run.values())
            groups.append((None, [run]) if sim else (run, []))
        else:
            groups[-1][1].append(run)
    out = ["| settings | mode | by | s/round (Δ) | s/round, fastest (Δ) | PS B/round | retx "
           "| PS B/round − retx | γ meas. / ratio | accuracy | exact |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for mn, sims in groups:
        modes = dict.fromkeys([*(mn or {}), *(m for s in sims for m in s)])
        for mode in modes:
            ref = (mn or {}).get(mode)
            if mn is not None and ref is None:
                out.append(f"| | {mode} | Mininet | not run | | | | | | | |")
            for run, base in ([(mn, None)] if mn else []) + [(s, ref) for s in sims]:
                r = run.get(mode)
                if r is None:
                    continue
                out.append(f"| {r.settings} | {mode} | {r.by} | {_time(r.slowest, base, 'slowest')} "
                           f"| {_time(r.fastest, base, 'fastest')} | {r.cells} |")
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python bench/sim_crossval.py MININET_RUN SIM_RUN [SIM_RUN ...] [...]",
              file=sys.stderr)
        return 2
    runs = []
    for arg in argv:
        try:
            runs.append(rows(Path(arg)))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            print(f"error: {arg}: not a readable results.json of a run "
                  f"({type(exc).__name__}: {exc})", file=sys.stderr)
            return 1
    print("\n".join(table(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
