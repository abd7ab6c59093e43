"""v1model's ``clone_preserving_field_list(type, session, index)``: an I2E or E2E clone keeps
the user metadata fields annotated ``@field_list(index)`` (as the packet had them at the end
of ingress, or of egress), every other metadata field reset, as BMv2 does; on both paths
(the native path hands clones to the general path).  tests/p4/pyswitch_clone_fl.p4."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.errors import P4CompileError
from pyswitch.native import unavailable

HERE = Path(__file__).resolve().parent
PROG = compile_p4(HERE / "p4" / "pyswitch_clone_fl.p4")
PATHS = [False, pytest.param(True, marks=pytest.mark.skipif(
    unavailable() is not None, reason=str(unavailable())))]
ALL = (0x1111, 0x22, 0x33, 0x44, 0x55)  # keep1, keep12, not_kept, inner.a, inner.b


def run(sw: Switch, ether_type: int) -> list[tuple[int, tuple[int, ...]]]:
    """(port, (instance_type, keep1, keep12, not_kept, inner.a, inner.b)) per copy out."""
    out = sw.process(1, b"\x00" * 12 + ether_type.to_bytes(2, "big"))
    return [(p, struct.unpack("!IHBBBB", b[14:])) for p, b in out]


@pytest.fixture(params=PATHS, ids=["python", "native"])
def sw(request: pytest.FixtureRequest) -> Switch:
    s = Switch(PROG, native=request.param)
    s.set_clone_session(5, [(9, 0)])
    s.set_clone_session(6, [(8, 0)])
    return s


def test_the_field_lists_are_the_annotated_slots() -> None:
    fl = PROG.meta["field_lists"]
    assert sorted(fl) == [1, 2] and len(fl[1]) == 2 and len(fl[2]) == 3
    assert set(fl[1]) & set(fl[2])  # keep12 is in both lists


def test_i2e_clone_keeps_list_1(sw: Switch) -> None:
    assert run(sw, 0x3001) == [(9, (1, 0x1111, 0x22, 0, 0, 0)), (2, (0, *ALL))]


def test_i2e_clone_keeps_list_2_with_a_struct_field(sw: Switch) -> None:
    assert run(sw, 0x3002) == [(9, (1, 0, 0x22, 0, 0x44, 0x55)), (2, (0, *ALL))]


def test_plain_clone_keeps_nothing(sw: Switch) -> None:
    assert run(sw, 0x3003) == [(9, (1, 0, 0, 0, 0, 0)), (2, (0, *ALL))]


def test_the_last_clone_call_wins(sw: Switch) -> None:
    assert run(sw, 0x3005) == [(9, (1, 0x1111, 0x22, 0, 0, 0)), (2, (0, *ALL))]


def test_e2e_clone_keeps_the_values_at_the_end_of_egress(sw: Switch) -> None:
    assert run(sw, 0x3004) == [(8, (2, 0, 0x22, 0, 0x44, 0x66)),
                               (2, (0, 0x7777, 0x22, 0x33, 0x44, 0x66))]


def test_no_clone_no_copy(sw: Switch) -> None:
    assert run(sw, 0x3000) == [(2, (0, *ALL))]


def test_the_index_must_be_a_constant(tmp_path: Path) -> None:
    src = (HERE / "p4" / "pyswitch_clone_fl.p4").read_text().replace(
        "clone_preserving_field_list(CloneType.I2E, 5, 1);",
        "clone_preserving_field_list(CloneType.I2E, 5, (bit<8>)meta.keep12);", 1)
    (tmp_path / "a.p4").write_text(src)
    with pytest.raises(P4CompileError, match="field list index must be a constant"):
        compile_p4(tmp_path / "a.p4")
    (tmp_path / "b.p4").write_text(src.replace("(bit<8>)meta.keep12)", "1, 2)"))
    with pytest.raises(P4CompileError, match=r"clone_preserving_field_list\(CloneType"):
        compile_p4(tmp_path / "b.p4")
