"""An NDN forwarder with a persistent PIT (docs/design.md §6), as a pure state machine.

Faces are integers; packets are NDN TLV wires (python-ndn encoded, see ``workers.ndn.packets``);
time is injected (``now``, seconds of any monotone clock).  Every entry point returns the list
of ``(out_face, wire)`` to send, so the Mininet shell only moves bytes between sockets and this
object, and unit tests drive it with a fake clock.  Wires are forwarded unchanged.

Tables
    FIB      name prefix -> next-hop faces, best first (installed by the controller from
             shortest paths).  Longest-prefix match over whole components.  An Interest goes to
             the first next hop that is not its incoming face.
    PIT      (name, CanBePrefix) -> in-records {face: (nonce, expiry)}.  A new Interest creates
             the entry and is forwarded; the same name from another face while the entry is
             pending is *aggregated* (recorded, not forwarded); the same face again with a new
             nonce is a consumer retransmission and is forwarded again, at most once per
             ``retx_suppress_s``.  Any Interest arriving after the lifetime of the last one
             forwarded upstream is forwarded (the upstream entry is gone, so aggregating it
             would leave every consumer of the entry waiting for nothing).  A Data satisfies every
             matching entry (exact name, or any prefix entry with CanBePrefix), goes to all
             their unexpired in-record faces except the one it came from, and consumes them.
             Entries live until their last in-record's lifetime (InterestLifetime) passes.
    Nonces   (name, nonce) pairs seen within max(lifetime, ``dead_nonce_s``): an Interest
             repeating one is a loop (or a duplicate) and is dropped (NDN's dead-nonce list).
    CS       optional LRU content store of ``cs_capacity`` Data (0 = off).  An Interest that a
             cached Data satisfies (exact name, or prefix with CanBePrefix; MustBeFresh honours
             FreshnessPeriod) is answered from the cache and not forwarded.
    PPIT     the persistent PIT of docs/design.md §6: ``/<ps>/<train>`` -> set of downstream faces.
             * Interest ``/insert/<ps>/<train>`` from face f: the marker is stripped to get the
               key; f is added to the entry (created if absent); the Interest (unchanged, so
               every router on the path does the same) is forwarded by the FIB route of
               ``/<ps>/<train>``, i.e. toward the PS.  Inserts are never aggregated: the PS
               answers every one with a confirmation.
             * Data ``/distribute/<ps>/<train>[/...]``: the longest PPIT key that prefixes the
               stripped name gives the faces; the Data goes to all of them except its incoming
               face, and the entry is NOT consumed.
             * Interest ``/delete/<ps>/<train>`` from face f: f is removed.  The delete is
               forwarded upstream only when the entry became empty (or did not exist, so that a
               repeated delete still propagates) -- the upstream router's face toward us must
               stay while any subscriber remains below us (multicast-tree pruning).  [decision]

Counters (``Router.counters``) exist for every table and every drop reason.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field

from ndn.encoding import NonStrictName

from workers.ndn.names import DELETE, DISTRIBUTE, INSERT, name_key, strip_marker
from workers.ndn.packets import (
    TLV_DATA,
    TLV_INTEREST,
    PacketError,
    decode_data,
    decode_interest,
    packet_type,
)

Key = tuple[bytes, ...]
Out = list[tuple[int, bytes]]

DEFAULT_LIFETIME_S = 4.0


@dataclass
class RouterCounters:
    """Per-table event counts (all monotone)."""

    interests_in: int = 0
    data_in: int = 0
    malformed: int = 0
    loops_dropped: int = 0
    fib_hits: int = 0
    fib_misses: int = 0
    pit_created: int = 0
    pit_aggregated: int = 0
    pit_retransmitted: int = 0
    pit_satisfied: int = 0
    pit_expired: int = 0
    data_unsolicited: int = 0
    cs_hits: int = 0
    cs_misses: int = 0
    cs_inserts: int = 0
    cs_evictions: int = 0
    ppit_entries_created: int = 0
    ppit_inserts: int = 0
    ppit_insert_repeats: int = 0
    ppit_deletes: int = 0
    ppit_entries_removed: int = 0
    ppit_delete_ignored: int = 0
    ppit_forwards: int = 0
    ppit_copies: int = 0
    ppit_no_entry: int = 0
    interests_out: int = 0
    data_out: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class PitEntry:
    """Pending Interest: in-records face -> (nonce, expiry time)."""

    in_records: dict[int, tuple[int, float]] = field(default_factory=dict)
    last_out: float = float("-inf")  # when an Interest for it was last forwarded upstream
    out_expiry: float = float("-inf")  # when that upstream Interest expires there

    def expiry(self) -> float:
        return max((exp for _n, exp in self.in_records.values()), default=float("-inf"))

    def live_faces(self, now: float) -> set[int]:
        return {f for f, (_n, exp) in self.in_records.items() if exp > now}


@dataclass
class _CsEntry:
    wire: bytes
    fresh_until: float


class Router:
    """One NDN forwarder.  See the module docstring for the semantics of every table."""

    def __init__(self, name: str = "router", cs_capacity: int = 0,
                 dead_nonce_s: float = 6.0, retx_suppress_s: float = 0.05) -> None:
        if cs_capacity < 0:
            raise ValueError(f"router {name}: cs_capacity {cs_capacity} must be >= 0")
        self.name = name
        self.cs_capacity = cs_capacity
        self.dead_nonce_s = dead_nonce_s
        self.retx_suppress_s = retx_suppress_s
        self.fib: dict[Key, list[int]] = {}
        self.pit: dict[tuple[Key, bool], PitEntry] = {}
        self.ppit: dict[Key, set[int]] = {}
        self.cs: OrderedDict[Key, _CsEntry] = OrderedDict()
        self.nonces: dict[tuple[Key, int], float] = {}
        self.counters = RouterCounters()

    # ------------------------------------------------------------------ FIB

    def add_route(self, prefix: NonStrictName, faces: list[int]) -> None:
        """Install ``prefix`` -> next-hop ``faces`` (best first), replacing any previous route."""
        if not faces:
            raise ValueError(f"router {self.name}: route without next hops")
        self.fib[name_key(prefix)] = list(faces)

    def remove_route(self, prefix: NonStrictName) -> None:
        self.fib.pop(name_key(prefix), None)

    def lookup(self, key: Key) -> list[int] | None:
        """Longest-prefix match: next hops of the longest FIB prefix of ``key``, or None."""
        for k in range(len(key), -1, -1):
            hops = self.fib.get(key[:k])
            if hops is not None:
                return hops
        return None

    def _forward_interest(self, key: Key, in_face: int, wire: bytes) -> Out:
        hops = self.lookup(key)
        nexthop = None if hops is None else next((f for f in hops if f != in_face), None)
        if nexthop is None:
            self.counters.fib_misses += 1
            return []
        self.counters.fib_hits += 1
        self.counters.interests_out += 1
        return [(nexthop, wire)]

    # ------------------------------------------------------------------ tables (read)

    def persistent_faces(self, prefix: NonStrictName) -> set[int]:
        """Faces of the persistent entry ``prefix`` (empty set if none)."""
        return set(self.ppit.get(name_key(prefix), set()))

    def pit_faces(self, name: NonStrictName, now: float, can_be_prefix: bool = False) -> set[int]:
        """Live in-record faces of the PIT entry for ``name`` (empty set if none)."""
        entry = self.pit.get((name_key(name), can_be_prefix))
        return set() if entry is None else entry.live_faces(now)

    # ------------------------------------------------------------------ packets

    def on_packet(self, face: int, wire: bytes, now: float) -> Out:
        """Dispatch on the outer TLV type; anything else is counted malformed and dropped."""
        typ = packet_type(wire)
        if typ == TLV_INTEREST:
            return self.on_interest(face, wire, now)
        if typ == TLV_DATA:
            return self.on_data(face, wire, now)
        self.counters.malformed += 1
        return []

    def on_interest(self, face: int, wire: bytes, now: float) -> Out:
        """Process an Interest arriving on ``face``; return what to send."""
        self.counters.interests_in += 1
        try:
            interest = decode_interest(wire)
        except PacketError:
            self.counters.malformed += 1
            return []
        if interest.nonce is None:
            self.counters.malformed += 1
            return []
        lifetime = (interest.lifetime_ms if interest.lifetime_ms is not None
                    else DEFAULT_LIFETIME_S * 1000) / 1000.0
        key = name_key(interest.name)
        nkey = (key, interest.nonce)
        seen = self.nonces.get(nkey)
        if seen is not None and seen > now:
            self.counters.loops_dropped += 1
            return []
        self.nonces[nkey] = now + max(lifetime, self.dead_nonce_s)

        marker, rest = strip_marker(interest.name)
        if marker == INSERT:
            return self._insert(face, name_key(rest), wire)
        if marker == DELETE:
            return self._delete(face, name_key(rest), wire)

        if self.cs_capacity:
            hit = self._cs_lookup(key, interest.can_be_prefix, interest.must_be_fresh, now)
            if hit is not None:
                self.counters.cs_hits += 1
                self.counters.data_out += 1
                return [(face, hit)]
            self.counters.cs_misses += 1

        pkey = (key, interest.can_be_prefix)
        entry = self.pit.get(pkey)
        if entry is not None and entry.expiry() <= now:
            del self.pit[pkey]
            self.counters.pit_expired += 1
            entry = None
        if entry is not None:
            known_face = face in entry.in_records
            entry.in_records[face] = (interest.nonce, now + lifetime)
            if now >= entry.out_expiry:
                # our upstream Interest has expired there: this one must go up again
                self.counters.pit_retransmitted += 1
                return self._forward_pending(entry, key, face, wire, now, lifetime)
            if known_face and now - entry.last_out >= self.retx_suppress_s:
                # the same downstream asks again (new nonce): its Interest or our upstream
                # copy may have been lost, so forward again (at most once per suppression
                # interval, as NFD's retransmission suppression does).
                self.counters.pit_retransmitted += 1
                return self._forward_pending(entry, key, face, wire, now, lifetime)
            self.counters.pit_aggregated += 1
            return []
        out = self._forward_interest(key, face, wire)
        if out:
            self.pit[pkey] = PitEntry({face: (interest.nonce, now + lifetime)},
                                      last_out=now, out_expiry=now + lifetime)
            self.counters.pit_created += 1
        return out

    def _forward_pending(self, entry: PitEntry, key: Key, face: int, wire: bytes, now: float,
                         lifetime: float) -> Out:
        out = self._forward_interest(key, face, wire)
        if out:
            entry.last_out = now
            entry.out_expiry = now + lifetime
        return out

    def _insert(self, face: int, key: Key, wire: bytes) -> Out:
        entry = self.ppit.get(key)
        if entry is None:
            entry = self.ppit[key] = set()
            self.counters.ppit_entries_created += 1
        if face in entry:
            self.counters.ppit_insert_repeats += 1
        else:
            entry.add(face)
            self.counters.ppit_inserts += 1
        return self._forward_interest(key, face, wire)

    def _delete(self, face: int, key: Key, wire: bytes) -> Out:
        entry = self.ppit.get(key)
        if entry is not None:
            if face not in entry:
                self.counters.ppit_delete_ignored += 1
                return []
            entry.discard(face)
            self.counters.ppit_deletes += 1
            if entry:
                return []
            del self.ppit[key]
            self.counters.ppit_entries_removed += 1
        return self._forward_interest(key, face, wire)

    def on_data(self, face: int, wire: bytes, now: float) -> Out:
        """Process a Data arriving on ``face``; return what to send."""
        self.counters.data_in += 1
        try:
            data = decode_data(wire)
        except PacketError:
            self.counters.malformed += 1
            return []
        marker, rest = strip_marker(data.name)
        if marker == DISTRIBUTE:
            rkey = name_key(rest)
            for k in range(len(rkey), 0, -1):
                faces = self.ppit.get(rkey[:k])
                if faces is not None:
                    out = sorted(faces - {face})
                    self.counters.ppit_forwards += 1
                    self.counters.ppit_copies += len(out)
                    self.counters.data_out += len(out)
                    return [(f, wire) for f in out]
            self.counters.ppit_no_entry += 1
            return []

        key = name_key(data.name)
        faces: set[int] = set()
        matched = 0
        candidates = [(key, False)] + [(key[:k], True) for k in range(len(key), 0, -1)]
        for pkey in candidates:
            entry = self.pit.get(pkey)
            if entry is None:
                continue
            del self.pit[pkey]
            live = entry.live_faces(now)
            if not live:
                self.counters.pit_expired += 1
                continue
            matched += 1
            faces |= live
        if not matched:
            self.counters.data_unsolicited += 1
            return []
        self.counters.pit_satisfied += matched
        if self.cs_capacity:
            self._cs_insert(key, wire, data.freshness_ms, now)
        out = sorted(faces - {face})
        self.counters.data_out += len(out)
        return [(f, wire) for f in out]

    # ------------------------------------------------------------------ CS

    def _cs_lookup(self, key: Key, can_be_prefix: bool, must_be_fresh: bool,
                   now: float) -> bytes | None:
        if can_be_prefix:
            found = next((k for k in reversed(self.cs) if k[:len(key)] == key), None)
        else:
            found = key if key in self.cs else None
        if found is None:
            return None
        entry = self.cs[found]
        if must_be_fresh and entry.fresh_until <= now:
            return None
        self.cs.move_to_end(found)
        return entry.wire

    def _cs_insert(self, key: Key, wire: bytes, freshness_ms: int | None, now: float) -> None:
        fresh_until = now + (freshness_ms or 0) / 1000.0
        if key in self.cs:
            self.cs.move_to_end(key)
        self.cs[key] = _CsEntry(wire, fresh_until)
        self.counters.cs_inserts += 1
        while len(self.cs) > self.cs_capacity:
            self.cs.popitem(last=False)
            self.counters.cs_evictions += 1

    # ------------------------------------------------------------------ time

    def expire(self, now: float) -> int:
        """Drop PIT entries whose every in-record has expired, and stale nonces.

        Returns the number of PIT entries removed (also counted in ``pit_expired``).
        """
        dead = [k for k, e in self.pit.items() if e.expiry() <= now]
        for k in dead:
            del self.pit[k]
        self.counters.pit_expired += len(dead)
        for nk in [nk for nk, exp in self.nonces.items() if exp <= now]:
            del self.nonces[nk]
        return len(dead)

    def next_deadline(self) -> float | None:
        """Earliest time at which :meth:`expire` would remove something (None if nothing)."""
        times = [e.expiry() for e in self.pit.values()]
        times += list(self.nonces.values())
        return min(times) if times else None
