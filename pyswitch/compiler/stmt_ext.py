"""Statement forms p4c accepts that the core of the compiler does not spell out: compound
assignment (``x += e``), ``switch`` on a value with constant labels, packet methods
with explicit type arguments (``pkt.extract<H>(hdr.h)``, ``pkt.extract<H>(_)``,
``b.emit<T>(x)``, the way p4c itself prints programs), and ``for`` loops with ``break`` and
``continue`` (BMv2 runs them with its jump primitives; here they are Python loops).
A list expression assigned to a struct is evaluated completely before the struct changes
(``s = { s.y, s.x }`` swaps, as p4c's RemoveAliases makes it).
"""

from __future__ import annotations

from typing import Any

from lark import Tree

from pyswitch.compiler.model import (
    Const,
    E,
    Emitter,
    HdrLoc,
    Method,
    PacketRef,
    ScalarLoc,
    Scope,
    StructLoc,
    bits_width,
    local_loc,
    too_short,
)
from pyswitch.ir import Advance, Break, Continue, Line, Loop, ParserError, PyExpr
from pyswitch.ir.exprs import AnyOf, Bin, Lit, Local, Not
from pyswitch.types import (
    BOOL,
    Bits,
    BoolTy,
    EnumTy,
    ErrorTy,
    HeaderTy,
    Ty,
    same_type,
)


class StatementsExt:
    """See module docstring."""

    # -- x op= e ------------------------------------------------------------------------
    def op_assign(self, s: Tree, scope: Scope, em: Emitter) -> None:
        """``x op= e`` is ``x = x op e`` with ``x`` evaluated once (p4c's SideEffectOrdering
        and RemoveOpAssign): its l-value first, its value read before ``e`` runs."""
        lhs, optok, rhs = s.children
        op = str(optok)[:-1]
        lv = self.lvalue(lhs, scope, em)
        a = self.read_lvalue(lv)
        sub = self.sub_emitter(em, 0)
        b = self.expr(rhs, scope, sub)
        if sub is not None and sub.lines:
            if not isinstance(a.ty, (Bits, BoolTy)):
                raise self.err(s, "compound assignment with side effects on its right is "
                                  "not supported here by pyswitch")
            v = self.new_tmp("o")
            em.assign(v, a)
            a = E.of(Local(v, bits_width(a.ty)), a.ty)
            em.lines.extend(sub.lines)
        r = self.binop(op, a, b, s)
        lty = Bits(lv[2] - lv[3] + 1) if isinstance(lv, tuple) else lv.ty
        self.write_lvalue(lv, self.convert(r, lty, s), em, s)

    # -- s = { ... } -----------------------------------------------------------------------
    def assign_list_struct(self, lhs: StructLoc, items: list, scope: Scope, em: Emitter,
                           node: Any) -> None:
        """Field by field into a fresh copy, then the copy into `lhs`: the values may read
        `lhs` itself. Constant values need no copy."""
        if all(isinstance(x, Tree) and x.data in ("int_lit", "true_lit", "false_lit")
               for x in items):
            for x, sub in zip(items, lhs.fields.values(), strict=True):
                self.assign_to(sub, x, scope, em, node)
            return
        tmp = self.temp_like(lhs)
        for x, sub in zip(items, tmp.fields.values(), strict=True):
            if isinstance(x, Tree) and x.data == "list_expr" and isinstance(sub, StructLoc):
                xs = [y for y in x.children if y is not None]
                if len(xs) != len(sub.fields):
                    raise self.err(x, "wrong number of values for struct")
                for y, sub2 in zip(xs, sub.fields.values(), strict=True):
                    self.assign_to(sub2, y, scope, em, node)
            else:
                self.assign_to(sub, x, scope, em, node)
        self.assign_e(lhs, self.loc_e(tmp), em, node)

    def ordered_values(self, items: list, tys: list, scope: Scope,
                       em: Emitter) -> list[E]:
        """`items` converted to `tys`, evaluated left to right: a value is saved in a
        local before code that a later item runs (a call with side effects)."""
        vals: list[E] = []
        for x, t in zip(items, tys, strict=True):
            sub = self.sub_emitter(em, 0)
            e = self.convert(self.expr(x, scope, sub), t, x)
            if sub is not None and sub.lines:
                for i, v in enumerate(vals):
                    if v.const is None:
                        tmp = self.new_tmp("o")
                        em.assign(tmp, v)
                        vals[i] = E.of(Local(tmp, bits_width(v.ty)), v.ty)
                em.lines.extend(sub.lines)
            vals.append(e)
        return vals

    def temp_like(self, loc: Any) -> Any:
        """Fresh storage shaped as `loc` (scalars as Python locals)."""
        if isinstance(loc, StructLoc):
            return StructLoc(loc.ty, {f: self.temp_like(sub) for f, sub in loc.fields.items()})
        if isinstance(loc, ScalarLoc):
            return local_loc(self.new_tmp("v"), loc.ty)
        return self.alloc("$tmp", loc.ty)

    # -- for (init; cond; update) body ------------------------------------------------------
    def loop_stmt(self, s: Tree, scope: Scope, em: Emitter) -> None:
        depth = self.__dict__.get("_loop_depth", 0)
        if s.data != "for_stmt":
            if depth == 0:
                raise self.err(s, f"{s.data.split('_')[0]} outside a loop")
            em.emit(Break() if s.data == "break_stmt" else Continue())
            return
        if self.ctrl_kind == "parser":
            raise self.err(s, "for loops in a parser are not supported by pyswitch")
        if any(t.data == "return_stmt" for t in s.iter_subtrees()) and (
                self.in_function() or (self.sub_depth and self.in_action is None)):
            # there `return` is itself a Python `break` (see compiler.functions/instances)
            raise self.err(s, "return inside a for loop here is not supported by pyswitch")
        init_n, cond_n, update_n, body = s.children
        inits = [k for k in init_n.children if k is not None]
        updates = [k for k in update_n.children if k is not None]
        conds = [k for k in cond_n.children if k is not None]
        lscope = Scope(scope)
        for k in inits:
            if k.data == "for_var":
                self.var_decl(self.strip_annots(k.children), lscope, em, k)
            else:
                self.loop_update(k, lscope, em)
        first = self.new_tmp("first")
        em.assign(first, "True")
        loop = em.sub()
        upd = loop.sub()  # the updates run before every test but the first, so
        for k in updates:  # `continue` is a plain Python continue
            self.loop_update(k, lscope, upd)
        loop.emit_if(E.of(Not(Local(first), bare=True), BOOL), upd.lines)
        loop.assign(first, "False")
        if conds:
            c = self.expr(conds[0], lscope, loop)
            if not isinstance(c.ty, BoolTy):
                raise self.err(conds[0], f"loop condition must be bool, not {c.ty.show()}")
            loop.emit_inline_if(E.of(Not(c.as_node(), bare=True), BOOL), Break())
        self.__dict__["_loop_depth"] = depth + 1
        try:
            self.stmt(body, Scope(lscope), loop)
        finally:
            self.__dict__["_loop_depth"] = depth
        em.emit(Loop(em.nested(loop.lines)))

    def loop_update(self, k: Tree, scope: Scope, em: Emitter) -> None:
        if k.data == "for_assign":
            lhs = self.lvalue(k.children[0], scope, em)
            if isinstance(lhs, tuple):
                lty = Bits(lhs[2] - lhs[3] + 1)
                self.write_lvalue(lhs, self.convert(self.expr(k.children[1], scope, em), lty,
                                                    k), em, k)
            else:
                self.assign_to(lhs, k.children[1], scope, em, k)
        elif k.data == "for_op_assign":
            self.op_assign(k, scope, em)
        else:
            self.call(Tree("call", k.children, k.meta), scope, em, stmt=True)

    # -- switch (value) { constant: ... } -------------------------------------------------
    def value_switch(self, s: Tree, e: E, cases: list, scope: Scope, em: Emitter) -> None:
        """A switch on a bit<N>/int<N>/enum/error value. As after p4c's conversion to ``if``
        chains, the default block runs only when no label matches, wherever it is written;
        labels without a block fall through to the next block."""
        if not isinstance(e.ty, (Bits, EnumTy, ErrorTy)):
            raise self.err(s.children[0], "switch needs table.apply().action_run or a "
                                          "bit/int/enum/error value")
        groups: list[tuple[list[int], bool, Tree]] = []
        vals: list[int] = []
        has_default = False
        seen: dict[int, Any] = {}
        for c in cases:
            lab = c.children[0]
            if lab.data == "default_label":
                has_default = True
            else:
                x = self.switch_label_value(lab, e.ty, scope)
                if x in seen:
                    raise self.err(lab, f"duplicate switch label (value {x})")
                seen[x] = lab
                vals.append(x)
            if c.data == "switch_fallthrough":
                continue
            groups.append((vals, has_default, c.children[1]))
            vals, has_default = [], False
        if vals or has_default:
            raise self.err(cases[-1], "the last switch label needs a block")
        if e.const is not None:
            subj = e.as_node()
        else:
            subj = Local(self.new_tmp("sw"))
            em.assign(subj.name, e)
        arms: list[tuple[str, list[Line]]] = []  # an if/elif chain, the default last
        default_blk = None
        for gvals, dflt, blk in groups:
            if dflt:
                default_blk = blk
                continue
            eqs = [Bin("==", subj, Lit(v), bare=True) for v in gvals]
            arms.append((E.of(eqs[0] if len(eqs) == 1 else AnyOf(tuple(eqs)), BOOL),
                         self.switch_block(blk, scope, em)))
        else_ = None
        if default_blk is not None:
            lines = self.switch_block(default_blk, scope, em)
            if arms:
                else_ = lines
            else:
                arms.append(("True", lines))
        if arms:
            em.emit_chain(arms, else_)

    def switch_block(self, blk: Tree, scope: Scope, em: Emitter) -> list[Line]:
        """A case's block, one level deeper than `em` (a body for `Emitter.emit_chain`)."""
        sub = em.sub()
        self.block(blk, Scope(scope), sub)
        return sub.lines

    def switch_label_value(self, lab: Tree, ty: Ty, scope: Scope) -> int:
        d = lab.data
        if d == "int_label":
            v, lty = self.parse_int(lab.children[0])
            e = E(str(v), lty, v)
        elif d == "type_member_label":
            e = self.expr(Tree("type_member", lab.children, lab.meta), scope)
        elif d == "error_label":
            e = self.expr(Tree("error_member", lab.children, lab.meta), scope)
        else:
            nm = self.name_of(lab.children[0])
            b = scope.lookup(nm)
            if not isinstance(b, Const):
                raise self.err(lab, f"switch label {nm!r} is not a compile-time constant")
            e = self.binding_e(b, lab)
        e = self.convert(e, ty, lab)
        if e.const is None:
            raise self.err(lab, "switch labels must be compile-time constants")
        return int(e.const)

    # -- packet methods with explicit type arguments --------------------------------------
    def typed_packet_call(self, node: Tree, base: PacketRef, mn: str, scope: Scope,
                          em: Emitter | None) -> Any:
        """``pkt.extract<T>(x)``, ``pkt.extract<T>(_)`` and ``pkt.emit<T>(x)``: T must be
        the argument's type; ``_`` extracts into nowhere (the bytes are skipped, with the
        same PacketTooShort check)."""
        if em is None:
            raise self.err(node, "call not allowed here")
        tal = next(c for c in node.children if isinstance(c, Tree) and
                   c.data == "type_arg_list")
        tys = [self.resolve_type(t) for t in tal.children]
        args = self.call_args(node)
        if len(tys) != 1 or len(args) != 1 and not (mn == "extract" and len(args) == 2):
            raise self.err(node, f"{mn}<T> with these arguments is not supported by pyswitch")
        ty = tys[0]
        a = args[0]
        if isinstance(a, Tree) and a.data == "dont_care_arg":
            if mn != "extract" or not isinstance(ty, HeaderTy):
                raise self.err(a, "'_' is only supported as the header of extract<H>(_)")
            if self.ctrl_kind != "parser":
                raise self.err(node, "packet_in methods are only available in the parser")
            n = ty.width // 8
            em.emit(ParserError(self.errors.index('PacketTooShort'), too_short(n)))
            em.emit(Advance(PyExpr.of(Lit(n))))
            return None
        e = self.expr(a, scope, em)
        if not same_type(e.ty, ty) and not (isinstance(e.loc, HdrLoc) and e.loc.ty is ty):
            raise self.err(a, f"{mn}<{ty.show()}> of a {e.ty.show()}")
        return self.method_call(Method(base, mn, node), args, scope, em, node)
