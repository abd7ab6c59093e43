"""Actions with out/inout parameters in C (a mixin of `pyswitch.native.cgen.Unit`).

The compiler (`pyswitch.compiler.action_params`) gives such an action a Python function
that returns its out/inout parameters as a tuple, ``return (p_a, p_b,)`` (a `Return` of
the IR), and, on ``exit``, raises them, ``raise _Exit((p_a, p_b,))`` (an `Exit`).  A
caller copies them out, a `CopyOutCall` of the IR (lowered from its fields)::

    try:
        _r1 = a0(S, M, x, y)            # a table's wrapper: a0(S, M, x, *data)
    except _Exit as _x:
        _r1 = _x.args[0]
        <copy-out from _r1[i]>
        <exit>
    <copy-out from _r1[i]>

In C the action takes a pointer to its caller's array, ``V r__r1[k]``, fills it before it
returns (0) or exits (RC_EXIT), and ``_r1[i]`` reads ``r__r1[i]``, whose interval the IR
gives (`pyswitch.ir.bounds.out_bounds`: the parameter's type's, ``meta["fbounds"]``).  The ``except _Exit as _x``
handler becomes the code at the label an exit of the call jumps to.  A table's wrapper
(``def a0_t(S, M, *data)``) takes its action data as C parameters ``p_d0, p_d1, ...``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyswitch.ir import CopyOutCall, Pass
from pyswitch.ir.exprs import Call, Expr, Local
from pyswitch.native.exprs import Func, NotNative
from pyswitch.native.lines import body_start


class CopyOut:
    """See the module docstring; `Unit` provides `funcs`, `actions`, `meta`, `ex`, `raw`,
    `on_rc`, `store`, `body`, `listing`, `exit_scope`."""

    def data_params(self, fn: Any, line: int) -> list[str]:
        """A table wrapper's action data, as parameter names (``_d0``, ...)."""
        a = self.actions.get(fn.name)  # type: ignore[attr-defined]
        if a is None:
            raise NotNative(f"line {line}: signature of {fn.name}")
        return [f"_d{i}" for i in range(len(a["params"]))]

    def param_bounds(self, f: Func, name: str) -> tuple[int, int]:
        """The range of parameter `name` of `f`, as the IR has it (`Bounds.params`,
        `pyswitch.ir.bounds.param_bounds`: its type's, ``meta["fbounds"]``, or an action
        data's width)."""
        iv = f.irb.params.get(name) if f.irb is not None else None
        if iv is not None:
            return iv
        if f.name not in self.actions:  # type: ignore[attr-defined]
            raise NotNative(f"function {f.name}: parameters of a non-action")
        raise NotNative(f"function {f.name}: parameter {name}")

    def ret_slot(self, f: Func, name: str, i: int) -> str:
        """``_r1[i]``: the C of out value `i` of the call that set ``_r1`` (its interval
        the IR's: the callee's out parameter's, `pyswitch.ir.bounds.out_bounds`)."""
        callee = self.funcs[f.rets[name]]  # type: ignore[attr-defined]
        if not 0 <= i < len(callee.outs):
            raise NotNative(f"line {f.ln}: {name}[{i}]")
        return f"r_{name}[{i}]"

    def classify_ret(self, f: Func, name: str, kind: str, v: Any) -> bool:
        """Record `name` as the out values of a call (or skip ``_x.args[0]``, `kind`
        ``took``)."""
        if kind == "took":
            return name in f.rets
        fn = v.fn if isinstance(v, (CopyOutCall, Call)) else None
        if fn is not None and fn in self.funcs and self.funcs[fn].outs:  # type: ignore[attr-defined]
            old = f.rets.get(name)
            if old is not None and old != fn:
                raise NotNative(f"line {f.ln}: {name} holds two calls' values")
            f.rets[name] = fn
            return True
        return False

    def call_args(self, f: Func, args: Sequence[Expr], data: bool, callee: Func) -> str:
        """The C arguments of a call of action function `callee` (after ``P, st``):
        each within its parameter's range, `data` (``*data``) spread as the wrapper's."""
        vals = list(args)
        if data:
            if not f.star:
                raise NotNative(f"line {f.ln}: call of {callee.name}")
            vals += [Local(p) for p in f.params]
        if len(vals) != len(callee.params):
            raise NotNative(f"line {f.ln}: call of {callee.name}: argument count")
        out = ""
        for pn, a in zip(callee.params, vals, strict=True):
            x = self.ex(f, a)  # type: ignore[attr-defined]
            lo, hi = self.param_bounds(callee, pn)
            if x.lo < lo or x.hi > hi:  # what the parameter's type (a table entry) holds
                raise NotNative(f"line {f.ln}: argument out of its parameter's range")
            out += f", {x.c}"
        return out

    def call_value(self, f: Func, st: CopyOutCall) -> tuple[int, int]:
        """A call's value assigned to a local: none that the C takes."""
        fn = st.fn
        if not st.data and fn in self.funcs and self.funcs[fn].returns:  # type: ignore[attr-defined]
            raise NotNative(f"line {f.ln}: value-returning function {fn}")
        raise NotNative(f"line {f.ln}: call of {fn}")

    def ret_decls(self, f: Func) -> list[str]:
        return [f"    V r_{k}[{len(self.funcs[c].outs)}] = {{0}};"  # type: ignore[attr-defined]
                for k, c in f.rets.items()]

    def return_outs(self, f: Func, names: list[str], o: list[str], d: int, rc: str) -> None:
        """``return (p_a,)`` (rc 0) or ``raise _Exit((p_a,))`` (RC_EXIT): the values into
        the caller's array, then return."""
        ind = "    " * d
        if names != f.outs:
            raise NotNative(f"line {f.ln}: return of other values")
        for i, pn in enumerate(names):
            o.append(f"{ind}ret[{i}] = p_{pn};")
        o.append(f"{ind}return {rc};")

    # -- the calls -----------------------------------------------------------------------
    def copy_out_call(self, f: Func, st: CopyOutCall, at: int, o: list[str], d: int) -> None:
        """The call (its out values into ``r__rN``), inside its exit handler if any."""
        if st.on_exit is None:
            return self.run_call(f, st, at, o, d)
        if not st.values and all(isinstance(ln.stmt, Pass) for ln in st.on_exit):
            return self.exit_scope(f, lambda: self.run_call(f, st, at + 1, o, d),  # type: ignore[attr-defined]
                                   o, d)
        self.exit_handler(f, st, at, o, d)

    def run_call(self, f: Func, st: CopyOutCall, ln: int, o: list[str], d: int) -> None:
        """``_r1 = a0(S, M, ...)`` (on line `ln`): the call, its out values into ``r__r1``;
        ``a0(S, M, ...)`` of an action without out values."""
        f.ln = ln
        args = [self.node_of(a) for a in st.args]  # type: ignore[attr-defined]
        if st.result:
            x = st.result
            if x in f.aliases:
                return
            if x in f.rets:
                callee = self.funcs[f.rets[x]]  # type: ignore[attr-defined]
                a = self.call_args(f, args, st.data, callee)
                o.append(self.on_rc(f, f"f_{callee.name}(P, st{a}, r_{x})", d))  # type: ignore[attr-defined]
                return
            if x in f.picks:
                raise NotNative(f"line {ln}: assignment to {x}")
            self.call_value(f, st)
        callee = self.funcs.get(st.fn)  # type: ignore[attr-defined]
        if callee is None or callee.kind != "block" or callee.returns or callee.outs:
            raise NotNative(f"line {ln}: call of {st.fn}")
        o.append(self.on_rc(f, f"f_{st.fn}(P, st{self.call_args(f, args, st.data, callee)})",  # type: ignore[attr-defined]
                            d))

    def exit_handler(self, f: Func, st: CopyOutCall, at: int, o: list[str], d: int) -> None:
        """``try: <call> except _Exit as _x: <copy-out, exit>``: the handler is what an
        exit of the call jumps to."""
        ind = "    " * d
        f.nlabel += 1
        lab, done = f"exitx_{f.nlabel}", f"exitx_done_{f.nlabel}"
        f.exit_label.append(lab)
        self.run_call(f, st, at + 1, o, d)
        f.exit_label.pop()
        o.append(f"{ind}goto {done};")
        o.append(f"{ind}{lab}: ;")
        body = st.on_exit or ()
        self.body(f, body, body_start(self.listing, st, at, 0), o, d)  # type: ignore[attr-defined]
        o.append(f"{ind}{done}: ;")
