"""INA wire protocol: constants reader, Scapy layer, and the fast codec equal to it."""

from __future__ import annotations

import re
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
    FRAME_BYTES,
    HEADER_FIELDS,
    HEADER_STRUCT,
    INA,
    Flag,
    FrameTemplate,
    InaDecodeError,
    InaHeader,
    MsgType,
    decode_frame,
    decode_payload,
    encode_payload,
    grad_header,
    header_from_scapy,
)

P4_INCLUDE = Path(__file__).resolve().parents[1] / "p4src" / "include"

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
    assert header_from_scapy(back) == InaHeader(2, 3, 7, 3, 99, 2, 4, 3, 5, 0b1011)
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
headers = st.builds(
    InaHeader,
    st.sampled_from([1, 2, 3]), _u(0, 255), _u(0, 2**16 - 1), _u(0, 2**32 - 1),
    _u(0, 2**32 - 1), _u(0, 2**16 - 1), _u(0, 255), _u(0, 255), _u(0, 2**16 - 1),
    _u(0, 2**64 - 1),
)
value_lists = st.lists(_u(-(2**31), 2**31 - 1), min_size=C.K, max_size=C.K)
macs = st.lists(_u(0, 255), min_size=6, max_size=6).map(
    lambda b: ":".join(f"{x:02x}" for x in b))
ips = st.lists(_u(0, 255), min_size=4, max_size=4).map(lambda b: ".".join(map(str, b)))


def _scapy_frame(src_mac, dst_mac, src_ip, dst_ip, sport, ttl, ip_id, hdr, vals) -> bytes:
    return bytes(
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, ttl=ttl, id=ip_id)
        / UDP(sport=sport, chksum=0)
        / INA(**hdr._asdict(), values=list(vals))
    )


@settings(max_examples=150, deadline=None)
@given(hdr=headers, vals=value_lists, src_mac=macs, dst_mac=macs, src_ip=ips, dst_ip=ips,
       sport=_u(0, 2**16 - 1), ttl=_u(0, 255), ip_id=_u(0, 2**16 - 1))
def test_fast_codec_equals_scapy_byte_for_byte(
    hdr, vals, src_mac, dst_mac, src_ip, dst_ip, sport, ttl, ip_id
) -> None:
    expected = _scapy_frame(src_mac, dst_mac, src_ip, dst_ip, sport, ttl, ip_id, hdr, vals)
    tmpl = FrameTemplate(src_mac, dst_mac, src_ip, dst_ip, sport=sport, ttl=ttl, ip_id=ip_id)
    got = tmpl.encode(hdr, np.array(vals, dtype=np.int32))
    assert got == expected
    assert tmpl.encode(hdr, vals) == expected  # python ints accepted too
    # decode the Scapy-built frame with the fast decoder, and vice versa
    dec_hdr, dec_vals = decode_frame(expected)
    assert dec_hdr == hdr
    assert dec_vals.dtype == np.int32 and dec_vals.tolist() == vals
    assert header_from_scapy(Ether(got)) == hdr
    assert encode_payload(hdr, vals) == expected[42:]


def test_decode_rejects_truncated_oversized_and_bad_type_and_ignores_non_ina() -> None:
    hdr = grad_header(job_id=1, round=0, chunk_id=5, agg_id=3, fan_in=2, worker_id=9)
    assert hdr.bitmap == 1 << 9 and hdr.count == 1 and hdr.msg_type == MsgType.GRAD
    payload = encode_payload(hdr, np.arange(C.K, dtype=np.int32))
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
    hdr = grad_header(1, 0, 0, 1, 1, 0)
    with pytest.raises(ValueError, match="exactly K"):
        encode_payload(hdr, [1, 2, 3])
    with pytest.raises(ValueError, match="int32"):
        encode_payload(hdr, np.full(C.K, 2**31, dtype=np.int64))
    with pytest.raises(ValueError, match="integers"):
        encode_payload(hdr, np.zeros(C.K))
    with pytest.raises(ValueError, match="worker_id 64"):
        grad_header(1, 0, 0, 1, 1, 64)
