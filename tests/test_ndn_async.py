"""Async mode of the NDN transport (workers.ndn.protocol with mode="async", docs/design.md §6 + §5):
two workers of different speeds on the direct-link harness of test_ndn_protocol, traced by hand.

Timeline (link delay 1 ms; both workers start training from version 0 at the same t0; g0 needs
0.1 s per gradient, g1 0.25 s; budget 6 pushes, so the last version is 6)::

    t0+0.10  g0 push 0 from v0: T_ps 0 -> sigma 1, staleness 0 -> v1; g0 waits for v1
    t0+0.20  g0 push 1 from v1: sigma 1                           -> v2
    t0+0.25  g1 push 0 from v0: T_ps 2 -> sigma 3, staleness 2    -> v3 (g1 holds v2, waits v3)
    t0+0.30  g0 push 2 from v2: sigma 2                           -> v4
    t0+0.40  g0 push 3 from v4: sigma 1                           -> v5
    t0+0.50  g1 push 1 from v3: T_ps 5 -> sigma 3                 -> v6 = last: both finish
"""

from __future__ import annotations

import numpy as np
import pytest
from ndn_sim import grad_fn
from test_ndn_protocol import DIM, PS, Direct, T, describe

from workers.ndn import names as nn
from workers.ndn.packets import decode_data, encode_data, encode_interest, segment
from workers.ndn.protocol import Applied, Finished, Train, pack_gradient, unpack_gradient
from workers.ndn.ps import AsyncUpdater, PsConfig, PsState
from workers.ndn.worker import WorkerConfig, WorkerState

LR = 0.1
SPEED = {"g0": 0.1, "g1": 0.25}
# (worker, seq, t_w, version, sigma, staleness, kappa with window 2) of the timeline above
TRACE = [("g0", 0, 0, 1, 1, 0, 1.0), ("g0", 1, 1, 2, 1, 0, 1.0), ("g1", 0, 0, 3, 3, 2, 3.0),
         ("g0", 2, 2, 4, 2, 1, 1.5), ("g0", 3, 4, 5, 1, 0, 1.5), ("g1", 1, 3, 6, 3, 2, 3.0)]


def async_direct(policy: str = "kappa", drop=lambda s, k, u: False,
                 probe_initial_s: float = 1.0, soft_sync: int = 1) -> Direct:
    names = list(SPEED)
    last = 6 // soft_sync  # the last version: one per soft-sync batch of the 6 pushes

    def make_ps(init: bytes) -> PsState:
        upd = AsyncUpdater(np.frombuffer(init, dtype=np.float32).copy(), names, LR, policy,
                           window=2, soft_sync=soft_sync)
        return PsState(PsConfig(PS, T, names, 3, grad_bytes=4 * DIM, mode="async", budget=6),
                       init, upd)

    workers = {g: WorkerConfig(g, PS, T, last, seed=i, mode="async",
                               probe_initial_s=probe_initial_s) for i, g in enumerate(names)}
    return Direct(workers, compute=lambda g, v: SPEED[g], n_rounds=last, drop=drop,
                  make_ps=make_ps)


def replay(d: Direct, scales: list[float]) -> dict[int, bytes]:
    """Every version by hand: w_v = w_{v-1} - float32(scale * float64(g)), g computed by the
    pushing worker at the parameters of the version it trained from (AsyncPS's arithmetic)."""
    w = {0: d.init}
    for (g, _seq, t_w, v, *_rest), scale in zip(TRACE, scales, strict=True):
        grad = np.frombuffer(grad_fn(d.index[g], t_w, w[t_w]), dtype=np.float32)
        prev = np.frombuffer(w[v - 1], dtype=np.float32)
        w[v] = (prev - (scale * grad.astype(np.float64)).astype(np.float32)).tobytes()
    return w


@pytest.mark.parametrize("policy", ["async", "sigma", "kappa"])
def test_versions_staleness_and_policy_scale_of_two_workers(policy: str) -> None:
    d = async_direct(policy)
    d.run()
    got = [(a.worker, a.seq, a.t_w, a.version, a.sigma, a.staleness, a.kappa) for a in d.ps.applied]
    assert got == TRACE
    expect_scale = {"async": [LR] * 6, "sigma": [LR / r[4] for r in TRACE],
                    "kappa": [LR / r[6] for r in TRACE]}[policy]
    assert [a.scale for a in d.ps.applied] == expect_scale  # exactly eta, eta/sigma, eta/kappa
    assert d.ps.done and d.ps.pushes == 6 and d.ps.rejected == 0
    w = replay(d, expect_scale)
    assert d.ps.params[6] == w[6]
    # every worker trained from the newest version it had and finished with the last one
    trained = {g: [ev.version for _t, ev in d.events[g] if isinstance(ev, Train)] for g in SPEED}
    assert trained == {"g0": [0, 1, 2, 4, 5], "g1": [0, 3]}
    for g in SPEED:
        fin = [ev for _t, ev in d.events[g] if isinstance(ev, Finished)]
        assert len(fin) == 1 and fin[0].version == 6 and fin[0].params == w[6]
        assert d.workers[g].recoveries == 0
    # applied events reach the application too, in order
    assert [ev.version for _t, ev in d.events[PS] if isinstance(ev, Applied)] == list(range(1, 7))
    # collection names carry the per-worker push sequence number; unsubscribed at the end
    collects = [(p.worker, p.version) for _t, src, k, _u, p in d.log
                if src == PS and k == "I" and p.kind is nn.Kind.COLLECT]
    assert [n for g, n in collects if g == "g1"][:2] == [0, 0]  # 3 segments of push 0 ...
    # g0's push 4 was asked for after v5, but g1's push used up the budget first
    assert sorted({(g, n) for g, n in collects}) == [("g0", 0), ("g0", 1), ("g0", 2),
                                                     ("g0", 3), ("g0", 4), ("g1", 0),
                                                     ("g1", 1)]
    deletes = [src for _t, src, _k, _u, p in d.log if p is not None and p.kind is nn.Kind.DELETE]
    assert sorted(set(deletes)) == ["g0", "g1"]


def test_soft_sync_publishes_a_version_per_c_pushes() -> None:
    """C = 2 (docs/design.md §5 soft sync) with the two workers: g0 (faster) pushes first and waits for
    the batch its push is in; g1's push completes it: v = v_prev - (1/2)(s g0 + s g1), both
    workers go on from it, so every push is fresh (sigma 1) and 6 pushes make versions 1..3."""
    d = async_direct("kappa", soft_sync=2)
    d.run()
    got = [(a.worker, a.seq, a.t_w, a.version, a.sigma, a.kappa, a.applied) for a in d.ps.applied]
    assert got == [("g0", 0, 0, 1, 1, 1.0, False), ("g1", 0, 0, 1, 1, 1.0, True),
                   ("g0", 1, 1, 2, 1, 1.0, False), ("g1", 1, 1, 2, 1, 1.0, True),
                   ("g0", 2, 2, 3, 1, 1.0, False), ("g1", 2, 2, 3, 1, 1.0, True)]
    assert d.ps.done and d.ps.pushes == 6 and sorted(d.ps.params) == [0, 1, 2, 3]
    w = {0: d.init}
    for v in (1, 2, 3):  # AsyncPS's arithmetic: float64 accumulation, mean over C, to float32
        acc = sum(LR * np.frombuffer(grad_fn(d.index[g], v - 1, w[v - 1]),
                                     dtype=np.float32).astype(np.float64) for g in SPEED)
        prev = np.frombuffer(w[v - 1], dtype=np.float32)
        w[v] = (prev - (acc / 2).astype(np.float32)).tobytes()
    assert d.ps.params[3] == w[3]
    trained = {g: [ev.version for _t, ev in d.events[g] if isinstance(ev, Train)] for g in SPEED}
    assert trained == {"g0": [0, 1, 2], "g1": [0, 1, 2]}
    for g in SPEED:
        (fin,) = [ev for _t, ev in d.events[g] if isinstance(ev, Finished)]
        assert fin.version == 3 and fin.params == w[3]
    # g0 waited for g1's push each time: it resumed only when the batch's version arrived
    g0_train = [t for t, ev in d.events["g0"] if isinstance(ev, Train)]
    # g0's first gradient was ready 0.1 s after the start, v1 needs g1's (ready after 0.25 s)
    assert g0_train[1] - g0_train[0] > SPEED["g1"]


def test_soft_sync_needs_c_workers_and_a_budget_it_divides() -> None:
    init = np.zeros(DIM, dtype=np.float32)
    with pytest.raises(ValueError, match="needs at least C workers"):
        AsyncUpdater(init, ["g0", "g1"], LR, soft_sync=3)
    upd = AsyncUpdater(init, ["g0", "g1"], LR, soft_sync=2)
    with pytest.raises(ValueError, match="multiple of the soft-sync size 2"):
        PsState(PsConfig(PS, T, ["g0", "g1"], 3, grad_bytes=4 * DIM, mode="async", budget=5),
                init.tobytes(), upd)


def test_collection_timed_from_the_workers_previous_push() -> None:
    """Push k+1's Interests leave at t(push k applied) + 0.75 * EWMA("push applied -> first
    segment of the next push"): g0's push 2 is asked for before it is ready and held."""
    d = async_direct()
    d.run()
    first: dict[tuple[str, int], float] = {}  # first collection Interest of (worker, seq)
    for t, src, k, _u, p in d.log:
        if src == PS and k == "I" and p.kind is nn.Kind.COLLECT:
            first.setdefault((p.worker, p.version), t)
    arrive: dict[int, float] = {}  # g0's push k: (first, last) segment arrival at the PS
    last: dict[int, float] = {}
    for t, src, k, _u, p in d.log:
        if src == "g0" and k == "D" and p.kind is nn.Kind.COLLECT:
            arrive.setdefault(p.version, t + d.delay)
            last[p.version] = t + d.delay  # the push is applied when its last segment arrives
    # push 1 had no estimate (push 0 had no previous push): asked for when push 0 was applied
    assert first[("g0", 1)] == pytest.approx(last[0], abs=1e-9)
    obs1 = arrive[1] - last[0]
    assert obs1 == pytest.approx(SPEED["g0"], abs=0.005)  # one step + a few link delays
    assert first[("g0", 2)] == pytest.approx(last[1] + 0.75 * obs1, abs=1e-9)
    assert first[("g0", 2)] < arrive[2] - 0.02  # early, so the worker held it until ready


def test_lost_last_distribution_recovered_by_probe_and_fetch() -> None:
    """A segment of v6 (the last version) is lost: nothing newer will ever come, so both workers'
    probe timers fire and they fetch exactly the missing segment; the result is unchanged."""
    lost = nn.to_uri(nn.with_segment(nn.distribute_name(PS, T, 6), 1))
    dropped: list[str] = []

    def drop(src: str, kind: str, uri: str) -> bool:
        if uri == lost and not dropped:
            dropped.append(uri)
            return True
        return False

    d = async_direct(drop=drop, probe_initial_s=0.1)
    d.run()
    assert dropped == [lost]
    assert [(a.worker, a.version, a.staleness) for a in d.ps.applied] == \
        [(g, v, st) for g, _s, _t, v, _sg, st, _k in TRACE]
    w = replay(d, [LR / r[6] for r in TRACE])
    for g in SPEED:
        node = d.workers[g]
        assert node.recovered_versions == {6} and node.recoveries == 1
        assert node.probe_expiries == 1
        fin = [ev for _t, ev in d.events[g] if isinstance(ev, Finished)]
        assert len(fin) == 1 and fin[0].params == w[6]
    fetches = sorted(u for _t, src, _k, u, p in d.log if src != PS and p.kind is nn.Kind.FETCH)
    assert fetches == ["/ps0/job1/v=6/seg=1"] * 2  # only the missing segment, by each worker
    served = [u for _t, src, _k, u, p in d.log if src == PS and p.kind is nn.Kind.FETCH]
    assert served and set(served) == {"/ps0/job1/v=6/seg=1"}


def test_bad_async_pushes_are_refused_without_changing_anything() -> None:
    init = np.zeros(4, dtype=np.float32)
    upd = AsyncUpdater(init.copy(), ["g0"], LR)
    with pytest.raises(ValueError, match="T_w=3"):
        upd.apply("g0", 3, np.ones(4, dtype=np.float32).tobytes())  # from the future
    with pytest.raises(ValueError, match="shape"):
        upd.apply("g0", 0, np.ones(3, dtype=np.float32).tobytes())
    with pytest.raises(ValueError, match="unknown worker"):
        upd.apply("g9", 0, np.ones(4, dtype=np.float32).tobytes())
    assert upd.ps.t_ps == 0 and upd.workers["g0"].staleness_log == []
    new, reply = upd.apply("g0", 0, np.ones(4, dtype=np.float32).tobytes())
    assert reply.sigma == 1 and np.frombuffer(new, dtype=np.float32).tolist() == [float(np.float32(-LR))] * 4
    assert unpack_gradient(pack_gradient(7, b"xy")) == (7, b"xy")
    with pytest.raises(ValueError, match="header"):
        unpack_gradient(b"ab")
    with pytest.raises(ValueError, match="AsyncUpdater"):
        PsState(PsConfig(PS, T, ["g0"], 2, grad_bytes=16, mode="async"), init.tobytes(),
                lambda v, p, g: p)
    with pytest.raises(ValueError, match="mode"):
        WorkerState(WorkerConfig("g0", PS, T, 2, mode="later"))


def test_ps_skips_a_push_from_the_future_and_keeps_collecting() -> None:
    """A gradient claiming a version the PS has not published is refused (counted), and the PS
    asks the worker for its next push."""
    init = np.zeros(DIM, dtype=np.float32)
    ps = PsState(PsConfig(PS, T, ["g0"], 2, grad_bytes=4 * DIM, mode="async"), init.tobytes(),
                 AsyncUpdater(init.copy(), ["g0"], LR))
    ps.start(0.0)
    out = ps.on_packet(encode_data(nn.task_name("g0", PS, T), b"accept"), 0.001)
    assert {describe(w)[1] for w in out} >= {"/g0/ps0/job1/v=0/seg=0"}
    payload = pack_gradient(5, np.ones(DIM, dtype=np.float32).tobytes())
    out = []
    for wire in segment(nn.collect_name("g0", PS, T, 0), payload, 1200):
        out += ps.on_packet(wire, 0.01)
    assert ps.rejected == 1 and ps.pushes == 0 and max(ps.params) == 0
    assert "/g0/ps0/job1/v=1/seg=0" in {describe(w)[1] for w in out}
    assert decode_data(segment(nn.collect_name("g0", PS, T, 0), payload, 1200)[0]).content[:4] \
        == (5).to_bytes(4, "little")


def test_worker_goes_on_only_after_its_gradient_was_collected() -> None:
    """A newer version that completes before the PS collected the worker's gradient is kept as
    the newest, but the worker starts its next step only once the gradient went out -- else it
    could run ahead of the PS's collection Interests -- and then at once, without a probe."""
    worker = WorkerState(WorkerConfig("g0", PS, T, 5, mode="async"))
    init = np.zeros(DIM, dtype=np.float32).tobytes()
    worker.on_packet(encode_interest(nn.task_name("g0", PS, T), 1), 0.0)
    for w in segment(nn.content_name(PS, T, "g0"), init, 1200):
        worker.on_packet(w, 0.01)
    worker.on_packet(encode_data(nn.distribute_name(PS, T), b""), 0.02)
    assert [type(e) for e in worker.pop_events()] == [Train] and worker.state == "training"
    assert worker.gradient_ready(0, np.ones(DIM, dtype=np.float32).tobytes(), 0.1) == []
    v1 = np.full(DIM, 2.0, dtype=np.float32).tobytes()
    for w in segment(nn.distribute_name(PS, T, 1), v1, 1200):
        worker.on_packet(w, 0.11)
    assert worker.newest == 1 and worker.state == "waiting" and worker.pop_events() == []
    out = []
    for i in range(3):  # the PS's collection Interests for push 0 arrive
        out += worker.on_packet(encode_interest(
            nn.with_segment(nn.collect_name("g0", PS, T, 0), i), 7 + i), 0.2)
    assert len(out) == 3 and unpack_gradient(b"".join(decode_data(w).content for w in out))[0] \
        == 0
    ev = worker.pop_events()
    assert [(type(e), e.version, e.params) for e in ev] == [(Train, 1, v1)]
    assert worker.probe_deadline is None and worker.state == "training" and worker.seq == 1
