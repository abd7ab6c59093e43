"""Top-level declarations, the ``V1Switch(...) main`` package and the compile output.

Types, constants, errors and match kinds are declared here; parsers and controls are
recorded and compiled when ``main`` names them; `finish` gathers the run-time metadata.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Tree

from pyswitch import externs
from pyswitch.compiler import bmv2_checks
from pyswitch.compiler.localcache import cache_metadata_reads
from pyswitch.compiler.model import (
    Const,
    FuncRef,
    PacketRef,
    Program0,
    ScalarLoc,
    Scope,
    StructLoc,
)
from pyswitch.compiler.unions import UnionTy
from pyswitch.compiler.varbit import VarbitTy
from pyswitch.errors import P4CompileError
from pyswitch.ir import module_text
from pyswitch.ir.localcache import cache_reads
from pyswitch.p4info import meta as p4info_meta
from pyswitch.types import (
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


class TopLevel:
    """See module docstring."""

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
        self.check_duplicate_top(d, ch)
        if k == "const_decl":
            self.decl_const(ch, self.glob)
        elif k in ("typedef_decl", "newtype_decl"):
            nm = self.name_of(ch[1])
            self.types[nm] = self.typedef_type(nm, ch[0], new=k == "newtype_decl")
        elif k in ("header_decl", "struct_decl"):
            nm = self.name_of(ch[0])
            fields = []
            field_lists: dict[str, tuple[int, ...]] = {}
            self.check_duplicate_members(ch[1:], lambda f: self.strip_annots(f.children)[1])
            for f in ch[1:]:
                fc = self.strip_annots(f.children)
                ft = self.resolve_type(fc[0])
                fname = self.name_of(fc[1])
                fl = self.annotations(f.children).get("field_list")
                if fl is not None:  # v1model: preserved by *_preserving_field_list(index)
                    field_lists[fname] = tuple(self.const_int(a) for a in fl)
                if k == "header_decl" and isinstance(ft, StructTy):
                    fields.extend(self.header_struct_fields(fname, ft, f))  # compiler.typedefs
                    continue
                if k == "header_decl" and not (isinstance(ft, (Bits, BoolTy, VarbitTy)) or
                                               (isinstance(ft, EnumTy) and ft.underlying)):
                    raise self.err(f, f"header field {fname!r} must be bit<N>, int<N>, bool "
                                      "or a serializable enum")
                if k == "struct_decl" and isinstance(ft, (StringTy, VoidTy, IntLit)):
                    raise self.err(f, f"struct field {fname!r} has unsupported type")
                fields.append((fname, ft if not isinstance(ft, EnumTy) else ft.underlying))
            if k == "header_decl":
                self.check_varbit_header(d, nm, fields)  # see compiler.varbit
                t: Ty = HeaderTy(nm, fields, ann)
                self.note_header_structs(t, ch[1:])  # compiler.typedefs
                if sum(ft.width for _, ft in fields) % 8:
                    raise self.err(d, f"header {nm!r} is not a whole number of bytes")
                if "controller_header" in ann:
                    self.controller_headers.append({"name": ann["controller_header"][0],
                                                    "ty": t})
            else:
                t = StructTy(nm, fields, field_lists)
            self.types[nm] = t
        elif k == "union_decl":
            self.union_decl(d, ch)  # see compiler.unions
        elif k == "enum_decl":
            nm = self.name_of(ch[0])
            self.check_duplicate_members(ch[1:], lambda m: m)
            self.types[nm] = EnumTy(nm, {self.name_of(m): i for i, m in enumerate(ch[1:])})
        elif k == "ser_enum_decl":
            ut = self.resolve_type(ch[0])
            if not isinstance(ut, Bits):
                raise self.err(d, "enum underlying type must be bit<N> or int<N>")
            nm = self.name_of(ch[1])
            self.check_duplicate_members(ch[2:], lambda m: m.children[0])
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
            if not builtin and externs.function(nm) not in externs.served():
                # a program may declare an extern function the registry serves (its own
                # module in pyswitch.externs: docs/pyswitch-api.md, "Externs")
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
            self.parsers[nm] = d
            self.types[nm] = ExternTy(nm)
        elif k == "control_decl":
            nm = self.name_of(ch[0])
            if ch[1] is not None:
                raise self.err(d, "generic controls are not supported")
            self.controls[nm] = d
            self.types[nm] = ExternTy(nm)
        elif k == "action_decl":
            self.top_actions.append(d)
            self.glob.names[self.name_of(ch[0])] = ("toplevel_action", d)
        elif k == "instantiation":
            t = ch[0]
            nm = self.name_of(ch[2])
            if self.resolve_type(t).show() == "V1Switch" and nm == "main":
                self.main_node = d
            elif not self.top_instantiation(d, ch, ann):  # see compiler.mainshapes
                raise self.err(d, "only 'V1Switch(...) main;', parsers, controls, registers "
                                  "and counters may be instantiated at top level")
        elif k == "function_decl":
            self.function_decl(d)  # see compiler.functions
        elif k == "value_set_decl":
            raise self.err(d, "value_set is not supported by pyswitch")
        else:
            raise self.err(d, f"unsupported declaration ({k})")

    # where the declared name sits (annotations stripped); extern functions and functions
    # are left out (P4 overloads them by arity), as are error and match_kind (they merge)
    _TOP_NAME_AT = {"header_decl": 0, "struct_decl": 0, "union_decl": 0, "enum_decl": 0,
                    "ser_enum_decl": 1, "typedef_decl": 1, "newtype_decl": 1, "const_decl": 1,
                    "action_decl": 0, "parser_decl": 0, "control_decl": 0,
                    "parser_type_decl": 0, "control_type_decl": 0, "package_decl": 0,
                    "extern_obj_decl": 0}

    def check_duplicate_top(self, d: Tree, ch: list) -> None:
        """p4c: "x: Duplicates declaration x" for two top-level declarations of one name;
        pyswitch kept the last one silently."""
        at = self._TOP_NAME_AT.get(d.data)
        if at is None or at >= len(ch) or ch[at] is None:
            return
        node = ch[at]
        nm = str(node) if isinstance(node, Token) else self.name_of(node)
        seen = self.__dict__.setdefault("_top_decls", {})
        prev = seen.get(nm)
        if prev is not None and prev[0] is not d and self.same_typedef(prev[0], d):
            return  # p4c accepts a typedef repeated with the same type (PortId_t of v1model)
        if prev is not None and prev[0] is not d:
            first = self.err(prev[1], "")
            raise self.err(node, f"{nm}: Duplicates declaration {nm} (previous declaration "
                                 f"at {first.file}:{first.line}:{first.col})")
        seen[nm] = (d, node)

    def same_typedef(self, a: Tree, b: Tree) -> bool:
        """Whether two declarations are both ``typedef``s of one type (``typedef bit<9>
        PortId_t;`` again after v1model.p4's): p4c accepts the repetition."""
        if a.data != "typedef_decl" or b.data != "typedef_decl":
            return False
        try:
            ta = self.resolve_type(self.strip_annots(a.children)[0])
            tb = self.resolve_type(self.strip_annots(b.children)[0])
        except P4CompileError:
            return False
        return same_type(ta, tb)

    def check_duplicate_members(self, items: list, name_node: Any) -> None:
        """p4c: "x: Duplicates declaration x" for two fields of one header, struct or
        header_union, or two members of one enum (``name_node(item)`` is its name)."""
        seen: dict[str, Any] = {}
        for item in items:
            node = name_node(item)
            nm = self.name_of(node)
            if nm in seen:
                first = self.err(seen[nm], "")
                raise self.err(node, f"{nm}: Duplicates declaration {nm} (previous "
                                     f"declaration at {first.file}:{first.line}:{first.col})")
            seen[nm] = node

    def decl_const(self, ch: list, scope: Scope) -> None:
        ty = self.resolve_type(ch[0])
        nm = self.name_of(ch[1])
        if nm == "__v1model_version" and scope is self.glob:
            self.check_v1model_version(ch[2])
        e = self.convert(self.expr(ch[2]), ty, ch[2])
        if e.const is None:
            raise self.err(ch[2], f"constant {nm!r} needs a compile-time value")
        scope.names[nm] = Const(e.const, ty)

    # p4c's GetV1ModelVersion (backends/bmv2/common/v1model.h: versionInitial/Current)
    V1MODEL_VERSIONS = (20180101, 20200408)

    def check_v1model_version(self, node: Any) -> None:
        raw = self.expr(node)
        v = raw.const
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise self.err(node, f"{v if v is not None else '?'}: expected v1model version "
                                 "to be a non-negative number")
        lo, hi = self.V1MODEL_VERSIONS
        if not lo <= v <= hi:
            raise self.err(node, f"{v}: unknown v1model version; initial supported version "
                                 f"is {lo}, latest is {hi}")

    def build_main(self, main: Tree) -> Program0:
        ch = self.strip_annots(main.children)
        # named arguments, instances declared at top level: see compiler.mainshapes
        args = self.main_args(main, [a for a in ch[1].children if a is not None])
        if len(args) != 6:
            raise self.err(main, "V1Switch needs 6 arguments: parser, verifyChecksum, ingress, "
                                 "egress, computeChecksum, deparser")
        blocks = []
        for a in args:
            if not (isinstance(a, Tree) and a.data == "ctor_call"):
                raise self.err(a, "expected a parser or control instantiation like 'MyIngress()'")
            if any(x is not None for x in a.children[1].children):
                raise self.err(a, "constructor arguments of V1Switch's blocks are not "
                                  "supported by pyswitch")
            blocks.append((str(a.children[0]), a))
        pname = blocks[0][0]
        if pname not in self.parsers:
            raise self.err(blocks[0][1], f"{pname!r} is not a parser")
        if self.ctor_params(self.parsers[pname]):
            raise self.err(blocks[0][1], f"parser {pname!r} has constructor parameters; as "
                                         "a V1Switch block it is not supported by pyswitch")
        for nm, node in blocks[1:]:
            if nm not in self.controls:
                raise self.err(node, f"{nm!r} is not a control")
            if self.ctor_params(self.controls[nm]):
                raise self.err(node, f"control {nm!r} has constructor parameters; as a "
                                     "V1Switch block it is not supported by pyswitch")
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
            if not isinstance(t, (HeaderTy, StackTy, UnionTy)):
                raise self.err(pnode, f"field {f!r} of the headers struct must be a header or "
                                      "header stack (v1model restriction)")
        self.hdr = self.alloc("hdr", h_ty)
        self.meta = self.alloc("meta", m_ty)
        self.std = self.alloc("standard_metadata", sm_ty)
        # clone_session: the session in the low 32 bits, the preserved field list's index + 1
        # above them (BMv2's clone_spec packs the two likewise)
        for hname, width in (("clone_type", 32), ("clone_session", 41), ("payload", 32)):
            self.hidden[hname] = len(self.mslots)
            self.mslots.append((f"${hname}", Bits(width)))

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

    def ctor_params(self, decl: Tree) -> list[tuple[str, str, Ty, Any]]:
        """Constructor parameters of a parser or control declaration."""
        cp = self.strip_annots(decl.children)[3]
        return self.params(cp.children[0]) if cp.children and cp.children[0] is not None \
            else []

    def params(self, node: Tree) -> list[tuple[str, str, Ty, Any]]:
        out = []
        for p in node.children:
            if p is None:
                continue
            pc = self.strip_annots(p.children)
            direction = str(pc[0].children[0]) if pc[0] is not None else ""
            ty = self.resolve_type(pc[1])
            nm = self.name_of(pc[2])
            prev = next((q for _d, n, _t, q in out if n == nm), None)
            if prev is not None:  # p4c: two parameters of one name are two declarations
                first = self.err(prev, "")
                raise self.err(pc[2], f"{nm}: Duplicates declaration {nm} (previous "
                                      f"declaration at {first.file}:{first.line}:{first.col})")
            # a default value (pc[3]) is accepted but never used: every call site of
            # pyswitch requires all arguments (a shorter call is rejected with its location)
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
            "hslot_types": [t.name for t in self.hslots],  # names for the packet trace
            # the range of every scalar slot ([lo, hi] or None): what pyswitch.native needs
            # to prove its 128-bit arithmetic never overflows
            "mbounds": [value_bounds(t) for _, t in self.mslots],
            "hbounds": [[(0, 1)] + [value_bounds(ft) for _, ft in t.fields] for t in self.hslots],
            # the varbit slots (no bounds above: a (length, value) pair or 0, see
            # compiler.varbit) with their maximum widths: header [k, j, W], metadata [j, W]
            "varbits": {"h": [[k, j + 1, ft.max_width] for k, t in enumerate(self.hslots)
                              for j, (_, ft) in enumerate(t.fields)
                              if isinstance(ft, VarbitTy)],
                        "m": [[j, t.max_width] for j, (_, t) in enumerate(self.mslots)
                              if isinstance(t, VarbitTy)]},
            "errors": self.errors,
            # each action function's scalar parameters (directional ones too), as the
            # native path needs their ranges: [lo, hi] or None
            "fbounds": {getattr(a, "base_fn", a.fn): {
                f"p_{pn}": value_bounds(t) for _d, pn, t in a.params
                if value_bounds(t) is not None} for a in self.actions},
            "actions": [{"name": a.name, "fn": a.fn, "idx": a.idx,
                         "params": [{"name": pn, "width": p4info_meta.data_width(t)}
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
            "field_lists": field_list_slots(self.meta),
            "controller_headers": [{"name": h["name"], "fields": [
                {"name": f, "width": t.width} for f, t in h["ty"].fields]}
                for h in self.controller_headers],
        }
        for ext in externs.objects():  # registers, counters, ...: pyswitch.externs
            meta[ext.meta_key] = ext.meta_entries(self.extern_insts.get(ext.meta_key, []))
        # what P4Info needs beyond run time (annotations, used actions, ...)
        meta["p4info"] = p4info_meta.collect(self, meta)
        bmv2_checks.check(self, block_names[0], meta)
        code = module_text(self.module, lambda fn: cache_reads(fn, cache_metadata_reads))
        return Program0(code, meta, self.tables, list(self.module))


def _slots_under(loc: Any) -> list[int]:
    if isinstance(loc, ScalarLoc):
        return [int(loc.code[2:-1])]
    if isinstance(loc, StructLoc):
        return [k for f in loc.fields.values() for k in _slots_under(f)]
    return []  # headers in metadata: not preserved (BMv2's field lists hold fields)


def field_list_slots(meta: Any) -> dict[int, list[int]]:
    """Field list index -> the metadata slots of the user metadata fields annotated
    ``@field_list(index)`` (a struct-typed field: all its fields), in slot order."""
    out: dict[int, set[int]] = {}

    def walk(loc: Any) -> None:
        if not isinstance(loc, StructLoc):
            return
        for f, sub in loc.fields.items():
            for idx in loc.ty.field_lists.get(f, ()):
                out.setdefault(idx, set()).update(_slots_under(sub))
            walk(sub)
    walk(meta)
    return {idx: sorted(v) for idx, v in sorted(out.items())}


def value_bounds(ty: Any) -> tuple[int, int] | None:
    """The values a slot of type `ty` may hold, as the generated code stores them (every
    value normalised to its type), or None for what is not a plain integer."""
    if isinstance(ty, BoolTy):
        return (0, 1)
    if isinstance(ty, Bits):  # int<W> too: kept as its W-bit two's complement pattern
        return (0, (1 << ty.width) - 1)
    if isinstance(ty, EnumTy):
        if ty.underlying is not None:
            return value_bounds(ty.underlying)
        vals = list(ty.members.values())
        return (min(vals), max(vals)) if vals else (0, 0)
    if isinstance(ty, ErrorTy):
        return (0, 1 << 16)
    return None
