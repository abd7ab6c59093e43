"""pyswitch: INSync's own P4_16 v1model target (docs/design.md §3.8).

In-process API (docs/pyswitch-api.md)::

    prog = compile_p4("p4src/ina.p4")
    sw = Switch(prog)
    out = sw.process(1, frame)   # [(port, bytes), ...]
"""

from pyswitch.errors import (
    EntryExists,
    EntryNotFound,
    InvalidArgument,
    P4CompileError,
    SwitchError,
)
from pyswitch.program import Program, compile_p4, load_compiled
from pyswitch.switch import Switch

__all__ = ["EntryExists", "EntryNotFound", "InvalidArgument", "P4CompileError", "Program",
           "Switch", "SwitchError", "compile_p4", "load_compiled"]
