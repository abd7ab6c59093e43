"""The parameter-server process: ``python -m workers.ina.ps_node JOB.json``.

I/O shell around :class:`workers.ina.ps.PsState`: receive INA datagrams, merge them, send
each completed chunk's RESULT to ``result_dests``.  Datagrams come many per system call
(``workers.ina.udp.receive_many``, up to ``BATCH``); the RESULTs one such batch causes leave
together once it is merged, in one ``sendmmsg`` per destination.  The PS keeps serving after its last round
completes, because a worker whose RESULT copy was lost recovers it only by retransmitting to
the PS: it stops on SIGTERM/SIGINT (the runner sends it once every worker has exited) or when
no round makes progress for ``round_timeout_s``.  Then it writes ``ps.json`` (statistics,
round completion times, anomalies) into the job's ``out_dir``.

Run-time control (docs/design.md §9): the PS is the one writer of the job's control record
(``control_file``, :mod:`workers.ina.control`).  The controller's requests -- a worker removed,
new schedules after a switch died -- come on the FIFO beside it, watched in the same
``select`` as the socket; the PS picks the round each change takes effect in (a member
change: the lowest round it has not completed), writes the record's next version and prints
a ``control`` event (:mod:`workers.ina.events`).  It prints a ``silent`` event when the lowest
incomplete round lacks a member it has not heard from for ``worker_timeout_s`` (the controller
decides what to do).

The merging and sending is :class:`workers.ina.driver.PsDriver` -- the same driver the
simulated network runs -- over the process's socket (:class:`workers.ina.socket_io.SocketIO`).
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

from workers.common.exit import exit_now
from workers.ina.control_io import PsControl
from workers.ina.driver import PsDriver
from workers.ina.events import emit
from workers.ina.job import JobConfig
from workers.ina.socket_io import SocketIO
from workers.ina.udp import open_socket


def run(cfg: JobConfig) -> dict:
    """Serve the job until told to stop (or stalled); returns the report."""
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sock = open_socket(("0.0.0.0", cfg.ps_addr[1]))
    sock.setblocking(False)
    io = SocketIO(sock)
    control = PsControl(cfg, Path(cfg.control_file)) if cfg.control_file else None
    print("ps ready", flush=True)
    ps = PsDriver(io, cfg)
    stalled = False

    def until() -> bool:
        nonlocal stalled
        stalled = stalled or ps.stalled(time.monotonic())
        return stop or stalled

    def poll(now: float) -> None:
        event = ps.silent(now)
        if event is not None:
            emit(event)

    def on_ready(f: object) -> None:
        if control is not None and f is control.channel:
            control.take(ps, time.monotonic() - ps.started)

    try:
        io.serve(ps, until=until, poll=poll, max_wait=0.2,
                 others=[control.channel] if control else [], on_ready=on_ready)
    finally:
        sock.close()
        if control is not None:
            control.close()
    report = ps.report()
    out_dir = Path(cfg.out_dir)
    (out_dir / "ps.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.ina.ps_node", description=__doc__)
    parser.add_argument("job", type=Path, help="job file written by the experiment runner")
    args = parser.parse_args(argv)
    cfg = JobConfig.load(args.job)
    report = run(cfg)
    return 0 if report["rounds_completed"] == cfg.rounds else 1


if __name__ == "__main__":
    exit_now(main())
