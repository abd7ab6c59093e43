"""pyswitch: INSync's own P4_16 v1model target (docs/design.md §3.8).

In-process API (docs/pyswitch-api.md)::

    prog = compile_p4("p4src/ina.p4")
    sw = Switch(prog)
    out = sw.process(1, frame)   # [(port, bytes), ...]

The names below are imported on first use (PEP 562): ``import pyswitch.mmsg`` or
``pyswitch.ports`` (what every host process and ``python -m pyswitch.ports`` need) must not
load the compiler and its grammar, which costs a host process most of its start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "EntryExists": "pyswitch.errors",
    "EntryNotFound": "pyswitch.errors",
    "InvalidArgument": "pyswitch.errors",
    "P4CompileError": "pyswitch.errors",
    "SwitchError": "pyswitch.errors",
    "Program": "pyswitch.program",
    "compile_p4": "pyswitch.program",
    "load_compiled": "pyswitch.program",
    "Switch": "pyswitch.switch",
}

__all__ = ["EntryExists", "EntryNotFound", "InvalidArgument", "P4CompileError", "Program",
           "Switch", "SwitchError", "compile_p4", "load_compiled"]


def __getattr__(name: str) -> Any:
    """The public names, imported from their modules when first asked for."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'pyswitch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
