"""The externs pyswitch knows, as a registry: one class per extern (or family of externs)
declaring everything about it in one place (docs/pyswitch-api.md, "Externs").

An `Extern` says

- which P4 names it serves (`names`), whether they are functions or an extern object
  (`kind`), and its P4 declaration (`signature`, as v1model.p4 has it);
- how a call is checked and lowered (`call` for a function, `instantiate` and `method` for
  an object), using the compiler it is handed: to the intermediate form (`pyswitch.ir`: a
  register's `RegRead`/`RegWrite`, a counter's `CounterCount`) or, not yet converted, to
  Python text;
- the Python helpers that generated code calls (`runtime`, bound to one switch) and which of
  them are pure (`pure`: ComputeChecksum and the deparser may call them);
- how the native path takes those helpers (`c_expr`: the C of the expression node that
  calls one; `bounds`, the interval of a helper's result the IR has no rule for; `c_support`, C functions the generated module needs) and an object's statements
  (`c_node`: the C of its IR statements; `c_values`);
- an object's state in a switch (`meta_key`, `meta_entries`, `state`), and its P4Info and
  BMv2-JSON entries (`p4info_symbols`, `p4info`, `bmv2_json`);
- or, for an extern pyswitch does not run, why (`Refused`).

Adding an extern is one module in this package defining ``EXTERNS = [...]``; `registry()`
finds every module here.  The modules are loaded on first use, not on import, because they
lower through the compiler, which itself asks the registry.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import pkgutil
from typing import Any

__all__ = ["Extern", "Refused", "add", "digest", "function", "obj", "registry", "served"]


class Extern:
    """One extern or family of externs (see the module docstring); subclasses override
    what applies to them.  Class attributes, so that an extern is declared, not built."""

    names: tuple[str, ...] = ()
    kind: str = "function"  # function | object
    signature: str = ""  # the P4 declaration(s), as v1model.p4 gives them
    served: str = ""  # one line: how the Python and the native path run it
    pure: tuple[str, ...] = ()  # helpers of `runtime` that read nothing but their arguments
    c_support: str = ""  # C functions (after runtime.h) that `c_expr` uses
    meta_key: str = ""  # object externs: the program meta's list of instances
    order: int = 50  # object externs: P4Info's symbol order (p4c's collection order)
    p4info_kind: str = ""  # object externs: their kind in P4Info (a name of p4info.ids.P)

    # -- compiler ------------------------------------------------------------------
    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> Any:
        """Check and lower a call of extern function `fn` (emitting with `em`); returns
        an expression (`pyswitch.compiler.model.E`) or None for a statement."""
        raise cx.err(node, f"{fn} is not a function")

    def instantiate(self, cx: Any, ty: Any, full: str, args: list, scope: Any,
                    node: Any) -> Any:
        """The instance (`ExternInst`) of ``ty`` named `full` (its P4Info name)."""
        raise cx.err(node, f"cannot instantiate {ty.show()!r}")

    def method(self, cx: Any, inst: Any, mn: str, args: list, scope: Any, em: Any,
               node: Any) -> Any:
        """Check and lower ``inst.mn(args)``, like `call`."""
        raise cx.err(node, f"unknown extern method {mn!r}")

    def meta_entries(self, insts: list) -> list[dict]:
        """The program meta's entries (plain data) for this object's instances."""
        return []

    # -- the switch ----------------------------------------------------------------
    def runtime(self, sw: Any) -> dict[str, Any]:
        """Names the generated Python calls, bound to switch `sw` (its random generator)."""
        return {}

    def state(self, sw: Any, ns: dict[str, Any], entries: list[dict]) -> None:
        """Create this object's state in switch `sw` from its meta `entries`: the
        control plane's view (an attribute of `sw`) and the names the code uses (`ns`)."""

    # -- the native path -----------------------------------------------------------
    def native_state(self, sw: Any, ns: dict[str, Any], entries: list[dict], mod: Any) -> None:
        """Move this object's state into C memory for the native module `mod` before it
        is bound (a register's cells), replacing its Python objects in `ns` and in the
        control plane's view by views of the same memory; NotNative when it cannot."""

    def bounds(self, node: Any, args: list[tuple[int, int] | None]) -> tuple[int, int] | None:
        """The interval of the value of `node`, a `Call` of one of this extern's helpers
        that `pyswitch.ir.bounds` has no rule of its own for, from its arguments'
        intervals (`args`, None where one has none); None: not proven (the native path
        then refuses the call)."""
        return None

    def c_expr(self, t: Any, f: Any, node: Any, line: int) -> Any:
        """The C (a string) of expression node `node` (`pyswitch.ir.exprs`: a `Digest`, a
        `VbDigest`, a `Call` of a helper) that calls one of this extern's helpers, read
        from the node's fields, at line `line` of function `f` of translator `t`; its
        interval is the IR's (`pyswitch.ir.bounds`; a helper's call it has no rule for:
        `bounds`).  None (or NotNative, with the reason) for what it does not take."""
        return None

    def c_values(self, entries: list[dict]) -> dict[str, tuple[int, int]]:
        """The Python lists of this object whose items the C reads as values, with their
        range (a register's cells), by the name the generated code uses."""
        return {}

    def c_node(self, t: Any, f: Any, node: Any, o: list[str], d: int) -> bool:
        """Write the C of IR statement `node` (`pyswitch.ir`: a register's `RegRead`,
        `RegWrite`, a counter's `CounterCount`) into `o` at depth `d`, in function `f` of translator `t`, when it is
        this object's; False when it is not."""
        return False


    # -- the control plane's descriptions ------------------------------------------
    def p4info_symbols(self, sym: Any, entries: list[dict], xi: dict) -> None:
        """Add this object's instances to P4Info's symbol table (ids)."""

    def p4info(self, info: Any, sym: Any, entries: list[dict], xi: dict,
               tables: set[str]) -> bool:
        """Add this object's P4Info messages; True when any was added (p4c then writes
        a type_info)."""
        return False

    def bmv2_json(self, entries: list[dict], doc: dict) -> None:
        """Add this object's entries to the BMv2 JSON document `doc`."""


class Refused(Extern):
    """An extern pyswitch declines, with the reason a program using it is told."""

    def __init__(self, names: tuple[str, ...], kind: str, why: str) -> None:
        self.names = names
        self.kind = kind
        self.served = f"refused: {why}"
        self.why = why

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> Any:
        raise cx.err(node, f"extern {fn!r} is not supported by pyswitch ({self.why})")

    def instantiate(self, cx: Any, ty: Any, full: str, args: list, scope: Any,
                    node: Any) -> Any:
        raise cx.err(node, f"extern {ty.show()!r} is not supported by pyswitch ({self.why})")


_REG: dict[tuple[str, str], Extern] | None = None
_ADDED: list[Extern] = []


def registry() -> dict[tuple[str, str], Extern]:
    """(kind, P4 name) -> the extern serving it: every ``EXTERNS`` of this package's
    modules, then those `add`-ed."""
    global _REG
    if _REG is None:
        reg: dict[tuple[str, str], Extern] = {}
        for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            mod = importlib.import_module(f"{__name__}.{m.name}")
            for ext in getattr(mod, "EXTERNS", []):
                _put(reg, ext)
        for ext in _ADDED:
            _put(reg, ext)
        _REG = reg
    return _REG


def _put(reg: dict[tuple[str, str], Extern], ext: Extern) -> None:
    for n in ext.names:
        if (ext.kind, n) in reg and reg[(ext.kind, n)] is not ext:
            raise ValueError(f"extern {n!r} is registered twice")
        reg[(ext.kind, n)] = ext


def add(ext: Extern) -> None:
    """Register `ext` (an extern defined outside this package: a test, a plug-in)."""
    global _REG
    _ADDED.append(ext)
    _REG = None


def remove(ext: Extern) -> None:
    """Undo `add`."""
    global _REG
    _ADDED.remove(ext)
    _REG = None


def function(name: str) -> Extern | None:
    """The extern function `name` (served or refused), or None."""
    return registry().get(("function", name))


def obj(name: str) -> Extern | None:
    """The extern object type `name` (served or refused), or None."""
    return registry().get(("object", name))


def served() -> list[Extern]:
    """The externs pyswitch runs (not `Refused`), each once, in a stable order."""
    seen: dict[int, Extern] = {}
    for ext in registry().values():
        if not isinstance(ext, Refused):
            seen.setdefault(id(ext), ext)
    return sorted(seen.values(), key=lambda e: (e.order, e.names))


def objects() -> list[Extern]:
    """The served extern objects with state, in P4Info's symbol order."""
    return [e for e in served() if e.kind == "object" and e.meta_key]


def helpers() -> dict[str, Extern]:
    """Helper name the generated Python calls -> the extern whose `runtime` gives it."""
    out: dict[str, Extern] = {}
    for ext in served():
        for n in ext.runtime(None):
            out[n] = ext
    return out


def digest() -> str:
    """What a native module depends on in the registry: the source of every served
    extern's class (its lowering) and its C support."""
    h = hashlib.sha256()
    for ext in served():
        try:
            src = inspect.getsource(type(ext))
        except (OSError, TypeError):  # defined where no source is kept
            src = type(ext).__qualname__
        h.update(src.encode() + b"\0" + ext.c_support.encode() + b"\0")
    return h.hexdigest()
