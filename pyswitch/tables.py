"""Run-time match-action tables (exact: dict; lpm: one dict per prefix length, longest
first; ternary/range/optional: list scanned by descending priority, as BMv2/P4Runtime:
higher number = higher priority).

On the native path an exact table's entries are also indexed in C memory (its `native`
store, pyswitch/native/exact.h), which the compiled pipeline looks up without a Python
object; the `Table` stays the one state the control plane writes, and each write that
changes what a look-up returns rebuilds that index with the Python path's dict."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from pyswitch.errors import EntryExists, EntryNotFound, InvalidArgument
from pyswitch.names import check_int, resolve, suggest

_PAIR = {"lpm": "(value, prefix length)", "ternary": "(value, mask)", "range": "(low, high)"}


def table_kind(keys: list[dict]) -> str:
    """``exact`` (every field exact, or no field), ``lpm`` (one lpm field, the others
    exact) or ``ternary`` (the rest: ternary, range, optional), from a table's keys."""
    kinds = [k["match"] for k in keys]
    if all(k == "exact" for k in kinds):
        return "exact"
    if kinds.count("lpm") == 1 and all(k in ("exact", "lpm") for k in kinds):
        return "lpm"
    return "ternary"


class Entry:
    """One installed entry (or a table's default): `fn(S, M, *args)` is the action."""

    __slots__ = ("fn", "args", "aidx", "hit", "counter", "action", "params", "match",
                 "priority", "canon", "checks", "seq")

    def __init__(self, fn: Callable, args: tuple, aidx: int, hit: bool, action: str,
                 params: dict[str, int], match: dict | None = None, priority: int = 0) -> None:
        self.fn = fn
        self.args = args
        self.aidx = aidx
        self.hit = hit
        self.counter = [0, 0]
        self.action = action
        self.params = params
        self.match = match or {}
        self.priority = priority
        self.canon: Any = None
        self.checks: list = []
        self.seq = 0


class TableEntryView:
    """What `Switch.read_entries` returns."""

    def __init__(self, table: str, e: Entry) -> None:
        self.table = table
        self.match = dict(e.match)
        self.action = e.action
        self.params = dict(e.params)
        self.priority = e.priority

    def __repr__(self) -> str:
        return (f"TableEntryView({self.table!r}, match={self.match}, action={self.action!r}, "
                f"params={self.params}, priority={self.priority})")


class Table:
    """A table of a loaded program; `lookup(key)` returns the matching `Entry` or default."""

    def __init__(self, spec: dict, actions: dict[str, dict], fns: dict[str, Callable]) -> None:
        self.spec = spec
        self.name = spec["name"]
        self.keys = spec["keys"]
        self.size = spec["size"]
        self.actions = actions  # P4Info action name -> action meta (of this table)
        self.fns = fns
        self.allowed = {a["name"]: a["scope"] for a in spec["actions"]}
        self.kind = table_kind(self.keys)
        if self.kind == "lpm":
            self.lpm_pos = [k["match"] for k in self.keys].index("lpm")
        self.single = len(self.keys) == 1
        self.const = spec.get("const_entries") is not None
        self.default_const = spec["default_const"]
        self.entries: dict[Any, Entry] = {}
        # exact tables: key -> entry, read in place by generated code (never rebound)
        self.exact: dict[Any, Entry] = {}
        self.seq = 0
        # exact tables on the native path: the entries' index in C memory (attach_native)
        self.native: Any = None
        self._cells: Callable | None = None  # the native module's Cells maker
        d = spec["default"]
        self.default = self._make(d["action"], self._params_from_args(d["action"], d["args"]),
                                  hit=False, scope_check=False)
        self.initial_default = self.default
        self._defer = 0  # > 0: inside deferred_rebuild(), the index is rebuilt at its end
        self._stale = False
        self._rebuild()
        if self.const:
            for ce in spec["const_entries"]:
                n_ent = len(spec["const_entries"])
                prio = ce["priority"]
                if self.kind == "ternary" and prio is None:
                    # const entries: earlier entries have higher priority
                    prio = n_ent - spec["const_entries"].index(ce)
                self._insert(ce["match"], ce["action"],
                             self._params_from_args(ce["action"], ce["args"]),
                             prio or 0, force=True)

    # -- helpers -----------------------------------------------------------------------
    def _params_from_args(self, action: str, args: list[int]) -> dict[str, int]:
        a = self.actions[action]
        return {p["name"]: v for p, v in zip(a["params"], args, strict=True)}

    def _make(self, action: str, params: dict[str, int], hit: bool,
              scope_check: bool = True, default: bool = False) -> Entry:
        if action not in self.allowed:
            if action not in self.actions and isinstance(action, str):  # short name, typo
                action = resolve(self.allowed, action, "action", f" of table {self.name!r}")
            else:
                raise InvalidArgument(f"action {action!r} is not an action of table "
                                      f"{self.name!r}")
        if scope_check:
            sc = self.allowed[action]
            if default and sc == "TABLE_ONLY":
                raise InvalidArgument(f"action {action!r} is @tableonly in {self.name!r}")
            if not default and sc == "DEFAULT_ONLY":
                raise InvalidArgument(f"action {action!r} is @defaultonly in {self.name!r}")
        a = self.actions[action]
        declared = [p["name"] for p in a["params"]]
        for n in params:  # a misspelt name first: it is also why a parameter is missing
            if n not in declared:
                raise InvalidArgument(f"unknown parameter {n!r} of action {action!r}"
                                      f"{suggest(n, declared)}")
        args = []
        for p in a["params"]:
            if p["name"] not in params:
                raise InvalidArgument(f"missing parameter {p['name']!r} of action {action!r}")
            v = params[p["name"]]
            check_int(v, f"parameter {p['name']!r} of action {action!r}")
            if v < 0 or v >> p["width"]:
                raise InvalidArgument(f"value {v!r} of parameter {p['name']!r} does not fit in "
                                      f"{p['width']} bits")
            args.append(v)
        pv = {p["name"]: v for p, v in zip(a["params"], args, strict=True)}
        return Entry(self.fns[a["fn"]], tuple(args), a["idx"], hit, action, pv)

    def _canon(self, match: dict, priority: int) -> tuple[Any, list, dict]:
        names = {k["name"] for k in self.keys}
        for n in match:
            if n not in names:
                raise InvalidArgument(f"unknown match field {n!r} of table {self.name!r}"
                                      f"{suggest(n, names) if isinstance(n, str) else ''}")
        canon, checks, shown = [], [], {}
        for i, k in enumerate(self.keys):
            n, w, mk = k["name"], k["width"], k["match"]
            full = (1 << w) - 1
            v = match.get(n)
            if v is None:
                if mk == "exact":
                    raise InvalidArgument(f"exact match field {n!r} is required")
                # wildcard: canonical form of "matches everything" for the kind
                canon.append({"lpm": (0, 0), "ternary": (0, 0), "range": (0, full)}.get(mk))
                continue
            shown[n] = v
            if mk in ("lpm", "ternary", "range") and not (
                    isinstance(v, tuple | list) and len(v) == 2):
                if isinstance(v, str):  # "10.0.0.0/8": the usual slip
                    check_int(v, f"value of {n!r}")
                raise InvalidArgument(f"value {v!r} of {mk} field {n!r}: a pair of ints "
                                      f"{_PAIR[mk]}")
            for x in (v if isinstance(v, tuple | list) else (v,)):
                check_int(x, f"value of {n!r}")
            if mk == "exact" or mk == "optional":
                if not isinstance(v, int) or v < 0 or v > full:
                    raise InvalidArgument(f"value {v!r} of {n!r} does not fit in {w} bits")
                canon.append(v)
                checks.append((i, v, full, None))
            elif mk == "lpm":
                val, plen = v
                if not 0 <= plen <= w:
                    raise InvalidArgument(f"prefix length {plen} of {n!r} exceeds {w} bits")
                if val < 0 or val > full:
                    raise InvalidArgument(f"value of {n!r} does not fit in {w} bits")
                m = full ^ ((1 << (w - plen)) - 1)
                if val & ~m:
                    raise InvalidArgument(f"lpm value of {n!r} has bits set beyond the prefix")
                canon.append((val, plen))
                checks.append((i, val, m, None))
            elif mk == "ternary":
                val, m = v
                if val < 0 or val > full or m < 0 or m > full:
                    raise InvalidArgument(f"value/mask of {n!r} does not fit in {w} bits")
                if val & ~m:
                    raise InvalidArgument(f"ternary value of {n!r} has bits outside the mask")
                canon.append((val, m))
                checks.append((i, val, m, None))
            elif mk == "range":
                lo, hi = v
                if not (0 <= lo <= hi <= full):
                    raise InvalidArgument(f"bad range {lo}..{hi} for {n!r}")
                canon.append((lo, hi))
                checks.append((i, lo, hi, "range"))
        if self.kind == "ternary":
            if priority <= 0:
                raise InvalidArgument(f"table {self.name!r} needs a priority > 0")
        elif priority:
            raise InvalidArgument(f"table {self.name!r} takes no priority")
        return (tuple(canon), priority), checks, shown

    @contextlib.contextmanager
    def deferred_rebuild(self) -> Iterator[None]:
        """Rebuild the lookup index once, when the block ends, instead of after every
        insert, modify and delete inside it (each rebuild is O(entries)).  Only for callers
        that look nothing up meanwhile (a P4Runtime Write holds the lock packets need)."""
        self._defer += 1
        try:
            yield
        finally:
            self._defer -= 1
            if not self._defer and self._stale:
                self._stale = False
                self._rebuild()

    def _rebuild(self) -> None:
        if self._defer:
            self._stale = True
            return
        if self.kind == "exact":
            d = {}
            for e in self.entries.values():
                key = e.canon[0][0] if self.single else e.canon[0]
                d[key] = e
            self.exact.clear()
            self.exact.update(d)
            dg = self.exact.get
            self.lookup = lambda k: dg(k) or self.default  # noqa: E731
            if self.native is not None:
                self._load_native()
        elif self.kind == "lpm":
            p = self.lpm_pos
            w = self.keys[p]["width"]
            full = (1 << w) - 1
            by_plen: dict[int, dict] = {}
            for e in self.entries.values():
                c = e.canon[0]
                val, plen = c[p]
                if self.single:
                    key = val
                else:
                    key = tuple(val if i == p else x for i, x in enumerate(c))
                by_plen.setdefault(plen, {})[key] = e
            order = [(full ^ ((1 << (w - pl)) - 1), by_plen[pl]) for pl in
                     sorted(by_plen, reverse=True)]
            if self.single:
                def lookup(k: int) -> Entry:
                    for m, d in order:
                        e = d.get(k & m)
                        if e is not None:
                            return e
                    return self.default
            else:
                def lookup(k: tuple) -> Entry:
                    for m, d in order:
                        kk = tuple(x & m if i == p else x for i, x in enumerate(k))
                        e = d.get(kk)
                        if e is not None:
                            return e
                    return self.default
            self.lookup = lookup
        else:
            ents = sorted(self.entries.values(), key=lambda e: (-e.priority, e.seq))
            single = self.single

            def lookup(k: Any) -> Entry:
                kt = (k,) if single else k
                for e in ents:
                    for i, a, b, r in e.checks:
                        x = kt[i]
                        if r is None:
                            if x & b != a:
                                break
                        elif not a <= x <= b:
                            break
                    else:
                        return e
                return self.default
            self.lookup = lookup

    def attach_native(self, mod: Any) -> None:
        """Index this exact table's entries in C memory for the native module `mod` (an
        ExactStore, pyswitch/native/exact.h), kept in step by every later write; its
        direct counter's cells become 64-bit `Cells`, shared by the entry and the store.
        A store already made (a process rebuilt on the same switch) is reused and
        reloaded.  Nothing for the other kinds: their look-ups stay in Python."""
        if self.kind != "exact":
            return
        if type(self.native).__name__ != "ExactStore":
            self.native = mod.exact([k["width"] for k in self.keys],
                                    self.spec.get("direct_counter") is not None)
        self._cells = mod.cells
        self._load_native()

    def _load_native(self) -> None:
        """The C store loaded anew from the entries and the default (one state: these)."""
        counted = self.spec.get("direct_counter") is not None
        ents = [*self.entries.values(), self.default]
        if counted and self._cells is not None:
            for e in ents:
                if type(e.counter).__name__ != "Cells":
                    e.counter = self._cells(list(e.counter), 64)
        d = self.default
        self.native.load([(e.canon[0], e.aidx, e.hit, e.args, e.counter)
                          for e in self.entries.values()],
                         (d.aidx, d.hit, d.args, d.counter))

    # -- API -----------------------------------------------------------------------------
    def _insert(self, match: dict, action: str, params: dict, priority: int,
                force: bool = False) -> None:
        canon, checks, shown = self._canon(match, priority)
        if canon in self.entries:
            raise EntryExists(f"entry already exists in {self.name!r}: {shown}")
        if not force and len(self.entries) >= self.size:
            raise InvalidArgument(f"table {self.name!r} is full ({self.size} entries)")
        e = self._make(action, params, hit=True)
        e.match, e.priority, e.canon, e.checks = shown, priority, canon, checks
        self.seq += 1
        e.seq = self.seq
        self.entries[canon] = e
        self._rebuild()

    def insert(self, match: dict, action: str, params: dict, priority: int = 0) -> None:
        if self.const:
            raise InvalidArgument(f"table {self.name!r} has const entries")
        self._insert(match, action, params, priority)

    def modify(self, match: dict, action: str, params: dict, priority: int = 0) -> None:
        if self.const:
            raise InvalidArgument(f"table {self.name!r} has const entries")
        canon, _checks, _shown = self._canon(match, priority)
        old = self.entries.get(canon)
        if old is None:
            raise EntryNotFound(f"no such entry in {self.name!r}: {match}")
        e = self._make(action, params, hit=True)
        e.match, e.priority, e.canon, e.checks, e.seq = old.match, old.priority, canon, \
            old.checks, old.seq
        e.counter = old.counter
        self.entries[canon] = e
        self._rebuild()

    def delete(self, match: dict, priority: int = 0) -> None:
        if self.const:
            raise InvalidArgument(f"table {self.name!r} has const entries")
        canon, _c, _s = self._canon(match, priority)
        if canon not in self.entries:
            raise EntryNotFound(f"no such entry in {self.name!r}: {match}")
        del self.entries[canon]
        self._rebuild()

    def find(self, match: dict, priority: int = 0) -> Entry:
        canon, _c, _s = self._canon(match, priority)
        e = self.entries.get(canon)
        if e is None:
            raise EntryNotFound(f"no such entry in {self.name!r}: {match}")
        return e

    def set_default(self, action: str, params: dict) -> None:
        if self.default_const:
            raise InvalidArgument(f"default action of {self.name!r} is const")
        self.default = self._make(action, params, hit=False, default=True)
        self._rebuild()

    def reset_default(self) -> None:
        """The program's own default action back (Thrift's reset_default_entry)."""
        self.default = self.initial_default
        self._rebuild()

    def clear(self) -> None:
        if self.const:
            raise InvalidArgument(f"table {self.name!r} has const entries")
        self.entries.clear()
        self._rebuild()
