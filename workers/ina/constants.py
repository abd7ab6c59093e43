"""INA constants, read from the one place they are defined: ``p4src/include/constants.p4``.

The P4 programs and every Python component (protocol codec, workers, PS, planner, tests)
must agree on K (values per packet), the slot count, the INA UDP port, type codes and flag
bits. They are written once, in P4 syntax, and this module parses that file with a tiny
reader that understands exactly two forms::

    #define NAME <expr>            /* object-like macro */
    const bit<W> NAME = <expr>;    /* typed constant   */

where ``<expr>`` is an integer literal (decimal or hex) or ``+ - * / ( )`` over literals and
names defined earlier in the file. Anything else that looks like a definition is an error,
so a constant can never be silently misread. Results are cached.

**Slot-count override** (docs/protocol.md §2): the slot count is the one constant that may
change without editing the file, because a campaign or a multi-job network wants a small
pool (many collisions) and the program's registers must have exactly as many cells as
Python's slot index assumes.  One mechanism carries it everywhere: the environment variable
``INSYNC_INA_NUM_SLOTS``.  ``constants.p4`` wraps the default in ``#ifndef INA_NUM_SLOTS``;
:func:`compile_defines` turns the variable into ``-D INA_NUM_SLOTS=N`` for the compile step
(controller/experiment/network.py), :func:`num_slots` reads it in Python, and every host process the
controller starts inherits it.  :data:`NUM_SLOTS` is the value at import; code that may run
after :func:`set_num_slots` calls :func:`num_slots`.
"""

from __future__ import annotations

import ast
import operator
import os
import re
from functools import cache
from pathlib import Path

CONSTANTS_P4 = Path(__file__).resolve().parents[2] / "p4src" / "include" / "constants.p4"

_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+(.+?)\s*$")
_CONST = re.compile(r"^\s*const\s+bit\s*<\s*(\d+)\s*>\s+([A-Za-z_]\w*)\s*=\s*(.+?)\s*;\s*$")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}


class ConstantsError(ValueError):
    """A definition in constants.p4 that this reader cannot evaluate (file:line: why)."""


def _evaluate(expr: str, known: dict[str, int], where: str) -> int:
    """Evaluate an integer expression over literals and already-defined names."""
    text = expr.replace("/", "//")  # P4 integer division
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ConstantsError(f"{where}: cannot parse expression {expr!r}") from exc

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in known:
                raise ConstantsError(f"{where}: unknown name {node.id!r} in {expr!r}")
            return known[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ConstantsError(f"{where}: unsupported expression {expr!r}")

    return walk(tree.body)


def parse_constants(text: str, filename: str = "constants.p4") -> dict[str, int]:
    """Parse P4 constant definitions into ``{name: value}`` (typed constants wrap to width).

    Header guards (``#define _X_`` with no value) are skipped; include guards and
    ``#ifndef``/``#endif`` lines carry no values.
    """
    # Blank comments out but keep line numbers for error messages.
    text = _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = _LINE_COMMENT.sub("", text)
    values: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        where = f"{filename}:{lineno}"
        m = _DEFINE.match(line)
        if m:
            values[m.group(1)] = _evaluate(m.group(2), values, where)
            continue
        m = _CONST.match(line)
        if m:
            width, name, expr = int(m.group(1)), m.group(2), m.group(3)
            value = _evaluate(expr, values, where)
            if not 0 <= value < (1 << width):
                raise ConstantsError(f"{where}: {name} = {value} does not fit bit<{width}>")
            values[name] = value
            continue
        if re.match(r"^\s*(const\b|#\s*define\b)", line) and not re.match(
            r"^\s*#\s*define\s+\w+\s*$", line
        ):
            raise ConstantsError(f"{where}: unsupported definition: {line.strip()}")
    return values


@cache
def load_constants(path: Path = CONSTANTS_P4) -> dict[str, int]:
    """Read and parse ``constants.p4`` once per process."""
    return parse_constants(path.read_text(), str(path))


_C = load_constants()

K: int = _C["INA_K"]
"""int32 values per INA packet."""
SLOTS_ENV = "INSYNC_INA_NUM_SLOTS"
"""Environment variable of the slot-count override (module docstring)."""
MAX_NUM_SLOTS = 1 << 20
"""Largest slot count accepted: K + 3 registers of this many cells already take ~150 MB in
pyswitch, and a bound checked here keeps a typo from exhausting memory at compile time."""


def check_num_slots(value: object, what: str = SLOTS_ENV) -> int:
    """``value`` as a slot count in 1..MAX_NUM_SLOTS, or ConstantsError naming ``what``."""
    try:
        n = int(str(value).strip(), 0)
    except ValueError:
        raise ConstantsError(f"{what}: slot count must be an integer, got {value!r}") from None
    if not 1 <= n <= MAX_NUM_SLOTS:
        raise ConstantsError(f"{what}: slot count must be in 1..{MAX_NUM_SLOTS}, got {n}")
    return n


def num_slots() -> int:
    """Aggregator slots per switch now: the override if set, else constants.p4's default."""
    raw = os.environ.get(SLOTS_ENV, "").strip()
    return check_num_slots(raw) if raw else _C["INA_NUM_SLOTS"]


def set_num_slots(n: int | None) -> None:
    """Set (``None``: clear) the override for this process, the programs it compiles and the
    host processes it starts afterwards."""
    if n is None:
        os.environ.pop(SLOTS_ENV, None)
    else:
        os.environ[SLOTS_ENV] = str(check_num_slots(n))


def compile_defines() -> dict[str, str]:
    """Preprocessor definitions for compiling ina.p4 under the current override (empty
    without one, so the default build is byte-for-byte what it always was)."""
    raw = os.environ.get(SLOTS_ENV, "").strip()
    return {"INA_NUM_SLOTS": str(check_num_slots(raw))} if raw else {}


NUM_SLOTS: int = num_slots()
"""Aggregator slots per switch (at import; see :func:`num_slots`)."""
MAX_WORKERS: int = _C["INA_MAX_WORKERS"]
"""Workers per job (bitmap width)."""
INA_UDP_PORT: int = _C["INA_UDP_PORT"]
INA_HDR_BYTES: int = _C["INA_HDR_BYTES"]
INA_UDP_LEN: int = _C["INA_UDP_LEN"]
TYPE_GRAD: int = _C["INA_TYPE_GRAD"]
TYPE_PARTIAL: int = _C["INA_TYPE_PARTIAL"]
TYPE_RESULT: int = _C["INA_TYPE_RESULT"]
FLAG_RETRANSMIT: int = _C["INA_FLAG_RETRANSMIT"]
FLAG_FALLBACK: int = _C["INA_FLAG_FALLBACK"]
FLAG_INCOMPLETE: int = _C["INA_FLAG_INCOMPLETE"]
FLAG_ECN: int = _C["INA_FLAG_ECN"]
AGG_ID_PS: int = _C["INA_AGG_ID_PS"]
INA_REPLY_PORT: int = INA_UDP_PORT + 1
"""Where a worker receives the PS's answer to its own late GRAD (docs/protocol.md §6).  Not
a P4 constant on purpose: ina.p4 parses INA only on ``INA_UDP_PORT``, so a frame to this port
is plain IPv4 to every switch (``ipv4_lpm``: unicast to the worker's host)."""

__all__ = [
    "AGG_ID_PS",
    "CONSTANTS_P4",
    "FLAG_ECN",
    "FLAG_FALLBACK",
    "FLAG_INCOMPLETE",
    "FLAG_RETRANSMIT",
    "INA_HDR_BYTES",
    "INA_REPLY_PORT",
    "INA_UDP_LEN",
    "INA_UDP_PORT",
    "K",
    "MAX_NUM_SLOTS",
    "MAX_WORKERS",
    "NUM_SLOTS",
    "SLOTS_ENV",
    "TYPE_GRAD",
    "TYPE_PARTIAL",
    "TYPE_RESULT",
    "ConstantsError",
    "check_num_slots",
    "compile_defines",
    "load_constants",
    "num_slots",
    "parse_constants",
    "set_num_slots",
]
