"""From a parsed P4_16 v1model program to generated Python source plus run-time metadata.

Every construct is type-checked while code is generated; anything outside the supported
subset raises a located `P4CompileError`. The generated module holds one function per block
(``parser``, ``verify``, ``ingress``, ``egress``, ``compute``, ``deparser``) and one per
action, all straight-line code over ints (see `pyswitch.types` for the representation):
per packet state is ``S`` (a list of header lists) and ``M`` (a flat list of every scalar of
the metadata structs, standard_metadata and control-local variables).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lark import Token, Tree

from pyswitch.errors import P4CompileError
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
    IntLit,
    StackTy,
    StringTy,
    StructTy,
    Ty,
    VoidTy,
    same_type,
)

DROP_PORT = 511
HASH_ALGOS = {"crc32": "crc32", "crc16": "crc16", "csum16": "csum16", "identity": "identity"}
STD_FIELDS_SET_BY_SWITCH = ("ingress_port", "egress_spec", "egress_port", "instance_type",
                            "packet_length", "mcast_grp", "egress_rid", "checksum_error",
                            "parser_error")


# ----------------------------------------------------------------------------- locations
@dataclass
class ScalarLoc:
    code: str
    ty: Ty


@dataclass
class HdrLoc:
    slot: int
    ty: HeaderTy

    @property
    def var(self) -> str:
        return f"h{self.slot}"


@dataclass
class StructLoc:
    ty: StructTy
    fields: dict[str, Any]


@dataclass
class StackLoc:
    ty: StackTy
    elems: list[HdrLoc]


@dataclass
class Const:
    value: Any
    ty: Ty


@dataclass
class E:
    """A compiled expression: Python source `code` of type `ty` (value normalised to the
    type's range), its compile-time value `const` if known, and its location if l-value."""

    code: str
    ty: Ty
    const: Any = None
    loc: Any = None


@dataclass
class ExternInst:
    kind: str  # register, counter, direct_counter
    name: str  # P4Info name
    var: str
    size: int = 0
    elem: Ty | None = None
    ctype: str = ""


@dataclass
class PacketRef:
    direction: str  # 'in' or 'out'


@dataclass
class ActionDef:
    name: str  # P4Info name
    local: str
    idx: int
    fn: str
    params: list[tuple[str, str, Ty]]  # (direction, name, type)
    annotations: dict[str, list]
    node: Any


@dataclass
class TableDef:
    name: str
    local: str
    idx: int
    var: str
    keys: list[dict]
    actions: list[tuple[ActionDef, str]]  # (action, scope TABLE_AND_DEFAULT/TABLE_ONLY/...)
    default: tuple[ActionDef, list[int]]
    default_const: bool
    const_entries: list[dict] | None
    size: int
    direct_counter: ExternInst | None
    node: Any


@dataclass
class TableApply:
    table: TableDef


@dataclass
class ApplyResult:
    table: TableDef
    var: str


@dataclass
class Method:
    obj: Any
    name: str
    node: Any


@dataclass
class FuncRef:
    name: str


@dataclass
class TypeRef:
    ty: Ty


class Scope:
    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Any] = {}

    def lookup(self, name: str) -> Any:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None


class Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ind = 1

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.ind + line)

    def indent(self) -> None:
        self.ind += 1

    def dedent(self) -> None:
        self.ind -= 1


BUILTIN_FUNCS = {"mark_to_drop", "hash", "random", "clone", "verify_checksum", "update_checksum",
                 "verify_checksum_with_payload", "update_checksum_with_payload", "verify",
                 "log_msg"}
UNSUPPORTED_FUNCS = {"resubmit", "recirculate", "clone3", "clone_preserving_field_list",
                     "resubmit_preserving_field_list", "recirculate_preserving_field_list",
                     "truncate", "digest", "assert", "assume", "random_int"}
BUILTIN_EXTERNS = {"register", "counter", "direct_counter", "packet_in", "packet_out"}
UNSUPPORTED_EXTERNS = {"meter", "direct_meter", "action_profile", "action_selector", "Checksum16",
                       "Hash", "Random", "Register", "Counter"}


def _lit(v: int) -> str:
    return hex(v) if v > 255 else str(v)


@dataclass
class Program0:
    """Result of compilation (wrapped by `pyswitch.program.Program`)."""

    code: str
    meta: dict
    tables: list[TableDef] = field(default_factory=list)


class Compiler:
    """Compiles one parsed program (see module docstring)."""

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
        self.module: list[str] = []  # module-level generated code
        self.actions: list[ActionDef] = []
        self.tables: list[TableDef] = []
        self.registers: list[ExternInst] = []
        self.counters: list[ExternInst] = []
        self.direct_counters: list[ExternInst] = []
        self.parsers: dict[str, Tree] = {}
        self.controls: dict[str, Tree] = {}
        self.top_actions: list[Tree] = []
        self.header_plans: dict[int, str] = {}
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

    # ------------------------------------------------------------------ errors & utils
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
                    if isinstance(a, Tree) and a.data == "annot_string":
                        args.append(str(a.children[0])[1:-1])
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
        return ScalarLoc(f"M[{len(self.mslots) - 1}]", ty)

    def alloc_h(self, ty: HeaderTy) -> HdrLoc:
        self.hslots.append(ty)
        return HdrLoc(len(self.hslots) - 1, ty)

    def alloc(self, name: str, ty: Ty) -> Any:
        """Storage for a variable of type `ty` (flattened)."""
        if isinstance(ty, HeaderTy):
            return self.alloc_h(ty)
        if isinstance(ty, StackTy):
            return StackLoc(ty, [self.alloc_h(ty.elem) for _ in range(ty.size)])
        if isinstance(ty, StructTy):
            return StructLoc(ty, {f: self.alloc(f"{name}.{f}", t) for f, t in ty.fields})
        if isinstance(ty, (Bits, BoolTy, ErrorTy, EnumTy)):
            return self.alloc_m(name, ty)
        raise ValueError(f"cannot allocate {ty.show()}")

    # ------------------------------------------------------------------ types
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
            raise self.err(node, "varbit is not supported by pyswitch")
        if d == "named_type":
            nm = str(node.children[0])
            t = self.types.get(nm)
            if t is None:
                raise self.err(node, f"unknown type {nm!r}")
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
            if not isinstance(el, HeaderTy):
                raise self.err(node, "only stacks of headers are supported")
            n = self.const_int(node.children[1])
            return StackTy(el, n)
        if d == "tuple_type":
            raise self.err(node, "tuple types are not supported by pyswitch")
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
        if width is None:
            return v, INTLIT
        if width <= 0:
            raise self.err(tok, "zero-width integer literal")
        lim = (1 << (width - 1)) if signed else (1 << width)
        if v >= lim:
            raise self.err(tok, f"value {v} does not fit in {width} bits")
        return v, Bits(width, signed)

    def const_int(self, node: Any) -> int:
        e = self.expr(node)
        if e.const is None or not isinstance(e.const, int) or isinstance(e.const, bool):
            raise self.err(node, "a compile-time integer constant is required here")
        return e.const

    # ------------------------------------------------------------------ top level
    def compile(self) -> Program0:
        for decl in self.tree.children:
            self.top_decl(decl)
        main = getattr(self, "main_node", None)
        if main is None:
            raise self.src.error(len(self.src.linemap), 1,
                                 "no 'V1Switch(...) main;' package instantiation found")
        return self.build_main(main)

    def top_decl(self, d: Tree) -> None:
        k = d.data
        ch = self.strip_annots(d.children)
        ann = self.annotations(d.children)
        builtin = self.is_builtin(d)
        if k == "const_decl":
            self.decl_const(ch, self.glob)
        elif k in ("typedef_decl", "newtype_decl"):
            self.types[self.name_of(ch[1])] = self.resolve_type(ch[0])
        elif k in ("header_decl", "struct_decl"):
            nm = self.name_of(ch[0])
            fields = []
            for f in ch[1:]:
                fc = self.strip_annots(f.children)
                ft = self.resolve_type(fc[0])
                fname = self.name_of(fc[1])
                if k == "header_decl" and not (isinstance(ft, Bits) or
                                               (isinstance(ft, EnumTy) and ft.underlying)):
                    raise self.err(f, f"header field {fname!r} must be bit<N> or int<N>")
                if k == "struct_decl" and isinstance(ft, (StringTy, VoidTy, IntLit)):
                    raise self.err(f, f"struct field {fname!r} has unsupported type")
                fields.append((fname, ft if not isinstance(ft, EnumTy) else ft.underlying))
            if k == "header_decl":
                t: Ty = HeaderTy(nm, fields, ann)
                if sum(ft.width for _, ft in fields) % 8:
                    raise self.err(d, f"header {nm!r} is not a whole number of bytes")
                if "controller_header" in ann:
                    self.controller_headers.append({"name": ann["controller_header"][0],
                                                    "ty": t})
            else:
                t = StructTy(nm, fields)
            self.types[nm] = t
        elif k == "union_decl":
            raise self.err(d, "header_union is not supported by pyswitch")
        elif k == "enum_decl":
            nm = self.name_of(ch[0])
            self.types[nm] = EnumTy(nm, {self.name_of(m): i for i, m in enumerate(ch[1:])})
        elif k == "ser_enum_decl":
            ut = self.resolve_type(ch[0])
            if not isinstance(ut, Bits):
                raise self.err(d, "enum underlying type must be bit<N> or int<N>")
            nm = self.name_of(ch[1])
            members = {}
            for m in ch[2:]:
                members[self.name_of(m.children[0])] = self.const_int(m.children[1]) & ut.mask
            self.types[nm] = EnumTy(nm, members, ut)
        elif k == "error_decl":
            for m in ch:
                n = self.name_of(m)
                if n not in self.errors:
                    self.errors.append(n)
        elif k == "match_kind_decl":
            self.match_kinds.update(self.name_of(m) for m in ch)
        elif k == "extern_obj_decl":
            nm = str(ch[0])
            if not builtin:
                raise self.err(d, f"user-defined extern {nm!r} is not supported by pyswitch")
            self.types[nm] = ExternTy(nm)
        elif k == "extern_fn_decl":
            nm = self.name_of(ch[1])
            if not builtin:
                raise self.err(d, f"user-defined extern function {nm!r} is not supported")
            self.glob.names[nm] = FuncRef(nm)
        elif k in ("parser_type_decl", "control_type_decl", "package_decl"):
            nm = self.name_of(ch[0])
            if not builtin:
                raise self.err(d, f"declaring {k.split('_')[0]} types is not supported; "
                                  "use v1model's")
            self.types[nm] = ExternTy(nm)
        elif k == "parser_decl":
            nm = self.name_of(ch[0])
            if ch[1] is not None:
                raise self.err(d, "generic parsers are not supported")
            if ch[3].children and ch[3].children[0] is not None:
                raise self.err(d, "parser constructor parameters are not supported")
            self.parsers[nm] = d
            self.types[nm] = ExternTy(nm)
        elif k == "control_decl":
            nm = self.name_of(ch[0])
            if ch[1] is not None:
                raise self.err(d, "generic controls are not supported")
            if ch[3].children and ch[3].children[0] is not None:
                raise self.err(d, "control constructor parameters are not supported")
            self.controls[nm] = d
            self.types[nm] = ExternTy(nm)
        elif k == "action_decl":
            self.top_actions.append(d)
            self.glob.names[self.name_of(ch[0])] = ("toplevel_action", d)
        elif k == "instantiation":
            t = ch[0]
            nm = self.name_of(ch[2])
            if self.resolve_type(t).show() != "V1Switch" or nm != "main":
                raise self.err(d, "only 'V1Switch(...) main;' may be instantiated at top level")
            self.main_node = d
        elif k == "function_decl":
            raise self.err(d, "function declarations are not supported by pyswitch")
        elif k == "value_set_decl":
            raise self.err(d, "value_set is not supported by pyswitch")
        else:
            raise self.err(d, f"unsupported declaration ({k})")

    def decl_const(self, ch: list, scope: Scope) -> None:
        ty = self.resolve_type(ch[0])
        nm = self.name_of(ch[1])
        e = self.convert(self.expr(ch[2]), ty, ch[2])
        if e.const is None:
            raise self.err(ch[2], f"constant {nm!r} needs a compile-time value")
        scope.names[nm] = Const(e.const, ty)

    # ------------------------------------------------------------------ main / blocks
    def build_main(self, main: Tree) -> Program0:
        ch = self.strip_annots(main.children)
        args = [a for a in ch[1].children if a is not None]
        if len(args) != 6:
            raise self.err(main, "V1Switch needs 6 arguments: parser, verifyChecksum, ingress, "
                                 "egress, computeChecksum, deparser")
        blocks = []
        for a in args:
            if not (isinstance(a, Tree) and a.data == "ctor_call"):
                raise self.err(a, "expected a parser or control instantiation like 'MyIngress()'")
            blocks.append((str(a.children[0]), a))
        pname = blocks[0][0]
        if pname not in self.parsers:
            raise self.err(blocks[0][1], f"{pname!r} is not a parser")
        for nm, node in blocks[1:]:
            if nm not in self.controls:
                raise self.err(node, f"{nm!r} is not a control")
        pnode = self.parsers[pname]
        pch = self.strip_annots(pnode.children)
        params = self.params(pch[2])
        if len(params) != 4:
            raise self.err(pnode, "v1model parser must have 4 parameters (packet_in, out H, "
                                  "inout M, inout standard_metadata_t)")
        h_ty, m_ty, sm_ty = params[1][2], params[2][2], params[3][2]
        if not isinstance(h_ty, StructTy):
            raise self.err(pnode, "the headers parameter must be a struct")
        if not isinstance(m_ty, StructTy):
            raise self.err(pnode, "the metadata parameter must be a struct")
        if not (isinstance(sm_ty, StructTy) and sm_ty.name == "standard_metadata_t"):
            raise self.err(pnode, "4th parser parameter must be standard_metadata_t")
        for f, t in h_ty.fields:
            if not isinstance(t, (HeaderTy, StackTy)):
                raise self.err(pnode, f"field {f!r} of the headers struct must be a header or "
                                      "header stack (v1model restriction)")
        self.hdr = self.alloc("hdr", h_ty)
        self.meta = self.alloc("meta", m_ty)
        self.std = self.alloc("standard_metadata", sm_ty)
        for hname in ("clone_type", "clone_session", "payload"):
            self.hidden[hname] = len(self.mslots)
            self.mslots.append((f"${hname}", Bits(32)))

        kinds = ["parser", "verify", "ingress", "egress", "compute", "deparser"]
        expect = [None, 2, 3, 3, 2, 2]
        for kind, (nm, _node), ne in zip(kinds, blocks, expect, strict=True):
            if kind == "parser":
                self.compile_parser(nm, self.parsers[nm])
            else:
                cnode = self.controls[nm]
                cps = self.params(self.strip_annots(cnode.children)[2])
                if len(cps) != ne:
                    raise self.err(cnode, f"{kind} control {nm!r} must have {ne} parameters")
                self.compile_control(kind, nm, cnode, cps, h_ty, m_ty)
        return self.finish([b[0] for b in blocks])

    def params(self, node: Tree) -> list[tuple[str, str, Ty, Any]]:
        out = []
        for p in node.children:
            if p is None:
                continue
            pc = self.strip_annots(p.children)
            direction = str(pc[0].children[0]) if pc[0] is not None else ""
            ty = self.resolve_type(pc[1])
            nm = self.name_of(pc[2])
            if pc[3] is not None:
                raise self.err(p, "default parameter values are not supported")
            out.append((direction, nm, ty, p))
        return out

    def bind_block_params(self, scope: Scope, params: list, kinds: list[str], node: Any) -> None:
        for (_direction, nm, ty, p), kind in zip(params, kinds, strict=True):
            if kind == "packet_in" or kind == "packet_out":
                if not (isinstance(ty, ExternTy) and ty.name == kind):
                    raise self.err(p, f"parameter {nm!r} must be {kind}")
                scope.names[nm] = PacketRef(kind[-3:].strip("_"))
            else:
                loc = {"H": self.hdr, "M": self.meta, "SM": self.std}[kind]
                if not same_type(ty, loc.ty):
                    raise self.err(p, f"parameter {nm!r} has type {ty.show()}, expected "
                                      f"{loc.ty.show()}")
                scope.names[nm] = loc

    # ------------------------------------------------------------------ parser
    def compile_parser(self, nm: str, node: Tree) -> None:
        ch = self.strip_annots(node.children)
        params = self.params(ch[2])
        scope = Scope(self.glob)
        self.bind_block_params(scope, params, ["packet_in", "H", "M", "SM"], node)
        self.ctrl_name, self.ctrl_kind = nm, "parser"
        body = Emitter()
        body.ind = 2
        self.used_slots = set()
        states: dict[str, Tree] = {}
        for item in ch[4:]:
            if isinstance(item, Tree) and item.data == "parser_state":
                sc = self.strip_annots(item.children)
                sn = self.name_of(sc[0])
                if sn in states or sn in ("accept", "reject"):
                    raise self.err(item, f"duplicate state {sn!r}")
                states[sn] = item
        if "start" not in states:
            raise self.err(node, "parser has no 'start' state")
        self.locals_ok = True
        for item in ch[4:]:
            if isinstance(item, Tree) and item.data != "parser_state":
                self.local_decl(item, scope, body)
        self.locals_ok = False
        self.states = states
        self.inline_count = 0
        self.locals_ok = True
        self.emit_state("start", scope, body, [])
        self.locals_ok = False
        self.emit_function("parser", ["S", "M", "buf"], body, pre=[
            "L = len(buf)", "pos = 0", "try:"], post=[
            "except _PErr as _e:",
            f"    M[{self.std.fields['parser_error'].code[2:-1]}] = _e.code",
            "return pos"], extra_indent=True)

    def emit_state(self, sn: str, scope: Scope, em: Emitter, path: list[str]) -> None:
        if sn == "accept":
            em("pass")
            return
        if sn == "reject":
            em("raise _PErr(0)")
            return
        if sn in path:
            raise self.err(self.states[sn], f"parser loop through state {sn!r} is not "
                                            "supported by pyswitch")
        node = self.states.get(sn)
        if node is None:
            raise self.err(self.states[path[-1]] if path else self.tree, f"unknown state {sn!r}")
        self.inline_count += 1
        if self.inline_count > 500:
            raise self.err(node, "parser graph too large")
        sc = self.strip_annots(node.children)
        st_scope = Scope(scope)
        for s in sc[1:-1]:
            self.stmt(s, st_scope, em)
        tr = sc[-1]
        if tr.data == "transition_direct":
            self.emit_state(self.name_of(tr.children[0]), st_scope, em, path + [sn])
            return
        keys = [self.expr(k, st_scope, em) for k in tr.children[0].children]
        kvars = []
        for k in keys:
            if isinstance(k.ty, BoolTy):
                raise self.err(tr, "select on bool is not supported")
            if k.const is not None:
                kvars.append(k)
                continue
            v = self.new_tmp("k")
            em(f"{v} = {k.code}")
            kvars.append(E(v, k.ty))
        first = True
        has_default = False
        for case in tr.children[1:]:
            ks, target = case.children
            cond = self.keyset_cond(ks, kvars, st_scope, case)
            if cond == "True":
                em("else:" if not first else "if True:")
                has_default = True
            else:
                em(("if " if first else "elif ") + cond + ":")
            em.indent()
            self.emit_state(self.name_of(target), st_scope, em, path + [sn])
            em.dedent()
            first = False
            if has_default:
                break
        if not has_default:
            if first:
                em(f"raise _PErr({self.errors.index('NoMatch')})")
            else:
                em("else:")
                em(f"    raise _PErr({self.errors.index('NoMatch')})")

    def keyset_cond(self, ks: Tree, kvars: list[E], scope: Scope, node: Any) -> str:
        elems = ks.children
        if len(elems) == 1 and elems[0].data == "ks_default":
            return "True"
        if len(elems) != len(kvars):
            raise self.err(node, f"keyset has {len(elems)} elements, select has {len(kvars)}")
        conds = []
        for el, k in zip(elems, kvars, strict=True):
            c = self.keyset_elem_cond(el, k, scope)
            if c != "True":
                conds.append(c)
        return " and ".join(conds) if conds else "True"

    def keyset_elem_cond(self, el: Tree, k: E, scope: Scope) -> str:
        if el.data == "ks_default":
            return "True"
        if el.data == "ks_value":
            v = self.convert(self.expr(el.children[0], scope), k.ty, el)
            if v.const is None:
                raise self.err(el, "select case values must be compile-time constants")
            return f"{k.code} == {_lit(v.const)}"
        if el.data == "ks_mask":
            v = self.convert(self.expr(el.children[0], scope), k.ty, el)
            m = self.convert(self.expr(el.children[1], scope), k.ty, el)
            if v.const is None or m.const is None:
                raise self.err(el, "select masks must be compile-time constants")
            return f"{k.code} & {_lit(m.const)} == {_lit(v.const & m.const)}"
        if el.data == "ks_range":
            lo = self.convert(self.expr(el.children[0], scope), k.ty, el)
            hi = self.convert(self.expr(el.children[1], scope), k.ty, el)
            if lo.const is None or hi.const is None:
                raise self.err(el, "select ranges must be compile-time constants")
            return f"{_lit(lo.const)} <= {k.code} <= {_lit(hi.const)}"
        raise self.err(el, "unsupported keyset")

    # ------------------------------------------------------------------ header (de)serialisation
    def header_plan(self, ty: HeaderTy) -> tuple[str, list[str], str, int, int]:
        """How to (de)serialise a header with one precompiled `struct.Struct`.

        Fields are grouped into byte-aligned chunks; each chunk is read as big-endian struct
        items of 8/4/2/1 bytes (largest first) which are recombined with shifts, and fields are
        cut out of the chunk with shifts and masks. Returns (struct var, per-field expressions
        over the items ``a0..`` or ``["*"]`` when items are the fields, pack argument list over
        ``h[i]``, size in bytes, number of items)."""
        fmt = ">"
        nitems = 0
        field_exprs: list[str] = []
        pack_items: list[str] = []
        chunk: list[tuple[int, int]] = []
        cw = 0
        for i, (_, ft) in enumerate(ty.fields):
            chunk.append((i + 1, ft.width))  # type: ignore[attr-defined]
            cw += ft.width  # type: ignore[attr-defined]
            if cw % 8:
                continue
            parts = []
            rem = cw // 8
            for size, code in ((8, "Q"), (4, "I"), (2, "H"), (1, "B")):
                while rem >= size:
                    parts.append((f"a{nitems + len(parts)}", size * 8))
                    fmt += code
                    rem -= size
            nitems += len(parts)
            if len(parts) == 1:
                whole = parts[0][0]
            else:
                acc, sh = [], cw
                for nmv, w in parts:
                    sh -= w
                    acc.append(f"({nmv} << {sh})" if sh else nmv)
                whole = "(" + " | ".join(acc) + ")"
            sh = cw
            for _fi, w in chunk:
                sh -= w
                if len(chunk) == 1:
                    field_exprs.append(whole)
                else:
                    ex = f"({whole} >> {sh})" if sh else whole
                    field_exprs.append(ex if sh + w == cw else f"({ex} & {_lit((1 << w) - 1)})")
            fv, sh = [], cw
            for fi, w in chunk:
                sh -= w
                fv.append(f"(h[{fi}] << {sh})" if sh else f"h[{fi}]")
            comb = fv[0] if len(fv) == 1 else "(" + " | ".join(fv) + ")"
            if len(parts) == 1:
                pack_items.append(comb)
            else:
                sh = cw
                for _nmv, w in parts:
                    sh -= w
                    ex = f"({comb} >> {sh})" if sh else comb
                    pack_items.append(f"({ex} & {_lit((1 << w) - 1)})")
            chunk, cw = [], 0
        key = id(ty)
        if key not in self.header_plans:
            var = f"_st{len(self.header_plans)}"
            self.header_plans[key] = var
            self.module.insert(0, f"{var} = _struct.Struct({fmt!r})")
        var = self.header_plans[key]
        simple = field_exprs == [f"a{i}" for i in range(nitems)]
        return var, (["*"] if simple else field_exprs), ", ".join(pack_items), \
            struct.calcsize(fmt), nitems

    def emit_extract(self, loc: HdrLoc, em: Emitter) -> None:
        var, exprs, _pack, size, nitems = self.header_plan(loc.ty)
        h = loc.var
        self.used_slots.add(loc.slot)
        em(f"if pos + {size} > L: raise _PErr({self.errors.index('PacketTooShort')})")
        if exprs == ["*"]:
            em(f"{h}[1:] = {var}.unpack_from(buf, pos)")
        else:
            names = ", ".join(f"a{i}" for i in range(nitems))
            em(f"{names}{',' if nitems == 1 else ''} = {var}.unpack_from(buf, pos)")
            em(f"{h}[1:] = ({', '.join(exprs)},)")
        em(f"{h}[0] = True")
        em(f"pos += {size}")

    def emit_emit(self, e: E, em: Emitter, node: Any) -> None:
        loc = e.loc
        if isinstance(loc, HdrLoc):
            var, _exprs, pack, _size, _n = self.header_plan(loc.ty)
            self.used_slots.add(loc.slot)
            h = loc.var
            em(f"if {h}[0]:")
            n = len(loc.ty.fields)
            if pack == ", ".join(f"h[{i}]" for i in range(1, n + 1)):
                p = f"*{h}[1:]"
            else:
                p = pack.replace("h[", f"{h}[")
            em(f"    out.append({var}.pack({p}))")
        elif isinstance(loc, StackLoc):
            for el in loc.elems:
                self.emit_emit(E("", el.ty, loc=el), em, node)
        elif isinstance(loc, StructLoc):
            for _f, sub in loc.fields.items():
                if isinstance(sub, (HdrLoc, StackLoc, StructLoc)):
                    self.emit_emit(E("", getattr(sub, "ty", None), loc=sub), em, node)
                else:
                    raise self.err(node, "emit of a struct with non-header fields")
        else:
            raise self.err(node, "emit needs a header, header stack or struct of headers")

    # ------------------------------------------------------------------ controls
    def compile_control(self, kind: str, nm: str, node: Tree, params: list, h_ty: Ty,
                        m_ty: Ty) -> None:
        ch = self.strip_annots(node.children)
        scope = Scope(self.glob)
        kinds = {"verify": ["H", "M"], "compute": ["H", "M"], "ingress": ["H", "M", "SM"],
                 "egress": ["H", "M", "SM"], "deparser": ["packet_out", "H"]}[kind]
        self.bind_block_params(scope, params, kinds, node)
        self.ctrl_name, self.ctrl_kind = nm, kind
        self.used_slots = set()
        body = Emitter()
        body.ind = 2
        # locals
        init = Emitter()
        init.ind = 2
        for item in ch[4:-1]:
            self.local_decl(item, scope, init)
        body.lines.extend(init.lines)
        self.used_slots_ctrl = set(self.used_slots)
        self.locals_ok = True
        self.block(ch[-1], Scope(scope), body)
        self.locals_ok = False
        params_py = ["S", "M", "out"] if kind == "deparser" else ["S", "M"]
        self.emit_function(kind, params_py, body, pre=["try:"],
                           post=["except _Exit:", "    pass"], extra_indent=True)

    def emit_function(self, fname: str, params: list[str], body: Emitter, pre: list[str],
                      post: list[str], extra_indent: bool = False) -> None:
        lines = [f"def {fname}({', '.join(params)}):"]
        for s in sorted(self.used_slots):
            lines.append(f"    h{s} = S[{s}]")
        for p in pre:
            lines.append("    " + p)
        if not body.lines:
            body("pass")
        lines.extend(body.lines)
        for p in post:
            lines.append("    " + p)
        self.module.append("\n".join(lines))

    def local_decl(self, item: Tree, scope: Scope, em: Emitter) -> None:
        k = item.data
        ch = self.strip_annots(item.children)
        ann = self.annotations(item.children)
        if k == "const_decl":
            self.decl_const(ch, scope)
        elif k == "var_decl":
            self.var_decl(ch, scope, em, item)
        elif k == "instantiation":
            self.instantiate(ch, ann, scope, item)
        elif k == "action_decl":
            self.action_decl(item, scope)
        elif k == "table_decl":
            self.table_decl(item, scope)
        elif k == "value_set_decl":
            raise self.err(item, "value_set is not supported by pyswitch")
        else:
            raise self.err(item, f"unsupported local declaration ({k})")

    def pname(self, local: str, ann: dict) -> str:
        if "name" in ann and ann["name"]:
            n = ann["name"][0]
            if isinstance(n, str):
                return n[1:] if n.startswith(".") else f"{self.ctrl_name}.{n}"
        return f"{self.ctrl_name}.{local}" if self.ctrl_name else local

    def instantiate(self, ch: list, ann: dict, scope: Scope, node: Tree) -> None:
        ty = self.resolve_type(ch[0])
        nm = self.name_of(ch[2])
        args = [a for a in ch[1].children if a is not None]
        if not isinstance(ty, ExternTy) or ty.name not in BUILTIN_EXTERNS:
            tn = ty.show()
            if tn in UNSUPPORTED_EXTERNS:
                raise self.err(node, f"extern {tn!r} is not supported by pyswitch")
            raise self.err(node, f"cannot instantiate {tn!r} here (only register, counter and "
                                 "direct_counter are supported)")
        full = self.pname(nm, ann)
        if ty.name == "register":
            if len(ty.args) != 1 or not isinstance(ty.args[0], Bits):
                raise self.err(node, "register<T> needs T = bit<N> or int<N>")
            if len(args) != 1:
                raise self.err(node, "register needs exactly one argument (its size)")
            size = self.const_int(args[0])
            inst = ExternInst("register", full, f"R{len(self.registers)}", size, ty.args[0])
            self.registers.append(inst)
        elif ty.name == "counter":
            if len(args) != 2:
                raise self.err(node, "counter needs (size, CounterType)")
            size = self.const_int(args[0])
            ct = self.expr(args[1], scope)
            if not (isinstance(ct.ty, EnumTy) and ct.ty.name == "CounterType"):
                raise self.err(args[1], "second counter argument must be a CounterType")
            ctype = [k for k, v in ct.ty.members.items() if v == ct.const][0]
            inst = ExternInst("counter", full, f"C{len(self.counters)}", size, None, ctype)
            self.counters.append(inst)
        elif ty.name == "direct_counter":
            if len(args) != 1:
                raise self.err(node, "direct_counter needs (CounterType)")
            ct = self.expr(args[0], scope)
            if not (isinstance(ct.ty, EnumTy) and ct.ty.name == "CounterType"):
                raise self.err(args[0], "direct_counter argument must be a CounterType")
            ctype = [k for k, v in ct.ty.members.items() if v == ct.const][0]
            inst = ExternInst("direct_counter", full, "", 0, None, ctype)
            inst.used_by = None  # type: ignore[attr-defined]
            self.direct_counters.append(inst)
        else:
            raise self.err(node, f"cannot instantiate {ty.name!r}")
        scope.names[nm] = inst

    def var_decl(self, ch: list, scope: Scope, em: Emitter, node: Tree) -> None:
        ty = self.resolve_type(ch[0])
        nm = self.name_of(ch[1])
        if isinstance(ty, (IntLit, StringTy, VoidTy, ExternTy)):
            raise self.err(node, f"variables of type {ty.show()} are not supported")
        if (self.in_action is not None or self.locals_ok) and \
                isinstance(ty, (Bits, BoolTy, EnumTy, ErrorTy)):
            loc: Any = ScalarLoc(self.new_tmp("v"), ty)
        else:
            loc = self.alloc(f"{self.ctrl_name}.{nm}", ty)
        scope.names[nm] = loc
        if ch[2] is not None:
            self.assign_to(loc, ch[2], scope, em, node)
        else:
            self.reset(loc, em)

    def reset(self, loc: Any, em: Emitter) -> None:
        if isinstance(loc, ScalarLoc):
            em(f"{loc.code} = {'False' if isinstance(loc.ty, BoolTy) else '0'}")
        elif isinstance(loc, HdrLoc):
            self.used_slots.add(loc.slot)
            em(f"{loc.var}[:] = [False{', 0' * len(loc.ty.fields)}]")
        elif isinstance(loc, StackLoc):
            for e in loc.elems:
                self.reset(e, em)
        elif isinstance(loc, StructLoc):
            for sub in loc.fields.values():
                self.reset(sub, em)

    # ------------------------------------------------------------------ actions
    def action_decl(self, node: Tree, scope: Scope, top: bool = False) -> ActionDef:
        ch = self.strip_annots(node.children)
        ann = self.annotations(node.children)
        local = self.name_of(ch[0])
        params = []
        for direction, pn, ty, p in self.params(ch[1]):
            if not isinstance(ty, (Bits, BoolTy)):
                raise self.err(p, f"action parameter {pn!r}: only bit<N>/int<N>/bool "
                                  "parameters are supported")
            params.append((direction, pn, ty))
        if top:
            name = local if not ann.get("name") else str(ann["name"][0]).lstrip(".")
        else:
            name = self.pname(local, ann)
        idx = len(self.actions)
        a = ActionDef(name, local, idx, f"a{idx}", params, ann, node)
        self.actions.append(a)
        scope.names[local] = a
        saved = (self.in_action, self.used_slots, self.action_out)
        self.in_action = a
        self.used_slots = set()
        ascope = Scope(scope)
        em = Emitter()
        pyparams = ["S", "M"]
        outs = []
        for direction, pn, ty in params:
            v = f"p_{pn}"
            ascope.names[pn] = ScalarLoc(v, ty)
            pyparams.append(v)
            if direction in ("out", "inout"):
                outs.append(v)
        self.action_out = outs
        self.block(ch[2], ascope, em)
        if outs:
            em(f"return ({', '.join(outs)},)")
        self.emit_function(a.fn, pyparams, em, pre=[], post=[])
        self.in_action, self.used_slots, self.action_out = saved
        return a

    # ------------------------------------------------------------------ tables
    def find_action(self, name_node: Any, scope: Scope) -> ActionDef:
        nm = self.name_of(name_node)
        a = scope.lookup(nm)
        if isinstance(a, tuple) and a[0] == "toplevel_action":
            a = self.toplevel_action(nm)
        if not isinstance(a, ActionDef):
            raise self.err(name_node, f"{nm!r} is not an action")
        return a

    def toplevel_action(self, nm: str) -> ActionDef:
        b = self.glob.names[nm]
        if isinstance(b, ActionDef):
            return b
        saved = self.ctrl_name
        self.ctrl_name = ""
        a = self.action_decl(b[1], self.glob, top=True)
        self.ctrl_name = saved
        self.glob.names[nm] = a
        return a

    def action_call_args(self, a: ActionDef, args_node: Any, scope: Scope, node: Any,
                         allow_partial: bool = False) -> list[int]:
        args = [x for x in (args_node.children if args_node is not None else []) if x is not None]
        cp = [p for p in a.params if p[0] == ""]
        if len(args) != len(cp):
            raise self.err(node, f"action {a.local!r} expects {len(cp)} arguments, got "
                                 f"{len(args)}")
        vals = []
        for (_d, pn, ty), x in zip(cp, args, strict=True):
            e = self.convert(self.expr(x, scope), ty, x)
            if e.const is None:
                raise self.err(x, f"argument {pn!r} must be a compile-time constant")
            vals.append(int(e.const))
        return vals

    def table_decl(self, node: Tree, scope: Scope) -> None:
        ch = self.strip_annots(node.children)
        ann = self.annotations(node.children)
        local = self.name_of(ch[0])
        keys: list[dict] = []
        actions: list[tuple[ActionDef, str]] = []
        default = None
        default_const = False
        const_entries_nodes = None
        size = 1024
        dcounter = None
        seen = set()
        for prop in ch[1:]:
            k = prop.data
            if k in seen:
                raise self.err(prop, f"duplicate table property ({k[3:]})")
            seen.add(k)
            pc = self.strip_annots(prop.children)
            if k == "tp_key":
                for ke in pc:
                    kc = self.strip_annots(ke.children)
                    kann = self.annotations(ke.children)
                    mk = self.name_of(kc[1])
                    if mk not in self.match_kinds:
                        raise self.err(ke, f"unknown match kind {mk!r}")
                    if mk == "selector":
                        raise self.err(ke, "match kind 'selector' (action selectors) is not "
                                           "supported by pyswitch")
                    e = self.expr(kc[0], scope)
                    if isinstance(e.ty, BoolTy):
                        code, width = f"(1 if {e.code} else 0)", 1
                    elif isinstance(e.ty, Bits):
                        code, width = e.code, e.ty.width
                    elif isinstance(e.ty, EnumTy) and e.ty.underlying:
                        code, width = e.code, e.ty.underlying.width
                    else:
                        raise self.err(ke, f"table key of type {e.ty.show()} is not supported")
                    kname = kann["name"][0] if kann.get("name") else self.render(kc[0])
                    keys.append({"name": kname, "match": mk, "width": width, "code": code})
                if sum(1 for x in keys if x["match"] == "lpm") > 1:
                    raise self.err(prop, "a table may have at most one lpm key")
            elif k == "tp_actions":
                for ar in pc:
                    arc = self.strip_annots(ar.children)
                    aann = self.annotations(ar.children)
                    a = self.find_action(arc[0], scope)
                    if arc[1] is not None and [x for x in arc[1].children if x is not None]:
                        raise self.err(ar, "action arguments in the actions list are not "
                                           "supported")
                    scope_s = "TABLE_ONLY" if "tableonly" in aann else \
                        "DEFAULT_ONLY" if "defaultonly" in aann else "TABLE_AND_DEFAULT"
                    if any(x[0] is a for x in actions):
                        raise self.err(ar, f"action {a.local!r} listed twice")
                    actions.append((a, scope_s))
            elif k in ("tp_default", "tp_const_default"):
                ar = pc[0]
                arc = self.strip_annots(ar.children)
                a = self.find_action(arc[0], scope)
                if not any(x[0] is a for x in actions):
                    raise self.err(ar, f"default action {a.local!r} is not in the actions list")
                default = (a, self.action_call_args(a, arc[1], scope, ar))
                default_const = k == "tp_const_default"
            elif k in ("tp_const_entries", "tp_entries"):
                if k == "tp_entries":
                    raise self.err(prop, "non-const 'entries' are not supported; use "
                                         "'const entries'")
                const_entries_nodes = pc
            elif k == "tp_other":
                pn = str(pc[0])
                if pn == "size":
                    size = self.const_int(pc[1])
                elif pn == "counters":
                    inst = self.expr_obj(pc[1], scope)
                    if not (isinstance(inst, ExternInst) and inst.kind == "direct_counter"):
                        raise self.err(prop, "'counters' must name a direct_counter")
                    dcounter = inst
                elif pn in ("support_timeout",):
                    pass
                elif pn in ("implementation", "meters"):
                    raise self.err(prop, f"table property {pn!r} is not supported by pyswitch")
                else:
                    raise self.err(prop, f"unknown table property {pn!r}")
        if not actions:
            raise self.err(node, f"table {local!r} has no actions")
        if default is None:
            noa = self.find_action(Token("IDENT", "NoAction"), scope) if \
                self.glob.lookup("NoAction") else None
            if noa is None:
                raise self.err(node, "table without default_action and no NoAction declared")
            if not any(x[0] is noa for x in actions):
                actions.append((noa, "DEFAULT_ONLY"))
            default = (noa, [])
        full = self.pname(local, ann)
        t = TableDef(full, local, len(self.tables), f"T{len(self.tables)}", keys, actions,
                     default, default_const, None, size, dcounter, node)
        if dcounter is not None:
            if getattr(dcounter, "used_by", None) is not None:
                raise self.err(node, "a direct_counter can belong to only one table")
            dcounter.used_by = t  # type: ignore[attr-defined]
        if const_entries_nodes is not None:
            t.const_entries = [self.const_entry(t, en, scope) for en in const_entries_nodes]
        self.tables.append(t)
        scope.names[local] = t

    def const_entry(self, t: TableDef, en: Tree, scope: Scope) -> dict:
        if en.data == "entry_prio":
            prio = self.const_int(en.children[0])
            rest = en.children[1:]
        else:
            prio = None
            rest = en.children
        ks, ar = rest[0], rest[1]
        elems = ks.children
        if len(elems) == 1 and elems[0].data == "ks_default" and len(t.keys) > 1:
            elems = elems * len(t.keys)
        if len(elems) != len(t.keys):
            raise self.err(en, f"entry has {len(elems)} key values, table has {len(t.keys)}")
        match = {}
        for el, key in zip(elems, t.keys, strict=True):
            ty = Bits(key["width"])
            mk = key["match"]
            if el.data == "ks_default":
                if mk == "exact":
                    raise self.err(el, "'_' is not allowed for an exact key")
                match[key["name"]] = None
                continue
            vals = [self.convert(self.expr(x, scope), ty, x) for x in el.children]
            if any(v.const is None for v in vals):
                raise self.err(el, "entry values must be compile-time constants")
            c = [int(v.const) for v in vals]
            if el.data == "ks_value":
                if mk == "lpm":
                    match[key["name"]] = (c[0], key["width"])
                elif mk == "ternary":
                    match[key["name"]] = (c[0], ty.mask)
                elif mk == "range":
                    match[key["name"]] = (c[0], c[0])
                else:
                    match[key["name"]] = c[0]
            elif el.data == "ks_mask":
                if mk == "ternary":
                    match[key["name"]] = (c[0] & c[1], c[1])
                elif mk == "lpm":
                    m = c[1]
                    plen = bin(m).count("1")
                    if m != ((1 << plen) - 1) << (key["width"] - plen):
                        raise self.err(el, "lpm mask is not a prefix")
                    match[key["name"]] = (c[0] & m, plen)
                else:
                    raise self.err(el, f"'&&&' not allowed for a {mk} key")
            elif el.data == "ks_range":
                if mk != "range":
                    raise self.err(el, f"'..' not allowed for a {mk} key")
                match[key["name"]] = (c[0], c[1])
        arc = self.strip_annots(ar.children)
        a = self.find_action(arc[0], scope)
        if not any(x[0] is a for x in t.actions):
            raise self.err(ar, f"action {a.local!r} is not in the table's actions")
        return {"match": match, "action": a.name, "args": self.action_call_args(
            a, arc[1], scope, ar), "priority": prio}

    def render(self, node: Any) -> str:
        """Key expression as written (P4Info match field name)."""
        if isinstance(node, Token):
            return str(node)
        d = node.data
        if d == "ident":
            return str(node.children[0])
        if d == "member":
            return f"{self.render(node.children[0])}.{self.name_of(node.children[1])}"
        if d == "index":
            return f"{self.render(node.children[0])}[{self.const_int(node.children[1])}]"
        if d == "slice":
            return (f"{self.render(node.children[0])}[{self.const_int(node.children[1])}:"
                    f"{self.const_int(node.children[2])}]")
        if d == "call" and node.children[0].data == "member":
            return f"{self.render(node.children[0])}()"
        if d == "int_lit":
            return str(node.children[0])
        raise self.err(node, "complex table key expression needs a @name annotation")

    # ------------------------------------------------------------------ statements
    def block(self, node: Tree, scope: Scope, em: Emitter) -> None:
        for s in node.children:
            self.stmt(s, scope, em)

    def stmt(self, s: Tree, scope: Scope, em: Emitter) -> None:
        k = s.data
        if k == "block":
            n0 = len(em.lines)
            self.block(s, Scope(scope), em)
            if len(em.lines) == n0:
                em("pass")
        elif k == "assignment":
            lhs = self.lvalue(s.children[0], scope, em)
            self.assign_to(lhs, s.children[1], scope, em, s)
        elif k == "call_stmt":
            self.call(s.children[0], scope, em, stmt=True)  # a value is discarded
        elif k == "if_stmt":
            c = self.expr(s.children[0], scope, em)
            if not isinstance(c.ty, BoolTy):
                raise self.err(s.children[0], f"if condition must be bool, not {c.ty.show()}")
            em(f"if {c.code}:")
            em.indent()
            n0 = len(em.lines)
            self.stmt(s.children[1], Scope(scope), em)
            if len(em.lines) == n0:
                em("pass")
            em.dedent()
            if s.children[2] is not None:
                em("else:")
                em.indent()
                n0 = len(em.lines)
                self.stmt(s.children[2], Scope(scope), em)
                if len(em.lines) == n0:
                    em("pass")
                em.dedent()
        elif k == "switch_stmt":
            self.switch(s, scope, em)
        elif k == "exit_stmt":
            if self.ctrl_kind == "parser":
                raise self.err(s, "exit is not allowed in a parser")
            em("raise _Exit()")
        elif k == "return_stmt":
            if s.children[0] is not None:
                raise self.err(s, "return with a value is not supported")
            if self.in_action is not None and self.action_out:
                em(f"return ({', '.join(self.action_out)},)")
            elif self.ctrl_kind == "parser":
                raise self.err(s, "return is not allowed in a parser")
            else:
                em("return")
        elif k == "var_decl":
            ch = self.strip_annots(s.children)
            self.var_decl(ch, scope, em, s)
        elif k == "const_decl":
            self.decl_const(self.strip_annots(s.children), scope)
        elif k == "empty_stmt":
            pass
        else:
            raise self.err(s, f"unsupported statement ({k})")

    def switch(self, s: Tree, scope: Scope, em: Emitter) -> None:
        subj = s.children[0]
        e = self.expr(subj, scope, em, allow_apply_result=True)
        cases = s.children[1:]
        if isinstance(e, ApplyResult):
            t = e.table
            first = True
            pending: list[str] = []
            seen_default = False
            for c in cases:
                lab = c.children[0]
                if lab.data == "default_label":
                    cond = None
                    seen_default = True
                else:
                    a = self.find_action(lab.children[0], scope)
                    if not any(x[0] is a for x in t.actions):
                        raise self.err(lab, f"action {a.local!r} is not an action of table "
                                            f"{t.local!r}")
                    cond = f"{e.var}.aidx == {a.idx}"
                if c.data == "switch_fallthrough":
                    if cond is None:
                        raise self.err(c, "default label needs a block")
                    pending.append(cond)
                    continue
                conds = pending + ([cond] if cond else [])
                pending = []
                if cond is None and not conds:
                    em("else:" if not first else "if True:")
                else:
                    if cond is None:
                        em("else:" if not first else "if True:")
                    else:
                        em(("if " if first else "elif ") + " or ".join(conds) + ":")
                em.indent()
                n0 = len(em.lines)
                self.block(c.children[1], Scope(scope), em)
                if len(em.lines) == n0:
                    em("pass")
                em.dedent()
                first = False
                if seen_default:
                    break
            return
        if not isinstance(e.ty, (Bits, EnumTy, ErrorTy)):
            raise self.err(subj, "switch needs table.apply().action_run or a bit/enum value")
        v = self.new_tmp("sw")
        em(f"{v} = {e.code}")
        first = True
        pending = []
        for c in cases:
            lab = c.children[0]
            if lab.data == "default_label":
                cond = None
            else:
                raise self.err(lab, "switch on values needs constant labels; only "
                                    "action_run switches are supported")
            if c.data == "switch_fallthrough":
                pending.append(cond or "True")
                continue
            em("else:" if not first else "if True:")
            em.indent()
            self.block(c.children[1], Scope(scope), em)
            em.dedent()
            first = False

    def lvalue(self, node: Any, scope: Scope, em: Emitter) -> Any:
        if isinstance(node, Tree) and node.data == "slice":
            base = self.lvalue(node.children[0], scope, em)
            if not isinstance(base, ScalarLoc) or not isinstance(base.ty, Bits):
                raise self.err(node, "slice of a non bit-vector")
            hi, lo = self.const_int(node.children[1]), self.const_int(node.children[2])
            if not (0 <= lo <= hi < base.ty.width):
                raise self.err(node, f"slice [{hi}:{lo}] out of range for {base.ty.show()}")
            return ("slice", base, hi, lo)
        e = self.expr(node, scope, em)
        if e.loc is None:
            raise self.err(node, "expression cannot be assigned to")
        if isinstance(e.loc, ScalarLoc) and e.loc.code.startswith("_c"):
            raise self.err(node, "cannot assign to a constant")
        return e.loc

    def assign_to(self, lhs: Any, rhs_node: Any, scope: Scope, em: Emitter, node: Any) -> None:
        if isinstance(lhs, tuple) and lhs[0] == "slice":
            _, base, hi, lo = lhs
            w = hi - lo + 1
            r = self.convert(self.expr(rhs_node, scope, em), Bits(w), rhs_node)
            m = ((1 << w) - 1) << lo
            keep = base.ty.mask ^ m
            em(f"{base.code} = ({base.code} & {_lit(keep)}) | ({r.code} << {lo})"
               if lo else f"{base.code} = ({base.code} & {_lit(keep)}) | {r.code}")
            return
        if isinstance(rhs_node, Tree) and rhs_node.data == "list_expr":
            items = [x for x in rhs_node.children if x is not None]
            if isinstance(lhs, HdrLoc):
                if len(items) != len(lhs.ty.fields):
                    raise self.err(rhs_node, "wrong number of values for header")
                vals = [self.convert(self.expr(x, scope, em), t, x).code
                        for x, (_, t) in zip(items, lhs.ty.fields, strict=True)]
                self.used_slots.add(lhs.slot)
                em(f"{lhs.var}[:] = [True, {', '.join(vals)}]")
                return
            if isinstance(lhs, StructLoc):
                if len(items) != len(lhs.fields):
                    raise self.err(rhs_node, "wrong number of values for struct")
                for x, sub in zip(items, lhs.fields.values(), strict=True):
                    self.assign_to(sub, x, scope, em, node)
                return
            raise self.err(rhs_node, "list expression assigned to a scalar")
        r = self.expr(rhs_node, scope, em)
        self.assign_e(lhs, r, em, rhs_node)

    def assign_e(self, lhs: Any, r: E, em: Emitter, node: Any) -> None:
        if isinstance(lhs, ScalarLoc):
            r = self.convert(r, lhs.ty, node)
            em(f"{lhs.code} = {r.code}")
        elif isinstance(lhs, HdrLoc):
            if not isinstance(r.loc, HdrLoc) or r.loc.ty is not lhs.ty:
                raise self.err(node, f"cannot assign {r.ty.show()} to {lhs.ty.show()}")
            self.used_slots.update((lhs.slot, r.loc.slot))
            em(f"{lhs.var}[:] = {r.loc.var}")
        elif isinstance(lhs, StructLoc):
            if not isinstance(r.loc, StructLoc) or r.loc.ty is not lhs.ty:
                raise self.err(node, f"cannot assign {r.ty.show()} to {lhs.ty.show()}")
            for f, sub in lhs.fields.items():
                self.assign_e(sub, self.loc_e(r.loc.fields[f]), em, node)
        elif isinstance(lhs, StackLoc):
            if not isinstance(r.loc, StackLoc) or not same_type(r.loc.ty, lhs.ty):
                raise self.err(node, "cannot assign to a header stack")
            for a, b in zip(lhs.elems, r.loc.elems, strict=True):
                self.assign_e(a, self.loc_e(b), em, node)
        else:
            raise self.err(node, "expression cannot be assigned to")

    def loc_e(self, loc: Any) -> E:
        if isinstance(loc, ScalarLoc):
            return E(loc.code, loc.ty, loc=loc)
        if isinstance(loc, HdrLoc):
            self.used_slots.add(loc.slot)
        return E("", loc.ty, loc=loc)

    # ------------------------------------------------------------------ conversions
    def convert(self, e: E, ty: Ty, node: Any) -> E:
        """Implicit conversion of `e` to `ty` (only unsized constants convert implicitly)."""
        if same_type(e.ty, ty):
            return e
        if isinstance(e.ty, IntLit) and isinstance(ty, Bits):
            v = e.const & ty.mask
            return E(_lit(v), ty, v)
        if isinstance(e.ty, IntLit) and isinstance(ty, EnumTy) and ty.underlying:
            v = e.const & ty.underlying.mask
            return E(_lit(v), ty, v)
        if isinstance(ty, EnumTy) and ty.underlying and isinstance(e.ty, Bits) and \
                e.ty == ty.underlying:
            return E(e.code, ty, e.const, e.loc)
        if isinstance(e.ty, EnumTy) and e.ty.underlying and isinstance(ty, Bits) and \
                e.ty.underlying == ty:
            return E(e.code, ty, e.const, e.loc)
        raise self.err(node, f"type mismatch: expected {ty.show()}, got {e.ty.show()}"
                       + (" (use a cast)" if isinstance(ty, Bits) and
                          isinstance(e.ty, Bits) else ""))

    def cast(self, e: E, ty: Ty, node: Any) -> E:
        src = e.ty
        if isinstance(src, EnumTy) and src.underlying:
            src = src.underlying
            e = E(e.code, src, e.const)
        if isinstance(ty, EnumTy) and ty.underlying:
            r = self.cast(e, ty.underlying, node)
            return E(r.code, ty, r.const)
        if same_type(src, ty):
            return e
        if isinstance(ty, Bits):
            if isinstance(src, IntLit):
                v = e.const & ty.mask
                return E(_lit(v), ty, v)
            if isinstance(src, BoolTy):
                if ty.width != 1:
                    raise self.err(node, "bool can only be cast to bit<1>")
                if e.const is not None:
                    return E(str(int(e.const)), ty, int(e.const))
                return E(f"(1 if {e.code} else 0)", ty)
            if isinstance(src, Bits):
                if e.const is not None:
                    v = e.const
                    if src.signed and v >> (src.width - 1):
                        v -= 1 << src.width
                    v &= ty.mask
                    return E(_lit(v), ty, v)
                if ty.width >= src.width:
                    if src.signed and ty.width > src.width:
                        sb = 1 << (src.width - 1)
                        return E(f"((({e.code}) ^ {_lit(sb)}) - {_lit(sb)} & {_lit(ty.mask)})",
                                 ty)
                    return E(e.code, ty)
                return E(f"({e.code} & {_lit(ty.mask)})", ty)
        if isinstance(ty, BoolTy):
            if isinstance(src, Bits) and src.width == 1:
                if e.const is not None:
                    return E(str(bool(e.const)), BOOL, bool(e.const))
                return E(f"({e.code} == 1)", BOOL)
        raise self.err(node, f"cannot cast {e.ty.show()} to {ty.show()}")

    # ------------------------------------------------------------------ expressions
    def expr_obj(self, node: Any, scope: Scope) -> Any:
        if isinstance(node, Tree) and node.data == "ident":
            return scope.lookup(str(node.children[0]))
        return None

    def expr(self, node: Any, scope: Scope | None = None, em: Emitter | None = None,
             allow_apply_result: bool = False) -> Any:
        scope = scope or self.glob
        r = self._expr(node, scope, em)
        if isinstance(r, ApplyResult):
            if allow_apply_result:
                return r
            raise self.err(node, "use .hit, .miss or .action_run on a table apply result")
        if not isinstance(r, E):
            raise self.err(node, "not a value")
        return r

    def _expr(self, node: Any, scope: Scope, em: Emitter | None) -> Any:
        if isinstance(node, Token):
            raise self.err(node, "unexpected token")
        d = node.data
        if d == "int_lit":
            v, ty = self.parse_int(node.children[0])
            return E(_lit(v), ty, v)
        if d == "true_lit":
            return E("True", BOOL, True)
        if d == "false_lit":
            return E("False", BOOL, False)
        if d == "ident":
            nm = str(node.children[0])
            b = scope.lookup(nm) if not str(node.children[0]).startswith(".") else \
                self.glob.lookup(nm)
            if b is None:
                if nm in BUILTIN_FUNCS or nm in UNSUPPORTED_FUNCS:
                    return FuncRef(nm)
                raise self.err(node, f"unknown identifier {nm!r}")
            return self.binding_e(b, node)
        if d == "type_member":
            tn = str(node.children[0])
            mn = self.name_of(node.children[1])
            t = self.types.get(tn)
            if isinstance(t, EnumTy):
                if mn not in t.members:
                    raise self.err(node, f"{tn} has no member {mn!r}")
                v = t.members[mn]
                return E(_lit(v), t, v)
            raise self.err(node, f"{tn}.{mn}: not an enum member")
        if d == "error_member":
            mn = self.name_of(node.children[0])
            if mn not in self.errors:
                raise self.err(node, f"unknown error {mn!r}")
            v = self.errors.index(mn)
            return E(str(v), ERROR, v)
        if d == "member":
            return self.member(node, scope, em)
        if d == "index":
            base = self._expr(node.children[0], scope, em)
            if isinstance(base, E) and isinstance(base.loc, StackLoc):
                i = self.const_int(node.children[1])
                if not 0 <= i < len(base.loc.elems):
                    raise self.err(node, f"index {i} out of bounds for {base.ty.show()}")
                return self.loc_e(base.loc.elems[i])
            if isinstance(base, E) and isinstance(base.loc, StackLoc):
                pass
            raise self.err(node, "indexing needs a header stack and a constant index")
        if d == "slice":
            b = self.expr(node.children[0], scope, em)
            if not isinstance(b.ty, Bits):
                raise self.err(node, f"cannot slice {b.ty.show()}")
            hi, lo = self.const_int(node.children[1]), self.const_int(node.children[2])
            if not (0 <= lo <= hi < b.ty.width):
                raise self.err(node, f"slice [{hi}:{lo}] out of range for {b.ty.show()}")
            ty = Bits(hi - lo + 1)
            if b.const is not None:
                v = (b.const >> lo) & ty.mask
                return E(_lit(v), ty, v)
            code = f"({b.code} >> {lo})" if lo else b.code
            if hi != b.ty.width - 1:
                code = f"({code} & {_lit(ty.mask)})"
            return E(code, ty)
        if d in ("call", "generic_call"):
            r = self.call(node, scope, em, stmt=False)
            if r is None:
                raise self.err(node, "call does not return a value")
            return r
        if d == "ctor_call":
            raise self.err(node, "instantiation is not allowed here")
        if d == "cast":
            ty = self.resolve_type(node.children[0])
            return self.cast(self.expr(node.children[1], scope, em), ty, node)
        if d == "neg":
            e = self.expr(node.children[1], scope, em)
            if e.const is not None and isinstance(e.ty, IntLit):
                return E(str(-e.const), INTLIT, -e.const)
            self.need_bits(e, node)
            if e.const is not None:
                v = (-e.const) & e.ty.mask
                return E(_lit(v), e.ty, v)
            return E(f"(-{e.code} & {_lit(e.ty.mask)})", e.ty)
        if d == "pos":
            return self.expr(node.children[1], scope, em)
        if d == "bnot":
            e = self.expr(node.children[0], scope, em)
            self.need_bits(e, node)
            if e.const is not None:
                v = e.const ^ e.ty.mask
                return E(_lit(v), e.ty, v)
            return E(f"({e.code} ^ {_lit(e.ty.mask)})", e.ty)
        if d == "lnot":
            e = self.expr(node.children[0], scope, em)
            if not isinstance(e.ty, BoolTy):
                raise self.err(node, f"'!' needs bool, got {e.ty.show()}")
            if e.const is not None:
                return E(str(not e.const), BOOL, not e.const)
            return E(f"(not {e.code})", BOOL)
        if d in ("lor", "land"):
            a = self.expr(node.children[0], scope, em)
            sub = Emitter()
            b = self.expr(node.children[1], scope, sub)
            if sub.lines:
                raise self.err(node, "table apply on the right of && / || is not supported")
            for x, n in ((a, node.children[0]), (b, node.children[1])):
                if not isinstance(x.ty, BoolTy):
                    raise self.err(n, f"logical operator needs bool, got {x.ty.show()}")
            op = "or" if d == "lor" else "and"
            if a.const is not None and b.const is not None:
                v = (a.const or b.const) if op == "or" else (a.const and b.const)
                return E(str(v), BOOL, v)
            return E(f"({a.code} {op} {b.code})", BOOL)
        if d == "cond":
            c = self.expr(node.children[0], scope, em)
            sub = Emitter()
            a = self.expr(node.children[1], scope, sub)
            b = self.expr(node.children[2], scope, sub)
            if sub.lines:
                raise self.err(node, "table apply inside ?: is not supported")
            if not isinstance(c.ty, BoolTy):
                raise self.err(node, "condition of ?: must be bool")
            a, b = self.unify(a, b, node)
            if isinstance(a.ty, IntLit):
                raise self.err(node, "?: of two unsized constants needs a width")
            if not isinstance(a.ty, (Bits, BoolTy, EnumTy, ErrorTy)):
                raise self.err(node, f"?: on {a.ty.show()} values is not supported")
            if c.const is not None:
                return a if c.const else b
            return E(f"({a.code} if {c.code} else {b.code})", a.ty)
        if d in ("binop", "binop_lt", "binop_gt", "bor", "bxor", "band", "shl", "shr"):
            if d == "binop":
                op = str(node.children[1])
                ln, rn = node.children[0], node.children[2]
            else:
                op = {"binop_lt": "<", "binop_gt": ">", "bor": "|", "bxor": "^", "band": "&",
                      "shl": "<<", "shr": ">>"}[d]
                ln, rn = node.children[0], node.children[-1]
            a = self.expr(ln, scope, em)
            b = self.expr(rn, scope, em)
            return self.binop(op, a, b, node)
        if d == "list_expr":
            raise self.err(node, "list expression not allowed here")
        if d == "dont_care_arg":
            raise self.err(node, "'_' not allowed here")
        if d == "this_expr":
            raise self.err(node, "'this' is not supported")
        raise self.err(node, f"unsupported expression ({d})")

    def binding_e(self, b: Any, node: Any) -> Any:
        if isinstance(b, Const):
            v = b.value
            if isinstance(b.ty, BoolTy):
                return E(str(v), BOOL, v)
            return E(_lit(v) if isinstance(v, int) else repr(v), b.ty, v)
        if isinstance(b, (ScalarLoc, HdrLoc, StructLoc, StackLoc)):
            return self.loc_e(b)
        if isinstance(b, tuple) and b[0] == "toplevel_action":
            return self.toplevel_action(self.name_of(b[1].children[0]) if False else
                                        str(node.children[0]))
        return b

    def need_bits(self, e: E, node: Any) -> None:
        if not isinstance(e.ty, Bits):
            raise self.err(node, f"operation needs bit<N> or int<N>, got {e.ty.show()}")

    def unify(self, a: E, b: E, node: Any) -> tuple[E, E]:
        if isinstance(a.ty, IntLit) and not isinstance(b.ty, IntLit):
            a = self.convert(a, b.ty, node)
        elif isinstance(b.ty, IntLit) and not isinstance(a.ty, IntLit):
            b = self.convert(b, a.ty, node)
        if isinstance(a.ty, EnumTy) and isinstance(b.ty, Bits) and a.ty.underlying:
            a = E(a.code, a.ty.underlying, a.const)
        if isinstance(b.ty, EnumTy) and isinstance(a.ty, Bits) and b.ty.underlying:
            b = E(b.code, b.ty.underlying, b.const)
        if not same_type(a.ty, b.ty):
            raise self.err(node, f"operands have different types: {a.ty.show()} and "
                                 f"{b.ty.show()}")
        return a, b

    def binop(self, op: str, a: E, b: E, node: Any) -> E:
        if op in ("<<", ">>"):
            if isinstance(a.ty, IntLit) and isinstance(b.ty, IntLit):
                v = a.const << b.const if op == "<<" else a.const >> b.const
                return E(str(v), INTLIT, v)
            self.need_bits(a, node)
            if isinstance(b.ty, IntLit):
                if b.const < 0:
                    raise self.err(node, "negative shift amount")
                b = E(str(b.const), b.ty, b.const)
            elif not (isinstance(b.ty, Bits) and not b.ty.signed):
                raise self.err(node, "shift amount must be unsigned")
            ty = a.ty
            sb = 1 << (ty.width - 1)
            if a.const is not None and b.const is not None:
                if op == "<<":
                    v = (a.const << b.const) & ty.mask if b.const < 4096 else 0
                else:
                    x = a.const - (1 << ty.width) if ty.signed and a.const & sb else a.const
                    v = (x >> min(b.const, 4096)) & ty.mask
                return E(_lit(v), ty, v)
            if b.const is not None:
                if b.const >= ty.width:
                    if op == "<<" or not ty.signed:
                        return E("0", ty, 0)
                    return E(f"({_lit(ty.mask)} if {a.code} & {_lit(sb)} else 0)", ty)
                if b.const == 0:
                    return a
                if op == "<<":
                    return E(f"(({a.code} << {b.const}) & {_lit(ty.mask)})", ty)
                if ty.signed:
                    return E(f"((({a.code} ^ {_lit(sb)}) - {_lit(sb)} >> {b.const}) & "
                             f"{_lit(ty.mask)})", ty)
                return E(f"({a.code} >> {b.const})", ty)
            if op == "<<":
                return E(f"_shl({a.code}, {b.code}, {ty.width})", ty)
            if ty.signed:
                return E(f"((({a.code} ^ {_lit(sb)}) - {_lit(sb)} >> min({b.code}, {ty.width}))"
                         f" & {_lit(ty.mask)})", ty)
            return E(f"({a.code} >> {b.code})", ty)
        if op == "++":
            for x in (a, b):
                if not isinstance(x.ty, Bits):
                    raise self.err(node, f"'++' needs bit<N>/int<N> operands, got {x.ty.show()}"
                                   " (cast unsized constants)")
            ty = Bits(a.ty.width + b.ty.width, a.ty.signed)
            if a.const is not None and b.const is not None:
                v = (a.const << b.ty.width) | b.const
                return E(_lit(v), ty, v)
            return E(f"(({a.code} << {b.ty.width}) | {b.code})", ty)
        a, b = self.unify(a, b, node)
        ty = a.ty
        if op in ("==", "!="):
            if isinstance(ty, (HeaderTy, StructTy, StackTy)):
                raise self.err(node, "comparing headers/structs is not supported")
            if a.const is not None and b.const is not None:
                v = (a.const == b.const) == (op == "==")
                return E(str(v), BOOL, v)
            return E(f"({a.code} {op} {b.code})", BOOL)
        if isinstance(ty, IntLit):
            x, y = a.const, b.const
            if op in ("<", ">", "<=", ">="):
                v = eval(f"{x} {op} {y}")  # noqa: S307 - ints only
                return E(str(v), BOOL, v)
            if op in ("/", "%") and y == 0:
                raise self.err(node, "division by zero")
            if op in ("|+|", "|-|"):
                raise self.err(node, "saturating arithmetic needs a width")
            v = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                 "/": lambda: x // y, "%": lambda: x % y, "&": lambda: x & y,
                 "|": lambda: x | y, "^": lambda: x ^ y}[op]()
            return E(str(v), INTLIT, v)
        if not isinstance(ty, Bits):
            raise self.err(node, f"operator {op!r} not defined on {ty.show()}")
        m = _lit(ty.mask)
        sb = 1 << (ty.width - 1)
        if op in ("<", ">", "<=", ">="):
            if a.const is not None and b.const is not None:
                x, y = a.const, b.const
                if ty.signed:
                    x, y = x ^ sb, y ^ sb
                v = eval(f"{x} {op} {y}")  # noqa: S307 - ints only
                return E(str(v), BOOL, v)
            if ty.signed:
                return E(f"(({a.code} ^ {_lit(sb)}) {op} ({b.code} ^ {_lit(sb)}))", BOOL)
            return E(f"({a.code} {op} {b.code})", BOOL)
        if a.const is not None and b.const is not None:
            x, y = a.const, b.const
            if ty.signed:
                xs = x - (1 << ty.width) if x & sb else x
                ys = y - (1 << ty.width) if y & sb else y
            else:
                xs, ys = x, y
            if op in ("/", "%") and y == 0:
                raise self.err(node, "division by zero")
            if op == "|+|":
                lo, hi = (-sb, sb - 1) if ty.signed else (0, ty.mask)
                v = max(lo, min(hi, xs + ys)) & ty.mask
            elif op == "|-|":
                lo, hi = (-sb, sb - 1) if ty.signed else (0, ty.mask)
                v = max(lo, min(hi, xs - ys)) & ty.mask
            else:
                v = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                     "/": lambda: x // y, "%": lambda: x % y, "&": lambda: x & y,
                     "|": lambda: x | y, "^": lambda: x ^ y}[op]() & ty.mask
            return E(_lit(v), ty, v)
        if op in ("&", "|", "^"):
            return E(f"({a.code} {op} {b.code})", ty)
        if op in ("+", "-", "*"):
            return E(f"(({a.code} {op} {b.code}) & {m})", ty)
        if op in ("/", "%"):
            if ty.signed:
                raise self.err(node, "division of signed values is not supported")
            pyop = "//" if op == "/" else "%"
            return E(f"_div({a.code}, {b.code}, {pyop!r})", ty)
        if op == "|+|":
            if ty.signed:
                return E(f"_sat_s({a.code}, {b.code}, 1, {ty.width})", ty)
            return E(f"min({a.code} + {b.code}, {m})", ty)
        if op == "|-|":
            if ty.signed:
                return E(f"_sat_s({a.code}, {b.code}, -1, {ty.width})", ty)
            return E(f"max({a.code} - {b.code}, 0)", ty)
        raise self.err(node, f"unsupported operator {op!r}")

    def member(self, node: Tree, scope: Scope, em: Emitter | None) -> Any:
        base_node, name_node = node.children
        mn = self.name_of(name_node)
        base = self._expr(base_node, scope, em)
        if isinstance(base, ApplyResult):
            if mn == "hit":
                return E(f"{base.var}.hit", BOOL)
            if mn == "miss":
                return E(f"(not {base.var}.hit)", BOOL)
            if mn == "action_run":
                return base
            raise self.err(node, f"table apply result has no member {mn!r}")
        if isinstance(base, E):
            loc = base.loc
            if isinstance(loc, StructLoc):
                if mn not in loc.fields:
                    raise self.err(name_node, f"{loc.ty.show()} has no field {mn!r}")
                return self.loc_e(loc.fields[mn])
            if isinstance(loc, HdrLoc):
                i = loc.ty.index(mn)
                if i < 0:
                    if mn in ("isValid", "setValid", "setInvalid", "minSizeInBytes",
                              "minSizeInBits"):
                        return Method(base, mn, node)
                    raise self.err(name_node, f"{loc.ty.show()} has no field {mn!r}")
                self.used_slots.add(loc.slot)
                ft = loc.ty.fields[i - 1][1]
                sl = ScalarLoc(f"{loc.var}[{i}]", ft)
                return E(sl.code, ft, loc=sl)
            if isinstance(loc, StackLoc):
                if mn == "size":
                    return E(str(loc.ty.size), Bits(32), loc.ty.size)
                raise self.err(name_node, f"header stack operation {mn!r} is not supported "
                                          "(only constant indices)")
            raise self.err(node, f"{base.ty.show()} has no member {mn!r}")
        if isinstance(base, (ExternInst, PacketRef, TableDef)):
            return Method(base, mn, node)
        raise self.err(node, f"cannot access member {mn!r} here")

    # ------------------------------------------------------------------ calls
    def call_args(self, node: Tree) -> list:
        args_node = node.children[-1]
        return [a for a in (args_node.children if args_node is not None else []) if a is not None]

    def call(self, node: Tree, scope: Scope, em: Emitter | None, stmt: bool) -> Any:
        if node.data not in ("call", "generic_call"):
            if stmt:
                raise self.err(node, "expression statement must be a call")
            return self._expr(node, scope, em)
        if node.data == "generic_call":
            base = self._expr(node.children[0], scope, em)
            mn = self.name_of(node.children[1])
            if not (isinstance(base, PacketRef) and mn == "lookahead"):
                raise self.err(node, "generic method calls are not supported")
            tal = next(c for c in node.children if isinstance(c, Tree) and
                       c.data == "type_arg_list")
            ty = self.resolve_type(tal.children[0])
            if not isinstance(ty, Bits):
                raise self.err(node, "lookahead<T> is supported for bit<N> only")
            nbytes = (ty.width + 7) // 8
            shift = nbytes * 8 - ty.width
            code = f"(int.from_bytes(buf[pos:pos + {nbytes}], 'big') >> {shift})" if shift else \
                f"int.from_bytes(buf[pos:pos + {nbytes}], 'big')"
            em(f"if pos + {nbytes} > L: raise _PErr({self.errors.index('PacketTooShort')})")
            return E(code, ty)
        target = self._expr(node.children[0], scope, em)
        args = self.call_args(node)
        if em is None:
            em = Emitter()  # used only for const contexts; calls there are errors
            em_none = True
        else:
            em_none = False
        if isinstance(target, Method):
            r = self.method_call(target, args, scope, em, node)
        elif isinstance(target, FuncRef):
            r = self.func_call(target.name, args, scope, em, node)
        elif isinstance(target, ActionDef):
            r = self.direct_action_call(target, args, scope, em, node)
        else:
            raise self.err(node, "not callable")
        if em_none and em.lines:
            raise self.err(node, "call not allowed here")
        return r

    def direct_action_call(self, a: ActionDef, args: list, scope: Scope, em: Emitter,
                           node: Any) -> None:
        if len(args) != len(a.params):
            raise self.err(node, f"action {a.local!r} expects {len(a.params)} arguments")
        codes, outs = [], []
        for (direction, pn, ty), x in zip(a.params, args, strict=True):
            if direction in ("out", "inout"):
                lv = self.lvalue(x, scope, em)
                if not isinstance(lv, ScalarLoc) or not same_type(lv.ty, ty):
                    raise self.err(x, f"argument for {direction} parameter {pn!r} must be an "
                                      f"l-value of type {ty.show()}")
                codes.append(lv.code if direction == "inout" else "0")
                outs.append(lv.code)
            else:
                codes.append(self.convert(self.expr(x, scope, em), ty, x).code)
        call = f"{a.fn}(S, M{''.join(', ' + c for c in codes)})"
        if outs:
            em(f"{', '.join(outs)}, = {call}")
        else:
            em(call)
        return None

    def method_call(self, m: Method, args: list, scope: Scope, em: Emitter, node: Any) -> Any:
        obj, mn = m.obj, m.name
        if isinstance(obj, E) and isinstance(obj.loc, HdrLoc):
            loc = obj.loc
            self.used_slots.add(loc.slot)
            if args:
                raise self.err(node, f"{mn}() takes no arguments")
            if mn == "isValid":
                return E(f"{loc.var}[0]", BOOL)
            if mn == "setValid":
                em(f"{loc.var}[0] = True")
                return None
            if mn == "setInvalid":
                em(f"{loc.var}[0] = False")
                return None
            if mn == "minSizeInBits":
                return E(str(loc.ty.width), INTLIT, loc.ty.width)
            if mn == "minSizeInBytes":
                return E(str(loc.ty.width // 8), INTLIT, loc.ty.width // 8)
        if isinstance(obj, TableDef):
            if mn != "apply":
                raise self.err(node, f"table has no method {mn!r}")
            if args:
                raise self.err(node, "apply() takes no arguments")
            if self.in_action is not None:
                raise self.err(node, "tables cannot be applied inside actions")
            return self.table_apply(obj, em)
        if isinstance(obj, PacketRef):
            if obj.direction == "in":
                if self.ctrl_kind != "parser":
                    raise self.err(node, "packet_in methods are only available in the parser")
                if mn == "extract":
                    if len(args) != 1:
                        raise self.err(node, "extract with a variable-size argument is not "
                                             "supported")
                    e = self.expr(args[0], scope, em)
                    if not isinstance(e.loc, HdrLoc):
                        raise self.err(args[0], "extract needs a header (stack .next is not "
                                                "supported)")
                    self.emit_extract(e.loc, em)
                    return None
                if mn == "advance":
                    n = self.const_int(args[0]) if len(args) == 1 else None
                    if n is None or n % 8:
                        raise self.err(node, "advance needs a constant multiple of 8 bits")
                    em(f"if pos + {n // 8} > L: raise _PErr("
                       f"{self.errors.index('PacketTooShort')})")
                    em(f"pos += {n // 8}")
                    return None
                if mn == "length":
                    return E("L * 8", Bits(32))
                raise self.err(node, f"packet_in has no supported method {mn!r}")
            if mn == "emit":
                if self.ctrl_kind != "deparser":
                    raise self.err(node, "emit is only available in the deparser")
                if len(args) != 1:
                    raise self.err(node, "emit takes one argument")
                self.emit_emit(self.expr(args[0], scope, em), em, node)
                return None
            raise self.err(node, f"packet_out has no method {mn!r}")
        if isinstance(obj, ExternInst):
            return self.extern_method(obj, mn, args, scope, em, node)
        raise self.err(node, f"unknown method {mn!r}")

    def idx_code(self, e: E, size: int, em: Emitter) -> tuple[str, bool]:
        """(code, always_in_range) for an index expression."""
        if e.const is not None:
            return str(e.const), e.const < size
        if isinstance(e.ty, Bits) and (1 << e.ty.width) <= size:
            return e.code, True
        if not e.code.isidentifier() and not e.code.replace("[", "").replace("]", "").\
                replace("M", "").replace("h", "").isdigit():
            v = self.new_tmp("i")
            em(f"{v} = {e.code}")
            return v, False
        return e.code, False

    def extern_method(self, obj: ExternInst, mn: str, args: list, scope: Scope, em: Emitter,
                      node: Any) -> Any:
        if obj.kind == "register":
            if mn == "read":
                if len(args) != 2:
                    raise self.err(node, "register.read(out result, in index)")
                lv = self.lvalue(args[0], scope, em)
                if not isinstance(lv, ScalarLoc) or not same_type(lv.ty, obj.elem):
                    raise self.err(args[0], f"register read result must be a {obj.elem.show()}"
                                            " l-value")
                ie = self.convert(self.expr(args[1], scope, em), Bits(32), args[1])
                ic, ok = self.idx_code(ie, obj.size, em)
                if ok:
                    em(f"{lv.code} = {obj.var}[{ic}]")
                else:  # indices are never negative: only too large ones raise IndexError
                    em(f"try: {lv.code} = {obj.var}[{ic}]")
                    em(f"except IndexError: {lv.code} = 0")
                return None
            if mn == "write":
                if len(args) != 2:
                    raise self.err(node, "register.write(in index, in value)")
                ie = self.convert(self.expr(args[0], scope, em), Bits(32), args[0])
                ve = self.convert(self.expr(args[1], scope, em), obj.elem, args[1])
                ic, ok = self.idx_code(ie, obj.size, em)
                if ok:
                    em(f"{obj.var}[{ic}] = {ve.code}")
                else:
                    em(f"try: {obj.var}[{ic}] = {ve.code}")
                    em("except IndexError: pass")
                return None
            raise self.err(node, f"register has no method {mn!r}")
        if obj.kind == "counter":
            if mn != "count" or len(args) != 1:
                raise self.err(node, "counter supports count(index)")
            ie = self.convert(self.expr(args[0], scope, em), Bits(32), args[0])
            ic, ok = self.idx_code(ie, obj.size, em)
            plen = self.std.fields["packet_length"].code
            pre = "" if ok else f"if {ic} < {obj.size}: "
            em(f"{pre}{obj.var}p[{ic}] += 1; {obj.var}b[{ic}] += {plen}")
            return None
        if obj.kind == "direct_counter":
            if mn != "count" or args:
                raise self.err(node, "direct_counter supports count()")
            return None  # counted by the table on a hit, as BMv2 does
        raise self.err(node, f"unknown extern method {mn!r}")

    def table_apply(self, t: TableDef, em: Emitter) -> ApplyResult:
        v = self.new_tmp("e")
        if len(t.keys) == 0:
            em(f"{v} = {t.var}.default")
        elif len(t.keys) == 1:
            em(f"{v} = {t.var}.lookup({t.keys[0]['code']})")
        else:
            em(f"{v} = {t.var}.lookup(({', '.join(k['code'] for k in t.keys)}))")
        if t.direct_counter is not None:
            plen = self.std.fields["packet_length"].code
            em(f"if {v}.hit: {v}.counter[0] += 1; {v}.counter[1] += {plen}")
        em(f"{v}.fn(S, M, *{v}.args)")
        return ApplyResult(t, v)

    def data_list(self, node: Any, scope: Scope, em: Emitter) -> list[E]:
        if isinstance(node, Tree) and node.data == "list_expr":
            items = [x for x in node.children if x is not None]
        else:
            items = [node]
        out = []
        for x in items:
            e = self.expr(x, scope, em)
            if isinstance(e.loc, HdrLoc):
                self.used_slots.add(e.loc.slot)
                for i, (_f, ft) in enumerate(e.loc.ty.fields):
                    out.append(E(f"{e.loc.var}[{i + 1}]", ft))
                continue
            if isinstance(e.ty, BoolTy):
                e = self.cast(e, Bits(1), x)
            if isinstance(e.ty, EnumTy) and e.ty.underlying:
                e = E(e.code, e.ty.underlying, e.const)
            if not isinstance(e.ty, Bits):
                raise self.err(x, f"field list element must be bit<N>, got {e.ty.show()} "
                                  "(cast unsized constants)")
            out.append(e)
        return out

    def packed_bytes(self, items: list[E]) -> str:
        """Python expr of the bytes of the field list: fields MSB-first, zero-padded at the end
        to a whole byte (BMv2's packing)."""
        total = sum(e.ty.width for e in items)
        nbytes = (total + 7) // 8
        pad = nbytes * 8 - total
        parts = []
        shift = total
        for e in items:
            shift -= e.ty.width
            parts.append(f"({e.code} << {shift + pad})" if shift + pad else e.code)
        return f"({' | '.join(parts) or '0'}).to_bytes({nbytes}, 'big')"

    def func_call(self, fn: str, args: list, scope: Scope, em: Emitter, node: Any) -> Any:
        if fn in UNSUPPORTED_FUNCS:
            raise self.err(node, f"extern {fn!r} is not supported by pyswitch")
        if fn == "mark_to_drop":
            if len(args) != 1:
                raise self.err(node, "mark_to_drop(standard_metadata)")
            e = self.expr(args[0], scope, em)
            if e.loc is not self.std:
                raise self.err(args[0], "mark_to_drop needs standard_metadata")
            em(f"{self.std.fields['egress_spec'].code} = {DROP_PORT}; "
               f"{self.std.fields['mcast_grp'].code} = 0")
            return None
        if fn == "verify":
            if self.ctrl_kind != "parser":
                raise self.err(node, "verify is only allowed in a parser")
            if len(args) != 2:
                raise self.err(node, "verify(bool, error)")
            c = self.expr(args[0], scope, em)
            er = self.expr(args[1], scope, em)
            if not isinstance(c.ty, BoolTy) or not isinstance(er.ty, ErrorTy):
                raise self.err(node, "verify(bool, error)")
            em(f"if not {c.code}: raise _PErr({er.code})")
            return None
        if fn == "log_msg":
            return None
        if fn == "clone":
            if len(args) != 2:
                raise self.err(node, "clone(CloneType, session)")
            ct = self.expr(args[0], scope, em)
            if not (isinstance(ct.ty, EnumTy) and ct.ty.name == "CloneType") or ct.const is None:
                raise self.err(args[0], "clone needs CloneType.I2E or CloneType.E2E")
            kind = [k for k, v in ct.ty.members.items() if v == ct.const][0]
            if (kind == "I2E") != (self.ctrl_kind == "ingress") or \
                    self.ctrl_kind not in ("ingress", "egress"):
                raise self.err(node, f"clone {kind} is not allowed in {self.ctrl_kind}")
            se = self.convert(self.expr(args[1], scope, em), Bits(32), args[1])
            em(f"M[{self.hidden['clone_type']}] = {1 if kind == 'I2E' else 2}; "
               f"M[{self.hidden['clone_session']}] = {se.code}")
            return None
        if fn == "random":
            if len(args) != 3:
                raise self.err(node, "random(out result, lo, hi)")
            lv = self.lvalue(args[0], scope, em)
            if not isinstance(lv, ScalarLoc) or not isinstance(lv.ty, Bits):
                raise self.err(args[0], "random result must be a bit<N> l-value")
            lo = self.convert(self.expr(args[1], scope, em), lv.ty, args[1])
            hi = self.convert(self.expr(args[2], scope, em), lv.ty, args[2])
            em(f"{lv.code} = _random({lo.code}, {hi.code})")
            return None
        if fn == "hash":
            if len(args) != 5:
                raise self.err(node, "hash(out result, algo, base, data, max)")
            lv = self.lvalue(args[0], scope, em)
            if not isinstance(lv, ScalarLoc) or not isinstance(lv.ty, Bits):
                raise self.err(args[0], "hash result must be a bit<N> l-value")
            algo = self.algo(args[1], scope)
            base = self.expr(args[2], scope, em)
            mx = self.expr(args[4], scope, em)
            for x, n in ((base, args[2]), (mx, args[4])):
                if not isinstance(x.ty, (Bits, IntLit)):
                    raise self.err(n, "hash base/max must be bit<N>")
            data = self.packed_bytes(self.data_list(args[3], scope, em))
            h = f"_{algo}({data})"
            if mx.const is not None:
                if mx.const == 0:
                    raise self.err(args[4], "hash max must not be 0")
                modded = f"({h} % {_lit(mx.const)})"
            else:
                modded = f"_hmod({h}, {mx.code})"
            res = f"({base.code} + {modded})" if base.const != 0 else modded
            em(f"{lv.code} = {res} & {_lit(lv.ty.mask)}")
            return None
        if fn in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                  "update_checksum_with_payload"):
            if len(args) != 4:
                raise self.err(node, f"{fn}(condition, data, checksum, algo)")
            cond = self.expr(args[0], scope, em)
            if not isinstance(cond.ty, BoolTy):
                raise self.err(args[0], "checksum condition must be bool")
            algo = self.algo(args[3], scope)
            data = self.packed_bytes(self.data_list(args[1], scope, em))
            if fn.endswith("_with_payload"):
                data = f"({data} + M[{self.hidden['payload']}])"
            if fn.startswith("verify"):
                if self.ctrl_kind != "verify":
                    raise self.err(node, f"{fn} belongs in the VerifyChecksum control")
                ck = self.expr(args[2], scope, em)
                if not isinstance(ck.ty, Bits):
                    raise self.err(args[2], "checksum field must be bit<N>")
                ce = self.std.fields["checksum_error"].code
                cc = "" if cond.const is True else f"{cond.code} and "
                em(f"if {cc}(_{algo}({data}) & {_lit(ck.ty.mask)}) != {ck.code}: {ce} = 1")
            else:
                if self.ctrl_kind != "compute":
                    raise self.err(node, f"{fn} belongs in the ComputeChecksum control")
                lv = self.lvalue(args[2], scope, em)
                if not isinstance(lv, ScalarLoc) or not isinstance(lv.ty, Bits):
                    raise self.err(args[2], "checksum field must be a bit<N> l-value")
                pre = "" if cond.const is True else f"if {cond.code}: "
                em(f"{pre}{lv.code} = _{algo}({data}) & {_lit(lv.ty.mask)}")
            return None
        raise self.err(node, f"unknown function {fn!r}")

    def algo(self, node: Any, scope: Scope) -> str:
        e = self.expr(node, scope)
        if not (isinstance(e.ty, EnumTy) and e.ty.name == "HashAlgorithm") or e.const is None:
            raise self.err(node, "expected a HashAlgorithm constant")
        nm = [k for k, v in e.ty.members.items() if v == e.const][0]
        if nm not in HASH_ALGOS:
            raise self.err(node, f"HashAlgorithm.{nm} is not supported by pyswitch "
                                 f"(supported: {', '.join(HASH_ALGOS)})")
        return HASH_ALGOS[nm]

    # ------------------------------------------------------------------ output
    def finish(self, block_names: list[str]) -> Program0:
        std = {f: int(loc.code[2:-1]) for f, loc in self.std.fields.items()}
        mtempl = [False if isinstance(t, BoolTy) else 0 for _, t in self.mslots]
        mtempl[self.hidden["payload"]] = b""
        htempl = [[False] + [0] * len(t.fields) for t in self.hslots]
        meta = {
            "blocks": block_names,
            "std": std,
            "hidden": dict(self.hidden),
            "mtempl": mtempl,
            "htempl": htempl,
            "errors": self.errors,
            "actions": [{"name": a.name, "fn": a.fn, "idx": a.idx,
                         "params": [{"name": pn, "width": t.width if isinstance(t, Bits) else 1}
                                    for d, pn, t in a.params if d == ""],
                         "annotations": {k: [x for x in v if isinstance(x, str)]
                                         for k, v in a.annotations.items()}}
                        for a in self.actions],
            "tables": [{"name": t.name, "var": t.var,
                        "keys": [{"name": k["name"], "match": k["match"], "width": k["width"]}
                                 for k in t.keys],
                        "actions": [{"name": a.name, "scope": s} for a, s in t.actions],
                        "default": {"action": t.default[0].name, "args": t.default[1]},
                        "default_const": t.default_const,
                        "const_entries": t.const_entries,
                        "size": t.size,
                        "direct_counter": t.direct_counter.name if t.direct_counter else None}
                       for t in self.tables],
            "registers": [{"name": r.name, "var": r.var, "size": r.size,
                           "width": r.elem.width} for r in self.registers],
            "counters": [{"name": c.name, "var": c.var, "size": c.size, "type": c.ctype}
                         for c in self.counters],
            "direct_counters": [{"name": c.name, "type": c.ctype,
                                 "table": c.used_by.name if getattr(c, "used_by", None) else None}
                                for c in self.direct_counters],
            "controller_headers": [{"name": h["name"], "fields": [
                {"name": f, "width": t.width} for f, t in h["ty"].fields]}
                for h in self.controller_headers],
        }
        code = "\n\n".join(self.module) + "\n"
        return Program0(code, meta, self.tables)
