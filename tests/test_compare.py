"""``python -m controller compare``: rows computed from hand-made results documents."""

from __future__ import annotations

import json

import pytest

from controller.cli.main import main as cli_main
from controller.errors import ExperimentError
from controller.experiment.compare import compare_rows, load_results, rows_of, settings_text


def _round(t: float, ps: float, busiest: float, retx: int, acc: float, exact: bool = True):
    return {"time_s": t, "ps_rx_bytes": ps, "busiest_link_bytes": busiest,
            "retransmissions": retx, "accuracy": acc, "exact": exact}


INA = {
    "run": "r1", "settings": {"topo": "fattree:4", "bw": 1.0, "workers": "6", "rounds": 2,
                              "model": "mlp"},
    "gamma": {"predicted": 0.75, "measured": 0.6},
    "modes": {
        "ina": {"grad_bytes": 1000, "rounds": [_round(0.2, 100, 300, 1, 0.5),
                                               _round(0.3, 200, 500, 2, 0.7)]},
        "ps_only": {"grad_bytes": 1000, "rounds": [_round(1.0, 600, 600, 0, 0.5),
                                                   _round(1.0, 600, 600, 0, 0.7, False)]},
    },
}
ASYNC = {
    "run": "a1", "method": "async",
    "settings": {"topo": "leafspine:2,1,2", "bw_mbps": None, "learners": ["h1", "h2"],
                 "rounds": 10},
    "policies": {"kappa": {"runs": [
        {"duration_s": 2.0, "ps_link_bytes": 1000, "final_accuracy": 0.8},
        {"duration_s": 4.0, "ps_link_bytes": 3000, "final_accuracy": 0.9}]}},
}


def test_rows_of_modes():
    ina, ps = rows_of("r1", INA)
    assert (ina.method, ina.mode, ina.rounds) == ("ina", "ina", 2)
    assert ina.s_per_round == pytest.approx(0.25)
    assert ina.goodput_Bps == pytest.approx(1000 / 0.25)
    assert ina.ps_bytes_per_round == 150 and ina.busiest_bytes_per_round == 400
    assert ina.retransmissions == 3 and ina.accuracy == 0.7 and ina.exact is True
    assert (ina.gamma_predicted, ina.gamma_measured) == (0.75, 0.6)
    assert ps.exact is False and ps.gamma_predicted is None  # γ belongs to the INA mode only


def test_rows_of_async_policies():
    (row,) = rows_of("a1", ASYNC)
    assert row.mode == "kappa (2 seeds)" and row.rounds == 10
    assert row.s_per_round == pytest.approx(3.0 / 10)  # mean duration over the rounds' budget
    assert row.ps_bytes_per_round == pytest.approx(2000 / 10)
    assert row.accuracy == pytest.approx(0.85)
    assert row.exact is None and row.busiest_bytes_per_round is None


NDN_ASYNC = {
    "run": "n1", "method": "ndn", "ndn_mode": "async",
    "settings": {"topo": "fattree:4", "rounds": 20},
    "modes": {"ndn@8": {"kind": "ndn", "ndn_mode": "async", "n_workers": 8, "rounds": [],
                        "pushes": 160, "policy": "kappa", "soft_sync": 4,
                        "duration_s": 4.0, "ps_link_bytes_total": 2_000_000,
                        "retransmissions": 3, "final_accuracy": 0.7}},
}
CLUSTER = {
    "run": "c1", "method": "cluster",
    "settings": {"topo": "leafspine:2,1,5", "rounds": 2, "grad_bytes": 1000, "central_ps": "h0",
                 "nodes": ["h1", "h2"]},
    "rules": {"central": {"runs": [
        {"rounds": [{"time_s": 0.1}, {"time_s": 0.3}], "link_bytes": {"leaf0->h0": 800,
                                                                       "h0->leaf0": 99},
         "busiest_link_bytes_per_round": 400.0, "final_accuracy": 0.9,
         "matches_simulation": True},
        {"rounds": [{"time_s": 0.2}, {"time_s": 0.2}], "link_bytes": {"leaf0->h0": 1200},
         "busiest_link_bytes_per_round": 600.0, "final_accuracy": 0.8,
         "matches_simulation": False}]}},
}


def test_rows_of_async_ndn_and_cluster_rules():
    (ndn,) = rows_of("n1", NDN_ASYNC)
    assert ndn.mode == "ndn@8 async kappa C=4" and ndn.rounds == 20
    assert ndn.s_per_round == pytest.approx(0.2) and ndn.ps_bytes_per_round == 100_000
    assert ndn.retransmissions == 3 and ndn.accuracy == 0.7 and ndn.exact is None
    (cl,) = rows_of("c1", CLUSTER)
    assert cl.mode == "central (2 seeds)" and cl.rounds == 2
    assert cl.s_per_round == pytest.approx(0.2)  # mean over rounds, then seeds
    assert cl.goodput_Bps == pytest.approx(1000 / 0.2)
    assert cl.ps_bytes_per_round == pytest.approx(1000 / 2)  # into h0 only, per round
    assert cl.busiest_bytes_per_round == 500 and cl.accuracy == pytest.approx(0.85)
    assert cl.exact is False  # one seed's parameters differed from the simulation's
    assert "workers h1,h2" in settings_text(CLUSTER)


def test_settings_text():
    assert settings_text(INA) == "fattree:4, 1 Mbit/s, workers 6, rounds 2, model mlp"
    assert settings_text(ASYNC) == "leafspine:2,1,2, unshaped links, workers h1,h2, rounds 10"
    assert settings_text({"method": "bcube",
                          "settings": {"bcube": [4, 2], "bw_mbps": 20.0, "servers": 16}}) \
        == "BCube(4,2), 20 Mbit/s, workers 16"


def test_load_errors(tmp_path):
    with pytest.raises(ExperimentError, match="no results.json there"):
        load_results(tmp_path)
    bad = tmp_path / "results.json"
    bad.write_text('{"modes": ')
    with pytest.raises(ExperimentError, match=r"results.json:1:\d+: not JSON"):
        load_results(tmp_path)
    bad.write_text('{"x": 1}')
    with pytest.raises(ExperimentError, match="not an INSync results file"):
        load_results(bad)


def test_cli_compare(tmp_path, capsys):
    for name, doc in (("r1", INA), ("a1", ASYNC)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(doc))
    out = tmp_path / "cmp.json"
    assert cli_main(["compare", str(tmp_path / "r1"), str(tmp_path / "a1" / "results.json"),
                     "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ps_only" in text and "kappa (2 seeds)" in text and "0.750/0.600" in text
    doc = json.loads(out.read_text())
    assert [r["mode"] for r in doc["rows"]] == ["ina", "ps_only", "kappa (2 seeds)"]
    assert doc["runs"]["r1"].startswith("fattree:4")
    rows, _ = compare_rows([str(tmp_path / "r1"), str(tmp_path / "r1")])  # same run twice
    assert len({r.run for r in rows}) == 2
    assert cli_main(["compare", str(tmp_path / "missing")]) == 2
    assert "error:" in capsys.readouterr().err


def test_check_results_accepts_every_method_shape():
    """The shape check that lets compare skip malformed files has no false alarms on the
    documents each method writes (INA, async PS, NDN async, clusters)."""
    from controller.experiment.compare import check_results

    for doc in (INA, ASYNC, NDN_ASYNC, CLUSTER):
        assert check_results(doc) is None


def test_cli_compare_skips_a_malformed_run_and_prints_the_rest(tmp_path, capsys):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "results.json").write_text(json.dumps(INA))
    bad = json.loads(json.dumps(INA))
    bad["modes"]["ina"]["rounds"][1]["time_s"] = [0.3]  # a list where a number belongs
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text(json.dumps(bad))
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "results.json").write_bytes(b'{"modes": "\xe9"}')
    out = tmp_path / "cmp.json"
    assert cli_main(["compare", str(tmp_path / "bad"), str(tmp_path / "r1"),
                     str(tmp_path / "latin"), "--out", str(out)]) == 0
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 2 and "Traceback" not in cap.err
    assert "bad" in err[0] and "modes.ina.rounds[1].time_s" in err[0]
    assert "latin" in err[1] and "UTF-8" in err[1]
    assert "ps_only" in cap.out
    assert [r["mode"] for r in json.loads(out.read_text())["rows"]] == ["ina", "ps_only"]
    # every run bad: non-zero, one line each, no --out written
    out.unlink()
    assert cli_main(["compare", str(tmp_path / "bad"), str(tmp_path / "latin"),
                     "--out", str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2 and not out.exists()


def _ina(run: str, **settings) -> dict:
    doc = json.loads(json.dumps(INA))
    doc["run"], doc["method"] = run, "ina"
    doc["settings"].update(settings)
    return doc


def test_each_method_has_a_typed_row_found_through_the_registry():
    """compare reads rows, not shapes: each method's results are read by its own row class,
    whose fields say what the row is (a policy, a rule, a worker count, a schedule, a job)."""
    from controller.experiment.methods.async_ps.row import AsyncRow
    from controller.experiment.methods.cluster.row import ClusterRow
    from controller.experiment.methods.collective.row import CollectiveRow
    from controller.experiment.methods.ina.row import InaRow
    from controller.experiment.methods.ndn.row import NdnRow
    from controller.experiment.registry import METHODS, ROWS

    assert set(ROWS) == set(METHODS)
    (a,) = rows_of("a1", ASYNC)
    assert type(a) is AsyncRow and (a.policy, a.seeds) == ("kappa", 2)
    (c,) = rows_of("c1", CLUSTER)
    assert type(c) is ClusterRow and (c.rule, c.seeds) == ("central", 2)
    (n,) = rows_of("n1", NDN_ASYNC)
    assert type(n) is NdnRow and (n.kind, n.n_workers, n.ndn_mode) == ("ndn", 8, "async")
    bc = {"run": "b", "method": "bcube", "settings": {"bcube": [2, 2], "rounds": 2},
          "modes": {"ring-bcube@1MB": {**INA["modes"]["ina"], "method": "ring-bcube",
                                       "size": "1MB"}}}
    (b,) = rows_of("b", bc)
    assert type(b) is CollectiveRow and (b.schedule, b.size) == ("ring-bcube", "1MB")
    assert b.s_per_round == pytest.approx(0.25) and b.gamma_predicted is None
    ina, ps = rows_of("r1", INA)  # a file without "method" is INA's
    assert type(ina) is InaRow and ina.job is None and ina.gamma_predicted == 0.75
    # the same mode records read as another method's give that method's rows: no guessing
    doc = {**INA, "method": "ndn"}
    assert [type(r) for r in rows_of("x", doc)] == [NdnRow, NdnRow]
    assert rows_of("x", doc)[0].gamma_predicted is None  # γ is INA's


def test_compare_shows_the_settings_that_differ_as_columns(tmp_path, capsys):
    """A budget sweep's runs differ by budget (and here planner): those are columns; the
    settings they share are not; the full settings are still listed under the table."""
    from controller.experiment.compare import differing_settings, run_settings

    docs = {"b1": _ina("b1", budget=1, planner="greedy", window=16, timeout=0.3),
            "b4": _ina("b4", budget=4, planner="exact", window=16, timeout=0.3)}
    assert differing_settings([run_settings(d) for d in docs.values()]) == ["budget", "planner"]
    assert differing_settings([run_settings(docs["b1"])]) == []  # one run: nothing to tell apart
    for name, doc in docs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(doc))
    out = tmp_path / "cmp.json"
    assert cli_main(["compare", str(tmp_path / "b1"), str(tmp_path / "b4"),
                     "--out", str(out)]) == 0
    text = capsys.readouterr().out
    header = next(ln for ln in text.splitlines() if "s/round" in ln).split()
    assert header[:4] == ["#", "mode", "budget", "planner"] and "window" not in header
    rows = [ln.split() for ln in text.splitlines() if ln.strip().startswith(("1 ", "2 "))
            and ("ina" in ln or "ps_only" in ln) and "--method" not in ln]
    assert [r[:4] for r in rows] == [["1", "ina", "1", "greedy"], ["1", "ps_only", "1", "greedy"],
                                     ["2", "ina", "4", "exact"], ["2", "ps_only", "4", "exact"]]
    assert ("1  b1 (--method ina): fattree:4, 1 Mbit/s, workers 6, rounds 2, model mlp, "
            "budget 1, planner greedy, window 16, timeout 0.3") in text
    written = json.loads(out.read_text())
    assert written["differ"] == ["budget", "planner"]
    assert written["settings"]["b4"]["budget"] == "4"


def test_compare_counts_the_workers_of_a_jobs_run_and_names_no_model_without_training():
    """``--jobs``: the jobs' workers, not the unused --workers default; ``simulate
    --no-train``: no model (random gradients); the network that carried the run."""
    from controller.experiment.compare import run_settings

    jobs = _ina("j", jobs=2, workers="6", objective="maxmin", planner="greedy")
    jobs["jobs"] = {"a": {"workers": ["h1", "h2", "h3"], "gamma": {"predicted": 0.5}},
                    "b": {"workers": ["h4", "h5"], "gamma": {"predicted": 0.4}}}
    s = run_settings(jobs)
    assert (s.workers, s.jobs, s.planner) == ("h1,h2,h3,h4,h5", "2", "greedy (maxmin)")
    jobs["jobs"]["b"]["workers"] = [f"h{i}" for i in range(4, 12)]
    assert run_settings(jobs).workers == "11 workers (h1 … h11)"
    assert "11 workers (h1 … h11), jobs 2" in settings_text(jobs)
    sim = _ina("s", budget=2)
    sim.update(simulated=True, simulation={"options": {"train": False}})
    s = run_settings(sim)
    assert (s.model, s.network) == (None, "simulated")
    assert "model" not in settings_text(sim) and "network simulated" in settings_text(sim)
    sim["simulation"]["options"]["train"] = True
    assert run_settings(sim).model == "mlp"
    servers = _ina("v", servers="a,b")
    assert run_settings(servers).network == "servers"
    solo = _ina("p")
    solo["plan"] = {"workers": ["h3", "h5"]}  # what --workers 2 resolved to
    assert run_settings(solo).workers == "h3,h5"


def test_compare_shows_enough_digits():
    """A PS-only goodput of a few kB/s is not 0.00 MB/s; γ keeps three digits."""
    from controller.experiment.compare import _sig

    assert [_sig(x) for x in (0.0043, 0.25, 1.0, 12.345, 150.0, 4321.0, 0.0, None)] == [
        "0.00430", "0.250", "1.00", "12.3", "150", "4,321", "0", "-"]
    assert _sig(0.6667) == "0.667" and _sig(1e-7) == "0.000000100"


def test_a_results_file_of_an_unknown_method_is_skipped_in_one_line(tmp_path):
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "results.json").write_text(json.dumps({**INA, "method": "tofu"}))
    with pytest.raises(ExperimentError, match=r"u: method 'tofu' is not one compare knows \(ina"):
        compare_rows([str(tmp_path / "u")])
