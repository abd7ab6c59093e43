/* pyswitch's ports in C: Port.recv_batch and Port.send_batch (pyswitch/ports.py) step for
   step, without a Python statement per frame.  Built once by pyswitch.native (not per
   program); ports.py keeps its Python loops as the fallback.  The port guarantees are the
   same and checked per frame: frames the interface sent (PACKET_OUTGOING) are dropped,
   truncated ones counted and dropped, an 802.1Q tag the kernel moved into the auxdata put
   back after the MAC addresses (TPID from the auxdata when valid, else 0x8100).  Pump, at
   the end, is pyswitch.daemon's forwarding loop over these ports.
   @MOD@ is the module name. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <unistd.h>
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

/* up to `limit` frames into a new list (NULL on a Python error), the batch's figures out */
static PyObject *recv_list(Io *io, long limit, long *nbytes_out, int *trunc_out,
                           int *restored_out, int *err_out) {
    if (limit > io->n) limit = io->n;
    if (limit < 1) limit = 1;
    *nbytes_out = 0; *trunc_out = 0; *restored_out = 0; *err_out = 0;
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
    int saved = errno;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    if (n <= 0) {
        *err_out = (n < 0 && saved != EAGAIN && saved != EINTR) ? saved : 0;
        return out;
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
    *nbytes_out = nbytes; *trunc_out = trunc; *restored_out = restored;
    return out;
}

/* recv(limit) -> (frames, nbytes, truncated, vlan_restored, errno of a failed call or 0) */
static PyObject *io_recv(PyObject *self, PyObject *arg) {
    long limit = PyLong_AsLong(arg);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    long nbytes; int trunc, restored, err;
    PyObject *out = recv_list((Io *)self, limit, &nbytes, &trunc, &restored, &err);
    if (!out) return NULL;
    return Py_BuildValue("(Nliii)", out, nbytes, trunc, restored, err);
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

/* frames (a sequence) out in order, as many per sendmmsg as the kernel takes; -1 on a
   Python error (a frame that is not bytes-like) */
static int send_seq(Io *io, PyObject *frames, long *sent_out, long *errors_out, long *nbytes_out) {
    PyObject *seq = PySequence_Fast(frames, "frames must be a sequence");
    if (!seq) return -1;
    Py_ssize_t total = PySequence_Fast_GET_SIZE(seq);
    long sent = 0, errors = 0, nbytes = 0;
    int k = 0;
    for (Py_ssize_t i = 0; i < total; i++) {
        Py_buffer view;  /* bytes, or any bytes-like frame, as the Python loop takes */
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &view, PyBUF_SIMPLE) < 0) {
            Py_DECREF(seq);
            return -1;
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
    *sent_out = sent; *errors_out = errors; *nbytes_out = nbytes;
    return 0;
}

/* send(frames) -> (sent, errors, bytes): as Port.send_batch, frames in order */
static PyObject *io_send(PyObject *self, PyObject *frames) {
    long sent, errors, nbytes;
    if (send_seq((Io *)self, frames, &sent, &errors, &nbytes) < 0) return NULL;
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


/* ------------------------------------------------------------------ the forwarding loop

   Pump: pyswitch.daemon's ForwardingLoop's fast path in C -- epoll over the ports (the GIL
   released while it waits), each ready port's batch received (recv_list), run through the
   switch's batch call, and what it emits sent per port in one send_seq each, the port
   counters and the loop's own counted as ForwardingLoop._receive counts them.  Python is
   entered for the pipeline's batch call only (native: C too), and for what the fast path
   does not do: a frame that raised (ForwardingLoop._batch_errors), an output to the CPU
   port or to a port with a transmit impairment (ForwardingLoop._transmit), a device
   without a switch or with egress queues (ForwardingLoop._receive).  run() returns on a
   wake-up (1), after a round that went through Python (2: the loop looks at its timers),
   or on a signal (0). */

#define MAX_PORTNUM 512
#define PUMP_MAX 512
#define WAKE_TAG 0xFFFFFFFFu
#define PUMP_BATCH 64

typedef struct {
    PyObject_HEAD
    int epfd, wake_fd, nports;
    PyObject *loop, *dev, *lock;
    PyObject *ios[PUMP_MAX], *counters[PUMP_MAX], *nums[PUMP_MAX];
    short by_num[MAX_PORTNUM];
    unsigned char slow_by_num[MAX_PORTNUM];
} Pump;

static PyObject *s_switch, *s_queued, *s_process, *s_batch, *s_process_batch, *s_acquire,
    *s_release, *s_receive, *s_transmit, *s_batch_errors, *s_processed, *s_unknown,
    *s_rx_frames, *s_rx_bytes, *s_rx_errors, *s_rx_truncated, *s_vlan_restored,
    *s_tx_frames, *s_tx_bytes, *s_tx_errors, *s_epoch;

static int add_attr(PyObject *o, PyObject *name, long d) {
    if (!d) return 0;  /* += 0 leaves the value as it was */
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    PyObject *dd = PyLong_FromLong(d);
    if (!dd) { Py_DECREF(v); return -1; }
    PyObject *sum = PyNumber_Add(v, dd);
    Py_DECREF(v); Py_DECREF(dd);
    if (!sum) return -1;
    int rc = PyObject_SetAttr(o, name, sum);
    Py_DECREF(sum);
    return rc;
}

static void pump_clear_refs(Pump *P) {
    for (int k = 0; k < P->nports; k++) {
        Py_CLEAR(P->ios[k]); Py_CLEAR(P->counters[k]); Py_CLEAR(P->nums[k]);
    }
    P->nports = 0;
    Py_CLEAR(P->loop); Py_CLEAR(P->dev); Py_CLEAR(P->lock);
}

static void pump_dealloc(PyObject *self) {
    Pump *P = (Pump *)self;
    if (P->epfd >= 0) close(P->epfd);
    pump_clear_refs(P);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *pump_new(PyTypeObject *t, PyObject *a, PyObject *k) {
    Pump *P = (Pump *)t->tp_alloc(t, 0);
    if (P) P->epfd = -1;
    return (PyObject *)P;
}

/* Pump(loop, device, lock, wake_fd, ports): ports a list of (number, PortIO, counters, fd) */
static int pump_init(PyObject *self, PyObject *args, PyObject *kw) {
    Pump *P = (Pump *)self;
    PyObject *loop, *dev, *lock, *ports;
    int wake_fd;
    if (!PyArg_ParseTuple(args, "OOOiO!", &loop, &dev, &lock, &wake_fd, &PyList_Type, &ports))
        return -1;
    if (P->epfd >= 0) { close(P->epfd); P->epfd = -1; }
    pump_clear_refs(P);
    for (int i = 0; i < MAX_PORTNUM; i++) P->by_num[i] = -1;
    Py_ssize_t n = PyList_GET_SIZE(ports);
    if (n > PUMP_MAX) { PyErr_SetString(PyExc_ValueError, "too many ports"); return -1; }
    P->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (P->epfd < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    Py_INCREF(loop); P->loop = loop;
    Py_INCREF(dev); P->dev = dev;
    Py_INCREF(lock); P->lock = lock;
    P->wake_fd = wake_fd;
    struct epoll_event ev = {.events = EPOLLIN};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *num, *io, *cnt;
        int fd;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(ports, i), "OO!Oi", &num, &IoType, &io, &cnt, &fd))
            return -1;
        long v = PyLong_AsLong(num);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || v >= MAX_PORTNUM) { PyErr_SetString(PyExc_ValueError, "port number"); return -1; }
        P->by_num[v] = (short)i;
        Py_INCREF(num); P->nums[i] = num;
        Py_INCREF(io); P->ios[i] = io;
        Py_INCREF(cnt); P->counters[i] = cnt;
        P->nports = (int)i + 1;
        ev.data.u32 = (uint32_t)i;
        if (epoll_ctl(P->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    }
    ev.data.u32 = WAKE_TAG;
    if (epoll_ctl(P->epfd, EPOLL_CTL_ADD, wake_fd, &ev) < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    return 0;
}

static int call_loop(Pump *P, PyObject *name, PyObject *a, PyObject *b) {
    PyObject *r = PyObject_CallMethodObjArgs(P->loop, name, a, b, NULL);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* one received batch from port k through the switch (ForwardingLoop._receive's fast
   path); *python set when a Python fallback ran */
static int pump_forward(Pump *P, int k, PyObject *frames, PyObject *slow, int *python) {
    PyObject *num = P->nums[k];
    PyObject *sw = PyObject_GetAttr(P->dev, s_switch);
    if (!sw) return -1;
    int queued = 0;
    if (sw != Py_None) {
        PyObject *q = PyObject_GetAttr(sw, s_queued);
        if (!q) { Py_DECREF(sw); return -1; }
        queued = PyObject_IsTrue(q);
        Py_DECREF(q);
        if (queued < 0) { Py_DECREF(sw); return -1; }
    }
    if (sw == Py_None || queued) {  /* no pipeline, or egress queues: the Python path */
        Py_DECREF(sw);
        *python = 1;
        return call_loop(P, s_receive, num, frames);
    }
    /* Switch.process_batch: the native Process's own loop where it has one */
    PyObject *batch = NULL, *proc = PyObject_GetAttr(sw, s_process);
    if (!proc) { Py_DECREF(sw); return -1; }
    batch = PyObject_GetAttr(proc, s_batch);
    Py_DECREF(proc);
    if (!batch) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) { Py_DECREF(sw); return -1; }
        PyErr_Clear();
        batch = PyObject_GetAttr(sw, s_process_batch);
    }
    Py_DECREF(sw);
    if (!batch) return -1;
    PyObject *errors = PyList_New(0);
    if (!errors) { Py_DECREF(batch); return -1; }
    PyObject *outs = PyObject_CallFunctionObjArgs(batch, frames, num, errors, NULL);
    Py_DECREF(batch);
    if (!outs) { Py_DECREF(errors); return -1; }
    int rc = -1;
    PyObject *pending[PUMP_MAX] = {0};
    int order[PUMP_MAX], norder = 0;
    long unknown = 0;
    PyObject *seq = NULL;
    if (add_attr(P->loop, s_processed, (long)(PyList_GET_SIZE(frames) - PyList_GET_SIZE(errors))) < 0)
        goto done;
    if (PyList_GET_SIZE(errors)) {
        *python = 1;
        if (call_loop(P, s_batch_errors, num, errors) < 0) goto done;
    }
    seq = PySequence_Fast(outs, "outputs must be a sequence");
    if (!seq) goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *pair = NULL, *op, *fr;
        if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 2) {
            op = PyTuple_GET_ITEM(item, 0); fr = PyTuple_GET_ITEM(item, 1);
        } else {
            pair = PySequence_Tuple(item);
            if (!pair) goto done;
            if (PyTuple_GET_SIZE(pair) != 2) {
                PyErr_SetString(PyExc_ValueError, "an output is not (port, frame)");
                Py_DECREF(pair); goto done;
            }
            op = PyTuple_GET_ITEM(pair, 0); fr = PyTuple_GET_ITEM(pair, 1);
        }
        long v = PyLong_Check(op) ? PyLong_AsLong(op) : -1;
        if (v == -1 && PyErr_Occurred()) PyErr_Clear();
        int is_slow, idx = -1;
        if (v >= 0 && v < MAX_PORTNUM) {
            is_slow = P->slow_by_num[v];
            idx = P->by_num[v];
        } else {
            is_slow = PySet_Contains(slow, op);
            if (is_slow < 0) { Py_XDECREF(pair); goto done; }
        }
        if (is_slow) {  /* the CPU port, a transmit impairment: as _receive, in order */
            *python = 1;
            int r = call_loop(P, s_transmit, op, fr);
            Py_XDECREF(pair);
            if (r < 0) goto done;
            continue;
        }
        if (idx < 0) { unknown++; Py_XDECREF(pair); continue; }
        if (!pending[idx]) {
            pending[idx] = PyList_New(0);
            if (!pending[idx]) { Py_XDECREF(pair); goto done; }
            order[norder++] = idx;
        }
        int r = PyList_Append(pending[idx], fr);
        Py_XDECREF(pair);
        if (r < 0) goto done;
    }
    for (int j = 0; j < norder; j++) {  /* each port's frames in one batch, in order */
        int idx = order[j];
        long sent, errs, nbytes;
        if (send_seq((Io *)P->ios[idx], pending[idx], &sent, &errs, &nbytes) < 0) goto done;
        PyObject *c = P->counters[idx];
        if (add_attr(c, s_tx_frames, sent) < 0 || add_attr(c, s_tx_errors, errs) < 0
                || add_attr(c, s_tx_bytes, nbytes) < 0) goto done;
    }
    if (add_attr(P->loop, s_unknown, unknown) < 0) goto done;
    rc = 0;
done:
    for (int j = 0; j < norder; j++) Py_XDECREF(pending[order[j]]);
    Py_XDECREF(seq);
    Py_DECREF(outs);
    Py_DECREF(errors);
    return rc;
}

static int pump_port(Pump *P, int k, PyObject *slow, int *python) {
    long nbytes; int trunc, restored, err;
    PyObject *frames = recv_list((Io *)P->ios[k], PUMP_BATCH, &nbytes, &trunc, &restored, &err);
    if (!frames) return -1;
    PyObject *c = P->counters[k];
    Py_ssize_t n = PyList_GET_SIZE(frames);
    int rc = 0;
    if (add_attr(c, s_rx_errors, err ? 1 : 0) < 0 || add_attr(c, s_rx_truncated, trunc) < 0
            || add_attr(c, s_vlan_restored, restored) < 0 || add_attr(c, s_rx_frames, (long)n) < 0
            || add_attr(c, s_rx_bytes, nbytes) < 0)
        rc = -1;
    else if (n)
        rc = pump_forward(P, k, frames, slow, python);
    Py_DECREF(frames);
    return rc;
}

/* run(slow, epoch): forward until a wake-up (1), a round through Python (2) or a signal
   (0); `slow` is the set of output ports the Python path sends to (the CPU port, ports with
   a transmit impairment), valid while the loop's `epoch` is the one given: every change
   bumps it under the lock, and a round that finds it changed forwards nothing (its frames
   stay queued for the next look) and returns 1 */
static PyObject *pump_run(PyObject *self, PyObject *args) {
    Pump *P = (Pump *)self;
    PyObject *slow, *epoch;
    if (!PyArg_ParseTuple(args, "OO:run", &slow, &epoch)) return NULL;
    if (!PyAnySet_Check(slow)) { PyErr_SetString(PyExc_TypeError, "slow must be a set"); return NULL; }
    memset(P->slow_by_num, 0, sizeof P->slow_by_num);
    PyObject *it = PyObject_GetIter(slow), *x;
    if (!it) return NULL;
    while ((x = PyIter_Next(it))) {
        long v = PyLong_Check(x) ? PyLong_AsLong(x) : -1;
        if (v == -1 && PyErr_Occurred()) PyErr_Clear();
        if (v >= 0 && v < MAX_PORTNUM) P->slow_by_num[v] = 1;
        Py_DECREF(x);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return NULL;
    struct epoll_event ev[64];
    for (;;) {
        int n, saved;
        Py_BEGIN_ALLOW_THREADS
        n = epoll_wait(P->epfd, ev, 64, -1);
        saved = errno;
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (saved == EINTR) {
                if (PyErr_CheckSignals() < 0) return NULL;
                return PyLong_FromLong(0);
            }
            errno = saved;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        PyObject *r = PyObject_CallMethodNoArgs(P->lock, s_acquire);
        if (!r) return NULL;
        Py_DECREF(r);
        int woke = 0, python = 0, rc = 0;
        PyObject *now = PyObject_GetAttr(P->loop, s_epoch);
        int same = now ? PyObject_RichCompareBool(now, epoch, Py_EQ) : -1;
        Py_XDECREF(now);
        if (same <= 0) {  /* changed (or an error): nothing forwarded with stale settings */
            PyObject *et, *ev_, *tb;
            PyErr_Fetch(&et, &ev_, &tb);
            r = PyObject_CallMethodNoArgs(P->lock, s_release);
            if (!r) { Py_XDECREF(et); Py_XDECREF(ev_); Py_XDECREF(tb); return NULL; }
            Py_DECREF(r);
            PyErr_Restore(et, ev_, tb);
            return same < 0 ? NULL : PyLong_FromLong(1);
        }
        for (int i = 0; i < n && rc == 0; i++) {
            uint32_t k = ev[i].data.u32;
            if (k == WAKE_TAG) {
                char buf[4096];
                while (read(P->wake_fd, buf, sizeof buf) > 0) {}
                woke = 1;
                continue;
            }
            rc = pump_port(P, (int)k, slow, &python);
        }
        PyObject *et, *ev_, *tb;
        PyErr_Fetch(&et, &ev_, &tb);
        r = PyObject_CallMethodNoArgs(P->lock, s_release);
        if (!r) { Py_XDECREF(et); Py_XDECREF(ev_); Py_XDECREF(tb); return NULL; }
        Py_DECREF(r);
        PyErr_Restore(et, ev_, tb);
        if (rc < 0) return NULL;
        if (woke) return PyLong_FromLong(1);
        if (python) return PyLong_FromLong(2);
    }
}

static PyMethodDef pump_methods[] = {
    {"run", pump_run, METH_VARARGS, "run(slow, epoch) -> 1 woken, 2 went through Python, 0 a signal"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PumpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "@MOD@.Pump",
    .tp_basicsize = sizeof(Pump),
    .tp_dealloc = pump_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Pump(loop, device, lock, wake_fd, ports): the daemon's forwarding loop in C",
    .tp_methods = pump_methods,
    .tp_init = pump_init,
    .tp_new = pump_new,
};

static int intern_names(void) {
#define I(var, text) if (!(var = PyUnicode_InternFromString(text))) return -1;
    I(s_switch, "switch") I(s_queued, "queued") I(s_process, "process") I(s_batch, "batch")
    I(s_process_batch, "process_batch") I(s_acquire, "acquire") I(s_release, "release")
    I(s_receive, "_receive") I(s_transmit, "_transmit") I(s_batch_errors, "_batch_errors")
    I(s_processed, "processed") I(s_unknown, "unknown_port_out") I(s_rx_frames, "rx_frames")
    I(s_rx_bytes, "rx_bytes") I(s_rx_errors, "rx_errors") I(s_rx_truncated, "rx_truncated")
    I(s_vlan_restored, "vlan_restored") I(s_tx_frames, "tx_frames") I(s_tx_bytes, "tx_bytes")
    I(s_tx_errors, "tx_errors") I(s_epoch, "epoch")
#undef I
    return 0;
}

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "@MOD@", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_@MOD@(void) {
    if (PyType_Ready(&IoType) < 0 || PyType_Ready(&PumpType) < 0 || intern_names() < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    Py_INCREF(&IoType);
    if (PyModule_AddObject(m, "PortIO", (PyObject *)&IoType) < 0) { Py_DECREF(&IoType); Py_DECREF(m); return NULL; }
    Py_INCREF(&PumpType);
    if (PyModule_AddObject(m, "Pump", (PyObject *)&PumpType) < 0) { Py_DECREF(&PumpType); Py_DECREF(m); return NULL; }
    return m;
}
