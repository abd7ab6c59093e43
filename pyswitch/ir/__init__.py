"""pyswitch's intermediate form: what the compiler lowers P4 to, and what each back end
(the generated Python, the native path's C) lowers from (issue 42, scope 1).

=================  ==========================================================
``values``         typed values: an expression (a node, or still its Python text) with
                   its width
``exprs``          the expressions' nodes: constants, reads, P4's operators
``stmts``          statements: register reads and writes, counters' counts, exits,
                   parser errors, direct action calls (and those that copy out),
                   table applies, assignments, whole headers' copies, sets and
                   swaps, header aliases, loops and their jumps, returns, the parser's
                   cursor (extracts, advances), the deparser's emits, the structured
                   ones with bodies (``If``, ``Loop``, ``ExitScope``,
                   ``ParserScope``), and ``PyText`` (Python the compiler still emits
                   as text)
``module``         a body line (a statement at its depth), functions, module items
                   (functions, ``struct.Struct`` declarations, helpers)
``pyhelpers``      the Python back end's helpers' source
``pyprint``        the Python back end's printer: IR -> the generated Python source
``bounds``         the proven intervals of the expression nodes (the locals' to a fixed
                   point)
``localcache``     the Python back end's pass reading metadata slots into locals
=================  ==========================================================

The form is incremental: a construct the compiler does not yet lower to a node of its own
is a `PyText` line, printed as is by the Python printer; the native path lowers the nodes
only (`pyswitch.native.cgen`: a function holding `PyText` stays on the Python path).
docs/pyswitch-ir.md lists what is converted.
"""

from __future__ import annotations

from pyswitch.ir.module import (
    Function,
    Helper,
    Line,
    ModuleItem,
    ModuleText,
    StructDecl,
    bodies,
    expressions,
    shift,
    unshared,
    walk,
)
from pyswitch.ir.pyprint import function_lines, item_text, module_text, stmt_lines
from pyswitch.ir.stmts import (
    ActionCall,
    Advance,
    Assign,
    Body,
    Break,
    Continue,
    CopyOutCall,
    CounterCount,
    Emit,
    EmitRun,
    EmitVarbit,
    Exit,
    ExitScope,
    Extract,
    HeaderAlias,
    HeaderCopy,
    HeaderSet,
    HeaderSwap,
    If,
    Loop,
    ParserEnd,
    ParserError,
    ParserScope,
    ParserStart,
    Pass,
    PyText,
    RegRead,
    RegWrite,
    Return,
    Seq,
    SiblingsInvalid,
    Stmt,
    TableApply,
)
from pyswitch.ir.values import PyExpr

__all__ = ["ActionCall", "Advance", "Assign", "Body", "Break", "Continue", "CopyOutCall",
           "CounterCount", "Emit", "EmitRun", "EmitVarbit", "Exit", "ExitScope", "Extract",
           "Function", "HeaderAlias", "HeaderCopy", "HeaderSet", "HeaderSwap", "Helper", "If",
           "Line", "Loop", "ModuleItem", "ModuleText", "ParserEnd", "ParserError", "ParserScope",
           "ParserStart", "Pass", "PyExpr", "PyText", "RegRead", "RegWrite", "Return", "Seq",
           "SiblingsInvalid", "Stmt", "StructDecl", "TableApply", "bodies", "expressions",
           "function_lines", "item_text", "module_text", "shift", "stmt_lines", "unshared", "walk"]
