"""Control blocks: their local declarations, variables and instances of externs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lark import Tree

from pyswitch import externs
from pyswitch.compiler.model import (
    Emitter,
    HdrLoc,
    ScalarLoc,
    Scope,
    StackLoc,
    StructLoc,
    local_loc,
)
from pyswitch.ir import (
    Assign,
    Body,
    Break,
    Continue,
    CopyOutCall,
    Emit,
    EmitVarbit,
    ExitScope,
    Function,
    HeaderAlias,
    HeaderCopy,
    HeaderSet,
    HeaderSwap,
    If,
    Line,
    Loop,
    Pass,
    PyExpr,
    PyText,
    Return,
    Seq,
    SiblingsInvalid,
    Stmt,
    shift,
    unshared,
    walk,
)
from pyswitch.ir.exprs import Lit
from pyswitch.types import (
    Bits,
    BoolTy,
    EnumTy,
    ErrorTy,
    ExternTy,
    IntLit,
    StringTy,
    Ty,
    VoidTy,
)

INT32_MAX = (1 << 31) - 1  # P4Info's size fields (register, counter) are int32
# the statements of a deparser whose emits get the fast path (`merge_emits`): those it had
# when the pass was over the deparser's text (the emits, with the assignments, ifs and
# loops around them, and what was text then: whole headers, calls that copy out)
TEXT_LIKE = (PyText, Assign, If, Loop, Break, Continue, Pass, Return, Seq, Emit, HeaderCopy,
             HeaderSet, HeaderSwap, CopyOutCall, EmitVarbit, SiblingsInvalid)


class Controls:
    """See module docstring."""

    def compile_control(self, kind: str, nm: str, node: Tree, params: list, h_ty: Ty,
                        m_ty: Ty) -> None:
        ch = self.strip_annots(node.children)
        scope = Scope(self.glob)
        kinds = {"verify": ["H", "M"], "compute": ["H", "M"], "ingress": ["H", "M", "SM"],
                 "egress": ["H", "M", "SM"], "deparser": ["packet_out", "H"]}[kind]
        self.bind_block_params(scope, params, kinds, node)
        self.ctrl_name, self.ctrl_kind = nm, kind
        self.used_slots = set()
        body = Emitter()
        body.ind = 2
        # locals; instances applied later add their initialisers here too
        init = Emitter()
        init.ind = 2
        self.block_init, self.inst_stack, self.sub_depth = init, [nm], 0
        for item in ch[4:-1]:
            self.local_decl(item, scope, init)
        self.locals_ok = True
        self.block(ch[-1], Scope(scope), body)
        self.locals_ok = False
        body.lines[:0] = init.lines
        self.block_init = None
        params_py = ["S", "M", "out"] if kind == "deparser" else ["S", "M"]
        if kind == "deparser" and all(isinstance(st, TEXT_LIKE) for st in walk(body.lines)):
            body.lines = self.merge_emits(body.lines)  # runs of emits: compiler.parser
        self.emit_function(kind, params_py, body, pre=[], post=[], scope=ExitScope)

    def emit_function(self, fname: str, params: list[str], body: Emitter, pre: list[Stmt],
                      post: list[Stmt], scope: Callable[[Body], Stmt] | None = None) -> None:
        """Function `fname`: the aliases of the headers it uses, `pre` (statements),
        `body` (``pass`` if empty) -- inside the statement `scope` makes of it (a block's
        `ExitScope`, the parser's `ParserScope`), collected one level deeper then -- and
        `post`."""
        lines = [Line(1, HeaderAlias(f"h{s}", s)) for s in sorted(self.used_slots)]
        lines += [Line(1, p) for p in pre]
        if not body.lines:
            body.emit(Pass())
        if scope is None:
            lines.extend(body.lines)
        else:
            lines.append(Line(1, scope(tuple(shift(body.lines, 1)))))
        lines += [Line(1, p) for p in post]
        self.module.append(Function(fname, tuple(params), unshared(lines)))

    def local_decl(self, item: Tree, scope: Scope, em: Emitter) -> None:
        k = item.data
        ch = self.strip_annots(item.children)
        ann = self.annotations(item.children)
        self.check_duplicate_decl(item, ch, scope)
        if k == "const_decl":
            self.decl_const(ch, scope)
        elif k == "var_decl":
            self.var_decl(ch, scope, em, item)
        elif k == "instantiation":
            self.instantiate(ch, ann, scope, item)
        elif k == "action_decl":
            self.action_decl(item, scope)
        elif k == "table_decl":
            self.table_decl(item, scope)
        elif k == "value_set_decl":
            raise self.err(item, "value_set is not supported by pyswitch")
        else:
            raise self.err(item, f"unsupported local declaration ({k})")

    # where the declared name sits among the children (annotations stripped)
    _DECL_NAME_AT = {"const_decl": 1, "var_decl": 1, "instantiation": 2, "action_decl": 0,
                     "table_decl": 0}

    def check_duplicate_decl(self, item: Tree, ch: list, scope: Scope) -> None:
        """p4c: "x: Duplicates declaration x" for two declarations of one name in one
        control; without it the later one silently replaced the first (and two tables of
        one name gave a P4Info with two tables of one id)."""
        at = self._DECL_NAME_AT.get(item.data)
        if at is None or at >= len(ch) or ch[at] is None:
            return
        nm = self.name_of(ch[at])
        seen = scope.__dict__.setdefault("decl_nodes", {})
        prev = seen.get(nm)
        if prev is not None and prev[0] is not item:
            first = self.err(prev[1], "")
            raise self.err(ch[at], f"{nm}: Duplicates declaration {nm} (previous declaration "
                                   f"at {first.file}:{first.line}:{first.col})")
        seen[nm] = (item, ch[at])

    def pname(self, local: str, ann: dict) -> str:
        if "name" in ann and ann["name"]:
            n = ann["name"][0]
            if isinstance(n, str):
                return n[1:] if n.startswith(".") else f"{self.ctrl_name}.{n}"
        return f"{self.ctrl_name}.{local}" if self.ctrl_name else local

    def instantiate(self, ch: list, ann: dict, scope: Scope, node: Tree) -> None:
        ty = self.resolve_type(ch[0])
        nm = self.name_of(ch[2])
        args = [a for a in ch[1].children if a is not None]
        if isinstance(ty, ExternTy) and (ty.name in self.controls or ty.name in self.parsers) \
                and not ty.args:
            scope.names[nm] = self.control_instance(ty, nm, args, ann, scope, node)
            return
        ext = externs.obj(ty.name) if isinstance(ty, ExternTy) else None
        if ext is None:
            raise self.err(node, f"cannot instantiate {ty.show()!r} here (only "
                                 f"{', '.join(e.names[0] for e in externs.objects())} "
                                 "are supported)")
        inst = ext.instantiate(self, ty, self.pname(nm, ann), args, scope, node)
        inst.node = node  # type: ignore[attr-defined]  # its annotations go to P4Info
        scope.names[nm] = inst

    def extern_size(self, arg: Any, scope: Scope, kind: str) -> int:
        """A register's or counter's size: P4Info stores it as an int32, so a larger one
        (v1model's bit<32> allows 2^32-1) could never reach a controller; refuse it here
        with its location rather than fail while building P4Info."""
        size = self.const_int(arg, scope)
        if not 0 <= size <= INT32_MAX:
            raise self.err(arg, f"{kind} size {size} is out of range (0..{INT32_MAX}, "
                                "P4Info's int32)")
        return size

    def var_decl(self, ch: list, scope: Scope, em: Emitter, node: Tree) -> None:
        ty = self.resolve_type(ch[0])
        nm = self.name_of(ch[1])
        if isinstance(ty, (IntLit, StringTy, VoidTy, ExternTy)):
            raise self.err(node, f"variables of type {ty.show()} are not supported")
        if (self.in_action is not None or self.locals_ok) and \
                isinstance(ty, (Bits, BoolTy, EnumTy, ErrorTy)):
            loc: Any = local_loc(self.new_tmp("v"), ty)
        else:
            loc = self.alloc(f"{self.ctrl_name}.{nm}", ty)
        scope.names[nm] = loc
        if ch[2] is not None:
            self.assign_to(loc, ch[2], scope, em, node)
        else:
            self.reset(loc, em)

    def reset(self, loc: Any, em: Emitter) -> None:
        if isinstance(loc, ScalarLoc):
            em.assign(self.loc_e(loc), 'False' if isinstance(loc.ty, BoolTy) else '0')
        elif isinstance(loc, HdrLoc):
            self.used_slots.add(loc.slot)
            em.emit(HeaderSet(loc.var, False, tuple(PyExpr.of(Lit(0)) for _ in loc.ty.fields)))
        elif isinstance(loc, StackLoc):
            for e in loc.elems:
                self.reset(e, em)
            self.stack_reset_next(loc, em)  # see compiler.stacks
        elif isinstance(loc, StructLoc):
            for sub in loc.fields.values():
                self.reset(sub, em)
