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
    assert [line.split("|")[3].strip() for line in body] == ["Mininet", "sim, no bucket",
                                                             "sim, burst 1,600 B"]
    assert "| 0.220 (+10.0 %) | 0.120 (-25.0 %) |" in body[1]
    assert "| 0.180 (-10.0 %) | 0.160 (+0.0 %) |" in body[2]
    assert "%" not in body[0].split("|")[4]  # Mininet's own row: no difference


def test_simulated_runs_alone_have_no_reference(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", simulated=True, times=(0.3, 0.2))
    b = _run(tmp_path / "b", simulated=True, times=(0.4, 0.2))
    lines = CROSSVAL["table"]([CROSSVAL["rows"](p) for p in (a, b)])
    assert len(lines) == 4 and all("%" not in line for line in lines)


def test_mininet_runs_of_the_same_settings_are_averaged(tmp_path: Path) -> None:
    """Three Mininet runs in a row (0.120, 0.125, 0.130 s; fastest 0.110, 0.115, 0.120): each
    listed, then their mean (0.125, 0.115) with its range; the simulated run after them is
    compared with the mean: 0.1125 is -10.0 %, 0.1035 is -10.0 %."""
    mns = [_run(tmp_path / f"mn{i}", simulated=False, times=(0.120 + 0.005 * i, 0.110 + 0.005 * i))
           for i in range(3)]
    sim = _run(tmp_path / "sim", simulated=True, times=(0.1125, 0.1035), burst=1600)
    body = CROSSVAL["table"]([CROSSVAL["rows"](p) for p in (*mns, sim)])[2:]
    assert [line.split("|")[3].strip() for line in body] == [
        "Mininet", "Mininet", "Mininet", "Mininet, mean of 3", "sim, burst 1,600 B"]
    assert "| 0.125 | 0.115 | range 0.120–0.130, fastest 0.110–0.120 |" in body[3]
    assert "| 0.113 (-10.0 %) | 0.103 (-10.0 %) |" in body[4]  # 0.1125, 0.1035 (float)


def test_a_mininet_run_of_other_settings_opens_a_new_group(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", simulated=False, times=(0.2, 0.1))
    doc = json.loads((a / "results.json").read_text())
    doc["settings"]["topo"] = "fattree:8"
    b = tmp_path / "b"
    b.mkdir()
    (b / "results.json").write_text(json.dumps(doc))
    body = CROSSVAL["table"]([CROSSVAL["rows"](p) for p in (a, b)])[2:]
    assert [line.split("|")[3].strip() for line in body] == ["Mininet", "Mininet"]
    assert all("mean" not in line for line in body)
