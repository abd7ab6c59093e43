"""The simulated network as the INA engine deploys on and launches in
(``run --network simulated``, docs/simulate.md): :func:`deploy_simulated` installs the plan's
rules in in-process pyswitch switches, :meth:`SimDeployed.launch` runs one mode's hosts --
the PS and worker drivers ``ps_node`` and ``worker_node`` run (:mod:`workers.ina.driver`),
with the worker process's own app (:class:`workers.ina.worker_node.NodeApp`) writing its
files -- over :class:`SimHostIO` (each host's clock, port and timer in virtual time) on a
:class:`SimNetwork`.  The engine then reads the files and builds the records as for Mininet.

Each worker computes its gradient, synchronizes it (its round time is the time from its
first GRAD to its last RESULT, as ``worker_node`` measures it), applies the sum and, after
``compute_ms`` of virtual time (plus a seeded jitter), starts the next round.  The PS sends
each RESULT once toward worker 0, and the switches multicast it (``results_to="network"``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from controller.experiment.runner import Launch, Launched
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import (
    SimNetwork,
    active_graph,
    impairment,
    load_switch,
    program,
    rule_value,
)
from controller.experiment.simulate.probe import WorkerProbe, transport_summary
from workers.ina.constants import INA_REPLY_PORT
from workers.ina.driver import PsDriver, WorkerApp, WorkerDriver
from workers.ina.job import JobConfig
from workers.ina.wire import FrameTemplate, InaPacket, decode_frame

__all__ = ["SimJob", "SimHostIO", "SimDeployed", "SimLaunched", "launch_jobs", "deploy_simulated"]


@dataclass
class SimJob:
    """One job of a simulated launch: its file (mode, schedules, window, timeouts), hosts and
    each worker's :class:`workers.ina.driver.WorkerApp` (``app(i)``: the worker process's own,
    :class:`workers.ina.worker_node.NodeApp`, writing its files)."""

    cfg: JobConfig
    workers: list[str]  # worker i's host
    ps: str
    app: Callable[[int], WorkerApp] | None = None


def launch_jobs(loop: EventLoop, net: SimNetwork, jobs: list[SimJob],
                hosts: dict[str, tuple[str, str]], compute_s: float = 0.0,
                jitter_s: float = 0.0, max_time: float | None = None,
                ready: Callable[[list[_SimJob]], None] | None = None) -> list[_SimJob]:
    """Run every job at once on ``net`` (they share its links and switches, as ``run
    --jobs`` launches them behind one start barrier) until every worker of every job
    finished every round (or ``max_time``, default the longest ``round_timeout_s x
    rounds``, of virtual time).  A worker starts round 0 after a seeded uniform
    ``[0, jitter_s)`` (``worker_node`` polls the start file every 10 ms) and each later
    round ``compute_s`` plus such a draw after it finished the previous one.  ``ready``
    sees the jobs' hosts before the first event."""
    left = [len(jobs)]

    def one_done() -> None:
        left[0] -= 1
        if not left[0]:
            loop.stop()

    sims = [_SimJob(loop, net, j, hosts, compute_s, jitter_s, one_done) for j in jobs]
    owner = {h: sim for sim, j in zip(sims, jobs, strict=True) for h in (j.ps, *j.workers)}

    def on_host(host: str, frame: bytes) -> None:
        sim = owner.get(host)
        if sim is not None:
            sim.on_host(host, frame)

    net.on_host = on_host
    if ready is not None:
        ready(sims)
    t0 = loop.now
    for sim in sims:
        sim.start()
    loop.run(until=t0 + (max_time if max_time is not None
                         else max(j.cfg.round_timeout_s * j.cfg.rounds for j in jobs)))
    return sims


def _call(fn: Callable[[], None]) -> None:
    fn()


class SimHostIO:
    """A host's :class:`workers.ina.driver.HostIO` in virtual time: its clock is the loop's,
    what it sends leaves on its one port as frames (addressed by IPv4, as the kernel would),
    its timer and deferred calls are the loop's events."""

    def __init__(self, loop: EventLoop, net: SimNetwork, host: str,
                 hosts: dict[str, tuple[str, str]]) -> None:
        self.loop, self.net, self.host = loop, net, host
        self.ip, self.mac = hosts[host]
        self.mac_of = {ip: mac for ip, mac in hosts.values()}
        self._tmpl: dict[str, FrameTemplate] = {}
        self._wake: float | None = None
        self.driven: Any = None  # the driver whose on_timer the timer calls
        self.probe: WorkerProbe | None = None  # a worker's (simulate/probe.py)
        self.dead = False  # the host's "process" ended: nothing in or out any more

    def now(self) -> float:
        return self.loop.now

    def send(self, pkts: Sequence[InaPacket], dest: tuple[str, int]) -> None:
        tmpl = self._tmpl.get(dest)
        if tmpl is None:  # to the destination's port: INA's, or a worker's reply port
            tmpl = self._tmpl[dest] = FrameTemplate(self.mac, self.mac_of[dest[0]],
                                                    self.ip, dest[0], dport=dest[1])
        if self.dead:
            return
        for p in pkts:
            self.net.send(self.host, 0, tmpl.encode(p))  # a host has one port
        if self.probe is not None:
            self.probe.grads(self.loop.now, pkts)
            self.probe.sample(self.loop.now, self.driven)

    def wake_at(self, t: float | None) -> None:
        if t is None:
            self._wake = None
        elif t != self._wake:  # one event per new deadline; an outdated one does nothing
            self._wake = t
            self.loop.at(t, self._fire)

    def _fire(self, _: Any) -> None:
        if self._wake != self.loop.now or self.dead:
            return
        self._wake = None
        self.driven.on_timer()
        if self.probe is not None:
            self.probe.sample(self.loop.now, self.driven)

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self.loop.at(self.loop.now + delay, _call, lambda: None if self.dead else fn())


class _SimJob:
    """One job in virtual time: its PS and worker drivers on their hosts' I/O."""

    def __init__(self, loop: EventLoop, net: SimNetwork, job: SimJob,
                 hosts: dict[str, tuple[str, str]], compute_s: float, jitter_s: float,
                 all_done: Callable[[], None]) -> None:
        cfg, n = job.cfg, len(job.workers)
        assert job.app is not None
        jitter = random.Random(cfg.train.seed)

        def jit() -> float:
            return jitter.uniform(0.0, jitter_s) if jitter_s else 0.0
        self.jit = jit
        left = [n]

        def one_finished() -> None:
            left[0] -= 1
            if not left[0]:
                all_done()
        ps_io = SimHostIO(loop, net, job.ps, hosts)
        self.ps = ps_io.driven = PsDriver(ps_io, cfg)
        self.ios = {job.ps: ps_io}
        self.drivers: list[WorkerDriver] = []
        for w in range(n):
            io = self.ios[job.workers[w]] = SimHostIO(loop, net, job.workers[w], hosts)
            d = WorkerDriver(io, cfg, w, job.app(w),
                             pause=lambda: compute_s + jit(), on_finished=one_finished)
            io.driven, io.probe = d, WorkerProbe()
            self.drivers.append(d)
        self.by_host: dict[str, Any] = {job.ps: self.ps}
        self.by_host.update(zip(job.workers, self.drivers, strict=True))

    def start(self) -> None:
        for d in self.drivers:
            d.start(self.jit())

    def on_host(self, host: str, frame: bytes) -> None:
        pkt = decode_frame(frame, INA_REPLY_PORT)  # the PS's answers to one worker too
        io = self.ios[host]
        if pkt is not None and not io.dead:
            if io.probe is not None:
                io.probe.result(io.loop.now, pkt)
            self.by_host[host].on_packets((pkt,))
            if io.probe is not None:
                io.probe.sample(io.loop.now, io.driven)

    def transport(self) -> dict[str, Any]:
        """The workers' window and round trips (simulate/probe.py)."""
        return transport_summary([io.probe for io in self.ios.values()
                                  if io.probe is not None])


# ------------------------------------------------------------------ run --network simulated


class _SwitchProc:
    """A simulated switch as the switch monitor sees its process: :meth:`kill` takes it out
    of the network (the frames it holds or is sent are lost), :meth:`poll` tells."""

    def __init__(self, deployed: SimDeployed, name: str) -> None:
        self.deployed, self.name = deployed, name

    def kill(self) -> None:
        self.deployed.kill_switch(self.name)

    def poll(self) -> int | None:
        return -9 if self.name in self.deployed.dead else None

    def wait(self) -> int | None:
        return self.poll()


class _Fabric:
    """What the engine's monitors (:mod:`controller.experiment.failover`) act on, for the
    simulated network: ``plan`` (ports and addresses), each switch's process
    (``net.get(name).proc``), ``update_rules`` (the rule differences, written into the
    in-process switches) and ``ask_ps`` (a control request to a job's PS host)."""

    def __init__(self, deployed: SimDeployed) -> None:
        self.plan = deployed.netplan
        self.update_rules, self.ask_ps = deployed.update_rules, deployed.ask_ps
        self.net = SimpleNamespace(
            get=lambda name: SimpleNamespace(proc=_SwitchProc(deployed, name)))


class _HostProc:
    """A host's "process" as the runner and the worker monitor see one: ``kill`` (a worker
    that dies: nothing more in or out, no report written; the runner notices its exit a
    poll later), ``terminate`` (the controller stops the job: the host writes what it
    finished), ``poll``."""

    def __init__(self, live: _Live, host: str) -> None:
        self.live, self.host = live, host
        self.code: int | None = None

    def kill(self) -> None:
        if self.code is None:
            self.code = -9
            self.live.end(self.host, killed=True)

    def terminate(self) -> None:
        if self.code is None:
            self.code = 0
            self.live.end(self.host, killed=False)

    def poll(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int | None:
        return self.code


@dataclass
class _Live:
    """The launch in progress: its network, switches and each job's PS control shell."""

    loop: EventLoop
    net: SimNetwork
    switches: dict[str, Any]
    controls: dict[str, tuple[Any, PsDriver]] = field(default_factory=dict)
    sims: list[Any] = field(default_factory=list)  # each job's hosts, once built
    procs: dict[str, _HostProc] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)
    on_failure: Callable[[str, int], bool] | None = None
    label: str = ""
    notice_s: float = 0.05  # the runner polls its processes every 50 ms

    def end(self, host: str, killed: bool) -> None:
        """``host``'s process ends (:class:`_HostProc`)."""
        for sim in self.sims:
            io = sim.ios.get(host)
            if io is not None:
                io.dead = True
                if isinstance(io.driven, WorkerDriver):
                    io.driven.active = None
        if killed:
            self.killed.add(host)
            self.loop.at(self.loop.now + self.notice_s, self._noticed, host)

    def _noticed(self, host: str) -> None:
        """The runner sees the exit: the monitor takes the worker out (True) or the run
        ends, as ``HostProcesses.check`` ends it."""
        from controller.errors import ExperimentError

        if self.on_failure is None or not self.on_failure(host, -9):
            raise ExperimentError(f"{self.label}: the workers on {host} failed (killed by "
                                  "signal 9)")

    def members_changed(self, job_ps: str) -> None:
        """A member change in the job of ``job_ps``: each worker looks at its record
        (``worker_node`` does every 50 ms) and starts its round again if it changed."""
        def look() -> None:
            for sim in self.sims:
                if sim.ps.io.host != job_ps:
                    continue
                for d in sim.drivers:
                    wr, plan = d.active, d.plan
                    if (wr is not None and plan is not None
                            and d.app.members_changed(wr.round, plan.members, self.loop.now)):
                        d.restart()
        self.loop.at(self.loop.now + self.notice_s, _call, look)


@dataclass
class SimLaunched(Launched):
    """:class:`controller.experiment.runner.Launched` of a launch in virtual time, plus
    what its records add (``simulated``, ``sim``: events, virtual seconds, frames through
    the switches, drops)."""

    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class SimDeployed:
    """A plan installed in a simulated network (``run --network simulated``): what the
    engine reads of a deployed network (:class:`~controller.experiment.methods.ina.core.
    Deployed`'s fields) and :meth:`launch`."""

    graph: Any
    netplan: Any
    hosts: dict[str, tuple[str, str]]
    rules: dict[str, Any]
    opt: Any  # controller.experiment.simulate.run.SimOptions
    impair: Any  # pyswitch.impairment.ImpairmentSpec | None
    program: Any
    p4info: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    mininet: Any = None  # the monitors' view (_Fabric)
    gradient_of: Callable[[int, int], np.ndarray] | None = None  # (worker, round): tests'
    totals: dict[str, Any] = field(default_factory=dict)  # over every launch
    built_at: float = 0.0  # time.perf_counter() when deployed
    dead: set[str] = field(default_factory=set)  # switches killed (they stay dead)
    live: _Live | None = None
    # --cross-traffic: the TcpPairs per launch label that runs them (the INA engine sets it;
    # a job's alone run has none: it is the fairness's reference)
    cross: dict[str, list[Any]] = field(default_factory=dict)

    def _wrap(self, sw: Any, rules: Any) -> Any:
        from controller.experiment.simulate.fastpath import forwarder

        return sw if self.opt.full_p4 else forwarder(sw, rules)

    def switches(self) -> dict[str, Any]:
        """Fresh switches with the rules loaded (empty slots, as after the previous mode's
        RESULTs released them on a live network)."""
        return {sw: self._wrap(load_switch(self.program, r), r)
                for sw, r in self.rules.items() if sw not in self.dead}

    def kill_switch(self, name: str) -> None:
        """``--fail-switch``: ``name`` leaves the network now (and for the later modes)."""
        self.dead.add(name)
        if self.live is not None:
            self.live.switches.pop(name, None)

    def update_rules(self, old: dict[str, Any], new: dict[str, Any]) -> dict[str, int]:
        """Write the differences from ``old`` to ``new`` into the running switches
        (:func:`controller.dataplane.deploy.rule_changes`, as ``update`` writes them over
        P4Runtime: no pipeline push, the slots of chunks in flight stay); the later modes'
        switches are loaded with ``new``.  Returns writes per switch."""
        from controller.dataplane.deploy import rule_changes

        writes = {}
        for name, rules in new.items():
            ch = rule_changes(old[name], rules)
            writes[name] = ch.writes
            live = self.live.switches if self.live is not None else {}
            if ch.writes and name in live:
                sw = getattr(live[name], "switch", live[name])  # under a forwarding shortcut
                _apply_changes(sw, ch)
                live[name] = self._wrap(sw, rules)
        self.rules = dict(new)
        return writes

    def ask_ps(self, control_file: Path, request: dict[str, Any]) -> bool:
        """A control request to the PS of the job whose record is ``control_file`` (what
        the FIFO beside it carries to a PS process); False when none runs."""
        got = self.live.controls.get(str(control_file)) if self.live is not None else None
        if got is None:
            return False
        control, ps = got
        control.apply([json.dumps(request)], ps, self.live.loop.now - ps.started)
        return True

    def launch(self, run: Any, spec: Launch) -> SimLaunched:
        """One mode's hosts (``spec``: the PS and worker nodes the engine would start as
        processes) run in virtual time with their drivers, writing the files the processes
        write; the network and its counters are fresh."""
        import time as _time

        from controller.errors import ExperimentError
        from workers.ina.control_io import PsControl
        from workers.ina.events import to_line
        from workers.ina.worker_node import NodeApp

        files: dict[str, SimJob] = {}
        for n in spec.servers:
            if n.module != "workers.ina.ps_node":
                raise ExperimentError(f"--network simulated: {n.module} is not driven through "
                                      "workers/ina/driver.py")
            cfg = JobConfig.load(Path(n.args[0]))
            files[n.args[0]] = SimJob(cfg, [""] * len(cfg.worker_ids), n.host)
        for n in spec.nodes:
            if n.module != "workers.ina.worker_node" or n.args[0] not in files:
                raise ExperimentError(f"--network simulated: {n.module} is not driven through "
                                      "workers/ina/driver.py")
            files[n.args[0]].workers[int(n.args[2])] = n.host
        jobs = list(files.values())
        apps: dict[tuple[int, int], Any] = {}

        def app_of(job: SimJob) -> Callable[[int], WorkerApp]:
            def on_event(event: Any, host_of: Callable[[], str]) -> None:
                if spec.on_line is not None:
                    spec.on_line(host_of(), to_line(event))
                if spec.watch is not None:
                    spec.watch()

            cfg, opt = job.cfg, self.opt
            rng = np.random.default_rng(cfg.train.seed)  # one per job, drawn in turn

            def seeded(r: int) -> np.ndarray:
                bound = 2**31 // len(cfg.worker_ids)
                return rng.integers(-bound, bound, cfg.n_values,
                                    dtype=np.int64).astype(np.int32)

            def make(w: int) -> WorkerApp:
                host = job.workers[w]
                given = self.gradient_of
                vectors = ((lambda r: given(w, r)) if given is not None
                           else None if opt.train else seeded)
                app = NodeApp(cfg, w, Path(cfg.out_dir),
                              events=lambda e: on_event(e, lambda: host), train=opt.train,
                              accuracy=w == 0, vectors=vectors)
                apps[(id(job), w)] = app
                return app
            return make

        def ps_events(job: SimJob) -> Callable[[Any], None]:
            def on_event(event: Any) -> None:
                if spec.on_line is not None:
                    spec.on_line(job.ps, to_line(event))
                if getattr(event, "kind", None) == "members" and self.live is not None:
                    self.live.members_changed(job.ps)
            return on_event

        controls: dict[str, Any] = {}
        for job in jobs:
            job.app = app_of(job)
            Path(job.cfg.out_dir).mkdir(parents=True, exist_ok=True)
            if job.cfg.control_file:  # the PS's control shell: version 0 first
                controls[job.cfg.control_file] = PsControl(
                    job.cfg, Path(job.cfg.control_file), channel=False,
                    events=ps_events(job))
        opt = self.opt
        loop = EventLoop()
        switches = self.switches()
        net = self._network(loop, switches)
        net.mark_above(opt.ecn_packets)
        live = self.live = _Live(loop, net, switches, on_failure=spec.on_failure,
                                 label=spec.label)
        cross = self._cross_traffic(loop, net, spec.label)

        def ready(sims: list[Any]) -> None:
            if cross is not None:  # the flows start with the jobs' hosts
                cross.hook()
                cross.start()
            live.sims = sims
            for job, sim in zip(jobs, sims, strict=True):
                if job.cfg.control_file:
                    live.controls[job.cfg.control_file] = (controls[job.cfg.control_file],
                                                           sim.ps)
                for h in (job.ps, *job.workers):
                    live.procs[h] = _HostProc(live, h)
            if spec.on_procs is not None:
                spec.on_procs(SimpleNamespace(procs=live.procs))
        t_start, t0, c0 = _time.time(), _time.perf_counter(), _time.process_time()
        sims: list[Any] = []
        done_s = 0.0
        flows = None
        try:
            sims = launch_jobs(loop, net, jobs, self.hosts,
                               compute_s=opt.compute_ms / 1000.0,
                               jitter_s=opt.jitter_ms / 1000.0, ready=ready)
            done_s = loop.now  # every worker finished (or the launch timed out)
            flows = cross.stop() if cross is not None else None  # over the jobs' rounds
            # frames still in flight, as the PS serves on until run stops it
            loop.run(until=loop.now + 5 * max(j.cfg.max_timeout for j in jobs))
        finally:  # also when a monitor ends the run: the hosts write what they finished
            self.live = None
            codes, late = _close(jobs, sims or live.sims, apps, live.killed,
                                 {h for h, p in live.procs.items() if p.code is not None})
        wall, cpu = _time.perf_counter() - t0, _time.process_time() - c0
        if late:
            raise ExperimentError(f"{spec.label}: worker(s) {', '.join(late)} did not finish "
                                  f"in {loop.now:.1f} s of virtual time (see {spec.out_dir})")
        fast = sum(getattr(sw, "fast", 0) for sw in switches.values())
        sim_info = {"events": loop.events, "wall_s": wall, "cpu_s": cpu, "virtual_s": loop.now,
                    # when the last worker finished: the launch's span without the tail in
                    # which the PS serves what is still in flight (prediction.jobs_analysis)
                    "done_s": done_s,
                    # the links' token bucket, for the round's prediction (prediction.py)
                    "burst_bytes": opt.burst_bytes,
                    "switch_frames": net.switch_frames, "fast_frames": fast,
                    "queue_drops": net.queue_drops(),
                    "queue_depth": net.queue_depths().record(),
                    # RESULTs with a congestion mark the launch's workers received (FLAG_ECN)
                    "marks": sum(r.get("marks", 0) for sim in (sims or live.sims)
                                 for d in sim.drivers for r in d.rounds),
                    "impairment": net.impairment_counters()}
        if len(sims) == 1:  # one job's transport; several jobs: per job, not yet
            sim_info["transport"] = sims[0].transport()
        extra: dict[str, Any] = {"simulated": True, "sim": sim_info}
        if flows is not None:
            extra.update(self._cross_alone(flows, spec.label))
        for k in ("events", "wall_s", "switch_frames", "fast_frames"):
            self.totals[k] = self.totals.get(k, 0) + sim_info[k]
        return SimLaunched(t_start=t_start, wall_s=loop.now, moved=net.moved(),
                           server_codes=codes, procs=None, cpu=None, extra=extra)

    def _network(self, loop: EventLoop, switches: dict[str, Any]) -> SimNetwork:
        """A fresh network of ``switches`` in ``loop`` with the options' links."""
        opt = self.opt
        return SimNetwork(loop, self.graph, self.netplan.ports, switches, 1.0,
                          opt.delay_ms / 1000.0, opt.queue, self.impair,
                          on_host=lambda h, f: None, proc_s=opt.switch_proc_ms / 1000.0,
                          burst=opt.burst_bytes, wake_s=opt.wake_ms / 1000.0)

    def _cross_traffic(self, loop: EventLoop, net: SimNetwork, label: str) -> Any:
        """The TCP flows of ``--cross-traffic`` for the launch ``label`` (None: none)."""
        from controller.experiment.simulate.cross import SimCrossTraffic

        pairs = self.cross.get(label)
        return SimCrossTraffic(loop, net, pairs, self.hosts) if pairs else None

    def _cross_alone(self, flows: list[Any], label: str) -> dict[str, Any]:
        """``cross_traffic`` of the launch's records: each flow's figures, with what it got
        alone on a fresh network of the same switches and rules for as long."""
        from controller.experiment.cross_traffic import CROSS_KEY
        from controller.experiment.simulate.cross import alone

        window = max((f.window_s for f in flows), default=0.0)
        by_itself = alone(lambda loop: self._network(loop, self.switches()),
                          self.cross[label], self.hosts, window)
        for f, a in zip(flows, by_itself, strict=True):
            f.alone_bytes, f.alone_window_s = a.bytes, a.window_s
        return {CROSS_KEY: [{**asdict(f), "Mbps": f.Mbps, "alone_Mbps": f.alone_Mbps}
                            for f in flows]}


def deploy_simulated(run: Any, s: Any, graph: Any, plan: Any, jobs: list[Any],
                     opt: Any, gradient_of: Callable[[int, int], np.ndarray] | None = None,
                     ) -> SimDeployed:
    """The simulated network of ``graph`` with ``plan`` installed for ``jobs`` (the
    :class:`controller.dataplane.deploy.SwitchJob` s the engine deploys): the addresses and
    ports Mininet would give (:func:`topo.mininet_net.plan_network`), the rules ``deploy``
    would write (:func:`controller.dataplane.deploy.switch_rules`, on the graph without the
    idle hosts), ``ina.p4`` compiled by pyswitch."""
    import time as _time

    from controller.dataplane.deploy import switch_rules
    from controller.experiment.cross_traffic import pairs_of
    from topo.mininet_net import plan_network
    from workers.ina.constants import num_slots

    t0 = _time.perf_counter()
    netplan = plan_network(graph, 1.0)
    hosts = {h: (info.ips[0], info.macs[0]) for h, info in netplan.hosts.items()}
    used = {h for j in jobs for h in ((j.plan or plan).job.ps, *j.workers)}
    # --cross-traffic: the flows' hosts need their routes too
    used |= {h for p in pairs_of(s.extra) for h in (p.src, p.dst)}
    rules = switch_rules(active_graph(graph, used), plan, netplan.ports, hosts, jobs,
                         getattr(s, "slot_policy", "shared"))
    run.console.print(f"[bold]simulated network[/]: {graph.number_of_nodes()} nodes, "
                      f"{len(rules)} switches running ina.p4 in virtual time, "
                      f"{s.bw:g} Mbit/s links")
    prog = program(num_slots())
    deployed = SimDeployed(graph, netplan, hosts, rules, opt, impairment(s), prog,
                           info={"simulated": True, "deploy_s": _time.perf_counter() - t0},
                           gradient_of=gradient_of, built_at=_time.perf_counter())
    deployed.mininet = _Fabric(deployed)
    return deployed


def _close(jobs: list[SimJob], sims: list[Any], apps: dict, killed: set[str],
           ended: set[str]) -> tuple[dict[str, int], list[str]]:
    """Each host writes what a process writes when it ends (``ps.json``, each worker's
    report and vectors; a killed worker nothing, as SIGKILL leaves only its ``.q``); returns
    the PSs' exit codes and the workers that did not finish and were not ended."""
    codes, late = {}, []
    for job, sim in zip(jobs, sims, strict=False):
        report = sim.ps.report()
        if job.ps in killed:  # --kill-ps: SIGKILL writes no report
            codes[job.ps] = -9
        else:
            Path(job.cfg.out_dir, "ps.json").write_text(json.dumps(report, indent=1) + "\n")
            codes[job.ps] = 0 if report["rounds_completed"] == job.cfg.rounds else 1
        for w, d in enumerate(sim.drivers):
            host = job.workers[w]
            if host in killed:
                continue
            apps[(id(job), w)].close(d.rounds)
            if not d.finished and host not in ended:
                late.append(f"{host} (round {d.next_round})")
    return codes, late


def _apply_changes(sw: Any, ch: Any) -> None:
    """Write :class:`controller.dataplane.deploy.RuleChanges` into an in-process pyswitch
    (what ``apply_changes`` writes over P4Runtime): new and modified entries first,
    deletions last."""
    def v(d: dict) -> dict:
        return {k: rule_value(x) for k, x in d.items()}
    if ch.default is not None:
        sw.set_default_action(ch.default.table, ch.default.action, v(ch.default.params))
    for e in ch.insert:
        sw.insert_entry(e.table, v(e.match), e.action, v(e.params))
    for e in ch.modify:
        sw.modify_entry(e.table, v(e.match), e.action, v(e.params))
    for e in ch.delete:
        sw.delete_entry(e.table, v(e.match), e.priority)
    for kind in ("insert", "modify"):
        for gid, ports in ch.groups[kind].items():
            sw.set_multicast_group(gid, [(p, 0) for p in ports])
    for gid in ch.groups["delete"]:
        sw.delete_multicast_group(gid)
