"""A TCP bulk flow between two hosts: issue 39's cross traffic on Mininet
(:mod:`controller.experiment.cross_mininet`), standard library only.

``python -m workers.common.bulk_tcp recv --port P --log FILE`` accepts one connection and
reads it to the end, appending ``<time.time()> <bytes so far>`` to FILE every ``--every``
seconds (and once more when it ends or is terminated), so that the bytes of any window can
be read off afterwards.  ``python -m workers.common.bulk_tcp send --to IP --port P`` connects
(retrying while the receiver starts) and writes zeros as fast as TCP takes them, with
``--cc`` as its congestion control (``reno`` by default: the simulated network's model is
NewReno; ``""`` leaves the kernel's default, CUBIC on Linux).
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from workers.common.connect import connect_retry

__all__ = ["receive", "send", "main"]

CHUNK = 64 * 1024


class _Stop(Exception):
    """SIGTERM: end the loop, write the last line."""


def _on_term(signum: int, frame: object) -> None:
    raise _Stop


def receive(port: int, log: Path, every: float = 0.05) -> int:
    """Accept one sender on ``port`` and count what it sends (module docstring); returns the
    bytes received."""
    total = 0
    buf = bytearray(CHUNK)
    with open(log, "a", buffering=1) as out, socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen(1)
        out.write(f"{time.time():.6f} 0\n")
        try:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(every)
                next_at = time.time() + every
                while True:
                    try:
                        n = conn.recv_into(buf)
                    except TimeoutError:
                        n = -1
                    if n == 0:
                        break
                    if n > 0:
                        total += n
                    now = time.time()
                    if now >= next_at:
                        out.write(f"{now:.6f} {total}\n")
                        next_at = now + every
        except _Stop:
            pass
        out.write(f"{time.time():.6f} {total}\n")
    return total


def send(to: str, port: int, cc: str = "reno", connect_s: float = 10.0) -> None:
    """Connect to ``to:port`` and write zeros until terminated (module docstring)."""
    zeros = bytes(CHUNK)

    def congestion(s: socket.socket) -> None:
        if cc:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())

    s = connect_retry((to, port), connect_s, setup=congestion)
    with s:
        try:
            while True:
                s.sendall(zeros)
        except (_Stop, BrokenPipeError, ConnectionResetError):
            pass


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bulk_tcp", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--log", type=Path, required=True)
    r.add_argument("--every", type=float, default=0.05)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--cc", default="reno")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    if args.role == "recv":
        receive(args.port, args.log, args.every)
    else:
        send(args.to, args.port, args.cc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
