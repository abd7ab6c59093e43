"""pyswitch.daemon's forwarding loop on real veths, in C (portio.c's ``Pump``) and in Python:
the same frames on every port, in order, and the same counters as the frame-by-frame
reference; a transmit impairment and frames that raise go through the Python parts."""

from __future__ import annotations

import contextlib
import json
import shutil
import struct
import threading
import time

import pytest
from netns import expect_frames, is_root, sh, veth_hosts

from pyswitch import Switch, compile_p4
from pyswitch.impairment import parse_spec
from pyswitch.native import unavailable
from pyswitch.ports import Port
from tests.test_native import HERE, _pre, reference_outputs

root = pytest.mark.skipif(not is_root(), reason="needs root (namespaces, raw sockets)")
LOOPS = {"c": ("auto", True), "python": ("auto", False), "off": ("off", True)}


def _frames() -> list[bytes]:
    dst, src = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")
    # tests/p4/pyswitch_pre.p4 picks the case from the EtherType: multicast, clones, drops,
    # port 0 (unset), group 2 (whose "not a replica" raises)
    return [dst + src + bytes([0x10, t]) + b"PAYLOAD" + bytes(40) for t in range(8)] * 3


def _expected(prog) -> tuple[dict[int, list[bytes]], int]:
    ref = Switch(prog, native=False)
    _pre(ref)
    ref.mcast[2] = [(6, 7), "not a replica"]
    return reference_outputs(ref, 3, _frames())


def _program(monkeypatch, which: str):
    """tests/p4/pyswitch_pre.p4 compiled for loop ``which`` (``LOOPS``), and its
    ``native_loop`` flag; skipped where that loop's native path cannot build."""
    mode, native_loop = LOOPS[which]
    if mode != "off" and unavailable():
        pytest.skip(str(unavailable()))
    monkeypatch.setenv("PYSWITCH_NATIVE", mode)
    return compile_p4(HERE / "p4" / "pyswitch_pre.p4"), native_loop


@contextlib.contextmanager
def _loop_running(prog, ports: dict, native_loop: bool, setup=None):
    """A ``ForwardingLoop`` over ``ports`` for ``prog`` (tests/p4/pyswitch_pre.p4's groups),
    run in a thread for the ``with`` body; ``setup(loop)`` before it starts.  Stopped after,
    with no loop error."""
    from pyswitch.daemon import ForwardingLoop
    from pyswitch.p4runtime.pipeline import Device

    dev = Device()
    dev.switch = dev.make_switch(prog)
    _pre(dev.switch)
    loop = ForwardingLoop(dev, ports, native_loop=native_loop)
    if setup is not None:
        setup(loop)
    t = threading.Thread(target=loop.run, daemon=True)
    t.start()
    try:
        yield loop
    finally:
        loop.stop()
        t.join(5)
    assert not t.is_alive() and loop.loop_errors == 0


@pytest.mark.root
@root
@pytest.mark.parametrize("which", list(LOOPS))
def test_both_loops_forward_the_same_frames_and_count_the_same(monkeypatch, which: str):
    prog, native_loop = _program(monkeypatch, which)
    want, bad = _expected(prog)
    frames = _frames()

    def setup(loop) -> None:
        loop.dev.switch.mcast[2] = [(6, 7), "not a replica"]
        loop.imp.set(2, parse_spec("delay_ms=1,dir=out"))  # port 2 through _transmit

    with veth_hosts(4, ips=False) as hosts:
        ports = {i: Port(h.switch_if) for i, h in enumerate(hosts, 1)}
        host_ports = {i: h.port() for i, h in enumerate(hosts, 1)}
        with _loop_running(prog, ports, native_loop, setup) as loop:
            for f in frames:
                assert host_ports[3].send(f)
                time.sleep(0.002)  # one at a time, as at a low rate, and some together
            assert all(host_ports[3].send(f) for f in frames)
            got = {i: expect_frames(host_ports[i], lambda f: b"PAYLOAD" in f,
                                    2 * len(want.get(i, [])), timeout=3.0)
                   for i in (1, 2, 4)}
        assert loop.loop_path == ("native" if which == "c" else loop.loop_path)
        assert which == "c" or loop.loop_path.startswith("python")
        for i in (1, 2, 4):
            assert got[i] == want.get(i, []) * 2, i
        assert loop.process_errors == 2 * bad and loop.processed == 2 * (len(frames) - bad)
        assert loop.unknown_port_out == 2 * sum(len(b) for p, b in want.items()
                                                if p not in ports and p != 511)
        c = {i: p.counters for i, p in ports.items()}
        assert c[3].rx_frames == 2 * len(frames) and c[3].tx_frames == len(want.get(3, [])) * 2
        for i in (1, 2, 4):
            assert c[i].tx_frames == len(got[i])
            assert c[i].tx_bytes == sum(len(f) for f in got[i])
        assert c[3].rx_bytes == 2 * sum(len(f) for f in frames)
        for p in [*ports.values(), *host_ports.values()]:
            p.close()


@pytest.mark.root
@root
@pytest.mark.parametrize("which", list(LOOPS))
def test_an_impairment_set_while_the_loop_runs_applies_to_the_next_frame(monkeypatch,
                                                                         which: str):
    """`set_impairment` from another thread (the control socket's): frames sent after it
    returns are forwarded (or not) with the new settings, on either loop.  (The C loop's
    epoch check also closes the short race where a round of frames already woken with
    the wake-up forwards with the old settings; this test cannot force that race.)"""
    prog, native_loop = _program(monkeypatch, which)
    dst, src = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")
    with veth_hosts(3, ips=False) as hosts:
        ports = {i: Port(h.switch_if) for i, h in enumerate(hosts, 1)}
        host_ports = {i: h.port() for i, h in enumerate(hosts, 1)}
        with _loop_running(prog, ports, native_loop) as loop:
            def burst(tag: bytes) -> list[bytes]:
                for k in range(20):  # EtherType 0x1001: to port 2 (tests/p4/pyswitch_pre.p4)
                    assert host_ports[3].send(dst + src + b"\x10\x01" + tag
                                              + bytes([k]) + bytes(50))
                return expect_frames(host_ports[2], lambda f: tag in f, 20, timeout=1.5)

            assert len(burst(b"BEFORE")) == 20
            loop.set_impairment(3, "loss=1,dir=in,seed=1")
            assert burst(b"DURING") == []
            loop.set_impairment(3, "none")
            assert len(burst(b"AFTER")) == 20
        assert (loop.loop_path == "native") == (which == "c")
        for p in [*ports.values(), *host_ports.values()]:
            p.close()


def _qdisc_figures(ifname: str) -> tuple[int, int]:
    """(packets sent, drops) of the leaf pfifo under ``ifname``'s htb (``tc -s -j``)."""
    leaf = [q for q in json.loads(sh("tc", "-s", "-j", "qdisc", "show", "dev", ifname).stdout)
            if q["kind"] == "pfifo"]
    return leaf[0]["packets"], leaf[0]["drops"]


@pytest.mark.root
@root
@pytest.mark.skipif(shutil.which("tc") is None, reason="needs tc (iproute2)")
@pytest.mark.parametrize("which", list(LOOPS))
def test_a_burst_over_a_shaped_port_is_accounted_for_at_every_layer(monkeypatch, which: str):
    """Two ports burst into one port shaped as Mininet's TCLink shapes a link (htb, here at
    1 Mbit/s with a 100-frame queue): on either loop every frame either leaves (the qdisc
    sent it, the host got it, in each sender's order) or is counted refused (``tx_errors``:
    the qdisc's drops, which also count a frame refused in the middle of a ``sendmmsg``
    batch and tried once more); the daemon's sockets lose nothing on the way in.  The
    hypotheses for the C loop's retransmissions in Mininet (frames it sent at once that
    the Python loop paced, send errors it lost, reordering) would each break one of these
    (docs/pyswitch-api.md, "The forwarding loop in C")."""
    prog, native_loop = _program(monkeypatch, which)
    dst, src = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")
    n = 300

    def frames(tag: bytes) -> list[bytes]:  # EtherType 0x1001: to port 2, the shaped one
        return [dst + src + b"\x10\x01" + tag + struct.pack("!I", k) + bytes(181)
                for k in range(n)]

    with veth_hosts(3, ips=False) as hosts:
        shaped = hosts[1].switch_if
        sh("tc", "qdisc", "add", "dev", shaped, "root", "handle", "5:", "htb", "default", "1")
        sh("tc", "class", "add", "dev", shaped, "parent", "5:", "classid", "5:1", "htb",
           "rate", "1mbit", "burst", "15k")
        sh("tc", "qdisc", "add", "dev", shaped, "parent", "5:1", "handle", "10:", "pfifo",
           "limit", "100")
        ports = {i: Port(h.switch_if) for i, h in enumerate(hosts, 1)}
        host_ports = {i: h.port() for i, h in enumerate(hosts, 1)}
        with _loop_running(prog, ports, native_loop) as loop:
            def burst(port: Port, tag: bytes) -> None:
                fs = frames(tag)
                for k in range(0, n, 32):
                    port.send_batch(fs[k:k + 32])

            senders = [threading.Thread(target=burst, args=(host_ports[i], tag))
                       for i, tag in ((1, b"A"), (3, b"B"))]
            for s in senders:
                s.start()
            for s in senders:
                s.join()
            got = expect_frames(host_ports[2], lambda f: f[25:26] in (b"A", b"B"), 2 * n,
                                timeout=3.0)
        assert (loop.loop_path == "native") == (which == "c")
        sent, dropped = _qdisc_figures(shaped)
        c = ports[2].counters
        assert loop.processed == 2 * n and ports[1].counters.rx_frames == n
        assert ports[3].counters.rx_frames == n  # nothing lost into the daemon
        assert c.tx_errors > 0, "the burst must overflow the shaped port's queue"
        assert c.tx_frames + c.tx_errors == 2 * n
        assert c.tx_frames == sent == len(got)
        assert dropped >= c.tx_errors
        for tag in (b"A", b"B"):
            seqs = [struct.unpack("!I", f[26:30])[0] for f in got if f[25:26] == tag]
            assert seqs == sorted(seqs), tag
        assert all(p.counters.rx_errors == 0 for p in ports.values())
        for p in [*ports.values(), *host_ports.values()]:
            p.close()


def test_the_python_loop_is_the_default_and_the_c_loop_is_asked_for(monkeypatch):
    """The C loop only with PYSWITCH_LOOP=c (or native_loop=True): its Mininet runs had
    more bursts of retransmissions than the Python loop's (docs/pyswitch-api.md)."""
    from pyswitch.daemon import ForwardingLoop
    from pyswitch.p4runtime.pipeline import Device

    monkeypatch.delenv("PYSWITCH_LOOP", raising=False)
    loop = ForwardingLoop(Device(), {})
    assert loop._pump_or_why() == (None, "the Python loop (the default; PYSWITCH_LOOP=c for "
                                         "the C loop)")
    monkeypatch.setenv("PYSWITCH_LOOP", "c")
    assert ForwardingLoop(Device(), {})._native_loop is True
    assert ForwardingLoop(Device(), {}, native_loop=False)._native_loop is False
