"""The worker state machine of docs/design.md §6 steps 1-9 (sync and async modes), free of I/O.

Conventions (entry points, ``now``, events, names) and the async design are in
:mod:`workers.ndn.protocol`.

Worker (``WorkerState``)
    step 2  answers a task Interest with ``accept`` (or ``decline`` when configured).
    step 3  fetches ``/<ps>/<train>/<me>`` (segment 0 first; the rest once FinalBlockId is
            known), re-expressing missing segments after ``rto_s``.
    step 4  sends ``/insert/<ps>/<train>`` and re-sends it every ``rto_s`` until the
            confirmation ``/distribute/<ps>/<train>`` arrives; then emits ``Train(0, params)``.
    step 5  the application calls :meth:`WorkerState.gradient_ready`; collection Interests are
            answered immediately if the gradient is ready, otherwise held until it is.  When
            every segment of the gradient has been sent once, the probe timer starts.
            Probe timeout  [decision]: from the history H of the last ``probe_history``
            intervals "last gradient segment sent -> distribution complete" (only versions
            completed by multicast alone, even if the timer fired first: a recovered version's
            interval measures the timer itself and would feed back into it, while leaving out
            the spurious expiries would keep a too short timeout for ever), timeout =
            clamp(mean(H) + probe_k * std(H), probe_min_s, probe_max_s) (population std);
            with fewer than 2 samples it is ``probe_initial_s``.  In sync mode the interval
            contains the wait for the slowest worker, so the spread term matters; k = 4 makes a
            spurious expiry rare (and harmless: it only causes an early fetch).
    step 6/7 distribution segments (multicast, or fetched) are reassembled; a complete version
            emits ``Train(v, params)`` (or ``Finished`` for the last one).
    step 8  after the last version: ``/delete/<ps>/<train>`` (sent ``delete_repeats`` times
            with distinct nonces, since nothing acknowledges it).
    step 9  on probe expiry: fetches the missing segments of the awaited version with normal
            Interests ``/<ps>/<train>/v=n/seg=i`` (re-expressed after ``rto_s``).  A version
            completed with at least one fetched segment counts as a *recovery*.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ndn.encoding import FormalName

from workers.ndn import names as nn
from workers.ndn.names import Kind
from workers.ndn.packets import (
    DEFAULT_SEG_SIZE,
    Data,
    Interest,
    Reassembler,
    encode_data,
    segment,
)
from workers.ndn.protocol import (
    ACCEPT,
    DECLINE,
    Fetcher,
    Finished,
    MachineBase,
    Train,
    check_mode,
    pack_gradient,
)

__all__ = ["WorkerConfig", "WorkerState"]


@dataclass
class WorkerConfig:
    """Worker parameters (times in seconds)."""

    worker: str
    ps: str
    train: str
    n_rounds: int
    seg_size: int = DEFAULT_SEG_SIZE
    accept: bool = True
    lifetime_s: float = 2.0
    rto_s: float = 0.2
    probe_k: float = 4.0
    probe_min_s: float = 0.05
    probe_max_s: float = 5.0
    probe_initial_s: float = 1.0
    probe_history: int = 20
    delete_repeats: int = 2
    seed: int = 0
    mode: str = "sync"  # async: n_rounds is the last version (the PS's push budget)


class WorkerState(MachineBase):
    """A worker's side of docs/design.md §6, sync or async mode (see the module docstring)."""

    def __init__(self, cfg: WorkerConfig) -> None:
        super().__init__(cfg.worker, "worker", cfg.lifetime_s, cfg.rto_s, cfg.seed)
        nn.check_id(cfg.ps, "ps")
        nn.check_id(cfg.train, "train")
        check_mode(cfg.mode)
        self.cfg = cfg
        self.asynchronous = cfg.mode == "async"
        self.seq = 0  # async: gradients handed over so far (the next one's sequence number)
        self.newest = -1  # async: newest complete version held
        self.want = 0  # async: the version awaited after the last gradient (newest then + 1)
        self.newest_params = b""
        self.state = "idle"  # idle|content|subscribing|training|waiting|done|declined
        self.version = -1  # parameters version being trained on / held
        self.content: Fetcher | None = None
        self.init_params: bytes | None = None
        self.next_insert: float | None = None
        self.grad_segments: dict[int, list[bytes]] = {}  # version -> Data wires
        self.grad_sent: dict[int, set[int]] = {}
        self.held: dict[tuple[int, int], float] = {}  # (version, seg) -> expiry
        self.sent_at: float | None = None  # all gradient segments of this version sent once
        self.probe_deadline: float | None = None
        self.dist: dict[int, Reassembler] = {}
        self.fetch: Fetcher | None = None
        self.fetched_segments: dict[int, int] = {}
        self.history: list[float] = []
        self.probe_expiries = 0
        self.recoveries = 0
        self.recovered_versions: set[int] = set()
        self.confirmations = 0

    # ---------------------------------------------------------------- probe timer

    def probe_timeout(self) -> float:
        """clamp(mean + k*std of the history, min, max); ``probe_initial_s`` before 2 samples."""
        c = self.cfg
        if len(self.history) < 2:
            return c.probe_initial_s
        h = self.history[-c.probe_history:]
        t = statistics.fmean(h) + c.probe_k * statistics.pstdev(h)
        return min(c.probe_max_s, max(c.probe_min_s, t))

    # ---------------------------------------------------------------- timers

    def next_deadline(self) -> float | None:
        times = [t for t in (self.next_insert, self.probe_deadline) if t is not None]
        for f in (self.content, self.fetch):
            if f is not None and (t := f.next_deadline()) is not None:
                times.append(t)
        times += list(self.held.values())
        return min(times, default=None)

    def tick(self, now: float) -> list[bytes]:
        out: list[bytes] = []
        c = self.cfg
        if self.content is not None:
            late = self.content.due(now)
            self.stats.retransmissions += len(late)
            out += [self.interest(nn.with_segment(self.content.base, s)) for s in late]
        if self.next_insert is not None and self.next_insert <= now:
            self.stats.retransmissions += 1
            out += self._subscribe(now)
        if self.probe_deadline is not None and self.probe_deadline <= now:
            self.probe_deadline = None
            self.probe_expiries += 1
            want = self.want if self.asynchronous else self.version + 1
            reasm = self.dist.setdefault(want, Reassembler())
            self.fetch = Fetcher(nn.fetch_name(c.ps, c.train, want), reasm, c.rto_s, c.rto_s)
            out += [self.interest(nn.with_segment(self.fetch.base, s))
                    for s in self.fetch.request(now)]
        if self.fetch is not None:
            late = self.fetch.due(now)
            self.stats.retransmissions += len(late)
            out += [self.interest(nn.with_segment(self.fetch.base, s)) for s in late]
        for k in [k for k, exp in self.held.items() if exp <= now]:
            del self.held[k]
        return out

    def _subscribe(self, now: float) -> list[bytes]:
        self.next_insert = now + self.cfg.rto_s
        return [self.interest(nn.insert_name(self.cfg.ps, self.cfg.train), self.cfg.rto_s)]

    # ---------------------------------------------------------------- application

    def gradient_ready(self, version: int, grad: bytes, now: float) -> list[bytes]:
        """Step 5: the gradient computed from parameters ``version`` is ready."""
        if self.state != "training" or version != self.version:
            raise ValueError(f"worker {self.me}: gradient for version {version} while "
                             f"{self.state} on version {self.version}")
        c = self.cfg
        if self.asynchronous:
            # named by sequence number; the content says which version it was computed from
            number, payload, keep = self.seq, pack_gradient(version, grad), 4
            self.seq += 1
            self.want = self.newest + 1
        else:
            number, payload, keep = version, grad, 2
        self.grad_segments[number] = segment(nn.collect_name(c.worker, c.ps, c.train, number),
                                             payload, c.seg_size)
        self.grad_sent[number] = set()
        for old in [k for k in self.grad_segments if k <= number - keep]:
            del self.grad_segments[old]
            self.grad_sent.pop(old, None)
        self.state = "waiting"
        self.sent_at = None
        out = []
        for key in sorted(k for k in self.held if k[0] == number):
            del self.held[key]
            out += self._grad_segment(number, key[1], now)
        return out

    def _current(self) -> int:
        """Collection number of the gradient handed over last (sync: its version)."""
        return self.seq - 1 if self.asynchronous else self.version

    def _grad_segment(self, number: int, seg: int, now: float) -> list[bytes]:
        segs = self.grad_segments[number]
        if seg >= len(segs):
            self.stats.dropped += 1
            return []
        sent = self.grad_sent[number]
        sent.add(seg)
        self.stats.sent_data += 1
        if (number == self._current() and self.state == "waiting" and self.sent_at is None
                and len(sent) == len(segs)):
            self.sent_at = now
            if self.asynchronous and self.newest >= self.want:
                # a newer version arrived while the PS was collecting: go on from it at once
                self._start_training(self.newest, self.newest_params)
                return [segs[seg]]
            self.probe_deadline = now + self.probe_timeout()
        return [segs[seg]]

    # ---------------------------------------------------------------- input

    def on_packet(self, wire: bytes, now: float) -> list[bytes]:
        """Handle one packet from the network; return the wires to send."""
        pkt = self._decode(wire)
        if pkt is None:
            return []
        p = nn.parse_for(pkt.name, self.me, "worker")
        c = self.cfg
        if p is None or p.ps != c.ps or p.train != c.train:
            self.stats.dropped += 1
            return []
        if isinstance(pkt, Interest):
            if p.kind is Kind.TASK and p.worker == self.me:
                return self._on_task(now)
            if p.kind is Kind.COLLECT and p.worker == self.me and p.version is not None:
                seg = p.segment or 0
                if p.version in self.grad_segments:
                    return self._grad_segment(p.version, seg, now)
                nxt = self.seq if self.asynchronous else max(self.version, 0)
                if p.version >= nxt and self.state not in ("done", "declined"):
                    # not computed yet (training, or not even started): hold it
                    self.held[(p.version, seg)] = now + (pkt.lifetime_ms or 4000) / 1000
                    return []
        else:
            if p.kind is Kind.CONTENT and p.worker == self.me and self.content is not None:
                _new, more = self.content.on_data(pkt, now)
                out = [self.interest(nn.with_segment(self.content.base, s)) for s in more]
                if self.content.reasm.complete:
                    self.init_params = self.content.reasm.payload()
                    self.content = None
                    self.state = "subscribing"
                    out += self._subscribe(now)
                return out
            if p.kind is Kind.CONFIRM:
                self.confirmations += 1
                if self.state == "subscribing" and self.init_params is not None:
                    self.next_insert = None
                    self._start_training(0, self.init_params)
                return []
            if p.kind in (Kind.DISTRIBUTE, Kind.FETCH) and p.version is not None:
                return self._on_params(p, pkt, now)
        self.stats.dropped += 1
        return []

    def _on_task(self, now: float) -> list[bytes]:
        c = self.cfg
        out = [self._answer(nn.task_name(c.worker, c.ps, c.train), ACCEPT if c.accept else DECLINE)]
        if self.state == "idle":
            if not c.accept:
                self.state = "declined"
                return out
            self.state = "content"
            self.content = Fetcher(nn.content_name(c.ps, c.train, c.worker), Reassembler(),
                                   c.rto_s, c.rto_s)
            out += [self.interest(nn.with_segment(self.content.base, s))
                    for s in self.content.request(now)]
        return out

    def _answer(self, name: FormalName, content: bytes) -> bytes:
        self.stats.sent_data += 1
        return encode_data(name, content)

    def _start_training(self, version: int, params: bytes) -> None:
        if self.asynchronous and version > self.newest:
            self.newest, self.newest_params = version, params
        self.version = version
        self.state = "training"
        self.events.append(Train(version, params))

    def _on_params(self, p: nn.Parsed, data: Data, now: float) -> list[bytes]:
        if self.asynchronous:
            return self._on_params_async(p, data, now)
        want = self.version + 1
        if p.version != want or self.state not in ("training", "waiting"):
            # a duplicate of a version already applied, or one we cannot be waiting for
            self.stats.dropped += 1
            return []
        reasm = self.dist.setdefault(want, Reassembler())
        out: list[bytes] = []
        if self.fetch is not None:
            # multicast or fetched, the segment is the fetcher's: it stops waiting for it and
            # asks for the rest once the count is known
            new, more = self.fetch.on_data(data, now)
            if new and p.kind is Kind.FETCH:
                self.fetched_segments[want] = self.fetched_segments.get(want, 0) + 1
            out = [self.interest(nn.with_segment(self.fetch.base, s)) for s in more]
        else:
            reasm.add_data(data)
        if not reasm.complete:
            return out
        fetched = self.fetched_segments.pop(want, 0)
        if self.state == "waiting" and self.sent_at is not None and not fetched:
            # a distribution completed by multicast alone is a sample of the interval, also when
            # the timer fired first (a spurious expiry: the timeout was too short, and leaving
            # such rounds out would keep it too short for ever -- measured on Mininet); one
            # completed with fetched segments measures the timer itself (feedback): no sample
            self.history.append(now - self.sent_at)
        params = reasm.payload()
        del self.dist[want]
        self.fetch = None
        self.probe_deadline = None
        if fetched:
            self.recoveries += 1
            self.recovered_versions.add(want)
        if want >= self.cfg.n_rounds:
            self.state = "done"
            self.version = want
            self.events.append(Finished(want, params))
            c = self.cfg
            return out + [self.interest(nn.delete_name(c.ps, c.train), c.rto_s)
                          for _ in range(c.delete_repeats)]
        self._start_training(want, params)
        return out

    def _on_params_async(self, p: nn.Parsed, data: Data, now: float) -> list[bytes]:
        """Async: any version newer than the newest held is reassembled; a complete one becomes
        the newest, and restarts training if the worker was waiting for it (or an older one)."""
        x = p.version
        assert x is not None
        if x <= self.newest or self.state not in ("training", "waiting"):
            self.stats.dropped += 1
            return []
        reasm = self.dist.setdefault(x, Reassembler())
        out: list[bytes] = []
        if self.fetch is not None and x == self.want:
            # the fetcher owns dist[want] (see _on_params): it stops waiting for this segment
            new, more = self.fetch.on_data(data, now)
            if new and p.kind is Kind.FETCH:
                self.fetched_segments[x] = self.fetched_segments.get(x, 0) + 1
            out = [self.interest(nn.with_segment(self.fetch.base, s)) for s in more]
        else:
            reasm.add_data(data)
        if not reasm.complete:
            return out
        fetched = self.fetched_segments.pop(x, 0)
        params = reasm.payload()
        for old in [k for k in self.dist if k <= x]:
            del self.dist[old]
            self.fetched_segments.pop(old, None)
        self.newest, self.newest_params = x, params
        if fetched:
            self.recoveries += 1
            self.recovered_versions.add(x)
        # a worker goes on only once its whole gradient went out (sent_at): were it to train ahead
        # of the PS's collection, it could pile up gradients the PS never asks for
        awaited = self.state == "waiting" and x >= self.want and self.sent_at is not None
        if awaited:
            if self.sent_at is not None and not fetched:  # same sampling rule as sync mode
                self.history.append(now - self.sent_at)
            self.fetch = None
            self.probe_deadline = None
        if x >= self.cfg.n_rounds:
            # the last version: stop, even in the middle of a step (its gradient is not wanted)
            self.state = "done"
            self.version = x
            self.fetch, self.probe_deadline = None, None
            self.held.clear()
            self.events.append(Finished(x, params))
            c = self.cfg
            return out + [self.interest(nn.delete_name(c.ps, c.train), c.rto_s)
                          for _ in range(c.delete_repeats)]
        if awaited:
            self._start_training(x, params)
        return out
