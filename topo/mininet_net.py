"""Turn a topology model (networkx graph) into a Mininet network of P4 switches and hosts.

Input: a ``networkx.Graph`` whose nodes have ``kind`` = ``"host"`` or ``"switch"`` and whose
edges may carry ``bw`` (in units of ``bw_unit_mbps`` Mbit/s, default 1; applied with TCLink's
htb shaping) and ``delay`` (e.g.
``"1ms"``; needs tc netem, which our kernel lacks — then Mininet warns and ignores it; use
pyswitch's ``--impair delay_ms=`` instead). Host attributes ``ip``/``mac`` override the
defaults below.

Stable numbering (independent of insertion order):

* every node's neighbours are sorted by name (natural order: ``s2`` < ``s10``); a switch's
  port *k* (1-based) goes to its *k*-th neighbour; a host's ``eth{k-1}`` likewise;
* host *i* (0-based, natural order of host names) gets, on its interface *j*, the address
  ``10.j.x.y/16`` with ``(x, y - 1) = divmod(i, 254)`` — never .0 or .255 — and MAC
  ``00:00:0a:0j:xx:yy`` (:func:`host_address`);
* switches get device ids 1, 2, … in natural name order (= ``topo.models.switch_ids``) and
  gRPC ports on 127.0.0.1.

Every host has static ARP entries for every other host's addresses and transmit checksum
offload off (a raw-socket switch forwards frames as they are; see pyswitch.ports).
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import networkx as nx


def natural_key(name: Any) -> tuple:
    """Sort key putting ``s2`` before ``s10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name)))


def host_address(index: int, nic: int = 0) -> tuple[str, str]:
    """(IPv4, MAC) of host ``index`` (0-based) on its interface ``nic``.

    Host numbers n = 1, 2, … skip the last octets 0 and 255: n ↦ the n-th value of
    1..254, 257..510, … written as x.y, so addresses never end in .0 or .255."""
    x, y = divmod(index, 254)
    y += 1
    if x > 255 or nic > 255:
        raise ValueError(f"host index {index} / nic {nic} out of the 10.j.x.y range")
    return f"10.{nic}.{x}.{y}", f"00:00:0a:{nic:02x}:{x:02x}:{y:02x}"


@dataclass
class HostInfo:
    name: str
    ips: list[str]
    macs: list[str]
    interfaces: list[str]
    neighbours: list[str]  # neighbour of interface j

    @property
    def ip(self) -> str:
        return self.ips[0]

    @property
    def mac(self) -> str:
        return self.macs[0]


@dataclass
class NetPlan:
    """The numbering decided for a graph (pure: no Mininet objects)."""

    hosts: dict[str, HostInfo] = field(default_factory=dict)
    switches: list[str] = field(default_factory=list)
    device_ids: dict[str, int] = field(default_factory=dict)
    ports: dict[str, dict[str, int]] = field(default_factory=dict)  # node → neighbour → port
    links: list[tuple[str, str, int, int, dict[str, Any]]] = field(default_factory=list)

    def port_peer(self, switch: str) -> dict[int, str]:
        """Switch port number → neighbour name."""
        return {p: n for n, p in self.ports[switch].items()}


def plan_network(graph: nx.Graph, bw_unit_mbps: float | None = 1.0) -> NetPlan:
    """Decide names, ports, addresses and link parameters for ``graph``.

    A link's TCLink rate is ``bw × bw_unit_mbps`` Mbit/s (the topology models count ``bw`` in
    abstract units, default 1.0, so choose the unit: e.g. 100 for 100 Mbit/s links);
    ``bw_unit_mbps=None`` leaves links unshaped."""
    plan = NetPlan()
    kinds = {n: graph.nodes[n].get("kind") for n in graph.nodes}
    bad = [n for n, k in kinds.items() if k not in ("host", "switch")]
    if bad:
        raise ValueError(f"node {bad[0]!r}: attribute kind must be 'host' or 'switch'")
    order = sorted(graph.nodes, key=natural_key)
    for n in order:
        neigh = sorted(graph.neighbors(n), key=natural_key)
        offset = 0 if kinds[n] == "host" else 1
        plan.ports[str(n)] = {str(m): i + offset for i, m in enumerate(neigh)}
    hosts = [n for n in order if kinds[n] == "host"]
    for i, h in enumerate(hosts):
        neigh = sorted(graph.neighbors(h), key=natural_key)
        attrs = graph.nodes[h]
        ips, macs = [], []
        for j in range(max(1, len(neigh))):
            ip, mac = host_address(i, j)
            ips.append(ip)
            macs.append(mac)
        if "ip" in attrs:
            ips[0] = attrs["ip"]
        if "mac" in attrs:
            macs[0] = attrs["mac"]
        plan.hosts[str(h)] = HostInfo(str(h), ips, macs,
                                      [f"{h}-eth{j}" for j in range(len(neigh))],
                                      [str(m) for m in neigh])
    plan.switches = [str(n) for n in order if kinds[n] == "switch"]
    plan.device_ids = {s: k + 1 for k, s in enumerate(plan.switches)}
    for u, v in sorted((tuple(sorted((a, b), key=natural_key)) for a, b in graph.edges),
                       key=lambda e: (natural_key(e[0]), natural_key(e[1]))):
        data = graph.edges[u, v]
        opts = {}
        if data.get("bw") is not None and bw_unit_mbps is not None:
            opts["bw"] = float(data["bw"]) * bw_unit_mbps
        if data.get("delay") is not None:
            opts["delay"] = data["delay"]
        plan.links.append((str(u), str(v), plan.ports[str(u)][str(v)],
                           plan.ports[str(v)][str(u)], opts))
    return plan


@dataclass
class MininetNet:
    """A started (or built) Mininet net plus the plan it follows."""

    net: Any
    plan: NetPlan
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent building: ``links`` (nodes, links and their shaping), ``hosts``
    (addresses, offload, neighbours), ``switches`` (switch processes until they answer)."""

    def grpc_address(self, switch: str) -> str:
        return self.net.get(switch).grpc_address

    def device_id(self, switch: str) -> int:
        return self.plan.device_ids[switch]

    def stop(self) -> None:
        self.net.stop()


HTB_BUCKET_BYTES = 1600
"""Bytes of the token bucket that decides when a frame leaves a shaped link: TCLink's htb
class (``rate R burst 15k``, no ``cburst``) gets the ceil bucket ``tc`` sizes as ceil/HZ + mtu,
with ``tc``'s mtu 1,600 and HZ 10^9 (``/proc/net/psched``: high-resolution timers), so
``cburst 1600b`` at any rate (read back: ``tc -d class show``, docs/simulate.md
cross-validation).  A frame leaves while both buckets are not in debt; the smaller decides.
The one source of this figure: the simulated links' default
(``SimOptions.burst_bytes``) and the round's prediction
(:mod:`controller.experiment.prediction`) read it here."""

_HTB_CLASS = re.compile(r"\bclass htb (\d+):(\d+) (?:root|parent (\S+))")


def htb_rate_change(ifname: str, show_text: str, mbps: float) -> list[str]:
    """The ``tc class change`` command that re-rates the first htb class of ``tc class show``
    output (the one TCLink made: ``parent 5:0 classid 5:1 ... burst 15k``) to ``mbps``;
    ValueError if the interface has no htb class (an unshaped link)."""
    m = _HTB_CLASS.search(show_text)
    if m is None:
        raise ValueError(f"{ifname}: no htb class to re-rate (is the link shaped?)")
    major, minor, parent = m.groups()
    return ["tc", "class", "change", "dev", ifname, "parent", parent or f"{major}:0",
            "classid", f"{major}:{minor}", "htb", "rate", f"{mbps:g}Mbit", "burst", "15k"]


def set_htb_rate(ifname: str, mbps: float) -> None:
    """Re-rate the htb class shaping ``ifname`` (in the caller's network namespace) while the
    network runs; RuntimeError with tc's message if that fails."""
    import subprocess

    show = subprocess.run(["tc", "class", "show", "dev", ifname], capture_output=True, text=True)
    try:
        cmd = htb_rate_change(ifname, show.stdout, mbps)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")


def quiet_tc_intf() -> type:
    """TCIntf that drops htb's "quantum of class ... is big" warning.

    Above ~16 Mbit/s htb's default r2q gives a quantum over 200 kB and tc warns; the quantum
    only shares bandwidth among sibling classes and TCIntf makes one class per interface, so
    the warning says nothing about our links (Mininet prints it as "*** Error").  Every other
    tc output is still reported."""
    from mininet.link import TCIntf

    class QuietTCIntf(TCIntf):
        def tc(self, cmd: str, tc: str = "tc") -> str:
            out = super().tc(cmd, tc)
            return "".join(line for line in out.splitlines(keepends=True)
                           if "quantum of class" not in line)

    return QuietTCIntf


def _quiet_tc_link() -> type:
    """TCLink whose interfaces are :func:`quiet_tc_intf`'s."""
    from mininet.link import TCLink

    QuietTCIntf = quiet_tc_intf()  # noqa: N806 -- a class

    class QuietTCLink(TCLink):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("cls1", QuietTCIntf)
            kwargs.setdefault("cls2", QuietTCIntf)
            super().__init__(*args, **kwargs)

    return QuietTCLink


def host_setup_commands(plan: NetPlan, host: str, python: str,
                        max_line: int = 3000) -> list[str]:
    """The shell lines that finish ``host``'s set-up once its addresses are on (pure):

    * IPv4 only: no IPv6 neighbour discovery or MLD frames in the pipelines and in the byte
      counters the experiments measure;
    * transmit checksum offload off on every interface (one ``python -m pyswitch.ports``);
    * a permanent neighbour entry for every other host's address on the interface of that
      address's subnet, written by ``ip -batch -`` in lines of at most ``max_line``
      characters (a Mininet shell reads commands through a terminal, whose line buffer
      holds 4,095).

    A k=8 fat-tree has 128 hosts: one ``ip neigh`` command per pair was 16,256 round trips
    through the hosts' shells; these are 3 or 4 lines per host."""
    info = plan.hosts[host]
    lines = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=1; "
             f"{python} -m pyswitch.ports tx-off {' '.join(info.interfaces)}"]
    neigh = []
    for other, oinfo in plan.hosts.items():
        if other == host:
            continue
        for ip, mac in zip(oinfo.ips, oinfo.macs, strict=True):
            nic = int(ip.split(".")[1])
            if nic < len(info.interfaces):
                neigh.append(f"neigh replace {ip} lladdr {mac} dev {info.interfaces[nic]} "
                             "nud permanent")
    head, tail = "printf '%s\\n' ", " | ip -batch -"
    batch: list[str] = []
    for entry in neigh:
        if batch and len(head) + len(tail) + sum(len(b) + 3 for b in batch) + len(entry) + 3 \
                > max_line:
            lines.append(head + " ".join(f"'{b}'" for b in batch) + tail)
            batch = []
        batch.append(entry)
    if batch:
        lines.append(head + " ".join(f"'{b}'" for b in batch) + tail)
    return lines


def build_net(graph: nx.Graph, switch_cls: type | None = None,
              switch_opts: dict[str, Any] | None = None,
              per_switch_opts: dict[str, dict[str, Any]] | None = None,
              start: bool = True, bw_unit_mbps: float | None = 1.0, *,
              node_opts: dict[str, dict[str, Any]] | None = None,
              net_opts: dict[str, Any] | None = None) -> MininetNet:
    """Create the Mininet network for ``graph`` (controller=None, TCLink) and start it.

    ``switch_cls`` defaults to :class:`topo.mininet_switch.PySwitch`; ``switch_opts`` go to
    every switch, ``per_switch_opts[name]`` to one; ``bw_unit_mbps`` as in
    :func:`plan_network`. ``node_opts[name]`` and ``net_opts`` go to that node's and to
    Mininet's constructor (the cluster mode's server and classes,
    :mod:`topo.mininet_cluster`). Returns after every switch's P4Runtime
    server answers; on any error the partly built network is stopped."""
    from mininet.net import Mininet

    from topo.mininet_switch import PySwitch

    switch_cls = switch_cls or PySwitch
    plan = plan_network(graph, bw_unit_mbps)
    node_opts = node_opts or {}
    net = Mininet(**{"topo": None, "controller": None, "link": _quiet_tc_link(),
                     "autoSetMacs": False, "autoStaticArp": False, "build": False,
                     "waitConnected": False, **(net_opts or {})})
    try:
        for name in plan.hosts:
            net.addHost(name, ip=None, **node_opts.get(name, {}))
        for s in plan.switches:
            opts = {"cls": switch_cls, **(switch_opts or {})}
            opts.update((per_switch_opts or {}).get(s, {}))
            opts.update(node_opts.get(s, {}))
            net.addSwitch(s, device_id=plan.device_ids[s], **opts)
        for u, v, pu, pv, opts in plan.links:
            net.addLink(u, v, port1=pu, port2=pv, **opts)
        t0 = time.monotonic()
        net.build()
        t1 = time.monotonic()
        for name, info in plan.hosts.items():
            host = net.get(name)
            for j, ifname in enumerate(info.interfaces):
                intf = host.intf(ifname)
                intf.setMAC(info.macs[j])
                intf.setIP(info.ips[j], 16)
            for line in host_setup_commands(plan, name, sys.executable):
                host.cmd(line)
        t2 = time.monotonic()
        if start:
            net.start()
        timings = {"links": round(t1 - t0, 1), "hosts": round(t2 - t1, 1),
                   "switches": round(time.monotonic() - t2, 1)}
    except BaseException:
        net.stop()
        raise
    return MininetNet(net, plan, timings)
