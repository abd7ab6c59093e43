"""Statements: blocks, if, switch, assignments and l-values.
"""

from __future__ import annotations

from typing import Any

from lark import Tree

from pyswitch.compiler.model import (
    ApplyResult,
    E,
    Emitter,
    HdrLoc,
    ScalarLoc,
    Scope,
    StackLoc,
    StructLoc,
    nlit,
    px,
    valid_e,
)
from pyswitch.ir import Assign, Break, Exit, HeaderCopy, HeaderSet, Line, Pass, Return, Stmt
from pyswitch.ir.exprs import ActionRun, AnyOf, Bin, Lit
from pyswitch.types import (
    BOOL,
    Bits,
    BoolTy,
    same_type,
)


class Statements:
    """See module docstring."""

    def check_duplicate_local(self, name_node: Any, scope: Scope) -> None:
        """p4c: "x: Duplicates declaration x" for two locals of one name in one block (an
        inner block may shadow an outer one: each block has its own scope)."""
        nm = self.name_of(name_node)
        seen = scope.__dict__.setdefault("local_decls", {})
        if nm in seen:
            first = self.err(seen[nm], "")
            raise self.err(name_node, f"{nm}: Duplicates declaration {nm} (previous "
                                      f"declaration at {first.file}:{first.line}:{first.col})")
        seen[nm] = name_node

    def block(self, node: Tree, scope: Scope, em: Emitter) -> None:
        for s in node.children:
            self.stmt(s, scope, em)

    def stmt(self, s: Tree, scope: Scope, em: Emitter) -> None:
        k = s.data
        if k == "block":
            n0 = len(em.lines)
            self.block(s, Scope(scope), em)
            if len(em.lines) == n0:
                em.emit(Pass())
        elif k == "assignment":
            lhs = self.lvalue(s.children[0], scope, em)
            self.assign_to(lhs, s.children[1], scope, em, s)
        elif k == "call_stmt":
            self.call(s.children[0], scope, em, stmt=True)  # a value is discarded
        elif k == "if_stmt":
            c = self.expr(s.children[0], scope, em)
            if not isinstance(c.ty, BoolTy):
                raise self.err(s.children[0], f"if condition must be bool, not {c.ty.show()}")
            if c.const is not None:
                # e.g. a constant argument of an instantiated control: only the taken
                # branch is emitted; the other is still checked
                taken, dead = (s.children[1], s.children[2]) if c.const else \
                    (s.children[2], s.children[1])
                if taken is not None:
                    self.stmt(taken, Scope(scope), em)
                if dead is not None:
                    scratch = Emitter()
                    scratch.ind = em.ind
                    self.stmt(dead, Scope(scope), scratch)
                return
            then = em.sub()
            self.stmt(s.children[1], Scope(scope), then)
            else_ = None
            if s.children[2] is not None:
                else_ = em.sub()
                self.stmt(s.children[2], Scope(scope), else_)
            em.emit_if(c, then.lines, None if else_ is None else else_.lines)
        elif k == "switch_stmt":
            self.switch(s, scope, em)
        elif k == "exit_stmt":
            if self.in_function():
                raise self.err(s, "exit inside a function is not supported by pyswitch")
            if self.ctrl_kind == "parser":
                raise self.err(s, "exit is not allowed in a parser")
            em.emit(self.exit_stmt())
        elif k == "return_stmt":
            if self.in_function():
                self.function_return(s, scope, em)  # see compiler.functions
            elif s.children[0] is not None:
                raise self.err(s, "return with a value is not supported")
            elif self.in_action is not None:  # an action is a function of its own
                em.emit(Return(tuple(self.action_out)))
            elif self.ctrl_kind == "parser":
                raise self.err(s, "return is not allowed in a parser")
            elif self.sub_depth:
                em.emit(Break())  # ends only the instantiated control (compiler.instances)
            else:
                em.emit(Return())
        elif k == "var_decl":
            ch = self.strip_annots(s.children)
            self.check_duplicate_local(ch[1], scope)
            self.var_decl(ch, scope, em, s)
        elif k == "const_decl":
            ch = self.strip_annots(s.children)
            self.check_duplicate_local(ch[1], scope)
            self.decl_const(ch, scope)
        elif k == "empty_stmt":
            pass
        elif k == "op_assignment":
            self.op_assign(s, scope, em)  # see compiler.stmt_ext
        elif k in ("for_stmt", "break_stmt", "continue_stmt"):
            self.loop_stmt(s, scope, em)  # see compiler.stmt_ext
        else:
            raise self.err(s, f"unsupported statement ({k})")

    def exit_stmt(self) -> Stmt:
        """The statement that executes P4's ``exit`` here. A block's apply is one
        function (instances are inlined): leaving it is the exit. Inside an action function
        it is an `Exit` (an exception in Python) that carries the action's out/inout
        parameters, because P4 copies them out on exit too (the caller assigns them, see
        `direct_action_call`)."""
        if self.in_action is None:
            return Return()
        return Exit(tuple(self.action_out))

    def switch(self, s: Tree, scope: Scope, em: Emitter) -> None:
        defaults = [c.children[0] for c in s.children[1:]
                    if c.children[0].data == "default_label"]
        if len(defaults) > 1:
            # p4c's ValidateSwitchStatements (pyswitch ran only the first before)
            locs = [self.err(d, "") for d in defaults]
            raise self.err(s, "switch has multiple 'default' labels: " + ", ".join(
                f"{x.line}:{x.col}" for x in locs))
        if self.in_action is not None and getattr(self.in_action, "bmv2_error", None) is None:
            # p4c's BMv2 back end; raised at the end if the action is used (bmv2_checks)
            self.in_action.bmv2_error = self.err(  # type: ignore[attr-defined]
                s, "SwitchStatement: switch statements not supported in actions on this "
                   "target")
        subj = s.children[0]
        e = self.expr(subj, scope, em, allow_apply_result=True)
        cases = s.children[1:]
        if isinstance(e, ApplyResult):
            t = e.table
            arms: list[tuple[str, list[Line]]] = []  # an if/elif chain, the default last
            else_: list[Line] | None = None
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
                    cond = Bin("==", ActionRun(e.var), Lit(a.idx), bare=True)
                if c.data == "switch_fallthrough":
                    if cond is None:
                        raise self.err(c, "default label needs a block")
                    pending.append(cond)
                    continue
                conds = pending + ([cond] if cond else [])
                pending = []
                sub = em.sub()
                self.block(c.children[1], Scope(scope), sub)
                if cond is not None:
                    arms.append((E.of(conds[0] if len(conds) == 1 else AnyOf(tuple(conds)),
                                      BOOL), sub.lines))
                elif arms:  # the default: ``else``, or alone ``if True``
                    else_ = sub.lines
                else:
                    arms.append(("True", sub.lines))
                if seen_default:
                    break
            if arms:
                em.emit_chain(arms, else_)
            return
        self.value_switch(s, e, cases, scope, em)  # see compiler.stmt_ext

    def lvalue(self, node: Any, scope: Scope, em: Emitter) -> Any:
        if isinstance(node, Tree) and node.data == "slice":
            base = self.lvalue(node.children[0], scope, em)
            outer = None
            if isinstance(base, tuple):  # a slice of a slice: bits of the same variable
                outer, base = base, base[1]
            if not isinstance(base, ScalarLoc) or not isinstance(base.ty, Bits):
                raise self.err(node, "slice of a non bit-vector")
            hi, lo = (self.const_int(node.children[1], scope),
                      self.const_int(node.children[2], scope))
            width = outer[2] - outer[3] + 1 if outer else base.ty.width
            if not (0 <= lo <= hi < width):
                raise self.err(node, f"slice [{hi}:{lo}] out of range for "
                                     f"{f'bit<{width}>' if outer else base.ty.show()}")
            if outer:
                hi, lo = hi + outer[3], lo + outer[3]
            return ("slice", base, hi, lo)
        self.check_writable(node, scope)
        e = self.expr(node, scope, em)
        self.check_stack_lvalue(node)  # see compiler.stacks
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
            b = base if isinstance(base, E) else self.loc_e(base)
            val = Bin("<<", r.as_node(), Lit(lo)) if lo else r.as_node()
            em.assign(b, E.of(Bin("|", Bin("&", b.as_node(), nlit(keep)), val, bare=True),
                              b.ty))
            return
        if isinstance(rhs_node, Tree) and rhs_node.data == "list_expr":
            items = [x for x in rhs_node.children if x is not None]
            if isinstance(lhs, HdrLoc):
                if len(items) != len(lhs.ty.fields):
                    raise self.err(rhs_node, "wrong number of values for header")
                vals = self.ordered_values(items, [t for _, t in lhs.ty.fields], scope,
                                           em)  # see compiler.stmt_ext
                self.used_slots.add(lhs.slot)
                # a header without fields: ``[True, ]``, as the compiler always wrote it
                em.emit(HeaderSet(lhs.var, True, tuple(v.py() for v in vals),
                                  listed=not vals))
                self.union_siblings_invalid(lhs, em)  # see compiler.unions
                return
            if isinstance(lhs, StructLoc):
                if len(items) != len(lhs.fields):
                    raise self.err(rhs_node, "wrong number of values for struct")
                self.assign_list_struct(lhs, items, scope, em, node)  # see compiler.stmt_ext
                return
            raise self.err(rhs_node, "list expression assigned to a scalar")
        r = self.expr(rhs_node, scope, em)
        self.assign_e(lhs, r, em, rhs_node)

    def assign_e(self, lhs: Any, r: E, em: Emitter, node: Any) -> None:
        if isinstance(lhs, ScalarLoc):
            r = self.convert(r, lhs.ty, node)
            em.assign(E(lhs.code, lhs.ty, node=lhs.node), r)
        elif isinstance(lhs, HdrLoc):
            if not isinstance(r.loc, HdrLoc) or r.loc.ty is not lhs.ty:
                raise self.err(node, f"cannot assign {r.ty.show()} to {lhs.ty.show()}")
            self.used_slots.update((lhs.slot, r.loc.slot))
            # BMv2's assign_header: from an invalid header only the validity is copied
            em.emit_inline_if(valid_e(r.loc.var), HeaderCopy(lhs.var, r.loc.var),
                              Assign(valid_e(lhs.var).py(), px("False")))
            self.union_siblings_invalid(lhs, em, only_if_valid=True)  # see compiler.unions
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
            self.stack_assign_next(lhs, r.loc, em)  # see compiler.stacks
        else:
            raise self.err(node, "expression cannot be assigned to")

    def loc_e(self, loc: Any) -> E:
        if isinstance(loc, ScalarLoc):
            return E(loc.code, loc.ty, loc=loc, node=loc.node)
        if isinstance(loc, HdrLoc):
            self.used_slots.add(loc.slot)
        return E("", loc.ty, loc=loc)
