"""Expressions: literals, names, members, implicit conversions, casts and operators.

Every value is normalised to its type's range; constant operands are folded at
compile time.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Tree

from pyswitch import externs
from pyswitch.compiler.instances import ControlInst
from pyswitch.compiler.model import (
    ApplyResult,
    Const,
    E,
    Emitter,
    ExternInst,
    FuncRef,
    HdrLoc,
    Method,
    PacketRef,
    ScalarLoc,
    Scope,
    StackLoc,
    StructLoc,
    TableDef,
    _lit,
    bits_width,
    field_loc,
    nlit,
)
from pyswitch.compiler.stacks import NextLoc
from pyswitch.compiler.unions import UnionLoc
from pyswitch.compiler.varbit import is_aggregate
from pyswitch.ir import Line, shift
from pyswitch.ir.exprs import (
    Bin,
    Call,
    Concat,
    Cond,
    Hit,
    Lit,
    Local,
    Neg,
    Not,
    SCmp,
    SignExt,
    SShr,
    Wrap,
)
from pyswitch.types import (
    BOOL,
    ERROR,
    INTLIT,
    Bits,
    BoolTy,
    EnumTy,
    ErrorTy,
    IntLit,
    NewBits,
    Ty,
    same_type,
)


class Expressions:
    """See module docstring."""

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
            return E(e.code, ty, e.const, e.loc, e.node)
        if isinstance(e.ty, EnumTy) and e.ty.underlying and isinstance(ty, Bits) and \
                e.ty.underlying == ty:
            return E(e.code, ty, e.const, e.loc, e.node)
        raise self.err(node, f"type mismatch: expected {ty.show()}, got {e.ty.show()}"
                       + (" (use a cast)" if isinstance(ty, Bits) and
                          isinstance(e.ty, Bits) else ""))

    def cast(self, e: E, ty: Ty, node: Any) -> E:
        src = e.ty
        if isinstance(src, EnumTy) and src.underlying:
            src = src.underlying
            e = E(e.code, src, e.const, node=e.node)
        if isinstance(ty, EnumTy) and ty.underlying:
            r = self.cast(e, ty.underlying, node)
            return E(r.code, ty, r.const, node=r.node)
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
                return E.of(Cond(e.as_node(), Lit(1), Lit(0), 1), ty)
            if isinstance(src, Bits):
                if e.const is not None:
                    v = e.const
                    if src.signed and v >> (src.width - 1):
                        v -= 1 << src.width
                    v &= ty.mask
                    return E(_lit(v), ty, v)
                if ty.width >= src.width:
                    if src.signed and ty.width > src.width:
                        return E.of(SignExt(e.as_node(), src.width, ty.width), ty)
                    return E(e.code, ty, node=e.node)
                return E.of(Bin("&", e.as_node(), nlit(ty.mask), ty.width), ty)
        if isinstance(ty, BoolTy):
            if isinstance(src, Bits) and src.width == 1:
                if e.const is not None:
                    return E(str(bool(e.const)), BOOL, bool(e.const))
                return E.of(Bin("==", e.as_node(), Lit(1)), BOOL)
        raise self.err(node, f"cannot cast {e.ty.show()} to {ty.show()}")

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
        if d == "string_lit":  # v1model takes strings only in log_msg, which reads none
            raise self.err(node, "a string literal is only an argument of log_msg")
        if d == "ident":
            nm = str(node.children[0])
            b = scope.lookup(nm) if not str(node.children[0]).startswith(".") else \
                self.glob.lookup(nm)
            if b is None:
                if externs.function(nm) is not None:
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
                # constant or run-time index, see compiler.stacks
                return self.stack_index(base, node.children[1], scope, em, node)
            raise self.err(node, "indexing needs a header stack")
        if d == "slice":
            b = self.expr(node.children[0], scope, em)
            if not isinstance(b.ty, Bits):
                raise self.err(node, f"cannot slice {b.ty.show()}")
            hi, lo = self.const_int(node.children[1], scope), self.const_int(node.children[2], scope)
            if not (0 <= lo <= hi < b.ty.width):
                raise self.err(node, f"slice [{hi}:{lo}] out of range for {b.ty.show()}")
            ty = Bits(hi - lo + 1)
            if b.const is not None:
                v = (b.const >> lo) & ty.mask
                return E(_lit(v), ty, v)
            x = Bin(">>", b.as_node(), Lit(lo), b.ty.width) if lo else b.as_node()
            if hi != b.ty.width - 1:
                x = Bin("&", x, nlit(ty.mask), ty.width)
            return E.of(x, ty)
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
            return E.of(Neg(e.as_node(), e.ty.width), e.ty)
        if d == "pos":
            return self.expr(node.children[1], scope, em)
        if d == "bnot":
            e = self.expr(node.children[0], scope, em)
            self.need_bits(e, node)
            if e.const is not None:
                v = e.const ^ e.ty.mask
                return E(_lit(v), e.ty, v)
            return E.of(Bin("^", e.as_node(), nlit(e.ty.mask), e.ty.width), e.ty)
        if d == "lnot":
            e = self.expr(node.children[0], scope, em)
            if not isinstance(e.ty, BoolTy):
                raise self.err(node, f"'!' needs bool, got {e.ty.show()}")
            if e.const is not None:
                return E(str(not e.const), BOOL, not e.const)
            return E.of(Not(e.as_node()), BOOL)
        if d in ("lor", "land"):
            a = self.expr(node.children[0], scope, em)
            sub = self.sub_emitter(em, 1)
            b = self.expr(node.children[1], scope, sub)
            for x, n in ((a, node.children[0]), (b, node.children[1])):
                if not isinstance(x.ty, BoolTy):
                    raise self.err(n, f"logical operator needs bool, got {x.ty.show()}")
            op = "or" if d == "lor" else "and"
            if sub is not None and sub.lines:
                # the right side runs code (a table apply, a function): only when needed
                if a.const is not None:
                    if a.const == (op == "or"):
                        return a
                    em.lines.extend(self.dedented(sub, 1))
                    return b
                v = self.new_tmp("c")
                em.assign(v, a)
                sub.assign(v, b)
                em.emit_if(E.of(Not(Local(v), bare=True) if op == "or" else Local(v), BOOL),
                           sub.lines)
                return E.of(Local(v), BOOL)
            if a.const is not None and b.const is not None:
                v = (a.const or b.const) if op == "or" else (a.const and b.const)
                return E(str(v), BOOL, v)
            return E.of(Bin(op, a.as_node(), b.as_node()), BOOL)
        if d == "cond":
            c = self.expr(node.children[0], scope, em)
            sub_a, sub_b = self.sub_emitter(em, 1), self.sub_emitter(em, 1)
            a = self.expr(node.children[1], scope, sub_a)
            b = self.expr(node.children[2], scope, sub_b)
            if not isinstance(c.ty, BoolTy):
                raise self.err(node, "condition of ?: must be bool")
            a, b = self.unify(a, b, node)
            if sub_a is not None and (sub_a.lines or sub_b.lines):
                # a branch runs code (a table apply, a function): only the chosen one runs
                return self.cond_with_code(c, a, b, sub_a, sub_b, em, node)
            if isinstance(a.ty, IntLit):
                raise self.err(node, "?: of two unsized constants needs a width")
            if not isinstance(a.ty, (Bits, BoolTy, EnumTy, ErrorTy)):
                raise self.err(node, f"?: on {a.ty.show()} values is not supported")
            if c.const is not None:
                return a if c.const else b
            return E.of(Cond(c.as_node(), a.as_node(), b.as_node(), bits_width(a.ty)),
                        a.ty)
        if d in ("binop", "binop_lt", "binop_gt", "bor", "bxor", "band", "shl", "shr"):
            if d == "binop":
                op = str(node.children[1])
                ln, rn = node.children[0], node.children[2]
            else:
                op = {"binop_lt": "<", "binop_gt": ">", "bor": "|", "bxor": "^", "band": "&",
                      "shl": "<<", "shr": ">>"}[d]
                ln, rn = node.children[0], node.children[-1]
            a = self.expr(ln, scope, em)
            sub = self.sub_emitter(em, 0)
            b = self.expr(rn, scope, sub)
            if sub is not None and sub.lines:
                # the right operand runs code that may change what the left one reads:
                # P4 evaluates left to right, so the left value is taken first
                if a.const is None:
                    if not isinstance(a.ty, (Bits, BoolTy, EnumTy, ErrorTy)):
                        raise self.err(node, f"a {a.ty.show()} operand left of code with "
                                             "side effects is not supported by pyswitch")
                    v = self.new_tmp("o")
                    em.assign(v, a)
                    a = E.of(Local(v, bits_width(a.ty)), a.ty)
                em.lines.extend(sub.lines)
            return self.binop(op, a, b, node)
        if d == "list_expr":
            raise self.err(node, "list expression not allowed here")
        if d == "dont_care_arg":
            raise self.err(node, "'_' not allowed here")
        if d == "this_expr":
            raise self.err(node, "'this' is not supported")
        raise self.err(node, f"unsupported expression ({d})")

    @staticmethod
    def sub_emitter(em: Emitter | None, extra: int) -> Emitter | None:
        """An emitter for code that runs later or conditionally, `extra` levels deeper than
        `em` (None where no code may be emitted)."""
        if em is None:
            return None
        sub = Emitter()
        sub.ind = em.ind + extra
        return sub

    @staticmethod
    def dedented(sub: Emitter, n: int) -> list[Line]:
        return shift(sub.lines, n)

    def cond_with_code(self, c: E, a: E, b: E, sub_a: Emitter, sub_b: Emitter, em: Emitter,
                       node: Any) -> E:
        """``c ? a : b`` where a branch emits code: only the chosen branch runs."""
        if c.const is not None:
            em.lines.extend(self.dedented(sub_a if c.const else sub_b, 1))
            return a if c.const else b
        if not isinstance(a.ty, (Bits, BoolTy, EnumTy, ErrorTy)):
            raise self.err(node, f"?: on {a.ty.show()} values is not supported")
        v = self.new_tmp("c")
        sub_a.assign(v, a)  # each branch one level deeper (sub_emitter)
        sub_b.assign(v, b)
        em.emit_if(c, sub_a.lines, sub_b.lines)
        return E.of(Local(v, bits_width(a.ty)), a.ty)

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
            a = E(a.code, a.ty.underlying, a.const, node=a.node)
        if isinstance(b.ty, EnumTy) and isinstance(a.ty, Bits) and b.ty.underlying:
            b = E(b.code, b.ty.underlying, b.const, node=b.node)
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
            elif isinstance(b.ty, NewBits):
                # p4c: the right operand must be bit<S> or a known non-negative integer
                raise self.err(node, f"shift amount of type {b.ty.show()}: it must be bit<S> "
                                     "or a compile-time known non-negative integer")
            elif not (isinstance(b.ty, Bits) and not b.ty.signed):
                raise self.err(node, "shift amount must be unsigned")
            elif b.const is None and b.ty.width > 8:
                # p4c's BMv2 backend (--Werror=overlimit); cast the amount to bit<8>
                raise self.err(node, "shift amount limited to 8 bits on this target "
                                     f"(the amount is {b.ty.show()}; cast it to bit<8>)")
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
                    return E.of(Cond(Bin("&", a.as_node(), nlit(sb), bare=True), nlit(ty.mask),
                                     Lit(0), ty.width), ty)
                if b.const == 0:
                    return a
                if op == "<<":
                    return E.of(Wrap("<<", a.as_node(), Lit(b.const), ty.width), ty)
                if ty.signed:
                    return E.of(SShr(a.as_node(), Lit(b.const), ty.width), ty)
                return E.of(Bin(">>", a.as_node(), Lit(b.const), ty.width), ty)
            if op == "<<":
                return E.of(Call("_shl", (a.as_node(), b.as_node(), Lit(ty.width)), ty.width), ty)
            if ty.signed:
                return E.of(SShr(a.as_node(), Call("min", (b.as_node(), Lit(ty.width))), ty.width),
                            ty)
            return E.of(Bin(">>", a.as_node(), b.as_node(), ty.width), ty)
        if op == "++":
            for x in (a, b):
                if not isinstance(x.ty, Bits):
                    raise self.err(node, f"'++' needs bit<N>/int<N> operands, got {x.ty.show()}"
                                   " (cast unsized constants)")
            ty = Bits(a.ty.width + b.ty.width, a.ty.signed)
            if a.const is not None and b.const is not None:
                v = (a.const << b.ty.width) | b.const
                return E(_lit(v), ty, v)
            return E.of(Concat(a.as_node(), b.as_node(), b.ty.width, ty.width), ty)
        a, b = self.unify(a, b, node)
        ty = a.ty
        if op in ("==", "!="):
            if is_aggregate(ty):  # headers, structs, stacks, varbits: see compiler.varbit
                return self.aggregate_compare(op, a, b, node)
            if a.const is not None and b.const is not None:
                v = (a.const == b.const) == (op == "==")
                return E(str(v), BOOL, v)
            return E.of(Bin(op, a.as_node(), b.as_node()), BOOL)
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
        sb = 1 << (ty.width - 1)
        if op in ("<", ">", "<=", ">="):
            if a.const is not None and b.const is not None:
                x, y = a.const, b.const
                if ty.signed:
                    x, y = x ^ sb, y ^ sb
                v = eval(f"{x} {op} {y}")  # noqa: S307 - ints only
                return E(str(v), BOOL, v)
            if ty.signed:
                return E.of(SCmp(op, a.as_node(), b.as_node(), ty.width), BOOL)
            return E.of(Bin(op, a.as_node(), b.as_node()), BOOL)
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
            return E.of(Bin(op, a.as_node(), b.as_node(), ty.width), ty)
        if op in ("+", "-", "*"):
            return E.of(Wrap(op, a.as_node(), b.as_node(), ty.width), ty)
        if op in ("/", "%"):
            return self.runtime_div(op, a, b, node)
        if op == "|+|":
            if ty.signed:
                return E.of(Call("_sat_s", (a.as_node(), b.as_node(), Lit(1), Lit(ty.width)),
                                 ty.width), ty)
            return E.of(Call("min", (Bin("+", a.as_node(), b.as_node(), bare=True),
                                     nlit(ty.mask)), ty.width), ty)
        if op == "|-|":
            if ty.signed:
                return E.of(Call("_sat_s", (a.as_node(), b.as_node(), Lit(-1), Lit(ty.width)),
                                 ty.width), ty)
            return E.of(Call("max", (Bin("-", a.as_node(), b.as_node(), bare=True), Lit(0)),
                             ty.width), ty)
        raise self.err(node, f"unsupported operator {op!r}")

    def runtime_div(self, op: str, a: E, b: E, node: Any) -> E:
        """`/` or `%` with a run-time operand. BMv2 has no division: p4c keeps only what its
        strength reduction turns into shifts and masks (an unsigned divisor that is a
        constant power of two, or a constant 0 dividend) and rejects the rest."""
        ty = a.ty
        if ty.signed:
            raise self.err(node, "division of signed values is not supported")
        if b.const == 0:
            raise self.err(node, "division by zero" if op == "/" else "modulo by zero")
        if b.const is not None and b.const & (b.const - 1) == 0:
            k = b.const.bit_length() - 1
            if op == "/":
                return E.of(Bin(">>", a.as_node(), Lit(k), ty.width), ty) if k else \
                    E(a.code, ty, node=a.node)
            return E.of(Bin("&", a.as_node(), nlit(b.const - 1), ty.width), ty)
        if a.const == 0:
            return a
        raise self.err(node, f"'{op}' of run-time values: could not evaluate expression at "
                             "compilation time (BMv2 has no run-time division or modulo)")

    def member(self, node: Tree, scope: Scope, em: Emitter | None) -> Any:
        base_node, name_node = node.children
        mn = self.name_of(name_node)
        base = self._expr(base_node, scope, em)
        if isinstance(base, ApplyResult):
            if mn == "hit":
                return E.of(Hit(base.var), BOOL)
            if mn == "miss":
                return E.of(Not(Hit(base.var)), BOOL)
            if mn == "action_run":
                return base
            raise self.err(node, f"table apply result has no member {mn!r}")
        if isinstance(base, E):
            loc = base.loc
            if isinstance(loc, UnionLoc) and mn == "isValid":  # see compiler.unions
                return Method(base, mn, node)
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
                    if mn in getattr(loc.ty, "nested", {}):  # see compiler.typedefs
                        return self.loc_e(self.header_struct_loc(loc, mn))
                    raise self.err(name_node, f"{loc.ty.show()} has no field {mn!r}")
                self.used_slots.add(loc.slot)
                ft = loc.ty.fields[i - 1][1]
                sl = field_loc(loc.var, i, ft)
                return E.of(sl.node, ft, loc=sl)
            if isinstance(loc, (StackLoc, NextLoc)):  # see compiler.stacks
                return self.stack_member(base, mn, name_node, node, em)
            raise self.err(node, f"{base.ty.show()} has no member {mn!r}")
        if isinstance(base, (ExternInst, PacketRef, TableDef, ControlInst)):
            return Method(base, mn, node)
        raise self.err(node, f"cannot access member {mn!r} here")
