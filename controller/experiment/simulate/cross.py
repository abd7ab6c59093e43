"""TCP bulk flows in the simulated network (``--cross-traffic``, issue 39;
:mod:`controller.experiment.cross_traffic`).

A flow's sender and receiver are the pure state machines of
:mod:`controller.experiment.simulate.tcp`; here they become frames: each segment an
Ethernet/IPv4/TCP frame of ``mss`` payload bytes, 12 bytes of TCP options (the timestamps
Linux sends) -- 1,514 bytes on the wire at the default MSS of 1,448, as on Mininet -- and
each ACK a 66-byte frame on the reverse path.  They leave the host on its one port and
cross the same links, drop-tail queues and switches (``ina.p4``'s IPv4 routes) as the INA
traffic.  The TCP checksum is left 0 (no switch reads it); the IPv4 one is right.  Each
batch of segments leaves its host after a small seeded random delay (``JITTER_S``), in order.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from typing import Any

from controller.experiment.cross_traffic import FlowFigures, TcpPair
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork
from controller.experiment.simulate.tcp import RenoSender, TcpReceiver
from workers.ina.wire import ipv4_checksum

__all__ = ["SimTcpFlow", "SimCrossTraffic", "TCP_PORT", "MSS", "tcp_frame"]

TCP_PORT = 5001  # iperf's
MSS = 1448  # Ethernet's 1,500 less IPv4 20, TCP 20 and 12 bytes of timestamps
# A host's send times are not a clock's: each batch leaves after a seeded uniform [0, 5 ms)
# (ns-2's TCP "overhead" for the same reason): two flows in lockstep through one drop-tail
# queue otherwise lose in phase, one of them always (Floyd & Jacobson's phase effects)
JITTER_S = 0.005
_TS = b"\x01\x01\x08\x0a"  # NOP, NOP, timestamps: TSval, TSecr (µs, RFC 7323)
_TCP = struct.Struct("!HHIIBBHHH")
_PROTO = 23  # the IPv4 protocol byte in an Ethernet frame
_PORTS = slice(34, 38)
_SEQ = struct.Struct("!II")  # seq, ack right after the ports
_TSOPT = struct.Struct("!II")  # TSval, TSecr: after the 20-byte header and 4 bytes of kinds
_TS_AT = 34 + 20 + 4


def _mac(mac: str) -> bytes:
    return bytes(int(x, 16) for x in mac.split(":"))


def _ip(ip: str) -> bytes:
    return bytes(int(x) for x in ip.split("."))


def tcp_frame(src: tuple[str, str], dst: tuple[str, str], sport: int, dport: int,
              seq: int, ack: int, payload: int, tsval: int = 0, tsecr: int = 0) -> bytes:
    """An Ethernet/IPv4/TCP frame from ``src`` to ``dst`` (each ``(ip, mac)``) with
    ``payload`` zero bytes and the timestamps option (module docstring)."""
    tcp = (_TCP.pack(sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 8 << 4, 0x10,
                     65535, 0, 0) + _TS + struct.pack("!II", tsval & 0xFFFFFFFF,
                                                      tsecr & 0xFFFFFFFF))
    total = 20 + len(tcp) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, _ip(src[0]),
                     _ip(dst[0]))
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    return _mac(dst[1]) + _mac(src[1]) + b"\x08\x00" + ip + tcp + bytes(payload)


def _us(t: float) -> int:
    """A timestamp clock of 1 µs (RFC 7323 allows 1 ms to 1 s; finer is harmless here)."""
    return int(round(t * 1e6)) & 0xFFFFFFFF


class SimTcpFlow:
    """One bulk flow from ``pair.src`` to ``pair.dst`` on ``net``: segments numbered from 0,
    carried as ``seq = n * mss``; the receiver ACKs each one (cumulative)."""

    def __init__(self, loop: EventLoop, net: SimNetwork, pair: TcpPair,
                 hosts: dict[str, tuple[str, str]], sport: int, mss: int = MSS,
                 jitter_s: float = JITTER_S, seed: int = 0) -> None:
        self.loop, self.net, self.pair, self.mss = loop, net, pair, mss
        self.jitter_s, self.rng = jitter_s, random.Random(seed * 65536 + sport)
        self._out_at = 0.0  # when the last batch leaves (batches stay in order)
        assert pair.src is not None and pair.dst is not None
        self.src, self.dst = hosts[pair.src], hosts[pair.dst]
        self.sport, self.dport = sport, TCP_PORT
        self.sender, self.receiver = RenoSender(mss=mss), TcpReceiver()
        self.active = False
        self._wake: float | None = None
        self.ports = {(sport, TCP_PORT): "data", (TCP_PORT, sport): "ack"}
        self.mark = (0, 0.0)  # (segments delivered, time) at the window's start

    def start(self) -> None:
        """Start sending now (the window's start)."""
        self.active = True
        self.mark = (self.receiver.delivered, self.loop.now)
        self._pump()

    def stop(self) -> FlowFigures:
        """Stop now; what it delivered since :meth:`start`."""
        self.active = False
        got, t0 = self.mark
        s = self.sender
        return FlowFigures(self.pair.src or "", self.pair.dst or "", self.loop.now - t0,
                           (self.receiver.delivered - got) * self.mss, s.sent, s.resent,
                           s.timeouts, s.fast_retransmits)

    def _pump(self) -> None:
        if not self.active:
            return
        now = self.loop.now
        segs = self.sender.poll(now)
        if segs:
            t = max(now + self.rng.uniform(0.0, self.jitter_s), self._out_at)
            self._out_at = t
            self.loop.at(t, self._emit, segs)
        d = self.sender.deadline
        if d is not None and d != self._wake:  # one event per new deadline
            self._wake = d
            self.loop.at(d, self._fire)

    def _emit(self, segs: list[int]) -> None:
        ts = _us(self.loop.now)
        for seg in segs:
            self.net.send(self.pair.src, 0, tcp_frame(self.src, self.dst, self.sport,
                                                      self.dport, seg * self.mss, 0, self.mss,
                                                      tsval=ts))

    def _fire(self, _: Any) -> None:
        if not self.active or self._wake != self.loop.now:
            return
        self._wake = None
        self.sender.on_timeout(self.loop.now)
        self._pump()

    def on_frame(self, host: str, frame: bytes) -> bool:
        """A frame reached ``host``: True if it was this flow's (taken)."""
        sport, dport = struct.unpack("!HH", frame[_PORTS])
        what = self.ports.get((sport, dport))
        if what is None:
            return False
        seq, ack = _SEQ.unpack_from(frame, 38)
        tsval, tsecr = _TSOPT.unpack_from(frame, _TS_AT)
        if what == "data" and host == self.pair.dst:
            if self.active:  # after stop: the receiver's process is gone too
                got = self.receiver.on_segment(seq // self.mss, tsval)
                self.net.send(host, 0, tcp_frame(self.dst, self.src, self.dport, self.sport,
                                                 0, got * self.mss, 0, _us(self.loop.now),
                                                 int(self.receiver.ts_recent)))
            return True
        if what == "ack" and host == self.pair.src:
            if self.active:
                now = self.loop.now
                # the echoed µs clock, unwrapped against now (a round trip < 71 minutes)
                echo = now - ((_us(now) - tsecr) & 0xFFFFFFFF) / 1e6
                self.sender.on_ack(ack // self.mss, now, echo)
                self._pump()
            return True
        return False


class SimCrossTraffic:
    """The TCP flows of one launch: :meth:`hook` takes their frames out of what reaches the
    hosts (everything else goes on to ``net.on_host`` as before); :meth:`start`,
    :meth:`stop`."""

    def __init__(self, loop: EventLoop, net: SimNetwork, pairs: Sequence[TcpPair],
                 hosts: dict[str, tuple[str, str]]) -> None:
        self.flows = [SimTcpFlow(loop, net, p, hosts, sport=40000 + i)
                      for i, p in enumerate(pairs)]
        self.net = net

    def hook(self) -> None:
        """Call after the hosts' own ``on_host`` is set (it stays the one for the rest)."""
        rest: Callable[[str, bytes], None] = self.net.on_host
        flows = self.flows

        def on_host(host: str, frame: bytes) -> None:
            if len(frame) > _PROTO and frame[_PROTO] == 6:
                for f in flows:
                    if f.on_frame(host, frame):
                        return
            rest(host, frame)
        self.net.on_host = on_host

    def start(self) -> None:
        for f in self.flows:
            f.start()

    def stop(self) -> list[FlowFigures]:
        return [f.stop() for f in self.flows]


def alone(make_net: Callable[[EventLoop], SimNetwork], pairs: Sequence[TcpPair],
          hosts: dict[str, tuple[str, str]], duration: float) -> list[FlowFigures]:
    """The flows by themselves on a fresh network (``make_net(loop)``) for ``duration``
    seconds of virtual time: what each gets alone, the reference of the fairness."""
    loop = EventLoop()
    net = make_net(loop)
    net.on_host = lambda h, f: None
    cross = SimCrossTraffic(loop, net, pairs, hosts)
    cross.hook()
    cross.start()
    loop.run(until=duration)
    loop.now = duration
    return cross.stop()
