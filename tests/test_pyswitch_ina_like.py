"""The INA-like workload of bench/pyswitch_pps.py computes exact aggregates: register
read-modify-writes at the slot given by crc32(job, round, chunk) mod 1024."""

from __future__ import annotations

import binascii
import random
import struct
from pathlib import Path

from scapy.all import IP, UDP, Ether, raw

from pyswitch import Switch, compile_p4
from pyswitch.values import ipv4, mac

HERE = Path(__file__).parent


def test_aggregation_sums_are_exact_and_wrap_at_32_bits() -> None:
    sw = Switch(compile_p4(HERE / "p4/pyswitch_ina_like.p4"))
    sw.insert_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (ipv4("10.0.1.0"), 24)},
                    "MyIngress.ipv4_forward", {"dstAddr": mac("00:00:00:00:01:01"), "port": 2})
    base = Ether() / IP(src="10.0.0.1", dst="10.0.1.1") / UDP(sport=1, dport=0x4650)
    rng = random.Random(3)
    job, rnd, chunk = 3, 9, 77
    slot = binascii.crc32(struct.pack(">HHI", job, rnd, chunk)) % 1024
    total = [0] * 32
    for k in range(5):
        vals = [rng.randrange(2**32) for _ in range(32)]
        total = [(t + v) % 2**32 for t, v in zip(total, vals, strict=True)]
        out = sw.process(1, raw(base / (struct.pack(">HHIB", job, rnd, chunk, 0)
                                        + struct.pack(">32I", *vals))))
        assert len(out) == 1 and out[0][0] == 2
        e = Ether(out[0][1])
        payload = raw(e[UDP].payload)
        assert payload[8] == k + 1  # per-slot packet count written back
        assert list(struct.unpack(">32I", payload[9:])) == total
    assert [sw.register_read(f"MyIngress.agg{i}", slot) for i in range(32)] == total
    assert sw.register_read("MyIngress.seen", slot) == 5
    assert sw.counter_read("MyIngress.agg_packets", 0)[0] == 5
    assert sum(sw.register_read("MyIngress.agg0", i) for i in range(1024)) == total[0]
