"""What ``pyswitch run`` shows of its packets when asked: BMv2's ``--pcap [DIR]`` files,
``--dump-packet-data N`` and the per-packet trace of ``--log-level trace``.

Nothing here runs unless its flag is given (zero cost when off): the pcap and packet-data
options wrap each :class:`pyswitch.ports.Port` in an :class:`ObservedPort`; the trace replaces
a switch's ``process``, parser, ingress and egress with logging wrappers and its tables (as
the generated code sees them) with :class:`TracedTable` proxies -- on that switch object
only, so the code generation and the untraced fast path stay as they are.

pcap files are named as BMv2 names them (``src/bm_sim/switch.cpp``): ``DIR/IFACE_in.pcap``
for the frames received on a port and ``DIR/IFACE_out.pcap`` for those sent, classic libpcap
format (magic ``a1b2c3d4``, version 2.4, LINKTYPE_ETHERNET, microsecond stamps), flushed
after every frame so that ``tcpdump -r`` sees a running switch's frames.
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import time
from typing import Any, BinaryIO

TRACE = 5  # below logging.DEBUG: BMv2's "trace" level
logging.addLevelName(TRACE, "TRACE")
log = logging.getLogger("pyswitch.trace")
plog = logging.getLogger("pyswitch.packets")

PCAP_MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535
_GLOBAL = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")


class PcapWriter:
    """One classic pcap file, written frame by frame (each record flushed)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.f.write(_GLOBAL.pack(PCAP_MAGIC, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
        self.f.flush()

    def write(self, frame: bytes, stamp: float | None = None) -> None:
        t = time.time() if stamp is None else stamp
        sec = int(t)
        usec = min(int((t - sec) * 1e6), 999_999)
        data = frame[:SNAPLEN]
        self.f.write(_RECORD.pack(sec, usec, len(data), len(frame)) + data)
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def pcap_paths(pcap_dir: str, ifname: str) -> tuple[str, str]:
    """BMv2's names: ``DIR/IFACE_in.pcap`` (received) and ``DIR/IFACE_out.pcap`` (sent)."""
    return (os.path.join(pcap_dir, f"{ifname}_in.pcap"),
            os.path.join(pcap_dir, f"{ifname}_out.pcap"))


def _hex(frame: bytes, n: int) -> str:
    return frame[:n].hex()


class ObservedPort:
    """A port whose received and sent frames also go to pcap files and/or the log
    (``--dump-packet-data``); everything else is the wrapped port's."""

    def __init__(self, port: Any, number: int, pcap_dir: str | None, dump_bytes: int) -> None:
        self.port = port
        self.number = number
        self.ifname = port.ifname
        self.counters = port.counters
        self.dump = dump_bytes
        self.pin = self.pout = None
        if pcap_dir is not None:
            pin, pout = pcap_paths(pcap_dir, port.ifname)
            self.pin, self.pout = PcapWriter(pin), PcapWriter(pout)

    def fileno(self) -> int:
        return self.port.fileno()

    def recv_batch(self, limit: int = 64) -> list[bytes]:
        frames = self.port.recv_batch(limit)
        if frames:
            now = time.time()
            for f in frames:
                if self.pin is not None:
                    self.pin.write(f, now)
                if self.dump:
                    plog.info("Packet data received on port %d (%d bytes): %s", self.number,
                              len(f), _hex(f, self.dump))
        return frames

    def recv(self) -> bytes | None:
        frames = self.recv_batch(1)
        return frames[0] if frames else None

    def send(self, frame: bytes) -> bool:
        ok = self.port.send(frame)
        if ok and self.pout is not None:
            self.pout.write(frame)
        if self.dump:
            plog.info("Packet data sent out of port %d (%d bytes): %s", self.number,
                      len(frame), _hex(frame, self.dump))
        return ok

    def send_batch(self, frames: list[bytes]) -> int:
        """The daemon's batched send (``Port.send_batch``), one frame at a time here so that
        each frame the port takes is written and logged as `send` does."""
        return sum(self.send(f) for f in frames)

    def close(self) -> None:
        self.port.close()
        for w in (self.pin, self.pout):
            if w is not None:
                w.close()


# ---------------------------------------------------------------- per-packet trace

class _Ctx:
    """The packet being traced (one switch processes one packet at a time, under the
    device lock)."""

    def __init__(self) -> None:
        self.ids = itertools.count()
        self.pkt = 0


def _params(e: Any) -> str:
    return ", ".join(f"{k}={v:#x}" for k, v in e.params.items())


class TracedTable:
    """What the generated code sees in place of a :class:`pyswitch.tables.Table` when the
    trace is on: ``lookup`` and ``default`` log the hit or miss and the action entry."""

    def __init__(self, table: Any, ctx: _Ctx) -> None:
        self._t = table
        self._ctx = ctx

    def _say(self, e: Any) -> Any:
        p = self._ctx.pkt
        if e.hit:
            log.log(TRACE, "[%d] Table '%s': hit with handle %d", p, self._t.name,
                    e.seq - 1)
        else:
            log.log(TRACE, "[%d] Table '%s': miss", p, self._t.name)
        log.log(TRACE, "[%d] Action entry is %s - %s", p, e.action, _params(e))
        return e

    def lookup(self, key: Any) -> Any:
        return self._say(self._t.lookup(key))

    @property
    def default(self) -> Any:
        return self._say(self._t.default)

    @property
    def exact(self) -> _TracedExact:
        """The all-exact tables' in-place dict look-up (``exact.get(key) or default``)."""
        return _TracedExact(self)


class _TracedExact:
    """``Table.exact`` as the traced switch's generated code sees it: a hit is logged here,
    a miss by `TracedTable.default`, which the generated code reads next."""

    def __init__(self, table: TracedTable) -> None:
        self._table = table

    def get(self, key: Any) -> Any:
        e = self._table._t.exact.get(key)
        return None if e is None else self._table._say(e)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._t, name)


def install_trace(sw: Any) -> Any:
    """Make switch ``sw`` log, at TRACE level, each packet's account: received port and
    size, the headers the parser extracted and its error, every table hit or miss with the
    action and its data, the egress port of each copy, and what was sent or dropped.
    Returns ``sw`` (changed in place: instance attributes shadow its methods)."""
    ctx = _Ctx()
    meta = sw.meta
    names = meta.get("hslot_types") or [f"header#{i}" for i in range(len(meta["htempl"]))]
    errors = meta["errors"]
    std = meta["std"]
    for t in sw.tables.values():
        sw.ns[t.spec["var"]] = TracedTable(t, ctx)
    parser, ingress, egress = sw._parser, sw._ingress, sw._egress

    def traced_parser(S: list, M: list, buf: bytes) -> int:
        pos = parser(S, M, buf)
        p = ctx.pkt
        valid = [names[i] for i, h in enumerate(S) if h and h[0] is True]
        log.log(TRACE, "[%d] Parser: extracted %s; %d bytes parsed, parser error %s", p,
                ", ".join(valid) or "no header", pos,
                errors[M[std["parser_error"]]] if M[std["parser_error"]] < len(errors)
                else M[std["parser_error"]])
        return pos

    def traced_ingress(S: list, M: list) -> None:
        log.log(TRACE, "[%d] Pipeline 'ingress': start", ctx.pkt)
        ingress(S, M)
        log.log(TRACE, "[%d] Pipeline 'ingress': end; egress_spec %d, mcast_grp %d", ctx.pkt,
                M[std["egress_spec"]], M[std["mcast_grp"]])

    def traced_egress(S: list, M: list) -> None:
        log.log(TRACE, "[%d] Egress port is %d (instance type %d)", ctx.pkt,
                M[std["egress_port"]], M[std["instance_type"]])
        log.log(TRACE, "[%d] Pipeline 'egress': start", ctx.pkt)
        egress(S, M)
        log.log(TRACE, "[%d] Pipeline 'egress': end", ctx.pkt)

    def wrap(process: Any) -> Any:
        def traced_process(port: int, frame: bytes) -> list[tuple[int, bytes]]:
            ctx.pkt = next(ctx.ids)
            log.log(TRACE, "[%d] Processing packet received on port %d (%d bytes)", ctx.pkt,
                    port, len(frame))
            out = process(port, frame)
            for oport, data in out:
                log.log(TRACE, "[%d] Transmitting packet of size %d out of port %d",
                        ctx.pkt, len(data), oport)
            if not out:
                log.log(TRACE, "[%d] Dropping packet (no copy left the pipeline)", ctx.pkt)
            return out
        return traced_process

    sw._parser, sw._ingress, sw._egress = traced_parser, traced_ingress, traced_egress
    # the specialised `process` holds the stages it was built with: build it again around
    # the traced ones (and again, wrapped, when a queue rate changes its steps)
    sw._wrap_process = wrap
    sw.process = wrap(sw._specialised_process(native=False))
    return sw
