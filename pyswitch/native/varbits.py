"""Varbit fields in C (a mixin of `pyswitch.native.cgen.Unit`).

The generated Python holds a varbit as ``(nbits, value)``, or ``0`` for the empty varbit of a
new or reset header (`pyswitch.compiler.varbit`); ``meta["varbits"]`` names the slots that
hold one and their maximum widths.  In C such a slot is one ``V``: ``0`` when empty, else
``(nbits + 1) << VB_SHIFT | value`` (runtime.h), so that a copy of the slot copies length
and value, and ``==`` of two slots is Python's ``==`` of the pairs.  A varbit of at most
112 bits fits (112 value bits and the length above them stay within 126 bits).

Only the compiler's varbit nodes are lowered; a varbit slot anywhere else (arithmetic,
a key, a call) raises `NotNative`, as the generated Python never does it:

- extract: a `HeaderSet` whose varbit cell is a `VbRead` (``(n, int.from_bytes(buf[a:a +
  n // 8], 'big'))``), after the compiler's checks on ``n`` (multiple of 8, packet long
  enough, header not too short); the C checks ``0 <= n <= W`` once more before it reads
  (a guard that never fires);
- a copy from a varbit slot of the same width, and ``0`` (a header made valid or invalid);
- the value, `VbValue` (``(x[1] if x else 0)``), in ``==`` (BMv2 compares values, not
  lengths);
- emit: an `EmitVarbit` of `ToBytes` pieces (``A.to_bytes(n, 'big')``) and `VbBytes`
  (``(x[1].to_bytes(x[0] // 8, 'big') if x else b'')``);
- a hash or checksum of a field list with a varbit, `VbDigest` (``_pack_bits(((w, v),
  ..., (x or (0, 0)), ...))``), packed and hashed in C (``v_pack_hash``).

The boxing to the Python lists (`cgen.Unit.boxing`: clones, drops in egress) gives the pair
back (`vb_to_py`).
"""

from __future__ import annotations

from pyswitch.ir import EmitVarbit
from pyswitch.ir.exprs import Expr, Lit, Paren, ToBytes, VbBytes, VbDigest, VbRead, text
from pyswitch.native.exprs import Func, NotNative, X, pure

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

    def val(self, f: Func, t: Expr, v: Expr, o: list[str], d: int) -> X:
        """The value `v` stored into `t`: a varbit when `t` is a varbit slot (its C
        range, `vb_hi`), else a number with the IR's interval."""
        w = self.vb_width(f, t)  # type: ignore[attr-defined]
        if w:
            return self.vb_ex(f, v, w, o, d)
        return self.ex(f, v)  # type: ignore[attr-defined]

    def vb_ex(self, f: Func, v: Expr, w: int, o: list[str], d: int) -> X:
        """A varbit of at most `w` bits (see module docstring); a guard line into `o`."""
        ln = f.ln
        n = v
        while isinstance(n, Paren):
            n = n.a
        if isinstance(n, Lit) and n.value == 0 and not isinstance(n.value, bool):
            return X("0", 0, 0)
        s = self.slot(f, n)  # type: ignore[attr-defined]
        if s is not None:
            if self.vb_width(f, n) != w:  # type: ignore[attr-defined]
                raise NotNative(f"line {ln}: a varbit from a slot of another type")
            return X(s, 0, vb_hi(w))
        if f.kind == "parser" and isinstance(n, VbRead) and pure(n.n):
            nx = self.ex(f, n.n)  # type: ignore[attr-defined]
            a = self.ex(f, n.start)  # type: ignore[attr-defined]
            b = f"({a.c} + v_div({nx.c}, {self._c(f, 8)}, 0))"  # type: ignore[attr-defined]
            self.steps(f, n)  # type: ignore[attr-defined]
            if nx.lo < 0 or nx.hi > w:
                o.append(f"{'    ' * d}if ({nx.c} < 0 || {nx.c} > {w}) "
                         f"return vb_bad_len({nx.c}, {w});")
            # n <= w: at most w / 8 bytes, a value below 2**w
            return X(f"vb_make({nx.c}, be_slice(buf, L_buf, {a.c}, {b}))", 0, vb_hi(w))
        raise NotNative(f"line {ln}: varbit value {text(v)[:40]!r}")

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
                items += ["(V)-1", self.slot(f, p)]  # type: ignore[attr-defined]
                bits += vw
                continue
            raise NotNative(f"line {f.ln}: field list item {text(p)[:40]!r}")
        if bits > 8 * 512:  # runtime.h's PACK_MAX
            raise NotNative(f"line {f.ln}: a field list of more than 512 bytes")
        return f"{len(items) // 2}, (V[]){{{', '.join(items)}}}"

    def emit_varbit(self, f: Func, st: EmitVarbit, at: int, o: list[str], d: int) -> None:
        """``if h[0]: out.append(P + P + ...)``, each piece ``A.to_bytes(n, 'big')`` or a
        varbit's bytes: written in order, the varbits with their run-time lengths."""
        pieces = [self.node_of(p) for p in st.pieces]  # type: ignore[attr-defined]
        self.branch(f, self.valid(f, st.header),  # type: ignore[attr-defined]
                    lambda: self.emit_bytes(f, pieces, at, o, d + 1), None, o, d)

    def emit_bytes(self, f: Func, pieces: list[Expr], ln: int, o: list[str], d: int) -> None:
        """The pieces of an `EmitVarbit`, on line `ln`, into the output."""
        ind = "    " * d
        self.deparser_out(f, ln)  # type: ignore[attr-defined]
        most = 0
        for p in pieces:
            if isinstance(p, ToBytes) and 0 < p.n <= 16:
                x = self.ex(f, p.a)  # type: ignore[attr-defined]
                if x.lo < 0 or x.hi >= (1 << (8 * p.n)):
                    raise NotNative(f"line {ln}: a deparsed value may not fit its field")
                o.append(f"{ind}put_be(ob + *on, {x.c}, {p.n}); *on += {p.n};")
                most += p.n
                continue
            w = self.vb_width(f, p.a) if isinstance(p, VbBytes) else 0  # type: ignore[attr-defined]
            if w:
                s = self.slot(f, p.a)  # type: ignore[attr-defined]
                o.append(f"{ind}*on += vb_put(ob + *on, {s});")
                most += w // 8
                continue
            raise NotNative(f"line {ln}: deparser piece {text(p)[:40]!r}")
        f.emitted += most
