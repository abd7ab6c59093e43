"""A worker that dies (docs/design.md §9, issue 20 item 2), without Mininet: the PS state machine
across a member change, the worker's RESULT filter, the members from the control record, the switch-rule
difference for a removed worker, the options, the monitor's `stop` line, and the PS and
worker processes over loopback with a worker killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest
from netns import free_udp_ports

from controller.dataplane.deploy import ASK_GROUP_BASE, SwitchJob, rule_changes, switch_rules
from controller.errors import ExperimentError
from controller.experiment.failover import (
    WorkerMonitor,
    WorkerStopped,
    parse_kill_worker,
)
from controller.experiment.methods.ina.method import exact_sums_by_round, member_schedules
from controller.plan.document import build_plan, chunk_schedule
from controller.plan.lp import make_job, solve_lp
from controller.plan.replan import replan_members
from topo.mininet_net import plan_network
from topo.models import parse_topology
from workers.common.model import Replica, TrainConfig
from workers.common.quantize import choose_frac_bits
from workers.ina.constants import TYPE_PARTIAL, TYPE_RESULT
from workers.ina.control import ControlLog
from workers.ina.control_io import (
    ControlReader,
    job_bounds,
    request_path,
    send_request,
    write_record,
)
from workers.ina.events import ControlEvent, RoundEvent, SilentEvent, parse_event
from workers.ina.job import JobConfig
from workers.ina.messages import mask_of
from workers.ina.ps import PsState
from workers.ina.wire import InaPacket
from workers.ina.worker import WorkerRound, n_chunks_for, ps_only_schedule

K = 32
JOB = 7
ING = "MyIngress."


def grad(w: int, r: int, c: int, vals: np.ndarray) -> InaPacket:
    return InaPacket.grad(JOB, r, c, agg_id=0, fan_in=1, worker_id=w, values=vals)


def partial(bits: list[int], r: int, c: int, vals: np.ndarray) -> InaPacket:
    return InaPacket(msg_type=TYPE_PARTIAL, flags=0, job_id=JOB, round=r, chunk_id=c, agg_id=0,
                     fan_in=0, count=len(bits), worker_id=bits[0], bitmap=mask_of(bits),
                     values=vals)


def vec(x: int) -> np.ndarray:
    return np.full(K, x, dtype=np.int32)


# ------------------------------------------------------------------ the PS state machine


def test_killed_worker_ps_reopens_the_stuck_round_over_the_survivors():
    """Worker 2 of {0,1,2} dies in round 1: chunk 0 had completed over all three (from a
    PARTIAL), chunk 1 holds only survivors' pieces.  From round 1 the mask is {0,1}: chunk 1
    completes at once from the stored pieces, chunk 0 is merged again, round 0 keeps its
    mask for late retransmissions."""
    ps = PsState(JOB, [0, 1, 2], n_chunks=2, k=K)
    for c in range(2):
        ps.on_packet(partial([0, 1, 2], 0, c, vec(7)))
    assert ps.current_round == 1
    assert ps.on_packet(partial([0, 1, 2], 1, 0, vec(9))).results  # chunk 0 of round 1 done
    ps.on_packet(grad(0, 1, 1, vec(1)))
    ps.on_packet(grad(1, 1, 1, vec(2)))  # chunk 1 still waits for worker 2
    e, out = ps.change_members([0, 1])
    assert e == 1
    (res,) = out.results  # chunk 1: {0} + {1} cover the new mask
    assert (res.chunk_id, res.bitmap, res.count) == (1, 0b011, 2)
    assert np.array_equal(res.values, vec(3))
    assert not out.completed_rounds  # chunk 0 re-opened: its sum counted worker 2
    # a stray packet of the removed worker is refused, with its own reason
    assert not ps.on_packet(grad(2, 1, 0, vec(100))).results
    assert ps.stats.malformed_reasons == {"removed_member": 1}
    # the survivors resend chunk 0: the round completes over {0, 1}
    ps.on_packet(grad(0, 1, 0, vec(4)))
    out = ps.on_packet(grad(1, 1, 0, vec(5)))
    assert out.completed_rounds == [1]
    assert np.array_equal(ps.round_sum(1), np.concatenate([vec(9), vec(3)]))
    # round 0 answers a late retransmission with its own (old) mask
    (late,) = ps.on_packet(grad(0, 0, 1, vec(1))).results
    assert late.bitmap == 0b111 and late.count == 3 and np.array_equal(late.values, vec(7))
    # and round 2 is merged over the survivors from the start
    ps.on_packet(partial([0, 1], 2, 0, vec(1)))
    assert ps.on_packet(partial([0, 1], 2, 1, vec(1))).completed_rounds == [2]


def test_killed_worker_ps_drops_pieces_that_hold_it():
    ps = PsState(JOB, [0, 1, 2, 3], n_chunks=1, k=K)
    ps.on_packet(partial([0, 3], 0, 0, vec(1)))  # holds worker 3, who dies
    ps.on_packet(grad(1, 0, 0, vec(2)))
    e, out = ps.change_members([0, 1, 2])
    assert e == 0 and not out.results
    assert ps.missing(0) == {0: 0b101}  # {0,3} no longer counts: 0 and 2 are missing
    ps.on_packet(grad(0, 0, 0, vec(3)))
    (res,) = ps.on_packet(grad(2, 0, 0, vec(4))).results
    assert res.bitmap == 0b111 and np.array_equal(res.values, vec(9))


def test_silent_worker_is_named_by_the_ps_after_its_timeout():
    ps = PsState(JOB, [0, 1, 2], n_chunks=2, k=K)
    assert ps.silent(100.0, 5.0) == []  # nothing heard yet: the start barrier never counts
    ps.on_packet(grad(0, 0, 0, vec(1)), now=10.0)
    ps.on_packet(grad(1, 0, 0, vec(1)), now=10.0)
    ps.on_packet(grad(2, 0, 0, vec(1)), now=10.0)
    ps.on_packet(grad(0, 0, 1, vec(1)), now=12.0)
    ps.on_packet(grad(1, 0, 1, vec(1)), now=14.0)
    assert ps.silent(14.0, 5.0) == []
    assert ps.silent(16.0, 5.0) == [2]  # chunk 1 lacks worker 2, last heard at 10
    assert ps.silent(16.0, 0) == []  # 0 = never report
    ps.change_members([0, 1])  # chunk 0 re-opened (it counted 2), chunk 1 done over {0, 1}
    assert ps.silent(16.0, 5.0) == []  # 2 is no member any more; 0 and 1 were heard
    assert ps.silent(20.0, 5.0) == [0, 1]  # they have not resent chunk 0 for too long


def test_member_change_validates_the_new_set():
    ps = PsState(JOB, [0, 1, 2], n_chunks=1, k=K)
    for bad in ([], [0, 3]):
        with pytest.raises(ValueError, match="subset"):
            ps.change_members(bad)


# ------------------------------------------------------------------ the worker


def test_killed_worker_result_over_the_old_mask_is_refused_after_the_change():
    wr = WorkerRound(job_id=JOB, worker_id=0, round_=3, values=np.arange(K, dtype=np.int32),
                     schedule=[(0, 0, 1)], k=K, expect_mask=0b011)
    wr.start(0.0)
    old = InaPacket(msg_type=TYPE_RESULT, flags=0, job_id=JOB, round=3, chunk_id=0, agg_id=0,
                    fan_in=0, count=3, worker_id=0, bitmap=0b111, values=vec(1))
    wr.on_packet(old, 0.1)
    assert not wr.done and wr.stats.unexpected_results == 1
    wr.on_packet(replace(old, bitmap=0b011, count=2), 0.2)
    assert wr.done


def _cfg(tmp_path, **kw) -> JobConfig:
    base = dict(job_id=1, mode="ina", rounds=10, train=TrainConfig(), worker_ids=[0, 1, 2],
                worker_addrs=[], ps_addr=("", 0), result_dests=[],
                schedules={"0": [(0, 5, 3)], "1": [(0, 5, 3)], "2": [(0, 5, 3)]},
                frac_bits=8, n_values=1, out_dir=str(tmp_path))
    return JobConfig(**{**base, **kw})


def test_members_follow_the_ps_record(tmp_path):
    path = tmp_path / "control.json"
    book = ControlReader(_cfg(tmp_path, control_file=str(path)))
    assert not book.refresh() and book.at(5).members == [0, 1, 2]
    log = ControlLog(job_bounds(_cfg(tmp_path)))  # the PS: worker 1 removed while round 4 is incomplete
    log.accept({"kind": "members", "removed": [1],
                "schedules": {"0": [[0, 5, 2]], "2": [[0, 5, 2]]}}, lowest_incomplete=4)
    write_record(path, log.record)
    assert book.refresh() and not book.refresh()  # read again only when it changes
    assert book.at(3).members == [0, 1, 2] and book.at(4).members == [0, 2]
    # the change's schedules hold from its round only
    assert book.at(3).schedule(0) == [(0, 5, 3)] and book.at(9).schedule(2) == [(0, 5, 2)]
    # no record: never changes
    assert ControlReader(_cfg(tmp_path)).at(9).members == [0, 1, 2]


# ------------------------------------------------------------------ the controller side


@pytest.fixture(scope="module")
def leafspine():
    """leafspine:2,1,2 — leaf0: h0 (PS), h1; leaf1: h2, h3; S = {leaf1}."""
    g = parse_topology("leafspine:2,1,2")
    job = make_job(g, "h0", ["h1", "h2", "h3"])
    plan = build_plan(job, solve_lp(job, ["leaf1"]), budget=1)
    net = plan_network(g)
    hosts = {h: (i.ip, i.mac) for h, i in net.hosts.items()}
    return g, plan, net, hosts


def test_killed_worker_rule_diff_is_its_membership_mask_and_tree(leafspine):
    """h3 (bit 2) leaves job 1: only job 1's entries change (mask 0b011 everywhere, h3's
    membership entry at leaf1, leaf1's RESULT group and its own NACK tree for job 1 without
    h3's port); job 2 keeps h3."""
    g, plan, net, hosts = leafspine
    workers = ("h1", "h2", "h3")
    old = switch_rules(g, plan, net.ports, hosts, [SwitchJob(1, workers), SwitchJob(2, workers)])
    new = switch_rules(g, plan, net.ports, hosts,
                       [SwitchJob(1, workers, frozenset({2})), SwitchJob(2, workers)])
    assert SwitchJob(1, workers, frozenset({2})).full_mask == 0b011
    for s in old:
        ch = rule_changes(old[s], new[s])
        assert not ch.insert and ch.default is None
        assert [(e.table, e.match["hdr.ina.job_id"], e.params["full_mask"]) for e in ch.modify
                ] == [(ING + "job_table", 1, 0b011)]
        if s == "leaf1":
            (gone,) = ch.delete
            assert gone.table == ING + "ina_member" and gone.match == {
                "hdr.ina.job_id": 1, "hdr.ina.worker_id": 2,
                "standard_metadata.ingress_port": net.ports["leaf1"]["h3"]}
            assert ch.groups["modify"] == {1: [net.ports["leaf1"]["h2"]],
                                           ASK_GROUP_BASE: [net.ports["leaf1"]["h2"]]}
            assert new["leaf1"].mcast_groups[2] == old["leaf1"].mcast_groups[2]
            assert (new["leaf1"].mcast_groups[ASK_GROUP_BASE + 1]
                    == old["leaf1"].mcast_groups[ASK_GROUP_BASE + 1])  # job 2's NACK tree
        else:
            assert not ch.delete and not any(ch.groups.values())


def test_killed_worker_survivors_are_planned_again(leafspine):
    g, plan, _, _ = leafspine
    new = replan_members(g, plan, ["h1", "h2"])
    assert new.deployed == plan.deployed and new.switch_ids == plan.switch_ids
    assert new.job.workers == ["h1", "h2"] and new.job.removed_workers == ["h3"]
    sched = member_schedules("ina", plan, ["h1", "h2", "h3"], ["h1", "h2"], 10, g)
    assert set(sched) == {"0", "1"}
    assert sched == {"0": chunk_schedule(new, 10)["h1"], "1": chunk_schedule(new, 10)["h2"]}
    # every chunk aggregated at leaf1 now waits for h2 alone (h3 is gone)
    leaf1 = plan.switch_ids["leaf1"]
    assert all(f == 1 for _, a, f in sched["1"] if a == leaf1)
    assert member_schedules("tor_only", plan, ["h1", "h2", "h3"], ["h1", "h3"], 2, g) == {
        "0": [(0, plan.switch_ids["leaf0"], 2), (1, plan.switch_ids["leaf0"], 2)],
        "2": [(0, plan.switch_ids["leaf0"], 2), (1, plan.switch_ids["leaf0"], 2)]}
    assert member_schedules("ps_only", plan, ["h1", "h2"], ["h1"], 2, g) is None
    with pytest.raises(ExperimentError, match="every worker"):
        replan_members(g, plan, [])


def test_parse_kill_worker():
    ws = ["h1", "h2", "h3"]
    assert parse_kill_worker("h2@3", ws, 10) == ("h2", 3)
    for text, needle in [("h2", "expected HOST@ROUND"), ("h2@x", "expected HOST@ROUND"),
                         ("h0@1", "'h0' is not a worker"), ("h2@9", "round 9 must be in 0..8")]:
        with pytest.raises(ExperimentError, match=needle):
            parse_kill_worker(text, ws, 10)
    with pytest.raises(ExperimentError, match="at least 2 workers"):
        parse_kill_worker("h1@0", ["h1"], 10)


def test_worker_failure_options_parse_and_bad_ones_are_one_line(tmp_path, capsys):
    from controller.cli.main import UsageError, build_parser
    from controller.experiment.methods.ina.method import settings_from_args

    parser = build_parser()
    args = parser.parse_args(["run", "--on-worker-failure", "continue", "--kill-worker", "h2@1"])
    s = settings_from_args(args)
    assert (s.on_worker_failure, s.kill_worker) == ("continue", "h2@1")
    assert settings_from_args(parser.parse_args(["run"])).on_worker_failure == "stop"
    with pytest.raises(UsageError, match="--on-worker-failure: invalid choice: 'maybe'"):
        parser.parse_args(["run", "--on-worker-failure", "maybe"])

    from controller.cli.main import main as cli_main
    out = tmp_path / "out"
    for extra, msg in ((["--kill-worker", "h9@1"], "--kill-worker: 'h9' is not a worker"),
                       (["--kill-worker", "h1@7", "--rounds", "5"], "round 7 must be in 0..3")):
        code = cli_main(["run", "--out", str(out), *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and msg in err, err
    assert not out.exists()


class _Proc:
    def __init__(self) -> None:
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code

    def terminate(self) -> None:
        self.code = 3

    def kill(self) -> None:
        self.code = -9


class _Procs:
    def __init__(self, hosts: list[str]) -> None:
        self.procs = {h: _Proc() for h in hosts}


class _Switches:
    """A SwitchMonitor with no switch to write to (the stop path never writes rules)."""

    def __init__(self, jobs: list[SwitchJob]) -> None:
        self.jobs = jobs


def _round(worker: int, r: int) -> RoundEvent:
    return RoundEvent(job=1, worker=worker, round=r, time_s=0.1, retransmits=0)


def test_killed_worker_with_stop_ends_the_job_with_one_line_naming_it(tmp_path):
    job = SwitchJob(1, ("h1", "h2", "h3"))
    mon = WorkerMonitor(_Switches([job]), "stop", say=lambda _: None, kill=("h2", 1))
    mon.begin("ina", job, "h0", tmp_path / "control.json", lambda left: None)
    procs = _Procs(["h0", "h1", "h2", "h3"])
    mon.on_procs(procs)
    for host, i in (("h1", 0), ("h2", 1), ("h3", 2)):
        mon.on_event(host, _round(i, 0))
    mon.poll()
    assert procs.procs["h2"].code is None  # round 1 not reported yet
    mon.on_event("h1", _round(0, 1))
    mon.poll()
    assert procs.procs["h2"].code is None  # another worker's round 1: h2 has not finished it
    mon.on_event("h2", _round(1, 1))
    mon.poll()
    assert procs.procs["h2"].code == -9  # the injected kill, once h2 finished round 1
    assert not mon.on_failure("h0", 1)  # not a worker: the runner's own rules apply
    with pytest.raises(WorkerStopped, match=r"^worker h2 died \(exit code -9\) in round 2; "
                                            r"the job stops$"):
        mon.on_failure("h2", -9)
    # the PS and the survivors were asked to end (they write what they finished)
    assert {h: p.code for h, p in procs.procs.items()} == {"h0": 3, "h1": 3, "h2": -9,
                                                            "h3": 3}
    (ev,) = mon.events
    assert (ev.worker, ev.worker_id, ev.cause, ev.exit_code, ev.round_noticed, ev.policy,
            ev.round_effective) == ("h2", 1, "exit", -9, 2, "stop", None)
    assert ev.detected_s is not None and ev.detected_s >= 0
    assert mon.requests == []  # no removal asked of the PS


def test_silent_worker_with_stop_is_named_from_the_ps_line(tmp_path):
    job = SwitchJob(1, ("h1", "h2", "h3"))
    mon = WorkerMonitor(_Switches([job]), "stop", say=lambda _: None)
    mon.begin("ps_only", job, "h0", tmp_path / "control.json", lambda left: None)
    mon.on_procs(_Procs(["h0", "h1", "h2", "h3"]))
    mon.on_event("h3", _round(2, 4))
    mon.on_event("h0", SilentEvent(job=1, round=5, workers=[2], after_s=10.0))
    with pytest.raises(WorkerStopped, match=r"^worker h3 went silent .* in round 5; the job"):
        mon.poll()


def test_exact_sums_by_round_uses_each_rounds_members(tmp_path):
    """Worker 2 dies after round 0: its gradients come from its .q file, round 1 on sum
    workers 0 and 1 only."""
    rng = np.random.default_rng(0)
    q = rng.integers(-1000, 1000, (3, 3, 5), dtype=np.int64).astype(np.int32)  # w, r, v
    (tmp_path / "worker2.q").write_bytes(q[2, :2].tobytes())
    members = [[0, 1, 2], [0, 1], [0, 1]]
    for w in (0, 1):
        sums = np.stack([q[members[r]][:, r].sum(axis=0) for r in range(3)]).astype(np.int32)
        np.savez(tmp_path / f"worker{w}.npz", q=q[w], sums=sums)
    assert exact_sums_by_round(tmp_path, 3, 5, members) == [True, True, True]
    assert exact_sums_by_round(tmp_path, 3, 5, [[0, 1, 2]] * 3) == [True, False, False]


# ------------------------------------------------------------------ processes over loopback


def test_killed_worker_over_loopback_leaves_and_survivor_sums_stay_exact(tmp_path):
    """PS and 3 workers on loopback (PS-only schedules); worker 1 is killed (SIGKILL) once
    round 1 is reported; the test plays the controller: it asks the PS to drop it.  The
    survivors finish every round, each sum exact over the round's members.  What the test
    follows of the processes is their events."""
    n_workers, rounds = 3, 6
    train = TrainConfig(model="logreg", n_workers=n_workers, rounds=rounds, batch_size=16)
    n_values = Replica(train, 0).params.size
    ports = free_udp_ports(n_workers + 1)
    addrs = [("127.0.0.1", p) for p in ports[1:]]
    control = tmp_path / "control.json"
    cfg = JobConfig(
        job_id=7, mode="ps_only", rounds=rounds, train=train, worker_ids=[0, 1, 2],
        worker_addrs=addrs, ps_addr=("127.0.0.1", ports[0]), result_dests=addrs,
        schedules={str(w): ps_only_schedule(n_chunks_for(n_values, K)) for w in range(3)},
        frac_bits=choose_frac_bits(8.0, n_workers), n_values=n_values, out_dir=str(tmp_path),
        round_timeout_s=30, timeout=0.05, control_file=str(control),
        start_file=str(tmp_path / "start"))
    job = tmp_path / "job.json"
    cfg.save(job)
    ps = subprocess.Popen([sys.executable, "-m", "workers.ina.ps_node", str(job)],
                          stdout=subprocess.PIPE, text=True)
    procs = [subprocess.Popen([sys.executable, "-m", "workers.ina.worker_node", str(job),
                               "--worker", str(w)], stdout=subprocess.PIPE, text=True)
             for w in range(n_workers)]
    try:
        for p in procs:
            assert p.stdout.readline().endswith("ready\n")
        (tmp_path / "start").touch()
        while True:  # worker 0's events: kill worker 1 once round 1 is done
            ev = parse_event(procs[0].stdout.readline())
            if isinstance(ev, RoundEvent) and ev.round == 1:
                break
        os.kill(procs[1].pid, signal.SIGKILL)
        assert procs[1].wait(timeout=10) == -9
        time.sleep(0.3)  # the survivors are now stuck in the round worker 1 never finished
        assert send_request(request_path(control), {"kind": "members", "removed": [1]})
        assert [procs[w].wait(timeout=60) for w in (0, 2)] == [0, 0]
        ps.terminate()
        assert ps.wait(timeout=30) == 0
        ps_out = ps.stdout.read()
    finally:
        for p in [ps, *procs]:
            p.kill()
    report = json.loads((tmp_path / "ps.json").read_text())
    (change,) = report["member_changes"]
    e = change["from_round"]
    assert change["removed"] == [1] and 2 <= e <= 3
    assert ControlEvent(job=7, version=1, kind="members", from_round=e, members=[0, 2]) in [
        parse_event(line) for line in ps_out.splitlines()]
    assert report["rounds_completed"] == rounds
    per_round = json.loads((tmp_path / "worker0.json").read_text())["rounds"]
    members = [r["members"] for r in per_round]
    assert members == [[0, 1, 2]] * e + [[0, 2]] * (rounds - e)
    assert exact_sums_by_round(tmp_path, 3, n_values, members) == [True] * rounds
    accs = [json.loads((tmp_path / f"worker{w}.json").read_text())["rounds"][-1]["accuracy"]
            for w in (0, 2)]
    assert accs[0] == accs[1]  # the survivors' replicas stayed identical
