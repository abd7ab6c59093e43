"""The hostile probe of issue 27, table-driven: every input it found (and its kin) gives one
line on stderr, a non-zero exit, no traceback and no file created or changed.

The harness is tests/test_cli_bad_input.py's (one CLI run in-process through its
``main(argv)``); this file adds the probe's inputs: FIFOs, ``/dev/zero`` and over-long paths
as input files, results whose fields have the wrong type or do not give finite figures, job
weights that break the LP, STF values wider than their fields and commands naming what does
not exist, P4 programs with duplicate names, unclosed comments, macro bombs and huge stacks.
Issue 43 added pyswitch's other surfaces: FIFOs as compile outputs, duplicate action
parameters, bad Thrift requests over the wire (BMv2's codes, nothing applied), a newcomer's
slips in the in-process API and a PYSWITCH_NATIVE typo (the planted native module:
tests/test_native_cache.py).

Issue 43's host side too: ``run``'s empty fault-injection options and repeated modes; lines
on the PS's control channel (through the PS's own shell on a real FIFO: refused in one line
and answered, the record and the PS's state unchanged); digits cache files that are not a
split (made again in one line, a FIFO without hanging); and ``plan``'s picture of a
4,002-node topology in seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from test_cli_bad_input import GOOD_RESULTS, PLAN, C, Case, _with, p4
from test_cli_bad_input import run as run_cli

LONG = "x" * 5000  # longer than any file name (ENAMETOOLONG)

STF_P4 = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<32> a; bit<16> b; bit<8> c; }
struct H { h_t h; }
struct M { }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) {
    state start { p.extract(h.h); transition accept; } }
control VC(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t s) {
    counter(4, CounterType.packets) hits;
    register<bit<8>>(4) store;
    action fwd(bit<9> port) { s.egress_spec = port; }
    action set_c(bit<8> v) { h.h.c = v; }
    table route { key = { h.h.a: lpm; } actions = { fwd; NoAction; } default_action = NoAction(); }
    table ex { key = { h.h.b: exact; } actions = { set_c; NoAction; } default_action = NoAction(); }
    table tern { key = { h.h.c: ternary; } actions = { set_c; NoAction; }
                 default_action = NoAction(); }
    apply { route.apply(); ex.apply(); tern.apply(); hits.count(0); }
}
control E(inout H h, inout M m, inout standard_metadata_t s) { apply { } }
control CC(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
GOOD_STF = "add route h.a:0x0A000000/8 fwd(port:1)\npacket 0 0A000001 0000 00\nexpect 1 0A000001\n"

# name -> the STF file's text (each case runs it on STF_P4)
STF_FILES: dict[str, str | bytes] = {
    "lpm_prefix_99": "add route h.a:0x0A000000/99 fwd(port:1)\n",
    "lpm_value_too_wide": "add route h.a:0x1FFFFFFFF/8 fwd(port:1)\n",
    "exact_too_wide": "add ex h.b:0x12345 set_c(v:1)\n",
    "ternary_too_wide": "add tern 1 h.c:0x1FF set_c(v:1)\n",
    "param_too_wide": "add ex h.b:1 set_c(v:0x100)\n",
    "port_26_digits": "packet 12345678901234567890123456 00\n",
    "port_512": "packet 512 00\n",
    "expect_port_512": "expect 512 00\n",
    "packet_1e3": "packet 1e3 00\n",
    "counter_read_missing": "counter_read I.nothere 0\n",
    "counter_read_index": "counter_read I.hits 4\n",
    "register_read_missing": "register_read I.nothere 0\n",
    "check_counter_abc": "check_counter I.hits(0) packets == abc\n",
    "check_counter_no_paren": "check_counter I.hits 0\n",
    "check_counter_kind": "check_counter I.hits(0) frames == 1\n",
    "check_counter_missing": "check_counter I.nothere(0) packets == 1\n",
    "number_300_digits": "add ex h.b:" + "1" * 300 + " set_c(v:1)\n",
    "not_utf8": b"packet 0 00 # caf\xe9\n",
}


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("probe")
    (d / "outdir").mkdir()
    os.mkfifo(d / "fifo.json")
    os.mkfifo(d / "fifo.p4")
    os.mkfifo(d / "fifo.stf")
    for name in ("zero.json", "zero.p4", "zero.stf"):
        os.symlink("/dev/zero", d / name)
    (d / "ok.p4").write_text(p4())
    (d / "prog.p4").write_text(STF_P4)
    (d / "good.stf").write_text(GOOD_STF)
    for name, text in STF_FILES.items():
        path = d / f"{name}.stf"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    for name, text in P4_FILES.items():
        (d / f"{name}.p4").write_text(text)
    for name, text in JOBS_FILES.items():
        (d / f"jobs_{name}.json").write_text(text)
    runs = d / "runs"
    for name, content in RESULTS.items():
        run = runs / name
        run.mkdir(parents=True)
        if content == "FIFO":
            os.mkfifo(run / "results.json")
        elif content == "ZERO":
            os.symlink("/dev/zero", run / "results.json")
        else:
            (run / "results.json").write_text(content if isinstance(content, str)
                                              else json.dumps(content))
    return d


def _rounds(n: int, **values: object) -> dict:
    doc = json.loads(json.dumps(GOOD_RESULTS))
    doc["modes"]["ina"]["rounds"] = [dict(doc["modes"]["ina"]["rounds"][0], **values)
                                     for _ in range(n)]
    return doc


# name -> results.json of runs/<name> ("FIFO"/"ZERO": a FIFO, a symlink to /dev/zero)
RESULTS: dict[str, object] = {
    "good": GOOD_RESULTS,
    "markup": {**GOOD_RESULTS, "run": "[/bogus]"},
    "r_exact_str": _with("modes.ina.rounds.0.exact", "false"),
    "r_exact_int": _with("modes.ina.rounds.0.exact", 1),
    "r_matches_sim_str": {"settings": {"rounds": 2}, "rules": {"central": {"runs": [
        {"matches_simulation": "false", "rounds": [{"time_s": 1}]}]}}},
    "r_rounds_negative": {**_with("settings.rounds", -5), "policies": {"kappa": {"runs": [
        {"duration_s": 2.0}]}}},
    "r_rounds_zero": _with("settings.rounds", 0),
    "r_rounds_fraction": _with("settings.rounds", 2.5),
    "r_bytes_1e308": _rounds(3, ps_rx_bytes=1e308),
    "r_busiest_1e308": _rounds(2, busiest_link_bytes=1.5e308),
    "r_goodput_overflow": {**_rounds(1, time_s=1e-310), "modes": {"ina": {
        "grad_bytes": 1e300, "rounds": [{"time_s": 1e-310}]}}},
    "r_time_negative": _with("modes.ina.rounds.0.time_s", -0.4),
    "r_bytes_negative": _with("modes.ina.rounds.0.ps_rx_bytes", -10),
    "r_job_gamma_str": {**GOOD_RESULTS, "modes": {"a/ina": GOOD_RESULTS["modes"]["ina"]},
                        "jobs": {"a": {"gamma": {"predicted": "0.7"}}}},
    "r_jobs_list": {**GOOD_RESULTS, "jobs": [1]},
    "r_soft_sync_str": {"settings": {"rounds": 2}, "modes": {"ndn": {
        "pushes": 4, "duration_s": 1.0, "soft_sync": "two"}}},
    "r_policy_obj": {"settings": {"rounds": 2}, "modes": {"ndn": {
        "pushes": 4, "duration_s": 1.0, "policy": {"a": 1}}}},
    "r_topo_list": _with("settings.topo", ["fattree", 4]),
    "r_workers_obj": _with("settings.workers", {"n": 2}),
    "r_bcube_str": _with("settings.bcube", ["4", "1"]),
    "r_central_ps_int": {"settings": {"rounds": 2, "central_ps": 5}, "rules": {
        "central": {"runs": []}}},
    "r_fifo": "FIFO",
    "r_devzero": "ZERO",
}
BAD_RESULTS = {  # name -> what the error line must name besides the run
    "r_exact_str": "exact", "r_exact_int": "exact", "r_matches_sim_str": "matches_simulation",
    "r_rounds_negative": "settings.rounds", "r_rounds_zero": "settings.rounds",
    "r_rounds_fraction": "settings.rounds", "r_bytes_1e308": "finite",
    "r_busiest_1e308": "finite", "r_goodput_overflow": "finite", "r_time_negative": "time_s",
    "r_bytes_negative": "ps_rx_bytes", "r_job_gamma_str": "jobs.a.gamma.predicted",
    "r_jobs_list": "jobs", "r_soft_sync_str": "soft_sync", "r_policy_obj": "policy",
    "r_topo_list": "settings.topo", "r_workers_obj": "settings.workers",
    "r_bcube_str": "settings.bcube", "r_central_ps_int": "central_ps", "r_fifo": "FIFO",
    "r_devzero": "character device",
}

JOBS_FILES: dict[str, str] = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "weight_400_digits": '[{"name": "a", "ps": "h0", "workers": ["h1"], "weight": 1'
                         + "0" * 400 + "}]",
    "weight_5000_digits": '[{"name": "a", "ps": "h0", "workers": ["h1"], "weight": '
                          + "9" * 5000 + "}]",
    "weight_1e300": '[{"name": "a", "ps": "h0", "workers": ["h1"], "weight": 1e300}, '
                    '{"name": "b", "ps": "h2", "workers": ["h3"]}]',
    "weight_1e-300": '[{"name": "a", "ps": "h0", "workers": ["h1"], "weight": 1e-300}, '
                     '{"name": "b", "ps": "h2", "workers": ["h3"]}]',
    "weight_1e4": '[{"name": "a", "ps": "h0", "workers": ["h1"], "weight": 10000}]',
}

P4_FILES: dict[str, str] = {
    "dup_header_field": p4().replace("header h_t { bit<8> a; }",
                                     "header h_t { bit<8> a; bit<8> a; }"),
    "dup_struct_field": p4().replace("struct M { }", "struct M { bit<8> x; bit<16> x; }"),
    "dup_union_member": p4().replace("struct H { h_t h; }",
                                     "header_union u_t { h_t a; h_t a; }\nstruct H { h_t h; }"),
    "dup_enum_member": p4().replace("struct M { }", "enum e_t { A, B, A }\nstruct M { }"),
    "dup_local": p4(body="bit<8> x = 1; bit<8> x = 2; h.h.a = x;"),
    "dup_local_in_action": p4(decl="action a() { bit<8> y = 1; bool y = true; }",
                              body="a();"),
    "dup_const_local": p4(body="const bit<8> k = 1; const bit<8> k = 2; h.h.a = k;"),
    "dup_action_param": p4(decl="action a(bit<8> v, bit<8> v) { h.h.a = v; }",
                           body="a(1, 2);"),
    "unclosed_comment": p4() + "\n/* never closed\n",
    "macro_bomb": "#define M0 x\n" + "".join(f"#define M{i + 1} M{i} M{i}\n" for i in range(39))
                  + p4(body="h.h.a = 8w1; M39"),
    "stack_1e9": p4().replace("struct H { h_t h; }", "struct H { h_t h; h_t[1000000000] st; }"),
    "local_stack_1e9": p4(decl="h_t[1000000000] st;"),
    "typedef_differs": p4().replace("#include <v1model.p4>",
                                    "#include <v1model.p4>\ntypedef bit<16> PortId_t;"),
    "include_fifo": '#include "fifo.p4"\n' + p4(),
}
P4_NEEDLES = {
    "dup_header_field": "a: Duplicates declaration", "dup_struct_field": "x: Duplicates",
    "dup_union_member": "a: Duplicates", "dup_enum_member": "A: Duplicates",
    "dup_local": "x: Duplicates", "dup_local_in_action": "y: Duplicates",
    "dup_const_local": "k: Duplicates", "dup_action_param": "v: Duplicates declaration v",
    "unclosed_comment": "never closed",
    "macro_bomb": "MAX_EXPANSION", "stack_1e9": "1000000000", "local_stack_1e9": "1000000000",
    "typedef_differs": "PortId_t", "include_fifo": "fifo.p4",
}


def plan(*override: str) -> Callable[[Path], list[str]]:
    argv = list(PLAN)
    for opt, val in zip(override[::2], override[1::2], strict=True):
        if opt in argv:
            argv[argv.index(opt) + 1] = val
        else:
            argv[-2:-2] = [opt, val]
    return C(*argv)


def jobs(name: str) -> Callable[[Path], list[str]]:
    return C("plan", "--topo", "leafspine:2,1,4", "--jobs", f"{{fx}}/jobs_{name}.json",
             "--budget", "1", "--no-baselines", "--out", "{fx}/outdir/plan.json")


def stf(name: str) -> Callable[[Path], list[str]]:
    return C("stf", "{fx}/prog.p4", f"{{fx}}/{name}.stf")


def compile_(src: str) -> Callable[[Path], list[str]]:
    return C("compile", src, "-o", "{fx}/outdir/prog.json", "--p4runtime-files",
             "{fx}/outdir/prog.p4info.txtpb")


CASES: dict[str, Case] = {
    # ---- plan: input files that are not regular files, or cannot be named -----------------
    "plan-topo-5000-chars": Case("controller", plan("--topo", LONG), ("File name too long",)),
    "plan-topo-fifo": Case("controller", plan("--topo", "{fx}/fifo.json"), ("fifo.json", "FIFO")),
    "plan-topo-devzero": Case("controller", plan("--topo", "{fx}/zero.json"),
                              ("zero.json", "character device")),
    "plan-jobs-fifo": Case("controller", C("plan", "--topo", "leafspine:2,1,4", "--jobs",
                                           "{fx}/fifo.json", "--budget", "1", "--out",
                                           "{fx}/outdir/plan.json"), ("fifo.json", "FIFO")),
    "plan-jobs-devzero": Case("controller", C("plan", "--topo", "leafspine:2,1,4", "--jobs",
                                              "{fx}/zero.json", "--budget", "1", "--out",
                                              "{fx}/outdir/plan.json"), ("zero.json",)),
    "plan-jobs-5000-chars": Case("controller", C("plan", "--topo", "leafspine:2,1,4", "--jobs",
                                                 LONG + ".json", "--budget", "1", "--out",
                                                 "{fx}/outdir/plan.json"),
                                 ("File name too long",)),
    # ---- deploy: the plan and network files -------------------------------------------
    "deploy-plan-fifo": Case("controller", C("deploy", "--plan", "{fx}/fifo.json",
                                             "--network", "{fx}/fifo.json"), ("fifo.json",
                                                                              "FIFO")),
    "deploy-plan-devzero": Case("controller", C("deploy", "--plan", "{fx}/zero.json",
                                                "--network", "{fx}/zero.json"),
                                ("zero.json", "character device")),
    # ---- plan: jobs files -------------------------------------------------------------
    "plan-jobs-deep": Case("controller", jobs("deep"), ("jobs_deep.json", "nested")),
    "plan-jobs-weight-400-digits": Case("controller", jobs("weight_400_digits"), ("'weight'",)),
    "plan-jobs-weight-5000-digits": Case("controller", jobs("weight_5000_digits"),
                                         ("jobs_weight_5000_digits.json",)),
    "plan-jobs-weight-1e300": Case("controller", jobs("weight_1e300"), ("'weight'", "1000")),
    "plan-jobs-weight-1e-300": Case("controller", jobs("weight_1e-300"), ("'weight'", "0.001")),
    "plan-jobs-weight-1e4": Case("controller", jobs("weight_1e4"), ("'weight'",)),
    # ---- compare: a path that cannot be named ------------------------------------------
    "compare-5000-chars": Case("controller", C("compare", LONG), ("File name too long",)),
    # ---- pyswitch compile ---------------------------------------------------------------
    "compile-o-empty": Case("pyswitch", C("compile", "{fx}/ok.p4", "-o", ""), ("-o", "empty")),
    "compile-source-fifo": Case("pyswitch", compile_("{fx}/fifo.p4"), ("fifo.p4", "FIFO")),
    "compile-source-devzero": Case("pyswitch", compile_("{fx}/zero.p4"),
                                   ("zero.p4", "character device")),
    "compile-source-5000-chars": Case("pyswitch", compile_(LONG + ".p4"),
                                      ("File name too long",)),
    # issue 43: a FIFO as an output is refused, never replaced by a file
    "compile-o-fifo": Case("pyswitch", C("compile", "{fx}/ok.p4", "-o", "{fx}/fifo.json"),
                           ("fifo.json", "not a regular file")),
    "compile-p4runtime-files-fifo": Case("pyswitch", C(
        "compile", "{fx}/ok.p4", "-o", "{fx}/outdir/prog.json", "--p4runtime-files",
        "{fx}/outdir/prog.p4info.txtpb,{fx}/fifo.json"), ("fifo.json", "not a regular file")),
    "compile-p4runtime-file-fifo": Case("pyswitch", C(
        "compile", "{fx}/ok.p4", "-o", "{fx}/outdir/prog.json", "--p4runtime-file",
        "{fx}/fifo.p4", "--p4runtime-format", "text"), ("fifo.p4", "not a regular file")),
    # ---- pyswitch stf: files and options -----------------------------------------------
    "stf-file-fifo": Case("pyswitch", C("stf", "{fx}/prog.p4", "{fx}/fifo.stf"),
                          ("fifo.stf", "FIFO")),
    "stf-file-devzero": Case("pyswitch", C("stf", "{fx}/prog.p4", "{fx}/zero.stf"),
                             ("zero.stf", "character device")),
    "stf-program-fifo": Case("pyswitch", C("stf", "{fx}/fifo.p4", "{fx}/good.stf"),
                             ("fifo.p4", "FIFO")),
    "stf-only-bad-regex": Case("pyswitch", C("stf", "--corpus", "{fx}", "--only", "(("),
                               ("--only", "((")),
    "stf-timeout-nan": Case("pyswitch", C("stf", "--corpus", "{fx}", "--timeout", "nan"),
                            ("--timeout",)),
    "stf-timeout-negative": Case("pyswitch", C("stf", "--corpus", "{fx}", "--timeout", "-1"),
                                 ("--timeout",)),
    "stf-define-bad-name": Case("pyswitch", C("stf", "{fx}/prog.p4", "{fx}/good.stf",
                                              "-D", "1X=2"), ("1X",)),
    # ---- run / simulate: fault-injection options and modes (issue 43) -------------------
    "run-kill-worker-empty": Case("controller", run_cli("--kill-worker", ""),
                                  ("--kill-worker", "HOST@ROUND")),
    "run-kill-worker-superscript": Case("controller", run_cli("--kill-worker", "h1@\u00b2"),
                                        ("--kill-worker",)),
    "run-kill-worker-5000-digits": Case("controller", run_cli("--kill-worker", "h1@" + "9" * 5000),
                                        ("--kill-worker",)),
    "run-fail-switch-empty": Case("controller", run_cli("--fail-switch", ""),
                                  ("--fail-switch", "SWITCH@ROUND")),
    "run-kill-ps-empty": Case("controller", run_cli("--kill-ps", ""), ("--kill-ps",)),
    "run-modes-twice": Case("controller", run_cli("--modes", "ina,ps_only,ina"),
                            ("--modes", "ina given twice")),
    "simulate-modes-twice": Case("controller", C("simulate", "--modes", "ina,ina", "--out",
                                                 "{fx}/outdir/sim"),
                                 ("--modes", "ina given twice")),
    "simulate-budget-and-budgets": Case("controller", C("simulate", "--budgets", "0,2",
                                                        "--budget", "3", "--out",
                                                        "{fx}/outdir/sim"),
                                        ("--budget 3", "--budgets")),
    "simulate-jobs-and-ps": Case("controller", C("simulate", "--jobs", "2", "--ps", "h3",
                                                 "--out", "{fx}/outdir/sim"),
                                 ("--ps", "--jobs")),
    "simulate-jobs-and-workers": Case("controller", C("simulate", "--jobs", "2", "--workers",
                                                      "4", "--out", "{fx}/outdir/sim"),
                                      ("--workers", "--jobs", "drop --workers")),
    "simulate-topology-too-large": Case("controller", C("simulate", "--topo", "fattree:40",
                                                        "--out", "{fx}/outdir/sim"),
                                        ("fattree:40", "18,000 nodes", "at most 10,000")),
}
STF_NEEDLES = {
    "lpm_prefix_99": "/99", "lpm_value_too_wide": "32 bits", "exact_too_wide": "16 bits",
    "ternary_too_wide": "8 bits", "param_too_wide": "8 bits", "port_26_digits": "port",
    "port_512": "port 512", "expect_port_512": "port 512", "packet_1e3": "1e3",
    "counter_read_missing": "nothere", "counter_read_index": "index 4",
    "register_read_missing": "nothere", "check_counter_abc": "abc",
    "check_counter_no_paren": "'('", "check_counter_kind": "frames",
    "check_counter_missing": "nothere", "number_300_digits": "digits",
    "not_utf8": "UTF-8",
}
for _n in STF_FILES:
    CASES[f"stf-{_n}"] = Case("pyswitch", stf(_n), (f"{_n}.stf", STF_NEEDLES[_n]))
for _n in P4_FILES:
    CASES[f"compile-{_n}"] = Case("pyswitch", compile_(f"{{fx}}/{_n}.p4"),
                                  (f"{_n}.p4", P4_NEEDLES[_n]))
for _n, _needle in BAD_RESULTS.items():
    CASES[f"compare-{_n}"] = Case("controller", C("compare", f"{{fx}}/runs/{_n}", "--out",
                                                  "{fx}/outdir/cmp.json"), (_n, _needle))


def _run(case: Case, argv: list[str]) -> int | str | None:
    if case.cli == "controller":
        from controller.cli.main import main
    else:
        from pyswitch.__main__ import main
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own exit would mean a multi-line usage message
        return exc.code


@pytest.mark.parametrize("name", sorted(CASES))
def test_probe_input_refused_in_one_line(name: str, fx: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    before = _snapshot_safe(fx)
    code = _run(case, case.argv(fx))
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code not in (0, None), (code, captured.err)
    assert "Traceback" not in captured.err
    assert len(lines) == 1, captured.err
    for needle in case.needles:
        assert needle.replace("{fx}", str(fx)) in lines[0], (needle, lines[0])
    assert _snapshot_safe(fx) == before, "bad input created or changed files"


def _snapshot_safe(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a digest of its contents; FIFOs and symlinks (to
    /dev/zero) are listed, never opened."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:
            out[os.path.join(dirpath, n)] = "dir"
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[p] = (hashlib.sha1(Path(p).read_bytes()).hexdigest()
                      if stat.S_ISREG(st.st_mode) else f"special {st.st_mode:o}")
    return out


def test_at_least_70_probe_cases() -> None:
    assert len(CASES) >= 70


def test_compare_shows_a_run_named_like_rich_markup(fx: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A run or mode named ``[/bogus]`` is text, not markup: shown, and the good runs too."""
    from controller.cli.main import main

    out = fx / "outdir" / "markup.json"
    try:
        assert main(["compare", str(fx / "runs" / "markup"), str(fx / "runs" / "good"),
                     "--out", str(out)]) == 0
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and captured.err == ""
        assert "[/bogus]" in captured.out and "good" in captured.out
        doc = json.loads(out.read_text())
        assert list(doc["runs"]) == ["[/bogus]", "good"]
    finally:
        out.unlink(missing_ok=True)


def test_compare_skips_a_fifo_and_prints_the_good_runs(fx: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    from controller.cli.main import main

    bad = ["r_fifo", "r_exact_str", "r_bytes_1e308", "r_devzero"]
    code = main(["compare", *(str(fx / "runs" / b) for b in bad), str(fx / "runs" / "good")])
    captured = capsys.readouterr()
    assert code == 0
    lines = captured.err.strip().splitlines()
    assert len(lines) == len(bad)
    assert all(b in line and "skipped" in line for b, line in zip(bad, lines, strict=True))
    assert "good" in captured.out and "inf" not in captured.out


def test_stf_good_test_still_passes(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checks refuse only what does not fit: a test within the widths passes."""
    from pyswitch.__main__ import main

    text = (GOOD_STF + "add ex h.b:0xFFFF set_c(v:0xFF)\nadd tern 1 h.c:0x0* set_c(v:2)\n"
            "counter_read I.hits 3\nregister_read I.store 0\ncheck_counter I.hits(0) "
            "packets == 1\ncheck_counter I.hits($1)\n"
            "add route h.a:0x0B000000/32 fwd(port:511)\n")
    path = fx / "outdir" / "fine.stf"
    path.write_text(text)
    try:
        assert main(["stf", str(fx / "prog.p4"), str(path)]) == 0, capsys.readouterr()
        assert "PASS" in capsys.readouterr().out
    finally:
        path.unlink()


def test_repeated_identical_typedef_of_an_architecture_type_is_accepted(tmp_path: Path) -> None:
    """As p4c (and a p4lang tutorial program): ``typedef bit<9> PortId_t;`` again after
    v1model.p4's compiles; a different type is refused (a compile case above)."""
    from pyswitch import compile_p4

    src = tmp_path / "port.p4"
    src.write_text(p4(decl="action setp(PortId_t p) { s.egress_spec = p; }",
                      body="setp(9w3);").replace(
        "#include <v1model.p4>", "#include <v1model.p4>\ntypedef bit<9> PortId_t;\n"
                                 "typedef bit<9> PortId_t;"))
    prog = compile_p4(src)
    assert prog.p4info.actions


def test_macro_expansion_within_the_bound_still_works(tmp_path: Path) -> None:
    from pyswitch.macros import MAX_EXPANSION, MacroError, expand

    objs = {"A": "1 + 1", "B": "A * A"}
    assert expand("B", objs, {}) == "1 + 1 * 1 + 1"
    objs = {"M0": "x"} | {f"M{i + 1}": f"M{i} M{i}" for i in range(39)}
    with pytest.raises(MacroError, match="exceeds"):
        expand("M39", objs, {})
    assert len(expand("M15", objs, {})) < MAX_EXPANSION  # 2^15 tokens: fine


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "too_long"])
def test_switch_and_client_read_their_program_as_a_bounded_regular_file(tmp_path: Path,
                                                                        kind: str) -> None:
    """``pyswitch run PROG`` and the controller's ``set_pipeline(…, PATH)`` read a compiled
    program only from a regular file of bounded size: a FIFO, ``/dev/zero`` or a name the OS
    refuses is one line (and for the switch exit 2), never a hang or a memory blow-up."""
    import subprocess
    import sys

    from p4.config.v1 import p4info_pb2

    from controller.dataplane.p4runtime_client import SwitchConnection
    from pyswitch.inputfile import InputFileError

    path = tmp_path / "prog.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        os.symlink("/dev/zero", path)
    else:
        path = tmp_path / LONG
    run = subprocess.run([sys.executable, "-m", "pyswitch", "run", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pyswitch run: cannot read"), run.stderr
    conn = SwitchConnection.__new__(SwitchConnection)  # no server: the file is read first
    with pytest.raises(InputFileError, match="device config|regular file|too long"):
        conn.set_pipeline(p4info_pb2.P4Info(), path)


# ---- issue 43: the pyswitch surfaces beyond the command lines -----------------------------
# The Thrift server over the wire, with BMv2's generated clients: each bad request answered
# with BMv2's code (or the i32 the IDL declares), nothing changed, the server still answering.
def _thrift_cases() -> dict[str, tuple[str, str, tuple, object]]:
    """name -> (service, method, args, expected: (exception type name, code) or a value)."""
    from bm_runtime.standard import ttypes as st

    T = st.BmMatchParamType
    ex, tern = st.BmMatchParamExact, st.BmMatchParamTernary

    def key(b: bytes | None, k: bytes | None, m: bytes | None) -> list:
        return [st.BmMatchParam(T.EXACT, exact=ex(b)),
                st.BmMatchParam(T.TERNARY, ternary=tern(k, m))]

    def add(match: list) -> tuple:
        return (0, "I.tern2", match, "I.set_c", [b"\x01"], st.BmAddEntryOptions(1))

    bad_key = ("InvalidTableOperation", st.TableOperationErrorCode.BAD_MATCH_KEY)
    mc_error = ("InvalidMcOperation", 5)  # McOperationErrorCode.ERROR
    return {
        "exact-empty": ("standard", "bm_mt_add_entry", add(key(b"", b"\1", b"\1")), bad_key),
        "exact-none": ("standard", "bm_mt_add_entry", add(key(None, b"\1", b"\1")), bad_key),
        "ternary-empty": ("standard", "bm_mt_add_entry", add(key(b"\0\1", b"", b"")), bad_key),
        "ternary-none": ("standard", "bm_mt_add_entry", add(key(b"\0\1", None, None)),
                         bad_key),
        "ternary-param-none": ("standard", "bm_mt_add_entry", add(
            [st.BmMatchParam(T.EXACT, exact=ex(b"\0\1")), st.BmMatchParam(T.TERNARY)]),
            bad_key),
        "key-too-long": ("standard", "bm_mt_add_entry", add(key(b"\0\0\1", b"\1", b"\1")),
                         bad_key),
        "node-letters": ("simple_pre_lag", "bm_mc_node_create", (0, 1, "abc", ""), mc_error),
        "node-port-99999": ("simple_pre_lag", "bm_mc_node_create",
                            (0, 1, "1" + "0" * 99_999, ""), mc_error),
        "node-rid-negative": ("simple_pre_lag", "bm_mc_node_create", (0, -1, "1", ""),
                              mc_error),
        "mirror-port-negative": ("simple_switch", "mirroring_mapping_add", (5, -1), 0),
        "mirror-port-100000": ("simple_switch", "mirroring_mapping_add", (5, 100_000), 0),
        "mirror-delete-missing": ("simple_switch", "mirroring_mapping_delete", (77,), 0),
        "mirror-get-missing": ("simple_switch", "mirroring_mapping_get_egress_port", (77,), -1),
    }


THRIFT_P4 = STF_P4.replace(
    "table tern {", "table tern2 { key = { h.h.b: exact; h.h.c: ternary; } "
                    "actions = { set_c; NoAction; } default_action = NoAction(); }\n"
                    "    table tern {").replace("tern.apply();", "tern.apply(); tern2.apply();")


@pytest.fixture(scope="module")
def thrift_server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("bm_runtime")
    from pyswitch import compile_p4
    from pyswitch.p4runtime.pipeline import Device
    from pyswitch.thriftapi.server import serve_thrift

    src = tmp_path_factory.mktemp("thrift") / "prog.p4"
    src.write_text(THRIFT_P4)
    prog = compile_p4(src)
    dev = Device()
    dev.load(prog, prog.to_bytes())
    srv = serve_thrift(dev, "127.0.0.1", 0)
    yield srv, dev
    srv.stop()


@pytest.mark.parametrize("name", sorted(_thrift_cases()))
def test_probe_thrift_request_answered_with_bmv2_codes(name: str, thrift_server) -> None:
    from bm_runtime.simple_pre_lag import SimplePreLAG
    from bm_runtime.standard import Standard
    from sswitch_runtime import SimpleSwitch
    from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
    from thrift.transport import TSocket, TTransport

    srv, dev = thrift_server
    service, method, args, expected = _thrift_cases()[name]
    trans = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", srv.port))
    proto = TBinaryProtocol.TBinaryProtocol(trans)
    clients = {s: c.Client(TMultiplexedProtocol.TMultiplexedProtocol(proto, s)) for s, c in
               (("standard", Standard), ("simple_pre_lag", SimplePreLAG),
                ("simple_switch", SimpleSwitch))}
    trans.open()
    try:
        before = (clients["standard"].bm_mt_get_num_entries(0, "I.tern2"),
                  clients["simple_pre_lag"].bm_mc_get_entries(0), dict(dev.clone_sessions))
        if isinstance(expected, tuple):
            with pytest.raises(Exception) as exc:  # noqa: PT011 - the type is checked below
                getattr(clients[service], method)(*args)
            assert (type(exc.value).__name__, exc.value.code) == expected
        else:
            assert getattr(clients[service], method)(*args) == expected
        after = (clients["standard"].bm_mt_get_num_entries(0, "I.tern2"),
                 clients["simple_pre_lag"].bm_mc_get_entries(0), dict(dev.clone_sessions))
        assert after == before  # nothing applied, and the same connection still answers
    finally:
        trans.close()


# The in-process API: a newcomer's slips, one line each naming the slip.
API_CASES: dict[str, tuple[Callable, str]] = {
    "short-table-typo": (lambda sw: sw.insert_entry("rout", {}, "fwd", {"port": 1}),
                         "unknown table 'rout' (did you mean 'I.route'?)"),
    "param-typo": (lambda sw: sw.insert_entry("route", {"h.h.a": (0, 0)}, "fwd", {"prt": 1}),
                   "unknown parameter 'prt' of action 'I.fwd' (did you mean 'port'?)"),
    "mac-string": (lambda sw: sw.insert_entry("ex", {"h.h.b": "00:00:00:00:00:01"}, "set_c",
                                              {"v": 1}), "values are ints (`pyswitch.values.mac`"),
    "register-typo": (lambda sw: sw.register_read("stor", 0),
                      "unknown register 'stor' (did you mean 'I.store'?)"),
    "register-unknown": (lambda sw: sw.register_read("tore", 0), "unknown register 'tore'"),
    "lpm-not-a-pair": (lambda sw: sw.insert_entry("route", {"h.h.a": 5}, "fwd", {"port": 1}),
                       "a pair of ints (value, prefix length)"),
}


@pytest.mark.parametrize("name", sorted(API_CASES))
def test_probe_api_slip_named_in_one_line(name: str, fx: Path) -> None:
    from pyswitch import Switch, compile_p4
    from pyswitch.errors import InvalidArgument

    call, needle = API_CASES[name]
    sw = Switch(compile_p4(fx / "prog.p4"), native=False)
    with pytest.raises(InvalidArgument) as exc:
        call(sw)
    assert needle in str(exc.value) and "\n" not in str(exc.value), str(exc.value)
    assert all(not t.entries for t in sw.tables.values())


@pytest.mark.parametrize("argv", [["stf", "{fx}/prog.p4", "{fx}/good.stf"], ["run", "--no-p4"]])
def test_probe_pyswitch_native_garbage_is_one_line(argv: list[str], fx: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from pyswitch.__main__ import main

    monkeypatch.setenv("PYSWITCH_NATIVE", "garbage")
    assert main([a.replace("{fx}", str(fx)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "PYSWITCH_NATIVE='garbage': expected auto, on or off" in err
# ------------------------------------------------------------------ host side (issue 43)
# The PS's control channel: each line goes through the PS's own shell (PsControl) on a real
# FIFO; it is refused with one line, the record stays at version 0, the PS's state as it was.

N_CHUNKS = 1000  # the probe job's chunks per round: its longest request is ~124 KB


def _ctl_sched(first: object, entries: object = None, from_round: int = 2) -> bytes:
    """A schedules request for worker 0: ``first`` then chunks 1.. (or ``entries``)."""
    if entries is None:
        entries = [first] + [[c, 0, 1] for c in range(1, N_CHUNKS)]
    return json.dumps({"kind": "schedules", "from_round": from_round,
                       "schedules": {"0": entries}}).encode()


CONTROL_LINES: dict[str, tuple[bytes, str]] = {
    "not-utf8": (b'{"kind": "members", "removed": [1], "cause": {"w": "\xe9"}}', "not UTF-8"),
    "nested-20000": (b'{"a":' * 20_000, "nested too deep"),
    "nested-100000": (b'{"a":' * 100_000, "longer than"),
    "list-nested-100000": (b"[" * 100_000, "a JSON object"),
    "number-5000-digits": (b'{"kind": "schedules", "from_round": ' + b"9" * 5000 + b"}",
                           "not JSON"),
    "chunk-minus-1": (_ctl_sched([-1, 0, 1]), "chunk must be in 0..999"),
    "chunk-2-70": (_ctl_sched([2**70, 0, 1]), "chunk must be in 0..999"),
    "chunk-true": (_ctl_sched([True, 0, 1]), "chunk must be an integer"),
    "chunk-twice": (_ctl_sched([1, 0, 1]), "chunk 1 is listed twice"),
    "fan-in-0": (_ctl_sched([0, 0, 0]), "fan_in must be in 1..3"),
    "fan-in-minus-5": (_ctl_sched([0, 0, -5]), "fan_in must be in 1..3"),
    "fan-in-true": (_ctl_sched([0, 0, True]), "fan_in must be an integer"),
    "entries-100000": (_ctl_sched(None, [[0, 0, 1]] * 100_000), "longer than"),
    "entries-2": (_ctl_sched(None, [[0, 0, 1], [1, 0, 1]]), "got 2 entries"),
    "round-past-run": (_ctl_sched([0, 0, 1], from_round=99), "from_round must be in 0..4"),
    "round-true": (_ctl_sched([0, 0, 1], from_round=True), "from_round must be an integer"),
    "removed-true": (b'{"kind": "members", "removed": [true]}', "removed must be a list"),
    "line-8-mib": (b"x" * (8 << 20), "longer than"),
    "garbage": (bytes(range(1, 10)) + b"\xff", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(CONTROL_LINES))
def test_probe_control_line_refused_in_one_line(name: str, tmp_path: Path,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    from workers.common.model import TrainConfig
    from workers.ina.constants import K
    from workers.ina.control_io import PsControl, request_path
    from workers.ina.driver import PsDriver
    from workers.ina.job import JobConfig

    line, needle = CONTROL_LINES[name]
    cfg = JobConfig(job_id=2, mode="ina", rounds=5, train=TrainConfig(), worker_ids=[0, 1, 2],
                    worker_addrs=[], ps_addr=("", 0), result_dests=[],
                    schedules={str(w): [(c, 0, 1) for c in range(N_CHUNKS)] for w in range(3)},
                    frac_bits=8, n_values=K * N_CHUNKS, out_dir=str(tmp_path),
                    control_file=str(tmp_path / "control.json"))
    ctl = PsControl(cfg, tmp_path / "control.json")

    class _NoIO:  # the PS's I/O: nothing may be sent for a refused line
        def now(self) -> float:
            return 0.0

        def send(self, pkts: object, dest: object) -> None:
            raise AssertionError("a refused request sent something")

        def wake_at(self, t: float | None) -> None:
            pass

    ps = PsDriver(_NoIO(), cfg)  # type: ignore[arg-type]
    state = ps.state
    fd = os.open(request_path(tmp_path / "control.json"), os.O_WRONLY | os.O_NONBLOCK)
    try:
        data, taken = memoryview(line + b"\n"), []
        while data:  # written as the PS reads it (a line longer than the pipe)
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                pass
            taken += ctl.take(ps, 0.0)
        taken += ctl.take(ps, 0.0)
    finally:
        os.close(fd)
        ctl.close()
    captured = capfd.readouterr()
    lines = captured.err.strip().splitlines()
    assert taken == [] and ctl.log.record.version == 0 and state.current_round == 0
    assert len(lines) == 1 and lines[0].startswith("ps: control request refused: ")
    assert needle in lines[0], lines[0]
    assert json.loads((tmp_path / "control.json").read_text())["version"] == 0
    assert '"event": "refused"' in captured.out  # the answer to the sender


# The digits cache: a file that is not a split is made again from scikit-learn, one line.

def _digits_npz(**change: object) -> bytes:
    import io

    import numpy as np

    arrays = {"x_train": np.zeros((1437, 64), np.float32), "y_train": np.zeros(1437, np.int64),
              "x_test": np.zeros((360, 64), np.float32), "y_test": np.zeros(360, np.int64)}
    arrays.update(change)  # type: ignore[arg-type]
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _cache_cases() -> dict[str, tuple[Callable[[], bytes | None], str]]:
    import numpy as np

    nan = np.zeros((360, 64), np.float32)
    nan[0, 0] = np.nan
    return {
        "truncated": (lambda: _digits_npz()[:1000], "unreadable"),
        "garbage": (lambda: b"PK\x03\x04" + os.urandom(3000), "unreadable"),
        "wrong-shape": (lambda: _digits_npz(x_train=np.zeros((5, 64), np.float32)),
                        "x_train is float32 (5, 64)"),
        "wrong-dtype": (lambda: _digits_npz(y_test=np.zeros(360, np.float64)),
                        "y_test is float64"),
        "label-11": (lambda: _digits_npz(y_train=np.full(1437, 11, np.int64)), "labels"),
        "nan-feature": (lambda: _digits_npz(x_test=nan), "NaN"),
        "fifo": (lambda: None, "not a regular file"),
    }


CACHE_CASES = sorted(_cache_cases())


@pytest.mark.parametrize("name", CACHE_CASES)
def test_probe_digits_cache_made_again_in_one_line(name: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    from workers.common import data

    monkeypatch.setenv("INSYNC_CACHE_DIR", str(tmp_path))
    path = data._cache_file(0.2, 0)
    assert path is not None
    make, needle = _cache_cases()[name]
    content = make()
    if content is None:
        os.mkfifo(path, 0o600)
    else:
        path.write_bytes(content)
        path.chmod(0o600)
    d = data.load_digits_split(0.2, 0)  # a FIFO must not hang here
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(path) in lines[0], lines
    assert d.x_train.shape == (1437, 64) and set(d.y_test.tolist()) == set(range(10))
    assert stat.S_ISREG(os.lstat(path).st_mode)


def test_probe_plan_picture_of_a_large_topology_takes_seconds(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    """``plan`` on 4,002 nodes writes its picture in seconds (the 20,000-node case is in
    tests/test_plan_figure.py); one scatter per host took more than 30 minutes at 19,999."""
    import time

    from controller.cli.main import main

    t0 = time.monotonic()
    code = main(["plan", "--topo", "dumbbell:2000,2000", "--ps", "h0", "--workers",
                 "h1,h2,h2001", "--budget", "1", "--no-baselines", "--out",
                 str(tmp_path / "plan.json")])
    took = time.monotonic() - t0
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "plan.png").read_bytes()[:4] == b"\x89PNG"
    assert took < 60, took
