"""Hosts in batches (issue 26): `send_many`/`receive_many` move INA datagrams many per
system call over loopback, exactly as one `send`/`receive` per datagram would."""

from __future__ import annotations

import select
import socket

import numpy as np

from workers.ina import constants as C
from workers.ina import udp
from workers.ina.wire import InaPacket, encode_payload


def _pkts(n: int) -> list[InaPacket]:
    return [InaPacket.grad(1, 2, c, 5, 4, c % 4, np.arange(C.K, dtype=np.int64) * 3 - c)
            for c in range(n)]


def _drain(sock: socket.socket, want: int) -> list:
    got: list = []
    while len(got) < want and select.select([sock], [], [], 2.0)[0]:
        got += udp.receive_many(sock)
    return got


def test_batches_arrive_whole_in_order_and_malformed_is_none() -> None:
    a, b = udp.open_socket(("127.0.0.1", 0)), udp.open_socket(("127.0.0.1", 0))
    try:
        b.setblocking(False)
        sent = _pkts(150)  # more than one batch
        assert udp.send_many(a, sent, b.getsockname()) == 150
        got = _drain(b, 150)
        assert [encode_payload(p) for p in got] == [encode_payload(p) for p in sent]
        # a short datagram, an oversized one and a good one, in one receive
        a.sendto(b"\x01\x02", b.getsockname())
        a.sendto(b"\0" * 5000, b.getsockname())
        a.sendto(encode_payload(sent[7]), b.getsockname())
        got = _drain(b, 3)
        assert got[:2] == [None, None] and encode_payload(got[2]) == encode_payload(sent[7])
        assert udp.receive_many(b) == []  # nothing waits: an empty list, no blocking
        # one packet and a second destination still work (the batch is re-aimed)
        c = udp.open_socket(("127.0.0.1", 0))
        c.setblocking(False)
        try:
            assert udp.send_many(a, sent[:3], c.getsockname()) == 3
            assert udp.send_many(a, sent[3:4], b.getsockname()) == 1
            assert [encode_payload(p) for p in _drain(c, 3)] == \
                [encode_payload(p) for p in sent[:3]]
            assert [encode_payload(p) for p in _drain(b, 1)] == [encode_payload(sent[3])]
        finally:
            c.close()
    finally:
        a.close()
        b.close()


def test_one_socket_sends_and_receives_batches_apart() -> None:
    """A worker's socket sends GRADs and receives RESULTs: a receive into the socket's
    batch must not re-aim its sends (the send and receive slots are apart), and nothing
    is re-set between calls (the kernel writes each slot's length and flags)."""
    w, ps = udp.open_socket(("127.0.0.1", 0)), udp.open_socket(("127.0.0.1", 0))
    try:
        w.setblocking(False)
        ps.setblocking(False)
        sent = _pkts(10)
        for _ in range(3):
            assert udp.send_many(w, sent[:5], ps.getsockname()) == 5
            got = udp.receive_many(ps)  # all five wait already on loopback: one call
            assert len(got) == 5 < udp.BATCH
            assert [encode_payload(p) for p in got] == [encode_payload(p) for p in sent[:5]]
            assert udp.send_many(ps, sent[5:], w.getsockname()) == 5  # answers
            assert [encode_payload(p) for p in _drain(w, 5)] == \
                [encode_payload(p) for p in sent[5:]]
            w.sendto(b"\0" * 5000, w.getsockname())  # truncated into w's receive slot 0
            assert udp.receive_many(w) == [None]
        # after receiving on w, its sends still go to the PS, not to a received address
        assert udp.send_many(w, sent[:2], ps.getsockname()) == 2
        assert len(_drain(ps, 2)) == 2
    finally:
        w.close()
        ps.close()


def test_receive_one_takes_one_datagram_as_receive_many_would() -> None:
    """`receive_one` (a paced socket's read, issue 42): the first waiting datagram, decoded
    exactly, the rest left waiting; malformed ones ``[None]``, none waiting ``[]``."""
    a, b = udp.open_socket(("127.0.0.1", 0)), udp.open_socket(("127.0.0.1", 0))
    try:
        b.setblocking(False)
        assert udp.receive_one(b) == []
        sent = _pkts(3)
        assert udp.send_many(a, sent, b.getsockname()) == 3
        assert select.select([b], [], [], 2.0)[0]
        first = udp.receive_one(b)
        assert len(first) == 1 and encode_payload(first[0]) == encode_payload(sent[0])
        assert first[0].values.dtype == np.int32
        assert [encode_payload(p) for p in _drain(b, 2)] == \
            [encode_payload(p) for p in sent[1:]]
        bad_type = bytearray(encode_payload(sent[0]))
        bad_type[0] = 9
        for junk in (b"\x01\x02", b"\0" * 5000, bytes(bad_type)):
            a.sendto(junk, b.getsockname())
            assert select.select([b], [], [], 2.0)[0]
            assert udp.receive_one(b) == [None]
        assert udp.receive_one(b) == []
    finally:
        a.close()
        b.close()
