"""The cross-validation table of docs/simulate.md: a Mininet run and simulated runs of the
same settings, side by side, as Markdown.

``python bench/sim_crossval.py MININET_RUN SIM_RUN [SIM_RUN ...] [MININET_RUN SIM_RUN ...]``

Each Mininet run opens a group, and Mininet runs right after it of the same settings join it
(Mininet's own spread: each listed, then their mean with its range); the simulated runs
after them are compared with that mean (a simulated run before any Mininet run is listed
without a comparison).  A simulated row names its link model: ``sim, burst N B`` (htb's
token bucket, ``--burst-bytes``; 1,600 B, TCLink's, the default since issue 39), ``sim, no
bucket`` (``--burst-bytes 0``: every frame takes its transmission time, the default
before), ``switch N ms`` (``--switch-proc-ms``), ``wake N ms`` (``--wake-ms``), ``jitter N
ms`` (``--jitter-ms``, when not the default 10).

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
    else:  # 0, or a run from before the option: links served at their rate
        parts.append("no bucket")
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


def _settings(run: dict[str, Row]) -> set[str]:
    return {r.settings for r in run.values()}


def _mean(rows: list[Row]) -> Row:
    """Several Mininet runs' row of one mode as one: mean times (the range in ``cells``)."""
    lo, hi = min(r.slowest for r in rows), max(r.slowest for r in rows)
    flo, fhi = min(r.fastest for r in rows), max(r.fastest for r in rows)
    return Row(settings=rows[0].settings, by=f"Mininet, mean of {len(rows)}", simulated=False,
               slowest=statistics.mean(r.slowest for r in rows),
               fastest=statistics.mean(r.fastest for r in rows),
               cells=f"range {lo:.3f}–{hi:.3f}, fastest {flo:.3f}–{fhi:.3f} | | | | | |")


def table(runs: list[dict[str, Row]]) -> list[str]:
    """The Markdown lines: every mode of every group, its Mininet runs first (and their mean
    when several), then its simulated runs with their differences from Mininet's mean."""
    groups: list[tuple[list[dict[str, Row]], list[dict[str, Row]]]] = []
    for run in runs:
        mininet = any(not r.simulated for r in run.values())
        if mininet and groups and groups[-1][0] and not groups[-1][1] \
                and _settings(groups[-1][0][0]) == _settings(run):
            groups[-1][0].append(run)  # Mininet again, same settings: its spread
        elif mininet or not groups:
            groups.append(([run], []) if mininet else ([], [run]))
        else:
            groups[-1][1].append(run)
    out = ["| settings | mode | by | s/round (Δ) | s/round, fastest (Δ) | PS B/round | retx "
           "| PS B/round − retx | γ meas. / ratio | accuracy | exact |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for mns, sims in groups:
        modes = dict.fromkeys([*(m for r in mns for m in r), *(m for s in sims for m in s)])
        for mode in modes:
            seen = [r[mode] for r in mns if mode in r]
            ref = None if not seen else seen[0] if len(seen) == 1 else _mean(seen)
            if mns and ref is None:
                out.append(f"| | {mode} | Mininet | not run | | | | | | | |")
            listed: list[tuple[Row, Row | None]] = [(r, None) for r in seen]
            if len(seen) > 1 and ref is not None:
                listed.append((ref, None))
            listed += [(s[mode], ref) for s in sims if mode in s]
            for r, base in listed:
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
