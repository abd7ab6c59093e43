"""Every frame ina.p4 drops is counted under the reason it was dropped for (docs/protocol.md
§3-4): one packet test per counter added for it (non-IPv4, plain-IPv4 route miss, absorbed
into an incomplete slot, duplicate of an incomplete slot, RESULT copy pruned at egress), and a
mixed stream of good and hostile frames where each frame either leaves the switch or moves
exactly one drop counter (pyswitch in-process).
"""

from __future__ import annotations

import numpy as np
import pytest
from ina_harness import PS_IP, PS_MAC, InaSwitch, PySwitchTarget, pyswitch_unavailable
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from workers.ina import constants as C
from workers.ina.wire import Flag, InaPacket, MsgType

AGG, TOR = 5, 9
UPLINKS, PS_PORT = [20, 21], 30
JOB, MCAST = 3, 1
GROUP = [1, 2, 3, 20]

# name -> why (docs/protocol.md §3); MyEgress.dropped_echo is the egress one
DROP_COUNTERS = ("MyIngress.dropped_malformed", "MyIngress.dropped_nonmember",
                 "MyIngress.dropped_noroute", "MyIngress.dropped_not_ipv4",
                 "MyIngress.dropped_ipv4_noroute", "MyIngress.absorbed",
                 "MyIngress.dropped_duplicate", "MyEgress.dropped_echo")


@pytest.fixture
def agg() -> InaSwitch:
    why = pyswitch_unavailable()
    if why:
        pytest.skip(why)
    t = PySwitchTarget()
    sw = InaSwitch(t, AGG).configure()
    sw.fabric(*UPLINKS)
    sw.job(JOB, [0, 1, 2], is_ps_tor=False, tor_id=TOR, mcast_grp=MCAST)
    sw.route(TOR, UPLINKS)
    sw.route(0, UPLINKS)
    t.set_multicast_group(MCAST, GROUP)
    return sw


def counts(sw: InaSwitch) -> dict[str, int]:
    return {n: sw.target.sw.counter_read(n, 0)[0] for n in DROP_COUNTERS}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def grad(worker: int, chunk: int = 11, flags: int = 0, values=None) -> bytes:
    v = np.arange(C.K) if values is None else values
    return InaSwitch.frame(InaPacket.grad(JOB, 0, chunk, AGG, 2, worker, v, flags),
                           src_ip=f"10.0.1.{worker + 1}")


def plain_udp(dst: str = "10.9.9.9") -> bytes:
    return bytes(Ether(src="02:00:00:00:00:01", dst=PS_MAC) / IP(src="10.0.1.1", dst=dst)
                 / UDP(sport=5000, dport=5001) / Raw(b"x" * 20))


def test_non_ipv4_frame_is_counted_in_dropped_not_ipv4(agg) -> None:
    before = counts(agg)
    arp = bytes(Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff")
                / ARP(psrc="10.0.1.1", pdst=PS_IP))
    assert agg.target.process(1, arp) == []
    assert delta(before, counts(agg)) == {"MyIngress.dropped_not_ipv4": 1}


def test_plain_ipv4_route_miss_is_counted_in_dropped_ipv4_noroute(agg) -> None:
    before = counts(agg)
    assert agg.target.process(1, plain_udp()) == []
    assert delta(before, counts(agg)) == {"MyIngress.dropped_ipv4_noroute": 1}
    # an explicit drop entry (action MyIngress.drop, name unchanged) counts the same way
    agg.target.insert_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A080000, 16)},
                            "MyIngress.drop", {})
    assert agg.target.process(1, plain_udp("10.8.1.1")) == []
    # and a route that hits forwards without counting
    agg.target.insert_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A070000, 16)},
                            "MyIngress.ipv4_forward", {"dstAddr": 0x020000000007, "port": 20})
    assert [p for p, _ in agg.target.process(1, plain_udp("10.7.1.1"))] == [20]
    assert delta(before, counts(agg)) == {"MyIngress.dropped_ipv4_noroute": 2}


def test_grad_summed_into_an_incomplete_slot_is_counted_in_absorbed(agg) -> None:
    before = counts(agg)
    assert agg.send(1, grad(0)) == []
    assert delta(before, counts(agg)) == {"MyIngress.absorbed": 1}
    (part,) = agg.send(2, grad(1))          # completes: leaves the switch, no drop counted
    assert part.pkt.msg_type == MsgType.PARTIAL
    assert delta(before, counts(agg)) == {"MyIngress.absorbed": 1}


def test_duplicate_of_an_incomplete_slot_is_counted_in_dropped_duplicate(agg) -> None:
    assert agg.send(1, grad(0)) == []
    before, dup_before = counts(agg), agg.counters("duplicate")["duplicate"]
    assert agg.send(1, grad(0)) == []       # network duplicate, not a retransmission
    assert delta(before, counts(agg)) == {"MyIngress.dropped_duplicate": 1}
    assert agg.counters("duplicate")["duplicate"] == dup_before + 1
    # a RETRANSMIT duplicate makes the point ask its other workers instead (down its NACK
    # tree, controller.dataplane.deploy.ask_trees): it leaves, nothing dropped
    agg.target.insert_entry("MyIngress.ask_group", {"hdr.ina.job_id": JOB,
                                                    "hdr.ina.agg_id": AGG},
                            "MyIngress.set_ask_group", {"grp": 0x8000})
    agg.target.set_multicast_group(0x8000, [2, 3])
    asks = agg.send(1, grad(0, flags=Flag.RETRANSMIT))
    assert sorted(o.port for o in asks) == [2, 3]
    assert all(o.pkt.flags & Flag.INCOMPLETE for o in asks)
    assert delta(before, counts(agg)) == {"MyIngress.dropped_duplicate": 1}


def test_result_copy_toward_its_ingress_port_is_counted_in_dropped_echo(agg) -> None:
    before = counts(agg)
    res = InaPacket(MsgType.RESULT, 0, JOB, 0, 11, 0, 0, 3, 0, 0b111, np.zeros(C.K, np.int64))
    outs = agg.send(20, InaSwitch.frame(res))
    assert sorted(o.port for o in outs) == [1, 2, 3]         # not back out of port 20
    assert delta(before, counts(agg)) == {"MyEgress.dropped_echo": 1}


def _hostile_stream(rng: np.random.Generator, n: int) -> list[tuple[int, bytes, bool]]:
    """(port, frame, is_result) mixing honest GRADs and every kind of frame that is dropped."""
    out: list[tuple[int, bytes, bool]] = []
    for _ in range(n):
        kind = int(rng.integers(0, 9))
        w, chunk = int(rng.integers(0, 3)), int(rng.integers(0, 6))
        if kind <= 2:
            out.append((w + 1, grad(w, chunk, flags=int(rng.integers(0, 2))), False))
        elif kind == 3:                                  # non-member port
            out.append((7, grad(w, chunk), False))
        elif kind == 4:                                  # truncated
            f = grad(w, chunk)
            out.append((w + 1, f[: int(rng.integers(14, len(f)))], False))
        elif kind == 5:
            out.append((1, bytes(Ether(type=0x86DD) / Raw(b"\x60" + b"\x00" * 60)), False))
        elif kind == 6:
            out.append((1, plain_udp(f"10.{int(rng.integers(1, 200))}.0.1"), False))
        elif kind == 7:                                  # RESULT from the fabric
            res = InaPacket(MsgType.RESULT, 0, JOB, 0, chunk, 0, 0, 3, 0, 0b111,
                            np.zeros(C.K, dtype=np.int64))
            out.append((20, InaSwitch.frame(res), True))
        else:                                            # random bytes
            out.append((int(rng.integers(1, 4)),
                        rng.integers(0, 256, int(rng.integers(1, 300))).astype(np.uint8)
                        .tobytes(), False))
    return out


def test_every_frame_leaves_or_moves_exactly_one_drop_counter(agg) -> None:
    rng = np.random.default_rng(20)
    group_out = len(GROUP)
    seen: set[str] = set()
    for port, frame, is_result in _hostile_stream(rng, 600):
        before = counts(agg)
        outs = agg.target.process(port, frame)
        d = delta(before, counts(agg))
        seen |= set(d)
        if is_result and outs:
            # multicast: every group port gets a copy except the ingress one (pruned)
            assert len(outs) + d.get("MyEgress.dropped_echo", 0) == group_out, d
            assert set(d) == {"MyEgress.dropped_echo"}
        else:
            assert len(outs) + sum(d.values()) == 1, (port, frame.hex()[:80], outs, d)
    assert {"MyIngress.dropped_malformed", "MyIngress.dropped_nonmember",
            "MyIngress.dropped_not_ipv4", "MyIngress.dropped_ipv4_noroute",
            "MyIngress.absorbed", "MyIngress.dropped_duplicate",
            "MyEgress.dropped_echo"} <= seen
