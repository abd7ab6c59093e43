"""From a plan to switch state: the rule installer (docs/design.md §3.5, §3.7; docs/protocol.md §3).

Every switch runs ``p4src/ina.p4``; a switch outside the plan's deployment set (and not the
PS's ToR) gets ``agg_enabled = 0``, which is how the testbed models a non-programmable switch:
it routes INA packets by ``agg_id`` with the very same ECMP hash but never aggregates.

:func:`switch_rules` is pure (topology + plan + port numbering → the entries of every switch);
:func:`deploy` pushes them over P4Runtime.  Routing follows the planner's model exactly: for
every aggregation point t (the deployed switches, the PS's ToR) and for the PS itself (agg_id
0), every other switch gets the group of its ECMP next hops toward t
(:func:`topo.paths.ecmp_next_hops`, the function the LP used for its link loads); the data
plane picks a member by crc32(chunk_id ++ switch_id).  Deploying is idempotent: the pipeline
is pushed again (which clears every table) and the same entries are written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from controller.mcast_tree import result_tree
from topo.paths import ecmp_next_hops

ING = "MyIngress."


@dataclass(frozen=True)
class JobSpec:
    """A job as the switches see it: its id and its workers (bit i = ``workers[i]``).

    ``removed``: bits of workers taken out of the job (a worker that died, docs/design.md §9);
    the survivors keep their bits, so packets in flight keep their meaning."""

    job_id: int
    workers: tuple[str, ...]
    removed: frozenset[int] = frozenset()

    @property
    def full_mask(self) -> int:
        return ((1 << len(self.workers)) - 1) & ~sum(1 << b for b in self.removed)

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(w for i, w in enumerate(self.workers) if i not in self.removed)


@dataclass
class Entry:
    table: str
    match: dict[str, Any]
    action: str
    params: dict[str, Any]
    priority: int = 0


@dataclass
class SwitchRules:
    """Everything one switch needs; ``default`` is the keyless switch_config action."""

    switch: str
    default: Entry
    entries: list[Entry] = field(default_factory=list)
    mcast_groups: dict[int, list[int]] = field(default_factory=dict)


class DeployError(RuntimeError):
    """A switch could not be configured (the message names it)."""


def _hosts(graph: nx.Graph) -> list[str]:
    return [n for n, k in graph.nodes(data="kind") if k == "host"]


def routing_rules(
    graph: nx.Graph,
    ports: Mapping[str, Mapping[str, int]],
    host_addrs: Mapping[str, tuple[str, str]],
    switch_ids: Mapping[str, int],
    aggregators: Iterable[str] = (),
) -> dict[str, SwitchRules]:
    """Plain IPv4 forwarding for every switch (the part every method needs): switch id,
    fabric ports, and a /32 route per host along the first ECMP next hop.  ``aggregators``
    get ``agg_enabled = 1``; with none, ``ina.p4`` is an ordinary router."""
    aggregators = set(aggregators)
    rules: dict[str, SwitchRules] = {}
    for s in sorted(switch_ids):
        r = SwitchRules(s, Entry(ING + "switch_config", {}, ING + "set_switch_config",
                                 {"switch_id": int(switch_ids[s]),
                                  "agg_enabled": int(s in aggregators)}))
        rules[s] = r
        for nb, port in sorted(ports[s].items()):
            if nb in graph and graph.nodes[nb].get("kind") == "switch":  # not a dead one
                r.entries.append(Entry(ING + "port_config",
                                       {"standard_metadata.ingress_port": port},
                                       ING + "set_port_fabric", {}))
        for h in _hosts(graph):
            hops = ecmp_next_hops(graph, s, h)
            if not hops:
                continue
            ip, mac = host_addrs[h]
            r.entries.append(Entry(ING + "ipv4_lpm", {"hdr.ipv4.dstAddr": (ip, 32)},
                                   ING + "ipv4_forward",
                                   {"dstAddr": mac, "port": ports[s][hops[0]]}))
    return rules


def switch_rules(
    graph: nx.Graph,
    plan: Mapping[str, Any],
    ports: Mapping[str, Mapping[str, int]],
    host_addrs: Mapping[str, tuple[str, str]],
    jobs: Iterable[JobSpec],
) -> dict[str, SwitchRules]:
    """The entries of every switch for ``plan`` and ``jobs``.

    ``ports[node][neighbour]`` is the port of ``node`` facing ``neighbour``;
    ``host_addrs[host] = (ip, mac)`` of the host's first interface.  The ids in the plan's
    ``retired_ids`` (switches that died, :mod:`controller.replan`) are routed like agg_id 0,
    so that packets still addressed to them reach the PS, which merges them by bitmap.
    """
    jobs = list(jobs)
    ids: dict[str, int] = {s: int(i) for s, i in plan["switch_ids"].items()}
    ps, tor = plan["ps"], plan["ps_tor"]
    deployed = list(plan["deployed"])
    aggregators = set(deployed) | {tor}
    switches = sorted(ids)
    workers = sorted({w for j in jobs for w in j.members})
    tree = result_tree(graph, tor, workers, deployed)
    # a job without some worker multicasts down its own, smaller tree (§9)
    trees = {j.job_id: tree if sorted(j.members) == workers
             else result_tree(graph, tor, j.members, deployed) for j in jobs}
    rules = routing_rules(graph, ports, host_addrs, ids, aggregators)
    for s in switches:
        r = rules[s]
        # INA: ECMP groups toward each aggregation point and toward the PS (agg_id 0)
        member = 0
        targets = [(ids[t], t) for t in sorted(aggregators) if t != s] + [(0, ps)]
        for agg_id, target in targets:
            hops = ecmp_next_hops(graph, s, target)
            if not hops:
                continue
            aliases = plan.get("retired_ids", []) if agg_id == 0 else []
            for a in (agg_id, *aliases):
                r.entries.append(Entry(ING + "ina_route", {"hdr.ina.agg_id": int(a)},
                                       ING + "set_group", {"base": member, "size": len(hops)}))
            for hop in hops:
                r.entries.append(Entry(ING + "ina_nexthop", {"meta.member_index": member},
                                       ING + "set_port", {"port": ports[s][hop]}))
                member += 1
        for job in jobs:
            r.entries.append(Entry(ING + "job_table", {"hdr.ina.job_id": job.job_id},
                                   ING + "set_job", {
                                       "full_mask": job.full_mask,
                                       "is_ps_tor": int(s == tor),
                                       "tor_id": ids[tor],
                                       "ps_port": ports[s].get(ps, 0) if s == tor else 0,
                                       "mcast_grp": job.job_id,
                                   }))
            for bit, w in enumerate(job.workers):
                if w in ports[s] and bit not in job.removed:
                    r.entries.append(Entry(ING + "ina_member", {
                        "hdr.ina.job_id": job.job_id, "hdr.ina.worker_id": bit,
                        "standard_metadata.ingress_port": ports[s][w]}, ING + "member_ok", {}))
            if s in trees[job.job_id]:
                r.mcast_groups[job.job_id] = [ports[s][c] for c in trees[job.job_id][s]]
        for c in tree.get(s, []):
            if graph.nodes[c].get("kind") == "host":
                ip, mac = host_addrs[c]
                r.entries.append(Entry("MyEgress.result_rewrite",
                                       {"standard_metadata.egress_port": ports[s][c]},
                                       "MyEgress.set_result_dst", {"dstAddr": mac, "ip": ip}))
    return rules


def apply_rules(conn: Any, rules: SwitchRules, p4info: Path, device_config: Path) -> int:
    """Push the pipeline and every entry to one switch; returns the number of writes."""
    from controller.p4runtime_client import SwitchConnection

    conn.set_pipeline(p4info, device_config)
    d = rules.default
    conn.set_default_action(d.table, d.action, d.params)
    updates = [SwitchConnection.update("INSERT", "table_entry",
                                       conn.table_entry(e.table, e.match, e.action, e.params,
                                                        e.priority))
               for e in rules.entries]
    for i in range(0, len(updates), 500):
        conn.write(updates[i:i + 500])
    for gid, group_ports in sorted(rules.mcast_groups.items()):
        conn.insert_multicast_group(gid, [(p, 0) for p in group_ports])
    return 1 + len(updates) + len(rules.mcast_groups)


def _entry_key(e: Entry) -> tuple:
    return (e.table, tuple(sorted((k, repr(v)) for k, v in e.match.items())), e.priority)


@dataclass
class RuleChanges:
    """What turns one switch's installed rules into new ones, without a pipeline push (which
    would clear the aggregator slots of every job in flight)."""

    insert: list[Entry] = field(default_factory=list)
    modify: list[Entry] = field(default_factory=list)
    delete: list[Entry] = field(default_factory=list)
    default: Entry | None = None  # the new switch_config, when it changed
    groups: dict[str, dict[int, list[int]]] = field(
        default_factory=lambda: {"insert": {}, "modify": {}, "delete": {}})

    @property
    def writes(self) -> int:
        return (len(self.insert) + len(self.modify) + len(self.delete)
                + (self.default is not None) + sum(len(g) for g in self.groups.values()))


def rule_changes(old: SwitchRules, new: SwitchRules) -> RuleChanges:
    """Entries (by table, match and priority) and multicast groups to insert, modify and
    delete so that a switch holding ``old`` holds ``new`` (pure)."""
    ch = RuleChanges()
    before = {_entry_key(e): e for e in old.entries}
    after = {_entry_key(e): e for e in new.entries}
    for k, e in after.items():
        if k not in before:
            ch.insert.append(e)
        elif (before[k].action, before[k].params) != (e.action, e.params):
            ch.modify.append(e)
    ch.delete = [e for k, e in before.items() if k not in after]
    if (old.default.action, old.default.params) != (new.default.action, new.default.params):
        ch.default = new.default
    for gid, members in new.mcast_groups.items():
        if gid not in old.mcast_groups:
            ch.groups["insert"][gid] = members
        elif old.mcast_groups[gid] != members:
            ch.groups["modify"][gid] = members
    ch.groups["delete"] = {g: [] for g in old.mcast_groups if g not in new.mcast_groups}
    return ch


def apply_changes(conn: Any, changes: RuleChanges, p4info: Path) -> int:
    """Write ``changes`` to one switch whose pipeline is already ``p4info``'s: new and
    modified entries first, deletions last (a half-updated switch drops packets, which the
    workers retransmit; it never forwards them to a port that is no longer wired)."""
    from controller.p4runtime_client import SwitchConnection

    conn.use_p4info(p4info)
    if changes.default is not None:
        d = changes.default
        conn.set_default_action(d.table, d.action, d.params)
    ups = [SwitchConnection.update(kind, "table_entry",
                                   conn.table_entry(e.table, e.match,
                                                    None if kind == "DELETE" else e.action,
                                                    None if kind == "DELETE" else e.params,
                                                    e.priority))
           for kind, entries in (("INSERT", changes.insert), ("MODIFY", changes.modify),
                                 ("DELETE", changes.delete))
           for e in entries]
    for i in range(0, len(ups), 500):
        conn.write(ups[i:i + 500])
    for gid, ports in changes.groups["insert"].items():
        conn.insert_multicast_group(gid, [(p, 0) for p in ports])
    for gid, ports in changes.groups["modify"].items():
        conn.modify_multicast_group(gid, [(p, 0) for p in ports])
    for gid in changes.groups["delete"]:
        conn.delete_multicast_group(gid)
    return changes.writes


def _each_switch(switches: Iterable[str], addresses: Mapping[str, tuple[str, int]],
                 timeout: float, configure: Any, parallel: int = 1) -> dict[str, int]:
    """``configure(conn, switch) -> writes`` on every switch (``parallel`` at a time);
    DeployError naming the first one, in order, that does not answer or refuses a write."""
    from concurrent.futures import ThreadPoolExecutor

    from controller.p4runtime_client import P4RuntimeError, SwitchConnection

    def one(s: str) -> int | DeployError:
        address, device_id = addresses[s]
        conn = SwitchConnection(address, device_id, election_id=1, name=s, timeout=timeout)
        try:
            conn.connect()
            return configure(conn, s)
        except (P4RuntimeError, OSError, KeyError, ValueError) as exc:
            text = str(exc)
            return DeployError(text if s in text else f"switch {s} ({address}): {text}")
        finally:
            conn.close()

    switches = list(switches)
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        outcome = dict(zip(switches, pool.map(one, switches), strict=True))
    for result in outcome.values():
        if isinstance(result, DeployError):
            raise result
    return outcome  # type: ignore[return-value]


def update(
    old: Mapping[str, SwitchRules],
    new: Mapping[str, SwitchRules],
    addresses: Mapping[str, tuple[str, int]],
    p4info: Path,
    timeout: float = 10.0,
) -> dict[str, int]:
    """Bring switches configured with ``old`` to ``new`` by writing only the differences
    (every switch of ``new`` must be in ``old``).  Returns writes per switch."""
    changes = {s: rule_changes(old[s], new[s]) for s in new}
    todo = [s for s in new if changes[s].writes]  # untouched switches are not even contacted
    written = _each_switch(todo, addresses, timeout,
                           lambda conn, s: apply_changes(conn, changes[s], p4info), parallel=8)
    return {s: written.get(s, 0) for s in new}


def deploy(
    rules: Mapping[str, SwitchRules],
    addresses: Mapping[str, tuple[str, int]],
    p4info: Path,
    device_config: Path,
    timeout: float = 10.0,
) -> dict[str, int]:
    """Configure every switch (``addresses[s] = (grpc address, device id)``).

    Returns writes per switch; raises :class:`DeployError` naming the first switch that does
    not answer or refuses an entry.
    """
    return _each_switch(rules, addresses, timeout,
                        lambda conn, s: apply_rules(conn, rules[s], p4info, device_config))
