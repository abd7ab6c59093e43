"""Big Write and Read messages of pyswitch's P4Runtime server, one entity at a time.

protobuf 3.20 (pinned by p4runtime-shell) runs its pure-Python implementation on Python
3.11: a parsed 10,000-update WriteRequest is ~740,000 Python objects (~55 MB for 400 KB on
the wire), and a 10,000-entity ReadResponse about as many. Held whole, each big request
lifted the switch's memory by that much, and pymalloc keeps an arena for as long as one
object in it lives: the entries a batch installs, allocated between the request's objects,
kept those arenas after the request was gone (the abuse bench, bench/p4runtime_abuse.py,
measured the growth). So:

* Write requests reach the servicer as bytes (:func:`add_servicer` registers no
  deserializer for Write) and :class:`WriteBatch` parses the updates one at a time, each
  freed before the next (also ~3x faster than parsing the whole message, and off the event
  loop thread, which the gRPC deserializer would run on);
* Read answers are built by :class:`ReadChunks`: every :data:`READ_CHUNK` entities the
  ReadResponse so far is serialized and a new one begun; the stream sends the serialized
  chunks (P4Runtime allows any number of ReadResponses per Read).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from p4.v1 import p4runtime_pb2

from pyswitch.p4runtime.translate import P4RTError, invalid

READ_CHUNK = 256  # entities per ReadResponse message
_UPDATES = 4      # WriteRequest.updates field number (p4runtime.proto)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise DecodeError("truncated or overlong varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def split_write_request(data: bytes) -> tuple[p4runtime_pb2.WriteRequest, list[tuple[int, int]]]:
    """The WriteRequest without its updates, and the byte ranges of its Update messages.
    Raises DecodeError when the top level is not well-formed protobuf."""
    head = bytearray()
    spans: list[tuple[int, int]] = []
    pos, n = 0, len(data)
    while pos < n:
        start = pos
        tag, pos = _varint(data, pos)
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            if tag >> 3 == _UPDATES and pos + length <= n:
                spans.append((pos, pos + length))
                pos += length
                continue
            pos += length
        elif wire == 5:
            pos += 4
        else:  # groups (wire types 3 and 4) have no place in p4runtime.proto
            raise DecodeError(f"unexpected wire type {wire}")
        if pos > n:
            raise DecodeError("truncated message")
        head += data[start:pos]
    return p4runtime_pb2.WriteRequest.FromString(bytes(head)), spans


class _Updates:
    """A WriteRequest's updates, parsed as they are iterated (one alive at a time). An
    update that does not parse is yielded as the P4RTError (INVALID_ARGUMENT) it gets."""

    def __init__(self, data: bytes, spans: list[tuple[int, int]]) -> None:
        self._data, self._spans = data, spans

    def __len__(self) -> int:
        return len(self._spans)

    def __iter__(self) -> Iterator[p4runtime_pb2.Update | P4RTError]:
        parse, data = p4runtime_pb2.Update.FromString, self._data
        for a, b in self._spans:
            try:
                yield parse(data[a:b])
            except DecodeError as exc:
                yield invalid(f"not a well-formed p4.v1.Update: {exc}")


class WriteBatch:
    """A Write request as the servicer uses it: ``device_id``, ``role``, ``election_id``,
    ``atomicity``, ``HasField`` of the request, and ``updates`` (``len`` and iteration).
    Built from the wire bytes (updates parsed lazily) or from a parsed WriteRequest."""

    def __init__(self, request: bytes | p4runtime_pb2.WriteRequest) -> None:
        if isinstance(request, bytes | bytearray | memoryview):
            data = bytes(request)
            try:
                self.head, spans = split_write_request(data)
                self.updates: Any = _Updates(data, spans)
            except DecodeError:  # let protobuf's own parser have the last word
                self.head = p4runtime_pb2.WriteRequest.FromString(data)
                self.updates = self.head.updates
        else:
            self.head, self.updates = request, request.updates

    def __getattr__(self, name: str) -> Any:  # device_id, election_id, HasField, ...
        return getattr(self.head, name)


class ReadChunks:
    """Stands in for the ReadResponse that ``Entities.read`` fills: each access to
    ``entities`` (one per entity added, the previous one complete by then) starts a new
    ReadResponse once the current one holds ``chunk`` entities, the full one serialized."""

    def __init__(self, chunk: int = READ_CHUNK) -> None:
        self.chunk = chunk
        self.done: list[bytes] = []
        self.count = 0  # entities in the serialized chunks
        self._cur = p4runtime_pb2.ReadResponse()

    @property
    def entities(self) -> Any:
        if len(self._cur.entities) >= self.chunk:
            self._flush()
        return self._cur.entities

    def _flush(self) -> None:
        self.count += len(self._cur.entities)
        self.done.append(self._cur.SerializeToString())
        self._cur = p4runtime_pb2.ReadResponse()

    def finish(self) -> list[bytes]:
        """The serialized ReadResponses (at least one, possibly empty)."""
        if len(self._cur.entities) or not self.done:
            self._flush()
        return self.done


def add_servicer(servicer: Any, server: Any) -> None:
    """Register the P4Runtime service as ``p4runtime_pb2_grpc`` does, except that Write
    requests arrive as bytes and Read answers leave as bytes (see the module doc)."""
    P = p4runtime_pb2
    handlers = {
        "Write": grpc.unary_unary_rpc_method_handler(
            servicer.Write, request_deserializer=None,
            response_serializer=P.WriteResponse.SerializeToString),
        "Read": grpc.unary_stream_rpc_method_handler(
            servicer.Read, request_deserializer=P.ReadRequest.FromString,
            response_serializer=None),
        "SetForwardingPipelineConfig": grpc.unary_unary_rpc_method_handler(
            servicer.SetForwardingPipelineConfig,
            request_deserializer=P.SetForwardingPipelineConfigRequest.FromString,
            response_serializer=P.SetForwardingPipelineConfigResponse.SerializeToString),
        "GetForwardingPipelineConfig": grpc.unary_unary_rpc_method_handler(
            servicer.GetForwardingPipelineConfig,
            request_deserializer=P.GetForwardingPipelineConfigRequest.FromString,
            response_serializer=P.GetForwardingPipelineConfigResponse.SerializeToString),
        "StreamChannel": grpc.stream_stream_rpc_method_handler(
            servicer.StreamChannel, request_deserializer=P.StreamMessageRequest.FromString,
            response_serializer=P.StreamMessageResponse.SerializeToString),
        "Capabilities": grpc.unary_unary_rpc_method_handler(
            servicer.Capabilities, request_deserializer=P.CapabilitiesRequest.FromString,
            response_serializer=P.CapabilitiesResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("p4.v1.P4Runtime", handlers),))
