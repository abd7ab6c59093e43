"""The thin UDP shell shared by the PS and worker processes: INA packets over kernel sockets.

Workers and the PS are ordinary hosts: GRADs are UDP datagrams to the PS's INA port (the
switches aggregate them in flight), RESULTs come back as UDP datagrams (the switches rewrite
each multicast copy's destination to the worker, ``MyEgress.result_rewrite``).
"""

from __future__ import annotations

import socket

from workers.ina.wire import InaDecodeError, InaPacket, decode_payload, encode_payload

RCVBUF = 8 << 20


def open_socket(bind: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, RCVBUF)
    sock.bind(bind)
    return sock


def send(sock: socket.socket, pkt: InaPacket, dest: tuple[str, int]) -> None:
    try:
        sock.sendto(encode_payload(pkt), dest)
    except BlockingIOError:  # a full send buffer is a lost packet: retransmission recovers it
        pass


def receive(sock: socket.socket) -> InaPacket | None:
    """One datagram, decoded; ``None`` for a malformed one (counted by the caller)."""
    data = sock.recv(4096)
    try:
        return decode_payload(data)
    except InaDecodeError:
        return None
