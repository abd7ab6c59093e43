"""The cross-validation table of docs/simulate.md: a Mininet run and a simulated run of the
same settings, side by side, as Markdown.

``python bench/sim_crossval.py MININET_RUN SIM_RUN [MININET_RUN SIM_RUN ...]``

Per mode: seconds per round (mean over rounds of the slowest worker, and of the fastest:
``sync_time_s``), bytes into the PS per round, worker retransmissions over the run, those
bytes less the retransmitted frames (``ps_rx_bytes - 196 x retransmissions / rounds``: what
the plan alone sends), γ measured and measured / predicted, final accuracy, exactness.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

FRAME = 196


def rows(path: Path) -> dict[str, str]:
    """One table row per sync mode of the run in ``path`` (a run stopped early: the modes
    it finished, without γ when it has none)."""
    doc = json.loads((path / "results.json").read_text())
    s = doc["settings"]
    what = "sim" if doc.get("simulated") else "Mininet"
    n_w = len((doc.get("plan") or {}).get("workers") or []) or s.get("workers")
    out = {}
    for mode, rec in doc["modes"].items():
        rs = rec["rounds"]
        retx = sum(r["retransmissions"] for r in rs)
        ps = rs[0]["ps_rx_bytes"]
        g = (doc.get("gamma") or {}) if mode == "ina" else {}
        gm = f"{g['measured']:.3f} / {g['ratio']:.3f}" if g else "—"
        acc = rs[-1].get("accuracy")  # None when the run did not train (--no-train)
        out[mode] = (
            f"| {s['topo']}, {n_w} w, M={s['budget']} | {mode} | {what} "
            f"| {statistics.mean(r['time_s'] for r in rs):.3f} "
            f"| {statistics.mean(r['sync_time_s'] for r in rs):.3f} | {ps:,.1f} | {retx} "
            f"| {ps - FRAME * retx / len(rs):,.1f} | {gm} | {'—' if acc is None else f'{acc:.4f}'} "
            f"| {'yes' if all(r['exact'] for r in rs) else 'NO'} |")
    return out


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2:
        print("usage: python bench/sim_crossval.py MININET_RUN SIM_RUN [...]", file=sys.stderr)
        return 2
    pairs = []
    for i in range(0, len(argv), 2):
        try:
            pairs.append((rows(Path(argv[i])), rows(Path(argv[i + 1]))))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            bad = argv[i] if not (Path(argv[i]) / "results.json").is_file() else argv[i + 1]
            print(f"error: {bad}: not a readable results.json of a run "
                  f"({type(exc).__name__}: {exc})", file=sys.stderr)
            return 1
    print("| settings | mode | by | s/round | s/round (fastest) | PS B/round | retx "
          "| PS B/round − retx | γ meas. / ratio | accuracy | exact |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mn, sim in pairs:
        for mode in dict.fromkeys([*mn, *sim]):
            for side, label in ((mn, "Mininet"), (sim, "sim")):
                print(side.get(mode, f"| | {mode} | {label} | not run | | | | | | | |"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
