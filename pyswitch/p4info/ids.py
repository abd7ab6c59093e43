"""P4Runtime ids and aliases the way p4c assigns them (control-plane/p4RuntimeSymbolTable).

Rules, so that a client written against p4c's P4Info finds the same numbers here:

- every P4Info entity is a symbol of one kind (action, table, counter, ...), named by its
  fully qualified control-plane name; a second symbol of the same kind and name is the
  same symbol (p4c deduplicates, e.g. one top-level action localised into two controls);
- a symbol with an ``@id(N)`` annotation gets N, with the kind's prefix byte put in its top
  byte when N has none (a wrong prefix or an id given twice is an error);
- then, kind by kind in the order of the prefix values, the remaining names of that kind
  in sorted (byte) order get ``prefix << 24 | (h & 0xffffff)`` where h is the Jenkins
  one-at-a-time hash of the name; on collision with any id already given, h is incremented
  (linear probing, so the result depends on that sorted order);
- the alias is the shortest dot-separated suffix of the name that no other symbol of any
  kind ends with (the whole name when there is none).
"""

from __future__ import annotations

from collections.abc import Iterable

from p4.config.v1 import p4info_pb2

P = p4info_pb2.P4Ids


class IdError(ValueError):
    """An ``@id`` annotation p4c would reject."""


def jenkins_one_at_a_time(s: str) -> int:
    h = 0
    for b in s.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class SymbolTable:
    """Collect with `add`, then call `assign` once; `id` and `alias` answer afterwards."""

    def __init__(self) -> None:
        self._kinds: dict[int, dict[str, int | None]] = {}
        self._assigned: set[int] = set()
        self._names: list[str] = []
        self._suffix_count: dict[tuple[str, ...], int] = {}

    def add(self, kind: int, name: str, user_id: int | None = None) -> None:
        table = self._kinds.setdefault(kind, {})
        if name in table:
            return
        given = None
        if user_id is not None:
            prefix = kind << 24
            if user_id & 0xFF000000 and user_id & 0xFF000000 != prefix:
                raise IdError(f"{name}: @id has the wrong 8-bit prefix")
            given = user_id | prefix
            if given in self._assigned:
                raise IdError(f"@id {given} is assigned to multiple declarations")
            self._assigned.add(given)
        table[name] = given
        if name not in self._names:
            self._names.append(name)
            parts = tuple(name.split("."))
            for k in range(1, len(parts) + 1):
                suf = parts[-k:]
                self._suffix_count[suf] = self._suffix_count.get(suf, 0) + 1

    def assign(self) -> None:
        for kind in sorted(self._kinds):
            table = self._kinds[kind]
            for name in sorted((n for n, i in table.items() if i is None),
                               key=lambda n: n.encode()):
                h = jenkins_one_at_a_time(name)
                start = h
                while True:
                    cand = (kind << 24) | (h & 0xFFFFFF)
                    if cand not in self._assigned:
                        break
                    h = (h + 1) & 0xFFFFFFFF
                    if h == start:
                        raise IdError(f"no available id to represent {name} in P4Runtime")
                self._assigned.add(cand)
                table[name] = cand

    def id(self, kind: int, name: str) -> int:
        i = self._kinds[kind][name]
        assert i is not None, "assign() not called"
        return i

    def alias(self, name: str) -> str:
        parts = tuple(name.split("."))
        for k in range(1, len(parts) + 1):
            if self._suffix_count.get(parts[-k:], 0) < 2:
                return ".".join(parts[-k:])
        return name

    def names(self, kind: int) -> Iterable[str]:
        return self._kinds.get(kind, {}).keys()
