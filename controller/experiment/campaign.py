"""``python -m controller campaign``: the fault campaign (issue 20; docs/design.md §9).

How far does INA's recovery (docs/design.md §3.7, docs/protocol.md §6–7) hold, and what does
each fault cost?  The campaign sweeps, on the ``make run`` network (fat-tree k=4, PS h0,
6 workers, budget 2, 1 Mbit/s links):

* ``loss`` at every rate of ``--loss-rates`` (default 0, 1, 2, 5, 10 %; 0 is the clean
  baseline), ``dup`` (duplication) and ``reorder`` (reordering) at one rate each — pyswitch's
  impairment on every port, changed between runs over each switch's control socket;
* ``slots``: a small slot pool (``--small-slots``, default 4 → most chunks collide): ina.p4
  compiled with ``-D INA_NUM_SLOTS=N`` through the one override path (docs/protocol.md §2);
* ``kill``: a programmable switch of the plan (not the PS's ToR, whose loss cuts the PS off)
  killed after a random round — the ``run --fail-switch`` machinery
  (:class:`controller.experiment.failover.SwitchMonitor`), switch and round drawn from the seed;

each for every seed (``--seeds N``: seeds ``--seed`` … ``--seed + N - 1``) and every mode
(``--modes``, default INA and PS-only), ``--rounds`` (default 10) rounds per run.

**Network reuse.** Every run except ``kill`` shares ONE network (both modes: their jobs are
deployed side by side, as ``run`` does).  Before each run the pipeline is pushed again, which
clears every aggregator slot: runs restart their rounds at 0 with the same job ids, and a slot
left incomplete by a lossy run would otherwise hold a *newer* round than the next run's and
push its chunks into fallback (docs/protocol.md §5, stale-round rule).  The ``slots`` runs
push the small-pool program instead, with rules made for that pool (a job's slot range in
``set_job`` must lie inside it, or the job gets no slot there and every chunk bypasses).  A
killed switch cannot be brought back into a running Mininet network with its state, so every
``kill`` run gets a fresh network (the runner does not allow reuse there); ``campaign.json``
lists every network and what it served.

Output ``results/<name>/campaign.json`` (rewritten after every run): ``runs`` — one object per
run with ``fault`` (``what`` plus ``rate``, ``slots`` or ``switch``/``round``), ``mode``,
``seed``, ``exact`` (every round exact), ``rounds_completed``, ``time_per_round_s``,
``retransmissions``, the switch counters it moved (``drops`` {reason: packets} of every
``dropped_*`` counter, ``counters`` for the others, ``counters_per_switch``; read over
P4Runtime before and after the run, :mod:`controller.dataplane.drop_counters`) and the run's folder;
``table`` (mean ± std per fault and mode, mean counters), ``settings``, ``networks``,
``total_s``; ``campaign.png`` (time per round and retransmissions vs loss rate, INA vs
PS-only, with the settings) and ``table.md`` (both tables).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import networkx as nx

from controller.dataplane.drop_counters import (
    drops_markdown,
    mean_counts,
    read_snapshot,
    run_counters,
)
from controller.errors import ExperimentError
from controller.experiment.methods.ina.core import Settings, deployed_network, tree_for
from controller.experiment.network import check_environment, compile_program
from controller.experiment.run_name import claim_name
from controller.experiment.runner import Run
from controller.files import write_json_atomic
from controller.plan.types import Plan

__all__ = ["Fault", "CampaignSettings", "add_campaign_parser", "expand_faults", "plan_runs",
           "run_campaign", "summarize_runs", "kill_choice", "cmd_campaign"]

FAULT_KINDS = ("loss", "dup", "reorder", "slots", "kill")


# ------------------------------------------------------------------ what is swept


@dataclass(frozen=True)
class Fault:
    """One injected fault: ``what`` and its rate, slot count or switch and round."""

    what: str
    rate: float | None = None
    slots: int | None = None
    switch: str | None = None
    round: int | None = None

    @property
    def label(self) -> str:
        if self.what in ("loss", "dup", "reorder"):
            return f"{self.what} {self.rate:g}"
        if self.what == "slots":
            return f"slots {self.slots}"
        if self.switch is not None:
            return f"kill {self.switch}@{self.round}"
        return "kill"

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def impairment(self, seed: int) -> str:
        """pyswitch impairment spec of this run (every port; zeros clear the previous one)."""
        loss = self.rate if self.what == "loss" else 0.0
        dup = self.rate if self.what == "dup" else 0.0
        reorder = self.rate if self.what == "reorder" else 0.0
        return f"loss={loss},dup={dup},reorder={reorder},seed={seed}"


@dataclass
class CampaignSettings:
    topo: str = Settings.topo  # the `make run` network: one default, ina.core's
    ps: str = Settings.ps
    workers: str = Settings.workers
    budget: int = Settings.budget
    bw: float | None = 1.0
    rounds: int = 10
    seeds: int = 3
    seed: int = 0
    faults: tuple[str, ...] = FAULT_KINDS
    loss_rates: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1)
    dup_rate: float = 0.02
    reorder_rate: float = 0.02
    small_slots: int = 4
    modes: tuple[str, ...] = ("ina", "ps_only")
    model: str = "mlp"
    hidden: int = 32
    window: int = 16
    timeout: float = 0.3
    round_timeout: float = 30.0  # per round: a deadlock ends the run, not the campaign
    target: str = "pyswitch"
    network: str = "mininet"  # or "simulated": every run in virtual time (_simulated_run)
    out: str = "results"
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def expand_faults(s: CampaignSettings) -> list[Fault]:
    """The faults of the sweep, in run order (kill last: it needs fresh networks)."""
    unknown = [f for f in s.faults if f not in FAULT_KINDS]
    if unknown:
        raise ExperimentError(f"--faults: unknown {', '.join(unknown)} "
                              f"(expected {', '.join(FAULT_KINDS)})")
    out: list[Fault] = []
    for kind in FAULT_KINDS:  # fixed order, whatever the option's
        if kind not in s.faults:
            continue
        if kind == "loss":
            out += [Fault("loss", rate=r) for r in s.loss_rates]
        elif kind == "dup":
            out.append(Fault("dup", rate=s.dup_rate))
        elif kind == "reorder":
            out.append(Fault("reorder", rate=s.reorder_rate))
        elif kind == "slots":
            out.append(Fault("slots", slots=s.small_slots))
        else:
            out.append(Fault("kill"))
    return out


def kill_choice(plan: Plan, graph: nx.Graph, rounds: int, seed: int) -> tuple[str, int]:
    """The switch and round a ``kill`` run uses, drawn from ``seed``: after a round in 0 ..
    rounds - 2 (one round before and one after), a deployed switch with no host attached —
    killing a ToR cuts its hosts off, which ends the job by design (docs/design.md §9), so
    it measures nothing about recovery; without such a deployed switch, any switch with no
    host (it runs ina.p4 too and carries the plan's ECMP paths)."""
    def hostless(sw: str) -> bool:
        return all(graph.nodes[n].get("kind") == "switch" for n in graph[sw])

    switches = [n for n, d in graph.nodes(data=True) if d.get("kind") == "switch"]
    candidates = sorted(sw for sw in plan.deployed if sw in graph and hostless(sw))
    candidates = candidates or sorted(sw for sw in switches if hostless(sw))
    if not candidates:
        raise ExperimentError("kill: every switch has hosts attached; killing one would cut "
                              "them off")
    if rounds < 2:
        raise ExperimentError("kill needs --rounds >= 2")
    rng = random.Random(f"kill-{seed}")
    return rng.choice(candidates), rng.randint(0, rounds - 2)


def plan_runs(faults: list[Fault], modes: Sequence[str], seeds: Sequence[int]
              ) -> list[tuple[Fault, str, int]]:
    """(fault, mode, seed) in run order: fault by fault, seed by seed, modes interleaved so
    that machine load hits both modes alike."""
    return [(f, m, sd) for f in faults for sd in seeds for m in modes]


# ------------------------------------------------------------------ results


def _mean_std(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"mean": None, "std": None}
    return {"mean": statistics.fmean(xs), "std": statistics.pstdev(xs) if len(xs) > 1 else 0.0}


def summarize_runs(runs: list[dict]) -> list[dict]:
    """One row per (fault label, mode): runs, exact runs, rounds completed, time per round and
    retransmissions (mean ± std over seeds; failed runs count in ``exact`` only)."""
    rows: dict[tuple[str, str], dict] = {}
    for r in runs:
        f = r["fault"]
        # kill runs differ in their (random) round by seed: one row per killed switch
        label = f"kill {f.get('switch', '')}".strip() if f["what"] == "kill" else r["fault_label"]
        key = (label, r["mode"])
        row = rows.setdefault(key, {"fault": label, "what": r["fault"]["what"],
                                    "rate": r["fault"].get("rate"), "mode": r["mode"],
                                    "runs": 0, "exact": 0, "_t": [], "_x": [], "_c": [],
                                    "_d": [], "_n": []})
        row["runs"] += 1
        row["exact"] += int(bool(r["exact"]))
        row["_c"].append(r["rounds_completed"])
        if "drops" in r:  # runs recorded before the counters were read have none
            row["_d"].append(r["drops"])
            row["_n"].append(r["counters"])
        if r["time_per_round_s"] is not None:
            row["_t"].append(r["time_per_round_s"])
            row["_x"].append(r["retransmissions"])
    out = []
    for row in rows.values():
        row["time_per_round_s"] = _mean_std(row.pop("_t"))
        row["retransmissions"] = _mean_std(row.pop("_x"))
        row["rounds_completed"] = _mean_std(row.pop("_c"))
        row["drops"], row["counters"] = mean_counts(row.pop("_d")), mean_counts(row.pop("_n"))
        out.append(row)
    return out


def _fmt(ms: dict[str, float | None], digits: int) -> str:
    if ms["mean"] is None:
        return "—"
    return f"{ms['mean']:.{digits}f} ± {ms['std']:.{digits}f}"


def table_markdown(rows: list[dict]) -> str:
    lines = ["| fault | mode | exact runs | time per round (s) | retransmissions per run |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['fault']} | {r['mode']} | {r['exact']}/{r['runs']} | "
                     f"{_fmt(r['time_per_round_s'], 3)} | {_fmt(r['retransmissions'], 0)} |")
    return "\n".join(lines) + "\n"


def print_campaign_table(rows: list[dict], console: Any, title: str) -> None:
    from rich.table import Table

    t = Table(title=title)
    for col in ("fault", "mode", "exact", "s/round", "retx/run"):
        t.add_column(col, justify="left" if col in ("fault", "mode") else "right")
    for r in rows:
        t.add_row(r["fault"], r["mode"], f"{r['exact']}/{r['runs']}",
                  _fmt(r["time_per_round_s"], 3), _fmt(r["retransmissions"], 0))
    console.print(t)


def plot_campaign(rows: list[dict], path: Path, settings_line: str) -> Path | None:
    """Time per round and retransmissions vs loss rate, one line per mode (mean ± std)."""
    loss = [r for r in rows if r["what"] == "loss"]
    if not loss:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in dict.fromkeys(r["mode"] for r in loss):
        pts = sorted((r for r in loss if r["mode"] == mode), key=lambda r: r["rate"])
        xs = [100 * r["rate"] for r in pts]
        for ax, key in zip(axes, ("time_per_round_s", "retransmissions"), strict=True):
            ok = [(x, r[key]) for x, r in zip(xs, pts, strict=True) if r[key]["mean"] is not None]
            if ok:
                ax.errorbar([x for x, _ in ok], [m["mean"] for _, m in ok],
                            yerr=[m["std"] for _, m in ok], marker="o", capsize=3,
                            label={"ina": "INA", "ps_only": "PS-only"}.get(mode, mode))
    axes[0].set_ylabel("time per round (s)")
    axes[1].set_ylabel("retransmissions per run")
    for ax in axes:
        ax.set_xlabel("loss probability per port (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(textwrap.fill(settings_line, 140), fontsize=9)  # the settings, whole
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ the networks
# (started by ina.core.deployed_network with a control socket on every switch: the campaign
# changes impairments between runs, where ``run`` fixes them at start)


def _set_impairment(net: Any, spec: str) -> None:
    from pyswitch.daemon import control_request

    for sw, path in net.sockets.items():
        proc = net.mininet.net.get(sw).proc
        if proc is None or proc.poll() is not None:
            continue  # a killed switch
        answer = control_request(path, {"op": "set_impairment", "port": "all", "spec": spec})
        if not answer.get("ok"):
            raise ExperimentError(f"impairment on {sw}: {answer.get('error')}")


def _read_counters(net: Any, p4info: Path) -> tuple[dict, dict[str, str]]:
    """Every switch's counters (controller.dataplane.drop_counters); a killed switch is named, not
    asked (its gRPC port would only time out)."""
    live, dead = {}, {}
    for sw, addr in net.addresses.items():
        proc = net.mininet.net.get(sw).proc
        if proc is None or proc.poll() is not None:
            dead[sw] = "switch process not running"
        else:
            live[sw] = addr
    snap, errors = read_snapshot(live, p4info)
    return snap, {**dead, **errors}


def _rules(net: Any, graph: nx.Graph, plan: Plan, jobs: list) -> dict:
    """The plan's rules for the slot count in force (:func:`workers.ina.constants.num_slots`)."""
    from controller.dataplane.deploy import switch_rules

    return switch_rules(graph, plan, net.mininet.plan.ports, net.hosts, jobs)


def _push(net: Any, p4info: Path, config: Path, rules: dict | None = None,
          timeout: float = 60.0) -> None:
    """Push a pipeline (clears every slot) and the rules again to every switch.  The
    timeout per call is a safety bound, not a deadline: between runs 80 switches load a
    pipeline side by side, and on 2 busy cores one took more than 10 s (a 70-worker
    campaign at load 40)."""
    from controller.dataplane.deploy import DeployError, deploy

    try:
        deploy(rules or net.rules, net.addresses, p4info, config, timeout=timeout)
    except DeployError as exc:
        raise ExperimentError(f"pushing the pipeline between runs: {exc}") from None


# ------------------------------------------------------------------ one run


@dataclass
class _Context:
    run: Run
    s: CampaignSettings
    graph: nx.Graph
    plan: Plan
    workers: list[str]
    jobs: list
    n_values: int
    n_chunks: int


def _worker_rounds(out_dir: Path, n: int) -> int:
    """Rounds every worker finished, from their reports (0 when a report is missing)."""
    done = []
    for i in range(n):
        f = out_dir / f"worker{i}.json"
        try:
            done.append(len(json.loads(f.read_text())["rounds"]))
        except (OSError, ValueError, KeyError):
            return 0
    return min(done) if done else 0


def _one_run(ctx: _Context, net: Any, monitor: Any, fault: Fault, mode: str, seed: int,
             run_dir: Path) -> dict:
    from controller.experiment.methods.ina.method import (
        JOB_IDS,
        job_config,
        run_mode,
        schedules_for,
    )
    from workers.common.model import TrainConfig

    s, hosts, workers = ctx.s, net.hosts, ctx.workers
    train = TrainConfig(model=s.model, hidden=s.hidden, n_workers=len(workers),
                        rounds=s.rounds, seed=seed)
    monitor.follow(run_dir / "control.json" if mode == "ina" else None,
                   lambda p: schedules_for("ina", p, workers, ctx.n_chunks),
                   job_id=JOB_IDS[mode])
    cfg = job_config(s, job_id=JOB_IDS[mode], mode=mode, plan=monitor.plan, workers=workers,
                     ps=s.ps, hosts=hosts, train=train, n_values=ctx.n_values,
                     out_dir=run_dir, members=False)
    error = None
    record: dict | None = None
    try:
        record = run_mode(ctx.run, net.mininet, mode, cfg, workers, s.ps, monitor)
    except ExperimentError as exc:
        error = str(exc)
    finally:
        progress = ctx.run.progress
        if progress is not None:  # one bar per run would pile up: drop finished ones
            for task in list(progress.tasks):
                progress.remove_task(task.id)
    out: dict[str, Any] = {"fault": fault.to_json(), "fault_label": fault.label, "mode": mode,
                           "seed": seed, "dir": str(run_dir)}
    if record is None:
        out.update(exact=False, rounds_completed=_worker_rounds(run_dir, len(workers)),
                   time_per_round_s=None, retransmissions=None, error=error)
        return out
    rounds = record["rounds"]
    out.update(exact=all(r["exact"] for r in rounds), rounds_completed=len(rounds),
               time_per_round_s=statistics.fmean(r["time_s"] for r in rounds),
               retransmissions=sum(r["retransmissions"] for r in rounds),
               ps_rx_bytes_per_round=rounds[0]["ps_rx_bytes"],
               failover=record.get("failover", []), ps=record.get("ps"))
    return out


def _counted_run(ctx: _Context, net: Any, monitor: Any, fault: Fault, mode: str, seed: int,
                 run_dir: Path) -> dict:
    """:func:`_one_run` with the switch counters it moved (read after the pipeline push,
    which zeroes them, and after the run)."""
    before, unread = _read_counters(net, monitor.p4info)
    r = _one_run(ctx, net, monitor, fault, mode, seed, run_dir)
    after, unread_after = _read_counters(net, monitor.p4info)
    r.update(run_counters(before, after, {**unread, **unread_after}))
    return r


def _simulated_run(ctx: _Context, fault: Fault, mode: str, seed: int, run_dir: Path) -> dict:
    """One run of the campaign in the simulated network (``--network simulated``): the same
    plan, rules, ina.p4 and protocol in virtual time (docs/simulate.md), the fault as
    ``run``'s options (``--loss``/``--dup``/``--reorder`` on every port, the slot count,
    ``--fail-switch``), the workers' gradients seeded int32 vectors (no training); every
    sum checked as on Mininet.  The record has :func:`_one_run`'s keys and the impairment
    counters instead of the switch counters."""
    from controller.experiment.simulate.run import SimOptions, simulate

    s = ctx.s
    rate = {fault.what: fault.rate} if fault.what in ("loss", "dup", "reorder") else {}
    ina_s = Settings(topo=s.topo, ps=s.ps, workers=s.workers, budget=s.budget, bw=s.bw,
                     seed=seed, model=s.model, hidden=s.hidden, rounds=s.rounds,
                     modes=(mode,), window=s.window, timeout=s.timeout,
                     round_timeout=s.round_timeout,
                     fail_switch=(f"{fault.switch}@{fault.round}" if fault.what == "kill"
                                  else None), **rate)  # type: ignore[arg-type]
    out: dict[str, Any] = {"fault": fault.to_json(), "fault_label": fault.label, "mode": mode,
                           "seed": seed, "dir": str(run_dir)}
    try:
        doc, _ = simulate(ina_s, SimOptions(train=False, reference=False), run_dir,
                          run_dir.name, graph=ctx.graph, plan=ctx.plan)
    except ExperimentError as exc:
        out.update(exact=False, rounds_completed=_worker_rounds(run_dir / mode,
                                                               len(ctx.workers)),
                   time_per_round_s=None, retransmissions=None, error=str(exc))
        return out
    rec = doc["modes"][mode]
    rounds = rec["rounds"]
    out.update(exact=all(r["exact"] for r in rounds) and len(rounds) == s.rounds,
               rounds_completed=len(rounds),
               time_per_round_s=statistics.fmean(r["time_s"] for r in rounds),
               retransmissions=sum(r["retransmissions"] for r in rounds),
               ps_rx_bytes_per_round=rounds[0]["ps_rx_bytes"],
               failover=rec.get("failover", []), collisions=rec.get("collisions"),
               impairment=rec.get("sim", {}).get("impairment", {}))
    return out


# ------------------------------------------------------------------ the campaign


def _settings_line(s: CampaignSettings, plan: Plan) -> str:
    bw = f"{s.bw:g} Mbit/s" if s.bw else "unshaped"
    return (f"{s.topo}, PS {s.ps}, {len(plan.job.workers)} workers, budget {s.budget} "
            f"(deployed {', '.join(plan.deployed) or '—'}), {bw}, {s.rounds} rounds/run, "
            f"{s.seeds} seeds, {s.model}, window {s.window}, timeout {s.timeout:g} s, "
            f"{s.target}")


def _drops_line(drops: dict[str, int]) -> str:
    moved = [f"{n.removeprefix('dropped_')} {v}" for n, v in drops.items() if v]
    return f"; dropped: {', '.join(moved)}" if moved else ""


def run_campaign(s: CampaignSettings, console: Any = None,
                 argv: Sequence[str] | None = None) -> dict:
    """The whole campaign; returns the campaign.json document (also on disk)."""
    from controller.dataplane.deploy import SwitchJob
    from controller.experiment.failover import SwitchMonitor
    from controller.experiment.methods.ina.method import JOB_IDS, Settings, plan_job
    from topo.models import parse_topology
    from workers.common.model import Replica, TrainConfig
    from workers.ina.constants import K, num_slots, set_num_slots
    from workers.ina.job import MODES
    from workers.ina.worker import n_chunks_for

    t_start = time.perf_counter()
    from topo.mininet_switch import TARGETS

    simulated = s.network == "simulated"
    if s.network not in ("mininet", "simulated"):
        raise ExperimentError(f"--network: expected mininet or simulated, got {s.network!r}")
    if not simulated and (s.target not in TARGETS or not TARGETS[s.target].impairments):
        raise ExperimentError(f"campaign: impairments need a target that injects them "
                              f"(--target pyswitch), not {s.target}")
    for m in s.modes:
        if m not in MODES:
            raise ExperimentError(f"--modes: unknown mode {m!r} (expected {', '.join(MODES)})")
    if s.seeds < 1 or s.rounds < 1:
        raise ExperimentError("--seeds and --rounds must be >= 1")
    for r in (*s.loss_rates, s.dup_rate, s.reorder_rate):
        if not 0 <= r < 1:
            raise ExperimentError(f"rates must be in [0, 1), got {r}")
    faults = expand_faults(s)
    if not simulated:
        check_environment(s.target)
    run = Run("campaign", s.out,
              s.name or claim_name(Path(s.out), time.strftime("campaign-%Y%m%d-%H%M%S")).name,
              seed=s.seed, console=console, argv=argv)
    console = run.console
    out_dir = run.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    default_slots = os.environ.get("INSYNC_INA_NUM_SLOTS")
    graph = nx.Graph(parse_topology(s.topo))
    if s.bw is not None:
        nx.set_edge_attributes(graph, float(s.bw), "bw")
    graph = nx.freeze(graph)
    ina_s = Settings(topo=s.topo, ps=s.ps, workers=s.workers, budget=s.budget, bw=s.bw,
                     seed=s.seed, model=s.model, hidden=s.hidden)
    plan = plan_job(ina_s, graph, out_dir, console)
    workers = list(plan.job.workers)
    n_values = Replica(TrainConfig(model=s.model, hidden=s.hidden, n_workers=len(workers)),
                       0).params.size
    jobs = [SwitchJob(JOB_IDS[m], tuple(workers), tree=tree_for(m, plan, workers))
            for m in s.modes]  # a job of more than 64 workers: hierarchical
    ctx = _Context(run, s, graph, plan, workers, jobs, n_values, n_chunks_for(n_values, K))
    seeds = [s.seed + i for i in range(s.seeds)]
    todo = plan_runs(faults, s.modes, seeds)
    runs: list[dict] = []
    networks: list[dict] = []
    settings = {**asdict(s), "num_slots_default": num_slots(),
                "plan": {"gamma": plan.job.gamma, "deployed": plan.deployed,
                         "ps_tor": plan.job.ps_tor, "workers": plan.job.workers}}
    line = _settings_line(s, plan)

    def write(complete: bool) -> dict:
        doc = {"campaign": run.name, "settings": settings, "settings_line": line,
               "networks": networks, "runs": runs, "table": summarize_runs(runs),
               "total_s": round(time.perf_counter() - t_start, 1), "complete": complete,
               "provenance": run.provenance}
        write_json_atomic(out_dir / "campaign.json", doc)
        return doc

    def say_run(i: int, r: dict) -> None:
        t = r["time_per_round_s"]
        console.print(
            f"[{i}/{len(todo)}] {r['fault_label']:>14} {r['mode']:>7} seed {r['seed']}: "
            + ("[green]exact[/]" if r["exact"] else "[red]NOT exact[/]")
            + f", {r['rounds_completed']}/{s.rounds} rounds"
            + (f", {t:.3f} s/round, {r['retransmissions']} retx" if t is not None else "")
            + (f" — {r['error']}" if r.get("error") else "")
            + _drops_line(r.get("drops", {}))
            + f"  ({time.perf_counter() - t_start:.0f} s)")

    console.print(f"[bold]campaign[/] {run.name}: {len(todo)} runs ({len(faults)} faults × "
                  f"{len(seeds)} seeds × {len(s.modes)} modes); {line}")
    shared = [(f, m, sd) for f, m, sd in todo if f.what != "kill"]
    kills = [(f, m, sd) for f, m, sd in todo if f.what == "kill"]
    i = 0
    if simulated:  # every run its own network in virtual time: no reuse, no counters
        shared, kills = [], []
        for fault, mode, seed in todo:
            i += 1
            if fault.what == "kill":
                switch, rnd = kill_choice(plan, graph, s.rounds, seed)
                fault = replace(fault, switch=switch, round=rnd)
            set_num_slots(fault.slots if fault.what == "slots" else
                          int(default_slots) if default_slots else None)
            try:
                r = _simulated_run(ctx, fault, mode, seed, out_dir / "runs" / (
                    f"{fault.label.replace(' ', '-')}-{mode}-seed{seed}"))
            finally:
                set_num_slots(int(default_slots) if default_slots else None)
            runs.append(r)
            say_run(i, r)
            write(False)
    try:
        with run.progress_bars():
            if shared:
                t0 = time.perf_counter()
                with deployed_network(run, s, graph, plan, jobs, control_sockets=True,
                                      build=out_dir / "build", impair=False) as net:
                    networks.append({"serves": "every fault but kill", "runs": len(shared),
                                     "deploy_s": round(net.info["deploy_s"], 2),
                                     "start_s": round(time.perf_counter() - t0, 1)})
                    monitor = SwitchMonitor(net.mininet, graph, plan, net.rules, jobs,
                                            net.hosts, net.p4info, say=console.print)
                    small: tuple[Path, Path, dict] | None = None
                    for fault, mode, seed in shared:
                        i += 1
                        if fault.what == "slots":
                            # the one override path: compile step and host processes
                            set_num_slots(fault.slots)
                            if small is None:
                                small = (*compile_program(s.target,
                                                          out_dir / f"build-slots{fault.slots}"),
                                         _rules(net, graph, plan, jobs))
                            _push(net, *small)
                            monitor.p4info, monitor.rules = small[0], dict(small[2])
                        else:
                            set_num_slots(int(default_slots) if default_slots else None)
                            _push(net, net.p4info, net.device_config)
                            monitor.p4info, monitor.rules = net.p4info, dict(net.rules)
                        _set_impairment(net, fault.impairment(seed))
                        run_dir = out_dir / "runs" / f"{fault.label.replace(' ', '-')}" \
                            f"-{mode}-seed{seed}"
                        r = _counted_run(ctx, net, monitor, fault, mode, seed, run_dir)
                        _set_impairment(net, Fault("loss", rate=0.0).impairment(seed))
                        runs.append(r)
                        say_run(i, r)
                        write(False)
            set_num_slots(int(default_slots) if default_slots else None)
            for fault, mode, seed in kills:
                i += 1
                switch, rnd = kill_choice(plan, graph, s.rounds, seed)
                f = replace(fault, switch=switch, round=rnd)
                t0 = time.perf_counter()
                with deployed_network(run, s, graph, plan, jobs, control_sockets=True,
                                      build=out_dir / "build", impair=False,
                                      kills=True) as net:
                    networks.append({"serves": f"{f.label} {mode} seed {seed}", "runs": 1,
                                     "deploy_s": round(net.info["deploy_s"], 2),
                                     "start_s": round(time.perf_counter() - t0, 1)})
                    monitor = SwitchMonitor(net.mininet, graph, plan, net.rules, jobs,
                                            net.hosts, net.p4info, say=console.print,
                                            fail=(switch, rnd))
                    run_dir = out_dir / "runs" / f"kill-{switch}@{rnd}-{mode}-seed{seed}"
                    r = _counted_run(ctx, net, monitor, f, mode, seed, run_dir)
                runs.append(r)
                say_run(i, r)
                write(False)
    finally:
        set_num_slots(int(default_slots) if default_slots else None)
    doc = write(True)
    rows = doc["table"]
    drops = drops_markdown(rows)
    (out_dir / "table.md").write_text(f"{line}\n\n" + table_markdown(rows)
                                      + (f"\n{drops}" if drops else ""))
    plot = plot_campaign(rows, out_dir / "campaign.png", line)
    print_campaign_table(rows, console, f"campaign {run.name}: {line}")
    total = time.perf_counter() - t_start
    console.print(f"{len(runs)} runs, {sum(r['exact'] for r in runs)} exact, "
                  f"{len(networks)} networks; total time {total:.0f} s "
                  f"({total / 60:.1f} min); wrote {out_dir / 'campaign.json'}"
                  + (f", {plot}" if plot else "") + f", {out_dir / 'table.md'}")
    return doc


# ------------------------------------------------------------------ command line


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_campaign_parser(sub: Any, add_subcommand: Any) -> None:
    d = CampaignSettings()
    p = add_subcommand(sub, "campaign", cmd_campaign,
                       "fault campaign: loss/dup/reorder/small slot pool/switch kill × seeds, "
                       "INA vs PS-only (root; Mininet, or --network simulated)")
    p.add_argument("--topo", default=d.topo)
    p.add_argument("--ps", default=d.ps)
    p.add_argument("--workers", default=d.workers)
    p.add_argument("--budget", type=int, default=d.budget)
    p.add_argument("--bw", type=float, default=d.bw, help="Mbit/s per link (0 = unshaped)")
    p.add_argument("--rounds", type=int, default=d.rounds, help="rounds per run (default 10)")
    p.add_argument("--seeds", type=int, default=d.seeds, help="seeds per fault (default 3)")
    p.add_argument("--seed", type=int, default=d.seed, help="first seed")
    p.add_argument("--faults", type=_names, default=d.faults,
                   help=f"comma list of {', '.join(FAULT_KINDS)} (default all)")
    p.add_argument("--loss-rates", type=_floats, default=d.loss_rates,
                   help="loss probabilities of the loss sweep (default 0,0.01,0.02,0.05,0.1)")
    p.add_argument("--dup-rate", type=float, default=d.dup_rate)
    p.add_argument("--reorder-rate", type=float, default=d.reorder_rate)
    p.add_argument("--small-slots", type=int, default=d.small_slots,
                   help="slot count of the slots fault (-D INA_NUM_SLOTS=N)")
    p.add_argument("--modes", type=_names, default=d.modes)
    p.add_argument("--model", choices=["mlp", "logreg"], default=d.model)
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--window", type=int, default=d.window)
    p.add_argument("--timeout", type=float, default=d.timeout)
    p.add_argument("--round-timeout", type=float, default=d.round_timeout)
    p.add_argument("--network", choices=["mininet", "simulated"], default=d.network,
                   help="mininet (root; default), or simulated: every run in virtual time "
                        "(docs/simulate.md; gradients seeded, not trained)")
    p.add_argument("--out", default=d.out)
    p.add_argument("--name", default="")


def cmd_campaign(args: argparse.Namespace) -> int:
    from workers.ina.constants import ConstantsError, check_num_slots

    try:
        check_num_slots(args.small_slots, "--small-slots")
    except ConstantsError as exc:
        raise ExperimentError(str(exc)) from None
    s = CampaignSettings(topo=args.topo, ps=args.ps, workers=args.workers, budget=args.budget,
                         bw=args.bw or None, rounds=args.rounds, seeds=args.seeds,
                         seed=args.seed, faults=args.faults, loss_rates=args.loss_rates,
                         dup_rate=args.dup_rate, reorder_rate=args.reorder_rate,
                         small_slots=args.small_slots, modes=args.modes, model=args.model,
                         hidden=args.hidden, window=args.window, timeout=args.timeout,
                         round_timeout=args.round_timeout, network=args.network,
                         out=args.out, name=args.name)
    run_campaign(s, argv=getattr(args, "command_line", None))
    return 0
