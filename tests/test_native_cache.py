"""The native cache is trusted only when it is ours (pyswitch/cachedir.py, pyswitch/native):
a module planted under the predictable name is never imported; a cache folder another user
owns or may write leaves the Python path with the reason; folders 0700 and files 0600
whatever the umask; the lock file is never followed nor truncated; the parser's table
cache follows the same rule; ``PYSWITCH_NATIVE=garbage`` is an error, not ``auto``."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4, native
from pyswitch.errors import UsageError

needs_cc = pytest.mark.skipif(native.unavailable() is not None,
                              reason=str(native.unavailable()))
HERE = Path(__file__).resolve().parent
FRAME = bytes.fromhex("0000000000bb0000000000aa88b5") + bytes(30)

PLANT_C = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("planted code ran\n", f); fclose(f); }
}
"""


def program(tmp_path: Path, n: int):
    """rt_forward.p4 with a TTL step no other test uses: a module name of its own."""
    text = (HERE / "p4" / "rt_forward.p4").read_text()
    assert "ttl - 1;" in text
    src = tmp_path / f"fwd_plant{n}.p4"
    src.write_text(text.replace("ttl - 1;", f"ttl - {n};"))
    return compile_p4(src)


def module_name(prog, cache: Path, monkeypatch) -> str:
    """The predictable file name of `prog`'s module: built once into a scratch cache."""
    monkeypatch.setenv("PYSWITCH_CACHE", str(cache))
    monkeypatch.setattr(native, "_MODULES", {})
    assert Switch(prog, native=True).path == "native"
    (so,) = cache.glob("_pswn_*.so")
    monkeypatch.setattr(native, "_MODULES", {})  # the next switch looks at the disk again
    return so.name


def plant(path: Path, marker: Path) -> None:
    """A shared object at `path` whose load-time constructor writes `marker`."""
    c = path.with_suffix(".c")
    c.write_text(PLANT_C % marker)
    subprocess.run(["gcc", "-shared", "-fPIC", str(c), "-o", str(path)], check=True)
    c.unlink()


def forwards(sw: Switch) -> bool:
    sw.insert_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": 0xBB}, "MyIngress.set_port",
                    {"port": 3})
    return sw.process(1, FRAME) == [(3, FRAME)]


@needs_cc
def test_a_planted_module_in_a_shared_cache_is_not_loaded(monkeypatch, tmp_path) -> None:
    prog = program(tmp_path, 11)
    name = module_name(prog, tmp_path / "scratch", monkeypatch)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # as made by mkdir under umask 0, or PYSWITCH_CACHE=/tmp/x
    marker = tmp_path / "marker"
    plant(shared / name, marker)
    monkeypatch.setenv("PYSWITCH_CACHE", str(shared))
    monkeypatch.setenv("PYSWITCH_NATIVE", "auto")
    sw = Switch(prog)
    assert not marker.exists()
    assert sw.path == (f"python (cache folder {shared} is writable by group or others "
                       f"(mode 777): not loading modules from it)")
    assert forwards(sw)
    monkeypatch.setenv("PYSWITCH_NATIVE", "on")  # asked for native: the reason, raised
    with pytest.raises(native.NotNative, match="writable by group or others"):
        Switch(prog)
    assert not marker.exists()


@needs_cc
def test_a_cache_of_another_owner_is_refused(monkeypatch, tmp_path) -> None:
    prog = program(tmp_path, 12)
    monkeypatch.setenv("PYSWITCH_CACHE", str(tmp_path / "theirs"))
    (tmp_path / "theirs").mkdir(mode=0o700)
    monkeypatch.setattr(native, "_MODULES", {})
    uid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)  # as if another user owned it
    sw = Switch(prog)
    assert sw.path == (f"python (cache folder {tmp_path / 'theirs'} is owned by uid {uid}, "
                       f"not by us (uid {uid + 1}): not loading modules from it)")
    assert list((tmp_path / "theirs").iterdir()) == []


@needs_cc
def test_a_planted_or_changed_module_in_our_cache_is_rebuilt(monkeypatch, tmp_path) -> None:
    """In our own folder a module without our record (or not matching it) is never
    imported: it is rebuilt over, and the switch runs native."""
    prog = program(tmp_path, 13)
    name = module_name(prog, tmp_path / "scratch", monkeypatch)
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    marker = tmp_path / "marker"
    monkeypatch.setenv("PYSWITCH_CACHE", str(ours))
    for record in (None, "0" * 64):  # no record; a record of other bytes
        plant(ours / name, marker)
        if record is not None:
            (ours / f"{name}.sha256").write_text(record)
        monkeypatch.setattr(native, "_MODULES", {})
        sw = Switch(prog, native=True)
        assert not marker.exists()
        assert sw.path == "native" and forwards(sw)
        assert b"planted code ran" not in (ours / name).read_bytes()
        digest = hashlib.sha256((ours / name).read_bytes()).hexdigest()
        assert (ours / f"{name}.sha256").read_text() == digest + "\n"


@needs_cc
def test_a_symlinked_lock_is_not_followed(monkeypatch, tmp_path) -> None:
    prog = program(tmp_path, 14)
    name = module_name(prog, tmp_path / "scratch", monkeypatch)
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = ours / (name.split(".")[0] + ".lock")
    lock.symlink_to(victim)
    monkeypatch.setenv("PYSWITCH_CACHE", str(ours))
    sw = Switch(prog)
    assert sw.path.startswith("python (cannot build or load the module: ")
    assert victim.read_text() == "precious\n"


@needs_cc
def test_files_0600_and_folders_0700_whatever_the_umask(monkeypatch, tmp_path) -> None:
    prog = program(tmp_path, 15)
    cache = tmp_path / "a" / "b" / "native"
    monkeypatch.setenv("PYSWITCH_CACHE", str(cache))
    monkeypatch.setattr(native, "_MODULES", {})
    old = os.umask(0)
    try:
        assert Switch(prog, native=True).path == "native"
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", cache):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    files = sorted(cache.iterdir())
    assert sorted(p.suffix for p in files) == [".lock", ".sha256", ".so"]
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_the_parser_tables_follow_the_same_rule(monkeypatch, tmp_path) -> None:
    from pyswitch import frontend

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("PYSWITCH_CACHE_DIR", str(shared))
    assert frontend._table_cache() is False  # tables built each time, nothing unpickled
    ours = tmp_path / "x" / "ours"
    monkeypatch.setenv("PYSWITCH_CACHE_DIR", str(ours))
    old = os.umask(0)
    try:
        path = frontend._table_cache()
    finally:
        os.umask(old)
    assert path == str(ours / "p4-grammar.lark-cache")
    assert stat.S_IMODE(ours.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "x").stat().st_mode) == 0o700
    Path(path).write_bytes(b"not a pickle of ours")
    os.chmod(path, 0o666)  # writable by others: removed, never read
    assert frontend._table_cache() == path and not Path(path).exists()


@pytest.mark.parametrize("value", ["garbage", "maybe", "2"])
def test_a_bad_pyswitch_native_is_an_error(monkeypatch, tmp_path, value) -> None:
    monkeypatch.setenv("PYSWITCH_NATIVE", value)
    with pytest.raises(UsageError, match=f"PYSWITCH_NATIVE='{value}': expected auto, on "
                                         r"or off \(or 1, 0\)"):
        Switch(compile_p4(HERE / "p4" / "rt_forward.p4"))


def test_a_bad_pyswitch_native_is_one_line_at_the_command_line(tmp_path) -> None:
    env = dict(os.environ, PYSWITCH_NATIVE="garbage", PYTHONPATH=str(HERE.parent))
    r = subprocess.run([sys.executable, "-m", "pyswitch", "run", "--no-p4"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr == ("pyswitch run: PYSWITCH_NATIVE='garbage': expected auto, on or off "
                        "(or 1, 0)\n")


@needs_cc
def test_native_on_refuses_a_pipeline_before_the_old_switch_goes(monkeypatch, tmp_path) -> None:
    """P4Runtime under PYSWITCH_NATIVE=on: a cache folder that is not ours is refused with
    the reason (UNIMPLEMENTED) before the running switch is dropped."""
    from google.rpc import code_pb2

    from pyswitch.p4runtime.pipeline import Device
    from pyswitch.p4runtime.translate import P4RTError

    prog = program(tmp_path, 16)
    dev = Device()
    monkeypatch.setenv("PYSWITCH_NATIVE", "off")
    dev.load(prog, prog.to_bytes())
    running = dev.switch
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o775)
    monkeypatch.setenv("PYSWITCH_CACHE", str(shared))
    monkeypatch.setenv("PYSWITCH_NATIVE", "on")
    with pytest.raises(P4RTError) as exc:
        dev.load(prog, prog.to_bytes())
    assert exc.value.code == code_pb2.UNIMPLEMENTED
    assert "writable by group or others (mode 775)" in exc.value.message
    assert dev.switch is running


@needs_cc
def test_loose_files_of_ours_are_tightened_or_rebuilt(monkeypatch, tmp_path) -> None:
    """Files an older version left under umask 0 (0666) in our own folder: the lock is made
    0600, the module and its record (never trusted while others may write them) rebuilt."""
    prog = program(tmp_path, 17)
    cache = tmp_path / "ours"
    name = module_name(prog, cache, monkeypatch)
    for f in cache.iterdir():
        os.chmod(f, 0o666)
    before = (cache / name).stat().st_ino
    monkeypatch.setattr(native, "_MODULES", {})
    assert Switch(prog, native=True).path == "native"
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in cache.iterdir()} == \
        {f.name: 0o600 for f in cache.iterdir()}
    assert (cache / name).stat().st_ino != before  # rebuilt, not trusted
