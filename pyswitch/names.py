"""Names given to the in-process API: a table's, action's, register's or counter's full
name or, as the STF runner accepts, its short name when that is unambiguous (``l2`` for
``MyIngress.l2``); otherwise one `InvalidArgument` line with a "did you mean" (difflib).
Pure: no I/O."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from pyswitch.errors import InvalidArgument

INT_HINT = "values are ints (`pyswitch.values.mac`, `pyswitch.values.ipv4`)"


def suggest(want: str, names: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` with the closest of `names` (full or short), or ``""``."""
    names = list(names)
    if not isinstance(want, str) or not names:
        return ""
    short = {n.rsplit(".", 1)[-1]: n for n in names}
    best = difflib.get_close_matches(want, names, n=1, cutoff=0.6)
    if not best:
        close = difflib.get_close_matches(want.rsplit(".", 1)[-1], list(short), n=1,
                                          cutoff=0.5)  # 'l3' for 'l2'
        best = [short[close[0]]] if close else []
    return f" (did you mean {best[0]!r}?)" if best else ""


def resolve(names: Iterable[str], want: str, what: str, where: str = "") -> str:
    """The full name `want` stands for among `names`: itself, or the one name ending in
    ``.want``; InvalidArgument (unknown, with a suggestion; or ambiguous, with the
    candidates) otherwise. `what` is "table", "action", ...; `where` e.g. " of table 't'"."""
    names = list(names)
    if want in names:
        return want
    if not isinstance(want, str):
        raise InvalidArgument(f"{what} name {want!r} is not a str")
    found = [n for n in names if n.endswith("." + want)]
    if len(found) == 1:
        return found[0]
    if found:
        raise InvalidArgument(f"{what} {want!r} is ambiguous{where}: "
                              f"{', '.join(sorted(found))}")
    raise InvalidArgument(f"unknown {what} {want!r}{where}{suggest(want, names)}")


def check_int(v: object, what: str) -> None:
    """InvalidArgument naming `what` when `v` is not an int (a str given for a MAC or IPv4
    address is the usual slip)."""
    if not isinstance(v, int):
        raise InvalidArgument(f"{what} is {type(v).__name__} {v!r}: {INT_HINT}")
