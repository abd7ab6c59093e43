"""Packets/s of pyswitch on the INA-like workload, in-process, one core.

Workload (tests/p4/pyswitch_ina_like.p4): parse Ethernet/IPv4/UDP + an aggregation header
with 32 x bit<32> values, crc32 hash of (job, round, chunk) -> slot, 32 register
read-modify-writes, a counter, IPv4 LPM forwarding, IPv4 checksum update, deparse.
Frames are distinct (chunk id varies) and pre-built; the figure is frames through
`Switch.process` per second of wall time (best of --repeat runs), on both execution paths
side by side (``python``: the generated Python; ``native``: the same program compiled to
C), interleaved, with their ratio.

    python bench/pyswitch_pps.py [--packets 50000] [--repeat 3] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import platform
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scapy.all import IP, UDP, Ether, raw  # noqa: E402

from pyswitch import Switch, compile_p4  # noqa: E402
from pyswitch.native import unavailable  # noqa: E402
from pyswitch.values import ipv4, mac  # noqa: E402

PROG = ROOT / "tests" / "p4" / "pyswitch_ina_like.p4"
NVALS = 32


def frames(n: int) -> list[bytes]:
    base = Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") / IP(
        src="10.0.0.1", dst="10.0.1.1") / UDP(sport=5000, dport=0x4650)
    out = []
    for i in range(n):
        agg = struct.pack(">HHIB", 1, 0, i % 4096, 0)
        vals = struct.pack(f">{NVALS}I", *[(i * 7 + k) & 0xFFFF for k in range(NVALS)])
        out.append(raw(base / (agg + vals)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="a seconds-long run checking the bench still works (figure rough)")
    args = ap.parse_args()
    if args.smoke:
        args.packets, args.repeat = 500, 1
    t0 = time.perf_counter()
    prog = compile_p4(PROG)
    t_compile = time.perf_counter() - t0
    fs = frames(256 if args.smoke else 4096)
    nf = len(fs)
    n = args.packets
    paths = ["python"] if unavailable() else ["python", "native"]
    if unavailable():
        print(f"native path: not measured ({unavailable()})")
    best = {p: 0.0 for p in paths}
    cpu_us = {p: float("inf") for p in paths}
    switches = {}
    for path in best:
        sw = Switch(prog, native=path == "native")
        sw.insert_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (ipv4("10.0.1.0"), 24)},
                        "MyIngress.ipv4_forward",
                        {"dstAddr": mac("00:00:00:00:01:01"), "port": 2})
        out = sw.process(1, fs[0])
        assert out and out[0][0] == 2, "workload did not forward"
        switches[path] = sw
    for _ in range(args.repeat):
        for path, sw in switches.items():  # interleaved: both see the same machine
            process = sw.process
            t, c = time.perf_counter(), time.process_time()
            for i in range(n):
                process(1, fs[i % nf])
            dt = time.perf_counter() - t
            best[path] = max(best[path], n / dt)
            cpu_us[path] = min(cpu_us[path], (time.process_time() - c) / n * 1e6)
    for path in best:
        print(f"pyswitch INA-like workload, {path} path: {best[path]:,.0f} packets/s; "
              f"{cpu_us[path]:.2f} us CPU per packet (best run; steadier than packets/s on a "
              f"shared machine)")
    if len(paths) == 2:
        print(f"  native / python: {best['native'] / best['python']:.2f}x in packets/s, "
              f"{cpu_us['python'] / cpu_us['native']:.2f}x in CPU per packet")
    print(f"  settings: best of {args.repeat} x {n} packets, {len(fs[0])}-byte frames, {NVALS} "
          f"values, crc32 slot hash, {NVALS} register RMWs, LPM, csum16 update; one core, "
          f"in-process; Python {platform.python_version()} on {platform.machine()}; "
          f"compile {t_compile:.2f}s; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
