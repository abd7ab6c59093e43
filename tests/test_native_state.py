"""The native path's state in C memory (pyswitch/native/cells.h, issue 42 item 4): a native
switch's registers and indexed counters are `Cells`, C arrays the compiled pipeline reads and writes without a
Python int, seen by Python (the control plane, the tests) as list-like views of the same
cells; the table entries' fields are read in place.  The frames and the state stay those of
the Python path, frame for frame, whoever writes the cells.
"""

from __future__ import annotations

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.errors import InvalidArgument
from pyswitch.native import unavailable
from tests.test_native import REPO, ina_pps, run_both, state, twins

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

SLOT = "MyIngress.slot_key"  # a register of ina.p4 (80 bits: more than one int64)


@pytest.fixture(scope="module")
def prog():
    return compile_p4(REPO / "p4src" / "ina.p4")


def test_registers_are_cells_seen_as_lists(prog) -> None:
    sw = Switch(prog, native=True)
    py = Switch(prog, native=False)
    for name, (cells, r) in sw.registers.items():
        assert type(cells).__name__ == "Cells"
        assert type(py.registers[name][0]) is list  # the Python path keeps its lists
        assert sw.ns[r["var"]] is cells  # the code's name and the control plane's: one object
        assert len(cells) == r["size"] and cells == [0] * r["size"]
    cells, r = sw.registers[SLOT]
    assert r["width"] == 80
    big = (1 << 80) - 1
    cells[3] = big
    cells[-1] = 7
    assert cells[3] == big and cells[r["size"] - 1] == 7 and cells[-1] == 7
    assert cells[2:5] == [0, big, 0] and list(cells)[3] == big
    assert cells != [0] * r["size"] and repr(cells).startswith("[0, 0, 0, ")
    assert sw.register_read(SLOT, 3) == big
    with pytest.raises(IndexError):
        cells[r["size"]]
    with pytest.raises(ValueError, match="does not fit in 80 bits"):
        cells[0] = big + 1
    with pytest.raises(ValueError, match="does not fit"):
        cells[0] = -1
    with pytest.raises(TypeError):
        cells[0] = "1"
    with pytest.raises(ValueError, match="fixed size"):
        cells[:] = [0]
    with pytest.raises(ValueError):  # nothing stored when one value of a slice is refused
        cells[0:2] = [5, -1]
    assert cells[0] == 0
    with pytest.raises(InvalidArgument):
        sw.register_write(SLOT, 0, big + 1)
    sw.register_reset(SLOT)
    assert cells == [0] * r["size"]


def test_cells_written_by_the_control_plane_drive_the_frames(prog, monkeypatch) -> None:
    """A register written between frames through the API: both paths read it back the same
    (ina.p4's slot ownership: a slot claimed by another key refuses the GRADs)."""
    py, nat = twins(prog, monkeypatch)
    for sw in (py, nat):
        ina_pps.configure(sw, 4)
    work = ina_pps.frames(16, 4)
    run_both(py, nat, work)
    before = state(nat)
    assert before == state(py)
    for sw in (py, nat):
        for name, (cells, r) in sw.registers.items():
            for i in range(0, len(cells), 3):  # every third cell of every register
                sw.register_write(name, i, (i * 2654435761) & ((1 << r["width"]) - 1))
    run_both(py, nat, work + work)
    assert state(nat) == state(py) != before


def test_a_rebuilt_process_and_the_python_stages_keep_the_same_cells(prog, monkeypatch) -> None:
    """A queue rate set and cleared rebinds the process, the packet trace runs the Python
    stages on the cells: the registers stay the same objects (no copy the control plane
    would miss) and the frames and state stay the Python path's."""
    from pyswitch.observe import install_trace

    py, nat = twins(prog, monkeypatch)
    for sw in (py, nat):
        ina_pps.configure(sw, 4)
    held = {n: c for n, (c, _) in nat.registers.items()}
    work = ina_pps.frames(8, 4)
    run_both(py, nat, work[:17])
    assert any(any(c) for c in held.values())  # a chunk half aggregated, in the cells
    for sw in (py, nat):
        sw.set_queue_rate(1000.0)
        sw.set_queue_rate(0.0)
    assert nat.path == "native"
    run_both(py, nat, work[17:30])
    install_trace(nat)
    assert nat.path.startswith("python")
    run_both(py, nat, work[30:])
    assert all(nat.registers[n][0] is c and nat.ns[r["var"]] is c
               for n, (c, r) in ((n, nat.registers[n]) for n in held))


def test_counters_are_cells_counted_in_c(prog, monkeypatch) -> None:
    """ina.p4's counters: 64-bit cells on the native path, counted by the frames as the
    Python path counts them, written and reset by the control plane through the same
    view; a value wider than 64 bits is refused on both paths, 2**64 - 1 wraps to 0 on
    the next count natively (BMv2's counters are 64 bits)."""
    py, nat = twins(prog, monkeypatch)
    for sw in (py, nat):
        ina_pps.configure(sw, 4)
    for name, (p, b, c) in nat.counters.items():
        assert type(p).__name__ == type(b).__name__ == "Cells" and len(p) == c["size"]
        assert nat.ns[c["var"] + "p"] is p and nat.ns[c["var"] + "b"] is b
        assert type(py.counters[name][0]) is list
    work = ina_pps.frames(16, 4)
    run_both(py, nat, work + work[:5])
    agg = "MyIngress.aggregated"
    got = nat.counter_read(agg, 0)
    assert got == py.counter_read(agg, 0) and got[0] > 0 and got[1] > 40 * got[0]
    for sw in (py, nat):
        sw.counter_write(agg, 0, 7, 700)
        with pytest.raises(InvalidArgument, match="does not fit in 64 bits"):
            sw.counter_write(agg, 0, 1 << 64, 0)
        with pytest.raises(InvalidArgument, match="does not fit in 64 bits"):
            sw.counter_write(agg, 0, 0, -1)
    run_both(py, nat, work)
    assert nat.counter_read(agg, 0) == py.counter_read(agg, 0)
    assert nat.counter_read(agg, 0)[0] > 7
    nat.counter_write(agg, 0, (1 << 64) - 1, 0)
    nat.process(*work[0])
    assert nat.counter_read(agg, 0)[0] == 0  # wrapped, as a 64-bit counter
