"""`Switch.process_batch` (issue 42): many frames per call, the loop in C on the native
path (its statistics counted in C and added to ``stats`` before it returns), a loop over
`process` on the Python path.  Both paths' batches must give the outputs and the state of
the Python path's frame-by-frame `process`, frame for frame: the same (port, frame) list in
the same order, the same registers, counters and statistics (the Counters' keys in the same
order too), whatever the batch sizes, with frames that raise recorded or raised.
"""

from __future__ import annotations

import random

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.native import unavailable
from tests.test_native import (
    HERE,
    REPO,
    _pre,
    damaged,
    ina_pps,
    reference_outputs,
    state,
    twins,
)

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


def full_state(sw: Switch) -> dict:
    """`state` and the order in which the statistics' Counters gained their ports."""
    return {**state(sw), "rx order": list(sw.stats.rx), "tx order": list(sw.stats.tx)}


def one_by_one(sw: Switch, frames: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    return [o for p, f in frames for o in sw.process(p, f)]


def in_batches(sw: Switch, frames: list[tuple[int, bytes]], rng: random.Random) -> list:
    """`frames` through `process_batch` in batches of random sizes (1 to 150, some empty),
    half of them given as frames of one port with `port`."""
    out: list[tuple[int, bytes]] = []
    i = 0
    while i < len(frames):
        k = rng.choice([0, 1, 2, 7, 64, 150])
        chunk = frames[i:i + k]
        if chunk and len({p for p, _ in chunk}) == 1 and rng.random() < 0.5:
            out += sw.process_batch([f for _, f in chunk], port=chunk[0][0])
        else:
            out += sw.process_batch(chunk)
        i += k
    return out


@pytest.mark.parametrize("variant", ["aggregator", "ps_tor"])
def test_ina_p4_batches_equal_frame_by_frame(monkeypatch, variant: str) -> None:
    prog = compile_p4(REPO / "p4src" / "ina.p4")
    ref, _ = twins(prog, monkeypatch)  # the Python path, frame by frame: the reference
    py_b, nat_b = twins(prog, monkeypatch)  # each path's batches
    for sw in (ref, py_b, nat_b):
        ina_pps.configure(sw, 4)
        if variant == "ps_tor":
            ina_pps.as_ps_tor(sw)
    work = ina_pps.frames(48, 4)
    frames = work + damaged(work, 1200, seed=11) + work
    want = one_by_one(ref, frames)
    assert len(want) > 100  # PARTIALs and RESULT copies, not only drops
    for sw in (py_b, nat_b):
        got = in_batches(sw, frames, random.Random(variant))
        assert got == want, sw.path
        assert full_state(sw) == full_state(ref), sw.path
    assert type(nat_b.process).__name__ == "Process" and ref.stats.dropped > 0


def test_replication_clones_and_the_general_path_in_batches(monkeypatch) -> None:
    """Multicast copies in C and I2E/E2E clones and drops in egress on the Python general
    path, which counts in Python in the middle of a batch counted in C: the ports reach the
    Counters in the frame-by-frame order all the same."""
    prog = compile_p4(HERE / "p4" / "pyswitch_pre.p4")
    ref, _ = twins(prog, monkeypatch)
    py_b, nat_b = twins(prog, monkeypatch)
    for sw in (ref, py_b, nat_b):
        _pre(sw)
    dst, src = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")
    work = [(p, dst + src + bytes([0x10, t]) + b"PAYLOAD") for t in range(8) for p in (3, 4)]
    frames = work + damaged(work, 400, seed=5) + work
    want = one_by_one(ref, frames)
    for sw in (py_b, nat_b):
        assert sw.process_batch(frames) == want, sw.path
        assert full_state(sw) == full_state(ref), sw.path
    assert len(ref.stats.tx) > 3


def test_frames_that_raise_are_recorded_or_raised(monkeypatch) -> None:
    """With `errors`, a frame that raises is recorded (its index) without the copies it
    emitted before raising, and the batch goes on; without, the exception propagates and
    what the frames before it counted stays counted."""
    prog = compile_p4(HERE / "p4" / "pyswitch_pre.p4")
    ref, _ = twins(prog, monkeypatch)
    py_b, nat_b = twins(prog, monkeypatch)
    for sw in (ref, py_b, nat_b):
        _pre(sw)
        sw.mcast[2] = [(6, 7), "not a replica"]  # group 2's second copy raises
    dst, src = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")
    good = [(p, dst + src + bytes([0x10, t]) + b"PAYLOAD") for t in range(8) for p in (3, 4)]
    frames = good[:5] + [(3, None)] + good[5:]  # bytes(None) raises
    want, want_err = [], []
    for i, (p, f) in enumerate(frames):
        try:
            want += ref.process(p, f)
        except Exception:  # noqa: BLE001 - the reference's errors, by index
            want_err.append(i)
    assert 5 in want_err and len(want_err) >= 2  # the bad frame, group 2's frames
    for sw in (py_b, nat_b):
        errors: list = []
        assert sw.process_batch(frames, errors=errors) == want, sw.path
        assert [i for i, _ in errors] == want_err
        assert all(isinstance(e, Exception) for _, e in errors)
        assert full_state(sw) == full_state(ref), sw.path
    for sw in (py_b, nat_b):
        before = sw.stats.rx[3]
        with pytest.raises(TypeError):
            sw.process_batch([good[0], (3, None), good[0]])
        assert sw.stats.rx[3] == before + 1  # the frame before it counted, none after
        with pytest.raises((TypeError, ValueError)):
            sw.process_batch([(3,)])  # not a (port, frame) pair: a caller's error, raised


def test_the_packet_trace_batches_through_its_python_stages(monkeypatch) -> None:
    """A switch whose `process` was replaced (pyswitch/observe.py's trace) is batched
    through that `process`, not the C loop underneath."""
    prog = compile_p4(HERE / "p4" / "pyswitch_pre.p4")
    sw, _ = twins(prog, monkeypatch)
    seen = []
    inner = sw.process
    sw.process = lambda p, f: seen.append(p) or inner(p, f)
    sw.process_batch([(3, b"x" * 20), (4, b"y" * 20)])
    assert seen == [3, 4]


class _Port:
    """Stands in for pyswitch.ports.Port: frames sent."""

    def __init__(self, fd: int) -> None:
        self.sent: list[bytes] = []
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def send(self, frame: bytes) -> bool:
        self.sent.append(frame)
        return True

    def send_batch(self, frames: list[bytes]) -> None:
        self.sent.extend(frames)


@pytest.mark.parametrize("mode", ["off", "on"])
def test_the_daemon_forwards_a_received_batch_in_one_call(monkeypatch, mode: str) -> None:
    """pyswitch.daemon's fast path (a batch from one port, no impairment): each port gets
    the frames the frame-by-frame path sends it, in order; a frame that raises is counted
    and the rest of its batch forwarded."""
    from pyswitch.daemon import ForwardingLoop
    from pyswitch.p4runtime.pipeline import Device

    prog = compile_p4(HERE / "p4" / "pyswitch_pre.p4")
    ref = Switch(prog, native=False)
    monkeypatch.setenv("PYSWITCH_NATIVE", mode)
    dev = Device()
    dev.switch = dev.make_switch(prog)
    assert dev.switch.path.startswith("native" if mode == "on" else "python")
    for sw in (ref, dev.switch):
        _pre(sw)
        sw.mcast[2] = [(6, 7), "not a replica"]  # group 2's frames raise
    dst, src = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")
    frames = [dst + src + bytes([0x10, t]) + b"PAYLOAD" for t in range(8)] * 3
    want, bad = reference_outputs(ref, 3, frames)
    ports = {p: _Port(1000 + p) for p in range(1, 11)}
    loop = ForwardingLoop(dev, ports)  # type: ignore[arg-type]
    loop._receive(3, frames)
    assert bad > 0 and loop.process_errors == bad and loop.processed == len(frames) - bad
    assert {p: q.sent for p, q in ports.items() if q.sent} == {
        p: b for p, b in want.items() if p in ports}
    assert loop.unknown_port_out == sum(len(b) for p, b in want.items() if p not in ports)
    assert dict(dev.switch.stats.tx) == dict(ref.stats.tx)
