"""Controls instantiated inside controls, on tests/p4/pyswitch_subctl.p4: constructor
parameters, directional apply parameters, per-instance state and P4Info names (as p4c
qualifies them by instance), `return` ending only the instance and `exit` ending ingress."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pyswitch import P4CompileError, Switch, compile_p4

HERE = Path(__file__).parent
PROG = HERE / "p4/pyswitch_subctl.p4"


@pytest.fixture(scope="module")
def prog():  # noqa: ANN201
    return compile_p4(PROG)


def frame(op: int, a: int, b: int, r4: int = 0x20, r5: int = 0x55) -> bytes:
    return b"\x02" * 12 + b"\x88\xb6" + struct.pack(">8B", op, a, b, 0, 0, 0, r4, r5)


def fields(data: bytes) -> dict[str, int]:
    return dict(zip(("op", "a", "b", "r1", "r2", "r3", "r4", "r5"), data[14:22], strict=True))


def test_p4info_names_are_qualified_by_instance(prog) -> None:  # noqa: ANN001
    info = prog.p4info
    assert {(r.preamble.name, r.size) for r in info.registers} == {
        ("MyIngress.small.cell", 16), ("MyIngress.big.cell", 32)}
    assert [c.preamble.name for c in info.counters] == ["MyIngress.outer.in2.inner_hits"]
    assert [t.preamble.name for t in info.tables] == ["MyIngress.classify_flat"]  # @name(".x")
    actions = {a.preamble.name for a in info.actions}  # p4c also lists untabled ones
    assert {"MyIngress.cls.mark", "NoAction"} <= actions
    assert actions <= {"MyIngress.cls.mark", "NoAction", "MyIngress.outer.in2.add_k"}


def test_instances_run_inline_with_their_own_state(prog) -> None:  # noqa: ANN001
    sw = Switch(prog)
    sw.insert_entry("MyIngress.classify_flat", {"h.t.op": 5}, "MyIngress.cls.mark",
                    {"tag": 0x33})
    small = [0] * 16
    big = [0] * 4
    for op, a, b in [(5, 3, 7), (5, 3, 2), (0, 3, 1), (9, 1, 4), (5, 40, 9), (7, 2, 250),
                     (0, 6, 0), (9, 6, 6)]:
        (port, data), = sw.process(0, frame(op, a, b))
        assert port == 1
        got = fields(data)
        r1 = small[a] if a < 16 else 0          # out parameter through a local variable
        if a < 16:
            small[a] = (small[a] + b + 1) % 256  # constructor argument step = 1
        r2 = big[a & 3]                          # out parameter bound to a header field
        big[a & 3] = (big[a & 3] + 100) % 256    # a second instance, its own register
        want = {"op": op, "a": a, "b": b, "r1": r1, "r2": r2, "r3": 0x33 if op == 5 else 0,
                "r4": 0x20, "r5": 0x55}
        if op == 9:          # exit inside the instance: what it wrote stays, ingress ends
            pass
        elif op == 0:        # return ends only the instance: the caller goes on
            want.update(r4=0x20 | 0x80, r5=(b + 10 + 1) % 256)
        else:
            want.update(r4=1 | 0x80, r5=(b + 10 + 1) % 256)
        assert got == want, (op, a, b)
    assert [sw.register_read("MyIngress.small.cell", i) for i in range(16)] == small
    assert sw.counter_read("MyIngress.outer.in2.inner_hits", 0)[0] == 6  # 8 packets, 2 exited


def test_deparser_instance_emits_through_packet_out(prog) -> None:  # noqa: ANN001
    sw = Switch(prog)
    other = b"\x02" * 12 + b"\x08\x00" + b"payload"
    assert sw.process(2, other) == [(1, other)]


ERRORS = [
    ("        h.t.r4 = 8w1;\n", "        h.t.r4 = 8w1;\n        m = m;\n", None),
    ("        cell.read(before, (bit<32>)idx);\n",
     "        idx = 1;\n        cell.read(before, (bit<32>)idx);\n",
     "'idx' is an in parameter and cannot be written"),
    ("    Tally(16, 8w1) small;\n", "    Tally(standard_metadata.ingress_port == 0 ? 32w1 : 32w2,"
     " 8w1) small;\n", "constructor argument 'cells' must be a compile-time constant"),
    ("    Tally(16, 8w1) small;\n", "    Tally(16) small;\n",
     "control 'Tally' takes 2 constructor arguments, got 1"),
    ("    register<bit<8>>(cells) cell;\n    apply {\n",
     "    register<bit<8>>(cells) cell;\n    action zero() { before = 0; }\n    apply {\n"
     "        zero();\n", None),  # the instance's action uses the out parameter
    ("        hdr.t.r1 = prev;\n", "        hdr.t.r1 = prev;\n        small.apply(hdr.t.b, 8w1,"
     " hdr.t.r3);\n", None),  # a second apply with other arguments: only its body uses them
    ("    register<bit<8>>(cells) cell;\n    apply {\n        cell.read(before, (bit<32>)idx);\n"
     "        cell.write((bit<32>)idx, before + v + step);\n    }\n",
     "    register<bit<8>>(cells) cell;\n    action zero() { before = 0; }\n    apply {\n"
     "        zero();\n    }\n", "SECOND"),
    ("        outer.apply(meta);\n", "        outer.apply(meta);\n        cls.apply(hdr, hdr);\n",
     "argument 'm' has type struct headers, expected struct metadata"),
    ("    Outer() outer;\n", "    Outer() outer;\n    MyIngress() again;\n",
     "control 'MyIngress' instantiates itself"),
    ("    state start {\n", "    Classify() c;\n    state start {\n",
     "control 'Classify' cannot be instantiated in a parser"),
]


@pytest.mark.parametrize("old,new,message", ERRORS)
def test_instance_errors_are_located(tmp_path: Path, old: str, new: str,
                                     message: str | None) -> None:
    text = PROG.read_text()
    assert old in text
    f = tmp_path / "sub.p4"
    f.write_text(text.replace(old, new, 1))
    if message == "SECOND":  # its action binds `before`: a second apply must keep it
        f.write_text(f.read_text().replace("        hdr.t.r1 = prev;\n", "        hdr.t.r1 = prev;"
                                           "\n        small.apply(hdr.t.b, 8w1, hdr.t.r3);\n"))
        message = "every apply of control instance 'small' must pass the same storage"
    if message is None:  # accepted
        compile_p4(f)
        return
    with pytest.raises(P4CompileError) as ei:
        compile_p4(f)
    assert message in ei.value.message
    assert Path(ei.value.file).name == "sub.p4" and ei.value.line > 1
