"""The Python back end's helpers: the source of each module-level helper a generated
module may declare (`pyswitch.ir.module.Helper`), printed by `pyswitch.ir.pyprint`.

The native path translates none of them: it calls its own C for what they do (the stack
helpers: `pyswitch.native.picks`; ``_pack_bits``: `pyswitch.native.varbits`).
"""

from __future__ import annotations

__all__ = ["HELPERS"]

# the stack helpers: an element picked at run time outside the checked range (``hs[i]``,
# an extract's strict pick) and ``hs.last`` (`pyswitch.compiler.stacks`)
_STACKS = '''import logging as _logging


class StackIndexError(IndexError):
    """A header stack index outside the stack at run time (BMv2 aborts)."""


_hs_warned = set()


def _hs_at(elems, i, what, nfields):
    if i < len(elems):
        return elems[i]
    if nfields < 0:  # an extract
        raise StackIndexError(f"{what} {i} is outside the stack of {len(elems)} "
                              "(BMv2 aborts on this)")
    if what not in _hs_warned:
        _hs_warned.add(what)
        _logging.getLogger("pyswitch").warning(
            "%s %d is outside the stack of %d: read as an invalid header of zeros, written "
            "nowhere (BMv2 aborts here unless p4c removed the access)", what, i, len(elems))
    return [False] + [0] * nfields


def _hs_last(elems, n, what):
    if n:
        return elems[n - 1]
    raise StackIndexError(f"{what}: .last of an empty stack (BMv2 aborts on this)")'''

# a field list with varbits as bytes: every field's bits in order, a varbit with its
# current length, zero-padded at the end to a byte (`pyswitch.compiler.varbit`)
_PACK_BITS = '''def _pack_bits(parts):
    acc = total = 0
    for w, v in parts:
        acc = (acc << w) | v
        total += w
    pad = -total % 8
    return (acc << pad).to_bytes((total + pad) // 8, "big")'''

HELPERS: dict[str, str] = {"stacks": _STACKS, "pack_bits": _PACK_BITS}
