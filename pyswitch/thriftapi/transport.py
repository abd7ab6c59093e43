"""The Thrift server's sockets: one thread per client, as BMv2's TThreadedServer, with two
limits BMv2 does not have (docs/pyswitch-api.md, "Thrift runtime API"):

- a message, once its first byte has arrived, must arrive whole (and its answer must be
  taken) within `MESSAGE_TIMEOUT` seconds, or the connection is closed: a half-sent message
  cannot hold a thread forever.  Between messages a client may stay idle as long as it
  likes (``simple_switch_CLI`` keeps its connection while its user types);
- at most `MAX_CLIENTS` connections at once: a new one beyond that closes the connection
  that has been idle longest, or, when none is idle, is itself closed at once;
- a string in a request is at most 1 MiB and a list 65,536 items (Thrift's own default is
  16 MB and no limit); a message over that, or not Thrift at all, closes the connection.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from thrift.protocol import TBinaryProtocol, TProtocol
from thrift.transport import TTransport

log = logging.getLogger("pyswitch.thrift")
MESSAGE_TIMEOUT = 10.0  # seconds for one request, from its first byte, and its answer
MAX_CLIENTS = 64
MAX_STRING = 1 << 20
MAX_CONTAINER = 1 << 16
TTE = TTransport.TTransportException


class ClientTransport(TTransport.TTransportBase):
    """A buffered socket transport whose reads between messages wait without limit and
    whose reads and writes within a message share one deadline."""

    def __init__(self, conn: socket.socket, timeout: float) -> None:
        self.conn = conn
        self.timeout = timeout
        self.rbuf = b""
        self.rpos = 0
        self.wbuf: list[bytes] = []
        self.deadline: float | None = None  # None: between messages
        self.idle_since = time.monotonic()

    def begin_message(self) -> None:
        """The next read starts a message: it may wait as long as the client likes."""
        self.deadline = None
        self.idle_since = time.monotonic()

    def idle(self) -> bool:
        return self.deadline is None and self.rpos >= len(self.rbuf)

    def _left(self) -> float:
        assert self.deadline is not None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TTE(TTE.TIMED_OUT, f"message not complete within {self.timeout:g} s")
        return left

    def isOpen(self) -> bool:  # noqa: N802 - Thrift's name
        return True

    def read(self, sz: int) -> bytes:
        if self.rpos >= len(self.rbuf):
            self.conn.settimeout(None if self.deadline is None else self._left())
            try:
                data = self.conn.recv(max(sz, 4096))
            except TimeoutError:
                raise TTE(TTE.TIMED_OUT, f"message not complete within {self.timeout:g} s") \
                    from None
            except OSError as exc:
                raise TTE(TTE.END_OF_FILE, str(exc)) from None
            if not data:
                raise TTE(TTE.END_OF_FILE, "client closed the connection")
            self.rbuf, self.rpos = data, 0
        if self.deadline is None:  # the first byte of a message: its clock starts
            self.deadline = time.monotonic() + self.timeout
        out = self.rbuf[self.rpos:self.rpos + sz]
        self.rpos += len(out)
        return out

    def write(self, buf: bytes) -> None:
        self.wbuf.append(bytes(buf))

    def flush(self) -> None:
        data, self.wbuf = b"".join(self.wbuf), []
        if self.deadline is None:  # pragma: no cover - an answer always follows a request
            self.deadline = time.monotonic() + self.timeout
        self.conn.settimeout(self._left())
        try:
            self.conn.sendall(data)
        except TimeoutError:
            raise TTE(TTE.TIMED_OUT, "answer not taken in time") from None
        except OSError as exc:
            raise TTE(TTE.END_OF_FILE, str(exc)) from None

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass


class ThriftServer:
    """The listening socket and its threads (one per client, as BMv2's TThreadedServer),
    with a deadline per message and a cap on connections (module docstring)."""

    def __init__(self, processor: Any, host: str, port: int,
                 timeout: float = MESSAGE_TIMEOUT, max_clients: int = MAX_CLIENTS) -> None:
        self.processor = processor
        self.timeout = timeout
        self.max_clients = max_clients
        self.sock = socket.create_server((host, port), reuse_port=False)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        self._lock = threading.Lock()
        self.clients: dict[socket.socket, ClientTransport] = {}
        self.thread = threading.Thread(target=self._accept, daemon=True, name="thrift")
        self.thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            trans = ClientTransport(conn, self.timeout)
            with self._lock:
                if len(self.clients) >= self.max_clients and not self._evict_idle():
                    log.warning("thrift: %d connections, refusing %s", len(self.clients), peer)
                    trans.close()
                    continue
                self.clients[conn] = trans
            threading.Thread(target=self._client, args=(trans,), daemon=True,
                             name="thrift-client").start()

    def _evict_idle(self) -> bool:
        """Close the connection idle longest, if any (lock held); True if one was."""
        idle = [t for t in self.clients.values() if t.idle()]
        if not idle:
            return False
        oldest = min(idle, key=lambda t: t.idle_since)
        log.info("thrift: %d connections, closing the one idle longest", len(self.clients))
        try:
            oldest.conn.shutdown(socket.SHUT_RDWR)  # its thread's recv returns: it ends
        except OSError:
            pass
        del self.clients[oldest.conn]
        return True

    def _client(self, trans: ClientTransport) -> None:
        prot = TBinaryProtocol.TBinaryProtocol(trans, string_length_limit=MAX_STRING,
                                               container_length_limit=MAX_CONTAINER)
        try:
            while not self._stop:
                trans.begin_message()
                self.processor.process(prot, prot)
        except TTE as exc:
            if exc.type == TTE.TIMED_OUT:
                log.info("thrift: closing a client: %s", exc)
        except TProtocol.TProtocolException as exc:  # not Thrift, or over the limits
            log.info("thrift: closing a client: bad message (%s)", exc)
        except Exception:  # a bad request must not take the server down
            log.exception("thrift: client error")
        finally:
            with self._lock:
                self.clients.pop(trans.conn, None)
            trans.close()

    def stop(self) -> None:
        self._stop = True
        try:
            self.sock.close()
        except OSError:
            pass
