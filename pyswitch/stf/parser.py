"""Parser of STF ("simple test framework") files, the packet tests of p4c's BMv2 backend.

Pure: text in, a list of `Stmt` out; no switch, no I/O. The language (as p4c's
``backends/bmv2/bmv2stf.py`` reads it) is line oriented, ``#`` starts a comment, the
command keyword is case-insensitive:

    add TABLE [PRIO] KEY:VALUE ... ACTION(ARG:VALUE, ...) [= ID]
    setdefault TABLE ACTION(ARG:VALUE, ...)
    packet PORT HEX...              # spaces inside the data are ignored
    expect PORT [HEX...] [$]        # '*' = any nibble, trailing '$' = exact length;
                                    # no data = one packet of any content
    wait | no_packet | remove all | check_counter ...
    mc_mgrp_create GRP | mc_node_create RID PORT... | mc_node_update NODE PORT...
    mc_node_associate GRP NODE | mirroring_add SESSION PORT | mirroring_add_mc SESSION GRP
    mirroring_delete SESSION | mirroring_get SESSION
    counter_read/counter_write/register_read/register_write/register_reset NAME ...
    meter_get_rates/meter_set_rates/meter_array_set_rates NAME ...

Key values keep their text (``0x****0101``, ``10/8``, ``1->5``): how a value becomes a
match depends on the key's match kind, which only the runner knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ActionCall", "Stmt", "StfSyntaxError", "parse_int", "parse_stf"]


class StfSyntaxError(ValueError):
    """A line that is not STF: ``str(e) == "FILE:LINE: message"``."""

    def __init__(self, file: str, line: int, message: str) -> None:
        self.file, self.line, self.message = file, line, message
        super().__init__(f"{file}:{line}: {message}")


@dataclass
class ActionCall:
    name: str
    args: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Stmt:
    """One STF command. `cmd` is the lower-case keyword; the other fields by command:

    add: table, priority (int | None), keys [(name, text)], action, entry_id;
    setdefault: table, action; packet: port, data (hex); expect: port, data (hex with
    '*', or None = any packet), exact (trailing '$'); the direct commands
    (mc_*, mirroring_*, counter_*, register_*, meter_*, check_counter, remove): name
    (the first qualified-name argument, if any) and nums (the numeric arguments as text).
    """

    cmd: str
    line: int
    table: str = ""
    priority: int | None = None
    keys: list[tuple[str, str]] = field(default_factory=list)
    action: ActionCall | None = None
    entry_id: str | None = None
    port: int = 0
    data: str | None = None
    exact: bool = False
    name: str = ""
    nums: list[str] = field(default_factory=list)
    text: str = ""


# A number: decimal, or hex/binary/octal whose digits may be '*' (don't care).
_NUM = r"(?:0[xX][0-9a-fA-F*]+|0[bB][01*]+|0[oO][0-7*]+|[0-9]+)"
# A qualified name: identifiers ($ allowed, as p4c's names like hdr.h.$valid$), dots,
# [N] indices; or a double-quoted name.
_NAME = r"(?:\"[^\"]+\"|[A-Za-z_$][A-Za-z0-9_$]*(?:\[[0-9]+\])?(?:\.[A-Za-z_$][A-Za-z0-9_$]*(?:\[[0-9]+\])?)*)"
_TOKEN = re.compile(rf"\s*(?:(?P<num>{_NUM}(?:\.[0-9]+)?)(?![A-Za-z_$])|(?P<name>{_NAME})"
                    r"|(?P<punct>->|==|!=|<=|>=|[:(),=/<>]))")

_DIRECT = {
    # command: (takes a leading name, minimum count of numbers, maximum or None)
    "mc_mgrp_create": (False, 1, 1),
    "mc_mgrp_destroy": (False, 1, 1),
    "mc_node_create": (False, 2, None),
    "mc_node_update": (False, 2, None),
    "mc_node_associate": (False, 2, 2),
    "mc_node_dissociate": (False, 2, 2),
    "mc_node_destroy": (False, 1, 1),
    "mirroring_add": (False, 2, 2),
    "mirroring_add_mc": (False, 2, 2),
    "mirroring_delete": (False, 1, 1),
    "mirroring_get": (False, 1, 1),
    "counter_read": (True, 1, 1),
    "counter_write": (True, 3, 3),
    "register_read": (True, 1, 1),
    "register_write": (True, 2, 2),
    "register_reset": (True, 0, 0),
}
_METER = ("meter_get_rates", "meter_set_rates", "meter_array_set_rates")
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
MAX_PORT = 511
"""Largest STF port: v1model's ``PortId_t`` is ``bit<9>``."""
MAX_NUMBER_DIGITS = 200
"""Longest number an STF line may hold (a 512-bit value has 155 decimal digits)."""


def parse_int(text: str) -> int:
    """An STF number without don't-care digits (decimal, 0x, 0b, 0o)."""
    t = text.strip().lower()
    if len(t) > MAX_NUMBER_DIGITS:
        raise ValueError(f"number of {len(t)} digits: the limit is {MAX_NUMBER_DIGITS}")
    if "*" in t:
        raise ValueError(f"'*' digits not allowed here: {text}")
    if t.startswith(("0x", "0b", "0o")):
        return int(t[2:], {"x": 16, "b": 2, "o": 8}[t[1]])
    return int(t, 10)


def _strip_comment(line: str) -> str:
    # '#' outside a quoted name starts a comment
    out, quoted = [], False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            break
        out.append(ch)
    return "".join(out).strip()


class _Toks:
    """The tokens of one line with a cursor; errors carry the line number."""

    def __init__(self, text: str, file: str, line: int) -> None:
        self.file, self.line = file, line
        self.items: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise StfSyntaxError(file, line, f"unexpected text {text[pos:].strip()!r}")
            kind = m.lastgroup or ""
            val = m.group(kind)
            if kind == "name" and val.startswith('"'):
                val = val[1:-1]
            self.items.append((kind, val))
            pos = m.end()
        self.i = 0

    def err(self, msg: str) -> StfSyntaxError:
        return StfSyntaxError(self.file, self.line, msg)

    def peek(self, k: int = 0) -> tuple[str, str] | None:
        j = self.i + k
        return self.items[j] if j < len(self.items) else None

    def take(self, kind: str, what: str) -> str:
        t = self.peek()
        if t is None or t[0] != kind:
            got = "end of line" if t is None else repr(t[1])
            raise self.err(f"expected {what}, got {got}")
        self.i += 1
        return t[1]

    def punct(self, p: str) -> None:
        t = self.peek()
        if t != ("punct", p):
            got = "end of line" if t is None else repr(t[1])
            raise self.err(f"expected {p!r}, got {got}")
        self.i += 1

    def at_end(self) -> bool:
        return self.i >= len(self.items)

    def end(self) -> None:
        if not self.at_end():
            raise self.err(f"unexpected {self.items[self.i][1]!r}")


def _action(t: _Toks) -> ActionCall:
    name = t.take("name", "an action name")
    t.punct("(")
    args: list[tuple[str, str]] = []
    if t.peek() != ("punct", ")"):
        while True:
            arg = t.take("name", "an action argument name")
            t.punct(":")
            args.append((arg, t.take("num", f"a value for {arg}")))
            if t.peek() == ("punct", ","):
                t.i += 1
                continue
            break
    t.punct(")")
    return ActionCall(name, args)


def _key_value(t: _Toks, key: str) -> str:
    v = t.take("num", f"a value for key {key}")
    nxt = t.peek()
    if nxt in (("punct", "/"), ("punct", "->")):  # lpm prefix or range
        t.i += 1
        v += nxt[1] + t.take("num", f"the rest of the value of {key}")
    return v


def _parse_add(t: _Toks, st: Stmt) -> None:
    st.table = t.take("name", "a table name")
    nxt = t.peek()
    # a bare decimal before the first KEY:VALUE is the priority
    if nxt and nxt[0] == "num":
        st.priority = parse_int(t.take("num", "a priority"))
    while True:
        a, b = t.peek(), t.peek(1)
        if a and a[0] == "name" and b == ("punct", ":"):
            t.i += 2
            st.keys.append((a[1], _key_value(t, a[1])))
            continue
        break
    st.action = _action(t)
    if t.peek() == ("punct", "="):
        t.i += 1
        st.entry_id = t.take("name", "an entry id")
    t.end()


def _packet_data(rest: str, file: str, line: int, expect: bool) -> tuple[str, bool]:
    data = "".join(rest.split())
    exact = False
    if expect and data.endswith("$"):
        data, exact = data[:-1], True
    allowed = "0123456789abcdefABCDEF" + ("*" if expect else "")
    bad = [c for c in data if c not in allowed]
    if bad:
        raise StfSyntaxError(file, line, f"invalid packet data character {bad[0]!r}")
    if not expect and len(data) % 2:
        raise StfSyntaxError(file, line, "packet data has an odd number of hex digits")
    return data.upper(), exact


def _parse_check_counter(t: _Toks, st: Stmt) -> None:
    """``check_counter NAME(INDEX|$ID) [packets|bytes OP NUMBER]`` (p4c's stf grammar):
    ``st.name`` the counter, ``st.nums`` [index, kind, op, number] as text."""
    st.name = t.take("name", "a counter name")
    t.punct("(")
    tok = t.peek()
    if tok is not None and tok[0] == "name" and tok[1].startswith("$"):
        index = t.take("name", "an index or $ID")
    else:
        index = t.take("num", "an index or $ID")
        parse_int(index)
    t.punct(")")
    st.nums = [index]
    if not t.at_end():
        kind = t.take("name", "packets or bytes")
        if kind not in ("packets", "bytes"):
            raise t.err(f"check_counter: expected packets or bytes, got {kind!r}")
        tok = t.peek()
        if tok is None or tok[0] != "punct" or tok[1] not in _COMPARISONS:
            raise t.err("check_counter: expected a comparison (==, !=, <, <=, >, >=), got "
                        + ("end of line" if tok is None else repr(tok[1])))
        t.i += 1
        number = t.take("num", "a number to compare with")
        parse_int(number)
        st.nums += [kind, tok[1], number]
    t.end()


def _parse_line(text: str, file: str, line: int) -> Stmt | None:
    text = _strip_comment(text)
    if not text:
        return None
    word, _, rest = text.partition(" ")
    if "\t" in word:
        word, _, rest2 = word.partition("\t")
        rest = rest2 + " " + rest
    cmd = word.lower()
    st = Stmt(cmd, line, text=text)
    if cmd in ("packet", "expect"):
        # the port is a whole word: "packet 1e3 ..." is not port 1 with data "e3..."
        m = re.match(r"\s*([0-9]+)(?=\s|$)(.*)$", rest)
        if not m:
            raise StfSyntaxError(file, line, f"{cmd}: expected a port number (decimal), got "
                                 f"{rest.split()[0][:24]!r}" if rest.split() else
                                 f"{cmd}: expected a port number")
        if len(m.group(1)) > 4 or int(m.group(1)) > MAX_PORT:
            raise StfSyntaxError(file, line, f"{cmd}: port {m.group(1)[:24]} is not a v1model "
                                 f"port (0..{MAX_PORT}, PortId_t is bit<9>)")
        st.port = int(m.group(1))
        body = m.group(2)
        if cmd == "packet":
            st.data, _ = _packet_data(body, file, line, expect=False)
            if not st.data:
                raise StfSyntaxError(file, line, "packet without data")
        elif body.strip():
            st.data, st.exact = _packet_data(body, file, line, expect=True)
        return st
    if cmd in ("wait", "no_packet"):
        if rest.strip():
            raise StfSyntaxError(file, line, f"{cmd} takes no arguments")
        return st
    t = _Toks(rest, file, line)
    if cmd == "add":
        _parse_add(t, st)
    elif cmd == "setdefault":
        st.table = t.take("name", "a table name")
        st.action = _action(t)
        t.end()
    elif cmd == "remove":
        w = t.take("name", "'all'")
        if w.lower() != "all":
            raise t.err("only 'remove all' is STF")
        t.end()
    elif cmd == "check_counter":
        _parse_check_counter(t, st)
    elif cmd in _DIRECT:
        has_name, lo, hi = _DIRECT[cmd]
        if has_name:
            st.name = t.take("name", "a name")
        while not t.at_end():
            st.nums.append(t.take("num", "a number"))
        for n in st.nums:
            parse_int(n)  # reject don't-care digits and junk here, not when running
        if len(st.nums) < lo or (hi is not None and len(st.nums) > hi):
            raise t.err(f"{cmd}: wrong number of arguments")
    elif cmd in _METER:
        st.name = t.take("name", "a meter name")
        st.nums = [v for _, v in t.items[t.i:]]
    else:
        raise StfSyntaxError(file, line, f"unknown STF command {word!r}")
    return st


def parse_stf(text: str, file: str = "<stf>") -> list[Stmt]:
    """Parse the whole STF text; raises `StfSyntaxError` at the first bad line."""
    out: list[Stmt] = []
    for n, raw in enumerate(text.splitlines(), 1):
        try:
            st = _parse_line(raw, file, n)
        except ValueError as e:
            if isinstance(e, StfSyntaxError):
                raise
            raise StfSyntaxError(file, n, str(e)) from None
        if st is not None:
            out.append(st)
    return out
