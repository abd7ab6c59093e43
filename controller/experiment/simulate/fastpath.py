"""A forwarding-only switch's shortcut: what ``ina.p4`` does to a well-formed INA frame at a
switch with ``agg_enabled = 0``, computed from the same rules in a few dictionary look-ups
(docs/simulate.md, "Speed").

A switch outside the plan's deployment set never aggregates: ``ina.p4`` validates a
GRAD/PARTIAL/RESULT (admission), routes a GRAD/PARTIAL by ``agg_id`` over the ECMP group
``crc32(chunk_id ++ switch_id) mod size``, multicasts a RESULT to its job's group (no copy
back out of its ingress port, an optional per-port destination rewrite), zeroes the UDP
checksum and recomputes the IPv4 one.  Nothing of this touches a register, and the 128
bytes of values are carried unchanged.  :class:`FastForwarder` does exactly that for the
frames it recognizes, keeping pyswitch's per-port and drop counters and the program's
``dropped_echo`` counter as the program would, and hands every other frame (plain IPv4,
anything malformed, a non-member, a missing route, a frame addressed to this switch, a
frame that would be dropped for any reason but an echo) to the real program.  That the two
give the same (port, bytes) and counters for GRAD, PARTIAL, RESULT, PS and other traffic is
tested in ``tests/test_simulate.py``.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from controller.dataplane.deploy import ING, SwitchRules
from controller.experiment.simulate.network import rule_value
from pyswitch.hashes import csum16
from workers.ina.constants import K

__all__ = ["FastForwarder", "forwarder"]

_FRAME_LEN = 14 + 20 + 8 + 26 + 4 * K  # ethernet, IPv4, UDP, ina_h, ina_values_h
_UDP_LEN = 8 + 26 + 4 * K
_INA_PORT = 18000  # INA_UDP_PORT (p4src/include/constants.p4)
# ethertype, version|ihl, ttl, protocol, IPv4 checksum, UDP dst port, UDP length, msg_type,
# job_id, agg_id, count, worker_id, bitmap (p4src/include/headers.p4)
_FIELDS = struct.Struct("!12xHB7xBBH8x2xHH2xBxH4x4xHxBHQ")
_GRAD, _PARTIAL, _RESULT = 1, 2, 3
_MAX_WORKERS = 64


class FastForwarder:
    """``process(port, frame)`` of a switch with ``agg_enabled = 0`` (module docstring);
    ``switch`` is its pyswitch, loaded with ``rules``, which runs whatever is not
    recognized."""

    def __init__(self, switch: Any, rules: SwitchRules) -> None:
        self.switch = switch
        self.slow = switch.process
        self.stats = switch.stats
        self.switch_id = int(rules.default.params["switch_id"])
        self._sid = self.switch_id.to_bytes(2, "big")
        self.fabric: set[int] = set()
        self.jobs: dict[int, tuple[int, int]] = {}  # job_id -> (full_mask, mcast_grp)
        self.members: set[tuple[int, int, int]] = set()  # (job_id, worker_id, port)
        self.ina_route: dict[int, tuple[int, int] | None] = {}  # agg_id -> group | to PS
        self.ps_route: dict[int, tuple[int, int]] = {}  # job_id -> group
        self.nexthop: dict[int, int] = {}  # member index -> port
        self.rewrite: dict[int, bytes] = {}  # egress port -> dst MAC (6 B) + dst IP (4 B)
        for e in rules.entries:
            t, m, p = e.table, e.match, e.params
            if t == ING + "port_config":
                self.fabric.add(m["standard_metadata.ingress_port"])
            elif t == ING + "job_table":
                self.jobs[m["hdr.ina.job_id"]] = (p["full_mask"], p["mcast_grp"])
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
                    rule_value(p["dstAddr"]).to_bytes(6, "big")
                    + rule_value(p["ip"]).to_bytes(4, "big"))
        self.mcast: dict[int, list[int]] = {g: list(ps) for g, ps in rules.mcast_groups.items()}
        echo = switch.counters.get("MyEgress.dropped_echo")
        self._echo = (echo[0], echo[1]) if echo else None
        self.fast = 0  # frames forwarded without running the program

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """The program's outputs for ``frame`` arriving on ``port``."""
        if len(frame) != _FRAME_LEN:
            return self.slow(port, frame)
        (etype, ver_ihl, ttl, proto, hc, dport, ulen, mt, job_id, agg_id, count, worker,
         bitmap) = _FIELDS.unpack_from(frame)
        # MyVerifyChecksum: the sum over the 20 header bytes folds to 0xFFFF exactly when
        # the stored checksum equals the computed one, except a stored 0xFFFF for a
        # computed 0 (pyswitch flags that one: left to the program)
        if (etype != 0x0800 or ver_ihl != 0x45 or proto != 17 or dport != _INA_PORT
                or ulen != _UDP_LEN or hc == 0xFFFF or csum16(frame[14:34])):
            return self.slow(port, frame)
        if mt == _GRAD:
            if count != 1 or worker >= _MAX_WORKERS or bitmap != 1 << worker:
                return self.slow(port, frame)
        elif mt == _PARTIAL:
            if count == 0 or bitmap == 0:
                return self.slow(port, frame)
        elif mt != _RESULT:
            return self.slow(port, frame)
        if port not in self.fabric and (mt != _GRAD
                                        or (job_id, worker, port) not in self.members):
            return self.slow(port, frame)
        job = self.jobs.get(job_id)
        if mt == _RESULT:
            if job is None or not job[1] or not self.mcast.get(job[1]):
                return self.slow(port, frame)
            return self._multicast(port, frame, self.mcast[job[1]])
        if job is not None and bitmap & ~job[0]:
            return self.slow(port, frame)
        if self.switch_id and agg_id == self.switch_id:
            return self.slow(port, frame)
        group = self.ps_route.get(job_id) if agg_id == 0 else self.ina_route.get(agg_id, ())
        if group is None:  # route_to_ps
            group = self.ps_route.get(job_id)
        if not group or not group[1]:
            return self.slow(port, frame)
        base, size = group
        out_port = self.nexthop.get((base + zlib.crc32(frame[50:54] + self._sid) % size)
                                    & 0xFFFF)
        if out_port is None:
            return self.slow(port, frame)
        # set_port: ttl - 1; MyComputeChecksum, done incrementally (RFC 1624 eq. 3: the
        # 16-bit word ttl|protocol changes; the result equals the recomputed sum since
        # the stored one was verified)
        new_ttl = (ttl - 1) & 0xFF
        x = (~hc & 0xFFFF) + (~((ttl << 8) | proto) & 0xFFFF) + ((new_ttl << 8) | proto)
        x = (x & 0xFFFF) + (x >> 16)
        x = (x & 0xFFFF) + (x >> 16)
        self.stats.rx[port] += 1
        self.stats.tx[out_port] += 1
        self.fast += 1
        return [(out_port, b"".join((frame[:22], bytes((new_ttl,)), frame[23:24],
                                     (~x & 0xFFFF).to_bytes(2, "big"), frame[26:40],
                                     b"\x00\x00", frame[42:])))]

    def _multicast(self, port: int, frame: bytes,
                   ports: list[int]) -> list[tuple[int, bytes]]:
        """A RESULT's copies (MyEgress: no echo, per-port destination rewrite)."""
        stats = self.stats
        stats.rx[port] += 1
        self.fast += 1
        plain = frame[:40] + b"\x00\x00" + frame[42:]
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
                out.append((p, plain))
            else:
                ip = frame[14:24] + frame[26:30] + rw[6:]
                s = csum16(ip).to_bytes(2, "big")
                out.append((p, rw[:6] + frame[6:24] + s + frame[26:30] + rw[6:]
                            + plain[34:]))
            stats.tx[p] += 1
        return out


def forwarder(switch: Any, rules: SwitchRules) -> Any:
    """``switch`` itself if it aggregates (``agg_enabled = 1``), else its
    :class:`FastForwarder`."""
    if int(rules.default.params.get("agg_enabled", 0)):
        return switch
    return FastForwarder(switch, rules)
