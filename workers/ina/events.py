"""The machine-readable events the INA PS and workers print (docs/design.md §9): one JSON
object per line on standard output, read by the controller's progress bars and fault
monitors with :func:`parse_event` -- never by splitting human text.

::

    {"event": "round", "job": 1, "worker": 2, "round": 7, "time_s": 0.121, "retransmits": 0}
    {"event": "control", "job": 1, "version": 2, "kind": "members", "from_round": 4,
     "members": [0, 1], "cause": {"worker": "h3"}}
    {"event": "silent", "job": 1, "round": 5, "workers": [2], "after_s": 10.0}
    {"event": "refused", "job": 1, "reason": "from_round must be in 0..9, got 12",
     "kind": "schedules", "cause": {"switch": "agg0"}, "unreported": 0}

``round``: a worker finished a round.  ``control``: the PS wrote version ``version`` of the
job's control record (:mod:`workers.ina.control`; ``members`` is null for a schedule change).
``silent``: the PS's lowest incomplete round still lacks these members and it has heard nothing
from them for ``after_s`` seconds.  ``refused``: the PS refused a request on its channel
(the record is unchanged), the answer to its sender; ``kind`` and ``cause`` are the request's
if it had them, ``unreported`` counts the refusals left out before it under a flood
(:mod:`workers.ina.control_io`).  Other output lines (``ready``, errors, ``stopped``) are
for people and for the runner's start barrier; nothing parses them as events.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class RoundEvent:
    """A worker finished round ``round`` (after applying its sum)."""

    job: int
    worker: int
    round: int
    time_s: float
    retransmits: int


@dataclass(frozen=True)
class ControlEvent:
    """The PS wrote version ``version`` of the control record: a change from ``from_round``."""

    job: int
    version: int
    kind: str
    from_round: int
    members: list[int] | None = None
    cause: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SilentEvent:
    """The PS has not heard ``workers`` for ``after_s`` s while round ``round`` lacks them."""

    job: int
    round: int
    workers: list[int]
    after_s: float


@dataclass(frozen=True)
class RefusedEvent:
    """The PS refused a request on its control channel; the record is as it was."""

    job: int
    reason: str
    kind: str | None = None
    cause: dict[str, Any] = field(default_factory=dict)
    unreported: int = 0


Event = RoundEvent | ControlEvent | SilentEvent | RefusedEvent

NAMES: dict[type, str] = {RoundEvent: "round", ControlEvent: "control", SilentEvent: "silent",
                          RefusedEvent: "refused"}
_BY_NAME = {name: cls for cls, name in NAMES.items()}


def to_line(event: Event) -> str:
    """The event as its one JSON line (no newline)."""
    return json.dumps({"event": NAMES[type(event)], **asdict(event)})


def emit(event: Event) -> None:
    """Print the event on standard output at once (the controller follows it live)."""
    print(to_line(event), flush=True)


def parse_event(line: str) -> Event | None:
    """The event on ``line``, or None for a line that is not one (human text, or an object
    without a known ``event`` and its fields)."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    cls = _BY_NAME.get(data.get("event")) if isinstance(data, dict) else None
    if cls is None:
        return None
    try:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
    except TypeError:  # a required field missing
        return None
