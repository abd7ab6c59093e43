/* An exact table's entries in C memory (issue 42, item 4): what the native path looks up.

   On the native path each all-exact table (pyswitch.tables.Table, kind "exact") has an
   `ExactStore`: an open-addressing hash table from a key's packed words (one uint64 per
   field of up to 64 bits, two per wider field) to a compact record, its action's index,
   hit flag, arguments as the compiled actions take them (V), and the entry's direct
   counter (a `Cells` of two 64-bit cells, shared with the entry's Python object), and the
   table's default as one more record.  A look-up packs the key's values, hashes them and
   copies the record into the frame's `Ent`: no Python object is built or read.

   The Python `Table` stays the one state the control plane writes (P4Runtime, Thrift and
   the in-process API all go through pyswitch/tables.py); each write that changes what a
   look-up returns (insert, modify, delete, a default changed, clear) rebuilds the store
   from the table's entries (`ExactStore.load`), as it rebuilds the Python path's dict:
   the store is an index of that state, never a second source of it.  A load builds the
   new arrays first and swaps them in whole, so a failed one leaves the old store.

   Each generated module defines the type; all modules of one process come from the same
   sources, so a store made by one is read by another: `make` checks it by name and size. */

#define XT_NAME "pyswitch.ExactStore"
#define XT_KWMAX 64  /* packed words of a key at most (32 fields of 65..128 bits) */

typedef struct {
    long aidx;
    int hit, nargs;
    PyObject *counter;  /* the direct counter's Cells (owned), or NULL */
    V *a;               /* nargs values (in the store's args arena, or the default's) */
} XRec;

typedef struct {
    PyObject_HEAD
    int nk, kw, counted;
    int *wide;          /* per field: 1 when it takes two words (more than 64 bits) */
    UV *maxv;           /* per field: 2**width - 1 */
    Py_ssize_t n, cap;  /* records; slots (a power of two, at least 2n) */
    uint64_t *keys;     /* n * kw words */
    XRec *recs;         /* n */
    V *args;            /* the records' arguments */
    int32_t *slots;     /* cap: a record's index, or -1 */
    XRec dflt;
    V dargs[MAXA];
} XStore;

static inline uint64_t xt_hash(const uint64_t *k, int kw) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)kw;
    for (int i = 0; i < kw; i++) {
        h ^= k[i];
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

/* the packed words of key k (nk values): 0, or 1 when a value is outside its field (no
   entry can match it: the control plane refuses such keys) */
static inline int xt_pack(const XStore *x, const V *k, uint64_t *buf) {
    int j = 0;
    for (int i = 0; i < x->nk; i++) {
        UV u = (UV)k[i];
        if (k[i] < 0 || u > x->maxv[i]) return 1;
        buf[j++] = (uint64_t)u;
        if (x->wide[i]) buf[j++] = (uint64_t)(u >> 64);
    }
    return 0;
}

/* the record of packed key `buf`, or NULL */
static inline const XRec *xt_find(const XStore *x, const uint64_t *buf) {
    if (!x->n) return NULL;
    size_t mask = (size_t)x->cap - 1, h = (size_t)xt_hash(buf, x->kw) & mask;
    for (;;) {
        int32_t s = x->slots[h];
        if (s < 0) return NULL;
        if (!memcmp(x->keys + (size_t)s * x->kw, buf, (size_t)x->kw * 8)) return &x->recs[s];
        h = (h + 1) & mask;
    }
}

/* the record copied into the frame's Ent; `keep` as for ent_fill (the direct counter held
   alive while the frame may count it) */
static inline int xrec_fill(const XRec *r, Ent *out, PyObject *keep) {
    out->aidx = r->aidx;
    out->hit = r->hit;
    out->counter = r->counter;
    if (keep && r->counter && PyList_Append(keep, r->counter) < 0) return RC_ERR;
    if (r->nargs) memcpy(out->a, r->a, (size_t)r->nargs * sizeof(V));
    return 0;
}

/* `T.exact.get(key) or T.default` on the store `o`; k: the key's nk values */
static inline int xt_lookup(PyObject *o, const V *k, Ent *out, PyObject *keep) {
    const XStore *x = (const XStore *)o;
    uint64_t buf[XT_KWMAX];
    const XRec *r = xt_pack(x, k, buf) ? NULL : xt_find(x, buf);
    return xrec_fill(r ? r : &x->dflt, out, keep);
}

/* `T.default` */
static inline int xt_default(PyObject *o, Ent *out, PyObject *keep) {
    return xrec_fill(&((const XStore *)o)->dflt, out, keep);
}

/* a direct counter's cell i += v on the entry's Cells (wrapping at 2**64, as the indexed
   counters' cells_iadd and BMv2): 0, 1 for IndexError (as list_iadd) */
static inline int xt_count(PyObject *o, V i, V v) {
    Cells *c = (Cells *)o;
    Py_ssize_t k;
    if (cells_index(c->n, i, &k)) return 1;
    cells_put(c, k, (V)(uint64_t)((uint64_t)cells_at(c, k) + (uint64_t)v));
    return 0;
}

/* -- the Python side: made and loaded by pyswitch.tables.Table ------------------------- */

static int xrec_from(XStore *x, PyObject *aidx, PyObject *hit, PyObject *args, PyObject *counter,
                     XRec *r, V *a) {
    r->aidx = PyLong_AsLong(aidx);
    if (r->aidx == -1 && PyErr_Occurred()) return -1;
    r->hit = PyObject_IsTrue(hit);
    if (r->hit < 0) return -1;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) > MAXA) {
        PyErr_Format(PyExc_ValueError, "an entry's arguments: a tuple of at most %d ints", MAXA);
        return -1;
    }
    r->nargs = (int)PyTuple_GET_SIZE(args);
    r->a = a;
    for (int i = 0; i < r->nargs; i++)
        if (v_from_py(PyTuple_GET_ITEM(args, i), &a[i]) < 0) return -1;
    r->counter = NULL;
    if (x->counted) {
        if (!is_cells(counter) || ((Cells *)counter)->n != 2) {
            PyErr_Format(PyExc_TypeError, "a direct counter must be Cells of 2, not %.100s",
                         Py_TYPE(counter)->tp_name);
            return -1;
        }
        Py_INCREF(counter);
        r->counter = counter;
    }
    return 0;
}

static void xt_free_arrays(XRec *recs, Py_ssize_t n, uint64_t *keys, V *args, int32_t *slots) {
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(recs[i].counter);
    PyMem_Free(recs);
    PyMem_Free(keys);
    PyMem_Free(args);
    PyMem_Free(slots);
}

/* a key's value as an unsigned int of at most 128 bits: 0, or 1 when it is not one */
static int xt_uv(PyObject *o, UV *out) {
    if (!PyLong_Check(o) || _PyLong_Sign(o) < 0) return 1;
    size_t bits = _PyLong_NumBits(o);
    if (bits == (size_t)-1 || bits > 128) { PyErr_Clear(); return 1; }
    unsigned char b[16];
    if (_PyLong_AsByteArray((PyLongObject *)o, b, 16, 1, 0) < 0) { PyErr_Clear(); return 1; }
    UV u = 0;
    for (int i = 15; i >= 0; i--) u = (u << 8) | b[i];
    *out = u;
    return 0;
}

/* a key (an int for a table of one field, else a tuple of nk ints) packed; -1 with
   ValueError when it is not one of this table's keys */
static int xt_pack_py(XStore *x, PyObject *key, uint64_t *buf) {
    PyObject *one[1] = {key}, **items = one;
    if (!(x->nk == 1 && PyLong_Check(key))) {
        if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != x->nk) goto bad;
        items = ((PyTupleObject *)key)->ob_item;
    }
    int j = 0;
    for (int i = 0; i < x->nk; i++) {
        UV u;
        if (xt_uv(items[i], &u) || u > x->maxv[i]) goto bad;
        buf[j++] = (uint64_t)u;
        if (x->wide[i]) buf[j++] = (uint64_t)(u >> 64);
    }
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "not a key of this table: %R", key);
    return -1;
}

/* load(entries, default): entries a list of (key, aidx, hit, args, counter), key a tuple
   of nk ints; default (aidx, hit, args, counter); counter a Cells of 2 when the table has
   a direct counter (else ignored) */
static PyObject *xt_load(PyObject *self, PyObject *argv) {
    XStore *x = (XStore *)self;
    PyObject *lst, *dflt;
    if (!PyArg_ParseTuple(argv, "O!O!:load", &PyList_Type, &lst, &PyTuple_Type, &dflt)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lst), cap = 8;
    while (cap < 2 * n + 2) cap <<= 1;
    if (cap > INT32_MAX) return PyErr_NoMemory();
    XRec *recs = PyMem_Calloc((size_t)(n ? n : 1), sizeof(XRec));
    uint64_t *keys = PyMem_Calloc((size_t)(n ? n : 1) * (size_t)(x->kw ? x->kw : 1), 8);
    int32_t *slots = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    V *args = NULL;
    Py_ssize_t nargs = 0, done = 0;
    if (!recs || !keys || !slots) goto nomem;
    for (Py_ssize_t i = 0; i < n; i++) {  /* the arena's size first */
        PyObject *t = PyList_GET_ITEM(lst, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5 || !PyTuple_Check(PyTuple_GET_ITEM(t, 3))) {
            PyErr_SetString(PyExc_TypeError, "load: entries are (key, aidx, hit, args, counter)");
            goto fail;
        }
        nargs += PyTuple_GET_SIZE(PyTuple_GET_ITEM(t, 3));
    }
    args = PyMem_Calloc((size_t)(nargs ? nargs : 1), sizeof(V));
    if (!args) goto nomem;
    memset(slots, 0xff, (size_t)cap * sizeof(int32_t));
    V *a = args;
    for (Py_ssize_t i = 0; i < n; i++, done++) {
        PyObject *t = PyList_GET_ITEM(lst, i);
        uint64_t *kb = keys + (size_t)i * x->kw;
        if (xt_pack_py(x, PyTuple_GET_ITEM(t, 0), kb) < 0) goto fail;
        if (xrec_from(x, PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2), PyTuple_GET_ITEM(t, 3),
                      PyTuple_GET_ITEM(t, 4), &recs[i], a) < 0) goto fail;
        a += recs[i].nargs;
        size_t mask = (size_t)cap - 1, h = (size_t)xt_hash(kb, x->kw) & mask;
        while (slots[h] >= 0) {
            if (!memcmp(keys + (size_t)slots[h] * x->kw, kb, (size_t)x->kw * 8)) {
                PyErr_Format(PyExc_ValueError, "load: key %R twice", PyTuple_GET_ITEM(t, 0));
                done++;
                goto fail;
            }
            h = (h + 1) & mask;
        }
        slots[h] = (int32_t)i;
    }
    XRec d;
    V dargs[MAXA];
    if (PyTuple_GET_SIZE(dflt) != 4) {
        PyErr_SetString(PyExc_TypeError, "load: the default is (aidx, hit, args, counter)");
        goto fail;
    }
    if (xrec_from(x, PyTuple_GET_ITEM(dflt, 0), PyTuple_GET_ITEM(dflt, 1),
                  PyTuple_GET_ITEM(dflt, 2), PyTuple_GET_ITEM(dflt, 3), &d, dargs) < 0) goto fail;
    /* all built: swap them in */
    xt_free_arrays(x->recs, x->n, x->keys, x->args, x->slots);
    Py_XDECREF(x->dflt.counter);
    x->recs = recs; x->keys = keys; x->args = args; x->slots = slots;
    x->n = n; x->cap = cap;
    x->dflt = d;
    memcpy(x->dargs, dargs, sizeof(dargs));
    x->dflt.a = x->dargs;
    Py_RETURN_NONE;
nomem:
    PyErr_NoMemory();
fail:
    if (recs) xt_free_arrays(recs, done, keys, args, slots);
    else { PyMem_Free(keys); PyMem_Free(args); PyMem_Free(slots); }
    return NULL;
}

static PyObject *xrec_py(const XRec *r) {
    PyObject *a = PyTuple_New(r->nargs);
    if (!a) return NULL;
    for (int i = 0; i < r->nargs; i++) {
        PyObject *v = v_to_py(r->a[i]);
        if (!v) { Py_DECREF(a); return NULL; }
        PyTuple_SET_ITEM(a, i, v);
    }
    return Py_BuildValue("(lONO)", r->aidx, r->hit ? Py_True : Py_False, a,
                         r->counter ? r->counter : Py_None);
}

/* get(key): (aidx, hit, args, counter) of the entry of `key` or None (for tests and the
   control plane's checks; the packets use xt_lookup) */
static PyObject *xt_get(PyObject *self, PyObject *key) {
    XStore *x = (XStore *)self;
    uint64_t buf[XT_KWMAX];
    if (xt_pack_py(x, key, buf) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const XRec *r = xt_find(x, buf);
    if (!r) Py_RETURN_NONE;
    return xrec_py(r);
}

static PyObject *xt_get_default(PyObject *self, PyObject *unused) {
    return xrec_py(&((XStore *)self)->dflt);
}

static Py_ssize_t xt_len(PyObject *self) { return ((XStore *)self)->n; }

static void xt_dealloc(PyObject *self) {
    XStore *x = (XStore *)self;
    xt_free_arrays(x->recs, x->n, x->keys, x->args, x->slots);
    Py_XDECREF(x->dflt.counter);
    PyMem_Free(x->wide);
    PyMem_Free(x->maxv);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef xt_methods[] = {
    {"load", xt_load, METH_VARARGS, "load(entries, default): the table's entries, all anew"},
    {"get", xt_get, METH_O, "get(key): (aidx, hit, args, counter) or None"},
    {"get_default", xt_get_default, METH_NOARGS, "the default's (aidx, hit, args, counter)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods xt_as_seq = {.sq_length = xt_len};

static PyTypeObject XStoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = XT_NAME,
    .tp_basicsize = sizeof(XStore),
    .tp_dealloc = xt_dealloc,
    .tp_as_sequence = &xt_as_seq,
    .tp_methods = xt_methods,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "an exact table's entries in C memory (pyswitch/native/exact.h)",
};

/* exact(widths, counted): an empty store (no entries, no default yet: `load` before use)
   for keys of fields of these widths (1..128 bits each) */
static PyObject *xt_new(PyObject *mod, PyObject *argv) {
    PyObject *ws;
    int counted;
    if (!PyArg_ParseTuple(argv, "O!p:exact", &PyList_Type, &ws, &counted)) return NULL;
    Py_ssize_t nk = PyList_GET_SIZE(ws);
    if (nk > XT_KWMAX) {
        PyErr_Format(PyExc_ValueError, "an exact table of %zd fields (at most %d)", nk, XT_KWMAX);
        return NULL;
    }
    XStore *x = PyObject_New(XStore, &XStoreType);
    if (!x) return NULL;
    x->nk = (int)nk; x->kw = 0; x->counted = counted;
    x->n = 0; x->cap = 0; x->keys = NULL; x->recs = NULL; x->args = NULL; x->slots = NULL;
    memset(&x->dflt, 0, sizeof(x->dflt));
    x->dflt.aidx = -1;  /* no default loaded: bad_action if a frame ever reads it */
    x->dflt.a = x->dargs;
    x->wide = PyMem_Calloc((size_t)(nk ? nk : 1), sizeof(int));
    x->maxv = PyMem_Calloc((size_t)(nk ? nk : 1), sizeof(UV));
    if (!x->wide || !x->maxv) { Py_DECREF(x); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < nk; i++) {
        long w = PyLong_AsLong(PyList_GET_ITEM(ws, i));
        if (w == -1 && PyErr_Occurred()) { Py_DECREF(x); return NULL; }
        if (w < 1 || w > 128) {
            PyErr_Format(PyExc_ValueError, "an exact field of %ld bits (1 to 128)", w);
            Py_DECREF(x);
            return NULL;
        }
        x->wide[i] = w > 64;
        x->maxv[i] = w == 128 ? ~(UV)0 : (((UV)1) << w) - 1;
        x->kw += w > 64 ? 2 : 1;
    }
    if (x->kw > XT_KWMAX) {
        PyErr_Format(PyExc_ValueError, "an exact key of %d words (at most %d)", x->kw, XT_KWMAX);
        Py_DECREF(x);
        return NULL;
    }
    return (PyObject *)x;
}

/* a store of any module of this process (the same layout: see the top of this file) */
static int is_xstore(PyObject *o) {
    return strcmp(Py_TYPE(o)->tp_name, XT_NAME) == 0
        && Py_TYPE(o)->tp_basicsize == (Py_ssize_t)sizeof(XStore);
}
