"""Run-time control (docs/design.md §9, issue 24 part 5): the job's control record (versions,
effective rounds, one writer, a reader that sees each change once), the PS's request channel,
the machine-readable events and the controller's side that follows them -- without Mininet;
then a PS and two workers over loopback taking a schedule change."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
from netns import free_udp_ports

from controller.experiment.failover import FailoverEvent, SwitchMonitor
from controller.experiment.methods.ina.engine import _Job, _Watch
from controller.experiment.methods.ina.method import exact_sums_by_round
from controller.plan.types import Plan
from workers.common.model import Replica, TrainConfig
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import K
from workers.ina.control import (
    Change,
    ControlLog,
    ControlRecord,
    JobBounds,
    RequestError,
    parse_request,
)
from workers.ina.control_io import (
    ControlReader,
    RequestChannel,
    request_path,
    send_request,
    write_record,
)
from workers.ina.events import (
    ControlEvent,
    RefusedEvent,
    RoundEvent,
    SilentEvent,
    parse_event,
    to_line,
)
from workers.ina.job import JobConfig
from workers.ina.worker import n_chunks_for, ps_only_schedule

ROOT = Path(__file__).resolve().parent.parent
BASE = {"0": [(0, 5, 3)], "1": [(0, 5, 3)], "2": [(0, 5, 3)]}
JOB = JobBounds(job_id=4, workers=(0, 1, 2), n_chunks=1, rounds=10)  # _cfg's below


def _sched(agg: int, fan_in: int) -> dict[str, list[list[int]]]:
    return {str(w): [[0, agg, fan_in]] for w in range(3)}


# ------------------------------------------------------------------ the record (pure)


def test_the_ps_picks_each_changes_round_and_numbers_the_versions():
    log = ControlLog(JOB)
    assert log.record.version == 0 and log.record.at(7, [0, 1, 2], BASE).version == 0
    # a re-plan asked from round 6 while round 3 is the lowest incomplete: from round 6
    a = log.accept({"kind": "schedules", "from_round": 6, "schedules": _sched(7, 3),
                    "cause": {"switch": "agg0"}}, lowest_incomplete=3)
    assert (a.version, a.kind, a.from_round, a.members) == (1, "schedules", 6, None)
    assert a.cause == {"switch": "agg0"}
    # asked from a round the PS may already be in: the first round no worker has started
    b = log.accept({"kind": "schedules", "from_round": 2, "schedules": _sched(8, 3)},
                   lowest_incomplete=5)
    assert (b.version, b.from_round) == (2, 6)
    # a member change: exactly the lowest incomplete round, whatever was asked before
    c = log.accept({"kind": "members", "removed": [1], "schedules": {"0": [[0, 9, 2]],
                                                                     "2": [[0, 9, 2]]},
                    "cause": {"worker": "h2"}}, lowest_incomplete=5)
    assert (c.version, c.kind, c.from_round, c.members) == (3, "members", 5, (0, 2))
    assert log.members == [0, 2]
    d = log.accept({"kind": "members", "removed": [1, 2]}, lowest_incomplete=8)
    assert (d.version, d.from_round, d.members, d.schedules) == (4, 8, (0,), {})
    # the JSON form round-trips, version first
    doc = log.record.to_json()
    assert list(doc) == ["version", "job_id", "changes"] and doc["version"] == 4
    assert [ch["version"] for ch in doc["changes"]] == [1, 2, 3, 4]
    assert ControlRecord.from_json(json.loads(json.dumps(doc))) == log.record


def test_a_round_applies_every_change_in_force_in_version_order():
    log = ControlLog(JOB)
    log.accept({"kind": "schedules", "from_round": 6, "schedules": _sched(7, 3)}, 3)
    log.accept({"kind": "members", "removed": [1],
                "schedules": {"0": [[0, 9, 2]], "2": [[0, 9, 2]]}}, 4)
    at = {r: log.record.at(r, [0, 1, 2], BASE) for r in (3, 4, 5, 6, 9)}
    assert at[3].members == [0, 1, 2] and at[3].schedule(0) == [(0, 5, 3)]
    assert (at[3].version, at[3].replans) == (0, 0)
    # rounds 4-5: the member change alone
    assert at[4].members == at[5].members == [0, 2] and at[5].schedule(2) == [(0, 9, 2)]
    assert (at[5].version, at[5].replans) == (2, 0)
    # from round 6 both are in force; the newer (the member change) wins for its workers
    assert at[6].members == [0, 2] and at[6].schedule(0) == [(0, 9, 2)]
    assert at[9].schedule(1) == [(0, 7, 3)]  # the re-plan's, for the removed worker
    assert (at[9].version, at[9].replans) == (2, 1)


@pytest.mark.parametrize("request_, match", [
    ({"kind": "nope"}, "kind must be one of"),
    ({"kind": "members", "removed": "1"}, "removed must be a list"),
    ({"kind": "members", "removed": [7]}, "removes no member"),
    ({"kind": "members", "removed": [0, 1, 2]}, "every member"),
    ({"kind": "schedules", "from_round": -1, "schedules": _sched(7, 3)}, "from_round"),
    ({"kind": "schedules", "from_round": 2}, "needs schedules"),
    ({"kind": "schedules", "from_round": 2, "schedules": {"9": [[0, 1, 1]]}}, "not in the job"),
    ({"kind": "schedules", "from_round": 2, "schedules": {"0": [[0, 1]]}}, "entries must be"),
    ({"kind": "schedules", "from_round": 2, "schedules": [1]}, "must be an object"),
    ({"kind": "members", "removed": [1], "cause": "x"}, "cause must be an object"),
])
def test_a_bad_request_is_refused_and_changes_nothing(request_, match):
    log = ControlLog(JOB)
    with pytest.raises(RequestError, match=match):
        log.accept(request_, lowest_incomplete=2)
    assert log.record.version == 0 and log.members == [0, 1, 2]


def test_request_lines_must_be_json_objects():
    assert parse_request('{"kind": "members", "removed": [1]}\n')["removed"] == [1]
    for line in ("members 1", "[1]"):
        with pytest.raises(RequestError):
            parse_request(line)


def test_a_record_whose_version_disagrees_with_its_changes_is_refused():
    ch = Change(1, "schedules", 3, None, {}, {}).to_json()
    with pytest.raises(ValueError, match="does not match"):
        ControlRecord.from_json({"version": 2, "job_id": 1, "changes": [ch]})
    with pytest.raises(ValueError, match="does not match"):
        ControlRecord.from_json({"version": 1, "job_id": 1, "changes": [{**ch, "version": 3}]})


# ------------------------------------------------------------------ files and channel


def _cfg(tmp_path: Path, **kw) -> JobConfig:
    base = dict(job_id=4, mode="ina", rounds=10, train=TrainConfig(), worker_ids=[0, 1, 2],
                worker_addrs=[], ps_addr=("", 0), result_dests=[], schedules=BASE,
                frac_bits=8, n_values=1, out_dir=str(tmp_path))
    return JobConfig(**{**base, **kw})


def test_the_reader_sees_each_change_once_even_within_one_clock_tick(tmp_path):
    path = tmp_path / "control.json"
    reader = ControlReader(_cfg(tmp_path, control_file=str(path)), check_every=10.0)
    assert reader.live and not reader.refresh()  # nothing written yet: version 0
    log = ControlLog(JOB)
    write_record(path, log.record)
    assert not reader.refresh()  # version 0 again: nothing new
    sizes = []
    for v in (1, 2, 3):  # written back to back, faster than a coarse mtime moves
        log.accept({"kind": "schedules", "from_round": v, "schedules": _sched(v, 3)}, 0)
        write_record(path, log.record)
        sizes.append(path.stat().st_size)
        assert reader.refresh() and reader.record.version == v
        assert not reader.refresh()  # once
    assert sizes == sorted(set(sizes))  # appended changes: each version is a longer file
    # with ``now``: at most one look per check_every, the first at once
    log.accept({"kind": "members", "removed": [2]}, 5)
    write_record(path, log.record)
    assert reader.refresh(now=100.0) and reader.at(5).members == [0, 1]
    log.accept({"kind": "members", "removed": [1]}, 6)
    write_record(path, log.record)
    assert not reader.refresh(now=105.0)  # not looked at yet
    assert reader.refresh(now=110.0) and reader.at(6).members == [0]
    off = ControlReader(_cfg(tmp_path))
    assert not off.live and not off.refresh() and off.at(9).members == [0, 1, 2]


def test_only_the_ps_writes_the_record():
    """One writer: no module but the PS's calls write_record, the controller only sends
    requests (checked in the source, like tests/test_layers.py)."""
    writers, senders = set(), set()
    for pkg in ("controller", "workers", "bench"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                    rel = str(path.relative_to(ROOT))
                    if name == "write_record":
                        writers.add(rel)
                    elif name == "send_request":
                        senders.add(rel)
    assert writers == {"workers/ina/control_io.py"}  # PsControl, the PS's shell
    assert senders == {"controller/experiment/failover.py"}


def test_requests_reach_the_ps_through_its_channel_whatever_their_size(tmp_path):
    path = request_path(tmp_path / "control.json")
    assert path.name == "control.requests"
    assert not send_request(path, {"kind": "members", "removed": [1]})  # no PS yet
    channel = RequestChannel(path)
    try:
        assert send_request(path, {"kind": "members", "removed": [1]})
        assert send_request(path, {"kind": "members", "removed": [2]})
        assert [parse_request(ln)["removed"] for ln in channel.read()] == [[1], [2]]
        assert channel.read() == []
        # larger than the pipe: written while the PS reads it (here a thread)
        big = {"kind": "schedules", "from_round": 3,
               "schedules": {"0": [[c, 5, 3] for c in range(40_000)]}}
        got: list[str] = []
        stop = threading.Event()

        def drain() -> None:
            while not stop.is_set() and not got:
                got.extend(channel.read())
                stop.wait(0.01)
        t = threading.Thread(target=drain)
        t.start()
        try:
            assert send_request(path, big)
        finally:
            t.join(timeout=10)
            stop.set()
        assert len(got) == 1 and parse_request(got[0]) == big
    finally:
        channel.close()
    assert not path.exists()
    os.mkfifo(path)  # left behind by a PS that was killed: nobody reads it
    assert not send_request(path, {"kind": "members", "removed": [1]})
    RequestChannel(path).close()  # and a new PS takes it over


# ------------------------------------------------------------------ events


def test_events_are_json_lines_and_nothing_else_is_one():
    events = [RoundEvent(job=1, worker=2, round=7, time_s=0.121, retransmits=3),
              ControlEvent(job=1, version=2, kind="members", from_round=4, members=[0, 1],
                           cause={"worker": "h3"}),
              ControlEvent(job=1, version=1, kind="schedules", from_round=6),
              SilentEvent(job=1, round=5, workers=[2], after_s=10.0)]
    for ev in events:
        line = to_line(ev)
        assert "\n" not in line and json.loads(line)["event"] in ("round", "control", "silent")
        assert parse_event(line + "\n") == ev
    assert json.loads(to_line(events[0])) == {"event": "round", "job": 1, "worker": 2,
                                              "round": 7, "time_s": 0.121, "retransmits": 3}
    for text in ("worker 0 round 1 0.100s retx 0", "ps ready", "worker 3 ready",
                 "ps round 5: worker(s) 2 silent for 10 s", "error: x", "{not json",
                 '{"event": "nope", "job": 1}', '{"event": "round", "job": 1}', "[1, 2]", ""):
        assert parse_event(text) is None, text


class _Progress:
    def __init__(self) -> None:
        self.done: dict[int, int] = {}

    def add_task(self, description: str, total: int) -> int:
        return len(self.done)

    def update(self, task: int, completed: int) -> None:
        self.done[task] = completed


class _Switches:
    def __init__(self) -> None:
        self.rounds: list[int] = []
        self.control: list[ControlEvent] = []

    def on_worker_round(self, r: int) -> None:
        self.rounds.append(r)

    def on_control(self, ev: ControlEvent) -> None:
        self.control.append(ev)


class _Monitor:
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def on_event(self, host: str, ev: object) -> None:
        self.seen.append((host, ev))


def test_progress_and_monitors_follow_events_only(tmp_path):
    run = SimpleNamespace(progress=_Progress())
    job = _Job("job", "h0", ["h1", "h2"], _cfg(tmp_path), 1.0)
    switches, mon = _Switches(), _Monitor()
    watch = _Watch(run, "ina", [job], {"job": mon},  # type: ignore[arg-type]
                   switches, None, solo=True)  # type: ignore[arg-type]
    r1 = RoundEvent(job=4, worker=0, round=1, time_s=0.1, retransmits=0)
    ctl = ControlEvent(job=4, version=1, kind="schedules", from_round=3,
                       cause={"switch": "agg0"})
    watch.on_line("h1", "worker 0 round 5 0.100s retx 0\n")  # human text: only logged
    watch.on_line("h1", to_line(r1) + "\n")
    watch.on_line("h0", to_line(ctl) + "\n")
    watch.on_line("h9", to_line(r1) + "\n")  # not a host of the launch
    assert mon.seen == [("h1", r1), ("h0", ctl)]
    assert switches.rounds == [1] and switches.control == [ctl]
    assert run.progress.done == {0: 2} and watch.newest == {"job": 1}


def test_the_failover_records_the_round_the_ps_chose():
    empty = Plan(topology={}, switch_ids={}, jobs={})  # the monitor only reads switch_ids
    sm = SwitchMonitor(None, nx.Graph(), empty, {}, [], {}, Path("p4info"),
                       say=lambda _: None)
    ev = FailoverEvent(switch="agg0", after_round=3, detected_s=None, replan_s=0.0,
                       redeploy_s=0.0, writes=0, gamma_before=1.0, gamma_after=0.5,
                       deployed_after=[], schedules_from_round=5)
    sm.events.append(ev)
    sm.on_control(ControlEvent(job=1, version=1, kind="schedules", from_round=5,
                               cause={"switch": "agg0"}))
    assert ev.schedules_from_round == 5
    sm.on_control(ControlEvent(job=5, version=1, kind="schedules", from_round=7,
                               cause={"switch": "agg0"}))  # another job's PS was further
    assert ev.schedules_from_round == 7
    sm.on_control(ControlEvent(job=1, version=2, kind="members", from_round=9, members=[0]))
    assert ev.schedules_from_round == 7  # a member change is not the fail-over's


# ------------------------------------------------------------------ processes over loopback


def test_a_schedule_change_over_loopback_takes_effect_where_the_ps_says(tmp_path):
    """PS and 2 workers on loopback; before round 0 starts the test (as the controller) asks
    for a new schedule (the chunks in reverse order) from round 0, which workers may already
    be in: the PS refuses a malformed request first, then takes the change from round 1, the
    first no worker can have started, and every worker switches exactly there, with exact
    sums throughout."""
    n_workers, rounds = 2, 4
    train = TrainConfig(model="logreg", n_workers=n_workers, rounds=rounds, batch_size=16)
    n_values = Replica(train, 0).params.size
    n_chunks = n_chunks_for(n_values, K)
    ports = free_udp_ports(n_workers + 1)
    addrs = [("127.0.0.1", p) for p in ports[1:]]
    control = tmp_path / "control.json"
    control.write_text("stale")  # a folder used again: the PS starts the record afresh
    cfg = JobConfig(
        job_id=3, mode="ps_only", rounds=rounds, train=train, worker_ids=[0, 1],
        worker_addrs=addrs, ps_addr=("127.0.0.1", ports[0]), result_dests=addrs,
        schedules={str(w): ps_only_schedule(n_chunks) for w in range(n_workers)},
        frac_bits=choose_frac_bits(8.0, n_workers), n_values=n_values, out_dir=str(tmp_path),
        round_timeout_s=30, timeout=0.05, control_file=str(control),
        start_file=str(tmp_path / "start"))
    job = tmp_path / "job.json"
    cfg.save(job)
    ps = subprocess.Popen([sys.executable, "-m", "workers.ina.ps_node", str(job)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = [subprocess.Popen([sys.executable, "-m", "workers.ina.worker_node", str(job),
                               "--worker", str(w)], stdout=subprocess.PIPE, text=True)
             for w in range(n_workers)]
    channel = request_path(control)
    try:
        assert ps.stdout.readline() == "ps ready\n"
        reverse = {str(w): [list(e) for e in reversed(ps_only_schedule(n_chunks))]
                   for w in range(n_workers)}
        assert send_request(channel, {"kind": "schedules", "from_round": 0})  # no schedules
        assert send_request(channel, {"kind": "schedules", "from_round": 0,
                                      "schedules": reverse, "cause": {"test": 1}})
        refused = parse_event(ps.stdout.readline())  # the answer to the bad one
        ev = parse_event(ps.stdout.readline())  # the record is written: start the round
        for p in procs:
            assert p.stdout.readline().endswith("ready\n")
        (tmp_path / "start").touch()
        assert [p.wait(timeout=60) for p in procs] == [0] * n_workers
        ps.terminate()
        assert ps.wait(timeout=30) == 0
        ps_out, ps_err = ps.communicate()
    finally:
        for p in [ps, *procs]:
            p.kill()
    assert "control request refused: a schedules change needs schedules" in ps_err
    assert refused == RefusedEvent(job=3, reason="a schedules change needs schedules",
                                   kind="schedules")
    assert ev == ControlEvent(job=3, version=1, kind="schedules", from_round=1,
                              cause={"test": 1})
    assert not [line for line in ps_out.splitlines() if parse_event(line)]  # no other
    record = ControlRecord.from_json(json.loads(control.read_text()))
    assert record.version == 1 and record.changes[0].from_round == 1
    assert record.changes[0].schedules["1"][0] == (n_chunks - 1, 0, 1)
    assert not channel.exists()  # the PS stopped listening
    for w in range(n_workers):
        per_round = json.loads((tmp_path / f"worker{w}.json").read_text())["rounds"]
        assert [r["schedule_version"] for r in per_round] == [0] + [1] * (rounds - 1)
    members = [[0, 1]] * rounds
    assert exact_sums_by_round(tmp_path, n_workers, n_values, members) == [True] * rounds
    data = [np.load(tmp_path / f"worker{w}.npz") for w in range(n_workers)]
    np.testing.assert_array_equal(data[0]["sums"], data[1]["sums"])
