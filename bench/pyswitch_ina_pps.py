"""Per-packet cost of pyswitch on p4src/ina.p4 itself, in-process, one core.

The switch under test is an aggregator (switch id 5, not the PS's ToR) configured over the
in-process API as the controller would (docs/protocol.md): one job of W workers on host
ports 1..W, RESULT multicast group 1 to those ports, PARTIALs routed to the ToR over a
two-port ECMP group. Each chunk is W GRADs (claim, joins, completion -> one PARTIAL) then
its RESULT from the fabric (slot release + W multicast copies), so every pass over the
pre-built frames leaves the registers as it found them. The figure is frames into the
switch per second of wall time and its inverse, and the CPU time per frame; the median of
--repeat runs is printed with every run.  Both execution paths run side by side in one
run, interleaved (docs/pyswitch-api.md, "The native path"): ``python`` (the generated
Python) and ``native`` (the same program compiled to C), with their ratio; ``--path``
measures one of them.  Each path is measured two ways: a frame per call
(``Switch.process``, the loop in Python) and in batches of --batch frames
(``Switch.process_batch``, the loop in C on the native path; the daemon's receive batch
is 64 frames); ``--batch 0`` measures only the first.

    python bench/pyswitch_ina_pps.py [--frames 40000] [--repeat 5] [--workers 4]
                                    [--batch 64] [--program p4src/ina.p4] [--path both]
                                    [--smoke]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from pyswitch import Switch, compile_p4  # noqa: E402
from pyswitch.native import NotNative, unavailable  # noqa: E402
from workers.ina import constants as C  # noqa: E402
from workers.ina.constants import num_slots  # noqa: E402
from workers.ina.wire import FrameTemplate, InaPacket, MsgType  # noqa: E402

PROG = ROOT / "p4src" / "ina.p4"
AGG, TOR, JOB, MCAST = 5, 9, 3, 1
UPLINKS = [20, 21]
ING = "MyIngress."


def configure(sw: Switch, workers: int) -> None:
    """The rules deploy.py would write for an aggregating, non-ToR switch."""
    sw.set_default_action(ING + "switch_config", ING + "set_switch_config",
                          {"switch_id": AGG, "agg_enabled": 1})
    for p in UPLINKS:
        sw.insert_entry(ING + "port_config", {"standard_metadata.ingress_port": p},
                        ING + "set_port_fabric", {})
    sw.insert_entry(ING + "job_table", {"hdr.ina.job_id": JOB}, ING + "set_job",
                    {"full_mask": (1 << workers) - 1, "is_ps_tor": 0, "tor_id": TOR,
                     "ps_port": 0, "mcast_grp": MCAST,
                     "slot_base": 0, "slot_size": num_slots(), "hier": 0, "fan_in": 0})
    for w in range(workers):
        sw.insert_entry(ING + "ina_member", {"hdr.ina.job_id": JOB, "hdr.ina.worker_id": w,
                                             "standard_metadata.ingress_port": w + 1},
                        ING + "member_ok", {})
    sw.insert_entry(ING + "ina_route", {"hdr.ina.agg_id": TOR}, ING + "set_group",
                    {"base": 0, "size": len(UPLINKS)})
    for i, p in enumerate(UPLINKS):
        sw.insert_entry(ING + "ina_nexthop", {"meta.member_index": i}, ING + "set_port",
                        {"port": p})
    sw.set_multicast_group(MCAST, [(w + 1, 0) for w in range(workers)])


def as_ps_tor(sw: Switch) -> None:
    """Make a switch :func:`configure` set up the job's PS ToR instead (its PS behind the
    first uplink, a pool of 64 slots from 8): the differential tests' second variant."""
    sw.modify_entry(ING + "job_table", {"hdr.ina.job_id": JOB}, ING + "set_job",
                    {"full_mask": 15, "is_ps_tor": 1, "tor_id": AGG, "ps_port": UPLINKS[0],
                     "mcast_grp": MCAST, "slot_base": 8, "slot_size": 64, "hier": 0,
                     "fan_in": 0})


def frames(chunks: int, workers: int) -> list[tuple[int, bytes]]:
    """(ingress port, frame) for `chunks` chunks: W GRADs then the RESULT of each."""
    tmpl = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254")
    out: list[tuple[int, bytes]] = []
    for c in range(chunks):
        for w in range(workers):
            vals = np.arange(C.K, dtype=np.int64) * (w + 1) + c
            out.append((w + 1, tmpl.encode(InaPacket.grad(JOB, 1, c, AGG, workers, w, vals))))
        res = InaPacket(int(MsgType.RESULT), 0, JOB, 1, c, 0, 0, workers, 0,
                        (1 << workers) - 1, np.zeros(C.K, dtype=np.int64))
        out.append((UPLINKS[0], tmpl.encode(res)))
    return out


def check(sw: Switch, workload: list[tuple[int, bytes]], workers: int) -> None:
    """The workload does what it claims: one PARTIAL per chunk, W copies per RESULT."""
    outs = [sw.process(p, f) for p, f in workload[:workers + 1]]
    assert all(not o for o in outs[:workers - 1]), "a non-final GRAD left the switch"
    assert len(outs[workers - 1]) == 1 and outs[workers - 1][0][0] in UPLINKS, "no PARTIAL"
    assert sorted(p for p, _ in outs[workers]) == list(range(1, workers + 1)), "no RESULT"


def measure(sw: Switch, workload: list[tuple[int, bytes]], n: int) -> tuple[float, float]:
    """(frames/s, CPU us per frame) of `n` frames of the workload through `sw`."""
    process, m = sw.process, len(workload)
    t, c = time.perf_counter(), time.process_time()
    for i in range(n):
        p, f = workload[i % m]
        process(p, f)
    return n / (time.perf_counter() - t), (time.process_time() - c) / n * 1e6


def measure_batches(sw: Switch, workload: list[tuple[int, bytes]], n: int,
                    size: int) -> tuple[float, float]:
    """(frames/s, CPU us per frame) of `n` frames of the workload (the frames `measure`
    takes) through `sw` in batches of `size` frames (the batches made before timing)."""
    m = len(workload)
    seq = [workload[i % m] for i in range(n)]
    batches = [seq[i:i + size] for i in range(0, n, size)]
    batch = sw.process_batch
    t, c = time.perf_counter(), time.process_time()
    for b in batches:
        batch(b)
    return n / (time.perf_counter() - t), (time.process_time() - c) / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=40000, help="frames per run")
    ap.add_argument("--repeat", type=int, default=5, help="runs (the median is reported)")
    ap.add_argument("--workers", type=int, default=4, help="workers of the job (fan-in)")
    ap.add_argument("--batch", type=int, default=64,
                    help="frames per Switch.process_batch call (default 64, the daemon's "
                         "receive batch; 0: only a frame per call)")
    ap.add_argument("--program", type=Path, default=PROG,
                    help="the P4 program (default p4src/ina.p4; e.g. an older copy to compare)")
    ap.add_argument("--path", choices=["both", "python", "native"], default="both",
                    help="the execution paths to measure (default both, side by side)")
    ap.add_argument("--smoke", action="store_true",
                    help="a seconds-long run checking the bench still works (figure rough)")
    args = ap.parse_args()
    if args.batch < 0 or args.frames < 1 or args.repeat < 1 or args.workers < 1:
        print("pyswitch_ina_pps: --batch must be >= 0, --frames, --repeat and --workers "
              ">= 1", file=sys.stderr)
        return 2
    if args.smoke:
        args.frames, args.repeat = 500, 1
    t0 = time.perf_counter()
    prog = compile_p4(args.program)
    t_compile = time.perf_counter() - t0
    paths = ["python", "native"] if args.path == "both" else [args.path]
    if args.path == "both" and unavailable():
        print(f"native path: not measured ({unavailable()})")
        paths = ["python"]
    workload = frames(1024, args.workers)
    switches = {}
    for path in paths:
        t0 = time.perf_counter()
        try:
            sw = Switch(prog, native=path == "native")
        except NotNative as e:
            print(f"pyswitch_ina_pps: the native path cannot run {args.program}: {e}",
                  file=sys.stderr)
            return 1
        t_build = time.perf_counter() - t0
        configure(sw, args.workers)
        check(sw, workload, args.workers)
        for p, f in workload[args.workers + 1:]:  # finish the pass the check started
            sw.process(p, f)
        switches[path] = (sw, t_build)
    modes = ["frame", "batch"] if args.batch else ["frame"]
    runs = [(p, m) for p in paths for m in modes]
    rates: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
    cpus: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
    for _ in range(args.repeat):
        for path, mode in runs:  # interleaved: all see the same machine
            sw = switches[path][0]
            r, c = (measure(sw, workload, args.frames) if mode == "frame"
                    else measure_batches(sw, workload, args.frames, args.batch))
            rates[path, mode].append(r)
            cpus[path, mode].append(c)
    try:
        shown = args.program.resolve().relative_to(ROOT)
    except ValueError:
        shown = args.program
    meds, cmeds = {}, {}
    how = {"frame": "a frame per call (Switch.process)",
           "batch": f"batches of {args.batch} (Switch.process_batch)"}
    for path, mode in runs:
        med = meds[path, mode] = statistics.median(rates[path, mode])
        cmeds[path, mode] = statistics.median(cpus[path, mode])
        print(f"pyswitch on {shown}, {path} path, {how[mode]}: {med:,.0f} frames/s = "
              f"{1e6 / med:.2f} us/frame (median of {args.repeat} x {args.frames} frames; "
              f"runs: {', '.join(f'{r:,.0f}' for r in rates[path, mode])}); CPU per frame "
              f"{cmeds[path, mode]:.2f} us; switch built in {switches[path][1]:.2f} s")
    for mode in modes if len(paths) == 2 else []:
        print(f"  native / python, {mode}: {meds['native', mode] / meds['python', mode]:.2f}x "
              f"in frames/s, {cmeds['python', mode] / cmeds['native', mode]:.2f}x in CPU "
              f"per frame")
    for path in paths if len(modes) == 2 else []:
        print(f"  {path} path, batch / frame: {meds[path, 'batch'] / meds[path, 'frame']:.2f}x "
              f"in frames/s, {cmeds[path, 'frame'] / cmeds[path, 'batch']:.2f}x in CPU "
              f"per frame")
    print(f"  workload: aggregator switch, {args.workers} workers, K={C.K} values, per chunk "
          f"{args.workers} GRADs (claim/join/complete -> 1 PARTIAL) + 1 RESULT "
          f"(release, {args.workers} multicast copies); {len(workload[0][1])}-byte frames; "
          f"one core, in-process; Python {platform.python_version()} on "
          f"{platform.machine()}; compile {t_compile:.2f}s; load average "
          f"{os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
