"""Parsers instantiated inside a parser, on tests/p4/pyswitch_subparser.p4, against a model
of the program p4c makes of it (the instance inlined; its parameters copied in at the
apply and out when it accepts, so a packet that ends inside an instance keeps none of what
the instance extracted)."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from pyswitch import P4CompileError, Switch, compile_p4

HERE = Path(__file__).parent
PROG = HERE / "p4/pyswitch_subparser.p4"
ETH_T = 0x88B8


@pytest.fixture(scope="module")
def sw() -> Switch:
    return Switch(compile_p4(PROG))


def inner(buf: bytes, pos: int, opt_kind: int) -> tuple[int, bytes | None, bytes | None, bool]:
    """One InnerParser run: (pos, h, o, accepted)."""
    if pos + 2 > len(buf):
        return pos, None, None, False
    h, pos = buf[pos:pos + 2], pos + 2
    if h[0] != opt_kind:
        return pos, h, None, True
    if pos + 1 > len(buf):
        return pos, h, None, False
    return pos + 1, h, buf[pos:pos + 1], True


def model(frame: bytes) -> bytes:
    eth, pos, parsed, status = frame[:14], 14, 0, 1
    a = opt = b = tail = None
    if struct.unpack(">H", eth[12:14])[0] == ETH_T:
        pos, h, o, ok = inner(frame, pos, 1)
        if ok:
            a, opt, parsed = h, o, parsed + 1
            parsed += 10
            pos, h, o, ok = inner(frame, pos, 2)
            if ok:
                b, opt, parsed = h, o, parsed + 1
                if b[0] == 7:
                    if pos + 2 <= len(frame):
                        tail, pos = frame[pos:pos + 2], pos + 2
                    else:
                        status = 3
            else:
                status = 3
        else:
            status = 3
    src = ((status << 8) | parsed).to_bytes(6, "big")
    out = eth[:6] + src + eth[12:14]
    for hd in (a, opt, b, tail):
        out += hd or b""
    return out + frame[pos:]


def frame(*body: int, etype: int = ETH_T) -> bytes:
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", etype) + bytes(body)


CASES = [
    frame(5, 0, 6, 0, 0xAA),            # neither instance takes an opt
    frame(1, 0, 0x11, 2, 0, 0x22),      # both do: the second opt wins
    frame(1, 0, 0x11, 3, 0),            # the second apply resets the first's opt (out)
    frame(5, 0, 7, 0, 0xBE, 0xEF, 9),   # tail after the second instance
    frame(1, 0),                        # ends inside the first instance: nothing of it kept
    frame(5, 0, 2, 0),                  # ends inside the second instance
    frame(5, 0, 7, 0, 0xBE),            # ends in the caller after both accepted
    frame(1, 2, 3, etype=0x0800),       # not parsed further
]


@pytest.mark.parametrize("data", CASES)
def test_sub_parsers_as_inlined_by_p4c(sw: Switch, data: bytes) -> None:
    assert sw.process(0, data) == [(1, model(data))]


def test_sub_parsers_random(sw: Switch) -> None:
    rng = random.Random(7)
    for _ in range(400):
        body = [rng.choice([1, 2, 5, 7, rng.randrange(256)]) for _ in range(rng.randrange(9))]
        data = frame(*body)
        assert sw.process(0, data) == [(1, model(data))], data.hex()


@pytest.mark.parametrize("old,new,message", [
    ("    InnerParser(2) second;\n", "    InnerParser() second;\n",
     "parser 'InnerParser' takes 1 constructor arguments, got 0"),
    ("        meta.parsed = meta.parsed + 1;\n", "        meta.parsed = meta.parsed + 1;\n"
     "        h.len = 1;\n", None),
    ("    apply {\n        bit<8> status = 1;\n", "    InnerParser(1) p;\n    apply {\n"
     "        bit<8> status = 1;\n", "parser 'InnerParser' cannot be instantiated in a control"),
])
def test_sub_parser_errors_are_located(tmp_path: Path, old: str, new: str,
                                       message: str | None) -> None:
    text = PROG.read_text()
    assert old in text
    f = tmp_path / "sp.p4"
    f.write_text(text.replace(old, new, 1))
    if message is None:  # writing an out parameter is fine
        compile_p4(f)
        return
    with pytest.raises(P4CompileError) as ei:
        compile_p4(f)
    assert message in ei.value.message
    assert Path(ei.value.file).name == "sp.p4" and ei.value.line > 1
