"""The ``tor_all`` planner (controller/plan/tor_all.py): ATP's placement, the ToRs of the
workers' racks, fullest first, at most M; one job and several."""

from __future__ import annotations

import pytest

from controller.plan.jobs import JobEntry
from controller.plan.lp import PlanError, make_job
from controller.plan.lp_fast import FastLP
from controller.plan.lp_jobs import make_jobset
from controller.plan.placement import as_jobs
from controller.plan.planners import PLANNERS, get_planner
from controller.plan.tor_all import tor_all, tor_of, worker_tors
from topo.models import parse_topology


def makerun_job():
    """make run's job: fat-tree k=4, PS h0 (edge0), workers h1 (edge0), h2 h3 (edge1),
    h4 h5 (edge2), h6 (edge3)."""
    return make_job(parse_topology("fattree:4"), "h0", [f"h{i}" for i in range(1, 7)])


def test_registered_and_the_racks_fullest_first():
    job = makerun_job()
    assert get_planner("tor_all") is tor_all and list(PLANNERS)[-1] == "tor_all"
    assert [tor_of(job.graph, h) for h in ("h0", "h1", "h2", "h6")] == [
        "edge0", "edge0", "edge1", "edge3"]
    # edge0 is the PS's ToR (in D, aggregates anyway); edge1 and edge2 hold 2 workers, edge3 one
    assert worker_tors(job) == ["edge1", "edge2", "edge3"]
    got = {b: tor_all(job, b).deployed for b in (0, 1, 2, 3, 10)}
    assert got == {0: (), 1: ("edge1",), 2: ("edge1", "edge2"),
                   3: ("edge1", "edge2", "edge3"), 10: ("edge1", "edge2", "edge3")}


def test_gamma_is_the_lp_of_its_set():
    """Every worker summed at its own rack: the PS's link carries one stream (γ = 1 without
    the RESULT term), against tor_only's 0.4 (ToR edge0 receives 5 of the 6 workers over its
    two uplinks)."""
    job = makerun_job()
    fast = FastLP(job)
    every = tor_all(job, 10, lp=fast)
    assert every.gamma == pytest.approx(fast(job, ["edge1", "edge2", "edge3"]).gamma)
    assert every.gamma == pytest.approx(1.0)
    assert PLANNERS["tor_only"](job, 10, lp=fast).gamma == pytest.approx(0.4)
    with pytest.raises(PlanError, match="budget must be >= 0"):
        tor_all(job, -1)


def test_a_rack_of_the_ps_alone_adds_nothing():
    """Workers only in the PS's rack: S = ∅ (the PS's ToR is in D)."""
    job = make_job(parse_topology("fattree:4"), "h0", ["h1"])
    assert worker_tors(job) == [] and tor_all(job, 4).deployed == ()


def test_several_jobs_take_every_jobs_racks():
    """Two jobs: the racks of both jobs' workers outside both PSs' ToRs, counted over the
    jobs, and the joint LP's score of that set."""
    g = parse_topology("fattree:4")
    js = make_jobset(g, [JobEntry("a", "h0", ("h1", "h2", "h3", "h8")),
                         JobEntry("b", "h4", ("h5", "h9", "h12"))])
    jobs = as_jobs(js)
    assert set(jobs.tors) == {"edge0", "edge2"}
    # edge1: h2 h3; edge4: h8 h9; edge6: h12
    assert worker_tors(jobs) == ["edge1", "edge4", "edge6"]
    p = tor_all(jobs, 2)
    assert p.deployed == ("edge1", "edge4")
    assert p.gamma == pytest.approx(jobs.solve(["edge1", "edge4"]).score[0])
