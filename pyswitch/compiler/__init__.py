"""From a parsed P4_16 v1model program to its intermediate form (`pyswitch.ir`: the module
both back ends lower from), the generated Python source (the Python back end's print of it)
plus run-time metadata.

Every construct is type-checked while code is generated; anything outside the supported
subset raises a located `P4CompileError`. The generated module holds one function per block
(``parser``, ``verify``, ``ingress``, ``egress``, ``compute``, ``deparser``) and one per
action, all straight-line code over ints (see `pyswitch.types` for the representation):
per packet state is ``S`` (a list of header lists) and ``M`` (a flat list of every scalar of
the metadata structs, standard_metadata and control-local variables).

The compiler is one class assembled from one part per section of the language:

=================  ==========================================================
``model``          locations, compiled expressions, actions, tables, scopes
``base``           shared state, errors, annotations, storage, type resolution
``toplevel``       top-level declarations, ``main``, the compile output
``parser``         parser states, header (de)serialisation
``controls``       control blocks, local declarations, extern instances
``instances``      controls instantiated inside controls (inlined where applied)
``tables``         actions and tables
``statements``     statements and l-values
``expressions``    expressions, conversions, operators
``externs``        calls: methods, actions, v1model extern functions
``functions``      function declarations, inlined at each call
``action_params``  action parameters of any type, arguments bound in actions lists
``stmt_ext``       compound assignment, switch on values, pkt.extract<T>(...)
``typedefs``       declared types pyswitch cannot represent, rejected where used
``stacks``         header stack next/last/push/pop, run-time indices, parser loops
``unions``         header unions (at most one valid member)
``varbit``         varbit fields, extract(hdr, len), comparison of aggregates
``lookahead``      lookahead<T>() of headers and structs
``mainshapes``     top-level instances, named and by-name arguments of main
``localcache``     metadata slots read into locals, on a function's text (the fallback of
                   ``pyswitch.ir.localcache`` where a function still holds text)
=================  ==========================================================
"""

from __future__ import annotations

from pyswitch.compiler.action_params import ActionParams
from pyswitch.compiler.base import CompilerBase
from pyswitch.compiler.controls import Controls
from pyswitch.compiler.expressions import Expressions
from pyswitch.compiler.externs import Externs
from pyswitch.compiler.functions import Functions
from pyswitch.compiler.instances import ControlInst, Instances
from pyswitch.compiler.lookahead import Lookahead
from pyswitch.compiler.mainshapes import MainShapes
from pyswitch.compiler.model import (
    DROP_PORT,
    HASH_ALGOS,
    STD_FIELDS_SET_BY_SWITCH,
    ActionDef,
    ApplyResult,
    Const,
    E,
    Emitter,
    ExternInst,
    FuncRef,
    HdrLoc,
    Method,
    PacketRef,
    Program0,
    ScalarLoc,
    Scope,
    StackLoc,
    StructLoc,
    TableApply,
    TableDef,
    TypeRef,
)
from pyswitch.compiler.parser import ParserGen
from pyswitch.compiler.stacks import Stacks
from pyswitch.compiler.statements import Statements
from pyswitch.compiler.stmt_ext import StatementsExt
from pyswitch.compiler.tables import Tables
from pyswitch.compiler.toplevel import TopLevel
from pyswitch.compiler.typedefs import Typedefs
from pyswitch.compiler.unions import Unions
from pyswitch.compiler.varbit import Varbits


class Compiler(TopLevel, ParserGen, Controls, Instances, Tables, Statements, Expressions,
               Externs, Functions, ActionParams, Stacks, Unions, StatementsExt,
               Varbits, Typedefs, Lookahead, MainShapes,
               CompilerBase):
    """Compiles one parsed program (see module docstring): ``Compiler(src, tree).compile()``."""


__all__ = ["DROP_PORT", "HASH_ALGOS",
           "STD_FIELDS_SET_BY_SWITCH", "ActionDef",
           "ApplyResult", "Compiler", "Const", "ControlInst", "E", "Emitter", "ExternInst", "FuncRef", "HdrLoc",
           "Method", "PacketRef", "Program0", "ScalarLoc", "Scope", "StackLoc", "StructLoc",
           "TableApply", "TableDef", "TypeRef"]
