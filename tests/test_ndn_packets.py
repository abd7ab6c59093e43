"""NDN names, packets, segmentation/reassembly and Ethernet framing (workers.ndn.names,
workers.ndn.packets), checked against python-ndn's own parser and Scapy where possible."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ndn.encoding import Component, Name, parse_data, parse_interest
from scapy.layers.l2 import Ether

from workers.ndn import names as nn
from workers.ndn.packets import (
    NDN_ETHERTYPE,
    PacketError,
    Reassembler,
    decode_data,
    decode_interest,
    encode_data,
    encode_interest,
    eth_frame,
    eth_unframe,
    n_segments,
    segment,
)

# ----------------------------------------------------------------------------- names


def test_name_scheme_uris() -> None:
    assert nn.to_uri(nn.task_name("g1", "ps0", "t")) == "/g1/ps0/t"
    assert nn.to_uri(nn.content_name("ps0", "t", "g1")) == "/ps0/t/g1"
    assert nn.to_uri(nn.insert_name("ps0", "t")) == "/insert/ps0/t"
    assert nn.to_uri(nn.delete_name("ps0", "t")) == "/delete/ps0/t"
    assert nn.to_uri(nn.distribute_name("ps0", "t")) == "/distribute/ps0/t"
    assert nn.to_uri(nn.distribute_name("ps0", "t", 7)) == "/distribute/ps0/t/v=7"
    assert nn.to_uri(nn.collect_name("g1", "ps0", "t", 3)) == "/g1/ps0/t/v=3"
    assert nn.to_uri(nn.fetch_name("ps0", "t", 3)) == "/ps0/t/v=3"
    assert nn.to_uri(nn.with_segment(nn.fetch_name("ps0", "t", 3), 12)) == "/ps0/t/v=3/seg=12"
    # the version really is NDN's version-typed component, the segment the segment-typed one
    name = nn.with_segment(nn.fetch_name("ps0", "t", 3), 12)
    assert Component.get_type(name[2]) == Component.TYPE_VERSION
    assert Component.get_type(name[3]) == Component.TYPE_SEGMENT


@pytest.mark.parametrize("name,kind,fields", [
    (nn.insert_name("ps0", "t"), nn.Kind.INSERT, {}),
    (nn.delete_name("ps0", "t"), nn.Kind.DELETE, {}),
    (nn.distribute_name("ps0", "t"), nn.Kind.CONFIRM, {}),
    (nn.with_segment(nn.distribute_name("ps0", "t", 4), 2), nn.Kind.DISTRIBUTE,
     {"version": 4, "segment": 2}),
    (nn.with_segment(nn.collect_name("g1", "ps0", "t", 4), 0), nn.Kind.COLLECT,
     {"worker": "g1", "version": 4, "segment": 0}),
    (nn.fetch_name("ps0", "t", 9), nn.Kind.FETCH, {"version": 9, "segment": None}),
])
def test_parse_kinds(name, kind, fields) -> None:
    p = nn.parse(name)
    assert p is not None and p.kind is kind and (p.ps, p.train) == ("ps0", "t")
    for k, v in fields.items():
        assert getattr(p, k) == v


def test_parse_for_disambiguates_task_and_content_by_role() -> None:
    task = nn.task_name("g1", "ps0", "t")
    content = nn.with_segment(nn.content_name("ps0", "t", "g1"), 1)
    assert nn.parse_for(task, "g1", "worker").kind is nn.Kind.TASK
    assert nn.parse_for(task, "ps0", "ps").kind is nn.Kind.TASK
    pc = nn.parse_for(content, "ps0", "ps")
    assert (pc.kind, pc.ps, pc.train, pc.worker, pc.segment) == \
        (nn.Kind.CONTENT, "ps0", "t", "g1", 1)
    assert nn.parse_for(content, "g1", "worker").kind is nn.Kind.CONTENT


def test_foreign_and_bad_names() -> None:
    assert nn.parse("/a") is None
    assert nn.parse("/insert/ps0") is None
    assert nn.parse("/distribute/ps0/t/notaversion") is None
    assert nn.parse("/a/b/c/d/e") is None
    for bad in ("", "insert", "has space", "x" * 65, "é"):
        with pytest.raises(nn.NdnNameError):
            nn.task_name(bad, "ps0", "t")
    with pytest.raises(nn.NdnNameError):
        nn.collect_name("g", "p", "t", -1)


def test_strip_marker_and_split_segment() -> None:
    marker, rest = nn.strip_marker(nn.with_segment(nn.distribute_name("p", "t", 1), 0))
    assert marker == "distribute" and nn.to_uri(rest) == "/p/t/v=1/seg=0"
    assert nn.strip_marker(nn.fetch_name("p", "t", 1))[0] is None
    base, seg = nn.split_segment(nn.with_segment("/a/b", 5))
    assert nn.to_uri(base) == "/a/b" and seg == 5
    assert nn.split_segment("/a/b") == (Name.from_str("/a/b"), None)


# ----------------------------------------------------------------------------- TLV


def test_interest_round_trip_and_python_ndn_agrees() -> None:
    wire = encode_interest(nn.insert_name("ps0", "t"), nonce=0xDEADBEEF, lifetime_ms=1500,
                           can_be_prefix=True, must_be_fresh=True)
    assert wire[0] == 0x05
    i = decode_interest(wire)
    assert nn.to_uri(i.name) == "/insert/ps0/t"
    assert (i.nonce, i.lifetime_ms, i.can_be_prefix, i.must_be_fresh) == \
        (0xDEADBEEF, 1500, True, True)
    name, param, _app, _sig = parse_interest(wire)  # python-ndn's own reader
    assert Name.to_str(name) == "/insert/ps0/t" and param.nonce == 0xDEADBEEF
    with pytest.raises(PacketError):
        encode_interest("/a", nonce=2**32)


def test_data_round_trip_digest_and_corruption() -> None:
    name = nn.with_segment(nn.distribute_name("ps0", "t", 2), 3)
    wire = encode_data(name, b"payload-bytes", final_block=7, freshness_ms=250)
    d = decode_data(wire)
    assert nn.to_uri(d.name) == "/distribute/ps0/t/v=2/seg=3"
    assert (d.content, d.final_block, d.freshness_ms, d.signed) == (b"payload-bytes", 7, 250, True)
    _n, meta, content, sig = parse_data(wire)
    assert bytes(content) == b"payload-bytes" and sig.signature_info.signature_type == 0
    # flip one content byte: the DigestSha256 no longer matches
    pos = wire.index(b"payload-bytes")
    bad = bytearray(wire)
    bad[pos] ^= 0x01
    with pytest.raises(PacketError, match="digest"):
        decode_data(bytes(bad))
    assert decode_data(bytes(bad), verify=False).content == b"qayload-bytes"
    for broken in (wire[:-5], wire[:3], b"", b"\x06\x05abc", b"\x05\x00"):
        with pytest.raises(PacketError):
            decode_data(broken)
    with pytest.raises(PacketError):
        decode_interest(wire)  # a Data is not an Interest


_VALID = [encode_interest(nn.insert_name("ps0", "t"), nonce=5),
          encode_data(nn.with_segment(nn.distribute_name("ps0", "t", 1), 0), b"abc" * 20, 0)]


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.binary(max_size=200),
    st.tuples(st.sampled_from(_VALID), st.integers(0, 10_000), st.integers(1, 255),
              st.integers(0, 120)).map(
        lambda t: (lambda b: (b.__setitem__(t[1] % len(b), b[t[1] % len(b)] ^ t[2]), b)[1])(
            bytearray(t[0]))[: len(t[0]) - t[3] % len(t[0])]),
))
def test_decoders_never_raise_anything_but_packet_error(blob: bytes) -> None:
    """Random bytes and bit-flipped / truncated valid packets: PacketError or a clean parse."""
    for fn in (decode_interest, decode_data):
        try:
            fn(bytes(blob))
        except PacketError:
            pass
    try:
        eth_unframe(bytes(14) + bytes(blob))
    except PacketError:
        pass


# ----------------------------------------------------------------------------- segments


def test_segmentation_reassembly_with_a_lost_segment_refetched() -> None:
    rng = random.Random(7)
    payload = bytes(rng.getrandbits(8) for _ in range(5000))
    base = nn.distribute_name("ps0", "t", 1)
    segs = segment(base, payload, seg_size=1200)
    assert len(segs) == n_segments(5000, 1200) == 5  # ceil(5000/1200)
    parsed = [decode_data(w) for w in segs]
    assert [nn.split_segment(d.name)[1] for d in parsed] == [0, 1, 2, 3, 4]
    assert {d.final_block for d in parsed} == {4}
    assert [len(d.content) for d in parsed] == [1200, 1200, 1200, 1200, 200]

    r = Reassembler()
    assert r.missing() == [0] and not r.complete
    order = [4, 0, 3, 1]  # segment 2 is lost, the rest arrive out of order
    for i in order:
        assert r.add_data(parsed[i])
    assert r.expected == 5 and r.missing() == [2] and not r.complete
    with pytest.raises(PacketError, match=r"\[2\]"):
        r.payload()
    assert not r.add_data(parsed[0]) and r.duplicates == 1
    # re-fetch the missing one (a new Data of the same segment from the producer)
    refetched = decode_data(segment(base, payload, seg_size=1200)[2])
    assert r.add_data(refetched)
    assert r.complete and r.missing() == [] and r.payload() == payload


def test_segmentation_edges() -> None:
    base = nn.fetch_name("p", "t", 0)
    one = segment(base, b"", seg_size=100)
    assert len(one) == 1 and decode_data(one[0]).content == b""
    assert decode_data(one[0]).final_block == 0
    exact = segment(base, b"x" * 300, seg_size=100)
    assert len(exact) == 3
    with pytest.raises(PacketError, match="MTU"):
        segment(base, b"x" * 3000, seg_size=2000, mtu=1500)
    r = Reassembler(expected=3)
    assert not r.add(5, b"", None) and r.rejected == 1  # beyond the count
    assert not r.add(0, b"", 9) and r.rejected == 2  # FinalBlockId contradicts the count


# ----------------------------------------------------------------------------- Ethernet


def test_ethernet_framing() -> None:
    wire = encode_interest("/ps0/t", nonce=1)
    frame = eth_frame("02:00:00:00:00:01", bytes.fromhex("020000000002"), wire)
    assert len(frame) == 60  # padded to the Ethernet minimum
    assert frame[12:14] == b"\x86\x24" and NDN_ETHERTYPE == 0x8624
    eth = Ether(frame)  # Scapy reads the same header
    assert eth.type == 0x8624 and eth.dst == "02:00:00:00:00:01" and eth.src == "02:00:00:00:00:02"
    dst, src, back = eth_unframe(frame)
    assert back == wire and dst == bytes.fromhex("020000000001")
    big = encode_data("/a", b"z" * 1400)
    assert eth_unframe(eth_frame(b"\1" * 6, b"\2" * 6, big))[2] == big
    with pytest.raises(PacketError, match="ethertype"):
        eth_unframe(frame[:12] + b"\x08\x00" + frame[14:])
    with pytest.raises(PacketError, match="overruns"):
        eth_unframe(eth_frame(b"\1" * 6, b"\2" * 6, big)[:200])
    with pytest.raises(PacketError, match="MTU"):
        eth_frame(b"\1" * 6, b"\2" * 6, b"\x06" + bytes(1600))
    with pytest.raises(PacketError):
        eth_frame("zz", b"\2" * 6, wire)
