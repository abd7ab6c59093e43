"""P4 types as pyswitch models them, and the run-time representation of each.

Run-time values: ``bit<W>``/``int<W>`` are Python ints in ``[0, 2**W)`` (``int<W>`` in two's
complement, so + - * wrap with one mask and only comparisons, ``>>`` and widening casts need
the sign); ``bool`` is a Python bool; enums and ``error`` are ints; a header instance is a
Python list ``[valid, f1, ..., fn]``; structs are flattened at compile time into their leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Ty:
    """Base class of types."""

    def show(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Bits(Ty):
    width: int
    signed: bool = False

    def show(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True)
class NewBits(Bits):
    """A ``type bit<N> T`` declaration: a distinct type with bit<N>'s representation
    (P4_16 §7.6).  It compares unequal to bit<N>, so mixing the two needs a cast."""

    name: str = ""

    def show(self) -> str:
        return self.name


@dataclass(frozen=True)
class IntLit(Ty):
    """The type of unsized integer constants (arbitrary precision, compile time only)."""

    def show(self) -> str:
        return "int"


@dataclass(frozen=True)
class BoolTy(Ty):
    def show(self) -> str:
        return "bool"

    @property
    def width(self) -> int:
        """A bool header field is one bit on the wire (its value is 0/1 or False/True)."""
        return 1


@dataclass(frozen=True)
class ErrorTy(Ty):
    def show(self) -> str:
        return "error"


@dataclass(frozen=True)
class StringTy(Ty):
    def show(self) -> str:
        return "string"


@dataclass(frozen=True)
class VoidTy(Ty):
    def show(self) -> str:
        return "void"


@dataclass(eq=False)
class HeaderTy(Ty):
    name: str
    fields: list[tuple[str, Ty]] = field(default_factory=list)
    annotations: dict[str, list] = field(default_factory=dict)

    def show(self) -> str:
        return f"header {self.name}"

    @property
    def width(self) -> int:
        return sum(t.width for _, t in self.fields)  # type: ignore[attr-defined]

    def index(self, fname: str) -> int:
        for i, (n, _) in enumerate(self.fields):
            if n == fname:
                return i + 1
        return -1


@dataclass(eq=False)
class StructTy(Ty):
    name: str
    fields: list[tuple[str, Ty]] = field(default_factory=list)
    # field name -> the indices of its @field_list annotation (v1model's preserved fields)
    field_lists: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def show(self) -> str:
        return f"struct {self.name}"


@dataclass(eq=False)
class StackTy(Ty):
    elem: HeaderTy
    size: int

    def show(self) -> str:
        return f"{self.elem.name}[{self.size}]"


@dataclass(eq=False)
class EnumTy(Ty):
    name: str
    members: dict[str, int]
    underlying: Bits | None = None

    def show(self) -> str:
        return f"enum {self.name}"


@dataclass(eq=False)
class ExternTy(Ty):
    name: str
    args: tuple = ()

    def show(self) -> str:
        return self.name


@dataclass(frozen=True)
class MatchKindTy(Ty):
    def show(self) -> str:
        return "match_kind"


BOOL = BoolTy()
INTLIT = IntLit()
ERROR = ErrorTy()
VOID = VoidTy()


def same_type(a: Ty, b: Ty) -> bool:
    """Structural equality for scalar types, identity for declared aggregates."""
    if isinstance(a, (HeaderTy, StructTy, EnumTy, ExternTy)):
        return a is b
    if isinstance(a, StackTy) and isinstance(b, StackTy):
        return a.elem is b.elem and a.size == b.size
    return a == b
