"""The parameter-server process: ``python -m workers.ps_node JOB.json``.

I/O shell around :class:`workers.ps_state.PsState`: receive INA datagrams, merge them, send
each completed chunk's RESULT to ``result_dests``.  Writes ``ps.json`` (statistics, round
completion times, anomalies) into the job's ``out_dir`` when all rounds are done or the
round timeout expires.
"""

from __future__ import annotations

import argparse
import json
import select
import sys
import time
from dataclasses import asdict
from pathlib import Path

from workers.constants import K
from workers.job import JobConfig
from workers.ps_state import PsState
from workers.udp import open_socket, receive, send
from workers.worker_state import n_chunks_for


def run(cfg: JobConfig, linger_s: float = 1.0) -> dict:
    """Serve the job until every round is complete, then answer late packets for ``linger_s``."""
    state = PsState(cfg.job_id, cfg.worker_ids, n_chunks_for(cfg.n_values, K), K)
    sock = open_socket(("0.0.0.0", cfg.ps_addr[1]))
    sock.setblocking(False)
    started = time.monotonic()
    round_done_at: dict[int, float] = {}
    last_progress = started
    finished_at: float | None = None
    malformed = 0
    while True:
        now = time.monotonic()
        if finished_at is not None and now - finished_at > linger_s:
            break
        if finished_at is None and now - last_progress > cfg.round_timeout_s:
            break
        ready, _, _ = select.select([sock], [], [], 0.2)
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
            out = state.handle(pkt)
            for result in out.results:
                for dest in cfg.result_dests:
                    send(sock, result, dest)
            for r in out.completed_rounds:
                round_done_at[r] = time.monotonic() - started
                last_progress = time.monotonic()
            if finished_at is None and len(round_done_at) == cfg.rounds:
                finished_at = time.monotonic()
    sock.close()
    report = {
        "job_id": cfg.job_id,
        "mode": cfg.mode,
        "rounds_completed": len(round_done_at),
        "round_done_at_s": {str(r): t for r, t in sorted(round_done_at.items())},
        "stats": asdict(state.stats),
        "malformed_datagrams": malformed,
        "anomalies": [asdict(a) for a in state.anomalies][:100],
    }
    out_dir = Path(cfg.out_dir)
    (out_dir / "ps.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.ps_node", description=__doc__)
    parser.add_argument("job", type=Path, help="job file written by the experiment runner")
    args = parser.parse_args(argv)
    cfg = JobConfig.load(args.job)
    report = run(cfg)
    return 0 if report["rounds_completed"] == cfg.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
