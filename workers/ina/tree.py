"""A hierarchical job's aggregation tree: who is whose child, and what a packet's bits mean.

A *hierarchical* job (docs/protocol.md §5.1) is not bounded by the bitmap's width: each
aggregation point (a switch) counts its own **children** -- a worker whose GRADs it takes,
or an aggregation point below whose PARTIAL is one contribution -- and its slots hold the
children's bits, ``bit i = child i`` of that switch, at most ``MAX_WORKERS`` of them.  The
controller numbers each switch's children and writes the numbering into the switch's
``ina_child`` table; the PS reads the same numbering from the job file (``JobConfig.tree``)
and turns every piece it receives back into the set of workers it sums:

* a GRAD (a worker's own, whichever way it came: fall-back, retransmission, bypass) holds
  ``{worker_id}``;
* a PARTIAL names the switch that emitted it (``worker_id``) and holds the union, over the
  bits of its ``bitmap``, of the workers below that switch's child of that bit -- complete
  (all of its children), flushed INCOMPLETE (some), re-emitted, or sent on unaggregated
  after a collision, it is read the same way.

The sets are exact Python integers over the job's worker ids (any size), so the PS's merge
(an exact cover of the job's workers by disjoint pieces, :mod:`workers.ina.ps`) is the same
argument whatever the job's size.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from workers.ina.constants import MAX_WORKERS, TYPE_GRAD, TYPE_PARTIAL

__all__ = ["Child", "Tree", "TreeError", "WORKER", "SWITCH"]

WORKER = "w"
SWITCH = "s"


class TreeError(ValueError):
    """A tree that cannot be the job's (one line naming what is wrong)."""


@dataclass(frozen=True, order=True)
class Child:
    """One child of a switch: a worker (``kind`` ``WORKER``, ``id`` its worker id) or an
    aggregation point below (``SWITCH``, its switch id)."""

    kind: str
    id: int


@dataclass
class Tree:
    """``children[s]``: switch ``s``'s children by index (None = an index not in use, kept so
    that a re-assignment never moves a surviving child); ``root``: the switch whose PARTIALs
    go to the PS; ``first[w]``: where worker ``w`` sends its GRADs (a switch id, or 0 = the
    PS itself).  ``names``: switch id -> name, for error messages."""

    root: int
    children: dict[int, list[Child | None]]
    first: dict[int, int]
    names: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._leaves: dict[int, int] = {}
        self._parent: dict[int, int] = {}
        seen: set[Child] = set()
        for s, kids in self.children.items():
            for c in kids:
                if c is None:
                    continue
                if c in seen:
                    raise TreeError(f"{self.name(s)}: {c.kind}{c.id} is a child twice")
                seen.add(c)
                if c.kind == SWITCH:
                    self._parent[c.id] = s
        for s in self.children:
            self._mask(s, ())

    # -- queries -----------------------------------------------------------------------

    def name(self, switch: int) -> str:
        return self.names.get(switch, f"switch {switch}")

    def fan_in(self, switch: int) -> int:
        """Children switch ``switch`` waits for (what its ``set_job`` entry gets)."""
        return sum(c is not None for c in self.children.get(switch, ()))

    def parent(self, switch: int) -> int:
        """Where ``switch`` sends its PARTIALs: its parent's id, 0 for the root (the PS)."""
        return self._parent.get(switch, 0)

    def index(self, switch: int, child: Child) -> int | None:
        kids = self.children.get(switch, [])
        return kids.index(child) if child in kids else None

    def workers_below(self, switch: int) -> int:
        """The mask of the workers whose contributions ``switch``'s complete PARTIAL sums."""
        return self._leaves.get(switch, 0)

    def check_width(self, width: int = MAX_WORKERS) -> None:
        """Every switch's children fit the program's bitmap: else one line naming it."""
        for s, kids in sorted(self.children.items()):
            if len(kids) > width:
                raise TreeError(
                    f"{self.name(s)}: {self.fan_in(s)} children in the job's aggregation tree "
                    f"(child indices up to {len(kids) - 1}); ina.p4 sums at most {width} per "
                    "switch (INA_MAX_WORKERS)")

    def worker_set(self, msg_type: int, sender: int, bitmap: int, count: int) -> int | None:
        """The workers a GRAD/PARTIAL sums (a mask over worker ids), or None if it cannot be
        one of this tree's: a PARTIAL from a switch not in the tree, a bit that is no child
        of that switch, ``count`` not the number of bits."""
        if msg_type == TYPE_GRAD:
            return 1 << sender if sender in self.first else None
        if msg_type != TYPE_PARTIAL:
            return None
        kids = self.children.get(sender)
        if kids is None or bitmap <= 0 or bitmap.bit_count() != count:
            return None
        out = 0
        while bitmap:
            low = bitmap & -bitmap
            i = low.bit_length() - 1
            c = kids[i] if i < len(kids) else None
            if c is None:
                return None
            out |= 1 << c.id if c.kind == WORKER else self._leaves.get(c.id, 0)
            bitmap ^= low
        return out

    # -- the job file's form -----------------------------------------------------------

    def to_json(self) -> dict:
        return {"root": self.root,
                "children": {str(s): [None if c is None else [c.kind, c.id] for c in kids]
                             for s, kids in sorted(self.children.items())},
                "first": {str(w): s for w, s in sorted(self.first.items())},
                "names": {str(s): n for s, n in sorted(self.names.items())}}

    @classmethod
    def from_json(cls, data: Mapping) -> Tree:
        try:
            children = {int(s): [None if c is None else Child(str(c[0]), int(c[1]))
                                 for c in kids]
                        for s, kids in data["children"].items()}
            return cls(int(data["root"]), children,
                       {int(w): int(s) for w, s in data["first"].items()},
                       {int(s): str(n) for s, n in data.get("names", {}).items()})
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TreeError(f"not an aggregation tree: {exc}") from None

    # -- building ----------------------------------------------------------------------

    @classmethod
    def assign(cls, root: int, parent_of: Mapping[Child, int], *,
               names: Mapping[int, str] | None = None,
               previous: Tree | None = None, reuse: bool = True) -> Tree:
        """The tree where each worker or switch ``c`` of ``parent_of`` is a child of switch
        ``parent_of[c]`` (0: of the PS itself), numbered so that a child of ``previous``
        that keeps its parent keeps its index (a re-assignment moves no survivor: the slots
        in flight keep their meaning and the switch rules change only where a child came
        or went) and new children take the lowest free indices, in (kind, id) order.
        ``reuse=False``: never an index ``previous`` had at that switch (a fail-over
        changes the rules in the middle of a round: a slot's bit keeps its meaning)."""
        kids: dict[int, list[Child | None]] = {}
        placed: dict[int, dict[Child, int]] = {}
        for p in parent_of.values():
            if p:
                placed.setdefault(p, {})
        if previous is not None:
            for s, old in previous.children.items():
                if s not in placed:
                    continue
                for i, c in enumerate(old):
                    if c is not None and parent_of.get(c) == s:
                        placed[s][c] = i
        for c in sorted(parent_of):
            p = parent_of[c]
            if not p or c in placed[p]:
                continue
            used = set(placed[p].values())
            if not reuse and previous is not None:
                used |= set(range(len(previous.children.get(p, []))))
            placed[p][c] = next(i for i in range(len(used) + 1) if i not in used)
        for s, where in placed.items():
            row: list[Child | None] = [None] * (max(where.values()) + 1)
            for c, i in where.items():
                row[i] = c
            kids[s] = row
        first = {c.id: p for c, p in parent_of.items() if c.kind == WORKER}
        return cls(root, kids, first, dict(names or {}))

    # -- internals ---------------------------------------------------------------------

    def _mask(self, s: int, path: Iterable[int]) -> int:
        if s in self._leaves:
            return self._leaves[s]
        if s in path:
            raise TreeError(f"{self.name(s)}: the tree has a cycle through it")
        out = 0
        for c in self.children.get(s, ()):
            if c is None:
                continue
            out |= 1 << c.id if c.kind == WORKER else self._mask(c.id, (*path, s))
        self._leaves[s] = out
        return out
