"""End-to-end INA in one process (no network): worker and PS state machines plus a Python model
of the aggregation switches (tests/ina_sim.py), under seeded loss, duplication, reordering and
slot collisions.  Every worker's synchronized vector must equal the exact int32 sum, every round."""

from __future__ import annotations

import numpy as np
import pytest
from ina_sim import SimConfig, run_sim


@pytest.mark.parametrize("mode", ["ina", "tor", "ps"])
def test_lossless_is_exact_and_ps_traffic_matches_the_mode(mode):
    cfg = SimConfig(mode=mode, n_workers=5, n_chunks=16, rounds=3, n_slots=1024, seed=1)
    r = run_sim(cfg)
    assert r.exact_all_rounds and r.rounds_done == 3 and not r.mismatches
    st = r.ps.stats
    assert r.retransmits == 0 and st.fallbacks == 0 and st.duplicates == 0 and not r.ps.anomalies
    # packets into the PS per round: one full PARTIAL per chunk with aggregation,
    # every worker's packet of every chunk without
    per_round = cfg.n_chunks if mode != "ps" else cfg.n_workers * cfg.n_chunks
    assert st.packets == per_round * cfg.rounds
    assert st.results_sent == cfg.n_chunks * cfg.rounds and st.rounds_completed == 3
    if mode == "ina":
        assert sum(s.stats.aggregated for sid, s in r.switches.items() if sid != 1) > 0


@pytest.mark.parametrize("mode", ["ina", "tor", "ps"])
@pytest.mark.parametrize("seed", range(6))
def test_loss_duplication_reordering_keep_sums_exact(mode, seed):
    cfg = SimConfig(mode=mode, n_workers=6, n_chunks=12, rounds=3, n_switches=3, n_slots=16,
                    loss=0.05, dup=0.05, jitter=2.0, window=6, big_values=seed % 2 == 0,
                    seed=seed)
    r = run_sim(cfg)
    assert r.exact_all_rounds and not r.mismatches, r.mismatches
    assert r.hops_lost > 0 and r.hops_duplicated > 0 and r.retransmits > 0


def test_heavy_impairment_and_collisions_with_the_p4_rules():
    """The slot rules of p4src/ina.p4 ("flush") with a tiny slot table, 10% loss and
    duplication: exact every time, and the hard cases really happen."""
    totals = dict(fallbacks=0, overlaps=0, incomplete=0, superseded=0, direct=0, late=0)
    for seed in range(40):
        cfg = SimConfig(mode="ina", n_workers=6, n_chunks=12, rounds=3, n_switches=3,
                        n_slots=3, loss=0.1, dup=0.1, jitter=3.0, window=8,
                        big_values=seed % 2 == 0, seed=seed, incomplete_dup="flush",
                        direct_after=3)
        r = run_sim(cfg)
        assert r.exact_all_rounds and not r.mismatches, (seed, r.rounds_done, r.mismatches)
        for key in totals:
            totals[key] += r.direct if key == "direct" else getattr(r.ps.stats, key)
        assert sum(s.stats.collisions for s in r.switches.values()) > 0
    assert all(v > 0 for v in totals.values()), totals


def test_without_the_direct_escape_the_p4_rules_can_deadlock_but_never_lie():
    """Why WorkerRound.direct_after exists: with switches that flush incomplete slots instead
    of forwarding the retransmission, some chunks end with only overlapping sets at the PS.
    Those runs stall (no cover exists), but no worker ever applies a wrong sum."""
    stalled = 0
    for seed in range(60):  # stalls are rare per seed (6 of the first 80 today)
        cfg = SimConfig(mode="ina", n_workers=6, n_chunks=12, rounds=3, n_switches=3,
                        n_slots=3, loss=0.1, dup=0.1, jitter=3.0, window=8, seed=seed,
                        incomplete_dup="flush", direct_after=None, max_time=3e4)
        r = run_sim(cfg)
        assert not r.mismatches
        if not r.exact_all_rounds:
            stalled += 1
            assert r.ps.stats.overlaps > 0  # the overlapping sets that block the cover
        # the same seed with the escape enabled completes
        fixed = run_sim(SimConfig(**{**cfg.__dict__, "direct_after": 3}))
        assert fixed.exact_all_rounds
    assert stalled > 0


@pytest.mark.parametrize("policy", ["raw", "flush+raw"])
def test_switch_variants_that_forward_the_retransmission_are_live_without_escape(policy):
    for seed in range(15):
        cfg = SimConfig(mode="ina", n_workers=6, n_chunks=12, rounds=3, n_switches=3,
                        n_slots=3, loss=0.1, dup=0.1, jitter=3.0, window=8, seed=seed,
                        incomplete_dup=policy, direct_after=None)
        r = run_sim(cfg)
        assert r.exact_all_rounds and not r.mismatches


def test_training_through_lossy_ina_equals_the_quantized_reference_bit_for_bit():
    """A real model trained through the simulated network (5% loss, duplication, reordering,
    collisions): its parameters equal, bit for bit, those of the single-process run that sums
    the same quantized gradients exactly -- and its accuracy is the float reference's."""
    from workers.common.model import Replica, TrainConfig, train_synchronous
    from workers.common.quantize import choose_frac_bits, dequantize, quantize

    cfg = TrainConfig(model="mlp", hidden=16, n_workers=3, rounds=25, batch_size=16, seed=2)
    frac = choose_frac_bits(8.0, cfg.n_workers)
    replicas = [Replica(cfg, w) for w in range(cfg.n_workers)]
    n_values = replicas[0].model.n_params
    k = 32
    n_chunks = -(-n_values // k)

    def to_update(total: np.ndarray) -> np.ndarray:
        return dequantize(total, frac) / np.float32(cfg.n_workers)

    def grad_source(r: int) -> np.ndarray:
        return np.stack([quantize(rep.gradient(r)[1], frac, cfg.n_workers).values
                         for rep in replicas])

    def on_sum(r: int, total: np.ndarray) -> None:
        for rep in replicas:
            rep.apply(to_update(total))

    def int_sync(grads):
        q = [quantize(g, frac, cfg.n_workers).values.astype(np.int64) for g in grads]
        return to_update(np.sum(q, axis=0).astype(np.int32))

    sim = run_sim(SimConfig(mode="ina", n_workers=cfg.n_workers, n_chunks=n_chunks, k=k,
                            rounds=cfg.rounds, n_switches=2, n_slots=8, loss=0.05, dup=0.05,
                            jitter=2.0, seed=4), grad_source, on_sum)
    assert sim.exact_all_rounds and sim.retransmits > 0
    quantized_ref = train_synchronous(cfg, sync=int_sync)
    assert np.array_equal(replicas[0].params, quantized_ref.params)
    assert all(np.array_equal(rep.params, replicas[0].params) for rep in replicas)
    float_ref = train_synchronous(cfg)
    acc = replicas[0].test_accuracy()
    assert acc > 0.8 and abs(acc - float_ref.final_accuracy) <= 0.02
