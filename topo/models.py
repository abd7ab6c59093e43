"""Topology models: pure networkx graphs with link capacities (docs/design.md §3.2).

Every topology is an undirected :class:`networkx.Graph` whose nodes carry ``kind`` in
``{"host", "switch"}`` and whose edges carry ``bw`` (capacity of *each direction* of the link,
default 1.0).  Graphs returned here are frozen (:func:`networkx.freeze`): the ECMP caches of
:mod:`topo.paths` rely on that, and a plan must describe exactly the graph it was computed on.

Naming (stable, readable; "name order" everywhere means :func:`natural_key` order, so ``h2``
comes before ``h10``):

* hosts are ``h0, h1, …`` in every generated topology (so ``--ps h0`` always works);
* fat-tree(k): ``edge{i}``, ``agg{i}`` (pod p holds edge/agg ``p·k/2 … p·k/2 + k/2 − 1``),
  ``core{i}`` (core ``g·k/2 + m`` joins agg ``g`` of every pod); host n hangs off edge ``n // (k/2)``;
* leaf-spine(L, S, H): ``leaf{i}``, ``spine{j}``; host n hangs off leaf ``n // H``;
* BCube(N, k) (docs/design.md §4 convention: N**k servers, k levels ``0 … k−1``): server ``h{s}`` has one
  NIC per level; the level-l switch ``bc{l}_{j}`` joins the N servers that differ only in digit
  l (``digit(s, l) = (s // N**l) % N``, as in :mod:`workers.collective.bcube`), j being the server
  number with digit l removed.  Switches carry ``level``; the graph attribute
  ``bcube_groups[l]`` maps each level-l switch to its N servers (ordered by digit l);
* dumbbell(L, R, b): hosts ``h0 … h{L−1}`` on switch ``left``, the next R on ``right``; the
  ``left``–``right`` link has capacity b.

Switch ids (carried in the plan and in packets' ``agg_id``): 1..n in name order; 0 is the PS.

File format (JSON)::

    {"hosts": ["w1", ...], "switches": ["leaf1", ...],
     "links": [{"a": "w1", "b": "leaf1", "bw": 1.0}, ...]}

``bw`` is optional (1.0).  Bad JSON, missing keys, duplicate names, unknown nodes in a link,
self-loops, duplicate links and non-positive capacities raise :class:`TopologyError` naming the
file and the offending entry.

Size limits: a topology has at most :data:`MAX_NODES` nodes and a file at most
:data:`MAX_FILE_BYTES` bytes.  Both are checked before anything is built, so a typo such as
``fattree:200`` fails at once with one line instead of exhausting memory minutes later (the
planner's LP is far past its useful size long before these limits: see bench/plan_scaling.py).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from pyswitch.inputfile import InputFileError, read_input_text, shown_path

__all__ = [
    "TopologyError",
    "natural_key",
    "fat_tree",
    "leaf_spine",
    "bcube",
    "dumbbell",
    "from_dict",
    "to_dict",
    "load_json",
    "parse_topology",
    "hosts",
    "switches",
    "switch_ids",
]


class TopologyError(ValueError):
    """A topology spec or file is invalid; the message says what and where."""


MAX_NODES = 20_000
"""Most hosts + switches in one topology (fat-tree k=40 has 18,000)."""
MAX_FILE_BYTES = 64 * 2**20
"""Largest topology file read."""


def _check_size(what: str, n_nodes: int | None) -> None:
    """``n_nodes`` None: too many to be worth counting."""
    if n_nodes is None or n_nodes > MAX_NODES:
        count = "too many nodes" if n_nodes is None else f"{n_nodes:,} nodes"
        raise TopologyError(
            f"{what}: {count}, more than the limit of {MAX_NODES:,} (topo.models.MAX_NODES)"
        )


_NUM = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """Sort key that orders embedded numbers numerically: ``h2 < h10``, ``agg9 < agg10``."""
    return tuple(int(t) if t.isdigit() else t for t in _NUM.split(name))


def _build(
    host_names: Iterable[str],
    switch_names: Iterable[str],
    links: Iterable[tuple[str, str, float]],
    **graph_attrs: Any,
) -> nx.Graph:
    g = nx.Graph(**graph_attrs)
    for h in host_names:
        g.add_node(h, kind="host")
    for s in switch_names:
        g.add_node(s, kind="switch")
    for a, b, bw in links:
        g.add_edge(a, b, bw=float(bw))
    return nx.freeze(g)


def hosts(graph: nx.Graph) -> list[str]:
    """Host names in name order."""
    return sorted((n for n, k in graph.nodes(data="kind") if k == "host"), key=natural_key)


def switches(graph: nx.Graph) -> list[str]:
    """Switch names in name order."""
    return sorted((n for n, k in graph.nodes(data="kind") if k == "switch"), key=natural_key)


def switch_ids(graph: nx.Graph) -> dict[str, int]:
    """Stable small ids 1..n for the switches, in name order (0 is reserved for the PS)."""
    return {s: i + 1 for i, s in enumerate(switches(graph))}


# --------------------------------------------------------------------------------------------
# generators
# --------------------------------------------------------------------------------------------


def fat_tree(k: int, bw: float = 1.0) -> nx.Graph:
    """Fat-tree(k) (Al-Fares et al.): k pods of k/2 edge + k/2 agg switches, (k/2)² cores,
    k³/4 hosts, 5k²/4 switches; every link has capacity ``bw``."""
    if not isinstance(k, int) or k < 2 or k % 2:
        raise TopologyError(f"fat-tree: k must be an even integer >= 2, got {k!r}")
    half = k // 2
    n_hosts = k**3 // 4
    _check_size(f"fat-tree k={k}", n_hosts + 5 * k * k // 4)
    links: list[tuple[str, str, float]] = []
    for n in range(n_hosts):
        links.append((f"h{n}", f"edge{n // half}", bw))
    for p in range(k):
        for e in range(half):
            for a in range(half):
                links.append((f"edge{p * half + e}", f"agg{p * half + a}", bw))
        for a in range(half):
            for m in range(half):
                links.append((f"agg{p * half + a}", f"core{a * half + m}", bw))
    sw = [f"edge{i}" for i in range(k * half)] + [f"agg{i}" for i in range(k * half)]
    sw += [f"core{i}" for i in range(half * half)]
    return _build([f"h{n}" for n in range(n_hosts)], sw, links, name=f"fattree:{k}")


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, bw: float = 1.0) -> nx.Graph:
    """Two-tier Clos: every leaf linked to every spine; ``hosts_per_leaf`` hosts per leaf."""
    for label, v in (("leaves", leaves), ("spines", spines), ("hosts per leaf", hosts_per_leaf)):
        if not isinstance(v, int) or v < 1:
            raise TopologyError(f"leaf-spine: {label} must be an integer >= 1, got {v!r}")
    _check_size(f"leaf-spine {leaves},{spines},{hosts_per_leaf}",
                leaves * (1 + hosts_per_leaf) + spines)
    links = [(f"h{n}", f"leaf{n // hosts_per_leaf}", bw) for n in range(leaves * hosts_per_leaf)]
    links += [(f"leaf{i}", f"spine{j}", bw) for i in range(leaves) for j in range(spines)]
    return _build(
        [f"h{n}" for n in range(leaves * hosts_per_leaf)],
        [f"leaf{i}" for i in range(leaves)] + [f"spine{j}" for j in range(spines)],
        links,
        name=f"leafspine:{leaves},{spines},{hosts_per_leaf}",
    )


def bcube_switch(server: int, level: int, n: int) -> str:
    """Name of the level-``level`` switch of ``server`` in BCube(n, ·)."""
    low = server % n**level
    high = server // n ** (level + 1)
    return f"bc{level}_{high * n**level + low}"


def bcube(n: int, k: int, bw: float = 1.0) -> nx.Graph:
    """BCube(n, k) with the docs/design.md §4 convention: n**k servers, k levels of n**(k−1) switches.

    BCube's own routing relays through servers (every server has k NICs).  For the INA
    planner servers are *hosts that never relay* (:mod:`topo.paths`): the P4 data plane forwards
    only in switches.  Since BCube switches link only to servers, a worker can then reach the
    PS's switch s_d only if it shares s_d with the PS (its level group); the planner rejects
    other workers with a clear error (:func:`controller.plan.lp.check_job`).
    """
    if not isinstance(n, int) or n < 2:
        raise TopologyError(f"bcube: n (servers per switch) must be an integer >= 2, got {n!r}")
    if not isinstance(k, int) or k < 1:
        raise TopologyError(f"bcube: k (levels) must be an integer >= 1, got {k!r}")
    # n**k servers; k < 64 keeps the power small enough to compute before the check (n >= 2).
    _check_size(f"bcube n={n} k={k}", None if k >= 64 else n**k + k * n ** (k - 1))
    n_servers = n**k
    links = []
    groups: dict[int, dict[str, list[str]]] = {lv: {} for lv in range(k)}
    for s in range(n_servers):
        for lv in range(k):
            sw = bcube_switch(s, lv, n)
            links.append((f"h{s}", sw, bw))
            groups[lv].setdefault(sw, []).append(f"h{s}")
    sw_names = [f"bc{lv}_{j}" for lv in range(k) for j in range(n ** (k - 1))]
    g = nx.Graph(name=f"bcube:{n},{k}", bcube_groups=groups)
    for s in range(n_servers):
        g.add_node(f"h{s}", kind="host")
    for name in sw_names:
        g.add_node(name, kind="switch", level=int(name[2 : name.index("_")]))
    for a, b, c in links:
        g.add_edge(a, b, bw=float(c))
    return nx.freeze(g)


def dumbbell(left: int, right: int, bottleneck: float = 1.0, bw: float = 1.0) -> nx.Graph:
    """Two switches ``left``/``right`` joined by one link of capacity ``bottleneck``."""
    for label, v in (("left hosts", left), ("right hosts", right)):
        if not isinstance(v, int) or v < 1:
            raise TopologyError(f"dumbbell: {label} must be an integer >= 1, got {v!r}")
    if not bottleneck > 0:
        raise TopologyError(f"dumbbell: bottleneck capacity must be > 0, got {bottleneck!r}")
    _check_size(f"dumbbell {left},{right}", left + right + 2)
    links = [(f"h{n}", "left" if n < left else "right", bw) for n in range(left + right)]
    links.append(("left", "right", bottleneck))
    return _build(
        [f"h{n}" for n in range(left + right)], ["left", "right"], links,
        name=f"dumbbell:{left},{right},{bottleneck:g}",
    )


def with_link_bw(graph: nx.Graph, default: float | None,
                 host_bw: Mapping[str, float]) -> nx.Graph:
    """A frozen copy of ``graph`` whose links have ``bw = default`` (None: unshaped), except
    the access link of every host in ``host_bw``, which gets that host's value (e.g. per-host
    uplinks from a node profile).  A named host must exist and have exactly one link."""
    g = nx.Graph(graph)
    nx.set_edge_attributes(g, default, "bw")
    for h, bw in host_bw.items():
        if g.nodes.get(h, {}).get("kind") != "host":
            raise TopologyError(f"{h!r} is not a host of {graph.graph.get('name', 'the topology')}")
        links = list(g.edges(h))
        if len(links) != 1:
            raise TopologyError(f"host {h!r} has {len(links)} links; a per-host bandwidth needs "
                                "exactly one (its access link)")
        g.edges[links[0]]["bw"] = float(bw)
    return nx.freeze(g)


# --------------------------------------------------------------------------------------------
# file format
# --------------------------------------------------------------------------------------------


def from_dict(data: Any, where: str = "<topology>") -> nx.Graph:
    """Validate the JSON file structure and build the graph; errors name ``where``."""

    def fail(msg: str) -> TopologyError:
        return TopologyError(f"{where}: {msg}")

    if not isinstance(data, Mapping):
        raise fail("top level must be an object with 'hosts', 'switches' and 'links'")
    for key in ("hosts", "switches", "links"):
        if key not in data:
            raise fail(f"missing key {key!r}")
        if not isinstance(data[key], list):
            raise fail(f"{key!r} must be a list")
    if len(data["hosts"]) + len(data["switches"]) > MAX_NODES:
        _check_size(where, len(data["hosts"]) + len(data["switches"]))
    seen: dict[str, str] = {}
    for key, kind in (("hosts", "host"), ("switches", "switch")):
        for i, name in enumerate(data[key]):
            if not isinstance(name, str) or not name:
                raise fail(f"{key}[{i}] must be a non-empty string, got {name!r}")
            if name in seen:
                raise fail(f"duplicate node name {name!r} ({seen[name]} and {kind})")
            seen[name] = kind
    links = []
    pairs: set[frozenset[str]] = set()
    for i, link in enumerate(data["links"]):
        if not isinstance(link, Mapping) or "a" not in link or "b" not in link:
            raise fail(f"links[{i}] must be an object with 'a' and 'b'")
        a, b = link["a"], link["b"]
        for end in (a, b):
            if not isinstance(end, str) or end not in seen:
                raise fail(f"links[{i}] names unknown node {end!r}")
        if a == b:
            raise fail(f"links[{i}] is a self-loop on {a!r}")
        if frozenset((a, b)) in pairs:
            raise fail(f"links[{i}] duplicates the link {a!r}–{b!r}")
        pairs.add(frozenset((a, b)))
        bw = link.get("bw", 1.0)
        if not _positive_finite(bw):
            shown = repr(bw) if len(repr(bw)) <= 40 else repr(bw)[:37] + "..."
            raise fail(f"links[{i}] ({a}–{b}): bw must be a positive number (finite), got {shown}")
        links.append((a, b, float(bw)))
    name = data.get("name", where)
    return _build(data["hosts"], data["switches"], links, name=str(name))


def _positive_finite(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    try:
        return math.isfinite(float(v)) and v > 0  # float() of a huge int overflows
    except OverflowError:
        return False


def to_dict(graph: nx.Graph) -> dict[str, Any]:
    """The file-format dict of ``graph`` (links in name order; round-trips with from_dict)."""
    links = []
    for a, b, bw in graph.edges(data="bw", default=1.0):
        a, b = sorted((a, b), key=natural_key)
        links.append({"a": a, "b": b, "bw": float(bw)})
    links.sort(key=lambda lk: (natural_key(lk["a"]), natural_key(lk["b"])))
    return {"hosts": hosts(graph), "switches": switches(graph), "links": links}


def load_json(path: str | Path) -> nx.Graph:
    """Read a topology file; any problem → :class:`TopologyError` naming the file."""
    path = Path(path)
    try:  # a regular file of at most MAX_FILE_BYTES (a FIFO or /dev/zero: one line)
        text = read_input_text(path, MAX_FILE_BYTES, "topology file")
    except InputFileError as exc:
        raise TopologyError(str(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopologyError(
            f"{path}:{exc.lineno}:{exc.colno}: bad JSON ({exc.msg})"
        ) from None
    except RecursionError:
        raise TopologyError(f"{path}: JSON nested too deeply to be a topology") from None
    except ValueError as exc:  # e.g. an integer longer than Python's int-string limit
        raise TopologyError(f"{shown_path(path)}: bad JSON ({exc})") from None
    # A plan file embeds its topology: accept it too, so a plan is self-contained.
    if isinstance(data, Mapping) and isinstance(data.get("topology"), Mapping):
        data = data["topology"].get("graph", data["topology"])
    return from_dict(data, str(path))


_SPEC_ARGS = {"fattree": (1, 2), "leafspine": (3, 4), "bcube": (2, 3), "dumbbell": (2, 3)}


def parse_topology(spec: str) -> nx.Graph:
    """``fattree:K[,BW]`` | ``leafspine:L,S,H[,BW]`` | ``bcube:N,K[,BW]`` |
    ``dumbbell:L,R[,BOTTLENECK]`` | a path to a ``.json`` file."""
    name, sep, rest = spec.partition(":")
    if not sep or name not in _SPEC_ARGS:
        try:
            named_file = spec.endswith(".json") or Path(spec).exists()
        except OSError:  # a name the OS cannot look up (too long): load_json says why
            named_file = True
        if named_file:
            return load_json(spec)
        raise TopologyError(
            f"topology {spec!r}: expected fattree:K, leafspine:L,S,H, bcube:N,K, "
            "dumbbell:L,R[,B] or a .json file"
        )
    parts = [p.strip() for p in rest.split(",")] if rest else []
    lo, hi = _SPEC_ARGS[name]
    if not lo <= len(parts) <= hi:
        raise TopologyError(f"topology {spec!r}: {name} takes {lo}..{hi} comma-separated numbers")
    n_int = lo if name != "dumbbell" else 2
    # Plain decimal digits only: int() would also take "1_000" or "٣", which no user means.
    if not all(re.fullmatch(r"[0-9]{1,9}", p) for p in parts[:n_int]):
        raise TopologyError(
            f"topology {spec!r}: {name} takes whole numbers of at most 9 digits "
            f"for its first {'argument' if n_int == 1 else f'{n_int} arguments'}"
        )
    try:
        ints = [int(p) for p in parts[:n_int]]
        extra = [float(p) for p in parts[n_int:] if re.fullmatch(r"[0-9.eE+-]{1,32}", p)]
    except ValueError:
        extra = []
    if len(extra) != len(parts) - n_int:
        raise TopologyError(f"topology {spec!r}: arguments must be numbers")
    if extra and not (math.isfinite(extra[0]) and extra[0] > 0):
        raise TopologyError(f"topology {spec!r}: capacity must be a positive number")
    if name == "fattree":
        g = fat_tree(*ints, *extra)
    elif name == "leafspine":
        g = leaf_spine(*ints, *extra)
    elif name == "bcube":
        g = bcube(*ints, *extra)
    else:
        g = dumbbell(*ints, *extra)
    g.graph["spec"] = spec
    return g
