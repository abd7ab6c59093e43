"""The PS and GPU state machines of SPEC §6 steps 1-9 (sync and async modes), free of I/O.

Each node has one face (its link to the first router).  Every entry point takes ``now``
(seconds, any monotone clock) and returns the NDN wires to send on that face; :meth:`tick`
fires timers, :meth:`next_timer` says when it next needs to be called, and ``events`` collects
what the application must act on.  Names are those of ``workers.ndn.names``.

Rounds and versions
    Parameters version 0 are the model initialization (step 3).  Round r (0 <= r < n_rounds):
    every GPU trains from version r and produces a gradient; the PS collects the gradients of
    version r (step 5), computes version r+1 with the injected ``update`` function and
    distributes it (step 6).  After version ``n_rounds`` arrives a GPU unsubscribes (step 8).

PS (``PsNode``)
    step 2  sends ``/<gpu>/<ps>/<train>`` to every GPU, re-expressed every ``rto_s`` until the
            GPU's Data (``accept`` / ``decline``) arrives; declined GPUs are left out.
    step 3  answers ``/<ps>/<train>/<gpu>/seg=i`` with segment i of the initial parameters.
    step 4  answers every ``/insert/<ps>/<train>`` with an empty ``/distribute/<ps>/<train>``.
    step 5  for each accepted GPU, at the estimated completion time, expresses one Interest per
            gradient segment ``/<gpu>/<ps>/<train>/v=r/seg=i`` (the segment count follows from the
            known gradient size and the shared segment size).  Missing segments are
            re-expressed (new nonce) ``rto_s`` after the GPU's first segment arrived, or when
            the Interest lifetime ran out.
            Completion-time estimator  [decision]: per GPU, d_g = EWMA (weight ``ewma_alpha``)
            of the observed round durations  obs = t(first gradient segment of round r arrives)
            - t(version r published).  Round r >= 1's Interests are sent at
            t(version r published) + (1 - lead_fraction) * d_g; rounds without an estimate
            (round 0, first observation) send at once.  An early Interest is simply held by the
            GPU until its gradient is ready (within the Interest lifetime), so the observation
            is then the true ready time plus one-way delay; a late one makes obs an
            overestimate (send time + RTT), which the lead term bounds: if the GPU needs d
            and d_g > d/(1-lead), the next send is late and d_g shrinks geometrically toward
            about d/(1-lead), so the Interest arrives shortly before the gradient is ready.
    step 6  when all accepted GPUs' gradients of version r are complete, publishes version r+1
            as Data ``/distribute/<ps>/<train>/v=r+1/seg=i`` (routers multicast them along the
            persistent PIT); the last ``keep_versions`` versions are kept for active fetches.
    step 9  answers ``/<ps>/<train>/v=n/seg=i`` from the kept versions; an Interest for a
            version not yet published is held until it is (or its lifetime ends).

GPU (``GpuNode``)
    step 2  answers a task Interest with ``accept`` (or ``decline`` when configured).
    step 3  fetches ``/<ps>/<train>/<me>`` (segment 0 first; the rest once FinalBlockId is
            known), re-expressing missing segments after ``rto_s``.
    step 4  sends ``/insert/<ps>/<train>`` and re-sends it every ``rto_s`` until the
            confirmation ``/distribute/<ps>/<train>`` arrives; then emits ``Train(0, params)``.
    step 5  the application calls :meth:`GpuNode.gradient_ready`; collection Interests are
            answered immediately if the gradient is ready, otherwise held until it is.  When
            every segment of the gradient has been sent once, the probe timer starts.
            Probe timeout  [decision]: from the history H of the last ``probe_history``
            intervals "last gradient segment sent -> distribution complete" (only versions
            completed by multicast alone, even if the timer fired first: a recovered version's
            interval measures the timer itself and would feed back into it, while leaving out
            the spurious expiries would keep a too short timeout for ever), timeout =
            clamp(mean(H) + probe_k * std(H), probe_min_s, probe_max_s) (population std);
            with fewer than 2 samples it is ``probe_initial_s``.  In sync mode the interval
            contains the wait for the slowest GPU, so the spread term matters; k = 4 makes a
            spurious expiry rare (and harmless: it only causes an early fetch).
    step 6/7 distribution segments (multicast, or fetched) are reassembled; a complete version
            emits ``Train(v, params)`` (or ``Finished`` for the last one).
    step 8  after the last version: ``/delete/<ps>/<train>`` (sent ``delete_repeats`` times
            with distinct nonces, since nothing acknowledges it).
    step 9  on probe expiry: fetches the missing segments of the awaited version with normal
            Interests ``/<ps>/<train>/v=n/seg=i`` (re-expressed after ``rto_s``).  A version
            completed with at least one fetched segment counts as a *recovery*.

Async mode (``mode="async"`` in PsConfig and GpuConfig; SPEC §6 with the PS of SPEC §5)
    The PS does not wait for every GPU: each complete gradient is pushed on its own into
    :class:`AsyncUpdater` (``workers.async_ps.core.AsyncPS`` and its policies), and every C-th push
    (soft synchronization, SPEC §5; C = 1: every push) makes a new version, published at once
    on ``/distribute/<ps>/<train>/v=<version>`` (multicast along the persistent PIT to every
    subscriber, as in sync mode).  Version = the PS clock T_ps = soft-sync batches applied so
    far; the run ends after ``budget`` pushes (default n_rounds x GPUs, a multiple of C), so the
    last version is ``budget / C``.
    Names  [decision]: the collection Interest is ``/<gpu>/<ps>/<train>/v=<k>`` with k the
            GPU's *push sequence number* (0, 1, 2, ... per GPU), not a global round: the PS
            cannot know which version a GPU trained from, only that it wants that GPU's next
            gradient.  It stays PS-timed (step 5): push k+1 is requested at t(push k applied) +
            (1 - lead_fraction) * d_g, d_g the EWMA of "push k applied -> first segment of push
            k+1 arrives" -- the sync estimator with the round start replaced by the GPU's own
            previous push.  The gradient Data content is ``uint32 LE t_w`` (the version the
            gradient was computed from) followed by the gradient bytes.
    Staleness: the PS computes SPEC §5's sigma = T_ps - t_w + 1 at arrival (>= 1; 1 = no update
            since t_w) and reports ``staleness = sigma - 1 = current version - gradient's
            version`` (0 = fresh).  The policy scale is AsyncPS's: eta (async), eta/sigma,
            eta/kappa with kappa the mean of sigma and the GPU's previous N-1 sigmas; the PS
            keeps each GPU's window on its behalf (it computed every sample), which is exactly
            async_sgd's ``kappa_mode="ps"`` without carrying the window on the wire.
    GPU: trains from the newest complete version it holds.  After handing over gradient k
            (trained from t_w) it waits until every segment of it was sent (the PS collected
            it: a GPU never runs ahead of the PS's collection) and it holds a version > the
            newest it held at hand-over (the batch holding its push makes one); versions
            completed meanwhile only replace the newest.  [decision] With C > 1 a GPU thus
            waits for the batch its push is in: over NDN it learns the PS's state only from
            distributions, so it cannot tell "my push is pending" from "its version was
            lost" except by waiting; C <= GPUs keeps that from deadlocking (the waiting GPUs'
            pushes are the pending ones, so all waiting means C pushes are pending).  The
            probe timer (same history rule) and active fetch of the awaited version recover
            a lost distribution; the GPU finishes (and unsubscribes) when it holds the last
            version, even in the middle of a step.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from ndn.encoding import FormalName

from workers.async_ps.core import AsyncPS, Learner, Reply
from workers.ndn import names as nn
from workers.ndn.names import Kind
from workers.ndn.packets import (
    DEFAULT_SEG_SIZE,
    TLV_DATA,
    TLV_INTEREST,
    Data,
    Interest,
    PacketError,
    Reassembler,
    decode_data,
    decode_interest,
    encode_data,
    encode_interest,
    n_segments,
    packet_type,
    segment,
)

ACCEPT = b"accept"
DECLINE = b"decline"
MODES = ("sync", "async")
GRAD_HEADER = 4  # async: uint32 LE version the gradient was computed from, before the gradient


def pack_gradient(version: int, grad: bytes) -> bytes:
    """Async gradient Data content: the version it was trained from, then the gradient."""
    return version.to_bytes(GRAD_HEADER, "little") + grad


def unpack_gradient(payload: bytes) -> tuple[int, bytes]:
    """(t_w, gradient) of an async gradient; ValueError if too short for the header."""
    if len(payload) < GRAD_HEADER:
        raise ValueError(f"async gradient of {len(payload)} bytes has no version header")
    return int.from_bytes(payload[:GRAD_HEADER], "little"), payload[GRAD_HEADER:]


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: must be one of {', '.join(MODES)}")


# ============================================================================ events


@dataclass(frozen=True)
class Train:
    """GPU: start training from parameters ``version`` (call gradient_ready when done)."""

    version: int
    params: bytes


@dataclass(frozen=True)
class Finished:
    """GPU: the final parameters arrived; the GPU has unsubscribed."""

    version: int
    params: bytes


@dataclass(frozen=True)
class Applied:
    """PS, async: the push ``seq`` of ``gpu`` (computed from ``t_w``) went into ``version``
    (made it when ``applied``, the C-th push of its soft-sync batch).

    ``sigma`` = T_ps - t_w + 1 (SPEC §5), ``staleness`` = sigma - 1 = versions the gradient
    missed, ``kappa`` its window context, ``scale`` the learning rate it was applied with.
    """

    gpu: str
    seq: int
    t_w: int
    version: int
    sigma: int
    staleness: int
    kappa: float
    scale: float
    applied: bool = True


@dataclass(frozen=True)
class Published:
    """PS: parameters ``version`` were computed and distributed."""

    version: int
    params: bytes


# ============================================================================ fetcher


@dataclass
class Fetcher:
    """Consumer side of a segmented fetch of ``base/seg=i`` into ``reasm``.

    Segments are requested all at once when their count is known (else segment 0 first).
    Each outstanding segment has a deadline: ``wait_s`` after it was expressed, shortened to
    ``rto_s`` after any segment of this fetch arrives (the producer is answering, so a segment
    still missing then was lost).  Expired segments are re-expressed.  ``wait_s`` is the
    Interest lifetime for collection (the GPU may hold the Interest until its gradient is
    ready) and ``rto_s`` for content and active fetches (the PS answers at once, or holds a
    fetch of a version it has not published yet, which a re-expression simply renews).
    """

    base: FormalName
    reasm: Reassembler
    wait_s: float
    rto_s: float
    outstanding: dict[int, float] = field(default_factory=dict)
    retransmissions: int = 0
    first_arrival: float | None = None
    got: int = 0

    def request(self, now: float) -> list[int]:
        """Segments to express now (all missing ones not already outstanding)."""
        todo = [s for s in self.reasm.missing() if s not in self.outstanding]
        for s in todo:
            self.outstanding[s] = now + self.wait_s
        return todo

    def on_data(self, data: Data, now: float) -> tuple[bool, list[int]]:
        """Feed a segment; returns (was new, segments to express now)."""
        new = self.reasm.add_data(data)
        if not new:
            return False, []
        self.got += 1
        if self.first_arrival is None:
            self.first_arrival = now
        _base, seg = nn.split_segment(data.name)
        self.outstanding.pop(seg, None)
        cap = now + self.rto_s
        for s, dl in self.outstanding.items():
            if dl > cap:
                self.outstanding[s] = cap
        return True, ([] if self.reasm.complete else self.request(now))

    def due(self, now: float) -> list[int]:
        """Outstanding segments whose deadline passed: re-express them."""
        late = [s for s, dl in self.outstanding.items() if dl <= now]
        deadline = now + (self.rto_s if self.got else self.wait_s)
        for s in late:
            self.outstanding[s] = deadline
        self.retransmissions += len(late)
        return late

    def next_deadline(self) -> float | None:
        return min(self.outstanding.values(), default=None)


# ============================================================================ common


@dataclass
class NodeStats:
    """Counters of a protocol node."""

    sent_interests: int = 0
    sent_data: int = 0
    received: int = 0
    dropped: int = 0  # malformed, foreign or unexpected packets
    retransmissions: int = 0


class _Node:
    def __init__(self, me: str, role: str, lifetime_s: float, rto_s: float, seed: int) -> None:
        self.me = nn.check_id(me, role)
        self.role = role
        self.lifetime_s = lifetime_s
        self.rto_s = rto_s
        self.rng = random.Random(seed)
        self.stats = NodeStats()
        self.events: list[object] = []

    def pop_events(self) -> list[object]:
        ev, self.events = self.events, []
        return ev

    def interest(self, name: FormalName, lifetime_s: float | None = None) -> bytes:
        self.stats.sent_interests += 1
        ms = round(1000 * (self.lifetime_s if lifetime_s is None else lifetime_s))
        return encode_interest(name, self.rng.getrandbits(32), lifetime_ms=ms)

    def _decode(self, wire: bytes) -> Interest | Data | None:
        self.stats.received += 1
        try:
            typ = packet_type(wire)
            if typ == TLV_INTEREST:
                return decode_interest(wire)
            if typ == TLV_DATA:
                return decode_data(wire)
        except PacketError:
            pass
        self.stats.dropped += 1
        return None


# ============================================================================ PS


class AsyncUpdater:
    """The async PS's update (SPEC §5 through ``workers.async_ps.core``): one AsyncPS with
    soft-sync size C (a version per C pushes) and, per GPU, a ``Learner`` holding that GPU's
    staleness window.

    ``decode(bytes) -> np.ndarray`` turns a gradient's bytes into values (float32 by default);
    the parameters keep the dtype of ``params``.
    """

    def __init__(self, params: np.ndarray, gpus: list[str], lr: float, policy: str = "kappa",
                 window: int = 1,
                 decode: Callable[[bytes], np.ndarray] | None = None,
                 soft_sync: int = 1) -> None:
        if soft_sync > len(gpus):
            raise ValueError(f"async update: soft-sync size C = {soft_sync} needs at least C "
                             f"GPUs, got {len(gpus)}")
        self.ps = AsyncPS(params, lr, soft_sync, policy)
        self.learners = {g: Learner(i, window) for i, g in enumerate(gpus)}
        self.decode = decode or (lambda b: np.frombuffer(b, dtype=np.float32))

    def apply(self, gpu: str, t_w: int, grad: bytes) -> tuple[bytes, Reply]:
        """Apply one gradient computed from version ``t_w``; (new parameters, AsyncPS reply).

        ValueError (nothing changed) for an unknown GPU, a wrong size, non-finite values or a
        version from the future.
        """
        ln = self.learners.get(gpu)
        if ln is None:
            raise ValueError(f"async update: unknown GPU {gpu!r}")
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
    gpus: list[str]
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
    budget: int | None = None  # async: pushes applied in all (default n_rounds x GPUs)

    @property
    def push_budget(self) -> int:
        """Async: gradients applied in all (default n_rounds x GPUs)."""
        return self.budget if self.budget is not None else self.n_rounds * len(self.gpus)


@dataclass
class _GpuView:
    state: str = "assigning"  # assigning | accepted | declined
    next_task: float = 0.0
    estimate: float | None = None  # EWMA round duration d_g
    collect_at: float | None = None  # when to express this round's collection Interests
    fetcher: Fetcher | None = None
    grad: bytes | None = None
    seq: int = 0  # async: sequence number of the push being collected
    since: float | None = None  # async: when its previous push was applied


class PsNode(_Node):
    """The parameter server's side of SPEC §6 (see the module docstring).

    ``update``: sync mode, ``f(round, params, {gpu: gradient}) -> new params``; async mode, an
    :class:`AsyncUpdater`.
    """

    def __init__(self, cfg: PsConfig, init_params: bytes,
                 update: Callable[[int, bytes, dict[str, bytes]], bytes] | AsyncUpdater
                 ) -> None:
        super().__init__(cfg.ps, "ps", cfg.lifetime_s, cfg.rto_s, cfg.seed)
        nn.check_id(cfg.train, "train")
        if not cfg.gpus:
            raise ValueError("PS: no GPUs")
        if len(set(cfg.gpus)) != len(cfg.gpus):
            raise ValueError("PS: duplicate GPU names")
        for g in cfg.gpus:
            nn.check_id(g, "gpu")
        if cfg.n_rounds < 1:
            raise ValueError(f"PS: n_rounds {cfg.n_rounds} must be >= 1")
        _check_mode(cfg.mode)
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
        self.gpus = {g: _GpuView() for g in cfg.gpus}
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
        for v in self.gpus.values():
            v.next_task = now
        return self.tick(now)

    def next_timer(self) -> float | None:
        times: list[float] = []
        for v in self.gpus.values():
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
        for g, v in self.gpus.items():
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

    def _collect_interests(self, v: _GpuView, segs: list[int]) -> list[bytes]:
        assert v.fetcher is not None or not segs
        return [self.interest(nn.with_segment(v.fetcher.base, s)) for s in segs] \
            if v.fetcher else []

    def _schedule_collection(self, g: str, v: _GpuView, now: float) -> None:
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
        if p.kind is Kind.CONTENT and p.gpu in self.gpus:
            seg = p.segment or 0
            if seg >= len(self._content_parts):
                self.stats.dropped += 1
                return []
            name = nn.with_segment(nn.content_name(c.ps, c.train, p.gpu), seg)
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
        v = self.gpus.get(p.gpu or "")
        if v is None:
            self.stats.dropped += 1
            return []
        if p.kind is Kind.TASK:
            if v.state == "assigning":
                v.state = "accepted" if data.content == ACCEPT else "declined"
                if v.state == "accepted" and not self.done:
                    self._schedule_collection(p.gpu or "", v, now)
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
                    out += self._apply_push(p.gpu or "", v, now)
                else:
                    out += self._maybe_finish_round(now)
            return out
        self.stats.dropped += 1
        return []

    def _maybe_finish_round(self, now: float) -> list[bytes]:
        if self.done or any(v.state == "assigning" for v in self.gpus.values()):
            return []
        active = {g: v for g, v in self.gpus.items() if v.state == "accepted"}
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

    def _apply_push(self, g: str, v: _GpuView, now: float) -> list[bytes]:
        """Async: push the complete gradient of ``g`` at once; publish the new version when
        it completes a soft-sync batch; schedule the GPU's next push (or end the run when the
        budget is used up)."""
        assert isinstance(self.update, AsyncUpdater) and v.grad is not None
        seq = v.seq
        v.seq += 1
        v.since = now
        try:
            t_w, grad = unpack_gradient(v.grad)
            new, reply = self.update.apply(g, t_w, grad)
        except ValueError:
            # a forged or corrupted push: skip it, keep collecting this GPU's next one
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
            for view in self.gpus.values():  # stop collecting: late gradients are dropped
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


# ============================================================================ GPU


@dataclass
class GpuConfig:
    """GPU parameters (times in seconds)."""

    gpu: str
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


class GpuNode(_Node):
    """A GPU's side of SPEC §6, sync or async mode (see the module docstring)."""

    def __init__(self, cfg: GpuConfig) -> None:
        super().__init__(cfg.gpu, "gpu", cfg.lifetime_s, cfg.rto_s, cfg.seed)
        nn.check_id(cfg.ps, "ps")
        nn.check_id(cfg.train, "train")
        _check_mode(cfg.mode)
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

    def next_timer(self) -> float | None:
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
            raise ValueError(f"gpu {self.me}: gradient for version {version} while "
                             f"{self.state} on version {self.version}")
        c = self.cfg
        if self.asynchronous:
            # named by sequence number; the content says which version it was computed from
            number, payload, keep = self.seq, pack_gradient(version, grad), 4
            self.seq += 1
            self.want = self.newest + 1
        else:
            number, payload, keep = version, grad, 2
        self.grad_segments[number] = segment(nn.collect_name(c.gpu, c.ps, c.train, number),
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
        p = nn.parse_for(pkt.name, self.me, "gpu")
        c = self.cfg
        if p is None or p.ps != c.ps or p.train != c.train:
            self.stats.dropped += 1
            return []
        if isinstance(pkt, Interest):
            if p.kind is Kind.TASK and p.gpu == self.me:
                return self._on_task(now)
            if p.kind is Kind.COLLECT and p.gpu == self.me and p.version is not None:
                seg = p.segment or 0
                if p.version in self.grad_segments:
                    return self._grad_segment(p.version, seg, now)
                nxt = self.seq if self.asynchronous else max(self.version, 0)
                if p.version >= nxt and self.state not in ("done", "declined"):
                    # not computed yet (training, or not even started): hold it
                    self.held[(p.version, seg)] = now + (pkt.lifetime_ms or 4000) / 1000
                    return []
        else:
            if p.kind is Kind.CONTENT and p.gpu == self.me and self.content is not None:
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
        out = [self._answer(nn.task_name(c.gpu, c.ps, c.train), ACCEPT if c.accept else DECLINE)]
        if self.state == "idle":
            if not c.accept:
                self.state = "declined"
                return out
            self.state = "content"
            self.content = Fetcher(nn.content_name(c.ps, c.train, c.gpu), Reassembler(),
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
        the newest, and restarts training if the GPU was waiting for it (or an older one)."""
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
        # a GPU goes on only once its whole gradient went out (sent_at): were it to train ahead
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
