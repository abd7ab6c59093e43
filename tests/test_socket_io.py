"""The hosts' loop, :meth:`workers.ina.socket_io.SocketIO.serve` (issue 42: one ``poll``
object, one ``recv`` for a datagram after a quiet spell, ``recvmmsg`` for bursts): every
datagram reaches the driven host once and in order, whichever read took it; timers fire
at their time (never early); the other files watched are handed over."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from workers.ina import constants as C
from workers.ina import udp
from workers.ina.socket_io import SocketIO
from workers.ina.wire import InaPacket, encode_payload


def _pkts(n: int, base: int = 0) -> list[InaPacket]:
    return [InaPacket.result(1, 0, base + c, 0b11, np.full(C.K, base + c, np.int32))
            for c in range(n)]


class _Collect:
    """A driven host that records what it gets and when its timer fired."""

    def __init__(self) -> None:
        self.got: list[InaPacket | None] = []
        self.batches: list[int] = []
        self.timer_at: list[float] = []

    def on_packets(self, pkts: list[InaPacket | None]) -> None:
        self.got += pkts
        self.batches.append(len(pkts))

    def on_timer(self) -> None:
        self.timer_at.append(time.monotonic())


@pytest.mark.parametrize("paced", [True, False])
def test_lone_datagrams_and_bursts_arrive_once_in_order(monkeypatch, paced: bool) -> None:
    from workers.ina import socket_io

    reads = {"one": 0, "many": 0}

    def count(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapped(sock):  # type: ignore[no-untyped-def]
            reads[name] += 1
            return fn(sock)
        return wrapped

    monkeypatch.setattr(socket_io, "receive_one", count("one", udp.receive_one))
    monkeypatch.setattr(socket_io, "receive_many", count("many", udp.receive_many))
    rx, tx = udp.open_socket(("127.0.0.1", 0)), udp.open_socket(("127.0.0.1", 0))
    rx.setblocking(False)
    dest = rx.getsockname()
    io, host = SocketIO(rx, paced=paced), _Collect()
    plan = [_pkts(1, 0), _pkts(150, 1), _pkts(1, 151), _pkts(3, 152), _pkts(1, 155)]
    sent: list[InaPacket] = []
    step = [0]
    timers: list[threading.Timer] = []

    def poll(now: float) -> None:  # each group 5 ms after the one before it arrived whole
        if step[0] < len(plan) and len(host.got) == len(sent) and (
                not timers or not timers[-1].is_alive()):
            group = plan[step[0]]
            step[0] += 1
            sent.extend(group)
            timers.append(threading.Timer(0.005, udp.send_many, (tx, group, dest)))
            timers[-1].start()  # while serve sleeps in poll: its first datagram wakes it

    deadline = time.monotonic() + 10
    try:
        io.serve(host, until=lambda: (step[0] == len(plan) and len(host.got) >= len(sent))
                 or time.monotonic() > deadline, poll=poll, max_wait=0.01)
    finally:
        for t in timers:
            t.join()
        rx.close()
        tx.close()
    assert [encode_payload(p) for p in host.got] == [encode_payload(p) for p in sent]  # type: ignore[arg-type]
    assert len(sent) == 156
    assert max(host.batches) > 1  # the burst went through recvmmsg, many per call
    if paced:  # both reads served
        assert reads["one"] >= 1 and reads["many"] >= 1
    else:  # the PS's socket: recvmmsg only
        assert reads["one"] == 0 and reads["many"] >= 5


def test_timer_fires_not_early_and_others_are_handed_over() -> None:
    rx = udp.open_socket(("127.0.0.1", 0))
    rx.setblocking(False)
    r, w = os.pipe()
    io, host = SocketIO(rx), _Collect()
    ready: list[int] = []

    def on_ready(f: object) -> None:
        ready.append(os.read(r, 100)[0])

    class Pipe:
        def fileno(self) -> int:
            return r

    pipe = Pipe()
    start = time.monotonic()
    io.wake_at(start + 0.03)
    io.later(0.01, lambda: os.write(w, b"\x07"))
    try:
        io.serve(host, until=lambda: bool(host.timer_at and ready), max_wait=0.005,
                 others=[pipe], on_ready=lambda f: on_ready(f) if f is pipe else None)
    finally:
        rx.close()
        os.close(r)
        os.close(w)
    assert ready == [7]
    assert host.timer_at[0] >= start + 0.03
    assert host.got == []


def test_a_worker_reads_one_at_a_time_only_behind_switches() -> None:
    """Through switches (one RESULT destination, the network multicasts) a worker's socket
    is paced; on loopback (the PS sends every worker its copy) it is not."""
    from workers.common.model import TrainConfig
    from workers.ina.job import make_job_config
    from workers.ina.worker_node import results_paced

    addrs = [("10.0.0.1", 5001), ("10.0.0.2", 5001), ("10.0.0.3", 5001)]

    def job(results_to: str):  # type: ignore[no-untyped-def]
        return make_job_config(job_id=1, mode="ina", rounds=1, train=TrainConfig(),
                               worker_addrs=addrs, ps_addr=("10.0.0.9", 9000),
                               schedules={}, frac_bits=8, n_values=32, out_dir="/tmp",
                               results_to=results_to)

    assert all(results_paced(job("network"), w) for w in range(3))
    assert not any(results_paced(job("every_worker"), w) for w in range(3))


def test_poll_wait_follows_the_earliest_timer_or_deferred_call():
    from workers.ina.socket_io import poll_wait_ms

    assert poll_wait_ms(10.0, None, [], 50.0) == 50.0  # nothing due: the cap
    assert poll_wait_ms(10.0, 10.02, [], 50.0) == pytest.approx(20.0)
    assert poll_wait_ms(10.0, 10.02, [10.005, 11.0], 50.0) == pytest.approx(5.0)
    assert poll_wait_ms(10.0, 9.0, [], 50.0) == 0.0  # overdue: do not sleep
