"""The asynchronous PS process: ``python -m workers.async_ps.ps_node JOB.json`` (docs/design.md §5).

Three layers, so the same PS runs over another transport (NDN, docs/design.md §6) by replacing only
the last one:

* :class:`workers.async_ps.core.AsyncPS` -- the clock, staleness, context and update rule (pure);
* :class:`PsService` -- the job around it (pure, no sockets): who joined, the push budget,
  the per-push log, periodic evaluation of the test accuracy/loss; ``handle(message) ->
  message``;
* :func:`serve` -- a single-threaded TCP server (``selectors``) that reassembles
  length-prefixed frames (:mod:`workers.common.framing`), decodes them
  (:mod:`workers.async_ps.wire`) and answers every push at once.

Push budget
    The run is defined by a number of pushes, not by time: the PS accepts ``budget = rounds x
    workers`` pushes (the same gradient count as ``rounds`` synchronous rounds of all
    workers; fast workers contribute more of them, slow ones fewer, which is the point of an
    asynchronous PS).  The push that uses up the budget is applied and answered with
    ``stop``; any push arriving after that is discarded and answered with :class:`Stop`.  With
    soft synchronization C > 1 an unfinished last batch (``budget mod C`` pushes) is not
    applied.  ``updates = budget // C``.

Output
    ``ps.json`` in the job's folder: one record per accepted push (wall time, worker, T_ps
    after the push, sigma, kappa, scale, applied) and one evaluation (test accuracy and loss of
    the PS's parameters) at clock 0, every ``eval_every`` updates and at the end.  Times are
    ``time.time()`` (all Mininet hosts share the kernel's clock; the runner subtracts its start
    time).
"""

from __future__ import annotations

import argparse
import selectors
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from workers.async_ps.core import AsyncPS, Push
from workers.async_ps.job import AsyncJob
from workers.async_ps.wire import (
    Answer,
    Error,
    Hello,
    Message,
    Stop,
    Welcome,
    decode,
    encode,
)
from workers.common.files import write_json_atomic
from workers.common.framing import FrameDecoder, TransportError, frame
from workers.common.model import Replica

__all__ = ["PsService", "serve", "main"]


@dataclass(frozen=True)
class Evaluation:
    time: float
    t_ps: int
    pushes: int
    accuracy: float
    loss: float


class PsService:
    """The PS side of the job, transport-free: ``handle`` one message, get the answer.

    ``evaluate(params) -> (accuracy, loss)`` and ``clock() -> seconds`` are injected so tests
    drive it without a model or real time.
    """

    def __init__(self, job: AsyncJob, params: np.ndarray,
                 evaluate: Callable[[np.ndarray], tuple[float, float]],
                 clock: Callable[[], float] = time.time) -> None:
        self.job = job
        self.ps = AsyncPS(params, job.lr, job.soft_sync, job.policy)
        self.evaluate = evaluate
        self.clock = clock
        self.joined: set[int] = set()
        self.stopped: set[int] = set()
        self.records: list[dict] = []
        self.evaluations: list[Evaluation] = []
        self.refused = 0
        self.evaluate_now()

    @property
    def accepted(self) -> int:
        return self.ps.pushes

    @property
    def finished(self) -> bool:
        """Every worker has been told to stop."""
        return len(self.stopped) == self.job.n_workers

    def evaluate_now(self) -> None:
        """Evaluate the current parameters (logged with the clock and push count)."""
        acc, loss = self.evaluate(self.ps.params)
        self.evaluations.append(Evaluation(self.clock(), self.ps.t_ps, self.ps.pushes,
                                           float(acc), float(loss)))

    def handle(self, msg: Message) -> Message:
        if isinstance(msg, Hello):
            if not 0 <= msg.worker < self.job.n_workers:
                return Error(f"worker {msg.worker} is not in 0..{self.job.n_workers - 1}")
            self.joined.add(msg.worker)
            w, t = self.ps.pull()
            return Welcome(w, t)
        if isinstance(msg, Push):
            if msg.worker not in self.joined:
                return Error(f"push from worker {msg.worker}, which has not joined")
            if self.ps.pushes >= self.job.budget:
                self.stopped.add(msg.worker)
                return Stop()
            try:
                reply = self.ps.push(msg)
            except ValueError as e:
                self.refused += 1
                return Error(str(e))
            self.records.append({"time": self.clock(), "worker": msg.worker,
                                 "t_ps": reply.t_ps, "sigma": reply.sigma,
                                 "kappa": reply.kappa, "scale": reply.scale,
                                 "applied": reply.applied})
            last = self.ps.pushes == self.job.budget
            if (reply.applied and reply.t_ps % self.job.eval_every == 0) or last:
                if not self.evaluations or self.evaluations[-1].pushes != self.ps.pushes:
                    self.evaluate_now()
            if last:
                self.stopped.add(msg.worker)
            return Answer(reply, stop=last)
        return Error(f"the PS does not accept {type(msg).__name__} messages")

    def report(self) -> dict:
        return {"policy": self.job.policy, "budget": self.job.budget,
                "accepted": self.ps.pushes, "updates": self.ps.t_ps, "refused": self.refused,
                "pushes": self.records, "evaluations": [asdict(e) for e in self.evaluations]}


def serve(service: PsService, sock: socket.socket, timeout_s: float,
          on_progress: Callable[[int], None] | None = None) -> None:
    """Answer messages on a listening ``sock`` until every worker was told to stop, every
    connection closed after all joined, or ``timeout_s`` passes (then TimeoutError)."""
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    conns: dict[socket.socket, FrameDecoder] = {}
    deadline = time.monotonic() + timeout_s
    seen = 0
    try:
        while not service.finished:
            if time.monotonic() > deadline:
                raise TimeoutError(f"PS: {service.accepted} of {service.job.budget} pushes "
                                   f"after {timeout_s:.0f} s")
            if not conns and len(service.joined) == service.job.n_workers:
                break  # everybody left
            for key, _ in sel.select(timeout=0.5):
                s = key.fileobj
                if s is sock:
                    c, _ = sock.accept()
                    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    conns[c] = FrameDecoder()
                    sel.register(c, selectors.EVENT_READ)
                    continue
                try:
                    data = s.recv(1 << 16)
                except OSError:
                    data = b""  # reset by the peer: same as closed
                frames = []
                try:
                    frames = conns[s].feed(data) if data else []
                except TransportError as e:
                    print(f"ps: dropping a connection: {e}", flush=True)
                    data = b""
                for body in frames:
                    try:
                        answer = service.handle(decode(body))
                    except TransportError as e:
                        answer = Error(f"malformed message: {e}")
                    s.sendall(frame(encode(answer)))
                if not data:
                    sel.unregister(s)
                    s.close()
                    del conns[s]
                if on_progress is not None and service.accepted != seen:
                    seen = service.accepted
                    on_progress(seen)
    finally:
        for c in conns:
            c.close()
        sel.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workers.async_ps.ps_node")
    ap.add_argument("job", type=Path)
    args = ap.parse_args(argv)
    job = AsyncJob.load(args.job)
    rep = Replica(job.train, 0)
    data = rep.data

    def evaluate(w: np.ndarray) -> tuple[float, float]:
        return (rep.model.accuracy(w, data.x_test, data.y_test),
                rep.model.loss(w, data.x_test, data.y_test))

    service = PsService(job, rep.params, evaluate)
    sock = socket.create_server(("0.0.0.0", job.ps_addr[1]), reuse_port=False)
    every = max(1, job.budget // 50)

    def progress(n: int) -> None:
        if n % every == 0 or n == job.budget:
            print(f"pushes {n}/{job.budget}", flush=True)

    print("ps ready", flush=True)
    code = 0
    try:
        serve(service, sock, job.timeout_s, progress)
    except TimeoutError as e:
        print(f"error: {e}", flush=True)
        code = 1
    finally:
        sock.close()
        if service.evaluations[-1].pushes != service.accepted:
            service.evaluate_now()
        write_json_atomic(Path(job.out_dir) / "ps.json", service.report())
    if service.accepted < job.budget:
        print(f"error: PS accepted only {service.accepted} of {job.budget} pushes", flush=True)
        code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())
