"""Seeded link impairment: exact behaviour at the extremes, rates and reproducibility."""

from __future__ import annotations

import pytest

from pyswitch.impairment import (
    ImpairmentSpec,
    ImpairmentSpecError,
    LinkImpairment,
    PortImpairments,
    parse_port_option,
    parse_spec,
)


def frames(n: int) -> list[bytes]:
    return [i.to_bytes(4, "big") for i in range(n)]


def run(imp: LinkImpairment, seq: list[bytes], t0: float = 0.0, dt: float = 0.001):
    out: list[tuple[float, bytes]] = []
    for i, f in enumerate(seq):
        out += imp.offer(f, t0 + i * dt)
    out += imp.expire(1e9)
    return out


def test_no_impairment_passes_everything_in_order_without_delay():
    imp = LinkImpairment(ImpairmentSpec())
    out = run(imp, frames(100))
    assert [f for _, f in out] == frames(100)
    assert [t for t, _ in out] == [i * 0.001 for i in range(100)]
    assert imp.counters.emitted == 100 and imp.counters.dropped == 0


def test_full_loss_drops_all_and_counts():
    imp = LinkImpairment(ImpairmentSpec(loss=1.0))
    assert run(imp, frames(50)) == []
    assert imp.counters.dropped == 50 and imp.counters.offered == 50


def test_full_duplication_doubles_each_frame_adjacently():
    imp = LinkImpairment(ImpairmentSpec(dup=1.0))
    out = [f for _, f in run(imp, frames(5))]
    assert out == [f for f in frames(5) for _ in range(2)]
    assert imp.counters.duplicated == 5


def test_full_reorder_swaps_pairs():
    imp = LinkImpairment(ImpairmentSpec(reorder=1.0))
    out = [int.from_bytes(f, "big") for _, f in run(imp, frames(6))]
    assert out == [1, 0, 3, 2, 5, 4]


def test_held_frame_released_after_hold_time_alone():
    imp = LinkImpairment(ImpairmentSpec(reorder=1.0, reorder_hold_ms=5))
    assert imp.offer(b"a", 10.0) == []
    assert imp.next_deadline() == pytest.approx(10.005)
    assert imp.expire(10.004) == []
    assert imp.expire(10.006) == [(pytest.approx(10.005), b"a")]
    assert imp.next_deadline() is None


def test_constant_delay_shifts_release_times_and_keeps_order():
    imp = LinkImpairment(ImpairmentSpec(delay_ms=3))
    out = run(imp, frames(10))
    assert [f for _, f in out] == frames(10)
    assert [t for t, _ in out] == pytest.approx([i * 0.001 + 0.003 for i in range(10)])
    assert imp.counters.delayed == 10


def test_rates_are_close_to_probabilities_and_seed_reproducible():
    spec = ImpairmentSpec(loss=0.1, dup=0.05, reorder=0.02, seed=7)
    a = LinkImpairment(spec)
    out_a = run(a, frames(20000))
    # binomial(20000, 0.1): sd ≈ 42; 5 sd bounds
    assert 2000 - 220 <= a.counters.dropped <= 2000 + 220
    kept = 20000 - a.counters.dropped
    assert abs(a.counters.duplicated - 0.05 * kept) < 5 * (0.05 * kept) ** 0.5 + 1
    assert len(out_a) == kept + a.counters.duplicated
    b = LinkImpairment(spec)
    assert run(b, frames(20000)) == out_a
    c = LinkImpairment(ImpairmentSpec(loss=0.1, dup=0.05, reorder=0.02, seed=8))
    assert run(c, frames(20000)) != out_a


def test_parse_spec_and_port_option():
    s = parse_spec("loss=0.02,dup=0.01,reorder=0.01,delay_ms=1,seed=7")
    assert (s.loss, s.dup, s.reorder, s.delay_ms, s.seed) == (0.02, 0.01, 0.01, 1.0, 7)
    assert parse_spec(s.to_text()) == s
    assert parse_port_option("3:loss=0.5") == (3, ImpairmentSpec(loss=0.5))
    assert parse_port_option("all:dir=out,dup=1")[0] is None
    assert parse_spec("loss=0.3", base=s).dup == 0.01
    assert parse_spec("none", base=s).is_noop


@pytest.mark.parametrize("bad", ["loss=2", "loss=x", "foo=1", "loss", "dir=up", "delay_ms=-1"])
def test_parse_spec_rejects_bad_input(bad):
    with pytest.raises(ImpairmentSpecError):
        parse_spec(bad)


def test_port_option_rejects_bad_port():
    with pytest.raises(ImpairmentSpecError, match="not a port"):
        parse_port_option("eth0:loss=0.1")


def test_port_impairments_directions():
    p = PortImpairments()
    p.set(1, ImpairmentSpec(loss=1.0, direction="out"))
    assert p.active(p.rx, 1) is None
    assert p.active(p.tx, 1) is not None
    p.set(1, ImpairmentSpec())
    assert p.active(p.tx, 1) is None
    snap = p.snapshot()
    assert snap["1"]["spec"]["loss"] == 0.0 and snap["1"]["tx"]["offered"] == 0


def test_named_ports_lose_independently_and_reproducibly():
    """The daemon's ports (named by their interfaces) each draw their own stream from the
    seed: with one stream every port dropped the same frame ordinals, and ECMP's even
    spread then lost the same chunk on many paths at once (issue 39)."""
    spec = ImpairmentSpec(loss=0.1, seed=3)

    def drops(p: PortImpairments, port: int) -> list[int]:
        imp = p.tx[port]
        return [i for i in range(2000) if not imp.offer(b"x", float(i))]

    a = PortImpairments(names={1: "edge0-eth1", 2: "edge0-eth2"})
    a.set(1, spec)
    a.set(2, spec)
    d1, d2 = drops(a, 1), drops(a, 2)
    assert 150 < len(d1) < 250 and 150 < len(d2) < 250
    assert len(set(d1) & set(d2)) < 60  # independent: about 10 % of 200 in common
    assert a.rx[1].spec.seed != a.tx[1].spec.seed != spec.seed
    assert a.snapshot()["1"]["spec"]["seed"] == 3  # what was asked for, as given
    b = PortImpairments(names={1: "edge0-eth1", 2: "edge0-eth2"})
    b.set(1, spec)
    assert drops(b, 1) == d1  # the same seed: the same run
    plain = PortImpairments()  # no names: the spec's own seed, as before
    plain.set(1, spec)
    plain.set(2, spec)
    assert drops(plain, 1) == drops(plain, 2)
