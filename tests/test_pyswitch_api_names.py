"""A newcomer's mistakes in the in-process API (issue 43): a table's, action's, register's
or counter's short name is accepted when unambiguous (as the STF runner accepts it);
otherwise one line with a "did you mean"; a MAC or IPv4 string where an int is expected says
values are ints and where the helpers are; a misspelt parameter is named; two parameters of
one name are a duplicate declaration."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.errors import InvalidArgument, P4CompileError
from pyswitch.values import mac

P4 = Path(__file__).resolve().parent / "p4"
FRAME = bytes.fromhex("0000000000bb0000000000aa88b5") + bytes(30)
DST = "hdr.ethernet.dstAddr"


@pytest.fixture(scope="module")
def prog():
    return compile_p4(P4 / "rt_forward.p4")


def test_short_names_are_accepted_when_unambiguous(prog) -> None:
    sw = Switch(prog, native=False)
    sw.insert_entry("l2", {DST: 0xBB}, "set_port", {"port": 3})
    assert sw.process(1, FRAME) == [(3, FRAME)]
    (e,) = sw.read_entries("l2")
    assert (e.table, e.action) == ("MyIngress.l2", "MyIngress.set_port")
    sw.modify_entry("l2", {DST: 0xBB}, "MyIngress.set_port", {"port": 4})
    assert sw.process(1, FRAME) == [(4, FRAME)]
    sw.delete_entry("MyIngress.l2", {DST: 0xBB})
    assert sw.read_entries("l2") == []
    sw.process(1, FRAME)
    assert sw.counter_read("rx_port_counter", 1) == sw.counter_read(
        "MyIngress.rx_port_counter", 1) != (0, 0)


def test_short_register_names() -> None:
    sw = Switch(compile_p4(P4 / "rt_state.p4"), native=False)
    (full,) = sw.registers  # MyIngress.store
    short = full.rsplit(".", 1)[-1]
    sw.register_write(short, 0, 5)
    assert sw.register_read(full, 0) == 5
    with pytest.raises(InvalidArgument, match=rf"unknown register '{short}x' \(did you mean "
                                              rf"'{full}'\?\)"):
        sw.register_read(short + "x", 0)
    with pytest.raises(InvalidArgument, match="register index is str '0': values are ints"):
        sw.register_read(short, "0")


@pytest.mark.parametrize(("call", "message"), [
    (lambda sw: sw.insert_entry("l3", {DST: 1}, "set_port", {"port": 1}),
     "unknown table 'l3' (did you mean 'MyIngress.l2'?)"),
    (lambda sw: sw.insert_entry("MyIngress.ipv4_lmp", {}, "drop"),
     "unknown table 'MyIngress.ipv4_lmp' (did you mean 'MyIngress.ipv4_lpm'?)"),
    (lambda sw: sw.insert_entry("zzz", {DST: 1}, "set_port", {"port": 1}),
     "unknown table 'zzz'"),
    (lambda sw: sw.insert_entry("l2", {DST: "00:00:00:00:00:bb"}, "set_port", {"port": 1}),
     "value of 'hdr.ethernet.dstAddr' is str '00:00:00:00:00:bb': values are ints "
     "(`pyswitch.values.mac`, `pyswitch.values.ipv4`)"),
    (lambda sw: sw.insert_entry("l2", {DST: 1}, "set_port", {"prt": 1}),
     "unknown parameter 'prt' of action 'MyIngress.set_port' (did you mean 'port'?)"),
    (lambda sw: sw.insert_entry("l2", {DST: 1}, "set_port", {"port": "3"}),
     "parameter 'port' of action 'MyIngress.set_port' is str '3': values are ints"),
    (lambda sw: sw.insert_entry("l2", {"hdr.ethernet.dstAdr": 1}, "set_port", {"port": 1}),
     "unknown match field 'hdr.ethernet.dstAdr' of table 'MyIngress.l2' (did you mean "
     "'hdr.ethernet.dstAddr'?)"),
    (lambda sw: sw.insert_entry("l2", {DST: 1}, "set_prt", {"port": 1}),
     "unknown action 'set_prt' of table 'MyIngress.l2' (did you mean 'MyIngress.set_port'?)"),
    (lambda sw: sw.insert_entry("ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.0.0/8"}, "drop"),
     "value of 'hdr.ipv4.dstAddr' is str '10.0.0.0/8': values are ints"),
    (lambda sw: sw.insert_entry("ipv4_lpm", {"hdr.ipv4.dstAddr": 5}, "drop"),
     "value 5 of lpm field 'hdr.ipv4.dstAddr': a pair of ints (value, prefix length)"),
    (lambda sw: sw.counter_read("rx_port_countr", 0),
     "unknown counter 'rx_port_countr' (did you mean 'MyIngress.rx_port_counter'?)"),
])
def test_mistakes_are_one_line_naming_the_slip(prog, call, message) -> None:
    sw = Switch(prog, native=False)
    with pytest.raises(InvalidArgument) as exc:
        call(sw)
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)
    assert sw.read_entries("l2") == [] and sw.read_entries("ipv4_lpm") == []


def test_the_helper_the_message_names_gives_the_int(prog) -> None:
    sw = Switch(prog, native=False)
    sw.insert_entry("l2", {DST: mac("00:00:00:00:00:bb")}, "set_port", {"port": 3})
    assert sw.process(1, FRAME) == [(3, FRAME)]


def test_two_parameters_of_one_name_are_a_duplicate_declaration(tmp_path) -> None:
    text = (P4 / "rt_forward.p4").read_text()
    assert "action set_port(port_t port)" in text
    src = tmp_path / "dup.p4"
    src.write_text(text.replace("action set_port(port_t port)",
                                "action set_port(bit<9> port, bit<8> port)"))
    with pytest.raises(P4CompileError, match=r"port: Duplicates declaration port \(previous "
                                             r"declaration at .*dup\.p4:\d+:\d+\)"):
        compile_p4(src)
