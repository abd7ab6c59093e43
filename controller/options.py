"""argparse ``type`` functions for numeric options: one short line for a bad value.

Python's ``int`` accepts ``1_000`` and refuses a 5,000-digit string with a ValueError that
argparse does not turn into a usage error; ``float`` accepts ``inf``, ``nan`` and ``1e400``
(= inf), which would reach an LP solver or a timer.  These types refuse all of them with a
message argparse prints as ``argument --X: ...`` (controller.cli.main shows it as one line).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from topo.models import TopologyError, parse_topology

__all__ = ["MAX_COMBINATIONS", "int_option", "finite_float", "short", "read_topology"]

MAX_COMBINATIONS = 1_000_000
"""Largest --max-combinations: each combination is one LP (milliseconds to seconds), so a
larger limit only turns a typo into hours of work."""


def int_option(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for whole numbers in ``[lo, hi]``: the message is one short line
    (a 5,000-digit value is neither echoed back nor handed to ``int``, which refuses it with
    a ValueError of its own)."""

    def parse(text: str) -> int:
        t = text.strip()  # digits only: no "1_000", no "²" (isdigit() but not int())
        body = t[1:] if t[:1] in "+-" else t
        if not (body.isascii() and body.isdigit()):
            # argparse's own wording for type=int, which scripts and tests already match
            want = "a whole number" + ("" if lo is None and hi is None else
                                        f" {_bounds(lo, hi)}")
            raise argparse.ArgumentTypeError(f"invalid int value: {short(text)!r} "
                                             f"(expected {want})")
        if len(body) > 30:
            raise argparse.ArgumentTypeError(f"{len(body)}-digit number is out of range")
        value = int(t)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{value} is out of range "
                                             f"(must be {_bounds(lo, hi)})")
        return value

    return parse


def _bounds(lo: int | None, hi: int | None) -> str:
    if hi is None:
        return f">= {lo}"
    if lo is None:
        return f"<= {hi:,}"
    return f"between {lo} and {hi:,}"


def finite_float(text: str) -> float:
    """An argparse ``type``: a finite number (``inf``, ``nan`` and ``1e400`` are refused
    here rather than reaching the LP solver)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {short(text)!r} (expected a "
                                         "number such as 0.5 or 2e-3)") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{short(text)!r} is not a finite number")
    return value


def short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def read_topology(spec: str) -> Any:
    """:func:`topo.models.parse_topology`, with the one ValueError it lets through -- a JSON
    integer of more than 4,300 digits, which ``json.loads`` refuses outside its
    JSONDecodeError -- turned into a :class:`TopologyError` naming the file; every message
    starts with ``--topo``, the option the spec came from."""
    try:
        return parse_topology(spec)
    except TopologyError as exc:  # named by its option, as every other mistake is
        raise TopologyError(f"--topo {exc}") from None
    except ValueError as exc:
        reason = str(exc).split("; use")[0]
        raise TopologyError(f"--topo {short(spec, 200)}: not a usable topology "
                            f"({reason})") from None

