"""``python -m controller run``'s options per method (controller/cli/run.py): the shared ones in
``run``, each method's own declared by its class; ``run --method X --help`` shows X's, another
method's option is one error line, defaults do not cross from one method to another.  And the
methods' modules stay small (issue 24: no method module over ~400 lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli.main import build_parser, main
from controller.experiment.methods.ina.method import Settings
from controller.experiment.registry import METHODS
from controller.experiment.run_options import SHARED_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
OWN = {  # an option of each method that no other method has
    "ina": "--fail-switch", "async": "--policies", "bcube": "--bcube", "cluster": "--cluster-k",
    "ndn": "--ndn-sweep", "ddp": "--ddp-modes",
}


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["run", *argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_run_help_lists_the_methods_and_the_shared_options_only(capsys):
    out = _help(capsys)
    for cls in METHODS.values():
        assert cls.help in out
    assert "--rounds" in out and "--bw" in out and "--out" in out
    assert not any(opt in out for opt in (*OWN.values(), "--budget", "--topo"))


@pytest.mark.parametrize("method", sorted(METHODS))
def test_method_help_shows_its_options_and_no_others(method, capsys):
    out = _help(capsys, "--method", method)
    own = OWN[METHODS[method].name]
    assert own in out and "--rounds" in out
    assert not any(opt in out for name, opt in OWN.items() if opt != own), out


def test_an_abbreviated_method_gets_its_options(capsys):
    assert "--policies" in _help(capsys, "--meth", "async")


@pytest.mark.parametrize("argv, option", [
    (["--method", "async", "--budget", "2"], "--budget"),
    (["--method", "cluster", "--workers", "3"], "--workers"),
    (["--method", "bcube", "--topo", "fattree:4"], "--topo"),
    (["--method", "ndn", "--fail-switch", "leaf0@1"], "--fail-switch"),
    (["--policies", "async"], "--policies"),  # INA (the default) has no policies
])
def test_another_methods_option_is_one_line(argv, option, tmp_path, capsys):
    code = main(["run", *argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"unrecognized arguments: {option}" in err and "--help" in err, err
    assert not any(tmp_path.iterdir())


def test_defaults_belong_to_their_method():
    parse = build_parser().parse_args
    ina, ddp, cluster = parse(["run"]), parse(["run", "--method", "ddp"]), \
        parse(["run", "--method", "cluster"])
    asyn, bcube = parse(["run", "--method", "async"]), parse(["run", "--method", "bcube"])
    assert (ina.workers, ina.budget, ina.modes) == ("6", 2, "ina,ps_only")
    assert ddp.workers == "4" and not hasattr(ddp, "modes")
    assert not hasattr(cluster, "workers") and cluster.round_timeout == 120.0
    for ns in (asyn, bcube, cluster):  # INA's plan and transport are INA's (and DDP's)
        assert not any(hasattr(ns, k) for k in ("budget", "window", "timeout", "modes",
                                                "fail_switch", "loss", "slots"))
    assert not hasattr(bcube, "topo") and asyn.soft_sync == 1
    for ns in (ina, ddp, cluster, asyn, bcube):
        assert {k: getattr(ns, k) for k in SHARED_DEFAULTS} == SHARED_DEFAULTS


def test_shared_defaults_are_the_settings_of_make_run():
    s = Settings()
    assert {k: getattr(s, k) for k in SHARED_DEFAULTS} == SHARED_DEFAULTS


def test_method_modules_stay_small():
    """ina/ aside (the INA engine), no module of a method's package is over ~400 lines
    (ddp/method.py, the largest, 412): tables, plots and records live in sibling modules, the
    skeleton in the runner's Method."""
    methods = ROOT / "controller" / "experiment" / "methods"
    sizes = {str(p.relative_to(methods)): len(p.read_text().splitlines())
             for p in methods.rglob("*.py") if "ina" not in p.relative_to(methods).parts}
    assert len(sizes) > 10 and max(sizes.values()) <= 420, sizes


def test_several_jobs_take_only_the_joint_planners(tmp_path, capsys):
    """--planner with --jobs: a planner that declared it places one job (rounding) is
    refused in one line before anything starts."""
    from controller.cli.main import main

    code = main(["run", "--jobs", "2", "--planner", "rounding", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --planner rounding places one job; several jobs "
                                 "(--jobs) are placed by one of greedy, exact, top_degree, "
                                 "random, tor_only, best, tor_all"]
    assert not (tmp_path / "r").exists()
