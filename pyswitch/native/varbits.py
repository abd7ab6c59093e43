"""Varbit fields in C (a mixin of `pyswitch.native.cgen.Unit`).

The generated Python holds a varbit as ``(nbits, value)``, or ``0`` for the empty varbit of a
new or reset header (`pyswitch.compiler.varbit`); ``meta["varbits"]`` names the slots that
hold one and their maximum widths.  In C such a slot is one ``V``: ``0`` when empty, else
``(nbits + 1) << VB_SHIFT | value`` (runtime.h), so that a copy of the slot copies length
and value, and ``==`` of two slots is Python's ``==`` of the pairs.  A varbit of at most
112 bits fits (112 value bits and the length above them stay within 126 bits).

Only the compiler's varbit idioms are translated; a varbit slot anywhere else (arithmetic,
a key, a call) raises `NotNative`, as the generated Python never does it:

- extract: ``h[:] = [True, ..., (n, int.from_bytes(buf[a:a + n // 8], 'big')), ...]``,
  after the compiler's checks on ``n`` (multiple of 8, packet long enough, header not too
  short); the C checks ``0 <= n <= W`` once more before it reads (a guard that never fires);
- a copy from a varbit slot of the same width, and ``0`` (a header made valid or invalid);
- the value, ``(x[1] if x else 0)``, in ``==`` (BMv2 compares values, not lengths);
- emit: ``out.append(A.to_bytes(n, 'big') + (x[1].to_bytes(x[0] // 8, 'big') if x else b'')
  + ...)``;
- a hash or checksum of a field list with a varbit: ``_pack_bits(((w, v), ..., (x or (0,
  0)), ...))``, packed and hashed in C (``v_pack_hash``).

The boxing to the Python lists (`cgen.Unit.boxing`: clones, drops in egress) gives the pair
back (`vb_to_py`).
"""

from __future__ import annotations

import ast

from pyswitch.ir.exprs import VbDigest, text
from pyswitch.native.exprs import Func, NotNative, X
from pyswitch.native.treeexprs import _pure

VB_SHIFT = 112  # as runtime.h
MAX_WIDTH = 112  # as exprs.wide_varbit says


def vb_hi(w: int) -> int:
    """The largest C value of a varbit slot of at most `w` bits (an interval bound)."""
    return ((w + 1) << VB_SHIFT) | ((1 << w) - 1)


class Varbits:
    """Varbit slots of a `Unit` (see module docstring)."""

    hb: list[list[tuple[int, int] | None]]
    mb: list[tuple[int, int] | None]
    hvb: dict[tuple[int, int], int]  # (header slot, field) -> maximum width
    mvb: dict[int, int]  # metadata slot -> maximum width

    def varbit_slots(self, meta: dict) -> None:
        """Read ``meta["varbits"]`` and give each varbit slot its C bound (`vb_hi`)."""
        vb = meta.get("varbits") or {"h": [], "m": []}
        self.hvb = {(k, j): w for k, j, w in vb["h"]}
        self.mvb = {j: w for j, w in vb["m"]}
        self.hb = [list(b) for b in self.hb]
        self.mb = list(self.mb)
        for (k, j), w in self.hvb.items():
            self.hb[k][j] = None if w > MAX_WIDTH else (0, vb_hi(w))
        for j, w in self.mvb.items():
            self.mb[j] = None if w > MAX_WIDTH else (0, vb_hi(w))

    def vbw(self, f: Func, node: ast.AST) -> int:
        """The maximum width of the varbit slot `node` is, or 0 when it is none."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int)):
            return 0
        j, base = node.slice.value, node.value
        if isinstance(base, ast.Name) and base.id in f.picks:
            return self.hvb.get((f.picks[base.id][0], j), 0)
        if isinstance(base, ast.Name) and base.id in f.aliases:
            return self.hvb.get((f.aliases[base.id], j), 0)
        if (isinstance(base, ast.Subscript) and ast.unparse(base.value) == "S"
                and isinstance(base.slice, ast.Constant)):
            return self.hvb.get((base.slice.value, j), 0)
        if isinstance(base, ast.Name) and base.id == "M":
            return self.mvb.get(j, 0)
        return 0

    def val(self, f: Func, t: ast.AST, v: ast.AST, o: list[str], d: int) -> X:
        """The value `v` stored into `t`: a varbit when `t` is a varbit slot."""
        w = self.vbw(f, t)
        return self.vb_ex(f, v, w, o, d) if w else self.ex(f, v)  # type: ignore[attr-defined]

    def vb_ex(self, f: Func, v: ast.AST, w: int, o: list[str], d: int) -> X:
        """A varbit of at most `w` bits (see module docstring); a guard line into `o`."""
        ln = getattr(v, "lineno", 0)
        if isinstance(v, ast.Constant) and v.value == 0 and not isinstance(v.value, bool):
            return X("0", 0, 0)
        s = self.slot(f, v)  # type: ignore[attr-defined]
        if s is not None:
            if self.vbw(f, v) != w:
                raise NotNative(f"line {ln}: a varbit from a slot of another type")
            return X(s[0], *s[1])
        if (f.kind == "parser" and isinstance(v, ast.Tuple) and len(v.elts) == 2
                and _pure(v.elts[0])):
            n, rd = v.elts
            if (isinstance(rd, ast.Call) and ast.unparse(rd.func) == "int.from_bytes"
                    and len(rd.args) == 2 and ast.unparse(rd.args[1]) == "'big'"
                    and isinstance(rd.args[0], ast.Subscript)
                    and ast.unparse(rd.args[0].value) == "buf"
                    and isinstance(rd.args[0].slice, ast.Slice)):
                sl = rd.args[0].slice
                up = sl.upper
                if (sl.step is None and sl.lower is not None and isinstance(up, ast.BinOp)
                        and isinstance(up.op, ast.Add)
                        and ast.unparse(up.left) == ast.unparse(sl.lower)
                        and ast.unparse(up.right) == f"{ast.unparse(n)} // 8"):
                    nx = self.ex(f, n)  # type: ignore[attr-defined]
                    a, b = self.ex(f, sl.lower), self.ex(f, up)  # type: ignore[attr-defined]
                    if nx.lo < 0 or nx.hi > w:
                        o.append(f"{'    ' * d}if ({nx.c} < 0 || {nx.c} > {w}) "
                                 f"return vb_bad_len({nx.c}, {w});")
                    # n <= w: at most w / 8 bytes, a value below 2**w
                    return X(f"vb_make({nx.c}, be_slice(buf, L_buf, {a.c}, {b.c}))",
                             0, vb_hi(w))
        raise NotNative(f"line {ln}: varbit value {ast.unparse(v)[:40]!r}")

    def vb_value(self, f: Func, n: ast.IfExp) -> X | None:
        """``(x[1] if x else 0)`` of a varbit slot ``x``: its value; None for another
        conditional expression."""
        t, b = n.test, n.body
        w = self.vbw(f, t)
        if not (w and isinstance(b, ast.Subscript) and ast.unparse(b.slice) == "1"
                and ast.unparse(b.value) == ast.unparse(t)
                and isinstance(n.orelse, ast.Constant) and n.orelse.value == 0):
            return None
        s = self.slot(f, t)  # type: ignore[attr-defined]
        return X(f"vb_val({s[0]})", 0, (1 << w) - 1)

    def pack_parts(self, f: Func, n: VbDigest) -> str:
        """A hash's or checksum's field list with a varbit (`VbDigest`: ``_pack_bits(((w,
        v), (x or (0, 0)), ...))``) as `v_pack_hash`'s arguments after its algorithm: the
        count and the (width, value) pairs, -1 for a varbit's width (runtime.h)."""
        items, bits = [], 0
        for p, w in zip(n.items, n.widths, strict=True):
            if w is not None:
                x = self.ex(f, p)  # type: ignore[attr-defined]
                if not (0 < w <= 126 and x.lo >= 0 and x.hi < (1 << w)):
                    raise NotNative(f"line {f.ln}: a field of {w} bits in a field list")
                items += [f"(V){w}", x.c]
                bits += w
                continue
            vw = self.vb_width(f, p)  # type: ignore[attr-defined]
            if vw:
                items += ["(V)-1", self.slot(f, p)[0]]  # type: ignore[attr-defined]
                bits += vw
                continue
            raise NotNative(f"line {f.ln}: field list item {text(p)[:40]!r}")
        if bits > 8 * 512:  # runtime.h's PACK_MAX
            raise NotNative(f"line {f.ln}: a field list of more than 512 bytes")
        return f"{len(items) // 2}, (V[]){{{', '.join(items)}}}"

    def emit_bytes(self, f: Func, c: ast.AST, o: list[str], d: int) -> None:
        """``out.append(P + P + ...)``, each piece ``A.to_bytes(n, 'big')`` or a varbit's
        bytes: written in order, the varbits with their run-time lengths."""
        ind = "    " * d
        pieces: list[ast.AST] = []

        def flat(x: ast.AST) -> None:
            if isinstance(x, ast.BinOp) and isinstance(x.op, ast.Add):
                flat(x.left)
                flat(x.right)
            else:
                pieces.append(x)
        flat(c)
        most = 0
        for p in pieces:
            ln = getattr(p, "lineno", 0)
            if (isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute)
                    and p.func.attr == "to_bytes" and len(p.args) == 2
                    and isinstance(p.args[0], ast.Constant) and isinstance(p.args[0].value, int)
                    and ast.unparse(p.args[1]) == "'big'" and 0 < p.args[0].value <= 16):
                nb = p.args[0].value
                x = self.ex(f, p.func.value)  # type: ignore[attr-defined]
                if x.lo < 0 or x.hi >= (1 << (8 * nb)):
                    raise NotNative(f"line {ln}: a deparsed value may not fit its field")
                o.append(f"{ind}put_be(ob + *on, {x.c}, {nb}); *on += {nb};")
                most += nb
                continue
            w = self.vbw(f, p.test) if isinstance(p, ast.IfExp) else 0
            if w:
                t = ast.unparse(p.test)
                if (ast.unparse(p.body) == f"{t}[1].to_bytes({t}[0] // 8, 'big')"
                        and isinstance(p.orelse, ast.Constant) and p.orelse.value == b""):
                    s = self.slot(f, p.test)  # type: ignore[attr-defined]
                    o.append(f"{ind}*on += vb_put(ob + *on, {s[0]});")
                    most += w // 8
                    continue
            raise NotNative(f"line {ln}: deparser piece {ast.unparse(p)[:40]!r}")
        f.emitted += most
