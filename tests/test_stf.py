"""The STF runner (`python -m pyswitch stf`): our own programs and tests under tests/stf/,
the parser, BMv2's matching rules, the failure report and the corpus mode."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyswitch.stf.parser import StfSyntaxError, parse_stf
from pyswitch.stf.runner import StfError, match_packet, run_corpus, run_stf_file
from pyswitch.stf.runner import _key_value as key_value
from pyswitch.stf.runner import main as stf_main

HERE = Path(__file__).parent
STF_DIR = HERE / "stf"
TESTS = sorted(STF_DIR.glob("*.stf"))


@pytest.mark.parametrize("stf", TESTS, ids=[t.stem for t in TESTS])
def test_own_stf_tests_pass(stf: Path) -> None:
    res = run_stf_file(stf.with_suffix(".p4"), stf)
    assert res.passed, res.diff()


def test_cli_pass_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    rc = stf_main([str(STF_DIR / "stf_tables.p4"), str(STF_DIR / "stf_tables.stf")])
    assert rc == 0
    assert "PASS" in capsys.readouterr().out


def _wrong_copy(tmp_path: Path) -> Path:
    """stf_tables.stf with one expectation changed, one dropped, one added."""
    text = (STF_DIR / "stf_tables.stf").read_text()
    text = text.replace("expect 2 0A010203 0001 00 02  00 $", "expect 2 0A010203 0001 00 07  00 $")
    text = text.replace("expect 4 77777777\n", "")
    text += "packet 0 0A010203 0001 00 00 00\nexpect 2 0A010203\nexpect 2 0A010203\n"
    out = tmp_path / "wrong.stf"
    out.write_text(text)
    return out


def test_failing_expectation_gives_per_port_diff_and_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stf = _wrong_copy(tmp_path)
    rc = stf_main([str(STF_DIR / "stf_tables.p4"), str(stf)])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith(f"FAIL {stf}")
    # the changed packet: which packet, where it differs, expected vs got
    assert "port 2: expected 3 packet(s), got 2" in out
    assert "#1: differs at byte 7 (nibble 15): expected 7, got 2" in out
    assert "expected 0A010203 00010007 00 $" in out
    assert "got      0A010203 00010002 00" in out
    assert "#3: missing (expect at line" in out
    # the packet nobody expects any more
    assert "port 4: expected 1 packet(s), got 2" in out
    assert "#2: unexpected packet (sent at line" in out
    assert "got      77777777 00000000 00" in out


def test_python_dash_m_entry_point() -> None:
    p = subprocess.run([sys.executable, "-m", "pyswitch", "stf", str(STF_DIR / "stf_replicate.p4"),
                        str(STF_DIR / "stf_replicate.stf")], capture_output=True, text=True,
                       cwd=HERE.parent, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_cannot_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stf = tmp_path / "t.stf"
    stf.write_text("add no_such_table h.a:1 fwd(port:1)\n")
    assert stf_main([str(STF_DIR / "stf_tables.p4"), str(stf)]) == 2
    assert "no table 'no_such_table'" in capsys.readouterr().err
    bad = tmp_path / "bad.p4"
    bad.write_text("this is not P4\n")
    assert stf_main([str(bad), str(stf)]) == 2
    assert "bad.p4:1:" in capsys.readouterr().err


def test_ambiguous_suffix_and_bad_param(tmp_path: Path) -> None:
    stf = tmp_path / "t.stf"
    stf.write_text("add route h.a:0x0A000000/8 fwd(prt:1)\n")
    with pytest.raises(StfError, match="no parameter 'prt'"):
        run_stf_file(STF_DIR / "stf_tables.p4", stf)


# ----------------------------------------------------------------------------- parser
def test_parser_statements() -> None:
    st = parse_stf(
        "# comment\n"
        "ADD tbl 100 extra$0.h:0x25** hdr.x:10/8 ingress.act(val:0x25, port:2) = A  # c\n"
        "add t2 k:1 a()\n"
        "setdefault t2 b(x:0b101)\n"
        "packet 0 0102 03\n"
        "expect 1 01** 03 $\n"
        "expect 2\n"
        "mc_node_create 400 6 7\n"
        "mirroring_add 5 4\n"
        "wait\n")
    assert [s.cmd for s in st] == ["add", "add", "setdefault", "packet", "expect", "expect",
                                   "mc_node_create", "mirroring_add", "wait"]
    a = st[0]
    assert (a.table, a.priority, a.keys, a.entry_id, a.line) == (
        "tbl", 100, [("extra$0.h", "0x25**"), ("hdr.x", "10/8")], "A", 2)
    assert a.action is not None and a.action.name == "ingress.act"
    assert a.action.args == [("val", "0x25"), ("port", "2")]
    assert st[1].priority is None and st[1].action is not None and st[1].action.args == []
    assert (st[3].port, st[3].data) == (0, "010203")
    assert (st[4].port, st[4].data, st[4].exact) == (1, "01**03", True)
    assert (st[5].port, st[5].data) == (2, None)
    assert st[6].nums == ["400", "6", "7"]


@pytest.mark.parametrize("text,msg", [
    ("frobnicate 1\n", "unknown STF command"),
    ("packet 0 01 0g\n", "invalid packet data"),
    ("packet 0 012\n", "odd number"),
    ("add t k:1 a(x:1\n", "expected ')'"),
    ("mc_node_associate 1\n", "wrong number of arguments"),
    ("mirroring_add 1 0x**\n", "'*' digits not allowed"),
])
def test_parser_errors_name_the_line(text: str, msg: str) -> None:
    with pytest.raises(StfSyntaxError, match=re.escape(msg)) as ei:
        parse_stf("\n" + text, "x.stf")
    assert str(ei.value).startswith("x.stf:2: ")


# ----------------------------------------------------------------------------- BMv2 rules
def test_key_values_as_bmv2stf() -> None:
    # the digits written set the mask: a short value leaves the high bits don't-care
    assert key_value("ternary", 32, "0x****0101", "k") == (0x0101, 0x0000FFFF)
    assert key_value("ternary", 32, "0x0101", "k") == (0x0101, 0xFFFF)
    assert key_value("ternary", 8, "0b1*01", "k") == (0b1001, 0b1011)
    with pytest.raises(StfError, match="decimal"):
        key_value("ternary", 8, "5", "k")
    assert key_value("lpm", 32, "0x0A01****", "k") == (0x0A010000, 16)
    assert key_value("lpm", 32, "0x0A010203/8", "k") == (0x0A000000, 8)
    assert key_value("range", 16, "1->5", "k") == (1, 5)
    assert key_value("range", 16, "7", "k") == (7, 7)
    assert key_value("optional", 8, "0x**", "k") is None
    assert key_value("exact", 8, "0x7f", "k") == 0x7F


def test_packet_matching_rules() -> None:
    got = bytes.fromhex("0102030405")
    assert match_packet("0102", False, got) is None  # longer packets match
    assert "too long" in (match_packet("0102", True, got) or "")  # unless '$'
    assert match_packet("0102030405", True, got) is None
    assert match_packet("01**03", False, got) is None
    assert "too short" in (match_packet("010203040506", False, got) or "")
    assert match_packet(None, False, got) is None  # 'expect PORT' with no data
    assert match_packet("0103", False, got) == "differs at byte 1 (nibble 3): expected 3, got 2"


# ----------------------------------------------------------------------------- corpus mode
def test_corpus_mode_on_our_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert stf_main(["--corpus", str(STF_DIR), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{len(TESTS)} programs: pass {len(TESTS)}, wrong 0, rejected 0, error 0" in text
    doc = json.loads(out.read_text())
    assert {e["status"] for e in doc["programs"]} == {"pass"}


def test_corpus_mode_counts_wrong_rejected_error(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(STF_DIR / "stf_tables.p4", tmp_path / "a_wrong.p4")
    shutil.copy(_wrong_copy(tmp_path), tmp_path / "a_wrong.stf")
    (tmp_path / "b_rejected.p4").write_text("#include <v1model.p4>\ncontrol c( {\n")
    (tmp_path / "b_rejected.stf").write_text("")
    shutil.copy(STF_DIR / "stf_tables.p4", tmp_path / "c_error.p4")
    (tmp_path / "c_error.stf").write_text("add nope k:1 a()\n")
    (tmp_path / "d_no_stf.p4").write_text("#include <v1model.p4>\n")
    (tmp_path / "e_not_v1model.p4").write_text("#include <core.p4>\n")
    (tmp_path / "e_not_v1model.stf").write_text("")
    rc = stf_main(["--corpus", str(tmp_path)])
    text = capsys.readouterr().out
    assert rc == 1
    assert "3 programs: pass 0, wrong 1, rejected 1, error 1" in text
    assert "rejected  b_rejected.p4  b_rejected.p4:2:" in text
    assert "--- a_wrong.p4\nport 2:" in text
    ents = {e.program: e for e in run_corpus(tmp_path)}
    assert ents["c_error.p4"].status == "error" and "no table 'nope'" in ents["c_error.p4"].reason


def test_expect_reject_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.p4").write_text("#include <v1model.p4>\nbit<8> x = ;\n")
    assert stf_main(["--corpus", str(tmp_path), "--expect-reject"]) == 0
    shutil.copy(STF_DIR / "stf_tables.p4", tmp_path / "good.p4")
    assert stf_main(["--corpus", str(tmp_path), "--expect-reject"]) == 1
    text = capsys.readouterr().out
    assert "accepted  good.p4" in text
    assert "2 programs: rejected 1, accepted 1, error 0" in text


def test_corpus_time_limit_per_program() -> None:
    from pyswitch.stf.runner import run_one

    ent = run_one(STF_DIR / "stf_tables.p4", [], timeout=1e-4)
    assert (ent.status, ent.reason) == ("error", "timeout after 0.0001 s")
