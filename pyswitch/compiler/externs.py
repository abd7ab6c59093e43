"""Calls: methods of headers, tables, packets and externs, direct action calls, and
extern functions; an extern's own checks and lowering are its class in `pyswitch.externs`
(this module dispatches to it and keeps what several share: field lists, digests).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lark import Tree

from pyswitch import externs
from pyswitch.compiler.functions import FunctionDef
from pyswitch.compiler.instances import ControlInst
from pyswitch.compiler.model import (
    HASH_ALGOS,
    ActionDef,
    E,
    Emitter,
    ExternInst,
    FuncRef,
    HdrLoc,
    Method,
    PacketRef,
    Scope,
    StackLoc,
    TableDef,
    bits_width,
    too_short,
    valid_e,
)
from pyswitch.compiler.unions import UnionLoc
from pyswitch.compiler.varbit import VarbitTy
from pyswitch.ir import Advance, HeaderSet, ParserError, PyExpr
from pyswitch.ir.exprs import Bin, BufRead, Digest, Expr, Field, Lit, Local, Not, VbDigest
from pyswitch.types import (
    BOOL,
    INTLIT,
    Bits,
    BoolTy,
    EnumTy,
)


class Externs:
    """See module docstring."""

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
            if isinstance(base, PacketRef) and mn in ("extract", "emit"):
                return self.typed_packet_call(node, base, mn, scope, em)  # compiler.stmt_ext
            if not (isinstance(base, PacketRef) and mn == "lookahead"):
                raise self.err(node, "generic method calls are not supported")
            tal = next(c for c in node.children if isinstance(c, Tree) and
                       c.data == "type_arg_list")
            ty = self.resolve_type(tal.children[0])
            if stmt and isinstance(ty, Bits):
                # p4c's BMv2 backend drops a bare lookahead<bit<N>>: not even a length
                # check (of a header or struct, p4c's ExpandLookahead keeps an assignment)
                return None
            if not isinstance(ty, Bits):  # headers and structs: see compiler.lookahead
                return self.lookahead_aggregate(ty, node, em)
            nbytes = (ty.width + 7) // 8
            shift = nbytes * 8 - ty.width
            read = BufRead(Local("pos"), nbytes, nbytes * 8)
            em.emit(ParserError(self.errors.index('PacketTooShort'), too_short(nbytes)))
            return E.of(Bin(">>", read, Lit(shift), ty.width) if shift else read, ty)
        target = self._expr(node.children[0], scope, em)
        args = self.call_args(node)
        if em is None:
            em = Emitter()  # used only for const contexts; calls there are errors
            em_none = True
        else:
            em_none = False
        if isinstance(target, Method):
            if not stmt and isinstance(target.obj, TableDef):
                # its actions have side effects (see compiler.functions)
                self.check_fx_position(node, "a table apply")
            r = self.method_call(target, args, scope, em, node)
        elif isinstance(target, FuncRef):
            r = self.func_call(target.name, args, scope, em, node)
        elif isinstance(target, ActionDef):
            r = self.direct_action_call(target, args, scope, em, node)
        elif isinstance(target, FunctionDef):
            if em_none:
                raise self.err(node, "a function call is not allowed here")
            r = self.function_call(target, args, scope, em, node)
        else:
            raise self.err(node, "not callable")
        if em_none and em.lines:
            raise self.err(node, "call not allowed here")
        return r

    def direct_action_call(self, a: ActionDef, args: list, scope: Scope, em: Emitter,
                           node: Any) -> None:
        if self.ctrl_kind == "parser":
            # p4c's type checker: "Action calls are not allowed within parsers"
            raise self.err(node, f"{a.local}(...): Action calls are not allowed within "
                                 "parsers")
        self.call_action(a, args, scope, em, node)  # see compiler.action_params
        return None

    def method_call(self, m: Method, args: list, scope: Scope, em: Emitter, node: Any) -> Any:
        obj, mn = m.obj, m.name
        if isinstance(obj, E) and isinstance(obj.loc, StackLoc):  # see compiler.stacks
            return self.stack_method(m, args, scope, em, node)
        if isinstance(obj, E) and isinstance(obj.loc, UnionLoc):  # see compiler.unions
            return self.union_method(obj, mn, args, node)
        if isinstance(obj, E) and isinstance(obj.loc, HdrLoc):
            loc = obj.loc
            self.used_slots.add(loc.slot)
            if args:
                raise self.err(node, f"{mn}() takes no arguments")
            if mn == "isValid":
                return valid_e(loc.var)
            if mn in ("setValid", "setInvalid"):
                self.check_writable(m.node.children[0], scope)
                self.check_stack_lvalue(m.node.children[0])  # see compiler.stacks
            if mn == "setValid":
                # BMv2's add_header: an invalid header's fields become 0 (a valid one keeps
                # them), so old values never reappear after setInvalid/pop_front
                zeros = tuple(PyExpr.of(Lit(0)) for _ in loc.ty.fields)
                em.emit_inline_if(E.of(Not(valid_e(loc.var).as_node(), bare=True), BOOL),
                                  HeaderSet(loc.var, True, zeros))
                self.union_siblings_invalid(loc, em)  # see compiler.unions
                return None
            if mn == "setInvalid":
                em.assign(valid_e(loc.var), "False")
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
                if mn == "extract":  # headers, hs.next, varbit: see compiler.stacks
                    self.extract_call(args, scope, em, node)
                    return None
                if mn == "advance":
                    if len(args) != 1:
                        raise self.err(node, "advance takes one argument (bits)")
                    ne = self.convert(self.expr(args[0], scope, em), Bits(32), args[0])
                    if ne.const is None:
                        # BMv2's advance: a bit count that is not a multiple of 8 is
                        # ParserInvalidArgument, too few bytes left PacketTooShort
                        v = self.new_tmp("adv")
                        em.assign(v, ne)
                        em.emit(ParserError(self.errors.index('ParserInvalidArgument'),
                                            PyExpr.of(Bin("&", Local(v), Lit(7), bare=True))))
                        nb = Bin(">>", Local(v), Lit(3))
                        em.emit(ParserError(self.errors.index('PacketTooShort'), PyExpr.of(
                            Bin(">", Bin("+", Local("pos"), nb, bare=True), Local("L"),
                                bare=True))))
                        em.emit(Advance(PyExpr.of(replace(nb, bare=True))))
                        return None
                    n = ne.const
                    if n % 8:
                        raise self.err(node, "advance needs a constant multiple of 8 bits")
                    em.emit(ParserError(self.errors.index('PacketTooShort'), too_short(n // 8)))
                    em.emit(Advance(PyExpr.of(Lit(n // 8))))
                    return None
                if mn == "length":
                    return E.of(Bin("*", Local("L"), Lit(8), 32, bare=True), Bits(32))
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
            ext = externs.obj(obj.kind)
            if ext is None:  # pragma: no cover - an instance is made by its extern
                raise self.err(node, f"unknown extern method {mn!r}")
            return ext.method(self, obj, mn, args, scope, em, node)
        if isinstance(obj, ControlInst):
            if mn != "apply":
                raise self.err(node, f"control instance has no method {mn!r}")
            if self.in_action is not None:
                raise self.err(node, "controls cannot be applied inside actions")
            self.apply_control(obj, args, scope, em, node)
            return None
        raise self.err(node, f"unknown method {mn!r}")

    def idx_code(self, e: E, size: int, em: Emitter) -> tuple[PyExpr, bool]:
        """(the index, always_in_range) for index expression `e` (``bit<32>``); one
        with operators is computed once into a local first."""
        if e.const is not None:
            return PyExpr.of(Lit(e.const, 32)), e.const < size
        if isinstance(e.ty, Bits) and (1 << e.ty.width) <= size:
            return e.py(), True
        if not e.code.isidentifier() and not e.code.replace("[", "").replace("]", "").\
                replace("M", "").replace("h", "").isdigit():
            v = self.new_tmp("i")
            em.assign(v, e)
            return PyExpr.of(Local(v, 32)), False
        return e.py(), False

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
                    out.append(E.of(Field(e.loc.var, i + 1, bits_width(ft)), ft))
                continue
            if isinstance(e.ty, BoolTy):
                e = self.cast(e, Bits(1), x)
            if isinstance(e.ty, EnumTy) and e.ty.underlying:
                e = E(e.code, e.ty.underlying, e.const, node=e.node)
            if not isinstance(e.ty, (Bits, VarbitTy)):  # varbit: see compiler.varbit
                raise self.err(x, f"field list element must be bit<N>, got {e.ty.show()} "
                                  "(cast unsized constants)")
            out.append(e)
        return out

    def digest(self, algo: str, items: list[E], payload: int | None = None) -> Expr:
        """``algo`` over the field list (+ the payload, metadata slot `payload`): a
        `pyswitch.ir.exprs.Digest` (csum16 of a fixed-width list sums its 16-bit words as one
        number, `hashes.csum16_int`, and identity is that number itself, without building
        bytes); a list with varbits (their lengths known at run time: `compiler.varbit`) a
        `VbDigest`, packed by the module's ``_pack_bits``."""
        if any(isinstance(e.ty, VarbitTy) for e in items):
            self.use_pack_helper()
            return VbDigest(algo, tuple(e.as_node() for e in items),
                            tuple(None if isinstance(e.ty, VarbitTy) else e.ty.width
                                  for e in items), payload)
        return Digest(algo, tuple(e.as_node() for e in items),
                      tuple(e.ty.width for e in items), payload)

    def func_call(self, fn: str, args: list, scope: Scope, em: Emitter, node: Any) -> Any:
        """A call of extern function `fn`: checked and lowered by its extern
        (`pyswitch.externs`)."""
        ext = externs.function(fn)
        if ext is None:
            raise self.err(node, f"unknown function {fn!r}")
        if self.ctrl_kind != "parser":
            # p4c's P4Info gets a type_info as soon as a control calls an extern function
            self.p4info_extern_fn = True
        return ext.call(self, fn, args, scope, em, node)

    def algo(self, node: Any, scope: Scope) -> str:
        e = self.expr(node, scope)
        if not (isinstance(e.ty, EnumTy) and e.ty.name == "HashAlgorithm") or e.const is None:
            raise self.err(node, "expected a HashAlgorithm constant")
        nm = [k for k, v in e.ty.members.items() if v == e.const][0]
        if nm not in HASH_ALGOS:
            raise self.err(node, f"HashAlgorithm.{nm} is not supported by pyswitch "
                                 f"(supported: {', '.join(HASH_ALGOS)})")
        return HASH_ALGOS[nm]
