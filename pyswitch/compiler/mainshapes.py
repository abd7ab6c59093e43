"""Top-level instantiations besides ``V1Switch(...) main;``, and the shapes of ``main``.

- An extern instantiated at top level (``register<bit<8>>(256) r;``) is one instance that
  every control shares, named without a control prefix in P4Info (``r``), as p4c does.
- A parser or control instantiated at top level (``MyIngress() ig;``) may be passed to
  ``main`` by name: ``V1Switch(p, vc, ig, eg, ck, dep) main;`` means the same as
  ``V1Switch(P(), VC(), MyIngress(), ...)`` (its tables keep the control's name, as p4c's
  P4Info has them). Its constructor takes no arguments, as for the blocks written inline.
- ``main``'s arguments may be named after V1Switch's parameters
  (``V1Switch(p = P(), vr = VC(), ig = I(), eg = E(), ck = CC(), dep = D()) main;``), in
  any order.
"""

from __future__ import annotations

from typing import Any

from lark import Tree

from pyswitch.compiler.model import ExternInst
from pyswitch.types import ExternTy

# v1model's `package V1Switch<H, M>(p, vr, ig, eg, ck, dep)`
V1SWITCH_PARAMS = ["p", "vr", "ig", "eg", "ck", "dep"]


class MainShapes:
    """See module docstring."""

    def top_instantiation(self, d: Tree, ch: list, ann: dict) -> bool:
        """A top-level instantiation other than main; False if it is not one of ours."""
        ty = self.resolve_type(ch[0])
        nm = self.name_of(ch[2])
        if not isinstance(ty, ExternTy):
            return False
        if ty.name in self.parsers or ty.name in self.controls:
            if ty.args or any(a is not None for a in ch[1].children):
                raise self.err(d, f"top-level instance {nm!r}: constructor arguments are not "
                                  "supported by pyswitch")
            if nm in self.glob.names:
                raise self.err(d, f"{nm!r} is already declared")
            self.top_blocks = getattr(self, "top_blocks", {})
            self.top_blocks[nm] = Tree("ctor_call", [ty.name, ch[1]], d.meta)
            return True
        if ty.name in ("register", "counter"):
            saved = (self.ctrl_name, self.ctrl_kind)
            self.ctrl_name, self.ctrl_kind = "", "toplevel"
            try:
                self.instantiate(ch, ann, self.glob, d)
            finally:
                self.ctrl_name, self.ctrl_kind = saved
            if not isinstance(self.glob.names.get(nm), ExternInst):
                raise self.err(d, f"top-level instance {nm!r} is not supported by pyswitch")
            return True
        return False

    def main_args(self, main: Tree, args: list) -> list:
        """main's six blocks in V1Switch's order, each a ``ctor_call`` (an argument naming
        a top-level instance becomes one)."""
        if args and all(isinstance(a, Tree) and a.data == "named_arg" for a in args):
            by_name: dict[str, Any] = {}
            for a in args:
                pn = self.name_of(a.children[0])
                if pn not in V1SWITCH_PARAMS:
                    raise self.err(a, f"V1Switch has no parameter {pn!r} (it has "
                                      f"{', '.join(V1SWITCH_PARAMS)})")
                if pn in by_name:
                    raise self.err(a, f"argument {pn!r} given twice")
                by_name[pn] = a.children[1]
            missing = [p for p in V1SWITCH_PARAMS if p not in by_name]
            if missing:
                raise self.err(main, f"V1Switch arguments missing: {', '.join(missing)}")
            args = [by_name[p] for p in V1SWITCH_PARAMS]
        elif any(isinstance(a, Tree) and a.data == "named_arg" for a in args):
            raise self.err(main, "V1Switch's arguments must be all named or all positional")
        out = []
        for a in args:
            if isinstance(a, Tree) and a.data == "ident":
                blk = getattr(self, "top_blocks", {}).get(str(a.children[0]))
                if blk is None:
                    raise self.err(a, f"{a.children[0]!s} is not a parser or control "
                                      "instance declared at top level")
                a = blk
            out.append(a)
        return out
