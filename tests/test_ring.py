"""The host-only ring all-reduce (workers/ring/): its wire format, the pure per-round state
machine (exact int32 sums for every ring size and vector length, under loss, duplication and
reordering), its driver (held packets of a later round, late resends answered) and the
frames the simulated network carries."""

from __future__ import annotations

import random

import numpy as np
import pytest

from workers.ring.driver import RingDriver
from workers.ring.wire import (
    RING_UDP_PORT,
    TYPE_ACK,
    TYPE_DATA,
    RingDecodeError,
    RingPacket,
    decode,
    decode_frame,
    encode,
    frame,
)
from workers.ring.worker import NEXT, PREV, RingRound, ring_packets


def wrapped(vectors: list[np.ndarray]) -> np.ndarray:
    total = np.sum([v.astype(np.int64) for v in vectors], axis=0)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def run_ring(P: int, n: int, *, loss: float = 0.0, dup: float = 0.0, reorder: float = 0.0,
             seed: int = 0, rounds: int = 2, k: int = 5, window: int = 4
             ) -> tuple[list[list[RingRound]], list[np.ndarray]]:
    """P RingRounds per round on a lossy, duplicating, reordering virtual wire (rounds one
    after another); returns every round's machines and the wanted sums."""
    rng, R = np.random.default_rng(seed), random.Random(seed)
    done, wants = [], []
    for rd in range(rounds):
        vals = [rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
                for _ in range(P)]
        rs = [RingRound(1, r, P, rd, vals[r], k=k, window=window, timeout=1.0)
              for r in range(P)]
        q: list[tuple[float, int, int, RingPacket]] = []
        t, seq = 0.0, 0

        def emit(src: int, outs: list, now: float, q: list = q) -> None:
            nonlocal seq
            for d, p in outs:
                dst = (src + 1) % P if d == NEXT else (src - 1) % P
                if R.random() < loss:
                    continue
                p = decode(encode(p))  # every packet crosses the wire format
                delay = 0.01 + (R.random() * 0.5 if R.random() < reorder else 0.0)
                seq += 1
                q.append((now + delay, seq, dst, p))
                if R.random() < dup:
                    seq += 1
                    q.append((now + delay + R.random() * 0.3, seq, dst, p))
        for r in rs:
            emit(r.rank, r.start(t), t)
        steps = 0
        while not all(r.done for r in rs):
            steps += 1
            assert steps < 200_000, "no progress"
            deadlines = [d for r in rs if (d := r.next_deadline()) is not None]
            if q and (not deadlines or min(q)[0] <= min(deadlines)):
                q.sort()
                t, _, dst, p = q.pop(0)
                out = rs[dst].on_packet(p, t)
                assert out is not None
                emit(dst, out, t)
            else:
                t = min(deadlines)
                for r in rs:
                    emit(r.rank, r.tick(t), t)
        done.append(rs)
        wants.append(wrapped(vals))
    return done, wants


@pytest.mark.parametrize("P", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("n", [0, 1, 6, 23, 130])
def test_exact_sums_every_size(P: int, n: int) -> None:
    rounds, wants = run_ring(P, n)
    for rs, want in zip(rounds, wants, strict=True):
        for r in rs:
            assert np.array_equal(r.result(), want)
            assert r.stats.retransmits == 0 and r.stats.duplicates == 0


def test_traffic_is_the_rings() -> None:
    """A position sends 2(P-1) chunks of ~n/P values: ring_packets' count, no more."""
    rounds, _ = run_ring(5, 200, rounds=1)
    r0 = rounds[0][0]
    assert r0.stats.data_sent == ring_packets(200, 5, 5) == 2 * 4 * 8
    assert r0.stats.values_sent == 2 * 4 * 40  # 2(P-1)/P · n


@pytest.mark.parametrize("seed", range(4))
def test_exact_under_loss_duplication_reordering(seed: int) -> None:
    rounds, wants = run_ring(4, 97, loss=0.15, dup=0.2, reorder=0.3, seed=seed, rounds=3)
    retx = dups = 0
    for rs, want in zip(rounds, wants, strict=True):
        for r in rs:
            assert np.array_equal(r.result(), want)
            retx += r.stats.retransmits
            dups += r.stats.duplicates
    assert retx > 0 and dups > 0  # the faults happened and were recovered


def test_packets_of_other_rounds() -> None:
    rr = RingRound(1, 0, 3, 5, np.arange(9, dtype=np.int32), k=2)
    later = RingPacket(TYPE_DATA, 1, 6, 0, 0, np.ones(2, np.int32))
    assert rr.on_packet(later, 0.0) is None  # the caller holds it
    old = RingPacket(TYPE_DATA, 1, 4, 1, 0, np.ones(2, np.int32))
    assert rr.on_packet(old, 0.0) == [(PREV, RingPacket(TYPE_ACK, 1, 4, 1, 0))]
    assert rr.stats.stale == 1
    with pytest.raises(RuntimeError, match="incomplete"):
        rr.result()


def test_window_bounds_data_in_flight() -> None:
    rr = RingRound(1, 0, 2, 0, np.arange(100, dtype=np.int32), k=4, window=3)
    assert len(rr.start(0.0)) == 3
    assert rr.tick(0.1) == []  # not yet due
    again = rr.tick(0.31)
    assert len(again) == 3 and rr.stats.retransmits == 3
    assert rr.next_deadline() == pytest.approx(0.31 + 0.6)  # doubled


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="rank"):
        RingRound(1, 3, 3, 0, np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="window"):
        RingRound(1, 0, 3, 0, np.zeros(4, np.int32), window=0)


# -- wire ------------------------------------------------------------------------------------


def test_wire_round_trip_and_refusals() -> None:
    p = RingPacket(TYPE_DATA, 7, 2**32 - 1, 65535, 123456, np.array([-2**31, 0, 2**31 - 1],
                                                                     np.int32))
    q = decode(encode(p))
    assert q == p and np.array_equal(q.values, p.values)
    ack = RingPacket(TYPE_ACK, 1, 3, 4, 5)
    assert decode(encode(ack)) == ack
    for bad in (b"", b"RG", b"XX" + encode(ack)[2:], encode(p)[:-1],
                encode(ack)[:2] + bytes([9]) + encode(ack)[3:]):
        with pytest.raises(RingDecodeError):
            decode(bad)


def test_frame_is_ipv4_udp_to_the_ring_port() -> None:
    payload = encode(RingPacket(TYPE_DATA, 1, 0, 0, 0, np.arange(32, dtype=np.int32)))
    f = frame("00:00:00:00:00:01", "00:00:00:00:00:02", "10.0.0.1", "10.0.0.2", payload)
    assert len(f) == 14 + 20 + 8 + len(payload)
    assert f[12:14] == b"\x08\x00" and f[23] == 17
    assert int.from_bytes(f[36:38], "big") == RING_UDP_PORT
    from workers.ina.wire import decode_frame as ina_decode
    assert ina_decode(f) is None  # ina.p4's parser does not take it for INA: plain IPv4
    got = decode_frame(f)
    assert got is not None and np.array_equal(got.values, np.arange(32))
    assert decode_frame(f[:30]) is None


# -- driver ----------------------------------------------------------------------------------


class _Wire:
    """A ring of drivers on one virtual clock, every packet delivered after ``delay``."""

    def __init__(self, P: int, delay: float = 0.001, drop_acks: int = 0) -> None:
        self.now_t, self.events, self.P, self.delay = 0.0, [], P, delay
        self.seq, self.drop_acks, self.drivers = 0, drop_acks, []

    def at(self, t: float, fn) -> None:  # noqa: ANN001
        self.seq += 1
        self.events.append((t, self.seq, fn))

    def run(self) -> None:
        while self.events:
            self.events.sort(key=lambda e: e[:2])
            t, _, fn = self.events.pop(0)
            self.now_t = max(self.now_t, t)
            fn()


class _IO:
    def __init__(self, wire: _Wire, rank: int) -> None:
        self.w, self.rank, self.wake = wire, rank, None

    def now(self) -> float:
        return self.w.now_t

    def send(self, pkts, to: str) -> None:  # noqa: ANN001
        dst = (self.rank + (1 if to == NEXT else -1)) % self.w.P
        for p in pkts:
            if p.type == TYPE_ACK and self.w.drop_acks > 0:
                self.w.drop_acks -= 1
                continue
            self.w.at(self.w.now_t + self.w.delay,
                      lambda p=p: self.w.drivers[dst].on_packets([p]))

    def wake_at(self, t: float | None) -> None:
        self.wake = t
        if t is not None:
            self.w.at(t, lambda: self.w.drivers[self.rank].on_timer()
                      if self.wake == t else None)

    def later(self, delay: float, fn) -> None:  # noqa: ANN001
        self.w.at(self.w.now_t + delay, fn)


@pytest.mark.parametrize("drop_acks", [0, 5])
def test_driver_rounds_exact(drop_acks: int) -> None:
    """Four positions, three rounds, staggered starts (a later round's DATA arrives at a
    position still in the round before, and is held) and lost ACKs (late resends of a
    finished round answered)."""
    P, n, rounds = 4, 50, 3
    wire = _Wire(P, drop_acks=drop_acks)
    vecs = {(w, r): np.random.default_rng([w, r]).integers(-1000, 1000, n).astype(np.int32)
            for w in range(P) for r in range(rounds)}
    got: dict[int, list[np.ndarray]] = {}
    finished = []
    for rank in range(P):
        d = RingDriver(_IO(wire, rank), 1, rank, P, rounds, lambda r, w=rank: vecs[(w, r)],
                       lambda r, total, rec: got.setdefault(r, []).append(total), k=4,
                       window=2, timeout=0.05,
                       pause=(lambda rank=rank: 0.02 * rank),  # uneven compute times
                       on_finished=lambda rank=rank: finished.append(rank))
        wire.drivers.append(d)
    for rank, d in enumerate(wire.drivers):
        d.start(0.01 * (P - rank))
    wire.run()
    assert sorted(finished) == list(range(P))
    for r in range(rounds):
        want = wrapped([vecs[(w, r)] for w in range(P)])
        assert len(got[r]) == P and all(np.array_equal(x, want) for x in got[r])
    assert sum(d.held for d in wire.drivers) > 0  # a later round's DATA came early: held
    retx = sum(x["retransmits"] for d in wire.drivers for x in d.records)
    assert (retx > 0) == (drop_acks > 0)
