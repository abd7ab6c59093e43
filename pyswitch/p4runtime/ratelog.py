"""A rate-limited logger for the P4Runtime server: a hostile or buggy client must not be able
to grow the switch's log without bound (one line per failed update did).

At most ``burst`` lines per ``window`` seconds get through; the rest are counted, and the next
line that gets through says how many were left out.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any


class RateLimitedLog:
    """Wraps a ``logging.Logger``; thread-safe."""

    def __init__(self, logger: logging.Logger, burst: int = 20, window: float = 10.0) -> None:
        self.logger = logger
        self.burst = burst
        self.window = window
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._sent = 0
        self.suppressed = 0  # left out since the last line that got through
        self.suppressed_total = 0

    def _admit(self) -> int | None:
        """None when this line must be left out, else the count to report with it."""
        with self._lock:
            now = time.monotonic()
            if now - self._start >= self.window:
                self._start, self._sent = now, 0
            if self._sent >= self.burst:
                self.suppressed += 1
                self.suppressed_total += 1
                return None
            self._sent += 1
            n, self.suppressed = self.suppressed, 0
            return n

    def log(self, level: int, msg: str, *args: Any, exc_info: bool = False) -> bool:
        """Log one line unless over the rate; returns whether it was written."""
        if not self.logger.isEnabledFor(level):
            return False
        n = self._admit()
        if n is None:
            return False
        if n:
            msg += f" [{n} similar lines left out]"
        self.logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def info(self, msg: str, *args: Any) -> bool:
        return self.log(logging.INFO, msg, *args)

    def warning(self, msg: str, *args: Any) -> bool:
        return self.log(logging.WARNING, msg, *args)

    def exception(self, msg: str, *args: Any) -> bool:
        return self.log(logging.ERROR, msg, *args, exc_info=True)
