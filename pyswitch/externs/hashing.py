"""v1model's ``hash`` and the hash algorithms every digest uses (hash, the checksums).

Python: ``_crc32`` (zlib), ``_crc16``, ``_csum16``, ``_identity`` over the packed bytes of
the field list, ``_csum16i`` over its 16-bit words as one number, ``_hmod`` for a run-time
modulus (`pyswitch.hashes`).  Native: the functions of the same names in runtime.h
(``v_crc32``, ...), over a field list of at most 16 bytes held in one ``__int128``, or
``v_pack_hash`` over the bytes of a field list with a varbit (``_pack_bits``).
"""

from __future__ import annotations

import zlib
from typing import Any

from pyswitch import hashes
from pyswitch.compiler.model import E, ScalarLoc, nlit
from pyswitch.externs import Extern
from pyswitch.ir.exprs import Bin, Call, Expr
from pyswitch.types import Bits, IntLit

# helper -> (its C function in runtime.h, the width of its result)
_C_HASHES = {"_crc32": ("v_crc32", 32), "_crc16": ("v_crc16", 16),
             "_identity": ("v_identity", 64), "_csum16": ("v_csum16", 16)}
_C_PACKED = {"_crc32": 0, "_crc16": 1, "_identity": 2, "_csum16": 3}  # v_pack_hash's algo


def _hmod(h: int, m: int) -> int:
    return h % m if m else h


class Hash(Extern):
    names = ("hash",)
    signature = ("extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, "
                 "in T base, in D data, in M max);")
    served = ("Python: pyswitch.hashes over the packed field list; native: v_crc32, "
              "v_crc16, v_identity, v_csum16, v_csum16i (runtime.h), lists up to 16 bytes, "
              "and v_hash_payload for a list followed by the payload (*_with_payload)")
    pure = ("_crc32", "_crc16", "_csum16", "_csum16i", "_identity", "_hmod")
    c_support = r"""
/* a hash of the n big-endian bytes of v followed by the frame's payload (a checksum
   *_with_payload): the bytes of both in order, hashed as v_pack_hash hashes its buffer */
static V v_hash_payload(int algo, V v, int n, PyObject *payload) {
    unsigned char h[16];
    v_bytes(v, n, h);
    const unsigned char *seg[2] = {h, NULL};
    Py_ssize_t len[2] = {n, 0};
    if (payload && PyBytes_Check(payload)) {
        seg[1] = (const unsigned char *)PyBytes_AS_STRING(payload);
        len[1] = PyBytes_GET_SIZE(payload);
    }
    uint32_t c32 = 0xFFFFFFFFu;
    uint16_t c16 = 0;
    UV u = 0;
    uint64_t s = 0;
    Py_ssize_t pos = 0;
    for (int k = 0; k < 2; k++)
        for (Py_ssize_t i = 0; i < len[k]; i++, pos++) {
            unsigned char b = seg[k][i];
            if (algo == 0) c32 = crc32_tab[(c32 ^ b) & 0xff] ^ (c32 >> 8);
            else if (algo == 1) c16 = (uint16_t)((c16 >> 8) ^ crc16_tab[(c16 ^ b) & 0xff]);
            else if (algo == 2) u = (u << 8) | b;
            else s += (pos & 1) ? b : (uint32_t)b << 8;  /* an odd total pads a zero byte */
        }
    if (algo == 0) return (V)(c32 ^ 0xFFFFFFFFu);
    if (algo == 1) return (V)c16;
    if (algo == 2) return (V)(u & 0xFFFFFFFFFFFFFFFFull);
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (V)(~s & 0xFFFF);
}
"""

    def call(self, cx: Any, fn: str, args: list, scope: Any, em: Any, node: Any) -> None:
        if len(args) != 5:
            raise cx.err(node, "hash(out result, algo, base, data, max)")
        lv = cx.lvalue(args[0], scope, em)
        if not isinstance(lv, ScalarLoc) or not isinstance(lv.ty, Bits):
            raise cx.err(args[0], "hash result must be a bit<N> l-value")
        algo = cx.algo(args[1], scope)
        base = cx.expr(args[2], scope, em)
        mx = cx.expr(args[4], scope, em)
        for x, n in ((base, args[2]), (mx, args[4])):
            if not isinstance(x.ty, (Bits, IntLit)):
                raise cx.err(n, "hash base/max must be bit<N>")
        h = cx.digest(algo, cx.data_list(args[3], scope, em))
        modded: Expr
        if mx.const is not None:
            if mx.const == 0:
                raise cx.err(args[4], "hash max must not be 0")
            modded = Bin("%", h, nlit(mx.const))
        else:
            modded = Call("_hmod", (h, mx.as_node()))
        res = Bin("+", base.as_node(), modded) if base.const != 0 else modded
        em.assign(cx.loc_e(lv), E.of(Bin("&", res, nlit(lv.ty.mask), bare=True), lv.ty))
        return None

    def runtime(self, sw: Any) -> dict[str, Any]:
        return {"_crc32": zlib.crc32, "_crc16": hashes.crc16, "_csum16": hashes.csum16,
                "_identity": hashes.identity, "_csum16i": hashes.csum16_int,
                "_hmod": _hmod}

    def c_expr(self, t: Any, f: Any, node: Any, line: int) -> Any:
        """A `Digest`'s C from its fields: the field list's number (its 16-bit words
        summed for ``_csum16i``) proven to fit, then the helper over its bytes (and the
        packet's payload); a `VbDigest`'s (a field list with a varbit) packed and hashed
        by ``v_pack_hash``; ``_hmod`` (a `Call`), a modulus known at run time."""
        from pyswitch.ir.exprs import Call, Digest, VbDigest
        from pyswitch.native.exprs import NotNative
        if isinstance(node, VbDigest):
            fn = f"_{node.algo}"
            if fn not in _C_HASHES:
                raise NotNative(f"line {line}: call of {fn}")
            if node.payload is not None:
                raise NotNative(f"line {line}: argument of {fn}")
            parts = t.pack_parts(f, node)  # a field list with a varbit: native.varbits
            return f"v_pack_hash({_C_PACKED[fn]}, {parts})"
        if isinstance(node, Call):
            if node.fn != "_hmod" or len(node.args) != 2:
                raise NotNative(f"line {line}: call of {node.fn}")
            h, m = t.ex(f, node.args[0]), t.ex(f, node.args[1])
            if h.lo < 0 or m.lo < 0:
                raise NotNative(f"line {line}: _hmod of a negative value")
            return f"v_div({h.c}, {m.c}, 1) + ({m.c} == 0 ? {h.c} : 0)"
        if not isinstance(node, Digest):
            return None
        if node.as_int and node.algo == "csum16":
            v, iv = t.digest_number(f, node)
            if iv is None:  # an item that may be negative
                raise NotNative(f"line {line}: negative checksum input")
            return f"v_csum16i({v})"
        fn = f"_{node.algo}"
        if fn not in _C_HASHES or node.as_int:
            raise NotNative(f"line {line}: call of {fn}")
        cfn, w = _C_HASHES[fn]
        if node.payload is not None and node.payload != t.meta["hidden"]["payload"]:
            raise NotNative(f"line {line}: argument of {fn}")
        (v, iv), nb = t.digest_number(f, node), node.nbytes
        if not (0 < nb <= 16 and iv is not None and iv[1] < (1 << (8 * nb))):
            raise NotNative(f"line {line}: {nb}-byte field list of {fn}")
        if node.payload is not None:
            return f"v_hash_payload({_C_PACKED[fn]}, {v}, {nb}, st->payload)"
        return f"{cfn}({v}, {nb})"


EXTERNS = [Hash()]
