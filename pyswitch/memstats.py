"""Memory figures of the running switch process, for the control socket's ``memory`` op.

RSS alone cannot tell a leak from allocator high-water (memory freed by Python but kept by
pymalloc's arenas or glibc's heaps). These figures separate the two: ``py_blocks`` (live
Python-allocator blocks), ``gc_objects`` (objects the collector tracks), glibc's in-use
bytes (``malloc_in_use``, mallinfo2) and, once tracing is started, tracemalloc's live bytes
of everything allocated since (``traced_bytes``). Starting tracemalloc after a warm-up
makes ``traced_bytes`` the live growth itself: the bench (bench/p4runtime_abuse.py) reads it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import re
import sys
import tempfile
import threading
import tracemalloc
from typing import Any

_baseline: tracemalloc.Snapshot | None = None


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2() -> Any:
    """glibc's mallinfo2 function (glibc >= 2.33), or None."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _Mallinfo2
    return fn


_MALLINFO2 = _mallinfo2()


def _proc_status() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "Threads"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


_PYMALLOC_KEYS = {"arenas allocated current": "pymalloc_arenas",
                  "arenas highwater mark": "pymalloc_arenas_peak",
                  "bytes in allocated blocks": "pymalloc_in_use"}
_stats_lock = threading.Lock()


def pymalloc_figures() -> dict[str, int]:
    """pymalloc's arenas (1 MiB each, returned to the OS only when wholly free) and the
    bytes of live blocks in them, parsed from ``sys._debugmallocstats``. That function
    prints to the C stderr, so fd 2 is pointed at a temporary file for the call: a line
    another thread writes to stderr meanwhile lands there (and is lost)."""
    if not hasattr(sys, "_debugmallocstats"):
        return {}
    with _stats_lock, tempfile.TemporaryFile() as tmp:
        if sys.stderr is not None:
            sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("ascii", "replace")
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"# (.+?)\s+=\s+([\d,]+)$", line.strip())
        if m and m.group(1) in _PYMALLOC_KEYS:
            out[_PYMALLOC_KEYS[m.group(1)]] = int(m.group(2).replace(",", ""))
    return out


def memory_figures(collect: bool = False, pymalloc: bool = False) -> dict[str, Any]:
    """What the process holds now (``collect``: after a full garbage collection;
    ``pymalloc``: with :func:`pymalloc_figures`)."""
    if collect:
        gc.collect()
    status = _proc_status()
    out: dict[str, Any] = {
        "rss_kib": status.get("VmRSS"), "hwm_kib": status.get("VmHWM"),
        "threads": status.get("Threads"),
        "fds": len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None,
        "py_blocks": sys.getallocatedblocks(),
        "gc_objects": len(gc.get_objects()),
        "gc_counts": list(gc.get_count()),
        "tracing": tracemalloc.is_tracing(),
    }
    if _MALLINFO2 is not None:
        mi = _MALLINFO2()
        # in use by malloc (small blocks + mmapped), and what its arenas hold in all
        out["malloc_in_use"] = mi.uordblks + mi.hblkhd
        out["malloc_arena"] = mi.arena + mi.hblkhd
    if tracemalloc.is_tracing():
        out["traced_bytes"], out["traced_peak"] = tracemalloc.get_traced_memory()
    if pymalloc:
        out.update(pymalloc_figures())
    return out


def trace(action: str, frames: int = 1, top: int = 15) -> dict[str, Any]:
    """tracemalloc from the control socket: ``start`` (tracing from now on, baseline
    snapshot taken), ``diff`` (the ``top`` biggest growths since the baseline, as text),
    ``stop``."""
    global _baseline
    if action == "start":
        if not tracemalloc.is_tracing():
            tracemalloc.start(max(1, int(frames)))
        gc.collect()
        _baseline = tracemalloc.take_snapshot()
        return {"tracing": True}
    if action == "diff":
        if not tracemalloc.is_tracing() or _baseline is None:
            return {"error": "tracemalloc not started"}
        gc.collect()
        snap = tracemalloc.take_snapshot()
        key = "traceback" if tracemalloc.get_traceback_limit() > 1 else "lineno"
        stats = snap.compare_to(_baseline, key)[:max(0, int(top))]
        lines = []
        for st in stats:
            where = " <- ".join(f"{fr.filename}:{fr.lineno}" for fr in st.traceback)
            lines.append(f"{st.size_diff:+d} B {st.count_diff:+d} blocks: {where}")
        return {"diff": lines, "traced_bytes": tracemalloc.get_traced_memory()[0]}
    if action == "stop":
        tracemalloc.stop()
        _baseline = None
        return {"tracing": False}
    return {"error": f"unknown tracemalloc action {action!r}"}
