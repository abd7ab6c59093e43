"""A small C preprocessor for P4 sources, keeping a map back to the original lines.

Supported: ``#include <f>`` (pyswitch's own include directory first, then ``-I`` dirs),
``#include "f"`` (relative to the including file, then ``-I`` dirs), object-like and
function-like ``#define`` (see `pyswitch.macros`), ``#undef``,
``#ifdef``/``#ifndef``/``#if``/``#elif``/``#else``/``#endif`` with integer expressions over
``defined(X)`` and macros, ``#pragma`` and ``#line`` (ignored), ``#error``. Every file read must be a regular file of at most
:data:`MAX_SOURCE_BYTES`; a line expands to at most ``pyswitch.macros.MAX_EXPANSION``
characters. Comments are
removed first (their newlines kept) so that line numbers survive. Each output line records
``(file, line)`` of the original line it came from, so that later errors can say
``file:line:col``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pyswitch.errors import P4CompileError
from pyswitch.inputfile import InputFileError, read_input, shown_path
from pyswitch.macros import MacroError, parse_function_macro
from pyswitch.macros import expand as expand_macros

BUILTIN_INCLUDE = Path(__file__).parent / "include"
MAX_SOURCE_BYTES = 16 * 2**20
"""Largest P4 source (or included) file read (docs/pyswitch-api.md, "Limits")."""

_IDENT = re.compile(r"[A-Za-z_]\w*")
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")


@dataclass
class Source:
    """Preprocessed text plus, per output line (0-based), the original ``(file, line)``."""

    text: str
    linemap: list[tuple[str, int]] = field(default_factory=list)

    def locate(self, line: int, col: int) -> tuple[str, int, int]:
        """Map a 1-based (line, col) of `text` to the original file, line and column."""
        if 1 <= line <= len(self.linemap):
            f, ln = self.linemap[line - 1]
            return f, ln, col
        if self.linemap:
            f, ln = self.linemap[-1]
            return f, ln, col
        return "<input>", line, col

    def error(self, line: int, col: int, message: str) -> P4CompileError:
        f, ln, c = self.locate(line, col)
        return P4CompileError(f, ln, c, message)


class UnterminatedComment(ValueError):
    """A ``/*`` that is never closed: ``line`` and ``col`` of the ``/*``."""

    def __init__(self, line: int, col: int) -> None:
        super().__init__("comment opened here is never closed (end of file inside /* */)")
        self.line, self.col = line, col


def strip_comments(text: str) -> str:
    """Replace ``//`` and ``/* */`` comments by spaces, keeping newlines and strings;
    :class:`UnterminatedComment` for a ``/*`` without its ``*/``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:  # as p4c: a file may not end inside a comment
                line = text.count("\n", 0, i) + 1
                raise UnterminatedComment(line, i - text.rfind("\n", 0, i))
            j += 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Preprocessor:
    """Expands one P4 file into a `Source` (see module docstring)."""

    def __init__(self, include_dirs: tuple[str, ...] | list[str] = (),
                 defines: dict[str, str] | None = None) -> None:
        self.include_dirs = [Path(d) for d in include_dirs]
        self.macros: dict[str, str] = {"__PYSWITCH__": "1", "__TARGET_BMV2__": "1",
                                       "__p4c__": "1"}
        for k, v in (defines or {}).items():
            self.macros[k] = str(v)
        self.lines: list[str] = []
        self.linemap: list[tuple[str, int]] = []
        self._depth = 0

    def run(self, path: str) -> Source:
        self._file(Path(path), str(path))
        return Source("\n".join(self.lines) + "\n", self.linemap)

    # -- helpers -----------------------------------------------------------------------
    def _err(self, fname: str, line: int, msg: str) -> P4CompileError:
        return P4CompileError(fname, line, 1, msg)

    def _expand(self, text: str, guard: frozenset[str] = frozenset()) -> str:
        if not self.macros:
            return text
        # do not expand inside string literals
        parts = re.split(r'("(?:[^"\\\n]|\\.)*")', text)
        funcs = self.__dict__.setdefault("fmacros", {})
        return "".join(p if i % 2 else expand_macros(p, self.macros, funcs, guard)
                       for i, p in enumerate(parts))

    def _expand_at(self, text: str, fname: str, line: int) -> str:
        try:
            return self._expand(text)
        except MacroError as e:
            raise self._err(fname, line, str(e)) from None

    def _eval_if(self, expr: str, fname: str, line: int) -> bool:
        expr = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
                      lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0", expr)
        expr = self._expand(expr)
        expr = _IDENT.sub("0", expr)  # undefined identifiers are 0, as in C
        if not re.fullmatch(r"[\s\d()+\-*/%<>=!&|xXa-fA-F]*", expr):
            raise self._err(fname, line, f"unsupported #if expression: {expr.strip()}")
        py = expr.replace("&&", " and ").replace("||", " or ")
        py = re.sub(r"!(?!=)", " not ", py).replace("/", "//")
        try:
            return bool(eval(py, {"__builtins__": {}}, {}))  # noqa: S307 - sanitized above
        except Exception as exc:  # noqa: BLE001
            raise self._err(fname, line, f"cannot evaluate #if expression: {expr.strip()}") from exc

    def _find_include(self, name: str, angle: bool, cur: Path, fname: str, line: int) -> Path:
        cands: list[Path] = []
        if angle:
            cands.append(BUILTIN_INCLUDE / name)
        else:
            cands.append(cur.parent / name)
        cands += [d / name for d in self.include_dirs]
        if not angle:
            cands.append(BUILTIN_INCLUDE / name)
        for c in cands:
            if c.is_file():
                return c
        raise self._err(fname, line, f"cannot find include file {name!r}")

    def _file(self, path: Path, shown: str) -> None:
        self._depth += 1
        if self._depth > 50:
            raise self._err(shown, 1, "#include nested too deeply")
        try:  # a regular file of bounded size (a FIFO or a device: one line, no hang)
            data = read_input(path, MAX_SOURCE_BYTES, "P4 source")
        except InputFileError as exc:
            raise P4CompileError(shown_path(shown), 0, 0, str(exc).partition(": ")[2]) \
                from None
        try:
            raw = strip_comments(data.decode("utf-8", errors="replace"))
        except UnterminatedComment as exc:
            raise P4CompileError(shown, exc.line, exc.col, str(exc)) from None
        lines = raw.split("\n")
        # active stack entries: (currently_active, some_branch_taken, parent_active)
        stack: list[list[bool]] = []
        active = True
        i = 0
        while i < len(lines):
            lineno = i + 1
            line = lines[i]
            nxt = i + 1
            while line.endswith("\\") and nxt < len(lines):
                line = line[:-1] + " " + lines[nxt]
                nxt += 1
            m = _DIRECTIVE.match(line)
            if m:
                d, arg = m.group(1), m.group(2)
                if d in ("ifdef", "ifndef", "if"):
                    if d == "if":
                        cond = self._eval_if(arg, shown, lineno) if active else False
                    else:
                        cond = (arg.split()[0] in self.macros) if arg else False
                        cond = cond if d == "ifdef" else not cond
                    stack.append([active and cond, active and cond, active])
                    active = active and cond
                elif d == "elif":
                    if not stack:
                        raise self._err(shown, lineno, "#elif without #if")
                    top = stack[-1]
                    cond = (top[2] and not top[1] and self._eval_if(arg, shown, lineno))
                    top[0] = cond
                    top[1] = top[1] or cond
                    active = cond
                elif d == "else":
                    if not stack:
                        raise self._err(shown, lineno, "#else without #if")
                    top = stack[-1]
                    top[0] = top[2] and not top[1]
                    top[1] = True
                    active = top[0]
                elif d == "endif":
                    if not stack:
                        raise self._err(shown, lineno, "#endif without #if")
                    stack.pop()
                    active = stack[-1][0] if stack else True
                elif not active:
                    pass
                elif d == "include":
                    im = re.match(r'^(<([^>]+)>|"([^"]+)")', arg)
                    if not im:
                        raise self._err(shown, lineno, f"bad #include: {arg}")
                    angle = im.group(2) is not None
                    name = im.group(2) or im.group(3)
                    target = self._find_include(name, angle, path, shown, lineno)
                    inc_shown = (str(target) if angle and target.parent == BUILTIN_INCLUDE
                                 else os.path.relpath(target) if not target.is_absolute()
                                 else str(target))
                    if not angle:
                        inc_shown = str(Path(shown).parent / name) if not Path(name).is_absolute() else name
                    self._file(target, inc_shown)
                elif d == "define":
                    dm = re.match(r"^([A-Za-z_]\w*)(\()?\s*(.*)$", arg)
                    if not dm:
                        raise self._err(shown, lineno, f"bad #define: {arg}")
                    funcs = self.__dict__.setdefault("fmacros", {})
                    funcs.pop(dm.group(1), None)
                    if dm.group(2):  # see pyswitch.macros
                        try:
                            funcs[dm.group(1)] = parse_function_macro(dm.group(1), dm.group(3))
                        except MacroError as e:
                            raise self._err(shown, lineno, str(e)) from None
                    self.macros[dm.group(1)] = dm.group(3).strip()
                elif d == "undef":
                    self.macros.pop(arg.strip(), None)
                elif d in ("pragma", "line"):
                    pass
                elif d == "error":
                    raise self._err(shown, lineno, f"#error {arg}")
                elif d == "warning":
                    pass
                else:
                    raise self._err(shown, lineno, f"unsupported preprocessor directive #{d}")
                for k in range(i, nxt):
                    self.lines.append("")
                    self.linemap.append((shown, k + 1))
            else:
                for k in range(i, nxt):
                    text = (self._expand_at(lines[k], shown, k + 1) if active else "")
                    if k < nxt - 1 and active:
                        text = text[:-1] if text.endswith("\\") else text
                    self.lines.append(text)
                    self.linemap.append((shown, k + 1))
            i = nxt
        if stack:
            raise self._err(shown, len(lines), "unterminated #if/#ifdef")
        self._depth -= 1


def preprocess(path: str, include_dirs: tuple[str, ...] | list[str] = (),
               defines: dict[str, str] | None = None) -> Source:
    """Preprocess `path` (see module docstring)."""
    return Preprocessor(include_dirs, defines).run(path)
