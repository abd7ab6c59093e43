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
"""

from __future__ import annotations

import argparse
import json
import select
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

from workers.ina.constants import K
from workers.ina.control_io import PsControl
from workers.ina.events import SilentEvent, emit
from workers.ina.job import JobConfig
from workers.ina.ps import PsOutput, PsState
from workers.ina.udp import BATCH, open_socket, receive_many, send_many
from workers.ina.worker import n_chunks_for


def run(cfg: JobConfig) -> dict:
    """Serve the job until told to stop (or stalled); returns the report."""
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    state = PsState(cfg.job_id, cfg.worker_ids, n_chunks_for(cfg.n_values, K), K)
    sock = open_socket(("0.0.0.0", cfg.ps_addr[1]))
    sock.setblocking(False)
    control = PsControl(cfg, Path(cfg.control_file)) if cfg.control_file else None
    print("ps ready", flush=True)
    started = time.monotonic()
    round_done_at: dict[int, float] = {}
    last_progress = started
    malformed = 0
    member_events: list[dict] = []
    reported: set[tuple[int, int]] = set()  # (round, worker) silences already reported
    last_check = 0.0
    watched: list = [sock] + ([control.channel] if control else [])

    def deliver(out: PsOutput, now: float) -> None:
        nonlocal last_progress
        if out.results:
            for dest in cfg.result_dests:
                send_many(sock, out.results, dest)
        for r in out.completed_rounds:
            round_done_at[r] = now - started
            last_progress = now

    try:
        while not stop:
            now = time.monotonic()
            if now - last_progress > cfg.round_timeout_s:
                break
            if now - last_check > 0.05:  # a scan of the lowest round, not per packet
                last_check = now
                quiet = [w for w in state.silent(now, cfg.worker_timeout_s)
                         if (state.current_round, w) not in reported]
                if quiet:
                    reported.update((state.current_round, w) for w in quiet)
                    emit(SilentEvent(job=cfg.job_id, round=state.current_round, workers=quiet,
                                     after_s=cfg.worker_timeout_s))
            try:
                ready, _, _ = select.select(watched, [], [], 0.2)
            except InterruptedError:
                continue
            if control is not None and control.channel in ready:
                for change, removed, out in control.take(state):
                    if out is not None:
                        member_events.append({"removed": removed,
                                              "from_round": change.from_round,
                                              "at_s": now - started})
                        deliver(out, time.monotonic())
            if sock not in ready:
                continue
            while True:
                got = receive_many(sock)  # every waiting datagram, one system call
                now = time.monotonic()
                batch = PsOutput()  # the RESULTs of a batch leave together, after it
                for pkt in got:
                    if pkt is None:
                        malformed += 1
                        continue
                    out = state.on_packet(pkt, now)
                    batch.results += out.results
                    batch.completed_rounds += out.completed_rounds
                deliver(batch, time.monotonic())
                if len(got) < BATCH:  # none was left waiting: the next select sees newer
                    break
    finally:
        sock.close()
        if control is not None:
            control.close()
    report = {
        "job_id": cfg.job_id,
        "mode": cfg.mode,
        "rounds_completed": len(round_done_at),
        "round_done_at_s": {str(r): t for r, t in sorted(round_done_at.items())},
        "stats": asdict(state.stats),
        "malformed_datagrams": malformed,
        "anomalies": [asdict(a) for a in state.anomalies][:100],
        "member_changes": member_events,
    }
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
    sys.exit(main())
