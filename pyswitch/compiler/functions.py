"""Function declarations (``T f(in/out/inout ...) { ... }``), inlined at every call.

p4c's frontend inlines functions (InlineFunctions) with P4's copy-in/copy-out: every
argument is evaluated left to right into a fresh copy, the body runs on the copies, and
out/inout copies are written back in order when the body ends. pyswitch does the same at
compile time: each call site gets storage of its own (Python locals for scalars, packet
storage for headers and structs), so no call can see another's values. ``return`` inside
the body ends it through a one-pass ``while`` loop. A function whose body is a single
``return e;`` and has no out/inout parameter is compiled as the expression ``e`` over its
arguments, so constant arguments fold as after p4c's inlining.

Evaluation order: a call with out/inout parameters has side effects, so it is accepted only
where pyswitch keeps P4's left-to-right order (see `fx_safe_nodes`): the whole right side of
an assignment or initializer, the indices of the l-value it assigns, a call statement, an
``if``/``switch`` condition, a ``return`` value, and the operands of operators and stack
indices there (the compiler saves an operand that an effect on its right could change).
Anywhere else it is rejected with its location. The same holds for a table's ``apply()``
used as a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lark import Tree

from pyswitch.compiler.model import (
    ActionDef,
    Const,
    E,
    Emitter,
    ScalarLoc,
    Scope,
    bits_width,
    local_loc,
)
from pyswitch.ir import Break, Loop, Pass
from pyswitch.ir.exprs import Bin, Lit, Local
from pyswitch.types import (
    Bits,
    BoolTy,
    EnumTy,
    ErrorTy,
    HeaderTy,
    StackTy,
    StructTy,
    Ty,
    VoidTy,
    same_type,
)

# expression nodes whose operands keep P4's evaluation order when compiled (see
# `Expressions`: the left operand is saved when the right one emits code, and && || ?:
# evaluate their right side conditionally)
_ORDERED_OPS = {"binop", "binop_lt", "binop_gt", "bor", "bxor", "band", "shl", "shr",
                "lor", "land", "cond", "neg", "pos", "bnot", "lnot", "cast", "member",
                "slice"}
_SCALARS = (Bits, BoolTy, EnumTy, ErrorTy)


@dataclass
class FunctionDef:
    """A top-level function declaration."""

    name: str
    ret: Ty
    params: list[tuple[str, str, Ty, Any]]  # (direction, name, type, node)
    body: Tree
    node: Tree

    @property
    def has_effects(self) -> bool:
        return any(d in ("out", "inout") for d, _n, _t, _p in self.params)


@dataclass
class _FnCtx:
    fn: FunctionDef
    result: Any          # storage of the return value (None for void)
    loop: bool           # the body runs inside `while True:` (a return not at its end)
    tail: int            # id() of a final top-level `return`, which needs no break
    value: E | None = None  # the constant that return gives, if it is the only one


def _returns(node: Tree) -> list[Tree]:
    return [t for t in node.iter_subtrees() if t.data == "return_stmt"]


class Functions:
    """See module docstring."""

    # -- declarations -----------------------------------------------------------------
    def function_decl(self, d: Tree) -> None:
        ch = self.strip_annots(d.children)
        ret_node, name_node, tparams, params_node, body = ch
        nm = self.name_of(name_node)
        if tparams is not None:
            raise self.err(d, f"generic function {nm!r} is not supported by pyswitch")
        if ret_node.data == "type_or_void":
            ret_node = ret_node.children[0]
        ret = self.resolve_type(ret_node) if ret_node.data != "void_type" else VoidTy()
        if not isinstance(ret, (*_SCALARS, HeaderTy, StructTy, VoidTy)):
            raise self.err(ret_node, f"function {nm!r}: return type {ret.show()} is not "
                                     "supported by pyswitch")
        params = self.params(params_node)
        for _d, pn, ty, p in params:
            if not isinstance(ty, (*_SCALARS, HeaderTy, StructTy, StackTy)):
                raise self.err(p, f"function parameter {pn!r} of type {ty.show()} is not "
                                  "supported by pyswitch")
        if self.glob.names.get(nm) is not None:
            raise self.err(name_node, f"{nm!r} is already declared (overloaded functions "
                                      "are not supported by pyswitch)")
        fd = FunctionDef(nm, ret, params, body, d)
        self.check_function_body(fd)
        self.glob.names[nm] = fd

    # -- positions where side effects keep their order ----------------------------------
    def fx_safe(self, node: Tree) -> bool:
        safe = getattr(self, "_fx_safe", None)
        if safe is None:
            safe = self._fx_safe = fx_safe_nodes(self.tree, self.function_names())
        return id(node) in safe

    def function_names(self) -> set[str]:
        return {self.name_of(self.strip_annots(d.children)[1]) for d in self.tree.children
                if isinstance(d, Tree) and d.data == "function_decl"}

    def check_fx_position(self, node: Tree, what: str) -> None:
        if not self.fx_safe(node):
            raise self.err(node, f"{what} inside this expression is not supported by pyswitch "
                                 "(its side effects could not keep P4's evaluation order); "
                                 "assign it to a variable first")

    # -- calls ------------------------------------------------------------------------
    def function_call(self, fd: FunctionDef, args: list, scope: Scope, em: Emitter,
                      node: Tree) -> E | None:
        stack: list[_FnCtx] = self.__dict__.setdefault("fn_stack", [])
        if any(c.fn is fd for c in stack):
            raise self.err(node, f"recursive call of function {fd.name!r}")
        if len(args) != len(fd.params):
            raise self.err(node, f"function {fd.name!r} expects {len(fd.params)} arguments, "
                                 f"got {len(args)}")
        if fd.has_effects:
            self.check_fx_position(node, f"a call of {fd.name!r} (it has out/inout parameters)")
        fscope = Scope(self.glob)
        copy_out: list[tuple[Any, Any, Any]] = []  # (caller's l-value, copy, argument)
        for (direction, pn, ty, _p), a in zip(fd.params, args, strict=True):
            if direction in ("out", "inout"):
                lv = self.lvalue(a, scope, em)
                lty = lv[1].ty if isinstance(lv, tuple) else lv.ty
                if isinstance(lv, tuple):
                    lty = Bits(lv[2] - lv[3] + 1)
                if not same_type(lty, ty):
                    raise self.err(a, f"argument for {direction} parameter {pn!r} has type "
                                      f"{lty.show()}, expected {ty.show()}")
                copy = self.fresh(f"{fd.name}.{pn}", ty)
                if direction == "inout":
                    self.assign_e(copy, self.read_lvalue(lv), em, a)
                else:  # an out parameter starts invalid (headers) or zero, as on BMv2
                    self.invalidate(copy, em)
                copy_out.append((lv, copy, a))
                fscope.names[pn] = copy
            else:
                if isinstance(ty, _SCALARS) and not (isinstance(a, Tree) and
                                                     a.data == "list_expr"):
                    e = self.convert(self.expr(a, scope, em), ty, a)
                    if e.const is not None:
                        fscope.names[pn] = Const(e.const, ty)
                        continue
                    copy = self.fresh(f"{fd.name}.{pn}", ty)
                    em.assign(self.loc_e(copy), e)
                else:
                    copy = self.fresh(f"{fd.name}.{pn}", ty)
                    self.assign_to(copy, a, scope, em, a)
                fscope.names[pn] = copy
                fscope.readonly.add(pn)
        r = self.inline_body(fd, fscope, em)
        for lv, copy, a in copy_out:
            self.write_lvalue(lv, self.loc_e(copy), em, a)
        return r

    def inline_body(self, fd: FunctionDef, fscope: Scope, em: Emitter) -> E | None:
        # a loop around the call is not a loop of the body (break/continue, compiler.stmt_ext)
        saved_depth = self.__dict__.get("_loop_depth", 0)
        self.__dict__["_loop_depth"] = 0
        try:
            return self._inline_body(fd, fscope, em)
        finally:
            self.__dict__["_loop_depth"] = saved_depth

    def _inline_body(self, fd: FunctionDef, fscope: Scope, em: Emitter) -> E | None:
        stmts = fd.body.children
        stack: list[_FnCtx] = self.fn_stack
        if len(stmts) == 1 and stmts[0].data == "return_stmt" and \
                stmts[0].children[0] is not None and not isinstance(fd.ret, VoidTy) and \
                isinstance(fd.ret, _SCALARS):
            # an expression function: its value, folded where its arguments are constant
            stack.append(_FnCtx(fd, None, False, id(stmts[0])))
            try:
                e = self.convert(self.expr(stmts[0].children[0], fscope, em), fd.ret,
                                 stmts[0].children[0])
            finally:
                stack.pop()
            if e.const is None and not e.code.isidentifier():
                v = self.new_tmp("f")
                em.assign(v, e)
                return E.of(Local(v, bits_width(fd.ret)), fd.ret)
            return E(e.code, fd.ret, e.const, node=e.node)
        result = None if isinstance(fd.ret, VoidTy) else self.fresh(f"{fd.name}.$ret", fd.ret)
        if result is not None:
            self.invalidate(result, em)
        tail = stmts[-1] if stmts else None
        tail_id = id(tail) if tail is not None and tail.data == "return_stmt" else 0
        loop = any(id(r) != tail_id for r in _returns(fd.body))
        ctx = _FnCtx(fd, result, loop, tail_id)
        stack.append(ctx)
        try:
            body = em.sub() if loop else em  # a return not at the end: a loop's break
            n0 = len(em.lines)
            self.block(fd.body, Scope(fscope), body)
            if loop:
                body.emit(Break())
                em.emit(Loop(em.nested(body.lines)))
            elif len(em.lines) == n0:
                em.emit(Pass())
        finally:
            stack.pop()
        if result is None:
            return None
        if ctx.value is not None:
            return E(ctx.value.code, fd.ret, ctx.value.const, node=ctx.value.node)
        if isinstance(result, ScalarLoc):
            return E(result.code, result.ty, node=result.node)
        return self.loc_e(result)

    def in_function(self) -> bool:
        return bool(self.__dict__.get("fn_stack"))

    def function_return(self, s: Tree, scope: Scope, em: Emitter) -> None:
        """``return [e];`` in the body of the innermost function being inlined."""
        ctx: _FnCtx = self.fn_stack[-1]
        val = s.children[0]
        if (val is None) != (ctx.result is None):
            raise self.err(s, f"function {ctx.fn.name!r}: return "
                              f"{'needs' if val is None else 'takes no'} a value")
        if val is not None:
            if id(s) == ctx.tail and not ctx.loop and isinstance(ctx.result, ScalarLoc) and \
                    not (isinstance(val, Tree) and val.data == "list_expr"):
                # the one return there is: a constant stays a constant, as p4c folds it
                e = self.convert(self.expr(val, scope, em), ctx.result.ty, val)
                if e.const is not None:
                    ctx.value = e
                    return
                em.assign(self.loc_e(ctx.result), e)
            else:
                self.assign_to(ctx.result, val, scope, em, s)
        if id(s) != ctx.tail:
            em.emit(Break())

    def check_function_body(self, fd: FunctionDef) -> None:
        """What a function body may not do (p4c rejects it or pyswitch does not model it)."""
        for t in fd.body.iter_subtrees():
            if t.data == "exit_stmt":
                raise self.err(t, "exit inside a function is not supported by pyswitch")
            if t.data == "call" and isinstance(t.children[0], Tree) and \
                    t.children[0].data == "ident":
                if str(t.children[0].children[0]) == fd.name:
                    raise self.err(t, f"recursive call of function {fd.name!r}")
                b = self.glob.lookup(str(t.children[0].children[0]))
                if isinstance(b, ActionDef) or (isinstance(b, tuple) and
                                                b[0] == "toplevel_action"):
                    raise self.err(t, "a function cannot call an action")

    # -- storage and l-values -----------------------------------------------------------
    def fresh(self, name: str, ty: Ty) -> Any:
        """Storage of a call's own: a Python local for a scalar (the inlined body runs in
        the caller's function), packet storage for a header, struct or stack."""
        if isinstance(ty, _SCALARS):
            return local_loc(self.new_tmp("v"), ty)
        return self.alloc(name, ty)

    def read_lvalue(self, lv: Any) -> E:
        if isinstance(lv, tuple):  # ("slice", base, hi, lo)
            _s, base, hi, lo = lv
            w = hi - lo + 1
            b = self.loc_e(base).as_node()
            x = Bin(">>", b, Lit(lo)) if lo else b
            if hi != base.ty.width - 1:
                x = Bin("&", x, Lit((1 << w) - 1, hexed=True), w)
            return E.of(x, Bits(w))
        return self.loc_e(lv)

    def write_lvalue(self, lv: Any, val: E, em: Emitter, node: Any) -> None:
        if isinstance(lv, tuple):
            _s, base, hi, lo = lv
            m = ((1 << (hi - lo + 1)) - 1) << lo
            keep = base.ty.mask ^ m
            b = base if isinstance(base, E) else self.loc_e(base)
            shifted = Bin("<<", val.as_node(), Lit(lo)) if lo else val.as_node()
            kept = Bin("&", b.as_node(), Lit(keep, None, hexed=True))
            em.assign(b, E.of(Bin("|", kept, shifted, bare=True), b.ty))
            return
        self.assign_e(lv, val, em, node)


def fx_safe_nodes(tree: Tree, functions: set[str]) -> set[int]:
    """id() of every call node whose side effects pyswitch can order as P4 does: one
    reached from the root of a statement's expression through operators only (and
    through the arguments of user functions, which are copied in left to right)."""
    safe: set[int] = set()

    def walk(n: Any) -> None:
        if not isinstance(n, Tree):
            return
        if n.data == "call":
            safe.add(id(n))
            callee = n.children[0]
            if isinstance(callee, Tree) and callee.data == "ident" and \
                    str(callee.children[0]) in functions:
                args = n.children[-1]
                for a in (args.children if args is not None else []):
                    walk(a)
            elif isinstance(callee, Tree) and callee.data == "member":
                walk(callee.children[0])
            return
        if n.data == "list_expr":
            # values are taken in order: a struct is filled field by field, a header's
            # values are saved before code on their right runs (compiler.stmt_ext)
            for k in n.children:
                walk(k)
            return
        if n.data == "index":
            # the element is chosen (its index evaluated) once, before what follows
            walk(n.children[0])
            walk(n.children[1])
            return
        if n.data in _ORDERED_OPS:
            kids = n.children[1:] if n.data == "cast" else n.children
            if n.data in ("member", "slice"):
                kids = n.children[:1]
            for k in kids:
                walk(k)

    for st in tree.iter_subtrees():
        d = st.data
        if d in ("assignment", "op_assignment"):
            # the l-value first (a run-time index picks its element at once, see
            # compiler.stacks), then the right side; `x op= e` reads x before e runs
            walk(st.children[0])
            if d == "assignment":
                walk(st.children[1])
        elif d == "var_decl":
            ch = [c for c in st.children
                  if not (isinstance(c, Tree) and c.data == "annotation")]
            if len(ch) > 2:
                walk(ch[2])
        elif d in ("call_stmt", "if_stmt", "switch_stmt", "return_stmt"):
            walk(st.children[0])
    return safe
