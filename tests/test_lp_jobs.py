"""Several jobs sharing programmable switches (docs/design.md §3.10): joint LP values by hand."""

import json

import pytest

from controller.plan.document import chunk_schedule
from controller.plan.greedy import greedy
from controller.plan.jobs import JobEntry, jobs_from_count
from controller.plan.joint import alone_gammas, greedy_jobs, jobs_summary_lines, plan_jobs
from controller.plan.lp import PlanError, make_job, solve_lp
from controller.plan.lp_jobs import jain, make_jobset, per_job_sets, solve_jobs_lp
from topo.models import from_dict, parse_topology, switch_ids

AB = [JobEntry("A", "pa", ("a1", "a2")), JobEntry("B", "pb", ("b1", "b2"))]


def together(extra_hosts=(), extra_links=()):
    """T1: a1, a2 (job A) and b1, b2 (job B) under leaf1; pa under leaf2, pb under leaf3;
    leaf1, leaf2, leaf3 hang off one spine.  Every link has capacity 1."""
    ws = ["a1", "a2", "b1", "b2"]
    links = [{"a": w, "b": "leaf1"} for w in ws]
    links += [{"a": "pa", "b": "leaf2"}, {"a": "pb", "b": "leaf3"}]
    links += [{"a": leaf, "b": "spine"} for leaf in ("leaf1", "leaf2", "leaf3")]
    return from_dict({"hosts": ws + ["pa", "pb", *extra_hosts],
                      "switches": ["leaf1", "leaf2", "leaf3", "spine"],
                      "links": links + list(extra_links)}, "t1.json")


def apart():
    """T2: a1, a2 (A) under leaf1; b1, b2 (B) under leaf2; both PSs pa, pb under leaf3;
    leaf1, leaf2, leaf3 hang off one spine.  Every link has capacity 1."""
    links = [{"a": "a1", "b": "leaf1"}, {"a": "a2", "b": "leaf1"},
             {"a": "b1", "b": "leaf2"}, {"a": "b2", "b": "leaf2"},
             {"a": "pa", "b": "leaf3"}, {"a": "pb", "b": "leaf3"}]
    links += [{"a": leaf, "b": "spine"} for leaf in ("leaf1", "leaf2", "leaf3")]
    return from_dict({"hosts": ["a1", "a2", "b1", "b2", "pa", "pb"],
                      "switches": ["leaf1", "leaf2", "leaf3", "spine"], "links": links},
                     "t2.json")


def gammas(res):
    return [res.gammas[n] for n in res.names]


def test_sharing_a_switch_beats_splitting():
    """T1 (:func:`together`), max-min, no switch capacities.

    Every worker's uplink leaf1→spine is the bottleneck: whatever is not summed at leaf1
    crosses it once per worker.

    * S = ∅ (only leaf2, leaf3 aggregate, behind the bottleneck): leaf1→spine carries all
      four raw streams, 2γ_A + 2γ_B ≤ 1 → γ_A = γ_B = 1/4.  S = {spine}: the same, 1/4.
    * S = {leaf1}, shared: both jobs sum there (x = a = γ_j), leaf1→spine carries one
      stream per job, γ_A + γ_B ≤ 1 → 1/2 each (every other link carries ≤ one γ_j).
    * S = {leaf1} given to A only (split): leaf1→spine carries γ_A + 2γ_B ≤ 1; with
      γ_A = γ_B = t, 3t ≤ 1 → 1/3 each; neither can rise without the other falling
      (γ_A ≤ 1 − 2/3, γ_B ≤ (1 − 1/3)/2), so the water-filling stops at (1/3, 1/3).
      B aggregating on leaf2 (A's PS ToR) does not help: leaf2 is behind the bottleneck.
    * Greedy, budget 2: leaf1 (1/2 > 1/4 for spine); then {leaf1, spine} is still 1/2
      (leaf1→spine carries γ_A + γ_B however the spine helps): stop with S = (leaf1,).
    """
    js = make_jobset(together(), AB)
    assert js.tors == ["leaf2", "leaf3"]
    assert gammas(solve_jobs_lp(js, [])) == pytest.approx([0.25, 0.25])
    assert gammas(solve_jobs_lp(js, ["spine"])) == pytest.approx([0.25, 0.25])
    shared = solve_jobs_lp(js, ["leaf1"])
    assert gammas(shared) == pytest.approx([0.5, 0.5])
    assert shared.loads["leaf1", "spine"] == pytest.approx(1.0)
    for r in shared.results:  # each job sends everything to leaf1
        assert r.a["leaf1"] == pytest.approx(0.5)
        assert all(r.x[w, "leaf1"] == pytest.approx(0.5) for w in r.job.workers)
    split = solve_jobs_lp(js, ["leaf1"], allow={"leaf1": ["A"]})
    assert gammas(split) == pytest.approx([1 / 3, 1 / 3])
    assert per_job_sets(js, ["leaf1"], {"leaf1": ["A"]}) == [["leaf1", "leaf3"], ["leaf2"]]
    res = greedy_jobs(js, 2)
    assert res.deployed == ("leaf1",)
    assert gammas(res.result) == pytest.approx([0.5, 0.5])
    assert res.result.fairness == pytest.approx(1.0)


def test_sharing_does_not_beat_splitting_when_capacity_binds():
    """T2 (:func:`apart`), max-min, C_s = 1 on every switch (aggregation input rate).

    All of job j's traffic enters leaf3 over spine→leaf3; per job it carries
    a^j + 2u^j ≥ 2γ_j − X_j where X_j = Σ_s x^j_{w,s} per worker (a ≥ x).  With γ_A = γ_B = t
    and X_A = X_B = X: spine→leaf3 gives 4t − 2X ≤ 1 (leaf3's shared capacity,
    Σ_j (Σ_w u^j_w + a^j) ≤ 1, gives the same row).

    * S = ∅: X = 0 → t = 1/4.
    * One shared switch, S = {spine} (or {leaf1}: B reaches it through the spine): both jobs
      sum there, its shared capacity gives 2X_A + 2X_B = 4X ≤ 1, X ≤ 1/4, so
      t ≤ (1 + 1/2)/4 = 3/8 (attained: x = a = 1/4, u = 1/8; leaf1→spine carries
      2t − X = 1/2 for A).
    * Split, S = {leaf1, leaf2}, leaf1 for A only, leaf2 for B only: each switch sums one
      job, 2X_j ≤ 1, so X_j = t = 1/2 is allowed and spine→leaf3 carries t + t ≤ 1 → 1/2.
      Letting both jobs use both switches gives the same 1/2: γ_A + γ_B ≤ 1 on spine→leaf3
      whatever the switches do, so sharing gains nothing here.
    * Greedy, budget 2: leaf1, leaf2 and spine all give 3/8 (tie → leaf1), then leaf2 gives
      1/2.  Without capacities, the one shared spine already gives the bound 1/2.
    """
    js = make_jobset(apart(), AB, capacity=1.0)
    assert js.tors == ["leaf3"]
    assert gammas(solve_jobs_lp(js, [])) == pytest.approx([0.25, 0.25])
    one = solve_jobs_lp(js, ["spine"])
    assert gammas(one) == pytest.approx([3 / 8, 3 / 8])
    assert sum(r.x[r.job.workers[0], "spine"] for r in one.results) == pytest.approx(0.5)
    assert gammas(solve_jobs_lp(js, ["leaf1"])) == pytest.approx([3 / 8, 3 / 8])
    split = solve_jobs_lp(js, ["leaf1", "leaf2"], allow={"leaf1": ["A"], "leaf2": ["B"]})
    both = solve_jobs_lp(js, ["leaf1", "leaf2"])
    assert gammas(split) == pytest.approx([0.5, 0.5])
    assert gammas(both) == pytest.approx(gammas(split))
    res = greedy_jobs(js, 2)
    assert res.deployed == ("leaf1", "leaf2")
    assert [s for s, _ in res.history] == ["leaf1", "leaf2"]
    assert res.history[0][1] == pytest.approx((3 / 8, 3 / 8))
    assert gammas(res.result) == pytest.approx([0.5, 0.5])
    free = make_jobset(apart(), AB)
    assert gammas(solve_jobs_lp(free, ["spine"])) == pytest.approx([0.5, 0.5])


def test_weights_change_the_split():
    """T1, S = {leaf1} shared, w_A = 2, w_B = 1: leaf1→spine gives γ_A + γ_B ≤ 1 and max-min
    of γ_j / w_j sets γ_A = 2t, γ_B = t → 3t = 1: γ = (2/3, 1/3) (γ_A ≤ 1 on A's other
    links).  The planned γ_j / w_j are equal, so Jain's index is 1; of the raw γ it would be
    (1)² / (2·(4/9 + 1/9)) = 0.9.  Swapping the weights swaps the split."""
    g = together()
    heavy_a = [JobEntry("A", "pa", ("a1", "a2"), weight=2), AB[1]]
    res = solve_jobs_lp(make_jobset(g, heavy_a), ["leaf1"])
    assert gammas(res) == pytest.approx([2 / 3, 1 / 3])
    assert res.fairness == pytest.approx(1.0)
    assert jain(gammas(res)) == pytest.approx(0.9)
    heavy_b = [AB[0], JobEntry("B", "pb", ("b1", "b2"), weight=2)]
    assert gammas(solve_jobs_lp(make_jobset(g, heavy_b), ["leaf1"])) == pytest.approx(
        [1 / 3, 2 / 3])


def test_sum_versus_maxmin():
    """T1 with leaf1 given to A only (the split of the first test):

    * max-min: (1/3, 1/3), Σ = 2/3, Jain 1.
    * sum: maximize γ_A + γ_B subject to γ_A + 2γ_B ≤ 1 (leaf1→spine), γ_A ≤ 1 (A's access
      link, spine→leaf2, leaf2→pa), γ_B ≤ 1/2 (spine→leaf3 carries 2γ_B): the vertex
      γ_A = 1, γ_B = 0 with Σ = 1 is the only optimum (any γ_B > 0 costs 2γ_B of γ_A).  B
      starves: Jain of (1, 0) is 1²/(2·1) = 1/2.
    * shared leaf1: the sum optimum γ_A + γ_B = 1 has many splits; the max-min tie-break
      picks (1/2, 1/2).  S = ∅: Σ = 1/2, again split (1/4, 1/4).
    * Greedy with the sum objective on T1 picks leaf1 (Σ 1/2 → 1).
    """
    js = make_jobset(together(), AB)
    allow = {"leaf1": ["A"]}
    mm = solve_jobs_lp(js, ["leaf1"], allow=allow, objective="maxmin")
    sm = solve_jobs_lp(js, ["leaf1"], allow=allow, objective="sum")
    assert gammas(mm) == pytest.approx([1 / 3, 1 / 3])
    assert gammas(sm) == pytest.approx([1.0, 0.0], abs=1e-7)
    assert sm.fairness == pytest.approx(0.5)
    assert sum(gammas(sm)) > sum(gammas(mm))
    assert gammas(solve_jobs_lp(js, ["leaf1"], objective="sum")) == pytest.approx([0.5, 0.5])
    assert gammas(solve_jobs_lp(js, [], objective="sum")) == pytest.approx([0.25, 0.25])
    res = greedy_jobs(js, 1, objective="sum")
    assert res.deployed == ("leaf1",) and res.result.score[0] == pytest.approx(1.0)
    with pytest.raises(PlanError, match="unknown objective 'mean'"):
        solve_jobs_lp(js, [], objective="mean")


def test_water_filling_shares_out_what_is_left():
    """T1 plus job C: worker c1 and PS pc both under leaf2 (C's s_d = leaf2 = A's).  C's
    traffic uses only c1→leaf2 and leaf2→pc, so γ_C ≤ 1 independently of A and B.  S = ∅:
    the first stage gives t* = 1/4 (A and B blocked by leaf1→spine), C is not blocked and
    the second stage raises it to 1.  Plain "maximize min γ_j" would leave γ_C anywhere in
    [1/4, 1].  Jain of (1/4, 1/4, 1): (3/2)² / (3·(1/16 + 1/16 + 1)) = 2/3."""
    g = together(extra_hosts=["c1", "pc"],
                 extra_links=[{"a": "c1", "b": "leaf2"}, {"a": "pc", "b": "leaf2"}])
    js = make_jobset(g, [*AB, JobEntry("C", "pc", ("c1",))])
    res = solve_jobs_lp(js, [])
    assert gammas(res) == pytest.approx([0.25, 0.25, 1.0])
    assert res.fairness == pytest.approx(2 / 3)


def test_one_job_is_the_single_job_lp():
    """With one job the joint LP is docs/design.md §3.3's LP: fat-tree k=4, PS h0, 15 workers:
    ToR-only 1/7, S = {agg2} 1/3 (tests/test_planner.py), and the greedy agrees."""
    g = parse_topology("fattree:4")
    spec = JobEntry("only", "h0", tuple(f"h{i}" for i in range(1, 16)))
    js = make_jobset(g, [spec])
    job = make_job(g, "h0", spec.workers)
    assert gammas(solve_jobs_lp(js, [])) == pytest.approx([1 / 7])
    assert gammas(solve_jobs_lp(js, ["agg2"])) == pytest.approx([solve_lp(job, ["agg2"]).gamma])
    res = greedy_jobs(js, 1)
    single = greedy(job, 1)
    assert res.deployed == single.deployed == ("agg2",)
    assert res.result.results[0].gamma == pytest.approx(single.gamma)


def test_one_job_capacity_matches_single_job():
    """leaf-spine of tests/test_planner.py with C_s = 2: S = {leaf1} gives 5/8 in both
    models (the PS ToR's capacity row is the job's tor_input_terms there too)."""
    ws = ["w1", "w2", "w3", "w4"]
    links = [{"a": w, "b": "leaf1"} for w in ws]
    links += [{"a": "ps", "b": "leaf2"}, {"a": "leaf1", "b": "spine"},
              {"a": "leaf2", "b": "spine"}]
    g = from_dict({"hosts": ws + ["ps"], "switches": ["leaf1", "leaf2", "spine"],
                   "links": links})
    js = make_jobset(g, [JobEntry("j", "ps", tuple(ws))], capacity=2.0)
    assert gammas(solve_jobs_lp(js, ["leaf1"])) == pytest.approx([5 / 8])
    js = make_jobset(g, [JobEntry("j", "ps", tuple(ws))], capacity=0.1)
    assert gammas(solve_jobs_lp(js, [])) == pytest.approx([0.025])


def test_short_form_on_fat_tree():
    """``--jobs 2`` on fat-tree k=4: job1 = h0 (PS), h2, h4, …, h14; job2 = h1 (PS), h3, …,
    h15; both PSs under edge0.  ToR-only: all 14 workers are outside edge0 (h2, h3 under
    edge1 too) and reach it over agg0→edge0 and agg1→edge0, split evenly: 7γ ≤ 1 on each
    with γ_1 = γ_2 = γ → 1/7 each (the single job's 1/7 of 14 remote workers)."""
    g = parse_topology("fattree:4")
    js = make_jobset(g, jobs_from_count(g, 2))
    res = solve_jobs_lp(js, [])
    assert gammas(res) == pytest.approx([1 / 7, 1 / 7])
    assert res.loads["agg0", "edge0"] == pytest.approx(1.0)
    assert res.loads["edge0", "h0"] == pytest.approx(1 / 7)


def test_plan_part_and_schedule():
    """The plan's jobs part: per job γ, weight, deployment; fairness; JSON-clean; a job's
    entry plus switch_ids is a plan that :func:`controller.plan.document.chunk_schedule` reads.
    Sum objective on the split T1 gives B γ = 0: no intervals, everything to its s_d."""
    g = together()
    js = make_jobset(g, AB)
    specs = [JobEntry("A", "pa", ("a1", "a2"), rounds=5), AB[1]]
    part = plan_jobs(js, greedy_jobs(js, 2), budget=2, specs=specs)
    json.dumps(part.to_json())
    assert part.deployed == ["leaf1"] and part.programmable == ["leaf1", "leaf2", "leaf3"]
    assert part.fairness == pytest.approx(1.0)
    assert part.min_gamma_per_weight == pytest.approx(0.5)
    a = part.jobs["A"]
    assert a.gamma == pytest.approx(0.5) and a.rounds == 5
    assert a.intervals["leaf1"] == pytest.approx({"offset": 0.0, "length": 1.0})
    sched = chunk_schedule(a, 4, switch_ids=switch_ids(g))
    leaf1 = switch_ids(g)["leaf1"]
    assert sched["a1"] == [(c, leaf1, 2) for c in range(4)]
    lines = jobs_summary_lines(part)
    assert "A  γ 0.5000" in lines[1] and "aggregates on {leaf1}" in lines[1]
    assert lines[-1].startswith("fairness (Jain's index of γ/w) 1.0000")
    # alone (budget 2): A alone sums on leaf1 and every link carries γ_A ≤ 1 → 1; B too
    alone = alone_gammas(js, 2)
    assert alone == pytest.approx({"A": 1.0, "B": 1.0})
    part = plan_jobs(js, greedy_jobs(js, 2), budget=2, alone=alone)
    assert part.jobs["B"].gamma_alone == pytest.approx(1.0)
    assert "γ 0.5000 (alone 1.0000)" in jobs_summary_lines(part)[2]
    starved = plan_jobs(js, solve_jobs_lp(js, ["leaf1"], allow={"leaf1": ["A"]},
                                          objective="sum"))
    b = starved.jobs["B"]
    assert b.gamma == pytest.approx(0.0, abs=1e-7) and b.intervals == {}
    assert starved.fairness == pytest.approx(0.5)


def test_jobset_errors():
    g = together()
    with pytest.raises(PlanError, match="job 'B': host 'a1' is already in job 'A'"):
        make_jobset(g, [AB[0], JobEntry("B", "pb", ("a1",))])
    with pytest.raises(PlanError, match="job 'B': unknown worker node 'zz'"):
        make_jobset(g, [AB[0], JobEntry("B", "pb", ("zz",))])
    with pytest.raises(PlanError, match="resolve the jobs"):
        make_jobset(g, [JobEntry("A", "pa", 2)])
    with pytest.raises(PlanError, match="no jobs"):
        make_jobset(g, [])
    js = make_jobset(g, AB)
    with pytest.raises(PlanError, match="'leaf2' is a PS's ToR"):
        solve_jobs_lp(js, ["leaf2"])
    with pytest.raises(PlanError, match="budget must be >= 0"):
        greedy_jobs(js, -1)


def test_jain():
    assert jain([1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain([0, 0]) == 1.0
