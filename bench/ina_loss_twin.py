"""A digital twin of the campaign's loss runs, for measuring INA recovery without Mininet.

``python bench/ina_loss_twin.py --loss 0,0.02,0.05,0.1 --seeds 3 --rounds 10`` (add
``--code REV`` to run the worker and PS state machines of another git revision, e.g. the
one before a change, on the same network: before/after figures from one command)

What is real: ``p4src/ina.p4`` on in-process pyswitch switches, configured with the very
rules the campaign deploys (:func:`controller.dataplane.deploy.switch_rules` for the ``make run`` plan:
fat-tree k=4, PS h0, 6 workers, budget 2, ports and addresses of
:func:`topo.mininet_net.plan_network`), and the worker and PS state machines
(:class:`workers.ina.worker.WorkerRound`, :class:`workers.ina.ps.PsState`) driven the way
``worker_node``/``ps_node`` drive them.  What is modelled, on a virtual clock: every link
direction is a FIFO served at 1 Mbit/s (TCLink's htb shaping; a 196-byte frame takes
1.57 ms at 1 Mbit/s), and pyswitch's impairment drops a frame with probability ``--loss``
when a switch receives it and again when it sends it (``dir=both`` on every port, as the
campaign sets it).  Processing time at switches and hosts is ``--proc-ms`` (default 0).

It reports, per loss rate and mode: seconds per round (max over workers, as the campaign
does), worker retransmissions per round, exactness, and the PS/switch counters that say
where the time went.  Figures are a model: compare with the campaign, not instead of it.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller.experiment.simulate.network import rule_value  # noqa: E402
from workers.ina.ps import PsState  # noqa: E402
from workers.ina.wire import FrameTemplate, InaPacket, decode_frame  # noqa: E402
from workers.ina.worker import RttEstimator, WorkerRound  # noqa: E402

FRAME_BITS = 196 * 8


@dataclass
class TwinConfig:
    loss: float = 0.0
    mode: str = "ina"  # "ina" | "ps_only"
    rounds: int = 10
    seed: int = 0
    window: int = 16
    timeout: float = 0.3  # the campaign's --timeout
    max_timeout: float = 1.0
    direct_after: int | None = 3
    bw_mbps: float = 1.0
    proc_s: float = 0.0
    compute_s: float = 0.005  # a worker's gradient between two rounds
    max_time: float = 3600.0
    worker_kwargs: dict[str, Any] = field(default_factory=dict)  # extra WorkerRound args
    code: str | None = None  # git revision whose worker.py/ps.py to run (None: this tree)


@dataclass
class TwinResult:
    exact: bool
    rounds_done: int
    round_s: list[float]  # per round: max over workers of its round time
    retransmits: int
    direct: int
    frames_lost: int
    ps: dict[str, Any]
    switch: dict[str, int]
    wall_s: float
    # (round, chunk) -> [first GRAD sent, PS completed, last worker got its RESULT]
    trace: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    ps_link_busy_s: float = 0.0  # transmission time on the link into the PS


@cache
def network() -> dict[str, Any]:
    """The campaign's network, plan and rules (computed once)."""
    import networkx as nx

    import pyswitch
    from controller.dataplane.deploy import SwitchJob, switch_rules
    from controller.experiment.methods.ina.method import JOB_IDS, Settings, plan_job, schedules_for
    from topo.mininet_net import plan_network
    from topo.models import parse_topology
    from workers.common.model import Replica, TrainConfig
    from workers.ina.constants import K
    from workers.ina.worker import n_chunks_for

    graph = nx.Graph(parse_topology("fattree:4"))
    nx.set_edge_attributes(graph, 1.0, "bw")
    graph = nx.freeze(graph)
    with tempfile.TemporaryDirectory() as tmp:
        plan = plan_job(Settings(), graph, Path(tmp))
    workers = list(plan.job.workers)
    netplan = plan_network(graph, 1.0)
    hosts = {h: (info.ips[0], info.macs[0]) for h, info in netplan.hosts.items()}
    jobs = [SwitchJob(JOB_IDS[m], tuple(workers)) for m in ("ina", "ps_only")]
    rules = switch_rules(graph, plan, netplan.ports, hosts, jobs)
    n_values = Replica(TrainConfig(model="mlp", hidden=32, n_workers=len(workers)), 0).params.size
    n_chunks = n_chunks_for(n_values, K)
    program = pyswitch.compile_p4(str(REPO / "p4src" / "ina.p4"))
    return {"graph": graph, "plan": plan, "workers": workers, "ports": netplan.ports,
            "hosts": hosts, "rules": rules, "program": program, "n_chunks": n_chunks,
            "job_ids": JOB_IDS, "k": K,
            "schedules": {m: schedules_for(m, plan, workers, n_chunks) for m in ("ina", "ps_only")}}


def build_switches(net: dict[str, Any]) -> dict[str, Any]:
    import pyswitch

    out = {}
    for name, r in net["rules"].items():
        sw = pyswitch.Switch(net["program"], device_id=0, seed=0)
        sw.set_default_action(r.default.table, r.default.action,
                              {k: rule_value(v) for k, v in r.default.params.items()})
        for e in r.entries:
            sw.insert_entry(e.table, {k: rule_value(v) for k, v in e.match.items()}, e.action,
                            {k: rule_value(v) for k, v in e.params.items()})
        for g, ports in r.mcast_groups.items():
            sw.set_multicast_group(g, [(p, 0) for p in ports])
        out[name] = sw
    return out


def run_twin(cfg: TwinConfig) -> TwinResult:
    net = network()
    rng = random.Random(cfg.seed)
    nrng = np.random.default_rng(cfg.seed)
    switches = build_switches(net)
    ports, hosts, workers = net["ports"], net["hosts"], net["workers"]
    peer: dict[tuple[str, int], tuple[str, int]] = {}
    for a, nbrs in ports.items():
        for b, pa in nbrs.items():
            peer[(a, pa)] = (b, ports[b][a])
    ps_host = net["plan"].job.ps
    job_id = net["job_ids"][cfg.mode]
    k, n_chunks = net["k"], net["n_chunks"]
    n = len(workers)
    sched = net["schedules"][cfg.mode]
    ps_ip, ps_mac = hosts[ps_host]
    tmpl = {w: FrameTemplate(hosts[h][1], ps_mac, hosts[h][0], ps_ip)
            for w, h in enumerate(workers)}
    dest_ip, dest_mac = hosts[workers[0]]  # the campaign's result_dests: worker 0's address
    ps_tmpl = FrameTemplate(ps_mac, dest_mac, ps_ip, dest_ip)
    bound = 2**31 // n
    grads = nrng.integers(-bound, bound, (cfg.rounds, n, n_chunks * k), dtype=np.int64)
    exact_sum = grads.sum(axis=1).astype(np.int32)
    grads = grads.astype(np.int32)

    heap: list[tuple[float, int, str, Any]] = []
    seq = 0
    free_at: dict[tuple[str, int], float] = {}
    tx_time = FRAME_BITS / (cfg.bw_mbps * 1e6)
    lost = 0

    def push(t: float, kind: str, arg: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, arg))

    def transmit(t: float, node: str, port: int, frame: bytes) -> None:
        nonlocal lost
        if node in switches and cfg.loss and rng.random() < cfg.loss:  # switch tx impairment
            lost += 1
            return
        nonlocal ps_busy
        if peer[(node, port)][0] == ps_host:
            ps_busy += tx_time
        start = max(t, free_at.get((node, port), 0.0))
        free_at[(node, port)] = start + tx_time
        push(start + tx_time, "arrive", (*peer[(node, port)], frame))

    worker_cls, ps_cls = state_machines(cfg.code)
    ps = ps_cls(job_id, range(n), n_chunks, k)
    machines: dict[int, Any] = {}
    min_rto = cfg.worker_kwargs.get("min_timeout", 0.01)
    estimators = [RttEstimator(cfg.timeout, min(min_rto, cfg.timeout), cfg.max_timeout)
                  for _ in range(n)]  # one per worker process, as worker_node keeps it
    round_of = [0] * n
    started_at = [0.0] * n
    round_times: dict[int, list[float]] = {}
    tick_at: dict[int, float] = {}
    retx = direct = 0
    exact = True
    finished = 0

    trace: dict[tuple[int, int], list[float]] = {}
    ps_busy = 0.0

    def host_send(t: float, w: int, pkts: list[InaPacket]) -> None:
        for p in pkts:
            trace.setdefault((p.round, p.chunk_id), [t, -1.0, -1.0])
            transmit(t + cfg.proc_s, workers[w], 0, tmpl[w].encode(p))

    def arm(w: int) -> None:
        d = machines[w].next_deadline()
        if d is not None and tick_at.get(w) != d:
            tick_at[w] = d
            push(d, "tick", w)

    def begin(t: float, w: int) -> None:
        r = round_of[w]
        shared = {"rtt": estimators[w]} if cfg.code is None else {}
        m = worker_cls(job_id=job_id, worker_id=w, round_=r, values=grads[r, w],
                       schedule=sched[str(w)], k=k, window=cfg.window, timeout=cfg.timeout,
                       max_timeout=cfg.max_timeout, direct_after=cfg.direct_after,
                       **shared, **cfg.worker_kwargs)
        machines[w] = m
        started_at[w] = t
        host_send(t, w, m.start(t))
        arm(w)

    def account(w: int, m: WorkerRound) -> None:
        nonlocal retx, direct
        retx += m.stats.retransmits
        direct += m.stats.direct

    for w in range(n):
        push(0.0, "begin", w)
    host_of = {h: i for i, h in enumerate(workers)}
    t = 0.0
    while heap and finished < n:
        t, _, kind, arg = heapq.heappop(heap)
        if t > cfg.max_time:
            break
        if kind == "begin":
            begin(t, arg)
        elif kind == "tick":
            if tick_at.get(arg) != t:
                continue
            del tick_at[arg]
            m = machines[arg]
            host_send(t, arg, m.tick(t))
            arm(arg)
        else:  # a frame arrives at (node, port)
            node, port, frame = arg
            if node in switches:
                if cfg.loss and rng.random() < cfg.loss:  # switch rx impairment
                    lost += 1
                    continue
                for eport, out in switches[node].process(port, frame):
                    transmit(t + cfg.proc_s, node, eport, out)
                continue
            pkt = decode_frame(frame)
            if pkt is None:
                continue
            if node == ps_host:
                for res in ps.on_packet(pkt, t).results:
                    if not res.flags:
                        trace[(res.round, res.chunk_id)][1] = t
                    transmit(t + cfg.proc_s, ps_host, 0,
                             ps_tmpl.encode(res))
                continue
            w = host_of[node]
            m = machines.get(w)
            if m is None or m.done:
                continue
            before = m.stats.results
            host_send(t, w, m.on_packet(pkt, t))
            if m.stats.results > before:
                tr = trace[(pkt.round, pkt.chunk_id)]
                tr[2] = max(tr[2], t)
            if not m.done:
                arm(w)
                continue
            r = m.round
            if not np.array_equal(m.result_values(), exact_sum[r]):
                exact = False
            round_times.setdefault(r, []).append(t - started_at[w])
            account(w, m)
            tick_at.pop(w, None)
            round_of[w] += 1
            if round_of[w] == cfg.rounds:
                finished += 1
            else:
                push(t + cfg.compute_s, "begin", w)
    for w, m in machines.items():
        if not m.done:
            account(w, m)
    done = min(round_of)
    counters = {}
    for name in ("collision", "bypassed", "flushed", "asked", "reemitted", "duplicate",
                 "evicted", "release"):
        counters[name] = sum(sw.counter_read(f"MyIngress.{name}", 0)[0]
                             for sw in switches.values())
    return TwinResult(exact=exact and done == cfg.rounds, rounds_done=done,
                      round_s=[max(round_times[r]) for r in range(done)],
                      retransmits=retx, direct=direct, frames_lost=lost,
                      ps=asdict(ps.stats), switch=counters, wall_s=t, trace=trace,
                      ps_link_busy_s=ps_busy)


@cache
def state_machines(code: str | None) -> tuple[Any, Any]:
    """(WorkerRound, PsState) of this tree, or of git revision ``code`` (to measure what a
    change did: e.g. ``--code HEAD`` before committing it)."""
    if code is None:
        return WorkerRound, PsState
    import importlib.util
    import subprocess

    out = []
    for name in ("worker", "ps"):
        text = subprocess.run(["git", "show", f"{code}:workers/ina/{name}.py"], check=True,
                              capture_output=True, text=True, cwd=REPO).stdout
        path = Path(tempfile.mkdtemp()) / f"twin_{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"twin_{name}_{code}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up there
        try:
            spec.loader.exec_module(mod)
        except ImportError as exc:  # it imports this tree's modules, whose API may differ
            raise SystemExit(f"--code {code}: its workers/ina/{name}.py does not run against "
                             f"this tree ({exc}); revisions before InaPacket moved to "
                             "workers/ina/wire.py (with msg_type) cannot be compared here") \
                from exc
        out.append(getattr(mod, "WorkerRound" if name == "worker" else "PsState"))
    return out[0], out[1]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loss", type=_floats, default=[0.0, 0.01, 0.02, 0.05, 0.1])
    p.add_argument("--modes", default="ina,ps_only")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--timeout", type=float, default=0.3)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--proc-ms", type=float, default=0.0)
    p.add_argument("--max-time", type=float, default=3600.0)
    p.add_argument("--code", metavar="REV", help="run the worker and PS state machines of "
                   "git revision REV instead of this tree's (before/after comparisons)")
    p.add_argument("--verbose", action="store_true", help="PS and switch counters per run")
    p.add_argument("--smoke", action="store_true",
                   help="one loss-free INA round, one seed (seconds; figures rough)")
    a = p.parse_args(argv)
    if a.smoke:
        a.loss, a.modes, a.seeds, a.rounds = [0.0], "ina", 1, 1
    print(f"{'loss':>5} {'mode':>7} {'exact':>5} {'s/round':>8} {'± std':>6} "
          f"{'retx/round':>10} {'direct/rd':>9} {'bench s':>7}")
    for loss in a.loss:
        for mode in a.modes.split(","):
            per_round, retx, direct, ok, t_bench = [], [], [], 0, 0.0
            for seed in range(a.seeds):
                t0 = time.perf_counter()
                res = run_twin(TwinConfig(loss=loss, mode=mode, rounds=a.rounds, seed=seed,
                                          timeout=a.timeout, window=a.window,
                                          proc_s=a.proc_ms / 1000, max_time=a.max_time,
                                          code=a.code))
                t_bench += time.perf_counter() - t0
                ok += res.exact
                if res.round_s:
                    per_round.append(statistics.fmean(res.round_s))
                retx.append(res.retransmits / max(1, res.rounds_done))
                direct.append(res.direct / max(1, res.rounds_done))
                if a.verbose:
                    print(f"   seed {seed}: rounds {res.rounds_done}, lost {res.frames_lost}, "
                          f"ps {_brief(res.ps)}, switches {res.switch}")
            sd = statistics.stdev(per_round) if len(per_round) > 1 else 0.0
            mean = statistics.fmean(per_round) if per_round else float("nan")
            print(f"{loss:5.2f} {mode:>7} {ok}/{a.seeds:<3} {mean:8.3f} {sd:6.3f} "
                  f"{statistics.fmean(retx):10.1f} {statistics.fmean(direct):9.1f} "
                  f"{t_bench:7.1f}", flush=True)
    return 0


def _brief(ps: dict[str, Any]) -> str:
    keys = ("packets", "fallbacks", "incomplete", "duplicates", "superseded", "overlaps",
            "late", "results_resent")
    return ", ".join(f"{k} {ps[k]}" for k in keys)


if __name__ == "__main__":
    sys.exit(main())
