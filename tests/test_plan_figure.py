"""``plan.png``: the drawing data of a plan (controller.experiment.plan_figure) against the
plan itself, and the file ``plan`` writes next to its JSON."""

from __future__ import annotations

import struct

import pytest

from controller.cli.main import main
from controller.experiment.plan_figure import (
    ARROW_LIMIT,
    MAX_WIDTH,
    MIN_WIDTH,
    draw_plan,
    link_width,
    plan_drawing,
    plan_picture_path,
)
from controller.plan.document import load_plan
from controller.plan.pipeline import PlanRequest, make_plan
from topo.models import fat_tree, leaf_spine

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (checks the signature on the way)."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def k4_plan():
    graph = fat_tree(4)
    req = PlanRequest(budget=2, baselines=False, spec="fattree:4")
    return make_plan(graph, req, ps="h0", workers=[f"h{i}" for i in range(1, 7)]), graph


def test_layers_follow_the_fat_tree(k4_plan):
    plan, graph = k4_plan
    d = plan_drawing(plan, graph)
    assert d.layer_names == {0: "hosts", 1: "edge", 2: "aggregation", 3: "core"}
    assert d.layers[0] == [f"h{i}" for i in range(16)]
    assert d.layers[3] == ["core0", "core1", "core2", "core3"]
    assert all(d.positions[n][1] == lv for lv, ns in d.layers.items() for n in ns)
    # left to right in name order, evenly spread
    xs = [d.positions[f"edge{i}"][0] for i in range(8)]
    assert xs == sorted(xs) and xs[0] == pytest.approx(1 / 16)


def test_programmable_switches_are_the_deployed_ones_and_the_ps_tor(k4_plan):
    plan, graph = k4_plan
    d = plan_drawing(plan, graph)
    assert plan.deployed == ["edge1", "agg0"]  # the greedy's for make run's job (no baselines: no polish)
    assert sorted(d.programmable) == ["agg0", "edge0", "edge1"]
    assert d.ps == {"job": "h0"} and sorted(d.workers) == [f"h{i}" for i in range(1, 7)]
    assert {"agg0", "edge0", "edge1", "h0"} <= d.labelled


def test_arrows_carry_each_workers_shares_summing_to_one(k4_plan):
    plan, graph = k4_plan
    d = plan_drawing(plan, graph)
    job = plan.job
    for w in job.workers:
        mine = {a.switch: a.share for a in d.arrows if a.worker == w}
        assert sum(mine.values()) == pytest.approx(1.0)
        for s, f in job.fractions[w].items():
            if f > 1e-9:
                assert mine[s] == pytest.approx(f)
        rest = 1.0 - sum(job.fractions[w].values())
        assert mine.get(job.ps_tor, 0.0) == pytest.approx(rest, abs=1e-9)


def test_link_widths_are_the_heavier_direction_over_capacity(k4_plan):
    plan, graph = k4_plan
    d = plan_drawing(plan, graph)
    loads = {}
    for e in plan.loads:
        key = frozenset((e["from"], e["to"]))
        loads[key] = max(loads.get(key, 0.0), e["load"])
    assert len(d.links) == graph.number_of_edges()
    for link in d.links:
        want = min(loads.get(frozenset((link.a, link.b)), 0.0) / link.bw, 1.0)
        assert link.utilization == pytest.approx(want)
        assert link.width == pytest.approx(MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * want)
    # the PS's access link carries γ = 0.75 of its 1 Mbit/s
    ps_link = next(lk for lk in d.links if {lk.a, lk.b} == {"h0", "edge0"})
    assert ps_link.load == pytest.approx(plan.job.gamma) and plan.job.gamma == pytest.approx(0.75)
    assert link_width(0.0) == MIN_WIDTH and link_width(7.0) == MAX_WIDTH


def test_several_jobs_get_one_colour_each():
    graph = leaf_spine(2, 1, 4)
    from controller.plan.jobs import jobs_argument

    req = PlanRequest(budget=1, baselines=False, spec="leafspine:2,1,4")
    plan = make_plan(graph, req, jobs=jobs_argument("2", graph))
    d = plan_drawing(plan, graph)
    assert len(set(d.job_colours.values())) == 2 == len(plan.jobs)
    assert d.layer_names == {0: "hosts", 1: "leaf", 2: "spine"}
    for w, j in d.workers.items():
        assert w in plan.jobs[j].workers
    assert {a.job for a in d.arrows} == set(plan.jobs)


@pytest.mark.filterwarnings("error::UserWarning")
def test_four_jobs_at_k16_are_drawn_without_a_console_warning(tmp_path):
    """Their legend left tight_layout no room, and matplotlib said so on the console of
    every ``simulate --topo fattree:16 --jobs 4``; the file keeps the whole legend."""
    from controller.plan.jobs import jobs_argument

    graph = fat_tree(16)
    req = PlanRequest(budget=4, baselines=False, spec="fattree:16")
    plan = make_plan(graph, req, jobs=jobs_argument("4", graph))
    width, _ = png_size(draw_plan(plan, tmp_path / "k16.png", graph))
    assert width > 1500


def test_k8_is_drawn_with_few_names_and_no_arrow_haze(tmp_path):
    graph = fat_tree(8)
    req = PlanRequest(budget=3, baselines=False, spec="fattree:8")
    plan = make_plan(graph, req, ps="h0", workers=[f"h{i}" for i in range(1, 41)])
    d = plan_drawing(plan, graph)
    assert len(d.arrows) > ARROW_LIMIT
    assert "edge5" not in d.labelled and "h7" not in d.labelled  # 32 edges, 128 hosts
    assert set(plan.deployed) <= d.labelled and "h0" in d.labelled
    width, height = png_size(draw_plan(plan, tmp_path / "k8.png", graph))
    assert width > 1500 and height > 400


def test_plan_writes_the_picture_next_to_its_json(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "6", "--budget",
                 "2", "--no-baselines", "--out", str(out)]) == 0
    png = tmp_path / "plan.png"
    assert plan_picture_path(out) == png
    width, height = png_size(png)
    assert width > 600 and height > 400
    assert str(png) in capsys.readouterr().out
    # the drawing is a function of the file's plan alone (its topology included)
    d = plan_drawing(load_plan(out))
    assert sorted(d.programmable) == ["agg0", "edge0", "edge1"]


def test_a_19999_host_topology_is_drawn_in_seconds(tmp_path):
    """Issue 43: one scatter per host drew a 19,999-host plan for more than 30 minutes; the
    picture now takes one collection per kind of node (measured on 2 shared cores: 4.7 s for
    dumbbell 9999,9999, 20,000 nodes; printed, not asserted tightly)."""
    import time

    from topo.models import dumbbell

    graph = dumbbell(9999, 9999)
    plan = make_plan(graph, PlanRequest(budget=1, baselines=False, spec="dumbbell:9999,9999"),
                     ps="h0", workers=["h1", "h2", "h10000"])
    t0 = time.monotonic()
    out = draw_plan(plan, tmp_path / "big.png", graph)
    took = time.monotonic() - t0
    print(f"plan.png of {graph.number_of_nodes():,} nodes: {took:.1f} s")
    w, h = png_size(out)
    assert w > 500 and h > 200
    assert took < 120  # an hour before; minutes would mean one call per node again
