"""Congestion marks in ina.p4 (p4src/include/congestion.p4, docs/protocol.md §6): an INA
packet that finds its egress queue at or above the controller's threshold leaves with
INA_FLAG_ECN, on pyswitch's Python and native paths; the PS ORs the marks into the RESULT
and a worker's congestion control sees them."""

from __future__ import annotations

import numpy as np
import pytest

from pyswitch import Switch
from pyswitch.native import unavailable
from tests.ina_harness import InaSwitch, PySwitchTarget, compiled_pyswitch_program
from workers.ina.cc import Aimd
from workers.ina.constants import FLAG_FALLBACK, FLAG_RETRANSMIT, K, load_constants
from workers.ina.ps import PsState
from workers.ina.wire import InaPacket, decode_frame
from workers.ina.worker import FLAG_ECN, WorkerRound

PATHS = [False, pytest.param(True, marks=pytest.mark.skipif(
    unavailable() is not None, reason=str(unavailable())))]
JOB, AGG, TOR, PS_PORT = 3, 7, 9, 5


def test_the_mark_is_one_free_flag_bit() -> None:
    """constants.p4 is the one source: bit 3, free of the other flags and of a GRAD's copy
    number (bits 4-7); the worker reads the same value."""
    c = load_constants()
    assert c["INA_FLAG_ECN"] == 8 == FLAG_ECN
    assert FLAG_ECN & (c["INA_FLAG_RETRANSMIT"] | c["INA_FLAG_FALLBACK"]
                       | c["INA_FLAG_INCOMPLETE"] | 0xF0) == 0


def _tor(native: bool) -> tuple[InaSwitch, Switch]:
    t = PySwitchTarget()
    t.sw = Switch(compiled_pyswitch_program(), device_id=0, seed=0, native=native)
    sw = InaSwitch(t, TOR).configure()
    sw.fabric(1, 2)
    sw.job(JOB, [0, 1], is_ps_tor=True, tor_id=TOR, ps_port=PS_PORT, mcast_grp=1)
    sw.route(0, [PS_PORT])
    return sw, t.sw


def _fallback(chunk: int) -> bytes:
    """A worker's GRAD that fell back to the PS on the way (it only passes s_d)."""
    v = np.arange(K, dtype=np.int32)
    return InaSwitch.frame(InaPacket.grad(JOB, 0, chunk, 0, 2, 0, v,
                                          FLAG_RETRANSMIT | FLAG_FALLBACK))


@pytest.mark.parametrize("native", PATHS)
def test_packets_over_the_threshold_are_marked(native: bool) -> None:
    """A burst into the PS's port (1,000 packets/s, queue 64): the packets that found 2 or
    more ahead of them leave marked, the first two not; no threshold set, no mark."""
    sw, raw = _tor(native)
    raw.set_queue_rate(1000, port=PS_PORT)
    flags = [decode_frame(b).flags for _, b in
             (o for c in range(5) for o in raw.process_at(1.0, 1, _fallback(c)))]
    assert [f & FLAG_ECN for f in flags] == [0] * 5  # the table has no threshold yet
    raw.set_default_action("MyEgress.ecn_config", "MyEgress.set_ecn_threshold", {"qdepth": 2})
    out = [o for c in range(5) for o in raw.process_at(2.0, 1, _fallback(c))]
    assert [p for p, _ in out] == [PS_PORT] * 5
    assert [bool(decode_frame(b).flags & FLAG_ECN) for _, b in out] == [
        False, False, True, True, True]
    assert raw.counter_read("MyEgress.ecn_marked", 0)[0] == 3
    # the queue drains at the rate: 10 ms later it is empty, nothing is marked
    (late,) = raw.process_at(2.1, 1, _fallback(9))
    assert not decode_frame(late[1]).flags & FLAG_ECN


def test_the_ps_carries_a_mark_into_the_result_and_aimd_halves() -> None:
    """The PS ORs the marks of what it merged into the chunk's RESULT; a worker counts the
    marked RESULT and its policy halves its window once."""
    v = np.arange(K, dtype=np.int32)
    ps = PsState(JOB, [0, 1], n_chunks=1, k=K)
    ps.on_packet(InaPacket.grad(JOB, 0, 0, 0, 1, 0, v, FLAG_FALLBACK | FLAG_ECN))
    (res,) = ps.on_packet(InaPacket.grad(JOB, 0, 0, 0, 1, 1, v, FLAG_FALLBACK)).results
    assert res.flags & FLAG_ECN and ps.stats.marked == 1
    cc = Aimd(8.0)
    w = WorkerRound(job_id=JOB, worker_id=0, round_=0, values=v, schedule=[(0, 0, 1)], k=K,
                    cc=cc)
    w.start(0.0)
    w.on_packet(res, now=0.1)
    assert w.stats.marks == 1 and cc.decreases == 1 and cc.window == 4
