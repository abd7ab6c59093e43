"""The small functions: v1model's ``mark_to_drop``, ``random`` and ``log_msg``, and
core.p4's ``verify`` (parser only)."""

from __future__ import annotations

from typing import Any

from pyswitch.compiler.model import DROP_PORT, ScalarLoc
from pyswitch.externs import Extern
from pyswitch.types import Bits, BoolTy, ErrorTy


class MarkToDrop(Extern):
    names = ("mark_to_drop",)
    signature = "extern void mark_to_drop(inout standard_metadata_t standard_metadata);"
    served = "two slot assignments (egress_spec = 511, mcast_grp = 0) on both paths"

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        if len(args) != 1:
            raise cx.err(node, "mark_to_drop(standard_metadata)")
        e = cx.expr(args[0], scope, em)
        if e.loc is not cx.std:
            raise cx.err(args[0], "mark_to_drop needs standard_metadata")
        em(f"{cx.std.fields['egress_spec'].code} = {DROP_PORT}; "
           f"{cx.std.fields['mcast_grp'].code} = 0")
        return None


class Verify(Extern):
    names = ("verify",)
    signature = "extern void verify(in bool check, in error toSignal);  // core.p4"
    served = "a parser error (_PErr) on both paths"

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        if cx.ctrl_kind != "parser":
            raise cx.err(node, "verify is only allowed in a parser")
        if len(args) != 2:
            raise cx.err(node, "verify(bool, error)")
        c = cx.expr(args[0], scope, em)
        er = cx.expr(args[1], scope, em)
        if not isinstance(c.ty, BoolTy) or not isinstance(er.ty, ErrorTy):
            raise cx.err(node, "verify(bool, error)")
        em(f"if not {c.code}: raise _PErr({er.code})")
        return None


class LogMsg(Extern):
    names = ("log_msg",)
    signature = "extern void log_msg(string msg); extern void log_msg<T>(string msg, in T data);"
    served = "nothing (BMv2 only logs it)"

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        msg = args[0] if args else None
        if not 1 <= len(args) <= 2 or getattr(msg, "data", None) != "string_lit":
            raise cx.err(node, "log_msg(string msg) or log_msg(string msg, in T data)")
        return None


class Random(Extern):
    names = ("random",)
    signature = "extern void random<T>(out T result, in T lo, in T hi);"
    served = ("Python: _random, the switch's seeded generator; native: not translated "
              "(its program runs on the Python path)")

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        if len(args) != 3:
            raise cx.err(node, "random(out result, lo, hi)")
        lv = cx.lvalue(args[0], scope, em)
        if not isinstance(lv, ScalarLoc) or not isinstance(lv.ty, Bits):
            raise cx.err(args[0], "random result must be a bit<N> l-value")
        lo = cx.convert(cx.expr(args[1], scope, em), lv.ty, args[1])
        hi = cx.convert(cx.expr(args[2], scope, em), lv.ty, args[2])
        em(f"{lv.code} = _random({lo.code}, {hi.code})")
        return None

    def runtime(self, sw: Any) -> dict[str, Any]:
        rng = sw.rng if sw is not None else None

        def _random(lo: int, hi: int) -> int:
            return lo + rng.randrange(hi - lo + 1) if hi >= lo else lo

        return {"_random": _random}


EXTERNS = [MarkToDrop(), Verify(), LogMsg(), Random()]
