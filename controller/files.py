"""Writing result and plan files: atomically, so an interrupted run never leaves half a file.

The function lives in :mod:`workers.common.files` (host processes write their reports with it
and must not import ``controller``); the controller uses it from here.
"""

from __future__ import annotations

from workers.common.files import write_json_atomic

__all__ = ["write_json_atomic"]
