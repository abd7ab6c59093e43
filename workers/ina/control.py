"""A job's control record: the members and schedules of every round while the job runs
(docs/design.md §9) -- the pure part: its JSON form, how one round's state follows from it,
and how the PS turns the controller's requests into changes.  The files and the channel are
:mod:`workers.ina.control_io`.

The record (``control.json`` in the job's folder; written atomically, by the PS alone)::

    {"version": 2, "job_id": 1,
     "changes": [
      {"version": 1, "kind": "schedules", "from_round": 6,
       "schedules": {"0": [[chunk, agg_id, fan_in], ...], "1": [...], "2": [...]},
       "cause": {"switch": "agg0"}},
      {"version": 2, "kind": "members", "from_round": 4, "members": [0, 2],
       "schedules": {"0": [...], "2": [...]}, "cause": {"worker": "h3"}}]}

``version`` counts the changes (0: the job file's members and schedules hold in every round);
changes are only appended, so ``changes[i]["version"] == i + 1`` and a newer record is always a
longer file.  Round ``r`` starts from the job file's members and schedules and applies, in
version order, every change with ``from_round <= r``: its ``members`` (kind ``members``)
replace the member set, its ``schedules`` replace those workers' schedules.  A newer change
wins over an older one even where it takes effect earlier, because it was computed knowing
more (a worker removed after a re-plan gets the survivors' schedules of the newer plan).

Requests (controller → PS, one JSON object per line, :func:`parse_request`)::

    {"kind": "members", "removed": [ids], "schedules": {...}, "cause": {...}}
    {"kind": "schedules", "from_round": R, "schedules": {...}, "cause": {...}}

``schedules`` is optional for a member change (PS-only schedules do not depend on who is
left), ``cause`` always (it is copied into the change, for the record).

Effective rounds  [decision]
    The PS picks them, because it alone knows ``E``, the lowest round it has not completed
    (:attr:`workers.ina.ps.PsState.current_round`).  A member change takes effect in ``E``:
    an earlier round is complete and cannot change; a later one would wait forever for the
    dead worker's contribution to ``E``.  A schedule change takes effect in the round the
    controller asks for, but never before ``E + 1``: no worker has started ``E + 1`` (it
    needs every RESULT of ``E``, which the PS sends only after writing the record), and every
    worker reads the record at the start of each round, so no worker mixes two schedules in
    one round.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Schedule = list[tuple[int, int, int]]

KINDS = ("members", "schedules")


class RequestError(ValueError):
    """A request the PS refuses (one line saying why); the record is left as it was."""


@dataclass(frozen=True)
class Change:
    """One version of the record: what changes from ``from_round`` on."""

    version: int
    kind: str  # "members" | "schedules"
    from_round: int
    members: tuple[int, ...] | None  # the whole member set (kind "members"), else None
    schedules: dict[str, Schedule]  # worker id (str) -> its schedule; others keep theirs
    cause: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The change as it is stored in the record."""
        out: dict[str, Any] = {"version": self.version, "kind": self.kind,
                               "from_round": self.from_round}
        if self.members is not None:
            out["members"] = list(self.members)
        out["schedules"] = {w: [list(e) for e in s] for w, s in self.schedules.items()}
        out["cause"] = self.cause
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        """The change stored by :meth:`to_json`."""
        members = data.get("members")
        return cls(version=int(data["version"]), kind=str(data["kind"]),
                   from_round=int(data["from_round"]),
                   members=tuple(int(w) for w in members) if members is not None else None,
                   schedules=_schedules(data.get("schedules", {})),
                   cause=dict(data.get("cause", {})))


@dataclass(frozen=True)
class RoundControl:
    """One round's state: who is a member and every worker's schedule."""

    members: list[int]
    schedules: dict[str, Schedule]
    version: int  # the newest change in force (0: none, the job file's state)
    replans: int  # schedule changes (kind "schedules") in force: the workers' schedule_version

    def schedule(self, worker_id: int) -> Schedule:
        """``worker_id``'s schedule in this round."""
        return self.schedules[str(worker_id)]


@dataclass
class ControlRecord:
    """The whole record (module docstring): the job and its changes, oldest first."""

    job_id: int
    changes: list[Change] = field(default_factory=list)

    @property
    def version(self) -> int:
        """How many changes the record holds (0: none yet)."""
        return len(self.changes)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form (the version first, where a reader looks)."""
        return {"version": self.version, "job_id": self.job_id,
                "changes": [c.to_json() for c in self.changes]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ControlRecord:
        """The record written by :meth:`to_json`; a version that does not match its changes
        is refused (it would mean a second writer or a torn file)."""
        rec = cls(int(data["job_id"]), [Change.from_json(c) for c in data["changes"]])
        if int(data["version"]) != rec.version or any(
                c.version != i for i, c in enumerate(rec.changes, 1)):
            raise ValueError(f"control record: version {data['version']} does not match its "
                             f"{rec.version} change(s)")
        return rec

    def at(self, round_: int, members: Iterable[int],
           schedules: Mapping[str, Schedule]) -> RoundControl:
        """Round ``round_``'s state, from the job file's ``members`` and ``schedules``
        (module docstring: every change in force, in version order)."""
        ids = sorted(int(w) for w in members)
        scheds = dict(schedules)
        version = replans = 0
        for c in self.changes:
            if c.from_round > round_:
                continue
            if c.members is not None:
                ids = sorted(c.members)
            scheds.update(c.schedules)
            version = c.version
            replans += c.kind == "schedules"
        return RoundControl(ids, scheds, version, replans)


def _schedules(data: Any) -> dict[str, Schedule]:
    """``{worker: [[chunk, agg_id, fan_in], ...]}`` with its entries as int triples, or
    RequestError."""
    if not isinstance(data, Mapping):
        raise RequestError(f"schedules must be an object of worker -> entries, got {data!r:.60}")
    out: dict[str, Schedule] = {}
    for w, entries in data.items():
        try:
            out[str(w)] = [(int(c), int(a), int(f)) for c, a, f in entries]
        except (TypeError, ValueError) as exc:
            raise RequestError(f"worker {w}: schedule entries must be [chunk, agg_id, "
                               f"fan_in] integers ({exc})") from None
    return out


def parse_request(line: str) -> dict[str, Any]:
    """One request line as an object, or RequestError (the shape is checked by
    :meth:`ControlLog.accept`)."""
    try:
        req = json.loads(line)
    except ValueError as exc:
        raise RequestError(f"not JSON ({exc})") from None
    if not isinstance(req, dict):
        raise RequestError(f"a request is a JSON object, got {line.strip()[:60]!r}")
    return req


class ControlLog:
    """The PS's side of the record: it alone turns requests into changes (module docstring,
    "Effective rounds"); the PS writes :attr:`record` after each."""

    def __init__(self, job_id: int, worker_ids: Iterable[int]) -> None:
        self.record = ControlRecord(job_id)
        self.workers = sorted(int(w) for w in worker_ids)  # the job file's: who may be named
        self.members = list(self.workers)  # the newest member set (members only leave)

    def accept(self, request: Mapping[str, Any], lowest_incomplete: int) -> Change:
        """The next change for ``request``, appended to the record; ``lowest_incomplete``
        is the PS's lowest incomplete round.  RequestError leaves the record unchanged."""
        kind = request.get("kind")
        if kind not in KINDS:
            raise RequestError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        schedules = _schedules(request.get("schedules", {}))
        unknown = sorted(set(schedules) - {str(w) for w in self.workers})
        if unknown:
            raise RequestError(f"schedules for worker(s) {', '.join(unknown)}, not in the job "
                               f"({self.workers})")
        cause = request.get("cause", {})
        if not isinstance(cause, dict):
            raise RequestError(f"cause must be an object, got {cause!r:.60}")
        members: tuple[int, ...] | None = None
        if kind == "members":
            removed = request.get("removed")
            if not isinstance(removed, list) or not all(isinstance(w, int) for w in removed):
                raise RequestError(f"removed must be a list of worker ids, got {removed!r:.60}")
            left = [w for w in self.members if w not in set(removed)]
            if left == self.members:
                raise RequestError(f"removes no member (members {self.members}, removed "
                                   f"{sorted(removed)})")
            if not left:
                raise RequestError("would remove every member")
            members, start = tuple(left), lowest_incomplete
        else:
            asked = request.get("from_round")
            if not isinstance(asked, int) or asked < 0:
                raise RequestError(f"from_round must be a round number, got {asked!r:.60}")
            if not schedules:
                raise RequestError("a schedules change needs schedules")
            start = max(asked, lowest_incomplete + 1)
        change = Change(self.record.version + 1, kind, start, members, schedules, dict(cause))
        self.record.changes.append(change)
        if members is not None:
            self.members = list(members)
        return change
