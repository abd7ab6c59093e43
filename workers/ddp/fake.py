"""Stand-ins for the network, for tests and for trying the hook on one machine.

* :class:`FakeNetwork` (pure): sums the ranks' GRADs as the aggregation does -- it is the PS's
  own merge machine (``workers/ina/ps.py``), so a retransmission of a completed chunk is
  answered with the stored RESULT, as the real PS does -- and delivers each RESULT to every
  rank, except copies a drop rule removes (a lost RESULT).
* :func:`run_virtual`: drives several :class:`RankEngine` through a :class:`FakeNetwork` on a
  virtual clock (deterministic unit tests of retransmission).
* :class:`InProcessHub` / :meth:`InProcessHub.transport`: the same network for threads of one
  process, behind the real :class:`EngineTransport` (the hook's code path, minus sockets).
* :class:`LoopbackPs`: a PS on 127.0.0.1 over UDP in a thread, RESULTs sent to every rank's
  address (what ``python -m workers.ina.ps_node`` does with loopback ``result_dests``, but
  usable inside a test process and with a drop rule).
"""

from __future__ import annotations

import queue
import select
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from workers.ddp.codec import ChunkRange
from workers.ddp.exchange import Completed, RankEngine, SenderParams
from workers.ddp.transport import EngineTransport
from workers.ina.constants import TYPE_GRAD, TYPE_PARTIAL
from workers.ina.constants import K as DEFAULT_K
from workers.ina.ps import PsState
from workers.ina.udp import open_socket, receive, send
from workers.ina.wire import InaPacket

# (RESULT, destination worker id) -> drop this copy?
DropRule = Callable[[InaPacket, int], bool]


def drop_once(keys: Iterable[tuple[int, int, int]]) -> DropRule:
    """A rule losing the first RESULT copy of each ``(round, chunk_id, worker_id)``."""
    left = set(keys)

    def rule(pkt: InaPacket, worker_id: int) -> bool:
        key = (pkt.round, pkt.chunk_id, worker_id)
        if key in left:
            left.discard(key)
            return True
        return False

    return rule


@dataclass
class FakeNetwork:
    """GRADs in, RESULT copies out (see the module docstring)."""

    job_id: int
    worker_ids: list[int]
    n_chunks: int
    k: int = DEFAULT_K
    drop: DropRule | None = None
    dropped: list[tuple[int, int, int]] = field(default_factory=list)  # (round, chunk, worker)

    def __post_init__(self) -> None:
        self.ps = PsState(self.job_id, self.worker_ids, self.n_chunks, self.k)

    def on_packet(self, pkt: InaPacket) -> list[tuple[int, InaPacket]]:
        if pkt.msg_type not in (TYPE_GRAD, TYPE_PARTIAL):
            return []
        out = []
        for result in self.ps.on_packet(pkt).results:
            for w in self.worker_ids:
                if self.drop is not None and self.drop(result, w):
                    self.dropped.append((result.round, result.chunk_id, w))
                else:
                    out.append((w, result))
        return out


Submission = tuple[int, ChunkRange, np.ndarray, Sequence[tuple[int, int, int]]]


def run_virtual(engines: dict[int, RankEngine], net: FakeNetwork,
                submissions: dict[int, list[Submission]], *, max_time: float = 60.0
                ) -> tuple[dict[int, list[Completed]], float]:
    """Submit each rank's ``(round, range, values, schedule)`` buckets at time 0, deliver
    packets instantly (FIFO), jump the clock to the next retransmission deadline whenever the
    network is idle.  Returns every rank's completed buckets and the virtual time taken."""
    now, ticket = 0.0, 0
    wire: list[tuple[int | None, InaPacket]] = []  # (None = to the network, worker id)
    for w, subs in submissions.items():
        for round_, rng, values, sched in subs:
            ticket += 1
            wire += [(None, p) for p in engines[w].submit(ticket, round_, rng, values, sched, now)]
    done: dict[int, list[Completed]] = {w: [] for w in engines}
    want = {w: len(s) for w, s in submissions.items()}
    while True:
        while wire:
            dest, pkt = wire.pop(0)
            if dest is None:
                wire += net.on_packet(pkt)
            else:
                wire += [(None, p) for p in engines[dest].on_packet(pkt, now)]
        for w, eng in engines.items():
            done[w] += eng.pop_completed()
        if all(len(done[w]) == want.get(w, 0) for w in engines):
            return done, now
        deadlines = [d for e in engines.values() if (d := e.next_deadline()) is not None]
        if not deadlines:
            raise RuntimeError("virtual run stuck: nothing in flight, buckets unfinished")
        now = max(now, min(deadlines))
        if now > max_time:
            raise RuntimeError(f"virtual run not finished after {max_time} s")
        for eng in engines.values():
            wire += [(None, p) for p in eng.tick(now)]


class InProcessHub:
    """A :class:`FakeNetwork` shared by threads; each rank gets a channel with an inbox."""

    def __init__(self, net: FakeNetwork) -> None:
        self.net = net
        self._lock = threading.Lock()
        self._inbox: dict[int, queue.SimpleQueue[InaPacket | None]] = {
            w: queue.SimpleQueue() for w in net.worker_ids}

    def transport(self, params: SenderParams, **kw: float) -> EngineTransport:
        return EngineTransport(params, _HubChannel(self, params.worker_id), **kw)

    def _send(self, pkt: InaPacket) -> None:
        with self._lock:  # PsState is not thread-safe; delivery order is the lock order
            out = self.net.on_packet(pkt)
        for w, result in out:
            self._inbox[w].put(result)


class _HubChannel:
    def __init__(self, hub: InProcessHub, worker_id: int) -> None:
        self.hub, self.inbox = hub, hub._inbox[worker_id]

    def send(self, pkt: InaPacket) -> None:
        self.hub._send(pkt)

    def send_all(self, pkts: list[InaPacket]) -> None:
        for pkt in pkts:
            self.hub._send(pkt)

    def recv(self, timeout: float) -> list[InaPacket]:
        out: list[InaPacket] = []
        try:
            item = self.inbox.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return out
        while True:
            if item is not None:  # None is a wake-up
                out.append(item)
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return out

    def wake(self) -> None:
        self.inbox.put(None)

    def close(self) -> None:
        pass


class LoopbackPs:
    """The PS merge machine behind a UDP socket on loopback, in a daemon thread.

    ``drop(result, dest_index)`` may discard RESULT copies (dest_index indexes
    ``result_dests``).  Use as a context manager, or :meth:`close`.
    """

    def __init__(self, job_id: int, worker_ids: list[int], n_chunks: int,
                 result_dests: list[tuple[str, int]], *, port: int = 0,
                 drop: Callable[[InaPacket, int], bool] | None = None,
                 k: int = DEFAULT_K) -> None:
        self.state = PsState(job_id, worker_ids, n_chunks, k)
        self.result_dests, self.drop = list(result_dests), drop
        self.sock = open_socket(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.addr: tuple[str, int] = self.sock.getsockname()
        self.dropped = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loopback-ps", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if not ready:
                continue
            while True:
                try:
                    pkt = receive(self.sock)
                except BlockingIOError:
                    break
                if pkt is None:
                    continue
                for result in self.state.on_packet(pkt).results:
                    for i, dest in enumerate(self.result_dests):
                        if self.drop is not None and self.drop(result, i):
                            self.dropped += 1
                        else:
                            send(self.sock, result, dest)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.sock.close()

    def __enter__(self) -> LoopbackPs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
