"""The parameter-server process: ``python -m workers.ina.ps_node JOB.json``.

I/O shell around :class:`workers.ina.ps.PsState`: receive INA datagrams, merge them, send
each completed chunk's RESULT to ``result_dests``.  The PS keeps serving after its last round
completes, because a worker whose RESULT copy was lost recovers it only by retransmitting to
the PS: it stops on SIGTERM/SIGINT (the runner sends it once every worker has exited) or when
no round makes progress for ``round_timeout_s``.  Then it writes ``ps.json`` (statistics,
round completion times, anomalies) into the job's ``out_dir``.

A worker that died (docs/design.md §9): the PS prints ``ps round R: worker(s) I silent for T
s`` when the lowest incomplete round lacks a member it has not heard from for
``worker_timeout_s`` (the controller decides what to do), and applies the controller's removal
requests (``removal_file``) from the lowest round it has not completed, which it publishes in
``members_file`` and prints as ``ps members from round E: I,J,...``.
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

from workers.common.files import write_json_atomic
from workers.ina.constants import K
from workers.ina.job import JobConfig, read_json_list
from workers.ina.ps import PsState
from workers.ina.udp import open_socket, receive, send
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
    print("ps ready", flush=True)
    started = time.monotonic()
    round_done_at: dict[int, float] = {}
    last_progress = started
    malformed = 0
    removal_path = Path(cfg.removal_file) if cfg.removal_file else None
    removal_mtime: int | None = None
    applied = 0  # removal requests already applied
    published: list[dict] = []  # the members file's entries
    member_events: list[dict] = []
    reported: set[tuple[int, int]] = set()  # (round, worker) silences already printed
    last_check = 0.0
    while not stop:
        now = time.monotonic()
        if now - last_progress > cfg.round_timeout_s:
            break
        if now - last_check > 0.05:  # a stat and a scan, not per packet
            last_check = now
            requests, removal_mtime = read_json_list(removal_path, removal_mtime)
            for req in (requests or [])[applied:]:
                applied += 1
                gone = {int(w) for w in req["removed"]}
                survivors = [w for w in state.worker_ids if w not in gone]
                e, out = state.change_members(survivors)
                published.append({"from_round": e, "workers": survivors,
                                  "schedules": req.get("schedules", {})})
                write_json_atomic(Path(cfg.members_file), published)
                member_events.append({"removed": sorted(gone), "from_round": e,
                                      "at_s": now - started})
                print(f"ps members from round {e}: {','.join(map(str, survivors))}",
                      flush=True)
                for result in out.results:
                    for dest in cfg.result_dests:
                        send(sock, result, dest)
                for r in out.completed_rounds:
                    round_done_at[r] = now - started
                    last_progress = now
            for w in state.silent(now, cfg.worker_timeout_s):
                if (state.current_round, w) not in reported:
                    reported.add((state.current_round, w))
                    print(f"ps round {state.current_round}: worker(s) {w} silent for "
                          f"{cfg.worker_timeout_s:g} s", flush=True)
        try:
            ready, _, _ = select.select([sock], [], [], 0.2)
        except InterruptedError:
            continue
        if not ready:
            continue
        while True:
            try:
                pkt = receive(sock)
            except BlockingIOError:
                break
            if pkt is None:
                malformed += 1
                continue
            out = state.on_packet(pkt, time.monotonic())
            for result in out.results:
                for dest in cfg.result_dests:
                    send(sock, result, dest)
            for r in out.completed_rounds:
                round_done_at[r] = time.monotonic() - started
                last_progress = time.monotonic()
    sock.close()
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
