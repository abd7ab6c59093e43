"""v1model's checksum functions: ``verify_checksum`` (VerifyChecksum control: a mismatch
sets ``standard_metadata.checksum_error``) and ``update_checksum`` (ComputeChecksum
control), each also ``_with_payload`` (the digest covers the payload after the headers).

Lowered to the hash helpers of `pyswitch.externs.hashing` (both paths).
"""

from __future__ import annotations

from typing import Any

from pyswitch.compiler.model import BOOL, E, ScalarLoc, nlit, px
from pyswitch.externs import Extern
from pyswitch.ir import Assign, PyExpr
from pyswitch.ir.exprs import Bin, Expr
from pyswitch.types import Bits, BoolTy


class Checksum(Extern):
    names = ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
             "update_checksum_with_payload")
    signature = ("extern void verify_checksum<T, O>(in bool condition, in T data, "
                 "in O checksum, HashAlgorithm algo); update_checksum: inout O checksum; "
                 "*_with_payload: the same over the payload too")
    served = "the hash helpers of hash (pyswitch.externs.hashing) on both paths"

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        if len(args) != 4:
            raise cx.err(node, f"{fn}(condition, data, checksum, algo)")
        cond = cx.expr(args[0], scope, em)
        if not isinstance(cond.ty, BoolTy):
            raise cx.err(args[0], "checksum condition must be bool")
        algo = cx.algo(args[3], scope)
        digest = cx.digest(algo, cx.data_list(args[1], scope, em),
                           cx.hidden['payload'] if fn.endswith("_with_payload") else None)
        if fn.startswith("verify"):
            if cx.ctrl_kind != "verify":
                raise cx.err(node, f"{fn} belongs in the VerifyChecksum control")
            ck = cx.expr(args[2], scope, em)
            if not isinstance(ck.ty, Bits):
                raise cx.err(args[2], "checksum field must be bit<N>")
            bad: Expr = Bin("!=", Bin("&", digest, nlit(ck.ty.mask)), ck.as_node(),
                            bare=True)
            if cond.const is not True:
                bad = Bin("and", cond.as_node(), bad, bare=True)
            em.emit_inline_if(E.of(bad, BOOL),
                              Assign(cx.loc_e(cx.std.fields["checksum_error"]).py(), px("1")))
        else:
            if cx.ctrl_kind != "compute":
                raise cx.err(node, f"{fn} belongs in the ComputeChecksum control")
            lv = cx.lvalue(args[2], scope, em)
            if not isinstance(lv, ScalarLoc) or not isinstance(lv.ty, Bits):
                raise cx.err(args[2], "checksum field must be a bit<N> l-value")
            store = Assign(cx.loc_e(lv).py(), PyExpr.of(
                Bin("&", digest, nlit(lv.ty.mask), bare=True), lv.ty.width))
            if cond.const is True:
                em.emit(store)
            else:
                em.emit_inline_if(cond, store)
        return None


EXTERNS = [Checksum()]
