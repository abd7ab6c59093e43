"""Frames per second forwarded by ``python -m pyswitch run`` between two namespaces.

Setup: namespaces ``snd`` and ``rcv`` each with ``eth0`` wired by a veth to the root
namespace, where ``pyswitch run`` owns the two peers as ports 1 and 2 (pinned to CPU 0); the
sender (pinned to CPU 1 when there are ≥ 2 CPUs) floods frames from ``snd`` through an
AF_PACKET socket for the whole measurement; the figure is the receive rate at ``rcv``'s
eth0 (kernel counter, no user-space receiver), sampled after a warm-up.

Programs (tests/p4/): ``plain`` = rt_forward.p4 (l2 exact table → port);
``ina`` = rt_ina_like.p4 (a 32 × 32-bit value header added into 32 registers at a
CRC32-hashed slot, sums written back, exact table on ingress port → port).

Needs root. Usage: ``python bench/pyswitch_forwarding.py [--seconds 3] [--program both]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from google.protobuf import text_format  # noqa: E402

from controller.dataplane.p4runtime_client import SwitchConnection  # noqa: E402
from pyswitch.native import unavailable  # noqa: E402

SENDER = r"""
import socket, struct, sys, time
kind, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
dst, src = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
if kind == "ina":
    frames = [dst + src + b"\x88\xb6" + struct.pack("!I", c) + struct.pack("!32I", *range(c, c + 32))
              for c in range(64)]
else:
    frames = [dst + src + b"\x88\xb5" + bytes([c]) * 50 for c in range(64)]
end = time.monotonic() + seconds
n = 0
send = s.send
while time.monotonic() < end:
    for f in frames:
        try:
            send(f)
        except OSError:
            pass
    n += len(frames)
print(n)
"""


RAW_FORWARDER = r"""
import socket, sys
# the reference: a bare Python forwarder, one recv and one send system call per frame
a, b = sys.argv[1], sys.argv[2]
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
rx.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
rx.bind((a, 3))
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
tx.bind((b, 0))
recv, send = rx.recv, tx.send
while True:
    try:
        send(recv(65600))
    except OSError:
        pass
"""


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=30)


def rx_packets(ns: str) -> int:
    out = sh("ip", "netns", "exec", ns, "cat", "/sys/class/net/eth0/statistics/rx_packets")
    return int(out.stdout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(kind: str, seconds: float, tag: str, workdir: Path,
            forwarder: str = "pyswitch") -> dict[str, float]:
    """One run of `forwarder`: ``pyswitch`` (native path), ``pyswitch-py`` (Python path),
    ``raw`` or ``bmv2`` (simple_switch_grpc, the program compiled by p4c)."""
    from pyswitch import compile_p4

    p4 = REPO / "tests" / "p4" / ("rt_ina_like.p4" if kind == "ina" else "rt_forward.p4")
    prog = compile_p4(str(p4))
    if forwarder == "pyswitch":  # build the native module now: not inside the measurement
        from pyswitch import Switch

        Switch(prog, native=True)
    cfg, info = workdir / f"{kind}.json", workdir / f"{kind}.p4info.txt"
    prog.save(str(cfg))
    info.write_text(text_format.MessageToString(prog.p4info))
    snd, rcv = f"{tag}snd", f"{tag}rcv"
    created: list[tuple[str, str]] = []
    proc = None
    try:
        for ns, sw_if in ((snd, f"{tag}p1"), (rcv, f"{tag}p2")):
            sh("ip", "netns", "add", ns)
            created.append((ns, sw_if))
            sh("ip", "link", "add", sw_if, "type", "veth", "peer", "name", "eth0", "netns", ns)
            for cmd in (("ip", "-n", ns, "link", "set", "eth0", "up"),
                        ("ip", "link", "set", sw_if, "up"),
                        ("sysctl", "-qw", f"net.ipv6.conf.{sw_if}.disable_ipv6=1"),
                        ("ip", "netns", "exec", ns, "sysctl", "-qw",
                         "net.ipv6.conf.eth0.disable_ipv6=1")):
                sh(*cmd)
        addr = f"127.0.0.1:{free_port()}"
        ctl = str(workdir / f"{kind}.sock")
        cpus = sorted(os.sched_getaffinity(0))
        pin_sw = ["taskset", "-c", str(cpus[0])] if os.environ.get("PIN", "1") == "1" else []
        pin_tx = ["taskset", "-c", str(cpus[1])] if len(cpus) > 1 else []
        if forwarder == "raw":
            proc = subprocess.Popen(pin_sw + [sys.executable, "-c", RAW_FORWARDER,
                                              f"{tag}p1", f"{tag}p2"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
            time.sleep(0.3)
            return _flood(kind, seconds, snd, rcv, pin_tx, None, forwarder, proc.pid)
        env = dict(os.environ, PYSWITCH_NATIVE="off" if forwarder == "pyswitch-py" else "on")
        if forwarder == "bmv2":  # p4c's JSON and P4Info, pushed over P4Runtime below
            subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model",
                            "--p4runtime-files", str(info), "-o", str(workdir), str(p4)],
                           check=True, capture_output=True, timeout=300)
            cfg, ctl = workdir / f"{p4.stem}.json", None
            cmd = ["simple_switch_grpc", "-i", f"1@{tag}p1", "-i", f"2@{tag}p2",
                   "--thrift-port", str(free_port()), "--no-p4", "--",
                   "--grpc-server-addr", addr]
        else:
            cmd = [sys.executable, "-m", "pyswitch", "run", "-i", f"1@{tag}p1",
                   "-i", f"2@{tag}p2", "--grpc-server-addr", addr, "--control-socket",
                   ctl, str(cfg)]
        proc = subprocess.Popen(pin_sw + cmd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=REPO, start_new_session=True,
                                env=env)
        c = SwitchConnection(addr, name=f"bench-{kind}", timeout=15)
        for _ in range(100):
            try:
                c.connect()
                break
            except Exception:
                time.sleep(0.1)
        if forwarder == "bmv2":
            c.set_pipeline(info, cfg)
        else:
            c.use_p4info(info)
        if kind == "ina":
            c.insert_table_entry("MyIngress.fwd", {"standard_metadata.ingress_port": 1},
                                 "MyIngress.set_port", {"port": 2})
        else:
            c.insert_table_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": "02:00:00:00:00:02"},
                                 "MyIngress.set_port", {"port": 2})
        c.close()
        return _flood(kind, seconds, snd, rcv, pin_tx, ctl, forwarder, proc.pid)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for ns, sw_if in created:
            sh("ip", "link", "del", sw_if, check=False)
            sh("ip", "netns", "del", ns, check=False)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads) so far."""
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid`` by thread name (comm, ``name/tid``)."""
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (t / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        f = text.rsplit(")", 1)[1].split()
        out[f"{name}/{t.name}"] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def _flood(kind: str, seconds: float, snd: str, rcv: str, pin_tx: list[str],
           ctl: str | None, forwarder: str, pid: int) -> dict[str, float]:
    """Flood from ``snd`` and count what reaches ``rcv`` (the forwarder is running)."""
    sender = None
    try:
        warm = 1.0
        sender = subprocess.Popen(["ip", "netns", "exec", snd] + pin_tx +
                                  [sys.executable, "-c", SENDER, kind, str(seconds + warm + 0.5)],
                                  stdout=subprocess.PIPE, text=True)
        time.sleep(warm)
        r0, t0, c0 = rx_packets(rcv), time.monotonic(), cpu_seconds(pid)
        th0 = thread_cpu(pid)
        time.sleep(seconds)
        r1, t1, c1 = rx_packets(rcv), time.monotonic(), cpu_seconds(pid)
        th1 = thread_cpu(pid)
        sent = int(sender.communicate(timeout=seconds + 30)[0].strip() or 0)
        sender = None
        r = {"program": kind, "forwarder": forwarder,
             "forwarded_fps": round((r1 - r0) / (t1 - t0)),
             # CPU the forwarder spent per forwarded frame: its cost, whatever the load
             "cpu_us_per_frame": round((c1 - c0) / max(1, r1 - r0) * 1e6, 2),
             "offered_fps": round(sent / (seconds + warm + 0.5)),
             "busiest_threads_cpu_s": dict(sorted(
                 ((k, round(v - th0.get(k, 0.0), 2)) for k, v in th1.items()),
                 key=lambda kv: -kv[1])[:3])}
        if ctl is not None:
            from pyswitch.daemon import control_request

            counters = control_request(ctl, {"op": "counters"})
            r["switch_processed"] = counters["switch"]["processed"]
            r["path"] = counters["switch"]["path"]
            r["port2_tx"] = counters["ports"]["2"]["tx_frames"]
        return r
    finally:
        if sender is not None:
            sender.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--program", choices=["plain", "ina", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per program; the median is the figure (the 2 CPUs are shared)")
    ap.add_argument("--smoke", action="store_true",
                    help="a seconds-long check that the harness still works (figures rough)")
    args = ap.parse_args()
    if args.smoke:
        args.seconds, args.repeat, args.program = 0.5, 1, "ina"
    if os.geteuid() != 0:
        print("pyswitch_forwarding: needs root (namespaces, raw sockets)", file=sys.stderr)
        return 1
    kinds = ["plain", "ina"] if args.program == "both" else [args.program]
    forwarders = ["pyswitch", "pyswitch-py", "raw"]
    if unavailable():
        print(f"pyswitch (native path): not measured ({unavailable()})")
        forwarders.remove("pyswitch")
    if shutil.which("simple_switch_grpc") and shutil.which("p4c"):
        forwarders.append("bmv2")
    else:
        print("bmv2: simple_switch_grpc and p4c are not on PATH: not measured")
    print(f"settings: {args.seconds:g} s per run after 1 s warm-up, {args.repeat} runs per "
          f"program and forwarder (interleaved), sender floods 64 distinct frames from "
          f"namespace snd on the other CPU, forwarder pinned to CPU "
          f"{sorted(os.sched_getaffinity(0))[0]}, figure = receive rate at namespace rcv; "
          f"pyswitch = the native path (PYSWITCH_NATIVE=on), pyswitch-py = the Python path, "
          f"bmv2 = simple_switch_grpc where it is on PATH; "
          f"raw = a bare Python AF_PACKET forwarder (one recv + one send per frame); "
          f"Python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            rates: dict[str, list[int]] = {f: [] for f in forwarders}
            costs: dict[str, list[float]] = {f: [] for f in forwarders}
            for run in range(args.repeat):
                for fw in forwarders:
                    tag = f"b{os.getpid() % 10000}{kind[0]}{forwarders.index(fw)}{run}"
                    r = measure(kind, args.seconds, tag, Path(tmp), fw)
                    print(json.dumps(r))
                    rates[fw].append(r["forwarded_fps"])
                    costs[fw].append(r["cpu_us_per_frame"])
            med, cost = {}, {}
            for fw in forwarders:
                rs, cs = sorted(rates[fw]), sorted(costs[fw])
                med[fw], cost[fw] = rs[len(rs) // 2], cs[len(cs) // 2]
                print(f"{kind} {fw}: {med[fw]} frames/s forwarded (median of {len(rs)}; "
                      f"min {rs[0]}, max {rs[-1]}); {cost[fw]:.2f} us CPU per frame")
            for fw in [f for f in forwarders if f != "raw"]:
                ratio = med[fw] / med["raw"] if med["raw"] else float("nan")
                cratio = cost["raw"] / cost[fw] if cost[fw] else float("nan")
                print(f"{kind}: {fw} / raw Python forwarder = {ratio:.2f} in frames/s, "
                      f"{cratio:.2f} in CPU per frame (raw's / {fw}'s: the frames/s ratio "
                      f"of an idle machine)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
