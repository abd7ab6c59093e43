"""One constructor of INA job files (``workers.ina.job.make_job_config``) and the runner's one
use of it (``controller.experiment.methods.ina.core.job_config``): the RESULT addressing rule,
worker bits, schedules and the files that carry run-time changes."""

from pathlib import Path

import pytest

from controller.experiment.methods.ina.core import (
    JOB_IDS,
    Settings,
    job_config,
    mode_window,
    path_rate,
)
from controller.plan.document import chunk_schedule
from controller.plan.types import JobPlan, Plan
from workers.common.model import TrainConfig
from workers.ina.cc import DEFAULT_WINDOW
from workers.ina.constants import INA_UDP_PORT
from workers.ina.job import JobConfig, make_job_config

ADDRS = [("10.0.0.2", 7000), ("10.0.0.3", 7000), ("10.0.0.4", 7000)]


def _make(**kw):
    base = dict(job_id=1, mode="ps_only", rounds=2, train=TrainConfig(n_workers=3, rounds=2),
                worker_addrs=ADDRS, ps_addr=("10.0.0.1", 7000),
                schedules={str(i): [(0, 0, 3)] for i in range(3)}, frac_bits=20,
                n_values=32, out_dir="/nonexistent")
    return make_job_config(**{**base, **kw})


def test_results_go_into_the_network_once_or_to_every_worker_on_loopback():
    net = _make()
    assert net.result_dests == [ADDRS[0]] and net.worker_ids == [0, 1, 2]
    assert _make(results_to="every_worker").result_dests == ADDRS
    with pytest.raises(ValueError, match="results_to"):
        _make(results_to="ps")
    with pytest.raises(ValueError, match="at least one worker"):
        _make(worker_addrs=[])


def test_job_file_round_trip(tmp_path):
    cfg = _make(window=4, start_file="s")
    cfg.save(tmp_path / "job.json")
    assert JobConfig.load(tmp_path / "job.json") == cfg


def test_runner_job_config_follows_the_plan(tmp_path):
    """The runner's job file of the ina mode: worker i is the plan's i-th worker, its
    schedule the plan's chunk schedule, re-plans and removals through the control record
    in its folder."""
    workers = ["h1", "h2"]
    job = JobPlan(ps="h0", ps_tor="e0", ps_tor_id=1, workers=workers,
                  worker_ids={"h1": 0, "h2": 1}, gamma=1.0, deployed=["e1"],
                  intervals={"e1": {"offset": 0.0, "length": 0.5}},
                  fractions={"h1": {"e1": 0.5}, "h2": {"e1": 0.5}})
    plan = Plan(topology={}, switch_ids={"e0": 1, "e1": 2}, jobs={"job": job}, deployed=["e1"])
    hosts = {"h0": ("10.0.0.1", "m0"), "h1": ("10.0.0.2", "m1"), "h2": ("10.0.0.3", "m2")}
    train = TrainConfig(n_workers=2, rounds=3)
    s = Settings()
    cfg = job_config(s, job_id=JOB_IDS["ina"], mode="ina", plan=plan, workers=workers,
                     ps="h0", hosts=hosts, train=train, n_values=4 * 32, out_dir=tmp_path)
    assert cfg.worker_addrs == [("10.0.0.2", INA_UDP_PORT), ("10.0.0.3", INA_UDP_PORT)]
    assert cfg.ps_addr == ("10.0.0.1", INA_UDP_PORT)
    assert cfg.result_dests == [("10.0.0.2", INA_UDP_PORT)]
    assert cfg.rounds == 3 and cfg.n_values == 128
    by_name = chunk_schedule(plan, 4)
    # the plan's entries, sent with the intervals interleaved (ina.core.send_order): the
    # first half at e1 (chunks 0, 1), the rest at the PS's ToR (2, 3)
    assert {w: sorted(v) for w, v in cfg.schedules.items()} == {"0": by_name["h1"],
                                                              "1": by_name["h2"]}
    assert cfg.schedules["0"] == [(0, 2, 2), (2, 1, 2), (1, 2, 2), (3, 1, 2)]
    assert Path(cfg.control_file) == tmp_path / "control.json"
    assert Path(cfg.start_file) == tmp_path / "start"
    # no --window and a plan without its topology (no round trip): the constant
    assert s.window is None
    assert (cfg.window, cfg.timeout, cfg.worker_timeout_s) == (DEFAULT_WINDOW, s.timeout,
                                                                 s.worker_timeout)
    quiet = job_config(s, job_id=JOB_IDS["ps_only"], mode="ps_only", plan=plan,
                       workers=workers, ps="h0", hosts=hosts, train=train, n_values=128,
                       out_dir=tmp_path, members=False)
    assert quiet.control_file is None
    assert quiet.schedules["1"] == [(c, 0, 1) for c in range(4)]


def test_agg_window_applies_to_the_aggregating_modes_only(tmp_path):
    """``--agg-window``: INA (and ToR-only) workers keep that many chunks in flight, PS-only's
    keep ``--window`` (a 64-worker PS-only window of 128 would overflow the PS link's queue,
    docs/scale.md §3); parsed from the command line into the run's settings."""
    from controller.cli.main import build_parser
    from controller.experiment.methods.ina.options import settings_from_args

    job = JobPlan(ps="h0", ps_tor="e0", ps_tor_id=1, workers=["h1"], worker_ids={"h1": 0},
                  gamma=1.0, deployed=[], intervals={}, fractions={"h1": {}})
    plan = Plan(topology={}, switch_ids={"e0": 1}, jobs={"job": job}, deployed=[])
    hosts = {"h0": ("10.0.0.1", "m0"), "h1": ("10.0.0.2", "m1")}
    s = Settings(window=16, agg_window=128)

    def window(mode: str) -> int:
        return job_config(s, job_id=JOB_IDS[mode], mode=mode, plan=plan, workers=["h1"],
                          ps="h0", hosts=hosts, train=TrainConfig(n_workers=1, rounds=1),
                          n_values=32, out_dir=tmp_path).window
    assert (window("ina"), window("tor_only"), window("ps_only")) == (128, 128, 16)
    s = Settings(window=16)
    assert (window("ina"), window("ps_only")) == (16, 16)
    args = build_parser().parse_args(["run", "--window", "8", "--agg-window", "64"])
    got = settings_from_args(args)
    assert (got.window, got.agg_window) == (8, 64)
    assert settings_from_args(build_parser().parse_args(["run"])).agg_window is None


def _fattree_plan(gamma: float, workers: list[str]) -> Plan:
    """A one-job plan on fat-tree k=4 with its topology (the round trip's hops), PS h0."""
    from topo.models import parse_topology, to_dict

    job = JobPlan(ps="h0", ps_tor="edge0", ps_tor_id=1, workers=workers,
                  worker_ids={w: i for i, w in enumerate(workers)}, gamma=gamma, deployed=[],
                  intervals={}, fractions={w: {} for w in workers})
    return Plan(topology={"graph": to_dict(parse_topology("fattree:4"))},
                switch_ids={"edge0": 1}, jobs={"job": job}, deployed=[])


def test_default_window_follows_the_bandwidth_delay_product(tmp_path):
    """No --window, --cc fixed: the larger of 16 and two bandwidth-delay products of the
    plan's rate over the path's unloaded round trip, by hand.  Fat-tree k=4, PS h0, workers
    h1 (2 hops), h2 (4) and h15 (6): the farthest is 6 hops, so a 196-byte frame at 1 Mbit/s
    (1.568 ms) makes a 12-frame round trip, 18.816 ms."""
    workers = ["h1", "h2", "h15"]
    hosts = {h: (f"10.0.0.{i + 1}", f"m{i}") for i, h in enumerate(["h0", *workers])}
    frame = 196 * 8 / 1e6

    def cfg(s: Settings, mode: str, gamma: float = 1.0) -> JobConfig:
        return job_config(s, job_id=JOB_IDS[mode], mode=mode, plan=_fattree_plan(gamma, workers),
                          workers=workers, ps="h0", hosts=hosts,
                          train=TrainConfig(n_workers=3, rounds=1), n_values=32,
                          out_dir=tmp_path)
    got = cfg(Settings(), "ina")
    assert got.rate_fps == pytest.approx(1 / frame) and got.base_rtt_s == pytest.approx(12 * frame)
    assert got.window == 24  # γ = 1: 12 frames per round trip, x2
    assert cfg(Settings(), "ina", gamma=0.7).window == 17  # 8.4 x 2 = 16.8
    assert cfg(Settings(), "ina", gamma=0.5).window == 16  # 12: the floor
    # PS-only: 1/3 of the link, 4 frames per round trip, x2 = 8: the floor, 16
    assert cfg(Settings(), "ps_only").window == 16
    # unshaped links (--bw 0): no rate, the constant
    assert cfg(Settings(bw=None), "ina").window == 16
    # what the user gives wins, even the default's own value
    assert cfg(Settings(window=16), "ina").window == 16
    assert cfg(Settings(window=4), "ina").window == 4
    assert cfg(Settings(agg_window=8), "ina").window == 8
    assert cfg(Settings(agg_window=8), "ps_only").window == 16
    assert cfg(Settings(window=32, agg_window=8), "ps_only").window == 32
    # the adaptive policies keep the constant as their window (aimd's ssthresh) and start
    # from one product themselves (workers.ina.cc.make_cc)
    assert cfg(Settings(cc="aimd"), "ina").window == 16
    # the plan's γ is in Mbit/s (its links are at --bw): at 0.5 Mbit/s a plan of γ 0.5 is
    # the whole link, 0.5e6 / 1568 = 318.9 frames/s, over 12 frames of 3.136 ms: 24 again
    half = path_rate(_fattree_plan(0.5, workers), "ina", "h0", workers, 0.5)
    assert half["rate_fps"] == pytest.approx(0.5e6 / 1568)
    assert half["base_rtt_s"] == pytest.approx(12 * 2 * frame)
    assert cfg(Settings(bw=0.5), "ina", gamma=0.5).window == 24
    assert path_rate(_fattree_plan(0.5, workers), "ps_only", "h0", workers, 0.5)[
        "rate_fps"] == pytest.approx(0.5e6 / 1568 / 3)  # a third of the link each
    # the rule is mode_window's alone (pure), from path_rate's figures
    rate = path_rate(_fattree_plan(1.0, workers), "ina", "h0", workers, 1.0)
    assert mode_window(Settings(), "ina", rate["rate_fps"], rate["base_rtt_s"]) == 24
    assert mode_window(Settings(), "ina") == 16


def test_first_timeout_follows_the_plans_rate(tmp_path):
    """The job file's ``first_timeout`` (a worker's timeouts until it has measured one):
    ``--timeout``, or twice the plan's time for a worker's first window plus the unloaded
    round trip when longer (workers.ina.cc.first_timeout), by hand on the network of the
    test above (12 frames of 1.568 ms round trip); ``timeout`` stays ``--timeout``."""
    workers = ["h1", "h2", "h15"]
    hosts = {h: (f"10.0.0.{i + 1}", f"m{i}") for i, h in enumerate(["h0", *workers])}
    frame = 196 * 8 / 1e6

    def cfg(s: Settings, mode: str, gamma: float) -> JobConfig:
        return job_config(s, job_id=JOB_IDS[mode], mode=mode, plan=_fattree_plan(gamma, workers),
                          workers=workers, ps="h0", hosts=hosts,
                          train=TrainConfig(n_workers=3, rounds=1), n_values=32,
                          out_dir=tmp_path)
    # γ 0.1: 63.8 frames/s, window 16 (the floor): 2 x (16 x 15.68 ms + 18.816 ms)
    slow = cfg(Settings(), "ina", 0.1)
    assert slow.window == 16 and slow.timeout == 0.3
    assert slow.first_timeout == pytest.approx(2 * (16 * frame / 0.1 + 12 * frame))  # 0.5394
    assert slow.max_timeout == pytest.approx(1.0)  # above it already
    # γ 0.03: 2 x (16 x 52.27 ms + 18.816 ms) = 1.7102 s lifts the cap with it
    slower = cfg(Settings(), "ina", 0.03)
    assert slower.first_timeout == pytest.approx(2 * (16 * frame / 0.03 + 12 * frame))
    assert slower.max_timeout == pytest.approx(slower.first_timeout)
    # γ 1, window 24: 2 x (37.6 + 18.8) ms = 0.113 s, below --timeout's 0.3
    assert cfg(Settings(), "ina", 1.0).first_timeout == 0.3
    # PS-only: a third of the link each, 16 x 3 frames: 2 x (75.3 + 18.8) ms, 0.3 again
    assert cfg(Settings(), "ps_only", 0.1).first_timeout == 0.3
    # a longer --timeout wins; unshaped links (no rate) keep --timeout
    assert cfg(Settings(timeout=1.0), "ina", 0.1).first_timeout == 1.0
    assert cfg(Settings(bw=None), "ina", 0.1).first_timeout == 0.3


def test_workers_start_from_the_job_files_first_timeout():
    """``driver.job_rtt``: the worker's estimator holds ``first_timeout`` until it has
    measured, ``timeout`` as first_rto's floor; the cap follows the larger."""
    from workers.ina.driver import job_rtt

    rtt = job_rtt(_make(timeout=0.3, first_timeout=0.633))
    assert rtt.first_rto == pytest.approx(0.633) and rtt.rto == pytest.approx(0.633)
    assert rtt.initial == 0.3 and rtt.max_rto == pytest.approx(1.0)
    slow = job_rtt(_make(timeout=0.3, first_timeout=1.71))
    assert slow.first_rto == pytest.approx(1.71) and slow.max_rto == pytest.approx(1.71)
    assert job_rtt(_make(timeout=0.3)).first_rto == 0.3  # none: the timeout


def test_window_given_or_not_on_the_command_line():
    """``--window`` not given is None in the settings (the default rule applies); given,
    even as 16, it is the user's and wins (test above)."""
    from controller.cli.main import build_parser
    from controller.experiment.methods.ina.options import settings_from_args

    def parsed(*argv: str) -> Settings:
        return settings_from_args(build_parser().parse_args(["run", *argv]))
    assert (parsed().window, parsed().agg_window) == (None, None)
    assert parsed().base_window == DEFAULT_WINDOW
    assert parsed("--window", "16").window == 16
    assert parsed("--window", "16").base_window == 16
