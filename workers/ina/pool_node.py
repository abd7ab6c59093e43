"""One process serving several worker hosts:
``python -m workers.ina.pool_node JOB.json --member ID=NETNS ...``.

Each member is worker ``ID`` of the job, as ``workers.ina.worker_node JOB --worker ID`` runs
it -- its replica, its files (``worker<ID>.q``, ``.npz``, ``.json``), its ``round`` events,
its control record, its :class:`workers.ina.driver.WorkerDriver` -- but every member's
sockets are opened inside that member's network namespace (``NETNS``, e.g. the Mininet host
shell's ``/proc/<pid>/ns/net``; :mod:`workers.common.netns`) and one loop serves them all
(:class:`workers.ina.pool_io.HostPool`): a RESULT wakes one process for every member it
reaches, not one process per member (docs/scale.md, "Several hosts per process").

Prints one ``pool of workers ID,... ready`` line once every member's sockets are up (the
runner counts one ready line per process), then waits for the start file.  SIGTERM ends
every member after writing the rounds each finished (exit 3), as ``worker_node``.  A member
whose round fails (:class:`workers.ina.driver.RoundFailed`) ends the process, exit 1, with
one line naming the member; the others' finished rounds are written too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.common.exit import exit_now
from workers.common.netns import NetnsError, in_netns
from workers.common.threads import one_blas_thread
from workers.ina.driver import RoundFailed, WorkerDriver, job_rtt
from workers.ina.job import JobConfig
from workers.ina.pool_io import HostPool
from workers.ina.worker_node import (
    NodeApp,
    Stopped,
    follow_control,
    on_sigterm,
    open_sockets,
    results_paced,
    wait_for_start_file,
)

__all__ = ["Member", "parse_member", "run", "main"]


@dataclass(frozen=True)
class Member:
    """One worker the process serves and the network namespace its sockets live in."""

    worker: int
    netns: str


def parse_member(text: str) -> Member:
    """``ID=NETNS`` → :class:`Member` (ValueError with one line for anything else)."""
    wid, sep, path = text.partition("=")
    if not sep or not wid.strip().isdigit() or not path:
        raise ValueError(f"--member: expected ID=NETNS_PATH, got {text[:80]!r}")
    return Member(int(wid), path)


def run(cfg: JobConfig, members: list[Member]) -> list[dict[str, Any]]:
    """Run every member's rounds in one loop (module docstring); returns their reports."""
    one_blas_thread()
    out = Path(cfg.out_dir)
    pool = HostPool()
    apps: list[NodeApp] = []
    drivers: list[WorkerDriver] = []
    socks: list[Any] = []
    try:
        for m in members:
            with in_netns(m.netns):  # the sockets stay in the member's namespace
                sock, reply = open_sockets(cfg, m.worker)
            socks += [s for s in (sock, reply) if s is not None]
            app = NodeApp(cfg, m.worker, out)
            io = pool.add(m.worker, sock, reply, paced=results_paced(cfg, m.worker))
            driver = WorkerDriver(io, cfg, m.worker, app, rtt=job_rtt(cfg), rounds=app.log)
            io.driver, io.poll = driver, follow_control(driver, app)
            io.done = lambda d=driver: d.finished
            apps.append(app)
            drivers.append(driver)
        who = f"pool of workers {','.join(str(m.worker) for m in members)}"
        print(f"{who} ready", flush=True)
        wait_for_start_file(cfg, who)
        for d in drivers:
            d.start()
        pool.serve()
    except RoundFailed as exc:
        exc.member = pool.failed  # type: ignore[attr-defined]  # None: the pool's own
        raise
    finally:  # also on SIGTERM (Stopped) and a failed member: finished rounds are kept
        for s in socks:
            s.close()
        reports = [app.close(d.rounds) for app, d in zip(apps, drivers, strict=True)]
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.ina.pool_node",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("job", type=Path, help="job file written by the experiment runner")
    parser.add_argument("--member", action="append", required=True, metavar="ID=NETNS",
                        help="a worker id of the job and the network namespace its sockets "
                             "are opened in (e.g. /proc/PID/ns/net); once per member")
    args = parser.parse_args(argv)
    try:
        members = [parse_member(t) for t in args.member]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg = JobConfig.load(args.job)
    ids = [m.worker for m in members]
    bad = [w for w in ids if w not in cfg.worker_ids]
    if bad or len(set(ids)) != len(ids):
        what = (f"worker {bad[0]} is not in job {cfg.job_id} (workers {cfg.worker_ids})"
                if bad else f"a worker is named twice ({ids})")
        print(f"error: --member: {what}", file=sys.stderr)
        return 2
    on_sigterm()
    try:
        run(cfg, members)
    except Stopped:
        print(f"workers {','.join(map(str, ids))} stopped", flush=True)
        return 3
    except NetnsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RoundFailed as exc:
        member = getattr(exc, "member", None)
        where = f"pool member worker {member}: " if member is not None else ""
        print(f"error: {where}{exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    exit_now(main())
