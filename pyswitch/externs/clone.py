"""v1model's ``clone`` and ``clone_preserving_field_list``: the clone type and session go
to hidden metadata slots; the switch makes the copy after ingress (I2E) or egress (E2E),
on both paths through the Python general path (`Switch._after_ingress`,
`_after_egress`)."""

from __future__ import annotations

from typing import Any

from pyswitch.compiler.model import px
from pyswitch.externs import Extern
from pyswitch.ir import Assign, PyExpr, Seq
from pyswitch.ir.exprs import Bin, Lit, Paren, Slot
from pyswitch.types import Bits, EnumTy


class Clone(Extern):
    names = ("clone", "clone_preserving_field_list")
    signature = ("extern void clone(in CloneType type, in bit<32> session); "
                 "extern void clone_preserving_field_list(in CloneType type, "
                 "in bit<32> session, bit<8> index);")
    served = ("hidden slots clone_type/clone_session; the copy is made by the switch's "
              "general path (Python) on both paths")

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        preserving = fn != "clone"
        if len(args) != (3 if preserving else 2):
            raise cx.err(node, "clone_preserving_field_list(CloneType, session, index)"
                         if preserving else "clone(CloneType, session)")
        ct = cx.expr(args[0], scope, em)
        if not (isinstance(ct.ty, EnumTy) and ct.ty.name == "CloneType") or ct.const is None:
            raise cx.err(args[0], "clone needs CloneType.I2E or CloneType.E2E")
        kind = [k for k, v in ct.ty.members.items() if v == ct.const][0]
        if (kind == "I2E") != (cx.ctrl_kind == "ingress") or \
                cx.ctrl_kind not in ("ingress", "egress"):
            raise cx.err(node, f"clone {kind} is not allowed in {cx.ctrl_kind}")
        se = cx.convert(cx.expr(args[1], scope, em), Bits(32), args[1])
        sess = se.py()
        if preserving:  # the field list's index + 1 above the session's 32 bits
            ix = cx.convert(cx.expr(args[2], scope, em), Bits(8), args[2])
            if ix.const is None:  # p4c too: the index names a list at compile time
                raise cx.err(args[2], "the field list index must be a constant")
            sess = PyExpr.of(Bin("|", Paren(se.as_node()), Lit((ix.const + 1) << 32), bare=True),
                             32)
        em.emit(Seq((Assign(PyExpr.of(Slot(cx.hidden['clone_type'])),
                            px(str(1 if kind == 'I2E' else 2))),
                     Assign(PyExpr.of(Slot(cx.hidden['clone_session'])), sess))))
        return None


EXTERNS = [Clone()]
