"""The NDN router daemon of docs/design.md §6 on a Mininet switch node: ``python -m
workers.ndn.router_node CONFIG.json``.

It moves frames between the node's interfaces (its faces; face number = Mininet port number)
and one :class:`workers.ndn.router.Router` (FIB, PIT, persistent PIT, CS): every frame received
on a port is unframed, handed to the router with the port as incoming face, and every
``(face, wire)`` the router returns is framed (ethertype 0x8624, to NFD's multicast MAC, from
the port's own MAC) and sent on that port.  Non-NDN frames (IPv6 chatter, ARP) are counted and
ignored.  Ports are :class:`pyswitch.ports.Port` raw sockets, as pyswitch's.

Loss injection: ``impair`` (the ``key=value`` text of :func:`pyswitch.impairment.parse_spec`,
the same model and seeded RNG as pyswitch's ``--impair``) applies to every port, received and
sent frames as the spec's ``dir`` says; each port gets its own seed (spec seed, router name and
port), so ports do not drop in lock step.  Frames an impairment delays or holds back are kept
in a release queue.

Config (JSON, written by the controller): ``name``, ``ports`` {port: ifname}, ``fib``
{"/prefix": [port, ...]}, ``cs_capacity``, ``impair`` (text or ""), ``counters_file``.
On SIGTERM/SIGINT the loop stops and the counters file is written: the router's counters, the
size of every table and the persistent PIT's faces at exit, per-port frame counters and the
impairment counters.  "ready" is printed once every port is open and the FIB installed.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import select
import signal
import sys
import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyswitch.impairment import ImpairmentSpecError, PortImpairments, parse_spec
from pyswitch.ports import Port, PortError
from workers.ndn import names as nn
from workers.ndn.link import mac_of
from workers.ndn.packets import (
    NDN_ETHERTYPE,
    NDN_MULTICAST_MAC,
    PacketError,
    eth_frame,
    eth_unframe,
)
from workers.ndn.router import Router

EXPIRE_EVERY_S = 0.5  # PIT/nonce housekeeping period (entries are also checked on lookup)


class RouterLoop:
    """The router, its ports, impairments and release queue (one thread)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.name = str(cfg["name"])
        self.router = Router(self.name, cs_capacity=int(cfg.get("cs_capacity", 0)))
        for prefix, faces in cfg["fib"].items():
            self.router.add_route(prefix, [int(f) for f in faces])
        self.ports = {int(p): Port(ifname) for p, ifname in cfg["ports"].items()}
        self.macs = {p: mac_of(port.ifname) for p, port in self.ports.items()}
        self.imp = PortImpairments()
        text = str(cfg.get("impair") or "")
        if text:
            base = parse_spec(text)
            for p in self.ports:
                seed = base.seed * 100_003 + zlib.crc32(f"{self.name}:{p}".encode())
                self.imp.set(p, replace(base, seed=seed))
        self.queue: list[tuple[float, int, str, int, bytes]] = []
        self._seq = itertools.count()
        self.non_ndn = 0
        self.bad_frames = 0
        self.stop = False

    # ------------------------------------------------------------------ frames

    def receive(self, port: int, frame: bytes, now: float) -> None:
        imp = self.imp.active(self.imp.rx, port)
        if imp is None:
            self.process(port, frame, now)
            return
        for t, f in imp.offer(frame, now):
            self._release("rx", port, f, t, now)

    def process(self, port: int, frame: bytes, now: float) -> None:
        if int.from_bytes(frame[12:14], "big") != NDN_ETHERTYPE:
            self.non_ndn += 1
            return
        try:
            _dst, _src, wire = eth_unframe(frame)
        except PacketError:
            self.bad_frames += 1
            return
        for face, out in self.router.on_packet(port, wire, now):
            if face in self.ports:
                self.transmit(face, eth_frame(NDN_MULTICAST_MAC, self.macs[face], out), now)

    def transmit(self, port: int, frame: bytes, now: float) -> None:
        imp = self.imp.active(self.imp.tx, port)
        if imp is None:
            self.ports[port].send(frame)
            return
        for t, f in imp.offer(frame, now):
            self._release("tx", port, f, t, now)

    def _release(self, kind: str, port: int, frame: bytes, at: float, now: float) -> None:
        if at <= now:
            if kind == "rx":
                self.process(port, frame, now)
            else:
                self.ports[port].send(frame)
        else:
            heapq.heappush(self.queue, (at, next(self._seq), kind, port, frame))

    def due(self, now: float) -> None:
        """Release queued frames and expired reorder holds whose time has come."""
        while self.queue and self.queue[0][0] <= now:
            _t, _s, kind, port, frame = heapq.heappop(self.queue)
            self._release(kind, port, frame, now, now)
        for kind, table in (("rx", self.imp.rx), ("tx", self.imp.tx)):
            for port, imp in table.items():
                d = imp.next_deadline()
                if d is not None and d <= now:
                    for t, f in imp.expire(now):
                        self._release(kind, port, f, t, now)

    def next_deadline(self) -> float | None:
        times = [t for t in (self.queue[0][0] if self.queue else None,
                             self.imp.next_deadline()) if t is not None]
        return min(times, default=None)

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        by_fd = {port.fileno(): (p, port) for p, port in self.ports.items()}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        next_expire = time.monotonic() + EXPIRE_EVERY_S
        while not self.stop:
            now = time.monotonic()
            deadline = min(t for t in (next_expire, self.next_deadline()) if t is not None)
            try:
                events = poller.poll(max(0.0, deadline - now) * 1000)
            except InterruptedError:
                continue
            now = time.monotonic()
            for fd, _ev in events:
                p, port = by_fd[fd]
                for frame in port.recv_batch(64):
                    self.receive(p, frame, now)
            self.due(now)
            if now >= next_expire:
                self.router.expire(now)
                next_expire = now + EXPIRE_EVERY_S

    def report(self) -> dict[str, Any]:
        r = self.router
        now = time.monotonic()
        return {
            "router": self.name,
            "counters": r.counters.as_dict(),
            "tables": {"fib": len(r.fib), "pit": len(r.pit),
                       "pit_live": sum(1 for e in r.pit.values() if e.expiry() > now),
                       "ppit_entries": len(r.ppit),
                       "ppit_faces": sum(len(f) for f in r.ppit.values()),
                       "cs": len(r.cs), "nonces": len(r.nonces)},
            "ppit": {nn.to_uri(list(k)): sorted(f) for k, f in r.ppit.items()},
            "fib": {nn.to_uri(list(k)): v for k, v in r.fib.items()},
            "non_ndn_frames": self.non_ndn, "bad_frames": self.bad_frames,
            "ports": {str(p): port.counters.to_dict() for p, port in self.ports.items()},
            "impairments": self.imp.snapshot(),
        }

    def close(self) -> None:
        for port in self.ports.values():
            port.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    a = ap.parse_args(argv)
    cfg = json.loads(Path(a.config).read_text())
    loop = RouterLoop(cfg)

    def on_signal(_signum: int, _frame: Any) -> None:
        loop.stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"router {loop.name} ports {sorted(loop.ports)} fib {len(cfg['fib'])} ready",
          flush=True)
    try:
        loop.run()
    finally:
        out = cfg.get("counters_file")
        if out:
            tmp = Path(out).with_suffix(".tmp")
            tmp.write_text(json.dumps(loop.report(), indent=1))
            tmp.replace(out)
        loop.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, PortError, ValueError, KeyError, ImpairmentSpecError) as exc:
        print(f"error: {exc}", flush=True)
        sys.exit(1)
