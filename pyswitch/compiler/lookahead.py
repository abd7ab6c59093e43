"""``pkt.lookahead<T>()`` of a header or struct type, as p4c's ExpandLookahead does it for
BMv2: the ``T``-wide bits at the current position are read without moving it and split
into the fields of a fresh ``T`` (a header comes out valid). A packet with too few bytes
left fails with ``PacketTooShort``, as a ``lookahead<bit<N>>`` does in pyswitch.

Fields must be ``bit<N>``/``int<N>`` (nested headers, structs, bools or varbits in ``T``
are rejected).
"""

from __future__ import annotations

from typing import Any

from pyswitch.compiler.model import E, Emitter, HdrLoc, ScalarLoc, StructLoc, nlit, too_short
from pyswitch.ir import HeaderSet, ParserError
from pyswitch.ir.exprs import Bin, BufRead, Lit, Local
from pyswitch.types import Bits, HeaderTy, StructTy, Ty


class Lookahead:
    """See module docstring."""

    def lookahead_aggregate(self, ty: Ty, node: Any, em: Emitter | None) -> E:
        if not isinstance(ty, (HeaderTy, StructTy)) or not ty.fields or \
                not all(isinstance(t, Bits) for _f, t in ty.fields):
            raise self.err(node, f"lookahead<{ty.show()}>: pyswitch supports bit<N>, and "
                                 "headers and structs of bit<N>/int<N> fields")
        if em is None:
            raise self.err(node, "lookahead is not allowed here")
        if self.ctrl_kind != "parser":
            raise self.err(node, "lookahead is only available in a parser")
        width = sum(t.width for _f, t in ty.fields)
        nbytes = (width + 7) // 8
        em.emit(ParserError(self.errors.index('PacketTooShort'), too_short(nbytes)))
        v = self.new_tmp("la")
        em.assign(v, E.of(BufRead(Local("pos"), nbytes, nbytes * 8), Bits(nbytes * 8)))
        vals, sh, la = [], nbytes * 8, Local(v, nbytes * 8)
        for _f, t in ty.fields:  # each field's bits cut out of the value read
            sh -= t.width
            vals.append(E.of(Bin("&", Bin(">>", la, Lit(sh)) if sh else la, nlit(t.mask),
                                 t.width), t))
        loc = self.alloc(self.new_tmp("lookahead"), ty)
        if isinstance(loc, HdrLoc):
            self.used_slots.add(loc.slot)
            em.emit(HeaderSet(loc.var, True, tuple(x.py() for x in vals)))
        else:
            assert isinstance(loc, StructLoc)
            for sub, val in zip(loc.fields.values(), vals, strict=True):
                assert isinstance(sub, ScalarLoc)
                em.assign(self.loc_e(sub), val)
        return self.loc_e(loc)
