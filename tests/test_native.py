"""pyswitch's native path (pyswitch/native): the same frames out, the same registers,
counters and statistics as the Python path, frame for frame, on p4src/ina.p4 and on every
test program it translates; programs it cannot prove are left to the Python path with the
reason; the environment switch; the build cache.

Each differential test builds two switches of one program in one process, one per path,
feeds both the same frames (valid ones, then the same frames damaged: bytes flipped,
truncated, from other ports) and compares every output and, at the end, every state.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4
from pyswitch.native import NotNative, cache_dir, unavailable
from pyswitch.native.cgen import Unit

# the fallback test below runs anywhere; the rest need gcc and Python's headers
needs_cc = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def bench_module(name: str):
    """A bench/ script imported as a module (its workloads and rules are reused here)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ina_pps = bench_module("pyswitch_ina_pps")  # the aggregator rules, GRAD/RESULT workload


def twins(prog, monkeypatch) -> tuple[Switch, Switch]:
    """(Python path, native path) switches of `prog`."""
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")  # the argument wins over the variable
    py, nat = Switch(prog, native=False), Switch(prog, native=True)
    assert py.native_why == "native=False" and py.path == "python (native=False)"
    assert nat.native_why == "" and nat.path == "native"
    assert type(py.process).__name__ == "function"
    assert type(nat.process).__name__ == "Process"
    return py, nat


def state(sw: Switch) -> dict:
    """Everything a packet may change that the control plane can read."""
    return {
        "registers": {n: list(v[0]) for n, v in sw.registers.items()},
        "counters": {n: (list(p), list(b)) for n, (p, b, _) in sw.counters.items()},
        "direct": {t: sorted((repr(e.match), list(e.counter)) for e in tab.entries.values())
                   for t, tab in sw.tables.items()},
        "rx": dict(sw.stats.rx), "tx": dict(sw.stats.tx), "dropped": sw.stats.dropped,
    }


def damaged(frames: list[tuple[int, bytes]], n: int, seed: int) -> list[tuple[int, bytes]]:
    """`n` frames made from `frames`: bytes flipped in the headers, cut short, from another
    port, empty; the same list for the same seed."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        port, f = rng.choice(frames)
        b = bytearray(f)
        kind = rng.randrange(5)
        if kind == 0 and b:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(min(len(b), 80))] = rng.randrange(256)
        elif kind == 1:
            b = b[:rng.randrange(len(b) + 1)]
        elif kind == 2:
            port = rng.randrange(0, 512)
        elif kind == 3:
            b = bytearray(rng.randrange(256) for _ in range(rng.randrange(60)))
        out.append((port, bytes(b)))
    return out


def run_both(py: Switch, nat: Switch, frames: list[tuple[int, bytes]]) -> int:
    """Feed both; every output equal; returns how many frames left the switch."""
    left = 0
    for i, (port, f) in enumerate(frames):
        a, b = py.process(port, f), nat.process(port, f)
        assert a == b, f"frame {i} (port {port}, {f[:40].hex()}...): {a} != {b}"
        left += len(a)
    assert state(py) == state(nat)
    return left


def configure_both(py: Switch, nat: Switch, fn) -> None:
    for sw in (py, nat):
        fn(sw)


@needs_cc
@pytest.mark.parametrize("variant", ["aggregator", "disabled", "ps_tor"])
def test_ina_p4_native_equals_python_frame_for_frame(monkeypatch, variant: str) -> None:
    prog = compile_p4(REPO / "p4src" / "ina.p4")
    py, nat = twins(prog, monkeypatch)

    def configure(sw: Switch) -> None:
        ina_pps.configure(sw, 4)
        if variant == "disabled":  # set after the switch was built: read per packet
            sw.set_default_action("MyIngress.switch_config", "MyIngress.set_switch_config",
                                  {"switch_id": ina_pps.AGG, "agg_enabled": 0})
        elif variant == "ps_tor":
            ina_pps.as_ps_tor(sw)

    configure_both(py, nat, configure)
    work = ina_pps.frames(48, 4)
    left = run_both(py, nat, work + work[:23] + damaged(work, 1500, seed=7) + work)
    assert left > 100  # PARTIALs and RESULT copies, not only drops
    aggregated = any(any(v) for v in state(nat)["registers"].values())
    assert aggregated == (variant != "disabled")


@needs_cc
def test_ina_like_program_native_equals_python(monkeypatch) -> None:
    prog = compile_p4(HERE / "p4" / "pyswitch_ina_like.p4")
    py, nat = twins(prog, monkeypatch)
    pps = bench_module("pyswitch_pps")
    from pyswitch.values import ipv4, mac

    configure_both(py, nat, lambda sw: sw.insert_entry(
        "MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (ipv4("10.0.1.0"), 24)},
        "MyIngress.ipv4_forward", {"dstAddr": mac("00:00:00:00:01:01"), "port": 2}))
    work = [(1, f) for f in pps.frames(64)]
    assert run_both(py, nat, work + damaged(work, 800, seed=3) + work) >= 128


def reference_outputs(ref: Switch, port: int,
                      frames: list[bytes]) -> tuple[dict[int, list[bytes]], int]:
    """What the frame-by-frame reference ``ref`` sends each port for ``frames`` received on
    ``port`` (in order), and how many frames raised (the daemon tests' expectation)."""
    want: dict[int, list[bytes]] = {}
    bad = 0
    for f in frames:
        try:
            outs = ref.process(port, f)
        except Exception:  # noqa: BLE001 - the reference's errors, counted
            bad += 1
            continue
        for p, b in outs:
            want.setdefault(p, []).append(b)
    return want, bad


def _pre(sw: Switch) -> None:
    sw.set_multicast_group(1, [(1, 10), (2, 20), (2, 21)])
    sw.set_multicast_group(2, [(6, 7)])
    sw.set_clone_session(5, [(9, 0)])
    sw.set_clone_session(6, [(10, 3)])


@needs_cc
def test_replication_and_clones_native_equals_python(monkeypatch) -> None:
    """Multicast copies in C, I2E and E2E clones and drops in egress on the Python general
    path (tests/p4/pyswitch_pre.p4 picks the case from the EtherType)."""
    py, nat = twins(compile_p4(HERE / "p4" / "pyswitch_pre.p4"), monkeypatch)
    configure_both(py, nat, _pre)
    dst, src = bytes.fromhex("0000000000bb"), bytes.fromhex("0000000000aa")
    work = [(p, dst + src + bytes([0x10, t]) + b"PAYLOAD") for t in range(8) for p in (3, 4)]
    assert run_both(py, nat, work + damaged(work, 400, seed=5)) > 40


RANDOM_FRAME_PROGRAMS = ["pyswitch_fwd", "pyswitch_hash", "pyswitch_ops", "pyswitch_stack",
                         "pyswitch_subctl", "pyswitch_subparser", "rt_cpu", "rt_forward",
                         "rt_state", "p4info_rules"]
"""Test programs run on both paths with random frames (below)."""

DIFFERENTIAL_PROGRAMS = [REPO / "p4src" / "ina.p4", HERE / "p4" / "pyswitch_ina_like.p4",
                         HERE / "p4" / "pyswitch_pre.p4",
                         *(HERE / "p4" / f"{n}.p4" for n in RANDOM_FRAME_PROGRAMS)]
"""Every program this module runs on both paths, frame for frame
(tests/test_native_externs.py checks that they call every extern the registry serves)."""


@needs_cc
@pytest.mark.parametrize("name", RANDOM_FRAME_PROGRAMS)
def test_test_programs_native_equals_python_on_random_frames(monkeypatch, name: str) -> None:
    """Without table entries (defaults, direct counters of the defaults), random frames of
    random lengths into random ports."""
    py, nat = twins(compile_p4(HERE / "p4" / f"{name}.p4"), monkeypatch)
    rng = random.Random(name)
    work = [(rng.randrange(16), bytes(rng.randrange(256) for _ in range(rng.randrange(90))))
            for _ in range(300)]
    run_both(py, nat, work)


@needs_cc
def test_a_value_beyond_128_bits_stays_on_the_python_path(monkeypatch) -> None:
    prog = compile_p4(HERE / "p4" / "native_wide.p4")
    # one line: the block, the generated line and the construct
    with pytest.raises(NotNative, match=r"^parser, generated line \d+ `h0\[1:\] = .*`: "
                                        r"a value may exceed 126 bits$"):
        Unit(prog.ir, prog.meta, "x").translate(True)
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    sw = Switch(prog)
    assert "exceed 126 bits" in sw.native_why
    x, y = (1 << 127) + 3, (1 << 100) + 5
    out = sw.process(1, x.to_bytes(16, "big") + y.to_bytes(16, "big"))
    assert out == [(2, ((x * y) % (1 << 128)).to_bytes(16, "big") + y.to_bytes(16, "big"))]
    monkeypatch.setenv("PYSWITCH_NATIVE", "on")
    with pytest.raises(NotNative, match="exceed 126 bits"):
        Switch(prog)
    monkeypatch.setenv("PYSWITCH_NATIVE", "off")
    assert Switch(compile_p4(HERE / "p4" / "rt_forward.p4")).path == \
        "python (PYSWITCH_NATIVE=off)"


def test_without_a_compiler_auto_falls_back(monkeypatch, tmp_path) -> None:
    headers = unavailable() is None  # before CC is changed: gcc and Python's headers here
    prog = compile_p4(HERE / "p4" / "rt_forward.p4")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("PYSWITCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    sw = Switch(prog)
    assert sw.native_why == "no C compiler or no Python headers"
    assert type(sw.process).__name__ == "function"
    if not headers:
        return
    # a compiler that fails: the reason, the Python path, nothing half-built in the cache
    monkeypatch.setenv("CC", "false")
    text = (HERE / "p4" / "rt_forward.p4").read_text().replace("ttl - 1;", "ttl - 3;")
    (tmp_path / "fwd3.p4").write_text(text)  # a program no other test has built
    sw = Switch(compile_p4(tmp_path / "fwd3.p4"))
    assert sw.path == "python (false failed: no message)"
    assert list((tmp_path / "cache").iterdir()) == [next((tmp_path / "cache").glob("*.lock"))]
    f = bytes.fromhex("0000000000bb0000000000aa88b5") + bytes(30)
    sw.insert_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": 0xBB}, "MyIngress.set_port",
                    {"port": 3})
    assert sw.process(1, f) == [(3, f)]


@needs_cc
def test_a_program_is_built_once_into_the_cache(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PYSWITCH_CACHE", str(tmp_path))
    monkeypatch.setenv("PYSWITCH_NATIVE", "on")
    assert cache_dir() == tmp_path
    text = (HERE / "p4" / "rt_forward.p4").read_text()
    src = tmp_path / "fwd_unique.p4"  # a text no other test builds: a fresh module name
    assert "hdr.ipv4.ttl - 1;" in text
    src.write_text(text.replace("hdr.ipv4.ttl - 1;", "hdr.ipv4.ttl - 7;"))
    prog = compile_p4(src)
    a = Switch(prog)
    built = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".so")
    assert len(built) == 1
    mtime = (tmp_path / built[0]).stat().st_mtime_ns
    b = Switch(compile_p4(src))
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".so") == built
    assert (tmp_path / built[0]).stat().st_mtime_ns == mtime
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left
    # two switches of one module keep their own state
    a.insert_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": 0xBB}, "MyIngress.set_port",
                   {"port": 3})
    f = bytes.fromhex("0000000000bb0000000000aa88b5") + bytes(30)
    assert a.process(1, f) == [(3, f)]
    assert b.process(1, f) != [(3, f)]
    assert a.stats.rx == {1: 1} and b.stats.rx == {1: 1}


def test_expression_bounds_by_hand() -> None:
    """The intervals `exprs` lowers nodes with (the IR's, `Bounds.of`: here of nodes made
    up, by the IR's rules over ina.p4's slots), its refusals by them: M[9], M[10] are
    bit<32> (the job's slot base and size), M[4] bit<64> (its full mask), S[3][3]
    bit<16> (the job id)."""
    from pyswitch.ir.bounds import Bounds
    from pyswitch.ir.exprs import Bin, Cond, Field, Lit, Slot

    prog = compile_p4(REPO / "p4src" / "ina.p4")
    u = Unit(prog.ir, prog.meta, "x")
    assert (prog.meta["mbounds"][9], prog.meta["mbounds"][4]) == ((0, 2**32 - 1), (0, 2**64 - 1))
    f = u.funcs["ingress"]
    f.aliases["h3"] = 3
    f.irb = Bounds(prog.meta["mbounds"], prog.meta["hbounds"], {"h3": 3})

    def bound(n) -> tuple[int, int]:  # noqa: ANN001 - an expression node
        x = u.ex(f, n)
        return x.lo, x.hi

    m9, m10, h = Slot(9), Slot(10), Field("h3", 3)
    m32 = 2**32 - 1
    assert bound(Bin("+", m9, m10)) == (0, 2 * m32)
    assert bound(Bin("-", m9, m10)) == (-m32, m32)
    assert bound(Bin("&", Bin("-", m9, m10), Lit(0xFFFFFFFF))) == (0, m32)
    assert bound(Bin("<<", h, Lit(64))) == (0, (2**16 - 1) << 64)
    assert bound(Bin(">>", m9, Lit(30))) == (0, 3)
    assert bound(Bin("|", m9, h)) == (0, m32)
    assert bound(Cond(Slot(2), m9, Lit(-5))) == (-5, m32)
    # floor division and modulo by a positive divisor (a varbit's length // 8)
    assert bound(Bin("//", m9, Lit(8))) == (0, m32 // 8)
    assert bound(Bin("//", Bin("-", m9, m10), Lit(3))) == (-(m32 // 3), m32 // 3)
    assert bound(Bin("//", Bin("-", m9, m10), Bin("+", Slot(7), Lit(1)))) == (-m32, m32)
    assert bound(Bin("%", m9, Lit(7))) == (0, 6)
    assert bound(Bin("%", Bin("-", m9, m10), Bin("+", Slot(7), Lit(1)))) == (0, 511)  # bit<9>
    with pytest.raises(NotNative, match="divisor that may be 0"):
        bound(Bin("//", m9, Slot(7)))
    with pytest.raises(NotNative, match="exceed 126 bits"):
        bound(Bin("*", Slot(4), Slot(4)))  # (2**64 - 1)**2 needs 128 bits


@needs_cc
def test_an_unwritable_cache_falls_back_with_the_reason(monkeypatch, tmp_path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("PYSWITCH_CACHE", str(blocker))
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    text = (HERE / "p4" / "rt_forward.p4").read_text().replace("ttl - 1;", "ttl - 5;")
    (tmp_path / "fwd5.p4").write_text(text)  # not built by any other test of this process
    sw = Switch(compile_p4(tmp_path / "fwd5.p4"))
    assert sw.path.startswith("python (cannot build or load the module: ")
    assert blocker.read_text().startswith("a file")


@needs_cc
def test_the_packet_trace_runs_the_python_stages() -> None:
    from pyswitch.observe import install_trace

    sw = Switch(compile_p4(HERE / "p4" / "rt_forward.p4"), native=True)
    assert sw.path == "native"
    install_trace(sw)  # BMv2's per-stage log lines come from the Python stages
    assert sw.path == "python (the Python stages were asked for)"
    f = bytes.fromhex("0000000000bb0000000000aa88b5") + bytes(30)
    sw.insert_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": 0xBB}, "MyIngress.set_port",
                    {"port": 3})
    assert sw.process(1, f) == [(3, f)]


@needs_cc
def test_one_description_of_the_loop_drives_both_paths(monkeypatch, tmp_path) -> None:
    """`loop.LOOP` is the specialised loop of both paths: without its Drop step, a frame
    the program marks to drop leaves on port 511 on the Python path and the native path
    alike; with it, on neither."""
    import pyswitch.native as native_pkg
    from pyswitch.native import loop

    prog = compile_p4(HERE / "p4" / "rt_forward.p4")
    f = bytes.fromhex("0000000000bb0000000000aa88b5") + bytes(30)

    def drop_bb(sw: Switch) -> None:
        sw.insert_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": 0xBB}, "MyIngress.drop")

    py, nat = twins(prog, monkeypatch)
    configure_both(py, nat, drop_bb)
    assert py.process(1, f) == nat.process(1, f) == []
    assert py.stats.dropped == nat.stats.dropped == 1
    monkeypatch.setattr(loop, "LOOP", tuple(s for s in loop.LOOP
                                            if not isinstance(s, loop.Drop)))
    monkeypatch.setenv("PYSWITCH_CACHE", str(tmp_path))  # nothing of this kept
    monkeypatch.setattr(native_pkg, "_DIGEST", "a changed loop")  # a fresh module name
    py, nat = twins(prog, monkeypatch)
    configure_both(py, nat, drop_bb)
    assert py.process(1, f) == nat.process(1, f) == [(511, f)]
    assert py.stats.dropped == nat.stats.dropped == 0


def test_a_step_a_lowering_does_not_know_is_an_error(monkeypatch) -> None:
    from pyswitch.native import loop

    meta = compile_p4(HERE / "p4" / "rt_forward.p4").meta
    assert "def process(ingress_port, frame):" in loop.python_source(meta, False)
    assert "static int process_into(" in loop.c_source(meta, False)
    monkeypatch.setattr(loop, "LOOP", (*loop.LOOP, loop.Emit()))  # Emit outside a copy
    for lower in (loop.python_source, loop.c_source):
        with pytest.raises(ValueError, match="Emit at the top of the loop"):
            lower(meta, False)
