/* pyswitch's native path: what every generated module shares (see pyswitch/native/cgen.py).

   Every P4 value is a signed 128-bit integer: the generated Python's arithmetic on Python
   ints gives the same results on these as long as no intermediate value leaves 127 bits,
   which cgen proves for each expression before it emits C.  Registers and counters are C
   arrays that Python sees as list-like views (cells.h); the exact tables' entries are
   indexed in C memory (exact.h), rebuilt by the Python table on each control-plane write;
   the other tables, multicast groups and statistics stay the switch's Python objects; so
   the control plane (P4Runtime, the in-process API) sees one state whichever path runs
   the packets. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

typedef __int128 V;
typedef unsigned __int128 UV;

#define RC_EXIT 1     /* P4 `exit`: unwinds to the enclosing control */
#define RC_ERR (-1)   /* a Python exception is set */

static int v_from_py(PyObject *o, V *out) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow) {
        if (x == -1 && PyErr_Occurred()) return RC_ERR;
        *out = x;
        return 0;
    }
    unsigned char b[16];
    if (_PyLong_AsByteArray((PyLongObject *)o, b, 16, 1, 1) < 0) return RC_ERR;
    UV u = 0;
    for (int i = 15; i >= 0; i--) u = (u << 8) | b[i];
    *out = (V)u;
    return 0;
}

static PyObject *v_to_py(V v) {
    if (v >= LLONG_MIN && v <= LLONG_MAX) return PyLong_FromLongLong((long long)v);
    unsigned char b[16];
    UV u = (UV)v;
    for (int i = 0; i < 16; i++) { b[i] = (unsigned char)(u & 0xff); u >>= 8; }
    return _PyLong_FromByteArray(b, 16, 1, 1);
}

/* Python's floor division and modulo; a zero divisor gives 0 (the generated `_div`).
   Both operands in 0..2**64-1 (the common case: a hash modulo a table's size) take one
   64-bit division instead of the 128-bit library call (__divti3, __modti3). */
static inline V v_div(V a, V b, int mod) {
    if (b == 0) return 0;
    if (a >= 0 && b > 0 && !((UV)a >> 64) && !((UV)b >> 64)) {
        uint64_t x = (uint64_t)a, y = (uint64_t)b;
        return mod ? (V)(x % y) : (V)(x / y);
    }
    V q = a / b, r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) { q -= 1; r += b; }
    return mod ? r : q;
}

static V v_shr(V a, V b) { return b >= 127 ? (a < 0 ? -1 : 0) : a >> (int)b; }

static V v_sat_s(V a, V b, int sign, int w) {
    V sb = (V)1 << (w - 1);
    V x = (a ^ sb) - sb, y = (b ^ sb) - sb;
    V r = sign > 0 ? x + y : x - y;
    if (r < -sb) r = -sb;
    if (r > sb - 1) r = sb - 1;
    return r & (((V)1 << w) - 1);
}

static inline V v_csum16i(V x) {
    if (x > 0 && !((UV)x >> 64)) return 0xFFFE - (V)(((uint64_t)x - 1) % 0xFFFF);
    return x ? 0xFFFE - (x - 1) % 0xFFFF : 0xFFFF;
}

/* crc32_tab8[k][b]: the CRC of byte b followed by k zero bytes ("slicing by 8": eight
   independent look-ups per 8 bytes instead of a chain of eight); crc32_tab is its row 0 */
static uint32_t crc32_tab8[8][256];
#define crc32_tab crc32_tab8[0]
static uint16_t crc16_tab[256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc32_tab8[0][i] = c;
        uint16_t d = (uint16_t)i;
        for (int k = 0; k < 8; k++) d = (d & 1) ? (uint16_t)(0xA001 ^ (d >> 1)) : (uint16_t)(d >> 1);
        crc16_tab[i] = d;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = crc32_tab8[k - 1][i];
            crc32_tab8[k][i] = (c >> 8) ^ crc32_tab8[0][c & 0xff];
        }
}

/* the n big-endian bytes of v (0 <= v < 2**(8n), n <= 16, proven by cgen): two stores of
   byte-swapped halves into a 16-byte buffer, of which b points at the last n */
static inline const unsigned char *v_bytes16(V v, int n, unsigned char b16[16]) {
    UV u = (UV)v;
    uint64_t hi = __builtin_bswap64((uint64_t)(u >> 64)), lo = __builtin_bswap64((uint64_t)u);
    memcpy(b16, &hi, 8);
    memcpy(b16 + 8, &lo, 8);
    return b16 + 16 - n;
}

static void v_bytes(V v, int n, unsigned char *b) {
    unsigned char b16[16];
    memcpy(b, v_bytes16(v, n, b16), (size_t)n);
}

/* zlib's crc32 of n bytes, eight at a time where it can */
static inline uint32_t crc32_buf(const unsigned char *b, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t w0 = c ^ ((uint32_t)b[i] | (uint32_t)b[i + 1] << 8 | (uint32_t)b[i + 2] << 16
                           | (uint32_t)b[i + 3] << 24);
        c = crc32_tab8[7][w0 & 0xff] ^ crc32_tab8[6][(w0 >> 8) & 0xff]
            ^ crc32_tab8[5][(w0 >> 16) & 0xff] ^ crc32_tab8[4][w0 >> 24]
            ^ crc32_tab8[3][b[i + 4]] ^ crc32_tab8[2][b[i + 5]]
            ^ crc32_tab8[1][b[i + 6]] ^ crc32_tab8[0][b[i + 7]];
    }
    for (; i < n; i++) c = crc32_tab[(c ^ b[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* pure: a call with the same arguments may be made once (the generated hash-modulo
   expressions name the hash twice) */
__attribute__((pure)) static V v_crc32(V v, int n) {
    unsigned char b16[16];
    return (V)crc32_buf(v_bytes16(v, n, b16), n);
}

__attribute__((pure)) static V v_crc16(V v, int n) {
    unsigned char b[16];
    v_bytes(v, n, b);
    uint16_t c = 0;
    for (int i = 0; i < n; i++) c = (uint16_t)((c >> 8) ^ crc16_tab[(c ^ b[i]) & 0xff]);
    return (V)c;
}

__attribute__((pure)) static V v_identity(V v, int n) {
    unsigned char b[16];
    v_bytes(v, n, b);
    UV u = 0;
    for (int i = 0; i < n; i++) u = (u << 8) | b[i];
    return (V)(u & 0xFFFFFFFFFFFFFFFFull);
}

__attribute__((pure)) static V v_csum16(V v, int n) {
    unsigned char b[18] = {0};
    v_bytes(v, n, b);
    uint32_t s = 0;
    int m = n + (n & 1);
    for (int i = 0; i < m; i += 2) s += ((uint32_t)b[i] << 8) | b[i + 1];
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (V)(~s & 0xFFFF);
}

/* n big-endian bytes at p; n is a constant at every call, so the switch folds away and
   the common widths are one load and a byte swap instead of a loop on 128 bits */
static inline V get_be(const unsigned char *p, int n) {
    switch (n) {
    case 1: return p[0];
    case 2: { uint16_t x; memcpy(&x, p, 2); return (V)__builtin_bswap16(x); }
    case 4: { uint32_t x; memcpy(&x, p, 4); return (V)__builtin_bswap32(x); }
    case 8: { uint64_t x; memcpy(&x, p, 8); return (V)__builtin_bswap64(x); }
    default: {
        UV u = 0;
        for (int i = 0; i < n; i++) u = (u << 8) | p[i];
        return (V)u;
    }
    }
}

static inline void put_be(unsigned char *p, V v, int n) {
    switch (n) {
    case 1: p[0] = (unsigned char)v; return;
    case 2: { uint16_t x = __builtin_bswap16((uint16_t)v); memcpy(p, &x, 2); return; }
    case 4: { uint32_t x = __builtin_bswap32((uint32_t)v); memcpy(p, &x, 4); return; }
    case 8: { uint64_t x = __builtin_bswap64((uint64_t)v); memcpy(p, &x, 8); return; }
    default: {
        UV u = (UV)v;
        for (int i = n - 1; i >= 0; i--) { p[i] = (unsigned char)(u & 0xff); u >>= 8; }
    }
    }
}

/* list[i] of a counter: 0, 1 for IndexError (as Python indexes), or RC_ERR */
static inline int list_index(PyObject *l, V i, Py_ssize_t *out) {
    Py_ssize_t n = PyList_GET_SIZE(l);
    if (i < 0) i += n;
    if (i < 0 || i >= n) return 1;
    *out = (Py_ssize_t)i;
    return 0;
}

#include "cells.h"  /* registers: reg_get, reg_set and their Python view */

/* x + d as a new int when x is an int of at most 62 bits and d too (no overflow): the
   counts' common case, without a Python int for `d` and an addition through the number
   protocol; NULL (no exception) otherwise */
static inline PyObject *small_add(PyObject *x, V d) {
    if (!PyLong_CheckExact(x) || d < -((V)1 << 62) || d >= ((V)1 << 62)) return NULL;
    int overflow = 0;
    long long a = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow || a < -(1LL << 62) || a >= (1LL << 62)) { PyErr_Clear(); return NULL; }
    return PyLong_FromLongLong(a + (long long)d);
}

static int list_iadd(PyObject *l, V i, V v) {
    Py_ssize_t k;
    if (list_index(l, i, &k)) return 1;
    PyObject *f = small_add(PyList_GET_ITEM(l, k), v);
    if (f) { PyList_SetItem(l, k, f); return 0; }
    if (PyErr_Occurred()) return RC_ERR;
    PyObject *d = v_to_py(v);
    if (!d) return RC_ERR;
    PyObject *r = PyNumber_Add(PyList_GET_ITEM(l, k), d);
    Py_DECREF(d);
    if (!r) return RC_ERR;
    PyList_SetItem(l, k, r);
    return 0;
}

/* a header stack index outside the stack (pyswitch.native.picks): the Python helper,
 * `_hs_at(elems, i, what, nf)` or, when nf is INT_MIN, `_hs_last(elems, i, what)`, called
 * on n placeholders for what it does there: its warning once per place, or its
 * exception.  0, or RC_ERR with the exception set. */
static int hs_py(PyObject *fn, int n, V i, const char *what, int nf) {
    PyObject *t = PyTuple_New(n);
    if (!t) return RC_ERR;
    for (int j = 0; j < n; j++) { Py_INCREF(Py_None); PyTuple_SET_ITEM(t, j, Py_None); }
    PyObject *r = nf == INT_MIN ? PyObject_CallFunction(fn, "OLs", t, (long long)i, what)
                           : PyObject_CallFunction(fn, "OLsi", t, (long long)i, what, nf);
    Py_DECREF(t);
    if (!r) return RC_ERR;
    Py_DECREF(r);
    return 0;
}

static int raise_index(int rc) {
    if (rc == 1) PyErr_SetString(PyExc_IndexError, "list index out of range");
    return RC_ERR;
}

/* a table hit or default, copied out of its Entry or its exact store's record (no
   reference kept; `counter`, borrowed, is held by the packet's `keep` list) */
#define MAXA 32
typedef struct { long aidx; int hit; PyObject *counter; V a[MAXA]; } Ent;

static PyObject *s_aidx, *s_hit, *s_args, *s_default, *s_lookup, *s_dropped, *s_counter;

/* An entry's fields read in place, without a Python attribute look-up per field:
   `pyswitch.tables.Entry` has __slots__, so each field is a pointer at a fixed offset in
   the object, learnt once per type from its member descriptors; the type's version tag
   (changed by any change of the class) says when to learn again.  Any other object, or a
   slot not set, takes the attribute path (ent_fill_attrs). */
static struct { PyTypeObject *t; unsigned int ver; Py_ssize_t aidx, hit, args, counter; } ent_off;

static Py_ssize_t slot_offset(PyTypeObject *t, PyObject *name) {
    PyObject *d = _PyType_Lookup(t, name);  /* borrowed */
    if (!d || Py_TYPE(d) != &PyMemberDescr_Type) return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    return m->type == T_OBJECT_EX ? m->offset : -1;
}

static int ent_learn(PyTypeObject *t) {
    if (!PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG)) return 0;
    ent_off.t = NULL;
    ent_off.aidx = slot_offset(t, s_aidx);
    ent_off.hit = slot_offset(t, s_hit);
    ent_off.args = slot_offset(t, s_args);
    ent_off.counter = slot_offset(t, s_counter);
    if (ent_off.aidx < 0 || ent_off.hit < 0 || ent_off.args < 0 || ent_off.counter < 0) return 0;
    ent_off.t = t;
    ent_off.ver = t->tp_version_tag;
    return 1;
}

#define SLOT(e, off) (*(PyObject **)((char *)(e) + (off)))

static int ent_fill_attrs(PyObject *e, Ent *out, PyObject *keep);

/* `keep` (a list emptied after each packet) holds the entry's direct counter alive while
   the packet may still count it; NULL for a table without one */
static int ent_fill(PyObject *e, Ent *out, PyObject *keep) {
    PyTypeObject *t = Py_TYPE(e);
    if (!((t == ent_off.t && t->tp_version_tag == ent_off.ver
           && PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG)) || ent_learn(t)))
        return ent_fill_attrs(e, out, keep);
    PyObject *c = SLOT(e, ent_off.counter), *a = SLOT(e, ent_off.aidx);
    PyObject *h = SLOT(e, ent_off.hit), *x = SLOT(e, ent_off.args);
    if (!c || !a || !h || !x || !PyLong_CheckExact(a) || !PyTuple_CheckExact(x)
            || (keep && !PyList_Check(c)))
        return ent_fill_attrs(e, out, keep);
    out->counter = NULL;
    if (keep) {
        if (PyList_Append(keep, c) < 0) return RC_ERR;
        out->counter = c;
    }
    out->aidx = PyLong_AsLong(a);
    if (out->aidx == -1 && PyErr_Occurred()) return RC_ERR;
    out->hit = h == Py_True ? 1 : h == Py_False ? 0 : PyObject_IsTrue(h);
    if (out->hit < 0) return RC_ERR;
    Py_ssize_t n = PyTuple_GET_SIZE(x);
    for (Py_ssize_t i = 0; i < n && i < MAXA; i++)
        if (v_from_py(PyTuple_GET_ITEM(x, i), &out->a[i]) < 0) return RC_ERR;
    return 0;
}

static int ent_fill_attrs(PyObject *e, Ent *out, PyObject *keep) {
    out->counter = NULL;
    if (keep) {
        PyObject *c = PyObject_GetAttr(e, s_counter);
        if (!c) return RC_ERR;
        int rc = PyList_Append(keep, c);
        Py_DECREF(c);
        if (rc < 0) return RC_ERR;
        if (!PyList_Check(c)) { PyErr_SetString(PyExc_TypeError, "counter"); return RC_ERR; }
        out->counter = c;
    }
    PyObject *x = PyObject_GetAttr(e, s_aidx);
    if (!x) return RC_ERR;
    out->aidx = PyLong_AsLong(x);
    Py_DECREF(x);
    x = PyObject_GetAttr(e, s_hit);
    if (!x) return RC_ERR;
    out->hit = PyObject_IsTrue(x);
    Py_DECREF(x);
    x = PyObject_GetAttr(e, s_args);
    if (!x) return RC_ERR;
    Py_ssize_t n = PyTuple_GET_SIZE(x);
    for (Py_ssize_t i = 0; i < n && i < MAXA; i++) {
        if (v_from_py(PyTuple_GET_ITEM(x, i), &out->a[i]) < 0) { Py_DECREF(x); return RC_ERR; }
    }
    Py_DECREF(x);
    return 0;
}

/* `T.default` (a new reference): from the table's instance dict `tabd` when the switch
   found one it may read in place (process.c, make: a plain attribute, no descriptor of
   that name on the class), else by attribute look-up */
static PyObject *tab_default_entry(PyObject *tab, PyObject *tabd) {
    if (tabd) {
        PyObject *e = PyDict_GetItemWithError(tabd, s_default);
        if (e) { Py_INCREF(e); return e; }
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_GetAttr(tab, s_default);
}

/* `T.lookup(key)` (lpm, ternary, range); `key` is stolen */
static int tab_lookup(PyObject *tab, PyObject *key, Ent *out, PyObject *keep) {
    if (!key) return RC_ERR;
    PyObject *e = PyObject_CallMethodOneArg(tab, s_lookup, key);
    Py_DECREF(key);
    if (!e) return RC_ERR;
    int rc = ent_fill(e, out, keep);
    Py_DECREF(e);
    return rc;
}

static int tab_default(PyObject *tab, PyObject *tabd, Ent *out, PyObject *keep) {
    PyObject *e = tab_default_entry(tab, tabd);
    if (!e) return RC_ERR;
    int rc = ent_fill(e, out, keep);
    Py_DECREF(e);
    return rc;
}

#include "exact.h"  /* the exact tables' entries: xt_lookup, xt_default */

static PyObject *key_tuple(int n, V *k) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *o = v_to_py(k[i]);
        if (!o) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

static int bad_action(long aidx) {
    PyErr_Format(PyExc_RuntimeError, "pyswitch native: entry of unknown action %ld", aidx);
    return RC_ERR;
}

/* The statistics a batch counts in C and adds to the switch's Python objects (rx, tx,
   stats.dropped) when it ends, or before any call into Python that could count too
   (process.c: count_rx, count_tx, count_drop, flush_counts); a port is counted here when
   it is an int in 0..NPORT-1, in the order ports are first counted, so that the Counters
   gain their keys in the order the frame-by-frame path gives them. */
#define NPORT 512
typedef struct {
    int on;                          /* a batch is running */
    Py_ssize_t dropped;
    int nrx, ntx;                    /* ports counted so far */
    unsigned short rxp[NPORT], txp[NPORT];
    Py_ssize_t rxc[NPORT], txc[NPORT];
} Counts;

/* v + n (a new reference; v is stolen), for the statistics' counts */
static PyObject *plus_n(PyObject *v, Py_ssize_t n) {
    if (!v) return NULL;
    PyObject *d = PyLong_FromSsize_t(n);
    PyObject *r = d ? PyNumber_Add(v, d) : NULL;
    Py_XDECREF(d);
    Py_DECREF(v);
    return r;
}

/* counter[key] += n on a collections.Counter: a dict whose missing keys count 0 (its
   __missing__), read and written as a dict when its item access is dict's own */
static int bump_n(PyObject *counter, PyObject *key, Py_ssize_t n) {
    if (PyDict_Check(counter)
            && Py_TYPE(counter)->tp_as_mapping->mp_subscript == PyDict_Type.tp_as_mapping->mp_subscript
            && Py_TYPE(counter)->tp_as_mapping->mp_ass_subscript
               == PyDict_Type.tp_as_mapping->mp_ass_subscript) {
        PyObject *x = PyDict_GetItemWithError(counter, key);  /* borrowed */
        if (!x && PyErr_Occurred()) return RC_ERR;
        PyObject *r = x ? small_add(x, n) : PyLong_FromSsize_t(n);
        if (!r && PyErr_Occurred()) return RC_ERR;
        if (r) {
            int rc = PyDict_SetItem(counter, key, r);
            Py_DECREF(r);
            return rc;
        }
    }
    PyObject *r = plus_n(PyObject_GetItem(counter, key), n);
    if (!r) return RC_ERR;
    int rc = PyObject_SetItem(counter, key, r);
    Py_DECREF(r);
    return rc;
}

static int bump(PyObject *counter, PyObject *key) { return bump_n(counter, key, 1); }

/* obj.name += n */
static int bump_attr_n(PyObject *obj, PyObject *name, Py_ssize_t n) {
    PyObject *r = plus_n(PyObject_GetAttr(obj, name), n);
    if (!r) return RC_ERR;
    int rc = PyObject_SetAttr(obj, name, r);
    Py_DECREF(r);
    return rc;
}

/* int.from_bytes(buf[a:b], 'big') with Python's clamped slicing */
static V be_slice(const unsigned char *buf, Py_ssize_t L, V a, V b) {
    if (a < 0) a = a + L < 0 ? 0 : a + L;
    if (b < 0) b = b + L < 0 ? 0 : b + L;
    if (a > L) a = L;
    if (b > L) b = L;
    UV u = 0;
    for (V i = a; i < b; i++) u = (u << 8) | buf[(Py_ssize_t)i];
    return (V)u;
}

static int short_read(Py_ssize_t need) {
    PyErr_Format(PyExc_ValueError, "unpack_from requires a buffer of at least %zd bytes", need);
    return RC_ERR;
}

/* a varbit slot (pyswitch/native/varbits.py): 0 when empty, else its length + 1 above bit
   VB_SHIFT and its value (below 2**length, length <= 112) under it; Python's (length, value)
   or 0 */
#define VB_SHIFT 112
#define VB_MASK ((((V)1) << VB_SHIFT) - 1)

static inline V vb_make(V n, V v) { return ((n + 1) << VB_SHIFT) | v; }

static inline V vb_val(V x) { return x & VB_MASK; }

/* its bytes (length / 8 of them, big-endian) at p; how many */
static inline Py_ssize_t vb_put(unsigned char *p, V x) {
    if (!x) return 0;
    int n = (int)(((x >> VB_SHIFT) - 1) / 8);
    put_be(p, x & VB_MASK, n);
    return n;
}

static PyObject *vb_to_py(V x) {
    if (!x) return PyLong_FromLong(0);
    return Py_BuildValue("(NN)", v_to_py((x >> VB_SHIFT) - 1), v_to_py(x & VB_MASK));
}

/* a length beyond the varbit's maximum: the compiler's checks before an extract exclude it */
static int vb_bad_len(V n, int w) {
    PyErr_Format(PyExc_RuntimeError, "pyswitch native: varbit length %lld beyond its %d bits",
                 (long long)n, w);
    return RC_ERR;
}

/* a hash of the bytes `_pack_bits` gives (pyswitch.compiler.varbit: a field list with a
   varbit): n parts in p as (width, value) pairs, each value's bits MSB first, a width of -1
   for a varbit slot (its current length, nothing when empty), zero-padded at the end to a
   byte; then hashed as runtime.h's v_* do: algo 0 crc32, 1 crc16, 2 identity, 3 csum16.
   The parts fill at most PACK_MAX bytes (proven by pyswitch.native.varbits). */
#define PACK_MAX 512
static V v_pack_hash(int algo, int n, const V *p) {
    unsigned char b[PACK_MAX + 1];
    Py_ssize_t nb = 0;
    UV acc = 0;
    int na = 0;
    for (int i = 0; i < n; i++) {
        int w = (int)p[2 * i];
        UV v = (UV)p[2 * i + 1];
        if (w < 0) {
            if (!v) continue;
            w = (int)(((V)v >> VB_SHIFT) - 1);
            v &= (UV)VB_MASK;
        }
        while (w > 0) {
            int k = w < 56 ? w : 56;
            acc = (acc << k) | ((v >> (w - k)) & ((((UV)1) << k) - 1));
            na += k;
            w -= k;
            while (na >= 8) { b[nb++] = (unsigned char)(acc >> (na - 8)); na -= 8; }
            acc &= (((UV)1) << na) - 1;
        }
    }
    if (na) b[nb++] = (unsigned char)(acc << (8 - na));
    if (algo == 0) return (V)crc32_buf(b, nb);
    if (algo == 1) {
        uint16_t c = 0;
        for (Py_ssize_t i = 0; i < nb; i++) c = (uint16_t)((c >> 8) ^ crc16_tab[(c ^ b[i]) & 0xff]);
        return (V)c;
    }
    if (algo == 2) {
        UV u = 0;
        for (Py_ssize_t i = 0; i < nb; i++) u = (u << 8) | b[i];
        return (V)(u & 0xFFFFFFFFFFFFFFFFull);
    }
    if (nb & 1) b[nb++] = 0;
    uint64_t s = 0;
    for (Py_ssize_t i = 0; i < nb; i += 2) s += ((uint32_t)b[i] << 8) | b[i + 1];
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (V)(~s & 0xFFFF);
}
