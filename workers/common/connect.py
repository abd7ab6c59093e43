"""A TCP connection to a peer that may not be listening yet (its host starts later)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

RETRY_S = 0.05  # between two attempts: a peer's listener is up within a few of them


def connect_retry(addr: tuple[str, int], within_s: float, *, bind: str | None = None,
                  setup: Callable[[socket.socket], None] | None = None) -> socket.socket:
    """A TCP socket connected to ``addr``, tried every :data:`RETRY_S` for ``within_s``
    seconds; each attempt is a fresh socket, bound to ``bind`` (an address, any port) and
    given to ``setup`` before it connects (socket options).  Raises the last attempt's
    ``OSError`` when the time is up."""
    deadline = time.monotonic() + within_s
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if bind is not None:
                s.bind((bind, 0))
            if setup is not None:
                setup(s)
            s.connect(addr)
            return s
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(RETRY_S)
