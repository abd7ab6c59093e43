"""The PS state machine of docs/design.md §6 steps 1-9 (sync and async modes), free of I/O.

Conventions (entry points, ``now``, events, names) and the async design are in
:mod:`workers.ndn.protocol`.

PS (``PsState``)
    step 2  sends ``/<worker>/<ps>/<train>`` to every worker, re-expressed every ``rto_s`` until the
            worker's Data (``accept`` / ``decline``) arrives; declined workers are left out.
    step 3  answers ``/<ps>/<train>/<worker>/seg=i`` with segment i of the initial parameters.
    step 4  answers every ``/insert/<ps>/<train>`` with an empty ``/distribute/<ps>/<train>``.
    step 5  for each accepted worker, at the estimated completion time, expresses one Interest per
            gradient segment ``/<worker>/<ps>/<train>/v=r/seg=i`` (the segment count follows from
            the known gradient size and the shared segment size).  Missing segments are
            re-expressed (new nonce) ``rto_s`` after the worker's first segment arrived, or when
            the Interest lifetime ran out.
            Completion-time estimator  [decision]: per worker, d_g = EWMA (weight ``ewma_alpha``)
            of the observed round durations  obs = t(first gradient segment of round r arrives)
            - t(version r published).  Round r >= 1's Interests are sent at
            t(version r published) + (1 - lead_fraction) * d_g; rounds without an estimate
            (round 0, first observation) send at once.  An early Interest is simply held by the
            worker until its gradient is ready (within the Interest lifetime), so the observation
            is then the true ready time plus one-way delay; a late one makes obs an
            overestimate (send time + RTT), which the lead term bounds: if the worker needs d
            and d_g > d/(1-lead), the next send is late and d_g shrinks geometrically toward
            about d/(1-lead), so the Interest arrives shortly before the gradient is ready.
    step 6  when all accepted workers' gradients of version r are complete, publishes version r+1
            as Data ``/distribute/<ps>/<train>/v=r+1/seg=i`` (routers multicast them along the
            persistent PIT); the last ``keep_versions`` versions are kept for active fetches.
    step 9  answers ``/<ps>/<train>/v=n/seg=i`` from the kept versions; an Interest for a
            version not yet published is held until it is (or its lifetime ends).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from ndn.encoding import FormalName

from workers.async_ps.core import AsyncPS, Reply, Worker
from workers.ndn import names as nn
from workers.ndn.names import Kind
from workers.ndn.packets import (
    DEFAULT_SEG_SIZE,
    Data,
    Interest,
    Reassembler,
    encode_data,
    n_segments,
    segment,
)
from workers.ndn.protocol import (
    ACCEPT,
    GRAD_HEADER,
    Applied,
    Fetcher,
    MachineBase,
    Published,
    check_mode,
    unpack_gradient,
)

__all__ = ["AsyncUpdater", "PsConfig", "PsState"]


class AsyncUpdater:
    """The async PS's update (docs/design.md §5 through ``workers.async_ps.core``): one AsyncPS with
    soft-sync size C (a version per C pushes) and, per worker, a ``Worker`` holding that worker's
    staleness window.

    ``decode(bytes) -> np.ndarray`` turns a gradient's bytes into values (float32 by default);
    the parameters keep the dtype of ``params``.
    """

    def __init__(self, params: np.ndarray, workers: list[str], lr: float, policy: str = "kappa",
                 window: int = 1,
                 decode: Callable[[bytes], np.ndarray] | None = None,
                 soft_sync: int = 1) -> None:
        if soft_sync > len(workers):
            raise ValueError(f"async update: soft-sync size C = {soft_sync} needs at least C "
                             f"workers, got {len(workers)}")
        self.ps = AsyncPS(params, lr, soft_sync, policy)
        self.workers = {g: Worker(i, window) for i, g in enumerate(workers)}
        self.decode = decode or (lambda b: np.frombuffer(b, dtype=np.float32))

    def apply(self, worker: str, t_w: int, grad: bytes) -> tuple[bytes, Reply]:
        """Apply one gradient computed from version ``t_w``; (new parameters, AsyncPS reply).

        ValueError (nothing changed) for an unknown worker, a wrong size, non-finite values or a
        version from the future.
        """
        ln = self.workers.get(worker)
        if ln is None:
            raise ValueError(f"async update: unknown worker {worker!r}")
        values = self.decode(grad)
        ln.t_w = t_w  # the window lives here; the clock is the one the gradient names
        push = ln.make_push(values)
        try:
            reply = self.ps.push(push)
        except ValueError:
            ln.cancel_push()
            raise
        ln.on_reply(reply)
        return reply.params.tobytes(), reply


@dataclass
class PsConfig:
    """PS parameters (times in seconds)."""

    ps: str
    train: str
    workers: list[str]
    n_rounds: int
    grad_bytes: int
    seg_size: int = DEFAULT_SEG_SIZE
    lifetime_s: float = 2.0
    rto_s: float = 0.2
    ewma_alpha: float = 0.5
    lead_fraction: float = 0.25
    keep_versions: int = 4
    seed: int = 0
    mode: str = "sync"
    budget: int | None = None  # async: pushes applied in all (default n_rounds x workers)

    @property
    def push_budget(self) -> int:
        """Async: gradients applied in all (default n_rounds x workers)."""
        return self.budget if self.budget is not None else self.n_rounds * len(self.workers)


@dataclass
class _WorkerView:
    state: str = "assigning"  # assigning | accepted | declined
    next_task: float = 0.0
    estimate: float | None = None  # EWMA round duration d_g
    collect_at: float | None = None  # when to express this round's collection Interests
    fetcher: Fetcher | None = None
    grad: bytes | None = None
    seq: int = 0  # async: sequence number of the push being collected
    since: float | None = None  # async: when its previous push was applied


class PsState(MachineBase):
    """The parameter server's side of docs/design.md §6 (see the module docstring).

    ``update``: sync mode, ``f(round, params, {worker: gradient}) -> new params``; async mode, an
    :class:`AsyncUpdater`.
    """

    def __init__(self, cfg: PsConfig, init_params: bytes,
                 update: Callable[[int, bytes, dict[str, bytes]], bytes] | AsyncUpdater
                 ) -> None:
        super().__init__(cfg.ps, "ps", cfg.lifetime_s, cfg.rto_s, cfg.seed)
        nn.check_id(cfg.train, "train")
        if not cfg.workers:
            raise ValueError("PS: no workers")
        if len(set(cfg.workers)) != len(cfg.workers):
            raise ValueError("PS: duplicate worker names")
        for g in cfg.workers:
            nn.check_id(g, "worker")
        if cfg.n_rounds < 1:
            raise ValueError(f"PS: n_rounds {cfg.n_rounds} must be >= 1")
        check_mode(cfg.mode)
        if (cfg.mode == "async") != isinstance(update, AsyncUpdater):
            raise ValueError(f"PS: mode {cfg.mode} needs "
                             + ("an AsyncUpdater" if cfg.mode == "async" else "an update function"))
        self.soft_sync = update.ps.soft_sync if isinstance(update, AsyncUpdater) else 1
        if cfg.mode == "async" and (cfg.push_budget < 1 or cfg.push_budget % self.soft_sync):
            raise ValueError(f"PS: push budget {cfg.push_budget} must be a positive multiple "
                             f"of the soft-sync size {self.soft_sync}")
        # the version after which the run ends
        self.last_version = (cfg.n_rounds if cfg.mode == "sync"
                             else cfg.push_budget // self.soft_sync)
        self.cfg = cfg
        self.update = update
        self.workers = {g: _WorkerView() for g in cfg.workers}
        self.round = 0  # round being collected (gradient version)
        self.params: dict[int, bytes] = {0: init_params}
        self.published_at: dict[int, float] = {}
        self.dist_segments: dict[int, list[bytes]] = {}
        self.fetch_cache: dict[tuple[int, int], bytes] = {}
        self.held_fetch: dict[tuple[int, int], float] = {}  # (version, seg) -> expiry
        self._content_parts = [init_params[i:i + cfg.seg_size]
                               for i in range(0, max(1, len(init_params)), cfg.seg_size)]
        self.asynchronous = cfg.mode == "async"
        self.n_grad_segments = n_segments(
            cfg.grad_bytes + (GRAD_HEADER if self.asynchronous else 0), cfg.seg_size)
        self.pushes = 0  # async: gradients applied
        self.rejected = 0  # async: complete gradients AsyncPS refused (malformed, future t_w)
        self.applied: list[Applied] = []
        self.done = False
        self.confirms_sent = 0
        self.deletes_seen = 0

    # ---------------------------------------------------------------- start / timers

    def start(self, now: float) -> list[bytes]:
        """Step 2: send the task assignment Interests."""
        for v in self.workers.values():
            v.next_task = now
        return self.tick(now)

    def next_deadline(self) -> float | None:
        times: list[float] = []
        for v in self.workers.values():
            if v.state == "assigning":
                times.append(v.next_task)
            if v.collect_at is not None:
                times.append(v.collect_at)
            if v.fetcher is not None and (t := v.fetcher.next_deadline()) is not None:
                times.append(t)
        times += list(self.held_fetch.values())
        return min(times, default=None)

    def tick(self, now: float) -> list[bytes]:
        out: list[bytes] = []
        c = self.cfg
        for g, v in self.workers.items():
            if v.state == "assigning" and v.next_task <= now:
                out.append(self.interest(nn.task_name(g, c.ps, c.train), c.rto_s))
                if v.next_task < now:
                    self.stats.retransmissions += 1
                v.next_task = now + c.rto_s
            if v.collect_at is not None and v.collect_at <= now:
                v.collect_at = None
                out += self._collect_interests(v, v.fetcher.request(now) if v.fetcher else [])
            elif v.fetcher is not None and v.collect_at is None:
                late = v.fetcher.due(now)
                self.stats.retransmissions += len(late)
                out += self._collect_interests(v, late)
        for k in [k for k, exp in self.held_fetch.items() if exp <= now]:
            del self.held_fetch[k]
        return out

    def _collect_interests(self, v: _WorkerView, segs: list[int]) -> list[bytes]:
        assert v.fetcher is not None or not segs
        return [self.interest(nn.with_segment(v.fetcher.base, s)) for s in segs] \
            if v.fetcher else []

    def _schedule_collection(self, g: str, v: _WorkerView, now: float) -> None:
        c = self.cfg
        number = v.seq if self.asynchronous else self.round
        base = nn.collect_name(g, c.ps, c.train, number)
        v.fetcher = Fetcher(base, Reassembler(self.n_grad_segments), c.lifetime_s, c.rto_s)
        v.grad = None
        start = v.since if self.asynchronous else self.published_at.get(self.round)
        if start is None or v.estimate is None:
            v.collect_at = now
        else:
            v.collect_at = max(now, start + (1.0 - c.lead_fraction) * v.estimate)

    # ---------------------------------------------------------------- input

    def on_packet(self, wire: bytes, now: float) -> list[bytes]:
        """Handle one packet from the network; return the wires to send."""
        pkt = self._decode(wire)
        if pkt is None:
            return []
        p = nn.parse_for(pkt.name, self.me, "ps")
        c = self.cfg
        if p is None or p.ps != c.ps or p.train != c.train:
            self.stats.dropped += 1
            return []
        if isinstance(pkt, Interest):
            return self._on_interest(p, now)
        return self._on_data(p, pkt, now)

    def _data(self, name: FormalName, content: bytes, final: int | None = None) -> bytes:
        self.stats.sent_data += 1
        return encode_data(name, content, final_block=final)

    def _on_interest(self, p: nn.Parsed, now: float) -> list[bytes]:
        c = self.cfg
        if p.kind is Kind.INSERT:
            self.confirms_sent += 1
            return [self._data(nn.distribute_name(c.ps, c.train), b"")]
        if p.kind is Kind.DELETE:
            self.deletes_seen += 1
            return []
        if p.kind is Kind.CONTENT and p.worker in self.workers:
            seg = p.segment or 0
            if seg >= len(self._content_parts):
                self.stats.dropped += 1
                return []
            name = nn.with_segment(nn.content_name(c.ps, c.train, p.worker), seg)
            return [self._data(name, self._content_parts[seg], len(self._content_parts) - 1)]
        if p.kind is Kind.FETCH and p.version is not None:
            seg = p.segment or 0
            if p.version in self.dist_segments:
                wire = self._fetch_data(p.version, seg)
                return [] if wire is None else [wire]
            if p.version > max(self.params) and p.version <= self.last_version:
                self.held_fetch[(p.version, seg)] = now + c.lifetime_s
                return []
        self.stats.dropped += 1
        return []

    def _fetch_data(self, version: int, seg: int) -> bytes | None:
        parts = self._parts(version)
        if seg >= len(parts):
            self.stats.dropped += 1
            return None
        wire = self.fetch_cache.get((version, seg))
        if wire is None:
            name = nn.with_segment(nn.fetch_name(self.cfg.ps, self.cfg.train, version), seg)
            wire = encode_data(name, parts[seg], final_block=len(parts) - 1)
            self.fetch_cache[(version, seg)] = wire
        self.stats.sent_data += 1
        return wire

    def _parts(self, version: int) -> list[bytes]:
        data = self.params[version]
        s = self.cfg.seg_size
        return [data[i:i + s] for i in range(0, max(1, len(data)), s)]

    def _on_data(self, p: nn.Parsed, data: Data, now: float) -> list[bytes]:
        v = self.workers.get(p.worker or "")
        if v is None:
            self.stats.dropped += 1
            return []
        if p.kind is Kind.TASK:
            if v.state == "assigning":
                v.state = "accepted" if data.content == ACCEPT else "declined"
                if v.state == "accepted" and not self.done:
                    self._schedule_collection(p.worker or "", v, now)
            return self.tick(now) + self._maybe_finish_round(now)
        number = v.seq if self.asynchronous else self.round
        if (p.kind is Kind.COLLECT and p.version == number and v.fetcher is not None
                and not self.done):
            first = v.fetcher.first_arrival is None
            _new, more = v.fetcher.on_data(data, now)
            if first and v.fetcher.first_arrival is not None:
                start = v.since if self.asynchronous else self.published_at.get(self.round)
                if start is not None:
                    obs = now - start
                    a = self.cfg.ewma_alpha
                    v.estimate = obs if v.estimate is None else a * obs + (1 - a) * v.estimate
            out = self._collect_interests(v, more)
            if v.fetcher.reasm.complete:
                v.grad = v.fetcher.reasm.payload()
                v.fetcher = None
                if self.asynchronous:
                    out += self._apply_push(p.worker or "", v, now)
                else:
                    out += self._maybe_finish_round(now)
            return out
        self.stats.dropped += 1
        return []

    def _maybe_finish_round(self, now: float) -> list[bytes]:
        if self.done or any(v.state == "assigning" for v in self.workers.values()):
            return []
        active = {g: v for g, v in self.workers.items() if v.state == "accepted"}
        if not active:
            self.done = True
            return []
        if self.asynchronous or any(v.grad is None for v in active.values()):
            return []
        r = self.round
        grads = {g: v.grad for g, v in active.items() if v.grad is not None}
        assert not isinstance(self.update, AsyncUpdater)
        new = self.update(r, self.params[r], grads)
        version = r + 1
        out = self._publish(version, new, now)
        if version >= self.cfg.n_rounds:
            self.done = True
        else:
            for g, v in active.items():
                self._schedule_collection(g, v, now)
            out += self.tick(now)
        return out

    def _apply_push(self, g: str, v: _WorkerView, now: float) -> list[bytes]:
        """Async: push the complete gradient of ``g`` at once; publish the new version when
        it completes a soft-sync batch; schedule the worker's next push (or end the run when the
        budget is used up)."""
        assert isinstance(self.update, AsyncUpdater) and v.grad is not None
        seq = v.seq
        v.seq += 1
        v.since = now
        try:
            t_w, grad = unpack_gradient(v.grad)
            new, reply = self.update.apply(g, t_w, grad)
        except ValueError:
            # a forged or corrupted push: skip it, keep collecting this worker's next one
            self.rejected += 1
            self.stats.dropped += 1
            self._schedule_collection(g, v, now)
            return self.tick(now)
        version = self.round + 1
        assert reply.t_ps == (version if reply.applied else self.round)
        self.pushes += 1
        rec = Applied(g, seq, t_w, version, reply.sigma, reply.sigma - 1, reply.kappa,
                      reply.scale, reply.applied)
        self.applied.append(rec)
        self.events.append(rec)
        out = self._publish(version, new, now) if reply.applied else []
        if self.pushes >= self.cfg.push_budget:
            self.done = True
            for view in self.workers.values():  # stop collecting: late gradients are dropped
                view.fetcher, view.collect_at = None, None
            return out
        self._schedule_collection(g, v, now)
        return out + self.tick(now)

    def _publish(self, version: int, new: bytes, now: float) -> list[bytes]:
        """Store, distribute (step 6) and announce parameters ``version``; answer held fetches."""
        self.params[version] = new
        self.published_at[version] = now
        for old in [k for k in self.params if k < version - self.cfg.keep_versions + 1]:
            del self.params[old]
            self.dist_segments.pop(old, None)
            for key in [k for k in self.fetch_cache if k[0] == old]:
                del self.fetch_cache[key]
        segs = segment(nn.distribute_name(self.cfg.ps, self.cfg.train, version), new,
                       self.cfg.seg_size)
        self.dist_segments[version] = segs
        self.stats.sent_data += len(segs)
        self.events.append(Published(version, new))
        out = list(segs)
        for key in [k for k in self.held_fetch if k[0] == version]:
            del self.held_fetch[key]
            wire = self._fetch_data(*key)
            if wire is not None:
                out.append(wire)
        self.round = version
        return out
