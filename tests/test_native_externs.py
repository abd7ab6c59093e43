"""Every extern the registry serves (pyswitch.externs) is run on both paths, frame for frame,
by a differential test (issue 42): the programs of tests/test_native.py and
tests/p4/native_externs.p4, which calls the served externs no other program calls (verify,
the *_with_payload checksums, log_msg, clone_preserving_field_list, random).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4, externs
from pyswitch.externs.misc import draw, splitmix64
from pyswitch.hashes import csum16
from pyswitch.native import unavailable
from tests.test_native import DIFFERENTIAL_PROGRAMS, HERE, run_both, twins

needs_cc = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

PROG = HERE / "p4" / "native_externs.p4"
ETH = bytes.fromhex("0000000000bb0000000000aa88b8")


def _text(path: Path) -> str:
    """A program's own text and its quoted includes (not v1model.p4's declarations)."""
    src = path.read_text()
    inc = re.findall(r'#include\s+"([^"]+)"', src)
    return src + "".join(_text(path.parent / i) for i in inc)


def _calls(text: str, name: str, kind: str) -> bool:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    if kind == "function":
        return re.search(rf"(?<![\w.]){name}\s*(<[^;()]*>)?\s*\(", text) is not None
    return re.search(rf"(?<![\w.]){name}\s*[<(]", text) is not None


def test_the_differential_programs_call_every_served_extern() -> None:
    texts = [_text(p) for p in [*DIFFERENTIAL_PROGRAMS, PROG]]
    served = {(k, n) for (k, n), e in externs.registry().items()
              if not isinstance(e, externs.Refused)}
    assert {n for _, n in served} >= {"hash", "register", "counter", "direct_counter",
                                      "clone", "update_checksum_with_payload", "log_msg"}
    missing = [n for k, n in sorted(served) if not any(_calls(t, n, k) for t in texts)]
    assert missing == []


def _frame(rng: random.Random, good: bool = True) -> bytes:
    version = 1 if good or rng.random() < 0.5 else rng.randrange(2, 256)
    src, dst, ttl = rng.randrange(1 << 16), rng.randrange(1 << 16), rng.randrange(1, 256)
    payload = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 41)))
    ck = csum16(src.to_bytes(2, "big") + dst.to_bytes(2, "big") + bytes([version]) + payload)
    if not good and rng.random() < 0.5:
        ck ^= 1 + rng.randrange(0xFFFF)
    return ETH + bytes([version, ttl]) + src.to_bytes(2, "big") + dst.to_bytes(2, "big") + \
        ck.to_bytes(2, "big") + payload


def _configure(sw: Switch) -> None:
    sw.set_clone_session(5, [(9, 0)])


@needs_cc
@pytest.mark.parametrize("with_random", [False, True])
def test_the_served_externs_native_equals_python(monkeypatch, with_random: bool) -> None:
    prog = compile_p4(PROG, defines={"WITH_RANDOM": 1} if with_random else None)
    py, nat = twins(prog, monkeypatch)
    for sw in (py, nat):
        _configure(sw)
    rng = random.Random(42)
    work = [(rng.randrange(8), _frame(rng, good=i % 3 != 0)) for i in range(300)]
    work += [(1, f[:rng.randrange(len(f))]) for _, f in work[:60]]  # cut short
    assert run_both(py, nat, work) > 150
    out = [o for port, f in work for o in nat.process(port, f)]
    ports = {p for p, _ in out}
    assert {6, 7, 9} <= ports  # checksum error, parser error (verify), the egress clone


@needs_cc
def test_verify_with_an_error_known_at_run_time_native_equals_python(monkeypatch) -> None:
    """``verify(version == 1, meta.err)``: the error is a metadata field's value (HeaderTooShort
    when the ttl is 0, BadVersion otherwise), one `ParserError` node on both paths."""
    prog = compile_p4(PROG, defines={"VERIFY_AT_RUN_TIME": 1})
    assert prog.code.count("if not (h1[1] == 1): raise _PErr(M[3])") == 2
    py, nat = twins(prog, monkeypatch)
    rng = random.Random(7)
    work = []
    for i in range(200):
        f = bytearray(_frame(rng, good=i % 2 == 0))
        if i % 4 < 2:
            f[15] = 0  # ttl 0
        work.append((rng.randrange(8), bytes(f)))
    assert run_both(py, nat, work) > 100
    bad = ETH + bytes([2, 0]) + bytes(6)  # version 2, ttl 0: HeaderTooShort
    for sw in (py, nat):
        ((port, f),) = sw.process(0, bad)
        assert port == 8 and f[12:14] == b"\xba\xd0"
        ((port, _),) = sw.process(0, bad[:15] + b"\x01" + bad[16:])  # ttl 1: BadVersion
        assert port == 7


@needs_cc
def test_a_payload_checksum_by_hand(monkeypatch) -> None:
    """The output's checksum covers the new dstPort and the payload (odd length)."""
    py, nat = twins(compile_p4(PROG), monkeypatch)
    payload = b"abcde"
    body = (1).to_bytes(1, "big") + (7).to_bytes(2, "big") + (0x1234).to_bytes(2, "big")
    ck = csum16((7).to_bytes(2, "big") + (0x1234).to_bytes(2, "big") + b"\x01" + payload)
    frame = ETH + body[:1] + bytes([10]) + body[1:] + ck.to_bytes(2, "big") + payload
    for sw in (py, nat):
        ((port, f),) = sw.process(0, frame)
        assert port == 4  # 0x1234 & 7
        assert f[18:20] == (0x1235).to_bytes(2, "big") and f[15] == 9
        want = csum16((7).to_bytes(2, "big") + (0x1235).to_bytes(2, "big") + b"\x01" + payload)
        assert int.from_bytes(f[20:22], "big") == want
    ((port, _),) = nat.process(0, frame[:-1] + b"!")  # the payload changed: checksum error
    assert port == 6


def test_the_generator_is_splitmix64() -> None:
    """SplitMix64's published first outputs from 0; draws within [lo, hi], all equally
    likely; a draw wider than 64 bits takes two outputs; lo when hi <= lo."""
    x, outs = 0, []
    for _ in range(3):
        x, z = splitmix64(x)
        outs.append(z)
    assert outs == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    st = [0]
    assert draw(st, 0, (1 << 64) - 1) == 0xE220A8397B1DCDAF and st[0] == 0x9E3779B97F4A7C15
    st = [0]
    assert draw(st, 0, (1 << 70) - 1) == (0xE220A8397B1DCDAF << 6) | (0x6E789E6AA1B965F4 >> 58)
    st = [7]
    counts = [0] * 3
    for _ in range(3000):
        counts[draw(st, 10, 12) - 10] += 1
    assert min(counts) > 900
    assert draw(st, 5, 5) == 5 and draw(st, 9, 3) == 9


@needs_cc
def test_random_runs_on_the_native_path(monkeypatch) -> None:
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    sw = Switch(compile_p4(PROG, defines={"WITH_RANDOM": 1}), seed=3)
    assert sw.path == "native" and type(sw.ns["_rng_state"]).__name__ == "Cells"
    before = sw.ns["_rng_state"][0]
    sw.process(0, _frame(random.Random(0)))
    assert sw.ns["_rng_state"][0] != before  # C advanced the state Python sees


def test_log_msg_takes_a_string_and_a_string_is_nothing_else(tmp_path: Path) -> None:
    from pyswitch.errors import P4CompileError
    src = PROG.read_text()
    bad = tmp_path / "bad.p4"
    bad.write_text(src.replace('log_msg("ingress port {}", {standard_metadata.ingress_port});',
                               'log_msg(standard_metadata.ingress_port);'))
    with pytest.raises(P4CompileError, match=r"bad.p4:\d+:\d+: .*log_msg\(string msg\)"):
        compile_p4(bad)
    bad.write_text(src.replace("hdr.udp.ttl = hdr.udp.ttl - 1;", 'hdr.udp.ttl = "x";'))
    with pytest.raises(P4CompileError, match="a string literal is only an argument of log_msg"):
        compile_p4(bad)
