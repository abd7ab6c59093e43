"""Compiler state, error reporting, annotations, storage allocation and type resolution.

`CompilerBase` holds what every part of the compiler shares: the source (for located
errors), the global scope, declared types, and the flat storage of a packet (header
slots ``S`` and scalar slots ``M``, see `pyswitch.types`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lark import Token, Tree

from pyswitch.compiler.model import (
    ActionDef,
    Emitter,
    ExternInst,
    HdrLoc,
    ScalarLoc,
    Scope,
    StackLoc,
    StructLoc,
    TableDef,
    slot_loc,
)
from pyswitch.compiler.stacks import NEXT_TY
from pyswitch.compiler.typedefs import DeferredTy
from pyswitch.compiler.unions import UnionTy
from pyswitch.compiler.varbit import VarbitTy
from pyswitch.errors import P4CompileError
from pyswitch.frontend import annot_string
from pyswitch.ir import ModuleItem
from pyswitch.preprocess import BUILTIN_INCLUDE, Source
from pyswitch.types import (
    BOOL,
    ERROR,
    INTLIT,
    VOID,
    Bits,
    BoolTy,
    EnumTy,
    ErrorTy,
    ExternTy,
    HeaderTy,
    StackTy,
    StringTy,
    StructTy,
    Ty,
)

MAX_STACK_SIZE = 4096
"""Most elements of one header stack (an array of headers): p4c has no limit, but pyswitch
builds every element while compiling, and ``h_t[1000000000]`` ran for minutes."""


class CompilerBase:
    """See module docstring."""

    def __init__(self, src: Source, tree: Tree) -> None:
        self.src = src
        self.tree = tree
        self.glob = Scope()
        self.types: dict[str, Ty] = {}
        self.errors: list[str] = list(["NoError", "PacketTooShort", "NoMatch",
                                       "StackOutOfBounds", "HeaderTooShort", "ParserTimeout",
                                       "ParserInvalidArgument"])
        self.match_kinds: set[str] = set()
        self.hslots: list[HeaderTy] = []
        self.mslots: list[tuple[str, Ty]] = []
        self.module: list[ModuleItem] = []  # the generated module (pyswitch.ir)
        self.actions: list[ActionDef] = []
        self.tables: list[TableDef] = []
        # instances of extern objects by their registry's meta key (pyswitch.externs)
        self.extern_insts: dict[str, list[ExternInst]] = {}
        self.parsers: dict[str, Tree] = {}
        self.controls: dict[str, Tree] = {}
        self.top_actions: list[Tree] = []
        self.header_plans: dict[int, str] = {}
        self.header_fmts: dict[str, str] = {}  # struct variable -> its format (">HHI...")
        self.tmp = 0
        self.ctrl_name = ""
        self.ctrl_kind = ""
        self.in_action: ActionDef | None = None
        self.action_out: list[str] = []
        self.used_slots: set[int] = set()
        self.controller_headers: list[dict] = []
        self.struct_consts: list[str] = []
        self.hidden: dict[str, int] = {}
        self.locals_ok = False  # block-local scalars may be Python locals (apply/parser)
        self.inst_stack: list[str] = []  # controls being compiled (instances nest)
        self.sub_depth = 0  # inside the inlined body of an instantiated control
        self.block_init: Emitter | None = None  # start of the block function

    def err(self, node: Any, msg: str) -> P4CompileError:
        line, col = 1, 1
        if isinstance(node, Token):
            line, col = node.line or 1, node.column or 1
        elif isinstance(node, Tree):
            meta = node.meta
            if not getattr(meta, "empty", True):
                line, col = meta.line, meta.column
            else:
                for ch in node.children:
                    if isinstance(ch, (Tree, Token)):
                        try:
                            raise self.err(ch, msg)
                        except P4CompileError as e:
                            return e
        return self.src.error(line, col, msg)

    def is_builtin(self, node: Any) -> bool:
        line = node.meta.line if isinstance(node, Tree) and not node.meta.empty else \
            getattr(node, "line", 0)
        f, _, _ = self.src.locate(line or 1, 1)
        try:
            return Path(f).resolve().parent == BUILTIN_INCLUDE.resolve()
        except OSError:
            return False

    def new_tmp(self, base: str = "t") -> str:
        self.tmp += 1
        return f"_{base}{self.tmp}"

    def name_of(self, node: Any) -> str:
        if isinstance(node, Token):
            return str(node)
        if isinstance(node, Tree):
            if node.data == "name":
                return str(node.children[0])
            if node.data.startswith("kw_"):
                return node.data[3:]
        raise self.err(node, "expected a name")

    def annotations(self, children: list) -> dict[str, list]:
        out: dict[str, list] = {}
        for ch in children:
            if isinstance(ch, Tree) and ch.data == "annotation":
                nm = self.name_of(ch.children[0])
                args = []
                for a in ch.children[1:]:
                    if a is None:
                        continue
                    if (text := annot_string(a)) is not None:
                        args.append(text[1:-1])
                    elif isinstance(a, Tree) and a.data == "annot_arg":
                        args.append(a.children[0])
                    else:
                        args.append(a)
                out[nm] = args
        return out

    @staticmethod
    def strip_annots(children: list) -> list:
        return [c for c in children if not (isinstance(c, Tree) and c.data == "annotation")]

    def alloc_m(self, name: str, ty: Ty) -> ScalarLoc:
        self.mslots.append((name, ty))
        return slot_loc(len(self.mslots) - 1, ty)

    def alloc_h(self, ty: HeaderTy) -> HdrLoc:
        self.hslots.append(ty)
        return HdrLoc(len(self.hslots) - 1, ty)

    def alloc(self, name: str, ty: Ty) -> Any:
        """Storage for a variable of type `ty` (flattened)."""
        if isinstance(ty, HeaderTy):
            return self.alloc_h(ty)
        if isinstance(ty, StackTy):
            elems = [self.alloc(name, ty.elem) for _ in range(ty.size)]
            return StackLoc(ty, elems, self.alloc_h(NEXT_TY))
        if isinstance(ty, UnionTy):  # see compiler.unions
            return self.alloc_union(ty)
        if isinstance(ty, StructTy):
            return StructLoc(ty, {f: self.alloc(f"{name}.{f}", t) for f, t in ty.fields})
        if isinstance(ty, (Bits, BoolTy, ErrorTy, EnumTy, VarbitTy)):
            return self.alloc_m(name, ty)
        raise ValueError(f"cannot allocate {ty.show()}")

    def resolve_type(self, node: Any) -> Ty:
        d = node.data
        if d == "type_ref":
            return self.resolve_type(node.children[0])
        if d == "bool_type":
            return BOOL
        if d == "error_type":
            return ERROR
        if d == "string_type":
            return StringTy()
        if d == "void_type":
            return VOID
        if d == "bit1_type":
            return Bits(1)
        if d in ("bit_type", "int_type"):
            wn = node.children[0]
            if isinstance(wn, Token):
                w = self.parse_int(wn)[0]
            elif wn.data == "width_lit":
                w = self.parse_int(wn.children[0])[0]
            else:
                w = self.const_int(wn.children[0])
            if w <= 0 or w > 4096:
                raise self.err(node, f"unsupported width {w}")
            return Bits(w, d == "int_type")
        if d == "inf_int_type":
            return INTLIT
        if d == "varbit_type":
            return self.varbit_type(node)  # see compiler.varbit
        if d == "named_type":
            nm = str(node.children[0])
            t = self.types.get(nm)
            if t is None:
                raise self.err(node, f"unknown type {nm!r}")
            if isinstance(t, DeferredTy):
                raise self.deferred_error(t, node)
            return t
        if d == "specialized_type":
            nm = str(node.children[0])
            args = [self.resolve_type(a) for a in node.children[1].children]
            t = self.types.get(nm)
            if not isinstance(t, ExternTy):
                raise self.err(node, f"type {nm!r} takes no type arguments")
            return ExternTy(nm, tuple(args))
        if d == "stack_type":
            el = self.resolve_type(node.children[0])
            if not isinstance(el, (HeaderTy, UnionTy)):
                raise self.err(node, "only stacks of headers or header unions are supported")
            n = self.const_int(node.children[1])
            if not 0 <= n <= MAX_STACK_SIZE:  # checked before any element is built
                raise self.err(node.children[1], f"header stack size {n} is outside 0.."
                               f"{MAX_STACK_SIZE} (pyswitch's limit, docs/pyswitch-api.md)")
            return StackTy(el, n)
        if d == "tuple_type":
            return self.tuple_type(node)  # see compiler.typedefs
        raise self.err(node, f"unsupported type ({d})")

    def parse_int(self, tok: Token) -> tuple[int, Ty]:
        s = str(tok).replace("_", "")
        width, signed = None, False
        for sep in ("w", "s"):
            if sep in s and not s.lower().startswith("0x") and s.split(sep)[0].isdigit():
                w, s = s.split(sep, 1)
                width, signed = int(w), sep == "s"
                break
        low = s.lower()
        try:
            if low.startswith("0x"):
                v = int(low[2:], 16)
            elif low.startswith("0b"):
                v = int(low[2:], 2)
            elif low.startswith("0o"):
                v = int(low[2:], 8)
            elif low.startswith("0d"):
                v = int(low[2:], 10)
            else:
                v = int(low, 10)
        except ValueError:
            # Python refuses decimal strings over sys.get_int_max_str_digits() digits (4300);
            # such a literal is a user mistake, not a compiler crash
            raise self.err(tok, f"integer literal too long ({len(low)} digits)") from None
        if width is None:
            return v, INTLIT
        if width <= 0:
            raise self.err(tok, "zero-width integer literal")
        # compare bit lengths: `1 << width` for an absurd width (`99999999999w1`) would
        # allocate gigabytes before the check could fail
        if v.bit_length() > (width - 1 if signed else width):
            shown = str(v) if v.bit_length() < 64 else f"of {v.bit_length()} bits"
            raise self.err(tok, f"value {shown} does not fit in {width} bits")
        return v, Bits(width, signed)

    def const_int(self, node: Any, scope: Scope | None = None) -> int:
        e = self.expr(node, scope)
        if e.const is None or not isinstance(e.const, int) or isinstance(e.const, bool):
            raise self.err(node, "a compile-time integer constant is required here")
        return e.const
