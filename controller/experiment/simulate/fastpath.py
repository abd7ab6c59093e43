"""A forwarding-only switch's shortcut: what ``ina.p4`` does to a well-formed INA frame at a
switch with ``agg_enabled = 0``, computed from the same rules in a few dictionary look-ups
(docs/simulate.md, "Speed").

A switch outside the plan's deployment set never aggregates: ``ina.p4`` validates a
GRAD/PARTIAL/RESULT (admission), routes a GRAD/PARTIAL by ``agg_id`` over the ECMP group
(its members in turn: the register ``ecmp_turn``), multicasts a RESULT to its job's group
(no copy back out of its ingress port, an optional per-port destination rewrite), zeroes
the UDP checksum and recomputes the IPv4 one.  The one register it touches is
``ecmp_turn``, the switch's own (the very list the program reads and writes, so that
frames taken by either path share the turns), and the 128 bytes of values are carried
unchanged.  :class:`FastForwarder` does exactly that for the frames it recognizes,
keeping pyswitch's per-port and drop counters and the program's ``dropped_echo`` counter
as the program would, and hands every other frame (plain IPv4,
anything malformed, a non-member, a missing route, a frame addressed to this switch, a
frame that would be dropped for any reason but an echo) to the real program.  That the two
give the same (port, bytes) and counters for GRAD, PARTIAL, RESULT, PS and other traffic is
tested in ``tests/test_simulate.py``.

It is a second reader of INA frames beside the hosts' codec, but not a second declaration:
every offset and width comes from the frame layout of :mod:`workers.ina.wire`
(``FRAME_FIELDS``: ``HEADER_FIELDS`` behind Ethernet, IPv4 and UDP, each tested equal to
p4src/include/headers.p4), the UDP port, lengths, message types and worker count from
``constants.p4`` (:mod:`workers.ina.constants`), the ECMP member from ``ecmp_member``
(:mod:`workers.ina.wire`, routing.p4's twin).
"""

from __future__ import annotations

import struct
from typing import Any

from controller.dataplane.deploy import ING, SwitchRules
from controller.experiment.simulate.network import rule_value
from pyswitch.hashes import csum16
from workers.ina.constants import (
    FLAG_INCOMPLETE,
    INA_UDP_LEN,
    INA_UDP_PORT,
    MAX_WORKERS,
    TYPE_GRAD,
    TYPE_PARTIAL,
    TYPE_RESULT,
)
from workers.ina.wire import FRAME_BITS, FRAME_BYTES, ecmp_member, frame_span

__all__ = ["FastForwarder", "forwarder"]

# What the shortcut reads of a frame, each a run of whole bytes of the INA frame's one
# declared layout (workers.ina.wire.FRAME_FIELDS): (first field, last field).
_READ = (("ethernet.etherType",) * 2, ("ipv4.version", "ipv4.ihl"), ("ipv4.ttl",) * 2,
         ("ipv4.protocol",) * 2, ("ipv4.hdrChecksum",) * 2, ("udp.dstPort",) * 2,
         ("udp.length",) * 2, ("ina.msg_type",) * 2, ("ina.job_id",) * 2,
         ("ina.agg_id",) * 2, ("ina.count",) * 2,
         ("ina.worker_id",) * 2, ("ina.bitmap",) * 2)


def _reader(spans: tuple[tuple[str, str], ...]) -> struct.Struct:
    """One struct reading each span (in frame order) as a big-endian unsigned number."""
    fmt, pos = "!", 0
    for first, last in spans:
        sl = frame_span(first, last)
        if sl.start < pos:
            raise ValueError(f"{first}: spans out of frame order")
        fmt += "x" * (sl.start - pos) + {1: "B", 2: "H", 4: "I", 8: "Q"}[sl.stop - sl.start]
        pos = sl.stop
    return struct.Struct(fmt)


_FIELDS = _reader(_READ)
_VER_IHL = 4 << FRAME_BITS["ipv4.ihl"][1] | 5  # IPv4, IHL 5: no options
_ETH_DST = frame_span("ethernet.dstAddr")
_IPV4 = frame_span("ipv4.version", "ipv4.dstAddr")
_TTL = frame_span("ipv4.ttl").start
_TTL_WORD = _TTL - (_TTL - _IPV4.start) % 2  # the header's 16-bit word holding the TTL
_IP_SUM = frame_span("ipv4.hdrChecksum")
_IP_DST = frame_span("ipv4.dstAddr")
_UDP_SUM = frame_span("udp.checksum")
_ZERO_SUM = bytes(_UDP_SUM.stop - _UDP_SUM.start)
_FLAGS = frame_span("ina.flags").start
if _IP_SUM.stop - _IP_SUM.start != 2 or not _TTL < _IP_SUM.start < _UDP_SUM.start:
    raise RuntimeError("workers.ina.wire: the shortcut writes the TTL, a 16-bit IPv4 "
                       "checksum and the UDP checksum, in that frame order")


def _with_ip_checksum(b: bytearray) -> bytes:
    """``b`` with its IPv4 checksum recomputed (MyComputeChecksum's csum16 of the header
    with the checksum field zero)."""
    b[_IP_SUM] = bytes(_IP_SUM.stop - _IP_SUM.start)
    b[_IP_SUM] = csum16(bytes(b[_IPV4])).to_bytes(_IP_SUM.stop - _IP_SUM.start, "big")
    return bytes(b)


class FastForwarder:
    """``process(port, frame)`` of a switch with ``agg_enabled = 0`` (module docstring);
    ``switch`` is its pyswitch, loaded with ``rules``, which runs whatever is not
    recognized."""

    def __init__(self, switch: Any, rules: SwitchRules) -> None:
        self.switch = switch
        self.slow = switch.process
        self.stats = switch.stats
        self.switch_id = int(rules.default.params["switch_id"])
        self.fabric: set[int] = set()
        # job_id -> (full_mask, mcast_grp, hier)
        self.jobs: dict[int, tuple[int, int, int]] = {}
        self.members: set[tuple[int, int, int]] = set()  # (job_id, worker_id, port)
        self.ina_route: dict[int, tuple[int, int] | None] = {}  # agg_id -> group | to PS
        self.ps_route: dict[int, tuple[int, int]] = {}  # job_id -> group
        self.nexthop: dict[int, int] = {}  # member index -> port
        self.rewrite: dict[int, tuple[bytes, bytes]] = {}  # egress port -> dst MAC, dst IP
        for e in rules.entries:
            t, m, p = e.table, e.match, e.params
            if t == ING + "port_config":
                self.fabric.add(m["standard_metadata.ingress_port"])
            elif t == ING + "job_table":
                self.jobs[m["hdr.ina.job_id"]] = (p["full_mask"], p["mcast_grp"], p["hier"])
            elif t == ING + "ina_member":
                self.members.add((m["hdr.ina.job_id"], m["hdr.ina.worker_id"],
                                  m["standard_metadata.ingress_port"]))
            elif t == ING + "ina_route":
                self.ina_route[m["hdr.ina.agg_id"]] = (
                    (p["base"], p["size"]) if e.action == ING + "set_group" else None)
            elif t == ING + "ps_route":
                self.ps_route[m["hdr.ina.job_id"]] = (p["base"], p["size"])
            elif t == ING + "ina_nexthop":
                self.nexthop[m["meta.member_index"]] = p["port"]
            elif t == "MyEgress.result_rewrite":
                self.rewrite[m["standard_metadata.egress_port"]] = (
                    rule_value(p["dstAddr"]).to_bytes(_ETH_DST.stop - _ETH_DST.start, "big"),
                    rule_value(p["ip"]).to_bytes(_IP_DST.stop - _IP_DST.start, "big"))
        self.mcast: dict[int, list[int]] = {g: list(ps) for g, ps in rules.mcast_groups.items()}
        echo = switch.counters.get("MyEgress.dropped_echo")
        self._echo = (echo[0], echo[1]) if echo else None
        turns = switch.registers.get(ING + "ecmp_turn")
        if turns is None:
            raise RuntimeError("ina.p4 without MyIngress.ecmp_turn")
        self.turns: list[int] = turns[0]  # the program's register: group base -> next member
        self.fast = 0  # frames forwarded without running the program

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """The program's outputs for ``frame`` arriving on ``port``."""
        if len(frame) != FRAME_BYTES:
            return self.slow(port, frame)
        (etype, ver_ihl, ttl, proto, hc, dport, ulen, mt, job_id, agg_id, count,
         worker, bitmap) = _FIELDS.unpack_from(frame)
        # MyVerifyChecksum: the sum over the 20 header bytes folds to 0xFFFF exactly when
        # the stored checksum equals the computed one, except a stored 0xFFFF for a
        # computed 0 (pyswitch flags that one: left to the program)
        if (etype != 0x0800 or ver_ihl != _VER_IHL or proto != 17 or dport != INA_UDP_PORT
                or ulen != INA_UDP_LEN or hc == 0xFFFF or csum16(frame[_IPV4])):
            return self.slow(port, frame)
        job = self.jobs.get(job_id)
        hier = job is not None and job[2]
        if mt == TYPE_GRAD:
            if count != 1 or (bitmap != 0 if hier else (worker >= MAX_WORKERS
                                                         or bitmap != 1 << worker)):
                return self.slow(port, frame)
        elif mt == TYPE_PARTIAL:
            if count == 0 or bitmap == 0:
                return self.slow(port, frame)
        elif mt != TYPE_RESULT:
            return self.slow(port, frame)
        if port not in self.fabric and (mt != TYPE_GRAD
                                        or (job_id, worker, port) not in self.members):
            return self.slow(port, frame)
        if mt == TYPE_RESULT:
            if frame[_FLAGS] & FLAG_INCOMPLETE:  # a point's NACK: ask_group, the program's
                return self.slow(port, frame)
            if job is None or not job[1] or not self.mcast.get(job[1]):
                return self.slow(port, frame)
            return self._multicast(port, frame, self.mcast[job[1]])
        if job is not None and not hier and bitmap & ~job[0]:
            return self.slow(port, frame)
        if self.switch_id and agg_id == self.switch_id:
            return self.slow(port, frame)
        group = self.ps_route.get(job_id) if agg_id == 0 else self.ina_route.get(agg_id, ())
        if group is None:  # route_to_ps
            group = self.ps_route.get(job_id)
        if not group or not group[1] or group[0] >= len(self.turns):
            return self.slow(port, frame)
        base, size = group
        member, turn = ecmp_member(self.turns[base], self.switch_id, size)
        out_port = self.nexthop.get((base + member) & 0xFFFF)
        if out_port is None:
            return self.slow(port, frame)  # the program takes its turn itself
        self.turns[base] = turn
        # set_port: ttl - 1, the UDP checksum zeroed; MyComputeChecksum, done incrementally
        # (RFC 1624 eq. 3 on the 16-bit word that holds the TTL; the result equals the
        # recomputed sum since the stored one was verified)
        new_ttl = (ttl - 1) & 0xFF
        w = _TTL_WORD
        old = (frame[w] << 8) | frame[w + 1]
        new = (new_ttl << 8) | frame[w + 1] if w == _TTL else (frame[w] << 8) | new_ttl
        x = (~hc & 0xFFFF) + (~old & 0xFFFF) + new
        x = (x & 0xFFFF) + (x >> 16)
        x = (x & 0xFFFF) + (x >> 16)
        self.stats.rx[port] += 1
        self.stats.tx[out_port] += 1
        self.fast += 1
        return [(out_port, b"".join((frame[:_TTL], bytes((new_ttl,)),
                                     frame[_TTL + 1:_IP_SUM.start],
                                     (~x & 0xFFFF).to_bytes(2, "big"),
                                     frame[_IP_SUM.stop:_UDP_SUM.start], _ZERO_SUM,
                                     frame[_UDP_SUM.stop:])))]

    def _multicast(self, port: int, frame: bytes,
                   ports: list[int]) -> list[tuple[int, bytes]]:
        """A RESULT's copies (MyEgress: no echo, per-port destination rewrite)."""
        stats = self.stats
        stats.rx[port] += 1
        self.fast += 1
        plain = bytearray(frame)
        plain[_UDP_SUM] = _ZERO_SUM
        plain_b = bytes(plain)
        out = []
        for p in ports:
            if p == port:
                if self._echo is None:  # cannot happen with ina.p4; keep the program's count
                    raise RuntimeError("ina.p4 without MyEgress.dropped_echo")
                self._echo[0][0] += 1
                self._echo[1][0] += len(frame)
                stats.dropped += 1
                continue
            rw = self.rewrite.get(p)
            if rw is None:
                out.append((p, plain_b))
            else:
                b = bytearray(plain_b)
                b[_ETH_DST], b[_IP_DST] = rw
                out.append((p, _with_ip_checksum(b)))
            stats.tx[p] += 1
        return out


def forwarder(switch: Any, rules: SwitchRules) -> Any:
    """``switch`` itself if it aggregates (``agg_enabled = 1``), else its
    :class:`FastForwarder`."""
    if int(rules.default.params.get("agg_enabled", 0)):
        return switch
    return FastForwarder(switch, rules)
