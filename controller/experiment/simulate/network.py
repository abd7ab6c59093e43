"""The simulated network: hosts, pyswitch switches running ``ina.p4`` with the deployed rules,
and links in virtual time (docs/simulate.md).

A link direction is a FIFO served at the link's rate (TCLink's htb shaping: a frame takes
``8 * len / rate`` seconds), then ``delay`` seconds of propagation; its queue holds at most
``queue`` frames, the one on the wire included (drop-tail, htb's leaf pfifo of ``txqueuelen``
1000 by default).  A switch applies pyswitch's own impairment
(:class:`pyswitch.impairment.LinkImpairment`, the spec ``run`` gives every pyswitch port: one
per port and direction, each its own random stream drawn from the seed, :func:`port_seed`)
to every frame it receives and sends.  Bytes are
counted per directed link when a frame has crossed it: what the switch-side interface
counters count in ``run`` (a frame lost by the sender's impairment or the queue never
crosses; one lost by the receiver's impairment did).

With ``burst`` > 0 bytes a link direction is instead a token bucket of that many bytes
filled at the link's rate, as htb shapes: a frame leaves as soon as the bucket is not in
debt (tokens ≥ 0), at no serialization cost, and takes its bytes from it (which may leave
it in debt by less than a frame).  After an idle period up to about ``burst`` bytes go at
once; over time the rate is the same.  TCLink's htb class has ``burst 15k`` and the ceil
bucket ``tc`` computes (rate/HZ + MTU: ``cburst 1600b`` with high-resolution timers); a
frame needs both, and the smaller always decides, so 1,600 bytes: :class:`SimOptions`'
default since issue 39 (docs/simulate.md, cross-validation).

With ``wake`` > 0 s every node -- a switch or a host -- takes a frame ``wake`` seconds after
it arrived (then a switch's ``proc`` server, if any): in Mininet each switch and host is a
process that sleeps in ``poll`` until a frame comes, and is woken and scheduled on the
machine's shared cores before it reads it.  It is a delay, not a server: frames that
arrive together are taken together, as a woken process reads its whole batch.
"""

from __future__ import annotations

import contextlib
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import networkx as nx

from controller.experiment.network import P4_PROGRAM
from controller.experiment.simulate.depths import QueueDepths, queue_depths
from controller.experiment.simulate.events import EventLoop
from pyswitch.impairment import ImpairmentSpec, LinkImpairment
from pyswitch.queues import Admitted, EgressQueues
from topo.mininet_net import HTB_BUCKET_BYTES

__all__ = ["Link", "SimNetwork", "SimOptions", "rule_value", "load_switch", "program",
           "active_graph", "impairment", "port_seed"]

Deliver = Callable[[str, int, bytes], None]


def rule_value(v: Any) -> Any:
    """A P4Runtime-style rule value (IPv4/MAC strings, lpm tuples) as pyswitch's ints."""
    if isinstance(v, tuple):
        return tuple(rule_value(x) for x in v)
    if isinstance(v, str):
        if ":" in v:
            return int(v.replace(":", ""), 16)
        a, b, c, d = (int(x) for x in v.split("."))
        return (a << 24) | (b << 16) | (c << 8) | d
    return v


def load_switch(program: Any, rules: Any) -> Any:
    """An in-process pyswitch running ``program`` with one switch's
    :class:`controller.dataplane.deploy.SwitchRules` installed (what ``deploy`` writes over
    P4Runtime)."""
    import pyswitch

    sw = pyswitch.Switch(program, device_id=0, seed=0)
    sw.set_default_action(rules.default.table, rules.default.action,
                          {k: rule_value(v) for k, v in rules.default.params.items()})
    with contextlib.ExitStack() as stack:  # one index rebuild per table, not per entry
        for table in sw.tables.values():
            stack.enter_context(table.deferred_rebuild())
        for e in rules.entries:
            sw.insert_entry(e.table, {k: rule_value(v) for k, v in e.match.items()}, e.action,
                            {k: rule_value(v) for k, v in e.params.items()})
    for g, ports in rules.mcast_groups.items():
        sw.set_multicast_group(g, [(p, 0) for p in ports])
    return sw


@dataclass
class Link:
    """One direction of one link (module docstring)."""

    tx_s_per_byte: float  # 0: unshaped
    delay_s: float
    queue: int
    peer: tuple[str, int]  # (node, port) the frames arrive at
    burst: float = 0.0  # bytes of the token bucket (0: no bucket, a frame takes its time)
    tokens: float = 0.0  # the bucket at ``free_at`` (bytes; < 0: in debt)
    free_at: float = 0.0
    departures: deque = field(default_factory=deque)  # end of transmission of queued frames
    bytes: int = 0
    frames: int = 0
    dropped: int = 0
    deepest: int = 0  # the most frames a frame offered to it found queued (simulate/depths.py)


class SimNetwork:
    """Hosts and switches joined by :class:`Link` s on one :class:`EventLoop`.

    ``ports``: ``node -> {neighbour: port}`` (:func:`topo.mininet_net.plan_network`);
    ``switches``: switch name -> pyswitch; ``impair``: the ``run`` impairment spec of every
    switch port (None: none); ``on_host(host, frame)`` receives what reaches a host;
    ``proc_s``: a switch's time per frame (one FIFO server per switch, as pyswitch's one
    thread; 0: none); ``burst``: bytes of every shaped link direction's token bucket
    (module doc; 0: none); ``wake_s``: how long after a frame arrives its node takes it
    (module doc; 0: at once)."""

    def __init__(self, loop: EventLoop, graph: nx.Graph, ports: dict[str, dict[str, int]],
                 switches: dict[str, Any], bw_unit_mbps: float | None, delay_s: float,
                 queue: int, impair: ImpairmentSpec | None,
                 on_host: Callable[[str, bytes], None], proc_s: float = 0.0,
                 burst: float = 0.0, wake_s: float = 0.0) -> None:
        self.loop, self.switches, self.on_host = loop, switches, on_host
        self.links: dict[tuple[str, int], Link] = {}
        self.name_of: dict[tuple[str, int], str] = {}  # (node, port) -> neighbour
        for a, nbrs in ports.items():
            for b, pa in nbrs.items():
                bw = graph.edges[a, b].get("bw")
                rate = bw * bw_unit_mbps * 1e6 if bw is not None and bw_unit_mbps else None
                self.links[(a, pa)] = Link(8.0 / rate if rate else 0.0, delay_s, queue,
                                           (b, ports[b][a]), burst if rate else 0.0, burst)
                self.name_of[(a, pa)] = b
        self.rx_imp: dict[tuple[str, int], LinkImpairment] = {}
        self.tx_imp: dict[tuple[str, int], LinkImpairment] = {}
        if impair is not None and not impair.is_noop:
            for (node, port) in self.links:
                if node in switches:
                    if impair.direction in ("in", "both"):
                        self.rx_imp[(node, port)] = LinkImpairment(
                            replace(impair, seed=port_seed(impair.seed, node, port, "in")))
                    if impair.direction in ("out", "both"):
                        self.tx_imp[(node, port)] = LinkImpairment(
                            replace(impair, seed=port_seed(impair.seed, node, port, "out")))
        self.switch_frames = 0  # frames run through a pyswitch
        # depth_hist[d]: frames offered to a link that found d frames in its queue, the one
        # on the wire included (enq_qdepth; a drop found ``queue``): simulate/depths.py
        self.depth_hist = [0] * (queue + 1)
        self.proc_s, self.wake_s = proc_s, wake_s
        self._busy: dict[str, float] = {}  # switch -> when its server is free

    # -- sending ----------------------------------------------------------------------

    def send(self, node: str, port: int, frame: bytes) -> None:
        """``node`` puts ``frame`` on its port ``port`` now."""
        imp = self.tx_imp.get((node, port))
        if imp is None:
            self._enqueue(node, port, frame, self.loop.now)
            return
        for t, f in imp.offer(frame, self.loop.now):
            self._enqueue(node, port, f, t)
        self._watch_hold(imp, self._tx_expired, (node, port))

    def mark_above(self, packets: int) -> None:
        """Every switch marks the INA packets it sends into a link queue that holds at least
        ``packets`` frames (``MyEgress.ecn_config``): its egress sees that queue's depth as
        ``standard_metadata.enq_qdepth`` (:class:`LinkDepths`).  Forwarding-only switches on
        the shortcut (simulate/fastpath.py) run no egress, so only ``--full-p4`` marks there."""
        if packets <= 0:
            return
        for node, sw in self.switches.items():
            inner = getattr(sw, "switch", sw)  # under a forwarding shortcut
            inner.queues = LinkDepths(self, node)
            inner.set_queue_rate(0)  # the switch takes the egress queue step from now on
            inner.set_default_action("MyEgress.ecn_config", "MyEgress.set_ecn_threshold",
                                     {"qdepth": packets})

    def depth(self, node: str, port: int) -> int:
        """Frames in the queue of ``node``'s link out of ``port`` now (the one on the wire
        included), as :meth:`_enqueue` counts them."""
        link = self.links.get((node, port))
        if link is None:
            return 0
        q, t = link.departures, self.loop.now
        while q and q[0] <= t:
            q.popleft()
        return len(q)

    def _tx_expired(self, arg: tuple[LinkImpairment, tuple[str, int]]) -> None:
        imp, (node, port) = arg
        for t, f in imp.expire(self.loop.now):
            self._enqueue(node, port, f, t)

    def _enqueue(self, node: str, port: int, frame: bytes, t: float) -> None:
        link = self.links[(node, port)]
        if t > self.loop.now:  # pyswitch's delay_ms: offered to the queue later
            self.loop.at(t, lambda a: self._enqueue(*a, self.loop.now), (node, port, frame))
            return
        q = link.departures
        while q and q[0] <= t:
            q.popleft()
        d = len(q)
        self.depth_hist[d] += 1
        if d > link.deepest:
            link.deepest = d
        if d >= link.queue:
            link.dropped += 1
            return
        start = t if t > link.free_at else link.free_at
        if link.burst:
            rate = 1.0 / link.tx_s_per_byte  # bytes per second
            tokens = min(link.burst, link.tokens + (start - link.free_at) * rate)
            done = start if tokens >= 0 else start - tokens / rate
            link.tokens = (tokens if tokens >= 0 else 0.0) - len(frame)
        else:
            done = start + len(frame) * link.tx_s_per_byte
        link.free_at = done
        q.append(done)
        self.loop.at(done + link.delay_s, self._arrive, (link, frame))

    # -- receiving --------------------------------------------------------------------

    def _arrive(self, arg: tuple[Link, bytes]) -> None:
        link, frame = arg
        link.bytes += len(frame)
        link.frames += 1
        if self.wake_s:  # counted on the link now, taken by its node later (module doc)
            self.loop.at(self.loop.now + self.wake_s, self._take, arg)
        else:
            self._take(arg)

    def _take(self, arg: tuple[Link, bytes]) -> None:
        link, frame = arg
        node, port = link.peer
        sw = self.switches.get(node)
        if sw is None:
            self.on_host(node, frame)
            return
        imp = self.rx_imp.get((node, port))
        if imp is None:
            self._process(node, port, frame)
            return
        for t, f in imp.offer(frame, self.loop.now):
            if t > self.loop.now:
                self.loop.at(t, lambda a: self._process(*a), (node, port, f))
            else:
                self._process(node, port, f)
        self._watch_hold(imp, self._rx_expired, (node, port))

    def _rx_expired(self, arg: tuple[LinkImpairment, tuple[str, int]]) -> None:
        imp, (node, port) = arg
        for _, f in imp.expire(self.loop.now):
            self._process(node, port, f)

    def _process(self, node: str, port: int, frame: bytes) -> None:
        if self.proc_s:
            now = self.loop.now
            start = max(now, self._busy.get(node, 0.0))
            self._busy[node] = start + self.proc_s
            self.loop.at(start + self.proc_s, self._run, (node, port, frame))
            return
        self._run((node, port, frame))

    def _run(self, arg: tuple[str, int, bytes]) -> None:
        node, port, frame = arg
        sw = self.switches.get(node)
        if sw is None:  # killed meanwhile (--fail-switch): what it held is lost
            return
        self.switch_frames += 1
        for eport, out in sw.process(port, frame):
            self.send(node, eport, out)

    def _watch_hold(self, imp: LinkImpairment, cb: Callable[[Any], None],
                    where: tuple[str, int]) -> None:
        d = imp.next_deadline()
        if d is not None:
            self.loop.at(d, cb, (imp, where))

    # -- figures ----------------------------------------------------------------------

    def moved(self) -> dict[tuple[str, str], int]:
        """Bytes per directed link ``(from, to)``, as ``run`` reads them off the counters."""
        return {(a, self.name_of[(a, p)]): link.bytes for (a, p), link in self.links.items()}

    def reset_counters(self) -> None:
        """Zero the byte counters (between modes: ``run`` reads them around each launch)."""
        for link in self.links.values():
            link.bytes = link.frames = link.dropped = link.deepest = 0
        self.depth_hist = [0] * len(self.depth_hist)

    def impairment_counters(self) -> dict[str, int]:
        """Summed pyswitch impairment counters (dropped, duplicated, reordered)."""
        out = {"dropped": 0, "duplicated": 0, "reordered": 0}
        for imp in (*self.rx_imp.values(), *self.tx_imp.values()):
            for k in out:
                out[k] += getattr(imp.counters, k)
        return out

    def queue_drops(self) -> int:
        """Frames dropped by full queues (drop-tail)."""
        return sum(link.dropped for link in self.links.values())

    def queue_depths(self) -> QueueDepths:
        """The depths the frames found in the links' queues since the start (percentiles,
        the deepest link: :mod:`controller.experiment.simulate.depths`)."""
        if not self.links:
            return queue_depths(self.depth_hist)
        a, p = max(self.links, key=lambda k: self.links[k].deepest)
        return queue_depths(self.depth_hist, f"{a}->{self.name_of[(a, p)]}")


class LinkDepths(EgressQueues):
    """A simulated switch's egress queues: the links' own (:class:`Link`), so egress sees
    ``enq_qdepth`` = the frames queued on the link the copy is about to join, at the
    network's time; the link does the queueing, so no time is added here."""

    def __init__(self, net: SimNetwork, node: str) -> None:
        super().__init__()
        self.net, self.node = net, node

    @property
    def active(self) -> bool:
        return True

    def enqueue(self, port: int, priority: int, now: float) -> Admitted | None:
        t = self.net.loop.now
        return Admitted(int(t * 1e6) & 0xFFFFFFFF, self.net.depth(self.node, port), 0, 0, t)


# ------------------------------------------------------------------ its options and program


@dataclass
class SimOptions:
    """What the network in virtual time adds to ``run``'s settings."""

    delay_ms: float = 0.0  # propagation delay per link direction (Mininet's default: none)
    queue: int = 1000  # frames per link direction (htb's leaf pfifo: txqueuelen)
    compute_ms: float = 8.0  # a worker's virtual time between two rounds (apply, accuracy,
    # next gradient: 8 ms measured for the make-run MLP, docs/simulate.md)
    jitter_ms: float = 10.0  # + uniform [0, jitter) per worker and round (start-file poll)
    switch_proc_ms: float = 0.0  # a switch's time per frame (pyswitch's CPU in Mininet: 33 µs)
    burst_bytes: float = float(HTB_BUCKET_BYTES)  # htb's token bucket per link direction:
    # TCLink's class's ceil bucket, rate/HZ + mtu = 1,600 B (0: none, every frame its time)
    wake_ms: float = 0.0  # how long after a frame arrives its switch or host takes it (0: at
    # once; Mininet's processes woken on shared cores, docs/simulate.md cross-validation)
    train: bool = True  # a real model's gradients (False: seeded random int32 vectors)
    full_p4: bool = False  # every switch executes ina.p4 (default: forwarding-only switches
    # take the tested shortcut of simulate/fastpath.py, docs/simulate.md "Speed")
    reference: bool = True  # train the single-process reference (results' accuracy)
    ecn_packets: int = 0  # switches mark INA packets whose link queue holds this many (0: off;
    # docs/protocol.md §6, "Congestion marks"; SimNetwork.mark_above)


@cache
def program(slots: int) -> Any:
    """ina.p4 compiled by pyswitch with ``slots`` slots (the ``--slots`` define)."""
    import pyswitch
    from workers.ina.constants import compile_defines

    del slots  # part of the cache key; compile_defines() reads the same setting
    return pyswitch.compile_p4(str(P4_PROGRAM), defines=compile_defines())


def active_graph(graph: nx.Graph, used: set[str]) -> nx.Graph:
    """``graph`` without the hosts that take no part in the run (neither a worker nor a PS),
    for computing the rules: a host is a leaf and paths never transit one (``topo.paths``),
    so every other rule is the same and only the /32 routes toward idle hosts -- which no
    frame of the run is addressed to -- are left out (at fat-tree k=32, 8,192 routes on each
    of 1,280 switches).  Ports and addresses still come from the whole graph."""
    idle = [n for n, k in graph.nodes(data="kind") if k == "host" and n not in used]
    if not idle:
        return graph
    return nx.freeze(graph.subgraph(n for n in graph if n not in set(idle)).copy())


def port_seed(seed: int, node: str, port: int, direction: str) -> int:
    """The seed of the impairment of ``node``'s port ``port`` in ``direction`` ("in" or
    "out"): its own random stream, drawn from ``seed`` (``--seed``) and the port's name, so
    that losses on different ports are independent, as "1 % loss per port" means, and a run
    is still reproduced by its seed (the daemon's ports: ``pyswitch.impairment.stream_seed``).
    With one seed everywhere every port drops the same ordinals of its frames, and a network
    that splits a worker's GRADs evenly over equal-cost paths (ecmp_turn) drops the same
    chunk on many ports at once: at k=16, 1 % loss, budget 0 that alone took the INA ratio from 0.18 to 0.05
    (docs/results.md, issue 39)."""
    return zlib.crc32(f"{seed}/{node}/{port}/{direction}".encode())


def impairment(s: Any) -> ImpairmentSpec | None:
    """pyswitch's impairment spec of ``s`` (``--loss``, ``--dup``, ``--reorder``; None)."""
    if not (s.loss or s.dup or s.reorder):
        return None
    return ImpairmentSpec(loss=s.loss, dup=s.dup, reorder=s.reorder, seed=s.seed)
