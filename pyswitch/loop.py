"""The forwarding loop of ``pyswitch run`` and ``pyswitch run-many``: frames between a
switch's AF_PACKET ports through its pipeline, impairments and egress queues applied.

:class:`ForwardingLoop` is one switch's packet path (its ports, impairments, delayed-frame
heap and counters); its :meth:`~ForwardingLoop.run` forwards in Python (:func:`poll_turn`)
or, with ``PYSWITCH_LOOP=c``, in C (``portio.c``'s ``Pump``).  :class:`MultiLoop` runs the
Python loop of several switches in one thread: one epoll over every switch's ports and
wake-up pipes, each ready port handed to its own switch's :class:`ForwardingLoop`, the
timers of all (``pyswitch run-many``, docs/pyswitch-api.md).  Locks: each switch's
``Device.lock`` guards its switch, impairments and heap; the loop takes it per ready port.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import select
import time
from collections.abc import Sequence
from typing import Any

from pyswitch import native
from pyswitch.impairment import ImpairmentSpecError, PortImpairments, parse_spec
from pyswitch.p4runtime.pipeline import Device
from pyswitch.ports import Port

log = logging.getLogger("pyswitch.run")
BATCH = 64

class ForwardingLoop:
    """Moves frames between ports through the device's switch, applying impairments."""

    def __init__(self, device: Device, ports: dict[int, Port],
                 impairments: PortImpairments | None = None, *,
                 native_loop: bool | None = None) -> None:
        self.dev = device
        # the C loop only when asked (here, or PYSWITCH_LOOP=c): its Mininet runs had more
        # bursts of retransmissions than the Python loop's -- the INA protocol's own
        # feedback, not a frame the loop lost or held (docs/scale.md §5), but the counts
        # did not show it no worse
        if native_loop is None:
            native_loop = os.environ.get("PYSWITCH_LOOP", "python") == "c"
        self._native_loop = native_loop  # False: the Python loop even where C could run
        self.loop_why = "not started"
        self.epoch = 0  # bumped (under the lock) by every change the C loop must see
        self.ports = ports
        self.imp = impairments or PortImpairments()
        self._by_fd = {p.fileno(): (n, p) for n, p in ports.items()}
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._heap: list[tuple[float, int, str, int, bytes]] = []  # (time, seq, "rx"/"tx"...)
        self._seq = itertools.count()
        self._stop = False
        self.processed = 0
        self.dropped_no_pipeline = 0
        self.process_errors = 0
        self.unknown_port_out = 0
        self.loop_errors = 0
        device.inject = self.inject

    # -- called from other threads
    def wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def stop(self) -> None:
        self._stop = True
        self.wake()

    def inject(self, port: int, frame: bytes) -> None:
        """Process ``frame`` as if received on ``port`` (packet-out), from any thread."""
        with self.dev.lock:
            self._process(port, frame)
        self.wake()

    def set_impairment(self, port: int | None, spec_text: str) -> None:
        with self.dev.lock:
            self.epoch += 1  # the C loop forwards nothing more before it looks again
            targets = list(self.ports) if port is None else [port]
            for p in targets:
                if p not in self.ports:
                    raise ImpairmentSpecError(f"port {p} does not exist")
                self.imp.set(p, parse_spec(spec_text, self.imp.spec(p)))
        self.wake()

    # -- the packet path (lock held)
    def _process(self, port: int, frame: bytes) -> None:
        sw = self.dev.switch
        if sw is None:
            self.dropped_no_pipeline += 1
            return
        if sw.queued:
            self._process_queued(sw, port, frame)
            return
        outs = self._run_pipeline(port, sw.process, port, frame)
        for out_port, out in outs or ():
            self._transmit(out_port, out)

    def _run_pipeline(self, port: int, call: Any, *args: Any) -> list[tuple[int, bytes]] | None:
        """``call(*args)`` (the switch's process or process_at of a frame from ``port``; no
        closure per frame), counted; None when the pipeline raised: a pipeline bug must not
        stop the switch (the first ten logged)."""
        try:
            outs = call(*args)
        except Exception:
            self.process_errors += 1
            if self.process_errors <= 10:
                log.exception("process() failed on a frame from port %d", port)
            return None
        self.processed += 1
        return outs

    def _process_queued(self, sw: Any, port: int, frame: bytes) -> None:
        """A frame through a switch with egress queues: processed at the device's clock,
        each copy sent when the queue model says it leaves its queue (a timer if later)."""
        now = time.monotonic()
        outs = self._run_pipeline(port, sw.process_at, now - self.dev.t0, port, frame)
        for out_port, out in outs or ():
            t = self.dev.t0 + sw.departure.get(out_port, 0.0)
            if t <= now:
                self._transmit(out_port, out)
            else:
                heapq.heappush(self._heap, (t, next(self._seq), "queued", out_port, out))

    def _transmit(self, port: int, frame: bytes) -> None:
        if port == self.dev.cpu_port:
            self.dev.packet_in(frame)
            return
        imp = self.imp.tx.get(port)
        if imp is not None and not (imp.spec.is_noop and imp.next_deadline() is None):
            now = time.monotonic()
            for t, f in imp.offer(frame, now):
                if t <= now:
                    self._send(port, f)
                else:
                    heapq.heappush(self._heap, (t, next(self._seq), "tx", port, f))
            self._arm(imp, "tx", port)
            return
        self._send(port, frame)

    def _send(self, port: int, frame: bytes) -> None:
        p = self.ports.get(port)
        if p is None:
            self.unknown_port_out += 1
            return
        p.send(frame)

    def _arm(self, imp: Any, kind: str, port: int) -> None:
        """Schedule a wake-up for a held (reordered) frame's hold timeout."""
        d = imp.next_deadline()
        if d is not None:
            heapq.heappush(self._heap, (d, next(self._seq), kind + "-expire", port, b""))

    def _receive(self, port: int, frames: list[bytes]) -> None:
        imp = self.imp.rx.get(port)
        if imp is not None and not (imp.spec.is_noop and imp.next_deadline() is None):
            now = time.monotonic()
            for frame in frames:
                for t, f in imp.offer(frame, now):
                    if t <= now:
                        self._process(port, f)
                    else:
                        heapq.heappush(self._heap, (t, next(self._seq), "rx", port, f))
            self._arm(imp, "rx", port)
            return
        sw = self.dev.switch
        if sw is None:
            self.dropped_no_pipeline += len(frames)
            return
        if sw.queued:
            for frame in frames:
                self._process_queued(sw, port, frame)
            return
        # fast path (no impairment on this port): the whole batch through the pipeline in
        # one call (Switch.process_batch: the loop in C on the native path), a frame that
        # raises counted and logged (a pipeline bug must not stop the switch); what the
        # batch sends to a port leaves in one Port.send_batch, in order, at the end
        ports, tx, cpu = self.ports, self.imp.tx, self.dev.cpu_port
        errors: list[tuple[int, Exception]] = []
        outs = sw.process_batch(frames, port, errors)
        self.processed += len(frames) - len(errors)
        if errors:
            self._batch_errors(port, errors)
        pending: dict[int, list[bytes]] = {}
        for out_port, out in outs:
            if out_port in tx or out_port == cpu:
                self._transmit(out_port, out)
                continue
            q = pending.get(out_port)
            if q is None:
                pending[out_port] = [out]
            else:
                q.append(out)
        for out_port, outs_ in pending.items():
            p = ports.get(out_port)
            if p is None:
                self.unknown_port_out += len(outs_)
            else:
                p.send_batch(outs_)

    def _batch_errors(self, port: int, errors: list[tuple[int, Exception]]) -> None:
        """The frames of a batch that raised: counted, the first ten logged (also called by
        the C loop)."""
        for _, e in errors:
            self.process_errors += 1
            if self.process_errors <= 10:
                log.error("process() failed on a frame from port %d", port, exc_info=e)

    def _run_timers(self) -> None:
        now = time.monotonic()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, kind, port, frame = heapq.heappop(heap)
            if kind == "tx":
                self._send(port, frame)
            elif kind == "queued":  # out of its egress queue: the link's impairments next
                self._transmit(port, frame)
            elif kind == "rx":
                self._process(port, frame)
            else:  # a reorder hold expired
                table = self.imp.rx if kind == "rx-expire" else self.imp.tx
                imp = table.get(port)
                if imp is None:
                    continue
                for t, f in imp.expire(now):
                    if kind == "rx-expire":
                        if t <= now:
                            self._process(port, f)
                        else:
                            heapq.heappush(heap, (t, next(self._seq), "rx", port, f))
                    elif t <= now:
                        self._send(port, f)
                    else:
                        heapq.heappush(heap, (t, next(self._seq), "tx", port, f))

    def _pump_or_why(self) -> tuple[Any, str]:
        """The loop in C (`pyswitch/native/portio.c`'s ``Pump``) over these ports, or
        (None, why the Python loop runs): it needs every port a plain `Port` on the native
        path, numbered 0..511."""
        if not self._native_loop:
            return None, "the Python loop (the default; PYSWITCH_LOOP=c for the C loop)"
        if not all(type(p) is Port and p._io is not None for p in self.ports.values()):
            return None, next((f"port {n}: {p.path}" if isinstance(p, Port)
                               else f"port {n} is observed (--pcap, --dump-packet-data)"
                               for n, p in self.ports.items()
                               if not (type(p) is Port and p._io is not None)), "")
        if not all(0 <= n < 512 for n in self.ports):
            return None, "a port number outside 0..511"
        mod, why = native.portio()
        if mod is None or not hasattr(mod, "Pump"):
            return None, why or "no Pump in the ports' module"
        ports = [(n, p._io, p.counters, p.fileno()) for n, p in self.ports.items()]
        return mod.Pump(self, self.dev, self.dev.lock, self._wake_r, ports), ""

    def _fast(self) -> tuple[set[int], int] | None:
        """The output ports the C loop hands back to `_transmit` (the CPU port, ports with
        a transmit impairment) and the `epoch` they belong to, or None while the C loop
        must not run: a timer pending, or a receive impairment in effect.  Each change
        bumps `epoch` under the lock: the C loop, which takes the lock before each round of
        frames, returns instead of forwarding them with what it was given."""
        with self.dev.lock:
            if self._heap:
                return None
            for imp in self.imp.rx.values():
                if not (imp.spec.is_noop and imp.next_deadline() is None):
                    return None
            slow = set(self.imp.tx)
            if self.dev.cpu_port is not None:
                slow.add(self.dev.cpu_port)
            return slow, self.epoch

    def run(self) -> None:
        """Forward until `stop`: in C (`Pump`) while no receive impairment or timer needs
        the Python loop, else (and where the C loop cannot be built) in Python; one
        semantics, the same frames and counters (tests/test_daemon_loop.py)."""
        pump, self.loop_why = self._pump_or_why()
        ep = select.epoll()
        for fd in self._by_fd:
            ep.register(fd, select.EPOLLIN)
        ep.register(self._wake_r, select.EPOLLIN)
        try:
            while not self._stop:
                fast = self._fast() if pump is not None else None
                if fast is None:
                    self._turn(ep)
                    continue
                try:
                    pump.run(*fast)
                except Exception:  # a bug must not take the switch down; say it, go on
                    self.loop_errors += 1
                    if self.loop_errors <= 10:
                        log.exception("forwarding loop error (continuing)")
        finally:
            ep.close()

    @property
    def loop_path(self) -> str:
        """Which loop forwards: ``native`` (C) or ``python (why)``."""
        return "native" if not self.loop_why else f"python ({self.loop_why})"

    def _turn(self, ep: Any) -> None:
        """One turn of the Python loop: wait for the ports, the wake-up pipe or the next
        timer; receive, forward, fire the timers due."""
        timeout = -1.0
        if self._heap:
            timeout = max(0.0, self._heap[0][0] - time.monotonic())
        self.serve([fd for fd, _ in ep.poll(timeout)])

    def serve(self, fds: Sequence[int]) -> None:
        """Receive from the ready descriptors ``fds`` (this switch's ports and wake-up pipe)
        and forward, then fire the timers due: under the lock, once (also called by
        :class:`MultiLoop` with the descriptors of this switch that one epoll found)."""
        by_fd = self._by_fd
        try:
            with self.dev.lock:
                for fd in fds:
                    if fd == self._wake_r:
                        try:
                            os.read(self._wake_r, 4096)
                        except BlockingIOError:
                            pass
                        continue
                    port, p = by_fd[fd]
                    frames = p.recv_batch(BATCH)
                    if frames:
                        self._receive(port, frames)
                if self._heap:
                    self._run_timers()
        except Exception:  # a bug must not take the switch down; say it, go on
            self.loop_errors += 1
            if self.loop_errors <= 10:
                log.exception("forwarding loop error (continuing)")

    @property
    def fds(self) -> list[int]:
        """The descriptors the loop waits on: its ports' and its wake-up pipe's."""
        return [*self._by_fd, self._wake_r]

    def counters(self) -> dict[str, Any]:
        with self.dev.lock:
            return {
                "ports": {str(n): {"ifname": p.ifname, **p.counters.to_dict()}
                          for n, p in sorted(self.ports.items())},
                "impairments": self.imp.snapshot(),
                "switch": {"path": self.dev.switch.path if self.dev.switch else None,
                           "loop": self.loop_path,
                           "processed": self.processed,
                           "dropped_no_pipeline": self.dropped_no_pipeline,
                           "process_errors": self.process_errors,
                           "unknown_port_out": self.unknown_port_out,
                           "loop_errors": self.loop_errors,
                           "delayed_pending": len(self._heap)},
            }


class MultiLoop:
    """The Python forwarding loop of several switches in one thread (``pyswitch run-many``).

    One epoll over every switch's ports and wake-up pipes; each turn hands a switch the
    descriptors of its own that are ready (:meth:`ForwardingLoop.serve`: its lock, its
    pipeline, impairments, queues and counters) and fires the timers of every switch that
    has one due.  A switch's frames, state and counters are what its own process would have
    (tests/test_run_many.py); what is saved is a process -- its wake-ups, its epoll and its
    interpreter -- per switch.  The C loop (``PYSWITCH_LOOP=c``) runs one switch only: here
    every switch forwards in Python, and its ``loop_path`` says so."""

    WHY = "the Python loop of run-many (one loop, several switches; the C loop runs one switch)"

    def __init__(self, loops: Sequence[ForwardingLoop]) -> None:
        if not loops:
            raise ValueError("MultiLoop needs at least one switch")
        self.loops = list(loops)
        self._owner: dict[int, ForwardingLoop] = {}
        for loop in self.loops:
            for fd in loop.fds:
                self._owner[fd] = loop
        self._stop = False

    def stop(self) -> None:
        """Make :meth:`run` return (from any thread or a signal handler)."""
        self._stop = True
        self.loops[0].wake()

    def run(self) -> None:
        """Forward for every switch until :meth:`stop`."""
        for loop in self.loops:
            loop.loop_why = self.WHY
        ep = select.epoll()
        for fd in self._owner:
            ep.register(fd, select.EPOLLIN)
        try:
            while not self._stop:
                self._turn(ep)
        finally:
            ep.close()

    def _turn(self, ep: Any) -> None:
        deadlines = [loop._heap[0][0] for loop in self.loops if loop._heap]
        timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else -1.0
        ready: dict[int, list[int]] = {}  # id(loop) -> its ready descriptors
        owner = self._owner
        for fd, _ in ep.poll(timeout):
            ready.setdefault(id(owner[fd]), []).append(fd)
        for loop in self.loops:
            fds = ready.get(id(loop))
            if fds is not None or loop._heap:
                loop.serve(fds or ())

