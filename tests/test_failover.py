"""Switch fail-over around the live run (docs/design.md §9), without a network: the option, the workers'
schedules from the control record, and how results split γ between the original plan and the re-planned one."""

from __future__ import annotations

import pytest

from controller.errors import ExperimentError
from controller.experiment.failover import parse_fail_switch
from controller.experiment.methods.ina.method import Settings, summarize
from controller.plan.types import JobPlan, Plan
from topo.models import parse_topology
from workers.common.model import TrainConfig
from workers.ina.control import ControlLog
from workers.ina.control_io import ControlReader, job_bounds, write_record
from workers.ina.job import JobConfig
from workers.ina.wire import FRAME_BYTES


def test_parse_fail_switch():
    g = parse_topology("fattree:4")
    assert parse_fail_switch("agg0@3", g, 10) == ("agg0", 3)
    for text, needle in [("agg0", "expected SWITCH@ROUND"), ("agg0@x", "expected SWITCH@ROUND"),
                         ("h1@2", "'h1' is not a switch"), ("agg9@2", "'agg9' is not a switch"),
                         ("agg0@9", "round 9 must be in 0..8")]:
        with pytest.raises(ExperimentError, match=needle):
            parse_fail_switch(text, g, 10)
    with pytest.raises(ExperimentError, match="needs --rounds >= 2"):
        parse_fail_switch("agg0@0", g, 1)


def job(tmp_path, control_file):
    return JobConfig(job_id=1, mode="ina", rounds=10, train=TrainConfig(), worker_ids=[0, 1],
                     worker_addrs=[], ps_addr=("", 0), result_dests=[],
                     schedules={"0": [(0, 5, 2)], "1": [(0, 5, 2)]}, frac_bits=8, n_values=1,
                     out_dir=str(tmp_path), control_file=control_file)


def test_workers_switch_schedules_at_from_round(tmp_path):
    path = tmp_path / "control.json"
    book = ControlReader(job(tmp_path, str(path)))

    def for_round(r):  # (schedule, schedule version) of worker 1, as the worker reads them
        book.refresh()
        return book.at(r).schedule(1), book.at(r).replans

    assert for_round(0) == ([(0, 5, 2)], 0)  # no record yet: the job file's schedule
    log = ControlLog(job_bounds(job(tmp_path, None)))  # the PS's side: it alone writes the record
    log.accept({"kind": "schedules", "from_round": 3,
                "schedules": {"0": [[0, 7, 2]], "1": [[0, 9, 2]]}}, lowest_incomplete=1)
    write_record(path, log.record)
    assert for_round(2) == ([(0, 5, 2)], 0)
    assert for_round(3) == ([(0, 9, 2)], 1)
    log.accept({"kind": "schedules", "from_round": 6, "schedules": {"1": [[0, 11, 2]]}},
               lowest_incomplete=4)
    write_record(path, log.record)  # at once: seen without waiting for a coarse clock
    assert for_round(5) == ([(0, 9, 2)], 1)
    assert for_round(6) == ([(0, 11, 2)], 2)
    assert ControlReader(job(tmp_path, None)).at(9).schedule(0) == [(0, 5, 2)]
    assert ControlReader(job(tmp_path, None)).at(9).replans == 0


def test_summarize_splits_gamma_at_the_failover():
    n_chunks = 10
    mbit = n_chunks * FRAME_BYTES * 8 / 1e6  # measured γ of a 1-second round

    def rnd(t, version):
        return {"time_s": t, "sync_time_s": 0.8 * t, "schedule_version": version, "accuracy": 0.5, "loss": 1.0,
                "retransmissions": 0, "exact": True, "ps_rx_bytes": 1, "busiest_link_bytes": 1}

    # rounds 0-2 before the failure (1 s), round 3 disturbed (10 s), 4-5 still on the old
    # schedule in a degraded network, 6-8 on the new plan (2 s)
    rounds = [rnd(1.0, 0)] * 3 + [rnd(10.0, 0), rnd(1.5, 0), rnd(1.5, 0)] + [rnd(2.0, 1)] * 3
    event = {"switch": "agg0", "after_round": 2, "gamma_after": mbit / 2.5,
             "schedules_from_round": 6}
    modes = {"ina": {"rounds": rounds, "failover": [event]}}
    job = JobPlan(gamma=mbit / 1.25, deployed=["agg0"], ps="h0", ps_tor="edge0", ps_tor_id=1,
                  workers=["h1"], worker_ids={"h1": 0}, intervals={}, fractions={})
    plan = Plan(topology={}, switch_ids={}, jobs={"job": job}, deployed=["agg0"], baselines={})
    res = summarize(Settings(), "t", plan, modes, 0.5, n_chunks, {})
    g = res["gamma"]
    assert g["measured"] == pytest.approx(mbit) and g["ratio"] == pytest.approx(1.25)
    # the last worker to start each round took 0.8 s of the round's 1 s
    assert g["measured_from_last_start"] == pytest.approx(mbit / 0.8)
    assert g["ratio_from_last_start"] == pytest.approx(1.25 / 0.8)
    (after,) = g["after_failover"]
    assert after == {"switch": "agg0", "predicted": pytest.approx(mbit / 2.5),
                     "measured": pytest.approx(mbit / 2), "ratio": pytest.approx(1.25),
                     "rounds": 3}
    assert res["failover"] == [event]
