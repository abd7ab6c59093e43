"""INA wire protocol: constants reader, Scapy layer, and the fast codec equal to it."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from workers.ina import constants as C
from workers.ina.constants import ConstantsError, parse_constants
from workers.ina.wire import (
    COPY_MOD,
    FIELD_MEANINGS,
    FRAME_BYTES,
    HEADER_FIELDS,
    HEADER_NAMES,
    HEADER_STRUCT,
    NACK_PAYLOAD_BYTES,
    NO_ECHO,
    NO_WORKER,
    PREV_MOD,
    Echo,
    Flag,
    FrameTemplate,
    InaDecodeError,
    InaPacket,
    MsgType,
    decode_frame,
    decode_payload,
    encode_payload,
    is_nack,
    with_copy,
)
from workers.ina.wire_scapy import INA, from_scapy

REPO = Path(__file__).resolve().parents[1]
P4_INCLUDE = REPO / "p4src" / "include"
PROTOCOL_MD = REPO / "docs" / "protocol.md"

# ---------------------------------------------------------------- constants


def test_constants_come_from_the_p4_file() -> None:
    text = (P4_INCLUDE / "constants.p4").read_text()
    k = int(re.search(r"#define\s+INA_K\s+(\d+)", text).group(1))
    port = int(re.search(r"INA_UDP_PORT\s*=\s*(\d+)", text).group(1))
    assert (C.K, C.INA_UDP_PORT) == (k, port)
    assert C.INA_UDP_LEN == 8 + C.INA_HDR_BYTES + 4 * C.K
    assert C.MAX_WORKERS == 64  # = bitmap width, see HEADER_FIELDS
    assert {C.TYPE_GRAD, C.TYPE_PARTIAL, C.TYPE_RESULT} == {1, 2, 3}
    assert C.FLAG_RETRANSMIT | C.FLAG_FALLBACK | C.FLAG_INCOMPLETE == 7


def test_constants_reader_evaluates_and_rejects() -> None:
    got = parse_constants(
        "#ifndef G\n#define G\n#define A 0x10 /* c */\nconst bit<8> B = A * 2 + 1; // x\n"
        "/* multi\n line */ const bit<16> D = (B - 1) / 4;\n#endif\n"
    )
    assert got == {"A": 16, "B": 33, "D": 8}
    with pytest.raises(ConstantsError, match="t.p4:1: B = 256 does not fit bit<8>"):
        parse_constants("const bit<8> B = 256;", "t.p4")
    with pytest.raises(ConstantsError, match="t.p4:2: unknown name 'Z'"):
        parse_constants("#define A 1\nconst bit<8> B = Z;", "t.p4")
    with pytest.raises(ConstantsError, match="unsupported definition"):
        parse_constants("const int<8> B = 3;", "t.p4")


# ---------------------------------------------------------------- Scapy layer


def test_header_layout_is_the_documented_one() -> None:
    """Pins the layout of docs/protocol.md (HEADER_FIELDS is read off the Scapy layer)."""
    assert HEADER_FIELDS == (
        ("msg_type", 8), ("flags", 8), ("job_id", 16), ("round", 32), ("chunk_id", 32),
        ("agg_id", 16), ("fan_in", 8), ("count", 8), ("worker_id", 16), ("bitmap", 64),
    )
    assert HEADER_STRUCT.format == "!BBHIIHBBHQ"
    assert sum(w for _, w in HEADER_FIELDS) == 8 * C.INA_HDR_BYTES
    assert dict(HEADER_FIELDS)["bitmap"] == C.MAX_WORKERS
    assert INA.fields_desc[-1].name == "values"


def test_scapy_layer_bound_to_udp_port_and_roundtrips() -> None:
    vals = [(-1) ** i * i * 1000 for i in range(C.K)]
    pkt = (
        Ether() / IP(src="10.0.0.1", dst="10.0.0.9") / UDP(sport=1234, chksum=0)
        / INA(msg_type=MsgType.PARTIAL, flags=Flag.FALLBACK | Flag.RETRANSMIT, job_id=7,
              round=3, chunk_id=99, agg_id=2, fan_in=4, count=3, worker_id=5,
              bitmap=0b1011, values=vals)
    )
    raw = bytes(pkt)
    assert len(raw) == FRAME_BYTES
    assert pkt[UDP].dport == C.INA_UDP_PORT
    back = Ether(raw)
    assert back.haslayer(INA)
    assert back[INA].values == vals
    assert from_scapy(back) == InaPacket(2, 3, 7, 3, 99, 2, 4, 3, 5, 0b1011, vals)
    assert "RETRANSMIT" in str(back[INA].flags) and "FALLBACK" in str(back[INA].flags)


def test_scapy_dissects_by_destination_port_like_the_switch() -> None:
    # sport 53 would make Scapy pick DNS; the INA binding must win, as in the P4 parser.
    raw = bytes(Ether() / IP() / UDP(sport=53, chksum=0) / INA(job_id=3, values=[7] * C.K))
    back = Ether(raw)
    assert back.haslayer(INA) and back[INA].job_id == 3 and back[INA].values == [7] * C.K
    # a truncated INA datagram is not dissected as INA (it ends up as raw bytes)
    short = Ether(raw[:-3])
    assert not short.haslayer(INA)
    assert bytes(short[UDP].payload) == raw[42:-3]


# ---------------------------------------------------------------- fast codec

_u = st.integers
headers = st.tuples(
    st.sampled_from([1, 2, 3]), _u(0, 255), _u(0, 2**16 - 1), _u(0, 2**32 - 1),
    _u(0, 2**32 - 1), _u(0, 2**16 - 1), _u(0, 255), _u(0, 255), _u(0, 2**16 - 1),
    _u(0, 2**64 - 1),
)
value_lists = st.lists(_u(-(2**31), 2**31 - 1), min_size=C.K, max_size=C.K)
macs = st.lists(_u(0, 255), min_size=6, max_size=6).map(
    lambda b: ":".join(f"{x:02x}" for x in b))
ips = st.lists(_u(0, 255), min_size=4, max_size=4).map(lambda b: ".".join(map(str, b)))


def _scapy_frame(src_mac, dst_mac, src_ip, dst_ip, sport, ttl, ip_id, hdr, vals) -> bytes:
    if is_nack(hdr[0], hdr[1]):
        vals = []  # a NACK is its header alone
    return bytes(
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, ttl=ttl, id=ip_id)
        / UDP(sport=sport, chksum=0)
        / INA(**dict(zip(HEADER_NAMES, hdr, strict=True)), values=list(vals))
    )


@settings(max_examples=150, deadline=None)
@given(hdr=headers, vals=value_lists, src_mac=macs, dst_mac=macs, src_ip=ips, dst_ip=ips,
       sport=_u(0, 2**16 - 1), ttl=_u(0, 255), ip_id=_u(0, 2**16 - 1))
def test_fast_codec_equals_scapy_byte_for_byte(
    hdr, vals, src_mac, dst_mac, src_ip, dst_ip, sport, ttl, ip_id
) -> None:
    expected = _scapy_frame(src_mac, dst_mac, src_ip, dst_ip, sport, ttl, ip_id, hdr, vals)
    tmpl = FrameTemplate(src_mac, dst_mac, src_ip, dst_ip, sport=sport, ttl=ttl, ip_id=ip_id)
    pkt = InaPacket(*hdr, np.array(vals, dtype=np.int32))
    got = tmpl.encode(pkt)
    assert got == expected
    assert tmpl.encode(InaPacket(*hdr, vals)) == expected  # python ints accepted too
    # decode the Scapy-built frame with the fast decoder, and vice versa
    dec = decode_frame(expected)
    assert dec.header() == hdr
    if is_nack(hdr[0], hdr[1]):  # no values on the wire: they decode as 0
        assert len(expected) == 42 + NACK_PAYLOAD_BYTES
        pkt = InaPacket(*hdr, np.zeros(C.K, dtype=np.int32))
    else:
        assert dec.values.dtype == np.int32 and dec.values.tolist() == vals
    assert dec == pkt
    assert from_scapy(Ether(got)) == pkt
    assert encode_payload(pkt) == expected[42:]


def test_decode_rejects_truncated_oversized_and_bad_type_and_ignores_non_ina() -> None:
    pkt = InaPacket.grad(job_id=1, round=0, chunk_id=5, agg_id=3, fan_in=2, worker_id=9,
                         values=np.arange(C.K, dtype=np.int32))
    assert pkt.bitmap == 1 << 9 and pkt.count == 1 and pkt.msg_type == MsgType.GRAD
    payload = encode_payload(pkt)
    with pytest.raises(InaDecodeError, match=f"{len(payload) - 1} bytes, expected"):
        decode_payload(payload[:-1])
    # longer than an INA payload: the switch drops it by its UDP length, so do the hosts
    with pytest.raises(InaDecodeError, match=f"{len(payload) + 4} bytes, expected"):
        decode_payload(payload + b"\0" * 4)
    bad = bytes([9]) + payload[1:]
    with pytest.raises(InaDecodeError, match="msg_type 9"):
        decode_payload(bad)
    other = bytes(Ether() / IP() / UDP(dport=53) / Raw(b"x" * 200))
    assert decode_frame(other) is None
    with_opts = bytes(Ether() / IP(options=b"\x01\x01\x01\x01") / UDP(chksum=0) / INA())
    assert decode_frame(with_opts) is None  # the P4 parser only takes IHL=5 as INA


def test_encode_rejects_wrong_count_or_range() -> None:
    pkt = InaPacket.grad(1, 0, 0, 1, 1, 0, np.zeros(C.K, dtype=np.int32))
    with pytest.raises(ValueError, match="exactly K"):
        encode_payload(replace(pkt, values=[1, 2, 3]))
    with pytest.raises(ValueError, match="int32"):
        encode_payload(replace(pkt, values=np.full(C.K, 2**31, dtype=np.int64)))
    with pytest.raises(ValueError, match="integers"):
        encode_payload(replace(pkt, values=np.zeros(C.K)))
    with pytest.raises(ValueError, match="worker_id 64"):
        InaPacket.grad(1, 0, 0, 1, 1, 64, pkt.values)


# ---------------------------------------------------------------- one meaning per field and type


def test_record_has_exactly_the_layers_fields_in_wire_order() -> None:
    """One header form: InaPacket's fields are the Scapy layer's, values last (also checked
    at import; pinned here so a failure names the test)."""
    assert tuple(f.name for f in fields(InaPacket)) == (*HEADER_NAMES, "values")
    assert tuple(f.name for f in INA.fields_desc) == (*HEADER_NAMES, "values")
    assert tuple(FIELD_MEANINGS) == (*HEADER_NAMES, "values")


def _docs_field_table() -> list[tuple[str, ...]]:
    """Rows of the per-type field table of docs/protocol.md §1, cells stripped."""
    lines = PROTOCOL_MD.read_text().splitlines()
    start = lines.index("| offset | bits | field | GRAD | PARTIAL | RESULT |")
    assert re.fullmatch(r"(\|-+:?)+\|", lines[start + 1]), lines[start + 1]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(tuple(cell.strip() for cell in line.strip().strip("|").split("|")))
    return rows


def test_docs_field_table_is_the_python_declaration() -> None:
    """docs/protocol.md §1 says, field by field and type by type, what FIELD_MEANINGS says
    (offsets and widths from the layer)."""
    expected, bit = [], 0
    for name, width in HEADER_FIELDS:
        expected.append((str(bit // 8), str(width), f"`{name}`", *FIELD_MEANINGS[name]))
        bit += width
    expected.append((str(bit // 8), "32·K", "values", *FIELD_MEANINGS["values"]))
    assert _docs_field_table() == expected


def test_p4_header_comments_give_each_fields_meaning_per_type() -> None:
    """headers.p4 documents ina_h per message type: a field whose meaning differs between
    types names GRAD, PARTIAL and RESULT in its comment, one that does not says "all types";
    the hosts' overloads (copy number, RESULT echo) are named where they live."""
    text = (P4_INCLUDE / "headers.p4").read_text()
    body = re.search(r"header\s+ina_h\s*\{(.*?)\}", text, re.S).group(1)
    parts = re.split(r"bit<\d+>\s+(\w+)\s*;", body)
    # each field's comment as one line of words (no comment markers)
    comments = {parts[i]: " ".join(re.sub(r"/\*|\*/|\n\s*\*", " ", parts[i + 1]).split())
                for i in range(1, len(parts), 2)}
    assert tuple(comments) == HEADER_NAMES
    for name in HEADER_NAMES:
        meaning, comment = FIELD_MEANINGS[name], comments[name]
        if len(set(meaning)) == 1:
            assert "all types:" in comment, name
        else:
            for kind in ("GRAD:", "PARTIAL:", "RESULT:"):
                assert kind in comment, (name, kind)
        if meaning.result.startswith("echo:"):
            assert "RESULT: echo" in comment, name
    assert "copy number" in comments["flags"] and "copy number" in FIELD_MEANINGS["flags"].grad


def test_meaning_of_a_type() -> None:
    assert FIELD_MEANINGS["msg_type"] == (str(C.TYPE_GRAD), str(C.TYPE_PARTIAL),
                                          str(C.TYPE_RESULT))
    assert FIELD_MEANINGS["worker_id"].of(MsgType.GRAD) == "sender"
    assert FIELD_MEANINGS["worker_id"].of(C.TYPE_RESULT).startswith("echo:")
    assert "0xFFFF" in FIELD_MEANINGS["worker_id"].result and NO_WORKER == 0xFFFF
    assert not any("|" in text for m in FIELD_MEANINGS.values() for text in m)  # table-safe


def test_grad_copy_number_lives_in_flags_bits_4_to_7() -> None:
    """docs/protocol.md §6: the copy number (mod 16) in a GRAD's flags bits 4-7, next to
    the flag bits, which it never changes."""
    assert COPY_MOD == 16
    assert with_copy(Flag.RETRANSMIT, 3) == 0x31
    assert with_copy(0x31, 0) == 0x01 and with_copy(0x0F, 17) == 0x1F
    g = InaPacket.grad(4, 2, 9, 5, 3, 7, np.zeros(C.K, dtype=np.int32),
                       flags=Flag.RETRANSMIT | Flag.FALLBACK, copy=21)
    assert (g.flags, g.copy_number, g.flag_bits) == (0x53, 5, 3)  # 21 mod 16
    assert (g.job_id, g.count, g.bitmap, g.worker_id) == (4, 1, 1 << 7, 7)
    wire = encode_payload(g)
    assert wire[1] == 0x53
    flags = str(INA(wire).flags)
    assert "copy0" in flags and "copy2" in flags and "RETRANSMIT" in flags
    assert InaPacket.grad(4, 2, 9, 5, 3, 7, g.values).copy_number == 0
    with pytest.raises(ValueError, match="copy="):
        InaPacket.grad(4, 2, 9, 5, 3, 7, g.values, flags=0x31)
    with pytest.raises(ValueError, match="copy number"):
        with_copy(0, -1)


def test_result_echo_lives_in_worker_id_and_fan_in() -> None:
    """docs/protocol.md §6: a RESULT's worker_id echoes the causing packet's worker_id
    (0xFFFF: none), its fan_in 1 + that packet's copy number if it was a worker's own GRAD,
    else 0."""
    v = np.arange(C.K, dtype=np.int32)
    g = InaPacket.grad(4, 2, 9, 5, 3, 7, v, copy=5)
    part = InaPacket(C.TYPE_PARTIAL, 0, 4, 2, 9, 0, 3, 2, 6, 0b1000000, v)
    assert Echo.of(g) == Echo(7, 5) and Echo.of(part) == Echo(6, None)
    r = InaPacket.result(4, 2, 9, 0b1110, v, flags=Flag.RETRANSMIT, echo=Echo.of(g))
    assert (r.msg_type, r.flags, r.agg_id, r.count, r.bitmap) == (
        C.TYPE_RESULT, Flag.RETRANSMIT, C.AGG_ID_PS, 3, 0b1110)
    assert (r.worker_id, r.fan_in, r.echo) == (7, 6, Echo(7, 5))
    wire = encode_payload(r)
    assert wire[14] == 6 and wire[16:18] == b"\x00\x07"  # fan_in, worker_id (§1 offsets)
    r = InaPacket.result(4, 2, 9, 0b1110, v, echo=Echo.of(part))
    assert (r.worker_id, r.fan_in, r.echo) == (6, 0, Echo(6, None))
    r = InaPacket.result(4, 2, 9, 0b1110, v)
    assert (r.worker_id, r.fan_in, r.echo) == (0xFFFF, 0, NO_ECHO)
    assert decode_payload(encode_payload(r)).echo == NO_ECHO


def test_result_names_its_previous_chunk_in_agg_id() -> None:
    """docs/protocol.md §6, "Lost RESULTs": a RESULT's agg_id is 0 (names no chunk) or 1 +
    the chunk its PS completed before it, mod PREV_MOD; it survives the wire."""
    v = np.arange(C.K, dtype=np.int32)
    r = InaPacket.result(4, 2, 9, 0b1110, v)
    assert (r.agg_id, r.prev_mark) == (C.AGG_ID_PS, None)
    r = InaPacket.result(4, 2, 9, 0b1110, v, prev=0)
    assert (r.agg_id, r.prev_mark) == (1, 0)
    r = InaPacket.result(4, 2, 9, 0b1110, v, prev=PREV_MOD + 70)
    assert (r.agg_id, r.prev_mark) == (71, 70)
    assert decode_payload(encode_payload(r)).prev_mark == 70
    assert InaPacket.result(4, 2, 9, 0b1110, v, prev=PREV_MOD - 1).agg_id == PREV_MOD


def test_packet_equality_compares_header_and_values() -> None:
    v = np.arange(C.K, dtype=np.int32)
    p = InaPacket.grad(1, 0, 3, 2, 2, 1, v)
    assert p == InaPacket.grad(1, 0, 3, 2, 2, 1, v.astype(np.int64))
    assert p != replace(p, values=v + 1) and p != replace(p, chunk_id=4)
    assert p.header() == (C.TYPE_GRAD, 0, 1, 0, 3, 2, 2, 1, 1, 0b10)


def test_decode_payloads_is_decode_payload_per_slot() -> None:
    """A receive batch decoded at once (issue 42) gives what `decode_payload` gives per
    datagram: every field and value exact, None where it raises (short, long, truncated
    -1, unknown type), each packet's values its own row."""
    from workers.ina.wire import decode_payloads

    stride = 256
    pkts = [InaPacket.grad(3, 7, c, 2, 4, c, np.arange(C.K, dtype=np.int32) * (c + 1) - 2**30
                           + c) for c in range(5)]
    pkts[2] = InaPacket.result(3, 7, 2, 0b1011, np.full(C.K, -5, np.int32), flags=1)
    buf = bytearray(stride * 8)
    lengths = []
    for i, p in enumerate(pkts):
        data = encode_payload(p)
        buf[i * stride:i * stride + len(data)] = data
        lengths.append(len(data))
    bad = bytearray(encode_payload(pkts[0]))
    bad[0] = 9  # unknown msg_type
    buf[5 * stride:5 * stride + len(bad)] = bad
    lengths += [len(bad), 10, -1]  # bad type, too short, truncated
    got = decode_payloads(buf, lengths, stride)
    assert got[:5] == pkts and got[5:] == [None, None, None]
    for i, p in enumerate(got[:5]):
        assert p == decode_payload(bytes(buf[i * stride:i * stride + lengths[i]]))
        assert p.values.dtype == np.int32 and p.values.shape == (C.K,)
    got[0].values[0] = 1  # rows of one array, apart: another packet keeps its values
    assert got[1] == pkts[1]
    assert decode_payloads(buf, [], stride) == []


def test_a_nack_travels_as_its_header_alone() -> None:
    """A NACK (a RESULT flagged INCOMPLETE) is encoded without values, by the payload
    codec, the frame template (IPv4 and UDP lengths of the short payload, a valid IPv4
    checksum) and Scapy alike, and decodes with values 0, one datagram or a batch; a
    header-long payload that is not a NACK is refused."""
    from workers.ina.wire import decode_payloads, ipv4_checksum

    nack = InaPacket.result(2, 5, 9, 0b0110, np.zeros(C.K, np.int32),
                            flags=Flag.INCOMPLETE | Flag.RETRANSMIT)
    data = encode_payload(nack)
    assert len(data) == NACK_PAYLOAD_BYTES == C.INA_HDR_BYTES
    assert decode_payload(data) == nack
    frame = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2",
                          dport=C.INA_UDP_PORT + 1).encode(nack)
    assert len(frame) == 42 + NACK_PAYLOAD_BYTES
    assert int.from_bytes(frame[16:18], "big") == 20 + 8 + NACK_PAYLOAD_BYTES  # IPv4 length
    assert int.from_bytes(frame[38:40], "big") == 8 + NACK_PAYLOAD_BYTES  # UDP length
    assert ipv4_checksum(frame[14:34]) == 0  # the checksum over the header verifies
    assert decode_frame(frame, C.INA_UDP_PORT + 1) == nack
    scapy = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
                  / IP(src="10.0.0.1", dst="10.0.0.2", ttl=64, id=0)
                  / UDP(sport=C.INA_UDP_PORT, dport=C.INA_UDP_PORT, chksum=0)
                  / INA(**dict(zip(HEADER_NAMES, nack.header(), strict=True)), values=[]))
    assert scapy[42:] == data and from_scapy(Ether(scapy)) == nack
    result = InaPacket.result(2, 5, 9, 0b0110, np.arange(C.K, dtype=np.int32))
    with pytest.raises(InaDecodeError, match="not a NACK"):
        decode_payload(encode_payload(result)[:NACK_PAYLOAD_BYTES])
    stride = 256
    buf = bytearray(stride * 3)
    for i, p in enumerate((nack, result)):
        buf[i * stride:i * stride + len(encode_payload(p))] = encode_payload(p)
    buf[2 * stride:2 * stride + NACK_PAYLOAD_BYTES] = encode_payload(result)[:NACK_PAYLOAD_BYTES]
    got = decode_payloads(buf, [NACK_PAYLOAD_BYTES, len(encode_payload(result)),
                                NACK_PAYLOAD_BYTES], stride)
    assert got == [nack, result, None]
    assert got[0].values.tolist() == [0] * C.K


def test_fast_constructors_give_frozen_packets() -> None:
    """`InaPacket.grad` / `.result` / `decode_payload` skip the frozen dataclass's
    ``__init__`` (issue 42): what they make is still an InaPacket that refuses writes."""
    import dataclasses

    g = InaPacket.grad(1, 2, 3, 4, 5, 6, np.zeros(C.K, np.int32), copy=2)
    r = InaPacket.result(1, 2, 3, 0b11, np.zeros(C.K, np.int32))
    d = decode_payload(encode_payload(g))
    for p in (g, r, d):
        assert type(p) is InaPacket
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.flags = 0  # type: ignore[misc]
    assert d == g and g.copy_number == 2 and dataclasses.replace(g, chunk_id=9).chunk_id == 9
