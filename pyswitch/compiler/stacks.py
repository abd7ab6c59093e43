"""Header stacks beyond constant indices: ``next``, ``last``, ``lastIndex``, ``size``,
``push_front``, ``pop_front``, run-time indices, and parser loops (which ``next`` needs).

Semantics are BMv2's (``bm_sim/stacks.cpp``, built with P4_16 stacks, its default), as
p4c's BMv2 backend maps them:

- every stack has a next index (BMv2's ``next``): 0 for a new packet, raised by
  ``extract(hs.next)`` (which fails with ``StackOutOfBounds`` when the stack is full, before
  reading anything), and changed by ``push_front``/``pop_front`` and stack assignment only;
  ``setValid`` on an element does not change it. It lives in a hidden one-field "header"
  slot of ``S`` so that it is copied with the headers (replicas, clones), as BMv2 copies it.
- ``hs.last`` is element ``next - 1`` and ``hs.lastIndex`` is ``next - 1`` as bit<32>.
- ``push_front(n)``/``pop_front(n)`` move elements by swapping them in BMv2's order and mark
  the freed ones invalid (their old field values stay, as on BMv2).
- a run-time index (``hs[i]``) selects the element at run time. BMv2 has no bound check:
  an index outside the stack throws inside BMv2, which aborts the switch, unless p4c's
  midend removed the access (as it removes the copy-in/copy-out of an ``inout`` argument
  that the action never uses). pyswitch cannot tell which, so outside the stack a read
  gives an invalid header of zeros and a write goes nowhere (p4c's own reading, its
  HSIndexSimplifier: out-of-range writes do nothing) and the first time at each place a
  warning with the P4 location is logged. An ``extract`` into an element outside the
  stack, and ``hs.last`` of an empty stack, raise `StackIndexError` from
  ``Switch.process`` (BMv2 cannot have removed those).

Parser loops: a parser whose states form a cycle is compiled as a loop over its "loop head"
states (targets of back edges in a depth-first walk from ``start``); everything between
loop heads is inlined as for loop-free parsers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lark import Tree

from pyswitch.compiler.model import E, Emitter, HdrLoc, Method, Scope, StackLoc, nlit, valid_e
from pyswitch.compiler.unions import UnionTy
from pyswitch.compiler.varbit import varbit_index
from pyswitch.ir import (
    Assign,
    Continue,
    HeaderSwap,
    Helper,
    Line,
    Loop,
    ParserError,
    PyExpr,
    SiblingsInvalid,
)
from pyswitch.ir.exprs import Bin, Call, Elems, Field, Lit, Local, Pick, Str, Wrap, text
from pyswitch.types import BOOL, Bits, HeaderTy, IntLit, Ty

# the hidden slot that holds a stack's next index: [unused validity, next]
NEXT_TY = HeaderTy("$stack_next", [("next", Bits(32))])


@dataclass
class DynHdrLoc(HdrLoc):
    """A stack element chosen at run time: `code` is the Python variable that holds the
    element's header list (`slot` is the stack's first element, for bookkeeping)."""

    code: str = ""
    strict_code: str = ""  # for an extract: the element, or StackIndexError outside

    @property
    def var(self) -> str:
        return self.code


@dataclass
class NextLoc:
    """``hs.next``: only the argument of ``extract`` (p4c's BMv2 backend allows no other
    use)."""

    stack: StackLoc
    ty: HeaderTy
    member: str = ""  # ``us.next.member`` of a stack of header unions


class Stacks:
    """See module docstring."""

    def stack_helpers(self) -> None:
        if not getattr(self, "_stack_helpers", False):
            self._stack_helpers = True
            self.module.append(Helper("stacks"))

    def stack_next_slot(self, loc: StackLoc) -> str:
        """Python code of the stack's next index (an l-value)."""
        if loc.nxt is None:
            raise ValueError("header stack without a next index")
        self.used_slots.add(loc.nxt.slot)
        return f"{loc.nxt.var}[1]"

    def stack_next_e(self, loc: StackLoc) -> E:
        """The stack's next index (an l-value), with its node."""
        nx = self.stack_next_slot(loc)
        assert loc.nxt is not None
        return E(nx, Bits(32), node=Field(loc.nxt.var, 1, 32))

    def pick_next(self, hdrs: list[HdrLoc], loc: StackLoc, ty: Ty) -> E:
        """The header of `hdrs` (of type `ty`) at stack `loc`'s next index, picked at run
        time (a `Pick`; the index is checked beforehand)."""
        self.tuple_of(hdrs)  # their slots are used
        return E.of(Pick(tuple(h.var for h in hdrs), self.stack_next_e(loc).as_node()), ty)

    def elems_of(self, loc: StackLoc) -> Elems:
        """The stack's element headers as one tuple (`Elems`)."""
        self.stack_elems(loc)  # their slots are used (not a stack of unions)
        return Elems(tuple(h.var for h in loc.elems))

    def stack_elems(self, loc: StackLoc) -> str:
        if isinstance(loc.ty.elem, UnionTy):
            raise ValueError("a stack of header unions has no header elements")
        return self.tuple_of(loc.elems)

    def tuple_of(self, hdrs: list[HdrLoc]) -> str:
        """A Python tuple of these headers' lists."""
        for h in hdrs:
            self.used_slots.add(h.slot)
        return "(" + "".join(f"{h.var}, " for h in hdrs) + ")"

    def need_em(self, em: Emitter | None, node: Any, what: str) -> Emitter:
        if em is None:
            raise self.err(node, f"{what} is not allowed here (it needs run-time code)")
        return em

    def stack_index(self, base: E, idx_node: Any, scope: Scope, em: Emitter | None,
                    node: Any) -> E:
        """``hs[i]``: a constant index picks the element at compile time, any other the
        element at run time (see module docstring for an index outside the stack)."""
        loc: StackLoc = base.loc
        ie = self.expr(idx_node, scope, em)
        if ie.const is not None and isinstance(ie.ty, (Bits, IntLit)):
            i = ie.const
            if isinstance(ie.ty, Bits) and ie.ty.signed and i >> (ie.ty.width - 1):
                i -= 1 << ie.ty.width
            if not 0 <= i < len(loc.elems):
                raise self.err(node, f"index {i} out of bounds for {base.ty.show()}")
            return self.loc_e(loc.elems[i])
        if not isinstance(ie.ty, Bits):
            raise self.err(idx_node, f"a header stack index must be bit<N> or int<N>, not "
                                     f"{ie.ty.show()}")
        if isinstance(loc.ty.elem, UnionTy):
            raise self.err(node, "a run-time index into a stack of header unions is not "
                                 "supported by pyswitch")
        em = self.need_em(em, node, "a run-time header stack index")
        self.stack_helpers()
        v = self.new_tmp("hs")
        what = str(self.err(node, "header stack index"))  # file:line:col for the message
        # a negative int<N> index is stored as its two's complement: outside the stack too;
        # outside, a scratch header (see module docstring)
        at = Call("_hs_at", (self.elems_of(loc), ie.as_node(), Str(what),
                             Lit(len(loc.ty.elem.fields))))
        em.assign(v, E.of(at, loc.ty.elem))
        return self.loc_e(DynHdrLoc(loc.elems[0].slot, loc.ty.elem, v, strict_code=(
            text(replace(at, args=(*at.args[:3], Lit(-1)))))))

    def stack_member(self, base: E, mn: str, name_node: Any, node: Any,
                     em: Emitter | None) -> Any:
        loc = base.loc
        if isinstance(loc, NextLoc):
            el = loc.stack.ty.elem
            if not loc.member and isinstance(el, UnionTy) and any(f == mn for f, _ in el.fields):
                mty = dict(el.fields)[mn]
                return E("", mty, loc=NextLoc(loc.stack, mty, mn))
            raise self.err(node, "hs.next is supported only as the argument of extract "
                                 "(as p4c's BMv2 backend)")
        if mn == "size":
            return E(str(loc.ty.size), Bits(32), loc.ty.size)
        if isinstance(loc.ty.elem, UnionTy) and mn not in ("next", "lastIndex"):
            raise self.err(name_node, f"{mn!r} of a stack of header unions is not supported "
                                      "by pyswitch")
        if mn in ("push_front", "pop_front"):
            if self.ctrl_kind == "parser":  # p4c's type checker
                raise self.err(name_node, f"{mn} cannot be used in a parser (p4c)")
            return Method(base, mn, node)
        if mn in ("next", "last", "lastIndex") and (self.ctrl_kind != "parser" or
                                                    self.in_function()):
            raise self.err(name_node, f"hs.{mn} is only available in a parser (p4c)")
        if mn == "next":
            return E("", loc.ty.elem, loc=NextLoc(loc, loc.ty.elem))
        if mn == "lastIndex":
            return E.of(Wrap("-", self.stack_next_e(loc).as_node(), Lit(1), 32), Bits(32))
        if mn == "last":
            em = self.need_em(em, node, "hs.last")
            self.stack_helpers()
            v = self.new_tmp("hs")
            what = str(self.err(node, "header stack"))
            last = Call("_hs_last", (self.elems_of(loc), self.stack_next_e(loc).as_node(),
                                     Str(what)))
            em.assign(v, E.of(last, loc.ty.elem))
            self.last_nodes.add(id(node))  # not a left-value: see check_stack_lvalue
            return self.loc_e(DynHdrLoc(loc.elems[0].slot, loc.ty.elem, v))
        raise self.err(name_node, f"header stack has no member {mn!r}")

    @property
    def last_nodes(self) -> set[int]:
        """The ``hs.last`` expressions compiled so far (by node identity)."""
        if not hasattr(self, "_last_nodes"):
            self._last_nodes: set[int] = set()
        return self._last_nodes

    def check_stack_lvalue(self, node: Any) -> None:
        """p4c: ``hs.last`` (unlike ``hs.next``) is not a left-value, so neither is a field
        of it; call after `node` was compiled."""
        while isinstance(node, Tree) and node.data in ("member", "index", "slice"):
            if node.data == "member" and id(node) in self.last_nodes:
                raise self.err(node, "hs.last cannot be written (it is not a left-value in "
                                     "p4c)")
            node = node.children[0]

    def stack_method(self, m: Method, args: list, scope: Scope, em: Emitter, node: Any) -> None:
        """``push_front(n)`` / ``pop_front(n)`` as BMv2's StackP4_16 does them."""
        loc: StackLoc = m.obj.loc
        if isinstance(loc.ty.elem, UnionTy):
            raise self.err(node, f"{m.name} on a stack of header unions is not supported by "
                                 "pyswitch")
        self.check_stack_lvalue(m.node.children[0])
        if len(args) != 1:
            raise self.err(node, f"{m.name} takes one argument (a constant count)")
        self.check_writable(m.node.children[0], scope)
        ne = self.expr(args[0], scope, em)
        if ne.const is None or not isinstance(ne.ty, (Bits, IntLit)) or ne.const < 0:
            raise self.err(args[0], f"{m.name} needs a non-negative compile-time constant")
        num = ne.const
        if num == 0:
            return
        size = len(loc.elems)
        el = [e.var for e in loc.elems]
        for e in loc.elems:
            self.used_slots.add(e.slot)
        if m.name == "push_front":
            nxe = self.stack_next_e(loc)
            em.assign(nxe, E.of(Call("min", (Lit(size), Bin("+", nxe.as_node(), nlit(num),
                                                            bare=True))), nxe.ty))
            for i in range(size - 1, num - 1, -1):
                em.emit(HeaderSwap(el[i], el[i - num]))
            for i in range(min(size, num)):
                em.assign(valid_e(el[i]), "False")
        else:
            # nx - min(nx, num), written so that its bound is provably >= 0 (native path)
            nxe = self.stack_next_e(loc)
            em.assign(nxe, E.of(Call("max", (Lit(0), Bin("-", nxe.as_node(), nlit(num),
                                                         bare=True))), nxe.ty))
            i = 0
            while num < size and i < size - num:
                em.emit(HeaderSwap(el[i], el[i + num]))
                i += 1
            for j in range(i, size):
                em.assign(valid_e(el[j]), "False")

    def extract_call(self, args: list, scope: Scope, em: Emitter, node: Any) -> None:
        """``pkt.extract(x)`` or ``pkt.extract(x, nbits)`` (varbit, see compiler.varbit): x
        a header (also an element chosen at run time) or ``hs.next``."""
        if len(args) not in (1, 2):
            raise self.err(node, "extract takes a header and, for a varbit header, a length")
        e = self.expr(args[0], scope, em)
        self.check_stack_lvalue(args[0])
        target = e.loc
        if isinstance(target, NextLoc):  # (only its type is looked at below)
            if isinstance(target.ty, UnionTy):
                raise self.err(args[0], "extract needs a header: a member of the union")
            target = HdrLoc(-1, target.ty)
        if not isinstance(target, HdrLoc):
            raise self.err(args[0], "extract needs a header")
        if isinstance(target, DynHdrLoc) and target.strict_code:
            # no scratch header to extract into: the element, or StackIndexError
            for k in range(len(em.lines) - 1, -1, -1):
                ln = em.lines[k]
                at = ln.stmt.value.node if isinstance(ln.stmt, Assign) else None
                if isinstance(at, Call) and at.fn == "_hs_at" and \
                        ln.stmt.target.code == target.code:
                    at = replace(at, args=(*at.args[:3], Lit(-1)))
                    em.lines[k] = Line(ln.ind, replace(ln.stmt, value=PyExpr.of(at)))
                    break
        nbits = None
        if len(args) == 2:
            nbits = self.extract_length(target, args[1], scope, em, node)
        elif varbit_index(target.ty) >= 0:
            raise self.err(node, f"extract of {target.ty.show()}, which has a varbit field, "
                                 "needs its length in bits as a second argument")
        if isinstance(e.loc, NextLoc):
            self.extract_next(e.loc, em, nbits)
            return
        self.extract_into(e.loc, nbits, em)
        self.union_siblings_invalid(e.loc, em)  # see compiler.unions

    def extract_into(self, loc: HdrLoc, nbits: str | None, em: Emitter) -> None:
        if nbits is None:
            self.emit_extract(loc, em)
        else:
            self.emit_extract_vl(loc, nbits, em)

    def extract_next(self, nl: NextLoc, em: Emitter, nbits: str | None = None) -> None:
        """``extract(hs.next)``: StackOutOfBounds when full, then the element at the next
        index is extracted and the index raised (not when the extract fails)."""
        loc = nl.stack
        em.emit(ParserError(self.errors.index('StackOutOfBounds'),
                            PyExpr.of(Bin(">=", self.stack_next_e(loc).as_node(),
                                          Lit(len(loc.elems)), bare=True))))
        v = self.new_tmp("hs")
        if nl.member:  # a union's member: the union's other members become invalid
            members = [u.fields[nl.member] for u in loc.elems]
            em.assign(v, self.pick_next(members, loc, nl.ty))
            self.extract_into(DynHdrLoc(members[0].slot, nl.ty, v), nbits, em)
            for m in members:
                self.tuple_of(m.siblings)  # (their slots used)
            em.emit(SiblingsInvalid(tuple(tuple(s.var for s in m.siblings) for m in members),
                                    self.stack_next_e(loc).py()))
        else:
            self.stack_elems(loc)  # (not a stack of unions)
            em.assign(v, self.pick_next(loc.elems, loc, nl.ty))
            self.extract_into(DynHdrLoc(loc.elems[0].slot, loc.ty.elem, v), nbits, em)
        # nx + 1 (nx < size was checked above), written so that its bound is the size's:
        # the native path proves every slot within its range (pyswitch.native.exprs)
        nxe = self.stack_next_e(loc)
        em.assign(nxe, E.of(Call("min", (Lit(len(loc.elems)), Bin("+", nxe.as_node(), Lit(1),
                                                                  bare=True))), nxe.ty))

    def stack_assign_next(self, lhs: StackLoc, r: StackLoc, em: Emitter) -> None:
        """Stack assignment copies the next index too (BMv2's assign_header_stack)."""
        if lhs.nxt is not None and r.nxt is not None:
            em.assign(self.stack_next_e(lhs), self.stack_next_e(r))

    def stack_reset_next(self, loc: StackLoc, em: Emitter) -> None:
        if loc.nxt is not None:
            em.assign(self.stack_next_e(loc), "0")

    # ------------------------------------------------------------------ parser loops
    def parser_loop_heads(self, states: dict[str, Tree]) -> list[str]:
        """The entry states of a looping parser: start, then every other state that closes
        a cycle (a back-edge target of a depth-first walk from start); [] without cycles."""
        heads: list[str] = []
        done: set[str] = set()
        stack: list[str] = []

        def targets(sn: str) -> list[str]:
            tr = self.strip_annots(states[sn].children)[-1]
            if tr.data == "transition_direct":
                return [self.name_of(tr.children[0])]
            return [self.name_of(c.children[1]) for c in tr.children[1:]]

        def walk(sn: str) -> None:
            if sn in ("accept", "reject") or sn not in states or sn in done:
                return
            stack.append(sn)
            for t in targets(sn):
                if t in stack:
                    if t not in heads:
                        heads.append(t)
                else:
                    walk(t)
            stack.pop()
            done.add(sn)

        walk("start")
        return ["start"] + [h for h in heads if h != "start"] if heads else []

    def loop_jump(self, sn: str, path: list[str], em: Emitter) -> bool:
        """In a looping parser, a transition to a loop head jumps there (True) instead of
        inlining it."""
        heads = getattr(self, "loop_heads", None)
        if not heads or not path or sn not in heads or self.states is not self.top_states:
            return False
        em.assign("_st", str(heads.index(sn)))
        em.emit(Continue())
        return True

    def emit_looping_parser(self, scope: Scope, body: Emitter) -> None:
        """The parser as a loop over its entry states: start and every loop head."""
        body.assign("_st", "0")
        loop = body.sub()
        arms: list[tuple[str, list[Line]]] = []
        for i, sn in enumerate(self.loop_heads):
            state = loop.sub()
            self.emit_state(sn, scope, state, [])
            arms.append((E.of(Bin("==", Local("_st"), Lit(i), bare=True), BOOL), state.lines))
        loop.emit_chain(arms)
        body.emit(Loop(body.nested(loop.lines)))
