"""The ring all-reduce (:mod:`workers.ring`) on Mininet: one ``ring_node`` process per worker
host (:mod:`workers.ring.ring_node`) over UDP through the routed network of
:mod:`controller.experiment.methods.host_driven` (every switch forwards the ring's datagrams
as plain IPv4, as in the simulated network), every job's ring at once.

Position r of job j's ring draws the suite's seeded vector of worker r among ``n_workers``
(:func:`workers.ring.ring_node.seeded_vector`, what :mod:`bench.suite.cell` gives the
simulated ring), and writes what it sent and applied; the sums are checked here against the
wrapped int32 sum of every position's vectors.  A worker's round time is its own clock's,
from its round's first DATA to its round's end, as in the simulated ring; the run's span
(what a link's busy share is over) is from the start file to the last position's last
round, without the positions' linger for late resends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from controller.experiment.methods.host_driven import (
    MininetSettings,
    host_run,
    launch_nodes,
    rounds_span,
    routed_mininet,
)
from controller.experiment.methods.ring.sim import RingJobResult, RingSimResult, wrapped_sum
from workers.ring.wire import RING_UDP_PORT

__all__ = ["ring_on_mininet", "ring_results"]


def ring_on_mininet(ms: MininetSettings, rings: list[list[str]], rounds: int, n_values: int,
                    out: Path, *, n_workers: int | None = None, window: int = 16,
                    timeout: float = 0.3, max_timeout: float = 2.0,
                    deadline_s: float = 600.0) -> RingSimResult:
    """Run every ring of ``rings`` (worker hosts in ring order) for ``rounds`` rounds on the
    Mininet network of ``ms`` (root); ``out`` is the run folder (job files, logs, each
    position's ``ring<rank>.npz``/``.json`` under ``job<j>/``)."""
    run = host_run("ring", out)
    out = run.out_dir
    n_all = n_workers or max(len(r) for r in rings)
    with routed_mininet(run, ms) as net:
        nodes = []
        for j, ring in enumerate(rings):
            folder = out / f"job{j + 1}"
            folder.mkdir(parents=True, exist_ok=True)
            doc = {"job": j + 1, "hosts": [[net.hosts[h][0], RING_UDP_PORT] for h in ring],
                   "rounds": rounds, "n_values": n_values, "seed": ms.seed, "window": window,
                   "timeout": timeout, "max_timeout": max_timeout, "out_dir": str(folder),
                   "start_file": str(out / "start"), "n_workers": n_all}
            (folder / "job.json").write_text(json.dumps(doc, indent=1) + "\n")
            nodes += [(h, "workers.ring.ring_node", (str(folder / "job.json"), str(r)))
                      for r, h in enumerate(ring)]
        done = launch_nodes(run, net, "ring", out, nodes, deadline_s, "the ring's positions")
    jobs = [ring_results(out / f"job{j + 1}", j + 1, ring, rounds)
            for j, ring in enumerate(rings)]
    return RingSimResult(jobs, rounds_span(out, "ring", done), done.wall_s, 0, done.moved)


def ring_results(folder: Path, job: int, ring: list[str], rounds: int) -> RingJobResult:
    """One ring's result from its positions' files: per round, whether every position
    applied exactly the wrapped sum of every position's vector, and every record."""
    q, sums, records = [], [], []
    for r in range(len(ring)):
        with np.load(folder / f"ring{r}.npz") as d:
            q.append(d["q"])
            sums.append(d["sums"])
        records.append(json.loads((folder / f"ring{r}.json").read_text())["rounds"])
    exact = [all(len(s) > rnd for s in sums)
             and all(np.array_equal(s[rnd], wrapped_sum([v[rnd] for v in q])) for s in sums)
             for rnd in range(rounds)]
    resent = sum(x["retransmits"] for rec in records for x in rec)
    return RingJobResult(job, records, exact, resent, workers=list(ring))
