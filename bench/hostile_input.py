"""The parts of ``bench/hostile_frames.py`` that need no network (issue 20 item 3;
docs/design.md §9, docs/protocol.md §4 and §8): hostile frames and host-side datagrams, the
attacker's ToR run in-process to predict each frame's fate, and the threads that send, inject
and sniff from inside Mininet hosts' namespaces.

Frames (``make_frames``): truncated, oversized, bit-flipped and random frames, and INA frames
that lie (``LIES``).  Every IPv4 header we write carries TOS ``MARK_TOS``, which no honest
frame has, so sniffers can count the hostile frames a switch forwarded (a bit flip inside an
IPv4 header breaks its checksum: the switch drops it, so a forwarded frame's marker is intact).
Host-side datagrams (``host_datagram``) are only ones the PS or a worker must refuse.
"""

from __future__ import annotations

import ctypes
import errno
import os
import random
import select
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workers.ina.constants import INA_UDP_PORT, TYPE_GRAD, TYPE_PARTIAL, TYPE_RESULT, K
from workers.ina.wire import HEADER_NAMES, FrameTemplate, InaPacket, encode_payload, ipv4_checksum

MARK_TOS = 0xB4  # DSCP 45 on every hostile IPv4 header: honest frames carry TOS 0
MAX_FRAME = 1514  # MTU 1500 + Ethernet header (AF_PACKET allows 4 more for VLAN frames only)
FAR = 0xFFFF0000  # "far future" rounds: any 3 bit flips leave them above 2^29
KINDS = ("truncated", "oversized", "bitflip", "random", "lie")
WEIGHTS = (0.15, 0.10, 0.20, 0.20, 0.35)
LIES = ("member_spoof", "outside_worker", "foreign_job", "fan_in", "result_from_host",
        "partial_from_host", "round_future", "round_past")
HOST_KINDS = ("truncated", "oversized", "bitflip", "random", "lie")
PS_LIES = ("job", "type", "chunk", "bitmap", "grad_bitmap", "count", "round_future",
           "round_past")
WORKER_LIES = ("job", "type", "round_future", "round_past")



# ------------------------------------------------------------------ frames (pure)


@dataclass
class Context:
    """What the generators need to know about the network and the honest job."""

    attacker: tuple[str, str]  # (ip, mac)
    ps: tuple[str, str]
    workers: list[tuple[str, str]]  # bit i -> (ip, mac)
    neighbour: int  # bit of the worker on the attacker's ToR (-1: none)
    job_id: int
    foreign_jobs: tuple[int, ...]  # deployed, not running; and never deployed
    agg_ids: tuple[int, ...]
    n_chunks: int
    rounds: int
    host_ips: list[str]


def _values(rng: random.Random) -> np.ndarray:
    return np.array([rng.randint(-2**31, 2**31 - 1) for _ in range(K)], dtype=np.int64)


def _frame(ctx: Context, hdr: tuple, rng: random.Random, src: tuple[str, str] | None = None,
           dst: tuple[str, str] | None = None) -> bytes:
    src = src or ctx.attacker
    dst = dst or ctx.ps
    t = FrameTemplate(src[1], dst[1], src[0], dst[0], sport=rng.choice((INA_UDP_PORT, 40000)),
                      ip_id=rng.randrange(1 << 16), tos=MARK_TOS)
    return t.encode(InaPacket(*hdr, _values(rng)))


def _grad(ctx: Context, rng: random.Random, w: int, **over: int) -> tuple:
    h = dict(msg_type=TYPE_GRAD, flags=rng.choice((0, 0, 1, 3)), job_id=ctx.job_id,
             round=rng.randrange(max(1, ctx.rounds)), chunk_id=rng.randrange(ctx.n_chunks),
             agg_id=rng.choice(ctx.agg_ids), fan_in=rng.randint(1, len(ctx.workers)),
             count=1, worker_id=w, bitmap=1 << w)
    h.update(over)
    return tuple(h[f] for f in HEADER_NAMES)


def honest_like(ctx: Context, rng: random.Random) -> bytes:
    """A GRAD as a member would send it (half of them with its addresses): the base of the
    truncated, oversized and bit-flipped frames."""
    w = rng.randrange(len(ctx.workers))
    src = ctx.workers[w] if rng.random() < 0.5 else ctx.attacker
    return _frame(ctx, _grad(ctx, rng, w), rng, src)


def lie(ctx: Context, rng: random.Random, what: str) -> bytes:
    """A well-formed INA frame that lies (``LIES``)."""
    n = len(ctx.workers)
    members = list(range(n))
    w = ctx.neighbour if ctx.neighbour >= 0 and rng.random() < 0.5 else rng.choice(members)
    if what == "member_spoof":  # a member's id and addresses, from the wrong port
        return _frame(ctx, _grad(ctx, rng, w), rng, ctx.workers[w])
    if what == "outside_worker":
        o = rng.randrange(n, 64)
        return _frame(ctx, _grad(ctx, rng, o), rng)
    if what == "foreign_job":
        return _frame(ctx, _grad(ctx, rng, w, job_id=rng.choice(ctx.foreign_jobs)), rng)
    if what == "fan_in":
        return _frame(ctx, _grad(ctx, rng, w, fan_in=rng.choice((0, 1, 2, 63, 255))), rng)
    full = (1 << n) - 1
    if what == "result_from_host":
        hdr = (TYPE_RESULT, 0, ctx.job_id, rng.randrange(max(1, ctx.rounds)),
               rng.randrange(ctx.n_chunks), 0, 0, n, 0, full)
        return _frame(ctx, hdr, rng, dst=ctx.workers[rng.randrange(n)])
    if what == "partial_from_host":
        bits = rng.randint(1, full)
        hdr = (TYPE_PARTIAL, rng.choice((0, 1, 2, 4)), ctx.job_id,
               rng.randrange(max(1, ctx.rounds)), rng.randrange(ctx.n_chunks),
               rng.choice(ctx.agg_ids), n, bits.bit_count(), w, bits)
        return _frame(ctx, hdr, rng)
    if what == "round_future":
        return _frame(ctx, _grad(ctx, rng, w, round=rng.choice(
            (FAR + rng.randrange(4096), ctx.rounds + 1000))), rng)
    if what == "round_past":
        return _frame(ctx, _grad(ctx, rng, w, round=0, flags=1), rng)
    raise ValueError(what)


def _inflate(base: bytes, total: int, rng: random.Random) -> bytes:
    """``base`` padded to ``total`` bytes with IPv4 and UDP lengths claiming it all (the IPv4
    checksum stays right, so only the UDP length is wrong for an INA frame)."""
    ip = bytearray(base[14:34])
    ip[2:4] = struct.pack("!H", total - 14)
    ip[10:12] = b"\0\0"
    ip[10:12] = struct.pack("!H", ipv4_checksum(bytes(ip)))
    udp = bytearray(base[34:42])
    udp[4:6] = struct.pack("!H", total - 34)
    return base[:14] + bytes(ip) + bytes(udp) + base[42:] + rng.randbytes(total - len(base))


def random_frame(ctx: Context, rng: random.Random) -> bytes:
    size = rng.randint(14, 300) if rng.random() < 0.9 else rng.randint(14, MAX_FRAME)
    v = rng.random()
    if v < 0.4:  # any bytes
        return rng.randbytes(size)
    if v < 0.6:  # IPv4 ethertype, random rest
        return rng.randbytes(12) + b"\x08\x00" + rng.randbytes(max(0, size - 14))
    size = max(size, 42)
    dst = rng.choice(ctx.host_ips + ["10.0.200.1", "192.0.2.1"])
    proto = 17 if v < 0.85 else rng.choice((1, 6, 17, 47, 253))
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, MARK_TOS, size - 14, rng.randrange(1 << 16), 0,
                     64, proto, 0, socket.inet_aton(ctx.attacker[0]), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    dport = INA_UDP_PORT if v < 0.8 else rng.randrange(1, 1 << 16)
    udp = struct.pack("!HHHH", rng.randrange(1 << 16), dport, size - 34, 0)
    return rng.randbytes(12) + b"\x08\x00" + ip + udp + rng.randbytes(size - 42)


def make_frames(ctx: Context, n: int, rng: random.Random) -> list[tuple[str, bytes]]:
    """``n`` hostile frames as (kind, bytes) that a link carries, a lie's kind being
    ``lie:<what>``; and n/200 ``jumbo`` frames among them, which the sender's kernel refuses."""
    out = []
    for _ in range(n):
        kind = rng.choices(KINDS, WEIGHTS)[0]
        if kind == "truncated":
            base = honest_like(ctx, rng)
            out.append((kind, base[:rng.randint(14, len(base) - 1)]))
        elif kind == "oversized":
            base = honest_like(ctx, rng)
            total = rng.randint(len(base) + 1, MAX_FRAME)
            out.append((kind, _inflate(base, total, rng) if rng.random() < 0.5
                        else base + rng.randbytes(total - len(base))))
        elif kind == "bitflip":
            f = bytearray(honest_like(ctx, rng))
            for bit in rng.sample(range(8 * len(f)), rng.randint(1, 3)):
                f[bit // 8] ^= 0x80 >> (bit % 8)
            out.append((kind, bytes(f)))
        elif kind == "random":
            out.append((kind, random_frame(ctx, rng)))
        else:
            what = rng.choice(LIES)
            out.append((f"lie:{what}", lie(ctx, rng, what)))
    for _ in range(max(1, n // 200)):  # extra: more than a veth carries, refused at the sender
        base = honest_like(ctx, rng)
        out.insert(rng.randrange(len(out) + 1),
                   ("jumbo", _inflate(base, rng.randint(MAX_FRAME + 1, 9000), rng)))
    return out


# ------------------------------------------------------------------ the ToR, in-process


def _to_int(v: Any) -> Any:
    from pyswitch.p4runtime.codec import to_int

    if isinstance(v, tuple):
        return (to_int(v[0], "match"), int(v[1]))
    return to_int(v, "value")


def tor_model(config: Path, rules: Any) -> Any:
    """ina.p4 (the network's compiled program) in-process, holding the ToR's rules."""
    import pyswitch

    sw = pyswitch.Switch(pyswitch.load_compiled(str(config)), device_id=0, seed=0)
    d = rules.default
    sw.set_default_action(d.table, d.action, {k: _to_int(v) for k, v in d.params.items()})
    for e in rules.entries:
        sw.insert_entry(e.table, {k: _to_int(v) for k, v in e.match.items()}, e.action,
                        {k: _to_int(v) for k, v in e.params.items()}, e.priority)
    for gid, ports in rules.mcast_groups.items():
        sw.set_multicast_group(gid, [(p, 0) for p in ports])
    return sw


def ending_counters(sw: Any) -> list[str]:
    """The counters a frame that ends in the switch moves (docs/protocol.md §3)."""
    names = [c.preamble.name for c in sw.prog.p4info.counters]
    return [n for n in names if n.rsplit(".", 1)[-1].startswith("dropped_")
            or n.endswith(".absorbed")]


def predict(sw: Any, port: int, frames: list[tuple[str, bytes]],
            names: list[str]) -> list[str]:
    """Per frame: ``forwarded``, or the short name of the one counter it moved."""
    out = []
    for _, data in frames:
        before = [sw.counter_read(n, 0)[0] for n in names]
        sent = sw.process(port, data)
        moved = [n for n, b in zip(names, before, strict=True) if sw.counter_read(n, 0)[0] != b]
        if sent:
            out.append("forwarded")
        elif len(moved) == 1:
            out.append(moved[0].rsplit(".", 1)[-1])
        else:
            out.append("unaccounted" if not moved else "+".join(moved))
    return out


# ------------------------------------------------------------------ host-side datagrams


def host_datagram(target: str, kind: str, ctx: Context, bit: int, newest: int,
                  rng: random.Random) -> tuple[str, bytes, str | None]:
    """(kind, payload, outcome fixed by construction or None) for the PS (``target="ps"``)
    or worker ``bit``: only what they must refuse (module docstring)."""
    n, job = len(ctx.workers), ctx.job_id
    full = (1 << n) - 1

    def payload(hdr: tuple) -> bytes:
        return encode_payload(InaPacket(*hdr, _values(rng)))

    far = FAR + rng.randrange(4096)
    if target == "ps":
        w = rng.randrange(n)
        base = (TYPE_GRAD, 0, job, far, rng.randrange(ctx.n_chunks), 0, 1, 1, w, 1 << w)
    else:
        base = (TYPE_RESULT, 1, job, far, rng.randrange(ctx.n_chunks), 0, 0, n, 0, full)
    if kind == "truncated":
        return kind, payload(base)[:rng.randrange(26 + 4 * K)], None
    if kind == "oversized":  # the hosts do not check the length (the switch does)
        return kind, payload(base) + rng.randbytes(rng.randint(1, 1200)), None
    if kind == "bitflip":
        p = bytearray(payload(base))
        for b in rng.sample(range(8 * len(p)), rng.randint(1, 3)):
            p[b // 8] ^= 0x80 >> (b % 8)
        return kind, bytes(p), None
    if kind == "random":
        p = bytearray(rng.randbytes(rng.randint(0, 1400)))
        if len(p) >= 8:  # never a round either node could be in
            p[4:8] = struct.pack("!I", far)
        return kind, bytes(p), None
    lies = PS_LIES if target == "ps" else WORKER_LIES
    what = rng.choice(lies)
    h = list(base)
    if what == "round_past":  # rounds every node has finished (module docstring)
        if newest < 3:
            what = "round_future"
        else:
            h[3] = rng.randint(0, newest - (3 if target == "ps" else 1))
            return f"lie:{what}", payload(tuple(h)),\
                "stale_round" if target == "ps" else "stale_results"
    if what == "job":
        h[2] = rng.choice(ctx.foreign_jobs)
    elif what == "type":
        # a type this node never takes (the PS: RESULT; a worker: GRAD, PARTIAL) or none
        h[0] = rng.choice((TYPE_RESULT, 0, 4, 255) if target == "ps"
                          else (TYPE_GRAD, TYPE_PARTIAL, 0, 4, 255))
    elif what == "chunk":
        h[4] = rng.randint(ctx.n_chunks, 2**32 - 1)
    elif what == "bitmap":
        h[0], h[9] = TYPE_PARTIAL, full | (1 << rng.randrange(n, 64))
        h[7] = h[9].bit_count()
    elif what == "grad_bitmap":
        h[9] = full
    elif what == "count":
        h[7] = rng.choice((0, 2, 200))
    return f"lie:{what}", payload(tuple(h)), None


def ps_outcome(state: Any, data: bytes) -> str:
    """What the PS does with ``data``: its counter that moves (``workers.ina.ps``)."""
    from workers.ina.wire import InaDecodeError, decode_payload

    try:
        pkt = decode_payload(data)
    except InaDecodeError:
        return "malformed_datagrams"
    before = asdict(state.stats)
    state.on_packet(pkt)
    after = asdict(state.stats)
    if after["malformed"] > before["malformed"]:
        why = [k for k, v in after["malformed_reasons"].items()
               if v != before["malformed_reasons"].get(k, 0)]
        return f"malformed:{why[0]}"
    for key in ("future_round", "stale_round", "late"):
        if after[key] > before[key]:
            return key
    return "accepted"


def worker_outcome(replica: Any, data: bytes) -> str:
    """What a worker does with ``data`` (``workers.ina.worker``; the replica's round is one
    no datagram names)."""
    from workers.ina.wire import InaDecodeError, decode_payload

    try:
        pkt = decode_payload(data)
    except InaDecodeError:
        return "malformed"
    before = asdict(replica.stats)
    replica.on_packet(pkt, 0.0)
    moved = [k for k, v in asdict(replica.stats).items() if v != before[k]]
    return moved[0] if moved else "accepted"


# ------------------------------------------------------------------ namespaces, sockets

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
SO_ATTACH_FILTER = 26
PACKET_OUTGOING = 4


def netns_socket(pid: int | None, family: int, kind: int, proto: int = 0,
                 bind: tuple | None = None) -> socket.socket:
    """A socket created (and bound) in the network namespace of process ``pid`` (None: this
    one).  A socket keeps its namespace, so the caller sends from the host itself; only this
    thread switches, and back at once."""
    if pid is None:
        s = socket.socket(family, kind, proto)
        if bind is not None:
            s.bind(bind)
        return s
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(there, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into process {pid}")
        try:
            s = socket.socket(family, kind, proto)
            if bind is not None:
                s.bind(bind)
            return s
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(own)
        os.close(there)


def attach_marker_filter(s: socket.socket) -> None:
    """Classic BPF: keep IPv4 frames whose TOS is ``MARK_TOS`` (the kernel drops the rest)."""
    prog = [(0x28, 0, 0, 12), (0x15, 0, 3, 0x0800), (0x30, 0, 0, 15),
            (0x15, 0, 1, MARK_TOS), (0x06, 0, 0, 0xFFFF), (0x06, 0, 0, 0)]
    insns = b"".join(struct.pack("HBBI", *i) for i in prog)
    buf = ctypes.create_string_buffer(insns)
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class Sniffers(threading.Thread):
    """Counts marked frames arriving on every link out of the attacker's ToR (the hostile
    frames it forwarded)."""

    def __init__(self, taps: dict[str, tuple[int | None, str]]) -> None:
        super().__init__(daemon=True)
        self.socks = {}
        for name, (pid, ifname) in taps.items():
            s = netns_socket(pid, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3),
                             (ifname, 0))
            attach_marker_filter(s)
            s.setblocking(False)
            while True:  # frames queued before the filter
                try:
                    s.recv(65536)
                except BlockingIOError:
                    break
            self.socks[name] = s
        self.counts: Counter[str] = Counter()
        self.stop = threading.Event()

    def run(self) -> None:
        by_fd = {s.fileno(): n for n, s in self.socks.items()}
        while not self.stop.is_set():
            ready, _, _ = select.select(list(self.socks.values()), [], [], 0.1)
            for s in ready:
                while True:
                    try:
                        _, addr = s.recvfrom(65536)
                    except BlockingIOError:
                        break
                    if addr[2] != PACKET_OUTGOING:
                        self.counts[by_fd[s.fileno()]] += 1

    def close(self) -> None:
        self.stop.set()
        self.join(5)
        for s in self.socks.values():
            s.close()


class Gate:
    """Lets the sending threads send only while a job trains: from its start file until a
    worker has finished round ``rounds - margin`` (each thread has its margin).  The bench
    closes it between jobs, and :meth:`close` returns only once no send is under way."""

    def __init__(self, monitor: Any) -> None:
        self.monitor = monitor
        self.lock = threading.Lock()
        self.start: Path | None = None
        self.rounds = 0
        self.finished = threading.Event()  # the bench is done: threads end

    def open(self, start: Path, rounds: int) -> None:
        with self.lock:
            self.start, self.rounds = start, rounds

    def close(self) -> None:
        with self.lock:  # waits for a send in progress
            self.start = None

    def send(self, margin: int, fn: Any) -> bool:
        """Run ``fn`` once the gate lets this thread through; False when the bench is done."""
        while not self.finished.is_set():
            with self.lock:
                if (self.start is not None and self.start.exists()
                        and self.monitor.newest_round < self.rounds - margin):
                    fn()
                    return True
            time.sleep(0.01)
        return False


class Attacker(threading.Thread):
    """Writes the frames on the attacker's interface, paced at ``bytes_per_s`` (or ``fps``)
    while the gate is open (margin 1: until the last round)."""

    def __init__(self, sock: socket.socket, frames: list[tuple[str, bytes]], gate: Gate,
                 bytes_per_s: float | None, fps: float) -> None:
        super().__init__(daemon=True)
        self.sock, self.frames, self.gate = sock, frames, gate
        self.bytes_per_s, self.fps = bytes_per_s, fps
        self.sent: list[bool | None] = [None] * len(frames)  # True sent, False refused
        self.errors: Counter[str] = Counter()
        self.active_s = 0.0  # time spent sending (pauses between jobs left out)

    def _send(self, i: int, data: bytes) -> None:
        for _attempt in range(50):
            try:
                self.sock.send(data)
                self.sent[i] = True
                return
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # qdisc full: wait, the frame is not out
                    self.errors["ENOBUFS (retried)"] += 1
                    time.sleep(0.01)
                    continue
                self.sent[i] = False
                self.errors[errno.errorcode.get(exc.errno or 0, str(exc.errno))] += 1
                return

    def run(self) -> None:
        rate = self.bytes_per_s or self.fps
        t_ref: float | None = None
        spent = 0.0
        for i, (_, data) in enumerate(self.frames):
            if t_ref is not None:  # paced: never ahead of the link's rate
                time.sleep(max(0.0, t_ref + spent / rate - time.monotonic()))
            asked = time.monotonic()
            if not self.gate.send(1, lambda i=i, data=data: self._send(i, data)):
                break
            now = time.monotonic()
            if t_ref is None or now - asked > 0.05:  # first frame or after a pause
                if t_ref is not None:
                    self.active_s += asked - t_ref
                t_ref, spent = now, 0.0
            if self.sent[i]:  # refused frames cost the link nothing
                spent += len(data) if self.bytes_per_s else 1
        if t_ref is not None:
            self.active_s += time.monotonic() - t_ref


class Injector(threading.Thread):
    """Sends the host-side datagrams to the PS's and a worker's own INA socket, one pair
    every ``gap_s`` while the gate is open (margin 4: every datagram is read before the job
    ends), predicting each one's outcome."""

    def __init__(self, targets: dict[str, tuple[socket.socket, str, int]], ctx: Context,
                 n: int, gap_s: float, gate: Gate, seed: int, n_values: int) -> None:
        from workers.ina.ps import PsState
        from workers.ina.worker import WorkerRound, ps_only_schedule

        super().__init__(daemon=True)
        self.targets, self.ctx, self.n, self.gap, self.gate = targets, ctx, n, gap_s, gate
        self.rng = random.Random(f"host-{seed}")
        self.sent: dict[str, Counter[str]] = {t: Counter() for t in targets}
        self.expected: dict[str, Counter[str]] = {t: Counter() for t in targets}
        self.errors: Counter[str] = Counter()
        self.ps_model = PsState(ctx.job_id, range(len(ctx.workers)), ctx.n_chunks)
        self.worker_model = {
            t: WorkerRound(job_id=ctx.job_id, worker_id=bit, round_=2**32 - 1,
                           values=np.zeros(n_values, dtype=np.int32),
                           schedule=ps_only_schedule(ctx.n_chunks))
            for t, (_, _, bit) in targets.items() if t != "ps"}

    def _send(self, t: str) -> None:
        sock, ip, bit = self.targets[t]
        kind = self.rng.choice(HOST_KINDS)
        kind, data, fixed = host_datagram("ps" if t == "ps" else "worker", kind, self.ctx,
                                          bit, self.gate.monitor.newest_round, self.rng)
        outcome = fixed or (ps_outcome(self.ps_model, data) if t == "ps"
                            else worker_outcome(self.worker_model[t], data))
        try:
            sock.sendto(data, (ip, INA_UDP_PORT))
        except OSError as exc:
            self.errors[str(exc.errno)] += 1
            return
        self.sent[t][kind] += 1
        self.expected[t][outcome] += 1

    def run(self) -> None:
        for _ in range(self.n):
            for t in self.targets:
                if not self.gate.send(4, lambda t=t: self._send(t)):
                    return
            time.sleep(self.gap)
