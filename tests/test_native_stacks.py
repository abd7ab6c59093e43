"""Header stack elements chosen at run time on the native path (pyswitch/native/picks.py):
``hs.next``, ``.last``, ``hs[i]`` read and written with ``i`` inside and outside the stack,
and an extract at a run-time index, give the same frames, parser errors and exceptions on
both paths (tests/p4/native_stack_index.p4)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyswitch import compile_p4
from pyswitch.native import unavailable
from tests.test_native import run_both, twins

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
PROG = Path(__file__).resolve().parent / "p4" / "native_stack_index.p4"


def test_the_program_runs_native() -> None:
    from pyswitch.native.cgen import Unit
    prog = compile_p4(PROG)
    assert "_hs_at(" in prog.code and "_hs_last(" in prog.code
    Unit(prog.code, prog.meta, "check").translate(True)  # no NotNative


def test_run_time_indices_native_equals_python(monkeypatch) -> None:
    py, nat = twins(compile_p4(PROG), monkeypatch)
    rng = random.Random(42)
    work = []
    for _ in range(400):
        i, j = rng.randrange(7), rng.randrange(7)  # 4..6: outside the stack of 4
        n = rng.randrange(6)  # elements before the terminating 0 (5: StackOutOfBounds)
        elems = bytes(rng.randrange(1, 256) for _ in range(n)) + b"\x00"
        work.append((0, bytes([i, j, 0, 0]) + elems + b"payload"))
        work.append((0, bytes([i, j, 2, 0]) + elems))  # no elements parsed
    assert run_both(py, nat, work) == len(work)
    out = nat.process(0, bytes([5, 1, 0, 0, 7, 0]))  # hs[5] written nowhere, hs[1] read
    assert out == py.process(0, bytes([5, 1, 0, 0, 7, 0]))
    assert out[0][1][:6] == bytes([5, 1, 0, 0, 7, 0])


def test_an_extract_outside_the_stack_raises_on_both_paths(monkeypatch) -> None:
    py, nat = twins(compile_p4(PROG), monkeypatch)
    frame = bytes([4, 0, 1, 0, 9])  # extract(hs[4]) of a stack of 4
    errs = []
    for sw in (py, nat):
        with pytest.raises(IndexError) as ei:
            sw.process(0, frame)
        errs.append((type(ei.value).__name__, str(ei.value)))
    assert errs[0] == errs[1] and errs[0][0] == "StackIndexError"
    ok = bytes([3, 0, 1, 0, 9])  # extract(hs[3]): inside
    assert py.process(0, ok) == nat.process(0, ok)
