"""pyswitch's native path: a program's pipeline compiled to C, built with gcc, loaded as an
extension module, running ``Switch.process`` with the same semantics as the Python path.

``cgen`` lowers the compiler's intermediate form (`pyswitch.ir`; one semantics: the
compiler's); this module builds it once per program into a cache folder and binds it to a switch's
registers, counters, tables and statistics, which stay the Python objects the control
plane reads and writes.  The path is chosen by ``PYSWITCH_NATIVE``:

- ``auto`` (the default): native where gcc and Python's headers are present and the
  program is within what ``cgen`` translates; otherwise the Python path, silently;
- ``off`` (or ``0``): always the Python path;
- ``on`` (or ``1``): native, or an error saying why not.

Any other value is an error (`UsageError`), not a silent ``auto``.

Built modules are loaded only from a cache folder that is ours (`pyswitch.cachedir`: owned
by the effective user, nobody else may write it; created 0700) and only when their bytes
match the SHA-256 recorded beside them (``NAME.sha256``, 0600) when we built them: a module
planted under the predictable name is never imported.  A cache folder that is not ours
leaves the Python path, with the reason in `Switch.path`; a module that does not match its
record is rebuilt over it.

`Switch.path` (and ``Switch.native_why``) tell which path a switch runs and why.  The same
machinery builds `portio.c`, the ports' batched receive and send (`portio`; `Port.path`).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from pyswitch import externs
from pyswitch.cachedir import NotOurs, check_ours, open_lock, private_dir, write_private
from pyswitch.errors import UsageError
from pyswitch.ir import ModuleItem
from pyswitch.native.cgen import NotNative, Unit

__all__ = ["NotNative", "attach", "build", "cache_dir", "check", "mode", "portio", "unavailable"]

_HERE = Path(__file__).resolve().parent
_MODULES: dict[str, Any] = {}  # module name -> loaded module
_REFUSED: dict[str, str] = {}  # module name -> why the program is not translated
_DIGEST: str | None = None


def mode() -> str:
    """The path chosen by ``PYSWITCH_NATIVE`` (``auto``, ``on`` or ``off``); UsageError
    for any other value (a typo must not silently mean ``auto``)."""
    raw = os.environ.get("PYSWITCH_NATIVE", "auto")
    v = raw.strip().lower()
    if v in ("0", "off", "no", "false"):
        return "off"
    if v in ("1", "on", "yes", "true"):
        return "on"
    if v in ("", "auto"):
        return "auto"
    raise UsageError(f"PYSWITCH_NATIVE={raw!r}: expected auto, on or off (or 1, 0)")


def cache_dir() -> Path:
    """Where built modules are kept: ``PYSWITCH_CACHE`` or ``~/.cache/pyswitch/native``
    (used only when it is ours: `_load`)."""
    d = os.environ.get("PYSWITCH_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "pyswitch" / "native"


def unavailable() -> str | None:
    """Why this machine cannot build the native path (no compiler, no headers), or None."""
    return None if _compiler() is not None else "no C compiler or no Python headers"


def _compiler() -> str | None:
    cc = os.environ.get("CC") or "gcc"
    inc = sysconfig.get_paths().get("include", "")
    if shutil.which(cc) is None or not Path(inc, "Python.h").exists():
        return None
    return cc


def check(ir: list[ModuleItem], meta: dict) -> None:
    """Raise NotNative (with the reason) unless the native path can run this program
    (its intermediate form `ir`, `Program.ir`, and meta)."""
    if _compiler() is None:
        raise NotNative("no C compiler or no Python headers")
    try:
        _trusted_cache()
    except OSError as e:  # a file where the folder should be, no permission
        raise NotNative(f"cannot use the cache folder: {e}") from None
    Unit(ir, meta, "check").translate(True)


def _trusted_cache() -> Path:
    """The cache folder, created 0700 if missing; NotNative when it is not ours (another
    owner, or writable by group or others): modules are never loaded from it."""
    try:
        return private_dir(cache_dir())
    except NotOurs as e:
        raise NotNative(f"{e}: not loading modules from it") from None


def build(ir: list[ModuleItem], meta: dict, dedupe: bool) -> Any:
    """The extension module of a program (its intermediate form `ir`): translated,
    compiled (once per program, under a lock, so that twenty switches starting at once
    build it once) and imported."""
    cc = _compiler()
    if cc is None:
        raise NotNative("no C compiler or no Python headers")
    digest = hashlib.sha256("\0".join([repr(ir), repr(meta["mbounds"]), repr(meta["hbounds"]),
                                       repr(meta.get("fbounds")), repr(meta.get("varbits")),
                                       str(dedupe), _translator_digest(),
                                       externs.digest()]).encode())
    name = f"_pswn_{digest.hexdigest()[:20]}"
    if name in _MODULES:
        return _MODULES[name]
    if name in _REFUSED:  # a program is translated (and refused) once per process
        raise NotNative(_REFUSED[name])
    unit = Unit(ir, meta, name)
    try:
        csrc = unit.translate(dedupe)
    except NotNative as e:
        _REFUSED[name] = str(e)
        raise
    mod = _load(cc, name, csrc)
    mod.context_names = sorted(unit.gidx, key=unit.gidx.__getitem__)
    _MODULES[name] = mod
    return mod


def _load(cc: str, name: str, csrc: str) -> Any:
    """Module `name` from the cache, built from `csrc` first if it is not there or does not
    match the digest we recorded when we built it (under a lock, so that twenty switches
    starting at once build it once), imported.  Raises NotNative when the cache folder is
    not ours (another owner, writable by group or others)."""
    d = _trusted_cache()
    so = d / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    fd = open_lock(d / f"{name}.lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _recorded(so) is None:
            _gcc(cc, csrc, so)
        data = _recorded(so)
        if data is None:  # pragma: no cover - only another process of ours could do this
            raise NotNative(f"{so} does not match the digest recorded when it was built")
    finally:
        os.close(fd)
    spec = importlib.util.spec_from_file_location(name, so)
    if spec is None or spec.loader is None:
        raise NotNative(f"cannot load {so}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _recorded(so: Path) -> bytes | None:
    """The bytes of module `so` when it is a regular file of ours whose SHA-256 is the one
    recorded in ``so.sha256`` (a file of ours) when we built it; None otherwise (absent, a
    link, planted, from a version that recorded nothing, or changed since)."""
    record = so.with_name(so.name + ".sha256")
    try:
        with open(so, "rb", opener=_nofollow) as f:
            _ours(f.fileno(), so)
            data = f.read()
        with open(record, "rb", opener=_nofollow) as f:
            _ours(f.fileno(), record)
            want = f.read(200).strip().decode("ascii", "replace")
    except OSError:  # absent, a link (O_NOFOLLOW), not ours (NotOurs)
        return None
    return data if hashlib.sha256(data).hexdigest() == want else None


def _nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)


def _ours(fd: int, path: Path) -> None:
    check_ours(os.fstat(fd), str(path), "file")


def portio() -> tuple[Any, str]:
    """(module, "") with the ports' batched receive and send in C (portio.c), or
    (None, why) where the Python loops of pyswitch.ports run: PYSWITCH_NATIVE=off, no
    compiler, or a failed build."""
    if mode() == "off":
        return None, "PYSWITCH_NATIVE=off"
    name = f"_pswn_portio_{_translator_digest()[:20]}"
    if name in _MODULES:
        return _MODULES[name], ""
    cc = _compiler()
    if cc is None:
        return None, "no C compiler or no Python headers"
    try:
        mod = _load(cc, name, (_HERE / "portio.c").read_text().replace("@MOD@", name))
    except (NotNative, OSError, ImportError, RuntimeError) as e:
        return None, str(e)
    _MODULES[name] = mod
    return mod, ""


def _translator_digest() -> str:
    """What the generated C depends on besides the program: this package's own sources,
    and the IR's proven bounds (`pyswitch.ir.bounds`, `pyswitch.ir.flow`), the only
    intervals cgen has."""
    global _DIGEST
    if _DIGEST is None:
        h = hashlib.sha256()
        for f in [*sorted(_HERE.iterdir()), *(_HERE.parent / "ir" / n for n in ("bounds.py",
                                                                                 "flow.py"))]:
            if f.suffix in (".py", ".h", ".c"):
                h.update(f.name.encode() + b"\0" + f.read_bytes())
        _DIGEST = h.hexdigest()
    return _DIGEST


def _gcc(cc: str, csrc: str, so: Path) -> None:
    """Build `so` from `csrc`: into a temporary file beside it (0600), renamed over it only
    when complete (a reader never sees half a module; nothing is left on failure), then its
    SHA-256 recorded in ``so.sha256`` (0600), which `_recorded` checks before every load."""
    inc = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory(prefix="pswn-") as tmp:
        c = Path(tmp) / "prog.c"
        c.write_text(csrc)
        fd, out = tempfile.mkstemp(dir=so.parent, prefix=f".{so.name}.")  # mode 0600
        os.close(fd)
        try:
            r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-fwrapv", "-w", f"-I{inc}",
                                f"-I{_HERE}", str(c), "-o", out],
                               capture_output=True, text=True, check=False)
            if r.returncode != 0:
                last = (r.stderr.strip().splitlines() or ["no message"])[-1]
                raise NotNative(f"{cc} failed: {last}")
            os.chmod(out, 0o600)  # the linker may have recreated it with the umask's mode
            digest = hashlib.sha256(Path(out).read_bytes()).hexdigest()
            os.replace(out, so)
            write_private(so.with_name(so.name + ".sha256"), digest.encode() + b"\n")
        finally:
            Path(out).unlink(missing_ok=True)


def attach(sw: Any, dedupe: bool, exit_cls: type, native: bool | None = None,
           enqueue: Any = None) -> tuple[Any, str]:
    """`sw`'s process compiled, bound to its registers, counters, tables and statistics:
    (process, "") on the native path, or (None, why) where the Python path runs.
    `native` True/False overrides PYSWITCH_NATIVE (on/off); `enqueue`: the switch's
    queue step (None: no queues, the copies go straight to egress)."""
    m = mode() if native is None else ("on" if native else "off")
    if m == "off":
        return None, "PYSWITCH_NATIVE=off" if native is None else "native=False"
    try:
        try:
            mod = build(sw.prog.ir, sw.prog.meta, dedupe)
        except (OSError, ImportError, RuntimeError) as e:  # the cache folder, the loader
            raise NotNative(f"cannot build or load the module: {e}") from None
    except NotNative as e:
        if m == "on":
            raise
        return None, str(e)
    ns = sw.ns
    try:
        for ext in externs.served():  # registers into C memory, seen from Python as views
            ext.native_state(sw, ns, sw.prog.meta.get(ext.meta_key, []), mod)
    except NotNative as e:
        if m == "on":
            raise
        return None, str(e)
    for n in mod.context_names:  # the exact tables it looks up: into C memory (exact.h)
        if n.endswith(".native"):
            ns[n[:-7]].attach_native(mod)
    ctx = tuple(ns[n[:-7]].native if n.endswith(".native") else ns[n]
                for n in mod.context_names)
    proc = mod.make(ctx, sw.stats.rx, sw.stats.tx, sw.stats, sw.mcast, sw._after_ingress,
                    sw._after_egress, exit_cls, enqueue)
    return proc, ""
