"""bench/sim_crossval.py: groups a Mininet run with the simulated runs after it, names each
simulated run's link model (the simulator's default, the wake measured in Mininet) and gives
its difference from Mininet's round; the wake measured by ping through an idle pod."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

CROSSVAL = runpy.run_path(str(Path(__file__).resolve().parents[1] / "bench" / "sim_crossval.py"))


def _run(path: Path, *, simulated: bool, times: tuple[float, float], burst: float = 0.0,
         wake: float | None = None) -> Path:
    rounds = [{"time_s": times[0], "sync_time_s": times[1], "ps_rx_bytes": 14896.0,
               "retransmissions": 0, "exact": True, "accuracy": 0.9}] * 3
    doc = {"settings": {"topo": "fattree:4", "budget": 2, "workers": "6"},
           "modes": {"ina": {"rounds": rounds}}, "gamma": {"measured": 0.7, "ratio": 0.9}}
    if simulated:
        opts = {"burst_bytes": burst} | ({"wake_ms": wake} if wake is not None else {})
        doc |= {"simulated": True, "simulation": {"options": opts}}
    path.mkdir()
    (path / "results.json").write_text(json.dumps(doc))
    if not simulated and wake is not None:  # what --measure writes beside the run
        (path / "wake.json").write_text(json.dumps({"wake_ms": wake}))
    return path


def test_groups_and_differences(tmp_path: Path) -> None:
    mn = _run(tmp_path / "mn", simulated=False, times=(0.200, 0.160))
    sim = _run(tmp_path / "sim", simulated=True, times=(0.220, 0.120))
    bucket = _run(tmp_path / "b", simulated=True, times=(0.180, 0.160), burst=1600)
    lines = CROSSVAL["table"]([CROSSVAL["rows"](p) for p in (mn, sim, bucket)])
    body = lines[2:]
    assert [line.split("|")[3].strip() for line in body] == [
        "Mininet", "sim, no bucket", "sim, burst 1,600 B (simulator's default)"]
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
        "Mininet", "Mininet", "Mininet", "Mininet, mean of 3",
        "sim, burst 1,600 B (simulator's default)"]
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


def test_the_measured_wake_labels_the_rows(tmp_path: Path) -> None:
    """A Mininet run with its wake measured (wake.json, as --measure writes it), then the
    simulator's default, the measured wake (0.25 ms) and another wake (0.33 ms): each row
    says which it is; only the measured one is labelled so."""
    mn = _run(tmp_path / "mn", simulated=False, times=(0.125, 0.116), wake=0.25)
    sims = [_run(tmp_path / f"s{i}", simulated=True, times=(0.112, 0.105), burst=1600, wake=w)
            for i, w in enumerate((0.0, 0.25, 0.33))]
    body = CROSSVAL["table"]([CROSSVAL["rows"](p) for p in (mn, *sims)])[2:]
    assert [line.split("|")[3].strip() for line in body] == [
        "Mininet (wake measured: 0.250 ms)", "sim, burst 1,600 B (simulator's default)",
        "sim, burst 1,600 B, wake 0.25 ms (wake measured in Mininet)",
        "sim, burst 1,600 B, wake 0.33 ms"]
    assert "| 0.112 (-10.4 %) |" in body[1]


PING = """PING 10.0.0.11 (10.0.0.11) 56(84) bytes of data.
64 bytes from 10.0.0.11: icmp_seq=1 ttl=64 time=1.90 ms
64 bytes from 10.0.0.11: icmp_seq=2 ttl=64 time=0.810 ms
64 bytes from 10.0.0.11: icmp_seq=3 ttl=64 time=3.29 ms

--- 10.0.0.11 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 20ms
rtt min/avg/max/mdev = 0.812/2.000/3.290/1.014 ms
"""


def test_the_wake_from_two_pings_by_hand() -> None:
    """ping's reply lines only (not its summary); the wake per node: 3 switches each way
    against 1, so 4 traversals more per echo: (mean 2.000 - mean 1.100) / 4 = 0.225 ms."""
    assert CROSSVAL["ping_rtts"](PING) == [1.90, 0.81, 3.29]
    assert CROSSVAL["ping_rtts"]("64 bytes from x: icmp_seq=1 ttl=64 time<1 ms") == [1.0]
    probe = CROSSVAL["Probe"]("h8", "h9", "h10", 1, 3)
    wake = CROSSVAL["wake_from_pings"](probe, [1.0, 1.2], CROSSVAL["ping_rtts"](PING))
    assert abs(wake - 0.225) < 1e-12
    try:
        CROSSVAL["wake_from_pings"](probe, [], [1.0])
    except ValueError as exc:
        assert "no ping replies" in str(exc)
    else:
        raise AssertionError("no replies must be an error")


def test_the_probe_crosses_an_idle_pod_only() -> None:
    """make run's network (PS h0, workers h1-h6: pods 0 and 1 and the cores carry the job):
    h7 shares edge3 with h6, so h8 pings h9 (edge4) and h10 (edge4, agg4|agg5, edge5)."""
    from topo.models import fat_tree

    g = fat_tree(4)
    probe = CROSSVAL["idle_probe"](g, [f"h{i}" for i in range(7)])
    assert probe == CROSSVAL["Probe"]("h8", "h9", "h10", 1, 3)
    try:
        CROSSVAL["idle_probe"](g, [f"h{i}" for i in range(0, 16, 2)])  # a host on every edge
    except ValueError as exc:
        assert "no idle hosts" in str(exc)
    else:
        raise AssertionError("a network without an idle pod must be an error")


def test_measure_takes_bad_input_as_one_line() -> None:
    import subprocess
    import sys

    script = str(Path(__file__).resolve().parents[1] / "bench" / "sim_crossval.py")
    bad = subprocess.run([sys.executable, script, "--measure", "--rounds", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--rounds" in bad.stderr
    usage = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "--measure" in usage.stderr
