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
"""

from __future__ import annotations

import errno
import json
import os
import select
import stat
import time
from pathlib import Path
from typing import Any

from workers.common.files import write_json_atomic
from workers.ina.control import ControlRecord, RoundControl
from workers.ina.job import JobConfig


def request_path(control_file: str | Path) -> Path:
    """The job's request channel: the FIFO ``control.requests`` beside ``control.json``."""
    return Path(control_file).with_suffix(".requests")


def write_record(path: Path, record: ControlRecord) -> None:
    """Publish ``record`` (the PS only)."""
    write_json_atomic(path, record.to_json())


class ControlReader:
    """A worker's view of its job's control record (module docstring): :meth:`refresh` looks
    for a new version, :meth:`at` gives a round's members and schedules.  A job without a
    record (``cfg.control_file`` None) keeps the job file's in every round."""

    def __init__(self, cfg: JobConfig, check_every: float = 0.05) -> None:
        self.path = Path(cfg.control_file) if cfg.control_file else None
        self.check_every = check_every
        self._members = list(cfg.worker_ids)
        self._schedules = cfg.schedules
        self.record = ControlRecord(cfg.job_id)
        self._stamp: tuple[int, int, int] | None = None
        self._checked = float("-inf")

    @property
    def live(self) -> bool:
        """Whether members and schedules may change while the job runs."""
        return self.path is not None

    def refresh(self, now: float | None = None) -> bool:
        """Read the record again if it changed; True if a new version was read.  With
        ``now`` (time.monotonic), look at most once per ``check_every``."""
        if self.path is None:
            return False
        if now is not None:
            if now - self._checked < self.check_every:
                return False
            self._checked = now
        try:
            st = self.path.stat()
        except FileNotFoundError:  # the PS has not written it yet: version 0
            return False
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return False
        record = ControlRecord.from_json(json.loads(self.path.read_text()))
        self._stamp = stamp
        if record.version == self.record.version and record.job_id == self.record.job_id:
            return False
        self.record = record
        return True

    def at(self, round_: int) -> RoundControl:
        """Round ``round_``'s members and schedules, from the version read last."""
        return self.record.at(round_, self._members, self._schedules)


class RequestChannel:
    """The PS's end of the request channel: a FIFO it creates and holds open for reading
    *and* writing, so that it never reads end-of-file between two requests.  Put it in a
    ``select`` (:meth:`fileno`); :meth:`read` returns the complete request lines that came."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            if not stat.S_ISFIFO(self.path.stat().st_mode):
                self.path.unlink()  # not ours: a FIFO takes its place
        except FileNotFoundError:
            pass
        if not self.path.exists():
            os.mkfifo(self.path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
        self._partial = b""

    def fileno(self) -> int:
        return self.fd

    def read(self) -> list[str]:
        """The request lines received since the last call (a line cut by the pipe's
        capacity waits for its end)."""
        data = self._partial
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        *lines, self._partial = data.split(b"\n")
        return [ln.decode() for ln in lines if ln.strip()]

    def close(self) -> None:
        """Stop listening: later requests find no reader (:func:`send_request` says so)."""
        os.close(self.fd)
        self.path.unlink(missing_ok=True)


def send_request(path: Path, request: dict[str, Any], timeout_s: float = 10.0) -> bool:
    """Send one request to the job's PS (the controller's side); False if no PS listens on
    ``path`` (not started, or exited).  A request larger than the pipe is written as the PS
    reads it; a PS that reads nothing for ``timeout_s`` is a TimeoutError."""
    data = (json.dumps(request) + "\n").encode()
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
