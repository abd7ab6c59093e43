"""The parser's and deparser's nodes and whole headers in C (a mixin of
`pyswitch.native.cgen.Unit`).

The parser reads a header's fields at the cursor with the header's struct (`Extract`: one
big-endian read per item of the struct's format, ``get_be``, after the length check the
Python's ``unpack_from`` makes); the deparser writes a valid header's items the same way
(`Emit`, ``put_be``; an `EmitRun` of consecutive headers writes them at once when all are
valid).  A header copied, set or swapped whole (`HeaderCopy`, `HeaderSet`, `HeaderSwap`)
reads every value before it writes the first, as Python's assignment of a slice or a
tuple does.
"""

from __future__ import annotations

from collections.abc import Callable

from pyswitch.ir import Emit, EmitRun, Extract, HeaderCopy, HeaderSet, HeaderSwap
from pyswitch.ir.exprs import Expr, Field, Lit, Local
from pyswitch.native.exprs import Func, NotNative, X

IND = "    "


class Headers:
    """See the module docstring; `Unit` provides `structs`, `hb`, `ex`, `raw`, `val`,
    `store`, `cond`, `branch`, `node_of`."""

    structs: dict[str, list[tuple[str, int]]]
    hb: list[list[tuple[int, int] | None]]

    # -- the parser --------------------------------------------------------------------
    def unpacked(self, f: Func, st: Extract) -> list[X]:
        """``_stN.unpack_from(buf, pos)``: one big-endian read per format item."""
        src = f"{st.struct}.unpack_from(buf, pos)"
        if not (f.kind == "parser" and st.struct in self.structs):
            raise NotNative(f"line {f.ln}: {src[:40]!r}")
        out, off = [], 0
        for _, n in self.structs[st.struct]:
            out.append(X(f"get_be(buf + l_pos + {off}, {n})", 0, (1 << (8 * n)) - 1))
            off += n
        return out

    def read_guard(self, st: Extract, d: int) -> str:
        """Python's unpack_from raises on a short buffer; so does this (the generated
        parser checks the length first, so neither happens in practice)."""
        size = sum(n for _, n in self.structs[st.struct])
        return f"{IND * d}if (l_pos + {size} > L_buf) return short_read({size});"

    def extract(self, f: Func, st: Extract, at: int, o: list[str], d: int) -> None:
        """The header's fields read at the cursor: the items themselves, or the items
        into ``a0, a1, ...`` and the fields over them (the next line)."""
        if st.fields is None:
            return self.slice_store(f, st.header, 1, st, o, d)
        xs = self.unpacked(f, st)
        if len(xs) != st.items:
            raise NotNative(f"line {at}: unpack count")
        o.append(self.read_guard(st, d))
        for i, x in enumerate(xs):
            self.store(f, Local(f"a{i}"), x, o, d)  # type: ignore[attr-defined]
        f.ln = at + 1
        self.slice_store(f, st.header, 1, [self.node_of(v) for v in st.fields],  # type: ignore[attr-defined]
                         o, d)

    # -- whole headers -----------------------------------------------------------------
    def header_copy(self, f: Func, st: HeaderCopy, at: int, o: list[str], d: int) -> None:
        """``hA[:] = hB``: every cell of the source, then every cell written."""
        self.slice_store(f, st.target, 0, st.source, o, d)

    def header_set(self, f: Func, st: HeaderSet, at: int, o: list[str], d: int) -> None:
        """``h[:] = [valid, v1, ...]``."""
        self.slice_store(f, st.header, 0,
                         [Lit(st.valid), *(self.node_of(v) for v in st.values)], o, d)  # type: ignore[attr-defined]

    def slice_store(self, f: Func, h: str, first: int, src: str | list[Expr] | Extract,
                    o: list[str], d: int) -> None:
        """Cells `first`.. of header `h` from `src`: values (a varbit's guard, if any,
        first), a header's cells (copied whole), or an extract's reads."""
        if isinstance(src, list):
            # the valid bit of a header set is a constant of the statement's own
            xs = [self.val(f, Field(h, j), e, o, d)  # type: ignore[attr-defined]
                  for j, e in enumerate(src, first)]
        elif isinstance(src, str):
            if src not in f.aliases and src not in f.picks:
                raise NotNative(f"line {f.ln}: {src[:40]!r}")
            xs = [self.val(f, Field(h, j), Field(src, j), o, d)  # type: ignore[attr-defined]
                  for j in range(first, self._nfields(f, src))]
        else:
            xs = self.unpacked(f, src)
            o.append(self.read_guard(src, d))
        if first + len(xs) != self._nfields(f, h):
            raise NotNative(f"line {f.ln}: slice assignment of another length")
        ind = IND * d
        o.append(f"{ind}{{")
        for j, x in enumerate(xs):
            o.append(f"{ind}    V t{j}_ = {x.c};")
        for j, x in enumerate(xs, first):
            self.store(f, Field(h, j), X(f"t{j - first}_", x.lo, x.hi), o, d + 1)  # type: ignore[attr-defined]
        o.append(f"{ind}}}")

    def headers_swap(self, f: Func, st: HeaderSwap, at: int, o: list[str], d: int) -> None:
        """``h5[:], h4[:] = h4, h5[:]`` (a stack's elements shifted): every source header's
        fields are read before any is written, as Python's tuple assignment does."""
        ind = IND * d
        dst, src = [st.a, st.b], [st.b, st.a]
        if any(x not in f.aliases for x in dst):
            raise NotNative(f"line {at}: tuple assignment {f'({st.b}, {st.a}[:])'[:40]!r}")
        o.append(f"{ind}{{")
        xs: dict[tuple[int, int], X] = {}
        for k, s in enumerate(src):
            for j in range(len(self.hb[f.aliases[s]])):
                x = self.val(f, Field(dst[k], j), Field(s, j), o, d + 1)  # type: ignore[attr-defined]
                xs[(k, j)] = x
                o.append(f"{ind}    V t{k}_{j} = {x.c};")
        for k, (dn, s) in enumerate(zip(dst, src, strict=True)):
            if len(self.hb[f.aliases[dn]]) != len(self.hb[f.aliases[s]]):
                raise NotNative(f"line {at}: headers of different types")
            for j in range(len(self.hb[f.aliases[s]])):
                x = xs[(k, j)]
                self.store(f, Field(dn, j), X(f"t{k}_{j}", x.lo, x.hi), o, d + 1)  # type: ignore[attr-defined]
        o.append(f"{ind}}}")

    def _nfields(self, f: Func, h: str) -> int:
        if h in f.picks:
            return self.pick_width(f, h)  # type: ignore[attr-defined]
        if h in f.aliases:
            return len(self.hb[f.aliases[h]])
        raise NotNative(f"deparser item {h[:30]!r}")

    # -- the deparser ------------------------------------------------------------------
    def valid(self, f: Func, h: str) -> str:
        """The test of header `h`'s validity."""
        return f"({self.ex(f, Field(h, 0)).c} != 0)"  # type: ignore[attr-defined]

    def emit_stmt(self, f: Func, st: Emit, at: int, o: list[str], d: int) -> None:
        """``if h[0]: out.append(_stN.pack(...))``."""
        self.branch(f, self.valid(f, st.header),  # type: ignore[attr-defined]
                    lambda: self.pack(f, st.struct, lambda: self.pack_items(f, st), at + 1, o,
                                      d + 1),
                    None, o, d)

    def emit_run(self, f: Func, st: EmitRun, at: int, o: list[str], d: int) -> None:
        """All the headers valid: one pack of their items; else each `Emit`."""
        test = "(" + " && ".join(self.valid(f, e.header) for e in st.emits) + ")"

        def each() -> None:
            for i, e in enumerate(st.emits):
                self.stmt(f, e, at + 3 + 2 * i, o, d + 1)  # type: ignore[attr-defined]

        self.branch(f, test, lambda: self.pack(  # type: ignore[attr-defined]
            f, st.struct, lambda: [x for e in st.emits for x in self.pack_items(f, e)],
            at + 1, o, d + 1), each, o, d)

    def pack_items(self, f: Func, st: Emit) -> list[Expr]:
        """The items an `Emit` packs: its values' nodes, or the header's fields."""
        if st.values is None:
            return [Field(st.header, j) for j in range(1, self._nfields(f, st.header))]
        return [self.node_of(v) for v in st.values]  # type: ignore[attr-defined]

    def deparser_out(self, f: Func, ln: int) -> None:
        """``out.append(...)`` on line `ln`: the deparser's, once (no loop)."""
        f.ln = ln
        if f.kind != "deparser":
            raise NotNative(f"line {ln}: call of out.append")
        if f.loops:
            raise NotNative(f"line {ln}: deparser output inside a loop")

    def pack(self, f: Func, struct: str, items_of: Callable[[], list[Expr]],
             ln: int, o: list[str], d: int) -> None:
        """``out.append(_sdN.pack(...))``: each item written big-endian into the buffer."""
        ind = IND * d
        self.deparser_out(f, ln)
        if struct not in self.structs:
            raise NotNative(f"line {ln}: deparser piece {struct + '.pack(...)'!r}")
        fmt = self.structs[struct]
        items = items_of()
        if len(items) != len(fmt):
            raise NotNative(f"line {ln}: deparser item count")
        off = 0
        for (_, n), it in zip(fmt, items, strict=True):
            x = self.ex(f, it)  # type: ignore[attr-defined]
            if x.lo < 0 or x.hi >= (1 << (8 * n)):
                raise NotNative(f"line {ln}: a deparsed value may not fit its field")
            o.append(f"{ind}put_be(ob + *on + {off}, {x.c}, {n});")
            off += n
        o.append(f"{ind}*on += {off};")
        f.emitted += off
