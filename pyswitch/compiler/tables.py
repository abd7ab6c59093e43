"""Actions (one generated function each) and match-action tables.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lark import Token, Tree

from pyswitch.compiler.action_params import AGGREGATES
from pyswitch.compiler.model import (
    ActionDef,
    ApplyResult,
    E,
    Emitter,
    ExternInst,
    Scope,
    TableDef,
    local_loc,
)
from pyswitch.ir import PyExpr, Return, TableApply
from pyswitch.ir.exprs import Cond, Lit
from pyswitch.p4info import meta as p4info_meta
from pyswitch.types import (
    Bits,
    BoolTy,
    EnumTy,
    ErrorTy,
)


class Tables:
    """See module docstring."""

    def action_decl(self, node: Tree, scope: Scope, top: bool = False) -> ActionDef:
        ch = self.strip_annots(node.children)
        ann = self.annotations(node.children)
        local = self.name_of(ch[0])
        params = []
        for direction, pn, ty, p in self.params(ch[1]):
            self.check_action_param(direction, pn, ty, p)  # see compiler.action_params
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
            if isinstance(ty, AGGREGATES):  # storage of the action, filled by the caller
                ascope.names[pn] = self.agg_param(a, pn, ty)
                continue
            v = f"p_{pn}"
            ascope.names[pn] = local_loc(v, ty)
            pyparams.append(v)
            if direction in ("out", "inout"):
                outs.append(v)
        self.action_out = outs
        self.block(ch[2], ascope, em)
        if outs:
            em.emit(Return(tuple(outs)))
        self.emit_function(a.fn, pyparams, em, pre=[], post=[])
        self.in_action, self.used_slots, self.action_out = saved
        return a

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
        args = self.unbound_args(a, args)
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
        tableonly_default = None
        size = 1024
        dcounter = None
        seen = set()
        for prop in ch[1:]:
            k = prop.data
            pc = self.strip_annots(prop.children)
            # other properties (size, counters, ...) are told apart by their name
            pk = f"{k[3:]}" if k != "tp_other" else str(pc[0])
            if pk in seen:
                raise self.err(prop, f"duplicate table property ({pk})")
            seen.add(pk)
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
                    ke_ = e
                    if isinstance(e.ty, BoolTy):
                        ke_ = E.of(Cond(e.as_node(), Lit(1), Lit(0), 1), Bits(1))
                        code, width = ke_.code, 1
                    elif isinstance(e.ty, Bits):
                        code, width = e.code, e.ty.width
                    elif isinstance(e.ty, EnumTy) and e.ty.underlying:
                        code, width = e.code, e.ty.underlying.width
                    elif isinstance(e.ty, ErrorTy):
                        # p4c's BMv2 backend: an error is a 32-bit number, in declaration
                        # order (core.p4's first), as pyswitch numbers them
                        code, width = e.code, 32
                    else:
                        raise self.err(ke, f"table key of type {e.ty.show()} is not supported")
                    kname = kann["name"][0] if kann.get("name") else \
                        p4info_meta.key_name(self, self.render(kc[0]))
                    keys.append({"name": kname, "match": mk, "width": width, "code": code,
                                 "ty": e.ty, "e": ke_})
                if sum(1 for x in keys if x["match"] == "lpm") > 1:
                    raise self.err(prop, "a table may have at most one lpm key")
            elif k == "tp_actions":
                for ar in pc:
                    arc = self.strip_annots(ar.children)
                    aann = self.annotations(ar.children)
                    a = self.find_action(arc[0], scope)
                    self.bind_table_action(local, a, arc[1], scope, ar)
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
                if any(x[0] is a and x[1] == "TABLE_ONLY" for x in actions):
                    # reported after the entries, in p4c's order
                    tableonly_default = prop
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
                    size = self.const_int(pc[1], scope)
                elif pn == "counters":
                    inst = self.expr_obj(pc[1], scope)
                    if not (isinstance(inst, ExternInst) and inst.kind == "direct_counter"):
                        raise self.err(prop, "'counters' must name a direct_counter")
                    dcounter = inst
                elif pn in ("support_timeout",):
                    pass
                elif pn in ("largest_priority_wins", "priority_delta"):
                    # p4c reads them only to number non-const `entries` (rejected here);
                    # on const entries they change nothing
                    e = self.expr(pc[1], scope)
                    if pn == "largest_priority_wins" and not isinstance(e.ty, BoolTy) or \
                            e.const is None:
                        raise self.err(prop, f"{pn} must be a compile-time "
                                             f"{'bool' if pn[0] == 'l' else 'integer'}")
                    if pn == "priority_delta" and (isinstance(e.const, bool) or e.const <= 0):
                        raise self.err(prop, "priority_delta must be a positive value")
                elif pn in ("implementation", "meters"):
                    raise self.err(prop, f"table property {pn!r} is not supported by pyswitch")
                else:
                    raise self.err(prop, f"unknown table property {pn!r}")
        # no actions at all: as in p4c, the table gets NoAction as its default below
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
            self.const_entry_priorities(t)
        if tableonly_default is not None:
            raise self.err(tableonly_default, "default_action: Action marked with tableonly "
                                              "used as default action")
        self.tables.append(t)
        scope.names[local] = t

    @staticmethod
    def const_entry_priorities(t: TableDef) -> None:
        """BMv2's priorities of const entries, turned into pyswitch's. p4c's BMv2 backend
        gives each entry its ``@priority`` annotation, else its position (1, 2, ...); BMv2
        picks the matching entry with the smallest number, the first listed among equals.
        pyswitch picks the largest, the first inserted among equals, so the numbers are
        mirrored. They count only where BMv2 uses them (ternary, range, optional keys; a
        table of exact keys and at most one lpm key matches by key or prefix alone)."""
        ents = t.const_entries or []
        kinds = [k["match"] for k in t.keys]
        if all(k == "exact" for k in kinds) or \
                (kinds.count("lpm") == 1 and all(k in ("exact", "lpm") for k in kinds)):
            for e in ents:
                e["priority"] = None
            return
        bmv2 = [i + 1 if e["priority"] is None else e["priority"] for i, e in enumerate(ents)]
        top = max(bmv2, default=0) + 1
        for e, p in zip(ents, bmv2, strict=True):
            e["priority"] = top - p

    def const_entry(self, t: TableDef, en: Tree, scope: Scope) -> dict:
        if en.data == "entry_prio":
            # p4c: "Table with 'const' entries cannot have priorities"
            raise self.err(en, "a table with 'const' entries cannot have priorities "
                               "('priority =' needs non-const 'entries')")
        rest = self.strip_annots(en.children)
        prio = None
        ann = self.annotations(en.children)
        if "priority" in ann:
            # the annotation p4c's BMv2 backend reads (not part of the P4 language)
            if len(ann["priority"]) != 1:
                raise self.err(en, "@priority needs one constant")
            prio = self.const_int(ann["priority"][0], scope)
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
        if any(x[0] is a and x[1] == "DEFAULT_ONLY" for x in t.actions):
            raise self.err(en, "Entry: Action marked with defaultonly used in table")
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
            m = self.render(node.children[0])
            # p4c's TableKeyNames: `h.isValid()` is named `h.$valid$` (what P4Runtime expects)
            return m[:-len("isValid")] + "$valid$" if m.endswith(".isValid") else f"{m}()"
        if d == "int_lit":
            return str(node.children[0])
        raise self.err(node, "complex table key expression needs a @name annotation")

    def table_apply(self, t: TableDef, em: Emitter) -> ApplyResult:
        v = self.new_tmp("e")
        exact = all(k["match"] == "exact" for k in t.keys)
        kind = "default" if not t.keys else ("exact" if exact else "lookup")
        keys = tuple(replace(k["e"].py(), width=k["width"]) if "e" in k else
                     PyExpr(k["code"], k["width"]) for k in t.keys)
        count = None
        if t.direct_counter is not None:
            count = replace(self.loc_e(self.std.fields["packet_length"]).py(), width=32)
        em.emit(TableApply(t.var, v, kind, keys, count))
        return ApplyResult(t, v)
