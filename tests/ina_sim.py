"""Test helper: an in-process, event-driven simulation of one INA job (no network, no P4).

N :class:`workers.ina.worker.WorkerRound` machines, a Python stand-in for the aggregation
switches, and :class:`workers.ina.ps.PsState`, connected by lossy, duplicating, reordering
links on a virtual clock.  The switch model is only a test fixture (the real switch is the P4
program in ``p4src/``); it follows the slot table of docs/protocol.md §5 (docs/design.md §3.7):

* slot = crc32(job:16 ++ round:32 ++ chunk:32) mod n_slots, ina.p4's index
  (:func:`sim_slot_index`); ``n_slots`` None = the configured count
  (:func:`workers.ina.constants.num_slots`: constants.p4 or INSYNC_INA_NUM_SLOTS, the one
  override path of docs/protocol.md §2); a slot holding an OLDER round of the same job is
  stale and counts as free;
* free slot: a first transmission claims it; a RETRANSMIT packet never claims, it goes on to
  the PS (agg_id 0, FALLBACK);
* slot holds another key (collision): on to the next aggregation point, FALLBACK (agg_id =
  s_d from another switch; the PS from s_d);
* slot holds the key, workers disjoint: join; complete when count == fan_in (at s_d: bitmap ==
  job mask) -> PARTIAL (flags 0) to the next point, slot kept until the RESULT;
* workers all already in the slot (duplicate): complete -> re-emit the stored PARTIAL flagged
  RETRANSMIT; incomplete and not RETRANSMIT -> drop; incomplete and RETRANSMIT -> per
  ``incomplete_dup``: "flush" (the P4 program: the slot's sums go to the PS as a PARTIAL
  flagged RETRANSMIT|INCOMPLETE, the packet itself is consumed), "raw" (the packet goes on to
  the PS instead), "flush+raw" (both);
* workers partly in the slot: on to the PS (agg_id 0, FALLBACK) -- adding would double count;
* RESULT: release the slot if it holds the key; s_d multicasts to every switch and worker.

With "flush" the network alone can deadlock a chunk: the PS may hold only overlapping sets,
e.g. {1,2,3} (re-emitted by one switch, bypassing s_d by partial overlap) and {1,4,5} (flushed
by s_d again and again), and no exact cover.  The workers' ``direct_after`` escape (raw to the
PS after a few retries) restores liveness; ``test_ina_sim`` shows both.
"""

from __future__ import annotations

import heapq
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from workers.ina.constants import (
    AGG_ID_PS,
    FLAG_FALLBACK,
    FLAG_INCOMPLETE,
    FLAG_RETRANSMIT,
    TYPE_PARTIAL,
    num_slots,
)
from workers.ina.messages import mask_of
from workers.ina.ps import PsState
from workers.ina.wire import InaPacket
from workers.ina.worker import WorkerRound, ps_only_schedule

S_D = 1  # the PS's ToR switch id


def sim_slot_index(key: tuple[int, int, int], n_slots: int) -> int:
    """ina.p4's slot of (job, round, chunk) in a table of ``n_slots`` (docs/protocol.md §2),
    so that a collision in the model is a collision on the switch with the same count."""
    return zlib.crc32(struct.pack("!HII", *key)) % n_slots


@dataclass
class Slot:
    key: tuple[int, int, int] | None = None
    values: np.ndarray | None = None
    bitmap: int = 0
    count: int = 0
    fan_in: int = 0
    complete: bool = False


@dataclass
class SwitchStats:
    aggregated: int = 0
    collisions: int = 0
    duplicates: int = 0
    releases: int = 0
    reemits: int = 0
    to_ps: int = 0


class SimSwitch:
    """Aggregation switch model (see module docstring)."""

    def __init__(self, sid: int, n_slots: int, job_mask: int, k: int,
                 incomplete_dup: str = "flush") -> None:
        if incomplete_dup not in ("flush", "raw", "flush+raw"):
            raise ValueError(incomplete_dup)
        self.sid, self.k, self.job_mask = sid, k, job_mask
        self.incomplete_dup = incomplete_dup
        self.slots = [Slot() for _ in range(n_slots)]
        self.stats = SwitchStats()

    def _slot(self, key: tuple[int, int, int]) -> Slot:
        return self.slots[sim_slot_index(key, len(self.slots))]

    def on_agg(self, p: InaPacket) -> list[tuple[str, InaPacket]]:
        """A GRAD/PARTIAL addressed to this switch -> list of (next hop, packet)."""
        st = self.stats
        key = (p.job_id, p.round, p.chunk_id)
        slot = self._slot(key)
        is_sd = self.sid == S_D
        rt = p.flags & FLAG_RETRANSMIT
        nxt = "ps" if is_sd else "sd"
        to_ps = ("ps", replace(p, agg_id=AGG_ID_PS, flags=p.flags | FLAG_FALLBACK))
        if slot.key is not None and slot.key != key and slot.key[0] == p.job_id \
                and slot.key[1] < p.round:
            slot.__init__()  # stale: an older round of this job
        if slot.key is None:
            if rt:  # a retransmission never claims
                st.to_ps += 1
                return [to_ps]
            slot.key, slot.values = key, np.zeros(self.k, dtype=np.int32)
        elif slot.key != key:  # collision
            st.collisions += 1
            return [(nxt, replace(p, agg_id=AGG_ID_PS if is_sd else S_D,
                                  flags=p.flags | FLAG_FALLBACK))]
        elif p.bitmap & slot.bitmap:
            st.duplicates += 1
            if p.bitmap & slot.bitmap != p.bitmap:  # partial overlap
                st.to_ps += 1
                return [to_ps]
            if self._complete(slot.bitmap, slot.count, p.fan_in):
                st.reemits += 1
                return [self._emit(slot, FLAG_RETRANSMIT, nxt)]
            if not rt:
                return []
            flush = self._emit(slot, FLAG_RETRANSMIT | FLAG_INCOMPLETE, "ps")
            if self.incomplete_dup == "flush":  # what p4src/ina.p4 does
                return [flush]
            if self.incomplete_dup == "flush+raw":
                return [flush, to_ps]
            return [to_ps]  # "raw"
        st.aggregated += 1
        slot.values = (slot.values.astype(np.int64) + p.values).astype(np.int32)
        slot.bitmap |= p.bitmap
        slot.count += p.count
        if self._complete(slot.bitmap, slot.count, p.fan_in):
            return [self._emit(slot, 0, nxt)]
        return []

    def _complete(self, bitmap: int, count: int, fan_in: int) -> bool:
        return bitmap == self.job_mask if self.sid == S_D else count == fan_in

    def _emit(self, slot: Slot, flags: int, dest: str) -> tuple[str, InaPacket]:
        job, rnd, chunk = slot.key
        pkt = InaPacket(msg_type=TYPE_PARTIAL, flags=flags, job_id=job, round=rnd,
                        chunk_id=chunk, agg_id=AGG_ID_PS if dest == "ps" else S_D,
                        fan_in=slot.fan_in, count=slot.count, worker_id=0, bitmap=slot.bitmap,
                        values=slot.values.copy())
        return (dest, pkt)

    def on_result(self, p: InaPacket) -> None:
        slot = self._slot((p.job_id, p.round, p.chunk_id))
        if slot.key == (p.job_id, p.round, p.chunk_id):
            slot.__init__()
            self.stats.releases += 1


@dataclass
class SimConfig:
    n_workers: int = 4
    n_chunks: int = 12
    k: int = 8
    rounds: int = 3
    mode: str = "ina"  # "ina" | "tor" | "ps"
    n_switches: int = 2  # aggregation switches besides s_d (ina mode)
    n_slots: int | None = 8  # None: the configured count (num_slots(), module docstring)
    loss: float = 0.0
    dup: float = 0.0
    jitter: float = 0.0  # mean extra delay per hop (exponential): reordering
    window: int = 4
    timeout: float = 20.0
    big_values: bool = False
    incomplete_dup: str = "flush"  # RETRANSMIT duplicate at an incomplete slot: see SimSwitch
    direct_after: int | None = 3  # worker's liveness escape (WorkerRound.direct_after)
    seed: int = 0
    max_time: float = 1e6
    job_id: int = 1


@dataclass
class SimResult:
    exact_all_rounds: bool
    rounds_done: int
    time: float
    retransmits: int
    direct: int  # retransmissions sent straight to the PS (worker liveness escape)
    ps: PsState
    switches: dict[int, SimSwitch]
    mismatches: list[tuple[int, int]] = field(default_factory=list)  # (round, worker)
    hops_lost: int = 0
    hops_duplicated: int = 0


def make_schedules(cfg: SimConfig, rng: np.random.Generator) -> list[list[tuple[int, int, int]]]:
    """Per worker (chunk, agg_id, fan_in): like a plan, chunks are cut among s_d and the other
    switches; for a chunk owned by switch s a random non-empty subset of workers sends to s
    (fan_in = its size) and the others to s_d."""
    if cfg.mode == "ps":
        return [ps_only_schedule(cfg.n_chunks) for _ in range(cfg.n_workers)]
    sched: list[list[tuple[int, int, int]]] = [[] for _ in range(cfg.n_workers)]
    owners = [S_D] + list(range(2, 2 + (cfg.n_switches if cfg.mode == "ina" else 0)))
    for c in range(cfg.n_chunks):
        s = owners[c % len(owners)]
        if s == S_D:
            for w in range(cfg.n_workers):
                sched[w].append((c, S_D, cfg.n_workers))
            continue
        members = [w for w in range(cfg.n_workers) if rng.random() < 0.7] or [0]
        for w in range(cfg.n_workers):
            sched[w].append((c, s, len(members)) if w in members else (c, S_D, cfg.n_workers))
    return sched


def run_sim(
    cfg: SimConfig,
    grad_source: Callable[[int], np.ndarray] | None = None,
    on_sum: Callable[[int, np.ndarray], None] | None = None,
) -> SimResult:
    """Simulate ``cfg.rounds`` rounds.  ``grad_source(r)`` gives the workers' int32 vectors of
    round r as an (n_workers, n_values) array (default: seeded random values); it is called
    when the first worker starts round r, after ``on_sum(r - 1, sum)`` was called with the
    first synchronized vector of round r - 1 -- so a caller can train a real model through it."""
    rng = np.random.default_rng(cfg.seed)
    n, k = cfg.n_workers, cfg.k
    mask = mask_of(range(n))
    lo, hi = (-(2**31), 2**31) if cfg.big_values else (-(2**20), 2**20)
    grads: dict[int, np.ndarray] = {}
    exact: dict[int, np.ndarray] = {}

    def grads_of(r: int) -> np.ndarray:
        if r not in grads:
            if grad_source is None:
                g = rng.integers(lo, hi, (n, cfg.n_chunks * k), dtype=np.int64)
            else:
                g = grad_source(r)
            grads[r] = np.asarray(g).astype(np.int32)
            exact[r] = grads[r].astype(np.int64).sum(axis=0).astype(np.int32)
        return grads[r]

    for r in range(cfg.rounds) if grad_source is None else ():
        grads_of(r)
    summed: set[int] = set()
    schedules = make_schedules(cfg, rng)
    switch_ids = [S_D] + list(range(2, 2 + cfg.n_switches))
    n_slots = cfg.n_slots if cfg.n_slots is not None else num_slots()
    switches = {s: SimSwitch(s, n_slots, mask, k, cfg.incomplete_dup)
                for s in switch_ids}
    ps = PsState(cfg.job_id, range(n), cfg.n_chunks, k)
    heap: list[tuple[float, int, str, object]] = []
    seq = 0
    lost = duplicated = 0

    def push(t: float, kind: str, arg: object) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, arg))

    def hop(now: float, dest: str, pkt: InaPacket) -> None:
        nonlocal lost, duplicated
        if rng.random() < cfg.loss:
            lost += 1
            return
        copies = 2 if rng.random() < cfg.dup else 1
        duplicated += copies - 1
        for _ in range(copies):
            delay = 1.0 + (rng.exponential(cfg.jitter) if cfg.jitter else 0.0)
            push(now + delay, dest, pkt)

    tick_at: dict[int, float] = {}

    def arm(w: int) -> None:
        """Keep exactly one pending timer event per worker, at its earliest deadline."""
        d = machines[w].next_deadline()
        if d is not None and (w not in tick_at or d < tick_at[w]):
            tick_at[w] = d
            push(d, "tick", w)

    def worker_send(now: float, pkts: list[InaPacket]) -> None:
        for p in pkts:
            # first hop: the switch named by agg_id (s_d's hop for agg_id 0 passes it through)
            hop(now, f"sw{p.agg_id}" if p.agg_id else "sd_fwd", p)

    machines: dict[int, WorkerRound] = {}
    round_of = [0] * n
    mismatches: list[tuple[int, int]] = []
    retransmits = direct = 0

    def begin(w: int, now: float) -> None:
        m = WorkerRound(job_id=cfg.job_id, worker_id=w, round_=round_of[w],
                        values=grads_of(round_of[w])[w], schedule=schedules[w], k=k,
                        window=cfg.window, timeout=cfg.timeout, backoff=1.5,
                        max_timeout=4 * cfg.timeout, direct_after=cfg.direct_after)
        machines[w] = m
        worker_send(now, m.start(now))
        arm(w)

    for w in range(n):
        begin(w, 0.0)
    finished = 0
    now = 0.0
    while heap and finished < n:
        now, _, kind, arg = heapq.heappop(heap)
        if now > cfg.max_time:
            break
        if kind == "tick":
            if tick_at.get(arg) != now:
                continue  # superseded by an earlier timer
            del tick_at[arg]
            m = machines[arg]
            before, before_direct = m.stats.retransmits, m.stats.direct
            worker_send(now, m.tick(now))
            retransmits += m.stats.retransmits - before
            direct += m.stats.direct - before_direct
            arm(arg)
        elif kind == "sd_fwd":  # agg_id 0 through s_d: plain forwarding
            hop(now, "ps", arg)
        elif kind.startswith("sw"):
            sw = switches[int(kind[2:])]
            for dest, p in sw.on_agg(arg):
                if dest == "ps" and sw.sid != S_D:
                    hop(now, "sd_fwd", p)
                else:
                    hop(now, "sw1" if dest == "sd" else "ps", p)
        elif kind == "ps":
            for res in ps.on_packet(arg).results:
                hop(now, "sd_res", res)
        elif kind == "sd_res":
            switches[S_D].on_result(arg)
            for s in switch_ids[1:]:
                hop(now, f"res{s}", arg)
            for w in range(n):
                hop(now, f"w{w}", arg)
        elif kind.startswith("res"):
            switches[int(kind[3:])].on_result(arg)
        elif kind.startswith("w"):
            w = int(kind[1:])
            m = machines[w]
            if m.done:
                continue
            worker_send(now, m.on_packet(arg, now))
            if m.done:
                if not np.array_equal(m.result_values(), exact[m.round]):
                    mismatches.append((m.round, w))
                if m.round not in summed:
                    summed.add(m.round)
                    if on_sum is not None:
                        on_sum(m.round, m.result_values())
                round_of[w] += 1
                if round_of[w] == cfg.rounds:
                    finished += 1
                else:
                    begin(w, now)
            else:
                arm(w)
    rounds_done = min(round_of)
    return SimResult(
        exact_all_rounds=finished == n and not mismatches
        and all(np.array_equal(ps.round_sum(r)[: len(exact[r])], exact[r])
                and not ps.round_sum(r)[len(exact[r]):].any()
                for r in range(max(0, cfg.rounds - ps.keep_done - 1), cfg.rounds)
                if ps.is_round_complete(r)),
        rounds_done=rounds_done, time=now, retransmits=retransmits, direct=direct, ps=ps,
        switches=switches, mismatches=mismatches, hops_lost=lost, hops_duplicated=duplicated,
    )
