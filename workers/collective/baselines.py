"""The baselines of docs/design.md §4 as :class:`~workers.collective.schedule.Schedule` objects, and
the pure helpers the BCube experiment shares between its processes (I/O free).

Why no separate baseline process
    Every method compared in docs/design.md §4 -- BCube, ring all-reduce (on the fat-tree and on
    BCube), a single parameter server and a sharded PS -- is a *collective schedule*: per step, who
    sends which index range to whom, then add (``reduce``) or overwrite (``gather``).  One process,
    :mod:`workers.collective.worker_node`, replays any such schedule over TCP, so every method runs
    on the same transport, the same training code and the same measurement code; only the schedule
    differs.  That is what makes the timing comparison fair.

Schedules here (n values, P workers ``0 .. P-1``; one thread, ``level = None``)
    ``ps_schedule``: the classic single PS co-located on worker ``ps`` (which also trains).
        Step 0 (reduce): every other worker sends ``[0, n)`` to ``ps``.  Step 1 (gather): ``ps``
        sends the sum ``[0, n)`` to every other worker.  The PS NIC carries ``(P-1)·n`` values
        each way, one direction after the other: time ``≈ 2·(P-1)·n/B``.
    ``sharded_ps_schedule``: the PS of BML's comparison (every worker also is the PS of
        one P-th of the parameters).  Step 0: worker s sends part j to worker j; step 1: worker
        j sends its summed part j to everyone.  Each NIC carries ``(P-1)/P·n`` values each way
        per step: time ``≈ 2·(P-1)/P·n/B`` -- the same as a ring, without the ring's 2(P-1) step
        latencies.  BML's claim "BCube sync time ≈ 1/k of PS" is against this PS.
    Ring: :func:`workers.collective.ring.build_ring_schedule`; on BCube the ring order is the
    modular N-ary Gray code (:func:`gray_ring`), so consecutive workers differ in exactly one
    digit and every ring hop is one hop through a level switch.

Predicted time
    :func:`predicted_sync_s` is the link-bound model used next to the measurements: steps run
    one after the other; inside a step every NIC direction carries its bytes at B, so a step
    takes ``max over (worker, NIC, direction) of bytes / B``.  For BCube the k threads run at
    different levels in each step, so the same formula holds with the k threads' bytes on
    their own NICs.  ``wire_factor`` converts payload to bytes on the wire (TCP/IP/Ethernet
    headers: 1514 wire bytes per 1448 payload bytes at MTU 1500 with TCP timestamps).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workers.collective.bcube import build_schedule, digits
from workers.collective.ring import build_ring_schedule
from workers.collective.schedule import GATHER, REDUCE, Schedule, Transfer, split_range

VALUE_BYTES = 4  # int32 fixed point on the wire
WIRE_FACTOR = 1514 / 1448  # Ethernet+IP+TCP(+timestamps) bytes per payload byte at MTU 1500

METHOD_KINDS = ("bcube", "ring", "ps", "ps-sharded")

__all__ = [
    "METHOD_KINDS",
    "VALUE_BYTES",
    "WIRE_FACTOR",
    "bcube_nic",
    "check_same_schedule_levels",
    "gray_ring",
    "make_schedule",
    "nic_loads",
    "pairs",
    "predicted_sync_s",
    "ps_schedule",
    "sharded_ps_schedule",
    "values_per_nic",
]


def _one_thread(n: int, P: int, steps: list[dict[int, tuple[Transfer, ...]]],
                ops: tuple[str, ...]) -> Schedule:
    table = tuple({s: step.get(s, ()) for s in range(P)} for step in steps)
    return Schedule(n=n, workers=tuple(range(P)), num_threads=1, num_steps=len(steps), ops=ops,
                    levels=((None,) * len(steps),), table=(table,))


def ps_schedule(P: int, n: int, ps: int = 0) -> Schedule:
    """Single PS on worker ``ps`` (which also trains): push everything, then pull the sum."""
    if P < 1 or not 0 <= ps < P:
        raise ValueError(f"ps schedule: need P >= 1 and 0 <= ps < P, got P={P}, ps={ps}")
    push = {s: (Transfer(0, 0, s, ps, None, 0, n, REDUCE),) for s in range(P) if s != ps}
    pull = {ps: tuple(Transfer(0, 1, ps, s, None, 0, n, GATHER) for s in range(P) if s != ps)}
    return _one_thread(n, P, [push, pull], (REDUCE, GATHER))


def sharded_ps_schedule(P: int, n: int) -> Schedule:
    """Every worker is the PS of part j = its id (``split_range(0, n, P)[j]``)."""
    if P < 1:
        raise ValueError(f"sharded PS schedule: need P >= 1, got {P}")
    parts = split_range(0, n, P)
    push = {s: tuple(Transfer(0, 0, s, j, None, *parts[j], REDUCE) for j in range(P) if j != s)
            for s in range(P)}
    pull = {j: tuple(Transfer(0, 1, j, s, None, *parts[j], GATHER) for s in range(P) if s != j)
            for j in range(P)}
    return _one_thread(n, P, [push, pull], (REDUCE, GATHER))


def gray_ring(N: int, k: int) -> list[int]:
    """BCube(N, k) workers in modular N-ary Gray-code order.

    Codeword i has digits ``g_l = (b_l - b_{l+1}) mod N`` (b = base-N digits of i, b_k = 0).
    Consecutive codewords -- including the last and the first -- differ in exactly one digit,
    so each ring hop joins two members of one level group (one hop through a level switch).
    """
    P = N**k
    out = []
    for i in range(P):
        b = [(i // N**lv) % N for lv in range(k)] + [0]
        g = [(b[lv] - b[lv + 1]) % N for lv in range(k)]
        out.append(sum(d * N**lv for lv, d in enumerate(g)))
    return out


def make_schedule(spec: Mapping[str, Any], n: int) -> Schedule:
    """The schedule a job file names: ``{"kind": "bcube", "N", "k"}``, ``{"kind": "ring",
    "order": [...]}``, ``{"kind": "ps", "P", "ps"}`` or ``{"kind": "ps-sharded", "P"}``."""
    kind = spec.get("kind")
    if kind == "bcube":
        return build_schedule(int(spec["N"]), int(spec["k"]), n)
    if kind == "ring":
        return build_ring_schedule([int(x) for x in spec["order"]], n)
    if kind == "ps":
        return ps_schedule(int(spec["P"]), n, int(spec.get("ps", 0)))
    if kind == "ps-sharded":
        return sharded_ps_schedule(int(spec["P"]), n)
    raise ValueError(f"unknown schedule kind {kind!r} (expected one of {', '.join(METHOD_KINDS)})")


def bcube_nic(src: int, dst: int, N: int, k: int) -> int:
    """The level (NIC) joining two BCube workers: the one digit in which they differ.

    Raises ValueError when they differ in zero or several digits (not one hop apart)."""
    diff = [lv for lv, (a, b) in enumerate(zip(digits(src, N, k), digits(dst, N, k),
                                               strict=True)) if a != b]
    if len(diff) != 1:
        raise ValueError(f"BCube({N},{k}): workers {src} and {dst} differ in digits {diff}: "
                         "not one hop apart")
    return diff[0]


def nic_loads(schedule: Schedule, nic_of: Mapping[tuple[int, int], int]
              ) -> list[dict[tuple[int, int, str], int]]:
    """Per step, values per ``(worker, nic, "tx"|"rx")`` (summed over threads)."""
    out = []
    for step in range(schedule.num_steps):
        load: dict[tuple[int, int, str], int] = {}
        for tr in schedule.step_transfers(step):
            nic = nic_of[(tr.src, tr.dst)]
            load[(tr.src, nic, "tx")] = load.get((tr.src, nic, "tx"), 0) + tr.size
            load[(tr.dst, nic, "rx")] = load.get((tr.dst, nic, "rx"), 0) + tr.size
        out.append(load)
    return out


def predicted_sync_s(schedule: Schedule, nic_of: Mapping[tuple[int, int], int], bw_mbps: float,
                     wire_factor: float = WIRE_FACTOR) -> float:
    """Link-bound sync time: ``sum over steps of max NIC-direction bytes / B`` (see module doc)."""
    if bw_mbps <= 0:
        raise ValueError(f"bandwidth must be > 0 Mbit/s, got {bw_mbps}")
    total = 0.0
    for load in nic_loads(schedule, nic_of):
        if load:
            total += max(load.values()) * VALUE_BYTES * wire_factor * 8 / (bw_mbps * 1e6)
    return total


def values_per_nic(schedule: Schedule, nic_of: Mapping[tuple[int, int], int]
                   ) -> dict[tuple[int, int], int]:
    """Values each ``(worker, nic)`` sends in one all-reduce (payload, all steps)."""
    out: dict[tuple[int, int], int] = {}
    for tr in schedule.transfers():
        key = (tr.src, nic_of[(tr.src, tr.dst)])
        out[key] = out.get(key, 0) + tr.size
    return out


def pairs(schedule: Schedule) -> list[tuple[int, int]]:
    """The ordered (src, dst) pairs that carry at least one non-empty transfer."""
    return sorted({(tr.src, tr.dst) for tr in schedule.transfers() if tr.size > 0})


def check_same_schedule_levels(schedule: Schedule, nic_of: Mapping[tuple[int, int], int]) -> None:
    """For schedules with levels (BCube): every transfer's level is the NIC its pair uses."""
    for tr in schedule.transfers():
        if tr.level is not None and nic_of[(tr.src, tr.dst)] != tr.level:
            raise ValueError(f"transfer {tr} uses level {tr.level} but workers {tr.src} and "
                             f"{tr.dst} are joined at level {nic_of[(tr.src, tr.dst)]}")

