"""pyswitch P4_16 bit-vector semantics on tests/p4/pyswitch_ops.p4, each result compared
with the P4 spec's definition computed here in plain Python."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from pyswitch import P4CompileError, Switch, compile_p4

HERE = Path(__file__).parent
OUT = [("add8", 8), ("sub8", 8), ("mul8", 8), ("neg8", 8), ("not8", 8), ("sadd", 8),
       ("slt", 8), ("ult", 8), ("sshr", 8), ("ushr", 8), ("shl", 8), ("cat", 16),
       ("slice", 8), ("sext", 16), ("trunc", 8), ("zext", 32), ("satu", 8), ("satsub", 8),
       ("ssat", 8), ("slv", 16), ("tern", 8), ("flags", 8), ("varshl", 8), ("sdiv", 8),
       ("valid", 8)]


@pytest.fixture(scope="module")
def sw() -> Switch:
    return Switch(compile_p4(HERE / "p4/pyswitch_ops.p4"))


def signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) else v


def frame(a: int, b: int, c: int, d: int, w: int, x: int, n: int, opt: int | None) -> bytes:
    f = b"\x02" * 12 + b"\x88\xb5" + struct.pack(">BBBBHIB", a, b, c, d, w, x, n)
    return f + (bytes([opt]) if opt is not None else b"")


def parse_out(data: bytes, has_opt: bool) -> dict[str, int]:
    res = data[14 + 11 + (1 if has_opt else 0):]
    vals, off = {}, 0
    for name, w in OUT:
        vals[name] = int.from_bytes(res[off:off + w // 8], "big")
        off += w // 8
    assert off == len(res)
    return vals


def expected(a: int, b: int, c: int, d: int, w: int, x: int, n: int, has_opt: bool) -> dict:
    cs, ds = signed(c, 8), signed(d, 8)
    slv = (w & 0x0F00) | a | (0x9 << 12)
    return {
        "add8": (a + b) % 256, "sub8": (a - b) % 256, "mul8": (a * b) % 256,
        "neg8": (-a) % 256, "not8": 255 - a, "sadd": (cs + ds) % 256,
        "slt": int(cs < ds), "ult": int(a < b), "sshr": (cs >> 2) % 256, "ushr": a >> 3,
        "shl": (a << 3) % 256, "cat": a * 256 + b, "slice": (w >> 4) & 0xFF,
        "sext": cs % 65536, "trunc": x % 256, "zext": a, "satu": min(a + b, 255),
        "satsub": max(a - b, 0), "ssat": max(-128, min(127, cs + ds)) % 256, "slv": slv,
        "tern": max(a, b),
        "flags": (0x80 if a == b else 0) | (2 if cs >= 0 else 0) | (x >> 31),
        "varshl": (a << n) % 256 if n < 8 else 0,
        # 200 / 3 + 1000 % 7 fold at compile time; / 4 and % 8 become a shift and a mask
        "sdiv": (66 + 6 + a // 4 + a % 8) % 256, "valid": int(has_opt),
    }


def select_takes_opt(a: int, b: int) -> bool:
    return a == 0xAA or ((a & 0xF0) == 0xF0 and b <= 0x0F)


CASES = [
    (0, 0, 0, 0, 0, 0, 0), (255, 1, 0x7F, 1, 0xFFFF, 0xFFFFFFFF, 1),
    (1, 255, 0x80, 0xFF, 0x1234, 0x80000001, 7), (0xAA, 0x55, 0xC0, 0x40, 0xABCD, 5, 8),
    (0xF3, 0x0F, 0x80, 0x80, 0x0F0F, 0x7FFFFFFF, 200), (0xF3, 0x10, 0x7F, 0x7F, 1, 2, 3),
]


@pytest.mark.parametrize("case", CASES)
def test_ops_edge_cases(sw: Switch, case: tuple) -> None:
    a, b, c, d, w, x, n = case
    has_opt = select_takes_opt(a, b)
    out = sw.process(0, frame(a, b, c, d, w, x, n, 0x11 if has_opt else None))
    assert len(out) == 1 and out[0][0] == 1
    assert parse_out(out[0][1], has_opt) == expected(a, b, c, d, w, x, n, has_opt)


def test_ops_random(sw: Switch) -> None:
    rng = random.Random(1)
    for _ in range(300):
        a, b, c, d = (rng.randrange(256) for _ in range(4))
        w, x, n = rng.randrange(65536), rng.randrange(2**32), rng.randrange(12)
        has_opt = select_takes_opt(a, b)
        out = sw.process(0, frame(a, b, c, d, w, x, n, 0x22 if has_opt else None))
        assert parse_out(out[0][1], has_opt) == expected(a, b, c, d, w, x, n, has_opt)


def test_header_validity_and_exit(sw: Switch) -> None:
    # opt.v == 0xFF -> setInvalid -> not emitted by the deparser
    out = sw.process(0, frame(0xAA, 0, 0, 0, 0, 0, 0, 0xFF))
    data = out[0][1]
    assert len(data) == 14 + 11 + sum(w for _, w in OUT) // 8
    assert parse_out(data, False)["valid"] == 1  # was valid when res.valid was computed
    # a frame without the ops header exits ingress early: out unchanged on port 1
    other = b"\x02" * 12 + b"\x08\x06" + b"abc"
    assert sw.process(3, other) == [(1, other)]
    # truncated ops header: parser error, ingress exits (inp invalid), payload kept intact
    trunc = b"\x02" * 12 + b"\x88\xb5" + b"\x01\x02"
    assert sw.process(3, trunc) == [(1, trunc)]


OPS_P4 = HERE / "p4/pyswitch_ops.p4"
SDIV = "hdr.res.sdiv = 8w200 / 8w3 + (bit<8>)(1000 % 7) + hdr.inp.a / 8w4 + hdr.inp.a % 8w8;"


@pytest.mark.parametrize("expr,message", [
    ("hdr.inp.a / 8w3", "'/' of run-time values: could not evaluate expression at compilation"),
    ("hdr.inp.a % 8w5", "'%' of run-time values: could not evaluate expression at compilation"),
    ("8w200 / hdr.inp.b", "'/' of run-time values: could not evaluate expression at compilat"),
    ("hdr.inp.a << hdr.inp.w", "shift amount limited to 8 bits on this target"),
    ("(bit<8>)(hdr.inp.x >> hdr.inp.w)", "shift amount limited to 8 bits on this target"),
])
def test_what_bmv2_cannot_run_is_rejected_with_its_location(tmp_path: Path, expr: str,
                                                            message: str) -> None:
    # p4c's BMv2 backend has no run-time division or modulo and shifts by at most 8 bits
    text = OPS_P4.read_text()
    assert SDIV in text
    line = text[:text.index(SDIV)].count("\n") + 1
    prog = tmp_path / "ops.p4"
    prog.write_text(text.replace(SDIV, f"hdr.res.sdiv = {expr};"))
    with pytest.raises(P4CompileError) as ei:
        compile_p4(prog)
    assert message in ei.value.message
    assert (Path(ei.value.file).name, ei.value.line) == ("ops.p4", line)
    assert ei.value.col > 1
