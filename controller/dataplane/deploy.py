"""From a plan to switch state: the rule installer (docs/design.md §3.5, §3.7; docs/protocol.md §3).

Every switch runs ``p4src/ina.p4``; a switch outside the plan's deployment set (and not the
PS's ToR) gets ``agg_enabled = 0``, which is how the testbed models a non-programmable switch:
it routes INA packets by ``agg_id`` with the very same ECMP hash but never aggregates.

:func:`switch_rules` is pure (topology + plan + port numbering → the entries of every switch);
:func:`deploy` pushes them over P4Runtime.  Routing follows the planner's model exactly: for
every aggregation point t (the deployed switches, the PS's ToR) and for the PS itself (agg_id
0), every other switch gets the group of its ECMP next hops toward t
(:func:`topo.paths.ecmp_next_hops`, the function the LP used for its link loads); the data
plane takes the group's members in turn (routing.p4's ``ecmp_turn``).  Deploying is idempotent: the pipeline
is pushed again (which clears every table) and the same entries are written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from controller.plan.mcast_tree import result_tree
from controller.plan.types import Plan
from topo.paths import ecmp_next_hops, route_next_hop
from workers.ina.constants import TYPE_GRAD, TYPE_PARTIAL, num_slots
from workers.ina.tree import WORKER, Tree

ING = "MyIngress."


SLOT_POLICIES = ("shared", "partitioned")


@dataclass(frozen=True)
class SwitchJob:
    """A job as the switches see it: its id and its workers (bit i = ``workers[i]``).

    ``removed``: bits of workers taken out of the job (a worker that died, docs/design.md §9);
    the survivors keep their bits, so packets in flight keep their meaning.

    Several jobs (docs/design.md §3.10): ``plan`` is the job's own plan (its PS, PS ToR,
    deployment; None = the plan :func:`switch_rules` is given) and ``tenant`` names the
    training job it belongs to: the sync modes of one tenant run one after another and
    share its slot range under the ``partitioned`` policy (empty = the job is its own).

    ``tree``: a hierarchical job's aggregation tree (docs/protocol.md §5.1): every switch of
    it gets its children in ``ina_child`` and its fan-in and parent in ``set_job``; None: a
    flat job (bit i = worker i)."""

    job_id: int
    workers: tuple[str, ...]
    removed: frozenset[int] = frozenset()
    plan: Plan | None = field(default=None, compare=False, hash=False)  # a one-job plan
    tenant: str = ""
    tree: Tree | None = field(default=None, compare=False, hash=False)

    @property
    def full_mask(self) -> int:
        if self.tree is not None:
            return 0  # a hierarchical job's bits are children: no job-wide mask
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
    fabric ports, and a /32 route per host along :func:`topo.paths.route_next_hop` -- one
    of the ECMP next hops, chosen per (switch, host) by a stable hash, so that a switch's
    routes toward many hosts leave by all its equal-cost ports (the PSs' NACKs and unicast
    answers from one edge switch took one uplink when every route took the first next
    hop: docs/results.md, issue 39).  ``aggregators`` get ``agg_enabled = 1``; with none,
    ``ina.p4`` is an ordinary router."""
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
            hop = route_next_hop(graph, s, h)
            if hop is None:
                continue
            ip, mac = host_addrs[h]
            r.entries.append(Entry(ING + "ipv4_lpm", {"hdr.ipv4.dstAddr": (ip, 32)},
                                   ING + "ipv4_forward",
                                   {"dstAddr": mac, "port": ports[s][hop]}))
    return rules


def _aggregation_points(plan: Plan) -> set[str]:
    return set(plan.job.deployed) | {plan.job.ps_tor}


ASK_GROUP_BASE = 0x8000
"""The first multicast group id of the points' NACK trees (:func:`ask_trees`); a job's
RESULT group is its job id, below it."""


def ask_trees(graph: nx.Graph, plan: Plan, job: SwitchJob) -> dict[str, dict[str, list[str]]]:
    """A flat job's deployed points -> the tree that carries each point's NACK to its
    workers (docs/protocol.md §6, "Points ask their children"): rooted at the point, to
    every member the plan sends some chunk through it (``fractions``).  The job's RESULT
    tree, rooted at s_d, need not pass through a point (a fat-tree's second aggregation
    switch is a leaf of it).  Hierarchical jobs have none (their slots flush to the PS)."""
    if job.tree is not None:
        return {}
    out = {}
    for s in plan.job.deployed:
        kids = [w for w in job.members if plan.job.fractions.get(w, {}).get(s, 0.0) > 0]
        if kids and s != plan.job.ps_tor:
            out[s] = result_tree(graph, s, kids)
    return out


class _Groups:
    """The ina_nexthop members of one switch, written group after group: ``toward(t)``
    appends the equal-cost next hops toward ``t`` and returns the set_group params (None:
    no path)."""

    def __init__(self, graph: nx.Graph, switch: str, ports: Mapping[str, int],
                 entries: list[Entry]) -> None:
        self.graph, self.switch, self.ports, self.entries = graph, switch, ports, entries
        self.member = 0

    def toward(self, target: str) -> dict[str, int] | None:
        hops = ecmp_next_hops(self.graph, self.switch, target)
        if not hops:
            return None
        params = {"base": self.member, "size": len(hops)}
        for hop in hops:
            self.entries.append(Entry(ING + "ina_nexthop", {"meta.member_index": self.member},
                                      ING + "set_port", {"port": self.ports[hop]}))
            self.member += 1
        return params


def slot_ranges(
    jobs: Iterable[SwitchJob],
    plan: Plan,
    switches: Iterable[str],
    policy: str = "shared",
    n_slots: int | None = None,
) -> dict[str, dict[int, tuple[int, int]]]:
    """Per switch, per job id: the slot range ``(base, size)`` its ``set_job`` entry gets
    (pure; docs/design.md §3.10).

    ``shared`` (ATP-style): every job hashes into the whole pool ``(0, n_slots)``; a slot
    held by another job is a collision and falls back (the key holds the job id).
    ``partitioned``: at each switch, the tenants that aggregate there (it is in their plan's
    deployment or their PS ToR) split the pool in proportion to their planned γ (equal
    shares when every γ is 0), each at least one slot; a job that does not aggregate at a
    switch gets ``(0, 0)``: nothing of it is aggregated there.  Jobs of one tenant (its
    sync modes, which never run at once) share the tenant's range."""
    if policy not in SLOT_POLICIES:
        raise ValueError(f"slot policy {policy!r}: expected one of {', '.join(SLOT_POLICIES)}")
    if n_slots is None:
        n_slots = num_slots()
    jobs = list(jobs)
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for s in switches:
        if policy == "shared":
            out[s] = {j.job_id: (0, n_slots) for j in jobs}
            continue
        weight: dict[str, float] = {}
        for j in jobs:
            p = j.plan or plan
            if s in _aggregation_points(p):
                key = j.tenant or str(j.job_id)
                weight[key] = max(weight.get(key, 0.0), float(p.job.gamma or 0.0))
        tenants = sorted(weight)
        if len(tenants) > n_slots:
            raise ValueError(f"switch {s}: {len(tenants)} jobs aggregate there but the pool "
                             f"has only {n_slots} slots")
        if tenants and sum(weight.values()) <= 0:
            weight = dict.fromkeys(tenants, 1.0)
        total = sum(weight.values())
        # at least one slot each, the rest by largest remainder of the γ shares
        spare = n_slots - len(tenants)
        exact = {t: spare * weight[t] / total for t in tenants} if tenants else {}
        size = {t: 1 + int(exact[t]) for t in tenants}
        left = n_slots - sum(size.values())
        for t in sorted(tenants, key=lambda t: (-(exact[t] - int(exact[t])), t))[:left]:
            size[t] += 1
        base, ranges = 0, {}
        for t in tenants:
            ranges[t] = (base, size[t])
            base += size[t]
        out[s] = {j.job_id: ranges.get(j.tenant or str(j.job_id), (0, 0)) for j in jobs}
    return out


def switch_rules(
    graph: nx.Graph,
    plan: Plan,
    ports: Mapping[str, Mapping[str, int]],
    host_addrs: Mapping[str, tuple[str, str]],
    jobs: Iterable[SwitchJob],
    slot_policy: str = "shared",
    n_slots: int | None = None,
) -> dict[str, SwitchRules]:
    """The entries of every switch for ``plan`` and ``jobs``.

    ``ports[node][neighbour]`` is the port of ``node`` facing ``neighbour``;
    ``host_addrs[host] = (ip, mac)`` of the host's first interface.  A job with its own
    ``plan`` (several jobs, docs/design.md §3.10) has its own PS, PS ToR, deployment,
    RESULT tree and route to its PS (``ps_route``); ``plan`` gives the switch ids and the
    jobs without one.  The ids in a plan's ``retired_ids`` (switches that died,
    :mod:`controller.plan.replan`) are routed to the job's PS (``route_to_ps``), so that packets
    still addressed to them reach it, and it merges them by bitmap.  ``slot_policy``: see
    :func:`slot_ranges`.
    """
    jobs = list(jobs)
    ids: dict[str, int] = {s: int(i) for s, i in plan.switch_ids.items()}
    plans = {j.job_id: j.plan or plan for j in jobs}
    aggregators: set[str] = set().union(*(_aggregation_points(p) for p in plans.values()))
    retired = sorted({int(i) for p in (plan, *plans.values()) for i in p.retired_ids})
    switches = sorted(ids)
    trees: dict[int, dict[str, list[str]]] = {}
    for j in jobs:
        p = plans[j.job_id]
        trees[j.job_id] = result_tree(graph, p.job.ps_tor, sorted(j.members),
                                      list(p.job.deployed))
    asks = {j.job_id: ask_trees(graph, plans[j.job_id], j) for j in jobs}
    if any(asks.values()) and any(j.job_id >= ASK_GROUP_BASE for j in jobs):
        raise DeployError(f"job ids from {ASK_GROUP_BASE} up are the points' NACK groups")
    slots = slot_ranges(jobs, plan, switches, slot_policy, n_slots)
    rules = routing_rules(graph, ports, host_addrs, ids, aggregators)
    for s in switches:
        r = rules[s]
        groups = _Groups(graph, s, ports[s], r.entries)
        # INA: ECMP groups toward each aggregation point, and toward each job's PS (agg_id 0)
        for t in sorted(aggregators, key=lambda t: ids[t]):
            if t != s and (params := groups.toward(t)) is not None:
                r.entries.append(Entry(ING + "ina_route", {"hdr.ina.agg_id": ids[t]},
                                       ING + "set_group", params))
        for a in retired:
            r.entries.append(Entry(ING + "ina_route", {"hdr.ina.agg_id": a},
                                   ING + "route_to_ps", {}))
        to_ps: dict[str, dict[str, int] | None] = {}
        for job in jobs:
            p = plans[job.job_id]
            ps, tor = p.job.ps, p.job.ps_tor
            if ps not in to_ps:
                to_ps[ps] = groups.toward(ps)
            if to_ps[ps] is not None:
                r.entries.append(Entry(ING + "ps_route", {"hdr.ina.job_id": job.job_id},
                                       ING + "set_group", to_ps[ps]))
            base, size = slots[s][job.job_id]
            tree, fan_in, up = job.tree, 0, ids[tor]
            if tree is not None and ids[s] in tree.children:
                fan_in = tree.fan_in(ids[s])
                up = tree.parent(ids[s]) or ids[tor]
                for i, c in enumerate(tree.children[ids[s]]):
                    if c is not None:
                        r.entries.append(Entry(ING + "ina_child", {
                            "hdr.ina.job_id": job.job_id,
                            "hdr.ina.msg_type": TYPE_GRAD if c.kind == WORKER else TYPE_PARTIAL,
                            "hdr.ina.worker_id": c.id}, ING + "set_child", {"index": i}))
            r.entries.append(Entry(ING + "job_table", {"hdr.ina.job_id": job.job_id},
                                   ING + "set_job", {
                                       "full_mask": job.full_mask,
                                       "is_ps_tor": int(s == tor),
                                       "tor_id": up,
                                       "ps_port": ports[s].get(ps, 0) if s == tor else 0,
                                       "mcast_grp": job.job_id,
                                       "slot_base": base,
                                       "slot_size": size,
                                       "hier": int(tree is not None),
                                       "fan_in": fan_in,
                                   }))
            for bit, w in enumerate(job.workers):
                if w in ports[s] and bit not in job.removed:
                    r.entries.append(Entry(ING + "ina_member", {
                        "hdr.ina.job_id": job.job_id, "hdr.ina.worker_id": bit,
                        "standard_metadata.ingress_port": ports[s][w]}, ING + "member_ok", {}))
            if s in trees[job.job_id]:
                r.mcast_groups[job.job_id] = [ports[s][c] for c in trees[job.job_id][s]]
            for point, ask in sorted(asks[job.job_id].items()):
                if ask.get(s):
                    gid = ASK_GROUP_BASE + sum(g >= ASK_GROUP_BASE for g in r.mcast_groups)
                    r.mcast_groups[gid] = [ports[s][c] for c in ask[s]]
                    r.entries.append(Entry(ING + "ask_group", {
                        "hdr.ina.job_id": job.job_id, "hdr.ina.agg_id": ids[point]},
                        ING + "set_ask_group", {"grp": gid}))
        # RESULT copies (and points' NACKs) to a host get its own address (one entry per
        # port, whichever job)
        children = sorted({c for t in trees.values() for c in t.get(s, [])}
                          | {c for a in asks.values() for t in a.values() for c in t.get(s, [])})
        for c in children:
            if graph.nodes[c].get("kind") == "host":
                ip, mac = host_addrs[c]
                r.entries.append(Entry("MyEgress.result_rewrite",
                                       {"standard_metadata.egress_port": ports[s][c]},
                                       "MyEgress.set_result_dst", {"dstAddr": mac, "ip": ip}))
    return rules


def apply_rules(conn: Any, rules: SwitchRules, p4info: Path, device_config: Path) -> int:
    """Push the pipeline and every entry to one switch; returns the number of writes."""
    from controller.dataplane.p4runtime_client import SwitchConnection

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
    from controller.dataplane.p4runtime_client import SwitchConnection

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

    from controller.dataplane.p4runtime_client import P4RuntimeError, SwitchConnection

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
    parallel: int = 8,
) -> dict[str, int]:
    """Configure every switch (``addresses[s] = (grpc address, device id)``).

    Returns writes per switch; raises :class:`DeployError` naming the first switch that does
    not answer or refuses an entry.  Each switch gets one pipeline push, one default-action
    write, its table entries in Write RPCs of up to 500 updates and one write per multicast
    group, over its own connection; ``parallel`` switches are configured at once (a switch
    spends most of a deploy loading the pipeline, so the 80 switches of a k=8 fat-tree load
    theirs side by side).
    """
    return _each_switch(rules, addresses, timeout,
                        lambda conn, s: apply_rules(conn, rules[s], p4info, device_config),
                        parallel=parallel)
