"""v1model hash/checksum algorithms, bit-exact with BMv2 (vectors in tests/data/).

All take the packed bytes of a field list (fields MSB-first, zero-padded at the end to a
whole byte) and return an unsigned int:
- ``crc32``: the common CRC-32 (reflected poly 0x04C11DB7, init and final xor 0xFFFFFFFF),
  i.e. ``zlib.crc32``;
- ``crc16``: CRC-16/ARC (reflected poly 0x8005, init 0, no final xor);
- ``csum16``: ones' complement of the ones' complement sum of big-endian 16-bit words
  (a trailing odd byte padded with a zero byte), the Internet checksum (RFC 1071);
- ``identity``: the bytes as a big-endian number (kept to 64 bits, BMv2's hash width).
"""

from __future__ import annotations

import struct
import zlib

_WORDS: dict[int, struct.Struct] = {}


def _crc16_table() -> list[int]:
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
        table.append(c)
    return table


_T16 = _crc16_table()


def crc32(data: bytes) -> int:
    return zlib.crc32(data)


def crc16(data: bytes) -> int:
    c = 0
    t = _T16
    for b in data:
        c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    return c


def csum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    n = len(data) // 2
    st = _WORDS.get(n)
    if st is None:
        st = _WORDS[n] = struct.Struct(f">{n}H")
    s = sum(st.unpack(data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def csum16_int(x: int) -> int:
    """``csum16`` of the bytes of ``x`` read as big-endian 16-bit words (``x`` already holds
    whole words: a field list of an odd byte count shifted left by 8).  The sum of the words
    folded with end-around carries is ``x`` mod 0xFFFF in 1..0xFFFF (0 only when every word
    is 0), since 2**16 is 1 mod 0xFFFF; one big-int modulo instead of bytes, unpack, sum."""
    return 0xFFFE - (x - 1) % 0xFFFF if x else 0xFFFF


def identity(data: bytes) -> int:
    return int.from_bytes(data, "big") & 0xFFFFFFFFFFFFFFFF


ALGORITHMS = {"crc32": crc32, "crc16": crc16, "csum16": csum16, "identity": identity}
