/* A register's cells in C memory (issue 42, item 4), shared by the native code and Python.

   On the native path each register of the program is a `Cells` object instead of a Python
   list: one array of fixed-width integers (8 bytes a cell up to 64 bits, 16 up to 126) that
   the compiled pipeline reads and writes directly (reg_get/reg_set, no Python int made or
   freed per access), and that Python, the control plane included, sees as a list-like
   view: len, cells and slices by index, assignment of a cell or of a slice of the same
   length, iteration, == with a list, repr as a list.  A value outside 0 .. 2**width - 1
   is refused (ValueError), as the control plane's own checks refuse it before.

   Each generated module defines the type (it includes runtime.h); all modules of one
   process come from the same sources (the module name holds their digest), so a Cells
   made by one is read by another: `make` checks the type by name and size. */

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    int width;  /* bits; cells of 8 bytes when <= 64, of 16 otherwise (<= 126) */
    void *v;
} Cells;

#define CELLS_NAME "pyswitch.Cells"

static inline V cells_at(const Cells *c, Py_ssize_t k) {
    return c->width <= 64 ? (V)((const uint64_t *)c->v)[k] : (V)((const UV *)c->v)[k];
}

static inline void cells_put(Cells *c, Py_ssize_t k, V x) {
    if (c->width <= 64) ((uint64_t *)c->v)[k] = (uint64_t)x;
    else ((UV *)c->v)[k] = (UV)x;
}

/* Python's index into n cells (negative from the end): 0, or 1 when outside */
static inline int cells_index(Py_ssize_t n, V i, Py_ssize_t *out) {
    if (i < 0) i += n;
    if (i < 0 || i >= n) return 1;
    *out = (Py_ssize_t)i;
    return 0;
}

/* reg[i] (0), 1 for IndexError (as Python indexes); the value was checked when stored */
static inline int reg_get(PyObject *o, V i, V *out) {
    Cells *c = (Cells *)o;
    Py_ssize_t k;
    if (cells_index(c->n, i, &k)) return 1;
    *out = cells_at(c, k);
    return 0;
}

/* reg[i] = v (0), 1 for IndexError; v is within the register's width (proven by cgen,
   normalised by the compiler) */
static inline int reg_set(PyObject *o, V i, V v) {
    Cells *c = (Cells *)o;
    Py_ssize_t k;
    if (cells_index(c->n, i, &k)) return 1;
    cells_put(c, k, v);
    return 0;
}

static int cells_value(const Cells *c, PyObject *o, V *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "register cells hold ints, not %.100s", Py_TYPE(o)->tp_name);
        return -1;
    }
    /* 0 <= o < 2**width, checked on the bits: the sign, then the bit length */
    int neg = _PyLong_Sign(o) < 0;
    size_t bits = _PyLong_NumBits(o);
    if (neg || bits == (size_t)-1 || bits > (size_t)c->width) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "value %R does not fit in %d bits", o, c->width);
        return -1;
    }
    return v_from_py(o, out);
}

static Py_ssize_t cells_len(PyObject *self) { return ((Cells *)self)->n; }

static PyObject *cells_item(PyObject *self, Py_ssize_t i) {
    Cells *c = (Cells *)self;
    if (i < 0 || i >= c->n) {
        PyErr_SetString(PyExc_IndexError, "register index out of range");
        return NULL;
    }
    return v_to_py(cells_at(c, i));
}

static PyObject *cells_list(Cells *c, Py_ssize_t start, Py_ssize_t step, Py_ssize_t len) {
    PyObject *l = PyList_New(len);
    if (!l) return NULL;
    for (Py_ssize_t j = 0, k = start; j < len; j++, k += step) {
        PyObject *x = v_to_py(cells_at(c, k));
        if (!x) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, j, x);
    }
    return l;
}

static PyObject *cells_subscript(PyObject *self, PyObject *key) {
    Cells *c = (Cells *)self;
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
        Py_ssize_t len = PySlice_AdjustIndices(c->n, &start, &stop, step);
        return cells_list(c, start, step, len);
    }
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0) i += c->n;
    return cells_item(self, i);
}

static int cells_ass_subscript(PyObject *self, PyObject *key, PyObject *val) {
    Cells *c = (Cells *)self;
    if (!val) { PyErr_SetString(PyExc_TypeError, "register cells cannot be deleted"); return -1; }
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0) return -1;
        Py_ssize_t len = PySlice_AdjustIndices(c->n, &start, &stop, step);
        PyObject *seq = PySequence_Fast(val, "register slices take a sequence");
        if (!seq) return -1;
        if (PySequence_Fast_GET_SIZE(seq) != len) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "a register has a fixed size: %zd values for %zd cells",
                         PySequence_Fast_GET_SIZE(seq), len);
            return -1;
        }
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t j = 0; j < len; j++) {  /* all checked before any is stored */
            V x;
            if (cells_value(c, items[j], &x) < 0) { Py_DECREF(seq); return -1; }
        }
        for (Py_ssize_t j = 0, k = start; j < len; j++, k += step) {
            V x;
            cells_value(c, items[j], &x);
            cells_put(c, k, x);
        }
        Py_DECREF(seq);
        return 0;
    }
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return -1;
    if (i < 0) i += c->n;
    if (i < 0 || i >= c->n) {
        PyErr_SetString(PyExc_IndexError, "register assignment index out of range");
        return -1;
    }
    V x;
    if (cells_value(c, val, &x) < 0) return -1;
    cells_put(c, i, x);
    return 0;
}

static PyObject *cells_richcompare(PyObject *self, PyObject *other, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    Cells *c = (Cells *)self;
    PyObject *a = cells_list(c, 0, 1, c->n), *b = NULL, *r = NULL;
    if (!a) return NULL;
    if (PyList_Check(other)) { b = other; Py_INCREF(b); }
    else if (Py_TYPE(other) == Py_TYPE(self)) b = cells_list((Cells *)other, 0, 1, ((Cells *)other)->n);
    else { Py_DECREF(a); Py_RETURN_NOTIMPLEMENTED; }
    if (b) r = PyObject_RichCompare(a, b, op);
    Py_DECREF(a);
    Py_XDECREF(b);
    return r;
}

static PyObject *cells_repr(PyObject *self) {
    Cells *c = (Cells *)self;
    PyObject *l = cells_list(c, 0, 1, c->n);
    if (!l) return NULL;
    PyObject *r = PyObject_Repr(l);
    Py_DECREF(l);
    return r;
}

static void cells_dealloc(PyObject *self) {
    PyMem_Free(((Cells *)self)->v);
    Py_TYPE(self)->tp_free(self);
}

static PySequenceMethods cells_as_seq = {.sq_length = cells_len, .sq_item = cells_item};
static PyMappingMethods cells_as_map = {.mp_length = cells_len, .mp_subscript = cells_subscript,
                                        .mp_ass_subscript = cells_ass_subscript};

static PyTypeObject CellsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = CELLS_NAME,
    .tp_basicsize = sizeof(Cells),
    .tp_dealloc = cells_dealloc,
    .tp_repr = cells_repr,
    .tp_as_sequence = &cells_as_seq,
    .tp_as_mapping = &cells_as_map,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_richcompare = cells_richcompare,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE,
    .tp_doc = "a register's cells in C memory, seen as a list (pyswitch/native/cells.h)",
};

/* cells(values, width): a Cells holding a copy of `values` (a sequence of ints) */
static PyObject *cells_new(PyObject *mod, PyObject *args) {
    PyObject *vals;
    int width;
    if (!PyArg_ParseTuple(args, "Oi", &vals, &width)) return NULL;
    if (width < 1 || width > 126) {
        PyErr_Format(PyExc_ValueError, "register cells of %d bits (1 to 126)", width);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(vals, "cells(values, width): values must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Cells *c = PyObject_New(Cells, &CellsType);
    if (!c) { Py_DECREF(seq); return NULL; }
    c->n = n;
    c->width = width;
    c->v = PyMem_Calloc(n ? (size_t)n : 1, width <= 64 ? 8 : 16);
    if (!c->v) { Py_DECREF(seq); Py_DECREF(c); return PyErr_NoMemory(); }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < n; k++) {
        V x;
        if (cells_value(c, items[k], &x) < 0) { Py_DECREF(seq); Py_DECREF(c); return NULL; }
        cells_put(c, k, x);
    }
    Py_DECREF(seq);
    return (PyObject *)c;
}

/* a Cells of any module of this process (the same layout: see the top of this file) */
static int is_cells(PyObject *o) {
    return strcmp(Py_TYPE(o)->tp_name, CELLS_NAME) == 0
        && Py_TYPE(o)->tp_basicsize == (Py_ssize_t)sizeof(Cells);
}
