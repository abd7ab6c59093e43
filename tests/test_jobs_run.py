"""``run --jobs`` without a network (docs/design.md §3.10): job ids, what the switches hold,
the results' ``jobs`` and ``fairness`` computed from hand-made mode records, ``compare``'s
one row per job, and the option errors."""

from __future__ import annotations

import networkx as nx
import pytest

from controller.errors import ExperimentError
from controller.experiment.compare import rows_of
from controller.experiment.methods.ina.jobs import jobs_summary
from controller.experiment.methods.ina.method import InaMethod, Settings
from controller.experiment.methods.ina.tenants import deploy_specs, make_tenants, parse_kill_ps
from controller.experiment.runner import Run
from controller.plan.jobs import jobs_from_count
from controller.plan.joint import job_plan, joint_plan
from topo.models import parse_topology
from workers.ina.wire import FRAME_BYTES


@pytest.fixture(scope="module")
def two_jobs():
    g = nx.Graph(parse_topology("leafspine:2,1,3"))
    nx.set_edge_attributes(g, 1.0, "bw")
    specs = jobs_from_count(g, 2)  # job1: h0 (PS), h2, h4; job2: h1 (PS), h3, h5
    plan = joint_plan(g, specs, 1, result_load=True, alone=False)
    return plan, make_tenants(Settings(rounds=3, model="logreg"), plan, specs)


def test_every_job_and_mode_has_its_own_id_and_plan(two_jobs) -> None:
    plan, tenants = two_jobs
    assert [(t.name, t.ps, t.workers) for t in tenants] == [
        ("job1", "h0", ["h2", "h4"]), ("job2", "h1", ["h3", "h5"])]
    specs = deploy_specs(tenants, ("ina", "ps_only"))
    assert [(j.job_id, j.tenant, j.workers) for j in specs] == [
        (1, "job1", ("h2", "h4")), (3, "job1", ("h2", "h4")),
        (5, "job2", ("h3", "h5")), (7, "job2", ("h3", "h5"))]
    assert specs[0].plan == job_plan(plan, "job1") and specs[0].plan.job.ps == "h0"
    assert tenants[0].n_values == 650 and tenants[0].n_chunks == 21  # logreg: 64·10 + 10


def _rec(times: list[float], exact: bool = True, collisions: int = 0, **extra) -> dict:
    return {"grad_bytes": 2600, "collisions": collisions,
            "rounds": [{"time_s": t, "ps_rx_bytes": 1000.0, "busiest_link_bytes": 2000.0,
                        "retransmissions": 1, "accuracy": 0.5 + i / 10, "exact": exact}
                       for i, t in enumerate(times)], **extra}


def test_jobs_summary_per_job_figures_and_jain_fairness(two_jobs) -> None:
    plan, tenants = two_jobs
    n = tenants[0].n_chunks
    modes = {"job1/ina": _rec([0.5, 1.0, 1.5], collisions=4),
             "job2/ina": _rec([1.0, 1.0, 1.0]),
             "job1/ps_only": _rec([2.0, 2.0, 2.0]),
             "job2/ps_only": _rec([2.0], exact=False, stopped="job2: its PS on h1 exited"),
             "alone/job1": _rec([0.25, 0.25, 0.25])}
    out = jobs_summary(plan, tenants, modes, {"job1": 0.7, "job2": 0.7}, bw=1.0)
    j1, j2 = out["jobs"]["job1"], out["jobs"]["job2"]
    gamma_of = n * FRAME_BYTES * 8 / 1e6  # Mbit per round; γ = that / median round time
    assert j1["gamma"]["measured"] == pytest.approx(gamma_of / 1.0)
    assert j1["gamma"]["measured_alone"] == pytest.approx(gamma_of / 0.25)
    assert j1["gamma"]["predicted"] == plan.jobs["job1"].gamma
    assert j1["time_per_round_s"] == {"ina": pytest.approx(1.0), "ps_only": pytest.approx(2.0)}
    assert j1["goodput_Mbps"]["ina"] == pytest.approx(2600 * 8 / 1e6)
    assert j1["collisions"] == {"ina": 4, "ps_only": 0}
    assert j1["exact_all_rounds"] is True and j2["exact_all_rounds"] is False
    assert j2["stopped"] == {"ps_only": "job2: its PS on h1 exited"}
    assert j2["rounds_completed"] == {"ina": 3, "ps_only": 1}
    assert j1["accuracy"] == {"final": pytest.approx(0.7), "reference": 0.7}
    # Jain's index of measured γ_j / w_j: x = (g, g) -> 1; (g, g / 2) -> 9/10
    assert out["fairness"] == pytest.approx(1.0)
    modes["job2/ina"] = _rec([2.0, 2.0, 2.0])
    assert jobs_summary(plan, tenants, modes, {}, bw=1.0)["fairness"] == pytest.approx(0.9)


def test_compare_shows_one_row_per_job_with_its_own_gamma(two_jobs) -> None:
    doc = {"method": "ina", "settings": {"rounds": 3},
           "modes": {"job1/ina": _rec([1.0]), "job2/ina": _rec([2.0]),
                     "alone/job1": _rec([0.5])},
           "jobs": {"job1": {"gamma": {"predicted": 0.5, "measured": 0.4}},
                    "job2": {"gamma": {"predicted": 0.25, "measured": 0.2}}}}
    rows = {r.mode: r for r in rows_of("r", doc)}
    assert set(rows) == {"job1/ina", "job2/ina", "alone/job1"}
    assert (rows["job1/ina"].gamma_predicted, rows["job2/ina"].gamma_measured) == (0.5, 0.2)
    assert rows["alone/job1"].gamma_predicted is None
    assert rows["job2/ina"].s_per_round == 2.0


def test_kill_ps_must_name_a_jobs_ps(two_jobs) -> None:
    _, tenants = two_jobs
    assert parse_kill_ps("h1@2", tenants) == ("h1", 2)
    for bad, msg in (("h2@1", "not the PS of a job"), ("h1", "expected HOST@ROUND")):
        with pytest.raises(ExperimentError, match=msg):
            parse_kill_ps(bad, tenants)


@pytest.mark.parametrize("settings, msg", [
    (dict(jobs="2", kill_ps="h5@1"), "--kill-ps: 'h5' is not the PS of a job"),
    (dict(jobs="99"), "--jobs 99: each job needs a PS and a worker"),
    (dict(jobs="2", kill_worker="h0@1"), "--kill-worker: 'h0' is not a worker"),
    (dict(kill_ps="h0@1"), "--kill-ps applies to several jobs"),
    (dict(slot_policy="partitioned"), "--slot-policy partitioned applies to several jobs"),
])
def test_bad_jobs_options_are_one_line_before_any_network(settings, msg, tmp_path) -> None:
    m = InaMethod(settings=Settings(topo="leafspine:2,1,3", workers="2", out=str(tmp_path),
                                    **settings))
    with pytest.raises(ExperimentError, match=msg):
        m.prepare(Run("ina", str(tmp_path), "x"))
    assert not any(tmp_path.iterdir())


def test_a_dead_switch_replans_every_job_jointly_on_the_rest() -> None:
    """fat-tree k=4, --jobs 2, budget 2: the joint plan deploys two switches; without one of
    them both jobs are planned again on the survivor (ids kept, the dead one retired), each
    γ_j the joint LP's for S' on the reduced graph and never above the plan before."""
    from controller.plan.lp_jobs import make_jobset, solve_jobs_lp
    from controller.plan.replan import SwitchFailureError, replan_jobs_without, without_switch

    g = nx.Graph(parse_topology("fattree:4"))
    nx.set_edge_attributes(g, 1.0, "bw")
    specs = jobs_from_count(g, 2)
    plan = joint_plan(g, specs, 2, result_load=True, alone=False)
    dead, keep = plan.deployed[0], plan.deployed[1:]
    g2, new = replan_jobs_without(g, plan, dead, specs)
    assert dead not in g2 and new.deployed == keep and new.failed == [dead]
    assert new.retired_ids == [plan.switch_ids[dead]]
    assert dead not in new.switch_ids and all(
        new.switch_ids[s] == plan.switch_ids[s] for s in new.switch_ids)
    direct = solve_jobs_lp(make_jobset(without_switch(g, dead), specs, result_load=True), keep)
    for name in ("job1", "job2"):
        assert new.jobs[name].gamma == pytest.approx(direct.gammas[name], abs=1e-7)
        assert new.jobs[name].gamma <= plan.jobs[name].gamma + 1e-7
        assert job_plan(new, name).retired_ids == new.retired_ids
    # a PS's only switch: that job is cut off, the run stops naming it
    with pytest.raises(SwitchFailureError, match=r"job 'job1': its PS h0 cut off"):
        replan_jobs_without(g, plan, "edge0", specs)


def test_a_jobs_file_with_an_unknown_model_is_refused_before_any_file(tmp_path) -> None:
    jobs = tmp_path / "jobs.json"
    jobs.write_text('[{"name": "a", "ps": "h0", "workers": 2, "model": "cnn"}]')
    out = tmp_path / "out"
    m = InaMethod(settings=Settings(topo="leafspine:2,1,3", jobs=str(jobs), out=str(out)))
    with pytest.raises(ExperimentError, match=r"^--jobs: job 'a': model 'cnn' \(expected"):
        m.prepare(Run("ina", str(out), "x"))
    assert not out.exists()
