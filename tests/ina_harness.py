"""Target-neutral harness for packet tests of p4src/ina.p4.

A *target* is anything with the small `Target` API below (names are P4Info names).
Targets (the names the tests are parametrised with, see `TARGET_NAMES`):

* ``pyswitch``: `PySwitchTarget`, the program in-process on pyswitch (`Switch.process`).
* ``pyswitch-net``: `ina_net_target.NetSwitchTarget` on ``python -m pyswitch run`` with one
  veth per port, configured over P4Runtime, real frames in and out (root).
* ``bmv2``: the same network target on BMv2's ``simple_switch_grpc`` and ``p4c`` (root;
  skipped when they are not installed).

The tests are written against `InaSwitch`, which only uses the `Target` methods. Each test
gets a fresh in-process `Switch`; network targets are reset between tests by deleting the
multicast groups and clone sessions and pushing the pipeline again (`NetSwitchTarget.reset`).

The slot hash the program uses, re-implemented (BMv2's crc32 is the standard reflected
CRC-32 = zlib.crc32 over the big-endian concatenation of the fields), and its ECMP choice,
followed by `InaSwitch` as the program makes it (a register BMv2's P4Runtime server cannot
read):

    slot       = base + crc32(job_id:16 ++ round:32 ++ chunk_id:32) mod size
                 (the job's slot range; default the whole pool [0, NUM_SLOTS))
    ECMP index = (turn + switch_id) mod group_size   (into the sorted ports; the group's
                 turn, from 0, one step per GRAD/PARTIAL routed over it: wire.ecmp_member)
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from workers.ina.constants import INA_UDP_PORT, num_slots
from workers.ina.wire import (
    FrameTemplate,
    InaPacket,
    MsgType,
    decode_frame,
    ecmp_member,
    slot_index,
)

REPO = Path(__file__).resolve().parents[1]
# INSYNC_INA_P4 points the tests at another copy of the program (e.g. a mutated one).
INA_P4 = Path(os.environ.get("INSYNC_INA_P4", REPO / "p4src" / "ina.p4"))
PS_IP, PS_MAC = "10.0.0.100", "02:00:00:00:00:64"


class Target(Protocol):
    """The operations packet tests need from a P4 target."""

    def insert_entry(self, table: str, match: dict, action: str, params: dict) -> None: ...
    def set_default_action(self, table: str, action: str, params: dict) -> None: ...
    def set_multicast_group(self, group_id: int,
                            ports: list[int] | list[tuple[int, int]]) -> None:
        """Replicas: egress ports (replica id 0) or (port, replica id) pairs."""
        ...
    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]: ...
    def counter(self, name: str) -> int: ...
    def register(self, name: str, index: int) -> int | None:
        """Register cell, or None where the target cannot read registers (BMv2 P4Runtime)."""
        ...


@cache
def compiled_pyswitch_program(path: str = str(INA_P4)):
    """Compile once per test session (pyswitch's compile_p4)."""
    import pyswitch

    return pyswitch.compile_p4(path)


class PySwitchTarget:
    """`Target` on pyswitch's in-process Switch (ina.p4 as compiled by default, or
    ``program``: tests/test_switchml_p4.py runs switchml.p4 on it)."""

    def __init__(self, program: Any = None, native: bool | None = None) -> None:
        import pyswitch

        self.sw = pyswitch.Switch(program or compiled_pyswitch_program(), device_id=0, seed=0,
                                  native=native)
        if native is not None:
            assert (self.sw.path == "native") == native

    def insert_entry(self, table: str, match: dict, action: str, params: dict) -> None:
        self.sw.insert_entry(table, match, action, params)

    def set_default_action(self, table: str, action: str, params: dict) -> None:
        self.sw.set_default_action(table, action, params)

    def set_multicast_group(self, group_id: int,
                            ports: list[int] | list[tuple[int, int]]) -> None:
        self.sw.set_multicast_group(group_id, [(p, 0) if isinstance(p, int) else tuple(p)
                                               for p in ports])

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self.sw.process(port, frame)

    def counter(self, name: str) -> int:
        return self.sw.counter_read(f"MyIngress.{name}", 0)[0]

    def register(self, name: str, index: int) -> int | None:
        return self.sw.register_read(f"MyIngress.{name}", index)


def pyswitch_unavailable() -> str | None:
    """Why pyswitch cannot run ina.p4 here, or None."""
    try:
        import pyswitch
    except ImportError as exc:  # pragma: no cover - depends on the tree state
        return f"pyswitch not importable: {exc}"
    if not hasattr(pyswitch, "compile_p4") or not hasattr(pyswitch, "Switch"):
        return "pyswitch has no compile_p4/Switch yet"
    return None


TARGET_NAMES = ("pyswitch", "pyswitch-net", "bmv2")


def bmv2_unavailable() -> str | None:
    """Why the BMv2 target cannot run here, or None."""
    missing = [b for b in ("simple_switch_grpc", "p4c") if shutil.which(b) is None]
    if missing:
        return f"BMv2 target needs {', '.join(missing)} on PATH"
    return None


def target_unavailable(name: str) -> str | None:
    """Why target ``name`` (one of `TARGET_NAMES`) cannot run here, or None."""
    if name == "pyswitch":
        return pyswitch_unavailable()
    from ina_net_target import net_unavailable

    return pyswitch_unavailable() or net_unavailable(name)


# ------------------------------------------------------------------ independent hashes


def slot_of(job_id: int, round_: int, chunk_id: int, base: int = 0,
            size: int | None = None) -> int:
    return slot_index(job_id, round_, chunk_id, base, size)


def colliding_chunks(job_id: int, round_: int, chunk_id: int, how_many: int = 1) -> list[int]:
    """Other chunk ids of the same (job, round) that hash to chunk_id's slot."""
    target, out, c = slot_of(job_id, round_, chunk_id), [], chunk_id + 1
    while len(out) < how_many:
        if slot_of(job_id, round_, c) == target:
            out.append(c)
        c += 1
    return out


# ------------------------------------------------------------------ INA switch fixture


@dataclass
class Out:
    """One emitted INA frame, decoded."""

    port: int
    pkt: InaPacket
    frame: bytes

    @property
    def values(self) -> np.ndarray:
        return self.pkt.values


@dataclass
class InaSwitch:
    """A configured ina.p4 switch plus builders for INA frames.

    Port plan used by the tests: worker w sits on host port w + 1; fabric ports are
    registered with `fabric()`; ECMP groups with `route(agg_id, ports)`.
    """

    target: Target
    switch_id: int
    _next_member: int = 0
    routes: dict[int, list[int]] = field(default_factory=dict)
    groups: dict[int, dict[str, int]] = field(default_factory=dict)  # agg_id -> its group
    jobs: list[int] = field(default_factory=list)
    ps_groups: dict[int, dict[str, int]] = field(default_factory=dict)  # job -> its PS's group
    ps_ports: dict[int, list[int]] = field(default_factory=dict)  # job -> that group's ports
    retired: set[int] = field(default_factory=set)  # agg ids routed to the PS (route_to_ps)
    turns: dict[int, int] = field(default_factory=dict)  # group base -> its ecmp_turn
    predicted: dict[int, int] = field(default_factory=dict)  # group base -> last port's twin

    def configure(self, agg_enabled: bool = True) -> InaSwitch:
        self.target.set_default_action(
            "MyIngress.switch_config", "MyIngress.set_switch_config",
            {"switch_id": self.switch_id, "agg_enabled": int(agg_enabled)},
        )
        return self

    def fabric(self, *ports: int) -> None:
        for p in ports:
            self.target.insert_entry("MyIngress.port_config",
                                     {"standard_metadata.ingress_port": p},
                                     "MyIngress.set_port_fabric", {})

    def job(self, job_id: int, workers: list[int], *, is_ps_tor: bool, tor_id: int,
            ps_port: int = 0, mcast_grp: int = 0, member_ports: bool = True,
            slot_base: int = 0, slot_size: int | None = None, fan_in: int | None = None,
            ) -> None:
        """A job_table entry (slot range: the whole pool unless given) and, once a route
        to the PS exists (``route(0, ...)``), the job's ps_route toward it.  ``fan_in``:
        a hierarchical job whose aggregation point here waits for that many children
        (:meth:`child` gives their bits); None: a flat job over ``workers``' bits."""
        mask = 0
        if fan_in is None:
            for w in workers:
                mask |= 1 << w
        self.target.insert_entry(
            "MyIngress.job_table", {"hdr.ina.job_id": job_id}, "MyIngress.set_job",
            {"full_mask": mask, "is_ps_tor": int(is_ps_tor), "tor_id": tor_id,
             "ps_port": ps_port, "mcast_grp": mcast_grp, "slot_base": slot_base,
             "slot_size": num_slots() if slot_size is None else slot_size,
             "hier": int(fan_in is not None), "fan_in": fan_in or 0},
        )
        self.jobs.append(job_id)
        if 0 in self.routes and job_id not in self.ps_groups:
            self.ps_route(job_id, self.routes[0])
        if member_ports:
            for w in workers:
                self.member(job_id, w, w + 1)

    def child(self, job_id: int, msg_type: int, sender: int, index: int) -> None:
        """An ina_child entry: ``sender`` (a GRAD's worker_id, a PARTIAL's emitting switch)
        is child ``index`` of this switch in hierarchical job ``job_id``."""
        self.target.insert_entry(
            "MyIngress.ina_child",
            {"hdr.ina.job_id": job_id, "hdr.ina.msg_type": msg_type,
             "hdr.ina.worker_id": sender},
            "MyIngress.set_child", {"index": index},
        )

    def member(self, job_id: int, worker_id: int, port: int) -> None:
        self.target.insert_entry(
            "MyIngress.ina_member",
            {"hdr.ina.job_id": job_id, "hdr.ina.worker_id": worker_id,
             "standard_metadata.ingress_port": port},
            "MyIngress.member_ok", {},
        )

    def _group(self, ports: list[int]) -> dict[str, int]:
        """ina_nexthop members = sorted ports, stored from `_next_member` on."""
        members = sorted(ports)
        base = self._next_member
        for i, p in enumerate(members):
            self.target.insert_entry("MyIngress.ina_nexthop", {"meta.member_index": base + i},
                                     "MyIngress.set_port", {"port": p})
        self._next_member += len(members)
        return {"base": base, "size": len(members)}

    def route(self, agg_id: int, ports: list[int]) -> None:
        """ECMP group for agg_id.  agg_id 0 (the PS) is routed per job (ps_route): every
        job configured here, before or after, gets this group unless given its own."""
        if agg_id == 0:
            self.routes[0] = sorted(ports)
            for j in self.jobs:
                if j not in self.ps_groups:
                    self.ps_route(j, ports)
            return
        params = self._group(ports)
        self.target.insert_entry("MyIngress.ina_route", {"hdr.ina.agg_id": agg_id},
                                 "MyIngress.set_group", params)
        self.routes[agg_id] = sorted(ports)
        self.groups[agg_id] = params

    def ps_route(self, job_id: int, ports: list[int]) -> None:
        """The group toward ``job_id``'s own PS (agg_id 0 of that job)."""
        self.ps_groups[job_id] = self._group(ports)
        self.target.insert_entry("MyIngress.ps_route", {"hdr.ina.job_id": job_id},
                                 "MyIngress.set_group", self.ps_groups[job_id])
        self.ps_ports[job_id] = sorted(ports)

    def retire(self, agg_id: int) -> None:
        """A dead switch's id: routed to each job's PS (route_to_ps)."""
        self.retired.add(agg_id)
        self.target.insert_entry("MyIngress.ina_route", {"hdr.ina.agg_id": agg_id},
                                 "MyIngress.route_to_ps", {})

    def _route(self, agg_id: int, job_id: int) -> tuple[dict[str, int], list[int]]:
        """The group (set_group params) and sorted ports a GRAD/PARTIAL of ``job_id`` toward
        ``agg_id`` is routed over."""
        if agg_id == 0 or agg_id in self.retired or agg_id == self.switch_id:
            # toward the PS: agg_id 0, a retired id, or this switch's own (it does not
            # aggregate, or has no slot for the job)
            return self.ps_groups[job_id], self.ps_ports[job_id]
        return self.groups[agg_id], self.routes[agg_id]

    def expected_port(self, agg_id: int, job_id: int | None = None) -> int:
        """The port the twin (``wire.ecmp_member`` over the group's turns, advanced by every
        GRAD/PARTIAL that came out of ``send``) gave the last packet routed toward
        ``agg_id`` (of ``job_id``: the PS's group is per job; default the first job)."""
        group, _ = self._route(agg_id, self.jobs[0] if job_id is None else job_id)
        return self.predicted[group["base"]]

    # -------------------------------------------------------------- frames

    @staticmethod
    def frame(pkt: InaPacket, src_ip: str = "10.0.0.1", ttl: int = 64) -> bytes:
        tmpl = FrameTemplate("02:00:00:00:00:01", PS_MAC, src_ip, PS_IP, ttl=ttl)
        return tmpl.encode(pkt)

    def send(self, port: int, frame: bytes) -> list[Out]:
        outs = []
        for out_port, data in self.target.process(port, frame):
            dec = decode_frame(data)
            assert dec is not None, f"non-INA frame out of port {out_port}"
            outs.append(Out(out_port, dec, data))
            if dec.msg_type in (MsgType.GRAD, MsgType.PARTIAL):
                self._take_turn(dec.agg_id, dec.job_id)
        return outs

    def _take_turn(self, agg_id: int, job_id: int) -> None:
        """The twin of routing.p4's round robin for one routed GRAD/PARTIAL (a group the
        harness did not install is left to the test: ``expected_port`` then has no answer)."""
        try:
            group, ports = self._route(agg_id, job_id)
        except KeyError:
            return
        base = group["base"]
        member, self.turns[base] = ecmp_member(self.turns.get(base, 0), self.switch_id,
                                               group["size"])
        self.predicted[base] = ports[member]

    def counters(self, *names: str) -> dict[str, int]:
        return {n: self.target.counter(n) for n in names}


COUNTERS = ("aggregated", "completed", "duplicate", "reemitted", "flushed", "asked", "collision",
            "bypassed", "evicted", "release", "absorbed", "dropped_duplicate",
            "dropped_malformed", "dropped_nonmember", "dropped_not_ipv4", "dropped_noroute",
            "dropped_ipv4_noroute")

__all__ = ["COUNTERS", "INA_P4", "INA_UDP_PORT", "TARGET_NAMES", "InaSwitch", "Out",
           "PySwitchTarget", "Target", "bmv2_unavailable", "colliding_chunks", "ecmp_member",
           "pyswitch_unavailable", "slot_of", "target_unavailable"]
