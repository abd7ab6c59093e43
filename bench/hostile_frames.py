"""Hostile input over real ports while an honest INA job trains (issue 20 item 3;
docs/design.md §9, docs/protocol.md §4 and §8).

On a Mininet network of pyswitch switches (default: the ``make run`` network, fat-tree k=4,
PS h0, workers h1-h6, budget 2, 1 Mbit/s links) an honest INA job trains while

* **the network attacker** — a host that is neither a worker nor the PS (default: the first
  spare host that shares a ToR with a worker, h7 next to h6 on edge3) — writes ``--frames``
  hostile Ethernet frames on an AF_PACKET socket in its own namespace: truncated,
  oversized (trailing bytes or inflated length fields, up to the 1,514 bytes its link carries;
  a few jumbo frames the sender's kernel refuses), bit-flipped and random frames, and
  well-formed INA frames that lie (a real member's worker id and addresses from the wrong
  port, worker ids outside the job, a foreign job id, a wrong fan-in, RESULT and PARTIAL
  from a host port, rounds far in the future or past).  Paced below its link's rate.
* **the host-side injector** sends ``--host-frames`` datagrams from inside the PS's and one
  worker's namespace to that node's own INA socket (loopback, past the switches): what a
  local process could send.  The ToR drops every hostile INA frame from a non-member port
  (the trust boundary, docs/protocol.md §8), so this is the only way hostile bytes reach the
  PS and workers.  Only datagrams they must refuse are sent (bad fields, rounds they will never
  or no longer run); a valid contribution from a member's own host cannot be told from an
  honest one by design, and is not sent.

**Honest jobs** of ``--rounds`` rounds (the ``make run`` job: mlp, 6 workers) follow one
another until every hostile frame is out; both senders pause between jobs (a gate opens at a
job's start file and closes at its last round, for the host-side injector four rounds
earlier, so that every datagram is read by the node it was sent to).  Before each job the pipeline is pushed again, as the campaign does
(fresh slots and counters); the counters are read before and after each job and summed.

Checked and reported: every round exact; every switch, the PS and the workers alive and done
(no failover, no pyswitch processing errors, round times against a clean baseline run); at
the attacker's ToR the sum of the drop counters' increase (P4Runtime) equals the frames that
entered its attacker port (pyswitch's port counter) minus those it forwarded, counted by
sniffers on every link out of that ToR (hostile frames carry a DSCP marker no honest frame
has); per reason, the counters equal what ina.p4 run in-process with the ToR's own rules
predicts for each frame; the PS's and the worker's discard counters equal the injector's
predictions (exact where honest traffic cannot add, at least where it can).

    python bench/hostile_frames.py [--frames 10000] [--host-frames 1000] [--attacker h7]
        [--topo fattree:4 --ps h0 --workers 6 --budget 2 --bw 1] [--rounds 30]

Root (Mininet).  Prints the settings and a summary table, writes
``results/<name>/hostile.json``; exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
from hostile_input import (  # noqa: E402
    MARK_TOS,
    MAX_FRAME,
    Attacker,
    Context,
    Gate,
    Injector,
    Sniffers,
    ending_counters,
    make_frames,
    netns_socket,
    predict,
    tor_model,
)

from controller.experiment.methods.ina.core import Settings  # noqa: E402
from controller.plan.types import Plan  # noqa: E402
from workers.ina.constants import K  # noqa: E402


@dataclass
class HostileSettings:
    topo: str = Settings.topo  # the `make run` network: one default, ina.core's
    ps: str = Settings.ps
    workers: str = Settings.workers
    budget: int = Settings.budget
    bw: float | None = 1.0  # Mbit/s per link (None: unshaped)
    model: str = "mlp"
    hidden: int = 32
    window: int = 16
    timeout: float = 0.3
    frames: int = 10_000  # network attacker
    host_frames: int = 1_000  # per target (the PS, one worker)
    attacker: str | None = None
    link_share: float = 0.9  # of the attacker's shaped link
    max_fps: float = 1_000.0  # unshaped links
    rounds: int = 30  # per job; jobs follow one another until the attack is over
    max_jobs: int = 20
    time_budget_s: float = 420.0  # no new job after this (one Mininet lock: ~10 min)
    baseline_rounds: int = 10  # clean run first (0: none)
    round_timeout: float = 60.0
    target: str = "pyswitch"  # deployed_network's switches (impairment-free here)
    seed: int = 0
    out: str = "results"
    name: str = ""



# ------------------------------------------------------------------ the bench


def choose_attacker(net_plan: Any, ps: str, workers: list[str], wanted: str | None) -> str:
    """``wanted``, else the first spare host on a worker's ToR, else the first spare host."""
    busy = {ps, *workers}
    if wanted is not None:
        if wanted not in net_plan.hosts or wanted in busy:
            raise SystemExit(f"error: --attacker {wanted}: not a host outside the job "
                             f"(PS {ps}, workers {', '.join(workers)})")
        return wanted
    spare = [h for h in net_plan.hosts if h not in busy]
    if not spare:
        raise SystemExit("error: every host is the PS or a worker: no attacker host left")
    tors = {net_plan.hosts[w].neighbours[0] for w in workers}
    return next((h for h in spare if net_plan.hosts[h].neighbours[0] in tors), spare[0])


def _control(net: Any, sw: str) -> dict[str, Any] | None:
    from pyswitch.daemon import control_request

    proc = net.mininet.net.get(sw).proc
    if proc is None or proc.poll() is not None:
        return None
    try:
        return control_request(net.sockets[sw], {"op": "counters"})
    except OSError:
        return None


def switch_health(net: Any) -> dict[str, dict[str, Any]]:
    """Per switch: process alive, and pyswitch's own error counters (control socket)."""
    out = {}
    for sw in net.sockets:
        c = _control(net, sw)
        st = (c or {}).get("switch", {})
        out[sw] = {"alive": c is not None, "processed": st.get("processed"),
                   "process_errors": st.get("process_errors"),
                   "loop_errors": st.get("loop_errors"), "ports": (c or {}).get("ports", {})}
    return out


def _job(s: HostileSettings, net: Any, plan: Plan, workers: list[str], rounds: int,
         n_values: int, mode_dir: Path, monitor: Any) -> Any:
    from controller.experiment.methods.ina.method import JOB_IDS, job_config, schedules_for
    from workers.common.model import TrainConfig
    from workers.ina.worker import n_chunks_for

    n_chunks = n_chunks_for(n_values, K)
    monitor.follow(mode_dir / "control.json",
                   lambda p: schedules_for("ina", p, workers, n_chunks))
    train = TrainConfig(model=s.model, hidden=s.hidden, n_workers=len(workers), rounds=rounds,
                        seed=s.seed)
    return job_config(s, job_id=JOB_IDS["ina"], mode="ina", plan=monitor.plan,
                      workers=workers, ps=s.ps, hosts=net.hosts, train=train,
                      n_values=n_values, out_dir=mode_dir, members=False)


def _run_job(run: Any, net: Any, cfg: Any, workers: list[str], ps: str,
             monitor: Any) -> tuple[dict | None, str | None]:
    from controller.errors import ExperimentError
    from controller.experiment.methods.ina.method import run_mode

    try:
        return run_mode(run, net.mininet, "ina", cfg, workers, ps, monitor), None
    except ExperimentError as exc:  # a failed job is a finding, not the end of the bench
        return None, str(exc)


def _job_figures(records: list[dict | None], rounds: int) -> dict[str, Any]:
    """One or several jobs of ``rounds`` rounds: rounds completed, exactness, round times
    (median, max), retransmissions, the last job's final accuracy."""
    rs = [r for rec in records if rec is not None for r in rec["rounds"]]
    times = [r["time_s"] for r in rs]
    # a job's first round also pays for the processes' and switches' warm-up
    warm = [r["time_s"] for rec in records if rec is not None for r in rec["rounds"][1:]]
    done = [rec for rec in records if rec is not None]
    return {"jobs": len(records), "rounds": rounds * len(records), "rounds_completed": len(rs),
            "exact_all_rounds": bool(rs) and all(r["exact"] for r in rs),
            "inexact_rounds": sum(not r["exact"] for r in rs),
            "time_per_round_s": float(np.median(times)) if times else None,
            "max_round_s": max(times) if times else None,
            "time_per_round_s_after_round0": float(np.median(warm)) if warm else None,
            "retransmissions": sum(r["retransmissions"] for r in rs),
            "accuracy": done[-1]["rounds"][-1]["accuracy"] if done and done[-1]["rounds"]
            else None}


def measured_discards(dirs: list[Path], bits: dict[str, int]) -> dict[str, dict[str, int]]:
    """What the PS (ps.json) and the workers (worker<I>.json, summed over rounds) counted as
    discarded, in the injector's outcome names, summed over the jobs in ``dirs``."""
    out: dict[str, Counter[str]] = {"ps": Counter(), **{n: Counter() for n in bits}}
    for d in dirs:
        try:
            ps = json.loads((d / "ps.json").read_text())
            st = ps["stats"]
            out["ps"].update({"malformed_datagrams": ps.get("malformed_datagrams", 0),
                              **{f"malformed:{k}": v for k, v in
                                 st["malformed_reasons"].items()},
                              "future_round": st["future_round"],
                              "stale_round": st["stale_round"], "late": st["late"]})
        except (OSError, ValueError, KeyError):
            pass
        for name, bit in bits.items():
            try:
                rs = json.loads((d / f"worker{bit}.json").read_text())["rounds"]
            except (OSError, ValueError, KeyError):
                continue
            out[name].update({k: sum(r.get(k, 0) for r in rs) for k in
                              ("malformed", "stale_results", "unexpected_results",
                               "dup_results")})
    return {n: dict(c) for n, c in out.items()}


# honest traffic cannot move these (exact); stale rounds and results it can (at least)
EXACT_OUTCOMES = ("malformed_datagrams", "future_round", "malformed")


def compare_discards(expected: dict[str, int], measured: dict[str, int]) -> tuple[bool, dict]:
    rows, ok = {}, True
    for k in sorted(set(expected) | {m for m in measured if m.startswith("malformed")}):
        e, m = expected.get(k, 0), measured.get(k, 0)
        exact = k in EXACT_OUTCOMES or k.startswith("malformed:")
        good = m == e if exact else m >= e
        rows[k] = {"expected": e, "measured": m, "rule": "==" if exact else ">=", "ok": good}
        ok &= good and k != "accepted"
    return ok, rows


def run_bench(s: HostileSettings, console: Any = None,
              argv: list[str] | None = None) -> dict[str, Any]:
    """The whole bench (module docstring); returns the hostile.json document."""
    import networkx as nx

    from controller.dataplane.deploy import SwitchJob, deploy
    from controller.dataplane.drop_counters import counter_delta, read_snapshot
    from controller.experiment.failover import SwitchMonitor
    from controller.experiment.methods.ina.core import deployed_network
    from controller.experiment.methods.ina.method import JOB_IDS, Settings, plan_job
    from controller.experiment.runner import Run
    from controller.files import write_json_atomic
    from topo.models import parse_topology
    from workers.common.model import Replica, TrainConfig
    from workers.ina.worker import n_chunks_for

    t_start = time.perf_counter()
    run = Run("hostile", s.out, s.name or time.strftime("hostile-%Y%m%d-%H%M%S"),
              seed=s.seed, console=console, argv=argv)
    console, out_dir = run.console, run.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = nx.Graph(parse_topology(s.topo))
    if s.bw:
        nx.set_edge_attributes(graph, float(s.bw), "bw")
    graph = nx.freeze(graph)
    plan = plan_job(Settings(topo=s.topo, ps=s.ps, workers=s.workers, budget=s.budget,
                             bw=s.bw, seed=s.seed, model=s.model, hidden=s.hidden),
                    graph, out_dir, console)
    workers = list(plan.job.workers)
    n_values = Replica(TrainConfig(model=s.model, hidden=s.hidden, n_workers=len(workers)),
                       0).params.size
    n_chunks = n_chunks_for(n_values, K)
    # the PS-only job is deployed too (as ``run`` does): a foreign job the switches know
    jobs = [SwitchJob(JOB_IDS[m], tuple(workers)) for m in ("ina", "ps_only")]
    doc: dict[str, Any] = {"bench": "hostile_frames", "run": run.name}
    records: list[dict | None] = []
    errors: list[str] = []
    dirs: list[Path] = []
    delta: dict[str, dict[str, int]] = {}
    with run.progress_bars(), deployed_network(run, s, graph, plan, jobs,
                                               control_sockets=True, build=out_dir / "build",
                                               impair=False) as net:
        mn, hosts = net.mininet, net.hosts
        attacker = choose_attacker(mn.plan, s.ps, workers, s.attacker)
        tor = mn.plan.hosts[attacker].neighbours[0]
        port = mn.plan.ports[tor][attacker]
        near = [w for w in workers if mn.plan.hosts[w].neighbours[0] == tor]
        target_worker = near[0] if near else workers[-1]
        ctx = Context(attacker=hosts[attacker], ps=hosts[s.ps],
                      workers=[hosts[w] for w in workers],
                      neighbour=workers.index(near[0]) if near else -1,
                      job_id=JOB_IDS["ina"], foreign_jobs=(JOB_IDS["ps_only"], 0x0BAD),
                      agg_ids=(0, *(plan.switch_ids[x] for x in
                                    sorted({*plan.deployed, plan.job.ps_tor}))),
                      n_chunks=n_chunks, rounds=s.rounds,
                      host_ips=[hosts[h][0] for h in sorted(hosts)])
        monitor = SwitchMonitor(mn, graph, plan, net.rules, jobs, hosts, net.p4info,
                                say=console.print)
        addresses = net.addresses
        doc["settings"] = settings = {
            **asdict(s), "attacker": attacker, "tor": tor, "tor_port": port,
            "host_target_worker": target_worker, "workers_list": workers,
            "deployed": plan.deployed, "ps_tor": plan.job.ps_tor, "n_chunks": n_chunks,
            "mark_tos": MARK_TOS}
        # -- clean baseline: round times, and what honest traffic moves at the ToR
        if s.baseline_rounds:
            before, _ = read_snapshot({tor: addresses[tor]}, net.p4info)
            cfg = _job(s, net, plan, workers, s.baseline_rounds, n_values,
                       out_dir / "baseline", monitor)
            rec, err = _run_job(run, net, cfg, workers, s.ps, monitor)
            after, _ = read_snapshot({tor: addresses[tor]}, net.p4info)
            doc["baseline"] = {**_job_figures([rec], s.baseline_rounds), "error": err,
                               "tor_counters": {k: v for k, v in counter_delta(
                                   before, after).get(tor, {}).items() if v}}
        # -- the frames and their predicted fate at the ToR, the pacing
        frames = make_frames(ctx, s.frames, random.Random(f"net-{s.seed}"))
        model = tor_model(net.device_config, net.rules[tor])
        fate = predict(model, port, frames, ending_counters(model))
        link = [len(d) for _, d in frames if len(d) <= MAX_FRAME]
        bytes_per_s = s.link_share * s.bw * 1e6 / 8 if s.bw else None
        attack_s = sum(link) / bytes_per_s if bytes_per_s else len(frames) / s.max_fps
        settings.update(attack_s_planned=round(attack_s, 1), bytes_per_s=bytes_per_s)
        console.print(f"[bold]hostile[/] attacker {attacker} on {tor} port {port}: "
                      f"{len(frames):,} frames over ~{attack_s:.0f} s of training; host-side "
                      f"{s.host_frames:,} datagrams each to the PS {s.ps} and worker "
                      f"{target_worker}; honest INA jobs of {s.rounds} rounds until done")
        pids = {h: mn.net.get(h).pid for h in hosts}
        taps: dict[str, tuple[int | None, str]] = {}
        for nb in mn.plan.ports[tor]:
            if nb in mn.plan.hosts:
                info = mn.plan.hosts[nb]
                taps[nb] = (pids[nb], info.interfaces[info.neighbours.index(tor)])
            else:
                taps[nb] = (None, f"{nb}-eth{mn.plan.ports[nb][tor]}")
        sniff = Sniffers(taps)
        raw = netns_socket(pids[attacker], socket.AF_PACKET, socket.SOCK_RAW, 0,
                           (mn.plan.hosts[attacker].interfaces[0], 0))
        udp = {t: (netns_socket(pids[h], socket.AF_INET, socket.SOCK_DGRAM), hosts[h][0],
                   workers.index(h) if h in workers else -1)
               for t, h in (("ps", s.ps), (target_worker, target_worker))}
        gate = Gate(monitor)
        attack = Attacker(raw, frames, gate, bytes_per_s, s.max_fps)
        inject = Injector(udp, ctx, s.host_frames, attack_s / max(1, s.host_frames), gate,
                          s.seed, n_values)
        health0 = switch_health(net)
        rx0 = health0[tor]["ports"].get(str(port), {}).get("rx_frames", 0)
        sniff.start()
        attack.start()
        inject.start()
        # -- honest jobs while the attack lasts; fresh slots and counters before each
        t_attack = time.monotonic()
        while (attack.is_alive() or inject.is_alive()) and len(records) < s.max_jobs \
                and time.monotonic() - t_attack < s.time_budget_s:
            deploy(net.rules, addresses, net.p4info, net.device_config)
            mode_dir = out_dir / "attacked" / f"job{len(records)}"
            cfg = _job(s, net, plan, workers, s.rounds, n_values, mode_dir, monitor)
            snap0, _ = read_snapshot(addresses, net.p4info)
            gate.open(Path(cfg.start_file), s.rounds)
            rec, err = _run_job(run, net, cfg, workers, s.ps, monitor)
            gate.close()
            sent_now = sum(1 for ok in attack.sent if ok)
            deadline = time.monotonic() + 15  # the attacker's qdisc drains at its link rate
            while _rx(net, tor, port) - rx0 < sent_now and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(0.5)
            snap1, unread = read_snapshot(addresses, net.p4info)
            for sw, d in counter_delta(snap0, snap1).items():
                for n, v in d.items():
                    delta.setdefault(sw, {})[n] = delta.get(sw, {}).get(n, 0) + v
            records.append(rec)
            dirs.append(mode_dir)
            errors += [e for e in (err, *(f"{k}: {v}" for k, v in unread.items())) if e]
            done = _job_figures([rec], s.rounds)["rounds_completed"]
            console.print(f"job {len(records)}: {done}/{s.rounds} rounds; "
                          f"{sent_now:,}/{len(frames):,} frames sent")
        gate.finished.set()
        attack.join(5)
        inject.join(5)
        rx = _rx(net, tor, port) - rx0
        time.sleep(0.5)
        sniff.close()
        raw.close()
        for sock, _, _ in udp.values():
            sock.close()
        health1 = switch_health(net)
        failover = [asdict(e) for e in monitor.events]
    # -- the accounting
    sent = [i for i, ok in enumerate(attack.sent) if ok]
    short = {n: n.rsplit(".", 1)[-1] for d in delta.values() for n in d}
    tor_moved = {short[n]: v for n, v in delta.get(tor, {}).items()
                 if short[n].startswith("dropped_") or short[n] == "absorbed"}
    predicted = Counter(fate[i] for i in sent)
    per_kind: dict[str, dict[str, Any]] = {}
    for i, (kind, _) in enumerate(frames):
        row = per_kind.setdefault(kind, {"generated": 0, "sent": 0, "refused": 0,
                                         "fate": Counter()})
        row["generated"] += 1
        if attack.sent[i]:
            row["sent"] += 1
            row["fate"][fate[i]] += 1
        elif attack.sent[i] is False:
            row["refused"] += 1
    forwarded = sum(sniff.counts.values())
    drops_sum = sum(tor_moved.values())
    pred_drops = {k: v for k, v in predicted.items() if k != "forwarded"}
    host_measured = measured_discards(dirs, {target_worker: workers.index(target_worker)})
    host_rows, host_ok = {}, True
    for t in inject.expected:
        ok, rows = compare_discards(dict(inject.expected[t]), host_measured.get(t, {}))
        host_rows[t] = {"sent": dict(inject.sent[t]), "outcomes": rows, "ok": ok}
        host_ok &= ok
    job = _job_figures(records, s.rounds)
    err_delta = {sw: {k: (health1[sw][k] or 0) - (health0[sw][k] or 0)
                      for k in ("process_errors", "loop_errors")} for sw in health0}
    n_host = sum(sum(c.values()) for c in inject.sent.values())
    checks = {
        "every round exact": job["exact_all_rounds"],
        "every round of every job completed": job["rounds_completed"] == job["rounds"]
        and not errors,
        f">= {s.frames:,} frames into the ToR during training": len(sent) >= s.frames,
        f"{2 * s.host_frames:,} host-side datagrams during training":
            n_host == 2 * s.host_frames,
        "every switch alive, no failover": all(h["alive"] for h in health1.values())
        and not failover,
        "no pyswitch processing/loop error": all(not any(v.values())
                                                 for v in err_delta.values()),
        "every sent frame reached the ToR": rx == len(sent),
        "ToR: sum of drop counters = received - forwarded": drops_sum == rx - forwarded,
        "ToR: each drop counter = in-process prediction": tor_moved == {
            k: pred_drops.get(k, 0) for k in tor_moved} and set(pred_drops) <= set(tor_moved),
        "forwarded (sniffed) = predicted": forwarded == predicted.get("forwarded", 0),
        "PS and worker discards = predictions": host_ok,
    }
    doc.update({
        "attacked": {**job, "errors": errors},
        "network": {
            "frames": len(frames), "sent": len(sent), "refused_by_sender": sum(
                r["refused"] for r in per_kind.values()), "send_errors": dict(attack.errors),
            "attack_active_s": round(attack.active_s, 1),
            "per_kind": {k: {**r, "fate": dict(r["fate"])} for k, r in sorted(per_kind.items())},
            "tor_port_rx": rx, "forwarded_sniffed": dict(sniff.counts),
            "forwarded_predicted": predicted.get("forwarded", 0),
            "tor_drops_measured": tor_moved, "tor_drops_predicted": pred_drops,
            "tor_drops_sum": drops_sum,
            "other_switches_moved": {sw: {short[n]: v for n, v in d.items() if v}
                                     for sw, d in delta.items() if sw != tor}},
        "host": host_rows, "host_measured_all": host_measured,
        "host_errors": dict(inject.errors),
        "health": {"switch_errors_delta": err_delta, "failover": failover,
                   "switches_alive": sum(h["alive"] for h in health1.values()),
                   "switches": len(health1),
                   "ps_and_workers": "; ".join(errors) or "every process exited 0"},
        "checks": checks, "ok": all(checks.values()),
        "wall_s": round(time.perf_counter() - t_start, 1), "provenance": run.provenance})
    write_json_atomic(out_dir / "hostile.json", doc)
    print_summary(doc, console)
    console.print(f"wrote {out_dir / 'hostile.json'}; wall time {doc['wall_s']:.0f} s")
    return doc


def _rx(net: Any, tor: str, port: int) -> int:
    """Frames the ToR received on ``port`` (pyswitch's port counter, control socket)."""
    c = _control(net, tor)
    return (c or {}).get("ports", {}).get(str(port), {}).get("rx_frames", 0)


def print_summary(doc: dict[str, Any], console: Any) -> None:
    """Settings, frames per kind and their fate, the ToR's accounting, the hosts' discards,
    the job with and without the attack, and the checks."""
    from rich.table import Table

    from controller.experiment.report import print_table

    st, net = doc["settings"], doc["network"]
    console.print(
        f"settings: {st['topo']}, PS {st['ps']}, workers {', '.join(st['workers_list'])}, "
        f"budget {st['budget']} (deployed {', '.join(st['deployed']) or '-'}), "
        f"{st['bw'] or 'unshaped'} Mbit/s, {st['model']}, jobs of {st['rounds']} rounds, attacker "
        f"{st['attacker']} on {st['tor']} port {st['tor_port']}, {st['frames']:,} frames "
        f"(paced to {st['link_share']:.0%} of its link), {st['host_frames']:,} host-side "
        f"datagrams to the PS and to {st['host_target_worker']}, seed {st['seed']}")
    fates = sorted({f for r in net["per_kind"].values() for f in r["fate"]})
    t = Table(title="hostile frames from the attacker's port: fate of each sent frame "
                    "(ina.p4 in-process with the ToR's rules)")
    for col in ("kind", "generated", "sent", "refused", *fates):
        t.add_column(col.removeprefix("dropped_"), justify="left" if col == "kind" else "right")
    for kind, r in net["per_kind"].items():
        t.add_row(kind, f"{r['generated']:,}", f"{r['sent']:,}", f"{r['refused']:,}",
                  *(f"{r['fate'].get(f, 0):,}" for f in fates))
    print_table(console, t, 130)
    t = Table(title=f"ToR {st['tor']}: counters moved over the attacked run (P4Runtime)")
    for col in ("what", "predicted", "measured"):
        t.add_column(col, justify="left" if col == "what" else "right")
    meas, pred = net["tor_drops_measured"], net["tor_drops_predicted"]
    for k in sorted(set(meas) | set(pred)):
        t.add_row(k, f"{pred.get(k, 0):,}", f"{meas.get(k, 0):,}")
    t.add_row("frames sent / received on the attacker port", f"{net['sent']:,}",
              f"{net['tor_port_rx']:,}")
    t.add_row("forwarded (predicted / sniffed on its links)", f"{net['forwarded_predicted']:,}",
              f"{sum(net['forwarded_sniffed'].values()):,}")
    t.add_row("sum of drop counters / received - forwarded", f"{net['tor_drops_sum']:,}",
              f"{net['tor_port_rx'] - sum(net['forwarded_sniffed'].values()):,}")
    print_table(console, t, 130)
    t = Table(title="host-side datagrams (inside the node's namespace, to its own socket): "
                    "what the PS and the worker counted")
    for col in ("node", "sent", "outcome", "expected", "measured", "rule", "ok"):
        t.add_column(col, justify="left" if col in ("node", "outcome") else "right")
    for node, h in doc["host"].items():
        first = True
        for k, row in h["outcomes"].items():
            t.add_row(node if first else "", f"{sum(h['sent'].values()):,}" if first else "",
                      k, f"{row['expected']:,}", f"{row['measured']:,}", row["rule"],
                      "yes" if row["ok"] else "NO")
            first = False
    print_table(console, t, 130)
    t = Table(title="the honest job")
    for col in ("run", "rounds", "exact", "s/round (median)", "without round 0",
                "max round s", "retx", "accuracy"):
        t.add_column(col, justify="left" if col == "run" else "right")
    for name, j in (("clean baseline", doc.get("baseline")),
                    (f"under attack ({doc['attacked']['jobs']} jobs)", doc["attacked"])):
        if j:
            t.add_row(name, f"{j['rounds_completed']}/{j['rounds']}",
                      "yes" if j["exact_all_rounds"] else "NO",
                      *(f"{j.get(k) or 0:.3f}" for k in (
                          "time_per_round_s", "time_per_round_s_after_round0", "max_round_s")),
                      f"{j.get('retransmissions', 0):,}", f"{j.get('accuracy') or 0:.3f}")
    print_table(console, t, 130)
    for name, ok in doc["checks"].items():
        console.print(("[green]ok  [/] " if ok else "[red]FAIL[/] ") + name)


def main(argv: list[str] | None = None) -> int:
    d = HostileSettings()
    p = argparse.ArgumentParser(prog="python bench/hostile_frames.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--topo", default=d.topo)
    p.add_argument("--ps", default=d.ps)
    p.add_argument("--workers", default=d.workers)
    p.add_argument("--budget", type=int, default=d.budget)
    p.add_argument("--bw", type=float, default=d.bw, help="Mbit/s per link (0: unshaped)")
    p.add_argument("--model", choices=["mlp", "logreg"], default=d.model)
    p.add_argument("--frames", type=int, default=d.frames,
                   help="hostile frames from the attacker host (default 10,000)")
    p.add_argument("--host-frames", type=int, default=d.host_frames,
                   help="host-side datagrams to the PS and to one worker, each")
    p.add_argument("--attacker", default=None, help="host sending the frames (not in the job)")
    p.add_argument("--link-share", type=float, default=d.link_share)
    p.add_argument("--max-fps", type=float, default=d.max_fps, help="pace on unshaped links")
    p.add_argument("--rounds", type=int, default=d.rounds,
                   help="rounds per honest job (jobs follow one another until the attack ends)")
    p.add_argument("--baseline-rounds", type=int, default=d.baseline_rounds)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", default=d.out)
    p.add_argument("--name", default="")
    a = p.parse_args(argv)
    if a.frames < 1 or a.host_frames < 0 or a.rounds < 5 or not 0 < a.link_share <= 1:
        p.error("need --frames >= 1, --host-frames >= 0, --rounds >= 5, 0 < --link-share <= 1")
    s = HostileSettings(topo=a.topo, ps=a.ps, workers=a.workers, budget=a.budget,
                        bw=a.bw or None, model=a.model, frames=a.frames,
                        host_frames=a.host_frames, attacker=a.attacker,
                        link_share=a.link_share, max_fps=a.max_fps, rounds=a.rounds,
                        baseline_rounds=a.baseline_rounds, seed=a.seed, out=a.out,
                        name=a.name)
    doc = run_bench(s, argv=sys.argv if argv is None else ["hostile_frames.py", *argv])
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
