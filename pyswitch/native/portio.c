/* pyswitch's ports in C: Port.recv_batch and Port.send_batch (pyswitch/ports.py) step for
   step, without a Python statement per frame.  Built once by pyswitch.native (not per
   program); ports.py keeps its Python loops as the fallback.  The port guarantees are the
   same and checked per frame: frames the interface sent (PACKET_OUTGOING) are dropped,
   truncated ones counted and dropped, an 802.1Q tag the kernel moved into the auxdata put
   back after the MAC addresses (TPID from the auxdata when valid, else 0x8100).
   @MOD@ is the module name. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/if_packet.h>

#define MAX_FRAME (65536 + 64)
#ifndef PACKET_AUXDATA
#define PACKET_AUXDATA 8
#endif
#define ANC_SIZE CMSG_SPACE(sizeof(struct tpacket_auxdata))

typedef struct {
    PyObject_HEAD
    int fd, n;
    unsigned char *data;              /* n slots of MAX_FRAME bytes (anonymous mapping) */
    struct sockaddr_ll *names;
    unsigned char *ctrl;
    struct iovec *iov;
    struct mmsghdr *msgs;
} Io;

static void io_dealloc(PyObject *self) {
    Io *io = (Io *)self;
    if (io->data) munmap(io->data, (size_t)io->n * MAX_FRAME);
    PyMem_Free(io->names); PyMem_Free(io->ctrl); PyMem_Free(io->iov); PyMem_Free(io->msgs);
    Py_TYPE(self)->tp_free(self);
}

static int io_init(PyObject *self, PyObject *args, PyObject *kw) {
    Io *io = (Io *)self;
    if (!PyArg_ParseTuple(args, "ii", &io->fd, &io->n)) return -1;
    if (io->n <= 0 || io->n > 1024) { PyErr_SetString(PyExc_ValueError, "batch size"); return -1; }
    size_t n = (size_t)io->n;
    io->data = mmap(NULL, n * MAX_FRAME, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (io->data == MAP_FAILED) { io->data = NULL; PyErr_SetFromErrno(PyExc_OSError); return -1; }
    io->names = PyMem_Calloc(n, sizeof(struct sockaddr_ll));
    io->ctrl = PyMem_Calloc(n, ANC_SIZE);
    io->iov = PyMem_Calloc(n, sizeof(struct iovec));
    io->msgs = PyMem_Calloc(n, sizeof(struct mmsghdr));
    if (!io->names || !io->ctrl || !io->iov || !io->msgs) { PyErr_NoMemory(); return -1; }
    for (size_t k = 0; k < n; k++) {
        io->iov[k].iov_base = io->data + k * MAX_FRAME;
        io->iov[k].iov_len = MAX_FRAME;
        io->msgs[k].msg_hdr.msg_iov = &io->iov[k];
        io->msgs[k].msg_hdr.msg_iovlen = 1;
    }
    return 0;
}

/* recv(limit) -> (frames, nbytes, truncated, vlan_restored, errno of a failed call or 0) */
static PyObject *io_recv(PyObject *self, PyObject *arg) {
    Io *io = (Io *)self;
    long limit = PyLong_AsLong(arg);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    if (limit > io->n) limit = io->n;
    if (limit < 1) limit = 1;
    for (long k = 0; k < limit; k++) {  /* what the kernel overwrites, reset */
        struct msghdr *h = &io->msgs[k].msg_hdr;
        io->iov[k].iov_len = MAX_FRAME;
        h->msg_name = &io->names[k];
        h->msg_namelen = sizeof(struct sockaddr_ll);
        h->msg_control = io->ctrl + k * ANC_SIZE;
        h->msg_controllen = ANC_SIZE;
        h->msg_flags = 0;
        io->msgs[k].msg_len = 0;
    }
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = recvmmsg(io->fd, io->msgs, (unsigned)limit, MSG_DONTWAIT, NULL);
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    if (n <= 0) {
        int err = (n < 0 && errno != EAGAIN && errno != EINTR) ? errno : 0;
        return Py_BuildValue("(Niiii)", out, 0, 0, 0, err);
    }
    long nbytes = 0;
    int trunc = 0, restored = 0;
    for (int k = 0; k < n; k++) {
        struct msghdr *h = &io->msgs[k].msg_hdr;
        if (io->names[k].sll_pkttype == PACKET_OUTGOING) continue;
        if (h->msg_flags & MSG_TRUNC) { trunc++; continue; }
        const unsigned char *f = io->data + (size_t)k * MAX_FRAME;
        Py_ssize_t len = io->msgs[k].msg_len;
        const struct tpacket_auxdata *aux = NULL;
        if (h->msg_controllen >= CMSG_LEN(sizeof(struct tpacket_auxdata))) {
            struct cmsghdr *c = (struct cmsghdr *)(io->ctrl + k * ANC_SIZE);
            if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA)
                aux = (const struct tpacket_auxdata *)CMSG_DATA(c);
        }
        PyObject *b;
        if (aux && ((aux->tp_status & TP_STATUS_VLAN_VALID) || aux->tp_vlan_tci) && len >= 12) {
            unsigned tpid = aux->tp_vlan_tpid;
            if (!(aux->tp_status & TP_STATUS_VLAN_TPID_VALID) || !tpid) tpid = 0x8100;
            b = PyBytes_FromStringAndSize(NULL, len + 4);
            if (!b) { Py_DECREF(out); return NULL; }
            unsigned char *p = (unsigned char *)PyBytes_AS_STRING(b);
            memcpy(p, f, 12);
            p[12] = (unsigned char)(tpid >> 8); p[13] = (unsigned char)tpid;
            p[14] = (unsigned char)(aux->tp_vlan_tci >> 8); p[15] = (unsigned char)aux->tp_vlan_tci;
            memcpy(p + 16, f + 12, (size_t)len - 12);
            restored++;
            len += 4;
        } else {
            b = PyBytes_FromStringAndSize((const char *)f, len);
            if (!b) { Py_DECREF(out); return NULL; }
        }
        nbytes += len;
        if (PyList_Append(out, b) < 0) { Py_DECREF(b); Py_DECREF(out); return NULL; }
        Py_DECREF(b);
    }
    return Py_BuildValue("(Nliii)", out, nbytes, trunc, restored, 0);
}

/* sendmmsg the first k slots; a refused frame is counted and skipped (Port._flush) */
static void flush(Io *io, int k, long *sent, long *errors, long *nbytes) {
    int done = 0;
    while (done < k) {
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = sendmmsg(io->fd, io->msgs + done, (unsigned)(k - done), MSG_DONTWAIT);
        Py_END_ALLOW_THREADS
        if (r <= 0) {
            (*errors)++;
            *nbytes -= (long)io->iov[done].iov_len;
            done++;
        } else {
            *sent += r;
            done += r;
        }
    }
}

/* send(frames) -> (sent, errors, bytes): as Port.send_batch, frames in order */
static PyObject *io_send(PyObject *self, PyObject *frames) {
    Io *io = (Io *)self;
    PyObject *seq = PySequence_Fast(frames, "frames must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t total = PySequence_Fast_GET_SIZE(seq);
    long sent = 0, errors = 0, nbytes = 0;
    int k = 0;
    for (Py_ssize_t i = 0; i < total; i++) {
        Py_buffer view;  /* bytes, or any bytes-like frame, as the Python loop takes */
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &view, PyBUF_SIMPLE) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        Py_ssize_t len = view.len;
        if (len > MAX_FRAME) {  /* cannot be a slot: sent (and refused) on its own */
            flush(io, k, &sent, &errors, &nbytes);
            k = 0;
            ssize_t r;
            Py_BEGIN_ALLOW_THREADS
            r = send(io->fd, view.buf, (size_t)len, MSG_DONTWAIT);
            Py_END_ALLOW_THREADS
            PyBuffer_Release(&view);
            if (r < 0) errors++;
            else { sent++; nbytes += len; }
            continue;
        }
        memcpy(io->data + (size_t)k * MAX_FRAME, view.buf, (size_t)len);
        PyBuffer_Release(&view);
        io->iov[k].iov_len = (size_t)len;
        struct msghdr *h = &io->msgs[k].msg_hdr;
        h->msg_name = NULL; h->msg_namelen = 0; h->msg_control = NULL; h->msg_controllen = 0;
        h->msg_flags = 0;
        nbytes += len;
        if (++k == io->n) { flush(io, k, &sent, &errors, &nbytes); k = 0; }
    }
    flush(io, k, &sent, &errors, &nbytes);
    Py_DECREF(seq);
    return Py_BuildValue("(lll)", sent, errors, nbytes);
}

static PyMethodDef io_methods[] = {
    {"recv", io_recv, METH_O, "recv(limit) -> (frames, bytes, truncated, vlan_restored, errno)"},
    {"send", io_send, METH_O, "send(frames) -> (sent, errors, bytes)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject IoType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "@MOD@.PortIO",
    .tp_basicsize = sizeof(Io),
    .tp_dealloc = io_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PortIO(fd, batch): batched receive and send on one packet socket",
    .tp_methods = io_methods,
    .tp_init = io_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "@MOD@", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_@MOD@(void) {
    if (PyType_Ready(&IoType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    Py_INCREF(&IoType);
    if (PyModule_AddObject(m, "PortIO", (PyObject *)&IoType) < 0) { Py_DECREF(&IoType); Py_DECREF(m); return NULL; }
    return m;
}
