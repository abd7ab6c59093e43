"""The control record's files and channel (docs/design.md §9): the I/O shell around
:mod:`workers.ina.control`.

* The PS is the record's one writer (:func:`write_record`, atomic: a reader sees a whole
  version or the one before it).
* Workers read it with one :class:`ControlReader` each (members and schedules alike).
* The controller never writes the record: it sends requests to the PS with
  :func:`send_request` over the job's request channel, a FIFO next to the record
  (:func:`request_path`) that the PS creates before it says ``ready`` and watches in the same
  ``select`` as its socket (:class:`RequestChannel`) -- no file is polled.

Reading without notifications  [decision]
    A worker checks the record with one ``stat`` at the start of each round and, while a
    round waits, at most every ``check_every`` (50 ms); it parses the file only when the
    stat changed.  A worker's loop already wakes that often for its retransmission timers,
    so the check adds no wake-up, and every new version is visible to it: the writer replaces
    the file (a new inode) and only appends changes (a longer file), so a new version never
    has the old stat.  Inotify would need ctypes and Linux; a message from the PS over the
    data network would need its own reliable protocol; neither is worth it for a change or
    two per job.

Who may speak on the channel  [decision]
    The FIFO and the record are created 0600 whatever the umask, so only the job's user
    writes requests or reads the schedules.  Still, nothing on the channel can stop the PS
    or a worker: a line is at most :attr:`JobBounds.max_line` bytes (a longer one is dropped
    as it comes, with one refusal), bytes are buffered once each (no rebuilt string), one
    wake-up reads at most :data:`READ_BUDGET` bytes (the socket is served between two),
    and every request is checked against the job (:mod:`workers.ina.control`) before
    anything is written.  A refusal is one ``ps: control request refused: ...`` line on
    stderr and one ``refused`` event on stdout, the answer the controller reads
    (:class:`workers.ina.events.RefusedEvent`); under a flood at most
    :class:`workers.ina.control.RefusalLog`'s rate of them, each counting those left out.
    A worker that reads a record it cannot use stops with one line naming the record
    (:class:`ControlRecordError`), not a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import select
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workers.common.files import write_json_atomic
from workers.ina.constants import K
from workers.ina.control import (
    Change,
    ControlLog,
    ControlRecord,
    JobBounds,
    RecordError,
    RefusalLog,
    RequestError,
    RoundControl,
    check_record,
    parse_request,
)
from workers.ina.events import ControlEvent, RefusedEvent, emit
from workers.ina.job import JobConfig
from workers.ina.tree import Tree
from workers.ina.worker import n_chunks_for

READ_SIZE = 16384  # one os.read of the channel
READ_BUDGET = 1 << 20  # bytes one wake-up of the PS reads at most (the rest waits in the pipe)
MODE = 0o600  # the FIFO and the record: the job's user only


def job_bounds(cfg: JobConfig) -> JobBounds:
    """What the job's requests and records are checked against."""
    return JobBounds(job_id=cfg.job_id, workers=tuple(cfg.worker_ids),
                     n_chunks=n_chunks_for(cfg.n_values, K), rounds=cfg.rounds)


def request_path(control_file: str | Path) -> Path:
    """The job's request channel: the FIFO ``control.requests`` beside ``control.json``."""
    return Path(control_file).with_suffix(".requests")


def write_record(path: Path, record: ControlRecord) -> None:
    """Publish ``record`` (the PS only), 0600 whatever the umask."""
    write_json_atomic(path, record.to_json(), mode=MODE)


class ControlRecordError(SystemExit):
    """A record a worker cannot use: the worker stops with this one line (a SystemExit, so
    that the worker's ``finally`` still writes the rounds it finished and no traceback is
    printed; a caller that can do better catches it)."""


class ControlReader:
    """A worker's view of its job's control record (module docstring): :meth:`refresh` looks
    for a new version, :meth:`at` gives a round's members and schedules.  A job without a
    record (``cfg.control_file`` None) keeps the job file's in every round."""

    def __init__(self, cfg: JobConfig, check_every: float = 0.05) -> None:
        self.path = Path(cfg.control_file) if cfg.control_file else None
        self.check_every = check_every
        self.job = job_bounds(cfg)
        self._members = list(cfg.worker_ids)
        self._schedules = cfg.schedules
        self.record = ControlRecord(cfg.job_id)
        self._stamp: tuple[int, int, int] | None = None
        self._checked = float("-inf")

    @property
    def live(self) -> bool:
        """Whether members and schedules may change while the job runs."""
        return self.path is not None

    @property
    def max_bytes(self) -> int:
        """The largest record the job can have (every change as long as a request)."""
        return 4096 + self.job.max_changes * self.job.max_line

    def refresh(self, now: float | None = None) -> bool:
        """Read the record again if it changed; True if a new version was read.  With
        ``now`` (time.monotonic), look at most once per ``check_every``.  A record this job
        cannot use is :class:`ControlRecordError`."""
        if self.path is None:
            return False
        if now is not None:
            if now - self._checked < self.check_every:
                return False
            self._checked = now
        try:
            st = self.path.lstat()
        except FileNotFoundError:  # the PS has not written it yet: version 0
            return False
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return False
        try:
            record = self._load(st)
        except RecordError as exc:
            raise ControlRecordError(f"error: control record {self.path}: {exc}; this "
                                     f"process stops") from None
        self._stamp = stamp
        if record.version == self.record.version:
            return False
        self.record = record
        return True

    def _load(self, st: os.stat_result) -> ControlRecord:
        """The record at :attr:`path`, checked against the job and against the version read
        before (changes are only appended), or RecordError."""
        if not stat.S_ISREG(st.st_mode):
            raise RecordError("not a regular file")
        if st.st_size > self.max_bytes:
            raise RecordError(f"{st.st_size} bytes, more than the job's records take "
                              f"({self.max_bytes})")
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise RecordError(exc.strerror or str(exc)) from None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped since the lstat
                raise RecordError("not a regular file")
            raw = fh.read(self.max_bytes + 1)
        try:
            data = json.loads(raw.decode())
        except UnicodeDecodeError:
            raise RecordError("not UTF-8") from None
        except RecursionError:
            raise RecordError("JSON nested too deep") from None
        except ValueError as exc:
            raise RecordError(f"not JSON ({str(exc)[:80]})") from None
        record = check_record(data, self.job)
        old = self.record.changes
        if record.changes[:len(old)] != old:
            raise RecordError(f"version {record.version} does not extend version "
                              f"{len(old)} read before (changes are only appended)")
        return record

    def at(self, round_: int) -> RoundControl:
        """Round ``round_``'s members and schedules, from the version read last."""
        return self.record.at(round_, self._members, self._schedules)


class RequestChannel:
    """The PS's end of the request channel: a FIFO it creates (0600, in place of whatever
    had the name) and holds open for reading *and* writing, so that it never reads
    end-of-file between two requests.  Put it in a ``select`` (:meth:`fileno`); :meth:`read`
    returns the complete request lines that came, and a RequestError for each line longer
    than ``max_line`` bytes (dropped as it comes: it is never held whole)."""

    def __init__(self, path: Path, max_line: int = 1 << 20) -> None:
        self.path = Path(path)
        self.max_line = max_line
        try:
            self.path.unlink()  # a FIFO of an earlier run or anything else: a fresh one
        except FileNotFoundError:
            pass
        os.mkfifo(self.path, MODE)
        os.chmod(self.path, MODE)  # the umask may have taken bits away from ours
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW)
        st = os.fstat(self.fd)
        if not stat.S_ISFIFO(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            os.close(self.fd)
            raise OSError(errno.EPERM, f"{self.path}: not the FIFO this process made")
        self._line = bytearray()  # the line being received (at most max_line bytes)
        self._dropping = False  # inside a line past max_line: its bytes are dropped

    def fileno(self) -> int:
        return self.fd

    def read(self) -> list[bytes | RequestError]:
        """The request lines received since the last call (a line cut by the pipe's
        capacity waits for its end), at most :data:`READ_BUDGET` bytes' worth."""
        out: list[bytes | RequestError] = []
        budget = READ_BUDGET
        while budget > 0:
            try:
                chunk = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                break
            if not chunk:
                break
            budget -= len(chunk)
            self._feed(chunk, out)
        return out

    def _feed(self, chunk: bytes, out: list[bytes | RequestError]) -> None:
        """Split ``chunk`` into lines: each byte is looked at and copied once."""
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            if not self._dropping:
                if len(self._line) + len(piece) > self.max_line:
                    out.append(RequestError(f"a line longer than {self.max_line} bytes "
                                            f"(dropped)"))
                    self._line.clear()
                    self._dropping = True
                else:
                    self._line += piece
            if nl < 0:
                return
            if not self._dropping and self._line.strip():
                out.append(bytes(self._line))
            self._line.clear()
            self._dropping = False
            start = nl + 1

    def close(self) -> None:
        """Stop listening: later requests find no reader (:func:`send_request` says so)."""
        os.close(self.fd)
        self.path.unlink(missing_ok=True)


class PsControl:
    """The PS's control shell: the request channel, the record and its events (module
    docstring).  Created before the PS says ``ready``.  The requests come on the channel, or
    are handed in by a simulated network's controller (``channel=False``, :meth:`apply`);
    ``ps`` is the PS's :class:`workers.ina.driver.PsDriver` (its ``state``,
    ``change_members`` and ``deliver``)."""

    def __init__(self, cfg: JobConfig, path: Path, channel: bool = True,
                 events: Callable[[Any], None] = emit) -> None:
        self.path, self.events = path, events
        self.log = ControlLog(job_bounds(cfg))
        # version 0 first: a folder used again must not show the last run's changes
        write_record(self.path, self.log.record)
        self.channel = (RequestChannel(request_path(self.path), self.log.job.max_line)
                        if channel else None)
        self.refusals = RefusalLog()

    def take(self, ps: Any, at_s: float) -> list[Change]:
        """Apply the requests that came on the channel (:meth:`apply`)."""
        return self.apply(self.channel.read() if self.channel else [], ps, at_s)

    def apply(self, lines: list[Any], ps: Any, at_s: float) -> list[Change]:
        """Apply request lines: each becomes the record's next version (written before any
        RESULT it causes is sent) and one ``control`` event; a bad one is refused (module
        docstring) and changes nothing."""
        done = []
        for line in lines:
            before = list(self.log.members)
            request: Any = None
            try:
                if isinstance(line, RequestError):  # the channel's own refusal (too long)
                    raise line
                request = parse_request(line)
                change = self.log.accept(request, ps.state.current_round)
            except RequestError as exc:
                self._refuse(exc, request)
                continue
            out = None
            if change.tree is not None:  # a hierarchical job's tree, from that round on
                ps.change_tree(Tree.from_json(change.tree), change.from_round)
            if change.members is not None:
                removed = sorted(set(before) - set(change.members))
                e, out = ps.change_members(list(change.members), removed, at_s)
                assert e == change.from_round  # both are the lowest incomplete round
            write_record(self.path, self.log.record)
            self.events(ControlEvent(job=self.log.record.job_id, version=change.version,
                                     kind=change.kind, from_round=change.from_round,
                                     members=list(change.members) if change.members else None,
                                     cause=change.cause))
            if out is not None:
                ps.deliver(out)
            done.append(change)
        return done

    def _refuse(self, exc: RequestError, request: Any) -> None:
        """One refusal: a stderr line and a ``refused`` event, unless a flood is on."""
        skipped = self.refusals.report(time.monotonic())
        if skipped is None:
            return
        more = f" ({skipped} more refused, not reported)" if skipped else ""
        print(f"ps: control request refused: {exc}{more}", file=sys.stderr, flush=True)
        cause = request.get("cause") if isinstance(request, dict) else None
        kind = request.get("kind") if isinstance(request, dict) else None
        self.events(RefusedEvent(job=self.log.record.job_id, reason=str(exc),
                                 kind=kind if isinstance(kind, str) and len(kind) < 40 else None,
                                 cause=cause if isinstance(cause, dict) and len(str(cause)) < 400
                                 else {}, unreported=skipped))

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


def send_request(path: Path, request: dict[str, Any], timeout_s: float = 10.0) -> bool:
    """Send one request to the job's PS (the controller's side); False if no PS listens on
    ``path`` (not started, or exited).  A request larger than the pipe is written as the PS
    reads it; a PS that reads nothing for ``timeout_s`` is a TimeoutError.  The PS answers
    with a ``control`` or a ``refused`` event on its standard output."""
    data = memoryview((json.dumps(request) + "\n").encode())  # sent in pieces: no copies
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # the FIFO is there, its reader is gone
            return False
        raise
    try:
        deadline = time.monotonic() + timeout_s
        while data:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                pass
            except BrokenPipeError:
                return False
            if data:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path}: the PS read no request for {timeout_s:g} s")
                select.select([], [fd], [], 0.05)
        return True
    finally:
        os.close(fd)
