"""The small functions: v1model's ``mark_to_drop``, ``random`` and ``log_msg``, and
core.p4's ``verify`` (parser only)."""

from __future__ import annotations

from typing import Any

from pyswitch.compiler.model import DROP_PORT, E, ScalarLoc, px
from pyswitch.externs import Extern
from pyswitch.ir import Assign, ParserError, PyExpr, Seq
from pyswitch.ir.exprs import Call, Not
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
        em.emit(Seq((Assign(cx.loc_e(cx.std.fields['egress_spec']).py(), px(str(DROP_PORT))),
                     Assign(cx.loc_e(cx.std.fields['mcast_grp']).py(), px("0")))))
        return None


class Verify(Extern):
    names = ("verify",)
    signature = "extern void verify(in bool check, in error toSignal);  // core.p4"
    served = "a parser error (its error constant, or its value at run time) on both paths"

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        if cx.ctrl_kind != "parser":
            raise cx.err(node, "verify is only allowed in a parser")
        if len(args) != 2:
            raise cx.err(node, "verify(bool, error)")
        c = cx.expr(args[0], scope, em)
        er = cx.expr(args[1], scope, em)
        if not isinstance(c.ty, BoolTy) or not isinstance(er.ty, ErrorTy):
            raise cx.err(node, "verify(bool, error)")
        known = isinstance(er.const, int) and not isinstance(er.const, bool)
        # an error known at run time only: the code is its expression
        em.emit(ParserError(er.const if known else er.py(), PyExpr.of(Not(c.as_node(), bare=True))))
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


M64 = (1 << 64) - 1


def splitmix64(x: int) -> tuple[int, int]:
    """(next state, output) of SplitMix64 (Steele, Lea, Flood 2014): the generator both
    paths share, so that a native switch draws what the Python path draws."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


def draw(state: list[int] | Any, lo: int, hi: int) -> int:
    """A value of [lo, hi] from ``state[0]`` (advanced): the top k bits of as many 64-bit
    outputs as k needs (k = bit length of hi - lo), redrawn while beyond hi - lo, so every
    value is equally likely; ``lo`` when hi < lo (BMv2 returns lo)."""
    if hi <= lo:
        return lo
    n = hi - lo + 1
    k = (hi - lo).bit_length()
    x = state[0]
    while True:
        r, need = 0, k
        while need > 0:
            x, z = splitmix64(x)
            take = min(64, need)
            r = (r << take) | (z >> (64 - take))
            need -= take
        if r < n:
            state[0] = x
            return lo + r


class Random(Extern):
    names = ("random",)
    signature = "extern void random<T>(out T result, in T lo, in T hi);"
    served = ("both paths: SplitMix64 on one 64-bit state per switch (seeded from the "
              "switch's seed; a list, or C cells on the native path), v_random in C")
    c_support = r"""
/* random(lo, hi) as pyswitch.externs.misc.draw: SplitMix64 on the switch's one state cell */
static UV v_splitmix64(UV *x) {
    *x = (UV)(uint64_t)((uint64_t)*x + 0x9E3779B97F4A7C15ull);
    uint64_t z = (uint64_t)*x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (UV)(z ^ (z >> 31));
}

static V v_random(PyObject *o, V lo, V hi) {
    if (hi <= lo) return lo;
    Cells *c = (Cells *)o;
    UV n = (UV)(hi - lo) + 1, x = (UV)cells_at(c, 0), r;
    int k = 0;
    for (UV m = n - 1; m; m >>= 1) k++;
    do {
        int need = k;
        r = 0;
        while (need > 0) {
            UV z = v_splitmix64(&x);
            int take = need < 64 ? need : 64;
            r = (r << take) | (z >> (64 - take));  /* r: 128 bits, k <= 127 */
            need -= take;
        }
    } while (r >= n);
    cells_put(c, 0, (V)x);
    return lo + (V)r;
}
"""

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        if len(args) != 3:
            raise cx.err(node, "random(out result, lo, hi)")
        lv = cx.lvalue(args[0], scope, em)
        if not isinstance(lv, ScalarLoc) or not isinstance(lv.ty, Bits):
            raise cx.err(args[0], "random result must be a bit<N> l-value")
        lo = cx.convert(cx.expr(args[1], scope, em), lv.ty, args[1])
        hi = cx.convert(cx.expr(args[2], scope, em), lv.ty, args[2])
        em.assign(cx.loc_e(lv), E.of(Call("_random", (lo.as_node(), hi.as_node())), lv.ty))
        return None

    def runtime(self, sw: Any) -> dict[str, Any]:
        state = [sw.rng.getrandbits(64) if sw is not None else 0]

        def _random(lo: int, hi: int) -> int:  # the state the switch holds now (C cells)
            return draw(sw.ns["_rng_state"] if sw is not None else state, lo, hi)

        return {"_random": _random, "_rng_state": state}

    def native_state(self, sw: Any, ns: dict[str, Any], entries: list[dict], mod: Any) -> None:
        """The state moves into one C cell of 64 bits, read by v_random and _random."""
        if type(ns["_rng_state"]).__name__ != "Cells":
            ns["_rng_state"] = mod.cells(list(ns["_rng_state"]), 64)

    def c_expr(self, t: Any, f: Any, node: Any, line: int) -> Any:
        """``_random(lo, hi)`` (a `Call` node): ``v_random`` on the state's C cell."""
        from pyswitch.native.exprs import NotNative
        if not isinstance(node, Call) or node.fn != "_random" or len(node.args) != 2:
            raise NotNative(f"line {line}: call of {getattr(node, 'fn', '_random')}")
        lo, hi = t.ex(f, node.args[0]), t.ex(f, node.args[1])
        return f"v_random({t.g('_rng_state')}, {lo.c}, {hi.c})"


EXTERNS = [MarkToDrop(), Verify(), LogMsg(), Random()]
