"""P4Runtime 1.4 gRPC server for pyswitch (behaves like BMv2's simple_switch_grpc).

This module is the gRPC service; the layers below it are separate modules:

* ``pyswitch.p4runtime.codec`` and ``pyswitch.p4runtime.p4info_index`` — the value codec (canonical byte
  strings, P4Runtime spec §8.4) and the P4Info index, shared with the controller's client;
* ``pyswitch.p4runtime.translate`` — P4Runtime entities ⇄ the ``Switch`` API, with validation;
* ``pyswitch.p4runtime.entities`` — Write and Read: updates applied to, entities read from, the
  device;
* ``pyswitch.p4runtime.pipeline`` — the :class:`Device` shared with the forwarding loop and the
  forwarding-pipeline configs (pyswitch's device config, bare or in BMv2's wrapper);
* ``pyswitch.p4runtime.arbitration`` — primary arbitration per (device, role);
* ``pyswitch.p4runtime.packetio`` — PacketIn / PacketOut ⇄ CPU-port frames;
* ``pyswitch.p4runtime.wire`` — the service's registration: Write requests arrive as bytes
  and are parsed one update at a time, Read answers leave in chunks of serialized entities
  (a whole 10,000-entity message in pure-Python protobuf is ~55 MB of small objects).

Error answers match what BMv2 does (measured on BMv2, see docs/pyswitch-api.md): a Write
whose updates fail ends with gRPC status UNKNOWN and a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer holding one ``p4.v1.Error`` per update (canonical code 0
for updates that succeeded); a non-primary Write gets PERMISSION_DENIED; a backup
controller's arbitration answer carries status code 6 (ALREADY_EXISTS) and the primary's
election id.

Concurrency (docs/pyswitch-api.md, "Limits"): the service runs on ``grpc.aio`` in one event
loop thread, so an open StreamChannel costs a coroutine and a queue, never a thread: idle
streams cannot starve unary calls (the thread-pool server gave every stream one of its 16
workers, and 16 idle streams froze it). Work that blocks (it takes the device lock the
forwarding loop holds, or compiles a program) runs in a small thread pool that streams never
use; Capabilities and arbitration are answered on the loop itself. At most
:data:`MAX_STREAMS` streams are open at once; one more is refused with RESOURCE_EXHAUSTED.

Write answers: per-update errors travel in the ``grpc-status-details-bin`` trailer, and a
default gRPC client refuses trailers over 8 KiB (it then reports RESOURCE_EXHAUSTED and the
controller cannot tell which updates were applied). The server therefore keeps the encoded
status within :data:`STATUS_DETAILS_BUDGET` bytes (messages are shortened, then dropped, the
codes always stay) and reports each update's result for batches of up to
:data:`WRITE_REPORT_LIMIT` updates. As BMv2 (CONTINUE_ON_ERROR), every update that can be
applied is, whatever the batch size; a larger batch in which updates fail answers UNKNOWN
with a message naming how many failed and were applied, the failures by code, the first
ones, and why one error per update is not attached (docs/pyswitch-api.md, "Write answers").
Any unexpected exception is INTERNAL with its message, never an empty UNKNOWN. Failures
set the status on the context (:func:`_finish`) instead of raising ``context.abort``, which
would leave the request alive until the next RPC (see there).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent import futures
from typing import Any, NoReturn

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pyswitch.errors import EntryNotFound, InvalidArgument
from pyswitch.p4runtime.arbitration import Abort, Arbiter, Stream
from pyswitch.p4runtime.entities import Entities
from pyswitch.p4runtime.packetio import packet_in_message, packet_out_frame
from pyswitch.p4runtime.pipeline import Device, trim_heap, verify_pipeline
from pyswitch.p4runtime.ratelog import RateLimitedLog
from pyswitch.p4runtime.translate import CODE_NAMES, P4RTError, Translator, grpc_status, invalid
from pyswitch.p4runtime.wire import ReadChunks, WriteBatch, add_servicer

log = logging.getLogger("pyswitch.p4runtime")
rlog = RateLimitedLog(log)

P4RUNTIME_VERSION = "1.4.1"
MAX_STREAMS = 1024          # StreamChannels open at once; the next is RESOURCE_EXHAUSTED
UNARY_WORKERS = 8           # threads for Write/Read/pipeline work (never used by streams)
STREAM_BACKLOG = 1024       # PacketIns queued for a primary that does not read; then dropped
WRITE_REPORT_LIMIT = 100    # updates per Write that always get one p4.v1.Error each
STATUS_DETAILS_BUDGET = 5000  # bytes of the encoded google.rpc.Status (base64 ~6.7 KiB < 8 KiB)
BIG_REQUEST = 32 * 1024     # request/answer bytes (~800 entries) after which the heap is trimmed
_MESSAGE_CUTS = (None, 200, 64, 24, 0)  # per-update message lengths tried, longest first

__all__ = ["MAX_STREAMS", "P4RUNTIME_VERSION", "STATUS_DETAILS_BUDGET", "WRITE_REPORT_LIMIT",
           "Device", "P4RuntimeServer", "P4RuntimeServicer", "serve", "write_error_status"]


class _Fail(Exception):
    """End the RPC with this status (raised in pool threads, set by :func:`_finish`)."""

    def __init__(self, code: grpc.StatusCode, message: str,
                 trailing: tuple[tuple[str, bytes], ...] = ()) -> None:
        super().__init__(message)
        self.code, self.message, self.trailing = code, message, trailing


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:max(0, limit - 1)] + "…" if limit else ""


def write_error_status(errors: list[p4runtime_pb2.Error], message: str,
                       budget: int = STATUS_DETAILS_BUDGET) -> bytes:
    """The serialized ``google.rpc.Status`` of a failed Write: code UNKNOWN (as BMv2), one
    ``p4.v1.Error`` per update in ``details``. Per-update messages are shortened until the
    whole fits ``budget`` bytes; for more than WRITE_REPORT_LIMIT updates it may not fit."""
    data = b""
    for limit in _MESSAGE_CUTS:
        st = status_pb2.Status(code=code_pb2.UNKNOWN, message=message)
        for e in errors:
            any_msg = any_pb2.Any()
            any_msg.Pack(p4runtime_pb2.Error(canonical_code=e.canonical_code,
                                             message=_cut(e.message, limit)))
            st.details.append(any_msg)
        data = st.SerializeToString()
        if len(data) <= budget:
            break
    return data


def _summary(failures: list[tuple[int, int, str]], first: int = 3) -> str:
    """``ALREADY_EXISTS x30, NOT_FOUND x7; first: update 3: ALREADY_EXISTS: ...`` from
    (update index, canonical code, message) of the failed updates."""
    counts = collections.Counter(CODE_NAMES.get(code, str(code)) for _, code, _ in failures)
    kinds = ", ".join(f"{name} x{n}" for name, n in counts.most_common())
    shown = [f"update {i}: {CODE_NAMES.get(code)}: {_cut(text, 120)}"
             for i, code, text in failures[:first]]
    return f"{kinds}; first: " + "; ".join(shown)


def _finish(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str,
            trailing: tuple[tuple[str, bytes], ...] = ()) -> None:
    """End an RPC with a non-OK status by setting it, not by ``context.abort``: abort raises
    through the handler, and grpc.aio keeps the finished RPC's state with that exception
    (its traceback, our frames and their locals: the whole request and its per-update
    work) until the next RPC arrives. A refused 10,000-update Write held ~850 K Python
    blocks (~45 MB) that way, and what the next calls allocated meanwhile stayed scattered
    over the arenas they pinned (the abuse bench's RSS growth)."""
    context.set_code(code)
    context.set_details(message)
    if trailing:
        context.set_trailing_metadata(trailing)


class _StreamQueue:
    """A stream's outgoing queue: ``put`` from any thread, consumed on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.q: asyncio.Queue = asyncio.Queue()
        self.dropped = 0

    def _put(self, item: Any, droppable: bool) -> None:
        if droppable and self.q.qsize() >= STREAM_BACKLOG:
            self.dropped += 1  # a primary that does not read must not grow the switch
            return
        self.q.put_nowait(item)

    def put(self, item: Any, droppable: bool = False) -> None:
        try:
            self.loop.call_soon_threadsafe(self._put, item, droppable)
        except RuntimeError:  # the loop is closed: the server is shutting down
            pass


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service of one pyswitch device (``grpc.aio``; see the module doc)."""

    def __init__(self, device: Device, max_streams: int = MAX_STREAMS,
                 workers: int = UNARY_WORKERS) -> None:
        self.dev = device
        self.arbiter = Arbiter(device.device_id)
        self.entities = Entities(device)
        self.max_streams = max_streams
        self.open_streams = 0
        self.pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt")
        device.on_packet_in.append(self._send_packet_in)

    # -- plumbing: blocking work in the pool, failures as statuses
    async def _run(self, context: grpc.aio.ServicerContext, fn: Callable[..., Any],
                   *args: Any) -> Any:
        """``fn(*args)`` in the pool; its result, or None after setting the failure status on
        ``context`` (the handler then returns None: grpc.aio sends the status, no body)."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.pool, fn, *args)
        except _Fail as f:
            failure = (f.code, f.message, f.trailing)
        except P4RTError as e:
            failure = (grpc_status(e.code), e.message, ())
        except Exception as exc:  # a bug or MemoryError: say what, never an empty UNKNOWN
            rlog.exception("%s failed", getattr(fn, "__name__", "request"))
            failure = (grpc.StatusCode.INTERNAL,
                       f"internal error: {type(exc).__name__}: {exc}"[:500], ())
        del args  # the request: nothing below may keep it
        _finish(context, *failure)
        return None

    def _check_device(self, device_id: int) -> None:
        if device_id != self.dev.device_id:
            raise _Fail(grpc.StatusCode.NOT_FOUND, f"unknown device id {device_id}")

    def _check_write_access(self, request: Any) -> None:
        self._check_device(request.device_id)
        if not self.arbiter.is_primary(request.role, request.election_id,
                                       request.HasField("election_id")):
            raise _Fail(grpc.StatusCode.PERMISSION_DENIED,
                        "not the primary controller (no arbitration or wrong election id)")

    # -- packet I/O
    def _send_packet_in(self, frame: bytes) -> None:
        pipe = self.dev.pipeline
        primary = self.arbiter.primary("")
        if primary is None or pipe is None:
            return
        primary.q.put(packet_in_message(pipe.index.packet_in, frame), droppable=True)

    def _packet_out(self, pkt: Any) -> None:
        pipe, dev = self.dev.pipeline, self.dev
        if pipe is None or dev.inject is None or dev.cpu_port is None:
            rlog.warning("packet-out dropped: no pipeline or no CPU port")
            return
        dev.inject(dev.cpu_port, packet_out_frame(pipe.index.packet_out, pkt))

    async def _read_stream(self, requests: AsyncIterator[Any], s: Stream) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for req in requests:
                which = req.WhichOneof("update")
                if which == "arbitration":
                    self.arbiter.arbitrate(s, req.arbitration)
                elif which == "packet":
                    if s.election_id is None or self.arbiter.primary(s.role) is not s:
                        err = p4runtime_pb2.StreamMessageResponse()
                        err.error.canonical_code = code_pb2.PERMISSION_DENIED
                        err.error.message = "packet-out from a non-primary controller"
                        err.error.packet_out.packet_out.CopyFrom(req.packet)
                        s.q.put(err, droppable=True)
                        continue
                    try:  # in the pool: it takes the device lock
                        await loop.run_in_executor(self.pool, self._packet_out, req.packet)
                    except Exception:  # never let a bad packet kill the stream
                        rlog.exception("packet-out failed")
        except Exception:  # the client went away or sent garbage
            pass
        finally:
            self.arbiter.drop(s)
            s.q.put(None)

    async def StreamChannel(self, request_iterator: AsyncIterator[Any],
                            context: grpc.aio.ServicerContext
                            ) -> AsyncIterator[p4runtime_pb2.StreamMessageResponse]:
        if self.open_streams >= self.max_streams:
            rlog.warning("StreamChannel refused: %d streams open", self.open_streams)
            _finish(context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"too many open StreamChannels: the limit is {self.max_streams} "
                    f"(docs/pyswitch-api.md, Limits)")
            return
        self.open_streams += 1
        sq = _StreamQueue(asyncio.get_running_loop())
        s = Stream(sq)
        reader = asyncio.create_task(self._read_stream(request_iterator, s))
        try:
            while True:
                item = await sq.q.get()
                if item is None:
                    return
                if isinstance(item, Abort):
                    self.arbiter.drop(s)
                    _finish(context, item.code, item.message)
                    return
                yield item
        finally:  # also when the client cancels: the task is cancelled at the await
            self.open_streams -= 1
            reader.cancel()
            self.arbiter.drop(s)

    # -- pipeline
    def _set_pipeline(self, request: Any) -> p4runtime_pb2.SetForwardingPipelineConfigResponse:
        self._check_write_access(request)
        A = p4runtime_pb2.SetForwardingPipelineConfigRequest
        action = request.action
        if action == A.COMMIT:
            if self.dev.saved is None:
                raise P4RTError(code_pb2.FAILED_PRECONDITION, "no saved pipeline to commit")
            pipe = self.dev.saved
        elif action in (A.VERIFY, A.VERIFY_AND_SAVE, A.VERIFY_AND_COMMIT,
                        A.RECONCILE_AND_COMMIT):
            pipe = verify_pipeline(request.config)
        else:
            raise invalid(f"unsupported action {action}")
        if action == A.VERIFY:
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        if action == A.VERIFY_AND_SAVE:
            self.dev.saved = pipe
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        cur = self.dev.pipeline
        if action == A.RECONCILE_AND_COMMIT and cur is not None \
                and cur.device_config == pipe.device_config:
            # Same program: keep the forwarding state, adopt the new P4Info/cookie.
            with self.dev.lock:
                self.dev.pipeline = pipe
        else:
            self.dev.load(pipe.program, pipe.device_config, pipe.p4info, pipe.cookie)
        self.dev.saved = None
        sw = self.dev.switch
        rlog.info("pipeline committed (%d tables; %s path)", len(pipe.index.tables),
                  sw.path if sw is not None else "no")
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    async def SetForwardingPipelineConfig(self, request: Any,
                                          context: grpc.aio.ServicerContext
                                          ) -> p4runtime_pb2.SetForwardingPipelineConfigResponse:
        return await self._run(context, self._set_pipeline, request)

    def _get_pipeline(self, request: Any) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        self._check_device(request.device_id)
        pipe = self.dev.pipeline
        if pipe is None:
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline set")
        R = p4runtime_pb2.GetForwardingPipelineConfigRequest
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        resp.config.cookie.cookie = pipe.cookie
        if request.response_type in (R.ALL, R.P4INFO_AND_COOKIE):
            resp.config.p4info.CopyFrom(pipe.p4info)
        if request.response_type in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            resp.config.p4_device_config = pipe.device_config
        return resp

    async def GetForwardingPipelineConfig(self, request: Any,
                                          context: grpc.aio.ServicerContext
                                          ) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        return await self._run(context, self._get_pipeline, request)

    async def Capabilities(self, request: Any, context: grpc.aio.ServicerContext
                           ) -> p4runtime_pb2.CapabilitiesResponse:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_VERSION)

    # -- write
    def _write(self, raw: bytes | p4runtime_pb2.WriteRequest) -> p4runtime_pb2.WriteResponse:
        try:
            request = WriteBatch(raw)  # updates parsed one at a time (wire.py says why)
        except DecodeError as exc:
            raise invalid(f"the WriteRequest does not parse: {exc}") from None
        self._check_write_access(request)
        pipe = self.dev.pipeline
        if pipe is None:
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline set")
        if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
            raise _Fail(grpc.StatusCode.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity")
        tr = Translator(pipe.index)
        n = len(request.updates)
        # (update index, canonical code, message) of the failed updates only: a protobuf
        # Error per update (10,000 pure-Python messages for a clean batch) is built just for
        # the report, which is at most WRITE_REPORT_LIMIT long
        failures: list[tuple[int, int, str]] = []
        with self.dev.lock, self.entities.batch():
            for i, update in enumerate(request.updates):
                try:
                    if isinstance(update, P4RTError):  # it did not parse
                        raise update
                    self.entities.apply(tr, update)
                except P4RTError as e:
                    failures.append((i, e.code, e.message))
                except Exception as e:  # a bug must not kill the switch
                    rlog.exception("write update failed")
                    failures.append((i, code_pb2.INTERNAL, f"internal error: {e}"))
        if not failures:
            return p4runtime_pb2.WriteResponse()
        failed = len(failures)
        summary = _summary(failures)
        # one line per failed Write (not per update), and at most a burst per window
        rlog.info("write: %d of %d updates failed: %s", failed, n, summary)
        if n > WRITE_REPORT_LIMIT:
            # as BMv2 (CONTINUE_ON_ERROR): every update that could be applied was; one
            # p4.v1.Error per update would not fit a default client's 8 KiB of trailers
            raise _Fail(grpc.StatusCode.UNKNOWN, _cut(
                f"{failed} of {n} updates failed, the other {n - failed} were applied "
                f"({summary}). One p4.v1.Error per update is reported for batches of at "
                f"most {WRITE_REPORT_LIMIT} updates (their status must fit the 8 KiB of "
                f"trailing metadata a default gRPC client accepts); send smaller batches, "
                f"or read the entries back, to learn each failure", 900))
        errors = [p4runtime_pb2.Error(canonical_code=code_pb2.OK)] * n
        for i, code, text in failures:
            errors[i] = p4runtime_pb2.Error(canonical_code=code, message=text)
        message = f"{failed} of {n} updates failed"
        raise _Fail(grpc.StatusCode.UNKNOWN, message,
                    (("grpc-status-details-bin", write_error_status(errors, message)),))

    async def Write(self, request: bytes | p4runtime_pb2.WriteRequest,
                    context: grpc.aio.ServicerContext) -> p4runtime_pb2.WriteResponse | None:
        """``request`` is the wire bytes (:func:`add_servicer` does not parse it)."""
        size = len(request) if isinstance(request, bytes) else request.ByteSize()
        try:
            return await self._run(context, self._write, request)
        finally:
            if size > BIG_REQUEST:
                self._trim()

    # -- read
    def _read(self, request: Any) -> list[bytes]:
        self._check_device(request.device_id)
        pipe = self.dev.pipeline
        if pipe is None:
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline set")
        tr = Translator(pipe.index)
        resp = ReadChunks()  # serialized every READ_CHUNK entities (wire.py says why)
        try:
            with self.dev.lock:
                for ent in request.entities:
                    self.entities.read(tr, ent, resp)
        except (InvalidArgument, EntryNotFound) as e:
            code = code_pb2.NOT_FOUND if isinstance(e, EntryNotFound) else \
                code_pb2.INVALID_ARGUMENT
            raise P4RTError(code, str(e)) from None
        return resp.finish()

    async def Read(self, request: Any, context: grpc.aio.ServicerContext
                   ) -> AsyncIterator[bytes]:
        """Serialized ReadResponses, READ_CHUNK entities each (``add_servicer`` sends bytes)."""
        chunks = await self._run(context, self._read, request)
        if chunks is None:  # failed: the status is set
            return
        big = sum(map(len, chunks)) > BIG_REQUEST
        while chunks:
            yield chunks.pop(0)
        if big:
            self._trim()

    def _trim(self) -> None:
        """After a big request: hand the memory of its (freed) messages back to the OS.
        Without it, each 10,000-update batch left the process a few MB bigger: freed
        memory stayed in glibc's per-thread heaps (the bench measures this)."""
        asyncio.get_running_loop().run_in_executor(self.pool, trim_heap)


class P4RuntimeServer:
    """A running server: its event loop thread, the ``grpc.aio`` server and the servicer."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
                 server: grpc.aio.Server, servicer: P4RuntimeServicer) -> None:
        self.loop, self.thread, self.server, self.servicer = loop, thread, server, servicer

    def stop(self, grace: float | None = None) -> threading.Event:
        """Stop serving (in-flight calls get ``grace`` seconds); the event is set when done."""
        done = threading.Event()

        async def shutdown() -> None:
            try:
                await self.server.stop(grace)
            finally:
                self.servicer.pool.shutdown(wait=False)
                done.set()
                self.loop.stop()

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop)
        else:
            done.set()
        return done


def _bind_failed(address: str, exc: object) -> NoReturn:
    raise OSError(f"cannot listen on {address}: {exc}")


def serve(device: Device, address: str, max_workers: int = UNARY_WORKERS,
          max_streams: int = MAX_STREAMS) -> tuple[P4RuntimeServer, int]:
    """Start the gRPC server on ``address`` (HOST:PORT) in its own event loop thread;
    returns (server, bound port). Raises OSError with a clear message when the address
    cannot be bound."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True, name="p4rt-loop")
    thread.start()
    servicer = P4RuntimeServicer(device, max_streams=max_streams, workers=max_workers)

    async def start() -> tuple[grpc.aio.Server, int]:
        # gRPC sets SO_REUSEPORT by default: a second switch on the same port would then
        # bind too and share the connections; BMv2 refuses the port in use, and so do we
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        add_servicer(servicer, server)
        try:
            port = server.add_insecure_port(address)
        except RuntimeError as exc:
            _bind_failed(address, exc)
        if port == 0:
            _bind_failed(address, "address in use or invalid")
        await server.start()
        return server, port

    try:
        server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=60)
    except BaseException:
        servicer.pool.shutdown(wait=False)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        raise
    return P4RuntimeServer(loop, thread, server, servicer), port
