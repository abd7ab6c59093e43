"""Ending a host process without the interpreter's teardown."""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process with ``code`` at once (``os._exit``).

    Why: a worker's interpreter teardown (numpy's modules, the garbage collector) took about
    50 ms of CPU after its files were written; 64 workers end together, so a k=8 run paid
    3 CPU-seconds on 2 cores at the end of its rounds (docs/scale.md).  Only for a process's
    ``__main__``, after every file it writes is closed: no ``atexit`` handler runs."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more to say
            pass
    os._exit(code)
