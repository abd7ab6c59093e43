"""p4c's own test corpus on pyswitch (issue 17): runs when ``P4C_TESTDATA`` names the
``testdata`` directory of a p4c checkout (see docs/stf.md), skips otherwise.

- ``p4_16_samples``: every v1model program with an ``.stf``; a wrong answer (the program
  compiles but its packets differ from BMv2's) is the one thing pyswitch must never give.
- ``p4_16_errors`` / ``p4_16_bmv_errors``: programs p4c rejects; pyswitch must reject them.
- P4Info: every sample that compiles must have p4c's P4Info
  (``p4_16_samples_outputs/<prog>.p4info.txtpb``).

The known wrong answers and acceptances of today are listed below and their assertions
are strict xfails: a fix turns them into XPASS failures, so the lists must shrink with
the fix, and anything new outside the lists fails at once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyswitch import native
from pyswitch.stf.runner import CorpusEntry, run_corpus

TESTDATA = os.environ.get("P4C_TESTDATA", "")

pytestmark = pytest.mark.skipif(
    not TESTDATA or not Path(TESTDATA, "p4_16_samples").is_dir(),
    reason="set P4C_TESTDATA to the testdata directory of a p4c checkout")

# measured at p4c v1.2.5.16-5-g34b86e9bac (see docs/stf.md)
KNOWN_WRONG: set[str] = set()  # issue2225-bmv2 and table-entries-priority-bmv2 are fixed
NO_P4C_P4INFO = {"issue1062-1-bmv2.p4"}  # a table key of type error
KNOWN_ACCEPTED: set[str] = set()  # programs of p4c's error corpora that pyswitch accepts
# the programs the native path does not take, and why (docs/pyswitch-api.md, "What stays
# on the Python path, per construct"): a new one, or one no longer there, fails
_WIDE = "a value may exceed 126 bits"
PYTHON_PATH = {
    "gauntlet_action_return-bmv2.p4": _WIDE, "ipv6-switch-ml-bmv2.p4": _WIDE,
    "issue1879-bmv2.p4": _WIDE,
    "checksum1-bmv2.p4": "a varbit of 320 bits", "checksum-l4-bmv2.p4": "a varbit of 320 bits",
}


def _names(entries: list[CorpusEntry], status: str) -> set[str]:
    return {e.program for e in entries if e.status == status}


@pytest.fixture(scope="module")
def samples() -> list[CorpusEntry]:
    return run_corpus(Path(TESTDATA, "p4_16_samples"), timeout=60)


@pytest.fixture(scope="module")
def error_corpora() -> list[CorpusEntry]:
    out: list[CorpusEntry] = []
    for d in ("p4_16_errors", "p4_16_bmv_errors"):
        if Path(TESTDATA, d).is_dir():
            out += run_corpus(Path(TESTDATA, d), timeout=60, expect_reject=True)
    return out


def test_samples_run_and_every_rejection_is_located(samples: list[CorpusEntry]) -> None:
    assert samples, "no v1model program with an .stf found"
    errors = [f"{e.program}: {e.reason}" for e in samples if e.status == "error"]
    assert errors == []
    for e in samples:
        if e.status == "rejected":
            assert e.location and e.reason, e


def test_samples_no_new_wrong_answers(samples: list[CorpusEntry]) -> None:
    assert _names(samples, "wrong") <= KNOWN_WRONG


@pytest.mark.xfail(bool(KNOWN_WRONG), strict=True,
                   reason="known wrong answers: " + ", ".join(sorted(KNOWN_WRONG)))
def test_samples_zero_wrong_answers(samples: list[CorpusEntry]) -> None:
    assert _names(samples, "wrong") == set()


def test_samples_p4info_equals_p4cs(samples: list[CorpusEntry]) -> None:
    """Every program that compiles has p4c's P4Info, message for message (ids, names,
    aliases, annotations, ...; see pyswitch/p4info/compare.py for what order is ignored)."""
    compiled = [e for e in samples if e.status in ("pass", "wrong")]
    assert compiled and all(e.p4info for e in compiled)
    # p4c's test outputs hold no P4Info for these, so there is nothing to compare with
    unchecked = {e.program for e in compiled if e.p4info == "no reference"}
    assert unchecked <= NO_P4C_P4INFO
    differs = [f"{e.program}: {e.p4info_diff}" for e in compiled
               if e.p4info not in ("equal", "no reference")]
    assert differs == []


def test_error_corpora_no_new_acceptances(error_corpora: list[CorpusEntry]) -> None:
    assert [e for e in error_corpora if e.status == "error"] == []
    assert _names(error_corpora, "accepted") <= KNOWN_ACCEPTED


@pytest.mark.xfail(bool(KNOWN_ACCEPTED), strict=True,
                   reason="accepted, p4c rejects: " + ", ".join(sorted(KNOWN_ACCEPTED)))
def test_error_corpora_all_rejected(error_corpora: list[CorpusEntry]) -> None:
    assert _names(error_corpora, "accepted") == set()


def test_samples_both_paths_pass_and_the_native_path_takes_all_but_its_limits(
        samples: list[CorpusEntry]) -> None:
    ran = [e for e in samples if e.path]
    for e in ran:  # a program on the native path ran on the Python path too
        want = {"native", "python"} if e.path == "native" else {"python"}
        assert set(e.paths) == want, e.program
        assert e.status != "pass" or set(e.paths.values()) == {"pass"}, e.program
    if native.unavailable() is not None:
        return
    off = {e.program: e.path for e in ran if e.path != "native"}
    assert sorted(off) == sorted(PYTHON_PATH)
    for prog, why in PYTHON_PATH.items():
        assert why in off[prog], (prog, off[prog])
