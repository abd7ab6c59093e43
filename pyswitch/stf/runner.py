"""STF packet tests on pyswitch: one program (``python -m pyswitch stf PROG.p4 TEST.stf``)
or a whole corpus directory (``--corpus DIR``), with the semantics of p4c's BMv2 STF
runner (``backends/bmv2/bmv2stf.py`` + ``tools/testutils.py``). See docs/stf.md.

What "BMv2's semantics" means here, in short:
- the ports of a test are the ports named by its ``packet`` and ``expect`` lines; a packet
  that leaves on another port is lost (BMv2 has no such interface) and not checked;
- every packet is sent and all output collected; then per port the packets received
  must be exactly the ``expect`` lines for that port, in order (count and content);
- ``expect`` data: hex nibbles, ``*`` = any nibble; a longer packet matches unless the
  data ends in ``$``; ``expect PORT`` without data = one packet of any content;
- ``add`` priorities: a higher STF number wins (bmv2stf turns p into BMv2's 10000-p,
  where lower wins); they only matter for tables that need one (ternary/range/optional);
- a ternary value ``0x****0101`` has mask 0x0000FFFF: the digits written set the mask,
  so a value shorter than the key leaves its high bits as don't care; an lpm value
  without ``/len`` gets the prefix of its written non-``*`` digits; a key not named
  matches anything, except exact keys, which default to 0 (as bmv2stf's key template);
- ``wait`` is a no-op (pyswitch is synchronous); ``remove``, ``check_counter`` and
  ``no_packet`` are ignored, as bmv2stf ignores them (``check_counter`` must still be
  well-formed and name a counter of the program);
- every value is checked against the width of what it sets (a key wider than its field,
  an lpm ``/99`` on a 32-bit key, a port beyond v1model's 9 bits): the test cannot run,
  exit 2, where BMv2's CLI would refuse the command.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyswitch import native
from pyswitch.errors import OneLineParser, P4CompileError, SwitchError, UsageError
from pyswitch.inputfile import InputFileError, read_input, read_input_text
from pyswitch.p4info.compare import check_against_p4c
from pyswitch.program import compile_p4, write_files_atomic
from pyswitch.stf.parser import StfSyntaxError, Stmt, parse_int, parse_stf
from pyswitch.switch import Switch

__all__ = ["CorpusEntry", "StfError", "StfResult", "main", "run_corpus", "run_stf",
           "run_stf_file"]


MAX_STF_BYTES = 64 * 2**20
"""Largest STF file read (p4c's largest is a few hundred kB)."""


class StfError(Exception):
    """A command of the test cannot be carried out (unknown table, bad value, ...)."""


# ----------------------------------------------------------------------------- results
@dataclass
class PortReport:
    port: int
    expected: int
    got: int
    problems: list[str] = field(default_factory=list)


@dataclass
class StfResult:
    """Outcome of one STF test: `passed`, and per failing port what differs."""

    passed: bool
    ports: list[PortReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def diff(self) -> str:
        """The readable per-port report of a failed test (empty when it passed)."""
        lines = []
        for pr in self.ports:
            if pr.problems:
                lines.append(f"port {pr.port}: expected {pr.expected} packet(s), got {pr.got}")
                lines += ["  " + p for p in pr.problems]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- matching
def _group(h: str) -> str:
    return " ".join(h[i:i + 8] for i in range(0, len(h), 8))


def _marks(exp: str, got: str) -> str:
    """A '^' under each nibble that differs, laid out like `_group`."""
    n = max(len(exp), len(got))
    raw = []
    for i in range(n):
        e = exp[i] if i < len(exp) else None
        g = got[i] if i < len(got) else None
        raw.append(" " if e == "*" or (e is not None and e == g) or e is None else "^")
    return _group("".join(raw)).rstrip()


def match_packet(expected: str | None, exact: bool, got: bytes) -> str | None:
    """None if `got` satisfies the expectation, else why not (testutils.compare_pkt)."""
    if expected is None:
        return None
    rx = got.hex().upper()
    if exact and len(rx) > len(expected):
        return f"too long: {len(rx) // 2} bytes, expected exactly {len(expected) / 2:g}"
    if len(rx) < len(expected):
        return f"too short: {len(rx) // 2} bytes, expected at least {len(expected) / 2:g}"
    for i, c in enumerate(expected):
        if c != "*" and c != rx[i]:
            return f"differs at byte {i // 2} (nibble {i}): expected {c}, got {rx[i]}"
    return None


# ----------------------------------------------------------------------------- runner
def _unique_suffix(names: list[str], want: str, what: str, where: str) -> str:
    if want in names:
        return want
    # as bmv2stf: a name may be given by any suffix of the full name
    cands = [n for n in names if n.endswith(want)]
    if len(cands) == 1:
        return cands[0]
    if not cands:
        raise StfError(f"no {what} {want!r}{where}")
    dotted = [n for n in cands if n.endswith("." + want)]
    if len(dotted) == 1:
        return dotted[0]
    raise StfError(f"{what} {want!r} is ambiguous{where}: {', '.join(sorted(cands))}")


def _key_name(keys: list[str], key: str, table: str) -> str:
    key = re.sub(r"\$([0-9]+)", r"[\1]", key)  # bmv2stf: stack$0.f == stack[0].f
    for cand in (key, key + "$", key + ".$valid$"):
        if cand in keys:
            return cand
    if key.endswith(".valid") and key[:-5] + "$valid$" in keys:
        return key[:-5] + "$valid$"
    found = [k for k in keys if k.endswith("." + key) or k.endswith("." + key + "$")
             or (key == "valid" and k.endswith(".$valid$"))]
    if key == "valid" and "$valid$" in keys:
        found.append("$valid$")
    if len(found) == 1:
        return found[0]
    if not found:
        raise StfError(f"no key field {key!r} in table {table!r} (keys: {', '.join(keys)})")
    raise StfError(f"key field {key!r} is ambiguous in table {table!r}")


def _digits(text: str) -> tuple[str, int, int]:
    """(digits, base, bits per digit) of a hex/binary/octal STF number."""
    t = text.lower()
    if t.startswith("0x"):
        return t[2:], 16, 4
    if t.startswith("0b"):
        return t[2:], 2, 1
    if t.startswith("0o"):
        return t[2:], 8, 3
    raise StfError(f"a decimal value ({text}) cannot be a ternary/lpm pattern: write it in hex")


def _fits(value: int, width: int, name: str) -> int:
    """``value`` if it fits the ``width`` bits of key ``name``, else :class:`StfError`."""
    if value >> width:
        raise StfError(f"value {value:#x} does not fit key {name} of {width} bits")
    return value


def _key_value(kind: str, width: int, text: str, name: str) -> Any:
    full = (1 << width) - 1
    if kind == "exact":
        return _fits(parse_int(text), width, name)
    if kind == "ternary":
        if "*" not in text and not text.lower().startswith(("0x", "0b", "0o")):
            raise StfError(f"decimal value {text} not supported for ternary key {name}")
        digits, base, bits = _digits(text)
        top = (1 << bits) - 1
        value = _fits(int(digits.replace("*", "0"), base), width, name)
        mask = 0
        for d in digits:
            mask = (mask << bits) | (0 if d == "*" else top)
        return value, mask & full
    if kind == "lpm":
        if "/" in text:
            v, _, p = text.partition("/")
            value, plen = parse_int(v), parse_int(p)
            if plen > width:
                raise StfError(f"prefix length /{plen} of lpm key {name} is longer than the "
                               f"key's {width} bits")
        elif not text.lower().startswith(("0x", "0b", "0o")):
            value, plen = parse_int(text), width
        else:
            digits, base, bits = _digits(text)
            value = int(digits.replace("*", "0"), base)
            plen = bits * (len(digits) - digits.count("*"))
        _fits(value, width, name)
        plen = min(plen, width) if plen >= 0 else 0  # digits written past the width: 0s
        keep = full ^ ((1 << (width - plen)) - 1)
        return value & keep, plen  # bits past the prefix never take part in the match
    if kind == "range":
        if "->" in text:
            lo, _, hi = text.partition("->")
            return _fits(parse_int(lo), width, name), _fits(parse_int(hi), width, name)
        if "*" in text:
            if set(_digits(text)[0]) == {"*"}:
                return None  # all don't care: the whole range
            raise StfError(f"range key {name}: lo->hi, a value or all '*', not {text}")
        v = _fits(parse_int(text), width, name)
        return v, v
    if kind == "optional":
        if "*" in text:
            if set(_digits(text)[0]) == {"*"}:
                return None
            raise StfError(f"optional key {name}: a value or all '*', not {text}")
        return _fits(parse_int(text), width, name)
    raise StfError(f"unsupported match kind {kind!r} of key {name}")


class StfRunner:
    """Carries out STF statements on one `Switch` and checks the expectations."""

    def __init__(self, sw: Switch) -> None:
        self.sw = sw
        self.nodes: list[tuple[int, list[int]] | None] = []  # handle -> (rid, ports)
        self.groups: dict[int, list[int]] = {}  # group -> node handles, association order
        self.mirror_mc: dict[int, int] = {}  # clone session -> multicast group
        self.notes: list[str] = []

    # -- names
    def _table(self, name: str) -> str:
        return _unique_suffix(list(self.sw.tables), name, "table", "")

    def _action(self, table: str, name: str) -> str:
        return _unique_suffix(list(self.sw.tables[table].allowed), name, "action",
                              f" in table {table!r}")

    def _params(self, table: str, action: str, args: list[tuple[str, str]]) -> dict[str, int]:
        declared = [p["name"] for p in self.sw.tables[table].actions[action]["params"]]
        out = {}
        for n, v in args:
            if n not in declared:
                raise StfError(f"action {action!r} has no parameter {n!r}")
            out[n] = parse_int(v)
        return out

    # -- commands
    def add(self, st: Stmt) -> None:
        table = self._table(st.table)
        tab = self.sw.tables[table]
        keys = {k["name"]: k for k in tab.keys}
        match: dict[str, Any] = {}
        for k in tab.keys:  # bmv2stf's template: exact keys not named match 0
            if k["match"] == "exact":
                match[k["name"]] = 0
        for kname, text in st.keys:
            n = _key_name(list(keys), kname, table)
            v = _key_value(keys[n]["match"], keys[n]["width"], text, n)
            if v is None:
                match.pop(n, None)
            else:
                match[n] = v
        for n in list(match):  # a zero mask / zero prefix is the same as leaving it out
            kind = keys[n]["match"]
            if (kind == "ternary" and match[n][1] == 0) or (kind == "lpm" and match[n][1] == 0):
                match[n] = (0, 0)
        assert st.action is not None
        action = self._action(table, st.action.name)
        params = self._params(table, action, st.action.args)
        prio = 0
        if tab.kind == "ternary":
            # STF: higher wins, from 0; pyswitch: higher wins, from 1
            prio = (st.priority if st.priority is not None else 0) + 1
        self.sw.insert_entry(table, match, action, params, prio)

    def setdefault(self, st: Stmt) -> None:
        table = self._table(st.table)
        assert st.action is not None
        action = self._action(table, st.action.name)
        self.sw.set_default_action(table, action, self._params(table, action, st.action.args))

    def _sync_groups(self) -> None:
        for g, handles in self.groups.items():
            reps = []
            for h in handles:
                node = self.nodes[h] if h < len(self.nodes) else None
                if node is not None:
                    reps += [(p, node[0]) for p in node[1]]
            self.sw.set_multicast_group(g, reps)
        for s, g in self.mirror_mc.items():
            self.sw.set_clone_session(s, list(self.sw.mcast.get(g, [])))

    def direct(self, st: Stmt) -> None:
        n = [parse_int(x) for x in st.nums] if not st.cmd.startswith("meter") else []
        c = st.cmd
        if c == "mc_mgrp_create":
            self.groups.setdefault(n[0], [])
        elif c == "mc_mgrp_destroy":
            self.groups.pop(n[0], None)
            if n[0] in self.sw.mcast:
                self.sw.delete_multicast_group(n[0])
        elif c == "mc_node_create":
            self.nodes.append((n[0], sorted(set(n[1:]))))  # handles count up from 0
        elif c == "mc_node_update":
            self._node(n[0], st)
            self.nodes[n[0]] = (self.nodes[n[0]][0], sorted(set(n[1:])))  # type: ignore[index]
        elif c == "mc_node_destroy":
            self._node(n[0], st)
            self.nodes[n[0]] = None
        elif c == "mc_node_associate":
            if n[0] not in self.groups:
                raise StfError(f"multicast group {n[0]} was not created")
            self._node(n[1], st)
            self.groups[n[0]].append(n[1])
        elif c == "mc_node_dissociate":
            if n[1] in self.groups.get(n[0], []):
                self.groups[n[0]].remove(n[1])
        elif c == "mirroring_add":
            self.mirror_mc.pop(n[0], None)
            self.sw.set_clone_session(n[0], [(n[1], 0)])
        elif c == "mirroring_add_mc":
            self.mirror_mc[n[0]] = n[1]
        elif c == "mirroring_delete":
            self.mirror_mc.pop(n[0], None)
            if n[0] in self.sw.clone_sessions:
                self.sw.delete_clone_session(n[0])
        elif c == "mirroring_get":
            pass  # reads only print in simple_switch_CLI
        elif c == "counter_read":  # only prints, but the counter and index must exist
            self.sw.counter_read(self._extern(st.name, self.sw.counters), n[0])
        elif c == "register_read":
            self.sw.register_read(self._extern(st.name, self.sw.registers), n[0])
        elif c == "register_write":
            self.sw.register_write(self._extern(st.name, self.sw.registers), n[0], n[1])
        elif c == "register_reset":
            self.sw.register_reset(self._extern(st.name, self.sw.registers))
        elif c == "counter_write":
            self.sw.counter_write(self._extern(st.name, self.sw.counters), n[0], n[1], n[2])
        else:
            raise StfError(f"{c} is not supported by pyswitch's STF runner")
        self._sync_groups()

    def _node(self, h: int, st: Stmt) -> None:
        if not 0 <= h < len(self.nodes) or self.nodes[h] is None:
            raise StfError(f"line {st.line}: no multicast node handle {h}")

    @staticmethod
    def _extern(name: str, names: dict) -> str:
        return _unique_suffix(list(names), name, "extern instance", "")

    # -- the whole test
    def run(self, stmts: list[Stmt]) -> StfResult:
        ports = {st.port for st in stmts if st.cmd in ("packet", "expect")}
        expected: dict[int, list[Stmt]] = {}
        got: dict[int, list[tuple[bytes, int]]] = {}
        lost: Counter[int] = Counter()
        for st in stmts:
            try:
                self._one(st, ports, expected, got, lost)
            except (StfError, SwitchError, ValueError) as e:
                raise StfError(f"line {st.line} ({st.text}): {e}") from None
        res = StfResult(True, notes=self.notes)
        if lost:
            res.notes.append("packets on ports the test does not name (lost, as on BMv2): "
                             + ", ".join(f"port {p}: {c}" for p, c in sorted(lost.items())))
        for port in sorted(ports):
            exp, rx = expected.get(port, []), got.get(port, [])
            pr = PortReport(port, len(exp), len(rx))
            for i in range(max(len(exp), len(rx))):
                e = exp[i] if i < len(exp) else None
                g = rx[i] if i < len(rx) else None
                if e is None:
                    assert g is not None
                    pr.problems.append(f"#{i + 1}: unexpected packet (sent at line {g[1]}):")
                    pr.problems.append(f"    got      {_group(g[0].hex().upper())}")
                    continue
                want = "(any packet)" if e.data is None else _group(e.data) + (
                    " $" if e.exact else "")
                if g is None:
                    pr.problems.append(f"#{i + 1}: missing (expect at line {e.line}): {want}")
                    continue
                why = match_packet(e.data, e.exact, g[0])
                if why is not None:
                    rxh = g[0].hex().upper()
                    pr.problems.append(f"#{i + 1}: {why} (expect at line {e.line}, "
                                       f"packet sent at line {g[1]})")
                    pr.problems.append(f"    expected {want}")
                    pr.problems.append(f"    got      {_group(rxh)}")
                    pr.problems.append(f"             {_marks(e.data or '', rxh)}")
            if pr.problems:
                res.passed = False
            res.ports.append(pr)
        return res

    def _one(self, st: Stmt, ports: set[int], expected: dict[int, list[Stmt]],
             got: dict[int, list[tuple[bytes, int]]], lost: Counter[int]) -> None:
        if st.cmd == "packet":
            assert st.data is not None
            for port, frame in self.sw.process(st.port, bytes.fromhex(st.data)):
                if port in ports:
                    got.setdefault(port, []).append((frame, st.line))
                else:
                    lost[port] += 1
        elif st.cmd == "expect":
            expected.setdefault(st.port, []).append(st)
        elif st.cmd == "add":
            self.add(st)
        elif st.cmd == "setdefault":
            self.setdefault(st)
        elif st.cmd == "check_counter":  # ignored as bmv2stf does, but it must name one
            self._extern(st.name, {**self.sw.counters, **self.sw.direct_counters})
            self.notes.append(f"line {st.line}: check_counter ignored (as p4c's bmv2stf)")
        elif st.cmd in ("wait", "no_packet", "remove"):
            if st.cmd != "wait":
                self.notes.append(f"line {st.line}: {st.cmd} ignored (as p4c's bmv2stf)")
        else:
            self.direct(st)


def run_stf(sw: Switch, stmts: list[Stmt]) -> StfResult:
    """Run parsed STF statements on `sw`; raises `StfError` if a command cannot be done."""
    return StfRunner(sw).run(stmts)


def run_stf_file(p4: str | Path, stf: str | Path, include_dirs: list[str] | tuple = (),
                 defines: dict[str, str] | None = None) -> StfResult:
    """Compile `p4`, run `stf` on a fresh switch (raises P4CompileError / StfSyntaxError /
    StfError)."""
    try:  # read (and parse) the test first: a bad STF file should not cost a compile
        stmts = parse_stf(read_input_text(stf, MAX_STF_BYTES, "STF file"), str(stf))
    except InputFileError as exc:
        raise StfError(str(exc)) from None
    prog = compile_p4(p4, include_dirs, defines)
    try:
        return run_stf(Switch(prog), stmts)
    except StfError as exc:  # "FILE: line N (...): why", as a syntax error names its file
        raise StfError(f"{stf}: {exc}") from None


# ----------------------------------------------------------------------------- corpus
_V1MODEL = re.compile(r'^\s*#\s*include\s*[<"]v1model\.p4[>"]', re.M)


@dataclass
class CorpusEntry:
    program: str
    status: str  # pass | wrong | rejected | error (stf) ; rejected | accepted | error (errors)
    reason: str = ""
    location: str = ""
    seconds: float = 0.0
    diff: str = ""
    p4info: str = ""  # equal | differs | no reference (compiled programs; see pyswitch/p4info/compare.py)
    p4info_diff: str = ""
    path: str = ""  # the switch's execution path: native | python (why); see pyswitch/native
    # pass | wrong on each path that ran it: a program on the native path is run on the
    # Python path too, so that both paths are checked against the STF file
    paths: dict[str, str] = field(default_factory=dict)


class _Timeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    # SIGALRM interrupts pure-Python work in this one process (no worker processes, so the
    # corpus run stays on one core); off the main thread there is no limit
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.getitimer(signal.ITIMER_REAL)  # someone else's alarm, kept
    t0 = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - t0), 1e-3))


def corpus_programs(d: Path, need_stf: bool) -> list[Path]:
    """The v1model programs of `d` (with an .stf beside them when `need_stf`)."""
    out = []
    for p in sorted(d.glob("*.p4")):
        if need_stf and not p.with_suffix(".stf").is_file():
            continue
        try:
            text = read_input(p, MAX_STF_BYTES, "P4 program").decode(errors="replace")
        except InputFileError:
            continue
        if _V1MODEL.search(text):
            out.append(p)
    return out


def _compile_error(e: P4CompileError) -> tuple[str, str]:
    return e.message, f"{Path(e.file).name}:{e.line}:{e.col}"


def run_one(p4: Path, include_dirs: list[str], timeout: float,
            expect_reject: bool = False) -> CorpusEntry:
    """One corpus program: compile, then (unless `expect_reject`) run its .stf."""
    ent = CorpusEntry(p4.name, "error")
    t0 = time.monotonic()
    try:
        with _time_limit(timeout):
            try:
                prog = compile_p4(p4, include_dirs)
            except P4CompileError as e:
                ent.status = "rejected"
                ent.reason, ent.location = _compile_error(e)
                return ent
            if expect_reject:
                ent.status = "accepted"
                return ent
            ent.p4info, ent.p4info_diff = check_against_p4c(p4, prog.p4info)
            stf = p4.with_suffix(".stf")
            try:
                text = read_input(stf, MAX_STF_BYTES, "STF file").decode(errors="replace")
            except InputFileError as exc:
                raise StfError(str(exc)) from None
            stmts = parse_stf(text, stf.name)
            sw = Switch(prog)
            ent.path = sw.path
            runs = [("native" if sw.path == "native" else "python", sw)]
            if sw.path == "native":
                runs.append(("python", Switch(prog, native=False)))
            status = "pass"  # set only once every path ran (an StfError leaves "error")
            for name, s in runs:
                res = run_stf(s, stmts)
                ent.paths[name] = "pass" if res.passed else "wrong"
                if not res.passed and status == "pass":
                    status = "wrong"
                    ent.diff = res.diff()
                    first = next(pr for pr in res.ports if pr.problems)
                    ent.reason = f"{name} path: port {first.port}: {first.problems[0]}"
            ent.status = status
    except _Timeout:
        ent.reason = f"timeout after {timeout:g} s"
    except (StfSyntaxError, StfError) as e:
        ent.reason = f"stf: {e}"
    except RecursionError:
        ent.reason = "RecursionError (program too deeply nested for pyswitch)"
    except Exception as e:  # noqa: BLE001 - a crash of one program must not stop the corpus
        ent.reason = f"{type(e).__name__}: {e}"
    finally:
        ent.seconds = round(time.monotonic() - t0, 3)
    return ent


def reason_group(reason: str) -> str:
    """A rejection message with its specifics (quoted names, numbers) blanked, for counts."""
    r = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", reason)
    return re.sub(r"\b\d+\b", "N", r)


def run_corpus(d: str | Path, include_dirs: list[str] | tuple = (), timeout: float = 60.0,
               expect_reject: bool = False, out: Any = None,
               only: str | None = None) -> list[CorpusEntry]:
    """Run every v1model program of `d` (with its .stf, or compile-only when
    `expect_reject`), printing one line per program to `out` (None: silent)."""
    progs = corpus_programs(Path(d), need_stf=not expect_reject)
    if only:
        progs = [p for p in progs if re.search(only, p.name)]
    res = []
    for p in progs:
        ent = run_one(p, list(include_dirs), timeout, expect_reject)
        res.append(ent)
        if out is not None:
            tail = f"  {ent.location + ': ' if ent.location else ''}{ent.reason}" \
                if ent.reason else ""
            p4i = f"  [p4info {ent.p4info}{': ' + ent.p4info_diff if ent.p4info_diff else ''}]" \
                if ent.p4info and ent.p4info != "equal" else ""
            print(f"{ent.status:9s} {ent.program}{tail}{p4i}", file=out, flush=True)
    return res


def summary(entries: list[CorpusEntry], expect_reject: bool = False) -> str:
    c = Counter(e.status for e in entries)
    keys = ("rejected", "accepted", "error") if expect_reject else (
        "pass", "wrong", "rejected", "error")
    line = f"{len(entries)} programs: " + ", ".join(f"{k} {c.get(k, 0)}" for k in keys)
    compiled = [e for e in entries if e.p4info]
    if compiled:
        eq = sum(1 for e in compiled if e.p4info == "equal")
        line += f"; P4Info equal to p4c's {eq} of {len(compiled)} compiled"
    ran = [e for e in entries if e.path]
    if ran:
        nat = sum(1 for e in ran if e.path == "native")
        line += f"; native path {nat} of {len(ran)} run"
        for p in ("python", "native"):
            on = Counter(e.paths[p] for e in ran if p in e.paths)
            line += f"; {p} path: pass {on.get('pass', 0)}, wrong {on.get('wrong', 0)}"
    return line


# ----------------------------------------------------------------------------- CLI
def _argparser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="python -m pyswitch stf",
        description="run STF packet tests (p4c's BMv2 format) on pyswitch",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m pyswitch stf tests/stf/action_params.p4 tests/stf/action_params.stf\n"
               "  python -m pyswitch stf --corpus /tmp/p4c/testdata/p4_16_samples")
    ap.add_argument("program", nargs="?", help="the P4 program (single-test mode)")
    ap.add_argument("stf", nargs="?", help="its STF test (single-test mode)")
    ap.add_argument("--corpus", metavar="DIR", help="run every v1model program of DIR that "
                    "has an .stf beside it; each one that compiles also has its P4Info "
                    "compared with p4c's (DIR_outputs/PROG.p4info.txtpb)")
    ap.add_argument("--expect-reject", action="store_true",
                    help="with --corpus: DIR holds programs p4c rejects (no .stf needed); "
                    "each one pyswitch accepts counts as a wrong answer")
    ap.add_argument("-I", dest="include", action="append", default=[],
                    help="add an include directory")
    ap.add_argument("-D", dest="defines", action="append", default=[],
                    help="define a macro NAME[=VALUE] (single-test mode)")
    ap.add_argument("--json", metavar="OUT", help="with --corpus: write the results as JSON")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="with --corpus: seconds per program (default 60)")
    ap.add_argument("--only", metavar="REGEX", help="with --corpus: programs whose file "
                    "name matches REGEX")
    ap.add_argument("-v", "--verbose", action="store_true", help="print runner notes")
    return ap


def _main_corpus(args: argparse.Namespace) -> int:
    d = Path(args.corpus)
    if not d.is_dir():
        print(f"pyswitch stf: no directory {d}", file=sys.stderr)
        return 2
    entries = run_corpus(d, args.include, args.timeout, args.expect_reject, sys.stdout,
                         args.only)
    line = summary(entries, args.expect_reject)
    rej = Counter(reason_group(e.reason) for e in entries if e.status == "rejected")
    if rej and not args.expect_reject:
        print("rejections by message:")
        for msg, n in rej.most_common(15):
            print(f"  {n:4d}  {msg}")
    wrong = [e for e in entries if e.status in ("wrong", "accepted")]
    for e in wrong:
        if e.diff:
            print(f"--- {e.program}\n{e.diff}")
    p4i = [e for e in entries if e.p4info == "differs"]
    if p4i:
        print("P4Info differing from p4c's (first difference):")
        for e in p4i:
            print(f"  {e.program}: {e.p4info_diff}")
    print(line)
    if args.json:
        doc = {"corpus": str(d), "mode": "expect-reject" if args.expect_reject else "stf",
               "include_dirs": args.include, "summary": line,
               "counts": dict(Counter(e.status for e in entries)),
               "programs": [asdict(e) for e in entries]}
        write_files_atomic([(Path(args.json), (json.dumps(doc, indent=1) + "\n").encode())])
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m pyswitch stf``: 0 = pass, 1 = wrong packets (or, in a corpus, any wrong
    answer), 2 = the test could not run (compile error, bad STF, unknown table, ...)."""
    try:
        args = _argparser().parse_args(argv)
        if args.corpus and (args.program or args.stf):
            raise UsageError("give either PROG.p4 TEST.stf or --corpus DIR")
        if not args.corpus and not args.program:
            raise UsageError("PROG.p4 is required (or --corpus DIR)")
        if not (math.isfinite(args.timeout) and args.timeout > 0):
            raise UsageError(f"--timeout {args.timeout:g}: must be a number of seconds > 0")
        if args.only is not None:
            try:
                re.compile(args.only)
            except re.error as exc:
                raise UsageError(f"--only {args.only!r}: not a regular expression "
                                 f"({exc})") from None
        if args.json is not None and not args.json.strip():
            raise UsageError("--json: empty path")
        native.mode()  # a PYSWITCH_NATIVE typo: one line, not one error per program
    except UsageError as exc:
        print(f"pyswitch stf: {exc}", file=sys.stderr)
        return 2
    if args.corpus:
        return _main_corpus(args)
    stf = args.stf or str(Path(args.program).with_suffix(".stf"))
    defines = {}
    for d in args.defines:
        k, _, v = d.partition("=")
        if not k.isidentifier():
            print(f"pyswitch stf: -D {d!r}: {k!r} is not a macro name", file=sys.stderr)
            return 2
        defines[k] = v if v else "1"
    try:
        res = run_stf_file(args.program, stf, args.include, defines)
    except P4CompileError as e:
        print(f"compile error: {e}", file=sys.stderr)
        return 2
    except (StfSyntaxError, StfError, OSError) as e:
        print(f"stf error: {e}", file=sys.stderr)
        return 2
    except native.NotNative as e:  # PYSWITCH_NATIVE=on and a program it cannot take
        print(f"pyswitch stf: PYSWITCH_NATIVE=on, but the native path cannot run "
              f"{args.program}: {e}", file=sys.stderr)
        return 2
    if args.verbose:
        for n in res.notes:
            print(f"note: {n}")
    if res.passed:
        print(f"PASS {stf}")
        return 0
    print(f"FAIL {stf}\n{res.diff()}")
    return 1
