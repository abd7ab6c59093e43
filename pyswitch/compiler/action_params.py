"""Action parameters of every type p4c allows with a direction, and arguments bound in a
table's actions list (``actions = { a(hdr.x); }``).

p4c's RemoveActionParameters turns each directional parameter into a variable of the
control, with the copy-in at the start of the action and the copy-out at its end and before
every ``exit``; LocalizeAllActions gives every use of an action a copy of its own, so each use
starts from fresh variables. pyswitch keeps scalar parameters as Python arguments of the
action's function (out/inout ones come back as a tuple, see `compiler.tables`); a header,
struct or stack parameter gets storage of the action that the caller fills before the call
(an ``out`` one reset, as a fresh variable is) and copies back after it. A table whose actions
list binds arguments calls a wrapper that does the same around the action; calls written in
the program keep calling the action's own function.

Directionless parameters are action data from the control plane: bit<N>, int<N>, bool and
serializable enums (``enum bit<8> E {...}``: the control plane gives the underlying value,
any value of the underlying type, as p4c and BMv2 take it).
"""

from __future__ import annotations

from typing import Any

from lark import Tree

from pyswitch.compiler.model import (
    ActionDef,
    E,
    Emitter,
    ScalarLoc,
    Scope,
    bits_width,
)
from pyswitch.ir import ActionCall, CopyOutCall, Exit
from pyswitch.ir.exprs import Elem
from pyswitch.types import (
    Bits,
    BoolTy,
    EnumTy,
    ErrorTy,
    HeaderTy,
    StackTy,
    StructTy,
    Ty,
    same_type,
)

AGGREGATES = (HeaderTy, StructTy, StackTy)

_SCALARS = (Bits, BoolTy, EnumTy, ErrorTy)


class ActionParams:
    """See module docstring."""

    def check_action_param(self, direction: str, pn: str, ty: Ty, p: Any) -> None:
        if direction:
            if not isinstance(ty, (*_SCALARS, *AGGREGATES)):
                raise self.err(p, f"action parameter {pn!r} of type {ty.show()} is not "
                                  "supported by pyswitch")
        elif not isinstance(ty, (Bits, BoolTy)) and not (
                isinstance(ty, EnumTy) and ty.underlying is not None):
            raise self.err(p, f"action parameter {pn!r}: only bit<N>/int<N>/bool parameters are "
                              "supported as action data (without a direction), and "
                              "serializable enums")

    def agg_param(self, a: ActionDef, pn: str, ty: Ty | None = None) -> Any:
        """The storage of aggregate parameter `pn` of `a` (allocated at the declaration)."""
        store: dict = self.__dict__.setdefault("_agg_params", {})
        if (a.idx, pn) not in store:
            store[(a.idx, pn)] = self.alloc(f"{a.name}.{pn}", ty)
        return store[(a.idx, pn)]

    # -- a call written in the program ---------------------------------------------------
    def call_action(self, a: ActionDef, args: list, scope: Scope, em: Emitter,
                    node: Any) -> None:
        if len(args) != len(a.params):
            raise self.err(node, f"action {a.local!r} expects {len(a.params)} arguments")
        args_e, outs, aggs = self.action_copy_in(a, a.params, args, scope, em, persistent=False)
        fn, py_args = getattr(a, 'base_fn', a.fn), tuple(x.py() for x in args_e)
        r = self.new_tmp("r") if outs else ""
        if self.in_action is None and (outs or aggs):
            # called from a control: an `exit` in the callee still copies out (p4c's
            # RemoveActionParameters puts the copy-out before every exit); the exception
            # carries the scalar values
            h = em.sub()
            self.action_copy_out(r, outs, aggs, h)
            h.emit(self.exit_stmt())
            em.emit(CopyOutCall(fn, py_args, r or None, on_exit=em.nested(h.lines),
                                values=True))
        elif self.in_action is not None and self.action_out:
            # called from an action: p4c's InlineActions puts the callee's copy-out after
            # its body, so an exit skips it; the caller's own parameters are copied out
            h = em.sub()
            h.emit(self.exit_stmt())
            em.emit(CopyOutCall(fn, py_args, r or None, on_exit=em.nested(h.lines)))
        elif not outs:
            em.emit(ActionCall(fn, py_args))
        else:
            em.emit(CopyOutCall(fn, py_args, r))
        self.action_copy_out(r, outs, aggs, em)

    def action_copy_in(self, a: ActionDef, params: list, args: list, scope: Scope,
                       em: Emitter, persistent: bool) -> tuple[list[E], list, list]:
        """The arguments of the call (scalars), the scalar l-values to copy out (in the
        order of the returned tuple) and the aggregate (l-value, storage) pairs to copy out.
        `persistent`: the code runs in a function of its own, so only packet storage (not
        the caller's Python locals) may be named."""
        codes: list[E] = []
        outs: list[tuple[Any, Ty, Any]] = []
        aggs: list[tuple[Any, Any, Any]] = []
        for (direction, pn, ty), x in zip(params, args, strict=True):
            if isinstance(ty, AGGREGATES):
                loc = self.agg_param(a, pn)
                if direction in ("out", "inout"):
                    lv = self.lvalue(x, scope, em)
                    if isinstance(lv, tuple) or not same_type(lv.ty, ty):
                        raise self.err(x, f"argument for {direction} parameter {pn!r} must "
                                          f"be an l-value of type {ty.show()}")
                    if direction == "inout":
                        self.assign_e(loc, self.loc_e(lv), em, x)
                    else:
                        self.reset(loc, em)
                    aggs.append((lv, loc, x))
                else:
                    self.assign_to(loc, x, scope, em, x)
                continue
            if direction in ("out", "inout"):
                lv = self.lvalue(x, scope, em)
                lty = Bits(lv[2] - lv[3] + 1) if isinstance(lv, tuple) else lv.ty
                if not same_type(lty, ty):
                    raise self.err(x, f"argument for {direction} parameter {pn!r} must be an "
                                      f"l-value of type {ty.show()}")
                base = lv[1] if isinstance(lv, tuple) else lv
                if persistent and isinstance(base, ScalarLoc) and base.code.startswith("_"):
                    raise self.err(x, f"argument {pn!r}: a variable of the apply block cannot "
                                      "be bound in an actions list")
                codes.append(self.read_lvalue(lv) if direction == "inout" else
                             E("False", ty, False) if isinstance(ty, BoolTy) else E("0", ty, 0))
                outs.append((lv, ty, x))
            else:
                codes.append(self.convert(self.expr(x, scope, em), ty, x))
        return codes, outs, aggs

    def action_copy_out(self, r: str, outs: list, aggs: list, em: Emitter) -> None:
        for i, (lv, ty, x) in enumerate(outs):
            self.write_lvalue(lv, E.of(Elem(r, i, bits_width(ty)), ty), em, x)
        for lv, loc, x in aggs:
            self.assign_e(lv, self.loc_e(loc), em, x)

    # -- arguments bound in a table's actions list -----------------------------------------
    def bind_table_action(self, table: str, a: ActionDef, args_node: Any, scope: Scope,
                          node: Tree) -> None:
        args = [x for x in (args_node.children if args_node is not None else [])
                if x is not None]
        directional = [p for p in a.params if p[0]]
        if not args and not directional:
            return
        if len(args) != len(directional):
            raise self.err(node, f"action {a.local!r}: the actions list must bind its "
                                 f"{len(directional)} parameter(s) with a direction, and only "
                                 "those (pyswitch)")
        if getattr(a, "bound_in", None) is not None:
            raise self.err(node, f"action {a.local!r} is already bound in table "
                                 f"{a.bound_in!r}; binding it twice is not supported by "
                                 "pyswitch")
        saved = (self.in_action, self.used_slots, self.action_out)
        self.in_action, self.used_slots, self.action_out = None, set(), []
        em = Emitter()
        try:
            args_e, outs, aggs = self.action_copy_in(a, directional, args, scope, em,
                                                     persistent=True)
            r = self.new_tmp("r")
            h = em.sub()  # an exit in the action: the copy-out, then the exit goes on
            self.action_copy_out(r, outs, aggs, h)
            h.emit(Exit())
            em.emit(CopyOutCall(a.fn, tuple(x.py() for x in args_e), r if outs else None,
                                data=True, on_exit=em.nested(h.lines), values=True))
            self.action_copy_out(r, outs, aggs, em)
            wrapper = f"{a.fn}_{table}"
            self.emit_function(wrapper, ["S", "M", "*data"], em, pre=[], post=[])
        finally:
            self.in_action, self.used_slots, self.action_out = saved
        a.base_fn = a.fn  # type: ignore[attr-defined]  # calls written in the program
        a.fn = wrapper     # what tables (the run-time metadata) call
        a.bound_in = table  # type: ignore[attr-defined]

    def unbound_args(self, a: ActionDef, args: list) -> list:
        """The arguments of `a` in a default action or an entry: those of its action data
        (bound ones, repeated there as P4 requires, are dropped as p4c does)."""
        if len(args) == len(a.params) and any(p[0] for p in a.params):
            return [x for p, x in zip(a.params, args, strict=True) if not p[0]]
        return args
