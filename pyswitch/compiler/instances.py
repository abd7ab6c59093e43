"""Controls (and parsers) instantiated inside controls (parsers): ``Foo(args) foo;`` and
``foo.apply(...)``.

As p4c does for BMv2, an applied instance is inlined into the block that applies it, and
its tables, actions and externs get names qualified by the instance (``MyIngress.foo.t``;
an ``@name`` with a leading dot stays absolute). Constructor arguments are compile-time
constants bound by name. Apply arguments are passed by reference where that cannot be
told apart from P4's copy-in/copy-out (persistent storage that no other argument
overlaps), so no copy costs time per packet and ``exit`` keeps what the callee wrote, as
BMv2 does; other scalars go through a slot of their own with explicit copies. ``return``
in the callee ends only the callee (the inlined body runs inside a one-pass loop).

The callee's own declarations are compiled at its first apply, when its parameters are
bound; a parameter they use must get the same storage at every apply (checked).

Parsers inside parsers are inlined the same way along the state graph: the instance's
`accept` continues the calling state. Their parameters are the instance's own storage,
copied in at the apply and out at its accept, exactly as in p4c's inlined program (an
error inside the instance leaves the caller's headers as they were).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lark import Tree

from pyswitch.compiler.model import (
    Const,
    E,
    Emitter,
    HdrLoc,
    PacketRef,
    ScalarLoc,
    Scope,
    StackLoc,
    StructLoc,
    valid_e,
)
from pyswitch.ir import Break, Loop, Pass
from pyswitch.types import Bits, BoolTy, EnumTy, ErrorTy, ExternTy, IntLit, same_type

_PERSISTENT = re.compile(r"M\[\d+\]$|h\d+\[\d+\]$")


@dataclass
class ControlInst:
    """One instance of a control declared inside another control."""

    local: str          # name in the enclosing control
    path: str           # P4Info prefix of its declarations, e.g. MyIngress.agg
    control: str        # the control type's name
    node: Tree          # its control_decl
    scope: Scope        # globals + constructor constants (+ parameters once applied)
    bindings: list[tuple[str, Any]] | None = None   # per parameter, fixed at first apply
    applies: int = 0
    meta: dict = field(default_factory=dict)


def _leaves(loc: Any) -> set[str]:
    """The scalar cells a location covers (header validity included)."""
    if isinstance(loc, ScalarLoc):
        return {loc.code}
    if isinstance(loc, HdrLoc):
        return {f"{loc.var}[{i}]" for i in range(len(loc.ty.fields) + 1)}
    if isinstance(loc, StackLoc):
        return set().union(*(_leaves(e) for e in loc.elems))
    if isinstance(loc, StructLoc):
        return set().union(set(), *(_leaves(s) for s in loc.fields.values()))
    return set()


def _locals(cch: list) -> list:
    """Local declarations of a control (before apply) or parser (besides its states)."""
    if cch[-1].data == "block":
        return cch[4:-1]
    return [x for x in cch[4:] if not (isinstance(x, Tree) and x.data == "parser_state")]


def _has_return(node: Tree) -> bool:
    return any(t.data == "return_stmt" for t in node.iter_subtrees())


class Instances:
    """See module docstring."""

    def control_instance(self, ty: ExternTy, nm: str, args: list, ann: dict, scope: Scope,
                         node: Tree) -> ControlInst:
        """An instance of control (or, in a parser, parser) `ty` named `nm`."""
        is_parser = ty.name in self.parsers
        what = "parser" if is_parser else "control"
        if (self.ctrl_kind == "parser") != is_parser:
            raise self.err(node, f"{what} {ty.name!r} cannot be instantiated in a "
                                 f"{'parser' if self.ctrl_kind == 'parser' else 'control'}")
        if ty.name in self.inst_stack:
            raise self.err(node, f"{what} {ty.name!r} instantiates itself")
        cnode = (self.parsers if is_parser else self.controls)[ty.name]
        cch = self.strip_annots(cnode.children)
        cparams = self.ctor_params(cnode)
        if len(args) != len(cparams):
            raise self.err(node, f"{what} {ty.name!r} takes {len(cparams)} constructor "
                                 f"arguments, got {len(args)}")
        iscope = Scope(self.glob)
        for (direction, pn, pty, p), a in zip(cparams, args, strict=True):
            if direction or not isinstance(pty, (Bits, BoolTy, EnumTy, ErrorTy, IntLit)):
                raise self.err(p, f"constructor parameter {pn!r}: only directionless "
                                  "bit<N>/int<N>/int/bool/enum/error parameters are supported")
            e = self.expr(a, scope)
            if not isinstance(pty, IntLit):
                e = self.convert(e, pty, a)
            if e.const is None:
                raise self.err(a, f"constructor argument {pn!r} must be a compile-time "
                                  "constant")
            iscope.names[pn] = Const(e.const, pty)
        inst = ControlInst(nm, self.pname(nm, ann), ty.name, cnode, iscope)
        # parameters its declarations (actions, tables) use need one storage for all applies
        inst.meta["local_refs"] = {str(x.children[0]) for item in _locals(cch)
                                   for x in item.iter_subtrees() if x.data == "ident"}
        return inst

    def apply_control(self, inst: ControlInst, args: list, scope: Scope, em: Emitter,
                      node: Any) -> None:
        cch = self.strip_annots(inst.node.children)
        params = self.params(cch[2])
        if len(args) != len(params):
            raise self.err(node, f"{inst.local}.apply expects {len(params)} arguments, got "
                                 f"{len(args)}")
        binds = self.bind_apply_args(inst, params, args, scope, em, node)
        if inst.bindings is None:
            inst.bindings = [(k, loc) for k, loc, _v in binds]
            self.open_instance(inst, params, cch)
        else:  # the instance's declarations were compiled against the first binding
            for (_pd, pn, _t, _p), old, new, a in zip(params, inst.bindings, binds, args,
                                                     strict=True):
                if pn in inst.meta["local_refs"] and not (
                        old[0] == new[0] and (old[1] is new[1] or (
                            isinstance(old[1], ScalarLoc) and isinstance(new[1], ScalarLoc)
                            and old[1].code == new[1].code))):
                    raise self.err(a, f"argument for {pn!r}: every apply of control instance "
                                      f"{inst.local!r} must pass the same storage in pyswitch")
        bscope = Scope(inst.scope)
        for (pd, pn, _t, _p), (kind, loc, value) in zip(params, binds, strict=True):
            bscope.names[pn] = loc
            if pd not in ("out", "inout"):
                bscope.readonly.add(pn)
            # copy-in; an out parameter starts invalid (headers) or zero (scalars), as
            # p4c's fresh temporaries do on BMv2
            if kind == "copy" and pd != "out":
                em.assign(self.loc_e(loc), value)
            elif pd == "out":
                self.invalidate(loc, em)
        saved = (self.ctrl_name, self.sub_depth)
        self.ctrl_name = inst.path
        self.inst_stack.append(inst.control)
        body = cch[-1]
        loop = _has_return(body)
        inner = em.sub() if loop else em  # a return: a loop's break
        self.sub_depth += 1
        n0 = len(em.lines)
        self.block(body, Scope(bscope), inner)
        if loop:
            inner.emit(Break())
            em.emit(Loop(em.nested(inner.lines)))
        elif len(em.lines) == n0:
            em.emit(Pass())
        self.ctrl_name, self.sub_depth = saved
        self.inst_stack.pop()
        for (pd, _pn, _t, _p), (kind, loc, value) in zip(params, binds, strict=True):
            if kind == "copy" and pd in ("out", "inout"):
                em.assign(value, self.loc_e(loc))
        inst.applies += 1

    def parser_apply_target(self, s: Tree, scope: Scope) -> ControlInst | None:
        """The parser instance that statement `s` applies, if it is `p.apply(...)`."""
        if s.data != "call_stmt" or s.children[0].data != "call":
            return None
        target = s.children[0].children[0]
        if not (isinstance(target, Tree) and target.data == "member"
                and self.name_of(target.children[1]) == "apply"):
            return None
        obj = self.expr_obj(target.children[0], scope)
        if isinstance(obj, ControlInst) and obj.node.data == "parser_decl":
            return obj
        return None

    def apply_parser(self, inst: ControlInst, args: list, scope: Scope, em: Emitter,
                     rest: Any, node: Any) -> None:
        """Inline parser instance `inst` from its start state; its accept runs `rest` (the
        caller's state after the apply), its reject rejects the whole parser."""
        cch = self.strip_annots(inst.node.children)
        params = self.params(cch[2])
        if len(args) != len(params):
            raise self.err(node, f"{inst.local}.apply expects {len(params)} arguments, got "
                                 f"{len(args)}")
        binds = self.bind_apply_args(inst, params, args, scope, em, node)
        # As p4c inlines a parser: each parameter is storage of the instance, copied in at
        # the apply and out at the callee's accept (not when it fails with an error).
        store = inst.meta.setdefault("store", {})
        for i, (_pd, pn, pty, _p) in enumerate(params):
            if binds[i][0] != "pkt" and i not in store:
                store[i] = self.alloc(f"{inst.path}.{pn}", pty)
        if inst.bindings is None:
            inst.bindings = [(k, loc if k == "pkt" else store[i])
                             for i, (k, loc, _v) in enumerate(binds)]
            self.open_instance(inst, params, cch)
        bscope = Scope(inst.scope)
        copy_out = []
        for i, ((pd, pn, _t, _p), (kind, loc, value)) in enumerate(zip(params, binds,
                                                                        strict=True)):
            if kind == "pkt":
                bscope.names[pn] = loc
                continue
            bscope.names[pn] = store[i]
            if pd not in ("out", "inout"):
                bscope.readonly.add(pn)
            caller = loc if kind == "ref" else ScalarLoc(value.code, value.ty, value.node)
            if pd == "out":
                self.invalidate(store[i], em)
            else:
                self.assign_e(store[i], self.loc_e(caller) if kind == "ref" else value, em,
                              node)
            if pd in ("out", "inout"):
                copy_out.append((caller, store[i]))
        states: dict[str, Tree] = {}
        for item in cch[4:]:
            if isinstance(item, Tree) and item.data == "parser_state":
                sn = self.name_of(self.strip_annots(item.children)[0])
                if sn in states or sn in ("accept", "reject"):
                    raise self.err(item, f"duplicate state {sn!r}")
                states[sn] = item
        if "start" not in states:
            raise self.err(inst.node, "parser has no 'start' state")
        caller = (self.states, self.on_accept, self.ctrl_name)
        inner = (states, None, inst.path)

        def back(em2: Emitter) -> None:
            # the callee accepted: copy out, then the caller's state goes on
            for caller_loc, own in copy_out:
                self.assign_e(caller_loc, self.loc_e(own), em2, node)
            self.states, self.on_accept, self.ctrl_name = caller
            self.inst_stack.pop()
            rest(em2)
            self.inst_stack.append(inst.control)
            self.states, self.on_accept, self.ctrl_name = inner[0], back, inner[2]

        self.inst_stack.append(inst.control)
        self.states, self.on_accept, self.ctrl_name = inner[0], back, inner[2]
        self.emit_state("start", bscope, em, [])
        self.inst_stack.pop()
        self.states, self.on_accept, self.ctrl_name = caller

    def bind_apply_args(self, inst: ControlInst, params: list, args: list, scope: Scope,
                        em: Emitter, node: Any) -> list[tuple[str, Any, Any]]:
        """(kind, storage of the parameter, caller's value or l-value) per parameter, kind
        one of ref / copy / const / pkt. Written arguments first, so that an `in` argument that
        overlaps one of them is copied instead of aliased."""
        out: list[Any] = [None] * len(params)
        written: list[tuple[set[str], Any]] = []
        for i, ((pd, pn, pty, _p), a) in enumerate(zip(params, args, strict=True)):
            if pd not in ("out", "inout"):
                continue
            lv = self.lvalue(a, scope, em)
            if isinstance(lv, tuple):
                raise self.err(a, f"a slice as {pd} argument {pn!r} of a control is not "
                                  "supported by pyswitch")
            if not same_type(lv.ty, pty):
                raise self.err(a, f"argument {pn!r} has type {lv.ty.show()}, expected "
                                  f"{pty.show()}")
            leaves = _leaves(lv)
            for other, oa in written:
                if leaves & other:
                    raise self.err(a, f"arguments {self.render_arg(oa)} and "
                                      f"{self.render_arg(a)} of {inst.local}.apply overlap "
                                      "(not supported by pyswitch)")
            written.append((leaves, a))
            if isinstance(lv, ScalarLoc) and not _PERSISTENT.match(lv.code):
                out[i] = ("copy", self.param_slot(inst, i, pn, pty),
                          E(lv.code, lv.ty, node=lv.node))
            else:
                out[i] = ("ref", lv, E(getattr(lv, "code", ""), lv.ty,
                                       node=getattr(lv, "node", None)))
        wset = set().union(set(), *(w for w, _ in written))
        for i, ((pd, pn, pty, _p), a) in enumerate(zip(params, args, strict=True)):
            if pd in ("out", "inout"):
                continue
            if isinstance(pty, ExternTy):
                obj = self.expr_obj(a, scope)
                if not (isinstance(obj, PacketRef) and pty.name == f"packet_{obj.direction}"):
                    raise self.err(a, f"argument {pn!r} must be a {pty.name}")
                out[i] = ("pkt", obj, None)
                continue
            if isinstance(pty, (Bits, BoolTy, EnumTy, ErrorTy)):
                e = self.convert(self.expr(a, scope, em), pty, a)
                if e.const is not None and pn not in inst.meta["local_refs"]:
                    # only the body uses it: fold it there, no storage and no copy
                    out[i] = ("const", Const(e.const, pty), e)
                elif isinstance(e.loc, ScalarLoc) and _PERSISTENT.match(e.loc.code) and \
                        e.loc.code not in wset:
                    out[i] = ("ref", e.loc, e)
                else:
                    out[i] = ("copy", self.param_slot(inst, i, pn, pty), e)
                continue
            e = self.expr(a, scope, em)
            if not isinstance(e.loc, (HdrLoc, StructLoc, StackLoc)) or \
                    not same_type(e.loc.ty, pty):
                raise self.err(a, f"argument {pn!r} must be storage of type {pty.show()}")
            if _leaves(e.loc) & wset:
                raise self.err(a, f"in argument {pn!r} overlaps an out/inout argument of "
                                  f"{inst.local}.apply (not supported by pyswitch)")
            out[i] = ("ref", e.loc, e)
        return out

    def param_slot(self, inst: ControlInst, i: int, pn: str, ty: Any) -> ScalarLoc:
        """The instance's own storage for scalar parameter i (one per instance)."""
        slots = inst.meta.setdefault("slots", {})
        if i not in slots:
            slots[i] = self.alloc_m(f"{inst.path}.{pn}", ty)
        return slots[i]

    def render_arg(self, a: Any) -> str:
        try:
            return repr(self.render(a))
        except Exception:  # noqa: BLE001 - only for the message
            return "two arguments"

    def open_instance(self, inst: ControlInst, params: list, cch: list) -> None:
        """Bind the parameters in the instance's scope and compile its declarations (their
        initialisers run at the start of the enclosing block, as after p4c's inlining)."""
        for (pd, pn, _t, _p), (_kind, loc) in zip(params, inst.bindings, strict=True):
            inst.scope.names[pn] = loc
            if pd not in ("out", "inout"):
                inst.scope.readonly.add(pn)
        saved = (self.ctrl_name, self.locals_ok, self.in_action)
        # a parser is one function without actions: its variables may be Python locals
        self.ctrl_name, self.in_action = inst.path, None
        self.locals_ok = self.ctrl_kind == "parser"
        self.inst_stack.append(inst.control)
        for item in _locals(cch):
            self.local_decl(item, inst.scope, self.block_init)
        self.inst_stack.pop()
        self.ctrl_name, self.locals_ok, self.in_action = saved

    def invalidate(self, loc: Any, em: Emitter) -> None:
        if isinstance(loc, HdrLoc):
            self.used_slots.add(loc.slot)
            em.assign(valid_e(loc.var), "False")
        elif isinstance(loc, StackLoc):
            for e in loc.elems:
                self.invalidate(e, em)
        elif isinstance(loc, StructLoc):
            for sub in loc.fields.values():
                self.invalidate(sub, em)
        elif isinstance(loc, ScalarLoc):
            em.assign(self.loc_e(loc), 'False' if isinstance(loc.ty, BoolTy) else '0')

    def check_writable(self, node: Any, scope: Scope) -> None:
        """P4 forbids writing an `in` parameter (here it may alias the caller's storage)."""
        while isinstance(node, Tree) and node.data in ("member", "index", "slice"):
            node = node.children[0]
        if not (isinstance(node, Tree) and node.data == "ident"):
            return
        nm = str(node.children[0])
        s: Scope | None = scope
        while s is not None and nm not in s.names:
            s = s.parent
        if s is not None and nm in s.readonly:
            raise self.err(node, f"{nm!r} is an in parameter and cannot be written")
