"""Header stack elements chosen at run time, in C (a mixin of `pyswitch.native.cgen.Unit`).

The compiler (`pyswitch.compiler.stacks`) picks the element of a run-time index as one of
three assignments to a name ``_hsN``, then reads and writes its fields ``_hsN[j]``::

    _hs1 = (h1, h2, )[i]                      # hs.next, once checked against the size
    _hs1 = _hs_at((h1, h2, ), i, what, nf)    # else: outside, a header of zeros (or, for
                                              # an extract, StackIndexError)
    _hs1 = _hs_last((h1, h2, ), n, what)      # .last: StackIndexError on an empty stack

In C the name is a pointer into the state's header slots (``k_hs1 = &st->s[offset]``), its
fields ``k_hs1[j]`` (their interval the IR's: the hull of the elements' fields, with 0
where the scratch header may be read).  Outside the stack the pointer
goes to a scratch header of zeros (``z_hs1``), zeroed at each pick, after the same Python
helper is called for what it does there: its one warning per place, or its exception (an
extract, ``.last`` of an empty stack), which the C returns as Python's.
"""

from __future__ import annotations

from typing import Any

from pyswitch.ir import SiblingsInvalid
from pyswitch.ir.exprs import Call, Elems, Expr, Field, Lit, Paren, Pick, Str
from pyswitch.native.exprs import Func, NotNative, wide_varbit

# the stack helpers (`pyswitch.ir.module.Helper` ``stacks``), called from C
PRELUDE_FUNCS = ("_hs_at", "_hs_last")


def _c_string(s: str) -> str:
    out = []
    for b in s.encode():
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in '"\\?' else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


class Picks:
    """See the module docstring; `Unit` provides `hb`, `hoff`, `ex` and `g`."""

    hb: list[list[tuple[int, int] | None]]
    hoff: list[int]

    def pick_of(self, f: Func, v: Expr) -> tuple[list[int], Expr, str, Any] | None:
        """(header slots, index, helper or "", helper's constants) when `v` picks a stack
        element, else None."""
        while isinstance(v, Paren):
            v = v.a
        if isinstance(v, Pick):
            elts, idx, helper, extra = v.elems, v.index, "", ()
        elif (isinstance(v, Call) and v.fn in PRELUDE_FUNCS and len(v.args) >= 2
              and isinstance(v.args[0], Elems)):
            elts, idx, helper = v.args[0].elems, v.args[1], v.fn
            # what (a string) and, for _hs_at, the field count (-1: an extract)
            if not all(isinstance(a, (Str, Lit)) for a in v.args[2:]):
                return None
            extra = tuple(a.value for a in v.args[2:])  # type: ignore[union-attr]
        else:
            return None
        if not elts or not all(e in f.aliases for e in elts):
            return None
        return [f.aliases[e] for e in elts], idx, helper, extra

    def pick_width(self, f: Func, name: str) -> int:
        return len(self.hb[f.picks[name][0]])

    def pick_slot(self, f: Func, name: str, j: int) -> str:
        """The C of field `j` of pick `name` (each element's field has a C value)."""
        bs = [self.hb[k][j] if j < len(self.hb[k]) else None for k in f.picks[name]]
        if any(b is None for b in bs):
            w = self.hvb.get((f.picks[name][0], j))  # type: ignore[attr-defined]
            raise NotNative(f"line {f.ln}: " + (
                f"field {j} of a stack element" if w is None
                else wide_varbit(w)))
        return f"k_{name}[{j}]"

    def classify_pick(self, f: Func, name: str, v: Expr) -> bool:
        """Record `name` as a pick when `v` is one (its elements must agree)."""
        p = self.pick_of(f, v)
        if p is None:
            return False
        slots = p[0]
        old = f.picks.get(name)
        if old is not None and old != slots:
            raise NotNative(f"line {f.ln}: {name} picks from two stacks")
        if len({len(self.hb[k]) for k in slots}) != 1:
            raise NotNative(f"line {f.ln}: stack elements of different types")
        f.picks[name] = slots
        return True

    def pick(self, f: Func, name: str, v: Expr, o: list[str], d: int) -> None:
        """The C of ``name = <pick>``."""
        ind = "    " * d
        p = self.pick_of(f, v)
        if p is None or p[0] != f.picks[name]:
            raise NotNative(f"line {f.ln}: assignment to {name}")
        slots, idx, helper, extra = p
        n = len(slots)
        i = self.ex(f, idx)  # type: ignore[attr-defined]
        offs = ", ".join(str(self.hoff[k]) for k in slots)
        if i.lo < -(1 << 62) or i.hi >= 1 << 62:
            raise NotNative(f"line {f.ln}: stack index beyond 62 bits")
        o.append(f"{ind}{{ static const int o_[{n}] = {{{offs}}}; V i_ = {i.c};")
        if not helper:  # hs.next, checked against the stack's size just before
            if i.lo < 0 or i.hi >= n:  # as Python's tuple index, if it ever were outside
                o.append(f"{ind}  if (i_ < 0 || i_ >= {n}) {{ PyErr_SetString("
                         'PyExc_IndexError, "tuple index out of range"); return RC_ERR; }')
            o.append(f"{ind}  k_{name} = &st->s[o_[(int)i_]]; }}")
            return
        fn = self.g(helper)  # type: ignore[attr-defined]
        what = _c_string(str(extra[0]) if extra else "")
        nf = str(int(extra[1])) if helper == "_hs_at" and len(extra) > 1 else "INT_MIN"
        if helper == "_hs_at":
            ok, at = f"i_ >= 0 && i_ < {n}", "i_"
        else:
            ok, at = f"i_ >= 1 && i_ <= {n}", "i_ - 1"
        o.append(f"{ind}  if ({ok}) k_{name} = &st->s[o_[(int)({at})]];")
        o.append(f"{ind}  else {{ if (hs_py({fn}, {n}, i_, {what}, {nf}) < 0) return RC_ERR;")
        o.append(f"{ind}    memset(z_{name}, 0, sizeof z_{name}); k_{name} = z_{name}; }} }}")

    def pick_decls(self, f: Func) -> list[str]:
        return [f"    V *k_{k} = NULL; V z_{k}[{self.pick_width(f, k)}]; (void)z_{k};"
                for k in f.picks]

    def siblings_invalid(self, f: Func, st: SiblingsInvalid, at: int, o: list[str],
                         d: int) -> None:
        """``for _s in ((h2, ), (h4, ), )[i]: _s[0] = False`` (the other members of the
        union extracted at a stack's next index made invalid): one case per index."""
        ind = "    " * d
        if not all(e in f.aliases for g in st.groups for e in g):
            raise NotNative(f"line {at}: statement 'for _s in ...'")
        i = self.ex(f, self.node_of(st.index))  # type: ignore[attr-defined]
        o.append(f"{ind}switch ((int)({i.c})) {{")
        for k, g in enumerate(st.groups):
            o.append(f"{ind}case {k}:")
            for e in g:
                f.ln = at
                self.store(f, Field(e, 0), self.ex(f, Lit(False)), o, d + 1)  # type: ignore[attr-defined]
            o.append(f"{ind}    break;")
        o.append(f"{ind}default: PyErr_SetString(PyExc_IndexError, \"tuple index out of "
                 "range\"); return RC_ERR;")
        o.append(f"{ind}}}")
