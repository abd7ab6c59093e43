"""Types that pyswitch represents in a way of its own.

Type declarations whose type pyswitch does not support are kept until they are used: p4c
accepts a program that declares, say, ``typedef tuple<bit<4>, varbit<56>> T;`` and never
uses ``T``; pyswitch rejects such a type only where the program uses it (with the location of
the use and the reason).

A struct inside a header (``header h { row_t row; }``) is laid out on the wire field by
field, as BMv2 flattens it: the header gets the struct's leaves as fields named ``row.e``,
and ``hdr.h.row`` is a struct whose leaves are those header fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyswitch.compiler.model import HdrLoc, StructLoc, field_loc
from pyswitch.errors import P4CompileError
from pyswitch.types import Bits, BoolTy, HeaderTy, NewBits, StructTy, Ty


@dataclass(eq=False)
class DeferredTy(Ty):
    """A declared type that pyswitch cannot represent; `reason` says why."""

    name: str
    reason: str

    def show(self) -> str:
        return self.name


class Typedefs:
    """See module docstring."""

    def typedef_type(self, name: str, node: Any, new: bool = False) -> Ty:
        """``typedef`` is another name for a type; ``type`` (``new``) declares a distinct
        one, kept distinct here only where its representation is bit<N>."""
        try:
            ty = self.resolve_type(node)
        except P4CompileError as e:
            if "not supported" not in e.message:
                raise  # an error in the program itself, as p4c reports it
            return DeferredTy(name, e.message)
        if new and type(ty) is Bits and not ty.signed:
            return NewBits(ty.width, False, name)
        return ty

    def deferred_error(self, t: DeferredTy, node: Any) -> P4CompileError:
        return self.err(node, f"type {t.name!r}: {t.reason}")

    # -- tuples ------------------------------------------------------------------------------
    def tuple_type(self, node: Any) -> StructTy:
        """``tuple<T0, T1>`` is a struct with fields f0, f1 (p4c's BMv2 backend turns tuples
        into structs); one type per list of element types, so equal tuples are one type."""
        elems = [self.resolve_type(a) for a in node.children[0].children]
        cache: dict = self.__dict__.setdefault("_tuples", {})
        key = tuple(t if isinstance(t, (Bits, BoolTy)) else id(t) for t in elems)
        if key not in cache:
            name = "tuple<" + ", ".join(t.show() for t in elems) + ">"
            cache[key] = (StructTy(name, [(f"f{i}", t) for i, t in enumerate(elems)]), elems)
        return cache[key][0]

    # -- structs inside headers ------------------------------------------------------------
    def header_struct_fields(self, prefix: str, st: StructTy, node: Any) -> list[tuple[str, Ty]]:
        out: list[tuple[str, Ty]] = []
        for f, t in st.fields:
            if isinstance(t, StructTy):
                out.extend(self.header_struct_fields(f"{prefix}.{f}", t, node))
            elif isinstance(t, (Bits, BoolTy)):
                out.append((f"{prefix}.{f}", t))
            else:
                tn = t.show() if t is not None else "enum"
                raise self.err(node, f"header field {prefix}.{f} of type {tn} is not "
                                     "supported by pyswitch")
        return out

    def note_header_structs(self, t: HeaderTy, field_nodes: list) -> None:
        nested = {}
        for f in field_nodes:
            fc = self.strip_annots(f.children)
            ft = self.resolve_type(fc[0])
            if isinstance(ft, StructTy):
                nested[self.name_of(fc[1])] = ft
        if nested:
            t.nested = nested  # type: ignore[attr-defined]

    def header_struct_loc(self, loc: HdrLoc, name: str) -> StructLoc:
        self.used_slots.add(loc.slot)

        def build(prefix: str, st: StructTy) -> StructLoc:
            fields: dict[str, Any] = {}
            for f, ft in st.fields:
                if isinstance(ft, StructTy):
                    fields[f] = build(f"{prefix}.{f}", ft)
                else:
                    i = loc.ty.index(f"{prefix}.{f}")
                    fields[f] = field_loc(loc.var, i, ft)
            return StructLoc(st, fields)

        return build(name, loc.ty.nested[name])  # type: ignore[attr-defined]
