"""The slot-count override (docs/protocol.md §2): one value, ``INSYNC_INA_NUM_SLOTS``, reaches
``-D INA_NUM_SLOTS=N`` of the compile step and Python's slot index; with a tiny pool
(ina.p4 compiled with ``-D INA_NUM_SLOTS=4``, pyswitch in-process) colliding chunks fall back
unaggregated and every chunk's contributions still add up to the exact sum.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from functools import cache

import numpy as np
import pytest
from ina_harness import INA_P4, InaSwitch, PySwitchTarget, pyswitch_unavailable
from ina_sim import SimConfig, run_sim

from workers.ina import constants as C
from workers.ina.wire import Flag, InaPacket, MsgType

AGG, TOR = 5, 9
UPLINKS = [20, 21]
JOB, MCAST = 3, 1
SMALL = 4


def slot4(job: int, rnd: int, chunk: int) -> int:
    """ina.p4's slot index in a pool of SMALL slots (independent of workers.ina.wire)."""
    return zlib.crc32(struct.pack("!HII", job, rnd, chunk)) % SMALL


# ---------------------------------------------------------------- the override itself


def test_env_override_reaches_num_slots_and_compile_defines(monkeypatch) -> None:
    monkeypatch.delenv(C.SLOTS_ENV, raising=False)
    assert C.num_slots() == C.load_constants()["INA_NUM_SLOTS"] and C.compile_defines() == {}
    monkeypatch.setenv(C.SLOTS_ENV, "4")
    assert C.num_slots() == 4 and C.compile_defines() == {"INA_NUM_SLOTS": "4"}
    C.set_num_slots(16)
    assert C.num_slots() == 16
    C.set_num_slots(None)
    assert C.SLOTS_ENV not in os.environ


@pytest.mark.parametrize("bad", ["0", "-3", "x", str(C.MAX_NUM_SLOTS + 1)])
def test_bad_slot_counts_are_refused_with_the_variable_named(monkeypatch, bad) -> None:
    monkeypatch.setenv(C.SLOTS_ENV, bad)
    with pytest.raises(C.ConstantsError, match=C.SLOTS_ENV):
        C.num_slots()


def test_constants_p4_default_is_guarded_by_ifndef() -> None:
    text = C.CONSTANTS_P4.read_text()
    assert "#ifndef INA_NUM_SLOTS" in text


def test_run_option_slots_sets_the_override(monkeypatch) -> None:
    from controller.cli.main import UsageError, build_parser

    monkeypatch.setenv(C.SLOTS_ENV, "")  # restored after the test
    args = build_parser().parse_args(["run", "--slots", "8"])
    assert args.slots == 8 and C.num_slots() == 8
    with pytest.raises(UsageError, match="--slots"):
        build_parser().parse_args(["run", "--slots", "0"])


def test_compile_step_passes_the_override(monkeypatch, tmp_path) -> None:
    """controller/experiment/network.py compile_program: the P4Info's registers have N cells."""
    from controller.experiment.network import compile_program

    monkeypatch.setenv(C.SLOTS_ENV, str(SMALL))
    p4info, _config = compile_program("pyswitch", tmp_path)
    text = p4info.read_text()
    sizes = [int(s) for s in re.findall(
        r'registers \{.*?name: "MyIngress\.(?:slot_\w+|agg_v\d+)".*?size: (\d+)', text, re.S)]
    assert len(sizes) == C.K + 3 and set(sizes) == {SMALL}
    assert (tmp_path / "num_slots.txt").read_text().strip() == str(SMALL)


def test_sim_uses_the_configured_count(monkeypatch) -> None:
    monkeypatch.setenv(C.SLOTS_ENV, "2")
    r = run_sim(SimConfig(mode="ina", n_workers=4, n_chunks=12, rounds=2, n_slots=None, seed=3))
    assert all(len(s.slots) == 2 for s in r.switches.values())
    assert r.exact_all_rounds and sum(s.stats.collisions for s in r.switches.values()) > 0


# ---------------------------------------------------------------- ina.p4 with 4 slots


@cache
def _small_program():
    import pyswitch

    return pyswitch.compile_p4(str(INA_P4), defines={"INA_NUM_SLOTS": SMALL})


def SmallPoolTarget() -> PySwitchTarget:  # noqa: N802 - reads as the target it is
    """`ina_harness.Target` on ina.p4 compiled with -D INA_NUM_SLOTS=4, in-process."""
    return PySwitchTarget(_small_program())


@pytest.fixture
def small_agg() -> InaSwitch:
    why = pyswitch_unavailable()
    if why:
        pytest.skip(why)
    t = SmallPoolTarget()
    sw = InaSwitch(t, AGG).configure()
    sw.fabric(*UPLINKS)
    sw.job(JOB, [0, 1], is_ps_tor=False, tor_id=TOR, mcast_grp=MCAST, slot_size=SMALL)
    sw.route(TOR, UPLINKS)
    sw.route(0, UPLINKS)
    t.set_multicast_group(MCAST, [1, 2, 20])
    return sw


def test_small_pool_program_has_four_cells_per_register() -> None:
    if pyswitch_unavailable():
        pytest.skip(pyswitch_unavailable())
    info = _small_program().p4info
    # every slot register (ecmp_turn is per next-hop group, not per slot)
    assert {r.size for r in info.registers if r.preamble.name != "MyIngress.ecmp_turn"} == {SMALL}
    with pytest.raises(Exception):  # noqa: B017 - any out-of-range read error will do
        SmallPoolTarget().sw.register_read("MyIngress.slot_count", SMALL)


def _send(sw: InaSwitch, worker: int, chunk: int, values: np.ndarray, rnd: int = 0) -> list:
    pkt = InaPacket.grad(JOB, rnd, chunk, AGG, 2, worker, values)
    return sw.send(worker + 1, InaSwitch.frame(pkt, src_ip=f"10.0.1.{worker + 1}"))


def test_collisions_fall_back_and_every_chunk_sums_exactly(small_agg) -> None:
    """12 chunks in flight over 4 slots: the first chunk of each slot aggregates, the
    others fall back to s_d unchanged (FALLBACK); per chunk, what leaves the switch adds up
    to the exact sum over disjoint bitmaps that cover both workers."""
    sw, rng = small_agg, np.random.default_rng(4)
    chunks = list(range(100, 112))
    vals = {(w, c): rng.integers(-(2**30), 2**30, size=C.K) for w in (0, 1) for c in chunks}
    out: dict[int, list] = {c: [] for c in chunks}
    owner: dict[int, int] = {}
    for c in chunks:  # worker 0 first: every chunk is in flight before any completes
        owner.setdefault(slot4(JOB, 0, c), c)
        out[c] += _send(sw, 0, c, vals[(0, c)])
    for c in chunks:
        out[c] += _send(sw, 1, c, vals[(1, c)])
    collided = [c for c in chunks if owner[slot4(JOB, 0, c)] != c]
    assert len(set(owner)) <= SMALL and len(collided) >= len(chunks) - SMALL
    for c in chunks:
        exact = vals[(0, c)] + vals[(1, c)]
        got = out[c]
        if c in collided:
            assert [o.pkt.msg_type for o in got] == [MsgType.GRAD, MsgType.GRAD]
            assert all(o.pkt.flags & Flag.FALLBACK and o.pkt.agg_id == TOR for o in got)
        else:
            assert [(o.pkt.msg_type, o.pkt.count) for o in got] == [(MsgType.PARTIAL, 2)]
        bitmaps = [o.pkt.bitmap for o in got]
        assert sum(bitmaps) == 0b11 and bitmaps[0] & (bitmaps[-1] if len(got) > 1 else 0) == 0
        total = np.sum([o.values.astype(np.int64) for o in got], axis=0)
        assert total.tolist() == exact.tolist(), c
    counts = sw.counters("collision", "completed", "aggregated")
    assert counts == {"collision": 2 * len(collided), "completed": len(chunks) - len(collided),
                      "aggregated": 2 * (len(chunks) - len(collided))}


def test_result_frees_a_small_slot_for_the_next_chunk(small_agg) -> None:
    """Release then reuse: a chunk that collided in round 0 aggregates once the RESULT of the
    slot's owner went by, and the stale-round rule frees slots in the next round."""
    sw = small_agg
    a = next(c for c in range(1000) if slot4(JOB, 0, c) == 0)
    b = next(c for c in range(a + 1, 1000) if slot4(JOB, 0, c) == 0)
    v = np.arange(C.K, dtype=np.int64)
    assert _send(sw, 0, a, v) == []                        # a claims slot 0
    assert _send(sw, 0, b, v)[0].pkt.flags & Flag.FALLBACK  # b collides
    (part,) = _send(sw, 1, a, 2 * v)
    assert part.values.tolist() == (3 * v).tolist()
    res = InaPacket(MsgType.RESULT, 0, JOB, 0, a, 0, 0, 2, 0, 0b11, part.values)
    sw.send(20, InaSwitch.frame(res))                       # releases slot 0
    assert sw.counters("release")["release"] == 1
    c = next(c for c in range(b + 1, 2000) if slot4(JOB, 0, c) == 0)
    assert _send(sw, 0, c, v) == []
    (part_c,) = _send(sw, 1, c, -v)
    assert part_c.values.tolist() == [0] * C.K and part_c.pkt.msg_type == MsgType.PARTIAL

