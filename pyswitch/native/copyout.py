"""Actions with out/inout parameters in C (a mixin of `pyswitch.native.cgen.Unit`).

The compiler (`pyswitch.compiler.action_params`) gives such an action a Python function
that returns its out/inout parameters as a tuple, ``return (p_a, p_b,)`` (a `Return` of
the IR), and, on ``exit``, raises them, ``raise _Exit((p_a, p_b,))`` (an `Exit`).  A
caller copies them out, a `CopyOutCall` of the IR (`pyswitch.native.irtree` builds its
tree from its fields)::

    try:
        _r1 = a0(S, M, x, y)            # a table's wrapper: a0(S, M, x, *data)
    except _Exit as _x:
        _r1 = _x.args[0]
        <copy-out from _r1[i]>
        <exit>
    <copy-out from _r1[i]>

In C the action takes a pointer to its caller's array, ``V r__r1[k]``, fills it before it
returns (0) or exits (RC_EXIT), and ``_r1[i]`` reads ``r__r1[i]`` with the bounds of the
parameter's type (``meta["fbounds"]``, from the compiler).  The ``except _Exit as _x``
handler becomes the code at the label an exit of the call jumps to.  A table's wrapper
(``def a0_t(S, M, *data)``) takes its action data as C parameters ``p_d0, p_d1, ...``.
"""

from __future__ import annotations

import ast

from pyswitch.ir import Exit, Stmt
from pyswitch.native.exprs import Func, NotNative
from pyswitch.native.irlower import marker
from pyswitch.native.treeexprs import forget


def out_names(fn: ast.FunctionDef, nodes: list[Stmt]) -> list[str] | None:
    """The out/inout parameters an action function returns (every ``return`` and every
    exit, an IR `Exit` among `nodes` by its marker, must give the same names), or None
    when it returns nothing."""
    outs: list[list[str]] = []
    for n in ast.walk(fn):
        v = None
        k = marker(n) if isinstance(n, ast.Call) else None
        if k is not None and isinstance(nodes[k], Exit):
            if nodes[k].outs:  # type: ignore[union-attr]
                outs.append(list(nodes[k].outs))  # type: ignore[union-attr]
            continue
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
        else:
            continue
        if not (isinstance(v, ast.Tuple) and all(isinstance(e, ast.Name) for e in v.elts)):
            raise NotNative(f"line {n.lineno}: return of a value")
        outs.append([e.id for e in v.elts])  # type: ignore[attr-defined]
    if not outs:
        return None
    if any(o != outs[0] for o in outs):
        raise NotNative(f"function {fn.name}: returns of different parameters")
    return outs[0]


class CopyOut:
    """See the module docstring; `Unit` provides `funcs`, `actions`, `meta`, `ex`,
    `on_rc`, `store` and `body`."""

    def data_params(self, fn: ast.FunctionDef) -> list[str]:
        """A table wrapper's action data, as parameter names (``_d0``, ...)."""
        a = self.actions.get(fn.name)  # type: ignore[attr-defined]
        if a is None:
            raise NotNative(f"line {fn.lineno}: signature of {fn.name}")
        return [f"_d{i}" for i in range(len(a["params"]))]

    def param_bounds(self, f: Func, name: str) -> tuple[int, int]:
        """The range of parameter `name` of `f`: its type's (``meta["fbounds"]``), or a
        table wrapper's action data width."""
        fb = self.meta.get("fbounds", {}).get(f.name, {})  # type: ignore[attr-defined]
        if name in fb and fb[name] is not None:
            lo, hi = fb[name]
            return lo, hi
        if f.star and name.startswith("_d"):
            a = self.actions[f.name]  # type: ignore[attr-defined]
            w = a["params"][int(name[2:])]["width"]
            return 0, (1 << w) - 1
        w = self.param_width(f, name)  # type: ignore[attr-defined]
        return 0, (1 << w) - 1

    def ret_slot(self, f: Func, name: str, i: int) -> tuple[str, tuple[int, int]]:
        """``_r1[i]``: the C of out value `i` of the call that set ``_r1``, with its bounds."""
        callee = self.funcs[f.rets[name]]  # type: ignore[attr-defined]
        if not 0 <= i < len(callee.outs):
            raise NotNative(f"line {f.ln}: {name}[{i}]")
        return f"r_{name}[{i}]", self.param_bounds(callee, callee.outs[i])

    def classify_ret(self, f: Func, name: str, v: ast.AST) -> bool:
        """Record `name` as the out values of a call (or skip ``_x.args[0]``)."""
        if ast.unparse(v) == "_x.args[0]" and name in f.rets:
            return True
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) \
                and v.func.id in self.funcs and self.funcs[v.func.id].outs:  # type: ignore[attr-defined]
            old = f.rets.get(name)
            if old is not None and old != v.func.id:
                raise NotNative(f"line {v.lineno}: {name} holds two calls' values")
            f.rets[name] = v.func.id
            return True
        return False

    def call_args(self, f: Func, c: ast.Call, callee: Func) -> str:
        """The C arguments of a call of action function `callee` (after ``P, st``):
        each within its parameter's range, a ``*data`` spread as the wrapper's data."""
        if [ast.unparse(a) for a in c.args[:2]] != ["S", "M"]:
            raise NotNative(f"line {c.lineno}: call of {callee.name}")
        args: list[ast.AST] = []
        for a in c.args[2:]:
            if isinstance(a, ast.Starred):
                if not (f.star and ast.unparse(a.value) == "data"):
                    raise NotNative(f"line {c.lineno}: call of {callee.name}")
                args += [ast.Name(p, ctx=ast.Load(), lineno=c.lineno) for p in f.params]
            else:
                args.append(a)
        if len(args) != len(callee.params):
            raise NotNative(f"line {c.lineno}: call of {callee.name}: argument count")
        out = ""
        for pn, a in zip(callee.params, args, strict=True):
            x = self.ex(f, a)  # type: ignore[attr-defined]
            lo, hi = self.param_bounds(callee, pn)
            if x.lo < lo or x.hi > hi:  # what the parameter's type (a table entry) holds
                raise NotNative(f"line {c.lineno}: argument out of its parameter's range")
            out += f", {x.c}"
        return out

    def ret_call(self, f: Func, name: str, v: ast.Call, o: list[str], d: int) -> None:
        """``_r1 = a0(S, M, ...)``: the call, its out values into ``r__r1``."""
        if ast.unparse(v) == "_x.args[0]":
            return  # the callee filled the array before it exited
        callee = self.funcs[f.rets[name]]  # type: ignore[attr-defined]
        args = self.call_args(f, v, callee)
        o.append(self.on_rc(f, f"f_{callee.name}(P, st{args}, r_{name})", d))  # type: ignore[attr-defined]

    def ret_decls(self, f: Func) -> list[str]:
        return [f"    V r_{k}[{len(self.funcs[c].outs)}] = {{0}};"  # type: ignore[attr-defined]
                for k, c in f.rets.items()]

    def return_outs(self, f: Func, v: ast.AST, o: list[str], d: int, rc: str) -> None:
        """``return (p_a,)`` (rc 0) or ``raise _Exit((p_a,))`` (RC_EXIT): the values into
        the caller's array, then return."""
        ind = "    " * d
        names = [e.id for e in v.elts]  # type: ignore[attr-defined]
        if names != f.outs:
            raise NotNative(f"line {v.lineno}: return of other values")
        for i, pn in enumerate(names):
            o.append(f"{ind}ret[{i}] = p_{pn};")
        o.append(f"{ind}return {rc};")

    def exit_handler(self, f: Func, st: ast.Try, o: list[str], d: int) -> None:
        """``try: <call> except _Exit as _x: <copy-out, exit>``: the handler is what an
        exit of the call jumps to."""
        ind = "    " * d
        f.nlabel += 1
        lab, done = f"exitx_{f.nlabel}", f"exitx_done_{f.nlabel}"
        f.exit_label.append(lab)
        self.body(f, st.body, o, d)  # type: ignore[attr-defined]
        f.exit_label.pop()
        before = dict(f.cur)
        o.append(f"{ind}goto {done};")
        o.append(f"{ind}{lab}: ;")
        for x in st.handlers[0].body:
            if isinstance(x, ast.Assign) and ast.unparse(x.value) == "_x.args[0]":
                continue
            if any(isinstance(n, ast.Name) and n.id == "_x" for n in ast.walk(x)):
                raise NotNative(f"line {x.lineno}: exit handler")
            self.stmt(f, x, o, d)  # type: ignore[attr-defined]
        o.append(f"{ind}{done}: ;")
        f.cur = before
        forget(f, st.body + st.handlers[0].body)
