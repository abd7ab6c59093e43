"""Every command's ``--help`` ends with an example line, and the example parses; error lines
name the option and the form it accepts."""

from __future__ import annotations

import shlex

import pytest

from controller.cli.main import EXAMPLES, build_parser, main
from controller.cli.run import RUN_EXAMPLES
from controller.experiment.registry import METHODS


def _subcommands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "plan" in a.choices)
    return sorted(sub.choices)


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name", _subcommands())
def test_every_subcommand_help_ends_with_an_example(name, capsys):
    out = _help([name, "--help"], capsys)
    tail = out.rstrip().splitlines()[-2:]
    example = RUN_EXAMPLES[None] if name == "run" else EXAMPLES[name]
    assert tail == ["example:", f"  {example}"], out
    assert example.startswith(f"python -m controller {name}")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_help_ends_with_its_example(method, capsys):
    out = _help(["run", "--method", method, "--help"], capsys)
    assert out.rstrip().splitlines()[-2:] == ["example:", f"  {RUN_EXAMPLES[method]}"]
    argv = shlex.split(RUN_EXAMPLES[method])[3:]
    assert method == "ina" or argv[:3] == ["run", "--method", method]
    assert build_parser().parse_args(argv).method == method  # the example parses


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_examples_parse(name):
    args = build_parser().parse_args(shlex.split(EXAMPLES[name])[3:])
    assert args.command == name


def test_the_top_level_help_has_an_example(capsys):
    out = _help(["--help"], capsys)
    assert "example:\n  python -m controller plan --help" in out


@pytest.mark.parametrize("command", ["compile", "run", "stf"])
def test_pyswitch_help_ends_with_an_example(command, capsys):
    from pyswitch.__main__ import main as pyswitch_main

    try:
        code = pyswitch_main([command, "--help"])
    except SystemExit as exc:
        code = exc.code
    assert code in (0, None)
    out = capsys.readouterr().out
    assert f"example:\n  python -m pyswitch {command} " in out


@pytest.mark.parametrize(("argv", "needles"), [
    (["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "3", "--budget", "x",
      "--out", "p.json"], ["--budget", "'x'", "expected a whole number"]),
    (["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "3", "--budget", "1",
      "--time-limit", "soon", "--out", "p.json"], ["--time-limit", "expected a number"]),
    (["plan", "--topo", "fattree:5", "--ps", "h0", "--workers", "3", "--budget", "1",
      "--out", "p.json"], ["--topo", "k must be an even integer"]),
    (["plan", "--topo", "mesh:3", "--ps", "h0", "--workers", "3", "--budget", "1",
      "--out", "p.json"], ["--topo", "expected fattree:K, leafspine:L,S,H"]),
    (["run", "--rounds", "many"], ["--rounds", "between 1 and"]),
    (["run", "--fail-switch", "agg0"], ["--fail-switch", "SWITCH@ROUND"]),
    (["plan", "--topo", "fattree:4", "--ps", "h0", "--workers", "3", "--budget", "1",
      "--planner", "fastest", "--out", "p.json"], ["--planner", "choose from"]),
])
def test_error_lines_name_the_option_and_the_form(argv, needles, capsys, tmp_path,
                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ")
    for needle in needles:
        assert needle in line, line
    assert not list(tmp_path.iterdir())  # nothing written


def test_simulate_help_lists_no_option_it_refuses(capsys):
    """simulate takes run's shared options, but --repeats and --target are refused there in
    one line: its --help does not offer them."""
    from controller.cli.main import main
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = capsys.readouterr().out
    assert "--budgets" in out and "--repeats" not in out and "--target" not in out
