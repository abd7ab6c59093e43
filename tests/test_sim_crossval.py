"""bench/sim_crossval.py: groups a Mininet run with the simulated runs after it, names each
simulated run's link model and gives its difference from Mininet's round."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

CROSSVAL = runpy.run_path(str(Path(__file__).resolve().parents[1] / "bench" / "sim_crossval.py"))


def _run(path: Path, *, simulated: bool, times: tuple[float, float], burst: float = 0.0) -> Path:
    rounds = [{"time_s": times[0], "sync_time_s": times[1], "ps_rx_bytes": 14896.0,
               "retransmissions": 0, "exact": True, "accuracy": 0.9}] * 3
    doc = {"settings": {"topo": "fattree:4", "budget": 2, "workers": "6"},
           "modes": {"ina": {"rounds": rounds}}, "gamma": {"measured": 0.7, "ratio": 0.9}}
    if simulated:
        doc |= {"simulated": True, "simulation": {"options": {"burst_bytes": burst}}}
    path.mkdir()
    (path / "results.json").write_text(json.dumps(doc))
    return path


def test_groups_and_differences(tmp_path: Path) -> None:
    mn = _run(tmp_path / "mn", simulated=False, times=(0.200, 0.160))
    sim = _run(tmp_path / "sim", simulated=True, times=(0.220, 0.120))
    bucket = _run(tmp_path / "b", simulated=True, times=(0.180, 0.160), burst=1600)
    lines = CROSSVAL["table"]([CROSSVAL["rows"](p) for p in (mn, sim, bucket)])
    body = lines[2:]
    assert [line.split("|")[3].strip() for line in body] == ["Mininet", "sim", "sim, burst 1,600 B"]
    assert "| 0.220 (+10.0 %) | 0.120 (-25.0 %) |" in body[1]
    assert "| 0.180 (-10.0 %) | 0.160 (+0.0 %) |" in body[2]
    assert "%" not in body[0].split("|")[4]  # Mininet's own row: no difference


def test_simulated_runs_alone_have_no_reference(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", simulated=True, times=(0.3, 0.2))
    b = _run(tmp_path / "b", simulated=True, times=(0.4, 0.2))
    lines = CROSSVAL["table"]([CROSSVAL["rows"](p) for p in (a, b)])
    assert len(lines) == 4 and all("%" not in line for line in lines)
