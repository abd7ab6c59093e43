"""pyswitch's P4Runtime server under abuse, at full size, with its memory and descriptors.

Starts ``python -m pyswitch run --no-p4`` on a loopback address, pushes the abuse test
program (tests/test_p4runtime_abuse.py) and runs the campaign of issue 20 item 4 once as a
warm-up and then ``--rounds`` times: 10,000-update batches (all OK, then all failing), 100
and 101 failing updates, wrong widths and unknown ids, garbage device configs (100 M and
2^31-1 register cells among them), pipeline pushes of a 3.5 M-cell program, two controllers
fighting for mastership, 1,000 StreamChannels opened and dropped, and 100 held open while
unary calls are timed. Every answer's status code is checked.

What is measured, and why after a warm-up: the server's RSS, open file descriptors and
threads (from /proc/PID, read before anything else touches the process) at start, after the
first pipeline push, after the warm-up round (the "before" reading) and after each round.
The first round pays one-time costs that are no growth: imports done lazily, the gRPC and
pool threads and their malloc arenas, the first 10,000-entry table's worth of allocator
arenas. Beside RSS, the live memory is read through the switch's control socket (``{"op":
"memory"}``, after a full garbage collection): gc-tracked objects, live pymalloc blocks and
the bytes in them, pymalloc's arenas (1 MiB each), glibc's in-use bytes. One more campaign
(``--traced``, on by default) runs the switch with PYTHONTRACEMALLOC=1: tracemalloc's live
bytes, every Python allocation traced from process start.

The goals (growth from after the warm-up to the end; constants below). RSS alone cannot be
the goal with Python's default allocator: pymalloc gives an arena back to the OS only when
every block in it is free, so the long-lived objects a round allocates among a 10,000-update
batch's temporary ones (table entries, gRPC state) pin arenas whose other blocks are free:
RSS grows by ~2 arenas a round at flat live bytes (fragmentation, not a leak; the switch's
allocations are pyswitch's and are not changed here). So the live heap and RSS are bounded
apart, each with its tolerance:
  * live heap, every run: gc objects, pymalloc blocks and bytes, traced bytes < 1% (a leaked
    10,000-entry table is at least 10,000 blocks, ~4% of the ~258,000 live);
  * PYTHONMALLOC=malloc (no arenas): RSS < 5%, the leak check for everything outside Python
    objects too;
  * PYTHONMALLOC=pymalloc (what the daemon runs with): RSS outside pymalloc's arenas (RSS
    growth minus 1 MiB per arena added) < 5%, and the arenas added < 15% of RSS, the stated
    allowance for fragmentation;
  * the traced run: live bytes only (its RSS holds tracemalloc's tables);
  * file descriptors < 5% in every run, every status code right, the server alive.

    python bench/p4runtime_abuse.py [--rounds 3] [--batch 10000] [--streams 1000]
                                    [--held 100] [--fights 100] [--pushes 5]
                                    [--allocators pymalloc,malloc] [--no-traced]

Exit status 1 when a status code was wrong, the server stopped answering or a goal above was
not met.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import grpc  # noqa: E402
from switch_harness import compile_for, start_switch  # noqa: E402
from test_p4runtime_abuse import (  # noqa: E402
    BIG,
    DST,
    GARBAGE_CONFIGS,
    _bad_updates,
    _close,
    _open_streams,
    become_primary,
    capabilities,
    device_config,
    inserts,
    mac,
    program_source,
    raw_write,
)

from controller.dataplane.p4runtime_client import NotPrimaryError, P4RuntimeError  # noqa: E402
from pyswitch.daemon import control_request  # noqa: E402
from pyswitch.p4runtime.server import WRITE_REPORT_LIMIT  # noqa: E402


def proc_figures(pid: int) -> dict[str, int]:
    """RSS and peak RSS (KiB), open fds and threads of process ``pid``."""
    out = {"fds": len(os.listdir(f"/proc/{pid}/fd"))}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    return out


class Checks:
    """Counts checks and remembers the failed ones (a wrong status is a finding)."""

    def __init__(self) -> None:
        self.done = 0
        self.failed: list[str] = []

    def __call__(self, ok: bool, what: str) -> None:
        self.done += 1
        if not ok:
            self.failed.append(what)
            print(f"  CHECK FAILED: {what}", flush=True)


def step_batches(sw: SimpleNamespace, c: object, n: int, check: Checks) -> None:
    batch = inserts(c, n)
    c.write(batch)
    check(len(c.read_table_entries(BIG)) == n, f"{n} inserts all applied")
    err = raw_write(sw, c, batch)
    check(err is not None and err.code() == grpc.StatusCode.UNKNOWN
          and f"{n} of {n} updates failed" in err.details()
          and f"at most {WRITE_REPORT_LIMIT}" in err.details(),
          f"{n} failing inserts reported, naming the limit")
    err = raw_write(sw, c, [c.update("DELETE", "table_entry", c.table_entry(BIG, {DST: mac(i)}))
                            for i in range(n, n + WRITE_REPORT_LIMIT)])
    details = [v for k, v in (err.trailing_metadata() if err else ()) if
               k == "grpc-status-details-bin"]
    check(err is not None and err.code() == grpc.StatusCode.UNKNOWN and len(details) == 1,
          f"{WRITE_REPORT_LIMIT} failing updates reported one by one to a default client")
    err = raw_write(sw, c, [c.update("DELETE", "table_entry", c.table_entry(BIG, {DST: mac(i)}))
                            for i in range(n, n + WRITE_REPORT_LIMIT + 1)])
    check(err is not None and err.code() == grpc.StatusCode.UNKNOWN
          and f"{WRITE_REPORT_LIMIT + 1} of {WRITE_REPORT_LIMIT + 1} updates failed"
          in err.details(), f"{WRITE_REPORT_LIMIT + 1} failing updates reported by count")


def step_bad_updates(c: object, check: Checks) -> None:
    bad = _bad_updates(c)
    try:
        c.write([u for _, u, _ in bad])
        check(False, "bad updates accepted")
    except P4RuntimeError as exc:
        got = [r.code for r in getattr(exc, "results", [])]
        check(got == [code for _, _, code in bad], f"per-update codes of bad updates: {got}")


def step_garbage(sw: SimpleNamespace, c: object, compiled: object, check: Checks) -> None:
    for what, config, code, _text in GARBAGE_CONFIGS:
        try:
            c.set_pipeline(compiled.p4info_path, config())
            check(False, f"garbage config accepted: {what}")
        except P4RuntimeError as exc:
            check(exc.code == code, f"garbage config {what}: {exc.code}")
    check(capabilities(sw.address) == "1.4.1", "Capabilities after garbage configs")


def step_pushes(c: object, compiled: object, pushes: int, check: Checks) -> None:
    config = device_config(cells=3_500_000)
    for _ in range(pushes):
        c.set_pipeline(compiled.p4info_path, config)
    c.set_pipeline(compiled.p4info_path, compiled.config_path)
    check(c.read_table_entries(BIG) == [], "fresh pipeline after pushes")


def step_fight(sw: object, c: object, fights: int, check: Checks) -> None:
    a = sw.client(election_id=2, connect=False)
    b = sw.client(election_id=3, connect=False)
    a.timeout = b.timeout = c.timeout
    a.connect(require_primary=False)
    b.connect(require_primary=False)
    eid = max(c.election_id[1], 3)
    try:
        for rnd in range(fights):
            eid += 1
            x, y = (a, b) if rnd % 2 == 0 else (b, a)
            x.election_id = (0, eid)
            become_primary(x)
            x.write(inserts(x, 1, start=100_000 + rnd))
            try:
                y.write(inserts(y, 1, start=200_000 + rnd))
                check(False, "a backup's write was accepted")
            except NotPrimaryError:
                check(True, "")
    finally:
        a.close()
        b.close()
        sw.clients.remove(a)
        sw.clients.remove(b)
    c.election_id = (0, eid + 1)
    become_primary(c)


async def _streams(address: str, n: int, held: int, c: object, check: Checks
                   ) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    for start in range(0, n, 100):
        channels, calls = await _open_streams(address, min(100, n - start), arbitrate=True)
        await _close(channels, calls)
    check(await loop.run_in_executor(None, capabilities, address, 5) == "1.4.1",
          f"Capabilities after {n} streams opened and dropped")
    channels, calls = await _open_streams(address, held // 2, arbitrate=True)
    idle = await _open_streams(address, held - held // 2, arbitrate=False)
    times: dict[str, float] = {}
    try:
        t = time.perf_counter()
        check(await loop.run_in_executor(None, capabilities, address, 5) == "1.4.1",
              f"Capabilities with {held} streams open")
        times["capabilities_ms"] = (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        await loop.run_in_executor(None, c.write, inserts(c, 10, start=300_000))
        times["write_10_ms"] = (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        await loop.run_in_executor(None, become_primary, c)
        times["arbitration_ms"] = (time.perf_counter() - t) * 1e3
        check(True, "")
    finally:
        await _close(channels, calls)
        await _close(*idle)
    return times


def one_round(sw: SimpleNamespace, c: object, compiled: object, args: argparse.Namespace,
              check: Checks) -> tuple[dict[str, float], dict[str, float]]:
    """The whole campaign once; the pipeline is pushed afresh at the end (no entries).
    Returns the timings with 100 streams open and the seconds each step took."""
    steps: dict[str, float] = {}
    t = time.monotonic()

    def done(step: str) -> None:
        nonlocal t
        steps[step], t = time.monotonic() - t, time.monotonic()

    step_batches(sw, c, args.batch, check)
    c.set_pipeline(compiled.p4info_path, compiled.config_path)
    done("batches")
    step_bad_updates(c, check)
    step_garbage(sw, c, compiled, check)
    done("bad input")
    step_pushes(c, compiled, args.pushes, check)
    done("pushes")
    step_fight(sw, c, args.fights, check)
    done("fights")
    timings = asyncio.run(_streams(sw.address, args.streams, args.held, c, check))
    done("streams")
    c.set_pipeline(compiled.p4info_path, compiled.config_path)
    time.sleep(1.0)  # let the server finish tearing down dropped streams
    return timings, steps


def server_figures(pid: int, sock: str) -> dict[str, int]:
    """/proc figures first (nothing else touched the process), then the live memory the
    switch reports on its control socket after a full garbage collection."""
    out = proc_figures(pid)
    mem = control_request(sock, {"op": "memory", "collect": True, "pymalloc": True}, 60)
    for key in ("py_blocks", "gc_objects", "pymalloc_arenas", "pymalloc_in_use",
                "malloc_in_use", "traced_bytes"):
        if key in mem:
            out[key] = mem[key]
    return out


def run_campaign(args: argparse.Namespace, allocator: str, traced: bool = False
                 ) -> tuple[dict, dict, int, Checks, float]:
    """One switch process (Python allocator ``allocator``, tracemalloc from its start if
    ``traced``): first push, a warm-up round, ``args.rounds`` rounds."""
    check = Checks()
    name = f"{allocator}+tracemalloc" if traced else allocator
    env = {"PYTHONMALLOC": allocator, **({"PYTHONTRACEMALLOC": "1"} if traced else {})}
    os.environ.update(env)  # for the switch process only (this one is running already)
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            (tmp / "abuse.p4").write_text(program_source())
            sock = str(tmp / "ctl.sock")
            sw = start_switch("pyswitch", {}, tmp, control_socket=sock)
            pid = sw.proc.pid
            figures = {"start": server_figures(pid, sock)}
            t0 = time.monotonic()
            timings: dict[str, float] = {}
            try:
                compiled = compile_for("pyswitch", tmp / "abuse.p4", tmp / "build")
                c = sw.client(election_id=1)
                # what is judged is status codes and memory, not speed: on 2 shared cores a
                # 10,000-entry Read took more than the harness's 10 s (tracemalloc: slower)
                c.timeout = CLIENT_TIMEOUT_S * (2 if traced else 1)
                c.set_pipeline(compiled.p4info_path, compiled.config_path)
                figures["pushed"] = server_figures(pid, sock)
                try:
                    for rnd in range(args.rounds + 1):
                        timings, steps = one_round(sw, c, compiled, args, check)
                        point = "warm-up" if rnd == 0 else f"round {rnd}"
                        figures[point] = server_figures(pid, sock)
                        print(f"  [{name}] {point}: " +
                              ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()) +
                              f"; RSS {figures[point]['VmRSS']} KiB", flush=True)
                except (P4RuntimeError, grpc.RpcError) as exc:  # a finding, not a crash
                    check(False, f"a call failed, the campaign stopped there: {exc}")
                try:
                    alive = capabilities(sw.address, CLIENT_TIMEOUT_S) == "1.4.1"
                except grpc.RpcError:
                    alive = False
                check(sw.alive() and alive, "alive at end")
                log_lines = len(sw.log().splitlines())
            finally:
                sw.stop()
    finally:
        for key in env:
            os.environ.pop(key, None)
    return figures, timings, log_lines, check, time.monotonic() - t0


CLIENT_TIMEOUT_S = 60
"""Deadline of the bench's P4Runtime calls (its client; raw Writes have their own 60 s)."""

ARENA_KIB = 1024
"""One pymalloc arena (CPython 3.10+ on 64-bit: 1 MiB, mmapped; given back to the OS only
when every block in it is free)."""

# The goals (module doc, "The goals").  After the warm-up round, to the end:
LIVE_GOAL = 1.0
"""% growth of the live Python heap: gc-tracked objects, pymalloc's live blocks and
tracemalloc's live bytes, each after a full collection."""
RSS_GOAL = 5.0
"""% growth of RSS with the system allocator (PYTHONMALLOC=malloc), and, with pymalloc, of
RSS outside pymalloc's arenas (RSS growth minus 1 MiB per arena added)."""
ARENA_GOAL = 15.0
"""With pymalloc, % of RSS (after the warm-up) that the arenas added since may take: the
allowance for fragmentation (an arena is kept while one block in it lives; measured +9 to
+12 %, live bytes flat)."""
FD_GOAL = 5.0


def growth(a: int, b: int) -> float:
    return 100.0 * (b - a) / a if a else 0.0


COLUMNS = (("RSS KiB", "VmRSS", 1), ("peak KiB", "VmHWM", 1), ("fds", "fds", 1),
           ("threads", "Threads", 1), ("py blocks", "py_blocks", 1),
           ("gc objects", "gc_objects", 1),
           ("arenas", "pymalloc_arenas", 1), ("pymalloc KiB", "pymalloc_in_use", 1024),
           ("malloc KiB", "malloc_in_use", 1024), ("traced KiB", "traced_bytes", 1024))


def verdicts(figures: dict[str, dict[str, int]], allocator: str, traced: bool
             ) -> list[tuple[str, float, float]]:
    """The judged growths of one run, from after the warm-up to its last reading, as
    (what, growth %, goal %): pure, so that tests can feed it figures. Which figures are
    judged depends on the run (module doc, "The goals")."""
    before, end = figures["warm-up"], figures[list(figures)[-1]]
    out = [("fds", growth(before["fds"], end["fds"]), FD_GOAL)]
    live = [("gc objects", "gc_objects"), ("traced bytes", "traced_bytes")]
    if allocator == "pymalloc":  # under malloc sys.getallocatedblocks() is 0
        live += [("py blocks", "py_blocks"), ("pymalloc bytes", "pymalloc_in_use")]
    out += [(f"live {title}", growth(before[key], end[key]), LIVE_GOAL)
            for title, key in live if key in before]
    if traced:  # RSS then includes tracemalloc's own tables: not judged
        return out
    if allocator == "pymalloc" and "pymalloc_arenas" in before:
        added = end["pymalloc_arenas"] - before["pymalloc_arenas"]
        out.append(("RSS in added arenas", 100.0 * added * ARENA_KIB / before["VmRSS"],
                    ARENA_GOAL))
        outside = end["VmRSS"] - before["VmRSS"] - added * ARENA_KIB
        out.append(("RSS outside the arenas", 100.0 * outside / before["VmRSS"], RSS_GOAL))
    else:
        out.append(("RSS", growth(before["VmRSS"], end["VmRSS"]), RSS_GOAL))
    return out


def report(name: str, figures: dict, allocator: str, traced: bool) -> bool:
    """Print one run's table, growths and verdicts; whether every goal was met."""
    cols = [c for c in COLUMNS if c[1] in figures.get("start", {})]
    print(f"\n{name}")
    print(f"{'point':<9}" + "".join(f" {title:>12}" for title, _, _ in cols))
    for point, f in figures.items():
        print(f"{point:<9}" + "".join(f" {f.get(key, 0) // div:>12}" for _, key, div in cols))
    if "warm-up" not in figures or len(figures) < 4:
        print("no measured round finished: nothing to judge")
        return False
    before, end, pushed = figures["warm-up"], figures[list(figures)[-1]], figures["pushed"]
    print(f"after warm-up -> end: RSS {growth(before['VmRSS'], end['VmRSS']):+.1f}% "
          f"(from the first push: {growth(pushed['VmRSS'], end['VmRSS']):+.1f}%)" +
          "".join(f", {title} {growth(before[key], end[key]):+.2f}%"
                  for title, key in (("malloc in-use bytes", "malloc_in_use"),)
                  if key in before))
    ok = True
    for what, value, goal in verdicts(figures, allocator, traced):
        met = value < goal
        ok = ok and met
        print(f"  {what:<24} {value:+7.2f}%  goal < {goal:g}%  {'met' if met else 'NOT MET'}")
    if traced:
        print("  (RSS of this run includes tracemalloc's tables and is not judged)")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds after the warm-up")
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--held", type=int, default=100)
    ap.add_argument("--fights", type=int, default=100)
    ap.add_argument("--pushes", type=int, default=5)
    ap.add_argument("--allocators", default="pymalloc,malloc",
                    help="PYTHONMALLOC values to run the switch with, one campaign each "
                         "(pymalloc is what the switch uses unless told otherwise)")
    ap.add_argument("--traced", action=argparse.BooleanOptionalAction, default=True,
                    help="one more campaign with PYTHONTRACEMALLOC=1: live-bytes growth")
    ap.add_argument("--smoke", action="store_true",
                    help="a short campaign checking the bench still works (figures rough)")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.batch, args.streams, args.held = 1, 200, 20, 5
        args.fights, args.pushes, args.allocators, args.traced = 3, 1, "pymalloc", False
    print(f"settings: warm-up round + rounds={args.rounds} batch={args.batch} "
          f"streams={args.streams} held={args.held} fights={args.fights} "
          f"pushes={args.pushes} allocators={args.allocators} traced={args.traced} "
          f"python={platform.python_version()} cpus={os.cpu_count()}; server: python -m "
          f"pyswitch run --no-p4 on 127.0.0.1; growth judged from after the warm-up round "
          f"(one-time costs excluded) to the end; live memory after a full gc",
          flush=True)
    runs = [(a, False) for a in args.allocators.split(",") if a]
    if args.traced:
        runs.append(("pymalloc", True))
    failed = False
    for allocator, traced in runs:
        name = f"PYTHONMALLOC={allocator}" + (" PYTHONTRACEMALLOC=1" if traced else "")
        figures, timings, log_lines, check, total = run_campaign(args, allocator, traced)
        ok = report(name, figures, allocator, traced) and not check.failed
        print(f"with {args.held} streams open: " +
              ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
        print(f"server log: {log_lines} lines for the whole campaign")
        print(f"checks: {check.done} done, {len(check.failed)} failed; {total:.1f} s")
        print(f"RESULT ({name}):", "OK" if ok else "FAIL", flush=True)
        failed = failed or not ok
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
