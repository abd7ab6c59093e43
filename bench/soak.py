"""Soak: many INA rounds with loss on the ``make run`` network, memory and descriptors of
every process measured (issue 20 item 6; docs/design.md §9).

One job of ``--rounds`` rounds (default 1,000) with ``--loss`` (default 2%) on every switch
port, on the network ``make run`` builds (fat-tree k=4, PS h0, 6 workers, budget 2, 1 Mbit/s
links), planned, deployed and run by the same code as ``python -m controller run``
(:func:`controller.experiment.methods.ina.plan_job`, :func:`~controller.experiment.methods.ina.deployed_network`,
:func:`~controller.experiment.methods.ina.run_mode`), which checks every round's sum against the exact
int32 sum of the workers' quantized gradients.

While the job runs, every process is measured from /proc: each pyswitch switch, the PS, every
worker and this controller process — RSS and its anonymous part, PSS and USS
(``smaps_rollup``; USS = private pages, PSS = private plus a fair share of the shared ones),
open file descriptors and threads.  The first sample is taken once ``--warmup`` rounds are done (imports, first-round
allocations and the allocator's arenas have settled by then), ``--samples`` more on the way,
and the last once a worker finished round ``rounds - 2``: every process is still needed for
the last round then, so none has exited.  The switch counters of ina.p4
(:mod:`controller.dataplane.drop_counters`) are read at the first and last sample too.

Exit status 1 when a round is not exact, the job failed, or any process grew by
``--threshold`` % (default 5) or more from the first sample to the last in RSS, anonymous RSS
or descriptors (PSS and USS are shown, not judged: see :data:`METRICS`); the table and
``results/<name>/soak.json`` say which.

    flock /tmp/insync-mininet.lock .venv/bin/python bench/soak.py [--rounds 1000] [--loss 0.02]
        [--warmup 5] [--samples 10] [--threshold 5] [--seed 0] [--name NAME]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import networkx as nx  # noqa: E402
from rich.console import Console  # noqa: E402

from controller.dataplane.deploy import SwitchJob  # noqa: E402
from controller.dataplane.drop_counters import read_snapshot, run_counters  # noqa: E402
from controller.errors import ExperimentError  # noqa: E402
from controller.experiment.failover import SwitchMonitor  # noqa: E402
from controller.experiment.methods.ina.method import (  # noqa: E402
    JOB_IDS,
    Settings,
    deployed_network,
    job_config,
    plan_job,
    run_mode,
    schedules_for,
)
from controller.experiment.network import check_environment  # noqa: E402
from controller.experiment.runner import Run  # noqa: E402
from controller.files import write_json_atomic  # noqa: E402
from topo.models import parse_topology  # noqa: E402
from topo.switch_groups import counted_once  # noqa: E402
from workers.common.model import Replica, TrainConfig  # noqa: E402
from workers.ina.constants import K, num_slots  # noqa: E402
from workers.ina.worker import n_chunks_for  # noqa: E402

# The verdict checks RSS, its anonymous part (heap and stacks: where a leak grows) and open
# descriptors.  PSS and USS are recorded, not judged: they count the pages of shared files
# (the interpreter, numpy, gRPC) by how many processes map them, so they move when other
# processes on the machine start or exit (a process that imports numpy and grpc: PSS 49.3
# -> 46.1 -> 48.2 MB while three copies of it started and ended, RSS and RssAnon unchanged).
METRICS = ("rss_kib", "rss_anon_kib", "fds")
PS_MODULE, WORKER_MODULE = "workers.ina.ps_node", "workers.ina.worker_node"


# ------------------------------------------------------------------ pure parts (tested)


def sample_points(rounds: int, warmup: int, samples: int) -> list[int]:
    """Rounds after which a sample is taken (a worker reported that round, 0-based): after
    ``warmup`` rounds, ``samples`` evenly in between, and after ``rounds - 2``."""
    first, last = warmup - 1, rounds - 2
    if warmup < 1 or last <= first:
        raise ValueError(f"--rounds {rounds} leaves no rounds after a --warmup of {warmup} "
                         f"(need rounds >= warmup + 2)")
    inner = [first + round((last - first) * i / (samples + 1)) for i in range(1, samples + 1)]
    return sorted({first, *inner, last})


def parse_figures(status: str, rollup: str | None, fds: int) -> dict[str, int | None]:
    """RSS (all and anonymous), PSS, USS (KiB; USS = private clean + dirty), threads and
    descriptors from /proc/PID/status and smaps_rollup (None where a field is missing)."""
    def field(text: str, key: str) -> int | None:
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k == key:
                return int(v.split()[0])
        return None

    uss = clean = dirty = None
    if rollup is not None:
        clean, dirty = field(rollup, "Private_Clean"), field(rollup, "Private_Dirty")
        uss = clean + dirty if clean is not None and dirty is not None else None
    return {"rss_kib": field(status, "VmRSS"), "rss_anon_kib": field(status, "RssAnon"),
            "pss_kib": field(rollup, "Pss") if rollup is not None else None,
            "uss_kib": uss, "private_clean_kib": clean, "private_dirty_kib": dirty,
            "fds": fds, "threads": field(status, "Threads")}


def growth(first: dict[str, Any], last: dict[str, Any], threshold: float
           ) -> tuple[dict[str, float | None], list[str]]:
    """Percent change per metric, and the judged ones (:data:`METRICS`) that grew by
    ``threshold`` % or more."""
    pct: dict[str, float | None] = {}
    for m in (*METRICS, "pss_kib", "uss_kib", "threads"):
        a, b = first.get(m), last.get(m)
        pct[m] = None if a is None or b is None else (100.0 * (b - a) / a if a else
                                                       (0.0 if b == a else float("inf")))
    bad = [m for m in METRICS if pct[m] is not None and pct[m] >= threshold]
    return pct, bad


def slope_per_round(points: list[tuple[int, int]]) -> float | None:
    """Least-squares KiB per round over (round, KiB) samples (what a leak adds per round)."""
    if len(points) < 2:
        return None
    xs, ys = [float(x) for x, _ in points], [float(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def node_role(argv: list[str], job_file: str, workers: list[str]) -> tuple[str, str] | None:
    """(role, host) of an INA node process of this job from its command line, else None."""
    if job_file not in argv:
        return None
    if PS_MODULE in argv:
        return "ps", ""
    if WORKER_MODULE in argv and "--worker" in argv:
        i = int(argv[argv.index("--worker") + 1])
        return "worker", workers[i] if 0 <= i < len(workers) else f"worker{i}"
    return None


# ------------------------------------------------------------------ /proc


def proc_figures(pid: int) -> dict[str, int | None]:
    base = Path(f"/proc/{pid}")
    status = (base / "status").read_text()
    try:
        rollup: str | None = (base / "smaps_rollup").read_text()
    except OSError:
        rollup = None
    return parse_figures(status, rollup, len(os.listdir(base / "fd")))


def node_processes(job_file: Path, workers: list[str], ps: str) -> dict[str, tuple[str, int]]:
    """label -> (role, pid) of the PS and worker processes of the job, found by their
    command lines (they run inside Mininet hosts, started by the runner)."""
    out: dict[str, tuple[str, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        found = node_role(argv.split("\0"), str(job_file), workers)
        if found is not None:
            role, host = found
            out[f"PS {ps}" if role == "ps" else f"worker {host}"] = (role, int(entry.name))
    return out


class Sampler:
    """Samples every process at the rounds of :func:`sample_points`, from the runner's wait
    loop (the switch monitor's ``poll``)."""

    def __init__(self, points: list[int], processes: Callable[[], dict[str, tuple[str, int]]],
                 on_sample: Callable[[dict], None]) -> None:
        self.points, self.processes, self.on_sample = points, processes, on_sample
        self.samples: list[dict] = []
        self.errors: list[str] = []
        self._next = 0
        self._t0 = time.monotonic()

    def maybe(self, newest_round: int) -> None:
        if self._next >= len(self.points) or newest_round < self.points[self._next]:
            return
        while self._next < len(self.points) and newest_round >= self.points[self._next]:
            self._next += 1  # one sample even if rounds went by faster than the polls
        figures: dict[str, dict] = {}
        for label, (role, pid) in self.processes().items():
            try:
                figures[label] = {"role": role, "pid": pid, **proc_figures(pid)}
            except OSError as exc:  # exited between listing and reading
                self.errors.append(f"round {newest_round}: {label} (pid {pid}): {exc}")
        sample = {"after_round": newest_round, "point": self.points[self._next - 1],
                  "t_s": round(time.monotonic() - self._t0, 2), "processes": figures}
        self.samples.append(sample)
        self.on_sample(sample)


class SoakMonitor(SwitchMonitor):
    """The run's switch monitor (fail-over as always) that also drives the sampler."""

    sampler: Sampler | None = None

    def poll(self) -> None:
        super().poll()
        if self.sampler is not None:
            self.sampler.maybe(self.newest_round)


# ------------------------------------------------------------------ the run


def _progress(run: Any) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                    console=run.console)


def _mib(kib: int | None) -> str:
    return "—" if kib is None else f"{kib / 1024:.1f}"


def _pct(p: float | None) -> str:
    return "—" if p is None else f"{p:+.1f}%"


def report(samples: list[dict], threshold: float) -> tuple[list[dict], list[str]]:
    """Per process: first and last figures, growth, slope; and the failure lines."""
    first, last = samples[0], samples[-1]
    rows, failures = [], []
    for label, a in first["processes"].items():
        b = last["processes"].get(label)
        if b is None:
            failures.append(f"{label}: gone by the last sample")
            continue
        pct, bad = growth(a, b, threshold)
        series = [(s["after_round"], s["processes"][label]["rss_kib"]) for s in samples
                  if label in s["processes"] and s["processes"][label]["rss_kib"] is not None]
        slope = slope_per_round(series)
        rows.append({"process": label, "role": a["role"], "pid": a["pid"], "first": a,
                     "last": b, "growth_pct": pct, "over_threshold": bad,
                     "rss_slope_kib_per_round": slope,
                     # what the same slope would add over 1,000 rounds.  A short run can
                     # understate it: memory freed in the first rounds absorbs what is kept
                     # later (a worker keeping 19 KiB per round: +0.6 KiB/round in a
                     # 50-round run, +19.4 in a 1,000-round one)
                     "rss_pct_per_1000_rounds": None if slope is None or not a["rss_kib"]
                     else 100.0 * slope * 1000 / a["rss_kib"]})
        if bad:
            failures.append(f"{label}: " + ", ".join(f"{m} {_pct(pct[m])}" for m in bad))
    return rows, failures


def print_rows(console: Any, rows: list[dict], first: dict, last: dict, threshold: float
               ) -> None:
    from rich.table import Table

    t = Table(title=f"every process, after round {first['after_round']} → after round "
                    f"{last['after_round']} (FAIL at ≥ {threshold:g}%)")
    for col in ("process", "RSS MiB", "ΔRSS", "anon MiB", "Δanon", "ΔPSS", "ΔUSS", "fds",
                "threads", "RSS KiB/round", "RSS/1000 rounds", ""):
        t.add_column(col, justify="left" if col in ("process", "") else "right")
    for r in rows:
        a, b, p = r["first"], r["last"], r["growth_pct"]
        slope = r["rss_slope_kib_per_round"]
        t.add_row(r["process"], f"{_mib(a['rss_kib'])}→{_mib(b['rss_kib'])}",
                  _pct(p["rss_kib"]), f"{_mib(a['rss_anon_kib'])}→{_mib(b['rss_anon_kib'])}",
                  _pct(p["rss_anon_kib"]), _pct(p["pss_kib"]), _pct(p["uss_kib"]),
                  f"{a['fds']}→{b['fds']}",
                  f"{a['threads']}→{b['threads']}",
                  "—" if slope is None else f"{slope:+.2f}",
                  _pct(r["rss_pct_per_1000_rounds"]),
                  "[red]FAIL[/]" if r["over_threshold"] else "ok")
    console.print(t)


def soak(args: argparse.Namespace) -> int:
    t_start = time.perf_counter()
    points = sample_points(args.rounds, args.warmup, args.samples)
    s = Settings(topo=args.topo, ps=args.ps, workers=args.workers, budget=args.budget,
                 rounds=args.rounds, bw=args.bw or None, loss=args.loss, dup=args.dup,
                 reorder=args.reorder, seed=args.seed, modes=(args.mode,), window=args.window,
                 timeout=args.timeout, round_timeout=args.round_timeout, out=args.out,
                 name=args.name)
    check_environment(s.target)
    console = Console()
    if console.width < 150:  # the per-process table needs the room (also in a log file)
        console = Console(width=150)
    run = Run("soak", s.out, s.name or time.strftime("soak-%Y%m%d-%H%M%S"), seed=s.seed,
              console=console, argv=sys.argv)
    console, out_dir = run.console, run.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = nx.Graph(parse_topology(s.topo))
    if s.bw is not None:
        nx.set_edge_attributes(graph, float(s.bw), "bw")
    graph = nx.freeze(graph)
    plan = plan_job(s, graph, out_dir, console)
    workers = list(plan.job.workers)
    train = TrainConfig(model=s.model, hidden=s.hidden, n_workers=len(workers),
                        rounds=s.rounds, batch_size=s.batch_size, lr=s.lr, seed=s.seed)
    n_values = Replica(train, 0).params.size
    n_chunks = n_chunks_for(n_values, K)
    mode, mode_dir = args.mode, out_dir / args.mode
    job_file = mode_dir / "job.json"
    jobs = [SwitchJob(JOB_IDS[mode], tuple(workers))]
    settings = {**asdict(s), "warmup": args.warmup, "sample_points": points,
                "threshold_pct": args.threshold, "num_slots": num_slots(),
                "n_values": n_values, "n_chunks": n_chunks,
                "plan": {"gamma": plan.job.gamma, "deployed": plan.deployed,
                         "ps_tor": plan.job.ps_tor, "workers": plan.job.workers}}
    line = (f"{s.topo}, PS {s.ps}, {len(workers)} workers, budget {s.budget} (deployed "
            f"{', '.join(plan.deployed) or '—'}), "
            + (f"{s.bw:g} Mbit/s" if s.bw else "unshaped")
            + f", loss {s.loss:g} dup {s.dup:g} reorder {s.reorder:g} (seed {s.seed}), "
            f"{mode}, {s.rounds} rounds, {s.model} ({n_values} values, {n_chunks} chunks), "
            f"window {s.window}, timeout {s.timeout:g} s, {s.target}; samples after rounds "
            f"{points[0]}…{points[-1]} ({len(points)}), threshold {args.threshold:g}%")
    console.print(f"[bold]soak[/] {run.name}: {line}")
    doc: dict[str, Any] = {"soak": run.name, "settings": settings, "settings_line": line,
                           "samples": [], "complete": False, "provenance": run.provenance}

    def write() -> None:
        doc["total_s"] = round(time.perf_counter() - t_start, 1)
        write_json_atomic(out_dir / "soak.json", doc)

    with deployed_network(run, s, graph, plan, jobs) as net:
        # a process that runs a group of switches once, under its first switch
        switch_pids = {f"switch {name}": ("switch", pid) for name, pid in counted_once(
            [(sw.name, sw.proc.pid) for sw in net.mininet.net.switches
             if sw.proc is not None]).items()}
        addresses = {sw: (net.mininet.grpc_address(sw), net.mininet.device_id(sw))
                     for sw in net.rules}
        counters: list[tuple[dict, dict]] = []
        # one read before the job: its one-time cost in this process (gRPC channels, a
        # thread pool and its malloc arenas) must not count as growth after the first sample
        read_snapshot(addresses, net.p4info)

        def processes() -> dict[str, tuple[str, int]]:
            return {**switch_pids, **node_processes(job_file, workers, s.ps),
                    "controller (this process)": ("controller", os.getpid())}

        def on_sample(sample: dict) -> None:
            ps = sample["processes"]
            total = sum(p["rss_kib"] or 0 for p in ps.values())
            console.print(f"sample after round {sample['after_round']} ({sample['t_s']:.0f} s"
                          f" into the job): {len(ps)} processes, RSS {total / 1024:.0f} MiB "
                          f"in all, {sum(p['fds'] for p in ps.values())} fds")
            if sample["point"] in (points[0], points[-1]):
                counters.append(read_snapshot(addresses, net.p4info))
            doc["samples"] = sampler.samples
            write()

        sampler = Sampler(points, processes, on_sample)
        monitor = SoakMonitor(net.mininet, graph, plan, net.rules, jobs, net.hosts,
                              net.p4info, say=console.print)
        monitor.sampler = sampler
        monitor.follow(mode_dir / "control.json" if mode == "ina" else None,
                       lambda p: schedules_for("ina", p, workers, n_chunks))
        cfg = job_config(s, job_id=JOB_IDS[mode], mode=mode, plan=monitor.plan,
                         workers=workers, ps=s.ps, hosts=net.hosts, train=train,
                         n_values=n_values, out_dir=mode_dir, members=False)
        record, error = None, None
        with _progress(run) as progress:
            run.progress = progress
            try:
                record = run_mode(run, net.mininet, mode, cfg, workers, s.ps, monitor)
            except ExperimentError as exc:
                error = str(exc)
            finally:
                run.progress = None

    failures: list[str] = []
    rounds = record["rounds"] if record else []
    exact = [r["exact"] for r in rounds]
    if error:
        failures.append(f"the job failed: {error}")
    if len(rounds) != s.rounds:
        failures.append(f"{len(rounds)} of {s.rounds} rounds completed")
    if not all(exact):
        failures.append(f"rounds not exact: {[i for i, e in enumerate(exact) if not e]}")
    failures += sampler.errors
    rows: list[dict] = []
    if len(sampler.samples) >= 2:
        rows, grown = report(sampler.samples, args.threshold)
        failures += grown
    else:
        failures.append(f"only {len(sampler.samples)} sample(s) taken (need 2)")
    times = [r["time_s"] for r in rounds]
    doc.update({
        "rounds_completed": len(rounds), "exact_all_rounds": bool(rounds) and all(exact),
        "not_exact_rounds": [i for i, e in enumerate(exact) if not e],
        "time_per_round_s": {"mean": statistics.fmean(times), "median": statistics.median(times),
                             "max": max(times)} if times else None,
        "retransmissions": sum(r["retransmissions"] for r in rounds),
        "job_wall_s": round(sum(times), 1), "growth": rows,
        "switch_counters": run_counters(counters[0][0], counters[1][0],
                                        {**counters[0][1], **counters[1][1]})
        if len(counters) == 2 else None,
        "ps": record["ps"] if record else None, "error": error, "failures": failures,
        "ok": not failures, "complete": True})
    write()
    if rows:
        print_rows(console, rows, sampler.samples[0], sampler.samples[-1], args.threshold)
    if times:
        console.print(f"{len(rounds)}/{s.rounds} rounds, exact: "
                      f"{sum(exact)}/{len(rounds)}; {statistics.fmean(times):.3f} s/round "
                      f"(median {statistics.median(times):.3f}), "
                      f"{doc['retransmissions']} retransmissions")
    sc = doc["switch_counters"]
    if sc:
        moved = {n: v for n, v in {**sc["drops"], **sc["counters"]}.items() if v}
        console.print("switch counters over the sampled rounds: "
                      + (", ".join(f"{n} {v:,}" for n, v in moved.items()) or "none moved"))
    console.print(f"settings: {line}")
    total = time.perf_counter() - t_start
    console.print(f"total {total:.0f} s; wrote {out_dir / 'soak.json'}")
    for f in failures:
        console.print(f"[red]FAIL[/] {f}")
    console.print("RESULT:", "[green]OK[/]" if not failures else "[red]FAIL[/]")
    return 0 if not failures else 1


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=5, help="rounds before the first sample")
    ap.add_argument("--samples", type=int, default=10, help="samples between first and last")
    ap.add_argument("--threshold", type=float, default=5.0, help="growth that fails, in %%")
    ap.add_argument("--loss", type=float, default=0.02)
    ap.add_argument("--dup", type=float, default=0.0)
    ap.add_argument("--reorder", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["ina", "tor_only", "ps_only"], default="ina")
    ap.add_argument("--topo", default="fattree:4")
    ap.add_argument("--ps", default="h0")
    ap.add_argument("--workers", default="6")
    ap.add_argument("--budget", type=int, default=2)
    ap.add_argument("--bw", type=float, default=1.0, help="Mbit/s per link (0 = unshaped)")
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=0.3)
    ap.add_argument("--round-timeout", type=float, default=120.0)
    ap.add_argument("--out", default=str(ROOT / "results"))
    ap.add_argument("--name", default="")
    args = ap.parse_args(list(argv) if argv is not None else None)
    try:
        sample_points(args.rounds, args.warmup, args.samples)  # before any network
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return soak(args)
    except ExperimentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
