"""Constructs the native path lowers beyond straight-line code, each compared frame for
frame and state for state with the Python path:

- header stack elements chosen at run time (pyswitch/native/picks.py): ``hs.next``,
  ``.last``, ``hs[i]`` read and written with ``i`` inside and outside the stack, and an
  extract at a run-time index (tests/p4/native_stack_index.p4);
- actions with out/inout parameters (pyswitch/native/copyout.py): copy-out after the body
  and on exit, from a control, from another action and through a table's actions list
  (tests/p4/native_copy_out.p4);
- stack shifts (push_front, pop_front), a union stack parsed with ``.next``, signed
  saturating arithmetic and a loop counter (its range found by widening) (tests/p4/
  native_stack_ops.p4);
- varbits (pyswitch/native/varbits.py): extract with a run-time length and its parser
  errors, varbits between fixed fields, in a stack and in metadata, assignment (also through
  an action's inout parameters and between stack elements chosen at run time), validity,
  ``==``, emit, checksums and hashes over them, and the boxing back to the Python general
  path (an I2E clone, a drop in egress) (tests/p4/native_varbit.p4)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyswitch import compile_p4
from pyswitch.hashes import crc16, crc32, csum16
from pyswitch.native import unavailable
from tests.test_native import run_both, twins

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
PROG = Path(__file__).resolve().parent / "p4" / "native_stack_index.p4"
COPY_OUT = PROG.with_name("native_copy_out.p4")
STACK_OPS = PROG.with_name("native_stack_ops.p4")
VARBIT = PROG.with_name("native_varbit.p4")


def test_the_program_runs_native() -> None:
    from pyswitch.native.cgen import Unit
    prog = compile_p4(PROG)
    assert "_hs_at(" in prog.code and "_hs_last(" in prog.code
    Unit(prog.ir, prog.meta, "check").translate(True)  # no NotNative


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


def test_copy_out_native_equals_python(monkeypatch) -> None:
    prog = compile_p4(COPY_OUT)
    assert "raise _Exit((p_" in prog.code and "*data" in prog.code
    py, nat = twins(prog, monkeypatch)
    for sw in (py, nat):  # flag(hdr.h.c) with action data v: v, or v + 1 unless v is 7
        for d, v in ((1, 7), (2, 9), (3, 255)):
            sw.insert_entry("I.t", {"hdr.h.d": d}, "I.flag", {"v": v})
    rng = random.Random(3)
    work = [(0, bytes([rng.choice((0, 5, 199, 200, 201, 255, rng.randrange(256))),
                       rng.randrange(256), rng.randrange(256), rng.randrange(5)]))
            for _ in range(600)]
    assert run_both(py, nat, work) == len(work)
    # a = 250 > 200: bump exits; the exit leaves ingress, so the frame leaves unchanged
    assert nat.process(0, bytes([250, 4, 9, 1])) == [(1, bytes([250, 4, 9, 1]))]
    # a = 10, b = 5: a = 15, b = 15; d = 1: flag(c) exits with f = v = 7; d stays
    assert nat.process(0, bytes([10, 5, 0, 1])) == [(1, bytes([15, 15, 7, 1]))]
    # d = 2: f = 9 + 1, then d + 1
    assert nat.process(0, bytes([10, 5, 0, 2])) == [(1, bytes([15, 15, 10, 3]))]


def test_stack_shifts_unions_and_saturation_native_equal_python(monkeypatch) -> None:
    prog = compile_p4(STACK_OPS)
    assert "h3[:] = " in prog.code or "[:], " in prog.code  # the shifts' tuple assignments
    assert "for _s in " in prog.code and "_sat_s(" in prog.code and "while True" in prog.code
    py, nat = twins(prog, monkeypatch)
    rng = random.Random(11)
    work = []
    for _ in range(600):
        op = rng.randrange(256)
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(2, 9)))
        work.append((0, bytes([op]) + body))
    assert run_both(py, nat, work) > 500
    # -128 |-| 1 saturates at -128; push_front(1): hs[0] invalid, hs[1] = old hs[0]
    out = nat.process(0, bytes([0x01, 0x80, 0x01, 0x00, 5, 6]))
    assert out == py.process(0, bytes([0x01, 0x80, 0x01, 0x00, 5, 6]))
    assert out[0][1] == bytes([0x01, 0x80, 0x01, 0x80, 5, 6])


def test_native_on_refuses_in_one_line_and_the_corpus_counts_both_paths(
        tmp_path: Path, monkeypatch, capsys) -> None:
    import shutil

    from pyswitch.stf.runner import main as stf_main
    here = Path(__file__).resolve().parent
    (tmp_path / "empty.stf").write_text("")
    monkeypatch.setenv("PYSWITCH_NATIVE", "on")
    assert stf_main([str(here / "p4" / "native_wide.p4"), str(tmp_path / "empty.stf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("pyswitch stf: PYSWITCH_NATIVE=on, but the native path cannot run")
    assert "parser, generated line" in err and "a value may exceed 126 bits" in err
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    for name in ("stf_tables", "stf_counters"):
        if (here / "stf" / f"{name}.p4").is_file():
            shutil.copy(here / "stf" / f"{name}.p4", tmp_path / f"{name}.p4")
            shutil.copy(here / "stf" / f"{name}.stf", tmp_path / f"{name}.stf")
    shutil.copy(here / "p4" / "native_wide.p4", tmp_path / "wide.p4")
    (tmp_path / "wide.stf").write_text("")
    n = len(list(tmp_path.glob("*.p4")))
    assert stf_main(["--corpus", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"native path {n - 1} of {n} run; python path: pass {n}, wrong 0; " \
           f"native path: pass {n - 1}, wrong 0" in out


def test_varbits_native_equal_python(monkeypatch) -> None:
    prog = compile_p4(VARBIT)
    assert "int.from_bytes(buf[pos + 1:pos + 1 + _vn" in prog.code  # a run-time length
    assert "to_bytes(" in prog.code and " // 8, 'big') if " in prog.code  # its emit
    py, nat = twins(prog, monkeypatch)
    for sw in (py, nat):
        sw.set_clone_session(5, [(9, 0)])
    rng = random.Random(447)
    # 40: HeaderTooShort (the ip header's options: 0 to 56 bits), 4 and 12: not bytes
    lens = (0, 8, 16, 24, 32, 40, 4, 12, 255)
    work = []
    for _ in range(900):
        la, lb = rng.choice(lens), rng.choice(lens)
        op = rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 9, 9, 9, 10, 10, 11, 13, 13, 14,
                         rng.randrange(256)))
        body = bytes(rng.choice((0, 0xAA, rng.randrange(256)))
                     for _ in range(rng.randrange(40 if op == 9 else 16)))
        work.append((0, bytes([la, lb, op, 0]) + body))
    work += [(0, bytes(rng.randrange(256) for _ in range(rng.randrange(12))))
             for _ in range(200)]
    assert run_both(py, nat, work) > 800
    # a and b of 8 bits, equal data, different kinds; op 5: c = a with another tail, and
    # an I2E clone (the frame as parsed, to port 9); res: a.data == b.data, a != b, the
    # empty stack's elements equal, their (empty) varbits equal, the low bit
    frame = bytes.fromhex("0808050011AA2233AA44FF")
    out = nat.process(0, frame)
    assert out == py.process(0, frame) == [
        (9, frame), (1, bytes.fromhex("080805B9" "11AA22" "33AA44" "11AA5C" "FF"))]
    # op 4: c made valid with an empty varbit: its kind and tail only
    frame = bytes.fromhex("1008040011AABB2233CC44FF")
    assert nat.process(0, frame) == py.process(0, frame) == [
        (1, bytes.fromhex("10080439" "11AABB22" "33CC44" "7778" "FF"))]
    # op 9: an IPv4 header with 4 bytes of options after a and b: ttl - 1, dst = src, frag + 1,
    # tos = the checksum error (its checksum is wrong), the checksum updated over the options
    ip = bytes.fromhex("46000020" "00014002" "4006ABCD" "0A000001" "0A000002" "01020304")
    frame = bytes.fromhex("2008090011AABBCCDD2233EE44") + ip + b"pay"
    want = ip[:1] + b"\x01" + ip[2:6] + bytes([0x40, 0x03, 0x3F, 0x06]) + b"\0\0" + ip[12:16] * 2 \
        + ip[20:]
    want = want[:10] + csum16(want[:10] + want[12:]).to_bytes(2, "big") + want[12:]
    assert nat.process(0, frame) == py.process(0, frame) == [
        (1, bytes.fromhex("20080939" "11AABBCCDD22" "33EE44") + want + b"pay")]
    ip = want[:1] + b"\x00" + want[2:10]  # tos 0 and its right checksum: no error
    ip += csum16(ip + want[12:]).to_bytes(2, "big") + want[12:]
    frame = bytes.fromhex("2008090011AABBCCDD2233EE44") + ip
    got = nat.process(0, frame)
    assert got == py.process(0, frame) and got[0][1][13 + 1] == 0
    # op 10: hashes of a.kind ++ a.data ++ b.data (crc16), a.data ++ op (crc32), b.data ++
    # the new a.kind (identity), each mod 256 (as the frame's bytes: varbits of 16 and 8 bits)
    frame = bytes.fromhex("10080A0011AABB2233CC44FF")
    k = crc32(bytes.fromhex("AABB0A")) % 256
    t = crc16(bytes.fromhex("11AABBCC")) % 256
    out = nat.process(0, frame)
    assert out == py.process(0, frame)
    assert out[0][1][4:8] == bytes([k, 0xAA, 0xBB, t])
    assert out[0][1][8:11] == bytes([0x33, 0xCC, int.from_bytes(bytes([0xCC, k]), "big") % 256])
    # op 13: s[1] = s[0] (the indices are bit 3 of len_a, 0x08, and of len_b, 0x10): the
    # one-byte AA over the two-byte BBCC, so the stack's elements become equal
    frame = bytes.fromhex("08100D0011AA2233BBCC44" "AA" "BBCC")
    out = nat.process(0, frame)
    assert out == py.process(0, frame) == [
        (1, bytes.fromhex("08100D" "3B" "11AA22" "33BBCC44" "AA" "AA"))]
    # op 7: the stack's two one-byte varbits, AA and FF (not equal), s[1] valid
    frame = bytes.fromhex("0808070011AA2233AA44AAFF")
    assert nat.process(0, frame) == py.process(0, frame) == [
        (1, bytes.fromhex("080807A3" "11AA22" "33AA44" "AAFF"))]


def test_a_varbit_beyond_112_bits_stays_on_the_python_path(tmp_path: Path, monkeypatch) -> None:
    from pyswitch import Switch
    from pyswitch.native import NotNative
    from pyswitch.native.cgen import Unit
    src = VARBIT.read_text().replace("varbit<32> data;", "varbit<120> data;").replace(
        "varbit<32> keep;", "varbit<120> keep;")
    (tmp_path / "wide_varbit.p4").write_text(src)
    prog = compile_p4(tmp_path / "wide_varbit.p4")
    with pytest.raises(NotNative, match=r"^parser, generated line \d+ `.*`: a varbit of 120 "
                                        r"bits \(more than 112\)$"):
        Unit(prog.ir, prog.meta, "x").translate(True)
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    sw = Switch(prog)
    assert sw.path.startswith("python (") and "a varbit of 120 bits" in sw.path
    frame = bytes.fromhex("1008000011AABB2233CC44FF")
    assert sw.process(0, frame)[0][0] == 1
    monkeypatch.setenv("PYSWITCH_NATIVE", "on")
    with pytest.raises(NotNative, match="a varbit of 120 bits"):
        Switch(prog)
