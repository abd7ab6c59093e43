"""Bad input to every command line (issue 20, item 5), table-driven.

Each case runs one CLI in-process through its ``main(argv)`` and asserts: a non-zero exit,
exactly one line on stderr and no traceback, that line naming the offending thing (every
``needle`` appears in it), and nothing created or changed in the fixture folder the outputs
would go to.  ``controller run`` and ``pyswitch run`` never get to start anything: their
launchers are replaced by a function that fails the test (validation must come first).
A few cases run as real subprocesses (``python -m ...``) to check the process exit code.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OK_P4 = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct H { h_t h; }
struct M { }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) {
    state start { p.extract(h.h); transition accept; } }
control VC(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t s) {
    DECL
    apply { BODY } }
control E(inout H h, inout M m, inout standard_metadata_t s) { apply { } }
control CC(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def p4(decl: str = "", body: str = "h.h.a = 8w1;") -> str:
    return OK_P4.replace("DECL", decl).replace("BODY", body)


GOOD_RESULTS = {
    "run": "good", "settings": {"topo": "fattree:4", "bw": 1.0, "workers": "2", "rounds": 1},
    "modes": {"ina": {"grad_bytes": 100, "rounds": [
        {"time_s": 0.2, "ps_rx_bytes": 10, "busiest_link_bytes": 20, "retransmissions": 0,
         "accuracy": 0.5, "exact": True}]}},
}


def _with(path: str, value: object) -> dict:
    """GOOD_RESULTS with the dotted ``path`` set to ``value`` (list indices as numbers)."""
    doc = json.loads(json.dumps(GOOD_RESULTS))
    keys = path.split(".")
    node: object = doc
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]  # type: ignore[index]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value  # type: ignore[index]
    return doc


# -- the fixture folder: inputs the cases point at, and where their outputs would go -----------

@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad_cli")
    (d / "outdir").mkdir()
    (d / "afile.json").write_text("{}\n")
    (d / "ok.p4").write_text(p4())
    (d / "lit.p4").write_text(p4(body="h.h.a = " + "1" * 100_000 + ";"))
    (d / "widelit.p4").write_text(p4(body="h.h.a = (bit<8>)(4w99999999999999999999);"))
    (d / "over.p4").write_text(p4(body="h.h.a = 8w300;"))
    (d / "reg.p4").write_text(p4(decl="register<bit<8>>(4294967295) r;",
                                 body="r.write(0, 8w1);"))
    (d / "ctr.p4").write_text(p4(decl="counter(32w0 - 1, CounterType.packets) c;",
                                 body="c.count(0);"))
    (d / "negreg.p4").write_text(p4(decl="register<bit<8>>(-1) r;", body="r.write(0, 8w1);"))
    (d / "syntax.p4").write_text(p4(body="h.h.a = ;"))
    (d / "dup.p4").write_text(p4(decl="action a() { } action a() { }"))
    (d / "incl.p4").write_text('#include "nope_missing.p4"\n' + p4())
    (d / "deep.p4").write_text(p4(body="{" * 3000 + "}" * 3000))
    # a Latin-1 byte where the grammar needs a character (in a comment it is harmless)
    (d / "latin1.p4").write_bytes(p4(body="h.h.PLACE = 8w1;").encode().replace(
        b"PLACE", b"caf\xe9"))
    (d / "empty.p4").write_text("")
    (d / "ok.stf").write_text("packet 0 01\nexpect 0 01\n")
    (d / "bad.stf").write_text("frobnicate 1 2 3\n")
    topo = {"hosts": ["h0", "h1", "h2"], "switches": ["s0"],
            "links": [{"a": h, "b": "s0"} for h in ("h0", "h1", "h2")]}
    (d / "topo_ok.json").write_text(json.dumps(topo))
    (d / "topo_latin1.json").write_bytes(b'{"hosts": ["h\xe9"], "switches": [], "links": []}')
    (d / "topo_notjson.json").write_text("{hosts: ")
    (d / "topo_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "topo_bigbw.json").write_text(json.dumps(topo).replace(
        '"b": "s0"}', '"b": "s0", "bw": 1' + "0" * 400 + '}', 1))
    (d / "topo_hugeint.json").write_text(json.dumps(topo).replace(
        '"b": "s0"}', '"b": "s0", "bw": ' + "9" * 5000 + '}', 1))
    (d / "topo_nokeys.json").write_text('{"hosts": []}')
    (d / "topo_list.json").write_text("[1, 2]")
    (d / "topo_dir.json").mkdir()
    good = d / "runs" / "good"
    good.mkdir(parents=True)
    (good / "results.json").write_text(json.dumps(GOOD_RESULTS))
    for name, content in COMPARE_FILES.items():
        run = d / "runs" / name
        run.mkdir()
        if isinstance(content, bytes):
            (run / "results.json").write_bytes(content)
        elif isinstance(content, str):
            (run / "results.json").write_text(content)
        elif content is DIRECTORY:
            (run / "results.json").mkdir()
        elif content is not MISSING:
            (run / "results.json").write_text(json.dumps(content))
    return d


DIRECTORY, MISSING = object(), object()
# name -> content of runs/<name>/results.json (bytes/str written as is, else JSON)
COMPARE_FILES: dict[str, object] = {
    "c_notjson": '{"modes": ',
    "c_empty": "",
    "c_latin1": b'{"modes": {"\xe9": {}}}',
    "c_binary": bytes(range(256)),
    "c_array": [1, 2, 3],
    "c_string": "\"modes\"",
    "c_number": "42",
    "c_null": "null",
    "c_nomodes": {"run": "x", "settings": {}},
    "c_modes_list": {"modes": [1, 2]},
    "c_modes_str": {"modes": "ina"},
    "c_mode_number": _with("modes.ina", 7),
    "c_rounds_dict": _with("modes.ina.rounds", {"0": {}}),
    "c_round_str": _with("modes.ina.rounds", ["round"]),
    "c_round_null": _with("modes.ina.rounds", [None]),
    "c_time_str": _with("modes.ina.rounds.0.time_s", "fast"),
    "c_time_list": _with("modes.ina.rounds.0.time_s", [0.1, 0.2]),
    "c_time_obj": _with("modes.ina.rounds.0.time_s", {"s": 1}),
    "c_time_bool": _with("modes.ina.rounds.0.time_s", True),
    "c_retx_str": _with("modes.ina.rounds.0.retransmissions", "many"),
    "c_ps_huge": json.dumps(GOOD_RESULTS).replace('"ps_rx_bytes": 10',
                                                  '"ps_rx_bytes": 1' + "0" * 400),
    "c_ps_5000digits": json.dumps(GOOD_RESULTS).replace('"ps_rx_bytes": 10',
                                                        '"ps_rx_bytes": ' + "9" * 5000),
    "c_time_1e999": json.dumps(GOOD_RESULTS).replace('"time_s": 0.2', '"time_s": 1e999'),
    "c_time_nan": json.dumps(GOOD_RESULTS).replace('"time_s": 0.2', '"time_s": NaN'),
    "c_acc_inf": json.dumps(GOOD_RESULTS).replace('"accuracy": 0.5', '"accuracy": -Infinity'),
    "c_gradbytes_str": _with("modes.ina.grad_bytes", "100 B"),
    "c_settings_list": _with("settings", [1]),
    "c_rounds_setting_str": _with("settings.rounds", "ten"),
    "c_bw_str": _with("settings.bw", "1 Mbit/s"),
    "c_bcube_bad": _with("settings.bcube", [4]),
    "c_gamma_str": {**GOOD_RESULTS, "gamma": "high"},
    "c_gamma_pred_str": {**GOOD_RESULTS, "gamma": {"predicted": "0.7"}},
    "c_run_number": {**GOOD_RESULTS, "run": 5},
    "c_method_list": {**GOOD_RESULTS, "method": ["ina"]},
    "c_policies_list": {"policies": [1]},
    "c_policy_runs_dict": {"policies": {"kappa": {"runs": {"a": 1}}}},
    "c_policy_duration_str": {"policies": {"kappa": {"runs": [{"duration_s": "2s"}]}}},
    "c_rules_linkbytes_list": {"rules": {"central": {"runs": [{"link_bytes": [1]}]}}},
    "c_rules_linkbytes_str": {"rules": {"central": {"runs": [{"link_bytes": {"a->h0": "x"}}]}}},
    "c_rules_rounds_int": {"rules": {"central": {"runs": [{"rounds": 3}]}}},
    "c_acc_2_5": _with("modes.ina.rounds.0.accuracy", 2.5),
    "c_acc_negative": _with("modes.ina.rounds.0.accuracy", -0.1),
    "c_retx_fraction": _with("modes.ina.rounds.0.retransmissions", 1.5),
    "c_retx_negative": _with("modes.ina.rounds.0.retransmissions", -1),
    "c_gamma_negative": {**GOOD_RESULTS, "gamma": {"predicted": 0.7, "measured": -0.5}},
    "c_job_gamma_negative": {**GOOD_RESULTS, "jobs": {"a": {"gamma": {"predicted": -1}}}},
    "c_mode_final_acc": _with("modes.ina.final_accuracy", 1.5),
    "c_mode_retx_fraction": _with("modes.ina.retransmissions", 0.5),
    "c_policy_acc": {"policies": {"kappa": {"runs": [{"final_accuracy": 2.5}]}}},
    "c_policy_duration_negative": {"policies": {"kappa": {"runs": [{"duration_s": -2}]}}},
    "c_rules_acc": {"rules": {"central": {"runs": [{"final_accuracy": 1.01}]}}},
    "c_deep": '{"modes": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "c_resdir": DIRECTORY,
    "c_noresults": MISSING,
}


@dataclass(frozen=True)
class Case:
    cli: str  # "controller" or "pyswitch"
    argv: Callable[[Path], list[str]]
    needles: tuple[str, ...]  # each must appear in the error line ("{fx}" = fixture folder)


def C(*argv: str) -> Callable[[Path], list[str]]:
    """argv with ``{fx}`` replaced by the fixture folder."""
    return lambda fx: [a.replace("{fx}", str(fx)) for a in argv]


PLAN = ("plan", "--topo", "leafspine:2,1,2", "--ps", "h0", "--workers", "2", "--budget", "1",
        "--no-baselines", "--out", "{fx}/outdir/plan.json")


def plan(*override: str) -> Callable[[Path], list[str]]:
    """PLAN with the given ``--option value`` pairs replacing (or adding to) its own."""
    argv = list(PLAN)
    for opt, val in zip(override[::2], override[1::2], strict=True):
        if opt in argv:
            argv[argv.index(opt) + 1] = val
        else:
            argv[-2:-2] = [opt, val]
    return C(*argv)


RUN = ("run", "--topo", "leafspine:2,1,2", "--ps", "h0", "--workers", "2", "--budget", "1",
       "--rounds", "5", "--out", "{fx}/outdir/runs")


def run(*extra: str) -> Callable[[Path], list[str]]:
    argv = list(RUN)
    for opt, val in zip(extra[::2], extra[1::2], strict=True):
        if opt in argv:
            argv[argv.index(opt) + 1] = val
        else:
            argv += [opt, val]
    return C(*argv)


def compile_(*argv: str) -> Callable[[Path], list[str]]:
    return C("compile", *argv)


def compile_src(name: str) -> Callable[[Path], list[str]]:
    return C("compile", f"{{fx}}/{name}", "-o", "{fx}/outdir/prog.json",
             "--p4runtime-files", "{fx}/outdir/prog.p4info.txtpb")


BIG = "1" * 5000
CASES: dict[str, Case] = {
    # ---- controller plan: output paths (checked before the LP) -------------------------
    "plan-out-is-dir": Case("controller", plan("--out", "{fx}/outdir"), ("--out", "directory")),
    "plan-out-under-file": Case("controller", plan("--out", "{fx}/afile.json/p.json"),
                                ("--out", "afile.json")),
    "plan-out-unwritable": Case("controller", plan("--out", "/proc/insync-nope/p.json"),
                                ("--out", "/proc")),
    "plan-out-empty": Case("controller", plan("--out", ""), ("--out",)),
    "plan-out-nul": Case("controller", plan("--out", "{fx}/outdir/a\0b.json"), ("--out",)),
    "plan-out-name-too-long": Case("controller", plan("--out", "{fx}/outdir/" + "x" * 300),
                                   ("--out",)),
    "plan-out-trailing-slash": Case("controller", plan("--out", "{fx}/outdir/new/"),
                                    ("--out",)),
    # ---- controller plan: numbers -----------------------------------------------------
    "plan-budget-word": Case("controller", plan("--budget", "x"), ("--budget",)),
    "plan-budget-5000-digits": Case("controller", plan("--budget", BIG), ("--budget", "5000")),
    "plan-budget-negative": Case("controller", plan("--budget", "-1"), ("--budget",)),
    "plan-budget-float": Case("controller", plan("--budget", "1.5"), ("--budget", "1.5")),
    "plan-budget-underscore": Case("controller", plan("--budget", "1_0"), ("--budget",)),
    "plan-budget-superscript": Case("controller", plan("--budget", "²"), ("--budget",)),
    "plan-budget-empty": Case("controller", plan("--budget", ""), ("--budget",)),
    "plan-capacity-inf": Case("controller", plan("--capacity", "inf"), ("--capacity",)),
    "plan-capacity-nan": Case("controller", plan("--capacity", "nan"), ("--capacity",)),
    "plan-capacity-1e400": Case("controller", plan("--capacity", "1e400"), ("--capacity",)),
    "plan-capacity-negative": Case("controller", plan("--capacity", "-1"), ("--capacity",)),
    "plan-capacity-zero": Case("controller", plan("--capacity", "0"), ("--capacity",)),
    "plan-capacity-word": Case("controller", plan("--capacity", "lots"), ("--capacity",)),
    "plan-time-limit-zero": Case("controller", plan("--time-limit", "0"), ("--time-limit",)),
    "plan-time-limit-negative": Case("controller", plan("--time-limit", "-5"),
                                     ("--time-limit",)),
    "plan-time-limit-inf": Case("controller", plan("--time-limit", "inf"), ("--time-limit",)),
    "plan-time-limit-nan": Case("controller", plan("--time-limit", "nan"), ("--time-limit",)),
    "plan-seed-huge": Case("controller", plan("--seed", "9" * 100), ("--seed",)),
    "plan-seed-word": Case("controller", plan("--seed", "abc"), ("--seed",)),
    "plan-maxcomb-negative": Case("controller", plan("--max-combinations", "-1"),
                                  ("--max-combinations",)),
    "plan-maxcomb-huge": Case("controller", plan("--max-combinations", "9" * 30),
                              ("--max-combinations",)),
    "plan-maxcomb-over-limit": Case("controller", plan("--max-combinations", "2000001"),
                                    ("--max-combinations",)),
    "plan-solver": Case("controller", plan("--solver", "gurobi"), ("--solver", "gurobi")),
    # ---- controller plan: workers and PS ------------------------------------------------
    "plan-workers-zero": Case("controller", plan("--workers", "0"), ("--workers",)),
    "plan-workers-5000-digits": Case("controller", plan("--workers", BIG), ("--workers",)),
    "plan-workers-superscript": Case("controller", plan("--workers", "²"), ("--workers",)),
    "plan-workers-too-many": Case("controller", plan("--workers", "99"), ("--workers", "99")),
    "plan-workers-empty": Case("controller", plan("--workers", ""), ("--workers",)),
    "plan-workers-commas": Case("controller", plan("--workers", ",,,"), ("--workers",)),
    "plan-workers-twice": Case("controller", plan("--workers", "h1,h1"), ("h1",)),
    "plan-workers-is-ps": Case("controller", plan("--workers", "h0"), ("h0",)),
    "plan-workers-switch": Case("controller", plan("--workers", "leaf0"), ("leaf0",)),
    "plan-workers-unknown": Case("controller", plan("--workers", "nosuch"), ("nosuch",)),
    "plan-ps-unknown": Case("controller", plan("--ps", "nosuch"), ("nosuch",)),
    "plan-ps-switch": Case("controller", plan("--ps", "leaf0"), ("leaf0",)),
    "plan-ps-empty": Case("controller", plan("--ps", ""), ("PS",)),
    # ---- controller plan: topologies (sizes before building) ----------------------------
    "plan-topo-fattree-200": Case("controller", plan("--topo", "fattree:200"),
                                  ("k=200", "MAX_NODES")),
    "plan-topo-underscores": Case("controller", plan("--topo", "fattree:1_0_0_0"),
                                  ("fattree:1_0_0_0",)),
    "plan-topo-fattree-0": Case("controller", plan("--topo", "fattree:0"), ("fat-tree", "got 0")),
    "plan-topo-fattree-odd": Case("controller", plan("--topo", "fattree:3"), ("fat-tree", "got 3")),
    "plan-topo-fattree-word": Case("controller", plan("--topo", "fattree:x"), ("fattree:x",)),
    "plan-topo-leafspine-short": Case("controller", plan("--topo", "leafspine:1"),
                                      ("leafspine:1",)),
    "plan-topo-bcube-huge": Case("controller", plan("--topo", "bcube:1000,5"),
                                 ("bcube n=1000 k=5", "MAX_NODES")),
    "plan-topo-unknown-kind": Case("controller", plan("--topo", "torus:3"), ("torus:3",)),
    "plan-topo-empty": Case("controller", plan("--topo", ""), ("topolog",)),
    "plan-topo-file-latin1": Case("controller", plan("--topo", "{fx}/topo_latin1.json"),
                                  ("topo_latin1.json",)),
    "plan-topo-file-notjson": Case("controller", plan("--topo", "{fx}/topo_notjson.json"),
                                   ("topo_notjson.json",)),
    "plan-topo-file-deep": Case("controller", plan("--topo", "{fx}/topo_deep.json"),
                                ("topo_deep.json",)),
    "plan-topo-file-bigbw": Case("controller", plan("--topo", "{fx}/topo_bigbw.json"),
                                 ("topo_bigbw.json",)),
    "plan-topo-file-hugeint": Case("controller", plan("--topo", "{fx}/topo_hugeint.json"),
                                   ("topo_hugeint.json",)),
    "plan-topo-file-nokeys": Case("controller", plan("--topo", "{fx}/topo_nokeys.json"),
                                  ("topo_nokeys.json",)),
    "plan-topo-file-list": Case("controller", plan("--topo", "{fx}/topo_list.json"),
                                ("topo_list.json",)),
    "plan-topo-file-missing": Case("controller", plan("--topo", "{fx}/nope.json"),
                                   ("nope.json",)),
    "plan-topo-file-dir": Case("controller", plan("--topo", "{fx}/topo_dir.json"),
                               ("topo_dir.json",)),
    # ---- controller: the parser itself ---------------------------------------------------
    "plan-unknown-option": Case("controller", plan("--bogus", "1"), ("--bogus",)),
    "plan-missing-out": Case("controller", C(*PLAN[:-2]), ("--out",)),
    "plan-missing-topo": Case("controller", C("plan", "--ps", "h0", "--workers", "2",
                                              "--budget", "1", "--out", "{fx}/outdir/p.json"),
                              ("--topo",)),
    "controller-no-command": Case("controller", C(), ("command",)),
    "controller-unknown-command": Case("controller", C("plna"), ("plna",)),
    # ---- controller run: options checked before anything starts ------------------------
    "run-rounds-zero": Case("controller", run("--rounds", "0"), ("--rounds",)),
    "run-rounds-huge": Case("controller", run("--rounds", "10000001"), ("--rounds",)),
    "run-rounds-word": Case("controller", run("--rounds", "ten"), ("--rounds",)),
    "run-hidden-zero": Case("controller", run("--hidden", "0"), ("--hidden",)),
    "run-hidden-huge": Case("controller", run("--hidden", "1000000000"), ("--hidden",)),
    "run-budget-negative": Case("controller", run("--budget", "-1"), ("--budget",)),
    "run-bw-negative": Case("controller", run("--bw", "-1"), ("--bw",)),
    "run-bw-inf": Case("controller", run("--bw", "inf"), ("--bw",)),
    "run-bw-nan": Case("controller", run("--bw", "nan"), ("--bw",)),
    "run-loss-one": Case("controller", run("--loss", "1"), ("--loss",)),
    "run-loss-negative": Case("controller", run("--loss", "-0.1"), ("--loss",)),
    "run-loss-nan": Case("controller", run("--loss", "nan"), ("--loss",)),
    "run-dup-two": Case("controller", run("--dup", "2"), ("--dup",)),
    "run-reorder": Case("controller", run("--reorder", "1.5"), ("--reorder",)),
    "run-seed-negative": Case("controller", run("--seed", "-1"), ("--seed",)),
    "run-seed-5000-digits": Case("controller", run("--seed", BIG), ("--seed",)),
    "run-repeats-zero": Case("controller", run("--repeats", "0"), ("--repeats",)),
    "run-repeats-huge": Case("controller", run("--repeats", "100000"), ("--repeats",)),
    "run-window-zero": Case("controller", run("--window", "0"), ("--window",)),
    "run-window-huge": Case("controller", run("--window", "1000000"), ("--window",)),
    "run-timeout-zero": Case("controller", run("--timeout", "0"), ("--timeout",)),
    "run-timeout-negative": Case("controller", run("--timeout", "-1"), ("--timeout",)),
    "run-timeout-inf": Case("controller", run("--timeout", "inf"), ("--timeout",)),
    "run-round-timeout-zero": Case("controller", run("--round-timeout", "0"),
                                   ("--round-timeout",)),
    "run-out-is-file": Case("controller", run("--out", "{fx}/afile.json"), ("--out",)),
    "run-out-unwritable": Case("controller", run("--out", "/proc/insync-nope"),
                               ("--out", "/proc")),
    "run-out-empty": Case("controller", run("--out", ""), ("--out",)),
    "run-name-parent": Case("controller", run("--name", "../escape"), ("--name",)),
    "run-name-slash": Case("controller", run("--name", "a/b"), ("--name",)),
    "run-name-dotdot": Case("controller", run("--name", ".."), ("--name",)),
    "run-fail-switch-no-at": Case("controller", run("--fail-switch", "leaf0"),
                                  ("--fail-switch",)),
    "run-fail-switch-word": Case("controller", run("--fail-switch", "leaf0@x"),
                                 ("--fail-switch",)),
    "run-fail-switch-huge": Case("controller", run("--fail-switch", "leaf0@" + BIG),
                                 ("--fail-switch",)),
    "run-fail-switch-unknown": Case("controller", run("--fail-switch", "nosuch@1"),
                                    ("--fail-switch", "nosuch")),
    "run-fail-switch-late": Case("controller", run("--fail-switch", "leaf0@100"),
                                 ("--fail-switch",)),
    "run-fail-switch-host": Case("controller", run("--fail-switch", "h1@1"),
                                 ("--fail-switch", "h1")),
    "run-modes-unknown": Case("controller", run("--modes", "ina,bogus"), ("--modes", "bogus")),
    "run-modes-empty": Case("controller", run("--modes", ","), ("--modes",)),
    "run-method-unknown": Case("controller", run("--method", "bogus"), ("--method", "bogus")),
    "run-model-unknown": Case("controller", run("--model", "resnet"), ("--model", "resnet")),
    "run-target-unknown": Case("controller", run("--target", "tofino"), ("--target",)),
    "run-topo-underscores": Case("controller", run("--topo", "fattree:1_0_0_0"),
                                 ("fattree:1_0_0_0",)),
    "run-topo-huge": Case("controller", run("--topo", "fattree:200"), ("k=200",)),
    "run-workers-too-many": Case("controller", run("--workers", "99"), ("--workers", "99")),
    "run-workers-5000-digits": Case("controller", run("--workers", BIG), ("--workers",)),
    "run-ps-unknown": Case("controller", run("--ps", "nosuch"), ("nosuch",)),
    "run-unknown-option": Case("controller", run("--bogus", "1"), ("--bogus",)),
    # ---- controller compare: --out ------------------------------------------------------
    "compare-out-is-dir": Case("controller", C("compare", "{fx}/runs/good", "--out",
                                               "{fx}/outdir"), ("--out",)),
    "compare-out-unwritable": Case("controller", C("compare", "{fx}/runs/good", "--out",
                                                   "/proc/insync-nope/c.json"), ("--out",)),
    # the output is an input: the run's results must not be replaced (nothing written)
    "compare-out-is-input": Case("controller", C("compare", "{fx}/runs/good", "--out",
                                                 "{fx}/runs/good/results.json"),
                                 ("--out", "runs/good/results.json", "input")),
    "compare-out-is-input-file": Case("controller", C(
        "compare", "{fx}/runs/good/results.json", "--out", "{fx}/runs/good/../good/results.json"),
        ("--out", "input")),
    "compare-no-runs": Case("controller", C("compare"), ("RUN",)),
    "compare-missing-path": Case("controller", C("compare", "{fx}/runs/nowhere"),
                                 ("nowhere",)),
    # ---- pyswitch compile -------------------------------------------------------------
    "compile-100000-digit-literal": Case("pyswitch", compile_src("lit.p4"),
                                         ("lit.p4", "literal")),
    "compile-wide-literal": Case("pyswitch", compile_src("widelit.p4"),
                                 ("widelit.p4", "4 bits")),
    "compile-literal-overflow": Case("pyswitch", compile_src("over.p4"),
                                     ("over.p4", "300")),
    "compile-register-2^32-1": Case("pyswitch", compile_src("reg.p4"),
                                    ("reg.p4", "register size")),
    "compile-counter-2^32-1": Case("pyswitch", compile_src("ctr.p4"),
                                   ("ctr.p4", "counter size")),
    "compile-register-negative": Case("pyswitch", compile_src("negreg.p4"), ("negreg.p4",)),
    "compile-syntax-error": Case("pyswitch", compile_src("syntax.p4"), ("syntax.p4",)),
    "compile-duplicate-names": Case("pyswitch", compile_src("dup.p4"), ("dup.p4",)),
    "compile-missing-include": Case("pyswitch", compile_src("incl.p4"), ("nope_missing.p4",)),
    "compile-deep-nesting": Case("pyswitch", compile_src("deep.p4"), ("deep.p4",)),
    "compile-not-utf8": Case("pyswitch", compile_src("latin1.p4"), ("latin1.p4:11",)),
    "compile-empty-source": Case("pyswitch", compile_src("empty.p4"), ("empty.p4",)),
    "compile-missing-source": Case("pyswitch", compile_src("nope.p4"), ("nope.p4",)),
    "compile-source-is-dir": Case("pyswitch", compile_src("outdir"), ("outdir", "directory")),
    "compile-o-is-dir": Case("pyswitch", compile_("{fx}/ok.p4", "-o", "{fx}/outdir"),
                             ("outdir", "directory")),
    "compile-o-under-file": Case("pyswitch", compile_("{fx}/ok.p4", "-o",
                                                      "{fx}/afile.json/x.json"),
                                 ("afile.json",)),
    "compile-p4info-is-dir": Case("pyswitch", compile_("{fx}/ok.p4", "-o",
                                                       "{fx}/outdir/prog.json",
                                                       "--p4runtime-files", "{fx}/outdir"),
                                  ("outdir", "directory")),
    # the P4Info cannot be written: the device config (-o) must not be left behind
    "compile-p4info-unwritable": Case("pyswitch", compile_(
        "{fx}/ok.p4", "-o", "{fx}/outdir/prog.json",
        "--p4runtime-files", "/proc/insync-nope/p.txtpb"), ("/proc/insync-nope",)),
    "compile-o-is-source": Case("pyswitch", compile_("{fx}/ok.p4", "-o", "{fx}/ok.p4"),
                                ("ok.p4",)),
    "compile-two-outputs-same": Case("pyswitch", compile_(
        "{fx}/ok.p4", "-o", "{fx}/outdir/x", "--p4runtime-files", "{fx}/outdir/x"),
        ("outdir/x",)),
    "compile-define-empty-name": Case("pyswitch", compile_("{fx}/ok.p4", "-D", "=1",
                                                           "-o", "{fx}/outdir/p.json"),
                                      ("-D",)),
    "compile-define-bad-name": Case("pyswitch", compile_("{fx}/ok.p4", "-D", "1X=2",
                                                         "-o", "{fx}/outdir/p.json"),
                                    ("1X",)),
    "compile-arch": Case("pyswitch", compile_("{fx}/ok.p4", "--arch", "psa", "-o",
                                              "{fx}/outdir/p.json"), ("--arch",)),
    "compile-std": Case("pyswitch", compile_("{fx}/ok.p4", "--std", "p4-14", "-o",
                                             "{fx}/outdir/p.json"), ("--std",)),
    "compile-p4info-format": Case("pyswitch", compile_("{fx}/ok.p4", "--p4runtime-format",
                                                       "yaml"), ("--p4runtime-format",)),
    "compile-unknown-option": Case("pyswitch", compile_("{fx}/ok.p4", "--bogus"),
                                   ("--bogus",)),
    "compile-no-source": Case("pyswitch", compile_(), ("source",)),
    "pyswitch-no-command": Case("pyswitch", C(), ("command",)),
    "pyswitch-unknown-command": Case("pyswitch", C("compiel"), ("compiel",)),
    # ---- pyswitch run: argument errors (nothing is served) ------------------------------
    "swrun-iface-no-at": Case("pyswitch", C("run", "--no-p4", "-i", "eth0"), ("eth0",)),
    "swrun-iface-port-word": Case("pyswitch", C("run", "--no-p4", "-i", "a@eth0"), ("a@eth0",)),
    "swrun-iface-no-name": Case("pyswitch", C("run", "--no-p4", "-i", "1@"), ("1@",)),
    "swrun-iface-twice": Case("pyswitch", C("run", "--no-p4", "-i", "1@a", "-i", "1@b"),
                              ("1@b", "twice")),
    "swrun-device-id-word": Case("pyswitch", C("run", "--no-p4", "--device-id", "x"),
                                 ("--device-id",)),
    "swrun-cpu-port-word": Case("pyswitch", C("run", "--no-p4", "--cpu-port", "x"),
                                ("--cpu-port",)),
    "swrun-seed-word": Case("pyswitch", C("run", "--no-p4", "--seed", "x"), ("--seed",)),
    "swrun-config-and-no-p4": Case("pyswitch", C("run", "{fx}/afile.json", "--no-p4"),
                                   ("--no-p4",)),
    "swrun-config-missing": Case("pyswitch", C("run", "{fx}/nope.json"), ("nope.json",)),
    "swrun-config-not-program": Case("pyswitch", C("run", "{fx}/afile.json"),
                                     ("afile.json",)),
    "swrun-impair-bad": Case("pyswitch", C("run", "--no-p4", "-i", "1@a", "--impair",
                                           "1:frob=2"), ("frob",)),
    "swrun-impair-port": Case("pyswitch", C("run", "--no-p4", "-i", "1@a", "--impair",
                                            "7:loss=0.1"), ("--impair",)),
    "swrun-unknown-option": Case("pyswitch", C("run", "--bogus"), ("--bogus",)),
    # ---- pyswitch stf --------------------------------------------------------------------
    "stf-no-program": Case("pyswitch", C("stf"), ("PROG.p4",)),
    "stf-program-and-corpus": Case("pyswitch", C("stf", "{fx}/ok.p4", "--corpus", "{fx}"),
                                   ("--corpus",)),
    "stf-program-missing": Case("pyswitch", C("stf", "{fx}/nope.p4", "{fx}/ok.stf"),
                                ("nope.p4",)),
    "stf-stf-missing": Case("pyswitch", C("stf", "{fx}/ok.p4", "{fx}/nope.stf"),
                            ("nope.stf",)),
    "stf-bad-stf": Case("pyswitch", C("stf", "{fx}/ok.p4", "{fx}/bad.stf"), ("bad.stf",)),
    "stf-compile-error": Case("pyswitch", C("stf", "{fx}/syntax.p4", "{fx}/ok.stf"),
                              ("syntax.p4",)),
    "stf-timeout-word": Case("pyswitch", C("stf", "{fx}/ok.p4", "--timeout", "x"),
                             ("--timeout",)),
    "stf-unknown-option": Case("pyswitch", C("stf", "--bogus"), ("--bogus",)),
}
# ---- controller compare: one malformed results.json each (a table of good runs is
# checked in tests/test_compare.py); the line names the file ---------------------------
for _name in COMPARE_FILES:
    CASES[f"compare-{_name}"] = Case("controller", C("compare", f"{{fx}}/runs/{_name}",
                                                     "--out", "{fx}/outdir/cmp.json"),
                                     (_name,))


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a digest of its contents (folders as "dir")."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:
            out[os.path.join(dirpath, n)] = "dir"
        for n in filenames:
            p = os.path.join(dirpath, n)
            out[p] = hashlib.sha1(Path(p).read_bytes()).hexdigest()
    return out


def _no_launch(*_a: object, **_k: object) -> None:
    raise AssertionError("bad input reached the launcher: validation must come first")


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    import controller.cli.run
    import pyswitch.daemon

    monkeypatch.setattr(controller.cli.run, "execute", _no_launch)
    monkeypatch.setattr(pyswitch.daemon, "serve", _no_launch)
    monkeypatch.setattr(pyswitch.daemon, "Port", _no_launch)


def test_at_least_100_cases() -> None:
    assert len(CASES) >= 100


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(name: str, fx: Path, capsys: pytest.CaptureFixture[str],
                   no_launch: None) -> None:
    case = CASES[name]
    argv = case.argv(fx)
    before = _snapshot(fx)
    if case.cli == "controller":
        from controller.cli.main import main
    else:
        from pyswitch.__main__ import main
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exit would mean a multi-line usage message
        code = exc.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code not in (0, None), (code, captured.err)
    assert "Traceback" not in captured.err
    assert len(lines) == 1, captured.err
    line = lines[0]
    for needle in case.needles:
        assert needle.replace("{fx}", str(fx)) in line, (needle, line)
    assert _snapshot(fx) == before, "bad input created or changed files"


def test_compare_skips_bad_runs_and_prints_the_good(fx: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli.main import main

    bad = ["c_notjson", "c_time_str", "c_ps_5000digits", "c_deep", "c_noresults"]
    code = main(["compare", str(fx / "runs" / "good"), *(str(fx / "runs" / b) for b in bad)])
    captured = capsys.readouterr()
    assert code == 0
    lines = captured.err.strip().splitlines()
    assert len(lines) == len(bad) and "Traceback" not in captured.err
    for b, line in zip(bad, lines, strict=True):
        assert b in line and "skipped" in line
    assert "good" in captured.out and "ina" in captured.out


def _subprocess(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv, needle", [
    (("controller", "plan", "--topo", "fattree:1_0_0_0", "--ps", "h0", "--workers", "2",
      "--budget", "1", "--out", "p.json"), "fattree:1_0_0_0"),
    (("controller", "compare", "runs/c_latin1"), "c_latin1"),
    (("pyswitch", "compile", "lit.p4", "-o", "outdir/lit.json"), "lit.p4"),
    (("pyswitch", "run", "--bogus"), "--bogus"),
    # 127 workers' shards of the 1,437 digits hold 11 samples, a batch is 16: each worker
    # died in round 0 on Mininet; refused before anything is planned or written
    (("controller", "run", "--network", "simulated", "--topo", "fattree:8", "--workers", "all",
      "--budget", "0", "--out", "runs/shards"), "127 workers leave 11 training samples"),
], ids=["plan", "compare", "compile", "run", "shards-below-batch"])
def test_bad_input_subprocess(argv: tuple[str, ...], needle: str, fx: Path) -> None:
    """The real processes: a non-zero exit status and one line, nothing written."""
    before = _snapshot(fx)
    r = _subprocess(*argv, cwd=fx)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert _snapshot(fx) == before


def test_compile_writes_both_outputs_or_neither(fx: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A P4Info that cannot be written leaves an earlier device config as it was (not a new
    one that no longer matches its P4Info); a good compile writes both, no temp files."""
    from pyswitch.__main__ import main

    old = tmp_path / "prog.json"
    old.write_text("earlier build")
    assert main(["compile", str(fx / "ok.p4"), "-o", str(old),
                 "--p4runtime-files", "/proc/insync-nope/p.txtpb"]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert old.read_text() == "earlier build"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.json"]
    info = tmp_path / "sub" / "prog.p4info.txtpb"
    assert main(["compile", str(fx / "ok.p4"), "-o", str(old),
                 "--p4runtime-files", str(info)]) == 0
    assert old.read_text().startswith("{") and info.read_text().startswith("pkg_info")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["prog.json", "prog.p4info.txtpb",
                                                           "sub"]
