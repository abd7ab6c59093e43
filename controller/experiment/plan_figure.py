"""A picture of a plan (``plan.png``): the topology by layer, where each worker's gradient goes.

:func:`plan_drawing` is pure: from a typed :class:`~controller.plan.types.Plan` (and the
topology graph, by default the one the plan carries) it computes everything the picture shows
-- node positions by layer (hosts at the bottom, then the switches one hop above them, two
hops, ...: edge/agg/core on a fat-tree, leaf/spine on a leaf-spine), the programmable switches,
the PS and workers of every job, one arrow per (worker, aggregation point) with the share of
the worker's gradient aggregated there (the rest of a worker's gradient is aggregated at its
PS's ToR, docs/design.md §3.5), and every link's planned load as a width and a colour.
:func:`draw_plan` renders that data with matplotlib and writes the PNG.

Readability: names are written on switches and on the hosts of the plan while the layer holds
at most :data:`LABEL_LIMIT` nodes; beyond that (a fat-tree k=8 has 128 hosts, 32 edge
switches) only the PSs' and the programmable switches' names are written and the workers are
told apart by colour; with more than :data:`ARROW_LIMIT` (worker, aggregation point) pairs no
arrows are drawn.  The text beside the picture always lists each aggregation point's workers
as ranges (``h2–h7``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from controller.plan.types import Plan
from topo.models import from_dict, natural_key

__all__ = ["PlanDrawing", "Arrow", "Link", "plan_drawing", "draw_plan", "plan_picture_path",
           "JOB_COLOURS", "LABEL_LIMIT", "ARROW_LIMIT", "link_width"]

# one colour per job (tab10 without its grey), cycled beyond eight jobs
JOB_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
               "#bcbd22")
LABEL_LIMIT = 16  # a layer with more nodes names only its programmable switches and PSs
ARROW_LIMIT = 60  # more (worker, aggregation point) pairs: the legend lists them, no arrows
MIN_WIDTH, MAX_WIDTH = 0.6, 6.0  # link width at load 0 and at load = capacity
LAYER_NAMES = {"core": "core", "agg": "aggregation", "edge": "edge", "leaf": "leaf",
               "spine": "spine"}


@dataclass(frozen=True)
class Link:
    """One undirected link: its heavier direction's planned load over the link's capacity."""

    a: str
    b: str
    load: float  # the larger of the two directions' planned loads
    bw: float
    utilization: float  # load / bw, at most 1
    width: float  # line width in points


@dataclass(frozen=True)
class Arrow:
    """Part of worker ``worker``'s gradient (``share`` of it) is aggregated at ``switch``."""

    job: str
    worker: str
    switch: str
    share: float


@dataclass
class PlanDrawing:
    """Everything :func:`draw_plan` draws, computed from the plan alone."""

    title: str
    positions: dict[str, tuple[float, float]]  # node -> (x, y); y = layer
    layers: dict[int, list[str]]  # layer -> nodes, left to right (0 = hosts)
    layer_names: dict[int, str]
    switches: list[str]
    hosts: list[str]
    programmable: list[str]  # switches that run aggregation for some job (PS ToRs included)
    failed: list[str]
    job_colours: dict[str, str]
    ps: dict[str, str]  # job -> PS host
    workers: dict[str, str]  # worker host -> job
    links: list[Link]
    arrows: list[Arrow]
    labelled: set[str] = field(default_factory=set)  # nodes whose names are written
    legend_lines: list[str] = field(default_factory=list)


def plan_picture_path(plan_json: str | Path) -> Path:
    """Where ``plan`` writes the picture of the plan it wrote to ``plan_json``: the same path
    with ``.png`` (``results/plan.json`` -> ``results/plan.png``)."""
    return Path(plan_json).with_suffix(".png")


def _layers(graph: nx.Graph) -> dict[str, int]:
    """Hosts are layer 0; a switch's layer is its hop distance to the nearest host."""
    hosts = [n for n, k in graph.nodes(data="kind") if k == "host"]
    dist = nx.multi_source_dijkstra_path_length(graph, hosts, weight=None) if hosts else {}
    return {n: int(dist.get(n, 1)) for n in graph.nodes}


def _layer_name(nodes: list[str], layer: int) -> str:
    if layer == 0:
        return "hosts"
    prefixes = {n.rstrip("0123456789_") for n in nodes}
    if len(prefixes) == 1 and (p := prefixes.pop()) in LAYER_NAMES:
        return LAYER_NAMES[p]
    return f"switches {layer} hop{'s' if layer > 1 else ''} from hosts"


def _ranges(names: list[str]) -> str:
    """``h2, h3, h4, h7`` -> ``h2–h4, h7`` (names with a common prefix and a number)."""
    out: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if run:
            a, b = run[0], run[-1]
            out.append(f"{a[0]}{a[1]}" if a == b else f"{a[0]}{a[1]}–{b[0]}{b[1]}")
            run.clear()

    for name in sorted(names, key=natural_key):
        stem = name.rstrip("0123456789")
        digits = name[len(stem):]
        if not digits:
            flush()
            out.append(name)
            continue
        num = int(digits)
        if run and run[-1][0] == stem and run[-1][1] + 1 == num:
            run.append((stem, num))
        else:
            flush()
            run.append((stem, num))
    flush()
    return ", ".join(out)


def link_width(utilization: float) -> float:
    """Line width of a link at ``utilization`` (planned load / capacity, clipped to [0, 1])."""
    u = min(max(utilization, 0.0), 1.0)
    return MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * u


def plan_drawing(plan: Plan, graph: nx.Graph | None = None) -> PlanDrawing:
    """The drawing data of ``plan`` on ``graph`` (default: the topology the plan carries)."""
    if graph is None:
        graph = from_dict(plan.topology["graph"], "the plan's topology")
    layer_of = _layers(graph)
    layers: dict[int, list[str]] = {}
    for n in sorted(graph.nodes, key=natural_key):
        layers.setdefault(layer_of[n], []).append(n)
    positions: dict[str, tuple[float, float]] = {}
    for lv, nodes in layers.items():
        for i, n in enumerate(nodes):
            positions[n] = ((i + 0.5) / len(nodes), float(lv))
    layer_names = {lv: _layer_name(nodes, lv) for lv, nodes in layers.items()}

    jobs = list(plan.jobs)
    colours = {j: JOB_COLOURS[i % len(JOB_COLOURS)] for i, j in enumerate(jobs)}
    programmable = list(dict.fromkeys(
        [*plan.deployed, *plan.programmable,
         *(s for job in plan.jobs.values() for s in (job.ps_tor, *job.deployed))]))
    ps = {j: job.ps for j, job in plan.jobs.items()}
    workers = {w: j for j, job in plan.jobs.items() for w in job.workers}

    heavier: dict[frozenset[str], float] = {}
    for entry in plan.loads:
        key = frozenset((entry["from"], entry["to"]))
        heavier[key] = max(heavier.get(key, 0.0), float(entry["load"]))
    links = []
    for a, b, bw in sorted(graph.edges(data="bw", default=1.0),
                           key=lambda e: (natural_key(e[0]), natural_key(e[1]))):
        load = heavier.get(frozenset((a, b)), 0.0)
        util = min(load / float(bw), 1.0) if bw else 0.0
        links.append(Link(a, b, load, float(bw), util, link_width(util)))

    arrows: list[Arrow] = []
    legend: list[str] = []
    for j, job in plan.jobs.items():
        to: dict[str, list[str]] = {}
        for w in job.workers:
            shares = {s: float(f) for s, f in job.fractions.get(w, {}).items() if f > 1e-9}
            rest = 1.0 - sum(shares.values())
            if rest > 1e-9:
                shares[job.ps_tor] = shares.get(job.ps_tor, 0.0) + rest
            for s, f in shares.items():
                arrows.append(Arrow(j, w, s, f))
                to.setdefault(s, []).append(w)
        name = "" if len(jobs) == 1 else f"{j}: "
        legend.append(f"{name}PS {job.ps} (ToR {job.ps_tor}), γ {job.gamma:.3g}")
        for s in [*job.deployed, job.ps_tor]:
            if s in to:
                legend.append(f"  {s} ← {_ranges(to[s])}")

    labelled = {n for lv, nodes in layers.items() if len(nodes) <= LABEL_LIMIT
                for n in nodes if lv > 0 or n in workers or n in ps.values()}
    labelled |= set(ps.values()) | set(programmable)
    switches = [n for n in graph.nodes if graph.nodes[n].get("kind") == "switch"]
    hosts = [n for n in graph.nodes if graph.nodes[n].get("kind") == "host"]
    spec = plan.topology.get("spec") or plan.topology.get("name") or "topology"
    title = (f"{spec}: {len(jobs)} job{'s' if len(jobs) > 1 else ''}, "
             f"{plan.planner or 'plan'}, budget {plan.budget}, "
             f"programmable {', '.join(programmable) or '(none)'}")
    return PlanDrawing(title=title, positions=positions, layers=layers,
                       layer_names=layer_names, switches=switches, hosts=hosts,
                       programmable=programmable, failed=list(plan.failed),
                       job_colours=colours, ps=ps, workers=workers, links=links,
                       arrows=arrows, labelled=labelled, legend_lines=legend)


def draw_plan(plan: Plan, path: str | Path, graph: nx.Graph | None = None) -> Path:
    """Draw ``plan`` (:func:`plan_drawing`) and write it as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    d = plan_drawing(plan, graph)
    n_hosts = len(d.layers.get(0, []))
    width = min(max(8.0, 0.45 * n_hosts + 3.0), 22.0)
    height = 1.6 * len(d.layers) + 2.2
    fig, ax = plt.subplots(figsize=(width, height))
    cmap = plt.get_cmap("YlOrRd")
    pos = d.positions

    ax.add_collection(LineCollection(  # every link in one collection
        [(pos[link.a], pos[link.b]) for link in d.links],
        colors=[cmap(0.25 + 0.75 * link.utilization) if link.load > 0 else "#cccccc"
                for link in d.links],
        linewidths=[link.width for link in d.links], zorder=1, capstyle="round"))

    small = n_hosts > LABEL_LIMIT
    for a in d.arrows if len(d.arrows) <= ARROW_LIMIT else []:
        (x1, y1), (x2, y2) = pos[a.worker], pos[a.switch]
        ax.add_patch(FancyArrowPatch(
            (x1, y1), (x2, y2), connectionstyle="arc3,rad=0.12", arrowstyle="-|>",
            mutation_scale=8, lw=0.6 + 1.6 * a.share, ls="--", alpha=0.25 + 0.6 * a.share,
            color=d.job_colours[a.job], zorder=2,
            shrinkA=4, shrinkB=9))

    # one collection per kind of node, not one call per node (a 19,999-host topology
    # drew for more than 30 minutes one scatter at a time; issue 43)
    prog, failed = set(d.programmable), set(d.failed)

    def scatter(nodes: list[str], **style: object) -> None:
        if nodes:
            ax.scatter([pos[n][0] for n in nodes], [pos[n][1] for n in nodes], **style)

    scatter([s for s in d.switches if s in failed], s=240, marker="X", color="black",
            zorder=4)
    scatter([s for s in d.switches if s in prog and s not in failed], s=330, marker="s",
            color="#ff9f1c", edgecolors="black", linewidths=1.6, zorder=4)
    scatter([s for s in d.switches if s not in prog and s not in failed],
            s=150 if not small else 60, marker="s", color="#e6e6e6", edgecolors="#888888",
            linewidths=0.8, zorder=3)
    ps_hosts = {h: j for j, h in d.ps.items()}
    for j, colour in d.job_colours.items():
        scatter([h for h in d.hosts if ps_hosts.get(h) == j], s=260, marker="D",
                color=colour, edgecolors="black", linewidths=1.4, zorder=4)
        scatter([h for h in d.hosts if h not in ps_hosts and d.workers.get(h) == j],
                s=110 if not small else 30, marker="o", color=colour, zorder=4)
    scatter([h for h in d.hosts if h not in ps_hosts and h not in d.workers],
            s=50 if not small else 12, marker="o", color="white", edgecolors="#999999",
            zorder=3)
    for s in d.switches:
        if s in d.labelled:
            x, y = pos[s]
            ax.text(x, y + 0.16, s, ha="center", va="bottom", fontsize=7, zorder=5,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none",
                          "alpha": 0.8})
    for h in d.hosts:
        if h in d.labelled:
            x, y = pos[h]
            ax.text(x, y - 0.22, h, ha="center", va="top", fontsize=7, zorder=5,
                    rotation=0 if n_hosts <= 16 else 90)

    for lv, name in d.layer_names.items():
        ax.text(-0.02, lv, name, ha="right", va="center", fontsize=9, style="italic")
    ax.set_xlim(-0.16, 1.0)
    ax.set_ylim(-0.6, max(d.layers) + 0.5)
    ax.axis("off")
    ax.set_title(d.title, fontsize=10)

    handles = [
        Line2D([], [], marker="s", ls="", color="#ff9f1c", markeredgecolor="black", ms=10,
               label="programmable (aggregates)"),
        Line2D([], [], marker="s", ls="", color="#e6e6e6", markeredgecolor="#888888", ms=8,
               label="forwards only"),
        Line2D([], [], color=cmap(1.0), lw=MAX_WIDTH, label="link at capacity"),
        Line2D([], [], color=cmap(0.25), lw=MIN_WIDTH + 1, label="lightly loaded link"),
        Line2D([], [], color="#cccccc", lw=MIN_WIDTH, label="unused link"),
    ]
    for j, colour in d.job_colours.items():
        who = "" if len(d.job_colours) == 1 else f"{j}: "
        handles.append(Line2D([], [], marker="D", ls="", color=colour, markeredgecolor="black",
                              ms=8, label=f"{who}PS"))
        handles.append(Line2D([], [], marker="o", ls="--", color=colour, ms=6,
                              label=f"{who}worker" + (" → aggregation point"
                                                       if len(d.arrows) <= ARROW_LIMIT else "")))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)
    lines = d.legend_lines if len(d.legend_lines) <= 24 else [*d.legend_lines[:23], "…"]
    ax.text(1.02, 0.38, "aggregation points\n" + "\n".join(lines), transform=ax.transAxes,
            fontsize=8, va="top", ha="left", family="monospace")
    with warnings.catch_warnings():
        # many jobs' legend lines leave tight_layout no room and it says so on the user's
        # console (simulate --jobs 4); savefig's bbox_inches="tight" keeps them in the file
        warnings.filterwarnings("ignore", message="Tight layout not applied")
        fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
