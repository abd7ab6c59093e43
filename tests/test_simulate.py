"""``python -m controller simulate`` (docs/simulate.md): small simulations of the make-run
network, checked against values computed by hand.

fattree:4, PS h0, 6 workers (h1..h6), budget 2, MLP with 4 hidden units: 310 values, i.e.
10 chunks of K = 32; every INA frame (GRAD, PARTIAL, RESULT) is 196 bytes on the wire.
Worker w sends, in round r, v[0] = 2^31 - 1 and v[i] = (w+1)(i+1)(r+1) for i >= 1, so the
exact int32 sum is v[0] = 6 (2^31 - 1) mod 2^32 = -6 (it wraps) and v[i] = 21 (i+1)(r+1).
Without loss and retransmissions every chunk crosses the PS's link once per round in INA
mode (the aggregate of s_d) and once per worker in PS-only mode, and every worker's link
carries one GRAD up and one RESULT down per chunk.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from controller.cli.main import main
from controller.experiment.compare import load_results, rows_of
from controller.experiment.methods.ina.core import Settings
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import load_switch
from controller.experiment.simulate.run import SimOptions, simulate
from workers.ina.wire import FRAME_BYTES, ipv4_checksum

N, N_VALUES, N_CHUNKS, ROUNDS = 6, 310, 10, 2
WORKERS = [f"h{i}" for i in range(1, N + 1)]


def gradient(w: int, r: int) -> np.ndarray:
    v = np.array([(w + 1) * (i + 1) * (r + 1) for i in range(N_VALUES)], dtype=np.int64)
    v[0] = 2**31 - 1
    return v.astype(np.int32)


def hand_sum(r: int) -> np.ndarray:
    out = np.array([21 * (i + 1) * (r + 1) for i in range(N_VALUES)], dtype=np.int32)
    out[0] = -6
    return out


def settings(**kw: object) -> Settings:
    return Settings(hidden=4, rounds=ROUNDS, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    sums: dict = {}
    doc, _ = simulate(settings(), SimOptions(reference=False),
                      tmp_path_factory.mktemp("sim"), "t", gradient_of=gradient, sums=sums)
    return doc, sums


def test_event_loop_runs_in_time_then_schedule_order() -> None:
    loop, seen = EventLoop(), []
    for t, tag in ((2.0, "c"), (1.0, "a"), (1.0, "b"), (0.5, "first")):
        loop.at(t, seen.append, tag)
    loop.at(3.0, lambda _: loop.stop())
    loop.at(4.0, seen.append, "never")
    loop.run()
    assert seen == ["first", "a", "b", "c"] and loop.now == 3.0 and loop.events == 5


@pytest.mark.parametrize("burst", [0.0, 400.0])
def test_link_serves_at_its_rate_or_as_a_token_bucket(burst: float) -> None:
    """One link a→b at 1 Mbit/s (125,000 B/s: a 196-byte frame takes 1.568 ms), five frames
    offered at t = 0, one more at t = 1 s after the link has idled.

    Without a bucket frame n arrives at (n+1)·1.568 ms.  With a 400-byte bucket (full at the
    start): frames leave while the bucket is not in debt, then one per 1.568 ms:
    tokens 400 → 204 (frame 0 at 0) → 8 (frame 1 at 0) → −188 (frame 2 at 0) → frame 3 when
    the debt is paid, 188/125000 s = 1.504 ms, → −196 → frame 4 at 1.504 + 1.568 ms.  At
    t = 1 s the bucket has refilled to 400 bytes: the sixth frame leaves at once."""
    import networkx as nx

    from controller.experiment.simulate.network import SimNetwork

    g = nx.Graph()
    g.add_edge("a", "b", bw=1.0)
    loop, got = EventLoop(), []
    net = SimNetwork(loop, g, {"a": {"b": 1}, "b": {"a": 1}}, {}, 1.0, 0.0, 1000, None,
                     on_host=lambda h, f: got.append((h, round(loop.now * 1e6, 3))),
                     burst=burst)
    for _ in range(5):
        net.send("a", 1, bytes(196))
    loop.at(1.0, lambda _: net.send("a", 1, bytes(196)))
    loop.run()
    if not burst:
        want = [1568.0 * (n + 1) for n in range(5)] + [1e6 + 1568.0]
    else:
        want = [0.0, 0.0, 0.0, 1504.0, 3072.0, 1e6]
    assert got == [("b", t) for t in want]
    assert net.links[("a", 1)].bytes == 6 * 196


def test_nodes_take_frames_a_wake_after_they_arrive() -> None:
    """a -> s -> b, both links 1 Mbit/s with a 400-byte bucket (full at the start), every
    node taking a frame 0.25 ms after it arrived (``wake_s``); four 196-byte frames sent by
    a at t = 0.

    Link a->s: frames 0-2 leave at 0 (tokens 400 -> 204 -> 8 -> -188), frame 3 when the
    debt is paid, 188 B / 125,000 B/s = 1.504 ms.  s takes frames 0-2 at 0.25 ms and sends
    them on s->b at once (its bucket full: 400 -> 204 -> 8 -> -188); b takes them at 0.5 ms.
    s takes frame 3 at 1.754 ms; s->b has refilled 188 B in 1.504 ms (tokens 0), so it
    leaves at once and b takes it at 2.004 ms.  Bytes are counted when a frame crossed the
    link, before its node takes it."""
    import networkx as nx

    from controller.experiment.simulate.network import SimNetwork

    class Wire:  # a switch that forwards port 1 to port 2
        def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
            return [(port + 1, frame)]

    g = nx.Graph()
    g.add_edge("a", "s", bw=1.0)
    g.add_edge("s", "b", bw=1.0)
    ports = {"a": {"s": 1}, "s": {"a": 1, "b": 2}, "b": {"s": 1}}
    loop, got, counted = EventLoop(), [], []
    net = SimNetwork(loop, g, ports, {"s": Wire()}, 1.0, 0.0, 1000, None,
                     on_host=lambda h, f: got.append((h, round(loop.now * 1e6, 3))),
                     burst=400.0, wake_s=0.25e-3)
    for _ in range(4):
        net.send("a", 1, bytes(196))
    loop.at(0.3e-3, lambda _: counted.append(net.links[("s", 2)].bytes))
    loop.run()
    assert got == [("b", t) for t in (500.0, 500.0, 500.0, 2004.0)]
    assert counted == [3 * 196]  # on s->b at 0.25 ms, before b takes them at 0.5 ms


def _lost_per_flow(seed: int) -> tuple[set[int], set[int]]:
    """Two flows of 2,000 numbered frames through one switch at 5 % loss per port and
    direction (a -> s -> b on ports 1, 2; c -> s -> d on ports 3, 4): the ordinals each
    flow lost."""
    import networkx as nx

    from controller.experiment.simulate.network import SimNetwork
    from pyswitch.impairment import ImpairmentSpec

    class Wire:  # a switch that forwards port 1 to 2 and 3 to 4
        def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
            return [(port + 1, frame)]

    g = nx.Graph()
    for h in "abcd":
        g.add_edge(h, "s")
    ports = {"a": {"s": 1}, "b": {"s": 1}, "c": {"s": 1}, "d": {"s": 1},
             "s": {"a": 1, "b": 2, "c": 3, "d": 4}}
    loop, got = EventLoop(), {"b": set(), "d": set()}
    net = SimNetwork(loop, g, ports, {"s": Wire()}, None, 0.0, 10_000,
                     ImpairmentSpec(loss=0.05, seed=seed),
                     on_host=lambda h, f: got[h].add(int.from_bytes(f, "big")))
    for i in range(2000):
        net.send("a", 1, i.to_bytes(4, "big"))
        net.send("c", 1, i.to_bytes(4, "big"))
    loop.run()
    every = set(range(2000))
    return every - got["b"], every - got["d"]


def test_ports_lose_frames_independently() -> None:
    """Each port and direction draws its own losses from the seed (network.port_seed): two
    flows in lockstep through different ports lose different frames (with one stream for
    every port they lost exactly the same ordinals: the correlated loss that made even
    ECMP splitting drop one chunk on many paths at once), and the same seed loses the same
    frames again."""
    la, lc = _lost_per_flow(0)
    # two impaired ports per flow at 5 %: about 195 lost each, about 19 in common by chance
    assert 120 < len(la) < 280 and 120 < len(lc) < 280
    assert len(la & lc) < 60
    assert _lost_per_flow(0) == (la, lc)
    assert _lost_per_flow(1)[0] != la


def test_sums_equal_the_hand_computed_ones(clean_run: tuple[dict, dict]) -> None:
    doc, sums = clean_run
    assert set(sums) == {"ina", "ps_only"}
    for mode in sums:
        for r in range(ROUNDS):
            assert len(sums[mode][r]) == N
            for s in sums[mode][r]:
                assert np.array_equal(s, hand_sum(r))
    assert doc["exact_all_rounds"] is True
    assert all(r["exact"] for m in doc["modes"].values() for r in m["rounds"])


def test_bytes_equal_the_hand_computed_ones(clean_run: tuple[dict, dict]) -> None:
    doc, _ = clean_run
    assert FRAME_BYTES == 196
    ina, ps_only = doc["modes"]["ina"], doc["modes"]["ps_only"]
    for rec in (ina, ps_only):
        assert sum(r["retransmissions"] for r in rec["rounds"]) == 0
    assert doc["ps_bytes"] == {"ina": N_CHUNKS * 196, "ps_only": N * N_CHUNKS * 196}
    assert ina["ps_link_bytes_total"] == ROUNDS * N_CHUNKS * 196 == 3920
    assert ps_only["ps_link_bytes_total"] == ROUNDS * N * N_CHUNKS * 196 == 23520
    for rec in (ina, ps_only):
        links = rec["link_bytes_total"]
        assert links["h0->edge0"] == ROUNDS * N_CHUNKS * 196  # one RESULT per chunk
        for w in WORKERS:
            tor = f"edge{int(w[1:]) // 2}"
            assert links[f"{w}->{tor}"] == ROUNDS * N_CHUNKS * 196  # its GRADs
            assert links[f"{tor}->{w}"] == ROUNDS * N_CHUNKS * 196  # its RESULTs
    assert ina["ps"]["partials"] == ROUNDS * N_CHUNKS and ina["ps"]["grads"] == 0
    assert ps_only["ps"]["grads"] == ROUNDS * N * N_CHUNKS


def test_results_keep_runs_keys_marked_simulated(clean_run: tuple[dict, dict]) -> None:
    doc, _ = clean_run
    assert doc["simulated"] is True and doc["method"] == "ina"
    for key in ("settings", "plan", "modes", "gamma", "ps_bytes", "busiest_link_bytes",
                "retransmissions", "exact_all_rounds"):
        assert key in doc
    for r in doc["modes"]["ina"]["rounds"]:
        for key in ("time_s", "sync_time_s", "ps_rx_bytes", "busiest_link_bytes",
                    "retransmissions", "exact", "accuracy"):
            assert key in r
    # PS-only: 60 frames of 196 bytes through the PS's 1 Mbit/s link, whose 1,600-byte bucket
    # (the default, htb's) lets at most 1,600 B + one frame (sent while the bucket is not
    # in debt) go ahead of the rate: 79.712 ms at least, reached when it starts full
    least = (60 * 196 - 1600 - 196) * 8 / 1e6
    assert min(r["time_s"] for r in doc["modes"]["ps_only"]["rounds"]) >= least - 1e-9


def test_queue_depths_count_every_frame_a_link_carried(tmp_path: Path) -> None:
    """``sim.queue_depth`` (simulate/depths.py): without loss or drops every frame offered to
    a link crossed it, so the histogram holds as many frames as the links' bytes / 196.  With
    links served at their rate (``burst_bytes`` 0, no bucket to let frames go ahead), in
    INA mode a worker's window (16) covers its 10 chunks: it puts all 10 GRADs on its own
    link at once, the 10th finds 9 ahead of it, and nothing queues deeper.  In PS-only mode
    six workers' GRADs converge on the PS's link, whose queue is the deepest."""
    doc, _ = simulate(settings(), SimOptions(reference=False, burst_bytes=0.0), tmp_path, "t",
                      gradient_of=gradient)
    depths = {m: rec["sim"]["queue_depth"] for m, rec in doc["modes"].items()}
    for m, rec in doc["modes"].items():
        assert depths[m]["frames"] == sum(rec["link_bytes_total"].values()) // 196
        assert depths[m]["p50"] <= depths[m]["p99"] <= depths[m]["max"]
        assert rec["sim"]["marks"] == 0  # no --ecn-packets
        # the last worker finished after its rounds and before the PS's tail ended
        sim = rec["sim"]
        assert sum(r["time_s"] for r in rec["rounds"]) < sim["done_s"] <= sim["virtual_s"]
    assert depths["ina"]["max"] == N_CHUNKS - 1
    assert depths["ps_only"]["deepest"] == "edge0->h0"
    assert depths["ps_only"]["max"] > N_CHUNKS


def test_loss_is_recovered_exactly_and_reproducibly(tmp_path: Path) -> None:
    runs = []
    for i in range(2):
        sums: dict = {}
        doc, _ = simulate(settings(loss=0.05, modes=("ina",)), SimOptions(reference=False),
                          tmp_path / str(i), "t", gradient_of=gradient, sums=sums)
        runs.append(doc)
        for r in range(ROUNDS):
            for s in sums["ina"][r]:
                assert np.array_equal(s, hand_sum(r))
    rec = runs[0]["modes"]["ina"]
    assert rec["sim"]["impairment"]["dropped"] > 0
    assert sum(r["retransmissions"] for r in rec["rounds"]) > 0
    a, b = ({k: v for k, v in d["modes"]["ina"].items() if k != "sim"} for d in runs)
    assert a == b  # seeded: the same run twice (only the machine's wall time differs)


def test_two_jobs_share_the_network_with_exact_sums(tmp_path: Path) -> None:
    """--jobs 2 on fattree:4: hosts dealt in turn, job1 = PS h0 + 7 workers, job2 = PS h1 +
    7 workers; each job's sums are 28 (i+1)(r+1), and v[0] = 7 (2^31 - 1) mod 2^32 =
    2^31 - 7.  PS-only: each PS receives 7 x 10 frames of 196 bytes per round."""
    sums: dict = {}
    doc, _ = simulate(settings(jobs="2"), SimOptions(reference=False), tmp_path, "t",
                      gradient_of=gradient, sums=sums)
    assert sorted(sums) == ["job1/ina", "job1/ps_only", "job2/ina", "job2/ps_only"]
    for label, by_round in sums.items():
        for r in range(ROUNDS):
            want = np.array([28 * (i + 1) * (r + 1) for i in range(N_VALUES)], np.int32)
            want[0] = 2**31 - 7
            assert len(by_round[r]) == 7, label
            assert all(np.array_equal(s, want) for s in by_round[r]), label
    assert doc["simulated"] is True and set(doc["jobs"]) == {"job1", "job2"}
    for job in ("job1", "job2"):
        assert doc["jobs"][job]["ps_bytes"]["ps_only"] == 7 * N_CHUNKS * 196
        assert doc["jobs"][job]["exact_all_rounds"] is True
    assert [r.method for r in rows_of("t", doc)] == ["ina (simulated)"] * 4


def test_cli_writes_results_compare_shows_simulated(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    rc = main(["simulate", "--hidden", "4", "--rounds", "1", "--modes", "ina",
               "--budgets", "0,2", "--no-train", "--out", str(tmp_path), "--name", "s"])
    assert rc == 0
    for b in (0, 2):
        doc = load_results(tmp_path / f"s-b{b}")
        assert doc["settings"]["budget"] == b and doc["simulated"] is True
        assert [r.method for r in rows_of("s", doc)] == ["ina (simulated)"]
    out = capsys.readouterr().out
    assert "budget 0" in out and "budget 2" in out and "exact yes" in out
    json.loads((tmp_path / "s-b2" / "plan.json").read_text())
    # run's page and plots for every budget, and the sweep's summary
    assert (tmp_path / "s-b2" / "report.md").exists()
    assert (tmp_path / "s-b2" / "time_per_round.png").exists()
    sweep = json.loads((tmp_path / "s-sweep.json").read_text())["runs"]
    assert [(r["budget"], r["run"], r["exact"]) for r in sweep] == [(0, "s-b0", True),
                                                                   (2, "s-b2", True)]
    for r in sweep:
        doc = load_results(tmp_path / r["run"])
        assert r["predicted"] == doc["gamma"]["predicted"]
        assert r["measured"] == doc["gamma"]["measured"] > 0
        assert f"budget {r['budget']}: γ predicted {r['predicted']:.4g}" in out


def test_runs_started_in_the_same_second_get_two_names(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    """A default name is the time to the second; a second run in that second (a sweep
    script's parallel runs) once wrote into the first one's folders and read back a
    mixed-up run ("exact NO").  It now takes the next free name."""
    import controller.cli.simulate as cli

    monkeypatch.setattr(cli.time, "strftime", lambda fmt: "sim-same")
    (tmp_path / "sim-same-b2").mkdir()  # a run of that second that got there first
    argv = ["simulate", "--hidden", "4", "--rounds", "1", "--modes", "ina", "--no-train",
            "--budgets", "0,2", "--out", str(tmp_path)]
    assert main(argv) == 0 and main(argv) == 0
    out = capsys.readouterr().out
    assert "(sim-same-2-b2)" in out and "(sim-same-3-b2)" in out and "NO" not in out
    assert not (tmp_path / "sim-same-b0").exists()  # the first name was not taken
    assert sorted(p.name for p in tmp_path.glob("*-sweep.json")) == [
        "sim-same-2-sweep.json", "sim-same-3-sweep.json"]
    assert not any((tmp_path / "sim-same-b2").iterdir())  # the other run's, untouched


def test_a_claimed_name_is_released_when_the_run_fails(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import controller.cli.simulate as cli
    from controller.errors import ExperimentError

    def fails(*args: object) -> None:  # an error found inside the run (an interrupt alike)
        raise ExperimentError("the plan has no route")

    monkeypatch.setattr(cli.time, "strftime", lambda fmt: "sim-bad")
    monkeypatch.setattr(cli, "simulate", fails)
    assert main(["simulate", "--budgets", "0,2", "--out", str(tmp_path)]) == 2
    assert list(tmp_path.iterdir()) == []  # its two claimed folders removed, being empty


@pytest.mark.parametrize("argv, words", [
    (["--bw", "0"], "--bw 0"),
    (["--budgets", "1,x"], "--budgets"),
    (["--target", "bmv2"], "--target"),
    (["--delay-ms", "-1"], "--delay-ms"),
    (["--burst-bytes", "-5"], "--burst-bytes"),
    (["--wake-ms", "-1"], "--wake-ms"),
    (["--topo", "fattree:3"], "fat-tree"),
    (["--ps", "h99"], "--ps"),
])
def test_bad_options_are_one_line(argv: list[str], words: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture) -> None:
    assert main(["simulate", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and words in err[0]


def _recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              s: Settings) -> tuple[dict, list[tuple[str, int, bytes]]]:
    """Run ``s`` with every switch executing ina.p4, recording what each switch receives
    (its rules, and the (switch, port, frame) stream in order)."""
    import controller.experiment.simulate.engine as engine_mod

    rules: dict = {}
    seen: list[tuple[str, int, bytes]] = []

    def recording(prog: object, r: object) -> object:
        sw = load_switch(prog, r)
        rules[r.switch] = r  # type: ignore[attr-defined]
        real = sw.process

        def process(port: int, frame: bytes) -> list:
            seen.append((r.switch, port, frame))  # type: ignore[attr-defined]
            return real(port, frame)
        sw.process = process
        return sw

    monkeypatch.setattr(engine_mod, "load_switch", recording)
    simulate(s, SimOptions(reference=False, full_p4=True), tmp_path, "t",
             gradient_of=gradient)
    return rules, seen


def _odd_frames(frames: list[tuple[int, bytes]], mcast_ports: set[int]
                ) -> list[tuple[int, bytes]]:
    """Frames the shortcut must hand to the program (other IPv4, ARP, malformed, unknown
    routes and jobs, wrong ports) or copy with care (a RESULT entering where its multicast
    group sends: the echo the egress drops and counts)."""
    def fix(f: bytes) -> bytes:  # a valid IPv4 checksum again
        return f[:24] + ipv4_checksum(f[14:24] + f[26:34]).to_bytes(2, "big") + f[26:]

    first = {f[42]: (p, f) for p, f in reversed(frames)}  # the first of each msg_type
    out = [(p, f) for f in (f for _, f in first.values() if f[42] == 3) for p in mcast_ports]
    for port, f in first.values():
        out += [(port, fix(f[:36] + b"\x13\x89" + f[38:])),        # UDP to another port
                (port, fix(f[:23] + b"\x06" + f[24:])),             # TCP
                (port, f[:12] + b"\x08\x06" + f[14:]),              # ARP
                (port, f[:24] + b"\x00\x00" + f[26:]),              # bad IPv4 checksum
                (port, f[:24] + b"\xff\xff" + f[26:]),              # bad, or -0 for 0
                (port, fix(f[:22] + b"\x00" + f[23:])),             # TTL 0 (wraps to 255)
                (port, f[:150]),                                    # truncated
                (port, f[:38] + b"\x00\x10" + f[40:]),              # wrong UDP length
                (port, f[:42] + b"\x07" + f[43:]),                  # unknown msg_type
                (port, f[:44] + b"\x03\xe7" + f[46:]),              # unknown job 999
                (port, f[:54] + b"\x03\xe7" + f[56:]),              # unknown agg_id 999
                (port, f[:57] + b"\x00" + f[58:]),                  # count 0
                (port, f[:60] + (3).to_bytes(8, "big") + f[68:]),   # bitmap of two workers
                (port ^ 1, f), (0, f), (9, f)]                      # other ingress ports
    return out


@pytest.mark.parametrize("kw", [dict(budget=0, loss=0.1, modes=("ina", "ps_only")),
                                dict(budget=2, dup=0.1, reorder=0.1, jobs="2")])
def test_the_forwarding_shortcut_equals_ina_p4(kw: dict, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every frame a forwarding-only switch received in a run (GRADs, PARTIALs, RESULTs of
    INA and PS-only mode, retransmissions, duplicates, two jobs), plus other IPv4, ARP,
    malformed frames and unknown jobs/routes, fed to ina.p4 and to the shortcut of a fresh
    copy of that switch: the same (port, bytes) out, the same port, drop and program
    counters, registers untouched."""
    from controller.experiment.simulate.fastpath import FastForwarder, forwarder
    from controller.experiment.simulate.run import program
    from workers.ina.constants import num_slots

    rules, seen = _recorded(tmp_path, monkeypatch, settings(**kw))
    prog = program(num_slots())
    fwd = {n: r for n, r in rules.items() if not r.default.params["agg_enabled"]}
    assert fwd and len(fwd) < len(rules)
    fast_total = 0
    for name, r in fwd.items():
        frames = [(p, f) for n, p, f in seen if n == name]
        ref, fast = load_switch(prog, r), forwarder(load_switch(prog, r), r)
        assert isinstance(fast, FastForwarder)
        mports = {p for ps in r.mcast_groups.values() for p in ps}
        for port, f in frames + _odd_frames(frames, mports):
            assert fast.process(port, f) == ref.process(port, f), (name, port, f[42:68].hex())
        assert (fast.stats.rx, fast.stats.tx, fast.stats.dropped) == (
            ref.stats.rx, ref.stats.tx, ref.stats.dropped)
        assert fast.switch.counters.keys() == ref.counters.keys()
        for c in ref.counters:
            assert fast.switch.counters[c][:2] == ref.counters[c][:2], (name, c)
        for reg in ref.registers:
            assert fast.switch.registers[reg][0] == ref.registers[reg][0], (name, reg)
        fast_total += fast.fast
    assert fast_total > 0.5 * sum(1 for n, _, _ in seen if n in fwd)


def test_the_shortcut_changes_no_figure_of_a_run(clean_run: tuple[dict, dict],
                                                tmp_path: Path) -> None:
    doc, _ = clean_run
    full, _ = simulate(settings(), SimOptions(reference=False, full_p4=True), tmp_path, "t",
                       gradient_of=gradient)
    assert doc["simulation"]["fast_frames"] > 0 and full["simulation"]["fast_frames"] == 0
    for mode in ("ina", "ps_only"):
        a, b = ({k: v for k, v in d["modes"][mode].items() if k != "sim"} for d in (doc, full))
        assert a == b
        assert doc["modes"][mode]["sim"]["events"] == full["modes"][mode]["sim"]["events"]


def test_rules_without_idle_hosts_differ_only_by_their_routes() -> None:
    """simulate computes the rules on the graph without idle hosts: on fattree:4 with PS h0
    and workers h5, h9 the rules are the full ones less the /32 routes of the 13 idle
    hosts, on every switch."""
    from controller.dataplane.deploy import SwitchJob, switch_rules
    from controller.experiment.methods.ina.core import plan_request
    from controller.experiment.network import shaped_graph
    from controller.experiment.simulate.run import active_graph
    from controller.plan.pipeline import make_plan
    from topo.mininet_net import plan_network
    from topo.models import parse_topology

    s = settings(workers="h5,h9", budget=2)
    graph = shaped_graph(parse_topology(s.topo), s.bw)
    plan = make_plan(graph, replace(plan_request(s), baselines=False), ps="h0",
                     workers=["h5", "h9"])
    netplan = plan_network(graph, 1.0)
    hosts = {h: (i.ips[0], i.macs[0]) for h, i in netplan.hosts.items()}
    jobs = [SwitchJob(1, ("h5", "h9"))]
    full = switch_rules(graph, plan, netplan.ports, hosts, jobs)
    pruned = switch_rules(active_graph(graph, {"h0", "h5", "h9"}), plan, netplan.ports, hosts,
                          jobs)
    used_ips = {hosts[h][0] for h in ("h0", "h5", "h9")}
    assert full.keys() == pruned.keys()
    for sw, r in full.items():
        keep = [e for e in r.entries if not (e.table.endswith("ipv4_lpm")
                                             and e.match["hdr.ipv4.dstAddr"][0] not in used_ips)]
        assert len(keep) < len(r.entries)
        assert (keep, r.default, r.mcast_groups) == (pruned[sw].entries, pruned[sw].default,
                                                      pruned[sw].mcast_groups)


def test_switches_mark_from_the_link_queues_and_the_workers_see_it(tmp_path: Path) -> None:
    """``--ecn-packets``: a switch's egress sees its link's queue as enq_qdepth and marks
    (p4src/include/congestion.p4); PS-only mode queues every worker's GRAD on the PS's link,
    so the PS ORs marks into RESULTs and the workers count them; without it, no marks."""
    import json

    s = Settings(hidden=4, rounds=1, modes=("ps_only",))
    counts = []
    for n in (0, 4):
        out = tmp_path / f"e{n}"
        simulate(s, SimOptions(reference=False, full_p4=True, ecn_packets=n), out, "t",
                 gradient_of=gradient)
        ps = json.loads((out / "ps_only" / "ps.json").read_text())["stats"]
        w0 = json.loads((out / "ps_only" / "worker0.json").read_text())["rounds"][0]
        marks = sum(json.loads((out / "ps_only" / f"worker{w}.json").read_text())["rounds"][0]
                    ["marks"] for w in range(N))
        rec = json.loads((out / "results.json").read_text())["modes"]["ps_only"]
        assert rec["sim"]["marks"] == marks  # the launch's workers' marks, summed
        counts.append((ps["marked"], w0["marks"]))
    assert counts[0] == (0, 0)
    assert counts[1][0] > 0 and counts[1][1] > 0
