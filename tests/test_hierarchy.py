"""Hierarchical jobs (docs/protocol.md §5.1), without packets: the tree and its numbering
(workers.ina.tree), the controller's tree over a plan and its refusal
(controller.plan.hierarchy), the switch rules it becomes and their re-assignment
(controller.dataplane.deploy), and the PS's exact merge of a job of more than 64 workers."""

from __future__ import annotations

import numpy as np
import pytest

from controller.dataplane.deploy import SwitchJob, rule_changes, switch_rules
from controller.plan.document import build_plan
from controller.plan.hierarchy import aggregation_tree, tree_gamma, tree_loads, without_switch
from controller.plan.lp import make_job, solve_lp
from topo.mininet_net import plan_network
from topo.models import fat_tree, hosts, parse_topology, switch_ids
from workers.ina import constants as C
from workers.ina.messages import fold_mask
from workers.ina.ps import PsState
from workers.ina.tree import SWITCH, WORKER, Child, Tree, TreeError
from workers.ina.wire import Flag, InaPacket, MsgType
from workers.ina.worker import WorkerRound

ING = "MyIngress."


# ---------------------------------------------------------------- the tree and its numbering


def test_assign_numbers_children_and_a_reassignment_moves_no_survivor() -> None:
    parents = {Child(WORKER, w): 5 for w in (3, 1, 2)} | {Child(SWITCH, 5): 9,
                                                          Child(WORKER, 4): 9}
    t = Tree.assign(9, parents)
    assert t.children == {5: [Child(WORKER, 1), Child(WORKER, 2), Child(WORKER, 3)],
                          9: [Child(SWITCH, 5), Child(WORKER, 4)]}
    assert (t.fan_in(5), t.parent(5), t.parent(9), t.first) == (3, 9, 0, {1: 5, 2: 5, 3: 5,
                                                                           4: 9})
    assert t.workers_below(9) == 0b11110
    # worker 2 leaves, worker 7 comes to switch 5: 1 and 3 keep their bits, 7 takes the hole
    del parents[Child(WORKER, 2)]
    parents[Child(WORKER, 7)] = 5
    t2 = Tree.assign(9, parents, previous=t)
    assert t2.children[5] == [Child(WORKER, 1), Child(WORKER, 7), Child(WORKER, 3)]
    del parents[Child(WORKER, 7)]
    t3 = Tree.assign(9, parents, previous=t2)
    assert t3.children[5] == [Child(WORKER, 1), None, Child(WORKER, 3)] and t3.fan_in(5) == 2
    assert Tree.from_json(t3.to_json()).children == t3.children


def test_worker_set_reads_every_piece_and_refuses_what_is_not_the_trees() -> None:
    t = Tree.assign(9, {Child(WORKER, 100): 5, Child(WORKER, 101): 5, Child(SWITCH, 5): 9,
                        Child(WORKER, 200): 9})
    P, G = MsgType.PARTIAL, MsgType.GRAD
    assert t.worker_set(G, 101, 0, 1) == 1 << 101
    assert t.worker_set(P, 5, 0b10, 1) == 1 << 101
    assert t.worker_set(P, 9, 0b01, 1) == 1 << 100 | 1 << 101
    assert t.worker_set(P, 9, 0b11, 2) == 1 << 100 | 1 << 101 | 1 << 200
    assert t.worker_set(G, 102, 0, 1) is None          # no such worker
    assert t.worker_set(P, 7, 0b1, 1) is None           # no such switch
    assert t.worker_set(P, 5, 0b100, 1) is None         # no child 2 at switch 5
    assert t.worker_set(P, 5, 0b11, 1) is None          # count disagrees with the bits
    with pytest.raises(TreeError, match="child twice"):
        Tree(9, {9: [Child(WORKER, 1), Child(WORKER, 1)]}, {1: 9})


# ---------------------------------------------------------------- the controller's tree


def _job(graph, deployed=()):
    hs = hosts(graph)
    ids = switch_ids(graph)
    tor = next(iter(graph.adj[hs[0]]))
    job = make_job(graph, hs[0], hs[1:])
    plan = build_plan(job, solve_lp(job, list(deployed)), budget=len(deployed))
    return plan, ids, tor


def test_tree_over_the_routing_fits_127_workers_in_a_k8_fat_tree() -> None:
    g = fat_tree(8)
    plan, ids, tor = _job(g)
    job = plan.job
    root = plan.switch_ids[tor]
    # no switch but the PS's ToR: it sums 64 workers, the other 63 are the PS's children
    t0 = aggregation_tree(g, job, plan.switch_ids)
    assert t0.fan_in(root) == 64 and t0.parent(root) == 0
    to_ps = {w for w, f in t0.first.items() if f == 0}
    assert len(to_ps) == 63 and t0.workers_below(root) | sum(1 << w for w in to_ps) == (
        (1 << 127) - 1)
    # the PS's link carries the root's PARTIAL and 63 workers' GRADs: γ = bw / 64
    assert tree_gamma(g, job, t0) == pytest.approx(1 / 64)
    # ... the link the tree's loads fill at that γ (the prediction compares links with them)
    loads = {(x["from"], x["to"]): x["load"] / x["bw"] for x in tree_loads(g, job, t0)}
    assert loads[(tor, "h0")] == pytest.approx(1.0) and max(loads.values()) == pytest.approx(1)
    assert loads[("h0", tor)] == pytest.approx(1 / 64)  # the RESULT stream
    # a narrower program: the same spread, the root at its width
    assert aggregation_tree(g, job, plan.switch_ids, width=8).fan_in(root) == 8
    # every ToR aggregates its hosts: the root counts 31 ToRs and its own 3 workers
    edges = [s for s in ids if s.startswith("edge") and s != tor]
    from dataclasses import replace
    t = aggregation_tree(g, replace(job, deployed=edges), plan.switch_ids)
    assert t.root == root and t.fan_in(root) == 34
    assert {t.fan_in(plan.switch_ids[e]) for e in edges} == {4}
    assert t.workers_below(root) == (1 << 127) - 1
    assert all(t.parent(plan.switch_ids[e]) == root for e in edges)
    # the root's 4 uplinks carry 31 PARTIAL streams, its downlinks 31 RESULT streams
    assert tree_gamma(g, replace(job, deployed=edges), t) == pytest.approx(4 / 31)
    # width 16: the root keeps its 16 places for the ToRs below (its own 3 workers go to
    # the nearest ToRs with room, off their paths), and 15 ToRs find it full: they are
    # children of the PS, whose PARTIALs the root sends on unaggregated (no child entry)
    t16 = aggregation_tree(g, replace(job, deployed=edges), plan.switch_ids, width=16)
    assert t16.fan_in(root) == 16
    orphans = [e for e in edges if t16.parent(plan.switch_ids[e]) == 0]
    assert len(orphans) == 15 and not [w for w, f in t16.first.items() if f == 0]
    assert sorted(t16.fan_in(plan.switch_ids[e]) for e in edges) == [4] * 28 + [5] * 3
    # what reaches the switches is still checked: a row past the width, one line naming it
    wide = Tree.assign(root, {Child(WORKER, w): root for w in range(65)},
                       names={root: tor})
    with pytest.raises(TreeError) as exc:
        wide.check_width()
    assert str(exc.value).count("\n") == 0 and f"{tor}: 65 children" in str(exc.value)


def test_a_1023_worker_job_at_k16_spreads_over_full_switches_to_the_ps() -> None:
    from dataclasses import replace

    g = fat_tree(16)
    hs = hosts(g)
    job = make_job(g, hs[0], hs[1:])
    sid = switch_ids(g)
    plan = build_plan(job, solve_lp(job, []), budget=0)
    every = (1 << 1023) - 1
    for dep in ([], ["core0", "core8", "core16", "core24"],
                [f"agg{i}" for i in range(8)] + [f"edge{i}" for i in range(1, 9)]):
        jp = replace(plan.job, deployed=dep)
        t = aggregation_tree(g, jp, sid)
        t.check_width()
        assert max(t.fan_in(s) for s in t.children) <= C.MAX_WORKERS
        to_ps = sum(1 << w for w, f in t.first.items() if f == 0)
        # every worker exactly once: below the root or a child of the PS
        assert t.workers_below(t.root) & to_ps == 0 and t.workers_below(t.root) | to_ps == every
        # every point with children reaches the root (none of them a child of the PS)
        assert all(t.parent(s) for s in t.children if s != t.root)
        assert 0 < tree_gamma(g, jp, t) <= 1 / (to_ps.bit_count() + 1)
    # the four cores and the root are full: 5 x 64 less the 4 cores' places at the root
    assert t.fan_in(sid["edge0"]) == 64
    # 16 cores (the greedy's budget 16): pod 0's 63 workers reach edge0 without a core, and
    # edge0 keeps 16 places for the cores; the 15 it cannot take go to the nearest core
    # with room, off their shortest paths, instead of to the PS
    cores = [f"core{i}" for i in (0, 1, 8, 9, 16, 17, 24, 25, 32, 33, 40, 41, 48, 49, 56, 57)]
    jp = replace(plan.job, deployed=cores)
    t = aggregation_tree(g, jp, sid)
    assert not [w for w, f in t.first.items() if f == 0]
    assert t.workers_below(t.root) == every and t.fan_in(sid["edge0"]) == 64
    assert max(t.fan_in(sid[c]) for c in cores) <= 64
    detoured = [w for w, f in t.first.items() if f in {sid[c] for c in cores}
                and hs[1 + w] in [f"h{i}" for i in range(1, 64)]]
    assert len(detoured) == 15
    assert tree_gamma(g, jp, t) > 16 / 960  # more than the 1 + 15 streams into the PS allowed
def test_rules_of_a_hierarchical_job_and_a_reassignment_writes_only_differences() -> None:
    g = parse_topology("fattree:4")
    plan, ids, tor = _job(g)
    from dataclasses import replace
    aggs = ["agg0", "agg2"]  # pod 0 and pod 1
    job = replace(plan.job, deployed=aggs)
    plan = replace(plan, jobs={k: job for k in plan.jobs})
    t = aggregation_tree(g, job, plan.switch_ids)
    net = plan_network(g)
    addrs = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    workers = tuple(job.workers)
    rules = switch_rules(g, plan, net.ports, addrs, [SwitchJob(1, workers, tree=t)])
    sid = plan.switch_ids
    for s in [tor, *aggs]:
        (entry,) = [e for e in rules[s].entries if e.table == ING + "job_table"]
        p = entry.params
        assert (p["hier"], p["fan_in"], p["full_mask"]) == (1, t.fan_in(sid[s]), 0)
        assert p["tor_id"] == (t.parent(sid[s]) or sid[tor])
        kids = {(e.match["hdr.ina.msg_type"], e.match["hdr.ina.worker_id"]): e.params["index"]
                for e in rules[s].entries if e.table == ING + "ina_child"}
        want = {(MsgType.GRAD if c.kind == WORKER else MsgType.PARTIAL, c.id): i
                for i, c in enumerate(t.children[sid[s]]) if c is not None}
        assert kids == want and kids
    # three levels: pod 1's aggregation switch reaches the root through agg0
    assert (t.parent(sid["agg2"]), t.parent(sid["agg0"]), t.root) == (sid["agg0"], sid[tor],
                                                                      sid[tor])
    # worker 0 leaves: its parent loses one child entry and one fan-in, nothing else moves
    members = [w for w in job.workers if w != workers[0]]
    t2 = aggregation_tree(g, job, plan.switch_ids, members, previous=t)
    rules2 = switch_rules(g, plan, net.ports, addrs, [SwitchJob(1, workers, tree=t2)])
    where = t.first[0]
    name = next(s for s in sid if sid[s] == where)
    for s in rules:
        ch = rule_changes(rules[s], rules2[s])
        if s != name:
            assert ch.writes == 0, s
            continue
        assert [e.match["hdr.ina.worker_id"] for e in ch.delete] == [0]
        assert [e.params["fan_in"] for e in ch.modify] == [t.fan_in(where) - 1]
        assert not ch.insert and ch.writes == 2


def test_without_a_dead_switch_its_children_go_to_the_ps_and_no_fan_in_grows() -> None:
    # root 9 <- {switch 5 <- {switch 3 <- workers 1, 2}, worker 4}, worker 6; 3 dies
    t = Tree.assign(9, {Child(WORKER, 1): 3, Child(WORKER, 2): 3, Child(SWITCH, 3): 5,
                        Child(SWITCH, 5): 9, Child(WORKER, 4): 9, Child(WORKER, 6): 0})
    t2 = without_switch(t, 3)
    # 3's workers and 5 (left with no child) are the PS's now; 9 keeps 4 at its index
    assert t2.first == {1: 0, 2: 0, 4: 9, 6: 0} and 3 not in t2.children
    assert 5 not in t2.children and t2.children[9] == [None, Child(WORKER, 4)]
    assert all(t2.fan_in(s) <= t.fan_in(s) for s in t2.children)
    assert t2.workers_below(9) == 1 << 4


def test_a_schedule_change_carries_a_tree_checked_against_the_job() -> None:
    from workers.ina.control import ControlLog, JobBounds, RequestError, check_record

    job = JobBounds(job_id=1, workers=tuple(range(70)), n_chunks=1, rounds=5)
    tree = Tree.assign(9, {Child(WORKER, w): 9 for w in range(64)}
                       | {Child(WORKER, w): 0 for w in range(64, 70)})
    sched = {"3": [[0, 9, 64]]}
    req = {"kind": "schedules", "from_round": 2, "schedules": sched, "cause": {"switch": "x"}}
    log = ControlLog(job)
    change = log.accept({**req, "tree": tree.to_json()}, 0)
    assert change.tree == tree.to_json() and Tree.from_json(change.tree) == tree
    # the workers read it back from the record, checked the same way
    again = check_record(log.record.to_json(), job)
    assert again.changes[0].tree == tree.to_json()
    for bad in ({"root": 9}, [1, 2], {**tree.to_json(), "first": {"70": 9}}):
        with pytest.raises(RequestError, match="tree"):
            ControlLog(job).accept({**req, "tree": bad}, 0)


# ---------------------------------------------------------------- the PS, past 64 workers


N = 150  # three leaves of 50 workers under one root
LEAVES = (11, 12, 13)
ROOT = 9


def _big_tree() -> Tree:
    parents = {Child(WORKER, w): LEAVES[w // 50] for w in range(N)}
    parents |= {Child(SWITCH, s): ROOT for s in LEAVES}
    return Tree.assign(ROOT, parents)


def _partial(sender: int, bits: int, values: np.ndarray, chunk: int, flags: int = 0,
             agg: int = 0) -> InaPacket:
    return InaPacket(MsgType.PARTIAL, flags, 1, 0, chunk, agg, 0, bits.bit_count(), sender,
                     bits, values.astype(np.int32))


def test_ps_merges_a_150_worker_job_exactly_from_any_mix_of_levels() -> None:
    t = _big_tree()
    rng = np.random.default_rng(3)
    g = rng.integers(-(2**20), 2**20, size=(N, C.K)).astype(np.int64)
    exact = g.sum(axis=0)
    ps = PsState(1, range(N), n_chunks=4, tree=t)
    # chunk 0: the root's complete PARTIAL (children 0, 1, 2)
    out = ps.on_packet(_partial(ROOT, 0b111, exact, 0))
    assert out.results[0].values.tolist() == exact.tolist()
    # ... its RESULT's bitmap: the members folded to 64 bits (all of them here)
    assert out.results[0].bitmap == fold_mask((1 << N) - 1) == (1 << 64) - 1
    # chunk 1: leaf 11 complete, leaf 12 flushed with 20 of its children, the rest of 12's
    # workers as raw GRADs, leaf 13 complete but re-emitted (a duplicate), and the root's
    # flush of child 0 (leaf 11 again, through the root): no worker counted twice
    c = 1
    half = sum(1 << i for i in range(20))
    pieces = [_partial(11, (1 << 50) - 1, g[0:50].sum(axis=0), c),
              _partial(12, half, g[50:70].sum(axis=0), c, Flag.RETRANSMIT | Flag.INCOMPLETE),
              _partial(ROOT, 0b001, g[0:50].sum(axis=0), c, Flag.RETRANSMIT | Flag.INCOMPLETE),
              _partial(13, (1 << 50) - 1, g[100:150].sum(axis=0), c),
              _partial(13, (1 << 50) - 1, g[100:150].sum(axis=0), c, Flag.RETRANSMIT)]
    pieces += [InaPacket.grad(1, 0, c, 0, 1, w, g[w].astype(np.int32),
                              Flag.RETRANSMIT | Flag.FALLBACK, hierarchical=True)
               for w in range(70, 100)]
    rng.shuffle(pieces)
    results = [r for p in pieces for r in ps.on_packet(p).results]
    assert len(results) == 1 and results[0].values.tolist() == exact.tolist()
    assert ps.stats.malformed == 0 and ps.stats.duplicates == 2
    # a flat-job GRAD (a bit set) or a bit that is no child: malformed, never summed
    bad = InaPacket(MsgType.GRAD, 0, 1, 0, 2, 0, 1, 1, 3, 1 << 3, g[3].astype(np.int32))
    assert ps.on_packet(bad).results == []
    assert ps.on_packet(_partial(11, 1 << 50, g[0], 2)).results == []
    assert ps.stats.malformed_reasons == {"child": 2}


def test_a_hierarchical_flush_nacks_the_workers_below_its_switch_it_lacks() -> None:
    t = _big_tree()
    g = np.arange(N * C.K, dtype=np.int64).reshape(N, C.K) % 1000
    routes = {w: [(c, LEAVES[w // 50], 50) for c in range(4)] for w in range(N)}
    ps = PsState(1, range(N), n_chunks=4, tree=t, routes=routes)
    # leaf 12 flushes 48 of its 50 children (workers 50..97): the PS asks 98 and 99 alone
    bits = (1 << 48) - 1
    out = ps.on_packet(_partial(12, bits, g[50:98].sum(axis=0), 0,
                                Flag.RETRANSMIT | Flag.INCOMPLETE))
    assert sorted(w for w, _ in out.nacks) == [98, 99] and ps.stats.nacks == 2
    for w, nack in out.nacks:
        assert nack.flags & Flag.INCOMPLETE and not nack.values.any()
        # the present set (all but the asked) folded, the asked worker's folded bit clear
        present = (1 << N) - 1 & ~(1 << 98 | 1 << 99)
        assert nack.bitmap == fold_mask(present) & ~(1 << (w % 64))
    # the worker takes it and resends at once; a worker whose bit is set does not
    q = np.ones(C.K * 4, dtype=np.int32)
    wr = WorkerRound(job_id=1, worker_id=99, round_=0, values=q,
                     schedule=routes[99], hierarchical=True, members=list(range(N)))
    wr.start(0.0)
    nack99 = dict(out.nacks)[99]
    again = wr.on_packet(nack99, 1.0)
    assert [(p.chunk_id, p.worker_id, p.flags & Flag.RETRANSMIT) for p in again] == [
        (0, 99, Flag.RETRANSMIT)] and wr.stats.nacks == 1
    wr98 = WorkerRound(job_id=1, worker_id=98, round_=0, values=q,
                       schedule=routes[98], hierarchical=True, members=list(range(N)))
    wr98.start(0.0)
    assert wr98.on_packet(nack99, 1.0) == [] and wr98.stats.unexpected_results == 1
    # the root's flush of leaf 11's PARTIAL lacks everything below the root it has not got:
    # leaf 11's 50 are there, 12's 48 too; 98, 99 and leaf 13's 50 are asked
    out = ps.on_packet(_partial(ROOT, 0b001, g[0:50].sum(axis=0), 0,
                                Flag.RETRANSMIT | Flag.INCOMPLETE))
    assert sorted(w for w, _ in out.nacks) == [98, 99, *range(100, 150)]
    # the rest comes: exact
    pieces = [InaPacket.grad(1, 0, 0, 0, 1, w, g[w].astype(np.int32), Flag.RETRANSMIT,
                             hierarchical=True) for w in (98, 99)]
    pieces.append(_partial(13, (1 << 50) - 1, g[100:150].sum(axis=0), 0))
    results = [r for p in pieces for r in ps.on_packet(p).results]
    # one RESULT, in one copy: NACKs alone (54 in this round) show no RESULT lost, and
    # flushes come from queues too ("Lost RESULTs", workers/ina/result_copies.py)
    assert len(results) == ps.copies(0) == 1
    assert all(r.values.tolist() == g.sum(axis=0).tolist() for r in results)


def test_a_worker_past_64_takes_its_result_by_its_folded_bit() -> None:
    q = np.arange(C.K * 2, dtype=np.int32)
    wr = WorkerRound(job_id=1, worker_id=130, round_=0, values=q,
                     schedule=[(0, 11, 50), (1, 11, 50)], hierarchical=True,
                     expect_mask=(1 << N) - 1)
    first = wr.start(0.0)
    assert [p.bitmap for p in first] == [0, 0] and first[0].worker_id == 130
    res = InaPacket.result(1, 0, 0, fold_mask((1 << N) - 1), q[:C.K] * 2)
    wr.on_packet(res, 0.1)
    assert wr.stats.unexpected_results == 0 and wr.stats.results == 1
    with pytest.raises(ValueError, match="outside 0..63"):
        InaPacket.grad(1, 0, 0, 0, 1, 130, q[:C.K])


def test_workers_all_is_every_host_but_the_ps() -> None:
    from controller.plan.document import resolve_workers

    g = fat_tree(4)
    assert resolve_workers(g, "h0", "all") == [h for h in hosts(g) if h != "h0"]
    assert len(resolve_workers(fat_tree(8), "h3", " all ")) == 127
