"""Parser states (inlined along the state graph) and header (de)serialisation.

Each header is read and written with one precompiled `struct.Struct`; `emit_emit`
serves the deparser.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lark import Tree

from pyswitch.compiler.model import (
    E,
    Emitter,
    HdrLoc,
    Scope,
    StackLoc,
    StructLoc,
    nlit,
    px,
    too_short,
    valid_e,
)
from pyswitch.compiler.varbit import varbit_index
from pyswitch.ir import (
    Advance,
    Break,
    Emit,
    EmitRun,
    ExitScope,
    Extract,
    If,
    Line,
    Loop,
    ParserEnd,
    ParserError,
    ParserScope,
    ParserStart,
    Pass,
    PyExpr,
    Stmt,
    StructDecl,
)
from pyswitch.ir.exprs import All, Bin, Expr, Field, Lit, Local, Range
from pyswitch.ir.pyprint import pack_args
from pyswitch.types import (
    BOOL,
    BoolTy,
    HeaderTy,
)

_HEADER = re.compile(r"h\d+")
_HEADER_REF = re.compile(r"\bh\d+\b")


class ParserGen:
    """See module docstring."""

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
        # locals; parser instances applied later add their initialisers here too
        init = Emitter()
        init.ind = 2
        self.block_init, self.inst_stack, self.sub_depth = init, [nm], 0
        self.on_accept = None
        self.locals_ok = True
        for item in ch[4:]:
            if isinstance(item, Tree) and item.data != "parser_state":
                self.local_decl(item, scope, init)
        self.states = self.top_states = states
        self.inline_count = 0
        self.loop_heads = self.parser_loop_heads(states)  # see compiler.stacks
        if self.loop_heads:
            self.emit_looping_parser(scope, body)
        else:
            self.emit_state("start", scope, body, [])
        self.locals_ok = False
        body.lines[:0] = init.lines
        self.block_init = None
        slot = self.loc_e(self.std.fields['parser_error']).py()
        self.emit_function("parser", ["S", "M", "buf"], body, pre=[ParserStart()],
                           post=[ParserEnd()], scope=lambda b: ParserScope(b, slot))

    def emit_state(self, sn: str, scope: Scope, em: Emitter, path: list[str]) -> None:
        if sn == "accept":
            if self.on_accept is not None:  # the end of a sub-parser: back to its caller
                self.on_accept(em)
            else:
                em.emit(Break() if self.loop_heads else Pass())  # leaves a looping parser
            return
        if sn == "reject":
            em.emit(ParserError(0))
            return
        if self.loop_jump(sn, path, em):
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
        self.state_rest(sn, sc[1:-1], sc[-1], Scope(scope), em, path)

    def state_rest(self, sn: str, stmts: list, tr: Tree, st_scope: Scope, em: Emitter,
                   path: list[str]) -> None:
        """The statements of state `sn` from `stmts` on, then its transition. A sub-parser's
        apply inlines that parser, whose accept continues with what follows the apply."""
        for i, s in enumerate(stmts):
            inst = self.parser_apply_target(s, st_scope)
            if inst is not None:
                def rest(em2: Emitter, i: int = i) -> None:
                    self.state_rest(sn, stmts[i + 1:], tr, st_scope, em2, path)
                self.apply_parser(inst, self.call_args(s.children[0]), st_scope, em, rest,
                                  s.children[0])
                return
            self.stmt(s, st_scope, em)
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
            em.assign(v, k)
            kvars.append(E.of(Local(v), k.ty))
        # an if/elif chain of the cases; the default (or no match) last, as ``else``
        arms: list[tuple[str, list[Line]]] = []
        else_: list[Line] | None = None
        for case in tr.children[1:]:
            ks, target = case.children
            cond = self.keyset_cond(ks, kvars, st_scope, case)
            sub = em.sub()
            self.emit_state(self.name_of(target), st_scope, sub, path + [sn])
            if cond.const is True and arms:
                else_ = sub.lines
                break
            arms.append((cond, sub.lines))
            if cond.const is True:
                break
        else:
            if not arms:
                em.emit(ParserError(self.errors.index('NoMatch')))
                return
            no_match = em.sub()
            no_match.emit(ParserError(self.errors.index('NoMatch')))
            else_ = no_match.lines
        em.emit_chain(arms, else_)

    def keyset_cond(self, ks: Tree, kvars: list[E], scope: Scope, node: Any) -> E:
        """The condition a select case's keyset is (``True``: the default)."""
        elems = ks.children
        if len(elems) == 1 and elems[0].data == "ks_default":
            return E.of(Lit(True), BOOL, True)
        if len(elems) != len(kvars):
            raise self.err(node, f"keyset has {len(elems)} elements, select has {len(kvars)}")
        conds = []
        for el, k in zip(elems, kvars, strict=True):
            c = self.keyset_elem_cond(el, k, scope)
            if c.const is not True:
                conds.append(c)
        if len(conds) > 1:
            return E.of(All(tuple(c.as_node() for c in conds)), BOOL)
        return conds[0] if conds else E.of(Lit(True), BOOL, True)

    def keyset_elem_cond(self, el: Tree, k: E, scope: Scope) -> E:
        if el.data == "ks_default":
            return E.of(Lit(True), BOOL, True)
        if el.data == "ks_value":
            v = self.convert(self.expr(el.children[0], scope), k.ty, el)
            if v.const is None:
                raise self.err(el, "select case values must be compile-time constants")
            return E.of(Bin("==", k.as_node(), nlit(v.const), bare=True), BOOL)
        if el.data == "ks_mask":
            v = self.convert(self.expr(el.children[0], scope), k.ty, el)
            m = self.convert(self.expr(el.children[1], scope), k.ty, el)
            if v.const is None or m.const is None:
                raise self.err(el, "select masks must be compile-time constants")
            km = Bin("&", k.as_node(), nlit(m.const), bare=True)
            return E.of(Bin("==", km, nlit(v.const & m.const), bare=True), BOOL)
        if el.data == "ks_range":
            lo = self.convert(self.expr(el.children[0], scope), k.ty, el)
            hi = self.convert(self.expr(el.children[1], scope), k.ty, el)
            if lo.const is None or hi.const is None:
                raise self.err(el, "select ranges must be compile-time constants")
            return E.of(Range(nlit(lo.const), k.as_node(), nlit(hi.const)), BOOL)
        raise self.err(el, "unsupported keyset")

    def header_plan(self, ty: HeaderTy) -> tuple[str, list[Expr] | None, list[Expr], int, int]:
        """How to (de)serialise a header with one precompiled `struct.Struct`.

        Fields are grouped into byte-aligned chunks; each chunk is read as big-endian struct
        items of 8/4/2/1 bytes (largest first) which are recombined with shifts, and fields are
        cut out of the chunk with shifts and masks. Returns (struct var, per-field expressions
        over the items ``a0..`` or None when items are the fields, pack arguments over
        ``h[i]`` (`rehead` names the header), size in bytes, number of items)."""
        fmt = ">"
        nitems = 0
        field_exprs: list[Expr] = []
        pack_items: list[Expr] = []
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
            whole: Expr
            if len(parts) == 1:
                whole = Local(parts[0][0])
            else:
                acc, sh = [], cw
                for nmv, w in parts:
                    sh -= w
                    acc.append(Bin("<<", Local(nmv), Lit(sh)) if sh else Local(nmv))
                whole = _or_all(acc)
            sh = cw
            for _fi, w in chunk:
                sh -= w
                if len(chunk) == 1:
                    field_exprs.append(whole)
                else:
                    ex = Bin(">>", whole, Lit(sh)) if sh else whole
                    field_exprs.append(ex if sh + w == cw else Bin("&", ex, nlit((1 << w) - 1)))
            fv: list[Expr] = []
            sh = cw
            for fi, w in chunk:
                sh -= w
                fv.append(Bin("<<", Field("h", fi), Lit(sh)) if sh else Field("h", fi))
            comb = fv[0] if len(fv) == 1 else _or_all(fv)
            if len(parts) == 1:
                pack_items.append(comb)
            else:
                sh = cw
                for _nmv, w in parts:
                    sh -= w
                    ex = Bin(">>", comb, Lit(sh)) if sh else comb
                    pack_items.append(Bin("&", ex, nlit((1 << w) - 1)))
            chunk, cw = [], 0
        key = id(ty)
        if key not in self.header_plans:
            var = f"_st{len(self.header_plans)}"
            self.header_plans[key] = var
            self.header_fmts[var] = fmt
            self.module.insert(0, StructDecl(var, fmt))
        var = self.header_plans[key]
        simple = field_exprs == [Local(f"a{i}") for i in range(nitems)]
        return var, (None if simple else field_exprs), pack_items, struct.calcsize(fmt), nitems

    def emit_extract(self, loc: HdrLoc, em: Emitter) -> None:
        var, exprs, _pack, size, nitems = self.header_plan(loc.ty)
        h = loc.var
        self.used_slots.add(loc.slot)
        em.emit(ParserError(self.errors.index('PacketTooShort'), too_short(size)))
        fields = None if exprs is None else tuple(PyExpr.of(x) for x in exprs)
        em.emit(Extract(h, var, size, nitems, fields))
        em.assign(valid_e(h), "True")
        em.emit(Advance(px(str(size))))

    def merge_emits(self, body: Sequence[Line]) -> list[Line]:
        """The deparser's runs of consecutive `Emit`s of headers ``hN`` (two or more, one
        body, one depth) get a fast path, an `EmitRun`: when every header of the run is
        valid, one struct of the concatenated big-endian formats packs them all at once
        (standard sizes have no padding, so its bytes are the concatenation); otherwise
        the run as it was.  The bodies of structured statements too, in print order."""
        out: list[Line] = []
        i = 0
        while i < len(body):
            j = i
            while j < len(body) and body[j].ind == body[i].ind and self.mergeable(body[j].stmt):
                j += 1
            if j - i < 2:
                out.append(self.merge_inside(body[i]))
                i += 1
                continue
            run = tuple(ln.stmt for ln in body[i:j])
            fmt = ">" + "".join(self.header_fmts[e.struct][1:] for e in run)  # type: ignore[union-attr]
            var = self.header_fmts.setdefault(f"_sd{fmt}", f"_sd{len(self.header_fmts)}")
            if not any(isinstance(m, StructDecl) and m.var == var for m in self.module):
                self.module.insert(0, StructDecl(var, fmt))
            out.append(Line(body[i].ind, EmitRun(var, run)))  # type: ignore[arg-type]
            i = j
        return out

    def mergeable(self, st: Stmt) -> bool:
        """An `Emit` of a header ``hN`` (not a stack element picked at run time) with its
        header's struct, packing that header's fields alone."""
        return (isinstance(st, Emit) and _HEADER.fullmatch(st.header) is not None
                and st.struct in self.header_fmts
                and set(_HEADER_REF.findall(pack_args(st))) == {st.header})

    def merge_inside(self, ln: Line) -> Line:
        """`ln` with the runs of the bodies it holds merged (`merge_emits`)."""
        st = ln.stmt
        if isinstance(st, If):
            then = tuple(self.merge_emits(st.then))
            else_ = None if st.else_ is None else tuple(self.merge_emits(st.else_))
            return replace(ln, stmt=replace(st, then=then, else_=else_))
        if isinstance(st, (Loop, ExitScope)):
            return replace(ln, stmt=replace(st, body=tuple(self.merge_emits(st.body))))
        return ln

    def emit_emit(self, e: E, em: Emitter, node: Any) -> None:
        loc = e.loc
        if isinstance(loc, HdrLoc) and varbit_index(loc.ty) >= 0:
            self.emit_emit_vl(loc, em)  # see compiler.varbit
        elif isinstance(loc, HdrLoc):
            var, _exprs, pack, _size, _n = self.header_plan(loc.ty)
            self.used_slots.add(loc.slot)
            h = loc.var
            n = len(loc.ty.fields)
            values = None if pack == [Field("h", i) for i in range(1, n + 1)] else \
                tuple(PyExpr.of(rehead(x, h)) for x in pack)
            em.emit(Emit(h, var, values))
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


def _or_all(items: list[Expr]) -> Expr:
    """``(a | b | c)``: two or more items or'ed, one pair of parentheses."""
    n = items[0]
    for x in items[1:-1]:
        n = Bin("|", n, x, bare=True)
    return Bin("|", n, items[-1])


def rehead(n: Expr, h: str) -> Expr:
    """A pack argument of `header_plan` (over ``h[i]``) for the header whose cells local
    `h` names."""
    if isinstance(n, Field) and n.header == "h":
        return Field(h, n.index, n.width)
    if isinstance(n, Bin):
        return replace(n, a=rehead(n.a, h), b=rehead(n.b, h))
    return n
