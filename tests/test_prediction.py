"""The round's prediction and the binding resource (controller/experiment/prediction.py):
hand-built cases, each made to be bound by one resource on purpose."""

import pytest

from controller.experiment.prediction import (
    Bound,
    JobShape,
    attribute,
    bucket_terms,
    fill_drain_s,
    jobs_analysis,
    link_loads,
    mode_analysis,
    predict_round,
    prediction_lines,
)
from controller.experiment.run_report import report_markdown

FRAME = 196
GRAD = 76 * FRAME  # 76 chunks per round


def _links(busiest: float) -> list:
    # two links over a 0.2 s round at 1 Mbit/s; "a->b" is busy ``busiest`` of it
    b = busiest * 1e6 * 0.2 / 8
    return link_loads([{"from": "a", "to": "b", "load": 1.0, "bw": 1.0},
                       {"from": "b", "to": "c", "load": 0.5, "bw": 1.0}],
                      {"a->b": 5 * b, "b->c": 5 * 1000}, 5, 0.2, 1.0, GRAD, 0.75)


def _bound(**kw) -> Bound:
    args = dict(links=_links(0.5), grads_sent=76 * 6 * 5, retransmissions=0, fallbacks=0,
                cores_bound=False, frame_bytes=FRAME, bw_mbit=1.0, gamma=0.75, window=16,
                prediction=predict_round(0.75, 1.0, GRAD, 0.0188, 0.007, 0.2))
    args.update(kw)
    return attribute(**args)


def test_link_loads_put_the_lp_bytes_beside_the_measured():
    a, b = _links(0.97)
    assert a.link == "a->b" and a.utilisation == pytest.approx(0.97)
    assert a.lp_bytes == pytest.approx(1.0 / 0.75 * GRAD)  # load / γ x gradient frame bytes
    assert b.bytes == 1000 and b.lp_bytes == pytest.approx(0.5 / 0.75 * GRAD)
    assert b.ratio == pytest.approx(1000 / (0.5 / 0.75 * GRAD))


def test_the_round_is_the_lps_plus_fill_drain_and_skew():
    p = predict_round(0.5, 1.0, GRAD, 0.02, 0.01, 0.33)
    assert p.lp_s == pytest.approx(GRAD * 8 / 0.5e6)  # 0.238336 s
    assert p.predicted_s == pytest.approx(GRAD * 8 / 0.5e6 + 0.03)
    assert p.error == pytest.approx(0.33 / (GRAD * 8 / 0.5e6 + 0.03) - 1)


def test_a_saturated_link_is_named_with_its_lp_load():
    b = _bound(links=_links(0.97))
    assert b.resource == "link" and b.figure == pytest.approx(0.97)
    assert "a->b at 97% (LP load 100%)" in b.text


def test_a_window_too_small_is_named():
    # 2 chunks over an 18.8 ms round trip carry 0.167 Mbit/s, below γ = 0.75
    b = _bound(window=2)
    assert b.resource == "window"
    assert b.figure == pytest.approx(2 * FRAME * 8 / 0.0188 / 1e6 / 0.75)
    assert "a window of 2 chunk(s) per worker" in b.text and "0.167 Mbit/s" in b.text
    assert _bound(window=16).resource != "window"  # 1.33 Mbit/s: enough


def test_a_slot_pool_too_small_is_named():
    b = _bound(fallbacks=0.2 * 76 * 6 * 5)
    assert b.resource == "slots" and b.figure == pytest.approx(0.2)
    assert "20.0% of GRADs found no free slot" in b.text


def test_retransmissions_and_cores_come_first():
    assert _bound(retransmissions=200, fallbacks=100).resource == "retransmissions"
    assert _bound(retransmissions=200, fallbacks=0).resource == "retransmissions"
    b = _bound(cores_bound=True, busy_cores=1.9, cpus=2, links=_links(0.97))
    assert b.resource == "cores" and b.figure == pytest.approx(0.95)


def test_pipeline_queues_or_unattributed_when_nothing_saturates():
    # predicted 0.1847 s: a 0.2 s round is within 10 % (the pipeline), a 0.25 s one is not
    assert _bound(transport={"rtt_s": {"median": 0.04}}).resource == "pipeline"
    late = predict_round(0.75, 1.0, GRAD, 0.0188, 0.007, 0.25)
    queued = _bound(transport={"rtt_s": {"median": 0.04}}, prediction=late)
    assert queued.resource == "queues" and queued.figure == pytest.approx(0.04 / 0.0188)
    assert "+35.4% of the predicted round" in queued.text  # 0.25 / 0.18469 - 1
    assert _bound(transport={"rtt_s": {"median": 0.02}},
                  prediction=late).resource == "unattributed"


def test_fill_and_drain_is_the_farthest_workers_round_trip():
    import networkx as nx
    g = nx.path_graph(["ps", "s1", "s2", "w1"])
    g.add_edge("s1", "w0")
    assert fill_drain_s(g, ["w0", "w1"], "ps", 1.0, FRAME) == pytest.approx(2 * 3 * 1568e-6)


def _record(window_ms: float = 200.0) -> dict:
    rounds = [{"time_s": window_ms / 1000, "start_skew_s": 0.007, "retransmissions": 0}] * 5
    return {"rounds": rounds, "collisions": 0,
            "link_bytes_total": {"a->b": 5 * 0.97 * 1e6 * 0.2 / 8, "b->c": 5000}}


def test_the_run_report_names_the_bound():
    p = mode_analysis(_record(), plan_loads=[{"from": "a", "to": "b", "load": 1.0, "bw": 1.0}],
                      gamma=0.75, bw_mbit=1.0, n_chunks=76, frame_bytes=FRAME, n_workers=6,
                      fill_drain_s=0.0188, window=16)
    assert p is not None and p["bound"]["resource"] == "link"
    results = {"run": "r", "prediction": {"ina": p}, "complete": True}
    lines = prediction_lines(results)
    assert lines[0].startswith("ina: predicted ") and "measured 0.2000" in lines[0]
    assert lines[1] == "ina bound by link: busiest link a->b at 97% (LP load 100%)"
    page = report_markdown(results, [])
    assert "ina bound by link: busiest link a->b at 97%" in page
    assert "| ina | a->b | 1 | 19,861 | 24,250 | 1.221 | 0.97 |" in page  # the per-link table


def test_the_plans_gamma_is_in_mbits_at_any_link_rate():
    # links at 0.5 Mbit/s: the plan's γ 0.375 Mbit/s is 0.75 of a link, as at 1 Mbit/s with
    # γ 0.75 -- the same bytes per link and per round, every time doubled
    slow = _record(400.0)
    slow["link_bytes_total"] = {"a->b": 5 * 0.97 * 0.5e6 * 0.4 / 8}
    p = mode_analysis(slow, plan_loads=[{"from": "a", "to": "b", "load": 0.5, "bw": 0.5}],
                      gamma=0.375, bw_mbit=0.5, n_chunks=76, frame_bytes=FRAME, n_workers=6,
                      fill_drain_s=0.0376, window=16)
    assert p is not None
    assert p["round"]["lp_s"] == pytest.approx(GRAD * 8 / 0.375e6)  # 0.3178 s, not 0.64
    (link,) = p["links"]
    assert link["lp_load"] == pytest.approx(1.0)
    assert link["lp_bytes"] == pytest.approx(1.0 / 0.75 * GRAD)
    assert link["utilisation"] == pytest.approx(0.97) and p["bound"]["resource"] == "link"


def _job_record(round_s: float, link_bytes: dict, virtual_s: float | None = None) -> dict:
    rounds = [{"time_s": round_s, "start_skew_s": 0.005, "retransmissions": 0}] * 4
    sim = {"virtual_s": virtual_s} if virtual_s is not None else {}
    return {"rounds": rounds, "collisions": 0, "link_bytes_total": link_bytes, "sim": sim}


def test_several_jobs_each_get_their_round_and_the_launchs_links():
    # two jobs share one launch (the same link counters): a->b, planned full, is busy 95 %
    # of the launch's 1.0 s; each job's round from its own γ in the joint plan
    shared = {"a->b": 0.95 * 1e6 / 8, "b->c": 0.2 * 1e6 / 8}
    modes = {"a/ina": _job_record(0.25, shared, virtual_s=1.0),
             "b/ina": _job_record(0.125, shared, virtual_s=1.0),
             "a/ps_only": _job_record(0.5, {})}
    jobs = [JobShape("a", 0.5, 76, 4, 0.0188), JobShape("b", 0.25, 20, 3, 0.0125)]
    loads = [{"from": "a", "to": "b", "load": 1.0, "bw": 1.0},
             {"from": "b", "to": "c", "load": 0.25, "bw": 1.0}]
    out = jobs_analysis(modes, jobs, plan_loads=loads, bw_mbit=1.0, frame_bytes=FRAME,
                        window=16, burst_bytes=0.0)  # links served at their rate
    assert set(out) == {"a/ina", "b/ina"}  # PS-only has no per-job γ in the joint plan
    a, b = out["a/ina"], out["b/ina"]
    assert a["round"]["lp_s"] == pytest.approx(76 * FRAME * 8 / 0.5e6)
    assert b["round"]["lp_s"] == pytest.approx(20 * FRAME * 8 / 0.25e6)
    assert b["round"]["fill_drain_s"] == 0.0125 and b["round"]["measured_s"] == 0.125
    assert a["bound"]["resource"] == b["bound"]["resource"] == "link"
    assert "a->b at 95% (LP load 100%)" in b["bound"]["text"]
    # the launch's links once, with the first job, over the launch's 1.0 s
    assert b["links"] == [] and [x["link"] for x in a["links"]] == ["a->b", "b->c"]
    assert a["links"][1]["lp_bytes"] == pytest.approx(0.25 * 1e6 / 8)
    assert a["links"][1]["ratio"] == pytest.approx(0.8)
    lines = prediction_lines({"prediction": out})
    assert lines[2].startswith("b/ina: predicted ") and lines[3].startswith("b/ina bound by link")
    # the simulated launch's span ends when its last worker finished (sim.done_s), not
    # with the tail in which the PS served what was in flight (virtual_s): b->c's bytes
    # over 0.5 s instead of 1.0 s
    for rec in modes.values():
        rec["sim"] = {"virtual_s": 1.0, "done_s": 0.5}
    busy = {x["link"]: x["utilisation"] for x in jobs_analysis(
        modes, jobs, plan_loads=loads, bw_mbit=1.0, frame_bytes=FRAME)["a/ina"]["links"]}
    assert busy["b->c"] == pytest.approx(0.4) and busy["a->b"] == pytest.approx(1.9)
    # no virtual time (Mininet): the longest job's rounds are the span (4 x 0.25 s)
    for rec in modes.values():
        rec["sim"] = {}
    again = jobs_analysis(modes, jobs, plan_loads=loads, bw_mbit=1.0, frame_bytes=FRAME)
    assert again["a/ina"]["links"][0]["utilisation"] == pytest.approx(0.95)
    assert jobs_analysis(modes, jobs, plan_loads=loads, bw_mbit=0, frame_bytes=FRAME) == {}


def test_a_jobs_run_names_what_bound_each_job(tmp_path, capsys):
    import json

    from controller.cli.main import main
    assert main(["simulate", "--no-train", "--modes", "ina", "--jobs", "2", "--rounds", "2",
                 "--hidden", "4", "--out", str(tmp_path), "--name", "j"]) == 0
    doc = json.loads((tmp_path / "j" / "results.json").read_text())
    pred = doc["prediction"]
    assert set(pred) == {f"{j}/ina" for j in doc["jobs"]} and len(pred) == 2
    out = capsys.readouterr().out
    page = (tmp_path / "j" / "report.md").read_text()
    for label, p in pred.items():
        assert p["round"]["measured_s"] > 0 and p["bound"]["resource"]
        assert f"{label} bound by {p['bound']['text']}" in out
        assert f"{label} bound by {p['bound']['text']}" in page


def test_every_link_carries_the_lps_bytes_in_the_simulated_network(tmp_path):
    # make-run's network, budget 0: the ECMP round robin (routing.p4) splits every switch's
    # traffic as the LP's per-hop even split; the crc32 hash left core links at 0.67 / 1.33
    import json

    from controller.cli.main import main
    assert main(["simulate", "--no-train", "--modes", "ina", "--budget", "0", "--rounds", "2",
                 "--out", str(tmp_path), "--name", "r"]) == 0
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    links = [x for x in doc["prediction"]["ina"]["links"] if x["lp_load"] > 0]
    assert len(links) == 36 and sum(x["link"].startswith("agg2->core") for x in links) == 2
    assert all(abs(x["ratio"] - 1) <= 0.10 for x in links), [
        (x["link"], round(x["ratio"], 3)) for x in links if abs(x["ratio"] - 1) > 0.10]


def test_a_window_too_small_sets_the_predicted_round():
    # 76 chunks, 2 per 18.8 ms round trip: 0.7144 s, above the LP's 0.1589 s
    p = predict_round(0.75, 1.0, GRAD, 0.0188, 0.007, 0.845, window_s=76 / 2 * 0.0188)
    assert p.predicted_s == pytest.approx(76 / 2 * 0.0188 + 0.0188 + 0.007)
    assert predict_round(0.75, 1.0, GRAD, 0.0188, 0.007, 0.2,
                         window_s=76 / 16 * 0.0188).predicted_s == pytest.approx(
        GRAD * 8 / 0.75e6 + 0.0188 + 0.007)


@pytest.mark.parametrize(("args", "resource", "words"), [
    # budget 0: only the PS's ToR aggregates, the link into it is the bottleneck (its load
    # is not pinned: with htb's bucket, the default, a link gains up to 1,600 B after each
    # idle moment and carried 104 % of its rate over the round)
    (["--budget", "0", "--rounds", "3"], "link", "link: busiest link agg0->edge0 at "),
    # links served at their rate: with htb's bucket a lone chunk crosses idle links at once
    # and a window of 1 does not bind in virtual time (prediction.py)
    (["--hidden", "4", "--rounds", "2", "--window", "1", "--burst-bytes", "0"], "window",
     "window: a window of 1 chunk(s) per worker"),
    (["--hidden", "4", "--rounds", "2", "--slots", "1"], "slots",
     "of GRADs found no free slot"),
])
def test_a_simulated_run_names_what_bound_it(tmp_path, capsys, monkeypatch, args, resource,
                                            words):
    import json

    from controller.cli.main import main
    from workers.ina.constants import SLOTS_ENV
    monkeypatch.setenv(SLOTS_ENV, "")  # --slots sets it for the process: restored after
    assert main(["simulate", "--no-train", "--modes", "ina", *args, "--out", str(tmp_path),
                 "--name", "r"]) == 0
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    bound = doc["prediction"]["ina"]["bound"]
    assert bound["resource"] == resource and words in bound["text"]
    assert doc["exact_all_rounds"]
    assert f"ina bound by {bound['text']}" in (tmp_path / "r" / "report.md").read_text()
    assert f"ina bound by {bound['text']}" in capsys.readouterr().out


def test_fill_drain_and_the_buckets_head_start_by_hand():
    """A path of 3 hops each way at R = 1 Mbit/s (125,000 B/s), 196-byte frames.  Served at
    the rate: fill and drain 2 x 3 x 1.568 ms = 9.408 ms, no head start.  With htb's
    1,600-byte bucket: no fill or drain, and the busiest link ends (1,600 + 196) / 125,000 s
    = 14.368 ms early.  76 frames at γ = 1 (T_LP = 14,896 x 8 / 10^6 = 0.119168 s), skew
    5 ms: 0.133576 s served at the rate, 0.1048 + 0.005 = 0.1098 s with the bucket (the
    simulated make-run network's fastest worker: 0.1048 s to the microsecond).  At 0.5 Mbit/s
    every time doubles; a bucket larger than the round's bytes leaves only the skew."""
    import networkx as nx
    g = nx.path_graph(["ps", "s1", "s2", "w"])
    sf = fill_drain_s(g, ["w"], "ps", 1.0, FRAME)
    assert sf == pytest.approx(9.408e-3)
    assert bucket_terms(sf, 0.0, FRAME, 1.0) == (sf, 0.0)
    assert bucket_terms(sf, 1600.0, FRAME, 1.0) == pytest.approx((0.0, 14.368e-3))
    assert bucket_terms(2 * sf, 1600.0, FRAME, 0.5) == pytest.approx((0.0, 28.736e-3))
    assert bucket_terms(sf, 1600.0, FRAME, 0.0) == (sf, 0.0)  # unshaped: no bucket
    plain = predict_round(1.0, 1.0, GRAD, sf, 0.005, 0.12)
    assert plain.predicted_s == pytest.approx(0.119168 + 9.408e-3 + 0.005)
    bucket = predict_round(1.0, 1.0, GRAD, 0.0, 0.005, 0.12, bucket_s=14.368e-3)
    assert bucket.predicted_s == pytest.approx(0.1048 + 0.005)
    assert predict_round(1.0, 1.0, 5 * FRAME, 0.0, 0.005, 0.01,
                         bucket_s=14.368e-3).predicted_s == pytest.approx(0.005)
    line = prediction_lines({"prediction": {"ina": {
        "round": {**bucket.__dict__, "error": bucket.error}, "bound": {"text": "x"}}}})[0]
    assert "(LP 0.1192 - bucket 0.0144 + fill/drain 0.0000 + start skew 0.0050)" in line


@pytest.mark.parametrize(("burst", "frames"), [(0.0, 10), (400.0, 10), (1600.0, 10),
                                               (1600.0, 5)])
def test_the_predicted_train_is_the_simulated_links(burst: float, frames: int) -> None:
    """The module docstring's maths on the simulated network's own links: ``frames``
    196-byte frames offered at once to a chain of 3 links at 1 Mbit/s through two switches
    that forward at once.  Served at the rate the last arrives at (M + N - 1) F / R = 12 x
    1.568 ms; with a bucket B at max(0, (M - 1) F - B) / R, which is the predicted round
    of M frames at γ = 1 with :func:`bucket_terms`' head start, whatever N (1,600 B and 10
    frames: 164 B / 125,000 B/s = 1.312 ms; 5 frames: 0, all within the bucket)."""
    import networkx as nx

    from controller.experiment.simulate.events import EventLoop
    from controller.experiment.simulate.network import SimNetwork

    class Wire:  # a switch that forwards port 1 to port 2
        def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
            return [(port + 1, frame)]

    g = nx.path_graph(["a", "s1", "s2", "b"])
    nx.set_edge_attributes(g, 1.0, "bw")
    ports = {"a": {"s1": 1}, "s1": {"a": 1, "s2": 2}, "s2": {"s1": 1, "b": 2}, "b": {"s2": 1}}
    loop, got = EventLoop(), []
    net = SimNetwork(loop, g, ports, {"s1": Wire(), "s2": Wire()}, 1.0, 0.0, 1000, None,
                     on_host=lambda h, f: got.append(loop.now), burst=burst)
    for _ in range(frames):
        net.send("a", 1, bytes(FRAME))
    loop.run()
    assert len(got) == frames
    if not burst:
        assert got[-1] == pytest.approx((frames + 3 - 1) * FRAME * 8 / 1e6)
        return
    assert got[-1] == pytest.approx(max(0.0, (frames - 1) * FRAME - burst) * 8 / 1e6)
    fd, head = bucket_terms(0.0188, burst, FRAME, 1.0)
    assert fd == 0.0 and predict_round(1.0, 1.0, frames * FRAME, fd, 0.0, got[-1],
                                       bucket_s=head).predicted_s == pytest.approx(got[-1])


def test_the_records_network_gives_the_bucket():
    """A simulated record carries its links' bucket (``sim.burst_bytes``); a record without
    one ran on TCLink's htb links (Mininet): 1,600 bytes."""
    from topo.mininet_net import HTB_BUCKET_BYTES
    loads = [{"from": "a", "to": "b", "load": 1.0, "bw": 1.0}]
    kw = dict(plan_loads=loads, gamma=0.75, bw_mbit=1.0, n_chunks=76, frame_bytes=FRAME,
              n_workers=6, fill_drain_s=0.0188, window=16)
    mininet = mode_analysis(_record(), **kw)["round"]
    assert HTB_BUCKET_BYTES == 1600 and mininet["fill_drain_s"] == 0.0
    assert mininet["bucket_s"] == pytest.approx(1796 * 8 / 1e6)
    plain = mode_analysis({**_record(), "sim": {"burst_bytes": 0.0}}, **kw)["round"]
    assert plain["fill_drain_s"] == 0.0188 and plain["bucket_s"] == 0.0
    assert plain["window_s"] == pytest.approx(76 / 16 * 0.0188)
    small = mode_analysis({**_record(), "sim": {"burst_bytes": 400.0}}, **kw)["round"]
    assert small["bucket_s"] == pytest.approx(596 * 8 / 1e6)
    assert mode_analysis(_record(), burst_bytes=0.0, **kw)["round"]["bucket_s"] == 0.0
