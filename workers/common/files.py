"""Writing result and plan files: atomically, so an interrupted run never leaves half a file."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any, mode: int | None = None) -> None:
    """JSON to a temporary file in the same folder, then rename over ``path``.  ``mode``:
    the file's mode whatever the umask (None: an ordinary file, 0666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # mkstemp makes 0600; these are ordinary files
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def wait_for_file(path: Path, timeout: float) -> bool:
    """Whether ``path`` appeared within ``timeout`` seconds (polled every 10 ms): a
    process's start signal from the runner."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def ready_then_wait(prog: str, ready: str, start_file: str | None, timeout: float) -> bool:
    """Print ``ready`` (the runner waits for it), then wait for the runner's start file;
    False, with one error line naming ``prog``, when it does not come within ``timeout``."""
    print(ready, flush=True)
    if start_file is None or wait_for_file(Path(start_file), timeout):
        return True
    print(f"error: {prog}: no start signal ({start_file}) after {timeout:.0f} s",
          file=sys.stderr)
    return False
