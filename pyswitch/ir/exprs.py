"""Expressions as nodes (issue 42, scope 1, step 1 of docs/pyswitch-ir.md's list).

Each node is one P4 operation with the width of its result (None: bool, error, or an
unsized constant), in the form the compiler gives it: the P4 width semantics -- a sum
wrapped to its width, a signed operand compared or widened through its sign bit -- are
in the node's kind, so the Python back end prints it (`text`) and the C back end lowers it
from the fields (`pyswitch.native.exprs`), neither from the other's output.

=============  =====================================  =================================
node           fields                                  Python (`text`)
=============  =====================================  =================================
`Lit`          value (int or bool), hex or decimal     ``5``, ``0xffff``, ``True``
`Slot`         metadata slot j                         ``M[j]``
`Field`        header local hN, field i                ``hN[i]``
`Local`        a local or parameter's name             ``v_3``, ``p_x``
`Elem`         a local holding a tuple, item i         ``_r3[0]`` (an action's out values)
`Paren`        a                                       ``(a)`` (where the compiler writes
                                                       them around an operand)
`Opaque`       Python source the compiler still        as is (none left in the programs of
               writes as text                          tests/p4, p4src, tests/stf)
`Bin`          op, a, b: ``& | ^ >> + - % == != <     ``(a op b)``; `bare`: ``a op b``
               > <= >= and or``
`Wrap`         op ``+ - * <<``, a, b, width            ``((a op b) & mask)``
`Neg`          a, width                                ``(-a & mask)``
`Not`          a; `bare`                               ``(not a)``; bare ``not a``
`Cond`         c, a, b                                 ``(a if c else b)``
`SignExt`      a, its width, width                     ``(((a) ^ sb) - sb & mask)``
`SCmp`         op ``< > <= >=``, a, b, their width     ``((a ^ sb) op (b ^ sb))``
`Concat`       a, b, b's width, width                  ``((a << wb) | b)``
`All`, `AnyOf` items (two or more)                     ``a and b and c``, ``a or b``
`Range`        lo, a, hi                               ``lo <= a <= hi``
`Hit`          a table apply's entry local             ``_e.hit``
`ActionRun`    a table apply's entry local             ``_e.aidx`` (its action's index)
`Call`         a helper of the generated module        ``_shl(a, b, 8)``, ``min(a + b,
               (``_shl``, ``_sat_s``, ``_hmod``,        255)``
               ``_random``, ``min``, ``max``, the
               stack helpers ``_hs_at``,
               ``_hs_last``), its arguments
`Digest`       a hash's or checksum's algorithm, the   ``_crc32((a << 8 | b)
               field list's items and their widths,    .to_bytes(3, 'big'))``,
               the payload's slot (or None)            ``_csum16i(((a) << 8) + (b))``
`Pick`         a stack's element headers, the index    ``(h1, h2, )[i]`` (a header
               (a stack element picked at run time)    picked at run time)
`BufRead`      the packet's bytes from `start`, their  ``int.from_bytes(buf[s:s + n],
               count n                                 'big')``
`SShr`         signed ``a >> b``, width                ``(((a ^ sb) - sb >> b) & mask)``
`VbValue`      a varbit's cell                         ``(v[1] if v else 0)``
`VbDigest`     a digest of a field list with varbits:  ``_crc16(_pack_bits(((8, a),
               algo, items, widths (None: a varbit),   (v or (0, 0)), )))``
               the payload's slot (or None)
`Elems`        a stack's element headers               ``(h1, h2, )`` (the argument of
                                                       ``_hs_at``, ``_hs_last``)
`Str`          a string constant                       ``'p.p4:4:2: header stack'``
`VbRead`       a varbit's length n (bits) and its      ``(n, int.from_bytes(buf[s:s + n //
               start in the packet: its cell            8], 'big'))`` (an extract's)
`ToBytes`      a, its count of bytes                   ``(a).to_bytes(n, 'big')`` (an emit's)
`VbBytes`      a varbit's cell                         ``(v[1].to_bytes(v[0] // 8, 'big')
                                                       if v else b'')`` (an emit's)
=============  =====================================  =================================

(``mask`` and ``sb`` are the width's mask and sign bit, written as the compiler writes
constants: decimal up to 255, hexadecimal above.)
"""

from __future__ import annotations

from dataclasses import dataclass


def lit_text(v: int) -> str:
    """A constant as the compiler writes it: decimal up to 255, else hexadecimal."""
    return hex(v) if v > 255 else str(v)


@dataclass(frozen=True)
class Lit:
    """A constant; `hexed`: written in hexadecimal."""

    value: int | bool
    width: int | None = None
    hexed: bool = False


@dataclass(frozen=True)
class Slot:
    """Metadata slot ``M[index]``."""

    index: int
    width: int | None = None


@dataclass(frozen=True)
class Field:
    """Field `index` of the header whose cells local `header` names (``hN[i]``)."""

    header: str
    index: int
    width: int | None = None


@dataclass(frozen=True)
class Local:
    """A local variable or a parameter of the function."""

    name: str
    width: int | None = None


@dataclass(frozen=True)
class Elem:
    """Item `index` of the tuple local `name` holds (the values an action returns for
    its out/inout parameters)."""

    name: str
    index: int
    width: int | None = None


@dataclass(frozen=True)
class Paren:
    """`a` in parentheses the compiler writes around it (the same value)."""

    a: Expr
    width: int | None = None


@dataclass(frozen=True)
class Opaque:
    """An operand the compiler still writes as Python text (transitional)."""

    code: str
    width: int | None = None


@dataclass(frozen=True)
class Bin:
    """``a op b`` whose value needs no wrap: bitwise ``& | ^``, ``>>`` (unsigned), ``%``
    of a digest, the comparisons and ``and``/``or``; `bare`: without its parentheses
    (where the compiler writes none: the operands' precedence is Python's)."""

    op: str
    a: Expr
    b: Expr
    width: int | None = None
    bare: bool = False


@dataclass(frozen=True)
class Wrap:
    """``a op b`` wrapped to `width` bits: ``+ - *`` and ``<<``."""

    op: str
    a: Expr
    b: Expr
    width: int


@dataclass(frozen=True)
class Neg:
    """``-a`` wrapped to `width` bits."""

    a: Expr
    width: int


@dataclass(frozen=True)
class Not:
    """Boolean negation; `bare`: without its parentheses (a whole condition)."""

    a: Expr
    width: None = None
    bare: bool = False


@dataclass(frozen=True)
class Cond:
    """``c ? a : b`` of values without code to run."""

    c: Expr
    a: Expr
    b: Expr
    width: int | None = None


@dataclass(frozen=True)
class SignExt:
    """Signed `a` of `src` bits widened to `width` bits (a cast ``(int<W>)``)."""

    a: Expr
    src: int
    width: int


@dataclass(frozen=True)
class SCmp:
    """A comparison of signed values of `src` bits, through their sign bits."""

    op: str
    a: Expr
    b: Expr
    src: int
    width: None = None


@dataclass(frozen=True)
class Concat:
    """``a ++ b``: `a` above `b`'s `wb` bits."""

    a: Expr
    b: Expr
    wb: int
    width: int


@dataclass(frozen=True)
class All:
    """Conditions that must all hold (a select case's keys), without parentheses: a whole
    condition, never an operand."""

    items: tuple[Expr, ...]
    width: None = None


@dataclass(frozen=True)
class AnyOf:
    """Conditions one of which must hold (a switch's labels of one block), without
    parentheses: a whole condition, never an operand."""

    items: tuple[Expr, ...]
    width: None = None


@dataclass(frozen=True)
class ActionRun:
    """The index of the action the table apply whose entry local is `entry` ran."""

    entry: str
    width: None = None


@dataclass(frozen=True)
class Range:
    """``lo <= a <= hi`` (a select case's range)."""

    lo: Expr
    a: Expr
    hi: Expr
    width: None = None


@dataclass(frozen=True)
class Hit:
    """Whether the table apply whose entry local is `entry` hit."""

    entry: str
    width: None = None


@dataclass(frozen=True)
class Call:
    """A call of `fn`, a helper function of the generated module (or ``min``/``max``;
    the stack helpers ``_hs_at``/``_hs_last`` on `Elems`, `native.picks` reads them)."""

    fn: str
    args: tuple[Expr, ...]
    width: int | None = None


@dataclass(frozen=True)
class Digest:
    """`algo` (``crc32``, ``crc16``, ``csum16``, ``identity``) over a field list without
    varbits: `items` MSB-first, of `widths` bits, zero-padded to a whole byte, then the
    packet's payload (metadata slot `payload`) when not None.  ``csum16`` without payload
    sums the list's 16-bit words as one number (``_csum16i``) and ``identity`` is that
    number itself, without building bytes (`pyswitch.compiler.externs.digest`)."""

    algo: str
    items: tuple[Expr, ...]
    widths: tuple[int, ...]
    payload: int | None = None
    width: None = None

    @property
    def nbytes(self) -> int:
        """The field list's length in bytes."""
        return (sum(self.widths) + 7) // 8

    @property
    def as_int(self) -> bool:
        """Whether the list is taken as one number (``_csum16i``, ``identity``), not bytes."""
        return self.payload is None and self.algo in ("csum16", "identity")

    def shifts(self, bits: int) -> list[int]:
        """Each item's shift in the number of `bits` bits the list is."""
        out, s = [], bits
        for w in self.widths:
            s -= w
            out.append(s)
        return out


@dataclass(frozen=True)
class Pick:
    """The header of a stack picked at run time: item `index` of the stack's elements
    (their header locals, `elems`), the index checked by the compiler beforehand."""

    elems: tuple[str, ...]
    index: Expr
    width: None = None


@dataclass(frozen=True)
class BufRead:
    """The packet's `n` bytes from offset `start` as one big-endian number (a lookahead,
    a varbit header's fixed fields): the compiler checks the length beforehand."""

    start: Expr
    n: int
    width: int | None = None


@dataclass(frozen=True)
class SShr:
    """Signed ``a >> b`` of `width` bits: through the sign bit, wrapped to the width
    (`b` a constant below the width, or ``min(b, width)``)."""

    a: Expr
    b: Expr
    width: int


@dataclass(frozen=True)
class VbValue:
    """The value of the varbit cell `a` (a ``(length, value)`` pair, or None: 0)."""

    a: Expr
    width: None = None


@dataclass(frozen=True)
class VbDigest:
    """`algo` over a field list with varbits (their lengths known at run time): `items`
    MSB-first, of `widths` bits (None: a varbit cell, at its current length), packed by
    the module's ``_pack_bits``, then the payload (metadata slot `payload`) when not None.
    The native path lowers it from the node (`Hash.c_expr`, ``v_pack_hash``)."""

    algo: str
    items: tuple[Expr, ...]
    widths: tuple[int | None, ...]
    payload: int | None = None
    width: None = None


@dataclass(frozen=True)
class Elems:
    """The element headers of a stack (their header locals), as one tuple: the argument
    of the stack helpers ``_hs_at`` and ``_hs_last`` (`Call`), which pick one at run
    time outside the checked range too."""

    elems: tuple[str, ...]
    width: None = None


@dataclass(frozen=True)
class Str:
    """A string constant (a stack helper's place in the P4 source, for its message)."""

    value: str
    width: None = None


@dataclass(frozen=True)
class VbRead:
    """A varbit header's varbit read from the packet: its cell, ``(n, value)``, of `n`
    bits (a multiple of 8, checked beforehand with the packet's length) from offset
    `start`, big-endian."""

    n: Expr
    start: Expr
    width: None = None


@dataclass(frozen=True)
class ToBytes:
    """`a` as `n` big-endian bytes (a varbit header's fixed fields, an emit's piece)."""

    a: Expr
    n: int
    width: None = None


@dataclass(frozen=True)
class VbBytes:
    """The bytes of the varbit cell `a` at its length (none for an empty varbit): an
    emit's piece."""

    a: Expr
    width: None = None


Expr = (Lit | Slot | Field | Local | Elem | Paren | Opaque | Bin | Wrap | Neg | Not | Cond | SignExt | SCmp
        | Concat | All | AnyOf | Range | Hit | ActionRun | Call | Digest | Pick | BufRead | SShr
        | VbValue | VbDigest | Elems | Str | VbRead | ToBytes | VbBytes)
KINDS = (Lit, Slot, Field, Local, Elem, Paren, Opaque, Bin, Wrap, Neg, Not, Cond, SignExt, SCmp, Concat,
         All, AnyOf, Range, Hit, ActionRun, Call, Digest, Pick, BufRead, SShr, VbValue, VbDigest,
         Elems, Str, VbRead, ToBytes, VbBytes)


def _mask(w: int) -> str:
    return lit_text((1 << w) - 1)


def text(n: Expr) -> str:  # noqa: C901 - one case per kind
    """Node `n` as the Python the compiler writes for it."""
    if isinstance(n, Lit):
        if isinstance(n.value, bool) or not n.hexed:
            return str(n.value)
        return hex(n.value)
    if isinstance(n, Slot):
        return f"M[{n.index}]"
    if isinstance(n, Field):
        return f"{n.header}[{n.index}]"
    if isinstance(n, Local):
        return n.name
    if isinstance(n, Elem):
        return f"{n.name}[{n.index}]"
    if isinstance(n, Paren):
        return f"({text(n.a)})"
    if isinstance(n, Opaque):
        return n.code
    if isinstance(n, Bin):
        s = f"{text(n.a)} {n.op} {text(n.b)}"
        return s if n.bare else f"({s})"
    if isinstance(n, Wrap):
        return f"(({text(n.a)} {n.op} {text(n.b)}) & {_mask(n.width)})"
    if isinstance(n, Neg):
        return f"(-{text(n.a)} & {_mask(n.width)})"
    if isinstance(n, Not):
        return f"not {text(n.a)}" if n.bare else f"(not {text(n.a)})"
    if isinstance(n, Cond):
        return f"({text(n.a)} if {text(n.c)} else {text(n.b)})"
    if isinstance(n, SignExt):
        sb = lit_text(1 << (n.src - 1))
        return f"((({text(n.a)}) ^ {sb}) - {sb} & {_mask(n.width)})"
    if isinstance(n, SCmp):
        sb = lit_text(1 << (n.src - 1))
        return f"(({text(n.a)} ^ {sb}) {n.op} ({text(n.b)} ^ {sb}))"
    if isinstance(n, Concat):
        return f"(({text(n.a)} << {n.wb}) | {text(n.b)})"
    if isinstance(n, All):
        return " and ".join(text(x) for x in n.items)
    if isinstance(n, AnyOf):
        return " or ".join(text(x) for x in n.items)
    if isinstance(n, ActionRun):
        return f"{n.entry}.aidx"
    if isinstance(n, Range):
        return f"{text(n.lo)} <= {text(n.a)} <= {text(n.hi)}"
    if isinstance(n, Hit):
        return f"{n.entry}.hit"
    if isinstance(n, Call):
        return f"{n.fn}({', '.join(text(x) for x in n.args)})"
    if isinstance(n, Digest):
        return _digest_text(n)
    return _text_more(n)


def _text_more(n: Expr) -> str:  # noqa: C901 - one case per kind
    if isinstance(n, Pick):
        return f"({''.join(h + ', ' for h in n.elems)})[{text(n.index)}]"
    if isinstance(n, Elems):
        return f"({''.join(h + ', ' for h in n.elems)})"
    if isinstance(n, Str):
        return repr(n.value)
    if isinstance(n, BufRead):
        s = text(n.start)
        return f"int.from_bytes(buf[{s}:{s} + {n.n}], 'big')"
    if isinstance(n, SShr):
        sb = lit_text(1 << (n.width - 1))
        return f"((({text(n.a)} ^ {sb}) - {sb} >> {text(n.b)}) & {_mask(n.width)})"
    if isinstance(n, VbValue):
        a = text(n.a)
        return f"({a}[1] if {a} else 0)"
    if isinstance(n, VbDigest):
        parts = [f"({text(x)} or (0, 0))" if w is None else f"({w}, {text(x)})"
                 for x, w in zip(n.items, n.widths, strict=True)]
        data = f"_pack_bits(({''.join(p + ', ' for p in parts)}))"
        if n.payload is not None:
            data = f"({data} + M[{n.payload}])"
        return f"_{n.algo}({data})"
    if isinstance(n, VbRead):
        s, c = text(n.start), text(n.n)
        return f"({c}, int.from_bytes(buf[{s}:{s} + {c} // 8], 'big'))"
    if isinstance(n, ToBytes):
        return f"{text(n.a)}.to_bytes({n.n}, 'big')"
    if isinstance(n, VbBytes):
        a = text(n.a)
        return f"({a}[1].to_bytes({a}[0] // 8, 'big') if {a} else b'')"
    raise TypeError(f"not an expression node: {n!r}")


def _digest_text(d: Digest) -> str:
    if d.as_int and d.algo == "csum16":
        nb = d.nbytes
        parts = [f"(({text(x)}) << {s % 16})" if s % 16 else f"({text(x)})"
                 for x, s in zip(d.items, d.shifts((nb + nb % 2) * 8), strict=True)]
        return f"_csum16i(({' + '.join(parts) or '0'}))"
    packed = _packed_text(d)
    if d.as_int:
        return f"({packed} & 0xffffffffffffffff)"
    data = f"{packed}.to_bytes({d.nbytes}, 'big')"
    if d.payload is not None:
        data = f"({data} + M[{d.payload}])"
    return f"_{d.algo}({data})"


def _packed_text(d: Digest) -> str:
    parts = [f"({text(x)} << {s})" if s else text(x)
             for x, s in zip(d.items, d.shifts(d.nbytes * 8), strict=True)]
    return f"({' | '.join(parts) or '0'})"


def operands(n: Expr) -> tuple[Expr, ...]:
    """The nodes `n` is made of (none for a leaf)."""
    if isinstance(n, (Bin, Wrap, SCmp, Concat, SShr)):
        return (n.a, n.b)
    if isinstance(n, (Neg, Not, SignExt, Paren, VbValue, ToBytes, VbBytes)):
        return (n.a,)
    if isinstance(n, VbRead):
        return (n.n, n.start)
    if isinstance(n, Pick):
        return (n.index,)
    if isinstance(n, BufRead):
        return (n.start,)
    if isinstance(n, Cond):
        return (n.c, n.a, n.b)
    if isinstance(n, Range):
        return (n.lo, n.a, n.hi)
    if isinstance(n, (All, AnyOf, Digest, VbDigest)):
        return n.items
    if isinstance(n, Call):
        return n.args
    return ()


def opaque(n: Expr) -> bool:
    """Whether `n` holds text still (an `Opaque` anywhere in it)."""
    return isinstance(n, Opaque) or any(opaque(x) for x in operands(n))
