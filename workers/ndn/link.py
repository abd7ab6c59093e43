"""What the NDN processes on Mininet share: FIBs from shortest paths, frame classification for
byte accounting, and a tap that counts the bytes a host puts on its link.

FIB  [decision]
    A router routes the prefix ``/<host>`` (one per PS and per worker: every producer name of
    docs/design.md §6 starts with the producer's identifier, or with a marker that the router strips
    before routing) to the ports of :func:`topo.paths.ecmp_next_hops` -- the same shortest
    paths the other methods use -- best first in name order.  :class:`workers.ndn.router.Router`
    sends an Interest to the first next hop that is not its incoming face, so every router has
    *one* next hop toward the PS: the routes toward the PS form a tree, subscriptions
    (``/insert/...``) climb it, and the persistent PIT entries they leave are exactly that tree
    reversed -- the multicast tree of the distributions.

Classification
    :func:`classify` names what a frame carries: NDN distribution Data (with its version), fetch
    Data (active-fetch answers), other Data, Interests; for the TCP baseline, TCP segments with
    payload and pure ACKs.  The tap applies it to every frame a host sends, so both methods'
    bytes on the PS link are measured the same way, on the interface, per kind.
"""

from __future__ import annotations

import select
import struct
import threading
from collections import defaultdict
from typing import Any

import networkx as nx

from workers.ndn import names as nn
from workers.ndn.packets import (
    NDN_ETHERTYPE,
    TLV_DATA,
    TLV_INTEREST,
    PacketError,
    decode_data,
    eth_unframe,
    packet_type,
)

__all__ = ["fib_routes", "classify", "LinkTap", "FRAME_KINDS", "interface_rx_bytes", "mac_of"]

FRAME_KINDS = ("ndn-distribute", "ndn-fetch", "ndn-data", "ndn-interest", "ndn-malformed",
               "tcp-data", "tcp-ack", "other")
_ETH_IPV4 = 0x0800
_IPPROTO_TCP = 6
_SOL_PACKET = 263
_PACKET_STATISTICS = 6


def fib_routes(graph: nx.Graph, router: str, ports: dict[str, int],
               producers: list[str]) -> dict[str, list[int]]:
    """``{"/<producer>": [port, ...]}`` for ``router``: its shortest-path next hops toward each
    producer host, as port numbers (``ports``: neighbour -> port), best first.

    Raises ValueError when a producer is unreachable from the router (the caller reports it).
    """
    from topo.paths import ecmp_next_hops

    out: dict[str, list[int]] = {}
    for host in producers:
        nn.check_id(host, "host")
        hops = ecmp_next_hops(graph, router, host)
        if not hops:
            raise ValueError(f"router {router}: no path to {host}")
        out["/" + host] = [ports[h] for h in hops]
    return out


def classify(frame: bytes) -> tuple[str, int | None]:
    """``(kind, version)`` of one Ethernet frame; ``version`` only for distribute/fetch Data."""
    if len(frame) < 14:
        return "other", None
    etype = int.from_bytes(frame[12:14], "big")
    if etype == NDN_ETHERTYPE:
        try:
            _d, _s, wire = eth_unframe(frame)
            typ = packet_type(wire)
            if typ == TLV_INTEREST:
                return "ndn-interest", None
            if typ != TLV_DATA:
                return "ndn-malformed", None
            p = nn.parse(decode_data(wire, verify=False).name)
        except PacketError:
            return "ndn-malformed", None
        if p is not None and p.kind is nn.Kind.DISTRIBUTE:
            return "ndn-distribute", p.version
        if p is not None and p.kind is nn.Kind.FETCH:
            return "ndn-fetch", p.version
        return "ndn-data", None
    if etype == _ETH_IPV4 and len(frame) >= 34 and frame[23] == _IPPROTO_TCP:
        ihl = (frame[14] & 0x0F) * 4
        total = int.from_bytes(frame[16:18], "big")
        if len(frame) >= 14 + ihl + 13:
            doff = (frame[14 + ihl + 12] >> 4) * 4
            return ("tcp-data" if total - ihl - doff > 0 else "tcp-ack"), None
    return "other", None


class LinkTap:
    """Counts, per :func:`classify` kind, the frames received on ``ifname`` (root namespace).

    Put on the switch-side end of a host's link, "received" is everything the host sent.
    ``stats()`` gives bytes and frames per kind, bytes per (kind, version) for distribute and
    fetch Data, and the kernel's drop count for the tap socket (non-zero = figures incomplete).
    """

    def __init__(self, ifname: str) -> None:
        from pyswitch.ports import Port

        self.ifname = ifname
        self.port = Port(ifname, rcvbuf=32 << 20)
        self.bytes: dict[str, int] = defaultdict(int)
        self.frames: dict[str, int] = defaultdict(int)
        self.by_version: dict[tuple[str, int], int] = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tap-{ifname}", daemon=True)
        self.drops = 0

    def start(self) -> LinkTap:
        self._thread.start()
        return self

    def _drain(self) -> None:
        for frame in self.port.recv_batch(256):
            kind, version = classify(frame)
            self.bytes[kind] += len(frame)
            self.frames[kind] += 1
            if version is not None:
                self.by_version[(kind, version)] += len(frame)

    def _run(self) -> None:
        while not self._stop.is_set():
            r, _w, _x = select.select([self.port], [], [], 0.1)
            if r:
                self._drain()
        self._drain()

    def stop(self) -> dict[str, Any]:
        """Stop, close and return :meth:`stats`."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            raw = self.port.sock.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8)
            self.drops = struct.unpack("II", raw)[1]
        except OSError:
            self.drops = -1
        self.port.close()
        return self.stats()

    def stats(self) -> dict[str, Any]:
        versions: dict[str, dict[str, int]] = defaultdict(dict)
        for (kind, v), b in sorted(self.by_version.items()):
            versions[kind][str(v)] = b
        return {"interface": self.ifname, "bytes": dict(self.bytes), "frames": dict(self.frames),
                "bytes_by_version": dict(versions), "total_bytes": sum(self.bytes.values()),
                "socket_drops": self.drops}


def interface_rx_bytes(ifname: str) -> int:
    """The kernel's rx byte counter of ``ifname`` (root namespace)."""
    with open(f"/sys/class/net/{ifname}/statistics/rx_bytes") as f:
        return int(f.read())


def mac_of(ifname: str) -> str:
    """The MAC address of ``ifname`` in the calling process's namespace."""
    with open(f"/sys/class/net/{ifname}/address") as f:
        return f.read().strip()
