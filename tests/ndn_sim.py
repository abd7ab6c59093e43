"""In-process discrete-event simulation of the NDN transport (test helper, not product code).

A PS, two routers and N workers exchange real Ethernet frames (ethertype 0x8624) carrying
python-ndn wires through ``workers.ndn.router.Router`` objects and the state machines of
``workers.ndn.protocol``.  Links have a propagation delay, a bandwidth (FIFO serialization per
direction) and an optional seeded per-frame loss probability.  FIBs come from networkx shortest
paths, as the controller will install them.

Topologies: ``tree`` -- ps - r1 - r2, workers alternately on r1 and r2; ``line`` -- ps - r1 - r2,
every worker on r2.

Measured on the links (frame bytes, before loss): per parameter version, the distribution Data
bytes the PS put on its link, and those delivered on the workers' access links.
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from workers.ndn import names as nn
from workers.ndn.packets import decode_data, eth_frame, eth_unframe, packet_type
from workers.ndn.protocol import Finished, Published, Train
from workers.ndn.ps import PsConfig, PsState
from workers.ndn.router import Router
from workers.ndn.worker import WorkerConfig, WorkerState

PS, TRAIN = "ps0", "job1"


def grad_fn(worker_index: int, version: int, params: bytes) -> bytes:
    """A deterministic stand-in gradient: seeded noise plus a pull of the parameters."""
    p = np.frombuffer(params, dtype=np.float32)
    rng = np.random.default_rng(1000 * worker_index + version)
    g = rng.standard_normal(p.size).astype(np.float32) + np.float32(0.1) * p
    return g.astype(np.float32).tobytes()


def update_fn(version: int, params: bytes, grads: dict[str, bytes]) -> bytes:
    """params - 0.1 * mean(grads), in float32, workers summed in name order."""
    p = np.frombuffer(params, dtype=np.float32)
    acc = np.zeros_like(p)
    for g in sorted(grads):
        acc += np.frombuffer(grads[g], dtype=np.float32)
    return (p - np.float32(0.1) * acc / np.float32(len(grads))).astype(np.float32).tobytes()


def reference(n_workers: int, init: bytes, n_rounds: int) -> bytes:
    """The parameters after n_rounds computed without any network."""
    params = init
    names = worker_names(n_workers)
    for v in range(n_rounds):
        params = update_fn(v, params, {g: grad_fn(i, v, params) for i, g in enumerate(names)})
    return params


def worker_names(n: int) -> list[str]:
    return [f"worker{i:02d}" for i in range(n)]


@dataclass
class Link:
    a: tuple[str, int]
    b: tuple[str, int]
    delay: float
    bps: float
    loss: float
    busy: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    dropped: int = 0


@dataclass
class SimResult:
    n_workers: int
    n_rounds: int
    finished: dict[str, bytes]
    ps_params: bytes
    dist_bytes_ps_link: dict[int, int]  # version -> bytes of distribution Data sent by the PS
    fetch_bytes_ps_link: dict[int, int]  # version -> bytes of fetch Data sent by the PS
    dist_copy_bytes: dict[int, int]  # version -> bytes of one copy (sum of its segment frames)
    dist_bytes_worker_links: dict[int, int]  # version -> distribution bytes delivered to workers
    lost_pairs: set[tuple[str, int]]  # (worker, version) that missed >= 1 multicast segment
    recovered: dict[str, set[int]]  # per worker: versions completed with >= 1 fetched segment
    probe_expiries: int
    frames_dropped: int
    end_time: float
    routers: dict[str, Router]
    ps: PsState
    workers: dict[str, WorkerState]


class Sim:
    def __init__(self, n_workers: int, n_rounds: int = 4, dim: int = 3000, layout: str = "tree",
                 loss: float = 0.0, seed: int = 1, seg_size: int = 1200,
                 delay: float = 2e-4, bps: float = 1e9, cs_capacity: int = 0) -> None:
        self.rng = random.Random(seed)
        self.now = 0.0
        self.q: list[tuple[float, int, str, tuple]] = []
        self.seq = 0
        self.n_rounds = n_rounds
        names = worker_names(n_workers)
        self.worker_index = {g: i for i, g in enumerate(names)}
        self.init = np.linspace(-1, 1, dim, dtype=np.float32).tobytes()
        self.ps = PsState(PsConfig(PS, TRAIN, names, n_rounds, grad_bytes=4 * dim,
                                   seg_size=seg_size, seed=seed), self.init, update_fn)
        self.workers = {g: WorkerState(WorkerConfig(g, PS, TRAIN, n_rounds, seg_size=seg_size,
                                                    seed=seed * 100 + i))
                        for i, g in enumerate(names)}
        self.routers = {r: Router(r, cs_capacity=cs_capacity) for r in ("r1", "r2")}
        # topology: node -> list of (neighbour); faces numbered in insertion order
        self.faces: dict[str, list[Link]] = defaultdict(list)
        self.links: list[Link] = []
        graph = nx.Graph()

        def connect(x: str, y: str, lossy: bool) -> None:
            link = Link((x, len(self.faces[x])), (y, len(self.faces[y])), delay, bps,
                        loss if lossy else 0.0)
            self.faces[x].append(link)
            self.faces[y].append(link)
            self.links.append(link)
            graph.add_edge(x, y)

        connect(PS, "r1", True)
        connect("r1", "r2", True)
        for i, g in enumerate(names):
            connect("r2" if layout == "line" or i % 2 else "r1", g, True)
        self.ps_link = self.faces[PS][0]
        # FIB from shortest paths: for every router and every producer prefix
        for r, router in self.routers.items():
            for dest in [PS, *names]:
                nxt = nx.shortest_path(graph, r, dest)[1]
                face = next(i for i, lk in enumerate(self.faces[r])
                            if nxt in (lk.a[0], lk.b[0]))
                router.add_route("/" + dest, [face])
        self.macs = {n: bytes([2, 0, 0, 0, k // 256, k % 256])
                     for k, n in enumerate([PS, "r1", "r2", *names])}
        self.timer_at: dict[str, float | None] = defaultdict(lambda: None)
        self.dist_ps: dict[int, int] = defaultdict(int)
        self.fetch_ps: dict[int, int] = defaultdict(int)
        self.dist_worker = defaultdict(int)
        self.dist_delivered: dict[tuple[str, int], set[int]] = defaultdict(set)
        self.n_dist_segs: dict[int, int] = {}
        self.copy_bytes: dict[int, int] = {}
        self.finished: dict[str, bytes] = {}

    # ------------------------------------------------------------------ plumbing

    def push(self, t: float, kind: str, args: tuple) -> None:
        self.seq += 1
        heapq.heappush(self.q, (t, self.seq, kind, args))

    def send(self, node: str, face: int, wire: bytes) -> None:
        link = self.faces[node][face]
        peer = link.b if link.a == (node, face) else link.a
        frame = eth_frame(self.macs[peer[0]], self.macs[node], wire)
        start = max(self.now, link.busy[node])
        done = start + len(frame) * 8 / link.bps
        link.busy[node] = done
        if link is self.ps_link and node == PS:
            self._account_ps(wire, len(frame))
        if link.loss and self.rng.random() < link.loss:
            link.dropped += 1
            return
        self.push(done + link.delay, "frame", (peer[0], peer[1], frame))

    def _account_ps(self, wire: bytes, nbytes: int) -> None:
        if packet_type(wire) != 0x06:
            return
        p = nn.parse(decode_data(wire).name)
        if p is not None and p.kind is nn.Kind.DISTRIBUTE:
            self.dist_ps[p.version] += nbytes
        elif p is not None and p.kind is nn.Kind.FETCH:
            self.fetch_ps[p.version] += nbytes

    def emit(self, node: str, wires: list[bytes]) -> None:
        for w in wires:
            self.send(node, 0, w)
        self.arm(node)
        proto = self.ps if node == PS else self.workers[node]
        for ev in proto.pop_events():
            if isinstance(ev, Train):
                i = self.worker_index[node]
                compute = 0.02 * (1 + 0.5 * i / len(self.workers)) * (1 + 0.1 * self.rng.random())
                self.push(self.now + compute, "trained", (node, ev.version, ev.params))
            elif isinstance(ev, Finished):
                self.finished[node] = ev.params
            elif isinstance(ev, Published):
                segs = self.ps.dist_segments[ev.version]
                self.n_dist_segs[ev.version] = len(segs)
                self.copy_bytes[ev.version] = sum(len(eth_frame(b"\0" * 6, b"\0" * 6, s))
                                                  for s in segs)

    def arm(self, node: str) -> None:
        proto = self.ps if node == PS else self.workers[node]
        t = proto.next_deadline()
        cur = self.timer_at[node]
        if t is not None and (cur is None or t < cur):
            self.timer_at[node] = t
            self.push(max(t, self.now), "timer", (node, t))

    # ------------------------------------------------------------------ run

    def run(self, until: float = 120.0) -> SimResult:
        self.emit(PS, self.ps.start(0.0))
        for r in self.routers:
            self.push(1.0, "expire", (r,))
        grace_end = until
        while self.q:
            t, _s, kind, args = heapq.heappop(self.q)
            if t > grace_end:
                break
            if len(self.finished) == len(self.workers) and grace_end == until:
                grace_end = self.now + 0.1  # let the deletes propagate
            self.now = t
            if kind == "frame":
                node, face, frame = args
                _dst, _src, wire = eth_unframe(frame)
                if node in self.routers:
                    for f, w in self.routers[node].on_packet(face, wire, t):
                        self.send(node, f, w)
                else:
                    if node in self.workers and packet_type(wire) == 0x06:
                        p = nn.parse(decode_data(wire).name)
                        if p is not None and p.kind is nn.Kind.DISTRIBUTE:
                            self.dist_worker[p.version] += len(frame)
                            self.dist_delivered[(node, p.version)].add(p.segment)
                    proto = self.ps if node == PS else self.workers[node]
                    self.emit(node, proto.on_packet(wire, t))
            elif kind == "timer":
                node, at = args
                if self.timer_at[node] != at:
                    continue
                self.timer_at[node] = None
                proto = self.ps if node == PS else self.workers[node]
                self.emit(node, proto.tick(t))
            elif kind == "trained":
                node, version, params = args
                grad = grad_fn(self.worker_index[node], version, params)
                self.emit(node, self.workers[node].gradient_ready(version, grad, t))
            elif kind == "expire":
                self.routers[args[0]].expire(t)
                self.push(t + 1.0, "expire", args)
        lost = {(g, v) for g in self.workers for v in range(1, self.n_rounds + 1)
                if len(self.dist_delivered[(g, v)]) < self.n_dist_segs.get(v, 0)}
        return SimResult(
            n_workers=len(self.workers), n_rounds=self.n_rounds, finished=dict(self.finished),
            ps_params=self.ps.params[max(self.ps.params)],
            dist_bytes_ps_link=dict(self.dist_ps), fetch_bytes_ps_link=dict(self.fetch_ps),
            dist_copy_bytes=dict(self.copy_bytes),
            dist_bytes_worker_links=dict(self.dist_worker), lost_pairs=lost,
            recovered={g: set(n.recovered_versions) for g, n in self.workers.items()},
            probe_expiries=sum(n.probe_expiries for n in self.workers.values()),
            frames_dropped=sum(lk.dropped for lk in self.links), end_time=self.now,
            routers=self.routers, ps=self.ps, workers=self.workers)
