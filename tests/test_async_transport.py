"""The async PS's messages, length-prefixed framing over a stream, and the transport-free PS
service (push budget, stop, refusals) that a TCP or NDN transport drives."""

from __future__ import annotations

import socket
import struct
import threading

import numpy as np
import pytest

from workers.async_ps.core import Push, Reply
from workers.async_ps.job import AsyncJob
from workers.async_ps.ps_node import PsService
from workers.async_ps.wire import (
    Answer,
    Error,
    Hello,
    Stop,
    Welcome,
    decode,
    encode,
    recv_message,
    send_message,
)
from workers.common.framing import FrameDecoder, TransportError, frame
from workers.common.model import TrainConfig

GRAD = np.array([0.5, -1.25, 3.0e-7, np.float32(np.pi)], dtype=np.float32)


def _same(a, b) -> None:
    """Messages equal field by field (arrays bit for bit, dtype included)."""
    assert type(a) is type(b)
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y)
        elif isinstance(x, Reply):
            _same(x, y)
        else:
            assert x == y, name


MESSAGES = [
    Hello(7),
    Welcome(np.arange(5, dtype=np.float32) / 3, 12),
    Welcome(np.array([1.5, -2.0]), 0),  # float64 stays float64
    Push(3, GRAD, 41, (1, 4, 2), None),
    Push(0, GRAD, 0, (), 2.75),  # kappa_mode="learner": kappa on the wire
    Answer(Reply(GRAD * 2, 42, 3, 7 / 3, 0.2 / (7 / 3), True), stop=False),
    Answer(Reply(GRAD, 9, 1, 1.0, 0.2, False), stop=True),
    Stop(),
    Error("push from worker 2: gradient has NaN or inf values"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(msg):
    _same(decode(encode(msg)), msg)


def test_push_layout_is_the_documented_one():
    body = encode(Push(3, np.array([1.0, 2.0], dtype=np.float32), 41, (1, 4), None))
    assert body[:4] == b"AS\x01\x03"
    worker, t_w, kappa, n_prev = struct.unpack_from("!IQdH", body, 4)
    assert (worker, t_w, n_prev) == (3, 41, 2) and np.isnan(kappa)
    assert struct.unpack_from("!2I", body, 26) == (1, 4)
    assert struct.unpack_from("!BI", body, 34) == (1, 2)  # float32, 2 values
    assert body[39:] == np.array([1.0, 2.0], dtype="<f4").tobytes()
    assert len(frame(body)) == 4 + len(body) and frame(body)[:4] == struct.pack("!I", len(body))


def test_decoder_reassembles_byte_by_byte_and_splits_coalesced_frames():
    stream = b"".join(frame(encode(m)) for m in MESSAGES)
    dec = FrameDecoder()
    got = []
    for i in range(len(stream)):  # worst case: every byte its own recv
        got += dec.feed(stream[i:i + 1])
    assert dec.buffered == 0
    for body, m in zip(got, MESSAGES, strict=True):
        _same(decode(body), m)
    dec2 = FrameDecoder()
    bodies = dec2.feed(stream[:-3])  # everything but the tail of the last frame at once
    assert len(bodies) == len(MESSAGES) - 1 and dec2.buffered > 0
    assert dec2.feed(stream[-3:]) and dec2.buffered == 0


def test_decoder_refuses_an_oversized_length_before_buffering_it():
    dec = FrameDecoder(max_frame=1000)
    with pytest.raises(TransportError, match="1001 bytes exceeds the limit of 1000"):
        dec.feed(struct.pack("!I", 1001) + b"x")
    assert FrameDecoder(max_frame=1000).feed(frame(b"y" * 1000)) == [b"y" * 1000]


@pytest.mark.parametrize("body, match", [
    (b"XX\x01\x01\x00\x00\x00\x01", "bad magic"),
    (b"AS\x02\x01\x00\x00\x00\x01", "unsupported version 2"),
    (b"AS\x01\x09", "unknown message type 9"),
    (b"AS\x01\x01\x00", "truncated Hello"),
    (encode(Hello(1)) + b"\x00", "1 trailing bytes"),
    (encode(Welcome(np.ones(4, np.float32), 1))[:-1], "truncated"),
    (encode(Welcome(np.ones(4, np.float32), 1))[:12] + b"\x07" + b"\x00" * 8, "dtype code 7"),
    (encode(Push(1, GRAD, 2, (1, 2, 3)))[:30], "truncated Push message"),
    (b"A", "truncated any"),
])
def test_malformed_bodies_are_refused(body, match):
    with pytest.raises(TransportError, match=match):
        decode(body)


def test_encoding_refuses_what_it_cannot_carry():
    with pytest.raises(TransportError, match="float32 or float64"):
        encode(Welcome(np.arange(3), 0))
    with pytest.raises(TransportError, match="flat"):
        encode(Welcome(np.ones((2, 2), np.float32), 0))


def test_recv_message_over_a_socket_with_partial_writes():
    a, b = socket.socketpair()
    stream = b"".join(frame(encode(m)) for m in MESSAGES)

    def writer():
        # uneven pieces, crossing frame boundaries, then a clean close
        cuts = [0, 1, 3, 4, 9, 50, 51, 200, len(stream)]
        for x, y in zip(cuts, cuts[1:], strict=False):
            a.sendall(stream[x:y])
        a.close()

    t = threading.Thread(target=writer)
    t.start()
    dec, pending = FrameDecoder(), []
    for m in MESSAGES:
        _same(recv_message(b, dec, pending), m)
    with pytest.raises(ConnectionError, match="closed by the peer$"):
        recv_message(b, dec, pending)
    t.join()
    b.close()


def test_close_mid_frame_is_reported():
    a, b = socket.socketpair()
    data = frame(encode(Hello(4)))
    a.sendall(data[:-2])
    a.close()
    with pytest.raises(ConnectionError, match=r"mid-frame \(10 bytes buffered\)"):
        recv_message(b, FrameDecoder(), [])
    b.close()


def test_send_message_counts_the_prefix():
    a, b = socket.socketpair()
    n = send_message(a, Hello(2))
    assert n == 4 + 8
    assert recv_message(b, FrameDecoder(), []) == Hello(2)
    a.close()
    b.close()


# ------------------------------------------------------------------ the PS service


def _service(budget: int, eval_every: int = 2, soft_sync: int = 1):
    job = AsyncJob(policy="sigma", train=TrainConfig(n_workers=2), n_workers=2, budget=budget,
                   lr=0.5, soft_sync=soft_sync, eval_every=eval_every)
    now = [100.0]
    evals = []

    def evaluate(w):
        evals.append(w.copy())
        return float(w.sum()), float(-w.sum())

    svc = PsService(job, np.zeros(2), evaluate, clock=lambda: now[0])
    return svc, evals, now


def test_service_budget_stop_and_records():
    svc, evals, now = _service(budget=3)
    assert isinstance(svc.handle(Hello(0)), Welcome)
    w = svc.handle(Hello(1))
    assert w.t_ps == 0 and np.array_equal(w.params, [0.0, 0.0])
    g = np.array([1.0, 2.0])
    a1 = svc.handle(Push(0, g, 0))  # sigma 1: W = -0.5 g
    now[0] = 101.0
    a2 = svc.handle(Push(1, g, 0))  # sigma 2 (T_ps = 1): W -= 0.25 g
    a3 = svc.handle(Push(0, g, 1))  # sigma 2: W -= 0.25 g, budget used up
    assert [a.stop for a in (a1, a2, a3)] == [False, False, True]
    assert [a.reply.sigma for a in (a1, a2, a3)] == [1, 2, 2]
    assert np.allclose(a3.reply.params, -(0.5 + 0.25 + 0.25) * g)
    assert isinstance(svc.handle(Push(1, g, 2)), Stop)  # after the budget: discarded
    assert svc.finished and svc.accepted == 3 and svc.ps.t_ps == 3
    assert [r["time"] for r in svc.records] == [100.0, 101.0, 101.0]
    # evaluations at clock 0, at t_ps = 2 (eval_every) and at the end (t_ps = 3)
    assert [(e.t_ps, e.pushes) for e in svc.evaluations] == [(0, 0), (2, 2), (3, 3)]
    assert svc.evaluations[-1].accuracy == pytest.approx(-3.0)
    rep = svc.report()
    assert rep["accepted"] == 3 and rep["updates"] == 3 and len(rep["pushes"]) == 3


def test_service_soft_sync_leaves_the_unfinished_batch_unapplied():
    svc, _, _ = _service(budget=3, eval_every=1, soft_sync=2)
    svc.handle(Hello(0))
    svc.handle(Hello(1))
    g = np.array([1.0, 0.0])
    svc.handle(Push(0, g, 0))
    svc.handle(Push(1, g, 0))  # batch of 2 applied: W = -(0.5 + 0.5)/2 g
    last = svc.handle(Push(0, g, 1))
    assert last.stop and not last.reply.applied
    assert svc.ps.t_ps == 1 and np.allclose(svc.ps.params, [-0.5, 0.0])


def test_service_refuses_strangers_and_bad_pushes_without_changing_state():
    svc, _, _ = _service(budget=5)
    assert "not in 0..1" in svc.handle(Hello(2)).text
    assert "has not joined" in svc.handle(Push(0, np.ones(2), 0)).text
    svc.handle(Hello(0))
    assert "T_w=4" in svc.handle(Push(0, np.ones(2), 4)).text  # clock from the future
    assert "shape" in svc.handle(Push(0, np.ones(3), 0)).text
    assert svc.accepted == 0 and svc.refused == 2 and not svc.records
    assert isinstance(svc.handle(Welcome(np.ones(2), 0)), Error)
