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
    """Every entry and the multicast group of one job."""

    entries: tuple[Entry, ...]
    group: int
    group_ports: tuple[int, ...]


def _mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def _ip_int(ip: str) -> int:
    a, b, c, d = (int(p) for p in ip.split("."))
    return a << 24 | b << 16 | c << 8 | d


def job_rules(job: JobConfig, hosts: dict[int, Host], group: int) -> JobRules:
    """The job's entries: job_table, one sm_member per worker on its port, result_dst per
    port; RESULTs multicast on group ``group`` (1..65535) to every worker's port."""
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
                             {"standard_metadata.egress_port": h.port},
                             "MyEgress.set_result_dst",
                             {"dstAddr": _mac_int(h.mac), "ip": _ip_int(h.ip)}))
    ports = tuple(sorted({hosts[w].port for w in job.workers}))
    return JobRules(tuple(entries), group, ports)


class _SwitchLike(Protocol):
    def insert_entry(self, table: str, match: dict, action: str,
                     params: dict | None = ...) -> Any: ...

    def set_multicast_group(self, group_id: int, replicas: list[tuple[int, int]]) -> Any: ...


def install(rules: JobRules, switch: _SwitchLike) -> None:
    """Write ``rules`` into ``switch`` (an in-process pyswitch Switch)."""
    for e in rules.entries:
        switch.insert_entry(e.table, e.match, e.action, e.params)
    switch.set_multicast_group(rules.group, [(p, 0) for p in rules.group_ports])


__all__ = ["Entry", "Host", "JobRules", "install", "job_rules"]
