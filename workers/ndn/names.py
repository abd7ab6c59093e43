"""The NDN name scheme of docs/design.md §6, built and parsed with python-ndn's
``Name``/``Component``.

Names (``<ps>``, ``<worker>``, ``<train>`` are identifiers: generic name components; ``v=<n>`` is a
*version-typed* component, ``Component.from_version``; ``seg=<i>`` a segment-typed one,
``Component.from_segment``)::

    step 2  task assignment       Interest/Data  /<worker>/<ps>/<train>
    step 3  training content      Interest/Data  /<ps>/<train>/<worker>[/seg=i]
    step 4  subscription          Interest       /insert/<ps>/<train>
            confirmation          Data           /distribute/<ps>/<train>          (empty)
    step 5  collection            Interest/Data  /<worker>/<ps>/<train>/v=<n>[/seg=i]
    step 6  distribution          Data           /distribute/<ps>/<train>/v=<n>[/seg=i]
    step 8  unsubscribe           Interest       /delete/<ps>/<train>
    step 9  active fetch          Interest/Data  /<ps>/<train>/v=<n>[/seg=i]

Why typed components  [decision]
    docs/design.md §6 writes ``/<ps>/<train>/<worker>`` (content) and ``/<ps>/<train>/<version>``
    (fetch) with the same shape, and likewise ``/<worker>/<ps>/<train>`` vs ``.../<version>``.
    Encoding the version as NDN's version-typed component (TLV type 0x36) and segments as
    segment-typed components (0x32) makes every name self-describing: a generic third component is a
    worker, a version-typed one a version.  No identifier can collide with a number.

Markers  [decision]
    ``insert``, ``distribute`` and ``delete`` are generic components in first position (as
    docs/design.md §6 writes them).  They are reserved: an identifier equal to one of them is
    rejected, so a marker is never mistaken for a node.  The routers use :func:`strip_marker` to get
    the persistent-PIT key ``/<ps>/<train>`` and the name the FIB routes on.

Identifiers: 1–64 characters of ``[A-Za-z0-9_.-]`` (readable in URIs, no escaping), not a marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ndn.encoding import Component, FormalName, Name, NonStrictName

INSERT = "insert"
DISTRIBUTE = "distribute"
DELETE = "delete"
MARKERS = (INSERT, DISTRIBUTE, DELETE)

_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_MARKER_COMPONENTS = {bytes(Component.from_str(m)): m for m in MARKERS}


class NdnNameError(ValueError):
    """An identifier or name that does not fit the scheme (message says which and why)."""


def check_id(ident: str, what: str = "identifier") -> str:
    """Return ``ident`` if it is a valid node/training identifier, else raise NdnNameError."""
    if not isinstance(ident, str) or not _ID.match(ident):
        raise NdnNameError(f"{what} {ident!r}: must be 1-64 characters of [A-Za-z0-9_.-]")
    if ident in MARKERS:
        raise NdnNameError(f"{what} {ident!r}: reserved NDN marker name")
    return ident


def _c(ident: str, what: str) -> bytearray:
    return Component.from_str(check_id(ident, what))


def _v(version: int) -> bytearray:
    if not isinstance(version, int) or version < 0:
        raise NdnNameError(f"version {version!r}: must be an integer >= 0")
    return Component.from_version(version)


def task_name(worker: str, ps: str, train: str) -> FormalName:
    """Step 2: ``/<worker>/<ps>/<train>`` (PS -> worker Interest, worker's accept/decline Data)."""
    return [_c(worker, "worker"), _c(ps, "ps"), _c(train, "train")]


def content_name(ps: str, train: str, worker: str) -> FormalName:
    """Step 3: ``/<ps>/<train>/<worker>`` (worker asks the PS for the model initialization)."""
    return [_c(ps, "ps"), _c(train, "train"), _c(worker, "worker")]


def train_prefix(ps: str, train: str) -> FormalName:
    """The persistent-PIT key ``/<ps>/<train>`` (also the prefix of fetch names)."""
    return [_c(ps, "ps"), _c(train, "train")]


def insert_name(ps: str, train: str) -> FormalName:
    """Step 4: subscription Interest ``/insert/<ps>/<train>``."""
    return [Component.from_str(INSERT), *train_prefix(ps, train)]


def delete_name(ps: str, train: str) -> FormalName:
    """Step 8: unsubscribe Interest ``/delete/<ps>/<train>``."""
    return [Component.from_str(DELETE), *train_prefix(ps, train)]


def distribute_name(ps: str, train: str, version: int | None = None) -> FormalName:
    """Step 4 confirmation (``version=None``) / step 6 distribution
    ``/distribute/<ps>/<train>/v``."""
    name = [Component.from_str(DISTRIBUTE), *train_prefix(ps, train)]
    if version is not None:
        name.append(_v(version))
    return name


def collect_name(worker: str, ps: str, train: str, version: int) -> FormalName:
    """Step 5: collection ``/<worker>/<ps>/<train>/v=<version>``."""
    return [*task_name(worker, ps, train), _v(version)]


def fetch_name(ps: str, train: str, version: int) -> FormalName:
    """Step 9: active fetch ``/<ps>/<train>/v=<version>``."""
    return [*train_prefix(ps, train), _v(version)]


def with_segment(name: NonStrictName, segment: int) -> FormalName:
    """``name`` with a segment-number component appended."""
    if not isinstance(segment, int) or segment < 0:
        raise NdnNameError(f"segment {segment!r}: must be an integer >= 0")
    return [*Name.normalize(name), Component.from_segment(segment)]


def split_segment(name: NonStrictName) -> tuple[FormalName, int | None]:
    """Split a trailing segment component off: ``(base, segment)`` or ``(name, None)``."""
    name = Name.normalize(name)
    if name and Component.get_type(name[-1]) == Component.TYPE_SEGMENT:
        return list(name[:-1]), Component.to_number(name[-1])
    return list(name), None


def strip_marker(name: NonStrictName) -> tuple[str | None, FormalName]:
    """``(marker, rest)`` when the first component is a marker, else ``(None, name)``."""
    name = Name.normalize(name)
    if name:
        marker = _MARKER_COMPONENTS.get(bytes(name[0]))
        if marker is not None:
            return marker, list(name[1:])
    return None, list(name)


def name_key(name: NonStrictName) -> tuple[bytes, ...]:
    """A hashable key of a name: the tuple of its encoded components (TLV incl. type)."""
    return tuple(bytes(c) for c in Name.normalize(name))


def to_uri(name: NonStrictName) -> str:
    """Human-readable URI (``/ps0/t/v=3/seg=1``) for logs and error messages."""
    return Name.to_str(Name.normalize(name))


class Kind(Enum):
    """What a name means in the protocol (from the viewpoint of its receiver)."""

    TASK = "task"  # /<worker>/<ps>/<train>
    CONTENT = "content"  # /<ps>/<train>/<worker>
    INSERT = "insert"  # /insert/<ps>/<train>
    DELETE = "delete"  # /delete/<ps>/<train>
    CONFIRM = "confirm"  # /distribute/<ps>/<train>
    DISTRIBUTE = "distribute"  # /distribute/<ps>/<train>/v=<n>
    COLLECT = "collect"  # /<worker>/<ps>/<train>/v=<n>
    FETCH = "fetch"  # /<ps>/<train>/v=<n>


@dataclass(frozen=True)
class Parsed:
    """A parsed protocol name; fields that the kind does not have are None."""

    kind: Kind
    ps: str
    train: str
    worker: str | None = None
    version: int | None = None
    segment: int | None = None


def _generic(comp: bytes | memoryview) -> str | None:
    if Component.get_type(comp) != Component.TYPE_GENERIC:
        return None
    try:
        text = bytes(Component.get_value(comp)).decode("ascii")
    except UnicodeDecodeError:
        return None
    return text if _ID.match(text) and text not in MARKERS else None


def _version(comp: bytes | memoryview) -> int | None:
    if Component.get_type(comp) != Component.TYPE_VERSION:
        return None
    return Component.to_number(comp)


def parse(name: NonStrictName) -> Parsed | None:
    """Classify a name of the scheme; None when it is not one (foreign or malformed).

    The shapes are disjoint thanks to the typed components, so no knowledge of which
    identifiers are PSs or workers is needed.
    """
    base, seg = split_segment(name)
    marker, rest = strip_marker(base)
    ids = [_generic(c) for c in rest]
    n = len(rest)
    if marker is not None:
        if n < 2 or ids[0] is None or ids[1] is None:
            return None
        ps, train = ids[0], ids[1]
        if marker == DISTRIBUTE:
            if n == 2 and seg is None:
                return Parsed(Kind.CONFIRM, ps, train)
            if n == 3 and (ver := _version(rest[2])) is not None:
                return Parsed(Kind.DISTRIBUTE, ps, train, version=ver, segment=seg)
            return None
        if n == 2 and seg is None:
            return Parsed(Kind.INSERT if marker == INSERT else Kind.DELETE, ps, train)
        return None
    if n == 3 and all(i is not None for i in ids):
        # /<a>/<b>/<c>: task (/<worker>/<ps>/<train>) and content (/<ps>/<train>/<worker>) share the
        # shape; task names never carry segments, content names may.  The receiver
        # disambiguates with its own identity (see parse_for).
        return Parsed(Kind.TASK, ps=ids[1], train=ids[2], worker=ids[0], segment=seg)
    if n == 3 and ids[0] is not None and ids[1] is not None:
        ver = _version(rest[2])
        if ver is not None:
            return Parsed(Kind.FETCH, ids[0], ids[1], version=ver, segment=seg)
        return None
    if n == 4 and all(i is not None for i in ids[:3]):
        ver = _version(rest[3])
        if ver is not None:
            return Parsed(Kind.COLLECT, ps=ids[1], train=ids[2], worker=ids[0], version=ver,
                          segment=seg)
    return None


def parse_for(name: NonStrictName, me: str, role: str) -> Parsed | None:
    """:func:`parse`, resolving the 3-identifier shape from the viewpoint of node ``me``.

    ``role`` is ``"worker"`` or ``"ps"``.  A worker reads ``/<me>/<x>/<y>`` as a task addressed to
    it and anything else of that shape as content ``/<ps>/<train>/<worker>``; a PS reads
    ``/<me>/<x>/<y>`` as content it serves and anything else as a task ``/<worker>/<ps>/<train>``.
    """
    if role not in ("worker", "ps"):
        raise NdnNameError(f"role {role!r}: must be 'worker' or 'ps'")
    p = parse(name)
    if p is None or p.kind is not Kind.TASK:
        return p
    as_task = (p.worker == me) if role == "worker" else (p.worker != me)
    if as_task:
        return p if p.segment is None else None
    # re-read /<a>/<b>/<c> as /<ps>/<train>/<worker>
    return Parsed(Kind.CONTENT, ps=p.worker or "", train=p.ps, worker=p.train, segment=p.segment)
