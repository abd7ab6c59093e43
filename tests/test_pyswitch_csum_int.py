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


def test_folded_field_sum_matches_packed_bytes() -> None:
    """The generated csum16 expression sums each field shifted by its offset mod 16
    (a csum16 `Digest`, `pyswitch.ir.exprs`) instead of building the whole number: same
    checksum as the bytes, on random field lists of any widths (all-zero and all-one fields included)."""
    from pyswitch.ir.exprs import Digest, Opaque, text

    rng = random.Random(11)
    for _ in range(2000):
        widths = [rng.choice((1, 3, 4, 8, 13, 16, 24, 32, 48, 64)) for _ in range(rng.randrange(1, 9))]
        values = [rng.choice((0, (1 << w) - 1, rng.randrange(1 << w))) for w in widths]
        total = sum(widths)
        nbytes = (total + 7) // 8
        number = 0
        for w, v in zip(widths, values, strict=True):
            number = (number << w) | v
        data = (number << (nbytes * 8 - total)).to_bytes(nbytes, "big")
        d = Digest("csum16", tuple(Opaque(f"f[{i}]") for i in range(len(widths))),
                   tuple(widths))
        # the generated ``_csum16i(...)``, its argument folded (`pyswitch.ir.exprs.Digest`)
        folded = eval(text(d), {"f": values, "_csum16i": lambda x: x})  # noqa: S307 - ours
        assert csum16_int(folded) == csum16(data), (widths, values)
