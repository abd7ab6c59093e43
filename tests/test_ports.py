"""AF_PACKET ports on real veths: frames intact, VLAN tags restored, no echo of own frames."""

from __future__ import annotations

import struct

import pytest
from netns import expect_frames, in_netns, is_root, quiet_for, veth_hosts

from pyswitch.ports import (
    TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
    Port,
    PortError,
    restore_vlan,
    set_tx_checksum_offload,
    tx_checksum_offload,
)


def _aux(status: int, tci: int, tpid: int) -> bytes:
    return struct.pack("=IIIHHHH", status, 0, 0, 0, 0, tci, tpid)


def test_restore_vlan_inserts_tag_after_macs():
    frame = bytes(range(12)) + b"\x08\x00payload"
    out, done = restore_vlan(frame, _aux(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID,
                                         0x2064, 0x88A8))
    assert done and out == bytes(range(12)) + b"\x88\xa8\x20\x64\x08\x00payload"
    out, done = restore_vlan(frame, _aux(TP_STATUS_VLAN_VALID, 5, 0))
    assert done and out[12:16] == b"\x81\x00\x00\x05"
    assert restore_vlan(frame, _aux(0, 0, 0)) == (frame, False)


root = pytest.mark.skipif(not is_root(), reason="needs root (namespaces, raw sockets)")


def _frame(dst: bytes, src: bytes, marker: bytes, vlan: int | None = None) -> bytes:
    tag = struct.pack("!HH", 0x8100, vlan) if vlan is not None else b""
    return dst + src + tag + b"\x88\xb5" + marker + bytes(46)


def _has(marker: bytes):
    return lambda f: marker in f


@pytest.fixture(params=["native", "python"])
def port_path(request, monkeypatch) -> str:
    """Each port test on both loops: pyswitch/native/portio.c and the Python one."""
    from pyswitch import native

    if request.param == "native" and native.unavailable():
        pytest.skip(str(native.unavailable()))
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto" if request.param == "native" else "off")
    return request.param


@pytest.mark.root
@root
def test_port_moves_frames_both_ways_restores_vlan_and_never_echoes(port_path):
    with veth_hosts(1, ips=False) as (h,):
        with Port(h.switch_if) as sw, h.port() as host:
            assert sw.path.startswith(port_path)
            src, dst = bytes.fromhex("020000000001"), bytes.fromhex("02000000aaaa")
            f1 = _frame(dst, src, b"HELLO-1")
            assert host.send(f1)
            got = expect_frames(sw, _has(b"HELLO-1"))
            assert got == [f1]
            # 802.1Q tagged frame: kernel strips the tag; Port puts it back.
            f2 = _frame(dst, src, b"TAGGED", vlan=0x0123)
            host.send(f2)
            assert expect_frames(sw, _has(b"TAGGED")) == [f2]
            assert sw.counters.vlan_restored == 1
            # switch side sends: host gets it, the switch socket does not see its own frame
            f3 = _frame(src, dst, b"FROM-SW", vlan=7)
            assert sw.send(f3)
            assert expect_frames(host, _has(b"FROM-SW")) == [f3]
            assert quiet_for(sw, _has(b"FROM-SW"), 0.3)
            # the host socket does not see its own sent frames either
            assert quiet_for(host, _has(b"HELLO-1"), 0.1)
            assert sw.counters.tx_frames == 1 and sw.counters.rx_frames >= 2


@pytest.mark.root
@root
def test_tx_checksum_offload_toggle_and_missing_interface():
    with veth_hosts(1, ips=False) as (h,):
        assert in_netns(h.ns, tx_checksum_offload, "eth0") is False  # veth_hosts turned it off
        set_tx_checksum_offload(h.switch_if, True)
        assert tx_checksum_offload(h.switch_if) is True
        set_tx_checksum_offload(h.switch_if, False)
        assert tx_checksum_offload(h.switch_if) is False
    with pytest.raises(PortError, match="no such network interface"):
        Port("nosuchif0")


@pytest.mark.root
@root
def test_link_down_is_not_fatal_and_traffic_resumes(port_path):
    from netns import sh, wait_link_ready

    with veth_hosts(1, ips=False) as (h,):
        with Port(h.switch_if) as sw, h.port() as host:
            assert sw.path.startswith(port_path)
            sh("ip", "link", "set", h.switch_if, "down")
            assert sw.recv_batch() == []  # ENETDOWN is reported once, not raised
            assert sw.counters.rx_errors == 1
            assert sw.send(b"\xff" * 60) is False and sw.counters.tx_errors == 1
            sh("ip", "link", "set", h.switch_if, "up")
            wait_link_ready(h.switch_if)
            wait_link_ready("eth0", h.ns)
            f = _frame(bytes.fromhex("02000000aaaa"), bytes.fromhex("020000000001"), b"BACK")
            assert host.send(f)
            assert expect_frames(sw, _has(b"BACK")) == [f]


@pytest.mark.root
@root
def test_batches_keep_every_port_guarantee(port_path):
    """recvmmsg/sendmmsg (issue 26): a batch of frames arrives whole and in order, VLAN
    tags restored per frame, and frames the switch sent in a batch never come back."""
    import select

    from pyswitch import ports

    assert ports._recvmmsg is not None and ports._sendmmsg is not None  # glibc has both
    src, dst = bytes.fromhex("020000000001"), bytes.fromhex("02000000aaaa")
    with veth_hosts(1, ips=False) as (h,):
        with Port(h.switch_if) as sw, h.port() as host:
            assert sw.path.startswith(port_path)
            sent = [_frame(dst, src, b"B%03d" % i, vlan=(i if i % 3 == 0 else None))
                    for i in range(150)]
            assert host.send_batch(sent) == 150 and host.counters.tx_frames == 150
            got: list[bytes] = []
            for _ in range(200):
                got += [f for f in sw.recv_batch() if b"B" in f[14:20] or b"B" in f[18:24]]
                if len(got) >= 150:
                    break
                select.select([sw], [], [], 0.05)
            assert got == sent  # whole, in order, tags restored
            assert sw.counters.vlan_restored == 50
            # the switch sends a batch (one frame too big for the link among them)
            back = [_frame(src, dst, b"R%03d" % i, vlan=(7 if i == 2 else None))
                    for i in range(70)]
            back.insert(5, _frame(src, dst, b"JUMBO") + bytes(9000))
            assert sw.send_batch(back) == 70
            assert sw.counters.tx_frames == 70 and sw.counters.tx_errors == 1
            seen = expect_frames(host, lambda f: b"R0" in f, 70)
            assert seen == [f for f in back if b"JUMBO" not in f]
            assert quiet_for(sw, lambda f: b"R0" in f, 0.3)  # no echo of our own batch
            # bytes-like frames go out as bytes do
            like = [_frame(src, dst, b"L%03d" % i) for i in range(2)]
            assert sw.send_batch([bytearray(like[0]), memoryview(like[1])]) == 2
            assert expect_frames(host, lambda f: b"L0" in f, 2) == like
