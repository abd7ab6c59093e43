"""Metadata slots read into locals: a pass over one generated function's source.

The Python back end runs it over the IR (`pyswitch.ir.localcache`, the same rule and the
same output, the facts read from the nodes); this text pass is its fallback for a function
that still holds Python text (`pyswitch.ir.localcache.needs_text`).

A generated function reads a metadata scalar as ``M[k]`` (a list index: three bytecodes);
an action over a register array reads its index ``M[k]`` once per access (64 times for
ina.p4's ``add``). Within a run of consecutive statements of one block that provably
neither writes slot ``k`` nor lets anything else see ``M`` (every use of the name ``M`` in
them is ``M[<constant>]``: no call receives ``M``, no slice, no computed index, no
assignment to ``M`` itself), every read of ``M[k]`` gives the value ``M[k]`` had when the
run began, so ``_mk = M[k]`` before the run and ``_mk`` for each read in it is the same
code. A statement that does let ``M`` out (a call of an action, say) ends the run; the
blocks inside it are searched the same way. Runs with fewer than `MIN_READS` reads of a
slot are left as they are (the load would cost more than it saves), as are runs that do not
start and end on lines of their own. The analysis is on the syntax tree; the text is
changed on exactly the lines of the runs it chose, or not at all.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator

MIN_READS = 3
_READ = re.compile(r"\bM\[(\d+)\]")
_LOCAL = re.compile(r"_m\d+$")


def _slot(node: ast.AST) -> int | None:
    """k when `node` is ``M[k]`` with a non-negative integer constant k, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id == "M" and isinstance(node.slice, ast.Constant) \
            and type(node.slice.value) is int and node.slice.value >= 0:
        return node.slice.value
    return None


class _Facts:
    """Per statement: whether ``M`` escapes from it, the slots it writes and reads."""

    def __init__(self, st: ast.stmt) -> None:
        self.escapes = False
        self.written: set[int] = set()
        self.reads: Counter[int] = Counter()
        inner: set[int] = set()
        for node in ast.walk(st):
            k = _slot(node)
            if k is not None:
                inner.add(id(node.value))  # type: ignore[attr-defined]
                if isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                    self.reads[k] += 1
                else:
                    self.written.add(k)
        for node in ast.walk(st):
            if isinstance(node, ast.Name) and node.id == "M" and id(node) not in inner:
                self.escapes = True
            elif isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef,
                                   ast.ClassDef, ast.Global, ast.Nonlocal)):
                self.escapes = True


def _bodies(st: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists directly inside a compound statement."""
    for name in ("body", "orelse", "finalbody"):
        b = getattr(st, name, None)
        if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
            yield b
    for h in getattr(st, "handlers", []) or []:
        yield h.body


def _runs(body: list[ast.stmt], facts: dict[int, _Facts],
          out: list[tuple[int, list[ast.stmt]]]) -> None:
    """(slot, run) for every slot and maximal run of `body` where it may be cached."""
    slots = set()
    for st in body:
        slots |= set(facts[id(st)].reads)
    for k in slots:
        cur: list[ast.stmt] = []
        for st in [*body, None]:
            f = facts[id(st)] if st is not None else None
            if f is not None and not f.escapes and k not in f.written:
                cur.append(st)
                continue
            if sum(facts[id(s)].reads[k] for s in cur) >= MIN_READS:
                out.append((k, cur))
            cur = []
    for st in body:
        f = facts[id(st)]
        if f.escapes or f.written:  # the runs above stop here: look inside
            for b in _bodies(st):
                _runs(b, facts, out)


def cache_metadata_reads(lines: list[str]) -> list[str]:
    """`lines` (``def ...:`` then its body, one statement or clause header per line, four
    spaces per level) with the qualifying metadata reads taken from locals (module
    docstring)."""
    src = "\n".join(lines)
    lines = src.split("\n")  # one element per line, as the syntax tree counts them
    try:
        fn = ast.parse(src).body[0]
    except SyntaxError:
        return lines
    if not isinstance(fn, ast.FunctionDef) or "M" not in {a.arg for a in fn.args.args}:
        return lines
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and _LOCAL.match(node.id) or \
                isinstance(node, ast.arg) and _LOCAL.match(node.arg):
            return lines  # a name the pass would introduce is taken
    facts = {id(st): _Facts(st) for st in ast.walk(fn) if isinstance(st, ast.stmt)}
    found: list[tuple[int, list[ast.stmt]]] = []
    _runs(fn.body, facts, found)
    inserts: dict[int, list[str]] = {}  # 0-based line -> lines to put before it
    replace: dict[int, set[int]] = {}   # 0-based line -> slots read from locals there
    for k, run in found:
        first, last = run[0], run[-1]
        lo, hi = first.lineno - 1, (last.end_lineno or last.lineno) - 1
        head, tail = lines[lo], lines[hi][last.end_col_offset or 0:]
        if len(head) - len(head.lstrip(" ")) != first.col_offset or tail.strip():
            continue  # the run shares its first or last line with code outside it
        if head.lstrip(" ").startswith("elif "):
            continue  # an ``elif`` (its If starts the line): nothing may go before it
        n = sum(1 for i in range(lo, hi + 1) for m in _READ.finditer(lines[i])
                if int(m.group(1)) == k)
        if n != sum(facts[id(s)].reads[k] for s in run):
            continue  # a read the tree did not count (in a string?): leave it alone
        if any(k in replace.get(i, ()) for i in range(lo, hi + 1)):
            continue
        inserts.setdefault(lo, []).append(" " * first.col_offset + f"_m{k} = M[{k}]")
        for i in range(lo, hi + 1):
            replace.setdefault(i, set()).add(k)
    if not inserts:
        return lines
    out: list[str] = []
    for i, line in enumerate(lines):
        out.extend(inserts.get(i, ()))
        ks = replace.get(i)
        if ks:
            line = _READ.sub(lambda m, ks=ks: f"_m{m.group(1)}" if int(m.group(1)) in ks
                             else m.group(0), line)
        out.append(line)
    return out

