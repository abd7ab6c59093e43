"""The jobs file and the short form ``--jobs N`` (docs/design.md §3.10): dealing and one-line errors."""

import json

import pytest

from controller.plan.jobs import (
    JobEntry,
    jobs_argument,
    jobs_from_count,
    load_jobs,
    parse_jobs,
    resolve_jobs,
)
from controller.plan.lp import PlanError
from topo.models import parse_topology

FT4 = parse_topology("fattree:4")


def test_short_form_deals_hosts_in_turn():
    """16 hosts h0..h15, N = 3: host i goes to job i mod 3, the first host of each is its PS:
    job1 = h0 | h3 h6 h9 h12 h15, job2 = h1 | h4 h7 h10 h13, job3 = h2 | h5 h8 h11 h14."""
    jobs = jobs_from_count(FT4, 3)
    assert [j.name for j in jobs] == ["job1", "job2", "job3"]
    assert [j.ps for j in jobs] == ["h0", "h1", "h2"]
    assert jobs[0].workers == ("h3", "h6", "h9", "h12", "h15")
    assert jobs[1].workers == ("h4", "h7", "h10", "h13")
    assert jobs[2].workers == ("h5", "h8", "h11", "h14")
    assert all(j.weight == 1.0 for j in jobs)
    two = jobs_from_count(FT4, 2)  # name order is natural: h10 after h9, not after h1
    assert two[0].workers == tuple(f"h{i}" for i in range(2, 16, 2))
    assert jobs_argument(" 2 ", FT4) == two
    assert len(jobs_from_count(FT4, 8)) == 8  # 2 hosts each: a PS and one worker


@pytest.mark.parametrize("n,needle", [
    (0, "number of jobs must be >= 1"),
    (9, "--jobs 9: each job needs a PS and a worker, but the topology has only 16 hosts"),
])
def test_short_form_errors(n, needle):
    with pytest.raises(PlanError, match=needle):
        jobs_from_count(FT4, n)


def test_file_round_trip_and_counts(tmp_path):
    """Explicit lists are taken first; a COUNT takes the first free hosts in name order, in
    file order: job b (count 2, listed first) gets h1, h4 (h0, h2, h3 are named by a, c)."""
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([
        {"name": "b", "ps": "h5", "workers": 2, "weight": 2, "rounds": 7, "model_size": 64},
        {"name": "a", "ps": "h0", "workers": ["h2", "h3"], "model": "mlp"},
        {"name": "c", "ps": "h6", "workers": 1},
    ]))
    jobs = jobs_argument(str(path), FT4)
    assert jobs == [
        JobEntry("b", "h5", ("h1", "h4"), 2.0, None, 64, 7),
        JobEntry("a", "h0", ("h2", "h3"), 1.0, "mlp"),
        JobEntry("c", "h6", ("h7",)),
    ]


GOOD = {"name": "a", "ps": "h0", "workers": ["h1"]}


@pytest.mark.parametrize("data,needle", [
    ({"name": "a"}, "J: a jobs file must be a JSON list of jobs, got dict"),
    ([], "J: the jobs list is empty"),
    ([3], "J: job 1: must be an object, got 3"),
    ([{"ps": "h0", "workers": 1}], "J: job 1: 'name' must be a non-empty string, got None"),
    ([GOOD, GOOD], "J: job 2 ('a'): duplicate job name 'a'"),
    ([{**GOOD, "wieght": 2}], "J: job 1 ('a'): unknown key 'wieght' (allowed: name, ps,"),
    ([{**GOOD, "ps": 7}], "J: job 1 ('a'): 'ps' must be a host name, got 7"),
    ([{"name": "a", "ps": "h0"}], "J: job 1 ('a'): missing 'workers'"),
    ([{**GOOD, "workers": 0}], "J: job 1 ('a'): 'workers' count must be >= 1, got 0"),
    ([{**GOOD, "workers": []}], "J: job 1 ('a'): 'workers' is empty"),
    ([{**GOOD, "workers": "h1"}], "'workers' must be a list of hosts or a count, got 'h1'"),
    ([{**GOOD, "workers": True}], "'workers' must be a list of hosts or a count, got True"),
    ([{**GOOD, "workers": ["h1", 2]}], "'workers' must hold host names, got 2"),
    ([{**GOOD, "workers": ["h1", "h1"]}], "J: job 1 ('a'): worker 'h1' listed twice"),
    ([{**GOOD, "workers": ["h0"]}], "J: job 1 ('a'): PS 'h0' is also listed as a worker"),
    ([{**GOOD, "weight": 0}], "J: job 1 ('a'): 'weight' must be a number from 0.001 to 1000, got 0"),
    ([{**GOOD, "weight": "2"}], "'weight' must be a number from 0.001 to 1000, got '2'"),
    ([{**GOOD, "weight": True}], "'weight' must be a number from 0.001 to 1000, got True"),
    ([{**GOOD, "rounds": 0}], "J: job 1 ('a'): 'rounds' must be an integer >= 1, got 0"),
    ([{**GOOD, "model_size": 1.5}], "'model_size' must be an integer >= 1, got 1.5"),
    ([{**GOOD, "model": ""}], "'model' must be a non-empty string, got ''"),
])
def test_bad_structure(data, needle):
    with pytest.raises(PlanError) as err:
        parse_jobs(data, "J")
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("jobs,needle", [
    ([{**GOOD, "ps": "h99"}], "J: job 1 ('a'): unknown host 'h99'"),
    ([{**GOOD, "workers": ["edge0"]}], "J: job 1 ('a'): 'edge0' is a switch"),
    ([GOOD, {"name": "b", "ps": "h2", "workers": ["h1"]}],
     "J: job 2 ('b'): host 'h1' is already in job 'a'"),
    ([GOOD, {"name": "b", "ps": "h2", "workers": 14}],
     "J: job 2 ('b'): 'workers': 14 hosts wanted, only 13 not in another job"),
])
def test_bad_hosts(jobs, needle):
    with pytest.raises(PlanError) as err:
        resolve_jobs(parse_jobs(jobs, "J"), FT4, "J")
    assert needle in str(err.value)


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": "a",\n "ps": }]')
    with pytest.raises(PlanError, match=r"bad\.json:2:8: bad JSON \(Expecting value\)"):
        load_jobs(bad)
    with pytest.raises(PlanError, match=r"nope\.json: cannot read jobs file \(No such file"):
        load_jobs(tmp_path / "nope.json")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe[")
    with pytest.raises(PlanError, match="not UTF-8 text"):
        load_jobs(binary)
    with pytest.raises(PlanError, match=r"cannot read jobs file"):
        jobs_argument(str(tmp_path / "2x"), FT4)  # not digits: a file name
