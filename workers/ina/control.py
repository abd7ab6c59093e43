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
left), ``cause`` always (it is copied into the change, for the record).  A schedule change of
a hierarchical job may carry ``"tree"`` (:meth:`workers.ina.tree.Tree.to_json`: its tree
after a fail-over, docs/protocol.md §5.1), kept in the change; the PS reads the rounds from
``from_round`` on with it, the workers ignore it.

Effective rounds  [decision]
    The PS picks them, because it alone knows ``E``, the lowest round it has not completed
    (:attr:`workers.ina.ps.PsState.current_round`).  A member change takes effect in ``E``:
    an earlier round is complete and cannot change; a later one would wait forever for the
    dead worker's contribution to ``E``.  A schedule change takes effect in the round the
    controller asks for, but never before ``E + 1``: no worker has started ``E + 1`` (it
    needs every RESULT of ``E``, which the PS sends only after writing the record), and every
    worker reads the record at the start of each round, so no worker mixes two schedules in
    one round.

Checked against the job  [decision]
    Anything that can write to the channel could otherwise stop every worker: a request is
    checked against the job it is for (:class:`JobBounds`) before anything is written --
    each schedule lists chunks ``0..n-1`` once each, ``agg_id`` fits the wire's 16 bits,
    ``fan_in`` is ``1..`` the job's workers, a round is one of the run's, numbers are JSON
    integers (``true`` and ``1.0`` are not), keys and sizes are the protocol's -- and the
    workers check every record they read the same way (:func:`check_record`).  The record
    holds at most :attr:`JobBounds.max_changes` changes (one member change per worker, one
    schedule change per round), so a flood of valid requests cannot grow it without bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workers.ina.tree import Tree, TreeError

Schedule = list[tuple[int, int, int]]

KINDS = ("members", "schedules")
KEYS = {"members": {"kind", "removed", "schedules", "cause"},
        "schedules": {"kind", "from_round", "schedules", "cause", "tree"}}
AGG_ID_MAX = 0xFFFF  # agg_id:16 on the wire (workers.ina.wire)
FAN_IN_MAX = 0xFF  # fan_in:8
CAUSE_KEYS, CAUSE_TEXT = 8, 200  # a cause is a few words for the record: {"switch": "agg0"}


class RequestError(ValueError):
    """A request the PS refuses (one line saying why); the record is left as it was."""


class RecordError(ValueError):
    """A control record a worker cannot use (one line saying why)."""


@dataclass(frozen=True)
class JobBounds:
    """What a request or a record is checked against: the job's id, its workers (the job
    file's), its chunks per round and its rounds."""

    job_id: int
    workers: tuple[int, ...]
    n_chunks: int
    rounds: int

    @property
    def max_changes(self) -> int:
        """Changes a record may hold: one member change per worker, one schedule change per
        round (a later one for the same round replaces it in effect anyway)."""
        return len(self.workers) + self.rounds

    @property
    def max_line(self) -> int:
        """The longest request line a valid request of this job needs, in bytes: every
        worker's schedule at 40 bytes an entry (``[4294967295, 65535, 255], ``: 26), and
        room for the rest."""
        return 4096 + len(self.workers) * (64 + 40 * self.n_chunks)


def _int(value: Any, what: str, lo: int, hi: int, err: type[ValueError]) -> int:
    """``value`` if it is a JSON integer in ``lo..hi`` (not a bool, not a float), else
    ``err`` naming ``what``."""
    if type(value) is not int:
        raise err(f"{what} must be an integer, got {_short(value)}")
    if not lo <= value <= hi:
        raise err(f"{what} must be in {lo}..{hi}, got {_short(value)}")
    return value


def _short(value: Any) -> str:
    """A value for an error line: at most 60 characters of its repr."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_schedules(data: Any, job: JobBounds,
                    err: type[ValueError] = RequestError) -> dict[str, Schedule]:
    """``{worker: [[chunk, agg_id, fan_in], ...]}`` checked against ``job`` (module
    docstring, "Checked against the job"), with its entries as int triples; else ``err``."""
    if not isinstance(data, Mapping):
        raise err(f"schedules must be an object of worker -> entries, got {_short(data)}")
    known = {str(w) for w in job.workers}
    unknown = sorted(str(w) for w in data if w not in known)
    if unknown:
        raise err(f"schedules for worker(s) {', '.join(unknown[:8])}, not in the job "
                  f"({list(job.workers)})")
    fan_max = min(len(job.workers), FAN_IN_MAX)
    out: dict[str, Schedule] = {}
    for w, entries in data.items():
        if not isinstance(entries, list) or len(entries) != job.n_chunks:
            got = f"{len(entries)} entries" if isinstance(entries, list) else _short(entries)
            raise err(f"worker {w}: a schedule lists the job's {job.n_chunks} chunk(s) once "
                      f"each, got {got}")
        sched: Schedule = []
        seen = bytearray(job.n_chunks)
        for e in entries:
            if not isinstance(e, list) or len(e) != 3:
                raise err(f"worker {w}: schedule entries must be [chunk, agg_id, fan_in] "
                          f"integers, got {_short(e)}")
            c = _int(e[0], f"worker {w}: chunk", 0, job.n_chunks - 1, err)
            a = _int(e[1], f"worker {w}: agg_id", 0, AGG_ID_MAX, err)
            f = _int(e[2], f"worker {w}: fan_in", 1, fan_max, err)
            if seen[c]:
                raise err(f"worker {w}: chunk {c} is listed twice (each chunk once)")
            seen[c] = 1
            sched.append((c, a, f))
        out[w] = sched
    return out


def check_cause(data: Any, err: type[ValueError] = RequestError) -> dict[str, Any]:
    """A change's cause: a small flat object of short words and numbers (it is copied into
    the record and the PS's event), else ``err``."""
    if not isinstance(data, dict):
        raise err(f"cause must be an object, got {_short(data)}")
    if len(data) > CAUSE_KEYS:
        raise err(f"cause has {len(data)} keys (at most {CAUSE_KEYS})")
    for k, v in data.items():
        flat = v is None or isinstance(v, (bool, int, float, str))
        if len(k) > CAUSE_TEXT or not flat or (isinstance(v, str) and len(v) > CAUSE_TEXT) \
                or (type(v) is int and abs(v) > 2**53) \
                or (isinstance(v, float) and not math.isfinite(v)):
            raise err(f"cause {_short(k)}: a cause holds short words and numbers, got "
                      f"{_short(v)}")
    return dict(data)


@dataclass(frozen=True)
class Change:
    """One version of the record: what changes from ``from_round`` on."""

    version: int
    kind: str  # "members" | "schedules"
    from_round: int
    members: tuple[int, ...] | None  # the whole member set (kind "members"), else None
    schedules: dict[str, Schedule]  # worker id (str) -> its schedule; others keep theirs
    cause: dict[str, Any] = field(default_factory=dict)
    # a hierarchical job's new aggregation tree (kind "schedules", a fail-over), its
    # Tree.to_json form; None: the tree does not change
    tree: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The change as it is stored in the record."""
        out: dict[str, Any] = {"version": self.version, "kind": self.kind,
                               "from_round": self.from_round}
        if self.members is not None:
            out["members"] = list(self.members)
        out["schedules"] = {w: [list(e) for e in s] for w, s in self.schedules.items()}
        out["cause"] = self.cause
        if self.tree is not None:
            out["tree"] = self.tree
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        """The change stored by :meth:`to_json` (unchecked: :func:`check_record` checks a
        record read from a file)."""
        members = data.get("members")
        return cls(version=int(data["version"]), kind=str(data["kind"]),
                   from_round=int(data["from_round"]),
                   members=tuple(int(w) for w in members) if members is not None else None,
                   schedules={str(w): [(int(c), int(a), int(f)) for c, a, f in s]
                              for w, s in data.get("schedules", {}).items()},
                   cause=dict(data.get("cause", {})), tree=data.get("tree"))


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


def check_tree(data: Any, job: JobBounds,
               error: type[Exception] = RequestError) -> dict[str, Any] | None:
    """A schedule change's tree (None: none): a :class:`workers.ina.tree.Tree` over the
    job's workers, else ``error``."""
    if data is None:
        return None
    try:
        tree = Tree.from_json(data)
    except (TreeError, AttributeError) as exc:
        raise error(f"tree: {exc}") from None
    if not set(tree.first) <= set(job.workers):
        raise error("tree: a worker that is not the job's")
    return tree.to_json()


def check_record(data: Any, job: JobBounds) -> ControlRecord:
    """A record read from a file, checked as the PS checks a request (module docstring):
    the job's id, versions ``1..N`` in order, at most ``job.max_changes``, rounds of the run,
    members a shrinking non-empty subset of the job's workers, schedules that fit the job;
    else RecordError saying what is wrong."""
    if not isinstance(data, dict) or set(data) != {"version", "job_id", "changes"}:
        raise RecordError("not a control record (an object of version, job_id, changes)")
    _int(data["job_id"], "job_id", job.job_id, job.job_id, RecordError)
    changes = data["changes"]
    if not isinstance(changes, list) or len(changes) > job.max_changes:
        raise RecordError(f"changes must be a list of at most {job.max_changes}")
    _int(data["version"], "version", len(changes), len(changes), RecordError)
    out: list[Change] = []
    members = set(job.workers)
    for i, c in enumerate(changes, 1):
        if not isinstance(c, dict) or c.get("kind") not in KINDS:
            raise RecordError(f"change {i}: not a change of kind {' or '.join(KINDS)}")
        kind = c["kind"]
        allowed = {"version", "kind", "from_round", "schedules", "cause"} | (
            {"members"} if kind == "members" else {"tree"})
        if not set(c) <= allowed or "members" in allowed and "members" not in c:
            raise RecordError(f"change {i}: keys {sorted(c)} are not those of a {kind} change")
        _int(c.get("version"), f"change {i}: version", i, i, RecordError)
        start = _int(c.get("from_round"), f"change {i}: from_round", 0, job.rounds - 1,
                     RecordError)
        now: tuple[int, ...] | None = None
        if kind == "members":
            m = c["members"]
            if not isinstance(m, list) or not m or len(m) > len(members) or any(
                    type(w) is not int or w not in members for w in m) or len(set(m)) != len(m):
                raise RecordError(f"change {i}: members {_short(m)} are not a non-empty set "
                                  f"of the members before it")
            now = tuple(m)
            members = set(m)
        out.append(Change(i, kind, start, now, check_schedules(c.get("schedules", {}), job,
                                                                RecordError),
                          check_cause(c.get("cause", {}), RecordError),
                          check_tree(c.get("tree"), job, RecordError)))
    return ControlRecord(job.job_id, out)


def parse_request(line: str | bytes) -> dict[str, Any]:
    """One request line as an object, or RequestError (the meaning is checked by
    :meth:`ControlLog.accept`): invalid UTF-8, JSON nested past the parser's depth and
    numbers of thousands of digits are refused like any other bad line."""
    if isinstance(line, bytes):
        try:
            line = line.decode()
        except UnicodeDecodeError as exc:
            raise RequestError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    text = line.strip()
    if not text.startswith("{"):  # most garbage: no parser call
        raise RequestError(f"a request is a JSON object, got {_short(text)}")
    try:
        req = json.loads(text)
    except RecursionError:
        raise RequestError("JSON nested too deep") from None
    except ValueError as exc:  # also an integer past Python's digit limit
        raise RequestError(f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(req, dict):
        raise RequestError(f"a request is a JSON object, got {_short(text)}")
    return req


class ControlLog:
    """The PS's side of the record: it alone turns requests into changes (module docstring,
    "Effective rounds"); the PS writes :attr:`record` after each."""

    def __init__(self, job: JobBounds) -> None:
        self.job = job
        self.record = ControlRecord(job.job_id)
        self.workers = sorted(job.workers)  # the job file's: who may be named
        self.members = list(self.workers)  # the newest member set (members only leave)

    def accept(self, request: Any, lowest_incomplete: int) -> Change:
        """The next change for ``request`` (module docstring, "Checked against the job"),
        appended to the record; ``lowest_incomplete`` is the PS's lowest incomplete round.
        RequestError leaves the record unchanged."""
        if not isinstance(request, Mapping):
            raise RequestError(f"a request is a JSON object, got {_short(request)}")
        kind = request.get("kind")
        if not isinstance(kind, str) or kind not in KINDS:
            raise RequestError(f"kind must be one of {', '.join(KINDS)}, got {_short(kind)}")
        extra = sorted(str(k) for k in request if k not in KEYS[kind])
        if extra:
            raise RequestError(f"a {kind} request has no key(s) {', '.join(extra[:5])}")
        if self.record.version >= self.job.max_changes:
            raise RequestError(f"the record holds its {self.job.max_changes} changes already "
                               f"(one per worker and per round)")
        schedules = check_schedules(request.get("schedules", {}), self.job)
        cause = check_cause(request.get("cause", {}))
        last = self.job.rounds - 1
        members: tuple[int, ...] | None = None
        if kind == "members":
            removed = request.get("removed")
            if not isinstance(removed, list) or len(removed) > len(self.workers) or not all(
                    type(w) is int for w in removed):
                raise RequestError(f"removed must be a list of worker ids, got "
                                   f"{_short(removed)}")
            gone = set(removed)
            left = [w for w in self.members if w not in gone]
            if left == self.members:
                raise RequestError(f"removes no member (members {self.members}, removed "
                                   f"{sorted(gone)[:8]})")
            if not left:
                raise RequestError("would remove every member")
            members, start = tuple(left), lowest_incomplete
        else:
            asked = _int(request.get("from_round"), "from_round", 0, last, RequestError)
            if not schedules:
                raise RequestError("a schedules change needs schedules")
            start = max(asked, lowest_incomplete + 1)
        if start > last:
            raise RequestError(f"no round left to change (the run's rounds are 0..{last}; "
                               f"the PS is in round {lowest_incomplete})")
        tree = check_tree(request.get("tree"), self.job)
        change = Change(self.record.version + 1, kind, start, members, schedules, cause, tree)
        self.record.changes.append(change)
        if members is not None:
            self.members = list(members)
        return change


class RefusalLog:
    """How often the PS reports refused requests (pure; time from the caller): every one
    while they are rare, at most ``per_second`` a second under a flood, each report saying
    how many were left unreported since the last (so a flood costs the PS no more than
    that many lines)."""

    def __init__(self, per_second: int = 20) -> None:
        self.per_second = per_second
        self.total = 0
        self._window = float("-inf")
        self._in_window = 0
        self._unreported = 0

    def report(self, now: float) -> int | None:
        """Count one refusal at ``now``; the number left unreported before it if this one
        is to be reported, else None."""
        self.total += 1
        if now - self._window >= 1.0:
            self._window, self._in_window = now, 0
        if self._in_window >= self.per_second:
            self._unreported += 1
            return None
        self._in_window += 1
        skipped, self._unreported = self._unreported, 0
        return skipped
