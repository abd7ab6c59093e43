"""``varbit<N>`` header fields, ``extract(hdr, len)``, and comparison of varbits, headers,
structs, unions and stacks.

A varbit value is stored in its header's list as ``(nbits, value)``, or ``0`` for the
empty varbit a new or reset header holds. As on BMv2 (``bm_sim/parser.cpp: extract_VL``):

- ``extract(h, n)`` fails with ``ParserInvalidArgument`` when ``n`` is not a multiple of
  8, then with ``PacketTooShort`` when the packet has fewer bytes than the header's fixed
  part plus ``n / 8``, then with ``HeaderTooShort`` when that is more than the header can
  hold (its fixed part plus the varbit's maximum); only then is anything read;
- ``emit`` writes the varbit with the length it was extracted (or assigned) with;
- ``==`` on varbits compares their values (BMv2 compares the numbers, not the lengths);
  assignment copies value and length.

A header holds at most one varbit (BMv2's limit), and the fields before and after it must
each fill whole bytes. Varbits cannot be used in arithmetic, keys, hashes or checksums.

Comparison of aggregates is p4c's (``midend/complexComparison.cpp``, which the BMv2 backend
runs): two headers are equal when both are invalid, or both are valid with equal fields;
structs, unions and stacks are equal when all their fields (elements) are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lark import Tree

from pyswitch.compiler.model import E, Emitter, HdrLoc, ScalarLoc, StackLoc, StructLoc
from pyswitch.ir import Advance, EmitVarbit, HeaderSet, Helper, ParserError, PyExpr
from pyswitch.ir.exprs import (
    All,
    AnyOf,
    Bin,
    BufRead,
    Expr,
    Field,
    Lit,
    Local,
    Not,
    Opaque,
    Paren,
    ToBytes,
    VbBytes,
    VbRead,
    VbValue,
)
from pyswitch.types import BOOL, Bits, HeaderTy, StackTy, StructTy, Ty


@dataclass(frozen=True)
class VarbitTy(Ty):
    max_width: int

    def show(self) -> str:
        return f"varbit<{self.max_width}>"

    @property
    def width(self) -> int:
        """A varbit adds nothing to a header's fixed width (minSizeInBits)."""
        return 0


def varbit_index(ty: HeaderTy) -> int:
    """Index of the varbit field among the header's fields, or -1."""
    for i, (_f, t) in enumerate(ty.fields):
        if isinstance(t, VarbitTy):
            return i
    return -1


def byte_groups(fields: list[tuple[Any, int]]) -> list[list[tuple[Any, int]]]:
    """`fields` (name, width) in runs of whole bytes of at most 64 bits where the field
    boundaries allow it (a run grows past 64 bits only until it ends on a byte): the fixed
    part of a header beside a varbit (an IPv4 header's 160 bits) is read and written a
    run at a time, each run a number the native path holds (pyswitch.native)."""
    out: list[list[tuple[Any, int]]] = []
    cur: list[tuple[Any, int]] = []
    bits = 0
    for f, w in fields:
        if cur and bits % 8 == 0 and bits + w > 64:
            out.append(cur)
            cur, bits = [], 0
        cur.append((f, w))
        bits += w
    if cur:
        out.append(cur)
    return out


class Varbits:
    """See module docstring."""

    def varbit_type(self, node: Tree) -> VarbitTy:
        wn = node.children[0]
        if wn.data == "width_lit":
            w = self.parse_int(wn.children[0])[0]
        else:
            w = self.const_int(wn.children[0])
        if w <= 0 or w % 8:
            raise self.err(node, f"varbit<{w}>: pyswitch (as BMv2) needs a positive multiple "
                                 "of 8 bits")
        return VarbitTy(w)

    def check_varbit_header(self, d: Tree, nm: str, fields: list[tuple[str, Ty]]) -> None:
        vi = [i for i, (_f, t) in enumerate(fields) if isinstance(t, VarbitTy)]
        if not vi:
            return
        if len(vi) > 1:
            raise self.err(d, f"header {nm!r} has more than one varbit field")
        if not all(isinstance(t, (Bits, VarbitTy)) for _f, t in fields):
            raise self.err(d, f"header {nm!r}: besides its varbit, pyswitch supports only "
                              "bit<N>/int<N> fields in it")
        before = sum(t.width for _f, t in fields[:vi[0]])
        if before % 8:
            raise self.err(d, f"header {nm!r}: the fields before its varbit must fill whole "
                              "bytes in pyswitch")

    # ------------------------------------------------------------------ extract / emit
    def extract_length(self, loc: HdrLoc, len_node: Any, scope: Any, em: Emitter,
                       node: Any) -> str:
        """The run-time bit count of a two-argument extract, in a variable."""
        if varbit_index(loc.ty) < 0:
            raise self.err(node, f"extract with a length needs a header with a varbit field, "
                                 f"not {loc.ty.show()}")
        n = self.convert(self.expr(len_node, scope, em), Bits(32), len_node)
        v = self.new_tmp("vn")
        em.assign(v, n)
        return v

    def emit_extract_vl(self, loc: HdrLoc, nbits: str, em: Emitter) -> None:
        ty = loc.ty
        vi = varbit_index(ty)
        pre = [(f, t.width) for f, t in ty.fields[:vi]]
        post = [(f, t.width) for f, t in ty.fields[vi + 1:]]
        pb = sum(w for _f, w in pre) // 8
        qb = sum(w for _f, w in post) // 8
        mx = pb + ty.fields[vi][1].max_width // 8 + qb
        h = loc.var
        self.used_slots.add(loc.slot)
        err = self.errors.index
        nb = self.new_tmp("vb")
        n, b = _name(nbits), Local(nb)
        em.emit(ParserError(err('ParserInvalidArgument'), PyExpr.of(Bin("%", n, Lit(8), bare=True))))
        # a length of 2**31 or more is negative for BMv2 (an int), which reads past the end
        em.assign(nb, E.of(Bin("+", Lit(pb + qb), Bin("//", n, Lit(8), bare=True), bare=True),
                           Bits(32)))
        short = Bin(">", Bin("+", Local("pos"), b, bare=True), Local("L"), bare=True)
        em.emit(ParserError(err('PacketTooShort'),
                            PyExpr.of(Bin("or", Bin(">>", n, Lit(31), bare=True), short,
                                          bare=True))))
        em.emit(ParserError(err('HeaderTooShort'), PyExpr.of(Bin(">", b, Lit(mx), bare=True))))
        vals = self.unpack_fields(pre, Local("pos"), pb, em)
        vend = Bin("+", Bin("+", Local("pos"), Lit(pb), bare=True),
                   Bin("//", n, Lit(8), bare=True), bare=True)
        vals.append(VbRead(n, Bin("+", Local("pos"), Lit(pb), bare=True)))
        vals += self.unpack_fields(post, vend, qb, em)
        em.emit(HeaderSet(h, True, tuple(PyExpr.of(v) for v in vals)))
        em.emit(Advance(PyExpr.of(Local(nb))))

    def unpack_fields(self, fields: list[tuple[str, int]], start: Expr, nbytes: int,
                      em: Emitter) -> list[Expr]:
        """The values of `fields` (filling `nbytes` bytes from `start`), read in the
        groups of `byte_groups`."""
        out: list[Expr] = []
        off = 0
        for group in byte_groups(fields):
            n = sum(w for _f, w in group) // 8
            v = self.new_tmp("vf")
            at = Bin("+", start, Lit(off), bare=True) if off else start
            em.assign(v, E.of(BufRead(at, n, n * 8), Bits(n * 8)))
            sh = n * 8
            for _f, w in group:
                sh -= w
                item = Local(v, n * 8)
                mask = Lit((1 << w) - 1, w, hexed=True)
                out.append(Bin("&", Bin(">>", item, Lit(sh), n * 8) if sh else item, mask, w))
            off += n
        assert off == nbytes
        return out

    def emit_emit_vl(self, loc: HdrLoc, em: Emitter) -> None:
        ty = loc.ty
        vi = varbit_index(ty)
        h = loc.var
        self.used_slots.add(loc.slot)

        def packed(lo: int, hi: int) -> list[Expr]:
            fs = [(i + 1, t.width) for i, (_f, t) in enumerate(ty.fields) if lo <= i < hi]
            pieces: list[Expr] = []
            for group in byte_groups(fs):
                total = sum(w for _i, w in group)
                parts: list[Expr] = []
                sh = total
                for i, w in group:
                    sh -= w
                    parts.append(Bin("<<", Field(h, i, w), Lit(sh), total) if sh
                                 else Field(h, i, w))
                joined = parts[0]  # ``a | b | c``, in the parentheses of its to_bytes
                for p in parts[1:]:
                    joined = Bin("|", joined, p, total, bare=True)
                pieces.append(ToBytes(Paren(joined, total), total // 8))
            return pieces

        pieces = [*packed(0, vi), VbBytes(Field(h, vi + 1)), *packed(vi + 1, len(ty.fields))]
        em.emit(EmitVarbit(h, tuple(PyExpr.of(p) for p in pieces)))

    def use_pack_helper(self) -> None:
        """The module's ``_pack_bits`` (a field list with varbits as bytes: every field's
        bits in order, a varbit with its current length, zero-padded at the end to a
        byte), defined once."""
        if not getattr(self, "_pack_helper", False):
            self._pack_helper = True
            self.module.append(Helper("pack_bits"))

    # ------------------------------------------------------------------ comparison
    def aggregate_compare(self, op: str, a: E, b: E, node: Any) -> E:
        """``==``/``!=`` of varbits, headers, structs, unions or stacks (see module
        docstring)."""
        if isinstance(a.ty, VarbitTy):
            eq: Expr = Bin("==", VbValue(a.as_node()), VbValue(b.as_node()))
        else:
            if a.loc is None or b.loc is None:
                raise self.err(node, f"comparing {a.ty.show()} values that are not stored "
                                     "is not supported by pyswitch")
            eq = self.loc_equal(a.loc, b.loc, node)
        return E.of(eq if op == "==" else Not(eq), BOOL)

    def loc_equal(self, x: Any, y: Any, node: Any) -> Expr:
        """Whether the values at locations `x` and `y` are equal (headers: both invalid, or
        both valid with equal fields)."""
        if isinstance(x, HdrLoc) and isinstance(y, HdrLoc):
            self.used_slots.update((x.slot, y.slot))
            fs: list[Expr] = []
            for i, (_f, t) in enumerate(x.ty.fields):
                w = t.width if isinstance(t, Bits) else None
                p, q = Field(x.var, i + 1, w), Field(y.var, i + 1, w)
                fs.append(Bin("==", VbValue(p), VbValue(q), bare=True) if isinstance(t, VarbitTy)
                          else Bin("==", p, q, bare=True))
            vx, vy = Field(x.var, 0), Field(y.var, 0)
            invalid = All((Not(vx, bare=True), Not(vy, bare=True)))
            return Paren(AnyOf((Paren(invalid), Paren(All((vx, vy, *fs))))))
        if isinstance(x, StackLoc) and isinstance(y, StackLoc):
            return _all([self.loc_equal(p, q, node) for p, q in zip(x.elems, y.elems, strict=True)])
        if isinstance(x, StructLoc) and isinstance(y, StructLoc):
            return _all([self.loc_equal(x.fields[f], y.fields[f], node) for f in x.fields])
        if isinstance(x, ScalarLoc) and isinstance(y, ScalarLoc):
            a, b = self.loc_e(x).as_node(), self.loc_e(y).as_node()
            if isinstance(x.ty, VarbitTy):
                return Bin("==", VbValue(a), VbValue(b))
            return Bin("==", a, b)
        raise self.err(node, "these values cannot be compared")


def _all(parts: list[Expr]) -> Expr:
    """``(a and b ...)``: all of `parts` hold (none: ``(True)``)."""
    if not parts:
        return Paren(Lit(True))
    return Paren(All(tuple(parts)) if len(parts) > 1 else parts[0])


def is_aggregate(ty: Ty) -> bool:
    return isinstance(ty, (HeaderTy, StructTy, StackTy, VarbitTy))


def _name(x: str) -> Expr:
    """A value the compiler names by its text: a local, a decimal constant, or text."""
    if x.isidentifier():
        return Local(x)
    if x.isdigit() and str(int(x)) == x:
        return Lit(int(x))
    return Opaque(x)
