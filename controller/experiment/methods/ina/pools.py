"""Which worker hosts share one process (``run --hosts-per-process``, docs/scale.md, "Several
hosts per process"): pure logic, no network.

On a local Mininet network a job's workers may run as pools -- ``workers.ina.pool_node``, one
process serving several hosts, each host's sockets in its own network namespace -- instead of
one ``worker_node`` process per host: a RESULT multicast to every worker then wakes one
process per pool, not one per worker, which is most of what a 64-worker run's hosts cost
(docs/results.md, "Several hosts per process").  A pool runs on its first member's host and
its CPU time is reported under that host.

:func:`hosts_per_process` says how many hosts share a process: ``1`` wherever a worker must
be its own process -- ``--kill-worker`` (the victim's process is killed),
``--on-worker-failure continue`` (a silent worker's process is ended), a network that is not
one machine's Mininet (cluster mode: hosts on several servers; the simulated network drives
every worker in its own loop) -- else the setting: ``auto`` is one process per host below
:data:`AUTO_FROM` workers (``make run``'s 6 workers stay as they always were) and
:data:`AUTO_SIZE` hosts per process from there.  :func:`group_workers` makes the groups.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.errors import ExperimentError

__all__ = ["AUTO", "AUTO_FROM", "AUTO_SIZE", "parse_hosts_per_process", "hosts_per_process",
           "group_workers"]

AUTO = "auto"
AUTO_FROM = 16  # workers in a job from which auto pools them
AUTO_SIZE = 8  # hosts per process with auto (docs/results.md, "Several hosts per process")


def parse_hosts_per_process(text: str) -> str:
    """``auto`` or a whole number ≥ 1, as the setting keeps it (one ExperimentError else)."""
    t = str(text).strip().lower()
    if t == AUTO:
        return AUTO
    if not (t.isascii() and t.isdigit() and len(t) <= 6 and int(t) >= 1):
        raise ExperimentError(f"--hosts-per-process: expected auto or a whole number >= 1, "
                              f"got {str(text)[:40]!r}")
    return str(int(t))


def hosts_per_process(setting: str, n_workers: int, *, local_mininet: bool,
                      kill_worker: bool = False, on_worker_failure: str = "stop") -> int:
    """Hosts per worker process for a job of ``n_workers`` (module docstring)."""
    if not local_mininet or kill_worker or on_worker_failure != "stop":
        return 1
    if setting == AUTO:
        return 1 if n_workers < AUTO_FROM else AUTO_SIZE
    return int(setting)


def group_workers(workers: list[str], size: int,
                  edge_of: Mapping[str, str] | None = None) -> list[list[int]]:
    """The workers' indices in groups of at most ``size``: workers of one edge switch
    (``edge_of``: host → its switch) next to each other, edges in the order their first
    worker appears, workers in their order within an edge; then consecutive runs of
    ``size``.  ``size`` 1: one group per worker, in order."""
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if size == 1:
        return [[i] for i in range(len(workers))]
    edge_of = edge_of or {}
    first: dict[str, int] = {}
    for i, w in enumerate(workers):
        first.setdefault(edge_of.get(w, w), i)
    order = sorted(range(len(workers)), key=lambda i: (first[edge_of.get(workers[i],
                                                                          workers[i])], i))
    return [order[i:i + size] for i in range(0, len(order), size)]
