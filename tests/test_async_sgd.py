"""Staleness-aware async PS (docs/design.md §5): staleness, sliding-window context, soft sync and the three
policies, checked against hand-traced numbers."""

from __future__ import annotations

import numpy as np
import pytest

from workers.async_ps.core import (
    AsyncPS,
    Push,
    Worker,
    run_virtual_time,
    staleness,
    staleness_context,
)

# Scripted pushes with C = 1 (every push is an update).  Hand trace, T = PS clock:
#   1 A: T_w=0, T=0 -> sigma 1, T=1      6 B: T_w=5, T=5 -> sigma 1, T=6
#   2 A: T_w=1, T=1 -> sigma 1, T=2      7 A: T_w=4, T=6 -> sigma 3, T=7
#   3 B: T_w=0, T=2 -> sigma 3, T=3      8 A: T_w=7, T=7 -> sigma 1, T=8
#   4 A: T_w=2, T=3 -> sigma 2, T=4      9 B: T_w=6, T=8 -> sigma 3, T=9
#   5 B: T_w=3, T=4 -> sigma 2, T=5
SCRIPT = "AABABBAAB"
SIGMA_A = [1, 1, 2, 3, 1]
SIGMA_B = [3, 2, 1, 3]


def _run_script(window_a: int, window_b: int, mode_b: str = "ps") -> tuple[Worker, Worker]:
    ps = AsyncPS(np.zeros(2), lr=0.1, soft_sync=1, policy="kappa")
    a, b = Worker(0, window=window_a), Worker(1, window=window_b, kappa_mode=mode_b)
    for ln in (a, b):
        ln.adopt(*ps.pull())
    for who in SCRIPT:
        ln = a if who == "A" else b
        ln.on_reply(ps.push(ln.make_push(np.ones(2))))
    assert ps.t_ps == len(SCRIPT)
    return a, b


def test_staleness_formula() -> None:
    assert staleness(0, 0) == 1
    assert staleness(7, 4) == 4
    with pytest.raises(ValueError, match="T_w=5 must be in 0..T_ps=4"):
        staleness(4, 5)
    assert staleness_context(3, []) == 3
    assert staleness_context(1, [2, 3]) == 2


def test_staleness_hand_trace_window_1_is_sigma() -> None:
    a, b = _run_script(window_a=1, window_b=1)
    assert a.staleness_log == SIGMA_A
    assert b.staleness_log == SIGMA_B
    assert a.kappa_log == SIGMA_A  # N = 1: kappa = sigma
    assert b.kappa_log == SIGMA_B
    assert a.t_w == 8 and b.t_w == 9


def test_window_not_full_then_sliding() -> None:
    a, b = _run_script(window_a=2, window_b=3)
    # A, N=2: 1; (1+1)/2; (2+1)/2; (3+2)/2; (1+3)/2
    assert a.kappa_log == [1.0, 1.0, 1.5, 2.5, 2.0]
    # B, N=3: 3 (empty window); (2+3)/2 (window not full); (1+3+2)/3; then the oldest (3) drops:
    # (3+2+1)/3 = 2, not the all-history mean (3+2+1+3)/4 = 2.25
    assert b.kappa_log == [3.0, 2.5, 2.0, 2.0]
    assert b.previous == (1, 3)


def test_learner_estimated_kappa_alternative() -> None:
    """kappa_mode="learner": the push carries the mean of the last N known samples (lagged)."""
    _, b = _run_script(window_a=1, window_b=2, mode_b="learner")
    assert b.staleness_log == SIGMA_B  # sigma itself is still exact (computed by the PS)
    # 1.0 (nothing known), then mean of last 2 known sigmas: [3], [3,2], [2,1]
    assert b.kappa_log == [1.0, 3.0, 2.5, 1.5]


@pytest.mark.parametrize("C", [1, 2])
def test_always_fresh_worker(C: int) -> None:
    ps = AsyncPS(np.array([1.0, 2.0]), lr=0.25, soft_sync=C, policy="kappa")
    ref = AsyncPS(np.array([1.0, 2.0]), lr=0.25, soft_sync=C, policy="async")
    ln, lr_ = Worker(0, window=4), Worker(0, window=4)
    w = ln.adopt(*ps.pull())
    lr_.adopt(*ref.pull())
    for _ in range(10):
        g = w - 3.0
        w = ln.on_reply(ps.push(ln.make_push(g)))
        lr_.on_reply(ref.push(lr_.make_push(g)))
    assert ln.staleness_log == [1] * 10
    assert ln.kappa_log == [1.0] * 10
    assert ps.t_ps == 10 // C
    # kappa = 1 everywhere: the staleness-aware rule is plain SGD
    np.testing.assert_array_equal(ps.params, ref.params)


# Soft sync, C = 2, eta = 0.6, W0 = [1, -2].  Four pushes (built by hand, windows given):
#   p1 worker 0, T_w=0, prev (3,)  g=[1, 2]   sigma 1, kappa (1+3)/2 = 2
#   p2 worker 1, T_w=0, prev ()    g=[4,-2]   sigma 1, kappa 1          -> update, T=1
#   p3 worker 0, T_w=0, prev (3,1) g=[2, 2]   sigma 2, kappa (2+3+1)/3 = 2
#   p4 worker 2, T_w=1, prev ()    g=[-1,0]   sigma 1, kappa 1          -> update, T=2
PUSHES = [
    Push(0, np.array([1.0, 2.0]), 0, (3,)),
    Push(1, np.array([4.0, -2.0]), 0, ()),
    Push(0, np.array([2.0, 2.0]), 0, (3, 1)),
    Push(2, np.array([-1.0, 0.0]), 1, ()),
]
# kappa: W1 = W0 - 1/2 (0.6/2 [1,2] + 0.6 [4,-2]) = [1,-2] - [1.35,-0.3] = [-0.35,-1.7]
#        W2 = W1 - 1/2 (0.6/2 [2,2] + 0.6 [-1,0]) = W1 - [0, 0.3]        = [-0.35,-2.0]
# sigma: W1 = W0 - 1/2 (0.6 [1,2] + 0.6 [4,-2])   = [1,-2] - [1.5, 0]    = [-0.5, -2.0]
#        W2 = W1 - 1/2 (0.6/2 [2,2] + 0.6 [-1,0]) = W1 - [0, 0.3]        = [-0.5, -2.3]
# async: W1 as sigma                                                     = [-0.5, -2.0]
#        W2 = W1 - 1/2 (0.6 [2,2] + 0.6 [-1,0])   = W1 - [0.3, 0.6]      = [-0.8, -2.6]
EXPECTED = {
    "kappa": ([-0.35, -1.7], [-0.35, -2.0], [0.3, 0.6, 0.3, 0.6]),
    "sigma": ([-0.5, -2.0], [-0.5, -2.3], [0.6, 0.6, 0.3, 0.6]),
    "async": ([-0.5, -2.0], [-0.8, -2.6], [0.6, 0.6, 0.6, 0.6]),
}


@pytest.mark.parametrize("policy", ["kappa", "sigma", "async"])
def test_soft_sync_formula_and_policies(policy: str) -> None:
    w0 = np.array([1.0, -2.0])
    ps = AsyncPS(w0, lr=0.6, soft_sync=2, policy=policy)
    w1, w2, scales = EXPECTED[policy]
    r1 = ps.push(PUSHES[0])
    # not the C-th push: no update yet, reply carries the unchanged parameters
    assert not r1.applied and r1.t_ps == 0 and ps.pending == 1
    np.testing.assert_array_equal(r1.params, w0)
    r2 = ps.push(PUSHES[1])
    # the completing push gets the parameters after the update and the new clock
    assert r2.applied and r2.t_ps == 1 and ps.pending == 0
    np.testing.assert_allclose(r2.params, w1, rtol=0, atol=1e-12)
    r3 = ps.push(PUSHES[2])
    assert not r3.applied and r3.t_ps == 1
    np.testing.assert_allclose(r3.params, w1, rtol=0, atol=1e-12)
    r4 = ps.push(PUSHES[3])
    assert r4.applied and r4.t_ps == 2
    np.testing.assert_allclose(ps.params, w2, rtol=0, atol=1e-12)
    assert [r.sigma for r in (r1, r2, r3, r4)] == [1, 1, 2, 1]
    assert [r.kappa for r in (r1, r2, r3, r4)] == [2.0, 1.0, 2.0, 1.0]
    assert [r.scale for r in (r1, r2, r3, r4)] == pytest.approx(scales, abs=1e-15)


def test_soft_sync_counts_gradients_not_distinct_workers() -> None:
    """C = 3: a fast worker's two pushes both count.  W = 0 - 1/3 (1 [3] + 1 [6] + 1 [-3])."""
    ps = AsyncPS(np.zeros(1), lr=1.0, soft_sync=3, policy="async")
    assert not ps.push(Push(0, np.array([3.0]), 0)).applied
    assert not ps.push(Push(0, np.array([6.0]), 0)).applied
    r = ps.push(Push(1, np.array([-3.0]), 0))
    assert r.applied and r.t_ps == 1
    np.testing.assert_allclose(r.params, [-2.0])


def test_learner_supplied_kappa_is_used_by_ps() -> None:
    ps = AsyncPS(np.array([0.0]), lr=1.0, policy="kappa")
    r = ps.push(Push(0, np.array([4.0]), 0, (), kappa=4.0))
    assert r.sigma == 1 and r.kappa == 4.0
    np.testing.assert_allclose(r.params, [-1.0])


def test_fast_and_slow_worker_virtual_time() -> None:
    """Worker 0 computes in 1 time unit, worker 1 in 4; C = 1.  Hand trace: worker 0 pushes at
    t = 1..4 (T -> 4), worker 1 at t = 4 with T_w = 0 -> sigma 5 (T -> 5); worker 0 at t = 5 has
    T_w = 4 -> sigma 2; at t = 8 worker 0 pushes first (T -> 9), worker 1 has T_w = 5 -> 5."""
    ps = AsyncPS(np.zeros(3), lr=0.5, soft_sync=1, policy="kappa")
    fast, slow = Worker(0, window=2), Worker(1, window=2)
    trace = run_virtual_time(ps, [fast, slow], [1.0, 4.0], lambda i, w, k: w - 1.0, 10)
    assert [(r.time, r.worker) for r in trace] == [
        (1, 0), (2, 0), (3, 0), (4, 0), (4, 1), (5, 0), (6, 0), (7, 0), (8, 0), (8, 1)]
    assert fast.staleness_log == [1, 1, 1, 1, 2, 1, 1, 1]
    assert slow.staleness_log == [5, 5]
    assert min(slow.staleness_log) > 1
    assert slow.kappa_log == [5.0, 5.0]
    slow_scales = [r.scale for r in trace if r.worker == 1]
    assert slow_scales == [0.1, 0.1]  # eta / kappa = 0.5 / 5
    assert ps.t_ps == 10


@pytest.mark.parametrize("policy", ["async", "sigma", "kappa"])
def test_stale_workers_still_converge_on_a_quadratic(policy: str) -> None:
    """f(W) = |W - w*|^2 / 2 with 3 fast and 1 slow (5x) workers: every policy reaches w*."""
    target = np.array([1.0, -2.0, 0.5])
    ps = AsyncPS(np.zeros(3), lr=0.2, soft_sync=2, policy=policy)
    workers = [Worker(i, window=3) for i in range(4)]
    run_virtual_time(ps, workers, [1.0, 1.0, 1.0, 5.0], lambda i, w, k: w - target, 400)
    assert np.linalg.norm(ps.params - target) < 1e-6
    assert max(workers[3].staleness_log) > 1


def test_rejects_bad_pushes_without_changing_state() -> None:
    ps = AsyncPS(np.zeros(2), lr=0.1, soft_sync=2)
    ps.push(Push(0, np.ones(2), 0))
    bad = [
        (Push(1, np.ones(3), 0), "gradient shape \\(3,\\)"),
        (Push(1, np.array([1.0, np.nan]), 0), "NaN or inf"),
        (Push(1, np.ones(2), 1), "T_w=1 must be in 0..T_ps=0"),
        (Push(1, np.ones(2), 0, (0,)), "samples must be integers >= 1"),
        (Push(1, np.ones(2), 0, (), kappa=0.5), "kappa must be >= 1"),
    ]
    for push, msg in bad:
        with pytest.raises(ValueError, match=msg):
            ps.push(push)
    assert ps.pending == 1 and ps.t_ps == 0 and ps.pushes == 1
    np.testing.assert_array_equal(ps.params, [0.0, 0.0])


def test_constructor_and_worker_errors() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        AsyncPS(np.zeros(1), lr=0.1, policy="mult")
    with pytest.raises(ValueError, match="C must be an integer >= 1"):
        AsyncPS(np.zeros(1), lr=0.1, soft_sync=0)
    with pytest.raises(ValueError, match="learning rate"):
        AsyncPS(np.zeros(1), lr=0.0)
    with pytest.raises(ValueError, match="window N must be"):
        Worker(0, window=0)
    ln = Worker(0)
    with pytest.raises(RuntimeError, match="before receiving parameters"):
        ln.make_push(np.zeros(1))
    ln.adopt(np.zeros(1), 0)
    ln.make_push(np.zeros(1))
    with pytest.raises(RuntimeError, match="unanswered"):
        ln.make_push(np.zeros(1))
    ln.cancel_push()
    ln.make_push(np.zeros(1))  # allowed again after the transport gave up on the first
