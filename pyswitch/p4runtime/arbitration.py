"""Primary arbitration of pyswitch's P4Runtime server: one primary controller per role.

Each StreamChannel is a :class:`Stream` with its own outgoing queue. Per role, the stream
with the highest election id is primary; every stream of a role is told when the primary
changes. The primary's answer has status OK; a backup's has ALREADY_EXISTS and the
primary's election id, as BMv2's (measured on BMv2, see docs/pyswitch-api.md); with no
primary in the role the answer is NOT_FOUND. An election id that another stream of the role
holds already is INVALID_ARGUMENT and ends the stream.

A stream's queue is anything with ``put(item)`` callable from any thread (the server's is an
asyncio queue fed through the event loop); the arbiter never blocks on it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from pyswitch.p4runtime.codec import election_int, election_pair
from pyswitch.p4runtime.ratelog import RateLimitedLog

# one line per arbitration would let a client that opens streams in a loop fill the log
log = RateLimitedLog(logging.getLogger("pyswitch.p4runtime"))


class Abort:
    """Put on a stream's queue: end the stream with this gRPC status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code, self.message = code, message


@dataclass(eq=False)
class Stream:
    """One StreamChannel: its outgoing queue (None ends it) and what it arbitrated for."""

    q: Any
    device_id: int | None = None
    role: str | None = None
    election_id: int | None = None  # None: arbitrated without an election id (never primary)
    role_msg: Any = None


class Arbiter:
    """The arbitrated streams of one device."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._streams: list[Stream] = []
        self._lock = threading.Lock()

    def _primary(self, role: str | None) -> Stream | None:
        best = None
        for s in self._streams:
            if s.role == role and s.election_id is not None:
                if best is None or s.election_id > best.election_id:
                    best = s
        return best

    def primary(self, role: str | None) -> Stream | None:
        """The primary stream of ``role`` ("" = the default role), or None."""
        with self._lock:
            return self._primary(role)

    def _reply(self, s: Stream, primary: Stream | None) -> None:
        msg = p4runtime_pb2.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = self.device_id
        if s.role_msg is not None:
            arb.role.CopyFrom(s.role_msg)
        if primary is not None:
            arb.election_id.high, arb.election_id.low = election_pair(primary.election_id)
        if primary is s:
            arb.status.code = code_pb2.OK
            arb.status.message = "is primary"
        elif primary is None:
            arb.status.code = code_pb2.NOT_FOUND
            arb.status.message = "no primary"
        else:
            arb.status.code = code_pb2.ALREADY_EXISTS
            arb.status.message = "is not primary"
        s.q.put(msg)

    def arbitrate(self, s: Stream, arb: Any) -> None:
        """Handle a MasterArbitrationUpdate received on stream ``s``."""
        if arb.device_id != self.device_id:
            s.q.put(Abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {arb.device_id}"))
            return
        role = arb.role.name if arb.HasField("role") else ""
        eid = election_int(arb.election_id) if arb.HasField("election_id") else None
        with self._lock:
            if s.role is not None and s.role != role:
                s.q.put(Abort(grpc.StatusCode.FAILED_PRECONDITION,
                              "role cannot change on a stream"))
                return
            if eid is not None and any(o is not s and o.role == role and o.election_id == eid
                                       for o in self._streams):
                s.q.put(Abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"election id {eid} is already used by another controller"))
                return
            before = self._primary(role)
            s.device_id, s.role, s.election_id = arb.device_id, role, eid
            s.role_msg = p4runtime_pb2.Role()
            if arb.HasField("role"):
                s.role_msg.CopyFrom(arb.role)
            if s not in self._streams:
                self._streams.append(s)
            after = self._primary(role)
            targets = [o for o in self._streams if o.role == role] if after is not before \
                else [s]
            for o in targets:
                self._reply(o, after)
        log.info("arbitration: role %r election id %s -> %s", role, eid,
                 "primary" if after is s else "backup")

    def drop(self, s: Stream) -> None:
        """Forget a stream that ended; tell the others of its role if the primary changed."""
        with self._lock:
            if s not in self._streams:
                return
            before = self._primary(s.role)
            self._streams.remove(s)
            after = self._primary(s.role)
            if after is not before:
                for o in self._streams:
                    if o.role == s.role:
                        self._reply(o, after)

    def is_primary(self, role: str, eid_msg: Any, has_eid: bool) -> bool:
        """Whether a request with this role and election id comes from the primary."""
        with self._lock:
            p = self._primary(role)
            return p is not None and has_eid and p.election_id == election_int(eid_msg)
