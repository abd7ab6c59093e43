"""Chunk schedule of docs/design.md §3.5: hand-traced cases and consistency with a real plan."""

from dataclasses import replace

import pytest

from controller.plan.document import build_plan, chunk_schedule
from controller.plan.greedy import greedy
from controller.plan.lp import PlanError, make_job
from controller.plan.types import JobPlan
from topo.models import parse_topology

IDS = {"s1": 1, "s2": 2, "tor": 3}
HAND = JobPlan(
    ps="ps", ps_tor="tor", ps_tor_id=3, gamma=1.0,
    workers=["w1", "w2", "w3"], worker_ids={"w1": 0, "w2": 1, "w3": 2},
    deployed=["s1", "s2"],
    intervals={"s1": {"offset": 0.0, "length": 0.5}, "s2": {"offset": 0.5, "length": 0.25}},
    fractions={"w1": {"s1": 0.5, "s2": 0.25}, "w2": {"s1": 0.25, "s2": 0.0},
               "w3": {"s1": 0.0, "s2": 0.1}},
)


def test_hand_traced_eight_chunks():
    sch = chunk_schedule(HAND, 8, switch_ids=IDS)
    # p = 1/16, 3/16 in I_s1: w1 (0.5), w2 (0.25) qualify, w3 (0) not -> fan_in 2
    # p = 5/16, 7/16: only w1 (p < 0.5) -> fan_in 1
    # p = 9/16: I_s2, p - o = 1/16: w1 (0.25), w3 (0.1) -> fan_in 2; p = 11/16: 3/16 -> w1 only
    # p = 13/16, 15/16: beyond 0.75, no interval -> everyone to the ToR (id 3, fan_in 3)
    assert sch["w1"] == [(0, 1, 2), (1, 1, 2), (2, 1, 1), (3, 1, 1),
                         (4, 2, 2), (5, 2, 1), (6, 3, 3), (7, 3, 3)]
    assert sch["w2"] == [(0, 1, 2), (1, 1, 2), (2, 3, 3), (3, 3, 3),
                         (4, 3, 3), (5, 3, 3), (6, 3, 3), (7, 3, 3)]
    assert sch["w3"] == [(0, 3, 3), (1, 3, 3), (2, 3, 3), (3, 3, 3),
                         (4, 2, 2), (5, 3, 3), (6, 3, 3), (7, 3, 3)]


def test_one_chunk_and_boundaries():
    # one chunk: p = 0.5 = o_s2 exactly -> belongs to I_s2 (half-open [o, o+len)), p - o = 0
    # and 0 < x/γ holds for w1 (0.25) and w3 (0.1)
    sch = chunk_schedule(HAND, 1, switch_ids=IDS)
    assert sch == {"w1": [(0, 2, 2)], "w2": [(0, 3, 3)], "w3": [(0, 2, 2)]}
    # four chunks: p = 1/8 (s1: w1, w2), 3/8 (s1: w1), 5/8 (s2: p-o = 1/8: w1 only), 7/8 (ToR)
    sch = chunk_schedule(HAND, 4, switch_ids=IDS)
    assert [t[1:] for t in sch["w1"]] == [(1, 2), (1, 1), (2, 1), (3, 3)]
    assert [t[1:] for t in sch["w3"]] == [(3, 3), (3, 3), (3, 3), (3, 3)]


def test_no_deployment_everything_to_tor():
    plan = replace(HAND, deployed=[], intervals={})
    sch = chunk_schedule(plan, 5, switch_ids=IDS)
    assert all(t[1:] == (3, 3) for w in sch for t in sch[w])


@pytest.mark.parametrize("n", [0, -3, 2.5])
def test_bad_chunk_count(n):
    with pytest.raises(PlanError, match="chunks"):
        chunk_schedule(HAND, n, switch_ids=IDS)


def test_schedule_of_a_real_plan_is_consistent():
    g = parse_topology("fattree:4")
    job = make_job(g, "h0", [f"h{i}" for i in range(1, 16)])
    res = greedy(job, 3)
    plan = build_plan(job, res.lp, budget=3)
    n = 4000
    sch = chunk_schedule(plan, n)
    ids = plan.switch_ids
    by_id = {v: k for k, v in ids.items()}
    for c in range(n):
        targets = {}
        for w in plan.job.workers:
            cc, agg, fan = sch[w][c]
            assert cc == c
            targets.setdefault((agg, fan), []).append(w)
        for (agg, fan), ws in targets.items():
            if by_id[agg] == plan.job.ps_tor:
                assert fan == len(plan.job.workers)  # s_d completes on the full mask
            else:
                assert fan == len(ws)  # fan_in counts exactly the senders of this chunk
    # the share of chunks each worker sends to s approximates x_{w,s}/γ
    for w in plan.job.workers:
        for s in plan.job.deployed:
            share = sum(1 for t in sch[w] if t[1] == ids[s]) / n
            assert share == pytest.approx(plan.job.fractions[w][s], abs=2 / n)
    # the intervals tile a prefix of [0, 1)
    off = 0.0
    for s in plan.job.deployed:
        assert plan.job.intervals[s]["offset"] == pytest.approx(off)
        off += plan.job.intervals[s]["length"]
    assert off <= 1 + 1e-9
