"""The thin UDP shell shared by the PS and worker processes: INA packets over kernel sockets.

Workers and the PS are ordinary hosts: GRADs are UDP datagrams to the PS's INA port (the
switches aggregate them in flight), RESULTs come back as UDP datagrams (the switches rewrite
each multicast copy's destination to the worker, ``MyEgress.result_rewrite``).

Batches (issue 26): `send_many` hands the kernel every datagram of a burst in one
``sendmmsg`` and `receive_many` takes every waiting datagram in one ``recvmmsg`` (through
ctypes; one system call per datagram where libc lacks them).  Each datagram is still one
packet with the same checks: a datagram the kernel refuses is lost (retransmission recovers
it, as with `send`), a malformed one is ``None``.
"""

from __future__ import annotations

import ctypes
import errno
import socket
import struct

from pyswitch.mmsg import IoVec as _IoVec
from pyswitch.mmsg import MMsgHdr as _MMsgHdr
from pyswitch.mmsg import MsgHdr as _MsgHdr
from pyswitch.mmsg import recvmmsg as _recvmmsg
from pyswitch.mmsg import sendmmsg as _sendmmsg
from workers.ina.wire import (
    PAYLOAD_BYTES,
    InaDecodeError,
    InaPacket,
    decode_payload,
    decode_payloads,
    encode_payload,
)

RCVBUF = 8 << 20
BATCH = 64
_SLOT = 4096  # receive buffer per datagram (what `receive` reads)
_ONE = PAYLOAD_BYTES + 1  # what `receive_one` reads: enough to see a datagram is too long


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


def receive_one(sock: socket.socket) -> list[InaPacket | None]:
    """The first waiting datagram as `receive_many` hands it (``[]`` when none waits,
    ``[None]`` for a malformed one), with one ``recv``: cheaper than ``recvmmsg`` through
    ctypes when datagrams come one at a time (issue 42); others may still wait after it."""
    try:
        data = sock.recv(_ONE)  # a longer datagram is cut to _ONE bytes: malformed below
    except BlockingIOError:
        return []
    try:
        return [decode_payload(data)]
    except InaDecodeError:
        return [None]


_MM = ctypes.sizeof(_MMsgHdr)
_OFF_LEN = _MMsgHdr.len.offset
_OFF_FLAGS = _MsgHdr.flags.offset
if _MM % 4 or _OFF_LEN % 4 or _OFF_FLAGS % 4:  # read as 32-bit words below
    raise RuntimeError("workers/ina/udp.py: struct mmsghdr is not laid out in 32-bit words")
_MMW, _LEN_W, _FLAGS_W = _MM // 4, _OFF_LEN // 4, _OFF_FLAGS // 4
_DONTWAIT = int(socket.MSG_DONTWAIT)
_TRUNC = int(socket.MSG_TRUNC)


class _Batch:
    """``BATCH`` datagram slots (buffers, iovecs, the mmsghdr array) of one direction of one
    socket: a send batch also has one sockaddr_in, which every slot names.

    Set up once: a call writes only what changes (each datagram's bytes, and a slot's
    length when it differs from the last one sent from it), since every ctypes field write
    costs about half a microsecond and a loop over the 64 slots per call cost more than the
    system calls it saved (issue 26: 140 µs per ``send_many`` of two datagrams)."""

    def __init__(self, send: bool) -> None:
        self.buf = ctypes.create_string_buffer(BATCH * _SLOT)
        self.view = memoryview(self.buf).cast("B")
        self.iov = (_IoVec * BATCH)()
        self.msgs = (_MMsgHdr * BATCH)()
        self.lens = [_SLOT] * BATCH  # each iovec's length, as last written
        self.name = ctypes.create_string_buffer(16)  # struct sockaddr_in
        self.dest: tuple[str, int] | None = None
        base = ctypes.addressof(self.buf)
        for k in range(BATCH):
            self.iov[k].base = base + k * _SLOT
            self.iov[k].len = _SLOT
            self.msgs[k].hdr.iov = ctypes.addressof(self.iov[k])
            self.msgs[k].hdr.iovlen = 1
            if send:
                self.msgs[k].hdr.name = ctypes.addressof(self.name)
                self.msgs[k].hdr.namelen = 16
        self.addr = ctypes.addressof(self.msgs)
        # the mmsghdr array as native 32-bit words: each slot's msg_len and msg_flags read
        # by index (a struct unpack from the ctypes array per field cost 0.3 µs)
        self.words: memoryview | None = (None if send  # read by receive_many only
                                         else memoryview(self.msgs).cast("B").cast("I"))

    def aim(self, dest: tuple[str, int]) -> None:
        """Every slot sends to ``dest`` (an IPv4 address and port)."""
        if dest != self.dest:
            self.name.raw = struct.pack("=H", socket.AF_INET) + struct.pack(
                "!H", dest[1]) + _ipv4(dest[0]) + bytes(8)
            self.dest = dest


def _ipv4(host: str) -> bytes:
    """``host``'s IPv4 address, 4 bytes: a dotted quad as it is (``gethostbyname`` imports
    the IDNA codec on its first call: about 25 ms of a worker's first round), a name
    resolved."""
    try:
        return socket.inet_pton(socket.AF_INET, host)
    except OSError:
        return socket.inet_aton(socket.gethostbyname(host))


_batches: dict[tuple[int, bool], _Batch] = {}  # by (socket fd, send?)


def _batch(sock: socket.socket, send: bool) -> _Batch:
    key = (sock.fileno(), send)
    b = _batches.get(key)
    if b is None:
        b = _batches[key] = _Batch(send)
    return b


def send_many(sock: socket.socket, pkts: list[InaPacket], dest: tuple[str, int]) -> int:
    """Send every packet to ``dest``, ``BATCH`` per ``sendmmsg``; a datagram the kernel
    refuses (full send buffer) is lost, as with `send`.  Returns the datagrams sent."""
    if _sendmmsg is None or len(pkts) <= 1 or sock.family != socket.AF_INET:
        for p in pkts:
            send(sock, p, dest)
        return len(pkts)
    b = _batch(sock, True)
    b.aim(dest)
    view, iov, lens = b.view, b.iov, b.lens
    fd = sock.fileno()
    sent = 0
    for i in range(0, len(pkts), BATCH):
        chunk = pkts[i:i + BATCH]
        for k, p in enumerate(chunk):
            data = encode_payload(p)
            n = len(data)
            view[k * _SLOT:k * _SLOT + n] = data
            if lens[k] != n:
                iov[k].len = lens[k] = n
        done = 0
        while done < len(chunk):
            r = _sendmmsg(fd, b.addr + done * _MM, len(chunk) - done, _DONTWAIT)
            if r <= 0:
                if r < 0 and ctypes.get_errno() == errno.EINTR:
                    continue
                done += 1  # refused: lost, retransmission recovers it
            else:
                done += r
                sent += r
    return sent


def receive_many(sock: socket.socket) -> list[InaPacket | None]:
    """Every waiting datagram (up to ``BATCH``) decoded, ``None`` for a malformed one; an
    empty list when none waits (never blocks).  Fewer than ``BATCH``: none was left
    waiting at the call (callers need not call again before their next ``select``)."""
    if _recvmmsg is None:
        out: list[InaPacket | None] = []
        for _ in range(BATCH):
            try:
                out.append(receive(sock))
            except BlockingIOError:
                break
        return out
    b = _batch(sock, False)
    n = _recvmmsg(sock.fileno(), b.addr, BATCH, _DONTWAIT, None)
    if n <= 0:
        if n < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
            raise OSError(ctypes.get_errno(), "recvmmsg failed")
        return []
    # the kernel writes every filled slot's length and flags (msg_len, msg_flags), so
    # nothing needs resetting between calls
    words = b.words
    assert words is not None  # a receive batch's
    if n == 1:  # the usual case on a paced link: one datagram a turn
        if words[_FLAGS_W] & _TRUNC:
            return [None]  # longer than any INA payload: malformed
        try:  # decode_payload copies the values out of the slot
            return [decode_payload(b.view[:words[_LEN_W]])]
        except InaDecodeError:
            return [None]
    lengths = [-1 if words[w + _FLAGS_W] & _TRUNC else words[w + _LEN_W]
               for w in range(0, n * _MMW, _MMW)]
    return decode_payloads(b.buf, lengths, _SLOT)  # copies the values out of the slots


def free_udp_ports(n: int) -> list[int]:
    """``n`` distinct UDP ports free on loopback (all held open while they are chosen), for
    a job run over loopback without a network (tests, ``bench/ina_loopback.py``)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports
