"""Serializable enums as action data (issue 43; the p4lang tutorials' flowcache declares
``action f(PuntReason_t punt_reason)``): accepted as p4c accepts them, the control plane
writes the underlying value, and P4Info is p4c's (the parameter's bitwidth is the underlying
type's, with no type_name; the enum is in type_info.serializable_enums, as p4c writes it
for UP4's ``set_source_iface(InterfaceType, Direction, ...)``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.errors import InvalidArgument, P4CompileError

P4 = Path(__file__).resolve().parent / "p4" / "enum_action_data.p4"


@pytest.fixture(scope="module")
def prog():
    return compile_p4(P4)


@pytest.mark.parametrize("native", [False, None])
def test_enum_action_data_reaches_the_packet(prog, native) -> None:
    sw = Switch(prog, native=native)
    sw.insert_entry("by_code", {"h.tag.code": 7}, "mark", {"reason": 1, "port": 3})
    sw.insert_entry("by_code", {"h.tag.code": 8}, "mark", {"reason": 0x7F, "port": 4})
    assert sw.process(1, bytes([0, 7])) == [(3, bytes([1, 0xEE]))]  # UNKNOWN_FLOW
    assert sw.process(1, bytes([0, 8])) == [(4, bytes([0x7F, 8]))]  # any bit<8> value
    assert sw.process(1, bytes([0, 9])) == [(2, bytes([2, 9]))]  # the default: BAD_OPCODE
    with pytest.raises(InvalidArgument, match="does not fit in 8 bits"):
        sw.insert_entry("by_code", {"h.tag.code": 9}, "mark", {"reason": 256, "port": 1})


def test_p4info_as_p4c_writes_it(prog) -> None:
    (a,) = [a for a in prog.p4info.actions if a.preamble.name == "I.mark"]
    assert [(p.name, p.bitwidth, p.type_name.name) for p in a.params] == \
        [("reason", 8, ""), ("port", 9, "")]
    se = prog.p4info.type_info.serializable_enums["Reason_t"]
    assert se.underlying_type.bitwidth == 8
    assert [(m.name, m.value) for m in se.members] == [("UNKNOWN_FLOW", b"\x01"),
                                                       ("BAD_OPCODE", b"\x02")]


def test_a_plain_enum_is_still_refused_as_action_data(tmp_path) -> None:
    text = P4.read_text().replace("enum bit<8> Reason_t {", "enum Plain_t { A, B }\n"
                                  "enum bit<8> Reason_t {")
    text = text.replace("action mark_bad()", "action plain(Plain_t x) { }\n    action mark_bad()")
    src = tmp_path / "plain.p4"
    src.write_text(text)
    with pytest.raises(P4CompileError, match="action parameter 'x': only bit<N>/int<N>/bool "
                                             r"parameters .*, and serializable enums"):
        compile_p4(src)
