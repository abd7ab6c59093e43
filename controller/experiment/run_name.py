"""A run's folder name: the time to the second unless the user names it, claimed with
``mkdir`` so that runs started in the same second never share a folder."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Claim:
    """A run's name and the folders :func:`claim_name` created for it (``--out`` and its
    missing parents too, outermost last)."""

    name: str
    created: list[Path]

    def release(self) -> None:
        """Remove the created folders that are still empty: a run that failed before
        writing anything leaves nothing behind."""
        for d in self.created:
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()


def claim_name(out: Path, stem: str, suffixes: Sequence[str] = ("",)) -> Claim:
    """The first of ``stem``, ``stem-2``, ``stem-3``, ... for which every folder
    ``out/<name><suffix>`` is new; those folders are created here.  ``mkdir`` is atomic,
    so two runs that start in the same second (a default name is the time to the second)
    get two names, never one folder that both write into."""
    missing = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    for i in itertools.count(1):
        name = stem if i == 1 else f"{stem}-{i}"
        made: list[Path] = []
        try:
            for suffix in suffixes:
                (out / f"{name}{suffix}").mkdir()
                made.append(out / f"{name}{suffix}")
        except FileExistsError:
            for d in made:
                d.rmdir()
            continue
        return Claim(name, made + missing)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def released_on_failure(claim: Claim | None) -> Iterator[None]:
    """Run the body; if it raises, :meth:`Claim.release` ``claim`` (None: a name the user
    gave, nothing to release) and raise on."""
    try:
        yield
    except BaseException:
        if claim is not None:
            claim.release()
        raise
