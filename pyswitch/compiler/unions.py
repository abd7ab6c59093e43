"""Header unions (``header_union U { H1 a; H2 b; }``), as BMv2 runs them.

A union is stored as its member headers (one header slot each); it is modelled as a
struct of headers (`UnionTy` / `UnionLoc` subclass the struct classes), so member access,
emit (each member in order, only a valid one is written), assignment and resets work as
for structs. What a union adds is BMv2's rule (``bm_sim/header_unions.h``): at most one
member is valid. A member becomes valid by ``extract``, ``setValid`` (BMv2's add_header,
which also zeroes an invalid header's fields), or an assignment from a valid header, and
then every other member becomes invalid; ``setInvalid`` touches only that member.
``u.isValid()`` is true when a member is valid; a union assignment copies member by member
(BMv2's assign_union), so the validity of the source carries over.

Stacks of unions support constant indices and ``extract(us.next.member)``; other stack
operations on them are rejected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lark import Tree

from pyswitch.compiler.model import E, Emitter, HdrLoc, StructLoc, px, valid_e
from pyswitch.ir import Assign, Seq
from pyswitch.ir.exprs import AnyOf, Paren
from pyswitch.types import BOOL, HeaderTy, StructTy


@dataclass(eq=False)
class UnionTy(StructTy):
    """A header_union: a struct whose fields are all headers."""

    def show(self) -> str:
        return f"header_union {self.name}"


@dataclass
class UnionLoc(StructLoc):
    """Storage of one union: its members by name (each a `UnionMemberLoc`)."""


@dataclass
class UnionMemberLoc(HdrLoc):
    """A member header of a union; `siblings` are the union's other members."""

    siblings: list[HdrLoc] = field(default_factory=list)


class Unions:
    """See module docstring."""

    def union_decl(self, d: Tree, ch: list) -> None:
        nm = self.name_of(ch[0])
        fields = []
        self.check_duplicate_members(ch[1:], lambda f: self.strip_annots(f.children)[1])
        for f in ch[1:]:
            fc = self.strip_annots(f.children)
            ft = self.resolve_type(fc[0])
            fname = self.name_of(fc[1])
            if not isinstance(ft, HeaderTy):
                raise self.err(f, f"header_union member {fname!r} must be a header")
            fields.append((fname, ft))
        if not fields:
            raise self.err(d, f"header_union {nm!r} has no members")
        self.types[nm] = UnionTy(nm, fields)

    def alloc_union(self, ty: UnionTy) -> UnionLoc:
        members = {f: UnionMemberLoc(self.alloc_h(t).slot, t) for f, t in ty.fields}
        for m in members.values():
            m.siblings = [o for o in members.values() if o is not m]
        return UnionLoc(ty, members)

    def union_siblings_invalid(self, loc: Any, em: Emitter, only_if_valid: bool = False) -> None:
        """After `loc` may have become valid: the other members of its union become
        invalid (when `only_if_valid`, only if `loc` did become valid)."""
        if not isinstance(loc, UnionMemberLoc) or not loc.siblings:
            return
        for s in loc.siblings:
            self.used_slots.add(s.slot)
        invalid = Seq(tuple(Assign(valid_e(s.var).py(), px("False"))
                            for s in loc.siblings))
        if only_if_valid:
            em.emit_inline_if(valid_e(loc.var), invalid)
        else:
            em.emit(invalid)

    def union_is_valid(self, loc: UnionLoc) -> E:
        parts = []
        for m in loc.fields.values():
            self.used_slots.add(m.slot)
            parts.append(valid_e(m.var).as_node())
        if not parts:
            return E("()", BOOL)
        return E.of(Paren(AnyOf(tuple(parts)) if len(parts) > 1 else parts[0]), BOOL)

    def union_method(self, obj: E, mn: str, args: list, node: Any) -> E:
        if mn != "isValid":
            raise self.err(node, f"header_union has no method {mn!r}")
        if args:
            raise self.err(node, "isValid() takes no arguments")
        return self.union_is_valid(obj.loc)

