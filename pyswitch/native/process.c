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

/* The statistics (Counts in runtime.h): counted in C while a batch runs, else on the
   switch's Python objects at once.  flush_counts adds what a batch counted to them (in
   the order the ports were first counted) and is called before anything that may count
   in Python too (the general path, the queues), at the end of a batch and on its errors;
   0, or -1 with an exception set (the counts are added all the same). */
static int flush_counts(Proc *P) {
    Counts *c = P->cnt;
    if (!c->nrx && !c->ntx && !c->dropped) return 0;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);  /* an exception being raised stays the one raised */
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        int n = k ? c->ntx : c->nrx;
        unsigned short *ports = k ? c->txp : c->rxp;
        Py_ssize_t *cnt = k ? c->txc : c->rxc;
        for (int i = 0; i < n; i++) {
            PyObject *key = PyLong_FromLong(ports[i]);
            if (!key || bump_n(k ? P->tx : P->rx, key, cnt[ports[i]]) < 0) {
                if (rc == 0 && !et) PyErr_Fetch(&et, &ev, &tb);
                else PyErr_Clear();
                rc = -1;
            }
            Py_XDECREF(key);
            cnt[ports[i]] = 0;
        }
    }
    c->nrx = c->ntx = 0;
    if (c->dropped) {
        if (bump_attr_n(P->stats, s_dropped, c->dropped) < 0) {
            if (rc == 0 && !et) PyErr_Fetch(&et, &ev, &tb);
            else PyErr_Clear();
            rc = -1;
        }
        c->dropped = 0;
    }
    PyErr_Restore(et, ev, tb);
    return rc;
}

/* one frame in rx[port] (or in tx[port]: count_tx); a port that is not an int of
   0..NPORT-1 goes to the Counter at once, after what the batch has counted */
static inline int count_port(Proc *P, int tx, PyObject *port_o, V port_v) {
    Counts *c = P->cnt;
    if (!c->on) return bump(tx ? P->tx : P->rx, port_o);
    if (port_v >= 0 && port_v < NPORT && PyLong_CheckExact(port_o)) {
        int v = (int)port_v;
        Py_ssize_t *cnt = tx ? c->txc : c->rxc;
        if (!cnt[v]++) {
            if (tx) c->txp[c->ntx++] = (unsigned short)v;
            else c->rxp[c->nrx++] = (unsigned short)v;
        }
        return 0;
    }
    if (flush_counts(P) < 0) return -1;
    return bump(tx ? P->tx : P->rx, port_o);
}

static inline int count_rx(Proc *P, PyObject *port_o, V port_v) {
    return count_port(P, 0, port_o, port_v);
}

static inline int count_tx(Proc *P, PyObject *port_o, V port_v) {
    return count_port(P, 1, port_o, port_v);
}

static inline int count_drop(Proc *P) {
    if (P->cnt->on) { P->cnt->dropped++; return 0; }
    return bump_attr_n(P->stats, s_dropped, 1);
}

/* the items of list r appended to list out: 0, or -1 with an exception set */
static int extend(PyObject *out, PyObject *r) {
    Py_ssize_t n = PyList_GET_SIZE(out);
    return PyList_SetSlice(out, n, n, r);
}

static int emit_one(Proc *P, St *st, V port_v, PyObject *port, PyObject *out) {
    PyObject *b = finish(P, st);
    if (!b) return -1;
    if (count_tx(P, port, port_v) < 0) { Py_DECREF(b); return -1; }
    PyObject *t = PyTuple_Pack(2, port, b);
    Py_DECREF(b);
    if (!t) return -1;
    int rc = PyList_Append(out, t);
    Py_DECREF(t);
    return rc;
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

/* the loop: process_into() and its copy functions, lowered from pyswitch/native/loop.py */
@LOOP@
/* one frame as `process` takes it (any bytes-like object, as bytes) */
static int process_frame(Proc *P, PyObject *ipo, PyObject *frame, PyObject *out) {
    if (PyBytes_CheckExact(frame)) return process_into(P, ipo, frame, out);
    PyObject *b = PyObject_CallOneArg((PyObject *)&PyBytes_Type, frame);
    if (!b) return -1;
    int rc = process_into(P, ipo, b, out);
    Py_DECREF(b);
    return rc;
}

/* process(ingress_port, frame), called by vectorcall: no tuple of arguments per frame */
static PyObject *proc_vcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    Proc *P = (Proc *)self;
    if (!P->keep) { PyErr_SetString(PyExc_RuntimeError, "process cleared"); return NULL; }
    if (kw && PyTuple_GET_SIZE(kw)) { PyErr_SetString(PyExc_TypeError, "process takes no keywords"); return NULL; }
    if (PyVectorcall_NARGS(nargsf) != 2) {
        PyErr_Format(PyExc_TypeError, "process expected 2 arguments, got %zd", PyVectorcall_NARGS(nargsf));
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    if (process_frame(P, args[0], args[1], out) < 0) { Py_DECREF(out); return NULL; }
    return out;
}

/* Process.batch(frames, port=None, errors=None): every frame through process_into, in
   order, into one list, the statistics counted in C until the end (Switch.process_batch
   has the contract and the Python path's loop) */
static PyObject *proc_batch(PyObject *self, PyObject *args, PyObject *kw) {
    Proc *P = (Proc *)self;
    static char *kwlist[] = {"frames", "port", "errors", NULL};
    PyObject *frames, *port = Py_None, *errors = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:batch", kwlist, &frames, &port, &errors))
        return NULL;
    if (!P->keep) { PyErr_SetString(PyExc_RuntimeError, "process cleared"); return NULL; }
    if (errors != Py_None && !PyList_Check(errors)) {
        PyErr_SetString(PyExc_TypeError, "errors must be a list or None");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(frames, "frames must be iterable");
    if (!seq) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) { Py_DECREF(seq); return NULL; }
    int was = P->cnt->on;  /* a batch inside a batch (from the general path) counts on */
    P->cnt->on = 1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *ipo = port, *fr = item, *pair = NULL;
        Py_INCREF(item);
        if (port == Py_None) {  /* (port, frame): unpacked as `p, f = item` would */
            pair = PySequence_Tuple(item);
            if (!pair) { Py_DECREF(item); goto fail; }
            if (PyTuple_GET_SIZE(pair) != 2) {
                PyErr_Format(PyExc_ValueError, "frames[%zd]: expected (port, frame), got %zd "
                             "values", i, PyTuple_GET_SIZE(pair));
                Py_DECREF(pair);
                Py_DECREF(item);
                goto fail;
            }
            ipo = PyTuple_GET_ITEM(pair, 0);
            fr = PyTuple_GET_ITEM(pair, 1);
        }
        Py_ssize_t mark = PyList_GET_SIZE(out);
        int rc = process_frame(P, ipo, fr, out);
        Py_XDECREF(pair);
        Py_DECREF(item);
        if (rc == 0) continue;
        if (errors == Py_None || !PyErr_ExceptionMatches(PyExc_Exception)) goto fail;
        /* the frame's error, as the Python path's `except Exception as e` records it: the
           copies it emitted before raising leave with it, as from `process` */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_NormalizeException(&et, &ev, &tb);
        if (tb && ev) PyException_SetTraceback(ev, tb);
        PyObject *rec = Py_BuildValue("(nO)", i, ev ? ev : Py_None);
        Py_XDECREF(et); Py_XDECREF(ev); Py_XDECREF(tb);
        if (!rec || PyList_SetSlice(out, mark, PyList_GET_SIZE(out), NULL) < 0
                || PyList_Append(errors, rec) < 0) {
            Py_XDECREF(rec);
            goto fail;
        }
        Py_DECREF(rec);
    }
    P->cnt->on = was;
    Py_DECREF(seq);
    if (!was && flush_counts(P) < 0) { Py_DECREF(out); return NULL; }
    return out;
fail:
    P->cnt->on = was;
    Py_DECREF(seq);
    Py_DECREF(out);
    if (!was) flush_counts(P);  /* keeps the exception raised */
    return NULL;
}

static PyMethodDef proc_methods[] = {
    {"batch", (PyCFunction)(void (*)(void))proc_batch, METH_VARARGS | METH_KEYWORDS,
     "batch(frames, port=None, errors=None): the (port, frame) outputs of many frames"},
    {NULL, NULL, 0, NULL},
};

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
    PyMem_Free(((Proc *)self)->cnt);
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
    .tp_methods = proc_methods,
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
    for (int i = 0; i < NXT; i++)  /* xt_lookup reads them as exact.h's stores */
        if (!is_xstore(PyTuple_GET_ITEM(g, XT_G[i]))) {
            PyErr_Format(PyExc_TypeError, "context %d: an exact table's store must be an "
                         "ExactStore, not %.100s", XT_G[i],
                         Py_TYPE(PyTuple_GET_ITEM(g, XT_G[i]))->tp_name);
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
    P->cnt = PyMem_Calloc(1, sizeof(Counts));
    P->keep = PyList_New(0);
    if (!P->keep || !P->cnt) {
        Py_INCREF(rx); Py_INCREF(tx); Py_INCREF(stats); Py_INCREF(mcast);
        Py_INCREF(ai); Py_INCREF(ae); Py_INCREF(ex);
        Py_DECREF(P);
        return PyErr_NoMemory();
    }
    PyObject_GC_Track((PyObject *)P);
    Py_INCREF(rx); Py_INCREF(tx); Py_INCREF(stats); Py_INCREF(mcast);
    Py_INCREF(ai); Py_INCREF(ae); Py_INCREF(ex);
    return (PyObject *)P;
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS, "make(context, rx, tx, stats, mcast, after_ingress, after_egress, exit, enqueue)"},
    {"cells", cells_new, METH_VARARGS, "cells(values, width): a register's cells in C memory"},
    {"exact", xt_new, METH_VARARGS, "exact(widths, counted): an exact table's store in C memory"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "@MOD@", NULL, -1, methods};

PyMODINIT_FUNC PyInit_@MOD@(void) {
    crc_init();
    if (PyType_Ready(&ProcType) < 0 || PyType_Ready(&CellsType) < 0
            || PyType_Ready(&XStoreType) < 0) return NULL;
    s_aidx = PyUnicode_InternFromString("aidx");
    s_hit = PyUnicode_InternFromString("hit");
    s_args = PyUnicode_InternFromString("args");
    s_default = PyUnicode_InternFromString("default");
    s_lookup = PyUnicode_InternFromString("lookup");
    s_dropped = PyUnicode_InternFromString("dropped");
    s_counter = PyUnicode_InternFromString("counter");
    return PyModule_Create(&moddef);
}
