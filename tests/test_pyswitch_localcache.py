"""Metadata reads taken into locals (`pyswitch.compiler.localcache`): only over runs of
statements that provably cannot change the slot, and with the same results."""

from __future__ import annotations

from pyswitch.compiler.localcache import cache_metadata_reads


def _fn(body: str) -> list[str]:
    return ["def f(S, M):", *("    " + line for line in body.strip().split("\n"))]


def _same(lines: list[str], out: list[str], ms: list[list[int]]) -> None:
    """Both versions give the same result, registers and metadata on each M."""
    for m in ms:
        results = []
        for code in ("\n".join(out), "\n".join(lines)):
            ns: dict = {"R": [0] * 8, "a1": lambda S, M: M.__setitem__(2, 5)}
            exec(code, ns)  # noqa: S102 - the test's own function
            mm = list(m)
            results.append((ns["f"](None, mm), ns["R"], mm))
        assert results[0] == results[1], m


def test_reads_of_an_unwritten_slot_become_one_local() -> None:
    lines = _fn("R[M[3]] = M[1]\nR[M[3] + 1] = M[3]\nif M[3] > 2: M[1] = 0\nreturn M[3]")
    out = cache_metadata_reads(lines)
    assert out[1] == "    _m3 = M[3]" and "M[3]" not in "\n".join(out[2:])
    _same(lines, out, [[0, 7, 0, 1], [0, 7, 0, 3]])


def test_runs_stop_at_writes_and_calls() -> None:
    body = ("x = M[2] + M[2] + M[2]\n"      # a run: cached
            "a1(S, M)\n"                    # the call may change M[2]: run ends
            "if M[1]:\n"
            "    M[2] = M[1] + 1\n"         # written: the run after it starts afresh
            "    R[M[2]] = M[2] + M[2]\n"
            "R[1] = M[2] + x\n"
            "return M[2]")
    lines = _fn(body)
    out = cache_metadata_reads(lines)
    text = "\n".join(out)
    assert text.count("_m2 = M[2]") == 2, text  # before the first line, after the write
    assert "a1(S, M)" in text and "    M[2] = M[1] + 1" in text
    _same(lines, out, [[0, 0, 1, 0], [0, 3, 1, 0]])


def test_nothing_cached_when_m_escapes_or_is_written() -> None:
    for body in ("x = M[2] + M[2] + M[2]; a1(S, M)",     # the call shares the run's line
                 "x = M[2] + M[2]\nM[1:3] = (0, 0)\ny = M[2]",  # a slice ends the run
                 "x = M[2] + M[2] + M[2] + M[i]",          # computed index
                 "_m2 = 1\nx = M[2] + M[2] + M[2]",        # the local's name is taken
                 "x = M[2] + M[2]"):                        # too few reads to pay
        lines = _fn(body)
        out = cache_metadata_reads(lines)
        assert "_m2 = M[2]" not in "\n".join(out), body
