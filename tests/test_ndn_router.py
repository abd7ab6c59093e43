"""The NDN router tables (workers.ndn.router) driven with python-ndn-built wires and a fake clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.ndn import names as nn
from workers.ndn.packets import encode_data, encode_interest
from workers.ndn.router import Router

PS, T = "ps0", "job1"
UP = 0  # face toward the PS


def interest(name, nonce: int, lifetime_ms: int = 1000, **kw) -> bytes:
    return encode_interest(name, nonce=nonce, lifetime_ms=lifetime_ms, **kw)


def router(**kw) -> Router:
    r = Router("r", **kw)
    r.add_route("/" + PS, [UP])
    return r


def seg(name, i: int):
    return nn.with_segment(name, i)


# ----------------------------------------------------------------------------- FIB


def test_fib_longest_prefix_match_and_miss() -> None:
    r = Router("r")
    r.add_route("/ps0", [1])
    r.add_route("/ps0/job1", [5, 6])
    out = r.on_interest(9, interest("/ps0/job1/x", 1), 0.0)
    assert [f for f, _ in out] == [5]
    assert [f for f, _ in r.on_interest(9, interest("/ps0/other", 2), 0.0)] == [1]
    # the best next hop is the incoming face: the next one is used
    assert [f for f, _ in r.on_interest(5, interest("/ps0/job1/y", 3), 0.0)] == [6]
    assert r.on_interest(9, interest("/nowhere/x", 4), 0.0) == []
    assert r.counters.fib_misses == 1 and r.counters.fib_hits == 3
    assert r.pit_faces("/nowhere/x", 0.0) == set()  # no PIT entry without a route


# ----------------------------------------------------------------------------- PIT


def test_interest_aggregation_one_upstream_data_satisfies_both() -> None:
    r = router()
    name = seg(nn.fetch_name(PS, T, 3), 0)
    w1, w2 = interest(name, 11), interest(name, 22)
    assert r.on_interest(1, w1, 0.0) == [(UP, w1)]
    assert r.on_interest(2, w2, 0.01) == []  # aggregated: not forwarded again
    assert r.counters.pit_aggregated == 1 and r.counters.pit_created == 1
    assert r.pit_faces(name, 0.02) == {1, 2}
    data = encode_data(name, b"params")
    assert r.on_data(UP, data, 0.05) == [(1, data), (2, data)]
    assert r.pit == {} and r.counters.pit_satisfied == 1
    # a regular entry is consumed: the same Data again is unsolicited
    assert r.on_data(UP, data, 0.06) == []
    assert r.counters.data_unsolicited == 1


def test_consumer_retransmission_forwarded_outside_suppression_window() -> None:
    r = router(retx_suppress_s=0.05)
    name = seg(nn.fetch_name(PS, T, 3), 1)
    r.on_interest(1, interest(name, 1), 0.0)
    assert r.on_interest(1, interest(name, 2), 0.01) == []  # too soon: suppressed
    again = interest(name, 3)
    assert r.on_interest(1, again, 0.2) == [(UP, again)]
    assert r.counters.pit_retransmitted == 1 and r.counters.pit_aggregated == 1


def test_nonce_loop_suppression() -> None:
    r = router()
    name = seg(nn.fetch_name(PS, T, 1), 0)
    w = interest(name, 777)
    assert r.on_interest(1, w, 0.0) == [(UP, w)]
    assert r.on_interest(2, w, 0.001) == []  # same name+nonce from elsewhere: a loop
    assert r.counters.loops_dropped == 1 and r.pit_faces(name, 0.002) == {1}
    # once the nonce memory has expired, the same pair is accepted again
    r.expire(100.0)
    assert r.nonces == {}
    assert r.on_interest(2, w, 100.0) == [(UP, w)]


def test_pit_lifetimes_expire() -> None:
    r = router(dead_nonce_s=0.0)
    a, b = seg(nn.fetch_name(PS, T, 1), 0), seg(nn.fetch_name(PS, T, 1), 1)
    r.on_interest(1, interest(a, 1, lifetime_ms=100), 0.0)
    r.on_interest(1, interest(b, 2, lifetime_ms=300), 0.0)
    assert r.next_deadline() == 0.1
    assert r.expire(0.099) == 0 and len(r.pit) == 2
    assert r.expire(0.1) == 1 and r.counters.pit_expired == 1
    assert r.pit_faces(a, 0.1) == set() and r.pit_faces(b, 0.1) == {1}
    assert r.on_data(UP, encode_data(a, b"late"), 0.15) == []  # nobody waits for it any more
    # an entry that expired without expire() being called is not used either (lazy check)
    assert r.on_data(UP, encode_data(b, b"late"), 0.31) == []
    assert r.counters.pit_expired == 2 and r.pit == {}


def test_aggregated_interest_after_upstream_expiry_goes_up_again() -> None:
    r = router(retx_suppress_s=10.0)
    name = seg(nn.fetch_name(PS, T, 1), 0)
    r.on_interest(1, interest(name, 1, lifetime_ms=1000), 0.0)
    r.on_interest(2, interest(name, 2, lifetime_ms=1000), 0.5)  # keeps the entry alive
    w = interest(name, 3, lifetime_ms=1000)
    # at t=1.2 the upstream copy (sent at 0, 1 s lifetime) is gone: forward despite suppression
    assert r.on_interest(3, w, 1.2) == [(UP, w)]
    assert r.pit_faces(name, 1.2) == {2, 3}


def test_can_be_prefix_matching() -> None:
    r = router()
    prefix = nn.fetch_name(PS, T, 5)
    w = interest(prefix, 9, can_be_prefix=True)
    assert r.on_interest(4, w, 0.0) == [(UP, w)]
    d = encode_data(seg(prefix, 0), b"x")
    assert r.on_data(UP, d, 0.01) == [(4, d)]


# ----------------------------------------------------------------------------- persistent PIT


def test_persistent_entry_survives_data_regular_one_is_consumed() -> None:
    r = router()
    ins1, ins2 = interest(nn.insert_name(PS, T), 1), interest(nn.insert_name(PS, T), 2)
    # inserts are forwarded toward the PS unchanged (so the next router does the same)
    assert r.on_interest(1, ins1, 0.0) == [(UP, ins1)]
    assert r.on_interest(2, ins2, 0.0) == [(UP, ins2)]
    assert r.persistent_faces(nn.train_prefix(PS, T)) == {1, 2}
    assert r.counters.ppit_entries_created == 1 and r.counters.ppit_inserts == 2
    # a regular Interest for the same parameters from face 3
    fetch = seg(nn.fetch_name(PS, T, 1), 0)
    r.on_interest(3, interest(fetch, 3), 0.0)
    confirm = encode_data(nn.distribute_name(PS, T), b"")
    assert r.on_data(UP, confirm, 0.01) == [(1, confirm), (2, confirm)]
    for version in (1, 2, 3):  # every distribution is multicast: the entry is not consumed
        dist = encode_data(seg(nn.distribute_name(PS, T, version), 0), b"v%d" % version)
        assert r.on_data(UP, dist, 0.1 * version) == [(1, dist), (2, dist)]
    assert r.persistent_faces(nn.train_prefix(PS, T)) == {1, 2}
    assert r.counters.ppit_forwards == 4 and r.counters.ppit_copies == 8
    fdata = encode_data(fetch, b"v1")
    assert r.on_data(UP, fdata, 0.5) == [(3, fdata)]  # regular entry: consumed
    assert r.on_data(UP, fdata, 0.6) == []
    # lifetimes do not touch the persistent entry
    r.expire(1e6)
    assert r.persistent_faces(nn.train_prefix(PS, T)) == {1, 2}


def test_repeated_insert_is_idempotent_but_still_forwarded() -> None:
    r = router()
    r.on_interest(1, interest(nn.insert_name(PS, T), 1), 0.0)
    again = interest(nn.insert_name(PS, T), 2)
    assert r.on_interest(1, again, 0.3) == [(UP, again)]  # the PS must confirm again
    assert r.persistent_faces(nn.train_prefix(PS, T)) == {1}
    assert r.counters.ppit_insert_repeats == 1


def test_distribution_not_sent_back_on_its_incoming_face() -> None:
    r = router()
    r.on_interest(1, interest(nn.insert_name(PS, T), 1), 0.0)
    r.on_interest(2, interest(nn.insert_name(PS, T), 2), 0.0)
    d = encode_data(seg(nn.distribute_name(PS, T, 1), 0), b"p")
    assert r.on_data(1, d, 0.1) == [(2, d)]


def test_delete_removes_one_face_and_prunes_upstream_when_empty() -> None:
    r = router()
    for face in (1, 2):
        r.on_interest(face, interest(nn.insert_name(PS, T), face), 0.0)
    dist = encode_data(seg(nn.distribute_name(PS, T, 1), 0), b"p")
    d1 = interest(nn.delete_name(PS, T), 11)
    assert r.on_interest(1, d1, 1.0) == []  # face 2 still subscribed: nothing goes up
    assert r.persistent_faces(nn.train_prefix(PS, T)) == {2}
    assert r.on_data(UP, dist, 1.1) == [(2, dist)]
    assert r.on_interest(7, interest(nn.delete_name(PS, T), 12), 1.2) == []  # not a member
    assert r.counters.ppit_delete_ignored == 1
    d2 = interest(nn.delete_name(PS, T), 13)
    assert r.on_interest(2, d2, 1.3) == [(UP, d2)]  # last one: entry removed, prune upstream
    assert r.ppit == {} and r.counters.ppit_entries_removed == 1
    assert r.on_data(UP, dist, 1.4) == []
    assert r.counters.ppit_no_entry == 1 and r.counters.ppit_deletes == 2


def test_two_routers_build_the_multicast_tree() -> None:
    """gpuA on r2 face 1, gpuB on r2 face 2, gpuC on r1 face 2; r2 -> r1 via face 0/1."""
    r1, r2 = Router("r1"), Router("r2")
    r1.add_route("/ps0", [0])
    r2.add_route("/ps0", [0])
    for face, nonce in ((1, 1), (2, 2)):
        out = r2.on_interest(face, interest(nn.insert_name(PS, T), nonce), 0.0)
        assert [f for f, _ in out] == [0]
        assert [f for f, _ in r1.on_interest(1, out[0][1], 0.001)] == [0]
    r1.on_interest(2, interest(nn.insert_name(PS, T), 3), 0.0)
    assert r1.persistent_faces(nn.train_prefix(PS, T)) == {1, 2}
    assert r2.persistent_faces(nn.train_prefix(PS, T)) == {1, 2}
    dist = encode_data(seg(nn.distribute_name(PS, T, 4), 0), b"params")
    out1 = r1.on_data(0, dist, 0.1)
    assert [f for f, _ in out1] == [1, 2]  # one copy toward r2, one to gpuC
    assert [f for f, _ in r2.on_data(0, out1[0][1], 0.101)] == [1, 2]


# ----------------------------------------------------------------------------- CS


def test_content_store_lru_and_freshness() -> None:
    r = router(cs_capacity=2)
    names = [seg(nn.fetch_name(PS, T, 1), i) for i in range(3)]
    for i, name in enumerate(names):
        r.on_interest(1, interest(name, 100 + i), 0.0)
        r.on_data(UP, encode_data(name, b"%d" % i, freshness_ms=500), 0.01)
    assert r.counters.cs_inserts == 3 and r.counters.cs_evictions == 1  # names[0] evicted
    hit = r.on_interest(2, interest(names[1], 201), 0.1)
    assert len(hit) == 1 and hit[0][0] == 2 and r.counters.cs_hits == 1
    miss = r.on_interest(2, interest(names[0], 202), 0.1)
    assert [f for f, _ in miss] == [UP] and r.counters.cs_misses == 4  # 3 at first + this one
    # names[0] comes back: the least recently used entry is now names[2] (names[1] was hit)
    r.on_data(UP, encode_data(names[0], b"0", freshness_ms=500), 0.11)
    assert r.counters.cs_evictions == 2
    assert [f for f, _ in r.on_interest(4, interest(names[2], 203), 0.2)] == [UP]
    # MustBeFresh after the 500 ms freshness: not served from the cache
    stale = r.on_interest(3, interest(names[1], 204, must_be_fresh=True), 1.0)
    assert [f for f, _ in stale] == [UP]
    assert r.on_interest(5, interest(names[1], 205), 1.0)[0][0] == 5  # no MustBeFresh: hit


# ----------------------------------------------------------------------------- robustness


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 3))
def test_garbage_never_crashes_the_router(blob: bytes, face: int) -> None:
    r = router(cs_capacity=4)
    r.on_interest(1, interest(nn.insert_name(PS, T), 1), 0.0)
    for wire in (blob, b"\x05" + blob, b"\x06" + blob):
        out = r.on_packet(face, wire, 0.5)
        assert isinstance(out, list) and all(isinstance(w, bytes) for _f, w in out)
    assert r.persistent_faces(nn.train_prefix(PS, T)) == {1}


def test_malformed_counted() -> None:
    r = router()
    assert r.on_packet(1, b"\x42\x00", 0.0) == []
    assert r.on_interest(1, b"\x05\x03abc", 0.0) == []
    assert r.on_data(1, b"\x06\x01", 0.0) == []
    assert r.counters.malformed == 3
