"""docs/design.md §6 steps 1-9 (workers.ndn.protocol): PS and worker state machines over a direct link, then
the whole transport in the in-process simulation (tests/ndn_sim.py: PS, 2 routers, N workers)."""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ndn.encoding import Component
from ndn_sim import Sim, grad_fn, reference, update_fn

from workers.ndn import names as nn
from workers.ndn.packets import (
    decode_data,
    decode_interest,
    encode_data,
    encode_interest,
    packet_type,
)
from workers.ndn.protocol import Finished, Published, Train
from workers.ndn.ps import PsConfig, PsState
from workers.ndn.worker import WorkerConfig, WorkerState

PS, T = "ps0", "job1"
DIM = 700  # 2800-byte gradients / parameters: 3 segments of 1200 B


def describe(wire: bytes) -> tuple[str, str, nn.Parsed | None]:
    """('I'|'D', uri, parsed) of a wire, names read from the PS's viewpoint."""
    if packet_type(wire) == 0x05:
        name, kind = decode_interest(wire).name, "I"
    else:
        name, kind = decode_data(wire).name, "D"
    return kind, nn.to_uri(name), nn.parse_for(name, PS, "ps")


class Direct:
    """PS and workers on one zero-loss link each (no routers), with a fake clock and a log.

    ``drop(src, kind, uri) -> bool`` can suppress chosen packets.  The PS reaches each worker
    directly: Interests/Data are routed by the protocol name (what a router's FIB would do),
    distribution Data go to every worker.
    """

    def __init__(self, workers: dict[str, WorkerConfig], compute: Callable[[str, int], float],
                 n_rounds: int, delay: float = 0.001,
                 drop: Callable[[str, str, str], bool] = lambda s, k, u: False,
                 make_ps: Callable[[bytes], PsState] | None = None) -> None:
        self.init = np.linspace(0, 1, DIM, dtype=np.float32).tobytes()
        self.updates: list[tuple[int, set[str]]] = []

        def update(v: int, params: bytes, grads: dict[str, bytes]) -> bytes:
            self.updates.append((v, set(grads)))
            return update_fn(v, params, grads)

        self.ps = (make_ps(self.init) if make_ps is not None else
                   PsState(PsConfig(PS, T, list(workers), n_rounds, grad_bytes=4 * DIM), self.init,
                           update))
        self.workers = {g: WorkerState(cfg) for g, cfg in workers.items()}
        self.index = {g: i for i, g in enumerate(workers)}
        self.compute, self.delay, self.drop = compute, delay, drop
        self.q: list = []
        self.seq = 0
        self.log: list[tuple[float, str, str, str, nn.Parsed | None]] = []
        self.events: dict[str, list] = {g: [] for g in workers}
        self.events[PS] = []
        self.now = 0.0

    def push(self, t, what, args) -> None:
        self.seq += 1
        heapq.heappush(self.q, (t, self.seq, what, args))

    def emit(self, src: str, wires: list[bytes]) -> None:
        node = self.ps if src == PS else self.workers[src]
        for w in wires:
            kind, uri, p = describe(w)
            self.log.append((self.now, src, kind, uri, p))
            if self.drop(src, kind, uri):
                continue
            if src != PS:
                dests = [PS]
            elif p is not None and p.kind in (nn.Kind.DISTRIBUTE, nn.Kind.CONFIRM):
                dests = list(self.workers)
            else:
                dests = [p.worker] if p is not None and p.kind in (
                    nn.Kind.TASK, nn.Kind.COLLECT, nn.Kind.CONTENT) else []
                if p is not None and p.kind is nn.Kind.FETCH:
                    dests = self.fetchers.pop(uri, [])
            for d in dests:
                self.push(self.now + self.delay, "pkt", (d, w))
            if src != PS and p is not None and p.kind is nn.Kind.FETCH:
                self.fetchers.setdefault(uri, []).append(src)
        t = node.next_deadline()
        if t is not None:
            self.push(max(t, self.now), "tick", (src,))
        for ev in node.pop_events():
            self.events[src].append((self.now, ev))
            if isinstance(ev, Train):
                self.push(self.now + self.compute(src, ev.version), "grad", (src, ev))

    fetchers: dict[str, list[str]]

    def run(self, until: float = 60.0) -> None:
        self.fetchers = {}
        self.emit(PS, self.ps.start(0.0))
        while self.q:
            t, _s, what, args = heapq.heappop(self.q)
            if t > until:
                break
            self.now = t
            if what == "pkt":
                dst, w = args
                node = self.ps if dst == PS else self.workers[dst]
                self.emit(dst, node.on_packet(w, t))
            elif what == "tick":
                node = self.ps if args[0] == PS else self.workers[args[0]]
                self.emit(args[0], node.tick(t))
            elif what == "grad":
                g, ev = args
                if self.workers[g].state == "done":  # async: the run ended during the step
                    continue
                grad = grad_fn(self.index[g], ev.version, ev.params)
                self.emit(g, self.workers[g].gradient_ready(ev.version, grad, t))


def cfgs(names: list[str], n_rounds: int, **kw) -> dict[str, WorkerConfig]:
    return {g: WorkerConfig(g, PS, T, n_rounds, seed=i, **kw) for i, g in enumerate(names)}


def final_params(d: Direct, g: str) -> bytes:
    fin = [ev for _t, ev in d.events[g] if isinstance(ev, Finished)]
    assert len(fin) == 1, f"{g} did not finish"
    return fin[0].params


# ----------------------------------------------------------------------------- probe timer


def test_probe_timeout_mean_plus_k_std_clamped() -> None:
    g = WorkerState(WorkerConfig("g0", PS, T, 3, probe_k=4.0, probe_min_s=0.05, probe_max_s=2.0,
                                 probe_initial_s=0.7))
    assert g.probe_timeout() == 0.7  # no history
    g.history = [0.3]
    assert g.probe_timeout() == 0.7  # one sample is not a spread
    g.history = [0.1, 0.1, 0.1, 0.5]
    # mean 0.2, population std sqrt((3*0.01 + 0.09)/4) = sqrt(0.03)
    assert g.probe_timeout() == pytest.approx(0.2 + 4 * 0.03 ** 0.5)
    g.history = [0.01, 0.01]
    assert g.probe_timeout() == 0.05  # clamped to the minimum
    g.history = [1.0, 3.0]
    assert g.probe_timeout() == 2.0  # clamped to the maximum


# ----------------------------------------------------------------------------- steps 1-9


def test_protocol_steps_in_order_and_exact_result() -> None:
    d = Direct(cfgs(["g0", "g1"], 3), compute=lambda g, v: 0.1, n_rounds=3)
    d.run()
    first: dict[tuple[str, str], float] = {}
    for t, _src, kind, _uri, p in d.log:
        assert p is not None
        first.setdefault((p.kind.value, kind), t)
    order = [("task", "I"), ("task", "D"), ("content", "I"), ("insert", "I"), ("confirm", "D"),
             ("collect", "D"), ("distribute", "D"), ("delete", "I")]
    times = [first[k] for k in order]
    assert times == sorted(times), dict(zip(order, times, strict=True))
    # round 0 has no estimate: its collection Interests leave as soon as the worker accepts, and
    # the worker holds them until its first gradient is ready
    assert first[("collect", "I")] == pytest.approx(first[("task", "D")] + d.delay)
    # content Data is what the PS serves for /ps0/job1/<worker>: every worker started from init
    for g in ("g0", "g1"):
        trains = [ev for _t, ev in d.events[g] if isinstance(ev, Train)]
        assert [ev.version for ev in trains] == [0, 1, 2]
        assert trains[0].params == d.init
        assert final_params(d, g) == reference(2, d.init, 3)
        assert d.workers[g].state == "done" and d.workers[g].recoveries == 0
    assert [v for v, _ in d.updates] == [0, 1, 2]
    assert all(who == {"g0", "g1"} for _, who in d.updates)
    published = [ev.version for _t, ev in d.events[PS] if isinstance(ev, Published)]
    assert published == [1, 2, 3] and d.ps.done
    # the worker Train for version 0 only comes after the subscription was confirmed
    t_confirm = first[("confirm", "D")]
    assert all(t >= t_confirm for t, ev in d.events["g0"] if isinstance(ev, Train))


def test_collection_interests_timed_by_ewma_estimate() -> None:
    compute = {0: 0.5, 1: 0.5, 2: 0.3, 3: 0.3}
    d = Direct(cfgs(["g0"], 4), compute=lambda g, v: compute[v], n_rounds=4, delay=0.001)
    d.run()
    ps = d.ps
    a, lead = ps.cfg.ewma_alpha, ps.cfg.lead_fraction

    def first_collect(sender: str, kind: str, version: int) -> float:
        return min(t for t, src, k, _u, p in d.log if src == sender and k == kind
                   and p.kind is nn.Kind.COLLECT and p.version == version)

    # round 1: no estimate yet -> Interests at once when version 1 is published
    assert first_collect(PS, "I", 1) == pytest.approx(ps.published_at[1])
    obs1 = first_collect("g0", "D", 1) + d.delay - ps.published_at[1]
    # the worker held the early Interest: obs = delay (distribution) + compute + delay (data)
    assert obs1 == pytest.approx(0.5 + 2 * d.delay)
    # round 2: sent at publish + (1 - lead) * d_g with d_g = obs1
    assert first_collect(PS, "I", 2) == pytest.approx(ps.published_at[2] + (1 - lead) * obs1)
    obs2 = first_collect("g0", "D", 2) + d.delay - ps.published_at[2]
    # the worker got faster (0.3 s < 0.75 * obs1): that Interest arrived after the gradient was
    # ready and was answered at once, so obs2 = send offset + RTT (the documented overestimate)
    assert obs2 == pytest.approx((1 - lead) * obs1 + 2 * d.delay)
    est2 = a * obs2 + (1 - a) * obs1
    assert first_collect(PS, "I", 3) == pytest.approx(ps.published_at[3] + (1 - lead) * est2)
    obs3 = first_collect("g0", "D", 3) + d.delay - ps.published_at[3]
    assert ps.workers["g0"].estimate == pytest.approx(a * obs3 + (1 - a) * est2)
    assert final_params(d, "g0") == reference(1, d.init, 4)


def test_declined_worker_is_left_out() -> None:
    workers = cfgs(["g0", "g1"], 2)
    workers["g1"].accept = False
    d = Direct(workers, compute=lambda g, v: 0.05, n_rounds=2)
    d.run()
    assert d.ps.workers["g1"].state == "declined" and d.workers["g1"].state == "declined"
    assert all(who == {"g0"} for _, who in d.updates) and len(d.updates) == 2
    expected = d.init
    for v in range(2):
        expected = update_fn(v, expected, {"g0": grad_fn(0, v, expected)})
    assert final_params(d, "g0") == expected
    assert not any(src == "g1" and p.kind is not nn.Kind.TASK for _t, src, _k, _u, p in d.log)


def test_lost_distribution_segment_recovered_by_probe_timer_and_fetch() -> None:
    lost = nn.to_uri(nn.with_segment(nn.distribute_name(PS, T, 3), 1))
    dropped = []

    def drop(src: str, kind: str, uri: str) -> bool:
        if uri == lost and not dropped:
            dropped.append(uri)
            return True
        return False

    d = Direct(cfgs(["g0"], 4, probe_initial_s=1.0), compute=lambda g, v: 0.2, n_rounds=4,
               drop=drop)
    d.run()
    g = d.workers["g0"]
    assert dropped == [lost]
    assert g.probe_expiries == 1 and g.recoveries == 1 and g.recovered_versions == {3}
    fetches = [(t, u) for t, src, k, u, p in d.log if src == "g0" and p.kind is nn.Kind.FETCH]
    assert [u for _t, u in fetches] == ["/ps0/job1/v=3/seg=1"]  # only the missing segment
    # the fetch left when the probe timer fired: last gradient Data of round 2 + timeout
    sent_at = max(t for t, src, k, _u, p in d.log
                  if src == "g0" and p.kind is nn.Kind.COLLECT and p.version == 2)
    # history before round 2's distribution: rounds 0 and 1 intervals
    h = g.history[:2]
    timeout = statistics.fmean(h) + 4 * statistics.pstdev(h)
    timeout = min(g.cfg.probe_max_s, max(g.cfg.probe_min_s, timeout))
    assert fetches[0][0] == pytest.approx(sent_at + timeout)
    served = [u for _t, src, k, u, p in d.log if src == PS and p.kind is nn.Kind.FETCH]
    assert served == ["/ps0/job1/v=3/seg=1"]
    assert final_params(d, "g0") == reference(1, d.init, 4)


def test_spurious_probe_expiry_still_feeds_the_history() -> None:
    """The timer fires because one round is slower than the history says (g1 computes 5x
    longer in round 3), but the distribution then arrives by multicast: nothing was
    recovered, and the interval is a sample -- otherwise the too short timeout would stay (a
    feedback seen on Mininet, where one worker fetched every round after two tight samples)."""
    d = Direct(cfgs(["g0", "g1"], 5), n_rounds=5,
               compute=lambda g, v: 0.5 if (g, v) == ("g1", 3) else 0.1)
    d.run()
    g = d.workers["g0"]
    assert g.probe_expiries == 1 and g.recoveries == 0
    assert len(g.history) == 5 and max(g.history) == pytest.approx(0.4, abs=0.02)
    assert final_params(d, "g0") == reference(2, d.init, 5)


def test_lost_gradient_segment_reexpressed_by_the_ps() -> None:
    lost = nn.to_uri(nn.with_segment(nn.collect_name("g0", PS, T, 1), 2))
    seen = []

    def drop(src: str, kind: str, uri: str) -> bool:
        if src == "g0" and uri == lost and not seen:
            seen.append(uri)
            return True
        return False

    d = Direct(cfgs(["g0"], 2), compute=lambda g, v: 0.1, n_rounds=2, drop=drop)
    d.run()
    asks = [t for t, src, k, u, _p in d.log if src == PS and k == "I" and u == lost]
    got_other = min(t for t, src, k, u, p in d.log if src == "g0" and k == "D"
                    and p.kind is nn.Kind.COLLECT and p.version == 1) + d.delay
    assert len(asks) == 2 and asks[1] == pytest.approx(got_other + d.ps.cfg.rto_s)
    assert d.ps.stats.retransmissions >= 1
    assert final_params(d, "g0") == reference(1, d.init, 2)


def test_bad_input_dropped_and_counted() -> None:
    ps = PsState(PsConfig(PS, T, ["g0"], 1, grad_bytes=8), b"\0" * 8, update_fn)
    worker = WorkerState(WorkerConfig("g0", PS, T, 1))
    for node in (ps, worker):
        assert node.on_packet(b"\x05\x02\x00\x00", 0.0) == []
        assert node.on_packet(encode_data("/other/job/x", b"?"), 0.0) == []
        assert node.on_packet(encode_data(nn.distribute_name(PS, "otherjob", 1), b"?"), 0.0) == []
        assert node.stats.dropped == 3
    with pytest.raises(ValueError, match="gradient for version 0"):
        worker.gradient_ready(0, b"", 0.0)  # not training yet
    with pytest.raises(nn.NdnNameError):
        WorkerState(WorkerConfig("insert", PS, T, 1))
    with pytest.raises(ValueError, match="duplicate"):
        PsState(PsConfig(PS, T, ["g0", "g0"], 1, grad_bytes=8), b"", update_fn)


# ----------------------------------------------------------------------------- simulation


@pytest.mark.parametrize("n", [4, 8, 12])
def test_sim_persistent_pit_sends_one_copy_on_the_ps_link(n: int) -> None:
    sim = Sim(n, n_rounds=4, dim=3000, layout="tree", loss=0.0, seed=n)
    res = sim.run()
    ref = reference(n, sim.init, 4)
    assert len(res.finished) == n and all(p == ref for p in res.finished.values())
    assert res.ps_params == ref
    for v in range(1, 5):
        one_copy = res.dist_copy_bytes[v]
        assert one_copy > 0
        measured = res.dist_bytes_ps_link[v]
        unicast = n * one_copy  # a unicast PS puts one copy per worker on its link
        assert measured == one_copy
        assert unicast / measured == n
        assert res.dist_bytes_worker_links[v] == n * one_copy  # yet every worker got its copy
    assert res.probe_expiries == 0 and res.lost_pairs == set()
    assert res.fetch_bytes_ps_link == {}
    # each router copied every distribution Data to its local workers (r1 also once toward r2);
    # confirmations (one per insert) add copies to whatever was subscribed at the time
    r1, r2 = res.routers["r1"].counters, res.routers["r2"].counters
    dist_data = 4 * len(res.ps.dist_segments[4])
    n_r1 = (n + 1) // 2  # Workers 0, 2, 4, ... sit on r1
    assert r1.ppit_forwards == dist_data + n  # n confirmations pass r1 (toward the PS side)
    assert dist_data * (n_r1 + 1) < r1.ppit_copies <= (dist_data + n) * (n_r1 + 1)
    assert dist_data * (n - n_r1) < r2.ppit_copies <= (dist_data + n) * (n - n_r1)
    # after the deletes the persistent entries are gone
    assert res.routers["r1"].ppit == {} and res.routers["r2"].ppit == {}
    assert res.ps.deletes_seen >= 1


@pytest.mark.parametrize("n", [4, 8, 12])
def test_sim_five_percent_loss_every_round_completes_via_probe_and_fetch(n: int) -> None:
    sim = Sim(n, n_rounds=4, dim=3000, layout="tree", loss=0.05, seed=100 + n)
    res = sim.run()
    ref = reference(n, sim.init, 4)
    assert res.frames_dropped > 0
    assert len(res.finished) == n and all(p == ref for p in res.finished.values())
    assert res.ps_params == ref
    # every (worker, version) that missed a multicast segment was completed by an active fetch
    assert res.lost_pairs, "the seeded loss should hit some distributions"
    for g, v in res.lost_pairs:
        assert v in res.recovered[g]
    recoveries = sum(len(s) for s in res.recovered.values())
    assert recoveries == sum(w.recoveries for w in res.workers.values()) >= len(res.lost_pairs)
    assert res.probe_expiries >= recoveries
    # the PS still put exactly one multicast copy of each version on its link
    for v in range(1, 5):
        assert res.dist_bytes_ps_link[v] == res.dist_copy_bytes[v]


def test_sim_line_topology_with_loss() -> None:
    sim = Sim(6, n_rounds=3, dim=2000, layout="line", loss=0.05, seed=5)
    res = sim.run()
    ref = reference(6, sim.init, 3)
    assert len(res.finished) == 6 and all(p == ref for p in res.finished.values())
    for g, v in res.lost_pairs:
        assert v in res.recovered[g]
    # line: r1 has a single downstream face (r2) in its persistent entry
    assert res.routers["r1"].counters.ppit_copies == res.routers["r1"].counters.ppit_forwards


_VALUES = st.one_of(st.binary(max_size=9),
                    st.sampled_from([b"ps0", b"job1", b"g0", b"insert", b"distribute", b"delete",
                                     b"\x01\x02\x03", b""]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0x08, 0x08, 0x08, 0x32, 0x36, 0x20, 0x01]),
                          _VALUES), min_size=1, max_size=6),
       st.booleans())
def test_nodes_survive_arbitrary_names(comps: list[tuple[int, bytes]], as_data: bool) -> None:
    """Names of any component types/values (e.g. a 3-byte version) never crash PS or worker."""
    name = [Component.from_bytes(v, typ) for typ, v in comps]
    wire = encode_data(name, b"x") if as_data else encode_interest(name, nonce=1)
    ps = PsState(PsConfig(PS, T, ["g0"], 1, grad_bytes=8), b"\0" * 8, update_fn)
    worker = WorkerState(WorkerConfig("g0", PS, T, 1))
    ps.start(0.0)
    for node in (ps, worker):
        out = node.on_packet(wire, 0.1)
        assert isinstance(out, list)
