/* The helpers of the native `process` and its Python type.  The loop itself, process() and
   its copy functions, is lowered from pyswitch/native/loop.py (as the Python path's
   specialised `process` is) and put in where this file says so.  The generated module
   includes this file after its functions (see cgen.py); @MOD@ is the module name. */
static PyObject *general(PyObject *fn, PyObject *a0, PyObject *a1, St *st, PyObject *a4,
                         PyObject *a5) {
    /* fn(a0, a1, S, M) (after_ingress) or fn(S, M, a0, a1, 0) (after_egress) */
    PyObject *S = box_S(st), *M = S ? box_M(st) : NULL, *r = NULL;
    if (S && M) {
        if (a4) r = PyObject_CallFunctionObjArgs(fn, S, M, a0, a4, a5, NULL);
        else r = PyObject_CallFunctionObjArgs(fn, a0, a1, S, M, NULL);
    }
    Py_XDECREF(S);
    Py_XDECREF(M);
    return r;
}

static int run(Proc *P, St *st, int (*f)(Proc *, St *)) {
    int rc = f(P, st);
    if (rc == RC_EXIT) { PyErr_SetNone(P->exit_cls); return RC_ERR; }
    return rc;
}

/* compute + deparse + payload: the frame of one copy */
static PyObject *finish(Proc *P, St *st) {
    if (run(P, st, f_compute) < 0) return NULL;
    unsigned char ob[OBMAX];
    Py_ssize_t on = 0;
    int rc = f_deparser(P, st, ob, &on);
    if (rc == RC_EXIT) { PyErr_SetNone(P->exit_cls); return NULL; }
    if (rc < 0) return NULL;
    Py_ssize_t pn = PyBytes_GET_SIZE(st->payload);
    PyObject *b = PyBytes_FromStringAndSize(NULL, on + pn);
    if (!b) return NULL;
    memcpy(PyBytes_AS_STRING(b), ob, (size_t)on);
    memcpy(PyBytes_AS_STRING(b) + on, PyBytes_AS_STRING(st->payload), (size_t)pn);
    return b;
}

static PyObject *emit_one(Proc *P, St *st, PyObject *port, PyObject *out) {
    PyObject *b = finish(P, st);
    if (!b) return NULL;
    if (bump(P->tx, port) < 0) { Py_DECREF(b); return NULL; }
    PyObject *t = PyTuple_Pack(2, port, b);
    Py_DECREF(b);
    if (!t) return NULL;
    int rc = PyList_Append(out, t);
    Py_DECREF(t);
    return rc < 0 ? NULL : out;
}

/* the copy into its egress queue: P->enqueue(port, priority) gives the 4 queueing values
   for the slots qs, or None when the queue drops the copy (1: queued, 0: dropped, -1: error) */
static int enqueue(Proc *P, St *st, PyObject *port_o, int prio_slot, const int qs[4]) {
    PyObject *pr = v_to_py(st->m[prio_slot]);
    if (!pr) return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(P->enqueue, port_o, pr, NULL);
    Py_DECREF(pr);
    if (!r) return -1;
    if (r == Py_None) { Py_DECREF(r); return 0; }
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 4) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "enqueue must give 4 values or None");
        return -1;
    }
    for (int k = 0; k < 4; k++)
        if (v_from_py(PyTuple_GET_ITEM(r, k), &st->m[qs[k]]) < 0) { Py_DECREF(r); return -1; }
    Py_DECREF(r);
    return 1;
}

/* the loop: process() and its copy functions, lowered from pyswitch/native/loop.py */
@LOOP@
/* process(ingress_port, frame), called by vectorcall: no tuple of arguments per frame */
static PyObject *proc_vcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    Proc *P = (Proc *)self;
    if (!P->keep) { PyErr_SetString(PyExc_RuntimeError, "process cleared"); return NULL; }
    if (kw && PyTuple_GET_SIZE(kw)) { PyErr_SetString(PyExc_TypeError, "process takes no keywords"); return NULL; }
    if (PyVectorcall_NARGS(nargsf) != 2) {
        PyErr_Format(PyExc_TypeError, "process expected 2 arguments, got %zd", PyVectorcall_NARGS(nargsf));
        return NULL;
    }
    PyObject *ipo = args[0], *frame = args[1];
    if (PyBytes_CheckExact(frame)) return process(P, ipo, frame);
    PyObject *b = PyObject_CallOneArg((PyObject *)&PyBytes_Type, frame);
    if (!b) return NULL;
    PyObject *r = process(P, ipo, b);
    Py_DECREF(b);
    return r;
}

/* a Process holds its switch's bound methods, and the switch holds the Process: the
   cycle is the garbage collector's to break (a replaced pipeline must be freed) */
static int proc_traverse(PyObject *self, visitproc visit, void *arg) {
    Proc *P = (Proc *)self;
    for (int i = 0; i < NG; i++) { Py_VISIT(P->g[i]); Py_VISIT(P->gd[i]); }
    Py_VISIT(P->rx); Py_VISIT(P->tx); Py_VISIT(P->stats); Py_VISIT(P->mcast);
    Py_VISIT(P->after_ingress); Py_VISIT(P->after_egress); Py_VISIT(P->exit_cls);
    Py_VISIT(P->keep); Py_VISIT(P->enqueue);
    return 0;
}

static int proc_clear(PyObject *self) {
    Proc *P = (Proc *)self;
    for (int i = 0; i < NG; i++) { Py_CLEAR(P->g[i]); Py_CLEAR(P->gd[i]); }
    Py_CLEAR(P->rx); Py_CLEAR(P->tx); Py_CLEAR(P->stats); Py_CLEAR(P->mcast);
    Py_CLEAR(P->after_ingress); Py_CLEAR(P->after_egress); Py_CLEAR(P->exit_cls);
    Py_CLEAR(P->keep); Py_CLEAR(P->enqueue);
    return 0;
}

static void proc_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    proc_clear(self);
    PyObject_GC_Del(self);
}

static PyTypeObject ProcType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "@MOD@.Process",
    .tp_basicsize = sizeof(Proc),
    .tp_dealloc = proc_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Proc, vectorcall),
    .tp_traverse = proc_traverse,
    .tp_clear = proc_clear,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "pyswitch's process(ingress_port, frame), compiled",
};

/* A table's instance dict, read in place for its `default` (tab_default_entry), when that
   is what an attribute look-up would read: plain attribute access on the type and no
   attribute of that name on the class; NULL (look-ups by attribute) otherwise */
static PyObject *inst_dict(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    if (t->tp_getattro != PyObject_GenericGetAttr || _PyType_Lookup(t, s_default)) return NULL;
    if (!(t->tp_dictoffset || PyType_HasFeature(t, Py_TPFLAGS_MANAGED_DICT))) return NULL;
    PyObject *d = PyObject_GenericGetDict(o, NULL);
    if (!d) { PyErr_Clear(); return NULL; }
    if (!PyDict_CheckExact(d) || !PyDict_GetItemWithError(d, s_default)) {
        PyErr_Clear();
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *make(PyObject *mod, PyObject *args) {
    PyObject *g, *rx, *tx, *stats, *mcast, *ai, *ae, *ex, *enq;
    if (!PyArg_ParseTuple(args, "O!OOOO!OOOO", &PyTuple_Type, &g, &rx, &tx, &stats,
                          &PyDict_Type, &mcast, &ai, &ae, &ex, &enq)) return NULL;
    if (PyTuple_GET_SIZE(g) != NG) { PyErr_SetString(PyExc_ValueError, "context size"); return NULL; }
    for (int i = 0; i < NREG; i++)  /* reg_get/reg_set read them as C arrays */
        if (!is_cells(PyTuple_GET_ITEM(g, REG_G[i]))) {
            PyErr_Format(PyExc_TypeError, "context %d: a register must be a Cells, not %.100s",
                         REG_G[i], Py_TYPE(PyTuple_GET_ITEM(g, REG_G[i]))->tp_name);
            return NULL;
        }
    Proc *P = PyObject_GC_New(Proc, &ProcType);
    if (!P) return NULL;
    for (int i = 0; i < NG; i++) { P->g[i] = PyTuple_GET_ITEM(g, i); Py_INCREF(P->g[i]); }
    for (int i = 0; i < NG; i++) P->gd[i] = inst_dict(P->g[i]);
    P->rx = rx; P->tx = tx; P->stats = stats; P->mcast = mcast;
    P->after_ingress = ai; P->after_egress = ae; P->exit_cls = ex;
    P->enqueue = enq; Py_INCREF(enq);
    P->vectorcall = proc_vcall;
    P->keep = PyList_New(0);
    if (!P->keep) { Py_DECREF(P); return NULL; }
    PyObject_GC_Track((PyObject *)P);
    Py_INCREF(rx); Py_INCREF(tx); Py_INCREF(stats); Py_INCREF(mcast);
    Py_INCREF(ai); Py_INCREF(ae); Py_INCREF(ex);
    return (PyObject *)P;
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS, "make(context, rx, tx, stats, mcast, after_ingress, after_egress, exit, enqueue)"},
    {"cells", cells_new, METH_VARARGS, "cells(values, width): a register's cells in C memory"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "@MOD@", NULL, -1, methods};

PyMODINIT_FUNC PyInit_@MOD@(void) {
    crc_init();
    if (PyType_Ready(&ProcType) < 0 || PyType_Ready(&CellsType) < 0) return NULL;
    s_aidx = PyUnicode_InternFromString("aidx");
    s_hit = PyUnicode_InternFromString("hit");
    s_args = PyUnicode_InternFromString("args");
    s_default = PyUnicode_InternFromString("default");
    s_lookup = PyUnicode_InternFromString("lookup");
    s_dropped = PyUnicode_InternFromString("dropped");
    s_counter = PyUnicode_InternFromString("counter");
    return PyModule_Create(&moddef);
}
