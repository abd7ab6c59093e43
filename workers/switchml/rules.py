"""The entries p4src/switchml.p4 needs for one job on its switch.  Pure: the records are
built here and installed by whoever holds the switch (`install` takes any object with
pyswitch's ``insert_entry`` / ``set_multicast_group``: an in-process pyswitch Switch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from workers.switchml.job import JobConfig


@dataclass(frozen=True)
class Entry:
    """One table entry (control-plane names, as P4Info has them)."""

    table: str
    match: dict[str, int]
    action: str
    params: dict[str, int]


@dataclass(frozen=True)
class Host:
    """A worker's place at the switch: its port, and the addresses its RESULTs carry."""

    port: int
    mac: str
    ip: str


@dataclass(frozen=True)
class JobRules:
    """Every entry and the multicast group of one job: its replicas are (port, rid), one per
    worker, rid = worker_id + 1 (result_dst addresses the replica by it)."""

    entries: tuple[Entry, ...]
    group: int
    replicas: tuple[tuple[int, int], ...]


def _mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def _ip_int(ip: str) -> int:
    a, b, c, d = (int(p) for p in ip.split("."))
    return a << 24 | b << 16 | c << 8 | d


def replica_id(worker_id: int) -> int:
    """The rid of worker ``worker_id``'s replica in its job's group (0 is no replica)."""
    return worker_id + 1


def job_rules(job: JobConfig, hosts: dict[int, Host], group: int) -> JobRules:
    """The job's entries: job_table, per worker an sm_member on its port and a result_dst
    for its replica; RESULTs multicast on group ``group`` (1..65535), one replica per worker
    (several workers may share a port: a switch that is not their ToR)."""
    if not 1 <= group < 1 << 16:
        raise ValueError(f"multicast group {group} outside 1..65535")
    missing = sorted(set(job.workers) - set(hosts))
    if missing:
        raise ValueError(f"workers {missing} of job {job.job_id} have no host")
    entries = [Entry("MyIngress.job_table", {"hdr.sm.job_id": job.job_id},
                     "MyIngress.set_job",
                     {"num_workers": job.num_workers, "mcast_grp": group,
                      "pool_base": job.pool_base, "pool_size": job.pool_size})]
    for w in job.workers:
        h = hosts[w]
        entries.append(Entry("MyIngress.sm_member",
                             {"hdr.sm.job_id": job.job_id, "hdr.sm.worker_id": w,
                              "standard_metadata.ingress_port": h.port},
                             "MyIngress.member_ok", {}))
        entries.append(Entry("MyEgress.result_dst",
                             {"hdr.sm.job_id": job.job_id,
                              "standard_metadata.egress_rid": replica_id(w)},
                             "MyEgress.set_result_dst",
                             {"dstAddr": _mac_int(h.mac), "ip": _ip_int(h.ip)}))
    replicas = tuple(sorted((hosts[w].port, replica_id(w)) for w in job.workers))
    return JobRules(tuple(entries), group, replicas)


class _SwitchLike(Protocol):
    def insert_entry(self, table: str, match: dict, action: str,
                     params: dict | None = ...) -> Any: ...

    def set_multicast_group(self, group_id: int, replicas: list[tuple[int, int]]) -> Any: ...


def install(rules: JobRules, switch: _SwitchLike) -> None:
    """Write ``rules`` into ``switch``: anything with pyswitch's ``insert_entry`` and
    ``set_multicast_group`` (an in-process Switch, or a test harness's switch over P4Runtime)."""
    for e in rules.entries:
        switch.insert_entry(e.table, e.match, e.action, e.params)
    switch.set_multicast_group(rules.group, list(rules.replicas))


__all__ = ["Entry", "Host", "JobRules", "install", "job_rules", "replica_id"]
