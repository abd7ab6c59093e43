"""The DDP hook's pure core and shells (issue 18; docs/ddp.md).

Pure parts (codec, engines on a virtual clock) and the threaded/UDP transports need no torch;
the hook tests (duck-typed buckets, then a real DistributedDataParallel with 2 gloo ranks on
loopback) skip cleanly when torch is not installed (``pip install -e '.[ddp]'``).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

from workers.common.exit import exit_now
from workers.common.quantize import choose_frac_bits, quantize
from workers.ddp.codec import (
    ChunkRange,
    LayoutError,
    StepLayout,
    bucket_schedule,
    chunk_capacity,
    decode_mean,
    encode_bucket,
    reassemble,
    split_chunks,
)
from workers.ddp.exchange import RankEngine, SenderParams
from workers.ddp.fake import FakeNetwork, InProcessHub, LoopbackPs, drop_once, run_virtual
from workers.ddp.transport import udp_transport
from workers.ina.constants import TYPE_GRAD, K
from workers.ina.messages import wrap_sum
from workers.ina.worker import ps_only_schedule

JOB = 7
FRAC = choose_frac_bits(4.0, 2)


def _free_port(kind: int = socket.SOCK_DGRAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _buckets(sizes: list[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 1, n).astype(np.float32) for n in sizes]


def _inaish_schedule(capacity: int) -> list[tuple[int, int, int]]:
    """A schedule like the planner's: not in id order, varied agg ids (routes are opaque to
    the hook; only the PS-facing ids matter here)."""
    return [(c, 1 + c % 3, 2) for c in reversed(range(capacity))]


# -- codec ---------------------------------------------------------------------------------

def test_layout_odd_sizes_contiguous_and_last_fills_capacity() -> None:
    sizes = [1, 31, 33, 65, 100]
    cap = chunk_capacity(sizes)
    assert cap == -(-sum(sizes) // K) + len(sizes)
    lay = StepLayout(cap)
    for _step in range(2):
        ranges = [lay.place(i, n, i == len(sizes) - 1) for i, n in enumerate(sizes)]
        assert [r.n_chunks for r in ranges[:-1]] == [1, 1, 2, 3]
        assert ranges[0].base == 0
        assert all(a.stop == b.base for a, b in zip(ranges, ranges[1:], strict=False))
        assert ranges[-1].stop == cap  # the last bucket zero-fills the rest of the round


def test_layout_rejects_out_of_order_and_overflow() -> None:
    lay = StepLayout(4)
    with pytest.raises(LayoutError, match="expected bucket 0"):
        lay.place(1, 10, False)
    lay.place(0, 3 * K, False)
    with pytest.raises(LayoutError, match="chunk_capacity"):
        lay.place(1, 2 * K, True)


@pytest.mark.parametrize("n", [1, K - 1, K, K + 1, 3 * K + 7])
def test_quantize_chunk_reassemble_roundtrip(n: int) -> None:
    rng = ChunkRange(base=5, n_chunks=-(-n // K) + 1, n_values=n)  # one spare zero chunk
    a, b = _buckets([n, n], seed=n)
    ea, eb = (encode_bucket(x, rng, FRAC, 2) for x in (a, b))
    assert ea.values.shape == (rng.n_chunks * K,) and not ea.values[n:].any()
    assert np.array_equal(ea.values[:n], quantize(a, FRAC, 2).values)
    chunks_a, chunks_b = split_chunks(ea.values, rng), split_chunks(eb.values, rng)
    assert [c for c, _ in chunks_a] == list(range(rng.base, rng.stop))
    # what the switches return per chunk: the wrap-around sum of both ranks' chunk
    results = {c: wrap_sum([va, vb]) for (c, va), (_, vb) in zip(chunks_a, chunks_b, strict=True)}
    total = reassemble(results, rng)
    assert total.shape == (n,)
    assert np.array_equal(total, wrap_sum([ea.values[:n], eb.values[:n]]))
    mean = decode_mean(total, n, FRAC, 2)
    assert mean.dtype == np.float32
    assert np.max(np.abs(mean - (a + b) / 2)) <= 2.0 ** -(FRAC + 1) + 1e-6
    with pytest.raises(KeyError):
        reassemble({c: v for c, v in results.items() if c != rng.base}, rng)


def test_bucket_schedule_takes_its_range_in_schedule_order() -> None:
    sched = _inaish_schedule(10)
    rng = ChunkRange(3, 4, 100)
    assert bucket_schedule(sched, rng) == [(6, 1, 2), (5, 3, 2), (4, 2, 2), (3, 1, 2)]
    with pytest.raises(LayoutError):
        bucket_schedule(sched[:5], rng)


# -- engines on a virtual clock ------------------------------------------------------------

def _step_submissions(sizes: list[int], steps: int, workers: list[int],
                      sched: list[tuple[int, int, int]]):
    cap = len(sched)
    subs: dict[int, list] = {w: [] for w in workers}
    qs: dict[tuple[int, int, int], np.ndarray] = {}
    for w in workers:
        lay = StepLayout(cap)
        for s in range(steps):
            for i, x in enumerate(_buckets(sizes, seed=100 * s + w)):
                rng = lay.place(i, x.size, i == len(sizes) - 1)
                enc = encode_bucket(x, rng, FRAC, len(workers))
                qs[(w, s, i)] = enc.values
                subs[w].append((s, rng, enc.values, bucket_schedule(sched, rng)))
    return subs, qs


def _engines(workers: list[int], **kw: float) -> dict[int, RankEngine]:
    return {w: RankEngine(SenderParams(JOB, w, window=4, **kw)) for w in workers}


def test_several_buckets_per_step_distinct_chunk_ids_exact_sums() -> None:
    workers, sizes, steps = [0, 1], [35, 5, 97, 1], 2
    cap = chunk_capacity(sizes)
    sched = _inaish_schedule(cap)
    subs, qs = _step_submissions(sizes, steps, workers, sched)
    net = FakeNetwork(JOB, workers, cap)
    seen: list[tuple[int, int, int, int, int]] = []
    inner = net.on_packet

    def logging(pkt):
        if pkt.msg_type == TYPE_GRAD:
            seen.append((pkt.round, pkt.chunk_id, pkt.worker_id, pkt.agg_id, pkt.fan_in))
        return inner(pkt)

    net.on_packet = logging  # type: ignore[method-assign]
    done, _ = run_virtual(_engines(workers), net, subs)
    for w in workers:
        assert len(done[w]) == steps * len(sizes)
        by_round: dict[int, list] = {}
        for c in done[w]:
            by_round.setdefault(c.round, []).append(c)
        for s, comps in by_round.items():
            ids = [set(range(c.rng.base, c.rng.stop)) for c in comps]
            assert set().union(*ids) == set(range(cap))  # the whole round, ...
            assert sum(len(i) for i in ids) == cap  # ... each chunk id in one bucket only
            for i, c in enumerate(sorted(comps, key=lambda c: c.rng.base)):
                assert np.array_equal(c.total, wrap_sum([qs[(v, s, i)] for v in workers]))
        assert net.ps.stats.rounds_completed == steps
    # every GRAD carried its chunk's scheduled route, each (round, chunk, worker) sent once
    route = {c: (a, f) for c, a, f in sched}
    assert all((a, f) == route[c] for _, c, _, a, f in seen)
    assert len(seen) == len(set(seen)) == steps * cap * len(workers)


def test_lost_result_is_retransmitted_and_sum_stays_exact() -> None:
    workers, sizes = [0, 1], [40, 9]
    cap = chunk_capacity(sizes)
    subs, qs = _step_submissions(sizes, 1, workers, ps_only_schedule(cap))
    lost = [(0, 0, 1), (0, cap - 1, 0)]  # (round, chunk, worker): one per bucket
    net = FakeNetwork(JOB, workers, cap, drop=drop_once(lost))
    # the PS's RESULTs go in copies once a worker asked again (workers.ina.ps, "Lost
    # RESULTs"): off here, so that each rank's own retransmission is what recovers its chunk
    net.ps.result_copies.max_copies = 1
    engines = _engines(workers, timeout=0.05)
    done, t = run_virtual(engines, net, subs)
    assert sorted(net.dropped) == sorted(lost)
    # each rank retransmitted its lost chunk (rank 0 may also retransmit bucket 1's chunks
    # while rank 1 is still recovering bucket 0: skew looks like loss until the timer fires)
    assert engines[0].stats.retransmits >= 1 and engines[1].stats.retransmits >= 1
    assert net.ps.stats.results_resent >= 2  # the PS answered with the stored RESULTs
    assert t >= 0.05
    for w in workers:
        for i, c in enumerate(sorted(done[w], key=lambda c: c.rng.base)):
            assert np.array_equal(c.total, wrap_sum([qs[(v, 0, i)] for v in workers]))


def test_doubled_results_absorb_a_later_lost_result() -> None:
    """With the PS's default: after rank 1 lost bucket 0's RESULT and the PS's answer too,
    and so asked for it again (workers.ina.result_copies: evidence of a lost RESULT, where
    one ask is not), the PS sends every later RESULT in copies, so rank 0's lost copy of
    bucket 1's is replaced by its twin without a retransmission; every sum exact."""
    workers, sizes = [0, 1], [40, 9]
    cap = chunk_capacity(sizes)
    subs, qs = _step_submissions(sizes, 1, workers, ps_only_schedule(cap))
    lost = [(0, 0, 1), (0, 0, 1), (0, cap - 1, 0)]
    first, second = drop_once(lost[:1]), drop_once(lost[1:])
    net = FakeNetwork(JOB, workers, cap, drop=lambda p, w: first(p, w) or second(p, w))
    engines = _engines(workers, timeout=0.05)
    done, _ = run_virtual(engines, net, subs)
    assert sorted(net.dropped) == sorted(lost)
    assert engines[1].stats.retransmits >= 1 and net.ps.stats.results_doubled >= 1
    assert engines[0].stats.dup_results >= 1
    for w in workers:
        for i, c in enumerate(sorted(done[w], key=lambda c: c.rng.base)):
            assert np.array_equal(c.total, wrap_sum([qs[(v, 0, i)] for v in workers]))


def test_in_process_transport_threads_exact_with_a_lost_result() -> None:
    workers, sizes = [0, 1], [70, 3]
    cap = chunk_capacity(sizes)
    subs, qs = _step_submissions(sizes, 2, workers, ps_only_schedule(cap))
    hub = InProcessHub(FakeNetwork(JOB, workers, cap, drop=drop_once([(1, 1, 0)])))
    ts = {w: hub.transport(SenderParams(JOB, w, timeout=0.02), stall_timeout_s=10.0)
          for w in workers}
    try:
        futs = {w: [ts[w].exchange(*s) for s in subs[w]] for w in workers}
        for w in workers:
            for j, f in enumerate(futs[w]):
                s, i = divmod(j, len(sizes))
                assert np.array_equal(f.result(timeout=10),
                                      wrap_sum([qs[(v, s, i)] for v in workers]))
        # >= 1: on a loaded machine a late thread also looks like loss (20 ms timer)
        assert ts[0].stats.retransmits >= 1 and hub.net.dropped == [(1, 1, 0)]
    finally:
        for t in ts.values():
            t.close()


def test_udp_transport_with_loopback_ps_and_a_lost_result() -> None:
    workers, sizes = [0, 1], [33, 64]
    cap = chunk_capacity(sizes)
    subs, qs = _step_submissions(sizes, 1, workers, ps_only_schedule(cap))
    addrs = [("127.0.0.1", _free_port()) for _ in workers]
    lose = drop_once([(0, 2, 1)])
    with LoopbackPs(JOB, workers, cap, addrs, drop=lambda p, i: lose(p, workers[i])) as ps:
        ts = {w: udp_transport(SenderParams(JOB, w, timeout=0.02), addrs[w], ps.addr,
                               stall_timeout_s=10.0) for w in workers}
        try:
            futs = {w: [ts[w].exchange(*s) for s in subs[w]] for w in workers}
            for w in workers:
                for i, f in enumerate(futs[w]):
                    assert np.array_equal(f.result(timeout=10),
                                          wrap_sum([qs[(v, 0, i)] for v in workers]))
            assert ps.dropped == 1 and ts[1].stats.retransmits >= 1
        finally:
            for t in ts.values():
                t.close()


# -- the hook (torch) ----------------------------------------------------------------------

class _Bucket:
    """Duck-typed ``torch.distributed.GradBucket``: what the hook reads."""

    def __init__(self, tensor, index: int, last: bool) -> None:
        self._t, self._i, self._last = tensor, index, last

    def buffer(self):
        return self._t

    def index(self) -> int:
        return self._i

    def is_last(self) -> bool:
        return self._last


def test_hook_averages_buckets_through_in_process_network() -> None:
    torch = pytest.importorskip("torch")
    from workers.ddp.hook import InaHookState, ina_hook

    workers, sizes = [0, 1], [7, 50, 33]
    cap = chunk_capacity(sizes)
    hub = InProcessHub(FakeNetwork(JOB, workers, cap, drop=drop_once([(1, 0, 1)])))
    states = {w: InaHookState(hub.transport(SenderParams(JOB, w, timeout=0.02)), w, 2, FRAC,
                              cap, lambda s: ps_only_schedule(cap), record=True)
              for w in workers}
    try:
        for step in range(2):
            grads = {w: [torch.from_numpy(x) for x in _buckets(sizes, 10 * step + w)]
                     for w in workers}
            futs = {w: [ina_hook(states[w], _Bucket(g, i, i == len(sizes) - 1))
                        for i, g in enumerate(grads[w])] for w in workers}
            for i in range(len(sizes)):
                want = (grads[0][i] + grads[1][i]) / 2
                got = [futs[w][i].wait() for w in workers]
                assert torch.equal(got[0], got[1])  # every replica applies the same bits
                assert got[0].dtype == torch.float32 and got[0].shape == want.shape
                assert torch.max(torch.abs(got[0] - want)) <= 2.0 ** -(FRAC + 1) + 1e-6
        assert states[0].step == states[1].step == 2
        for r0, r1 in zip(states[0].records, states[1].records, strict=True):
            assert np.array_equal(r0.total, wrap_sum([r0.q, r1.q]))
        assert states[1].transport.stats.retransmits >= 1
    finally:
        for s in states.values():
            s.close()


def _ddp_rank(rank: int, world: int, tcp_port: int, ps_addr: tuple[str, int],
              rank_addrs: list[tuple[str, int]], capacity: int, out_dir: str) -> None:
    """One DDP rank (run by torch.multiprocessing): 3 steps with the INA hook, each checked
    against a reference model whose gradients gloo all-reduces."""
    import copy

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from workers.ddp.hook import InaHookState, register

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{tcp_port}", rank=rank,
                            world_size=world)
    try:
        torch.manual_seed(0)
        model = _tiny_cnn(torch)
        ref = copy.deepcopy(model)
        ddp = DDP(model, bucket_cap_mb=0.0005)  # ~500 B buckets: several per step
        transport = udp_transport(SenderParams(JOB, rank, timeout=0.05), rank_addrs[rank],
                                  ps_addr, stall_timeout_s=20.0)
        state = InaHookState(transport, rank, world, FRAC, capacity,
                             lambda s: ps_only_schedule(capacity), record=True)
        register(ddp, state)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(rank)
        diffs = []
        for _step in range(3):
            x = torch.randn(8, 1, 8, 8, generator=gen)
            y = torch.randint(0, 10, (8,), generator=gen)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            ref.load_state_dict(model.state_dict())
            ref.zero_grad()
            torch.nn.functional.cross_entropy(ref(x), y).backward()
            for p in ref.parameters():
                dist.all_reduce(p.grad)  # gloo's sum: the baseline the hook replaces
                p.grad /= world
            diffs.append(max(float((p.grad - q.grad).abs().max())
                             for p, q in zip(model.parameters(), ref.parameters(), strict=True)))
            opt.step()
        state.save(Path(out_dir) / f"rank{rank}.npz")
        (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(
            {"diffs": diffs, "retransmits": transport.stats.retransmits,
             "buckets": transport.stats.buckets, "steps": state.step}))
        state.close()
        dist.barrier()  # as workers.ddp.workload: both ranks done before gloo's teardown
    finally:
        dist.destroy_process_group()
    exit_now(0)  # as workers.ddp.workload's __main__: no interpreter teardown after gloo's


def _tiny_cnn(torch):
    # odd parameter sizes on purpose (36, 4, 7*... ) so buckets do not align with K
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(36, 17), torch.nn.ReLU(), torch.nn.Linear(17, 10))


@pytest.mark.slow
def test_ddp_two_gloo_ranks_on_loopback(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import torch.multiprocessing as mp

    numels = [p.numel() for p in _tiny_cnn(torch).parameters()]
    capacity = chunk_capacity(numels)
    world = 2
    addrs = [("127.0.0.1", _free_port()) for _ in range(world)]
    lose = drop_once([(1, 0, 1)])  # step 1, chunk 0, rank 1's copy
    with LoopbackPs(JOB, list(range(world)), capacity, addrs,
                    drop=lambda p, i: lose(p, i)) as ps:
        mp.spawn(_ddp_rank, args=(world, _free_port(socket.SOCK_STREAM), ps.addr, addrs,
                                  capacity, str(tmp_path)), nprocs=world, join=True)
        assert ps.dropped == 1 and ps.state.stats.rounds_completed == 3
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    recs = [np.load(tmp_path / f"rank{r}.npz") for r in range(world)]
    sums = sorted(k for k in recs[0].files if k.endswith("_sum"))
    steps = {k.split("_")[0] for k in sums}
    assert steps == {"s0", "s1", "s2"} and len(sums) > len(steps)  # several buckets per step
    for key in sums:
        q = [r[key.replace("_sum", "_q")] for r in recs]
        exact = wrap_sum(q)
        assert all(np.array_equal(r[key], exact) for r in recs), key
    # averaged gradients vs gloo's all-reduce: the hook's error is quantization only
    for rep in reports:
        assert rep["steps"] == 3
        assert max(rep["diffs"]) <= 2.0 ** -(FRAC + 1) + 1e-6, rep
    assert reports[1]["retransmits"] >= 1


def test_stalled_exchange_fails_the_future_instead_of_hanging() -> None:
    from workers.ddp.transport import ExchangeFailed

    cap = 2
    hub = InProcessHub(FakeNetwork(JOB, [0, 1], cap))
    t = hub.transport(SenderParams(JOB, 0, timeout=0.02, max_timeout=0.05),
                      stall_timeout_s=0.3)
    try:  # rank 1 never sends: the PS can never complete the chunk
        rng = ChunkRange(0, cap, 5)
        enc = encode_bucket(np.ones(5, np.float32), rng, FRAC, 2)
        fut = t.exchange(0, rng, enc.values, ps_only_schedule(cap))
        with pytest.raises(ExchangeFailed, match="no bucket completed"):
            fut.result(timeout=5)
    finally:
        t.close()


def test_check_exact_from_saved_buckets(tmp_path: Path) -> None:
    from workers.ddp.check import check_exact

    q0, q1 = np.array([1, -2, 3], np.int32), np.array([2**30, 5, -7], np.int32)
    total = wrap_sum([q0, q1])
    for r, q in enumerate((q0, q1)):
        np.savez(tmp_path / f"r{r}.npz", s0_b0_q=q, s0_b0_sum=total, s1_b0_q=q, s1_b0_sum=total)
    files = [tmp_path / "r0.npz", tmp_path / "r1.npz"]
    assert check_exact(files) == {"exact": True, "steps": 2, "buckets": 2, "mismatches": [],
                                  "step_exact": [True, True]}
    np.savez(tmp_path / "r1.npz", s0_b0_q=q1, s0_b0_sum=total + 1, s1_b0_q=q1, s1_b0_sum=total)
    bad = check_exact(files)
    assert bad["mismatches"] == ["s0_b0_sum"] and bad["step_exact"] == [False, True]
