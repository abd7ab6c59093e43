"""Ethernet ports on Linux interfaces through AF_PACKET raw sockets.

What makes frames cross a pyswitch port intact (as they cross BMv2, which uses libpcap):

* **VLAN tags.** On veths (and most NICs) the kernel strips the 802.1Q tag of a received
  frame into packet metadata. With ``PACKET_AUXDATA`` enabled every received frame carries a
  ``tpacket_auxdata`` control message; when its status has ``TP_STATUS_VLAN_VALID`` we put the
  tag back (TPID from ``tp_vlan_tpid`` when ``TP_STATUS_VLAN_TPID_VALID``, else 0x8100) right
  after the two MAC addresses — exactly what libpcap does.
* **No echo.** A packet socket also sees the frames sent on the interface (by us or anyone).
  ``PACKET_IGNORE_OUTGOING`` (Linux ≥ 4.20) stops that in the kernel; in addition every frame
  whose ``sll_pkttype`` is ``PACKET_OUTGOING`` is discarded, so a switch never forwards back
  what it transmitted.
* **Only this interface.** The socket is created with protocol 0 (receives nothing) and then
  bound to the interface with ``ETH_P_ALL``, so no frame of another interface slips in
  before the bind.

**Batches.** A busy port moves many frames per system call: ``recvmmsg`` fills up to
``BATCH`` slots of one anonymous mapping (each ``MAX_FRAME`` bytes long, as one ``recvmsg``
would take; pages the kernel never writes cost no memory) with the frames, their
``sockaddr_ll`` (for ``sll_pkttype``) and their auxdata, and ``sendmmsg`` sends the frames a
batch produced for a port in one call (called through ctypes; where libc lacks them, one
``recvmsg``/``send`` per frame as before).  Every check above applies to each frame of a batch.
Where pyswitch's native path can build it (``pyswitch/native/portio.c``; ``PYSWITCH_NATIVE``),
the same batches are taken apart and filled in C, without a Python statement per frame;
`Port.path` says which loop runs.

The interface is put in promiscuous mode through ``PACKET_ADD_MEMBERSHIP`` (dropped
automatically when the socket closes).

Hosts attached to a switch must not use transmit checksum offload: a frame that crosses a
veth with ``CHECKSUM_PARTIAL`` carries an incomplete L4 checksum, and a raw-socket switch
sends it on unchanged (BMv2 has the same issue; Mininet P4 setups run ``ethtool -K ... tx
off``). :func:`set_tx_checksum_offload` does that without the ethtool binary.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import socket
import struct
import sys
from dataclasses import dataclass, fields
from typing import Any

from pyswitch import native
from pyswitch.mmsg import IoVec as _IoVec
from pyswitch.mmsg import MMsgHdr as _MMsgHdr
from pyswitch.mmsg import MsgHdr as _MsgHdr
from pyswitch.mmsg import recvmmsg as _recvmmsg
from pyswitch.mmsg import sendmmsg as _sendmmsg

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_AUXDATA = 8
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
_AUXDATA = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata
_ANC_SIZE = socket.CMSG_SPACE(_AUXDATA.size)
MAX_FRAME = 65536 + 64
_MSG_TRUNC = int(socket.MSG_TRUNC)
_ORDER = sys.byteorder  # auxdata is in host byte order

SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM = 0x17
ETHTOOL_GTXCSUM = 0x16


_MSG_DONTWAIT = int(socket.MSG_DONTWAIT)
BATCH = 64
_SLL_SIZE = 20  # struct sockaddr_ll
_SLL_PKTTYPE = 10


_MM = ctypes.sizeof(_MMsgHdr)
_OFF_CTLLEN = _MsgHdr.controllen.offset
_OFF_FLAGS = _MsgHdr.flags.offset
_OFF_LEN = _MMsgHdr.len.offset
_IOV = ctypes.sizeof(_IoVec)
_OFF_IOVLEN = _IoVec.len.offset
_U32 = struct.Struct("=I")
_SIZE_T = struct.Struct("@N")
_CMSG_HDR = socket.CMSG_LEN(0)  # struct cmsghdr, then the data
_CMSG = struct.Struct("@Nii")  # cmsg_len, cmsg_level, cmsg_type


class _Slots:
    """``n`` message slots for recvmmsg/sendmmsg: frame buffers in one anonymous mapping,
    sockaddr_ll and control buffers, the iovecs and the mmsghdr array (a pristine copy of
    it is written back before each receive: the kernel overwrites lengths and flags)."""

    def __init__(self, n: int, with_meta: bool) -> None:
        self.n = n
        self.data = mmap.mmap(-1, n * MAX_FRAME)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.data))
        self.names = ctypes.create_string_buffer(n * _SLL_SIZE if with_meta else 1)
        self.ctrl = ctypes.create_string_buffer(n * _ANC_SIZE if with_meta else 1)
        self.iov = (_IoVec * n)()
        self.msgs = (_MMsgHdr * n)()
        for k in range(n):
            self.iov[k].base = base + k * MAX_FRAME
            self.iov[k].len = MAX_FRAME
            h = self.msgs[k].hdr
            h.iov = ctypes.addressof(self.iov[k])
            h.iovlen = 1
            if with_meta:
                h.name = ctypes.addressof(self.names) + k * _SLL_SIZE
                h.namelen = _SLL_SIZE
                h.control = ctypes.addressof(self.ctrl) + k * _ANC_SIZE
                h.controllen = _ANC_SIZE
        self.pristine = bytes(self.msgs)
        self.addr = ctypes.addressof(self.msgs)
        self.names_v = memoryview(self.names).cast("B")
        self.ctrl_v = memoryview(self.ctrl).cast("B")

    def close(self) -> None:
        # the ctypes structures point into the mapping; drop them before closing it
        self.names_v.release()
        self.ctrl_v.release()
        del self.iov, self.msgs
        try:
            self.data.close()
        except BufferError:  # a from_buffer view still alive: the GC frees it with us
            pass


class PortError(OSError):
    """An interface cannot be opened (missing, no permission)."""


@dataclass
class PortCounters:
    """Frames/bytes moved by one port; ``tx_errors``/``rx_errors`` count send/receive calls
    the kernel refused (link down, frame too big for the MTU, ...)."""

    rx_frames: int = 0
    rx_bytes: int = 0
    tx_frames: int = 0
    tx_bytes: int = 0
    tx_errors: int = 0
    rx_errors: int = 0
    rx_truncated: int = 0
    vlan_restored: int = 0

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def restore_vlan(frame: bytes, aux: bytes) -> tuple[bytes, bool]:
    """Re-insert the 802.1Q tag described by a ``tpacket_auxdata`` blob into ``frame``.

    Returns (frame, whether a tag was inserted). The tag goes after the 12 bytes of
    destination+source MAC: TPID (16 bit) then TCI (16 bit), as on the wire.
    """
    if len(aux) < _AUXDATA.size or len(frame) < 12:
        return frame, False
    status, _len, _snap, _mac, _net, tci, tpid = _AUXDATA.unpack_from(aux)
    if not (status & TP_STATUS_VLAN_VALID or tci):
        return frame, False
    if not status & TP_STATUS_VLAN_TPID_VALID or not tpid:
        tpid = 0x8100
    return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:], True


class Port:
    """One switch port: a promiscuous, non-blocking AF_PACKET socket on ``ifname``."""

    def __init__(self, ifname: str, *, rcvbuf: int = 4 << 20, sndbuf: int = 4 << 20) -> None:
        self.ifname = ifname
        self.counters = PortCounters()
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except PermissionError as exc:
            raise PortError(exc.errno, f"cannot open a raw socket for {ifname} (need root)") \
                from None
        try:
            try:
                ifindex = socket.if_nametoindex(ifname)
            except OSError:
                raise PortError(errno.ENODEV, f"no such network interface: {ifname}") from None
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass  # old kernel: the sll_pkttype check below still filters
            for opt, force, size in ((socket.SO_RCVBUF, 33, rcvbuf),
                                     (socket.SO_SNDBUF, 32, sndbuf)):
                try:
                    sock.setsockopt(socket.SOL_SOCKET, force, size)  # SO_*BUFFORCE (root)
                except OSError:
                    sock.setsockopt(socket.SOL_SOCKET, opt, size)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            sock.bind((ifname, ETH_P_ALL))
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.ifindex = ifindex
        self._fd = sock.fileno()
        self._rx: _Slots | None = None  # made at the first batch receive / send
        self._tx: _Slots | None = None
        # the same batches in C (pyswitch/native/portio.c) where it can be built
        mod, self._io_why = native.portio()
        self._io: Any = mod.PortIO(self._fd, BATCH) if mod is not None else None

    @property
    def path(self) -> str:
        """Which loop moves the batches: ``native`` or ``python (why)``."""
        return "native" if self._io is not None else f"python ({self._io_why})"

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self) -> bytes | None:
        """One received frame (VLAN tag restored), or None when nothing is waiting."""
        frames = self.recv_batch(1)
        return frames[0] if frames else None

    def recv_batch(self, limit: int = BATCH) -> list[bytes]:
        """Up to ``limit`` waiting frames (fewer, maybe none, if the queue empties): one
        ``recvmmsg`` where libc has it, else one ``recvmsg`` per frame."""
        if self._io is not None:
            frames, nbytes, trunc, restored, err = self._io.recv(limit)
            c = self.counters
            if err:  # e.g. ENETDOWN once after the link went down: reported, never fatal
                c.rx_errors += 1
            c.rx_truncated += trunc
            c.vlan_restored += restored
            c.rx_frames += len(frames)
            c.rx_bytes += nbytes
            return frames
        if _recvmmsg is None or limit <= 1:
            return self._recv_each(limit)
        rx = self._rx
        if rx is None or rx.n < limit:
            if rx is not None:
                rx.close()
            rx = self._rx = _Slots(max(limit, BATCH), with_meta=True)
        msgs = rx.msgs
        ctypes.memmove(rx.addr, rx.pristine, limit * _MM)
        n = _recvmmsg(self._fd, rx.addr, limit, _MSG_DONTWAIT, None)
        c = self.counters
        if n <= 0:
            if n < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                # e.g. ENETDOWN once after the link went down (or the interface left):
                # reported, never fatal; frames flow again when the link comes back
                c.rx_errors += 1
            return []
        out: list[bytes] = []
        data, names, ctrl = rx.data, rx.names_v, rx.ctrl_v
        u32, size_t, cm = _U32.unpack_from, _SIZE_T.unpack_from, _CMSG.unpack_from
        nbytes = 0
        for k in range(n):
            m = k * _MM
            if names[k * _SLL_SIZE + _SLL_PKTTYPE] == PACKET_OUTGOING:
                continue
            if u32(msgs, m + _OFF_FLAGS)[0] & _MSG_TRUNC:
                c.rx_truncated += 1
                continue
            off = k * MAX_FRAME
            frame = data[off:off + u32(msgs, m + _OFF_LEN)[0]]
            if size_t(msgs, m + _OFF_CTLLEN)[0] >= _CMSG_HDR + _AUXDATA.size:
                a = k * _ANC_SIZE
                _len, level, typ = cm(ctrl, a)
                blob = ctrl[a + _CMSG_HDR:a + _CMSG_HDR + _AUXDATA.size]
                # tp_status (first u32) says whether a VLAN tag was stripped into metadata
                if (int.from_bytes(blob[:4], _ORDER) & TP_STATUS_VLAN_VALID
                        or blob[16] or blob[17]) and level == SOL_PACKET \
                        and typ == PACKET_AUXDATA:
                    frame, restored = restore_vlan(frame, blob)
                    c.vlan_restored += restored
            out.append(frame)
            nbytes += len(frame)
        c.rx_frames += len(out)
        c.rx_bytes += nbytes
        return out

    def _recv_each(self, limit: int) -> list[bytes]:
        """Up to ``limit`` waiting frames (fewer, maybe none, if the queue empties).

        This is the switch's hot path, hence the inlined checks: the auxdata status word is
        looked at directly and the tag is only rebuilt when the kernel reports one."""
        out: list[bytes] = []
        recvmsg = self.sock.recvmsg
        c = self.counters
        nbytes = 0
        for _ in range(limit):
            try:
                data, anc, flags, addr = recvmsg(MAX_FRAME, _ANC_SIZE)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # e.g. ENETDOWN once after the link went down (or the interface left):
                # reported, never fatal; frames flow again when the link comes back
                c.rx_errors += 1
                break
            if addr[2] == PACKET_OUTGOING:
                continue
            if flags & _MSG_TRUNC:
                c.rx_truncated += 1
                continue
            if anc:
                blob = anc[0][2]
                # tp_status (first u32) says whether a VLAN tag was stripped into metadata
                if (int.from_bytes(blob[:4], _ORDER) & TP_STATUS_VLAN_VALID
                        or blob[16] or blob[17]) and anc[0][1] == PACKET_AUXDATA:
                    data, restored = restore_vlan(data, blob)
                    c.vlan_restored += restored
            out.append(data)
            nbytes += len(data)
        c.rx_frames += len(out)
        c.rx_bytes += nbytes
        return out

    def send(self, frame: bytes) -> bool:
        """Transmit one frame; False (and ``tx_errors`` += 1) when the kernel refuses it."""
        try:
            self.sock.send(frame)
        except OSError:
            self.counters.tx_errors += 1
            return False
        c = self.counters
        c.tx_frames += 1
        c.tx_bytes += len(frame)
        return True

    def send_batch(self, frames: list[bytes]) -> int:
        """Transmit ``frames`` in order, as many per ``sendmmsg`` as the kernel takes;
        each frame it refuses counts in ``tx_errors`` (as `send`).  Returns frames sent."""
        if self._io is not None:
            sent, errors, nbytes = self._io.send(frames)
            c = self.counters
            c.tx_frames += sent
            c.tx_errors += errors
            c.tx_bytes += nbytes
            return sent
        if _sendmmsg is None or len(frames) == 1:
            return sum(self.send(f) for f in frames)
        tx = self._tx
        if tx is None:
            tx = self._tx = _Slots(BATCH, with_meta=False)
        c = self.counters
        data, iov, pack = tx.data, tx.iov, _SIZE_T.pack_into
        sent = 0
        for i in range(0, len(frames), tx.n):
            chunk = frames[i:i + tx.n]
            k = 0
            for f in chunk:
                ln = len(f)
                if ln > MAX_FRAME:  # cannot be a slot: sent (and refused) on its own
                    sent += self._flush(tx, k)
                    k = 0
                    sent += self.send(f)
                    continue
                off = k * MAX_FRAME
                data[off:off + ln] = f
                pack(iov, k * _IOV + _OFF_IOVLEN, ln)
                k += 1
                c.tx_bytes += ln
            sent += self._flush(tx, k)
        return sent

    def _flush(self, tx: _Slots, k: int) -> int:
        """sendmmsg the first ``k`` slots; a refused frame is counted and skipped."""
        c = self.counters
        done = sent = 0
        while done < k:
            r = _sendmmsg(self._fd, tx.addr + done * _MM, k - done, _MSG_DONTWAIT)
            if r <= 0:
                c.tx_errors += 1
                c.tx_bytes -= tx.iov[done].len
                done += 1
            else:
                sent += r
                done += r
        c.tx_frames += sent
        return sent

    def close(self) -> None:
        for slots in (self._rx, self._tx):
            if slots is not None:
                slots.close()
        self._rx = self._tx = None
        self._io = None  # its buffers are unmapped with it
        self.sock.close()

    def __enter__(self) -> Port:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ethtool_value(ifname: str, cmd: int, value: int = 0) -> int:
    buf = ctypes.create_string_buffer(struct.pack("II", cmd, value), 8)
    ifreq = struct.pack("16sP", ifname.encode(), ctypes.addressof(buf))
    ifreq += b"\0" * (40 - len(ifreq))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)
    return struct.unpack("II", buf.raw)[1]


def set_tx_checksum_offload(ifname: str, enabled: bool) -> None:
    """``ethtool -K IFNAME tx on|off`` through the SIOCETHTOOL ioctl (calling thread's netns).

    Turning transmit checksumming off also turns off TSO/GSO-dependent features, so frames
    leave the host fully formed (at most MTU-sized, correct L4 checksums).
    """
    _ethtool_value(ifname, ETHTOOL_STXCSUM, 1 if enabled else 0)


def tx_checksum_offload(ifname: str) -> bool:
    """Whether transmit checksum offload is on for ``ifname``."""
    return bool(_ethtool_value(ifname, ETHTOOL_GTXCSUM))


def main(argv: list[str] | None = None) -> int:
    """``python -m pyswitch.ports tx-off IFACE...``: disable tx checksum offload (hosts)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "tx-off":
        print("usage: python -m pyswitch.ports tx-off IFACE...", file=sys.stderr)
        return 2
    for ifname in args[1:]:
        try:
            set_tx_checksum_offload(ifname, False)
        except OSError as exc:
            print(f"pyswitch.ports: {ifname}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
