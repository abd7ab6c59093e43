"""Which worker hosts share a process (controller/experiment/methods/ina/pools.py) and the
nodes the INA engine launches from it (engine.run_launch, on a stand-in network)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from controller.errors import ExperimentError
from controller.experiment.methods.ina import engine
from controller.experiment.methods.ina.pools import (
    AUTO,
    AUTO_FROM,
    AUTO_SIZE,
    group_workers,
    hosts_per_process,
    parse_hosts_per_process,
)


def test_the_setting_is_auto_or_a_whole_number():
    assert parse_hosts_per_process("auto") == AUTO
    assert parse_hosts_per_process(" AUTO ") == AUTO
    assert parse_hosts_per_process("08") == "8"
    for bad in ("0", "-2", "1.5", "many", "", "1e3", "９"):
        with pytest.raises(ExperimentError, match="--hosts-per-process"):
            parse_hosts_per_process(bad)


def test_auto_keeps_small_jobs_one_process_per_host():
    assert hosts_per_process(AUTO, 6, local_mininet=True) == 1  # make run's 6 workers
    assert hosts_per_process(AUTO, AUTO_FROM - 1, local_mininet=True) == 1
    assert hosts_per_process(AUTO, AUTO_FROM, local_mininet=True) == AUTO_SIZE
    assert hosts_per_process(AUTO, 64, local_mininet=True) == AUTO_SIZE
    assert hosts_per_process("4", 6, local_mininet=True) == 4  # asked for: pooled


@pytest.mark.parametrize("why", [
    {"local_mininet": False},  # cluster mode, the simulated network, the campaign's
    {"local_mininet": True, "kill_worker": True},
    {"local_mininet": True, "on_worker_failure": "continue"},
])
def test_a_worker_that_must_be_its_own_process_stays_one(why):
    assert hosts_per_process(AUTO, 64, **why) == 1
    assert hosts_per_process("16", 64, **why) == 1


def test_groups_keep_an_edge_switch_s_workers_together():
    workers = ["h1", "h2", "h3", "h4", "h5", "h6", "h7"]
    edge = {"h1": "e0", "h2": "e1", "h3": "e0", "h4": "e1", "h5": "e2", "h6": "e0",
            "h7": "e2"}
    assert group_workers(workers, 3, edge) == [[0, 2, 5], [1, 3, 4], [6]]
    assert group_workers(workers, 1, edge) == [[i] for i in range(7)]
    assert group_workers(workers, 100, edge) == [[0, 2, 5, 1, 3, 4, 6]]
    assert group_workers(workers, 2) == [[0, 1], [2, 3], [4, 5], [6]]  # no edges known
    groups = group_workers(workers, 3, edge)
    assert sorted(i for g in groups for i in g) == list(range(7))  # each worker once


def _launch_nodes(tmp_path, n_workers, per_process, pools_hosts=True):
    """The Launch run_launch hands the network for one job of ``n_workers``."""
    workers = [f"h{i + 1}" for i in range(n_workers)]
    seen = {}

    class Net:
        def __init__(self):
            self.pools_hosts = pools_hosts
            hosts = {w: SimpleNamespace(neighbours=[f"e{i // 4}"])
                     for i, w in enumerate(workers)}
            self.mininet = SimpleNamespace(plan=SimpleNamespace(hosts=hosts))

        def netns(self, host):
            return f"/proc/{100 + workers.index(host)}/ns/net"

        def launch(self, run, spec):
            seen["spec"] = spec
            raise RuntimeError("stop here")

    cfg = SimpleNamespace(out_dir=str(tmp_path), start_file=None, round_timeout_s=10,
                          rounds=1, save=lambda path: path.write_text("{}"))
    job = engine._Job("job", "h0", workers, cfg, 1.0)
    run = SimpleNamespace(progress=SimpleNamespace(add_task=lambda *a, **k: 0))
    with pytest.raises(RuntimeError, match="stop here"):
        engine.run_launch(run, Net(), "ina", "ina", [job], {"job": None},
                          SimpleNamespace(events=[]), tmp_path, solo=True,
                          per_process=per_process)
    return seen["spec"]


def test_the_engine_launches_one_pool_per_group_on_its_first_host(tmp_path):
    spec = _launch_nodes(tmp_path, 10, lambda n: 4)
    assert [(n.host, n.module) for n in spec.nodes] == [
        ("h1", "workers.ina.pool_node"), ("h5", "workers.ina.pool_node"),
        ("h9", "workers.ina.pool_node")]
    job = str(tmp_path / "job.json")
    assert spec.nodes[0].args == (job, "--member", "0=/proc/100/ns/net",
                                  "--member", "1=/proc/101/ns/net",
                                  "--member", "2=/proc/102/ns/net",
                                  "--member", "3=/proc/103/ns/net")
    assert spec.serves == {"h1": ["h1", "h2", "h3", "h4"], "h5": ["h5", "h6", "h7", "h8"],
                           "h9": ["h9", "h10"]}
    assert [n.module for n in spec.servers] == ["workers.ina.ps_node"]


def test_the_engine_keeps_one_process_per_host_where_it_must(tmp_path):
    for spec in (_launch_nodes(tmp_path, 6, lambda n: 1),
                 _launch_nodes(tmp_path, 6, lambda n: 4, pools_hosts=False),
                 _launch_nodes(tmp_path, 6, None)):
        assert [(n.host, n.module, n.args[1:]) for n in spec.nodes] == [
            (f"h{i + 1}", "workers.ina.worker_node", ("--worker", str(i))) for i in range(6)]
        assert spec.serves == {}
    # a group of one is the plain worker process
    spec = _launch_nodes(tmp_path, 5, lambda n: 4)
    assert [n.module for n in spec.nodes] == ["workers.ina.pool_node",
                                              "workers.ina.worker_node"]


def test_the_run_option_reaches_the_settings_and_a_bad_one_is_one_line():
    import subprocess
    import sys

    from controller.cli.main import build_parser
    from controller.experiment.methods.ina.options import settings_from_args

    def given(*argv):
        return settings_from_args(build_parser().parse_args(["run", *argv])).hosts_per_process

    assert given() == AUTO
    assert given("--hosts-per-process", "8") == "8"
    with pytest.raises(ExperimentError, match="--hosts-per-process"):
        given("--hosts-per-process", "0")
    r = subprocess.run([sys.executable, "-m", "controller", "run", "--hosts-per-process",
                        "lots"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "--hosts-per-process: expected auto or a whole number" in r.stderr


def test_a_failed_pool_is_reported_as_the_member_its_last_line_names():
    workers = [f"h{i + 1}" for i in range(8)]
    cfg = SimpleNamespace(rounds=1)
    job = engine._Job("job", "h0", workers, cfg, 1.0)
    seen = []
    monitor = SimpleNamespace(on_failure=lambda host, code: seen.append((host, code)) or True)
    run = SimpleNamespace(progress=SimpleNamespace(add_task=lambda *a, **k: 0))
    jw = engine._Watch(run, "ina", [job], {"job": monitor}, SimpleNamespace(), None, True)
    jw.serves = {"h1": workers[:4], "h5": workers[4:]}
    last = {"h1": "error: pool member worker 2: worker 2: round 3 not complete after 120 s",
            "h5": "error: pool of workers 4,5,6,7: no start signal (start) after 120 s",
            "h0": "error: pool member worker 1: a PS never says this"}
    jw.procs = SimpleNamespace(last_line=lambda host: last[host])
    assert jw.on_failure("h1", 1) and jw.on_failure("h5", 1) and jw.on_failure("h0", 1)
    # the member named; a pool's own failure under its first host; the PS as it is
    assert seen == [("h3", 1), ("h5", 1), ("h0", 1)]
