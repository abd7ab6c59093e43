"""Data model of the compiler: storage locations, compiled expressions, actions, tables,
scopes and the code emitter (the externs: `pyswitch.externs`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyswitch.ir import Assign, If, Line, ModuleItem, Pass, PyExpr, PyText, Stmt, shift
from pyswitch.ir.exprs import Bin, Expr, Field, Lit, Local, Opaque, Slot, text
from pyswitch.types import (
    BOOL,
    Bits,
    HeaderTy,
    StackTy,
    StructTy,
    Ty,
)

DROP_PORT = 511
HASH_ALGOS = {"crc32": "crc32", "crc16": "crc16", "csum16": "csum16", "identity": "identity"}
STD_FIELDS_SET_BY_SWITCH = ("ingress_port", "egress_spec", "egress_port", "instance_type",
                            "packet_length", "mcast_grp", "egress_rid", "checksum_error",
                            "parser_error")


# ----------------------------------------------------------------------------- locations
@dataclass
class ScalarLoc:
    """A scalar l-value: its Python `code` and, where the compiler made one, its read's
    node (`pyswitch.ir.exprs`: a slot, a header's field, a local)."""

    code: str
    ty: Ty
    node: Expr | None = None


def bits_width(ty: Ty | None) -> int | None:
    """The width of ``bit<N>``/``int<N>`` type `ty` (None for any other type)."""
    return ty.width if isinstance(ty, Bits) else None


def slot_loc(j: int, ty: Ty) -> ScalarLoc:
    """Metadata slot `j` of type `ty`."""
    return ScalarLoc(f"M[{j}]", ty, Slot(j, bits_width(ty)))


def field_loc(var: str, i: int, ty: Ty) -> ScalarLoc:
    """Field `i` (of type `ty`) of the header whose cells local `var` names."""
    return ScalarLoc(f"{var}[{i}]", ty, Field(var, i, bits_width(ty)))


def local_loc(name: str, ty: Ty) -> ScalarLoc:
    """Local `name` (or a parameter) of type `ty`."""
    return ScalarLoc(name, ty, Local(name, bits_width(ty)))


@dataclass
class HdrLoc:
    slot: int
    ty: HeaderTy

    @property
    def var(self) -> str:
        return f"h{self.slot}"


@dataclass
class StructLoc:
    ty: StructTy
    fields: dict[str, Any]


@dataclass
class StackLoc:
    ty: StackTy
    elems: list[HdrLoc]
    nxt: HdrLoc | None = None  # hidden slot of BMv2's next index (see compiler.stacks)


@dataclass
class Const:
    value: Any
    ty: Ty


@dataclass
class E:
    """A compiled expression: Python source `code` of type `ty` (value normalised to the
    type's range), its compile-time value `const` if known, its location if l-value, and
    its `node` (`pyswitch.ir.exprs`) where the compiler made one (`code` is its print:
    `of`)."""

    code: str
    ty: Ty
    const: Any = None
    loc: Any = None
    node: Expr | None = None

    @classmethod
    def of(cls, node: Expr, ty: Ty, const: Any = None, loc: Any = None) -> E:
        """The expression of `node`, of type `ty`."""
        return cls(text(node), ty, const, loc, node)

    def as_node(self) -> Expr:
        """This expression as an operand node: its own, a constant's `Lit`, else its text
        (`Opaque`)."""
        if self.node is not None:
            return self.node
        w = bits_width(self.ty)
        v = self.const
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0 and \
                self.code in (str(v), hex(v)):
            return Lit(v, w, self.code != str(v))
        if isinstance(v, int) and (self.code == str(v)):  # a bool, or a negative constant
            return Lit(v, w)
        return Opaque(self.code, w)

    def py(self) -> PyExpr:
        """This expression in a statement of the IR (its node, a constant's `Lit`, or its
        text)."""
        w = bits_width(self.ty)
        n = self.as_node()
        return PyExpr(self.code, w) if isinstance(n, Opaque) else PyExpr.of(n, w)


@dataclass
class ExternInst:
    kind: str  # register, counter, direct_counter
    name: str  # P4Info name
    var: str
    size: int = 0
    elem: Ty | None = None
    ctype: str = ""


@dataclass
class PacketRef:
    direction: str  # 'in' or 'out'


@dataclass
class ActionDef:
    name: str  # P4Info name
    local: str
    idx: int
    fn: str
    params: list[tuple[str, str, Ty]]  # (direction, name, type)
    annotations: dict[str, list]
    node: Any


@dataclass
class TableDef:
    name: str
    local: str
    idx: int
    var: str
    keys: list[dict]
    actions: list[tuple[ActionDef, str]]  # (action, scope TABLE_AND_DEFAULT/TABLE_ONLY/...)
    default: tuple[ActionDef, list[int]]
    default_const: bool
    const_entries: list[dict] | None
    size: int
    direct_counter: ExternInst | None
    node: Any


@dataclass
class TableApply:
    table: TableDef


@dataclass
class ApplyResult:
    table: TableDef
    var: str


@dataclass
class Method:
    obj: Any
    name: str
    node: Any


@dataclass
class FuncRef:
    name: str


@dataclass
class TypeRef:
    ty: Ty


class Scope:
    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Any] = {}
        self.readonly: set[str] = set()  # `in` parameters of an instantiated control

    def lookup(self, name: str) -> Any:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None


class Emitter:
    """Collects a body of the intermediate form (`pyswitch.ir`): each statement at the
    current depth.  ``em("text")`` adds a line the compiler still writes as Python text
    (`pyswitch.ir.PyText`, transitional); ``em.emit(node)`` a statement of its own.  A
    structured statement's body is collected by a child (`sub`, one level deeper), then
    given to the statement (`emit_if`, `nested`)."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.ind = 1

    def __call__(self, line: str) -> None:
        self.lines.append(Line(self.ind, PyText(line)))

    def emit(self, st: Stmt) -> None:
        """Add IR statement `st` at the current depth."""
        self.lines.append(Line(self.ind, st))

    def assign(self, target: str | E, value: str | E) -> None:
        """``target = value`` (`pyswitch.ir.Assign`): `target` one l-value expression
        (each Python text, or a compiled expression with its node; a target that is a
        name is a local the compiler made, a `Local` node)."""
        if isinstance(target, str) and target.isidentifier():
            target = E.of(Local(target), None)
        self.emit(Assign(px(target), px(value)))

    def sub(self) -> Emitter:
        """An emitter for a body one level deeper than the current depth."""
        child = Emitter()
        child.ind = self.ind + 1
        return child

    def nested(self, lines: list[Line]) -> tuple[Line, ...]:
        """`lines` (collected one level deeper than here, `sub`) as a structured
        statement's body, counted from the statement's line; a `Pass` if there are none."""
        body = shift(lines, self.ind) or [Line(1, Pass())]
        if any(ln.ind < 1 for ln in body):
            raise ValueError("a body line above its statement")
        return tuple(body)

    def emit_if(self, cond: str | E, then: list[Line], else_: list[Line] | None = None) -> None:
        """``if cond:`` `then` (``else:`` `else_`), each collected by `sub`."""
        self.emit(If(px(cond), self.nested(then),
                     None if else_ is None else self.nested(else_)))

    def emit_inline_if(self, cond: str | E, then: Stmt, else_: Stmt | None = None) -> None:
        """``if cond: then`` (``else: else_`` on the next line): each one statement of one
        line (`pyswitch.ir.If.inline`)."""
        self.emit(If(px(cond), (Line(1, then),),
                     None if else_ is None else (Line(1, else_),), inline=True))

    def emit_chain(self, arms: list[tuple[str | E, list[Line]]],
                   else_: list[Line] | None = None) -> None:
        """``if c0: ... elif c1: ... else: ...``: `arms` (condition, body) in order, each
        body collected by `sub`."""
        self.emit(self.chain(arms, else_))

    def chain(self, arms: list[tuple[str | E, list[Line]]], else_: list[Line] | None) -> If:
        """The `If` of `emit_chain`."""
        tail: If | None = None
        for cond, body in reversed(arms):
            if tail is None:
                tail = If(px(cond), self.nested(body),
                          None if else_ is None else self.nested(else_))
            else:
                tail = If(px(cond), self.nested(body), (Line(1, tail),), elif_=True)
        assert tail is not None
        return tail

    def indent(self) -> None:
        self.ind += 1

    def dedent(self) -> None:
        self.ind -= 1


def too_short(n: int) -> PyExpr:
    """Whether fewer than `n` bytes are left after the parser's cursor (``pos + n > L``)."""
    return PyExpr.of(Bin(">", Bin("+", Local("pos"), Lit(n), bare=True), Local("L"),
                         bare=True))


def nlit(v: int) -> Lit:
    """Constant `v` written as the compiler writes constants (`_lit`)."""
    return Lit(v, None, v > 255)


def valid_e(var: str) -> E:
    """The valid bit of the header whose cells local `var` names (``var[0]``)."""
    if not var.isidentifier():
        return E(f"{var}[0]", BOOL)
    return E.of(Field(var, 0), BOOL)


def px(v: str | E) -> PyExpr:
    """Text or a compiled expression as an expression of the IR (text that is a constant
    the compiler wrote, ``True``, ``False`` or a decimal number, as a `Lit`)."""
    if isinstance(v, E):
        return v.py()
    if v in ("True", "False"):
        return PyExpr.of(Lit(v == "True"))
    if v.isdigit() and str(int(v)) == v:
        return PyExpr.of(Lit(int(v)))
    return PyExpr(v)


def _lit(v: int) -> str:
    return hex(v) if v > 255 else str(v)


@dataclass
class Program0:
    """Result of compilation (wrapped by `pyswitch.program.Program`): the generated
    Python `code` (the Python back end's print of `ir`), the run-time `meta`, the tables,
    and the intermediate form `ir` the native path lowers from."""

    code: str
    meta: dict
    tables: list[TableDef] = field(default_factory=list)
    ir: list[ModuleItem] = field(default_factory=list)


