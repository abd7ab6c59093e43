"""The exact tables' entries in C memory on the native path (pyswitch/native/exact.h, issue 42
item 4): every control-plane write (insert, modify, delete, a default changed or reset,
clear, a direct counter written; by the in-process API, a P4Runtime-style deferred
rebuild and the Thrift handler) is seen by the next frame on the native path exactly as on
the Python path, frame for frame, on tests/p4/native_exact.p4 (a key of four fields of 9,
3, 48 and 70 bits, wide action arguments, a direct counter, a keyless table).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.errors import InvalidArgument
from pyswitch.native import unavailable
from pyswitch.native.cgen import Unit
from tests.test_native import HERE, REPO, damaged, run_both, state, twins

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

PROG = HERE / "p4" / "native_exact.p4"
FWD, CLS, CFG = "MyIngress.fwd", "MyIngress.cls", "MyIngress.cfg"
A, B, C, D = "hdr.k.a", "hdr.k.b", "hdr.k.c", "hdr.k.d"
BIG = (1 << 70) - 1


def frame(a: int, b: int, c: int, d: int, res: int = 0, tag: int = 0) -> bytes:
    """An Ethernet frame of type 0x88b5 carrying the k header (27 bytes) and a payload."""
    bits = 0
    for v, w in ((a, 9), (b, 3), (0, 4), (c, 48), (d, 70), (0, 2), (res, 8), (tag, 70), (0, 2)):
        bits = bits << w | v
    return bytes(6) + bytes.fromhex("0000000000aa") + b"\x88\xb5" + bits.to_bytes(27, "big") + \
        b"payload"


KEYS = [(5, 1, 0x0000000000AA, 7), (511, 7, (1 << 48) - 1, BIG), (0, 0, 0, 0),
        (5, 1, 0x0000000000AA, 8), (300, 4, 0x123456789ABC, 1 << 69)]


def work(seed: int = 1) -> list[tuple[int, bytes]]:
    """A frame of each key, near misses (one field off by one), and damaged copies."""
    rng = random.Random(seed)
    out = [(1, frame(*k, res=rng.randrange(256))) for k in KEYS]
    out += [(2, frame(a ^ 1, b, c, d)) for a, b, c, d in KEYS]
    out += [(2, frame(a, b, c, d ^ (1 << 69))) for a, b, c, d in KEYS]
    return out + damaged(out, 40, seed) + [(3, b"\x00" * 14)]


def m(k: tuple[int, int, int, int]) -> dict[str, int]:
    return dict(zip((A, B, C, D), k, strict=True))


@pytest.fixture
def both(monkeypatch):
    return twins(compile_p4(PROG), monkeypatch)


def agree(py: Switch, nat: Switch, seed: int = 1) -> list:
    """The same frames through both (and through the native batch loop): the outputs and
    the state equal; the native path's outputs, to see a write change them."""
    frames = work(seed)
    run_both(py, nat, frames)
    batch = nat.process_batch(frames)
    assert batch == [o for p, f in frames for o in py.process(p, f)]
    assert state(py) == state(nat)
    for t in nat.tables.values():  # the C store holds what the Python table holds
        assert len(t.native) == len(t.entries)
        for e in t.entries.values():
            want = (e.aidx, True, e.args, e.counter if t.spec.get("direct_counter") else None)
            assert t.native.get(e.canon[0]) == want
        d = t.default
        assert t.native.get_default()[:3] == (d.aidx, False, d.args)
    return batch


def test_the_exact_tables_are_looked_up_in_c_only() -> None:
    """Every table of ina.p4 but its lpm one is looked up in the C store: no Python table,
    entry or key object read by a frame (`tab_lookup` only for the lpm table)."""
    prog = compile_p4(REPO / "p4src" / "ina.p4")
    c = Unit(prog.ir, prog.meta, "x").translate(True)
    exact = [t for t in prog.meta["tables"] if all(k["match"] == "exact" for k in t["keys"])]
    assert len(exact) == 11
    assert c.count("xt_lookup(P->g[") == 9 and c.count("xt_default(P->g[") == 2  # keyless
    assert c.count("tab_lookup(") == 1  # ipv4_lpm's (its key an int: no tuple)
    assert "tab_default(" not in c and "key_tuple(" not in c


def test_each_write_is_seen_by_the_next_frame(both) -> None:
    py, nat = both
    assert type(nat.tables[FWD].native).__name__ == "ExactStore"
    assert py.tables[FWD].native is None  # the Python path keeps its dicts only
    before = agree(py, nat)  # no entries: the defaults
    for sw in both:
        sw.insert_entry(FWD, m(KEYS[0]), "MyIngress.to", {"port": 4, "tag": BIG})
        sw.insert_entry(FWD, m(KEYS[1]), "MyIngress.to", {"port": 511, "tag": 1})
        sw.insert_entry(FWD, m(KEYS[2]), "MyIngress.drop")
        sw.insert_entry(FWD, m(KEYS[4]), "MyIngress.mark", {"v": 0x5A})
        sw.insert_entry(CLS, {B: 7}, "MyIngress.add_out", {"v": 3})
    inserted = agree(py, nat)
    assert inserted != before
    assert any(p == 4 and int.from_bytes(f[14:41], "big") >> 2 & BIG == BIG
               for p, f in inserted)  # the 70-bit argument reached the frame
    for sw in both:  # an entry's arguments, then its action
        sw.modify_entry(FWD, m(KEYS[0]), "MyIngress.to", {"port": 6, "tag": 0x1234})
    modified = agree(py, nat)
    assert any(p == 6 for p, _ in modified) and not any(p == 4 for p, _ in modified)
    for sw in both:
        sw.modify_entry(FWD, m(KEYS[1]), "MyIngress.mark", {"v": 0x11})
        sw.set_default_action(FWD, "MyIngress.drop")
        sw.set_default_action(CFG, "MyIngress.set_base", {"x": 0xFF})
    assert agree(py, nat) != modified
    for sw in both:
        sw.delete_entry(FWD, m(KEYS[0]))
        sw.insert_entry(FWD, m(KEYS[3]), "MyIngress.to", {"port": 9, "tag": 5})
    deleted = agree(py, nat)
    assert not any(p == 6 for p, _ in deleted) and any(p == 9 for p, _ in deleted)
    hits = nat.direct_counter_read(FWD, m(KEYS[3]))
    assert hits[0] >= 3 and hits == py.direct_counter_read(FWD, m(KEYS[3]))
    for sw in both:
        sw.clear_table(FWD)
        sw.set_default_action(FWD, "MyIngress.mark", {"v": 0xEE})
    cleared = agree(py, nat)
    assert {p for p, _ in cleared} <= {1, 3}  # mark (port 1) for every k frame again
    assert len(nat.tables[FWD].native) == 0


def test_deferred_writes_land_at_the_end_of_the_block(both) -> None:
    """A P4Runtime Write rebuilds once, at its end (Table.deferred_rebuild): the store too."""
    py, nat = both
    for sw in both:
        t = sw.tables[FWD]
        with t.deferred_rebuild():
            for i, k in enumerate(KEYS):
                t.insert(m(k), "MyIngress.to", {"port": 10 + i, "tag": i})
            t.delete(m(KEYS[2]))
            t.modify(m(KEYS[1]), "MyIngress.drop", {})
            if sw is nat:
                assert len(t.native) == 0  # not yet: no frame runs inside the block
    assert len(nat.tables[FWD].native) == len(KEYS) - 1
    out = agree(py, nat)
    assert {p for p, _ in out} >= {10, 13, 14}


def test_direct_counters_are_cells_shared_with_the_entries(both) -> None:
    py, nat = both
    for sw in both:
        sw.insert_entry(FWD, m(KEYS[0]), "MyIngress.to", {"port": 4, "tag": 0})
    e = nat.tables[FWD].find(m(KEYS[0]))
    assert type(e.counter).__name__ == "Cells" and type(py.tables[FWD].find(
        m(KEYS[0])).counter) is list
    assert nat.tables[FWD].native.get(KEYS[0])[3] is e.counter  # one object: no copy
    agree(py, nat)
    for sw in both:
        sw.direct_counter_write(FWD, m(KEYS[0]), 1000, (1 << 40) - 100)
    agree(py, nat)  # counted on from the written values, in C and in Python
    pk, by = nat.direct_counter_read(FWD, m(KEYS[0]))
    assert pk > 1000 and by == py.direct_counter_read(FWD, m(KEYS[0]))[1]
    for sw in both:  # modify keeps the entry's counter (and its cells)
        sw.modify_entry(FWD, m(KEYS[0]), "MyIngress.mark", {"v": 1})
    assert nat.tables[FWD].find(m(KEYS[0])).counter is e.counter
    agree(py, nat)
    with pytest.raises(InvalidArgument, match="64 bits"):
        nat.direct_counter_write(FWD, m(KEYS[0]), 1 << 64, 0)
    nat.direct_counter_write(FWD, m(KEYS[0]), 7, (1 << 64) - 1)
    f = frame(*KEYS[0])
    nat.process(1, f)  # 64-bit cells wrap, as the indexed counters' and BMv2's
    assert nat.direct_counter_read(FWD, m(KEYS[0])) == (8, len(f) - 1)
    with pytest.raises(InvalidArgument, match="64 bits"):
        py.direct_counter_write(FWD, m(KEYS[0]), -1, 0)


def test_thrift_writes_reach_the_store(both) -> None:
    """The Thrift handler's writes (add, modify, default set and reset, counter write,
    clear) go through pyswitch/tables.py: the next frame sees each on both paths."""
    import threading

    st = pytest.importorskip("bm_runtime.standard.ttypes")
    from pyswitch.thriftapi.server import StandardHandler

    py, nat = both
    hs = [StandardHandler(SimpleNamespace(switch=sw, lock=threading.Lock(), defaults={}),
                          9090, []) for sw in both]

    def key(k: tuple[int, ...]) -> list:
        widths = (2, 1, 6, 9)
        return [st.BmMatchParam(type=st.BmMatchParamType.EXACT,
                                exact=st.BmMatchParamExact(key=v.to_bytes(n, "big")))
                for v, n in zip(k, widths, strict=True)]

    for h in hs:
        h.bm_mt_add_entry(0, FWD, key(KEYS[1]), "MyIngress.to",
                          [(7).to_bytes(2, "big"), (BIG).to_bytes(9, "big")], None)
        h.bm_mt_set_default_action(0, FWD, "MyIngress.drop", [])
    first = agree(py, nat)
    assert any(p == 7 for p, _ in first)
    for h in hs:
        h.bm_mt_modify_entry(0, FWD, 0, "MyIngress.to", [(8).to_bytes(2, "big"), bytes(9)])
        h.bm_mt_reset_default_entry(0, FWD)
        h.bm_mt_write_counter(0, FWD, 0, st.BmCounterValue(packets=5, bytes=50))
    second = agree(py, nat)
    assert any(p == 8 for p, _ in second) and not any(p == 7 for p, _ in second)
    assert nat.tables[FWD].native.get_default()[0] == nat.tables[FWD].initial_default.aidx
    for h in hs:
        h.bm_mt_clear_entries(0, FWD, False)
    assert len(nat.tables[FWD].native) == 0
    agree(py, nat)


def test_the_store_refuses_what_no_entry_can_be() -> None:
    """Its own checks (the control plane's come first): a key of the wrong shape or beyond
    its field is no key (get: None; load: ValueError, the old entries kept)."""
    sw = Switch(compile_p4(PROG), native=True)
    t = sw.tables[FWD]
    sw.insert_entry(FWD, m(KEYS[1]), "MyIngress.drop")
    x = t.native
    assert x.get(KEYS[1]) is not None and x.get((512, 7, 0, 0)) is None
    assert x.get((1, 2, 3)) is None and x.get("no") is None and x.get((-1, 0, 0, 0)) is None
    assert x.get((511, 7, (1 << 48) - 1, BIG + 1)) is None
    d = t.default
    with pytest.raises(ValueError, match="not a key"):
        x.load([((1 << 9, 0, 0, 0), d.aidx, True, (), d.counter)], (d.aidx, False, (), d.counter))
    with pytest.raises(ValueError, match="twice"):
        x.load([((1, 0, 0, 0), d.aidx, True, (), d.counter)] * 2, (d.aidx, False, (), d.counter))
    with pytest.raises(TypeError, match="Cells of 2"):
        x.load([((1, 0, 0, 0), d.aidx, True, (), [0, 0])], (d.aidx, False, (), d.counter))
    assert len(x) == 1 and x.get(KEYS[1]) is not None  # a failed load changes nothing


def test_many_entries_and_a_process_rebuilt_on_the_same_switch(monkeypatch) -> None:
    """Hundreds of entries (the hash table grows), the same lookups on both paths; a
    process rebuilt (the trace off again) keeps the table's store."""
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    prog = compile_p4(PROG)
    py, nat = Switch(prog, native=False), Switch(prog, native=True)
    rng = random.Random(5)
    keys = {(rng.randrange(512), rng.randrange(8), rng.randrange(1 << 48),
             rng.randrange(1 << 70)) for _ in range(60)}
    for sw in (py, nat):
        for i, k in enumerate(sorted(keys)):
            sw.insert_entry(FWD, m(k), "MyIngress.to", {"port": i % 500, "tag": i})
    frames = [(1, frame(*k)) for k in sorted(keys)] + [(1, frame(a, b, c ^ 1, d))
                                                       for a, b, c, d in sorted(keys)]
    run_both(py, nat, frames)
    store = nat.tables[FWD].native
    nat.process = nat._specialised_process()
    assert nat.tables[FWD].native is store and nat.path == "native"
    run_both(py, nat, frames)
