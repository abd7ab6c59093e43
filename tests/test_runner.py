"""controller.experiment.runner without Mininet: results kept when a run stops mid-way, --repeats
statistics, provenance, the launch sequence on local processes, and ``clean``'s matching."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys

import pytest
from rich.console import Console

from controller.experiment import provenance
from controller.experiment.clean import find_leftovers, is_our_process
from controller.experiment.records import ModeSummary, repeat_stats
from controller.experiment.runner import (
    Launch,
    Method,
    Node,
    RoutedNetwork,
    Run,
    Trial,
    execute,
)


def _console() -> Console:
    return Console(file=io.StringIO(), width=160)


def _mode(seed: int, mode: str) -> dict:
    t = {"a": 1.0, "b": 2.0}[mode] + seed  # seconds per round: differ by seed
    return {"rounds": [{"time_s": t, "ps_rx_bytes": 100.0, "busiest_link_bytes": 300.0,
                        "retransmissions": seed, "accuracy": 0.5 + 0.1 * seed, "exact": True}
                       for _ in range(3)], "grad_bytes": 40}


class FakeMethod(Method):
    """Two modes per seed; ``stop_at`` raises in that mode, as Ctrl-C or a failure would."""

    name = "fake"

    def __init__(self, args: argparse.Namespace, stop_at: tuple[int, str] | None = None,
                 error: type[BaseException] = KeyboardInterrupt) -> None:
        super().__init__(args)
        self.stop_at, self.error = stop_at, error

    def prepare(self, run: Run) -> None:
        run.settings = {"rounds": 3}

    def trials(self, run: Run):
        for rep, seed in enumerate(run.seeds):
            for mode in ("a", "b"):
                yield Trial(mode, mode, seed, rep, run.out_dir / mode)

    @contextlib.contextmanager
    def network(self, run: Run, name: str = ""):
        yield None

    def run_trial(self, run: Run, trial: Trial, net) -> dict:
        if (trial.repeat, trial.kind) == self.stop_at:
            raise self.error()
        return _mode(trial.seed, trial.kind)

    def results(self, run: Run) -> dict:
        return {**super().results(run), "exact_all_rounds": True}


def _args(tmp_path, repeats: int = 1, seed: int = 0) -> argparse.Namespace:
    return argparse.Namespace(out=str(tmp_path), name="r", seed=seed, repeats=repeats)


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_run_stopped_in_its_second_mode_keeps_the_first(tmp_path, error):
    with pytest.raises(error):
        execute(FakeMethod(_args(tmp_path), stop_at=(0, "b"), error=error), console=_console())
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc["complete"] is False
    assert list(doc["modes"]) == ["a"] and doc["modes"]["a"] == _mode(0, "a")
    assert doc["method"] == "fake" and doc["settings"] == {"rounds": 3}
    assert set(provenance.PROVENANCE_KEYS) <= set(doc["provenance"])
    assert not list((tmp_path / "r").glob(".results.json.*"))  # no temporary file left


def test_a_finished_run_is_complete_with_provenance(tmp_path):
    res = execute(FakeMethod(_args(tmp_path)), console=_console(),
                  argv=["python", "-m", "controller", "run"])
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc == json.loads(json.dumps(res))
    assert doc["complete"] is True and list(doc["modes"]) == ["a", "b"]
    assert doc["exact_all_rounds"] is True and "repeats" not in doc
    assert doc["provenance"]["command_line"] == ["python", "-m", "controller", "run"]


def test_repeats_give_mean_and_std_per_mode(tmp_path):
    console = _console()
    res = execute(FakeMethod(_args(tmp_path, repeats=3, seed=5)), console=console)
    rep = res["repeats"]
    assert rep["n"] == 3 and rep["seeds"] == [5, 6, 7]
    assert res["modes"]["a"] == _mode(5, "a")  # the first repeat stays where it always was
    assert [r["seed"] for r in rep["runs"]] == [6, 7]
    a = rep["stats"]["a"]
    assert a["s_per_round"]["mean"] == pytest.approx(7.0)  # 1 + 5, 6, 7
    assert a["s_per_round"]["std"] == pytest.approx((2 / 3) ** 0.5)
    assert a["retransmissions"]["mean"] == pytest.approx(3 * 6)  # 3 rounds x seed
    assert a["exact"] == {"n": 3, "of": 3} and a["repeats"] == 3
    assert rep["stats"]["b"]["s_per_round"]["mean"] == pytest.approx(8.0)
    out = console.file.getvalue()
    assert "over 3 repeats" in out and "7.000±0.816" in out


def test_a_run_stopped_in_a_later_repeat_keeps_the_earlier_ones(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        execute(FakeMethod(_args(tmp_path, repeats=2), stop_at=(1, "b")), console=_console())
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert list(doc["modes"]) == ["a", "b"] and doc["complete"] is False
    assert doc["repeats"]["runs"] == [{"seed": 1, "modes": {"a": _mode(1, "a")}}]
    assert doc["repeats"]["stats"]["a"]["s_per_round"]["of"] == 2


def test_repeat_stats_counts_missing_values():
    def row(t: float | None, exact: bool | None) -> ModeSummary:
        return ModeSummary("r", "m", "a", 3, t, None, None, None, None, 0.9, exact)
    st = repeat_stats([row(1.0, True), row(3.0, False), row(None, None)])
    assert st["s_per_round"] == {"mean": 2.0, "std": 1.0, "n": 2, "of": 3}
    assert st["goodput_Bps"]["mean"] is None
    assert st["exact"] == {"n": 1, "of": 2}


def test_provenance_names_code_packages_host_and_command():
    p = provenance.collect(["python", "-m", "controller", "run", "--rounds", "3"])
    assert set(p) == set(provenance.PROVENANCE_KEYS)
    assert p["command_line"][-2:] == ["--rounds", "3"]
    assert p["packages"]["numpy"] and p["packages"]["networkx"]  # pinned in pyproject.toml
    assert "pulp" in p["packages"] and p["host"]["cpus"] >= 1
    if p["git_commit"] is not None:  # a clone; an unpacked tarball has none
        assert len(p["git_commit"]) == 40 and isinstance(p["git_dirty"], bool)
    json.dumps(p)


def test_process_cpu_time_is_read_from_proc():
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time\nt = time.process_time()\n"
                             "while time.process_time() - t < 0.3: pass"])
    clock = provenance.CpuClock({"sw": proc.pid})
    while proc.poll() is None:
        clock.sample("h1", proc.pid)
    # the last sample may precede the exit by a poll; getrusage has the exact total
    report = clock.report()
    assert report["reaped_children_cpu_s"] >= 0.25
    assert 0.0 < report["nodes_cpu_s"]["h1"] <= report["reaped_children_cpu_s"] + 0.05
    assert report["cpus"] >= 1


# ------------------------------------------------------------------ the launch sequence

SERVER = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("server ready", flush=True)
while True:
    time.sleep(0.05)
"""
NODE = """
import pathlib, sys, time
start = pathlib.Path(sys.argv[1])
print("node ready", flush=True)
while not start.exists():
    time.sleep(0.01)
t = time.process_time()
while time.process_time() - t < 0.1:
    pass
print("round 0", flush=True)
sys.exit(int(sys.argv[2]))
"""


class _Host:
    def __init__(self, name: str) -> None:
        self.name = name

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        script = SERVER if cmd[2] == "server" else NODE  # [python, -m, MODULE, *args]
        return subprocess.Popen([sys.executable, "-c", script, *cmd[3:]], **kw)


class _FakeMininet:
    """What Run.launch uses of a network: hosts that start processes, a plan with no
    switches (so no interface counters to read)."""

    def __init__(self) -> None:
        self.net = argparse.Namespace(get=_Host, switches=[])
        self.plan = argparse.Namespace(switches=[], ports={})


def test_launch_runs_servers_then_nodes_and_records_cpu(tmp_path):
    run = Run("fake", str(tmp_path), "l", console=_console())
    start = tmp_path / "start"
    lines = []
    done = run.launch(_FakeMininet(), Launch(
        label="m", out_dir=tmp_path, servers=[Node("h0", "server")],  # layers: not launched
        nodes=[Node(h, "node", (str(start), "0")) for h in ("h1", "h2")],  # layers: not launched
        start_file=start, timeout_s=20, on_line=lambda h, ln: lines.append(h)))
    assert done.server_codes == {"h0": 0} and done.moved == {}
    assert sorted(lines) == ["h1", "h2"] and done.wall_s > 0
    cpu = run.provenance["cpu"]["m"]
    assert set(cpu["nodes_cpu_s"]) == {"h0", "h1", "h2"}
    assert cpu["nodes_cpu_s"]["h1"] > 0.05 and cpu["reaped_children_cpu_s"] >= 0.2
    assert "--- h1" in (tmp_path / "logs.txt").read_text()


def test_launch_names_the_node_that_failed(tmp_path):
    from controller.errors import ExperimentError

    run = Run("fake", str(tmp_path), "l", console=_console())
    start = tmp_path / "start"
    with pytest.raises(ExperimentError, match=r"m: worker on h2 failed \(exit 3\)"):
        run.launch(_FakeMininet(), Launch(
            label="m", out_dir=tmp_path, servers=[Node("h0", "server")],  # layers: not launched
            nodes=[Node("h1", "node", (str(start), "0")), Node("h2", "node", (str(start), "3"))],  # layers: not launched
            start_file=start, timeout_s=20))
    assert "m" in run.provenance["cpu"]  # measured even when the mode failed


class GroupedFake(Method):
    """The declared skeleton on local processes: two kinds per seed, each trial one node
    process; results.json lays the trials out per kind (``GROUPS``) with mean ± std."""

    name = "grouped"
    GROUPS = "kinds"
    SUMMARY_KEYS = ("x",)

    def __init__(self, args: argparse.Namespace, stop_at: str | None = None) -> None:
        super().__init__(args)
        self.stop_at = stop_at

    def prepare(self, run: Run) -> None:
        self.kinds = ("a", "b")
        run.settings = {"k": 1}

    @contextlib.contextmanager
    def network(self, run: Run, name: str = ""):
        yield RoutedNetwork(_FakeMininet(), {})

    def job(self, run, trial, net):
        if trial.label == self.stop_at:
            raise KeyboardInterrupt
        trial.folder.mkdir(parents=True, exist_ok=True)
        return trial.folder / "start"

    def nodes(self, run, trial, job, net) -> Launch:
        return Launch(label=trial.label, out_dir=trial.folder, start_file=job, timeout_s=20,
                      nodes=[Node("h1", "node", (str(job), "0"))])  # layers: not launched

    def record(self, run, trial, job, net, done) -> dict:
        assert done.wall_s > 0
        return {"x": trial.seed + (10 if trial.kind == "b" else 0)}


def test_the_skeleton_runs_every_kind_for_every_seed_and_groups_them(tmp_path):
    res = execute(GroupedFake(_args(tmp_path, repeats=2, seed=3)), console=_console())
    assert res["method"] == "grouped" and "modes" not in res
    assert res["kinds"]["a"]["runs"] == [{"x": 3}, {"x": 4}]
    assert res["kinds"]["b"]["summary"]["x"] == {"mean": 13.5, "std": 0.5, "n": 2, "of": 2}
    assert res["repeats"] == {"n": 2, "seeds": [3, 4], "stats_in": "kinds"}
    assert (tmp_path / "r" / "b-seed4" / "logs.txt").exists()
    assert list(res["provenance"]["cpu"]) == ["a seed 3", "b seed 3", "a seed 4", "b seed 4"]


def test_a_grouped_run_stopped_midway_keeps_its_layout(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        execute(GroupedFake(_args(tmp_path), stop_at="b seed 0"), console=_console())
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc["complete"] is False and doc["settings"] == {"k": 1}
    assert doc["kinds"] == {"a": {"summary": {"x": {"mean": 0.0, "std": 0.0, "n": 1, "of": 1}},
                                  "runs": [{"x": 0}]}}


class NetworksFake(Method):
    """Trials on two networks: the base's execute starts each network once for the
    consecutive trials naming it, stops it before the next, prints the headline first and
    keeps every record as its trial ends."""

    name = "nets"

    def prepare(self, run: Run) -> None:
        run.settings = {}
        self.events: list[str] = []

    def headline(self, run: Run) -> str:
        return "about to run 4 trials"

    def trials(self, run: Run):
        for i, net in enumerate(("x", "x", "y", "x")):
            yield Trial(f"t{i}", "k", run.seeds[0], 0, run.out_dir / f"t{i}", network=net,
                        spec=i * 10)

    @contextlib.contextmanager
    def network(self, run: Run, name: str = ""):
        self.events.append(f"start {name}")
        try:
            yield name
        finally:
            self.events.append(f"stop {name}")

    def run_trial(self, run: Run, trial: Trial, net) -> dict:
        assert net == trial.network
        # the previous trials' records are on disk already
        done = json.loads((run.out_dir / "results.json").read_text())["modes"] \
            if trial.label != "t0" else {}
        self.events.append(f"{trial.label} after {sorted(done)}")
        return {"spec": trial.spec}


def test_the_base_execute_groups_trials_by_network_and_keeps_each_record(tmp_path):
    console = _console()
    method = NetworksFake(_args(tmp_path))
    res = execute(method, console=console)
    assert method.events == ["start x", "t0 after []", "t1 after ['t0']", "stop x",
                             "start y", "t2 after ['t0', 't1']", "stop y",
                             "start x", "t3 after ['t0', 't1', 't2']", "stop x"]
    assert res["modes"] == {"t0": {"spec": 0}, "t1": {"spec": 10}, "t2": {"spec": 20},
                            "t3": {"spec": 30}}
    assert console.file.getvalue().startswith("about to run 4 trials")


def test_no_method_overrides_execute():
    """The base owns the skeleton: every method of the registry fills hooks instead.  INA
    is the one exception left (its engine drives its modes; the lead moves it onto
    run_trial), named here so that no other method adds one."""
    from controller.experiment.registry import METHODS

    overriding = sorted({name for name, cls in METHODS.items() if cls.execute is not Method.execute})
    assert overriding == ["ina"]


def test_shared_options_are_checked_when_a_method_is_built(tmp_path):
    from controller.errors import ExperimentError

    for extra, msg in (({"bw": -1.0}, "--bw must be >= 0"), ({"loss": 1.0}, "--loss must be in"),
                       ({"round_timeout": 0.0}, "--round-timeout must be > 0"),
                       ({"name": "a/b"}, "--name")):
        with pytest.raises(ExperimentError, match=msg):
            FakeMethod(argparse.Namespace(**{**vars(_args(tmp_path)), **extra}))
    assert not any(tmp_path.iterdir())


# ------------------------------------------------------------------ clean


def test_clean_matches_only_what_our_runs_start():
    py = ".venv/bin/python"  # any interpreter: the module decides
    procs = {
        10: [py, "-m", "pyswitch", "run", "--device-id", "1"],
        11: [py, "-m", "workers.ina.ps_node", "job.json"],
        12: ["bash", "--norc", "--noediting", "-is", "mininet:h1"],
        13: [py, "-m", "pytest", "-q"],  # layers: not launched
        14: ["/usr/bin/vim", "-m", "workers.x"],  # layers: not launched
        15: ["simple_switch_grpc", "--device-id", "1"],
        16: [py, "-m", "controller", "run"],
    }
    assert [is_our_process(a) for a in procs.values()] == [True, True, True, False, False,
                                                           True, False]
    links = {"edge0-eth1": "veth", "h1-eth0": "veth", "eth0": "", "lo": "", "docker0": "bridge",
             "bc0_1": "bridge", "leaf0": "bridge", "t12345p1": "veth", "leaf0x": "bridge"}
    found = find_leftovers(procs, links, ["t12345h1", "m991h2", "other"])
    assert sorted(found.processes) == [10, 11, 12, 15]
    assert found.interfaces == ["edge0-eth1", "h1-eth0", "t12345p1"]
    assert found.bridges == ["bc0_1", "leaf0"]
    assert found.namespaces == ["m991h2", "t12345h1"]
    assert find_leftovers({}, {"eth0": ""}, []).empty()


def _method(tmp_path, *argv: str) -> tuple[Method, Run]:
    """A method built from ``run`` options, with the graph and hosts its trials read (no
    network, no root: ``prepare`` without the machine check)."""
    from controller.cli.run import parse_run
    from controller.experiment.registry import METHODS

    args, _ = parse_run("run", [*argv, "--out", str(tmp_path), "--name", "r"], None)
    method = METHODS[args.method](args)
    run = Run(args.method, args.out, args.name, seed=args.seed, repeats=method.repeats(),
              console=_console())
    method.validate()
    method.graph = method.topology()
    run.settings = method.settings(run)
    return method, run


def test_the_methods_trials_keep_their_order_labels_and_folders(tmp_path):
    """What the overrides of execute ran, in the order they ran it, is now the methods'
    ``trials``: NDN with its TCP baseline per worker count, BCube per network then seed."""
    ndn, run = _method(tmp_path, "--method", "ndn", "--topo", "leafspine:2,2,2",
                       "--ndn-sweep", "2,3", "--repeats", "2", "--seed", "5")
    got = [(t.label, t.kind, t.seed, t.repeat, t.folder.name, len(t.spec))
           for t in ndn.trials(run)]
    assert got == [("ndn@2", "ndn", 5, 0, "ndn@2", 2), ("tcp-ps@2", "tcp-ps", 5, 0, "tcp-ps@2", 2),
                   ("ndn@3", "ndn", 5, 0, "ndn@3", 3), ("tcp-ps@3", "tcp-ps", 5, 0, "tcp-ps@3", 3),
                   ("ndn@2", "ndn", 6, 1, "ndn@2-seed6", 2),
                   ("tcp-ps@2", "tcp-ps", 6, 1, "tcp-ps@2-seed6", 2),
                   ("ndn@3", "ndn", 6, 1, "ndn@3-seed6", 3),
                   ("tcp-ps@3", "tcp-ps", 6, 1, "tcp-ps@3-seed6", 3)]
    assert "worker counts [2, 3]" in ndn.headline(run)

    bc, run = _method(tmp_path, "--method", "bcube", "--bcube", "2,2", "--baselines", "ps",
                      "--grad-mb", "1", "--repeats", "2")
    got = [(t.network, t.label, t.seed, t.folder.name) for t in bc.trials(run)]
    assert got == [("bcube", "bcube@1MB", 0, "bcube@1MB"),
                   ("bcube", "bcube@1MB", 1, "bcube@1MB-seed1"),
                   ("fattree", "ps@1MB", 0, "ps@1MB"), ("fattree", "ps@1MB", 1, "ps@1MB-seed1")]
    assert "BCube(2,2)" in bc.headline(run) and "--target" not in bc.headline(run)
