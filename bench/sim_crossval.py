"""The cross-validation table of docs/simulate.md: a Mininet run and simulated runs of the
same settings, side by side, as Markdown.

``python bench/sim_crossval.py MININET_RUN SIM_RUN [SIM_RUN ...] [MININET_RUN SIM_RUN ...]``

``python bench/sim_crossval.py --measure [--out DIR] [--name NAME] [--rounds N]`` (root,
under the Mininet lock): the whole comparison in one command on make run's network.  It runs
``python -m controller run --target pyswitch`` (make run's settings), and while its INA
rounds run it measures the **wake** -- how long after a frame arrives a Mininet node takes it
(its process woken on the machine's shared cores) -- by pinging from a host of a pod the job
does not use (:func:`idle_probe`: on make run's network h8) to a host behind the same switch
(h9: 1 switch, 2 traversals per echo) and to one behind three (h10: 6 traversals), both at
once every 10 ms until the INA rounds end: the wake per node is the difference of the two
mean round trips over the 4 traversals more (:func:`wake_from_pings`; ping's own part and the
kernel's echo reply cancel).  It writes that into the run's folder (``wake.json``), then
simulates the same settings twice -- the simulator's default (no wake) and ``--wake-ms`` the
measured wake -- and prints the table, the simulated rows labelled ``(simulator's default)``
and ``(wake measured in Mininet)``.

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

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FRAME = 196
ROOT = Path(__file__).resolve().parents[1]
WAKE_FILE = "wake.json"
LINK_MODEL = ("delay_ms", "queue", "compute_ms", "jitter_ms", "switch_proc_ms", "burst_bytes",
              "wake_ms")
"""The simulated options that model the network and the hosts (a row with them all at
``SimOptions``' defaults is the simulator's default)."""


@dataclass(frozen=True)
class Row:
    """One sync mode of one run: what the table shows of it."""

    settings: str
    by: str
    simulated: bool
    slowest: float
    fastest: float
    cells: str  # the columns after the times
    wake_ms: float | None = None  # Mininet: the wake measured (wake.json); sim: --wake-ms
    default: bool = False  # a simulated run with the simulator's default link model


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


def _is_default(options: dict) -> bool:
    from controller.experiment.simulate.network import SimOptions

    base = asdict(SimOptions())
    given = {"burst_bytes": 0.0, **options}  # a run from before the option had no bucket
    return all(given.get(k, base[k]) == base[k] for k in LINK_MODEL)


def rows(path: Path) -> dict[str, Row]:
    """One row per sync mode of the run in ``path`` (a run stopped early: the modes it
    finished, without γ when it has none)."""
    doc = json.loads((path / "results.json").read_text())
    s = doc["settings"]
    opts = (doc.get("simulation") or {}).get("options") or {}
    if doc.get("simulated"):
        wake, default = float(opts.get("wake_ms", 0.0)), _is_default(opts)
    else:  # the wake measured during this Mininet run, if it was (--measure)
        wf = path / WAKE_FILE
        wake, default = (json.loads(wf.read_text())["wake_ms"] if wf.exists() else None), False
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
                   f"| {'yes' if all(r['exact'] for r in rs) else 'NO'}"),
            wake_ms=wake, default=default)
    return out


def label(r: Row, ref: Row | None) -> str:
    """The ``by`` cell: a simulated row at the simulator's default link model says so, one
    whose wake is the one measured during its Mininet run (``ref``) says that."""
    if not r.simulated:
        return r.by if r.wake_ms is None else f"{r.by} (wake measured: {r.wake_ms:.3f} ms)"
    if r.default:
        return f"{r.by} (simulator's default)"
    if ref is not None and ref.wake_ms is not None and r.wake_ms \
            and round(r.wake_ms, 3) == round(ref.wake_ms, 3):
        return f"{r.by} (wake measured in Mininet)"
    return r.by


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
    wakes = [r.wake_ms for r in rows if r.wake_ms is not None]
    return Row(settings=rows[0].settings, by=f"Mininet, mean of {len(rows)}", simulated=False,
               slowest=statistics.mean(r.slowest for r in rows),
               fastest=statistics.mean(r.fastest for r in rows),
               cells=f"range {lo:.3f}–{hi:.3f}, fastest {flo:.3f}–{fhi:.3f} | | | | | |",
               wake_ms=statistics.mean(wakes) if len(wakes) == len(rows) else None)


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
                out.append(f"| {r.settings} | {mode} | {label(r, ref)} "
                           f"| {_time(r.slowest, base, 'slowest')} "
                           f"| {_time(r.fastest, base, 'fastest')} | {r.cells} |")
    return out


# ------------------------------------------------------------------ the wake, measured

_RTT = re.compile(r"\btime[=<]([0-9.]+) ms")


def ping_rtts(text: str) -> list[float]:
    """The round trips (ms) of ``ping -n``'s reply lines in ``text`` (its summary and
    anything else skipped)."""
    return [float(m.group(1)) for m in _RTT.finditer(text)]


@dataclass(frozen=True)
class Probe:
    """Where the wake is pinged: ``src`` to ``near`` crosses ``near_switches`` switches each
    way, ``src`` to ``far`` ``far_switches``; none of them is on a path of the job."""

    src: str
    near: str
    far: str
    near_switches: int
    far_switches: int


def idle_probe(graph, busy_hosts: list[str]) -> Probe:
    """The hosts to ping the wake through (pure): the first host in name order not in
    ``busy_hosts`` whose nearest and farthest other idle hosts are reached over switches
    that no shortest path between two busy hosts crosses (every ECMP path counted), the
    farthest over more switches.  On make run's network (PS h0, workers h1-h6): h8, h9
    (edge4) and h10 (edge4, agg4 or agg5, edge5).  ValueError if there is none."""
    import itertools

    import networkx as nx

    from topo.mininet_net import natural_key
    from topo.models import hosts

    busy = set()
    for a, b in itertools.combinations(busy_hosts, 2):
        for path in nx.all_shortest_paths(graph, a, b):
            busy.update(path[1:-1])
    idle = [h for h in hosts(graph) if h not in busy_hosts]
    for src in idle:
        reach = {}
        for dst in idle:
            if dst == src:
                continue
            paths = list(nx.all_shortest_paths(graph, src, dst))
            if all(not busy & set(p[1:-1]) for p in paths):
                reach[dst] = len(paths[0]) - 2
        if len(set(reach.values())) < 2:
            continue
        near = min(reach, key=lambda h: (reach[h], natural_key(h)))
        far = min(reach, key=lambda h: (-reach[h], natural_key(h)))
        return Probe(src, near, far, reach[near], reach[far])
    raise ValueError("no idle hosts to measure the wake through: every pod carries the job")


def wake_from_pings(probe: Probe, near_ms: list[float], far_ms: list[float]) -> float:
    """The wake per node (ms, pure): each echo crosses ``2 x switches`` switches, each
    taking the frame a wake after it arrived, plus ping's and the echo reply's own part,
    the same on both paths: ``(mean far - mean near) / (2 (far - near switches))``.  Means,
    not medians: a chain's latency adds up its nodes' means (docs/simulate.md)."""
    if not near_ms or not far_ms:
        raise ValueError("no ping replies to measure the wake from")
    hops = 2 * (probe.far_switches - probe.near_switches)
    return (statistics.mean(far_ms) - statistics.mean(near_ms)) / hops


def _spread(xs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=10) if len(xs) > 1 else [xs[0]] * 9
    return {"n": len(xs), "mean": statistics.mean(xs), "median": statistics.median(xs),
            "p90": q[8], "max": max(xs)}


def _shell_pid(host: str) -> int:
    """The pid of Mininet's shell of ``host`` (``bash ... mininet:HOST``), whose network
    namespace is the host's."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"mininet:{host}".encode() in cmd:
                return int(d)
    raise RuntimeError(f"no Mininet shell of {host} found")


def _ping_during_ina(run_dir: Path, proc: subprocess.Popen) -> dict:
    """Wait for ``run_dir``'s INA rounds to start (``ina/start``), ping the wake's probe
    until they end (``ina/ps.json``), return ``wake.json``'s record."""
    from topo.mininet_net import plan_network
    from topo.models import from_dict

    start, done = run_dir / "ina" / "start", run_dir / "ina" / "ps.json"
    while not start.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended (exit {proc.returncode}) before its INA rounds")
        time.sleep(0.01)
    plan = json.loads((run_dir / "plan.json").read_text())
    graph = from_dict(plan["topology"]["graph"])
    job = next(iter(plan["jobs"].values()))
    probe = idle_probe(graph, [job["ps"], *job["workers"]])
    ip = {h: i.ips[0] for h, i in plan_network(graph).hosts.items()}
    pid = str(_shell_pid(probe.src))
    pings = {k: subprocess.Popen(["nsenter", "-t", pid, "-n", "ping", "-n", "-i", "0.01",
                                  "-c", "6000", ip[h]], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
             for k, h in (("near", probe.near), ("far", probe.far))}
    load = os.getloadavg()[0]
    while not done.exists() and proc.poll() is None:
        time.sleep(0.01)
    for p in pings.values():
        if p.poll() is None:
            p.send_signal(signal.SIGINT)  # ping prints what it has and exits
    text = {k: p.communicate(timeout=30)[0] for k, p in pings.items()}
    got = {k: ping_rtts(t) for k, t in text.items()}
    if not got["near"] or not got["far"]:
        raise RuntimeError(f"ping from {probe.src} got no replies: {text['far'][-300:]}")
    return {**asdict(probe), "near_ms": _spread(got["near"]), "far_ms": _spread(got["far"]),
            "wake_ms": wake_from_pings(probe, got["near"], got["far"]),
            "load_average": [load, os.getloadavg()[0]]}


def _controller(*args: str, log: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with log.open("w") as f:
        code = subprocess.run([sys.executable, "-m", "controller", *args], cwd=ROOT, env=env,
                              stdout=f, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise RuntimeError(f"controller {args[0]} exited {code} (log: {log})")


def measure(a: argparse.Namespace) -> int:
    """``--measure``: the Mininet run with its wake, the two simulations, the table."""
    if os.geteuid() != 0:
        print("error: --measure runs Mininet: run it as root (under the Mininet lock)",
              file=sys.stderr)
        return 2
    name = a.name or time.strftime("xval-%Y%m%d-%H%M%S")
    out = a.out.resolve()
    run_dir, sims = out / name, [out / f"{name}-sim", out / f"{name}-sim-wake"]
    if any(p.exists() for p in (run_dir, *sims)):
        print(f"error: {run_dir} (or its simulations) exists: pass another --name",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    common = ["--rounds", str(a.rounds), "--modes", a.modes, "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with (out / f"{name}.out").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "controller", "run", "--target",
                                 "pyswitch", *common, "--name", name], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            wake = _ping_during_ina(run_dir, proc)
        finally:
            code = proc.wait()
    if code != 0:
        print(f"error: the Mininet run exited {code} (log: {out / f'{name}.out'})",
              file=sys.stderr)
        return 1
    (run_dir / WAKE_FILE).write_text(json.dumps(wake, indent=1))
    _controller("simulate", *common, "--name", sims[0].name, log=out / f"{sims[0].name}.out")
    if round(wake["wake_ms"], 3) > 0:
        _controller("simulate", *common, "--name", sims[1].name, "--wake-ms",
                    f"{wake['wake_ms']:.3f}", log=out / f"{sims[1].name}.out")
    else:  # the far path no slower than the near one: no wake to simulate
        print(f"no wake measured ({wake['wake_ms']:.3f} ms): the default alone simulated")
        sims = sims[:1]
    from controller.experiment.prediction import prediction_lines

    n, f = wake["near_ms"], wake["far_ms"]
    print(f"wake measured during {run_dir.name}'s INA rounds: ping {wake['src']} -> "
          f"{wake['far']} ({wake['far_switches']} switches each way) mean {f['mean']:.3f} ms "
          f"(median {f['median']:.3f}, p90 {f['p90']:.3f}, n {f['n']}), -> {wake['near']} "
          f"({wake['near_switches']}) mean {n['mean']:.3f} ms (median {n['median']:.3f}, p90 "
          f"{n['p90']:.3f}, n {n['n']}): {wake['wake_ms']:.3f} ms per node; load average "
          f"{wake['load_average'][0]:.1f}-{wake['load_average'][1]:.1f}")
    doc = json.loads((run_dir / "results.json").read_text())
    for line in prediction_lines(doc):
        print(f"{run_dir.name}: {line}")
    print("\n".join(table([rows(p) for p in (run_dir, *sims)])))
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        ap = argparse.ArgumentParser(prog="bench/sim_crossval.py --measure")
        ap.add_argument("--measure", action="store_true", required=True)
        ap.add_argument("--out", type=Path, default=Path("results"))
        ap.add_argument("--name", default="")
        ap.add_argument("--rounds", type=int, default=30, help="make run's 30")
        ap.add_argument("--modes", default="ina,ps_only", help="make run's")
        a = ap.parse_args(argv)
        if a.rounds < 1:
            print("error: --rounds must be at least 1", file=sys.stderr)
            return 2
        try:
            return measure(a)
        except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python bench/sim_crossval.py MININET_RUN SIM_RUN [SIM_RUN ...] [...]\n"
              "       python bench/sim_crossval.py --measure [--out DIR] [--name NAME] "
              "[--rounds N] [--modes M,M]   (root: Mininet, wake, two simulations, table)",
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
