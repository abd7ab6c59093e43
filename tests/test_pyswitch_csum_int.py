"""The number-based csum16 of generated code (`hashes.csum16_int`) equals the byte-based
one (`hashes.csum16`, RFC 1071) on edge cases and random field lists."""

from __future__ import annotations

import random

from pyswitch.hashes import csum16, csum16_int


def _as_words(data: bytes) -> int:
    """The number the generated code builds: the bytes, padded to whole 16-bit words."""
    return int.from_bytes(data + b"\0" * (len(data) % 2), "big")


def test_edge_cases_match_rfc1071() -> None:
    for data in (b"", b"\0", b"\0\0\0\0", b"\xff\xff", b"\xff\xff\xff\xff", b"\x01",
                 b"\xff\xfe\x00\x01", b"\x80\x00\x80\x00", bytes(range(20))):
        assert csum16_int(_as_words(data)) == csum16(data), data


def test_ipv4_header_known_value() -> None:
    # the classic example header (checksum field zeroed): checksum 0xb861
    hdr = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert csum16_int(_as_words(hdr)) == csum16(hdr) == 0xB861


def test_random_lists() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randrange(0, 40)
        data = bytes(rng.choice((0, 0xFF, rng.randrange(256))) for _ in range(n))
        assert csum16_int(_as_words(data)) == csum16(data), data.hex()
