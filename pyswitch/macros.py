"""Macro expansion for `pyswitch.preprocess`: object-like and function-like macros, as the
C preprocessor p4c runs expands them (arguments are expanded before they are substituted,
the result is rescanned, a macro is not expanded inside its own expansion). The ``#`` and
``##`` operators and variadic macros are not supported (rejected at the ``#define``).

Expansion is bounded: one line expands to at most :data:`MAX_EXPANSION` characters, counted
while expanding, so a "macro bomb" (39 nested ``#define``s that each double the one before
would give 2^39 tokens) is refused after about a million characters of work instead of
running for hours."""

from __future__ import annotations

import re

_IDENT = re.compile(r"[A-Za-z_]\w*")
MAX_EXPANSION = 1 << 20
"""Most characters one source line may expand to (pyswitch's own limit; documented in
docs/pyswitch-api.md, "Limits")."""


class MacroError(Exception):
    """An invocation pyswitch cannot expand (the message says why)."""


def parse_function_macro(name: str, rest: str) -> tuple[list[str], str]:
    """(parameters, body) of ``#define NAME(rest``; `rest` starts after the ``(``."""
    close = rest.find(")")
    if close < 0:
        raise MacroError(f"bad #define of function-like macro {name!r}")
    params = [p.strip() for p in rest[:close].split(",")] if rest[:close].strip() else []
    body = rest[close + 1:].strip()
    if any(not _IDENT.fullmatch(p) for p in params):
        raise MacroError(f"function-like macro {name!r}: variadic or malformed parameters "
                         "are not supported")
    if "#" in body:
        raise MacroError(f"function-like macro {name!r}: the # and ## operators are not "
                         "supported")
    return params, body


def _split_args(text: str, open_pos: int) -> tuple[list[str], int]:
    """The arguments of an invocation whose '(' is at `open_pos`, and the ')' position."""
    depth, args, start = 0, [], open_pos + 1
    for i in range(open_pos, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                return args, i
        elif c == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
    raise MacroError("a function-like macro invocation must end on its line in pyswitch")


class _Budget:
    """Characters an expansion may still produce (shared by its recursive calls)."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise MacroError(f"macro expansion of this line exceeds {MAX_EXPANSION:,} "
                             "characters (pyswitch.macros.MAX_EXPANSION)")


def expand(text: str, objs: dict[str, str], funcs: dict[str, tuple[list[str], str]],
           guard: frozenset[str] = frozenset(), budget: _Budget | None = None) -> str:
    """`text` with every macro of `objs` (object-like) and `funcs` (function-like,
    name -> (parameters, body)) expanded; :class:`MacroError` beyond
    :data:`MAX_EXPANSION` characters."""
    budget = budget if budget is not None else _Budget(MAX_EXPANSION)
    out: list[str] = []
    pos = 0
    while True:
        m = _IDENT.search(text, pos)
        if m is None:
            out.append(text[pos:])
            budget.spend(len(text) - pos)
            return "".join(out)
        out.append(text[pos:m.start()])
        budget.spend(m.start() - pos)
        name, pos = m.group(0), m.end()
        if name in guard or name not in objs:
            out.append(name)
            budget.spend(len(name))
            continue
        if name in funcs:
            j = pos
            while j < len(text) and text[j] in " \t":
                j += 1
            if j >= len(text) or text[j] != "(":
                out.append(name)  # the name alone is not an invocation
                continue
            params, body = funcs[name]
            args, close = _split_args(text, j)
            if len(params) == 0 and len(args) == 1 and not args[0].strip():
                args = []
            if len(args) != len(params):
                raise MacroError(f"macro {name!r} takes {len(params)} argument(s), "
                                 f"got {len(args)}")
            vals = {p: expand(a.strip(), objs, funcs, guard, budget)
                    for p, a in zip(params, args, strict=True)}
            subst = _IDENT.sub(lambda x, v=vals: v.get(x.group(0), x.group(0)), body)
            budget.spend(len(subst))
            out.append(expand(subst, objs, funcs, guard | {name}, budget))
            pos = close + 1
            continue
        out.append(expand(objs[name], objs, funcs, guard | {name}, budget))
